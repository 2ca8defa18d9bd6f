//! Cancellation on the mock clock: a cancelled call ends at the instant of the
//! cancel, in a sleep or in an attempt, and never starts another attempt.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use core::cell::{Cell, RefCell};
use core::time::Duration;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{Duration as Ticks, Timer};
use retry_core::{
    Backoff, BasicRule, BreakerConfig, BreakerState, Failure, GiveUpReason, Jitter, RetryError,
    RetryPolicy, Scripted, Simulation, Step,
};
use retry_embassy::{CancelSignal, Retry, SharedBreaker};
use support::{advance, now, virtual_time, Tasks};

const MS: Ticks = Ticks::from_millis(1);

fn one_second_apart() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
        .max_delay(Duration::from_secs(30))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

#[test]
fn cancelling_during_a_sleep_ends_the_call_at_that_instant() {
    let _clock = virtual_time();
    let stop: CancelSignal<CriticalSectionRawMutex> = CancelSignal::new();
    let policy = one_second_apart();
    let attempts = Cell::new(0);
    let steps = RefCell::new(Vec::new());
    let result: RefCell<Option<Result<(), RetryError<&str>>>> = RefCell::new(None);
    let retry = Retry::new(policy, 3)
        .cancel_on(&stop)
        .on_step(|s: &Step| steps.borrow_mut().push(*s));
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let r = retry
            .call(async |_| {
                attempts.set(attempts.get() + 1);
                Err::<(), _>("flaky")
            })
            .await
            .map(|s| s.value);
        *result.borrow_mut() = Some(r);
    });

    // The first attempt fails at once; the call sleeps one second.
    tasks.run_for(MS, Ticks::from_millis(300));
    assert_eq!(attempts.get(), 1);
    assert!(result.borrow().is_none(), "still sleeping at 300 ms");

    // Cancel, and let only what is due now run: no time passes.
    stop.cancel();
    tasks.run_until_idle();
    assert_eq!(now(), Duration::from_millis(300));
    let err = result
        .borrow_mut()
        .take()
        .expect("the call ended without time passing")
        .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Cancelled);
    assert!(err.is_cancelled());
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.elapsed(), Some(Duration::from_millis(300)));
    assert_eq!(err.last_error(), Some(&"flaky"));

    // The same rows as the simulator's cancelled call.
    let expected: Vec<Step> = Simulation::new(&policy, 3, &[Scripted::fail(Failure::retryable())])
        .cancel_at(Duration::from_millis(300))
        .collect();
    assert_eq!(steps.borrow().as_slice(), expected.as_slice());

    // Long after the sleep would have ended, still one attempt.
    tasks.run_for(MS, Ticks::from_secs(10));
    assert_eq!(attempts.get(), 1);
    assert!(tasks.all_done());
}

#[test]
fn cancelling_during_an_attempt_drops_it_and_releases_its_breaker_permit() {
    let _clock = virtual_time();
    let stop: CancelSignal<CriticalSectionRawMutex> = CancelSignal::new();
    let breaker: SharedBreaker<CriticalSectionRawMutex> = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 1,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let attempt_ended = Cell::new(false);
    let result = RefCell::new(None);
    let retry = Retry::new(one_second_apart(), 3)
        .cancel_on(&stop)
        .breaker(&breaker);
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let r = retry
            .call(async |_| {
                Timer::after(Ticks::from_secs(60)).await; // a read that hangs
                attempt_ended.set(true);
                Ok::<u8, &str>(1)
            })
            .await;
        *result.borrow_mut() = Some(r);
    });
    tasks.run_for(MS, Ticks::from_millis(120));
    assert!(result.borrow().is_none());

    stop.cancel();
    tasks.run_until_idle();
    let err = result.borrow_mut().take().unwrap().unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Cancelled);
    assert_eq!(
        (err.attempts(), err.elapsed()),
        (1, Some(Duration::from_millis(120)))
    );
    assert!(
        !attempt_ended.get(),
        "the attempt was dropped, not finished"
    );
    // A cancelled attempt is neither a success nor a failure for the breaker:
    // its permit went back unrecorded.
    let snapshot = breaker.snapshot().unwrap();
    assert_eq!(snapshot.state(), BreakerState::Closed);
    assert_eq!(snapshot.consecutive_failures(), 0);
}

#[test]
fn a_call_started_after_the_cancel_gives_up_before_its_first_attempt() {
    let _clock = virtual_time();
    static STOP: CancelSignal<CriticalSectionRawMutex> = CancelSignal::new();
    STOP.cancel();
    let attempts = Cell::new(0);
    let result = RefCell::new(None);
    let retry = Retry::new(one_second_apart(), 3).cancel_on(&STOP);
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let r = retry
            .call(async |_| {
                attempts.set(attempts.get() + 1);
                Ok::<(), ()>(())
            })
            .await;
        *result.borrow_mut() = Some(r);
    });
    tasks.run_until_idle();
    let err = result.borrow_mut().take().unwrap().unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (GiveUpReason::Cancelled, 0));
    assert_eq!(attempts.get(), 0);

    // Reset, and calls run again.
    STOP.reset();
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let r = retry
            .call(async |_| {
                attempts.set(attempts.get() + 1);
                Ok::<(), ()>(())
            })
            .await;
        *result.borrow_mut() = Some(r);
    });
    tasks.run_until_idle();
    assert_eq!(result.borrow_mut().take().unwrap().unwrap().attempts, 1);
}

/// Five tasks, each with a call that fails at once and sleeps a second, are
/// cancelled at 500 ms; returns when each call ended, and its attempts.
fn five_tasks_cancelled_at_500ms<const SLOTS: usize>() -> Vec<(u8, GiveUpReason, u32, Duration)> {
    let stop: CancelSignal<CriticalSectionRawMutex, SLOTS> = CancelSignal::new();
    let ended = RefCell::new(Vec::new());
    let retry = Retry::new(one_second_apart(), 3).cancel_on(&stop);
    let mut tasks = Tasks::new();
    for task in 0..5u8 {
        let (retry, ended) = (&retry, &ended);
        tasks.spawn(async move {
            let err = retry.call(async |_| Err::<(), u8>(task)).await.unwrap_err();
            ended
                .borrow_mut()
                .push((task, err.reason(), err.attempts(), now()));
        });
    }
    tasks.run_for(MS, Ticks::from_millis(500));
    assert!(ended.borrow().is_empty());
    stop.cancel();
    tasks.run(MS, Ticks::from_secs(10));
    drop(tasks);
    let mut ended = ended.into_inner();
    ended.sort_by_key(|e| e.0);
    ended
}

#[test]
fn one_signal_stops_every_call_waiting_on_it_at_once() {
    let _clock = virtual_time();
    let ended = five_tasks_cancelled_at_500ms::<5>();
    let expected: Vec<_> = (0..5)
        .map(|t| (t, GiveUpReason::Cancelled, 1, Duration::from_millis(500)))
        .collect();
    assert_eq!(ended, expected);
}

#[test]
fn calls_beyond_the_waiter_slots_stop_at_their_next_wake_up_without_another_attempt() {
    let _clock = virtual_time();
    // Two slots for five tasks: the first two wait on the signal and end at
    // once; the other three see it when their sleep ends, and start nothing.
    let ended = five_tasks_cancelled_at_500ms::<2>();
    let at = |t: u8| match t {
        0 | 1 => Duration::from_millis(500),
        _ => Duration::from_secs(1),
    };
    let expected: Vec<_> = (0..5)
        .map(|t| (t, GiveUpReason::Cancelled, 1, at(t)))
        .collect();
    assert_eq!(ended, expected);
}

#[test]
fn a_finished_call_frees_its_waiter_slot() {
    let _clock = virtual_time();
    let stop: CancelSignal<CriticalSectionRawMutex, 1> = CancelSignal::new();
    let retry = Retry::new(one_second_apart(), 3).cancel_on(&stop);
    let first = Cell::new(None);
    let second = Cell::new(None);
    let mut tasks = Tasks::new();
    // The first task's call takes the only slot while it sleeps, then succeeds.
    tasks.spawn(async {
        let r = retry
            .call(async |ctx| if ctx.is_first() { Err(()) } else { Ok(()) })
            .await;
        first.set(Some((r.map(|s| s.attempts).map_err(|e| e.reason()), now())));
    });
    tasks.run_for(MS, Ticks::from_millis(1_100));
    assert_eq!(first.get(), Some((Ok(2), Duration::from_secs(1))));
    // A call on another task now gets the slot: the cancel reaches it at once.
    tasks.spawn(async {
        let r = retry.call(async |_| Err::<(), ()>(())).await;
        second.set(Some((r.map_err(|e| e.reason()), now())));
    });
    tasks.run_for(MS, Ticks::from_millis(100));
    stop.cancel();
    tasks.run_until_idle();
    assert_eq!(
        second.get(),
        Some((Err(GiveUpReason::Cancelled), Duration::from_millis(1_200)))
    );
}

#[test]
fn dropping_a_call_mid_attempt_hands_its_probe_permit_back() {
    let _clock = virtual_time();
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 1,
        open_duration: Duration::from_secs(1),
        success_threshold: 1,
    })
    .unwrap();
    let breaker: SharedBreaker<CriticalSectionRawMutex> = SharedBreaker::new(config).unwrap();
    let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
    let retry = Retry::new(policy, 1).breaker(&breaker);

    // One failure opens the breaker.
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let _ = retry.call(async |_| Err::<(), ()>(())).await;
    });
    tasks.run_until_idle();
    assert_eq!(breaker.state(), BreakerState::Open);
    advance(Ticks::from_secs(1));

    // A probe starts, and its call is dropped (say, by a select that lost).
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let probe = retry.call(async |_| {
            Timer::after(Ticks::from_secs(10)).await;
            Ok::<(), ()>(())
        });
        let _ = embassy_futures::select::select(probe, Timer::after(Ticks::from_millis(50))).await;
    });
    tasks.run_until_idle();
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(breaker.probes_in_flight(), 1);
    tasks.run_for(MS, Ticks::from_millis(60));
    assert!(tasks.all_done());
    assert_eq!(
        breaker.probes_in_flight(),
        0,
        "the dropped call released its permit"
    );
}
