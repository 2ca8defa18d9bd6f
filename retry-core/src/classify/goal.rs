//! What a run of a command is waiting for: a success (the usual), a failure
//! (`--until-fail`: run a flaky test until it breaks), or several successes in a
//! row (`--success-count N`: a service is up once it answered N times running).
//!
//! A [`ProcessGoal`] sits between the classifier and the [`RetryMachine`]: it
//! turns each attempt's event into the event that moves the machine toward the
//! goal. The machine then decides as always (delays, limits, budget); the goal
//! only says whether an outcome ends the run or asks for another attempt.
//!
//! [`RetryMachine`]: crate::RetryMachine

use core::fmt;

use super::{Failure, FailureKind};
use crate::retry::Event;

/// The outcome a run stops at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Goal {
    /// Stop at the first success (failures retry as classified).
    #[default]
    Success,
    /// Stop at the first failure of any kind, timeouts included; every success
    /// asks for another attempt.
    Failure,
    /// Stop once this many attempts in a row have succeeded; a failure (retried
    /// as classified) starts the count again. 0 and 1 mean [`Goal::Success`].
    Successes(u32),
}

impl fmt::Display for Goal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Goal::Success => f.write_str("until success"),
            Goal::Failure => f.write_str("until failure"),
            Goal::Successes(n) => write!(f, "until {n} successes in a row"),
        }
    }
}

/// Tracks a run toward its [`Goal`], one attempt's event at a time.
///
/// Events out: an attempt that reaches the goal becomes [`Event::Succeeded`] (the
/// machine answers `Done`); a success that does not becomes a retryable
/// [`Event::Failed`] of kind [`FailureKind::Exit`]`(0)`, so the machine sleeps its
/// delay and attempts again (or gives up `Exhausted` when attempts run out); a
/// failure under [`Goal::Failure`] becomes [`Event::Succeeded`]. Any other event
/// passes unchanged.
///
/// ```
/// use retry_core::{Event, Failure, Goal, ProcessGoal};
///
/// let mut goal = ProcessGoal::new(Goal::Successes(2));
/// assert!(matches!(goal.judge(Event::Succeeded), Event::Failed(f) if f.is_retryable()));
/// assert!(matches!(goal.judge(Event::Failed(Failure::retryable())), Event::Failed(_)));
/// assert!(matches!(goal.judge(Event::Succeeded), Event::Failed(_)));
/// assert_eq!(goal.judge(Event::Succeeded), Event::Succeeded);
///
/// let mut goal = ProcessGoal::new(Goal::Failure);
/// assert!(matches!(goal.judge(Event::Succeeded), Event::Failed(f) if f.is_retryable()));
/// assert_eq!(goal.judge(Event::TimedOut), Event::Succeeded);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProcessGoal {
    goal: Goal,
    streak: u32,
}

impl ProcessGoal {
    /// A run toward `goal`, with no attempt seen yet.
    #[must_use]
    pub const fn new(goal: Goal) -> ProcessGoal {
        ProcessGoal { goal, streak: 0 }
    }

    /// The goal.
    #[must_use]
    pub const fn goal(&self) -> Goal {
        self.goal
    }

    /// Successes in a row so far (the last attempts that succeeded).
    #[must_use]
    pub const fn streak(&self) -> u32 {
        self.streak
    }

    /// The event to send the machine for an attempt that ended in `event` (as
    /// classified: [`Event::Succeeded`], [`Event::Failed`] or [`Event::TimedOut`]).
    #[must_use]
    pub fn judge(&mut self, event: Event) -> Event {
        let again = Event::Failed(Failure::retryable().with_kind(FailureKind::Exit(0)));
        let failed = matches!(event, Event::Failed(_) | Event::TimedOut);
        match event {
            Event::Succeeded => self.streak = self.streak.saturating_add(1),
            Event::Failed(_) | Event::TimedOut => self.streak = 0,
            _ => return event,
        }
        match self.goal {
            Goal::Success => event,
            Goal::Failure if failed => Event::Succeeded,
            Goal::Failure => again,
            Goal::Successes(_) if failed => event,
            Goal::Successes(n) if self.streak >= n => Event::Succeeded,
            Goal::Successes(_) => again,
        }
    }

    /// Whether reaching the goal ends the run with a success of the command
    /// (false for [`Goal::Failure`], whose goal is a failing attempt).
    #[must_use]
    pub const fn goal_is_success(&self) -> bool {
        !matches!(self.goal, Goal::Failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry_again(e: Event) -> bool {
        matches!(e, Event::Failed(f) if f.is_retryable() && f.kind() == FailureKind::Exit(0))
    }

    #[test]
    fn success_is_the_identity() {
        let mut g = ProcessGoal::new(Goal::Success);
        let fail = Event::Failed(Failure::permanent());
        for e in [Event::Succeeded, fail, Event::TimedOut, Event::Woke] {
            assert_eq!(g.judge(e), e);
        }
        for n in [0, 1] {
            let mut g = ProcessGoal::new(Goal::Successes(n));
            assert_eq!(g.judge(Event::Succeeded), Event::Succeeded);
            assert_eq!(g.judge(fail), fail);
        }
    }

    #[test]
    fn until_failure_repeats_successes_and_stops_at_any_failure() {
        let mut g = ProcessGoal::new(Goal::Failure);
        assert!(retry_again(g.judge(Event::Succeeded)));
        assert!(retry_again(g.judge(Event::Succeeded)));
        assert_eq!(g.streak(), 2);
        assert_eq!(
            g.judge(Event::Failed(Failure::retryable())),
            Event::Succeeded
        );
        assert_eq!(
            g.judge(Event::Failed(Failure::permanent())),
            Event::Succeeded
        );
        assert_eq!(g.judge(Event::TimedOut), Event::Succeeded);
        assert_eq!(g.streak(), 0);
        assert!(!g.goal_is_success());
    }

    #[test]
    fn successes_in_a_row_restart_after_a_failure() {
        let mut g = ProcessGoal::new(Goal::Successes(3));
        let fail = Event::Failed(Failure::retryable().with_kind(FailureKind::Exit(1)));
        assert!(retry_again(g.judge(Event::Succeeded)));
        assert!(retry_again(g.judge(Event::Succeeded)));
        assert_eq!(g.judge(fail), fail);
        assert_eq!(g.streak(), 0);
        assert_eq!(g.judge(Event::TimedOut), Event::TimedOut);
        assert!(retry_again(g.judge(Event::Succeeded)));
        assert!(retry_again(g.judge(Event::Succeeded)));
        assert_eq!(g.judge(Event::Succeeded), Event::Succeeded);
        assert_eq!(g.streak(), 3);
        assert!(g.goal_is_success());
        // Non-outcome events pass through and leave the streak alone.
        assert_eq!(g.judge(Event::Woke), Event::Woke);
        assert_eq!(g.streak(), 3);
    }

    #[test]
    fn the_streak_saturates() {
        let mut g = ProcessGoal {
            goal: Goal::Successes(u32::MAX),
            streak: u32::MAX - 1,
        };
        assert_eq!(g.judge(Event::Succeeded), Event::Succeeded);
        assert_eq!(g.judge(Event::Succeeded), Event::Succeeded);
        assert_eq!(g.streak(), u32::MAX);
    }
}
