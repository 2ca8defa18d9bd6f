#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Streams mapped through a retried operation with bounded concurrency.

use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::Arc;

use futures_util::StreamExt as _;
use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_tokio::{Retry, RetryStreamExt};

fn retrier(attempts: u32) -> Retry<String> {
    Retry::new(
        RetryPolicy::builder()
            .max_attempts(attempts)
            .backoff(Backoff::constant(Duration::from_millis(50)))
            .jitter(Jitter::None)
            .build()
            .unwrap(),
    )
}

/// Counts items in flight and remembers the most seen at once.
#[derive(Default)]
struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Gauge {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn ordered_keeps_the_input_order_and_reports_each_failure_alone() {
    let results: Vec<_> = futures_util::stream::iter(0u64..6)
        .retry_map(retrier(3), 3, |n, ctx| async move {
            // Later items finish sooner, so completion order differs from input order.
            tokio::time::sleep(Duration::from_millis(100 * (6 - n))).await;
            match n {
                2 => Err(format!("item {n} is broken")),
                4 if ctx.attempt() < 3 => Err("flaky".to_owned()),
                _ => Ok(n * 10),
            }
        })
        .collect()
        .await;
    assert_eq!(results.len(), 6);
    for (n, result) in results.iter().enumerate() {
        match n {
            2 => {
                let err = result.as_ref().unwrap_err();
                assert_eq!(err.code(), "retry.exhausted");
                assert_eq!(err.attempts(), 3);
                assert_eq!(err.last_error().unwrap(), "item 2 is broken");
            }
            _ => assert_eq!(result.as_ref().unwrap(), &(n as u64 * 10)),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn unordered_yields_as_items_finish() {
    let results: Vec<u64> = futures_util::stream::iter([3u64, 1, 2])
        .retry_map_unordered(retrier(2), 3, |n, _ctx| async move {
            tokio::time::sleep(Duration::from_secs(n)).await;
            Ok::<_, String>(n)
        })
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(results, [1, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn a_retrying_item_holds_one_slot_and_never_more() {
    for unordered in [false, true] {
        let gauge = Arc::new(Gauge::default());
        let op = {
            let gauge = Arc::clone(&gauge);
            move |n: u32, ctx: retry_tokio::AttemptContext| {
                let gauge = Arc::clone(&gauge);
                async move {
                    gauge.enter();
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    gauge.leave();
                    if ctx.attempt() < 3 && n % 2 == 0 {
                        Err("retry me".to_owned())
                    } else {
                        Ok(n)
                    }
                }
            }
        };
        let items = futures_util::stream::iter(0u32..20);
        let results: Vec<_> = if unordered {
            items.retry_map_unordered(retrier(3), 4, op).collect().await
        } else {
            items.retry_map(retrier(3), 4, op).collect().await
        };
        assert_eq!(results.len(), 20);
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(gauge.max.load(Ordering::SeqCst), 4);
        assert_eq!(gauge.now.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_zero_limit_still_makes_progress() {
    let results: Vec<_> = futures_util::stream::iter([1, 2])
        .retry_map(
            retrier(1),
            0,
            |n: i32, _ctx| async move { Ok::<_, String>(n) },
        )
        .collect()
        .await;
    assert_eq!(results, [Ok(1), Ok(2)]);
}
