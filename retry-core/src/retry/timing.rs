//! What a driver may skip: when the machine needs the call's start time, and a
//! jitter seed drawn only once a delay can be drawn.

use super::machine::RetryMachine;

impl RetryMachine {
    /// Whether the machine's answers depend on when the call started: `true`
    /// when the policy has a total time budget or a per-attempt timeout.
    ///
    /// When it is `false` the machine measures only the sleeps it asks for, each
    /// from the instant it asked: every answer is the same (a sleep's `until`
    /// shifted with the `now` that produced it) whatever instants the driver
    /// sends, however long the first attempt ran. A driver may then start the
    /// call without reading a clock (sending [`Event::Start`](crate::Event::Start)
    /// and the first attempt's outcome at [`Instant::ORIGIN`](crate::Instant::ORIGIN))
    /// and read one only when a step needs it, the end of a failed attempt
    /// being the first.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{Action, Event, Failure, Instant, Jitter, RetryMachine, RetryPolicy};
    ///
    /// let policy = RetryPolicy::builder().max_attempts(2).jitter(Jitter::None).build()?;
    /// assert!(!RetryMachine::new(&policy, 7).needs_start_time());
    ///
    /// let timed = RetryPolicy::builder().attempt_timeout(Duration::from_secs(2)).build()?;
    /// assert!(RetryMachine::new(&timed, 7).needs_start_time());
    /// # Ok::<(), retry_core::PolicyError>(())
    /// ```
    #[must_use]
    pub const fn needs_start_time(&self) -> bool {
        self.policy.budget().is_some() || self.policy.attempt_timeout().is_some()
    }

    /// Keys the jitter on `seed` from now on, for a driver that draws its seed
    /// only when a delay may be drawn. No delay is drawn before an attempt has
    /// failed, timed out or been rejected, so a machine given its seed before it
    /// is told any such event decides exactly as one made with that seed.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }
}
