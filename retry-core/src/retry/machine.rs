//! The [`RetryMachine`]: every retry decision, as a pure state machine.

use core::borrow::Borrow;
use core::fmt;
use core::ops::Deref;
use core::time::Duration;

#[cfg(target_pointer_width = "64")]
use super::nanos::exact_nanos;
use super::nanos::{from_nanos, sat_nanos};
use super::policy::{bounded, CircuitOpen, HintMode, RetryPolicy};
use crate::classify::{Failure, FailureKind};
use crate::hint::Hint;
use crate::time::{DisplayDuration as D, Instant};

/// Something that happened, told to the machine with [`RetryMachine::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Event {
    /// The call begins. `now` becomes the start of the total budget.
    Start,
    /// The attempt in flight succeeded.
    Succeeded,
    /// The attempt in flight failed, as classified.
    Failed(Failure),
    /// The attempt in flight passed its deadline (a failure of kind
    /// [`FailureKind::Timeout`]).
    TimedOut,
    /// A sleep the machine asked for is over (or the driver woke early).
    Woke,
    /// The caller cancelled the call. Final: never retried.
    Cancelled,
    /// The shared retry budget granted the withdrawal asked by [`Action::Withdraw`].
    Granted,
    /// The shared retry budget refused the withdrawal asked by [`Action::Withdraw`].
    Refused,
    /// A circuit breaker rejected the attempt asked by [`Action::Attempt`] before it
    /// ran; it will admit again at `until` (`None`: not known, e.g. forced open or
    /// every half-open probe slot taken).
    Rejected {
        /// When the breaker will next admit, if known.
        until: Option<Instant>,
    },
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Start => f.write_str("start"),
            Event::Succeeded => f.write_str("succeeded"),
            Event::Failed(failure) => write!(f, "failed({failure})"),
            Event::TimedOut => f.write_str("timed out"),
            Event::Woke => f.write_str("woke"),
            Event::Cancelled => f.write_str("cancelled"),
            Event::Granted => f.write_str("granted"),
            Event::Refused => f.write_str("refused"),
            Event::Rejected { until: Some(until) } => write!(f, "rejected until {until}"),
            Event::Rejected { until: None } => f.write_str("rejected"),
        }
    }
}

/// What the driver must do next. Every variant says which event to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[must_use = "an action tells the driver what to do next"]
pub enum Action {
    /// Run the operation once. Then send [`Event::Succeeded`], [`Event::Failed`],
    /// or [`Event::TimedOut`] if it had not ended before `deadline` (an outcome
    /// arriving at the deadline is a timeout: see
    /// [`attempt_timed_out`](crate::attempt_timed_out)); or
    /// [`Event::Cancelled`]. A driver with a circuit breaker asks it first and sends
    /// [`Event::Rejected`] instead of running the operation if it refuses.
    Attempt {
        /// The attempt's number; the first is 1.
        number: u32,
        /// When the attempt times out, if the policy has a per-attempt timeout (or
        /// caps attempts at the budget's end).
        deadline: Option<Instant>,
        /// The operation is marked non-idempotent and this attempt repeats it:
        /// emit a warning before it starts (see [the rules](crate::behaviour#classifying-failures)), whatever its outcome.
        replays_non_idempotent: bool,
    },
    /// Sleep until `until`, then send [`Event::Woke`] (or [`Event::Cancelled`] at
    /// once if the caller cancels meanwhile). `until` is `delay` after the `now`
    /// that produced it, or [`Instant::MAX`] when that lies past it (see
    /// [the rule](crate::behaviour#time-budget-and-attempt-timeout)): always
    /// after `now` but at `Instant::MAX` itself, where time ends. Waking early
    /// is harmless: the same sleep is asked again.
    Sleep {
        /// When the sleep ends.
        until: Instant,
        /// How long the sleep is.
        delay: Duration,
        /// Where the delay came from.
        reason: SleepReason,
    },
    /// Withdraw one retry from the shared retry budget (only when the policy
    /// [uses one](crate::RetryPolicy::uses_retry_budget)), then send
    /// [`Event::Granted`] or [`Event::Refused`]
    /// ([`feed_budget`](crate::feed_budget) makes the withdrawal and picks the
    /// event). A driver given no budget answers [`Event::Granted`]: nothing can
    /// refuse the retry.
    Withdraw {
        /// The retry's number (retry r is attempt r + 1).
        retry: u32,
        /// Whether the failure being retried was a timeout (some budgets charge
        /// more for those).
        after_timeout: bool,
    },
    /// Stop: the call failed for good. Final; any later event gets the same answer.
    GiveUp(GiveUp),
    /// Stop: the last attempt succeeded. Final; any later event gets the same answer.
    Done {
        /// How many attempts ran.
        attempts: u32,
    },
}

impl Action {
    /// Whether this action ends the call ([`Action::GiveUp`] or [`Action::Done`]).
    #[must_use]
    pub const fn is_terminal(&self) -> bool {
        matches!(self, Action::GiveUp(_) | Action::Done { .. })
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Attempt {
                number,
                deadline,
                replays_non_idempotent,
            } => {
                write!(f, "attempt {number}")?;
                if replays_non_idempotent {
                    f.write_str(" [warning: replays a non-idempotent operation]")?;
                }
                match deadline {
                    Some(d) => write!(f, " (deadline {d})"),
                    None => Ok(()),
                }
            }
            Action::Sleep {
                until,
                delay,
                reason,
            } => write!(f, "sleep {} until {until} ({reason})", D(delay)),
            Action::Withdraw {
                retry,
                after_timeout,
            } => {
                write!(f, "withdraw retry {retry}")?;
                f.write_str(if after_timeout {
                    " (after timeout)"
                } else {
                    ""
                })
            }
            Action::GiveUp(g) => fmt::Display::fmt(&g, f),
            Action::Done { attempts } => write!(f, "done after {attempts} attempt(s)"),
        }
    }
}

/// Where a sleep's length came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SleepReason {
    /// The backoff curve (with jitter).
    Curve,
    /// The server's hint decided it.
    Hint,
    /// A circuit breaker is open: wait until it admits again.
    CircuitOpen,
}

impl SleepReason {
    /// The reason as a metric label: `curve`, `hint` or `circuit_open`.
    ///
    /// ```
    /// use retry_core::SleepReason;
    /// assert_eq!(SleepReason::CircuitOpen.label(), "circuit_open");
    /// ```
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            SleepReason::Curve => "curve",
            SleepReason::Hint => "hint",
            SleepReason::CircuitOpen => "circuit_open",
        }
    }
}

impl fmt::Display for SleepReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SleepReason::Curve => "curve",
            SleepReason::Hint => "hint",
            SleepReason::CircuitOpen => "circuit open",
        })
    }
}

/// Why the machine gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
// A one-byte tag (the size is the same 24 bytes): left to itself the
// compiler widens the tag to the 8 bytes before the `Duration`s, and
// `GiveUp`, `Action` and the machine's state all keep their own tags in its
// spare values, so every match on them would compare 64-bit numbers, in
// two halves on 32-bit targets.
#[repr(u8)]
pub enum GiveUpReason {
    /// Every permitted attempt failed.
    Exhausted,
    /// The classifier said no retry can fix the failure.
    Permanent,
    /// The next retry would reach or pass the total time budget.
    Budget,
    /// The last attempt timed out (the last permitted one, or timeouts are not
    /// retried).
    TimedOut {
        /// The timeout that attempt had.
        timeout: Duration,
    },
    /// The caller cancelled.
    Cancelled,
    /// The shared retry budget refused the retry (distinct from the time budget).
    RetryBudget,
    /// A circuit breaker rejected the attempt and the policy gives up on that.
    CircuitOpen {
        /// How long until the breaker admits again, if known.
        wait: Option<Duration>,
    },
    /// An outcome arrived before [`Event::Start`]: nothing ran. The machine is
    /// unchanged and still waits for `Start`.
    NotStarted,
}

impl GiveUpReason {
    /// A stable dotted code for logs and metrics (see [the rules](crate::behaviour#results)).
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            GiveUpReason::Exhausted => "retry.exhausted",
            GiveUpReason::Permanent => "retry.permanent",
            GiveUpReason::Budget => "retry.budget",
            GiveUpReason::TimedOut { .. } => "retry.timeout",
            GiveUpReason::Cancelled => "retry.cancelled",
            GiveUpReason::RetryBudget => "retry.retry_budget",
            GiveUpReason::CircuitOpen { .. } => "retry.circuit_open",
            GiveUpReason::NotStarted => "retry.not_started",
        }
    }
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GiveUpReason::Exhausted => f.write_str("exhausted"),
            GiveUpReason::Permanent => f.write_str("permanent failure"),
            GiveUpReason::Budget => f.write_str("budget"),
            GiveUpReason::TimedOut { timeout } => write!(f, "timed out (timeout {})", D(*timeout)),
            GiveUpReason::Cancelled => f.write_str("cancelled"),
            GiveUpReason::RetryBudget => f.write_str("retry budget refused"),
            GiveUpReason::CircuitOpen { wait: Some(wait) } => {
                write!(f, "circuit open (admits in {})", D(*wait))
            }
            GiveUpReason::CircuitOpen { wait: None } => f.write_str("circuit open"),
            GiveUpReason::NotStarted => f.write_str("not started"),
        }
    }
}

/// The end of a failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct GiveUp {
    /// Why.
    pub reason: GiveUpReason,
    /// How many attempts ran (the number of the last one).
    pub attempts: u32,
    /// The last failure's kind, if an attempt failed.
    pub last_failure: Option<FailureKind>,
}

impl GiveUp {
    /// The reason's stable dotted code.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        self.reason.code()
    }
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "give up: {} after {} attempt(s)",
            self.reason, self.attempts
        )?;
        match self.last_failure {
            Some(kind) => write!(f, ", last {kind}"),
            None => Ok(()),
        }
    }
}

/// Where the machine is: what the pending action is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Waiting for [`Event::Start`].
    Idle,
    /// An attempt is in flight.
    Attempting,
    /// A sleep is in progress.
    Sleeping,
    /// Waiting for the retry budget's answer.
    Withdrawing,
    /// Gave up or done; final.
    Finished,
}

/// An event that makes no sense in the machine's phase. The machine is unchanged;
/// [`Misuse::answer`] is what [`RetryMachine::poll`] returns for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event `{event}` makes no sense while {phase:?}; the machine is unchanged")]
pub struct Misuse {
    /// The event that was refused.
    pub event: Event,
    /// The phase it arrived in.
    pub phase: Phase,
    /// The pending action, answered again.
    pub answer: Action,
}

/// The phase with what it waits for. `pub(super)` for the snapshot mapping
/// (`snapshot.rs`), which is the only other reader.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum State {
    Idle,
    Attempting {
        number: u32,
        started: Instant,
        deadline: Option<Instant>,
    },
    Sleeping {
        until: Instant,
        delay: Duration,
        reason: SleepReason,
    },
    /// Waiting for the retry budget; the retry then sleeps `delay` (if non-zero).
    Withdrawing {
        retry: u32,
        after_timeout: bool,
        delay: Duration,
        reason: SleepReason,
    },
    Finished(Action),
}

/// The retry state machine: [`RetryMachine::poll`] takes an [`Event`] and the
/// current time and returns the next [`Action`]. It never reads a clock, sleeps,
/// allocates or draws OS randomness: all of that is the driver's job.
///
/// The machine is a small `Clone` value; its whole future is determined by the
/// policy, the seed and its state, so a copy taken mid-flight and fed the same
/// events answers with the same actions.
///
/// `P` is how it holds its policy: [`RetryMachine::new`] copies the policy in
/// (`RetryMachine<RetryPolicy>`, 272 bytes on x86_64, the 176-byte policy
/// included), while [`RetryMachine::with_policy`] keeps whatever it is given
/// that borrows as a [`RetryPolicy`]: a `&RetryPolicy` (104 bytes: a driver
/// that keeps the policy for the whole call need not copy it into every call),
/// an `Arc`. Both decide alike: the same policy, seed and events give the same
/// actions. `tests/all/footprint.rs` prints the figures.
///
/// # Misuse
/// An event that makes no sense in the current phase never panics and never
/// changes the machine. [`RetryMachine::try_poll`] reports it as a [`Misuse`];
/// [`RetryMachine::poll`] answers it with the pending action again:
///
/// | phase | event | answer |
/// |---|---|---|
/// | idle | anything but `Start` or `Cancelled` | `GiveUp` with [`GiveUpReason::NotStarted`] |
/// | attempting | `Start`, `Woke` | the same `Attempt` |
/// | attempting | `Granted`, `Refused` | the same `Attempt` |
/// | sleeping | `Start`, `Succeeded`, `Failed`, `TimedOut`, `Granted`, `Refused`, `Rejected` | the same `Sleep` |
/// | withdrawing | anything but `Granted`, `Refused`, `Cancelled` | the same `Withdraw` |
/// | finished | anything | the same `GiveUp` / `Done` |
///
/// A `Woke` before the sleep is due is not misuse: it is answered with the same
/// `Sleep`. Time going backwards counts as no time passing.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Action, Event, Failure, Instant, Jitter, RetryMachine, RetryPolicy};
///
/// let policy = RetryPolicy::builder().max_attempts(2).jitter(Jitter::None).build()?;
/// let mut m = RetryMachine::new(&policy, 7);
/// let t0 = Instant::ORIGIN;
/// assert!(matches!(m.poll(Event::Start, t0), Action::Attempt { number: 1, deadline: None, .. }));
/// let Action::Sleep { until, .. } = m.poll(Event::Failed(Failure::retryable()), t0) else { panic!() };
/// assert_eq!(until, t0 + Duration::from_secs(1));
/// assert!(matches!(m.poll(Event::Woke, until), Action::Attempt { number: 2, .. }));
/// assert_eq!(m.poll(Event::Succeeded, until), Action::Done { attempts: 2 });
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RetryMachine<P = RetryPolicy> {
    pub(super) policy: Held<P>,
    pub(super) seed: u64,
    pub(super) state: State,
    /// When `Start` arrived: the origin of the budget.
    pub(super) start: Instant,
    /// The latest `now` accepted; earlier times are read as this one.
    pub(super) last_now: Instant,
    /// The attempt number where the curve (re)started (0, or the attempt a
    /// pushback followed).
    pub(super) curve_origin: u32,
    /// The last curve delay (decorrelated jitter draws from it).
    pub(super) previous_delay: Duration,
    /// The number of the last attempt started (0 before the first).
    pub(super) last_attempt: u32,
    /// The kind of the last failure, if any.
    pub(super) last_failure: Option<FailureKind>,
}

impl RetryMachine {
    /// A machine for `policy` (copied in) whose jitter is keyed on `seed`.
    #[must_use]
    pub fn new(policy: &RetryPolicy, seed: u64) -> RetryMachine {
        RetryMachine::with_policy(*policy, seed)
    }
}

/// The policy a [`RetryMachine`] follows, held as `P` (the policy itself, a
/// reference to it, a shared pointer): the machine reads it through here, the
/// same way whatever `P` is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Held<P>(P);

impl<P: Borrow<RetryPolicy>> Deref for Held<P> {
    type Target = RetryPolicy;

    #[inline]
    fn deref(&self) -> &RetryPolicy {
        self.0.borrow()
    }
}

impl<P: fmt::Debug> fmt::Debug for Held<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl<P: Borrow<RetryPolicy>> RetryMachine<P> {
    /// A machine following `policy`, held as given (a `&RetryPolicy`, say,
    /// rather than a copy: see the type's docs), whose jitter is keyed on
    /// `seed`. It decides exactly as [`RetryMachine::new`] would with the same
    /// policy and seed.
    ///
    /// ```
    /// use retry_core::{Event, Failure, Instant, RetryMachine, RetryPolicy};
    ///
    /// let policy = RetryPolicy::builder().max_attempts(3).build()?;
    /// let mut borrowed = RetryMachine::with_policy(&policy, 7);
    /// let mut owned = RetryMachine::new(&policy, 7);
    /// let t0 = Instant::ORIGIN;
    /// assert_eq!(borrowed.poll(Event::Start, t0), owned.poll(Event::Start, t0));
    /// let failed = Event::Failed(Failure::retryable());
    /// assert_eq!(borrowed.poll(failed, t0), owned.poll(failed, t0));
    /// # Ok::<(), retry_core::PolicyError>(())
    /// ```
    #[must_use]
    pub fn with_policy(policy: P, seed: u64) -> RetryMachine<P> {
        let previous_delay = policy.borrow().backoff().initial();
        RetryMachine {
            policy: Held(policy),
            seed,
            state: State::Idle,
            start: Instant::ORIGIN,
            last_now: Instant::ORIGIN,
            curve_origin: 0,
            previous_delay,
            last_attempt: 0,
            last_failure: None,
        }
    }

    /// The policy the machine follows.
    #[must_use]
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The jitter seed.
    #[must_use]
    pub const fn seed(&self) -> u64 {
        self.seed
    }

    /// The current phase.
    #[must_use]
    pub const fn phase(&self) -> Phase {
        match self.state {
            State::Idle => Phase::Idle,
            State::Attempting { .. } => Phase::Attempting,
            State::Sleeping { .. } => Phase::Sleeping,
            State::Withdrawing { .. } => Phase::Withdrawing,
            State::Finished(_) => Phase::Finished,
        }
    }

    /// How many attempts have started.
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        self.last_attempt
    }

    /// The kind of the last failure seen, if any.
    #[must_use]
    pub const fn last_failure(&self) -> Option<FailureKind> {
        self.last_failure
    }

    /// When the call started (`None` before [`Event::Start`]).
    #[must_use]
    pub const fn started_at(&self) -> Option<Instant> {
        match self.state {
            State::Idle => None,
            _ => Some(self.start),
        }
    }

    /// The end of the total budget, if the policy has one and the call started.
    #[must_use]
    pub fn budget_end(&self) -> Option<Instant> {
        self.started_at()?;
        self.budget_end_from_start()
    }

    /// The end of the budget measured from `start`; only meaningful once `Start`
    /// has set it (every internal caller runs after that, including the first
    /// attempt, which begins while the phase still reads idle).
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[cfg_attr(not(target_pointer_width = "64"), inline(always))]
    fn budget_end_from_start(&self) -> Option<Instant> {
        let budget = self.policy.budget()?;
        // `later` saturated: the same instant as `Instant::saturating_add`.
        Some(later(self.start, budget).unwrap_or(Instant::MAX))
    }

    /// Whether `t` is before the end of the budget (always, without one): a
    /// retry may start at `t`.
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    pub(super) fn within_budget(&self, t: Instant) -> bool {
        self.budget_end_from_start().is_none_or(|end| t < end)
    }

    /// The action the machine is waiting on the driver to carry out (`None` before
    /// [`Event::Start`]).
    #[must_use]
    pub fn pending(&self) -> Option<Action> {
        match self.state {
            State::Idle => None,
            State::Attempting {
                number, deadline, ..
            } => Some(self.attempt_action(number, deadline)),
            State::Sleeping {
                until,
                delay,
                reason,
            } => Some(Action::Sleep {
                until,
                delay,
                reason,
            }),
            State::Withdrawing {
                retry,
                after_timeout,
                ..
            } => Some(Action::Withdraw {
                retry,
                after_timeout,
            }),
            State::Finished(action) => Some(action),
        }
    }

    /// The next instant at which the driver must act without another event: the
    /// end of a sleep or the deadline of the attempt in flight.
    #[must_use]
    pub const fn next_deadline(&self) -> Option<Instant> {
        match self.state {
            State::Attempting { deadline, .. } => deadline,
            State::Sleeping { until, .. } => Some(until),
            State::Idle | State::Withdrawing { .. } | State::Finished(_) => None,
        }
    }

    /// Tells the machine what happened at `now` and returns what to do next.
    /// Misuse is answered as the type's docs say and changes nothing.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn poll(&mut self, event: Event, now: Instant) -> Action {
        #[cfg(target_pointer_width = "64")]
        if let Some(action) = self.plain_step(&event, now) {
            return action;
        }
        self.poll_any(event, now)
    }

    /// [`RetryMachine::poll`] for every event: out of line on 64-bit
    /// targets, where `poll` first tries the two transitions of a plain
    /// retry ([`RetryMachine::plain_step`]) with no call, and then comes
    /// here (so that the common path saves no registers for this one).
    #[cfg_attr(target_pointer_width = "64", inline(never))]
    #[cfg_attr(not(target_pointer_width = "64"), inline)]
    fn poll_any(&mut self, event: Event, now: Instant) -> Action {
        match self.step(event, now) {
            Some(action) => action,
            None => self.misuse(event).answer,
        }
    }

    /// Like [`RetryMachine::poll`], but an event that makes no sense now is
    /// returned as a typed [`Misuse`] (the machine is unchanged).
    ///
    /// # Errors
    /// [`Misuse`] when the event does not fit the current phase.
    #[cfg_attr(target_pointer_width = "64", inline)]
    pub fn try_poll(&mut self, event: Event, now: Instant) -> Result<Action, Misuse> {
        #[cfg(target_pointer_width = "64")]
        if let Some(action) = self.plain_step(&event, now) {
            return Ok(action);
        }
        match self.step(event, now) {
            Some(action) => Ok(action),
            None => Err(self.misuse(event)),
        }
    }

    /// The answer to `event` at `now`, or `None` (with the machine unchanged)
    /// when the event does not fit the current phase. `poll` and `try_poll`
    /// share it; an `Option` of an action is no larger than the action, so the
    /// common path never builds the much larger [`Misuse`].
    #[cfg_attr(target_pointer_width = "64", inline)]
    fn step(&mut self, event: Event, now: Instant) -> Option<Action> {
        let now = now.max(self.last_now);
        // On 64-bit targets the two transitions every retry takes first, on
        // their own: a failed attempt (with nothing to tell it from a
        // timeout) and a due wake. The match below covers them everywhere
        // else, in less code.
        #[cfg(target_pointer_width = "64")]
        match (&self.state, &event) {
            (State::Attempting { number, .. }, Event::Failed(failure)) => {
                let (number, failure) = (*number, *failure);
                let action = self.after_failure(number, failure, None, now);
                self.last_now = now;
                return Some(action);
            }
            (State::Sleeping { until, .. }, Event::Woke) if now >= *until => {
                let action = if self.within_budget(now) {
                    let next = self.last_attempt.saturating_add(1);
                    self.begin_attempt(next, now)
                } else {
                    self.give_up(GiveUpReason::Budget)
                };
                self.last_now = now;
                return Some(action);
            }
            _ => {}
        }
        // The event first, then the one phase it fits (matched in place: the
        // state and the event are not copied out).
        let action = match event {
            Event::Failed(_)
            | Event::TimedOut
            | Event::Succeeded
            | Event::Rejected { .. } => 'attempt: {
                let State::Attempting {
                    number,
                    started,
                    deadline,
                } = self.state
                else {
                    return None;
                };
                let (failure, timed_out) = match event {
                    Event::Succeeded => {
                        break 'attempt self.finish(Action::Done { attempts: number })
                    }
                    Event::Rejected { until } => {
                        break 'attempt self.after_rejection(number, until, now)
                    }
                    Event::Failed(failure) => (failure, None),
                    _ => {
                        // The attempt's timeout, or (with none) how long
                        // it ran.
                        let timeout = super::nanos::between(deadline.unwrap_or(now), started);
                        let failure = if self.policy.retries_timeouts() {
                            Failure::retryable()
                        } else {
                            Failure::permanent()
                        };
                        (failure.with_kind(FailureKind::Timeout), Some(timeout))
                    }
                };
                self.after_failure(number, failure, timed_out, now)
            }
            Event::Woke | Event::Start => 'next: {
                let next = match self.state {
                    State::Sleeping { until, .. } if matches!(event, Event::Woke) => {
                        if now < until {
                            // Woken early: the same sleep again.
                            break 'next self.answer_again();
                        }
                        if !self.within_budget(now) {
                            // Woken so late that the budget is spent: no
                            // retry may start.
                            break 'next self.give_up(GiveUpReason::Budget);
                        }
                        // After a circuit-open wait this is the rejected
                        // attempt again: the rejection already took it off
                        // the count.
                        self.last_attempt.saturating_add(1)
                    }
                    State::Idle if matches!(event, Event::Start) => {
                        self.start = now;
                        1
                    }
                    _ => return None,
                };
                self.begin_attempt(next, now)
            }
            Event::Granted => {
                let State::Withdrawing {
                    retry,
                    delay,
                    reason,
                    ..
                } = self.state
                else {
                    return None;
                };
                self.sleep_or_attempt(retry.saturating_add(1), delay, reason, now)
            }
            Event::Refused => {
                let State::Withdrawing { .. } = self.state else {
                    return None;
                };
                self.give_up(GiveUpReason::RetryBudget)
            }
            // Cancelled in any phase but the last: idle, with an attempt in
            // flight (abandoned; it still counts as started), sleeping or
            // withdrawing.
            Event::Cancelled => match self.state {
                State::Finished(_) => return None,
                _ => self.give_up(GiveUpReason::Cancelled),
            },
        };
        self.last_now = now;
        Some(action)
    }

    /// The answer to an event that does not fit the phase: the pending
    /// action again (before `Start`, a give-up saying nothing ran). All that
    /// [`RetryMachine::poll`] needs of a [`Misuse`], without building one.
    #[cold]
    #[inline(never)]
    fn answer_again(&self) -> Action {
        match self.pending() {
            Some(action) => action,
            None => Action::GiveUp(GiveUp {
                reason: GiveUpReason::NotStarted,
                attempts: 0,
                last_failure: None,
            }),
        }
    }

    /// The misuse report. Out of line on 64-bit targets (where that keeps the
    /// inlined `poll` shortest); inlined elsewhere, where `poll` then keeps
    /// only its answer and code size counts most.
    #[cold]
    #[cfg_attr(target_pointer_width = "64", inline(never))]
    #[cfg_attr(not(target_pointer_width = "64"), inline)]
    fn misuse(&self, event: Event) -> Misuse {
        Misuse {
            event,
            phase: self.phase(),
            answer: self.answer_again(),
        }
    }

    #[cfg_attr(target_pointer_width = "64", inline)]
    fn begin_attempt(&mut self, number: u32, now: Instant) -> Action {
        let deadline = self.attempt_deadline(now);
        self.last_attempt = number;
        self.state = State::Attempting {
            number,
            started: now,
            deadline,
        };
        self.attempt_action(number, deadline)
    }

    /// The deadline of an attempt that starts at `now`: the attempt timeout
    /// from `now`, capped at the budget's end if the policy says so. A
    /// deadline past the last representable instant is no deadline at all.
    /// (A restored attempt's deadline must be this one.)
    #[inline(always)]
    pub(super) fn attempt_deadline(&self, now: Instant) -> Option<Instant> {
        let mut deadline = self.policy.attempt_timeout().and_then(|t| later(now, t));
        if self.policy.caps_attempt_to_budget() {
            if let Some(end) = self.budget_end_from_start() {
                deadline = Some(deadline.map_or(end, |d| d.min(end)));
            }
        }
        deadline
    }

    #[cfg_attr(target_pointer_width = "64", inline)]
    fn attempt_action(&self, number: u32, deadline: Option<Instant>) -> Action {
        Action::Attempt {
            number,
            deadline,
            replays_non_idempotent: number > 1 && !self.policy.is_idempotent(),
        }
    }

    /// Ends the call with a give-up, after the last attempt started and with
    /// the last failure seen: what every give-up reports (an attempt in flight
    /// or being retried is always the last one started, and a failure is
    /// noted before its give-up). Out of line on 32-bit targets, where code
    /// size counts most: it is reached from many places, never on the path of
    /// a retry (inlined on 64-bit ones, where that keeps the retry decision's
    /// instruction count).
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    fn give_up(&mut self, reason: GiveUpReason) -> Action {
        self.finish(Action::GiveUp(GiveUp {
            reason,
            attempts: self.last_attempt,
            last_failure: self.last_failure,
        }))
    }

    fn finish(&mut self, action: Action) -> Action {
        self.state = State::Finished(action);
        action
    }

    /// Attempt `number` failed at `now`. `timed_out` carries the attempt's timeout
    /// when the failure was a timeout.
    #[cfg_attr(target_pointer_width = "64", inline)]
    fn after_failure(
        &mut self,
        number: u32,
        failure: Failure,
        timed_out: Option<Duration>,
        now: Instant,
    ) -> Action {
        self.last_failure = Some(failure.kind());
        let retryable = failure.is_retryable();
        if !retryable || self.policy.is_last_attempt(number) {
            return self.give_up(match timed_out {
                Some(timeout) => GiveUpReason::TimedOut { timeout },
                None if retryable => GiveUpReason::Exhausted,
                None => GiveUpReason::Permanent,
            });
        }
        let (delay, reason) = self.next_delay(number, failure.hint());
        if self.policy.uses_retry_budget() {
            // A retry the time budget has no room for is not asked of the
            // retry budget (`sleep_or_attempt` checks again once granted).
            if !self.within_budget(sleep_end(now, delay)) {
                return self.give_up(GiveUpReason::Budget);
            }
            let after_timeout = timed_out.is_some();
            self.state = State::Withdrawing {
                retry: number,
                after_timeout,
                delay,
                reason,
            };
            return Action::Withdraw {
                retry: number,
                after_timeout,
            };
        }
        self.sleep_or_attempt(number.saturating_add(1), delay, reason, now)
    }

    /// The two transitions every retry takes, on 64-bit targets, under a
    /// policy that [retries plainly](RetryPolicy::retries_plainly) (no time
    /// budget, no retry budget): a retryable failure with no hint, not of the
    /// last attempt, answered with the curve's sleep where the policy has its
    /// delay in a few instructions ([`RetryMachine::plain_retry`]), and a due
    /// wake answered with the next attempt. The same state and answer as
    /// [`RetryMachine::step`], without its checks and with no call; `None`
    /// (the machine unchanged) for every other event, phase and delay.
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    fn plain_step(&mut self, event: &Event, now: Instant) -> Option<Action> {
        if !self.policy.retries_plainly() {
            return None;
        }
        let now = now.max(self.last_now);
        let action = match (&self.state, event) {
            (State::Attempting { number, .. }, Event::Failed(failure))
                if failure.is_retryable()
                    && failure.hint().is_none()
                    && !self.policy.is_last_attempt(*number) =>
            {
                let (number, kind) = (*number, failure.kind());
                self.plain_retry(number, kind, now)?
            }
            // With no budget, a due wake always starts the next attempt.
            (State::Sleeping { until, .. }, Event::Woke) if now >= *until => {
                let next = self.last_attempt.saturating_add(1);
                self.begin_attempt(next, now)
            }
            _ => return None,
        };
        self.last_now = now;
        Some(action)
    }

    /// [`RetryMachine::after_failure`] for a retryable failure of kind `kind`
    /// with no hint, of attempt `number` (not the last), under a policy that
    /// retries plainly: the curve's sleep, with nothing to check it against.
    /// `None` (the machine unchanged) where the policy's delay at this step
    /// takes more than its short forms.
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    fn plain_retry(&mut self, number: u32, kind: FailureKind, now: Instant) -> Option<Action> {
        let step = number.saturating_sub(self.curve_origin);
        let delay = self.policy.short_delay(number, step, self.seed)?;
        self.last_failure = Some(kind);
        self.previous_delay = delay;
        // Every curve delay is made from a `u64` of nanoseconds: it converts
        // back without a check. With no budget, a sleep past the last instant
        // ends there (`sleep_end`).
        let until = now
            .as_nanos()
            .checked_add(exact_nanos(delay))
            .map_or(Instant::MAX, Instant::from_nanos);
        Some(self.sleep_until(
            number.saturating_add(1),
            delay,
            until,
            SleepReason::Curve,
            now,
        ))
    }

    /// Sleeps `delay` before attempt `next`, or starts it at once if the delay is
    /// zero; gives up if the retry would reach or pass the time budget (time
    /// may have passed since the delay was chosen, while the retry budget was
    /// asked). Always inlined on 64-bit targets, where it is on the path of
    /// every retry decision.
    #[cfg_attr(target_pointer_width = "64", inline(always))]
    fn sleep_or_attempt(
        &mut self,
        next: u32,
        delay: Duration,
        reason: SleepReason,
        now: Instant,
    ) -> Action {
        // A sleep past the last instant ends there (`sleep_end`), which is
        // within no budget. Two forms of the same answer: on 64-bit targets
        // the sum that fits (every retry's) is checked as before the rule;
        // elsewhere, in less code, the end is saturated and then checked
        // (`within_budget(Instant::MAX)` is "no budget": a unit test holds it).
        #[cfg(target_pointer_width = "64")]
        let fits = match later(now, delay) {
            Some(until) => self.within_budget(until).then_some(until),
            None => self.policy.budget().is_none().then_some(Instant::MAX),
        };
        #[cfg(not(target_pointer_width = "64"))]
        let fits = {
            let until = sleep_end(now, delay);
            self.within_budget(until).then_some(until)
        };
        let Some(until) = fits else {
            return self.give_up(GiveUpReason::Budget);
        };
        self.sleep_until(next, delay, until, reason, now)
    }

    /// Sleeps `delay` (ending at `until`, already checked against the budget)
    /// before attempt `next`, or starts it at once if the delay is zero.
    #[cfg_attr(target_pointer_width = "64", inline)]
    fn sleep_until(
        &mut self,
        next: u32,
        delay: Duration,
        until: Instant,
        reason: SleepReason,
        now: Instant,
    ) -> Action {
        if delay.is_zero() {
            return self.begin_attempt(next, now);
        }
        self.state = State::Sleeping {
            until,
            delay,
            reason,
        };
        Action::Sleep {
            until,
            delay,
            reason,
        }
    }

    /// A breaker rejected attempt `number` before it ran; it admits again at `until`.
    fn after_rejection(&mut self, number: u32, until: Option<Instant>, now: Instant) -> Action {
        // The rejected attempt never ran: it does not count.
        self.last_attempt = number.saturating_sub(1);
        // The wait in nanoseconds (`Instant::saturating_duration_since`).
        let wait = until.map(|u| u.as_nanos().saturating_sub(now.as_nanos()));
        match self.policy.circuit_open() {
            CircuitOpen::GiveUp => self.give_up(GiveUpReason::CircuitOpen {
                wait: wait.map(from_nanos),
            }),
            CircuitOpen::Wait => {
                // With no known time, ask again after the curve's first delay; and
                // never a sleep due at or before now, whatever the breaker says.
                let delay = from_nanos(
                    wait.unwrap_or_else(|| self.policy.capped_nanos(1))
                        .max(1_000_000),
                );
                self.sleep_or_attempt(number, delay, SleepReason::CircuitOpen, now)
            }
        }
    }

    /// The delay before the retry after attempt `number`, and where it came from.
    #[cfg_attr(target_pointer_width = "64", inline)]
    fn next_delay(&mut self, number: u32, hint: Option<Hint>) -> (Duration, SleepReason) {
        let policy = &self.policy;
        let retry = number;
        let step = number.saturating_sub(self.curve_origin);
        // No hint (the usual failure) is the curve, without reading the hint mode.
        let hint = match hint {
            Some(hint) if !matches!(policy.hints(), HintMode::Ignore) => Some(hint),
            _ => None,
        };
        match (policy.hints(), hint) {
            (HintMode::Ignore, _) | (_, None) => {
                let delay = policy.curve_delay(retry, step, self.seed, self.previous_delay);
                self.previous_delay = delay;
                (delay, SleepReason::Curve)
            }
            (_, Some(Hint::Pushback(delay))) => {
                // Exactly as asked; the curve restarts after it.
                self.curve_origin = number;
                self.previous_delay = policy.backoff().initial();
                (delay, SleepReason::Hint)
            }
            (HintMode::Override { min, max }, Some(Hint::RetryAfter(hint))) => {
                (bounded(hint, min, max), SleepReason::Hint)
            }
            (HintMode::AtLeast { cap }, Some(Hint::RetryAfter(hint))) => {
                let honoured = hint.min(cap);
                // In nanoseconds (saturating, which keeps every order but
                // ties at the top): the hint, the capped curve value.
                let (h, curve) = (sat_nanos(honoured), policy.capped_nanos(step));
                let hinted = longer_than(honoured, h, curve);
                // The longer of the two as the base; the hint floors it and
                // lifts the ceiling.
                let delay = policy.hinted(h.max(curve), retry, self.seed, self.previous_delay, h);
                self.previous_delay = delay;
                let reason = if hinted {
                    SleepReason::Hint
                } else {
                    SleepReason::Curve
                };
                (delay, reason)
            }
        }
    }
}

/// The longest delay the arithmetic tells apart: `u64::MAX` nanoseconds.
const NANOS_TOP: Duration = Duration::from_nanos(u64::MAX);

/// Whether `d` (`n` nanoseconds, saturated) is longer than `curve`
/// nanoseconds, as `Duration`s compare: longer in nanoseconds, or, with the
/// curve at `u64::MAX` ns, longer than that (two durations past it both
/// saturate there).
#[inline(always)]
fn longer_than(d: Duration, n: u64, curve: u64) -> bool {
    n > curve || (curve == u64::MAX && d > NANOS_TOP)
}

/// When a sleep of `delay` asked at `now` ends: `now + delay`, or the last
/// representable instant when that lies past it (see
/// [the rule](crate::behaviour#time-budget-and-attempt-timeout)). Without a
/// time budget such a sleep goes ahead (a driver sleeps `delay`, as good as
/// forever); with one it never fits, as no budget ends after that instant.
/// Either way the answer does not depend on where the instants' origin lies.
#[inline]
pub(super) fn sleep_end(now: Instant, delay: Duration) -> Instant {
    later(now, delay).unwrap_or(Instant::MAX)
}

/// `now + d`, or `None` past the last representable instant, as
/// [`Instant::checked_add`] gives it: every sum of an instant and a duration
/// the machine makes goes through here, out of line on 32-bit targets (where converting a `Duration` to
/// nanoseconds is a long run of code, better written once) and inlined on
/// 64-bit ones.
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
#[cfg_attr(target_pointer_width = "64", inline)]
pub(crate) fn later(now: Instant, d: Duration) -> Option<Instant> {
    now.checked_add(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of time is within no budget, and within the lack of one:
    /// the two forms of `sleep_or_attempt` give the same answer.
    #[test]
    fn the_last_instant_is_within_a_budget_only_without_one() {
        for budget in [None, Some(Duration::from_nanos(1)), Some(Duration::MAX)] {
            let policy = RetryPolicy::builder()
                .budget(budget)
                .build()
                .unwrap_or_default();
            for start in [Instant::ORIGIN, Instant::from_secs(5), Instant::MAX] {
                let mut m = RetryMachine::new(&policy, 1);
                let _ = m.poll(Event::Start, start);
                assert_eq!(
                    m.within_budget(Instant::MAX),
                    budget.is_none(),
                    "{budget:?} {start}"
                );
            }
        }
    }

    /// The hint path's nanosecond comparison and bounds are the `Duration`
    /// ones: at the top of the range (where saturation ties values) and for
    /// random values of every width.
    #[test]
    fn the_hint_arithmetic_in_nanoseconds_is_the_duration_arithmetic() {
        let check = |d: Duration, curve: u64| {
            let (n, c) = (sat_nanos(d), Duration::from_nanos(curve));
            assert_eq!(longer_than(d, n, curve), d > c, "{d:?} {curve}");
            // The base, the ceiling and the floor: a maximum of two
            // saturated values is the saturated maximum.
            assert_eq!(n.max(curve), sat_nanos(d.max(c)), "{d:?} {curve}");
        };
        let tops = [
            Duration::MAX,
            Duration::new(u64::MAX, 0),
            NANOS_TOP + Duration::from_nanos(1),
            NANOS_TOP,
            NANOS_TOP - Duration::from_nanos(1),
            Duration::new(18_446_744_073, 999_999_999),
            Duration::new(18_446_744_074, 0),
            Duration::ZERO,
        ];
        for d in tops {
            for curve in [u64::MAX, u64::MAX - 1, 0, 1] {
                check(d, curve);
            }
        }
        let mut z = 11u64;
        for i in 0..200_000u32 {
            z = crate::retry::mix64(z);
            let curve = z >> (i % 64);
            z = crate::retry::mix64(z);
            let sub = u32::try_from(z % 1_000_000_000).unwrap_or(0);
            let d = Duration::new(z >> (i % 61), sub);
            check(d, curve);
            check(Duration::from_nanos(curve), curve);
            check(Duration::from_nanos(curve.saturating_add(1)), curve);
        }
    }
}
