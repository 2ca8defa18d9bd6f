//! A scripted simulator for the [`HedgeMachine`]: copies that take given times
//! to answer, in virtual time, every step yielded. Snapshot tests, property
//! tests and the fuzz target's checks use it.

use core::fmt;
use core::time::Duration;

use super::copies::{Copies, MAX_COPIES};
use super::latency::LatencyHistogram;
use super::machine::{HedgeAction, HedgeEvent, HedgeMachine};
use super::policy::HedgePolicy;
use crate::classify::Failure;
use crate::retry::{Outcome, Scripted};
use crate::time::{Instant, StackText};

/// One step of a hedge simulation: at `at` the driver sent `event`, the machine
/// answered `action`, and afterwards `in_flight` were running.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct HedgeStep {
    /// When the event was sent.
    pub at: Instant,
    /// What the driver told the machine.
    pub event: HedgeEvent,
    /// What the machine answered.
    pub action: HedgeAction,
    /// The copies running after the step.
    pub in_flight: Copies,
}

impl fmt::Display for HedgeStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} -> {} (in flight {})",
            self.at, self.event, self.action, self.in_flight
        )
    }
}

/// What a running copy will do, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Running {
    /// When it reports (`None`: it hangs and never does).
    at: Option<Instant>,
    event: HedgeEvent,
}

/// Drives a [`HedgeMachine`] through a script in virtual time; an iterator of
/// [`HedgeStep`]s that ends after the terminal action.
///
/// Copy `n` follows the script's `n`-th entry ([`Scripted`], shared with the
/// retry simulator); past the end the last entry repeats, and an empty script
/// fails every copy retryably. The entry's outcome arrives `took` after the
/// copy was sent:
///
/// - [`Outcome::Succeed`] and [`Outcome::Fail`]: the copy answers so;
/// - [`Outcome::TimeOut`]: the copy hangs and never answers (only the call's
///   timeout, a cancellation or another copy ends the call);
/// - [`Outcome::Cancel`]: the caller cancels the whole call at that moment;
/// - [`Outcome::Rejected`]: a circuit breaker refuses the copy when it is sent.
///
/// When several things happen at the same instant, the caller's cancellation
/// comes first, then the copies' answers (lowest copy first), then the end of a
/// wait. If nothing can ever happen again (every copy in flight hangs, no
/// timeout, no cancellation), the iterator ends without a terminal step.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{HedgeAction, HedgePolicy, HedgeSimulation, Scripted};
///
/// let policy = HedgePolicy::builder().max_attempts(2).fixed_delay(Duration::from_millis(50)).build()?;
/// // Copy 1 takes 300 ms, copy 2 takes 20 ms.
/// let script = [
///     Scripted::succeed().after(Duration::from_millis(300)),
///     Scripted::succeed().after(Duration::from_millis(20)),
/// ];
/// let last = HedgeSimulation::new(&policy, 1, &script).last().unwrap();
/// assert_eq!(last.at.as_duration(), Duration::from_millis(70));
/// assert!(matches!(last.action, HedgeAction::Done { copy: 2, launched: 2, .. }));
/// # Ok::<(), retry_core::HedgePolicyError>(())
/// ```
#[derive(Clone, Debug)]
pub struct HedgeSimulation<'s> {
    machine: HedgeMachine,
    script: &'s [Scripted],
    cancel_at: Option<Instant>,
    grants_left: u32,
    next: Option<(Instant, HedgeEvent)>,
    running: [Option<Running>; MAX_COPIES as usize],
}

impl<'s> HedgeSimulation<'s> {
    /// A simulation of `policy` under `seed` against `script`, starting at the
    /// origin, with an adaptive delay on its fallback.
    #[must_use]
    pub fn new(policy: &HedgePolicy, seed: u64, script: &'s [Scripted]) -> HedgeSimulation<'s> {
        HedgeSimulation::with_machine(HedgeMachine::new(policy, seed), script)
    }

    /// The same, with the adaptive delay read from `latencies`.
    #[must_use]
    pub fn with_latencies(
        policy: &HedgePolicy,
        seed: u64,
        latencies: &LatencyHistogram,
        script: &'s [Scripted],
    ) -> HedgeSimulation<'s> {
        HedgeSimulation::with_machine(
            HedgeMachine::with_latencies(policy, seed, latencies),
            script,
        )
    }

    fn with_machine(machine: HedgeMachine, script: &'s [Scripted]) -> HedgeSimulation<'s> {
        HedgeSimulation {
            machine,
            script,
            cancel_at: None,
            grants_left: u32::MAX,
            next: Some((Instant::ORIGIN, HedgeEvent::Start)),
            running: [None; MAX_COPIES as usize],
        }
    }

    /// Cancels the call at `at` (virtual time since the start); at zero, before
    /// the first copy.
    #[must_use]
    pub fn cancel_at(mut self, at: Duration) -> HedgeSimulation<'s> {
        let at = Instant::from_duration(at);
        self.cancel_at = Some(at);
        if at == Instant::ORIGIN {
            self.next = Some((Instant::ORIGIN, HedgeEvent::Cancelled));
        }
        self
    }

    /// The shared retry budget grants the first `grants` withdrawals and refuses
    /// the rest (by default it grants every one).
    #[must_use]
    pub fn retry_budget(mut self, grants: u32) -> HedgeSimulation<'s> {
        self.grants_left = grants;
        self
    }

    /// The machine as it stands.
    #[must_use]
    pub const fn machine(&self) -> &HedgeMachine {
        &self.machine
    }

    fn scripted(&self, copy: u32) -> Scripted {
        let index = usize::try_from(copy.saturating_sub(1)).unwrap_or(usize::MAX);
        match self.script.get(index).or(self.script.last()) {
            Some(s) => *s,
            None => Scripted::fail(Failure::retryable()),
        }
    }

    fn slot(&mut self, copy: u32) -> Option<&mut Option<Running>> {
        let index = usize::try_from(copy.checked_sub(1)?).ok()?;
        self.running.get_mut(index)
    }

    /// The earliest thing the running copies will report, lowest copy first.
    fn earliest_answer(&self) -> Option<(Instant, HedgeEvent)> {
        let mut best: Option<(Instant, HedgeEvent)> = None;
        for running in self.running.iter().flatten() {
            if let Some(at) = running.at {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, running.event));
                }
            }
        }
        best
    }

    /// What the driver does after `action`, answered at `now`.
    fn respond(&mut self, now: Instant, action: HedgeAction) -> Option<(Instant, HedgeEvent)> {
        let (at, event) = match action {
            HedgeAction::Done { .. } | HedgeAction::GiveUp(_) => return None,
            HedgeAction::Launch { copy, .. } => {
                let step = self.scripted(copy);
                let end = now.saturating_add(step.took);
                let running = match step.outcome {
                    Outcome::Rejected { wait } => {
                        let until = Some(now.saturating_add(wait));
                        return self.unless_cancelled(
                            now,
                            now,
                            HedgeEvent::Rejected { copy, until },
                        );
                    }
                    Outcome::Succeed => Running {
                        at: Some(end),
                        event: HedgeEvent::Succeeded { copy },
                    },
                    Outcome::Fail(failure) => Running {
                        at: Some(end),
                        event: HedgeEvent::Failed { copy, failure },
                    },
                    Outcome::TimeOut => Running {
                        at: None,
                        event: HedgeEvent::Woke,
                    },
                    Outcome::Cancel => Running {
                        at: Some(end),
                        event: HedgeEvent::Cancelled,
                    },
                };
                if let Some(slot) = self.slot(copy) {
                    *slot = Some(running);
                }
                (now, HedgeEvent::Launched { copy })
            }
            HedgeAction::Withdraw { .. } => match self.grants_left.checked_sub(1) {
                Some(left) => {
                    self.grants_left = left;
                    (now, HedgeEvent::Granted)
                }
                None => (now, HedgeEvent::Refused),
            },
            HedgeAction::Cancel { copies } => {
                for copy in copies {
                    if let Some(slot) = self.slot(copy) {
                        *slot = None;
                    }
                }
                (now, HedgeEvent::Stopped)
            }
            HedgeAction::Wait { until, .. } => {
                let answer = self.earliest_answer();
                let wake = until.map(|u| (u, HedgeEvent::Woke));
                let first = match (answer, wake) {
                    (Some(a), Some(w)) => Some(if a.0 <= w.0 { a } else { w }),
                    (a, w) => a.or(w),
                };
                match (first, self.cancel_at) {
                    (Some(f), Some(c)) if c <= f.0 => (c.max(now), HedgeEvent::Cancelled),
                    (Some(f), _) => f,
                    (None, Some(c)) => (c.max(now), HedgeEvent::Cancelled),
                    (None, None) => return None,
                }
            }
        };
        // The copy's slot empties when its answer is sent.
        if let HedgeEvent::Succeeded { copy } | HedgeEvent::Failed { copy, .. } = event {
            if let Some(slot) = self.slot(copy) {
                *slot = None;
            }
        }
        if event == HedgeEvent::Cancelled {
            return Some((at, event));
        }
        self.unless_cancelled(now, at, event)
    }

    /// `event` at `at`, unless the caller's cancellation comes first (or then).
    fn unless_cancelled(
        &self,
        now: Instant,
        at: Instant,
        event: HedgeEvent,
    ) -> Option<(Instant, HedgeEvent)> {
        // Launch, withdraw and cancel are answered at once; a cancellation due
        // by then still wins.
        match self.cancel_at {
            Some(c) if c <= at && event != HedgeEvent::Stopped => {
                Some((c.max(now), HedgeEvent::Cancelled))
            }
            _ => Some((at, event)),
        }
    }
}

impl Iterator for HedgeSimulation<'_> {
    type Item = HedgeStep;

    fn next(&mut self) -> Option<HedgeStep> {
        let (at, event) = self.next.take()?;
        let action = self.machine.poll(event, at);
        self.next = self.respond(at, action);
        Some(HedgeStep {
            at,
            event,
            action,
            in_flight: self.machine.in_flight(),
        })
    }
}

/// A hedge simulation written as a table, one row per step, through
/// `core::fmt` without allocating. At most `max_rows` rows are written (default
/// 1,000).
///
/// ```
/// use core::time::Duration;
/// use retry_core::{HedgePolicy, HedgeTimeline, Scripted};
///
/// let policy = HedgePolicy::builder().max_attempts(2).fixed_delay(Duration::from_millis(50)).build()?;
/// let script = [Scripted::succeed().after(Duration::from_secs(1)), Scripted::succeed()];
/// let text = HedgeTimeline::new(&policy, 0, &script).to_string();
/// assert!(text.contains("wait until 0.050s (next copy due)"));
/// assert!(text.contains("cancel {1}"));
/// assert!(text.contains("done: #2 won in 0.000s (2 sent)"));
/// # Ok::<(), retry_core::HedgePolicyError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct HedgeTimeline<'a> {
    policy: &'a HedgePolicy,
    seed: u64,
    latencies: Option<&'a LatencyHistogram>,
    script: &'a [Scripted],
    cancel_at: Option<Duration>,
    grants: Option<u32>,
    max_rows: usize,
}

impl<'a> HedgeTimeline<'a> {
    /// The timeline of `policy` under `seed` against `script`.
    #[must_use]
    pub const fn new(
        policy: &'a HedgePolicy,
        seed: u64,
        script: &'a [Scripted],
    ) -> HedgeTimeline<'a> {
        HedgeTimeline {
            policy,
            seed,
            latencies: None,
            script,
            cancel_at: None,
            grants: None,
            max_rows: 1000,
        }
    }

    /// Reads an adaptive delay from `latencies`.
    #[must_use]
    pub const fn latencies(mut self, latencies: &'a LatencyHistogram) -> HedgeTimeline<'a> {
        self.latencies = Some(latencies);
        self
    }

    /// Cancels at `at` (see [`HedgeSimulation::cancel_at`]).
    #[must_use]
    pub const fn cancel_at(mut self, at: Duration) -> HedgeTimeline<'a> {
        self.cancel_at = Some(at);
        self
    }

    /// Grants only the first `grants` withdrawals (see
    /// [`HedgeSimulation::retry_budget`]).
    #[must_use]
    pub const fn retry_budget(mut self, grants: u32) -> HedgeTimeline<'a> {
        self.grants = Some(grants);
        self
    }

    /// Writes at most `rows` rows.
    #[must_use]
    pub const fn max_rows(mut self, rows: usize) -> HedgeTimeline<'a> {
        self.max_rows = rows;
        self
    }

    /// The steps, as a fresh simulation.
    #[must_use]
    pub fn steps(&self) -> HedgeSimulation<'a> {
        let mut sim = match self.latencies {
            Some(l) => HedgeSimulation::with_latencies(self.policy, self.seed, l, self.script),
            None => HedgeSimulation::new(self.policy, self.seed, self.script),
        };
        if let Some(at) = self.cancel_at {
            sim = sim.cancel_at(at);
        }
        if let Some(grants) = self.grants {
            sim = sim.retry_budget(grants);
        }
        sim
    }
}

impl fmt::Display for HedgeTimeline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "policy: {}", self.policy)?;
        let steps = self.steps();
        writeln!(
            f,
            "seed: {}, hedge delay {}",
            self.seed,
            crate::time::DisplayDuration(steps.machine().hedge_delay())
        )?;
        writeln!(
            f,
            "{:>10}  {:<36}  {:<10}  action",
            "at", "event", "in flight"
        )?;
        let mut steps = steps;
        for step in steps.by_ref().take(self.max_rows) {
            let mut event = StackText::<96>::new();
            fmt::write(&mut event, format_args!("{}", step.event))?;
            let mut flight = StackText::<64>::new();
            fmt::write(&mut flight, format_args!("{}", step.in_flight))?;
            writeln!(
                f,
                "{:>10}  {:<36}  {:<10}  {}",
                step.at,
                event.as_str(),
                flight.as_str(),
                step.action
            )?;
        }
        if steps.next().is_some() {
            writeln!(f, "{:>10}  (more steps left out)", "…")?;
        }
        Ok(())
    }
}
