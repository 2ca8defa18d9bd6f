//! A scripted driver: feeds a [`CircuitBreaker`] a list of timed inputs and yields
//! one row per input, so tests can read a breaker's life as a timeline. Calls are
//! named by number (the n-th admitted call is call n) and their permits are kept
//! by the driver, in a fixed table of 16, without allocating.

use core::fmt;
use core::time::Duration;

use super::{
    Admission, BreakerConfig, BreakerError, BreakerMetrics, BreakerState, CallOutcome,
    CircuitBreaker, ManualState, Permit, Recorded, RejectReason, Transition, WindowStats,
};
use crate::time::StackText;
use crate::{DisplayDuration as D, Instant};

/// How many admitted calls the driver can keep in flight at once.
const SLOTS: usize = 16;

/// One scripted input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerInput {
    /// Ask to run a call ([`CircuitBreaker::request`]). Admitted calls are
    /// numbered 1, 2, … in order.
    Request,
    /// Call `call` succeeded after `took` ([`CircuitBreaker::record`]).
    Succeeded {
        /// The call's number.
        call: u32,
        /// How long it ran.
        took: Duration,
    },
    /// Call `call` failed after `took` ([`CircuitBreaker::record`]).
    Failed {
        /// The call's number.
        call: u32,
        /// How long it ran.
        took: Duration,
    },
    /// Call `call` never ran ([`CircuitBreaker::release`]).
    Released {
        /// The call's number.
        call: u32,
    },
    /// An operator forces a state ([`CircuitBreaker::force`]).
    Forced(ManualState),
    /// An operator asks for a state, leaving the breaker alone if it is there
    /// already ([`CircuitBreaker::ensure`]).
    Ensured(ManualState),
    /// An operator resets the breaker ([`CircuitBreaker::reset`]).
    Reset,
    /// The driver's timer fired: the breaker applies the time
    /// ([`CircuitBreaker::wake`]). A run [`with_timer`](BreakerSimulation::with_timer)
    /// makes these rows itself, at each [`CircuitBreaker::next_deadline`].
    Woke,
}

impl fmt::Display for BreakerInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = StackText::<96>::new();
        match *self {
            BreakerInput::Request => fmt::write(&mut text, format_args!("request")),
            BreakerInput::Succeeded { call, took } => fmt::write(
                &mut text,
                format_args!("call {call} succeeded in {}", D(took)),
            ),
            BreakerInput::Failed { call, took } => {
                fmt::write(&mut text, format_args!("call {call} failed in {}", D(took)))
            }
            BreakerInput::Released { call } => {
                fmt::write(&mut text, format_args!("call {call} released"))
            }
            BreakerInput::Forced(state) => fmt::write(&mut text, format_args!("force {state}")),
            BreakerInput::Ensured(state) => fmt::write(&mut text, format_args!("ensure {state}")),
            BreakerInput::Reset => fmt::write(&mut text, format_args!("reset")),
            BreakerInput::Woke => fmt::write(&mut text, format_args!("timer")),
        }?;
        f.pad(text.as_str())
    }
}

/// A scripted input and when it happens (time since the origin).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BreakerStep {
    /// When, as time since the origin.
    pub at: Duration,
    /// What.
    pub input: BreakerInput,
}

impl BreakerStep {
    /// A request at `at`.
    #[must_use]
    pub const fn request(at: Duration) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Request,
        }
    }
    /// Call `call`'s success after `took`, told at `at`.
    #[must_use]
    pub const fn succeeded(at: Duration, call: u32, took: Duration) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Succeeded { call, took },
        }
    }
    /// Call `call`'s failure after `took`, told at `at`.
    #[must_use]
    pub const fn failed(at: Duration, call: u32, took: Duration) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Failed { call, took },
        }
    }
    /// Call `call` handed back unrun at `at`.
    #[must_use]
    pub const fn released(at: Duration, call: u32) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Released { call },
        }
    }
    /// An operator forcing `state` at `at`.
    #[must_use]
    pub const fn forced(at: Duration, state: ManualState) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Forced(state),
        }
    }
    /// An operator asking for `state` at `at`, unless the breaker is there.
    #[must_use]
    pub const fn ensured(at: Duration, state: ManualState) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Ensured(state),
        }
    }
    /// An operator resetting the breaker at `at`.
    #[must_use]
    pub const fn reset(at: Duration) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Reset,
        }
    }
    /// The driver's timer firing at `at`.
    #[must_use]
    pub const fn woke(at: Duration) -> BreakerStep {
        BreakerStep {
            at,
            input: BreakerInput::Woke,
        }
    }
}

/// What the breaker answered to one scripted input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BreakerOutput {
    /// The request was admitted as call `call`.
    Admitted {
        /// The call's number.
        call: u32,
        /// Whether it is a half-open probe.
        probe: bool,
        /// The state change the request caused, if any.
        transition: Option<Transition>,
    },
    /// The request was rejected.
    Rejected {
        /// When the breaker will next admit, if known.
        until: Option<Instant>,
        /// Why.
        reason: RejectReason,
        /// The state change the request caused, if any.
        transition: Option<Transition>,
    },
    /// The outcome was handed back: what it did.
    Recorded(Recorded),
    /// The permit was released.
    Released,
    /// The operator's request was carried out.
    Forced(Transition),
    /// The operator's request was answered: `None` if the breaker was in that
    /// state already.
    Ensured(Option<Transition>),
    /// The operator's request was refused; nothing changed.
    Refused(BreakerError),
    /// The timer fired: the move the breaker made on its own, or `None` if
    /// nothing was due.
    Woke(Option<Transition>),
    /// The script named a call that is not in flight; nothing was sent.
    UnknownCall,
    /// The request was admitted as call `call`, but the driver already held 16
    /// calls in flight, so it released the permit at once.
    Overflow {
        /// The call's number.
        call: u32,
    },
}

impl fmt::Display for BreakerOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BreakerOutput::Admitted {
                call,
                probe,
                transition,
            } => {
                write!(f, "admitted call {call}")?;
                if probe {
                    f.write_str(" (probe)")?;
                }
                then(f, transition)
            }
            BreakerOutput::Rejected {
                until,
                reason,
                transition,
            } => {
                write!(f, "rejected ({reason})")?;
                if let Some(until) = until {
                    write!(f, " until {until}")?;
                }
                then(f, transition)
            }
            BreakerOutput::Recorded(recorded) => write!(f, "{recorded}"),
            BreakerOutput::Released => f.write_str("released"),
            BreakerOutput::Forced(t) | BreakerOutput::Ensured(Some(t)) => write!(f, "{t}"),
            BreakerOutput::Ensured(None) => f.write_str("already there"),
            BreakerOutput::Woke(Some(t)) => write!(f, "{t}"),
            BreakerOutput::Woke(None) => f.write_str("nothing due"),
            BreakerOutput::Refused(e) => write!(f, "refused [{}]: {e}", e.code()),
            BreakerOutput::UnknownCall => f.write_str("no such call in flight"),
            BreakerOutput::Overflow { call } => {
                write!(f, "admitted call {call}, released: driver full")
            }
        }
    }
}

fn then(f: &mut fmt::Formatter<'_>, transition: Option<Transition>) -> fmt::Result {
    match transition {
        Some(t) => write!(f, "; {t}"),
        None => Ok(()),
    }
}

/// One row of a scripted run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerRow {
    /// When the input arrived.
    pub at: Instant,
    /// The input.
    pub input: BreakerInput,
    /// The breaker's answer.
    pub output: BreakerOutput,
    /// The state after the input.
    pub state: BreakerState,
    /// The window after the input.
    pub stats: WindowStats,
    /// The dashboard's readings after the input.
    pub metrics: BreakerMetrics,
}

/// Drives a [`CircuitBreaker`] through a script; an iterator of [`BreakerRow`]s,
/// one per step. Steps are taken in order with their own times (a time earlier
/// than the previous one is passed on as it is: the breaker treats it as no time
/// passing). A run [`with_timer`](Self::with_timer) also plays the driver's
/// timer, as an adapter with automatic transitions does: before each step, every
/// [`next_deadline`](CircuitBreaker::next_deadline) at or before its time
/// is applied at that instant with [`CircuitBreaker::wake`], in a row of its
/// own.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BasicRule, BreakerConfig, BreakerOutput, BreakerSimulation, BreakerStep, BreakerState};
///
/// let config = BreakerConfig::basic(BasicRule {
///     failure_threshold: 1,
///     open_duration: Duration::from_secs(1),
///     success_threshold: 1,
/// })?;
/// let ms = Duration::from_millis;
/// let script = [
///     BreakerStep::request(ms(0)),
///     BreakerStep::failed(ms(10), 1, ms(10)),
///     BreakerStep::request(ms(20)),
/// ];
/// let rows: Vec<_> = BreakerSimulation::<0, 0>::new(config, &script)?.collect();
/// assert_eq!(rows[1].state, BreakerState::Open);
/// assert!(matches!(rows[2].output, BreakerOutput::Rejected { .. }));
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Debug)]
pub struct BreakerSimulation<'s, const WORDS: usize = 2, const BUCKETS: usize = 0> {
    breaker: CircuitBreaker<WORDS, BUCKETS>,
    steps: &'s [BreakerStep],
    next: usize,
    admitted: u32,
    slots: [Option<(u32, Permit)>; SLOTS],
    timer: bool,
    /// The instant of the latest timer row and how many were made then (a
    /// bound, so that a breaker whose deadline would not move on could not
    /// keep the run at one instant).
    woke: (Instant, u8),
}

/// Timer rows at one instant before the run goes on to the next step: a wake
/// makes at most one move, and no more than three moves can be due at one
/// instant (a half-open wait ending, an empty open period, half-open again).
const WAKES_PER_INSTANT: u8 = 3;

impl<'s, const WORDS: usize, const BUCKETS: usize> BreakerSimulation<'s, WORDS, BUCKETS> {
    /// A run of a fresh breaker following `config` through `steps`.
    ///
    /// # Errors
    /// As [`CircuitBreaker::new`].
    pub fn new(config: BreakerConfig, steps: &'s [BreakerStep]) -> Result<Self, BreakerError> {
        Ok(Self::from_breaker(CircuitBreaker::new(config)?, steps))
    }

    /// A run of `breaker` as it stands (one started in another state, say)
    /// through `steps`.
    #[must_use]
    pub fn from_breaker(breaker: CircuitBreaker<WORDS, BUCKETS>, steps: &'s [BreakerStep]) -> Self {
        BreakerSimulation {
            breaker,
            steps,
            next: 0,
            admitted: 0,
            slots: [const { None }; SLOTS],
            timer: false,
            woke: (Instant::ORIGIN, 0),
        }
    }

    /// The same run, with the driver's timer played: before each step, the
    /// breaker is woken at each of its deadlines that the step's time has
    /// reached (a [`BreakerInput::Woke`] row each).
    #[must_use]
    pub const fn with_timer(mut self) -> Self {
        self.timer = true;
        self
    }

    /// The timer's next row before a step at `at`, if a deadline is due.
    fn timer_row(&mut self, at: Instant) -> Option<BreakerRow> {
        let due = self.breaker.next_deadline().filter(|d| *d <= at)?;
        let (last, count) = self.woke;
        let count = if due == last { count } else { 0 };
        if count >= WAKES_PER_INSTANT {
            return None;
        }
        self.woke = (due, count.saturating_add(1));
        let output = BreakerOutput::Woke(self.breaker.wake(due));
        Some(self.row(due, BreakerInput::Woke, output))
    }

    fn row(&self, at: Instant, input: BreakerInput, output: BreakerOutput) -> BreakerRow {
        BreakerRow {
            at,
            input,
            output,
            state: self.breaker.state(),
            stats: self.breaker.stats(at),
            metrics: self.breaker.metrics(at),
        }
    }

    /// The breaker as it stands.
    #[must_use]
    pub const fn breaker(&self) -> &CircuitBreaker<WORDS, BUCKETS> {
        &self.breaker
    }

    fn take(&mut self, call: u32) -> Option<Permit> {
        self.slots
            .iter_mut()
            .find(|slot| matches!(slot, Some((c, _)) if *c == call))
            .and_then(Option::take)
            .map(|(_, permit)| permit)
    }

    fn apply(&mut self, input: BreakerInput, now: Instant) -> BreakerOutput {
        let outcome = |success, took| CallOutcome {
            success,
            duration: took,
        };
        match input {
            BreakerInput::Request => match self.breaker.request(now) {
                Admission::Admitted { permit, transition } => {
                    self.admitted = self.admitted.saturating_add(1);
                    let call = self.admitted;
                    let probe = permit.is_probe();
                    match self.slots.iter_mut().find(|slot| slot.is_none()) {
                        Some(slot) => *slot = Some((call, permit)),
                        None => {
                            self.breaker.release(permit, now);
                            return BreakerOutput::Overflow { call };
                        }
                    }
                    BreakerOutput::Admitted {
                        call,
                        probe,
                        transition,
                    }
                }
                Admission::Rejected {
                    until,
                    reason,
                    transition,
                } => BreakerOutput::Rejected {
                    until,
                    reason,
                    transition,
                },
            },
            BreakerInput::Succeeded { call, took } | BreakerInput::Failed { call, took } => {
                let success = matches!(input, BreakerInput::Succeeded { .. });
                match self.take(call) {
                    Some(permit) => BreakerOutput::Recorded(self.breaker.record(
                        permit,
                        outcome(success, took),
                        now,
                    )),
                    None => BreakerOutput::UnknownCall,
                }
            }
            BreakerInput::Released { call } => match self.take(call) {
                Some(permit) => {
                    self.breaker.release(permit, now);
                    BreakerOutput::Released
                }
                None => BreakerOutput::UnknownCall,
            },
            BreakerInput::Forced(state) => match self.breaker.force(state, now) {
                Ok(t) => BreakerOutput::Forced(t),
                Err(e) => BreakerOutput::Refused(e),
            },
            BreakerInput::Ensured(state) => match self.breaker.ensure(state, now) {
                Ok(t) => BreakerOutput::Ensured(t),
                Err(e) => BreakerOutput::Refused(e),
            },
            BreakerInput::Reset => BreakerOutput::Forced(self.breaker.reset(now)),
            BreakerInput::Woke => BreakerOutput::Woke(self.breaker.wake(now)),
        }
    }
}

impl<const WORDS: usize, const BUCKETS: usize> Iterator for BreakerSimulation<'_, WORDS, BUCKETS> {
    type Item = BreakerRow;

    fn next(&mut self) -> Option<BreakerRow> {
        let step = *self.steps.get(self.next)?;
        let at = Instant::from_duration(step.at);
        if self.timer {
            if let Some(row) = self.timer_row(at) {
                return Some(row);
            }
        }
        self.next = self.next.saturating_add(1);
        let output = self.apply(step.input, at);
        Some(self.row(at, step.input, output))
    }
}

/// A scripted run written as a table through `core::fmt`, without allocating:
/// the config, then one row per step (time, input, state after, window after if
/// the config has one, answer).
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BasicRule, BreakerConfig, BreakerStep, BreakerTimeline};
///
/// let config = BreakerConfig::basic(BasicRule {
///     failure_threshold: 1,
///     open_duration: Duration::from_secs(1),
///     success_threshold: 1,
/// })?;
/// let ms = Duration::from_millis;
/// let script = [BreakerStep::request(ms(0)), BreakerStep::failed(ms(10), 1, ms(10))];
/// let text = BreakerTimeline::<0, 0>::new(&config, &script).to_string();
/// assert!(text.contains("closed -> open at 0.010s (consecutive failures)"));
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct BreakerTimeline<'a, const WORDS: usize = 2, const BUCKETS: usize = 0> {
    config: &'a BreakerConfig,
    steps: &'a [BreakerStep],
    timer: bool,
}

impl<'a, const WORDS: usize, const BUCKETS: usize> BreakerTimeline<'a, WORDS, BUCKETS> {
    /// The timeline of a fresh breaker following `config` through `steps`.
    #[must_use]
    pub const fn new(config: &'a BreakerConfig, steps: &'a [BreakerStep]) -> Self {
        BreakerTimeline {
            config,
            steps,
            timer: false,
        }
    }

    /// The same timeline with the driver's timer played (see
    /// [`BreakerSimulation::with_timer`]): the moves the breaker makes on its
    /// own appear at their instants, as `timer` rows.
    #[must_use]
    pub const fn with_timer(mut self) -> Self {
        self.timer = true;
        self
    }
}

impl<const WORDS: usize, const BUCKETS: usize> fmt::Display
    for BreakerTimeline<'_, WORDS, BUCKETS>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "config: {}", self.config)?;
        let run = match BreakerSimulation::<WORDS, BUCKETS>::new(*self.config, self.steps) {
            Ok(run) if self.timer => run.with_timer(),
            Ok(run) => run,
            Err(e) => return writeln!(f, "error [{}]: {e}", e.code()),
        };
        let windowed = self.config.window().is_some();
        if windowed {
            writeln!(
                f,
                "{:>8}  {:<30}  {:<12}  {:<28}  answer",
                "at", "input", "state", "window"
            )?;
        } else {
            writeln!(f, "{:>8}  {:<30}  {:<12}  answer", "at", "input", "state")?;
        }
        for row in run {
            write!(f, "{:>8}  {:<30}  {:<12}  ", row.at, row.input, row.state)?;
            if windowed {
                let mut stats = StackText::<64>::new();
                fmt::write(&mut stats, format_args!("{}", row.stats))?;
                write!(f, "{:<28}  ", stats.as_str())?;
            }
            writeln!(f, "{}", row.output)?;
        }
        Ok(())
    }
}
