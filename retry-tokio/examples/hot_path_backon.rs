//! The peer of `hot_path_async`: backon's `Retryable` on the same operation with
//! the same curve (exponential from 100 ms, 2 retries, jitter), first attempt
//! succeeding, called N times (default 1,000,000), for counting instructions
//! per call under callgrind the same way:
//!
//! ```text
//! cargo build --release -p retry-tokio --example hot_path_backon
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_backon 100000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_backon 0
//! ```
//!
//! With a second argument `row`, each call's whole result goes through
//! `black_box` the way the `backon_retryable` row of `benches/success.rs` consumes it
//! (the async block's output, then criterion's `black_box` of it), for counting
//! that row's user-mode cycles, which time spent descheduled does not inflate:
//!
//! ```text
//! perf stat -e cycles:u,instructions:u target/release/examples/hot_path_backon 10000000 row
//! perf stat -e cycles:u,instructions:u target/release/examples/hot_path_backon 0 row
//! ```
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use core::time::Duration;

use backon::Retryable as _;

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
    let policy = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_times(2)
        .with_jitter();
    if row {
        rt.block_on(async {
            for i in 0..n {
                let _ = black_box(
                    async { black_box((|| op(i)).retry(policy).sleep(tokio::time::sleep).await) }
                        .await,
                );
            }
        });
        return;
    }
    rt.block_on(async {
        let mut sum = 0;
        for i in 0..n {
            sum += (|| op(i))
                .retry(policy)
                .sleep(tokio::time::sleep)
                .await
                .unwrap();
        }
        black_box(sum);
    });
}
