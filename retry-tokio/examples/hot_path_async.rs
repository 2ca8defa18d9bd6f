//! The success path of a reused `retry_tokio::Retry` (3 attempts, exponential, full
//! jitter, a fixed seed), called N times (default 1,000,000): a fixed workload
//! for counting instructions per call, which a shared, noisy machine measures
//! far more steadily than time:
//!
//! ```text
//! cargo build --release -p retry-tokio --example hot_path_async
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_async 100000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_async 0
//! ```
//!
//! (the difference of the two `I refs` totals, divided by 100,000).
//!
//! With a second argument `row`, each call's whole result goes through
//! `black_box` the way the `retry_tokio` row of `benches/success.rs` consumes it
//! (the async block's output, then criterion's `black_box` of it), for counting
//! that row's user-mode cycles, which time spent descheduled does not inflate:
//!
//! ```text
//! perf stat -e cycles:u,instructions:u target/release/examples/hot_path_async 10000000 row
//! perf stat -e cycles:u,instructions:u target/release/examples/hot_path_async 0 row
//! ```
//!
//! With `floor` instead of `row`, the same row is taken by the least any call
//! returning this crate's result type could do: the attempt's value wrapped as
//! a first-attempt success, beside an error path the optimiser must keep (as
//! every real call has). What that row costs over the attempt alone is the
//! price of moving the 48-byte `Result<u64, RetryError<&str>>` through the
//! two `black_box`es, whoever builds it:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_async 100000 floor
//! ```
//!
//! With `time`, the `row` and `floor` rows and backon's row (as
//! `hot_path_backon row` takes it) run in turns, N calls each, five rounds,
//! and each prints its best nanoseconds per call: one process, so the three
//! see the same machine.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use core::time::Duration;
use std::time::Instant;

use backon::Retryable as _;
use retry_core::{Backoff, GiveUpReason, Jitter, RetryError, RetryPolicy, Success};
use retry_tokio::Retry;

async fn op(x: u64) -> Result<u64, &'static str> {
    Ok(black_box(x) + 1)
}

/// The floor: a first-attempt success of the same type, built directly.
async fn floor(x: u64) -> Result<Success<u64>, RetryError<&'static str>> {
    match op(x).await {
        Ok(value) if !black_box(false) => Ok(Success {
            value,
            attempts: 1,
            elapsed: None,
        }),
        Ok(_) => Err(RetryError::new(
            GiveUpReason::Exhausted,
            1,
            Duration::ZERO,
            None,
        )),
        Err(e) => Err(RetryError::new(
            GiveUpReason::Permanent,
            1,
            Duration::ZERO,
            Some(e),
        )),
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().unwrap());
    let mode = std::env::args().nth(2);
    let row = mode.as_deref() == Some("row");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::exponential(Duration::from_millis(100), 2.0))
        .jitter(Jitter::Full)
        .build()
        .unwrap();
    let retrier: Retry<&'static str> = Retry::new(policy).seed(7);
    if mode.as_deref() == Some("floor") {
        rt.block_on(async {
            for i in 0..n {
                let _ = black_box(async { black_box(floor(i).await.map(|s| s.value)) }.await);
            }
        });
        return;
    }
    if mode.as_deref() == Some("time") {
        let backon_policy = backon::ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_times(2)
            .with_jitter();
        let mut best = [f64::MAX; 3];
        for _ in 0..5 {
            rt.block_on(async {
                let start = Instant::now();
                for i in 0..n {
                    let _ = black_box(
                        async { black_box(retrier.call(|_| op(i)).await.map(|s| s.value)) }.await,
                    );
                }
                best[0] = best[0].min(start.elapsed().as_nanos() as f64 / n as f64);
                let start = Instant::now();
                for i in 0..n {
                    let _ = black_box(async { black_box(floor(i).await.map(|s| s.value)) }.await);
                }
                best[1] = best[1].min(start.elapsed().as_nanos() as f64 / n as f64);
                let start = Instant::now();
                for i in 0..n {
                    let _ = black_box(
                        async {
                            black_box(
                                (|| op(i))
                                    .retry(backon_policy)
                                    .sleep(tokio::time::sleep)
                                    .await,
                            )
                        }
                        .await,
                    );
                }
                best[2] = best[2].min(start.elapsed().as_nanos() as f64 / n as f64);
            });
        }
        println!(
            "ns/call: retry_tokio {:.2}, floor {:.2}, backon {:.2}; retry_tokio/backon {:.2}, floor/backon {:.2}",
            best[0],
            best[1],
            best[2],
            best[0] / best[2],
            best[1] / best[2]
        );
        return;
    }
    if row {
        rt.block_on(async {
            for i in 0..n {
                let _ = black_box(
                    async { black_box(retrier.call(|_| op(i)).await.map(|s| s.value)) }.await,
                );
            }
        });
        return;
    }
    rt.block_on(async {
        let mut sum = 0;
        for i in 0..n {
            sum += retrier.call(|_| op(i)).await.map(|s| s.value).unwrap();
        }
        black_box(sum);
    });
}
