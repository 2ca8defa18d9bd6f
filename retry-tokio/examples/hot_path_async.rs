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
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use core::time::Duration;
use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_tokio::Retry;

async fn op(x: u64) -> Result<u64, &'static str> {
    Ok(black_box(x) + 1)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().unwrap());
    let row = std::env::args().nth(2).as_deref() == Some("row");
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
