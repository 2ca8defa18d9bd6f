#![allow(clippy::expect_used, clippy::unwrap_used)]
//! A breaker and a retry budget shared by many tasks.

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::Arc;

use retry_core::{
    Backoff, BasicRule, BreakerConfig, BreakerState, BudgetConfig, CircuitOpen, GiveUpReason,
    Jitter, RetryPolicy,
};
use retry_tokio::{Retry, SharedBreaker, SharedBudget};

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_shared_breaker_opens_and_rejects_without_calling_the_op() {
    let breaker: SharedBreaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 3,
            open_duration: Duration::from_secs(30),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let retrier = Retry::<&str>::new(policy(1)).breaker(breaker.clone());

    let mut tasks = Vec::new();
    for _ in 0..3 {
        let retrier = retrier.clone();
        let calls = Arc::clone(&calls);
        tasks.push(tokio::spawn(async move {
            retrier
                .call(move |_ctx| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    async { Err::<(), _>("down") }
                })
                .await
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap_err().code(), "retry.exhausted");
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    let counted = Arc::clone(&calls);
    let err = tokio::spawn(async move {
        retrier
            .call(move |_ctx| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, &str>(()) }
            })
            .await
    })
    .await
    .unwrap()
    .unwrap_err();
    assert!(err.is_circuit_open());
    assert_eq!(err.code(), "retry.circuit_open");
    assert_eq!(
        err.reason(),
        GiveUpReason::CircuitOpen {
            wait: Some(Duration::from_secs(30))
        }
    );
    assert_eq!(err.attempts(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the op never ran");
}

#[tokio::test(start_paused = true)]
async fn waiting_out_an_open_breaker_then_closing_it() {
    let breaker: SharedBreaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 1,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    // One failure opens the breaker.
    let _ = Retry::<()>::new(policy(1))
        .breaker(breaker.clone())
        .call(|_ctx| async { Err::<(), ()>(()) })
        .await;
    assert_eq!(breaker.state(), BreakerState::Open);
    let waiting = policy(2)
        .to_builder()
        .on_circuit_open(CircuitOpen::Wait)
        .build()
        .unwrap();
    let done = Retry::<()>::new(waiting)
        .breaker(breaker.clone())
        .call(|_ctx| async { Ok::<_, ()>("fine") })
        .await
        .unwrap();
    assert_eq!(done.value, "fine");
    assert_eq!(done.attempts, 1);
    assert_eq!(done.elapsed, Some(Duration::from_secs(5)));
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn the_budget_refuses_retries_during_an_outage() {
    // 10 tokens; each failure costs 1 and retries are refused at half the bucket.
    let budget = SharedBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());
    let with_budget = policy(5)
        .to_builder()
        .use_retry_budget(true)
        .build()
        .unwrap();
    let retrier = Retry::<&str>::new(with_budget).budget(budget.clone());
    let attempts = Arc::new(AtomicU32::new(0));

    let mut tasks = Vec::new();
    for _ in 0..8 {
        let retrier = retrier.clone();
        let attempts = Arc::clone(&attempts);
        tasks.push(tokio::spawn(async move {
            retrier
                .call(move |_ctx| {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    async { Err::<(), _>("outage") }
                })
                .await
                .unwrap_err()
        }));
    }
    let mut refused = 0;
    for task in tasks {
        let err = task.await.unwrap();
        if err.reason() == GiveUpReason::RetryBudget {
            assert_eq!(err.code(), "retry.retry_budget");
            assert_eq!(err.last_error(), Some(&"outage"));
            refused += 1;
        }
    }
    assert_eq!(refused, 8, "every call ends refused by the budget");
    // Far fewer than the 8 × 5 attempts the policy alone would allow.
    assert!(attempts.load(Ordering::SeqCst) < 20);
    assert!(budget.tokens() < retry_core::Tokens::from_whole(6));
}
