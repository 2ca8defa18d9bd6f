//! The retry machine composed with a shared retry budget: many calls, one bucket.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    feed_budget, Action, Backoff, BudgetConfig, Event, Failure, GiveUpReason, Instant, Jitter,
    RetryBudget, RetryMachine, RetryPolicy,
};

/// Runs one call to its end, every attempt answered by `outcome`, against the
/// shared budget; returns the final action and the time after it.
fn call(
    policy: &RetryPolicy,
    budget: &mut RetryBudget,
    mut now: Instant,
    outcome: Event,
) -> (Action, Instant) {
    let mut m = RetryMachine::new(policy, 7);
    let mut event = Event::Start;
    loop {
        let action = m.poll(event, now);
        let reply = feed_budget(budget, &m, event, action, now);
        event = match action {
            Action::Attempt { .. } => outcome,
            Action::Sleep { until, .. } => {
                now = until;
                Event::Woke
            }
            Action::Withdraw { .. } => reply.expect("a withdrawal is always answered"),
            Action::GiveUp(_) | Action::Done { .. } => return (action, now),
        };
    }
}

#[test]
fn an_outage_drains_the_grpc_throttle_and_successes_refill_it() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(10)))
        .jitter(Jitter::None)
        .use_retry_budget(true)
        .build()
        .unwrap();
    let mut budget = RetryBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());
    let mut now = Instant::ORIGIN;
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let (action, t) = call(
            &policy,
            &mut budget,
            now,
            Event::Failed(Failure::retryable()),
        );
        now = t;
        let Action::GiveUp(g) = action else {
            panic!("{action}")
        };
        reasons.push((g.reason, g.attempts));
    }
    // Call 1: 3 failures (10 -> 7), both retries granted. Call 2: 7 -> 6 granted
    // (6 > 5), 6 -> 5 refused. Later calls: refused at once after one attempt.
    assert_eq!(
        reasons,
        [
            (GiveUpReason::Exhausted, 3),
            (GiveUpReason::RetryBudget, 2),
            (GiveUpReason::RetryBudget, 1),
            (GiveUpReason::RetryBudget, 1),
        ]
    );
    // The outage left 3 tokens. First attempts still run; 60 successes add 0.1
    // each (3 -> 9), so the next failing call may retry twice again (9 -> 8 -> 7).
    assert_eq!(budget.tokens().whole(), 3);
    for _ in 0..60 {
        let (action, t) = call(&policy, &mut budget, now, Event::Succeeded);
        now = t;
        assert_eq!(action, Action::Done { attempts: 1 });
    }
    let (action, _) = call(
        &policy,
        &mut budget,
        now,
        Event::Failed(Failure::retryable()),
    );
    assert!(matches!(action, Action::GiveUp(g) if g.reason == GiveUpReason::Exhausted));
}

#[test]
fn the_aws_quota_refunds_a_successful_retry() {
    let policy = RetryPolicy::builder()
        .max_attempts(2)
        .backoff(Backoff::None)
        .use_retry_budget(true)
        .build()
        .unwrap();
    let mut budget = RetryBudget::new(BudgetConfig::aws_standard());
    let mut m = RetryMachine::new(&policy, 1);
    let now = Instant::ORIGIN;
    let steps = [
        Event::Start,
        Event::Failed(Failure::retryable()),
        Event::Granted,
        Event::Succeeded,
    ];
    let mut tokens = Vec::new();
    for event in steps {
        let action = m.poll(event, now);
        if let Some(reply) = feed_budget(&mut budget, &m, event, action, now) {
            assert_eq!(reply, Event::Granted);
        }
        tokens.push(budget.tokens().whole());
    }
    assert_eq!(tokens, [500, 495, 495, 500]);
}
