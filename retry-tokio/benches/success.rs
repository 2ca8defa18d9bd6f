//! The async adapter when the first attempt succeeds, against awaiting the future
//! directly and against backon's `Retryable` on the same future.
//! Run: `cargo bench -p retry-tokio --bench success`.
//!
//! The first attempt succeeds at once, so `retry_tokio` reads no clock (see
//! `retry_shared::Driver`): tokio's `test-util` feature, which the bench
//! inherits from the dev-dependencies and which makes every clock read check
//! for paused time, does not touch that row; it does touch
//! `retry_tokio_measured`, which reads the clock twice.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use core::hint::black_box;
use core::time::Duration;

use backon::Retryable as _;
use criterion::{criterion_group, criterion_main, Criterion};
use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_tokio::Retry;

async fn op(x: u64) -> Result<u64, &'static str> {
    Ok(black_box(x) + 1)
}

fn bench(c: &mut Criterion) {
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
    let backon_policy = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_times(2)
        .with_jitter();

    let mut g = c.benchmark_group("tokio_success_path");
    g.bench_function("direct_await", |b| {
        b.to_async(&rt).iter(|| async { black_box(op(1).await) })
    });
    g.bench_function("retry_tokio", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(retrier.call(|_| op(1)).await.map(|s| s.value)) })
    });
    // The same call asked to measure its elapsed time: two clock reads (with
    // this bench's tokio `test-util`, each also checks for paused time).
    let measured = retrier.clone().measure_elapsed();
    g.bench_function("retry_tokio_measured", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(measured.call(|_| op(1)).await.map(|s| s.value)) })
    });
    g.bench_function("backon_retryable", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(
                (|| op(1))
                    .retry(backon_policy)
                    .sleep(tokio::time::sleep)
                    .await,
            )
        })
    });
    // The same two calls, each result reduced to its value (`Option<u64>`)
    // before `black_box`: `retry_tokio`'s `Result<u64, RetryError<&str>>` is
    // 48 bytes (80 before the error kept its durations as nanoseconds), and
    // the async block's output is written field by field and then read back
    // by criterion's `black_box` with 16-byte loads, each over several
    // narrower stores just made (a store-forwarding stall on every iteration,
    // about a third of that row's samples under `perf`). Backon's
    // `Result<u64, &str>` is 16 bytes and travels in two registers. These rows
    // compare the calls without that copy; the rows above keep each library's
    // own result.
    g.bench_function("retry_tokio_value", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(retrier.call(|_| op(1)).await.ok().map(|s| s.value)) })
    });
    g.bench_function("backon_retryable_value", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(
                (|| op(1))
                    .retry(backon_policy)
                    .sleep(tokio::time::sleep)
                    .await
                    .ok(),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
