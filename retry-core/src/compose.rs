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
/// - Anything else records nothing (`None`). A call `Cancelled` mid-attempt
///   abandoned its attempt: [`abandoned_outcome`] says whether that is recorded
///   or the permit is handed back with
///   [`CircuitBreaker::release`](crate::CircuitBreaker::release).
///
/// ```
/// use core::time::Duration;
/// use retry_core::{breaker_outcome, Event, Failure};
/// let took = Duration::from_millis(30);
/// assert!(breaker_outcome(Event::Succeeded, took).unwrap().success);
/// assert!(!breaker_outcome(Event::TimedOut, took).unwrap().success);
/// assert!(breaker_outcome(Event::Failed(Failure::permanent()), took).unwrap().success);
/// assert_eq!(breaker_outcome(Event::Cancelled, took), None);
/// ```
#[must_use]
pub fn breaker_outcome(event: Event, took: Duration) -> Option<CallOutcome> {
    let success = match event {
        Event::Succeeded => true,
        Event::Failed(f) => !f.is_retryable(),
        Event::TimedOut => false,
        _ => return None,
    };
    Some(CallOutcome {
        success,
        duration: took,
    })
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
/// Time going backwards counts as no time passing.
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
    let ran = crate::retry::nanos::between(abandoned, started);
    let past_deadline = deadline.is_some_and(|deadline| abandoned >= deadline);
    // "Slow" as the breaker itself judges it: strictly longer than the duration.
    (past_deadline || ran > slow_call_duration).then_some(CallOutcome::failure(ran))
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
/// metric (see [the rules](crate::behaviour#streams-and-metrics)) reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// It succeeded.
    Success,
    /// It failed and the call goes on (a retry follows, or the budget is asked).
    Failure,
    /// It failed and the call gave up on it: retries, time or retry budget ran out.
    Exhausted,
    /// The call stopped for another reason: a permanent failure, a cancellation,
    /// an open circuit.
    Aborted,
}

impl AttemptOutcome {
    /// The metric label: `success`, `failure`, `exhausted` or `aborted`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            AttemptOutcome::Success => "success",
            AttemptOutcome::Failure => "failure",
            AttemptOutcome::Exhausted => "exhausted",
            AttemptOutcome::Aborted => "aborted",
        }
    }
}

/// The outcome of the attempt that ended with `event` and was answered with
/// `action`; `None` when the event did not end an attempt or the call.
///
/// A call that stops without its attempt failing is counted once as
/// [`AttemptOutcome::Aborted`]: `Cancelled` in any phase (during an attempt,
/// during a sleep, before the first attempt) and a breaker's `Rejected` that the
/// call gives up on. So every cancelled call shows up as `aborted`, and an
/// attempt that failed before a sleep that was then cancelled stays a
/// `failure` (it did fail, and a retry had been decided).
///
/// ```
/// use retry_core::{attempt_outcome, Action, AttemptOutcome, Event};
/// assert_eq!(
///     attempt_outcome(Event::Succeeded, &Action::Done { attempts: 1 }),
///     Some(AttemptOutcome::Success)
/// );
/// assert_eq!(attempt_outcome(Event::Woke, &Action::Done { attempts: 1 }), None);
/// let gave_up = retry_core::RetryMachine::new(&Default::default(), 1)
///     .poll(Event::Cancelled, retry_core::Instant::ORIGIN);
/// assert_eq!(attempt_outcome(Event::Cancelled, &gave_up), Some(AttemptOutcome::Aborted));
/// ```
#[must_use]
pub fn attempt_outcome(event: Event, action: &Action) -> Option<AttemptOutcome> {
    use crate::retry::GiveUpReason;
    Some(match (event, action) {
        (Event::Succeeded, _) => AttemptOutcome::Success,
        (Event::Cancelled, _) => AttemptOutcome::Aborted,
        (Event::Failed(_) | Event::TimedOut, Action::GiveUp(g)) => match g.reason {
            GiveUpReason::Exhausted
            | GiveUpReason::Budget
            | GiveUpReason::TimedOut { .. }
            | GiveUpReason::RetryBudget => AttemptOutcome::Exhausted,
            _ => AttemptOutcome::Aborted,
        },
        (Event::Failed(_) | Event::TimedOut, _) => AttemptOutcome::Failure,
        // A breaker turned the attempt away and the call gives up on that.
        (Event::Rejected { .. }, Action::GiveUp(_)) => AttemptOutcome::Aborted,
        _ => return None,
    })
}
