//! The [`HedgeMachine`]: every hedging decision, as a pure state machine.

use core::fmt;
use core::time::Duration;

use super::copies::{Copies, MAX_COPIES};
use super::latency::LatencyHistogram;
use super::policy::{HedgeMode, HedgePolicy};
use crate::classify::{Failure, FailureKind};
use crate::hint::Hint;
use crate::retry::{GiveUp, GiveUpReason};
use crate::time::{DisplayDuration as D, Instant};

/// Something that happened, told to the machine with [`HedgeMachine::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum HedgeEvent {
    /// The call begins. `now` becomes the start of the call's timeout.
    Start,
    /// The driver started the copy [`HedgeAction::Launch`] asked for (a breaker,
    /// if any, admitted it).
    Launched {
        /// The copy's number.
        copy: u32,
    },
    /// A circuit breaker refused the copy [`HedgeAction::Launch`] asked for; it
    /// never ran. It admits again at `until` (`None`: not known).
    Rejected {
        /// The copy's number.
        copy: u32,
        /// When the breaker will next admit, if known.
        until: Option<Instant>,
    },
    /// The retry budget granted the withdrawal [`HedgeAction::Withdraw`] asked for.
    Granted,
    /// The retry budget refused the withdrawal [`HedgeAction::Withdraw`] asked for.
    Refused,
    /// A copy in flight answered with success.
    Succeeded {
        /// The copy's number.
        copy: u32,
    },
    /// A copy in flight failed, as the caller's classifier judged it (with any
    /// server hint).
    Failed {
        /// The copy's number.
        copy: u32,
        /// How it failed.
        failure: Failure,
    },
    /// The wait [`HedgeAction::Wait`] asked for reached its `until`, or the
    /// driver woke early.
    Woke,
    /// The driver stopped the copies [`HedgeAction::Cancel`] named; none of them
    /// will report.
    Stopped,
    /// The caller cancelled the whole call. Final.
    Cancelled,
}

impl fmt::Display for HedgeEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HedgeEvent::Start => f.write_str("start"),
            HedgeEvent::Launched { copy } => write!(f, "launched #{copy}"),
            HedgeEvent::Rejected {
                copy,
                until: Some(until),
            } => write!(f, "rejected #{copy} until {until}"),
            HedgeEvent::Rejected { copy, until: None } => write!(f, "rejected #{copy}"),
            HedgeEvent::Granted => f.write_str("granted"),
            HedgeEvent::Refused => f.write_str("refused"),
            HedgeEvent::Succeeded { copy } => write!(f, "#{copy} succeeded"),
            HedgeEvent::Failed { copy, failure } => write!(f, "#{copy} failed({failure})"),
            HedgeEvent::Woke => f.write_str("woke"),
            HedgeEvent::Stopped => f.write_str("stopped"),
            HedgeEvent::Cancelled => f.write_str("cancelled"),
        }
    }
}

/// What the driver must do next. Every variant says which event to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[must_use = "an action tells the driver what to do next"]
pub enum HedgeAction {
    /// Start copy `copy` of the operation beside those in flight, then send
    /// [`HedgeEvent::Launched`] at once (the copy's outcome comes later). A
    /// driver with a circuit breaker asks it first and sends
    /// [`HedgeEvent::Rejected`] instead if it refuses. [`HedgeEvent::Cancelled`]
    /// is accepted too (the copy is then not started).
    Launch {
        /// The copy's number; the first is 1, and copies are numbered in the
        /// order they are sent.
        copy: u32,
        /// The operation is marked non-idempotent (and the caller allowed it to
        /// be hedged): this copy repeats it. Emit a warning before it starts.
        replays_non_idempotent: bool,
    },
    /// Withdraw one retry from the shared retry budget for copy `copy` (only when
    /// the policy [uses one](crate::HedgePolicy::uses_retry_budget)), then send
    /// [`HedgeEvent::Granted`] or [`HedgeEvent::Refused`]
    /// ([`feed_hedge_budget`](crate::feed_hedge_budget) does both). A driver
    /// given no budget answers `Granted`.
    Withdraw {
        /// The copy the withdrawal is for (2 or later).
        copy: u32,
    },
    /// Wait for the first of: a copy in flight finishing (send
    /// [`HedgeEvent::Succeeded`] or [`HedgeEvent::Failed`] for it), `until`
    /// passing (send [`HedgeEvent::Woke`]), or the caller cancelling (send
    /// [`HedgeEvent::Cancelled`]). `until` is always after the `now` that produced
    /// it; `None` means only the copies' outcomes can end the wait. Waking early
    /// is harmless: the same wait is asked again.
    Wait {
        /// When the wait ends on its own, if ever.
        until: Option<Instant>,
        /// What happens at `until`.
        reason: WaitReason,
    },
    /// Stop the copies in `copies` (drop their futures, abort their requests,
    /// release their breaker permits without an outcome), then send
    /// [`HedgeEvent::Stopped`]. They lost, or the call is over; their outcomes
    /// must not be reported. The final action follows.
    Cancel {
        /// The copies to stop; never empty.
        copies: Copies,
    },
    /// Stop: copy `copy` won; return its answer. Final; any later event gets the
    /// same answer.
    Done {
        /// The winning copy.
        copy: u32,
        /// How many copies were sent in all.
        launched: u32,
        /// How long the winning copy took, from its launch to its answer: the
        /// sample to [record](crate::LatencyHistogram::record) for an adaptive
        /// delay.
        latency: Duration,
    },
    /// Stop: the call failed for good. `attempts` counts the copies sent. Final;
    /// any later event gets the same answer.
    GiveUp(GiveUp),
}

impl HedgeAction {
    /// Whether this action ends the call ([`HedgeAction::Done`] or
    /// [`HedgeAction::GiveUp`]).
    #[must_use]
    pub const fn is_terminal(&self) -> bool {
        matches!(self, HedgeAction::Done { .. } | HedgeAction::GiveUp(_))
    }
}

impl fmt::Display for HedgeAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HedgeAction::Launch {
                copy,
                replays_non_idempotent,
            } => {
                write!(f, "launch #{copy}")?;
                if replays_non_idempotent {
                    f.write_str(" [warning: repeats a non-idempotent operation]")?;
                }
                Ok(())
            }
            HedgeAction::Withdraw { copy } => write!(f, "withdraw for #{copy}"),
            HedgeAction::Wait {
                until: Some(until),
                reason,
            } => write!(f, "wait until {until} ({reason})"),
            HedgeAction::Wait { until: None, .. } => f.write_str("wait for an answer"),
            HedgeAction::Cancel { copies } => write!(f, "cancel {copies}"),
            HedgeAction::Done {
                copy,
                launched,
                latency,
            } => write!(f, "done: #{copy} won in {} ({launched} sent)", D(latency)),
            HedgeAction::GiveUp(g) => fmt::Display::fmt(&g, f),
        }
    }
}

/// What happens when a [`HedgeAction::Wait`] reaches its `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum WaitReason {
    /// The hedge delay ends: the next copy is due.
    Hedge,
    /// A server's hint ends: the next copy is due exactly then.
    Hint,
    /// The call's timeout ends: the copies in flight will be cancelled.
    Timeout,
    /// Nothing is timed: only an answer ends the wait (`until` is `None`).
    Answer,
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitReason::Hedge => "next copy due",
            WaitReason::Hint => "next copy due after the server's hint",
            WaitReason::Timeout => "timeout",
            WaitReason::Answer => "an answer",
        })
    }
}

/// Where the machine is: what the pending action is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HedgePhase {
    /// Waiting for [`HedgeEvent::Start`].
    Idle,
    /// Waiting for [`HedgeEvent::Launched`] or [`HedgeEvent::Rejected`].
    Launching,
    /// Waiting for the retry budget's answer.
    Withdrawing,
    /// Copies in flight or a copy due later: waiting for an answer or the time.
    Waiting,
    /// Waiting for [`HedgeEvent::Stopped`].
    Cancelling,
    /// Done or gave up; final.
    Finished,
}

/// An event that makes no sense in the machine's phase. The machine is
/// unchanged; [`HedgeMisuse::answer`] is what [`HedgeMachine::poll`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event `{event}` makes no sense while {phase:?}; the machine is unchanged")]
pub struct HedgeMisuse {
    /// The event that was refused.
    pub event: HedgeEvent,
    /// The phase it arrived in.
    pub phase: HedgePhase,
    /// The pending action, answered again.
    pub answer: HedgeAction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Launching {
        copy: u32,
    },
    Withdrawing {
        copy: u32,
    },
    Waiting {
        until: Option<Instant>,
        reason: WaitReason,
    },
    Cancelling {
        copies: Copies,
        then: HedgeAction,
    },
    Finished(HedgeAction),
}

/// Every hedging decision for one call, as a pure state machine: a small `Copy`
/// value (no clock, no allocation, no panic) that is told what happened with
/// [`HedgeMachine::poll`] and answers what to do next.
///
/// The rules, all from the [`HedgePolicy`]:
///
/// - Copy 1 is sent at [`HedgeEvent::Start`]. The next copy is due: in the
///   latency mode, the hedge delay (with jitter) after the last one was sent; in
///   the parallel mode, at once; in the fallback mode, never on a timer.
/// - A non-fatal failure makes the next copy due at once, or, when it carries a
///   server hint (pushback or Retry-After), exactly the hint later.
/// - A due copy is sent only while fewer than
///   [`max_in_flight`](HedgePolicy::max_in_flight) run and fewer than
///   [`allowed_attempts`](HedgePolicy::allowed_attempts) were sent; otherwise it
///   waits for a slot.
/// - With a retry budget, every copy after the first is withdrawn first
///   ([`HedgeAction::Withdraw`]). A refusal stops further copies; those in
///   flight run on, and the call gives up with
///   [`GiveUpReason::RetryBudget`] only when none is left. A breaker's
///   rejection of a copy stops further copies in the same way (giving up with
///   [`GiveUpReason::CircuitOpen`]).
/// - The first success wins: the others are cancelled ([`HedgeAction::Cancel`])
///   and the call is [`HedgeAction::Done`]. A permanent failure ends the call
///   the same way with [`GiveUpReason::Permanent`]; so do the caller's
///   cancellation ([`GiveUpReason::Cancelled`]) and the call's timeout
///   ([`GiveUpReason::TimedOut`]). When every copy allowed has failed, the call
///   gives up with [`GiveUpReason::Exhausted`] and the last failure.
///
/// # Misuse
///
/// An event the phase does not expect (an outcome for a copy not in flight, a
/// late outcome of a cancelled copy, `Woke` while launching, anything after the
/// end) is refused: [`HedgeMachine::try_poll`] returns a typed [`HedgeMisuse`],
/// [`HedgeMachine::poll`] answers the pending action again (or
/// [`GiveUpReason::NotStarted`] before `Start`), and the machine is unchanged.
/// Time going backwards counts as no time passing.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{HedgeAction, HedgeEvent, HedgeMachine, HedgePolicy, Instant};
///
/// let policy = HedgePolicy::builder()
///     .max_attempts(2)
///     .fixed_delay(Duration::from_millis(50))
///     .build()?;
/// let mut m = HedgeMachine::new(&policy, 7);
/// let at = Instant::from_millis;
/// assert!(matches!(m.poll(HedgeEvent::Start, at(0)), HedgeAction::Launch { copy: 1, .. }));
/// // Copy 1 is slow: at 50 ms the second copy is due.
/// let wait = m.poll(HedgeEvent::Launched { copy: 1 }, at(0));
/// assert!(matches!(wait, HedgeAction::Wait { until: Some(t), .. } if t == at(50)));
/// assert!(matches!(m.poll(HedgeEvent::Woke, at(50)), HedgeAction::Launch { copy: 2, .. }));
/// let _ = m.poll(HedgeEvent::Launched { copy: 2 }, at(50));
/// // Copy 2 answers first: copy 1 is cancelled, copy 2 wins.
/// let cancel = m.poll(HedgeEvent::Succeeded { copy: 2 }, at(60));
/// assert!(matches!(cancel, HedgeAction::Cancel { copies } if copies.iter().eq([1])));
/// let done = m.poll(HedgeEvent::Stopped, at(60));
/// assert_eq!(done, HedgeAction::Done { copy: 2, launched: 2, latency: Duration::from_millis(10) });
/// # Ok::<(), retry_core::HedgePolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HedgeMachine {
    policy: HedgePolicy,
    seed: u64,
    /// The hedge delay before jitter, fixed when the machine was made.
    delay: Duration,
    state: State,
    start: Instant,
    last_now: Instant,
    in_flight: Copies,
    /// Copies sent so far (the number of the last one).
    launched: u32,
    /// When each copy was sent, by copy number - 1.
    launched_at: [Instant; MAX_COPIES as usize],
    /// When the next copy is due, if one is.
    next_due: Option<Instant>,
    /// The next copy's due time came from a server hint.
    due_by_hint: bool,
    /// Why no further copy will be sent, if something stopped them.
    halted: Option<GiveUpReason>,
    last_failure: Option<FailureKind>,
}

impl HedgeMachine {
    /// A machine for `policy` (copied in) whose jitter is keyed on `seed`. An
    /// adaptive delay uses its fallback: see [`HedgeMachine::with_latencies`].
    #[must_use]
    pub fn new(policy: &HedgePolicy, seed: u64) -> HedgeMachine {
        HedgeMachine::with_latencies(policy, seed, &LatencyHistogram::new())
    }

    /// A machine whose adaptive delay (if the policy has one) is read from
    /// `latencies` now, once for the whole call.
    #[must_use]
    pub fn with_latencies(
        policy: &HedgePolicy,
        seed: u64,
        latencies: &LatencyHistogram,
    ) -> HedgeMachine {
        HedgeMachine {
            policy: *policy,
            seed,
            delay: policy.delay().resolve(latencies),
            state: State::Idle,
            start: Instant::ORIGIN,
            last_now: Instant::ORIGIN,
            in_flight: Copies::EMPTY,
            launched: 0,
            launched_at: [Instant::ORIGIN; MAX_COPIES as usize],
            next_due: None,
            due_by_hint: false,
            halted: None,
            last_failure: None,
        }
    }

    /// The policy the machine follows.
    #[must_use]
    pub const fn policy(&self) -> &HedgePolicy {
        &self.policy
    }

    /// The jitter seed.
    #[must_use]
    pub const fn seed(&self) -> u64 {
        self.seed
    }

    /// The hedge delay this call uses, before jitter: the fixed delay, or the
    /// adaptive one as read when the machine was made.
    #[must_use]
    pub const fn hedge_delay(&self) -> Duration {
        self.delay
    }

    /// The current phase.
    #[must_use]
    pub const fn phase(&self) -> HedgePhase {
        match self.state {
            State::Idle => HedgePhase::Idle,
            State::Launching { .. } => HedgePhase::Launching,
            State::Withdrawing { .. } => HedgePhase::Withdrawing,
            State::Waiting { .. } => HedgePhase::Waiting,
            State::Cancelling { .. } => HedgePhase::Cancelling,
            State::Finished(_) => HedgePhase::Finished,
        }
    }

    /// How many copies have been sent.
    #[must_use]
    pub const fn launched(&self) -> u32 {
        self.launched
    }

    /// The copies running now (those being cancelled included, until
    /// [`HedgeEvent::Stopped`]).
    #[must_use]
    pub const fn in_flight(&self) -> Copies {
        self.in_flight
    }

    /// When copy `copy` was sent, if it was.
    #[must_use]
    pub fn launched_at(&self, copy: u32) -> Option<Instant> {
        if copy == 0 || copy > self.launched {
            return None;
        }
        let index = usize::try_from(copy.saturating_sub(1)).ok()?;
        self.launched_at.get(index).copied()
    }

    /// When the next copy is due, if one is and nothing has stopped further
    /// copies (it may be due already and wait for a slot).
    #[must_use]
    pub const fn next_launch_at(&self) -> Option<Instant> {
        if self.halted.is_some()
            || self.launched >= self.policy.allowed_attempts()
            || matches!(self.state, State::Finished(_) | State::Cancelling { .. })
        {
            None
        } else {
            self.next_due
        }
    }

    /// The kind of the last failure seen, if any.
    #[must_use]
    pub const fn last_failure(&self) -> Option<FailureKind> {
        self.last_failure
    }

    /// When the call started (`None` before [`HedgeEvent::Start`]).
    #[must_use]
    pub const fn started_at(&self) -> Option<Instant> {
        match self.state {
            State::Idle => None,
            _ => Some(self.start),
        }
    }

    /// When the call's timeout ends, if the policy has one and the call started.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        self.started_at()?;
        self.deadline_from_start()
    }

    /// The end of the timeout, from the start; a deadline past the last
    /// representable instant is no deadline at all.
    fn deadline_from_start(&self) -> Option<Instant> {
        self.start.checked_add(self.policy.timeout()?)
    }

    /// The action the machine is waiting on the driver to carry out (`None`
    /// before [`HedgeEvent::Start`]).
    #[must_use]
    pub fn pending(&self) -> Option<HedgeAction> {
        Some(match self.state {
            State::Idle => return None,
            State::Launching { copy } => self.launch_action(copy),
            State::Withdrawing { copy } => HedgeAction::Withdraw { copy },
            State::Waiting { until, reason } => HedgeAction::Wait { until, reason },
            State::Cancelling { copies, .. } => HedgeAction::Cancel { copies },
            State::Finished(action) => action,
        })
    }

    /// The next instant at which the driver must act without another event: the
    /// end of the current wait.
    #[must_use]
    pub const fn next_deadline(&self) -> Option<Instant> {
        match self.state {
            State::Waiting { until, .. } => until,
            _ => None,
        }
    }

    /// Tells the machine what happened at `now` and returns what to do next.
    /// Misuse is answered as the type's docs say and changes nothing.
    pub fn poll(&mut self, event: HedgeEvent, now: Instant) -> HedgeAction {
        match self.try_poll(event, now) {
            Ok(action) => action,
            Err(misuse) => misuse.answer,
        }
    }

    /// Like [`HedgeMachine::poll`], but an event that makes no sense now is
    /// returned as a typed [`HedgeMisuse`] (the machine is unchanged).
    ///
    /// # Errors
    /// [`HedgeMisuse`] when the event does not fit the current phase.
    pub fn try_poll(
        &mut self,
        event: HedgeEvent,
        now: Instant,
    ) -> Result<HedgeAction, HedgeMisuse> {
        let now = now.max(self.last_now);
        let action = match (self.state, event) {
            (State::Idle, HedgeEvent::Start) => {
                self.start = now;
                self.next_due = Some(now);
                self.decide(now)
            }
            (State::Idle, HedgeEvent::Cancelled) => self.finish(HedgeAction::GiveUp(GiveUp {
                reason: GiveUpReason::Cancelled,
                attempts: 0,
                last_failure: None,
            })),
            (State::Launching { copy }, HedgeEvent::Launched { copy: c }) if c == copy => {
                self.launched_copy(copy, now)
            }
            (State::Launching { copy }, HedgeEvent::Rejected { copy: c, until }) if c == copy => {
                let wait = until.map(|u| u.saturating_duration_since(now));
                self.halted = Some(GiveUpReason::CircuitOpen { wait });
                self.decide(now)
            }
            (State::Withdrawing { copy }, HedgeEvent::Granted) => {
                if self.timed_out(now) {
                    self.decide(now)
                } else {
                    self.launch(copy)
                }
            }
            (State::Withdrawing { .. }, HedgeEvent::Refused) => {
                self.halted = Some(GiveUpReason::RetryBudget);
                self.decide(now)
            }
            (State::Waiting { .. }, HedgeEvent::Succeeded { copy })
                if self.in_flight.contains(copy) =>
            {
                self.in_flight = self.in_flight.without(copy);
                let sent = self.launched_at(copy).unwrap_or(now);
                let done = HedgeAction::Done {
                    copy,
                    launched: self.launched,
                    latency: now.saturating_duration_since(sent),
                };
                self.end(done)
            }
            (State::Waiting { .. }, HedgeEvent::Failed { copy, failure })
                if self.in_flight.contains(copy) =>
            {
                self.in_flight = self.in_flight.without(copy);
                self.after_failure(failure, now)
            }
            (State::Waiting { .. }, HedgeEvent::Woke) => self.decide(now),
            (
                State::Launching { .. } | State::Withdrawing { .. } | State::Waiting { .. },
                HedgeEvent::Cancelled,
            ) => self.end(self.give_up(GiveUpReason::Cancelled)),
            (State::Cancelling { then, .. }, HedgeEvent::Stopped) => {
                self.in_flight = Copies::EMPTY;
                self.finish(then)
            }
            (_, event) => return Err(self.misuse(event)),
        };
        self.last_now = now;
        Ok(action)
    }

    fn misuse(&self, event: HedgeEvent) -> HedgeMisuse {
        let answer = self.pending().unwrap_or(HedgeAction::GiveUp(GiveUp {
            reason: GiveUpReason::NotStarted,
            attempts: 0,
            last_failure: None,
        }));
        HedgeMisuse {
            event,
            phase: self.phase(),
            answer,
        }
    }

    fn timed_out(&self, now: Instant) -> bool {
        self.deadline_from_start().is_some_and(|end| now >= end)
    }

    fn give_up(&self, reason: GiveUpReason) -> HedgeAction {
        HedgeAction::GiveUp(GiveUp {
            reason,
            attempts: self.launched,
            last_failure: self.last_failure,
        })
    }

    fn finish(&mut self, action: HedgeAction) -> HedgeAction {
        self.state = State::Finished(action);
        action
    }

    /// Ends the call with `then`, cancelling the copies in flight first if any.
    fn end(&mut self, then: HedgeAction) -> HedgeAction {
        if self.in_flight.is_empty() {
            return self.finish(then);
        }
        let copies = self.in_flight;
        self.state = State::Cancelling { copies, then };
        HedgeAction::Cancel { copies }
    }

    fn launch_action(&self, copy: u32) -> HedgeAction {
        HedgeAction::Launch {
            copy,
            replays_non_idempotent: copy > 1 && !self.policy.is_idempotent(),
        }
    }

    fn launch(&mut self, copy: u32) -> HedgeAction {
        self.state = State::Launching { copy };
        self.launch_action(copy)
    }

    /// Copy `copy` was sent at `now`.
    fn launched_copy(&mut self, copy: u32, now: Instant) -> HedgeAction {
        self.in_flight = self.in_flight.with(copy);
        self.launched = copy;
        if let Some(slot) = usize::try_from(copy.saturating_sub(1))
            .ok()
            .and_then(|i| self.launched_at.get_mut(i))
        {
            *slot = now;
        }
        let next = copy.saturating_add(1);
        self.next_due = match self.policy.mode() {
            HedgeMode::Latency => {
                let delay = self.policy.jittered(self.delay, next, self.seed);
                Some(now.saturating_add(delay))
            }
            HedgeMode::Parallel => Some(now),
            HedgeMode::Fallback => None,
        };
        self.due_by_hint = false;
        self.decide(now)
    }

    /// A copy failed at `now` (it is already out of the in-flight set).
    fn after_failure(&mut self, failure: Failure, now: Instant) -> HedgeAction {
        self.last_failure = Some(failure.kind());
        if !failure.is_retryable() {
            return self.end(self.give_up(GiveUpReason::Permanent));
        }
        match failure.hint() {
            Some(Hint::Pushback(delay) | Hint::RetryAfter(delay)) => {
                self.next_due = Some(now.saturating_add(delay));
                self.due_by_hint = true;
            }
            None => {
                self.next_due = Some(now);
                self.due_by_hint = false;
            }
        }
        self.decide(now)
    }

    /// What to do at `now`, from the copies in flight, the next due time, the
    /// limits and the timeout. Asking twice with nothing changed gives the same
    /// answer.
    fn decide(&mut self, now: Instant) -> HedgeAction {
        if self.timed_out(now) {
            let timeout = self.policy.timeout().unwrap_or(Duration::ZERO);
            return self.end(self.give_up(GiveUpReason::TimedOut { timeout }));
        }
        let may_send = self.halted.is_none() && self.launched < self.policy.allowed_attempts();
        let slot_free = self.in_flight.len() < self.policy.max_in_flight();
        if may_send && slot_free && self.next_due.is_some_and(|due| due <= now) {
            let copy = self.launched.saturating_add(1);
            if copy > 1 && self.policy.uses_retry_budget() {
                self.state = State::Withdrawing { copy };
                return HedgeAction::Withdraw { copy };
            }
            return self.launch(copy);
        }
        let next = if may_send {
            self.next_due.filter(|due| *due > now)
        } else {
            None
        };
        if self.in_flight.is_empty() && next.is_none() {
            // Nothing runs and nothing will be sent: the call has failed.
            let reason = self.halted.unwrap_or(GiveUpReason::Exhausted);
            return self.finish(self.give_up(reason));
        }
        let next = next.map(|due| {
            let reason = if self.due_by_hint {
                WaitReason::Hint
            } else {
                WaitReason::Hedge
            };
            (due, reason)
        });
        let timeout = self
            .deadline_from_start()
            .map(|end| (end, WaitReason::Timeout));
        let (until, reason) = match (next, timeout) {
            (Some(n), Some(t)) => {
                let (at, reason) = if t.0 <= n.0 { t } else { n };
                (Some(at), reason)
            }
            (Some((at, reason)), None) | (None, Some((at, reason))) => (Some(at), reason),
            (None, None) => (None, WaitReason::Answer),
        };
        self.state = State::Waiting { until, reason };
        HedgeAction::Wait { until, reason }
    }
}
