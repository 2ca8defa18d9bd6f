//! Heap allocations per call of the async adapter, counted by a global allocator
//! on a current-thread runtime (`cargo test -p retry-tokio --test all allocations:: --
//! --nocapture` prints the figures quoted in BENCHMARKS.md).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_tokio::{retry, Retry};

use crate::counting::allocations_async as count;

fn policy(delay: Duration) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(delay))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn allocations_per_call() {
    let fast = policy(Duration::ZERO);
    let sleepy = policy(Duration::from_millis(1));
    let retrier: Retry<&str> = Retry::new(fast).seed(1);
    let sleeper: Retry<&str> = Retry::new(sleepy).seed(1);
    // Warm up the runtime's lazily built state (timer wheel, first sleep, and
    // the list of tasks that yielded, which a retry with no delay joins: it
    // grows once per runtime).
    let _ = sleeper.call(|_| async { Err::<(), _>("down") }).await;
    let _ = retrier.call(|_| async { Err::<(), _>("down") }).await;
    let _ = retrier.call(|_| async { Ok::<_, &str>(0) }).await;

    let reused_success = count(async {
        let _ = retrier.call(|_| async { Ok::<_, &str>(1) }).await;
    })
    .await;
    let reused_failure = count(async {
        let _ = retrier.call(|_| async { Err::<(), _>("down") }).await;
    })
    .await;
    let sleeping_failure = count(async {
        let _ = sleeper.call(|_| async { Err::<(), _>("down") }).await;
    })
    .await;
    let fresh_success = count(async {
        let _ = retry(fast, |_| async { Ok::<_, &str>(1) }).await;
    })
    .await;
    println!("retry-tokio success path, reused Retry: {reused_success} allocations");
    println!(
        "retry-tokio 3-attempt failure, no sleeps, reused Retry: {reused_failure} allocations"
    );
    println!(
        "retry-tokio 3-attempt failure, 1 ms sleeps, reused Retry: {sleeping_failure} allocations"
    );
    println!("retry-tokio success path, retry() building its Retry: {fresh_success} allocations");
    // The counter itself works: a box is one allocation.
    let boxed = count(async {
        drop(core::hint::black_box(Box::new(7u64)));
    })
    .await;
    assert_eq!(boxed, 1);
    assert_eq!(reused_success, 0, "the success path must not allocate");
    assert_eq!(
        reused_failure, 0,
        "a failure path without sleeps must not allocate"
    );
    assert_eq!(sleeping_failure, 0, "sleeping must not allocate");
    assert_eq!(
        fresh_success, 0,
        "building a default Retry must not allocate"
    );
}
