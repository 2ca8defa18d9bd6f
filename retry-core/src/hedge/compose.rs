//! Glue between the [`HedgeMachine`](crate::HedgeMachine) and the shared machines that guard many
//! calls, in the style of the retry machine's: the hedge machine never holds a
//! budget or a breaker; it asks through its actions and hears back through
//! events, and these functions make the matching decisions on the shared
//! machines.

use core::time::Duration;

use super::machine::{HedgeAction, HedgeEvent};
use crate::breaker::{Admission, CallOutcome};
use crate::budget::{AttemptKind, BudgetInput, RetryBudget, RetryKind};
use crate::compose::BudgetSteps;
use crate::time::Instant;

/// Tells a shared [`RetryBudget`] about one step of a hedged call (the `event`
/// the driver sent and the `action` the machine answered at `now`) and, when the
/// action is [`HedgeAction::Withdraw`], makes the withdrawal and returns the
/// event to send back ([`HedgeEvent::Granted`] or [`HedgeEvent::Refused`]).
/// Feed every step once, as the machine answered it.
///
/// What the budget hears: the first copy of a call (request-counting budgets),
/// every non-fatal failure of a copy, the winning answer (a first-copy win as a
/// first attempt, a later copy's win as a retry's, which the AWS quota refunds),
/// and a withdrawal for every copy after the first. Copies that lose and are
/// cancelled are neither successes nor failures.
///
/// ```
/// use retry_core::{feed_hedge_budget, BudgetConfig, HedgeAction, HedgeEvent, HedgeMachine, HedgePolicy, Instant, RetryBudget};
///
/// let policy = HedgePolicy::builder().use_retry_budget(true).build()?;
/// let mut budget = RetryBudget::new(BudgetConfig::aws_standard());
/// let mut m = HedgeMachine::new(&policy, 1);
/// let now = Instant::from_millis(0);
/// let a = m.poll(HedgeEvent::Start, now);
/// assert_eq!(feed_hedge_budget(&mut budget, HedgeEvent::Start, a, now), None);
/// let event = HedgeEvent::Launched { copy: 1 };
/// let a = m.poll(event, now);
/// assert_eq!(feed_hedge_budget(&mut budget, event, a, now), None);
/// // The hedge delay passes: copy 2 asks the budget first.
/// let later = Instant::from_millis(100);
/// let a = m.poll(HedgeEvent::Woke, later);
/// assert_eq!(a, HedgeAction::Withdraw { copy: 2 });
/// assert_eq!(feed_hedge_budget(&mut budget, HedgeEvent::Woke, a, later), Some(HedgeEvent::Granted));
/// assert_eq!(budget.tokens().whole(), 495);
/// # Ok::<(), retry_core::HedgePolicyError>(())
/// ```
pub fn feed_hedge_budget(
    budget: &mut RetryBudget,
    event: HedgeEvent,
    action: HedgeAction,
    now: Instant,
) -> Option<HedgeEvent> {
    hedge_budget_steps(event, action)
        .apply(budget, now)
        .map(|w| {
            if w.is_granted() {
                HedgeEvent::Granted
            } else {
                HedgeEvent::Refused
            }
        })
}

/// What a retry budget hears about one step of a hedged call: the inputs
/// [`feed_hedge_budget`] applies, in order (a withdrawal, if any, last). A
/// budget kept elsewhere sends these instead of holding a [`RetryBudget`].
///
/// ```
/// use retry_core::{hedge_budget_steps, BudgetInput, HedgeAction, HedgeEvent, RetryKind};
///
/// let steps = hedge_budget_steps(HedgeEvent::Woke, HedgeAction::Withdraw { copy: 2 });
/// assert_eq!(steps.as_slice(), &[BudgetInput::Withdraw(RetryKind::Failure)]);
/// ```
#[must_use]
pub fn hedge_budget_steps(event: HedgeEvent, action: HedgeAction) -> BudgetSteps {
    let mut steps = BudgetSteps::NONE;
    if let HedgeEvent::Failed { failure, .. } = event {
        if failure.is_retryable() {
            steps.push(BudgetInput::Failure);
        }
    }
    match action {
        HedgeAction::Launch { copy: 1, .. } if event == HedgeEvent::Start => {
            steps.push(BudgetInput::FirstAttempt);
        }
        HedgeAction::Done { copy, .. }
            if matches!(event, HedgeEvent::Succeeded { .. } | HedgeEvent::Stopped) =>
        {
            let attempt = if copy > 1 {
                AttemptKind::Retry(RetryKind::Failure)
            } else {
                AttemptKind::First
            };
            steps.push(BudgetInput::Success(attempt));
        }
        HedgeAction::Withdraw { .. } => steps.push(BudgetInput::Withdraw(RetryKind::Failure)),
        _ => {}
    }
    steps
}

/// What a circuit breaker records for one copy, from the event the driver sends
/// the hedge machine when it ends (`took` is how long the copy ran):
///
/// - `Succeeded` is a success;
/// - a non-fatal failure is a failure;
/// - a permanent failure is a success for the breaker (the dependency answered;
///   the fault lies with the request), unless it is of kind timeout, connection
///   or not-sent (the dependency did not answer), as
///   [`breaker_outcome`](crate::breaker_outcome) reads it;
/// - anything else records nothing. A copy that lost and was cancelled records
///   nothing either: hand its permit back with
///   [`CircuitBreaker::release`](crate::CircuitBreaker::release).
///
/// ```
/// use core::time::Duration;
/// use retry_core::{hedge_breaker_outcome, Failure, HedgeEvent};
/// let took = Duration::from_millis(30);
/// assert!(hedge_breaker_outcome(HedgeEvent::Succeeded { copy: 2 }, took).unwrap().success);
/// assert!(!hedge_breaker_outcome(HedgeEvent::Failed { copy: 1, failure: Failure::retryable() }, took).unwrap().success);
/// assert_eq!(hedge_breaker_outcome(HedgeEvent::Stopped, took), None);
/// ```
#[must_use]
pub fn hedge_breaker_outcome(event: HedgeEvent, took: Duration) -> Option<CallOutcome> {
    let success = match event {
        HedgeEvent::Succeeded { .. } => true,
        HedgeEvent::Failed { failure, .. } => {
            !failure.is_retryable() && crate::compose::answered(failure.kind())
        }
        _ => return None,
    };
    Some(CallOutcome {
        success,
        duration: took,
    })
}

/// The event to send the hedge machine when a breaker refuses copy `copy`
/// (`None` when it admitted it).
#[must_use]
pub fn hedge_rejection(admission: &Admission, copy: u32) -> Option<HedgeEvent> {
    match *admission {
        Admission::Rejected { until, .. } => Some(HedgeEvent::Rejected { copy, until }),
        Admission::Admitted { .. } => None,
    }
}
