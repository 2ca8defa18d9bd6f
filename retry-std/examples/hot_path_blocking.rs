//! The success path of a reused `retry_std::Retry` (3 attempts, exponential, full
//! jitter, a fixed seed), called N times (default 1,000,000): a fixed workload
//! for counting instructions per call, which a shared, noisy machine measures
//! far more steadily than time:
//!
//! ```text
//! cargo build --release -p retry-std --example hot_path_blocking
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_blocking 100000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_blocking 0
//! ```
//!
//! (the difference of the two `I refs` totals, divided by 100,000).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use core::time::Duration;
use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_std::Retry;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().unwrap());
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::exponential(Duration::from_millis(100), 2.0))
        .jitter(Jitter::Full)
        .build()
        .unwrap();
    let retrier: Retry<&'static str> = Retry::new(policy).seed(7);
    let mut sum = 0;
    for i in 0..n {
        sum += retrier
            .call(|_| Ok::<_, &str>(black_box(i) + 1))
            .map(|s| s.value)
            .unwrap();
    }
    black_box(sum);
}
