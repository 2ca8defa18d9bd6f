//! Automatic transitions in a blocking program: the one shared timer thread
//! wakes each breaker that asks at its deadlines, with no call. Real time
//! (the thread sleeps on the system clock); nothing here asserts how late it
//! wakes, only that it does, at or after the instant, with the transition
//! reported as a call would report it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use retry_core::{BreakerConfig, BreakerState, HalfOpenTimeout, Rate, TransitionCause};
use retry_std::{
    automatic_transitions, timed_breakers, ManualState, SharedBreaker, TimerError, Transition,
};

/// Polls `done` every few milliseconds until it holds, for at most a minute
/// (a bound for a hung test, not a timing claim).
fn eventually(mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not within a minute"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn watched(config: BreakerConfig) -> (SharedBreaker, Arc<Mutex<Vec<Transition>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let breaker = SharedBreaker::new(config)
        .unwrap()
        .on_transition(move |t| log.lock().unwrap().push(*t));
    automatic_transitions(&breaker).unwrap();
    (breaker, seen)
}

/// The threads of this process named like the timer (Linux).
fn timer_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|name| name.trim() == "retry-breaker-t")
                })
                .count()
        })
        .unwrap_or(1)
}

/// Resilience4j's scenario: open, wait, no call; the breaker turns half-open
/// and the transition is published, stamped at or after the end of the open
/// period.
#[test]
fn resilience4j_automatic_transition_from_open_to_half_open() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(5)
        .minimum_calls(5)
        .half_open_permits(3)
        .success_threshold(3)
        .open_duration(Duration::from_millis(50))
        .build()
        .unwrap();
    let (breaker, seen) = watched(config);
    breaker
        .force(ManualState::OpenFor(Duration::from_millis(50)))
        .unwrap();
    let deadline = breaker.next_deadline().unwrap();
    eventually(|| breaker.state() == BreakerState::HalfOpen);
    assert!(Instant::now() >= deadline);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let (opened, moved) = (seen[0], seen[1]);
    assert_eq!(
        (moved.from, moved.to, moved.cause),
        (
            BreakerState::Open,
            BreakerState::HalfOpen,
            TransitionCause::OpenElapsed
        )
    );
    assert!(moved.at.saturating_duration_since(opened.at) >= Duration::from_millis(50));
    let m = breaker.metrics();
    assert_eq!((m.probes_in_flight, m.rejected), (0, 0));
}

/// Many breakers, one thread: each is woken at its own deadline, the half-open
/// maximum wait included, and the thread count does not grow with them.
#[test]
fn one_thread_wakes_every_breaker_that_asks() {
    let config = |wait: u64, timeout| {
        BreakerConfig::builder()
            .failure_threshold(1)
            .open_duration(Duration::from_millis(20))
            .max_half_open_wait(Duration::from_millis(wait))
            .on_half_open_timeout(timeout)
            .build()
            .unwrap()
    };
    let breakers: Vec<_> = (0..8u64)
        .map(|i| {
            let timeout = if i % 2 == 0 {
                HalfOpenTimeout::Close
            } else {
                HalfOpenTimeout::Reopen
            };
            watched(config(10 + 5 * i, timeout))
        })
        .collect();
    // The thread names itself once it runs.
    eventually(|| timer_threads() == 1);
    for (breaker, _) in &breakers {
        breaker
            .force(ManualState::OpenFor(Duration::from_millis(20)))
            .unwrap();
    }
    // Each open period, then each half-open wait, ends on its own: closed, or
    // open and then half-open again at the end of that open period.
    for (i, (breaker, seen)) in breakers.iter().enumerate() {
        let want = if i % 2 == 0 { 3 } else { 4 };
        eventually(|| seen.lock().unwrap().len() >= want);
        let causes: Vec<_> = seen.lock().unwrap()[1..want]
            .iter()
            .map(|t| (t.to, t.cause))
            .collect();
        let expected: &[_] = if i % 2 == 0 {
            &[
                (BreakerState::HalfOpen, TransitionCause::OpenElapsed),
                (BreakerState::Closed, TransitionCause::HalfOpenTimeout),
            ]
        } else {
            &[
                (BreakerState::HalfOpen, TransitionCause::OpenElapsed),
                (BreakerState::Open, TransitionCause::HalfOpenTimeout),
                (BreakerState::HalfOpen, TransitionCause::OpenElapsed),
            ]
        };
        assert_eq!(causes, expected, "breaker {i}");
        let _ = breaker;
    }
    assert_eq!(timer_threads(), 1);
}

/// A dropped breaker leaves the timer's list; asking twice is refused.
#[test]
fn a_dropped_breaker_leaves_and_asking_twice_is_refused() {
    let breaker = SharedBreaker::new(BreakerConfig::default()).unwrap();
    automatic_transitions(&breaker).unwrap();
    let e = automatic_transitions(&breaker.clone()).unwrap_err();
    assert!(matches!(e, TimerError::AlreadyOn), "{e}");
    assert_eq!(e.code(), "timer.already_on");
    // Other tests' breakers come and go: wait for this one to be counted
    // out, then in, by identity of the count's change.
    let with = timed_breakers();
    assert!(with >= 1);
    let (other, _) = watched(BreakerConfig::default());
    drop(other);
    drop(breaker);
    eventually(|| timed_breakers() < with);
}

/// A hook that panics when the timer reports a move does not stop the shared
/// thread: the move was made, and the other breakers are still woken.
#[test]
fn a_panicking_hook_does_not_stop_the_timer() {
    let config = || {
        BreakerConfig::builder()
            .failure_threshold(1)
            .open_duration(Duration::from_millis(20))
            .build()
            .unwrap()
    };
    let loud = SharedBreaker::new(config()).unwrap().on_transition(|t| {
        assert!(
            t.cause != TransitionCause::OpenElapsed,
            "a hook that panics"
        );
    });
    automatic_transitions(&loud).unwrap();
    loud.force(ManualState::OpenFor(Duration::from_millis(20)))
        .unwrap();
    eventually(|| loud.state() == BreakerState::HalfOpen);
    let (quiet, seen) = watched(config());
    quiet
        .force(ManualState::OpenFor(Duration::from_millis(20)))
        .unwrap();
    eventually(|| quiet.state() == BreakerState::HalfOpen);
    assert_eq!(seen.lock().unwrap().len(), 2);
}
