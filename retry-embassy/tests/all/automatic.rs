//! Automatic transitions on the mock clock: a task awaiting
//! `SharedBreaker::automatic_transitions` moves the breaker at its deadlines,
//! with no call, on the first tick at or after each.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use core::cell::RefCell;
use core::time::Duration;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::Duration as Ticks;
use retry_core::{
    BreakerConfig, BreakerState, HalfOpenTimeout, Instant, ManualState, Rate, RetryPolicy,
    Transition, TransitionCause,
};
use retry_embassy::{Retry, SharedBreaker};
use support::{virtual_time, Tasks};

fn resilience4j() -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(5)
        .minimum_calls(5)
        .half_open_permits(3)
        .success_threshold(3)
        .open_duration(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// Resilience4j's scenario: calls trip the breaker at 10 ms; no call comes
/// after; at 2.010 s the timer task has moved it to half-open, at that instant.
#[test]
fn resilience4j_automatic_transition_from_open_to_half_open() {
    let _clock = virtual_time();
    let breaker: SharedBreaker<CriticalSectionRawMutex, 1> =
        SharedBreaker::new(resilience4j()).unwrap();
    let seen = RefCell::new(Vec::<Transition>::new());
    let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
    let mut tasks = Tasks::new();
    tasks.spawn(breaker.automatic_transitions(|t| seen.borrow_mut().push(*t)));
    tasks.spawn(async {
        for fail in [false, true, false, true, true] {
            embassy_time::Timer::after(Ticks::from_millis(2)).await;
            let retry = Retry::new(policy, 1).breaker(&breaker);
            let _ = retry
                .call(async |_| if fail { Err("down") } else { Ok(()) })
                .await;
        }
    });
    tasks.run_for(Ticks::from_millis(1), Ticks::from_millis(10));
    assert_eq!(breaker.state(), BreakerState::Open);
    let due = breaker.next_deadline().unwrap();
    assert_eq!(due.as_millis(), 2_010);
    assert!(
        seen.borrow().is_empty(),
        "the trip is a call's, not the timer's"
    );
    // No call: let the time pass a millisecond at a time.
    tasks.run_for(Ticks::from_millis(1), Ticks::from_millis(1_999));
    assert_eq!(breaker.state(), BreakerState::Open);
    tasks.run_for(Ticks::from_millis(1), Ticks::from_millis(1));
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(
        *seen.borrow(),
        [Transition {
            from: BreakerState::Open,
            to: BreakerState::HalfOpen,
            at: Instant::from_millis(2_010),
            cause: TransitionCause::OpenElapsed,
        }]
    );
    assert_eq!(breaker.probes_in_flight(), 0);
}

/// The timer follows the breaker: waiting with nothing due, it learns of an
/// operator's move, sleeps to the new deadline, then applies the half-open
/// maximum wait; an operator's forced-open leaves nothing to wake.
#[test]
fn the_timer_follows_moves_and_applies_the_half_open_wait() {
    let _clock = virtual_time();
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(Duration::from_secs(1))
        .max_half_open_wait(Duration::from_secs(3))
        .on_half_open_timeout(HalfOpenTimeout::Close)
        .build()
        .unwrap();
    let breaker: SharedBreaker<CriticalSectionRawMutex, 0> = SharedBreaker::new(config).unwrap();
    let seen = RefCell::new(Vec::new());
    let mut tasks = Tasks::new();
    tasks.spawn(breaker.automatic_transitions(|t| seen.borrow_mut().push((t.to, t.cause, t.at))));
    tasks.run_for(Ticks::from_millis(100), Ticks::from_secs(5));
    breaker
        .force(ManualState::OpenFor(Duration::from_secs(1)))
        .unwrap(); // at 5 s
    tasks.run_for(Ticks::from_millis(100), Ticks::from_secs(5));
    assert_eq!(
        *seen.borrow(),
        [
            (
                BreakerState::HalfOpen,
                TransitionCause::OpenElapsed,
                Instant::from_secs(6)
            ),
            (
                BreakerState::Closed,
                TransitionCause::HalfOpenTimeout,
                Instant::from_secs(9)
            ),
        ]
    );
    breaker
        .force(ManualState::OpenFor(Duration::from_secs(1)))
        .unwrap();
    breaker.force(ManualState::ForcedOpen).unwrap();
    tasks.run_for(Ticks::from_millis(100), Ticks::from_secs(5));
    assert_eq!(breaker.state(), BreakerState::ForcedOpen);
    assert_eq!(seen.borrow().len(), 2);
}
