//! What a driver may skip: when the machine needs the call's start time, and a
//! jitter seed drawn only once a delay can be drawn.

use core::borrow::Borrow;

use super::machine::{Action, Event, GiveUp, GiveUpReason, RetryMachine};
use super::policy::RetryPolicy;

impl<P: Borrow<RetryPolicy>> RetryMachine<P> {
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
    pub fn needs_start_time(&self) -> bool {
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

impl RetryMachine {
    /// How a call under `policy` opens, as a machine would play it, without
    /// building one: the answer to [`Event::Start`](crate::Event::Start) (the
    /// first attempt) and the answer to that attempt's success (the call is
    /// done). `None` when the policy [needs the start time](Self::needs_start_time),
    /// so the first attempt's deadline depends on it.
    ///
    /// A driver whose call needs no time can run the first attempt on this
    /// alone; if the attempt ends any other way, it builds the machine, replays
    /// `Start` at [`Instant::ORIGIN`](crate::Instant::ORIGIN) (the answer is the
    /// same first attempt) and tells it what happened.
    ///
    /// ```
    /// use retry_core::{Action, Event, Instant, RetryMachine, RetryPolicy};
    ///
    /// let policy = RetryPolicy::builder().max_attempts(3).build()?;
    /// let (first, on_success) = RetryMachine::opening(&policy).unwrap();
    /// let mut m = RetryMachine::new(&policy, 7);
    /// assert_eq!(m.poll(Event::Start, Instant::ORIGIN), first);
    /// assert_eq!(m.poll(Event::Succeeded, Instant::ORIGIN), on_success);
    /// # Ok::<(), retry_core::PolicyError>(())
    /// ```
    #[must_use]
    pub const fn opening(policy: &RetryPolicy) -> Option<(Action, Action)> {
        if policy.budget().is_some() || policy.attempt_timeout().is_some() {
            return None;
        }
        // Attempt 1 never repeats an operation, and has no deadline without a
        // timeout or a budget to cap it.
        Some((
            Action::Attempt {
                number: 1,
                deadline: None,
                replays_non_idempotent: false,
            },
            Action::Done { attempts: 1 },
        ))
    }

    /// The machine's answer when the first attempt of a call under `policy`
    /// ends with the failure `event`, when that answer is a give-up that the
    /// policy and the event alone decide: whatever the seed, whenever the call
    /// started and however long the attempt ran. A driver that ran the first
    /// attempt without building a machine (see [`opening`](Self::opening)) can
    /// then end the call on this alone.
    ///
    /// - [`Event::Failed`] with a permanent failure: give up as permanent.
    /// - [`Event::Failed`] with a retryable failure under a policy of one
    ///   attempt: give up as exhausted.
    ///
    /// Either give-up counts one attempt and the failure's kind. `None` for
    /// anything else: a retryable failure the policy may retry (what follows
    /// depends on the seed, the time and any budget), a timeout (the give-up
    /// names the attempt's timeout, which may depend on when the call started),
    /// and any event that is not a failure.
    ///
    /// ```
    /// use retry_core::{Action, Event, Failure, GiveUpReason, Instant, RetryMachine, RetryPolicy};
    ///
    /// let once = RetryPolicy::builder().max_attempts(1).build()?;
    /// let failed = Event::Failed(Failure::retryable());
    /// let give_up = RetryMachine::opening_failure(&once, failed).unwrap();
    /// assert_eq!((give_up.reason, give_up.attempts), (GiveUpReason::Exhausted, 1));
    ///
    /// // What a machine answers, at any time.
    /// let mut m = RetryMachine::new(&once, 7);
    /// let _ = m.poll(Event::Start, Instant::ORIGIN);
    /// assert_eq!(m.poll(failed, Instant::from_millis(40)), Action::GiveUp(give_up));
    ///
    /// // A policy with retries left decides a retryable failure itself;
    /// // a permanent one ends the call whatever the policy.
    /// let thrice = RetryPolicy::builder().max_attempts(3).build()?;
    /// assert_eq!(RetryMachine::opening_failure(&thrice, failed), None);
    /// let permanent = Event::Failed(Failure::permanent());
    /// let give_up = RetryMachine::opening_failure(&thrice, permanent).unwrap();
    /// assert_eq!(give_up.reason, GiveUpReason::Permanent);
    /// # Ok::<(), retry_core::PolicyError>(())
    /// ```
    #[inline]
    #[must_use]
    pub const fn opening_failure(policy: &RetryPolicy, event: Event) -> Option<GiveUp> {
        let Event::Failed(failure) = event else {
            return None;
        };
        // As the machine decides after a failure: a permanent failure first,
        // then the last attempt; the first attempt is the last of one.
        let reason = if !failure.is_retryable() {
            GiveUpReason::Permanent
        } else if policy.is_last_attempt(1) {
            GiveUpReason::Exhausted
        } else {
            return None;
        };
        Some(GiveUp {
            reason,
            attempts: 1,
            last_failure: Some(failure.kind()),
        })
    }
}
