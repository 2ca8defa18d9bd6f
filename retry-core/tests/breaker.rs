//! Breaker timelines, snapshot-tested: each test reads as the breaker's life.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    Admission, Backoff, BreakerConfig, BreakerError, BreakerState, BreakerStep, BreakerTimeline,
    CallOutcome, CircuitBreaker, Instant, ManualState, Rate,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn req(at: Duration) -> BreakerStep {
    BreakerStep::request(at)
}

fn ok(at: Duration, call: u32) -> BreakerStep {
    BreakerStep::succeeded(at, call, ms(10))
}

fn fail(at: Duration, call: u32) -> BreakerStep {
    BreakerStep::failed(at, call, ms(10))
}

#[test]
fn size_of_a_breaker() {
    let config = core::mem::size_of::<BreakerConfig>();
    let count_100 = core::mem::size_of::<CircuitBreaker<2, 0>>();
    let plain = core::mem::size_of::<CircuitBreaker<0, 0>>();
    let time_10 = core::mem::size_of::<CircuitBreaker<0, 10>>();
    println!("BreakerConfig: {config} bytes");
    println!(
        "CircuitBreaker<2, 0> (100-call window): {count_100} bytes, {} without the config",
        count_100 - config
    );
    println!("CircuitBreaker<0, 0> (no window): {plain} bytes");
    println!("CircuitBreaker<0, 10> (10 buckets): {time_10} bytes");
    println!(
        "Permit: {} bytes",
        core::mem::size_of::<retry_core::Permit>()
    );
    assert!(
        count_100 - config <= 64,
        "state beside the config must fit 64 bytes"
    );
    assert_eq!(CircuitBreaker::<2, 0>::CALL_CAPACITY, 128);
}

#[test]
fn ts_basic_rule_end_to_end() {
    // closed -> open at 3 consecutive failures, open -> half-open after 10 s,
    // half-open -> closed after 2 successes, half-open -> open on any failure.
    let config = BreakerConfig::basic(3, secs(10), 2).unwrap();
    let script = [
        req(ms(0)),
        fail(ms(100), 1),
        req(ms(200)),
        fail(ms(300), 2),
        req(ms(400)),
        ok(ms(500), 3), // the streak restarts
        req(ms(600)),
        fail(ms(700), 4),
        req(ms(800)),
        fail(ms(900), 5),
        req(secs(1)),
        fail(ms(1100), 6), // third in a row: trips
        req(secs(5)),
        req(ms(11_099)),
        req(ms(11_100)), // the timeout has passed: half-open, first probe
        req(ms(11_200)), // no probe limit in the basic rule
        ok(ms(11_300), 7),
        ok(ms(11_400), 8), // second success: closed
        req(secs(12)),
        fail(ms(12_100), 9),
        req(ms(12_200)),
        fail(ms(12_300), 10),
        req(ms(12_400)),
        fail(ms(12_500), 11),
        req(ms(22_500)),
        fail(ms(22_600), 12), // a failed probe re-opens, for 10 s again
        req(ms(32_599)),
        req(ms(32_600)),
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(&config, &script).to_string());
}

#[test]
fn count_window_trips_exactly_at_minimum_calls() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(10)
        .minimum_calls(5)
        .open_duration(secs(30))
        .build()
        .unwrap();
    let mut script = Vec::new();
    for call in 1..=4 {
        let t = u64::from(call) * 100;
        script.push(req(ms(t)));
        script.push(fail(ms(t + 50), call)); // 100 % failures, but too few calls
    }
    script.push(req(ms(500)));
    script.push(ok(ms(550), 5)); // 4 of 5 failed: judged now, trips
    script.push(req(ms(600)));
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&config, &script).to_string());
}

#[test]
fn time_window_drops_old_buckets() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .time_window(secs(10), 5)
        .minimum_calls(4)
        .build()
        .unwrap();
    let script = [
        req(ms(0)),
        fail(ms(0), 1),
        req(secs(1)),
        fail(secs(1), 2),
        req(secs(3)),
        ok(secs(3), 3),
        // Bucket [0 s, 2 s) has left the window [2 s, 12 s): both failures went with it.
        req(ms(10_500)),
        ok(ms(10_500), 4),
        req(secs(11)),
        fail(secs(11), 5),
        req(ms(11_500)),
        fail(ms(11_500), 6), // 2 of 4 failed: trips
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 5>::new(&config, &script).to_string());
}

#[test]
fn slow_successes_trip_the_breaker() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .slow_call_rate(Rate::from_percent(50))
        .slow_call_duration(secs(1))
        .count_window(4)
        .minimum_calls(4)
        .build()
        .unwrap();
    let script = [
        req(ms(0)),
        BreakerStep::succeeded(secs(1), 1, secs(1)), // exactly the limit: not slow
        req(secs(1)),
        BreakerStep::succeeded(ms(2500), 2, ms(1500)),
        req(ms(2500)),
        BreakerStep::succeeded(ms(2700), 3, ms(200)),
        req(ms(2700)),
        BreakerStep::succeeded(ms(4700), 4, secs(2)), // 2 of 4 slow: trips
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&config, &script).to_string());
}

fn probing_config() -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(secs(5))
        .half_open_permits(3)
        .success_threshold(3)
        .build()
        .unwrap()
}

#[test]
fn half_open_admits_three_probes_and_rejects_a_fourth() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1),
        req(secs(5)),
        req(secs(5)),
        req(secs(5)),
        req(secs(5)), // fourth: every slot taken
        ok(secs(6), 2),
        req(secs(6)), // a finished probe frees its slot
        ok(secs(7), 3),
        ok(secs(7), 4), // third success in a row: closed
        ok(secs(8), 5), // a probe finishing after the close counts as a closed call
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(&probing_config(), &script).to_string());
}

#[test]
fn released_permit_frees_its_slot_and_records_nothing() {
    let config = probing_config()
        .to_builder()
        .count_window(4)
        .minimum_calls(1)
        .build()
        .unwrap();
    let script = [
        req(ms(0)),
        BreakerStep::released(ms(10), 1), // closed: nothing recorded
        req(ms(20)),
        fail(ms(20), 2),
        req(secs(6)),
        req(secs(6)),
        req(secs(6)),
        req(secs(6)),
        BreakerStep::released(secs(7), 4),
        BreakerStep::released(secs(7), 4), // twice: the driver no longer holds it
        req(secs(7)),
        req(secs(7)),
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&config, &script).to_string());
}

#[test]
fn open_duration_grows_and_resets_after_closing() {
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_backoff(Backoff::exponential(secs(5), 2.0))
        .max_open_duration(secs(60))
        .build()
        .unwrap();
    let script = [
        req(secs(0)),
        fail(secs(0), 1), // open 5 s
        req(secs(5)),
        fail(secs(5), 2), // open 10 s
        req(secs(15)),
        fail(secs(15), 3), // open 20 s
        req(secs(34)),
        req(secs(35)),
        ok(secs(35), 4), // closed: the curve restarts
        req(secs(40)),
        fail(secs(40), 5), // open 5 s again
        req(secs(44)),
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(&config, &script).to_string());
}

#[test]
fn manual_states() {
    let config = BreakerConfig::builder()
        .failure_threshold(2)
        .count_window(10)
        .open_duration(secs(10))
        .build()
        .unwrap();
    let script = [
        BreakerStep::forced(ms(0), ManualState::ForcedOpen),
        req(ms(100)), // rejected, no time given: only an operator reopens it
        BreakerStep::forced(ms(200), ManualState::ForcedOpen), // illegal: already there
        BreakerStep::forced(ms(300), ManualState::Disabled),
        req(ms(400)),
        fail(ms(500), 1),
        req(ms(600)),
        fail(ms(700), 2),
        req(ms(800)),
        fail(ms(900), 3), // three failures, nothing recorded
        BreakerStep::forced(secs(1), ManualState::MetricsOnly),
        req(ms(1100)),
        fail(ms(1200), 4),
        req(ms(1300)),
        fail(ms(1400), 5),
        req(ms(1500)),
        fail(ms(1600), 6), // recorded, but metrics-only never trips
        BreakerStep::forced(secs(2), ManualState::MetricsOnly), // illegal
        BreakerStep::forced(ms(2100), ManualState::Closed),
        BreakerStep::forced(ms(2200), ManualState::Closed), // illegal: already closed
        req(ms(2300)),
        fail(ms(2400), 7),
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&config, &script).to_string());
}

#[test]
fn illegal_transition_is_a_typed_error_that_changes_nothing() {
    let config = BreakerConfig::basic(1, secs(10), 1).unwrap();
    let mut breaker = CircuitBreaker::<0, 0>::new(config).unwrap();
    let before = breaker.clone();
    let err = breaker
        .force(ManualState::Closed, Instant::ORIGIN)
        .unwrap_err();
    assert_eq!(
        err,
        BreakerError::IllegalTransition {
            from: BreakerState::Closed,
            to: BreakerState::Closed
        }
    );
    assert_eq!(err.code(), "breaker.illegal_transition");
    assert_eq!(err.field(), "state");
    assert_eq!(breaker, before);
}

#[test]
fn late_outcomes_never_retrip() {
    let config = BreakerConfig::builder()
        .failure_threshold(2)
        .count_window(10)
        .minimum_calls(10)
        .open_duration(secs(5))
        .build()
        .unwrap();
    let script = [
        req(ms(0)),
        req(ms(0)),
        req(ms(0)),
        req(ms(100)),
        fail(ms(200), 4),
        req(ms(300)),
        fail(ms(400), 5), // trips: calls 1-3 are still out
        fail(secs(1), 1), // late while open: ignored, the open is not extended
        req(ms(5399)),
        req(ms(5400)),
        fail(secs(6), 2), // late while half-open: not a probe, no re-open
        ok(secs(7), 6),   // the probe closes the breaker
        fail(secs(8), 3), // late while closed: in the window, not in the streak
        req(secs(9)),
        fail(secs(9), 7), // one fresh failure: still closed
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&config, &script).to_string());
}

#[test]
fn config_errors_name_their_field() {
    let b = BreakerConfig::builder;
    let cases: [(Result<BreakerConfig, BreakerError>, &str, &str); 13] = [
        (
            b().failure_threshold(0).build(),
            "failure_threshold",
            "breaker.zero",
        ),
        (
            b().failure_rate(Rate::from_percent(101))
                .count_window(10)
                .build(),
            "failure_rate",
            "breaker.rate_out_of_range",
        ),
        (
            b().slow_call_rate(Rate::from_basis_points(0))
                .count_window(10)
                .build(),
            "slow_call_rate",
            "breaker.rate_out_of_range",
        ),
        (
            b().failure_rate(Rate::from_percent(50)).build(),
            "failure_rate",
            "breaker.missing_window",
        ),
        (b().count_window(0).build(), "window.calls", "breaker.zero"),
        (
            b().time_window(secs(1), 0).build(),
            "window.buckets",
            "breaker.zero",
        ),
        (
            b().time_window(Duration::ZERO, 4).build(),
            "window.length",
            "breaker.zero_duration",
        ),
        (
            b().count_window(5).minimum_calls(6).build(),
            "minimum_calls",
            "breaker.minimum_above_window",
        ),
        (
            b().half_open_permits(0).build(),
            "half_open_permits",
            "breaker.zero",
        ),
        (
            b().success_threshold(0).build(),
            "success_threshold",
            "breaker.zero",
        ),
        (
            b().failure_threshold(None).build(),
            "failure_threshold",
            "breaker.no_trip_rule",
        ),
        (
            b().open_backoff(Backoff::exponential(secs(1), 0.5)).build(),
            "open_backoff",
            "breaker.invalid_curve",
        ),
        (
            b().open_backoff(Backoff::constant(secs(10)))
                .max_open_duration(secs(1))
                .build(),
            "max_open_duration",
            "breaker.max_below_initial",
        ),
    ];
    for (result, field, code) in cases {
        let err = result.unwrap_err();
        assert_eq!((err.field(), err.code()), (field, code), "{err}");
        assert!(err.to_string().starts_with(field), "{err}");
    }
    assert_eq!(
        BreakerConfig::basic(3, Duration::ZERO, 1)
            .unwrap_err()
            .field(),
        "timeout"
    );
    let too_big = BreakerConfig::builder().count_window(100).build().unwrap();
    let err = CircuitBreaker::<1, 0>::new(too_big).unwrap_err();
    assert_eq!(
        err,
        BreakerError::WindowTooLarge {
            field: "window.calls",
            requested: 100,
            capacity: 64
        }
    );
}

#[test]
fn admission_shapes() {
    let config = BreakerConfig::basic(1, secs(5), 1).unwrap();
    let mut breaker = CircuitBreaker::<0, 0>::new(config).unwrap();
    let t0 = Instant::ORIGIN;
    let Admission::Admitted { permit, transition } = breaker.request(t0) else {
        panic!("closed admits")
    };
    assert!(transition.is_none() && !permit.is_probe());
    let t = breaker
        .record(permit, CallOutcome::failure(ms(1)), t0)
        .unwrap();
    assert_eq!((t.from, t.to), (BreakerState::Closed, BreakerState::Open));
    assert_eq!(breaker.open_until(), Some(t0 + secs(5)));
    assert!(!breaker.request(t0 + secs(4)).is_admitted());
    // Time going backwards: still open, same answer.
    assert!(!breaker.request(t0).is_admitted());
    let Admission::Admitted { permit, transition } = breaker.request(t0 + secs(5)) else {
        panic!("the open duration passed")
    };
    assert!(permit.is_probe());
    assert_eq!(transition.unwrap().to, BreakerState::HalfOpen);
    assert_eq!(breaker.to_string(), "half-open (1 probing, 0 good)");
    breaker.release(permit, t0 + secs(5));
    assert_eq!(breaker.probes_in_flight(), 0);
}
