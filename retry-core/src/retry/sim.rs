//! A scripted simulator: drives a [`RetryMachine`] against a list of outcomes in
//! virtual time and yields every step. Snapshot tests, property tests, the fuzz
//! targets and the command line's dry run all use it.

use core::fmt;
use core::time::Duration;

use super::deadline::attempt_timed_out;
use super::machine::{Action, Event, RetryMachine};
use super::policy::RetryPolicy;
use crate::classify::Failure;
use crate::time::{Instant, StackText};

/// How one scripted attempt ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Outcome {
    /// The attempt succeeds.
    Succeed,
    /// The attempt fails as described.
    Fail(Failure),
    /// The attempt hangs until its deadline (or, with no deadline, times out
    /// after the scripted duration).
    TimeOut,
    /// The caller cancels while the attempt runs.
    Cancel,
    /// A circuit breaker rejects the attempt before it runs; it admits again after
    /// `wait`. The attempt does not count, and the next one takes the next entry.
    Rejected {
        /// How long until the breaker admits again.
        wait: Duration,
    },
}

/// One scripted attempt: how it ends and how long it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Scripted {
    /// How the attempt ends.
    pub outcome: Outcome,
    /// How long the attempt runs (virtual time).
    pub took: Duration,
}

impl Scripted {
    /// An instant success.
    #[must_use]
    pub const fn succeed() -> Scripted {
        Scripted::new(Outcome::Succeed)
    }
    /// An instant failure.
    #[must_use]
    pub const fn fail(failure: Failure) -> Scripted {
        Scripted::new(Outcome::Fail(failure))
    }
    /// An attempt that runs into its deadline.
    #[must_use]
    pub const fn time_out() -> Scripted {
        Scripted::new(Outcome::TimeOut)
    }
    /// A breaker rejection of the attempt, admitting again after `wait`.
    #[must_use]
    pub const fn rejected(wait: Duration) -> Scripted {
        Scripted::new(Outcome::Rejected { wait })
    }
    /// A cancellation during the attempt.
    #[must_use]
    pub const fn cancel() -> Scripted {
        Scripted::new(Outcome::Cancel)
    }
    const fn new(outcome: Outcome) -> Scripted {
        Scripted {
            outcome,
            took: Duration::ZERO,
        }
    }
    /// The same outcome, arriving after `took`.
    #[must_use]
    pub const fn after(mut self, took: Duration) -> Scripted {
        self.took = took;
        self
    }
}

/// One step of a simulation: at `at` (virtual time since the start) the driver
/// sent `event` and the machine answered `action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Step {
    /// When the event was sent.
    pub at: Instant,
    /// What the driver told the machine.
    pub event: Event,
    /// What the machine answered.
    pub action: Action,
}

/// Drives a [`RetryMachine`] through a script in virtual time; an iterator of
/// [`Step`]s that ends after the terminal action.
///
/// Attempt `n` takes the script's `n`-th entry; past the end, the last entry
/// repeats, and an empty script fails every attempt retryably. An attempt whose
/// scripted duration reaches its deadline times out at the deadline (the rule
/// of [`attempt_timed_out`](crate::attempt_timed_out)). A
/// cancellation time, if set, wins over anything that would happen at or after it.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Failure, Jitter, RetryPolicy, Scripted, Simulation};
///
/// let policy = RetryPolicy::builder().max_attempts(3).jitter(Jitter::None).build()?;
/// let script = [Scripted::fail(Failure::retryable()), Scripted::succeed()];
/// let steps: Vec<_> = Simulation::new(&policy, 1, &script).collect();
/// assert_eq!(steps.len(), 4); // start, failed, woke, succeeded
/// assert!(steps[3].action.is_terminal());
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Simulation<'s> {
    machine: RetryMachine,
    script: &'s [Scripted],
    cancel_at: Option<Instant>,
    next: Option<(Instant, Event)>,
    attempts_run: usize,
    grants_left: u32,
}

impl<'s> Simulation<'s> {
    /// A simulation of `policy` under `seed` against `script`, starting at the
    /// origin.
    #[must_use]
    pub fn new(policy: &RetryPolicy, seed: u64, script: &'s [Scripted]) -> Simulation<'s> {
        Simulation {
            machine: RetryMachine::new(policy, seed),
            script,
            cancel_at: None,
            next: Some((Instant::ORIGIN, Event::Start)),
            attempts_run: 0,
            grants_left: u32::MAX,
        }
    }

    /// Cancels the call at `at` (virtual time since the start). Cancelling at the
    /// moment a sleep ends cancels before the next attempt; at zero, before the
    /// first.
    #[must_use]
    pub fn cancel_at(mut self, at: Duration) -> Simulation<'s> {
        let at = Instant::from_duration(at);
        self.cancel_at = Some(at);
        if at == Instant::ORIGIN {
            self.next = Some((Instant::ORIGIN, Event::Cancelled));
        }
        self
    }

    /// The shared retry budget grants the first `grants` withdrawals and refuses
    /// the rest (by default it grants every one).
    #[must_use]
    pub fn retry_budget(mut self, grants: u32) -> Simulation<'s> {
        self.grants_left = grants;
        self
    }

    /// The machine as it stands.
    #[must_use]
    pub const fn machine(&self) -> &RetryMachine {
        &self.machine
    }

    fn scripted(&self, index: usize) -> Scripted {
        match self.script.get(index).or(self.script.last()) {
            Some(s) => *s,
            None => Scripted::fail(Failure::retryable()),
        }
    }

    /// What the driver does after `action`, answered at `now`.
    fn respond(&mut self, now: Instant, action: Action) -> Option<(Instant, Event)> {
        let (at, event) = match action {
            Action::GiveUp(_) | Action::Done { .. } => return None,
            Action::Attempt { deadline, .. } => {
                let step = self.scripted(self.attempts_run);
                self.attempts_run = self.attempts_run.saturating_add(1);
                let end = now.saturating_add(step.took);
                match (step.outcome, deadline) {
                    (Outcome::Rejected { wait }, _) => (
                        now,
                        Event::Rejected {
                            until: Some(now.saturating_add(wait)),
                        },
                    ),
                    (Outcome::TimeOut, Some(d)) => (d, Event::TimedOut),
                    (Outcome::TimeOut, None) => (end, Event::TimedOut),
                    // The deadline rule: an outcome at the deadline is a timeout.
                    (_, Some(d)) if attempt_timed_out(Some(d), end) => (d, Event::TimedOut),
                    (Outcome::Succeed, _) => (end, Event::Succeeded),
                    (Outcome::Fail(f), _) => (end, Event::Failed(f)),
                    (Outcome::Cancel, _) => (end, Event::Cancelled),
                }
            }
            Action::Sleep { until, .. } => (until, Event::Woke),
            Action::Withdraw { .. } => match self.grants_left.checked_sub(1) {
                Some(left) => {
                    self.grants_left = left;
                    (now, Event::Granted)
                }
                None => (now, Event::Refused),
            },
        };
        match self.cancel_at {
            Some(c) if c <= at => Some((c.max(now), Event::Cancelled)),
            _ => Some((at, event)),
        }
    }
}

impl Iterator for Simulation<'_> {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        let (at, event) = self.next.take()?;
        let action = self.machine.poll(event, at);
        self.next = self.respond(at, action);
        Some(Step { at, event, action })
    }
}

/// A simulation written as a table, one row per step, through `core::fmt` without
/// allocating. At most `max_rows` rows are written (default 1,000); if the
/// simulation goes on past them, a final `…` row marks the cut.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Backoff, Jitter, RetryPolicy, Timeline};
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(3)
///     .backoff(Backoff::exponential(Duration::from_millis(500), 2.0))
///     .max_delay(Duration::from_secs(5))
///     .jitter(Jitter::None)
///     .build()?;
/// let text = Timeline::new(&policy, 0, &[]).to_string();
/// assert!(text.contains("sleep 0.500s until 0.500s (curve)"));
/// assert!(text.contains("give up: exhausted after 3 attempt(s)"));
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Timeline<'a> {
    policy: &'a RetryPolicy,
    seed: u64,
    script: &'a [Scripted],
    cancel_at: Option<Duration>,
    max_rows: usize,
}

impl<'a> Timeline<'a> {
    /// The timeline of `policy` under `seed` against `script`.
    #[must_use]
    pub const fn new(policy: &'a RetryPolicy, seed: u64, script: &'a [Scripted]) -> Timeline<'a> {
        Timeline {
            policy,
            seed,
            script,
            cancel_at: None,
            max_rows: 1000,
        }
    }

    /// Cancels at `at` (see [`Simulation::cancel_at`]).
    #[must_use]
    pub const fn cancel_at(mut self, at: Duration) -> Timeline<'a> {
        self.cancel_at = Some(at);
        self
    }

    /// Writes at most `rows` rows.
    #[must_use]
    pub const fn max_rows(mut self, rows: usize) -> Timeline<'a> {
        self.max_rows = rows;
        self
    }

    /// The steps, as a fresh simulation.
    #[must_use]
    pub fn steps(&self) -> Simulation<'a> {
        let sim = Simulation::new(self.policy, self.seed, self.script);
        match self.cancel_at {
            Some(at) => sim.cancel_at(at),
            None => sim,
        }
    }
}

impl fmt::Display for Timeline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "policy: {}", self.policy)?;
        writeln!(f, "seed: {}", self.seed)?;
        writeln!(f, "{:>10}  {:<36}  action", "at", "event")?;
        let mut steps = self.steps();
        for step in steps.by_ref().take(self.max_rows) {
            // Render the event first so the column can be padded as a whole.
            let mut event = StackText::<96>::new();
            fmt::write(&mut event, format_args!("{}", step.event))?;
            writeln!(
                f,
                "{:>10}  {:<36}  {}",
                step.at,
                event.as_str(),
                step.action
            )?;
        }
        if steps.next().is_some() {
            writeln!(f, "{:>10}  (more steps left out)", "…")?;
        }
        Ok(())
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} -> {}", self.at, self.event, self.action)
    }
}

/// The sum of every sleep in a simulation: handy for plans and tests.
#[must_use]
pub fn total_sleep(steps: impl IntoIterator<Item = Step>) -> Duration {
    steps
        .into_iter()
        .filter_map(|s| match s.action {
            Action::Sleep { delay, .. } => Some(delay),
            _ => None,
        })
        .fold(Duration::ZERO, Duration::saturating_add)
}
