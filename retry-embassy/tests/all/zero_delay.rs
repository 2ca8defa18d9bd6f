//! A zero delay does not spin: every retry returns to the executor before the
//! next attempt (embassy's `Timer` yields once even when already due), so a
//! retry loop whose operation fails without awaiting cannot keep other tasks
//! of the same executor from running.

use crate::support;

use core::cell::Cell;
use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};

use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_embassy::Retry;
use support::virtual_time;

#[test]
fn each_retry_with_a_zero_delay_returns_to_the_executor() {
    let _clock = virtual_time();
    let policy = RetryPolicy::builder()
        .max_attempts(100)
        .backoff(Backoff::None)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let attempts = Cell::new(0_u32);
    let retry = Retry::new(policy, 1);
    let mut call = pin!(retry.call(async |_ctx| {
        attempts.set(attempts.get() + 1);
        Err::<(), _>("down")
    }));
    let mut cx = Context::from_waker(Waker::noop());
    // Each poll runs one attempt and then hands the executor back: the
    // attempts are spread over as many polls, never run in one.
    let mut polls = 0_u32;
    let result = loop {
        polls += 1;
        if let Poll::Ready(result) = call.as_mut().poll(&mut cx) {
            break result;
        }
        assert_eq!(attempts.get(), polls, "one attempt per poll");
        assert!(polls <= 100, "the call never ends");
    };
    assert_eq!(attempts.get(), 100);
    assert_eq!(
        polls, 100,
        "99 retries, each after a return to the executor"
    );
    assert_eq!(result.unwrap_err().attempts(), 100);
}
