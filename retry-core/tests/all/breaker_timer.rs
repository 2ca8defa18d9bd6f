//! The breaker's own moves in time: [`CircuitBreaker::next_deadline`] says when
//! it changes state with no call, [`CircuitBreaker::wake`] applies the time then.
//! Resilience4j's automatic transitions (`automaticTransitionFromOpenToHalfOpen`,
//! the scheduled half-open timeout) in virtual time, as timelines where the
//! driver's timer plays its part.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use crate::breaker::{fail, ms, ok, req, secs, wedgeable};
use retry_core::{
    Admission, BreakerConfig, BreakerOutput, BreakerSimulation, BreakerState, BreakerStep,
    BreakerTimeline, CallOutcome, CircuitBreaker, HalfOpenTimeout, Instant, ManualState, Rate,
    Transition, TransitionCause,
};

/// Resilience4j's test config for its automatic transition: a failure rate of
/// 50 % over the last 5 calls, judged from 5, 3 calls in half-open, 2 s open.
fn resilience4j() -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(5)
        .minimum_calls(5)
        .half_open_permits(3)
        .success_threshold(3)
        .open_duration(secs(2))
        .build()
        .unwrap()
}

fn call(b: &mut CircuitBreaker<1, 0>, now: Instant, success: bool) -> Option<Transition> {
    let Admission::Admitted { permit, .. } = b.request(now) else {
        panic!("closed: admitted");
    };
    let outcome = if success {
        CallOutcome::success(ms(1))
    } else {
        CallOutcome::failure(ms(1))
    };
    b.record(permit, outcome, now).transition
}

/// Open, wait, no call: the breaker is half-open at the end of the open
/// period and says so, as Resilience4j's `automaticTransitionFromOpenToHalfOpen`
/// scenario asks (there, the scheduler runs the transition 2 s after opening).
#[test]
fn resilience4j_automatic_transition_from_open_to_half_open() {
    let mut b = CircuitBreaker::<1, 0>::new(resilience4j()).unwrap();
    let t0 = Instant::from_secs(10);
    let mut published = Vec::new();
    for success in [true, false, true, false] {
        assert_eq!(call(&mut b, t0, success), None);
    }
    assert_eq!(
        b.next_deadline(),
        None,
        "closed: nothing happens on its own"
    );
    published.extend(call(&mut b, t0, false));
    assert_eq!(b.state(), BreakerState::Open);
    // The timer is set for the end of the open period: 2 s from the trip.
    let due = b.next_deadline().unwrap();
    assert_eq!(due, t0 + secs(2));
    // An early wake (a timer that fires a tick early) is harmless.
    let before = b.clone();
    assert_eq!(b.wake(due.saturating_sub(ms(1))), None);
    assert_eq!(b, before);
    // The timer fires; no call has come.
    published.extend(b.wake(due));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert_eq!(
        published,
        [
            Transition {
                from: BreakerState::Closed,
                to: BreakerState::Open,
                at: t0,
                cause: TransitionCause::FailureRate,
            },
            Transition {
                from: BreakerState::Open,
                to: BreakerState::HalfOpen,
                at: due,
                cause: TransitionCause::OpenElapsed,
            },
        ]
    );
    // Nothing was admitted or counted by the wake: the three probe places
    // are all free, and no call was rejected.
    assert_eq!(b.probes_in_flight(), 0);
    assert_eq!(b.rejected_calls(), 0);
    for _ in 0..3 {
        let admission = b.request(due + ms(5));
        assert!(
            matches!(admission, Admission::Admitted { ref permit, transition: None } if permit.is_probe()),
            "{admission:?}"
        );
        let Admission::Admitted { permit, .. } = admission else {
            unreachable!()
        };
        b.release(permit, due + ms(5));
    }
    // Half-open without a maximum wait: only an input moves it now.
    assert_eq!(b.next_deadline(), None);
}

/// Resilience4j's `shouldCancelAutoTransition`: an operator forces the breaker
/// open while the automatic transition is pending; the timer armed for the end
/// of the open period then does nothing (there, the scheduled future is
/// cancelled).
#[test]
fn a_timer_armed_before_an_operator_moved_the_breaker_does_nothing() {
    let t0 = Instant::from_secs(1);
    let mut b =
        CircuitBreaker::<1, 0>::starting_in(resilience4j(), ManualState::OpenFor(secs(2)), t0)
            .unwrap();
    let armed = b.next_deadline().unwrap();
    assert_eq!(armed, t0 + secs(2));
    b.force(ManualState::ForcedOpen, t0 + ms(500)).unwrap();
    assert_eq!(b.next_deadline(), None);
    let before = b.clone();
    assert_eq!(b.wake(armed), None);
    assert_eq!(b.wake(armed + secs(3600)), None);
    assert_eq!(b, before);
    assert_eq!(b.state(), BreakerState::ForcedOpen);
    // Re-opened for longer: the old instant is not the deadline any more.
    b.force(ManualState::OpenFor(secs(10)), t0 + secs(1))
        .unwrap();
    assert_eq!(b.wake(armed), None);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.next_deadline(), Some(t0 + secs(11)));
}

/// A wake makes the move the first request at that instant would make, and
/// reports it the same way: the same transition, the same state after it
/// (the request also admits its probe, or is rejected by the re-opened
/// breaker).
#[test]
fn a_wake_reports_what_a_request_at_that_instant_would() {
    let configs = [
        resilience4j(),
        wedgeable(HalfOpenTimeout::Reopen),
        wedgeable(HalfOpenTimeout::Close),
    ];
    for config in configs {
        let t0 = Instant::from_secs(3);
        let starts = [
            ManualState::OpenFor(secs(2)),
            ManualState::OpenUntil(t0 + ms(1)),
            ManualState::HalfOpen,
        ];
        for start in starts {
            let fresh = CircuitBreaker::<1, 0>::starting_in(config, start, t0).unwrap();
            let Some(due) = fresh.next_deadline() else {
                assert_eq!(config.max_half_open_wait(), None);
                continue;
            };
            for late in [Duration::ZERO, ms(1), secs(7)] {
                let now = due + late;
                let (mut woken, mut asked) = (fresh.clone(), fresh.clone());
                let by_timer = woken.wake(now);
                let by_request = match asked.request(now) {
                    Admission::Admitted { transition, .. }
                    | Admission::Rejected { transition, .. } => transition,
                };
                assert!(by_timer.is_some(), "{config} from {start}: due at {due}");
                assert_eq!(by_timer, by_request, "{config} from {start} at {now}");
                assert_eq!(woken.state(), asked.state());
                assert_eq!(woken.epoch(), asked.epoch());
                assert_eq!(woken.reopens(), asked.reopens());
                assert_eq!(woken.next_deadline(), asked.next_deadline());
                assert_eq!(woken.rejected_calls(), 0);
            }
        }
    }
}

/// Resilience4j's scenario as a timeline: the timer moves the breaker to
/// half-open at 2.010 s with no call, and the first call after it is a probe.
#[test]
fn timer_moves_open_to_half_open() {
    let script = [
        req(ms(0)),
        ok(ms(1), 1),
        req(ms(2)),
        fail(ms(3), 2),
        req(ms(4)),
        ok(ms(5), 3),
        req(ms(6)),
        fail(ms(7), 4),
        req(ms(8)),
        fail(ms(10), 5), // 3 of 5 failed: open until 2.010 s
        req(ms(500)),    // rejected
        req(secs(5)),    // long after: the first probe
        ok(secs(6), 6),
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&resilience4j(), &script)
        .with_timer()
        .to_string());
}

/// The half-open maximum wait ends with no call and its probe hung: the timer
/// re-opens the breaker at 25 s, and at 30 s moves it to half-open again.
#[test]
fn timer_applies_the_half_open_wait_reopening() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1), // open for 5 s
        req(secs(6)),   // half-open since the timer at 5 s; call 2 is the probe and hangs
        req(secs(7)),   // rejected, told when the breaker will decide: 25 s
        req(secs(40)),  // re-opened at 25 s, half-open again at 30 s: a fresh probe
        ok(secs(41), 3),
        ok(secs(42), 2), // the hung call ends: late
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(
        &wedgeable(HalfOpenTimeout::Reopen),
        &script
    )
    .with_timer()
    .to_string());
}

/// The same with the wait closing the breaker: closed at 25 s by the timer.
#[test]
fn timer_applies_the_half_open_wait_closing() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1),
        req(secs(6)), // probe, hangs
        req(secs(30)),
        fail(secs(31), 3), // a closed call: trips again (open until 36 s)
        ok(secs(32), 2),   // the old probe: ignored, the breaker is open
        req(secs(40)),     // half-open since 36 s
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(
        &wedgeable(HalfOpenTimeout::Close),
        &script
    )
    .with_timer()
    .to_string());
}

/// Scripted wakes: one too early, one in a state with no deadline, one after
/// an operator replaced the open period the timer was armed for. Each answers
/// "nothing due" and changes nothing.
#[test]
fn early_and_stale_wakes_change_nothing() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1),               // open until 5 s
        BreakerStep::woke(ms(4_999)), // a tick early
        BreakerStep::forced(ms(4_999), ManualState::OpenFor(secs(60))),
        BreakerStep::woke(secs(5)), // armed for the old period
        BreakerStep::forced(secs(6), ManualState::Disabled),
        BreakerStep::woke(secs(65)), // no deadline while disabled
        BreakerStep::forced(secs(66), ManualState::OpenFor(secs(1))),
        BreakerStep::woke(secs(67)), // due: half-open, deciding by 87 s
        BreakerStep::woke(secs(67)), // nothing left
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(
        &wedgeable(HalfOpenTimeout::Reopen),
        &script
    )
    .to_string());
}

/// A run with the timer answers every request, outcome and operator move as
/// one without it would, in every state the timer cannot have moved (the
/// rows differ only where a deadline passed between two steps).
#[test]
fn the_timer_changes_nothing_before_a_deadline() {
    let script = [
        req(ms(0)),
        fail(ms(1), 1),
        req(ms(2)),
        req(ms(4_000)),
        BreakerStep::forced(ms(4_500), ManualState::Closed),
        req(ms(4_600)),
        ok(ms(4_700), 2),
    ];
    let config = wedgeable(HalfOpenTimeout::Reopen);
    let plain: Vec<_> = BreakerSimulation::<0, 0>::new(config, &script)
        .unwrap()
        .collect();
    let timed: Vec<_> = BreakerSimulation::<0, 0>::new(config, &script)
        .unwrap()
        .with_timer()
        .collect();
    assert_eq!(plain, timed);
    assert!(timed
        .iter()
        .all(|row| !matches!(row.output, BreakerOutput::Woke(_))));
}
