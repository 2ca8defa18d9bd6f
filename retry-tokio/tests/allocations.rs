//! Heap allocations per call of the async adapter, counted by a global allocator
//! on a current-thread runtime (`cargo test -p retry-tokio --test allocations --
//! --nocapture` prints the figures quoted in BENCHMARKS.md).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::alloc::System;

use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_tokio::{retry, Retry};

struct Counting;
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
std::thread_local! {
    static ARMED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

#[allow(unsafe_code)]
// SAFETY: forwards every call to the system allocator unchanged; counting only
// reads a thread-local flag and bumps an atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(core::cell::Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

async fn count<F: core::future::Future>(f: F) -> usize {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    ARMED.with(|a| a.set(true));
    f.await;
    ARMED.with(|a| a.set(false));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

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
    // Warm up the runtime's lazily built state (timer wheel, first sleep).
    let _ = sleeper.call(|_| async { Err::<(), _>("down") }).await;
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
