//! When the permit guard reads the clock, and how it judges an abandoned
//! attempt whose start it did not read: by the start handed over with
//! `waited`, else by its deadline, else released.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::Mutex;
use std::time::Instant;

use retry_core::{BasicRule, BreakerConfig, BreakerState, Event};
use retry_shared::{Breaker, Clock, PermitGuard, SharedBreaker};

/// A clock set by hand, counting its readings.
struct Manual {
    now: Mutex<Instant>,
    reads: AtomicUsize,
}

impl Manual {
    fn new() -> Self {
        Manual {
            now: Mutex::new(Instant::now()),
            reads: AtomicUsize::new(0),
        }
    }
    fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap();
        *now += by;
    }
    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
    fn peek(&self) -> Instant {
        *self.now.lock().unwrap()
    }
}

impl Clock for &Manual {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::SeqCst);
        *self.now.lock().unwrap()
    }
}

/// Opens on the first failure; default slow-call duration (60 s).
fn default_breaker() -> SharedBreaker {
    SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 1,
            open_duration: Duration::from_secs(30),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn a_default_breaker_does_not_time_calls_and_a_success_reads_no_clock() {
    let breaker = default_breaker();
    if cfg!(feature = "metrics") {
        // Metrics report call durations: every call is timed.
        assert!(breaker.times_calls());
        return;
    }
    assert!(!breaker.times_calls());
    let clock = Manual::new();
    let guard = PermitGuard::request(&breaker, &clock, None, None).unwrap();
    guard.finish(Event::Succeeded, None);
    assert_eq!(clock.reads(), 0);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn an_explicit_slow_call_duration_times_calls_and_max_does_not() {
    let timed = BreakerConfig::builder()
        .failure_threshold(1)
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .unwrap();
    assert!(SharedBreaker::new(timed).unwrap().times_calls());
    let never_slow = BreakerConfig::builder()
        .failure_threshold(1)
        .slow_call_duration(Duration::MAX)
        .build()
        .unwrap();
    assert_eq!(
        SharedBreaker::new(never_slow).unwrap().times_calls(),
        cfg!(feature = "metrics")
    );
}

#[test]
fn an_attempt_abandoned_past_the_slow_call_duration_after_it_waited_is_a_failure() {
    let breaker = default_breaker();
    let clock = Manual::new();
    let mut guard = PermitGuard::request(&breaker, &clock, None, None).unwrap();
    // Its first wait: the adapter has read the time there already.
    guard.waited(clock.peek());
    clock.advance(Duration::from_secs(61));
    drop(guard);
    assert_eq!(breaker.state(), BreakerState::Open);
}

#[test]
fn an_attempt_abandoned_early_after_it_waited_is_released() {
    let breaker = default_breaker();
    let clock = Manual::new();
    let mut guard = PermitGuard::request(&breaker, &clock, None, None).unwrap();
    guard.waited(clock.peek());
    clock.advance(Duration::from_secs(59));
    drop(guard);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn an_abandoned_attempt_with_no_start_is_judged_by_its_deadline_or_released() {
    if cfg!(feature = "metrics") {
        return; // the start is always read: covered by the tests above
    }
    // No deadline, no start: released, however long it ran.
    let breaker = default_breaker();
    let clock = Manual::new();
    let guard = PermitGuard::request(&breaker, &clock, None, None).unwrap();
    clock.advance(Duration::from_secs(120));
    drop(guard);
    assert_eq!(breaker.state(), BreakerState::Closed);
    // A deadline passed: a failure.
    let deadline = clock.peek() + Duration::from_secs(5);
    let guard = PermitGuard::request(&breaker, &clock, None, Some(deadline)).unwrap();
    clock.advance(Duration::from_secs(6));
    drop(guard);
    assert_eq!(breaker.state(), BreakerState::Open);
}

#[test]
fn waited_keeps_a_start_already_known() {
    let breaker = default_breaker();
    let clock = Manual::new();
    let start = clock.peek();
    let mut guard = PermitGuard::request(&breaker, &clock, Some(start), None).unwrap();
    clock.advance(Duration::from_secs(59));
    // A later wait does not move the start the caller passed.
    guard.waited(clock.peek());
    clock.advance(Duration::from_secs(2));
    drop(guard);
    assert_eq!(breaker.state(), BreakerState::Open);
}
