//! Heap allocations per call of the blocking adapter, counted by a global
//! allocator (`cargo test -p retry-std --test all allocations:: -- --nocapture` prints
//! the figures quoted in BENCHMARKS.md).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_std::{retry, Retry};

use crate::counting::allocations as count;

fn policy(delay: Duration) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(delay))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

#[test]
fn allocations_per_call() {
    let fast = policy(Duration::ZERO);
    let sleepy = policy(Duration::from_millis(1));
    let retrier: Retry<&str> = Retry::new(fast).seed(1);
    let sleeper: Retry<&str> = Retry::new(sleepy).seed(1);
    // Warm up lazily initialised thread state (the cancel token's first use).
    let _ = retrier.call(|_| Ok::<_, &str>(0));

    let reused_success = count(|| {
        let _ = retrier.call(|_| Ok::<_, &str>(1));
    });
    let reused_failure = count(|| {
        let _ = retrier.call(|_| Err::<(), _>("down"));
    });
    let sleeping_failure = count(|| {
        let _ = sleeper.call(|_| Err::<(), _>("down"));
    });
    let fresh_success = count(|| {
        let _ = retry(fast, |_| Ok::<_, &str>(1));
    });
    println!("retry-std success path, reused Retry: {reused_success} allocations");
    println!("retry-std 3-attempt failure, no sleeps, reused Retry: {reused_failure} allocations");
    println!(
        "retry-std 3-attempt failure, 1 ms sleeps, reused Retry: {sleeping_failure} allocations"
    );
    println!("retry-std success path, retry() building its Retry: {fresh_success} allocations");
    // The counter itself works: a box is one allocation.
    assert_eq!(count(|| drop(core::hint::black_box(Box::new(7u64)))), 1);
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
