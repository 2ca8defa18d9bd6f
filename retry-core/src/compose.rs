//! Glue between the [`RetryMachine`] and the shared machines that guard many calls.
//!
//! The retry machine stays single-threaded: it never holds a budget or a breaker.
//! It asks through its actions ([`Action::Withdraw`]) and hears back through events
//! ([`Event::Granted`], [`Event::Refused`], [`Event::Rejected`]). The functions here
//! make the matching decisions on the shared machines, so an adapter only has to
//! lock the shared value and pass the step through.

use core::borrow::Borrow;
use core::time::Duration;

use crate::breaker::{Admission, CallOutcome};
use crate::budget::{AttemptKind, BudgetInput, BudgetOutput, RetryBudget, RetryKind, Withdrawal};
use crate::classify::FailureKind;
use crate::retry::{Action, Event, RetryMachine, RetryPolicy};
use crate::time::Instant;

/// Tells a shared [`RetryBudget`] about one step of a call (the `event` the driver
/// sent and the `action` the machine answered at `now`) and, when the action is
/// [`Action::Withdraw`], makes the withdrawal and returns the event to send back
/// ([`Event::Granted`] or [`Event::Refused`]).
///
/// What the budget hears: the first attempt of a call (request-counting budgets),
/// every retryable failure (the gRPC throttle charges for them), every success with
/// whether a retry (and of which kind) produced it (the AWS quota refunds it), and
/// every withdrawal.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{feed_budget, Action, BudgetConfig, Event, Failure, Instant, RetryBudget, RetryMachine, RetryPolicy};
///
/// let policy = RetryPolicy::builder().use_retry_budget(true).build()?;
/// let mut budget = RetryBudget::new(BudgetConfig::aws_standard());
/// let mut m = RetryMachine::new(&policy, 1);
/// let now = Instant::ORIGIN;
/// let a = m.poll(Event::Start, now);
/// assert_eq!(feed_budget(&mut budget, &m, Event::Start, a, now), None);
/// let event = Event::Failed(Failure::retryable());
/// let a = m.poll(event, now);
/// assert!(matches!(a, Action::Withdraw { .. }));
/// assert_eq!(feed_budget(&mut budget, &m, event, a, now), Some(Event::Granted));
/// assert_eq!(budget.tokens().whole(), 495);
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
pub fn feed_budget<P: Borrow<RetryPolicy>>(
    budget: &mut RetryBudget,
    machine: &RetryMachine<P>,
    event: Event,
    action: Action,
    now: Instant,
) -> Option<Event> {
    budget_steps(machine, event, action)
        .apply(budget, now)
        .map(|w| {
            if w.is_granted() {
                Event::Granted
            } else {
                Event::Refused
            }
        })
}

/// What a retry budget hears about one step of a call (the `event` the driver
/// sent and the `action` the machine answered): the inputs
/// [`feed_budget`] applies, in order. A budget kept elsewhere (in a store shared
/// by a fleet) sends these instead of holding a [`RetryBudget`]; a withdrawal,
/// if any, is always the last input.
///
/// ```
/// use retry_core::{budget_steps, BudgetInput, Event, Failure, Instant, RetryKind, RetryMachine, RetryPolicy};
///
/// let policy = RetryPolicy::builder().use_retry_budget(true).build()?;
/// let mut m = RetryMachine::new(&policy, 1);
/// let now = Instant::ORIGIN;
/// let a = m.poll(Event::Start, now);
/// assert_eq!(budget_steps(&m, Event::Start, a).as_slice(), &[BudgetInput::FirstAttempt]);
/// let event = Event::Failed(Failure::retryable());
/// let a = m.poll(event, now);
/// assert_eq!(
///     budget_steps(&m, event, a).as_slice(),
///     &[BudgetInput::Failure, BudgetInput::Withdraw(RetryKind::Failure)]
/// );
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
#[must_use]
pub fn budget_steps<P: Borrow<RetryPolicy>>(
    machine: &RetryMachine<P>,
    event: Event,
    action: Action,
) -> BudgetSteps {
    let mut steps = BudgetSteps::NONE;
    match event {
        Event::Failed(f) if f.is_retryable() => steps.push(BudgetInput::Failure),
        Event::TimedOut if machine.policy().retries_timeouts() => steps.push(BudgetInput::Failure),
        Event::Succeeded => {
            let attempt = match action {
                Action::Done { attempts } if attempts > 1 => {
                    AttemptKind::Retry(retry_kind(machine.last_failure()))
                }
                _ => AttemptKind::First,
            };
            steps.push(BudgetInput::Success(attempt));
        }
        _ => {}
    }
    match action {
        Action::Attempt { number: 1, .. } if event == Event::Start => {
            steps.push(BudgetInput::FirstAttempt);
        }
        Action::Withdraw { after_timeout, .. } => {
            let kind = if after_timeout {
                RetryKind::Timeout
            } else {
                RetryKind::Failure
            };
            steps.push(BudgetInput::Withdraw(kind));
        }
        _ => {}
    }
    steps
}

/// The inputs one step of a call gives a retry budget: at most two (a failure or
/// a success, then a first attempt or a withdrawal), in the order they apply.
/// Made by [`budget_steps`] and [`hedge_budget_steps`](crate::hedge_budget_steps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BudgetSteps {
    inputs: [BudgetInput; 2],
    len: usize,
}

impl BudgetSteps {
    /// No input.
    pub const NONE: BudgetSteps = BudgetSteps {
        inputs: [BudgetInput::FirstAttempt; 2],
        len: 0,
    };

    pub(crate) fn push(&mut self, input: BudgetInput) {
        if let Some(free) = self.inputs.get_mut(self.len) {
            *free = input;
            self.len = self.len.saturating_add(1);
        }
    }

    /// The inputs, in order.
    #[must_use]
    pub fn as_slice(&self) -> &[BudgetInput] {
        self.inputs.get(..self.len).unwrap_or(&[])
    }

    /// Whether the last input is a withdrawal, whose answer the machine waits for.
    #[must_use]
    pub fn withdraws(&self) -> bool {
        matches!(self.as_slice().last(), Some(BudgetInput::Withdraw(_)))
    }

    /// Applies the inputs to `budget` at `now`, returning the withdrawal's answer
    /// if there was one.
    pub fn apply(&self, budget: &mut RetryBudget, now: Instant) -> Option<Withdrawal> {
        let mut answer = None;
        for input in self.as_slice() {
            if let BudgetOutput::Withdrawal(w) = budget.apply(*input, now) {
                answer = Some(w);
            }
        }
        answer
    }
}

/// The kind of retry that follows a failure of this kind.
fn retry_kind(last: Option<FailureKind>) -> RetryKind {
    match last {
        Some(FailureKind::Timeout) => RetryKind::Timeout,
        _ => RetryKind::Failure,
    }
}

/// What a circuit breaker records for an attempt, from the event the driver sends
/// the retry machine afterwards (`took` is how long the attempt ran):
///
/// - `Succeeded` is a success.
/// - A retryable failure or a timeout is a failure: the dependency is struggling.
/// - A permanent failure is a success for the breaker: the dependency answered,
///   and the fault lies with the request (a 404 must not open a circuit).
///   Except when the dependency did not answer at all: a permanent failure of
///   kind [`FailureKind::Timeout`], [`FailureKind::Connection`] or
///   [`FailureKind::NotSent`] (a POST whose connection dropped, which must not
///   be replayed, see [`replay_verdict`](crate::replay_verdict)) is a failure:
///   the retry verdict says what may be sent again, not how the dependency is.
/// - Anything else records nothing (`None`). A call `Cancelled` mid-attempt
///   abandoned its attempt: [`abandoned_outcome`] (or the caller's
///   [`AbandonedRule`]) says whether that is recorded or the permit is handed
///   back with [`CircuitBreaker::release`](crate::CircuitBreaker::release).
///
/// ```
/// use core::time::Duration;
/// use retry_core::{breaker_outcome, Event, Failure, FailureKind};
/// let took = Duration::from_millis(30);
/// assert!(breaker_outcome(Event::Succeeded, took).unwrap().success);
/// assert!(!breaker_outcome(Event::TimedOut, took).unwrap().success);
/// assert!(breaker_outcome(Event::Failed(Failure::permanent()), took).unwrap().success);
/// // A dropped connection is a failure even when it may not be retried.
/// let dropped = Failure::permanent().with_kind(FailureKind::Connection);
/// assert!(!breaker_outcome(Event::Failed(dropped), took).unwrap().success);
/// assert_eq!(breaker_outcome(Event::Cancelled, took), None);
/// ```
#[must_use]
pub fn breaker_outcome(event: Event, took: Duration) -> Option<CallOutcome> {
    let success = match event {
        Event::Succeeded => true,
        Event::Failed(f) => !f.is_retryable() && answered(f.kind()),
        Event::TimedOut => false,
        _ => return None,
    };
    Some(CallOutcome {
        success,
        duration: took,
    })
}

/// Whether a failure of this kind means the dependency answered (so that a
/// permanent one is the request's fault, not the dependency's).
pub(crate) const fn answered(kind: FailureKind) -> bool {
    !matches!(
        kind,
        FailureKind::Timeout | FailureKind::Connection | FailureKind::NotSent
    )
}

/// How a circuit breaker counts an *abandoned* attempt (one whose driver
/// stopped waiting for it: the caller's future was dropped by an outer
/// timeout, a `select!` or a task abort, the call was cancelled mid-attempt, or
/// the operation panicked). The adapters let the caller choose it (on a
/// `BreakerLayer`, on a `Retry`); [`AbandonedRule::outcome`] applies it.
///
/// A timeout *inside* the breaker (an attempt timeout of the retry policy, a
/// timeout layer between the breaker and the service) is not an abandonment:
/// it is a failure the breaker records. This rule is for what happens to a
/// call from outside.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum AbandonedRule {
    /// The default: a failure when the attempt was abandoned after running
    /// longer than the breaker's slow-call duration, or at or after its own
    /// deadline; released without an outcome when abandoned earlier (nothing is
    /// known about the dependency: the caller may simply have gone away).
    #[default]
    FailureIfSlow,
    /// Always a failure of the time it ran: the caller's own timeout is the
    /// only one the call has, and a dependency that runs into it is
    /// struggling (Polly's and Resilience4j's answer is to put the timeout
    /// inside the breaker; this is the setting for a stack that cannot).
    Failure,
    /// Never recorded: the permit is handed back, and a half-open probe frees
    /// its slot.
    Release,
}

impl AbandonedRule {
    /// The setting's name, as configs and logs spell it: `failure_if_slow`,
    /// `failure` or `release`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            AbandonedRule::FailureIfSlow => "failure_if_slow",
            AbandonedRule::Failure => "failure",
            AbandonedRule::Release => "release",
        }
    }

    /// What the breaker records for an attempt that began at `started` and was
    /// abandoned at `abandoned` (`deadline` is the attempt's own, if it had
    /// one; `slow_call_duration` the breaker's), under this rule: a failure
    /// that took as long as the attempt ran, or `None` (hand the permit back
    /// with [`CircuitBreaker::release`](crate::CircuitBreaker::release)).
    /// All three instants are on one clock; time going backwards counts as no
    /// time passing.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{AbandonedRule, CallOutcome, Instant};
    ///
    /// let slow = Duration::from_secs(60);
    /// let (t0, t) = (Instant::ORIGIN, Instant::from_millis(100));
    /// // An outer 100 ms timeout dropped the call:
    /// assert_eq!(AbandonedRule::FailureIfSlow.outcome(t0, t, None, slow), None);
    /// assert_eq!(
    ///     AbandonedRule::Failure.outcome(t0, t, None, slow),
    ///     Some(CallOutcome::failure(Duration::from_millis(100)))
    /// );
    /// assert_eq!(AbandonedRule::Release.outcome(t0, Instant::from_secs(90), None, slow), None);
    /// ```
    #[must_use]
    pub fn outcome(
        self,
        started: Instant,
        abandoned: Instant,
        deadline: Option<Instant>,
        slow_call_duration: Duration,
    ) -> Option<CallOutcome> {
        let ran = crate::retry::nanos::between(abandoned, started);
        match self {
            AbandonedRule::FailureIfSlow => {
                let past_deadline = deadline.is_some_and(|deadline| abandoned >= deadline);
                // "Slow" as the breaker itself judges it: strictly longer than the duration.
                (past_deadline || ran > slow_call_duration).then_some(CallOutcome::failure(ran))
            }
            AbandonedRule::Failure => Some(CallOutcome::failure(ran)),
            AbandonedRule::Release => None,
        }
    }

    /// What the breaker records for an abandoned attempt whose start was never
    /// taken (a blocking attempt that panics under a breaker that does not time
    /// calls), abandoned at `abandoned`: under the default rule a failure only
    /// at or after its deadline, if it has one; under [`AbandonedRule::Failure`]
    /// a failure of unmeasured duration (`Duration::ZERO`); under
    /// [`AbandonedRule::Release`] nothing.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{AbandonedRule, CallOutcome, Instant};
    ///
    /// let t = Instant::from_secs(2);
    /// assert_eq!(AbandonedRule::FailureIfSlow.unmeasured(t, None), None);
    /// assert_eq!(
    ///     AbandonedRule::FailureIfSlow.unmeasured(t, Some(Instant::from_secs(1))),
    ///     Some(CallOutcome::failure(Duration::ZERO))
    /// );
    /// assert_eq!(AbandonedRule::Failure.unmeasured(t, None), Some(CallOutcome::failure(Duration::ZERO)));
    /// ```
    #[must_use]
    pub fn unmeasured(self, abandoned: Instant, deadline: Option<Instant>) -> Option<CallOutcome> {
        let failed = match self {
            AbandonedRule::FailureIfSlow => deadline.is_some_and(|d| abandoned >= d),
            AbandonedRule::Failure => true,
            AbandonedRule::Release => false,
        };
        failed.then_some(CallOutcome::failure(Duration::ZERO))
    }
}

/// What a circuit breaker records for an *abandoned* attempt: one whose driver
/// stopped waiting for it before it ended, so no outcome will ever be reported.
/// That happens when the operation panics, when the attempt's future is dropped
/// (an outer timeout, a `select!`, a task abort), or when the call is cancelled
/// while the attempt runs.
///
/// The attempt began at `started` and was abandoned at `abandoned`; `deadline` is
/// the attempt's own deadline, if it had one; `slow_call_duration` is the
/// breaker's ([`BreakerConfig::slow_call_duration`](crate::BreakerConfig::slow_call_duration)).
/// All three instants are on one clock.
///
/// - Abandoned after running longer than the slow-call duration, or at or after
///   its deadline: a failure that took as long as it ran (and so a slow one once
///   past the slow-call duration). A dependency that hangs until its caller gives
///   up is struggling, and must be able to trip the breaker even when the caller's
///   timeout is the only thing that ends its calls.
/// - Abandoned earlier: `None`. Nothing is known about the dependency; hand the
///   permit back with [`CircuitBreaker::release`](crate::CircuitBreaker::release),
///   which frees a half-open probe's slot.
///
/// Time going backwards counts as no time passing. This is the default
/// [`AbandonedRule`]; the caller may choose another.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{abandoned_outcome, CallOutcome, Instant};
///
/// let slow = Duration::from_secs(2);
/// let t0 = Instant::ORIGIN;
/// // Dropped after 3 s, with no deadline: a slow failure.
/// assert_eq!(
///     abandoned_outcome(t0, Instant::from_secs(3), None, slow),
///     Some(CallOutcome::failure(Duration::from_secs(3)))
/// );
/// // Dropped after 1 s, before its 5 s deadline: nothing is recorded.
/// let deadline = Some(Instant::from_secs(5));
/// assert_eq!(abandoned_outcome(t0, Instant::from_secs(1), deadline, slow), None);
/// // Dropped at its 1 s deadline: a failure (not slow).
/// assert_eq!(
///     abandoned_outcome(t0, Instant::from_secs(1), Some(Instant::from_secs(1)), slow),
///     Some(CallOutcome::failure(Duration::from_secs(1)))
/// );
/// ```
#[must_use]
pub fn abandoned_outcome(
    started: Instant,
    abandoned: Instant,
    deadline: Option<Instant>,
    slow_call_duration: Duration,
) -> Option<CallOutcome> {
    AbandonedRule::FailureIfSlow.outcome(started, abandoned, deadline, slow_call_duration)
}

/// The event to send the retry machine when a breaker refuses an attempt
/// (`None` when it admitted it).
#[must_use]
pub fn rejection(admission: &Admission) -> Option<Event> {
    match *admission {
        Admission::Rejected { until, .. } => Some(Event::Rejected { until }),
        Admission::Admitted { .. } => None,
    }
}

/// How an attempt ended, as the `outcome` label of the `retry.attempt.total`
/// metric (see [the rules](crate::behaviour#streams-and-metrics)) reads it:
/// one outcome per attempt, every attempt counted once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// It succeeded.
    Success,
    /// It failed with a failure a retry may fix (whether or not a retry
    /// follows: the call may also have run out of attempts, time or budget).
    Failure,
    /// It failed with a failure no retry can fix (a 400, a non-idempotent
    /// request whose connection dropped): the call ended on it.
    Permanent,
    /// It ran past its deadline.
    Timeout,
    /// It never finished: the call was cancelled, or abandoned (its future
    /// dropped by an outer timeout, a `select!` or a task abort; the operation
    /// panicked). A call cancelled between attempts counts its next attempt so.
    Aborted,
    /// A circuit breaker turned it away: it never ran.
    Rejected,
}

impl AttemptOutcome {
    /// Every outcome, in the order the metric's description names them.
    pub const ALL: [AttemptOutcome; 6] = [
        AttemptOutcome::Success,
        AttemptOutcome::Failure,
        AttemptOutcome::Permanent,
        AttemptOutcome::Timeout,
        AttemptOutcome::Aborted,
        AttemptOutcome::Rejected,
    ];

    /// The metric label: `success`, `failure`, `permanent`, `timeout`,
    /// `aborted` or `rejected`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            AttemptOutcome::Success => "success",
            AttemptOutcome::Failure => "failure",
            AttemptOutcome::Permanent => "permanent",
            AttemptOutcome::Timeout => "timeout",
            AttemptOutcome::Aborted => "aborted",
            AttemptOutcome::Rejected => "rejected",
        }
    }
}

/// The outcome of the attempt that ended with `event`; `None` when the event
/// does not end an attempt (`Start`, `Woke`, a budget's answer).
///
/// - `Succeeded`: success. `Failed`: failure when a retry may fix it,
///   permanent otherwise, whatever the call does next. `TimedOut`: timeout.
/// - `Cancelled`: aborted, in any phase (during an attempt, or during a sleep
///   or before the first attempt, where it stands for the attempt that will
///   not run). An attempt abandoned by a dropped future is aborted too; no
///   event reaches the machine for it, and the adapters count it when they
///   drop it.
/// - `Rejected`: rejected, every time a breaker turns an attempt away, whether
///   the call then waits for the breaker or gives up.
///
/// ```
/// use retry_core::{attempt_outcome, AttemptOutcome, Event, Failure};
/// assert_eq!(attempt_outcome(Event::Succeeded), Some(AttemptOutcome::Success));
/// assert_eq!(attempt_outcome(Event::Failed(Failure::retryable())), Some(AttemptOutcome::Failure));
/// assert_eq!(attempt_outcome(Event::Failed(Failure::permanent())), Some(AttemptOutcome::Permanent));
/// assert_eq!(attempt_outcome(Event::Cancelled), Some(AttemptOutcome::Aborted));
/// assert_eq!(attempt_outcome(Event::Woke), None);
/// ```
#[must_use]
pub const fn attempt_outcome(event: Event) -> Option<AttemptOutcome> {
    Some(match event {
        Event::Succeeded => AttemptOutcome::Success,
        Event::Failed(failure) if failure.is_retryable() => AttemptOutcome::Failure,
        Event::Failed(_) => AttemptOutcome::Permanent,
        Event::TimedOut => AttemptOutcome::Timeout,
        Event::Cancelled => AttemptOutcome::Aborted,
        Event::Rejected { .. } => AttemptOutcome::Rejected,
        _ => return None,
    })
}
