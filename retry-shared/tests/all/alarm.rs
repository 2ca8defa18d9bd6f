//! What a timer holds for a shared breaker ([`SharedBreaker::alarm`]), driven
//! by hand on made-up instants: when to ring, what a ring does early, at the
//! deadline and after the breaker is gone, and when the breaker asks its timer
//! to look again.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use retry_core::{
    BreakerConfig, BreakerState, CallOutcome, HalfOpenTimeout, ManualState, Transition,
    TransitionCause,
};
use retry_shared::{Alarm, AlreadyTimed, Breaker, Clock, Gate, SharedBreaker};

struct At(Instant);

impl Clock for At {
    fn now(&self) -> Instant {
        self.0
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn an_alarm_rings_at_the_deadline_and_only_then() {
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(secs(5))
        .max_half_open_wait(secs(20))
        .on_half_open_timeout(HalfOpenTimeout::Close)
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::<Transition>::new()));
    let log = Arc::clone(&seen);
    let breaker = SharedBreaker::new(config)
        .unwrap()
        .on_transition(move |t| log.lock().unwrap().push(*t));
    let rearmed = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&rearmed);
    let t0 = Instant::now();
    let alarm = breaker
        .alarm(t0, move || {
            count.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    assert_eq!(alarm.next(), Alarm::Idle);
    assert_eq!(breaker.alarm(t0, || {}).unwrap_err(), AlreadyTimed);
    // A call through a clone trips it: the timer is asked to look again.
    let clone = breaker.clone();
    let Gate::Admitted(permit) = clone.request(&At(t0)) else {
        panic!("closed: admitted")
    };
    clone.record(permit, CallOutcome::failure(Duration::ZERO), &At(t0));
    assert_eq!(rearmed.load(Ordering::SeqCst), 1);
    assert_eq!(alarm.next(), Alarm::At(t0 + secs(5)));
    assert_eq!(breaker.next_deadline(), Some(t0 + secs(5)));
    // Early: nothing moves, nothing is told.
    assert_eq!(alarm.ring(t0 + secs(4)), Alarm::At(t0 + secs(5)));
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(rearmed.load(Ordering::SeqCst), 1);
    // At the deadline: half-open, reported, and the half-open wait is next.
    assert_eq!(alarm.ring(t0 + secs(5)), Alarm::At(t0 + secs(25)));
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(rearmed.load(Ordering::SeqCst), 2);
    // Late: the wait's decision, at the time of the ring; then nothing due.
    assert_eq!(alarm.ring(t0 + secs(26)), Alarm::Idle);
    assert_eq!(breaker.state(), BreakerState::Closed);
    let causes: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|t| (t.to, t.cause))
        .collect();
    assert_eq!(
        causes,
        [
            (BreakerState::Open, TransitionCause::ConsecutiveFailures),
            (BreakerState::HalfOpen, TransitionCause::OpenElapsed),
            (BreakerState::Closed, TransitionCause::HalfOpenTimeout),
        ]
    );
    // Closed again, the lock-free path admits without the lock.
    let Gate::Admitted(permit) = breaker.request(&At(t0 + secs(27))) else {
        panic!("closed: admitted")
    };
    breaker.record(
        permit,
        CallOutcome::success(Duration::ZERO),
        &At(t0 + secs(27)),
    );
    // An operator's move is told too; a ring with nothing due says so.
    breaker
        .force_at(ManualState::ForcedOpen, t0 + secs(28))
        .unwrap();
    assert_eq!(rearmed.load(Ordering::SeqCst), 4);
    assert_eq!(alarm.ring(t0 + secs(3600)), Alarm::Idle);
    assert_eq!(breaker.wake_at(t0 + secs(3600)), None);
}

#[test]
fn an_alarm_outlives_nothing() {
    let breaker = SharedBreaker::new(BreakerConfig::default()).unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Told(Arc<AtomicUsize>);
    impl Drop for Told {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let told = Told(Arc::clone(&dropped));
    let t0 = Instant::now();
    let alarm = breaker
        .alarm(t0, move || {
            let _ = &told;
        })
        .unwrap();
    breaker.force_at(ManualState::OpenFor(secs(1)), t0).unwrap();
    let clone = breaker.clone();
    drop(breaker);
    assert_eq!(alarm.next(), Alarm::At(t0 + secs(1)));
    drop(clone);
    // The breaker is gone, and the timer's callback with it.
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(alarm.next(), Alarm::Gone);
    assert_eq!(alarm.ring(t0 + secs(1)), Alarm::Gone);
}
