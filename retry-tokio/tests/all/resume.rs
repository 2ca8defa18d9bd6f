#![allow(clippy::expect_used, clippy::unwrap_used)]
//! A shared breaker and budget saved by one task's runtime and resumed from JSON
//! in another, on tokio's paused clock: the open breaker turns calls away for what
//! was left of its open period, then probes and closes.
#![cfg(feature = "serde")]

use core::time::Duration;

use retry_core::{
    Backoff, BasicRule, BreakerConfig, BreakerSnapshot, BreakerState, BudgetConfig, BudgetSnapshot,
    GiveUpReason, Jitter, ManualState, RetryPolicy, Tokens,
};
use retry_tokio::retry_shared::Saved;
use retry_tokio::{Retry, SharedBreaker, SharedBudget};

fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .use_retry_budget(true)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_saved_breaker_and_budget_resume_from_json() {
    let breaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 2,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let budget = SharedBudget::new(BudgetConfig::aws_standard());
    let _ = Retry::<&str>::new(policy())
        .breaker(breaker.clone())
        .budget(budget.clone())
        .call(|_ctx| async { Err::<(), _>("down") })
        .await;
    assert_eq!(breaker.state(), BreakerState::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    let breaker_text = serde_json::to_string(&breaker.save_at(now())).unwrap();
    let budget_text = serde_json::to_string(&budget.save_at(now())).unwrap();

    // Much later, elsewhere: the time between counts as none.
    tokio::time::advance(Duration::from_secs(600)).await;
    let saved: Saved<BreakerSnapshot> = serde_json::from_str(&breaker_text).unwrap();
    let resumed = SharedBreaker::restore_at(&saved, now()).unwrap();
    let saved: Saved<BudgetSnapshot> = serde_json::from_str(&budget_text).unwrap();
    let resumed_budget = SharedBudget::restore_at(&saved, now()).unwrap();
    assert_eq!(resumed_budget.tokens(), Tokens::from_whole(490));
    let retry = Retry::<&str>::new(policy())
        .breaker(resumed.clone())
        .budget(resumed_budget.clone());
    let err = retry
        .call(|_ctx| async { Err::<(), _>("must not run") })
        .await
        .unwrap_err();
    assert_eq!(
        err.reason(),
        GiveUpReason::CircuitOpen {
            wait: Some(Duration::from_millis(3_900))
        }
    );
    tokio::time::advance(Duration::from_millis(3_900)).await;
    let ok = retry.call(|_ctx| async { Ok::<_, &str>(1) }).await.unwrap();
    assert_eq!(ok.value, 1);
    assert_eq!(resumed.state(), BreakerState::Closed);
    assert_eq!(resumed.metrics_at(now()).rejected, 2);
    // Forced open for a deploy, from the adapter: calls wait for nothing and
    // give up with the time it ends.
    resumed
        .force_at(ManualState::OpenFor(Duration::from_secs(30)), now())
        .unwrap();
    let err = retry
        .call(|_ctx| async { Err::<(), _>("must not run") })
        .await
        .unwrap_err();
    assert_eq!(
        err.reason(),
        GiveUpReason::CircuitOpen {
            wait: Some(Duration::from_secs(30))
        }
    );
}
