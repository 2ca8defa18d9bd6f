#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The tower layers.
#![cfg(feature = "tower")]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::Arc;

use retry_core::{Backoff, BasicRule, BreakerConfig, BreakerState, Jitter, RetryPolicy};
use retry_tokio::tower::{BreakerLayer, BreakerServiceError, RetryLayer};
use retry_tokio::{Retry, SharedBreaker};
use tower::{service_fn, Layer, ServiceExt as _};

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_retry_layer_retries_until_success() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let inner = service_fn(move |request: String| {
        let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            if n < 3 {
                Err(format!("call {n} failed"))
            } else {
                Ok(format!("{request} after {n} calls"))
            }
        }
    });
    let service = RetryLayer::new(Retry::new(policy(5)))
        .idempotent_when(|_: &String| true)
        .layer(inner);
    let response = service.oneshot("hello".to_owned()).await.unwrap();
    assert_eq!(response, "hello after 3 calls");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn the_retry_layer_gives_up_with_a_retry_error() {
    let inner = service_fn(|_request: u32| async { Err::<u32, _>("down") });
    let err = RetryLayer::new(Retry::new(policy(2)))
        .idempotent_when(|_: &u32| true)
        .layer(inner)
        .oneshot(7)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(err.attempts(), 2);
}

/// A request that is not `Clone`: the layer is told how to rebuild it.
struct Upload {
    body: Vec<u8>,
}

#[tokio::test(start_paused = true)]
async fn the_retry_layer_recreates_requests_that_are_not_clone() {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let inner = service_fn(move |upload: Upload| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                Err("reset")
            } else {
                Ok(upload.body.len())
            }
        }
    });
    let layer = RetryLayer::new(Retry::new(policy(3)))
        .recreate_with(
            |u: &Upload, _attempt: &retry_tokio::AttemptContext| Upload {
                body: u.body.clone(),
            },
        )
        .idempotent_when(|_: &Upload| true);
    let sent = layer
        .layer(inner)
        .oneshot(Upload { body: vec![0; 12] })
        .await
        .unwrap();
    assert_eq!(sent, 12);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_breaker_layer_fails_fast_without_calling_the_inner_service() {
    let breaker: SharedBreaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 2,
            open_duration: Duration::from_secs(10),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let inner = service_fn(move |_request: ()| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>("boom") }
    });
    let service = BreakerLayer::new(breaker.clone()).layer(inner);

    for _ in 0..2 {
        let err = service.clone().oneshot(()).await.unwrap_err();
        assert_eq!(err, BreakerServiceError::Inner("boom"));
    }
    assert_eq!(breaker.state(), BreakerState::Open);

    let err = service.clone().oneshot(()).await.unwrap_err();
    assert!(err.is_circuit_open());
    assert_eq!(
        err,
        BreakerServiceError::CircuitOpen {
            retry_after: Some(Duration::from_secs(10))
        }
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the inner service was not called"
    );
    assert!(err.to_string().starts_with("retry.circuit_open"));

    // After the open duration a probe runs; its success closes the breaker.
    tokio::time::advance(Duration::from_secs(10)).await;
    let ok = BreakerLayer::new(breaker.clone())
        .layer(service_fn(|_request: ()| async { Ok::<_, &str>(1) }))
        .oneshot(())
        .await;
    assert_eq!(ok, Ok(1));
    assert_eq!(breaker.state(), BreakerState::Closed);
}
