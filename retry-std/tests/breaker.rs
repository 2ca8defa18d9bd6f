//! The blocking adapter with a shared circuit breaker, in virtual time.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{
    Backoff, BreakerConfig, BreakerState, CircuitOpen, GiveUpReason, Jitter, RetryPolicy,
    SleepReason,
};
use retry_std::{ManualClock, Retry, SharedBreaker};

fn policy(attempts: u32, on_open: CircuitOpen) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .on_circuit_open(on_open)
        .build()
        .unwrap()
}

#[test]
fn an_open_breaker_stops_calls_without_running_them() {
    let clock = ManualClock::new();
    let transitions = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&transitions);
    let breaker = SharedBreaker::new(BreakerConfig::basic(2, Duration::from_secs(5), 1).unwrap())
        .unwrap()
        .on_transition(move |t| seen.lock().unwrap().push((t.from, t.to)));
    let retry = Retry::<&str>::new(policy(3, CircuitOpen::GiveUp))
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(breaker.clone());
    let calls = AtomicU32::new(0);
    // Two failures open the breaker; the third attempt is rejected before running.
    let err = retry
        .call(|_| {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>("down")
        })
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        err.reason(),
        GiveUpReason::CircuitOpen {
            wait: Some(Duration::from_millis(4_900))
        }
    );
    assert_eq!(err.code(), "retry.circuit_open");
    assert_eq!(err.attempts(), 2);
    assert_eq!(breaker.state(), BreakerState::Open);
    // A later call is turned away at once.
    let err = retry.call(|_| -> Result<(), &str> { panic!("must not run") });
    assert!(matches!(err, Err(e) if e.attempts() == 0));
    assert_eq!(
        transitions.lock().unwrap().as_slice(),
        [(BreakerState::Closed, BreakerState::Open)]
    );
}

#[test]
fn a_waiting_call_probes_once_the_breaker_half_opens() {
    let clock = ManualClock::new();
    let sleeper = clock.sleeper();
    let breaker =
        SharedBreaker::new(BreakerConfig::basic(2, Duration::from_secs(5), 1).unwrap()).unwrap();
    let retry = Retry::<&str>::new(policy(5, CircuitOpen::Wait))
        .clock(clock.clone())
        .sleeper(sleeper.clone())
        .breaker(breaker.clone());
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reasons);
    let retry = retry.on_retry(move |n| seen.lock().unwrap().push(n.reason));
    let ok = retry
        .call(|ctx| {
            if ctx.attempt() <= 2 {
                Err("down")
            } else {
                Ok(ctx.attempt())
            }
        })
        .unwrap();
    // Attempts 1 and 2 fail (opening the breaker at 0.1 s); attempt 3 is rejected,
    // the call sleeps until the breaker half-opens at 5.1 s, and attempt 3 runs as
    // the probe and closes it.
    assert_eq!(ok.value, 3);
    assert_eq!(ok.attempts, 3);
    assert_eq!(
        sleeper.sleeps(),
        [
            Duration::from_millis(100),
            Duration::from_millis(100),
            Duration::from_millis(4_900)
        ]
    );
    assert_eq!(clock.elapsed(), Duration::from_millis(5_100));
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(
        reasons.lock().unwrap().first().copied().flatten(),
        Some(SleepReason::Curve)
    );
}
