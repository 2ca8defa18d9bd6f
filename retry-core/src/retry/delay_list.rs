//! An explicit list of delays (`--delays 1s,2s,5s`) instead of a curve.
//!
//! The delay before retry `r` is the list's `r`-th entry; the last entry repeats
//! for every retry after it. The delays are exact: no jitter, no `min_delay` /
//! `max_delay`, no rounding. The time budget, attempt limits and cancellation
//! still apply, because the [`RetryMachine`] still decides everything else.
//!
//! The machine follows the list when it is driven this way: its policy comes
//! from [`DelayList::policy`] (no curve of its own), and every outcome goes
//! through [`DelayList::event`], which hands the machine the list's delay as an
//! exact [`Hint::Pushback`]. A hint the operation gave itself combines with the
//! list as the policy's [`HintMode`] says (at-least: the longer of the two; override:
//! the hint, clamped; ignore: the list).
//!
//! [`RetryMachine`]: crate::RetryMachine

use core::time::Duration;

use super::backoff::Backoff;
use super::jitter::Jitter;
use super::machine::{Event, SleepReason};
use super::policy::{bounded, HintMode, RetryPolicy};
use crate::classify::{Failure, FailureKind};
use crate::hint::Hint;
use crate::PolicyError;

/// A non-empty list of delays, borrowed (the core allocates nothing).
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Action, DelayList, Event, Failure, Instant, RetryMachine, RetryPolicy};
///
/// let delays = [Duration::from_secs(1), Duration::from_secs(5)];
/// let list = DelayList::new(&delays).unwrap();
/// let policy = list.policy(&RetryPolicy::builder().max_attempts(4).build()?)?;
/// let mut machine = RetryMachine::new(&policy, 7);
/// let mut now = Instant::ORIGIN;
/// let mut action = machine.poll(Event::Start, now);
/// let mut sleeps = Vec::new();
/// loop {
///     action = match action {
///         Action::Attempt { number, .. } => {
///             // Every attempt fails; the list decides the sleep.
///             let event = list.event(&policy, number, Event::Failed(Failure::retryable()));
///             machine.poll(event, now)
///         }
///         Action::Sleep { until, delay, .. } => {
///             sleeps.push(delay);
///             now = until;
///             machine.poll(Event::Woke, now)
///         }
///         _ => break,
///     };
/// }
/// assert_eq!(sleeps, [Duration::from_secs(1), Duration::from_secs(5), Duration::from_secs(5)]);
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DelayList<'a> {
    delays: &'a [Duration],
}

impl<'a> DelayList<'a> {
    /// The list, or `None` if it is empty.
    #[must_use]
    pub const fn new(delays: &'a [Duration]) -> Option<DelayList<'a>> {
        if delays.is_empty() {
            None
        } else {
            Some(DelayList { delays })
        }
    }

    /// The delays.
    #[must_use]
    pub const fn delays(&self) -> &'a [Duration] {
        self.delays
    }

    /// The delay before retry `retry` (1-based; retry 0 reads as retry 1): the
    /// `retry`-th entry, or the last one past the end.
    #[must_use]
    pub fn delay(&self, retry: u32) -> Duration {
        let index = usize::try_from(retry.saturating_sub(1)).unwrap_or(usize::MAX);
        self.delays
            .get(index)
            .or(self.delays.last())
            .copied()
            .unwrap_or(Duration::ZERO)
    }

    /// `base` made to follow the list: no curve and no jitter of its own (the list
    /// gives every delay), every other field as in `base`. A base that ignores
    /// hints keeps ignoring the operation's own hints ([`DelayList::event`] drops
    /// them), but the machine must read the list's, so its mode becomes at-least.
    ///
    /// # Errors
    /// Whatever [`RetryPolicy::validate`] finds in the result (nothing, for a valid
    /// base).
    pub fn policy(&self, base: &RetryPolicy) -> Result<RetryPolicy, PolicyError> {
        let mut builder = base
            .to_builder()
            .backoff(Backoff::None)
            .jitter(Jitter::None)
            .min_delay(Duration::ZERO);
        if base.hints() == HintMode::Ignore {
            builder = builder.hints(HintMode::AT_LEAST_DEFAULT);
        }
        builder.build()
    }

    /// The delay after attempt `attempt` fails, given the operation's own hint,
    /// combined as `hints` says, and where it came from.
    #[must_use]
    pub fn delay_after(
        &self,
        hints: HintMode,
        attempt: u32,
        own: Option<Hint>,
    ) -> (Duration, SleepReason) {
        let listed = self.delay(attempt);
        match (hints, own) {
            (_, None) | (HintMode::Ignore, _) => (listed, SleepReason::Curve),
            (_, Some(Hint::Pushback(exact))) => (exact, SleepReason::Hint),
            (HintMode::Override { min, max }, Some(Hint::RetryAfter(d))) => {
                (bounded(d, min, max), SleepReason::Hint)
            }
            (HintMode::AtLeast { cap }, Some(Hint::RetryAfter(d))) => {
                let honoured = d.min(cap);
                if honoured > listed {
                    (honoured, SleepReason::Hint)
                } else {
                    (listed, SleepReason::Curve)
                }
            }
        }
    }

    /// The event to send the machine (built with [`DelayList::policy`]) for
    /// attempt `attempt`, which ended in `event`: a retryable failure carries the
    /// delay from [`DelayList::delay_after`] as an exact pushback; a timed-out
    /// attempt that `policy` retries becomes such a failure of kind
    /// [`FailureKind::Timeout`]. Anything else passes unchanged.
    ///
    /// `policy` is the base policy as the user gave it (its hint mode decides how
    /// the operation's own hints count), or the one from [`DelayList::policy`].
    #[must_use]
    pub fn event(&self, policy: &RetryPolicy, attempt: u32, event: Event) -> Event {
        let failure = match event {
            Event::Failed(f) if f.is_retryable() => f,
            Event::TimedOut if policy.retries_timeouts() => {
                Failure::retryable().with_kind(FailureKind::Timeout)
            }
            other => return other,
        };
        let (delay, _) = self.delay_after(policy.hints(), attempt, failure.hint());
        Event::Failed(
            Failure::retryable()
                .with_kind(failure.kind())
                .with_hint(Hint::Pushback(delay)),
        )
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::retry::machine::{Action, GiveUpReason, RetryMachine};
    use crate::time::Instant;

    const fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn the_last_delay_repeats() {
        let delays = [s(1), s(2), s(5)];
        let list = DelayList::new(&delays).unwrap();
        let got = [0, 1, 2, 3, 4, u32::MAX].map(|r| list.delay(r));
        assert_eq!(got, [s(1), s(1), s(2), s(5), s(5), s(5)]);
        assert_eq!(DelayList::new(&[]), None);
        assert_eq!(list.delays(), &delays);
    }

    #[test]
    fn own_hints_combine_as_the_mode_says() {
        let delays = [s(2)];
        let list = DelayList::new(&delays).unwrap();
        let hint = |d| Some(Hint::RetryAfter(d));
        let at_least = HintMode::AtLeast { cap: s(60) };
        assert_eq!(
            list.delay_after(at_least, 1, hint(s(1))),
            (s(2), SleepReason::Curve)
        );
        assert_eq!(
            list.delay_after(at_least, 1, hint(s(9))),
            (s(9), SleepReason::Hint)
        );
        assert_eq!(
            list.delay_after(at_least, 1, hint(s(99))),
            (s(60), SleepReason::Hint)
        );
        let over = HintMode::Override {
            min: s(1),
            max: s(3),
        };
        assert_eq!(
            list.delay_after(over, 1, hint(Duration::ZERO)),
            (s(1), SleepReason::Hint)
        );
        assert_eq!(
            list.delay_after(HintMode::Ignore, 1, hint(s(9))),
            (s(2), SleepReason::Curve)
        );
        assert_eq!(
            list.delay_after(at_least, 1, Some(Hint::Pushback(s(7)))),
            (s(7), SleepReason::Hint)
        );
    }

    /// Drives a machine through `outcomes` (the last repeating), returning the
    /// sleeps and the final action.
    fn drive(list: DelayList<'_>, base: &RetryPolicy, outcome: Event) -> (Vec<Duration>, Action) {
        let policy = list.policy(base).unwrap();
        let mut m = RetryMachine::new(&policy, 1);
        let mut now = Instant::ORIGIN;
        let mut action = m.poll(Event::Start, now);
        let mut sleeps = Vec::new();
        loop {
            match action {
                Action::Attempt { number, .. } => {
                    now = now.checked_add(Duration::from_millis(10)).unwrap();
                    action = m.poll(list.event(base, number, outcome), now);
                }
                Action::Sleep { until, delay, .. } => {
                    sleeps.push(delay);
                    now = until;
                    action = m.poll(Event::Woke, now);
                }
                other => return (sleeps, other),
            }
        }
    }

    #[test]
    fn a_machine_follows_the_list_exactly() {
        let delays = [Duration::from_millis(1500), s(4)];
        let list = DelayList::new(&delays).unwrap();
        let base = RetryPolicy::builder()
            .max_attempts(5)
            .jitter(Jitter::Full)
            .max_delay(s(1))
            .build()
            .unwrap();
        let fail = Event::Failed(Failure::retryable().with_kind(FailureKind::Exit(1)));
        let (sleeps, end) = drive(list, &base, fail);
        assert_eq!(sleeps, [Duration::from_millis(1500), s(4), s(4), s(4)]);
        let Action::GiveUp(g) = end else {
            panic!("{end:?}")
        };
        assert_eq!((g.reason, g.attempts), (GiveUpReason::Exhausted, 5));
        assert_eq!(g.last_failure, Some(FailureKind::Exit(1)));
        // Timeouts follow the list too.
        let (sleeps, _) = drive(list, &base, Event::TimedOut);
        assert_eq!(sleeps.len(), 4);
        assert_eq!(sleeps[1], s(4));
        // The budget still cuts the schedule.
        let tight = base.to_builder().budget(s(3)).build().unwrap();
        let (sleeps, end) = drive(list, &tight, fail);
        assert_eq!(sleeps, [Duration::from_millis(1500)]);
        assert!(matches!(end, Action::GiveUp(g) if g.reason == GiveUpReason::Budget));
        // A permanent failure and a success pass unchanged.
        let stop = Event::Failed(Failure::permanent());
        assert_eq!(list.event(&base, 1, stop), stop);
        assert_eq!(list.event(&base, 1, Event::Succeeded), Event::Succeeded);
        let no_timeouts = base.to_builder().retry_timeouts(false).build().unwrap();
        assert_eq!(
            list.event(&no_timeouts, 1, Event::TimedOut),
            Event::TimedOut
        );
    }

    #[test]
    fn a_policy_ignoring_hints_still_follows_the_list() {
        let delays = [s(1)];
        let list = DelayList::new(&delays).unwrap();
        let base = RetryPolicy::builder()
            .max_attempts(3)
            .hints(HintMode::Ignore)
            .build()
            .unwrap();
        let own = Event::Failed(Failure::retry_after(s(30)));
        let (sleeps, _) = drive(list, &base, own);
        assert_eq!(sleeps, [s(1), s(1)]);
    }
}
