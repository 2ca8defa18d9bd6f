//! Automatic transitions under paused time: a task wakes the shared breaker at
//! its deadlines, with no call (Resilience4j's
//! `automaticTransitionFromOpenToHalfOpen`, and its scheduled half-open
//! timeout).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{BreakerConfig, BreakerState, HalfOpenTimeout, Rate, TransitionCause};
use retry_tokio::{
    automatic_transitions, Failure, ManualState, Retry, RetryPolicy, SharedBreaker, TimerError,
    Transition,
};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Resilience4j's test config for its automatic transition: 50 % of the last 5
/// calls, 3 probes, 2 s open.
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

/// A breaker whose transitions are collected, with automatic transitions on.
fn watched(config: BreakerConfig) -> (SharedBreaker, Arc<Mutex<Vec<Transition>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let breaker = SharedBreaker::new(config)
        .unwrap()
        .on_transition(move |t| log.lock().unwrap().push(*t));
    automatic_transitions(&breaker).unwrap();
    (breaker, seen)
}

/// One call through the breaker: fails or succeeds.
async fn call(breaker: &SharedBreaker, fail: bool) {
    let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
    let _ = Retry::<&str>::new(policy)
        .breaker(breaker.clone())
        .classify(|_| Failure::retryable())
        .call(|_| async move {
            if fail {
                Err("down")
            } else {
                Ok(())
            }
        })
        .await;
}

/// Open, wait, no call: at the end of the open period the breaker is half-open
/// and the transition was published, at the instant itself.
#[tokio::test(start_paused = true)]
async fn resilience4j_automatic_transition_from_open_to_half_open() {
    let (breaker, seen) = watched(resilience4j());
    for fail in [false, true, false, true, true] {
        call(&breaker, fail).await;
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    let opened = Instant::now();
    assert_eq!(
        breaker.next_deadline(),
        Some((opened + Duration::from_secs(2)).into_std())
    );
    // Wait, with no call, until one tick past the end of the open period.
    tokio::time::sleep(Duration::from_secs(2) + ms(1)).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        (seen[0].from, seen[0].to, seen[0].cause),
        (
            BreakerState::Closed,
            BreakerState::Open,
            TransitionCause::FailureRate
        )
    );
    assert_eq!(
        (seen[1].from, seen[1].to, seen[1].cause),
        (
            BreakerState::Open,
            BreakerState::HalfOpen,
            TransitionCause::OpenElapsed
        )
    );
    // Stamped at the end of the open period, 2 s after the trip.
    assert_eq!(
        seen[1].at.saturating_duration_since(seen[0].at),
        Duration::from_secs(2)
    );
    // Nothing was admitted or counted by the timer.
    let m = breaker.metrics_at(Instant::now().into_std());
    assert_eq!((m.probes_in_flight, m.rejected), (0, 0));
}

/// Without automatic transitions (the default) the breaker stays open until a
/// call finds the time passed.
#[tokio::test(start_paused = true)]
async fn without_the_timer_an_open_breaker_waits_for_a_call() {
    let breaker = SharedBreaker::new(resilience4j()).unwrap();
    for fail in [false, true, false, true, true] {
        call(&breaker, fail).await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(breaker.state(), BreakerState::Open);
    call(&breaker, false).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
}

/// The half-open maximum wait ends with the probe hung: the timer re-opens
/// the breaker then, and moves it to half-open again at the end of the next
/// open period; each move is published once, at its instant.
#[tokio::test(start_paused = true)]
async fn the_half_open_wait_is_applied_at_its_end() {
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(Duration::from_secs(5))
        .max_half_open_wait(Duration::from_secs(20))
        .on_half_open_timeout(HalfOpenTimeout::Reopen)
        .build()
        .unwrap();
    let (breaker, seen) = watched(config);
    let start = Instant::now();
    call(&breaker, true).await; // open until 5 s
                                // A probe at 5 s that hangs, holding the only probe place.
    let hung = {
        let breaker = breaker.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
            let _ = Retry::<&str>::new(policy)
                .breaker(breaker)
                .call(|_| async { core::future::pending::<Result<(), &str>>().await })
                .await;
        })
    };
    tokio::time::sleep(Duration::from_secs(31)).await;
    let seen = seen.lock().unwrap().clone();
    let moves: Vec<_> = seen.iter().map(|t| (t.from, t.to, t.cause, t.at)).collect();
    let at = |s: u64| {
        let opened = seen[0].at;
        opened.saturating_add(Duration::from_secs(s))
    };
    assert_eq!(
        moves,
        [
            (
                BreakerState::Closed,
                BreakerState::Open,
                TransitionCause::ConsecutiveFailures,
                at(0)
            ),
            (
                BreakerState::Open,
                BreakerState::HalfOpen,
                TransitionCause::OpenElapsed,
                at(5)
            ),
            (
                BreakerState::HalfOpen,
                BreakerState::Open,
                TransitionCause::HalfOpenTimeout,
                at(25)
            ),
            (
                BreakerState::Open,
                BreakerState::HalfOpen,
                TransitionCause::OpenElapsed,
                at(30)
            ),
        ]
    );
    assert!(Instant::now() >= start + Duration::from_secs(31));
    hung.abort();
}

/// An operator's move replaces the deadline the timer waits for: forced open,
/// nothing happens when the old open period would have ended (Resilience4j's
/// `shouldCancelAutoTransition`); opened again for 10 s, the timer follows.
#[tokio::test(start_paused = true)]
async fn the_timer_follows_an_operators_moves() {
    let (breaker, seen) = watched(resilience4j());
    let now = || Instant::now().into_std();
    breaker
        .force_at(ManualState::OpenFor(Duration::from_secs(2)), now())
        .unwrap();
    tokio::time::sleep(ms(500)).await;
    breaker.force_at(ManualState::ForcedOpen, now()).unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(breaker.state(), BreakerState::ForcedOpen);
    breaker
        .force_at(ManualState::OpenFor(Duration::from_secs(10)), now())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10) + ms(1)).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let causes: Vec<_> = seen.lock().unwrap().iter().map(|t| t.cause).collect();
    assert_eq!(
        causes,
        [
            TransitionCause::Manual,
            TransitionCause::Manual,
            TransitionCause::Manual,
            TransitionCause::OpenElapsed
        ]
    );
}

/// Once on for a breaker, asking again (through any clone) is refused; outside
/// a runtime there is nothing to run the timer on. Neither panics.
#[test]
fn asking_twice_or_outside_a_runtime_is_a_typed_error() {
    let breaker = SharedBreaker::new(resilience4j()).unwrap();
    assert_eq!(automatic_transitions(&breaker), Err(TimerError::NoRuntime));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        automatic_transitions(&breaker).unwrap();
        let clone = breaker.clone();
        let e = automatic_transitions(&clone).unwrap_err();
        assert_eq!((e, e.code()), (TimerError::AlreadyOn, "timer.already_on"));
    });
}

/// The task ends once every clone of the breaker is dropped, whether it was
/// waiting for a deadline or for nothing.
#[tokio::test(start_paused = true)]
async fn the_task_ends_with_the_breaker() {
    for open in [false, true] {
        let breaker = SharedBreaker::new(resilience4j()).unwrap();
        if open {
            breaker
                .force_at(
                    ManualState::OpenFor(Duration::from_secs(3600)),
                    Instant::now().into_std(),
                )
                .unwrap();
        }
        automatic_transitions(&breaker).unwrap();
        let tasks = || {
            tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks()
        };
        tokio::task::yield_now().await;
        assert_eq!(tasks(), 1);
        drop(breaker);
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            tasks(),
            0,
            "the timer task outlived its breaker (open: {open})"
        );
    }
}

/// A hook that panics when the timer reports a move does not end the timer:
/// the move was made, and the next deadline is still kept.
#[tokio::test(start_paused = true)]
async fn a_panicking_hook_does_not_end_the_timer() {
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(Duration::from_secs(5))
        .max_half_open_wait(Duration::from_secs(20))
        .build()
        .unwrap();
    let breaker = SharedBreaker::new(config).unwrap().on_transition(|t| {
        assert!(
            t.cause != TransitionCause::OpenElapsed,
            "a hook that panics"
        );
    });
    automatic_transitions(&breaker).unwrap();
    breaker
        .force_at(
            ManualState::OpenFor(Duration::from_secs(5)),
            Instant::now().into_std(),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5) + ms(1)).await;
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    // The half-open wait still ends on time: the timer lives on.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(breaker.state(), BreakerState::Open);
}
