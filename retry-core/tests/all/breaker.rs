//! Breaker timelines, snapshot-tested: each test reads as the breaker's life.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    Admission, Backoff, BasicRule, BreakerConfig, BreakerError, BreakerState, BreakerStep,
    BreakerTimeline, CallOutcome, CircuitBreaker, Instant, ManualState, Rate,
};

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub(crate) fn req(at: Duration) -> BreakerStep {
    BreakerStep::request(at)
}

pub(crate) fn ok(at: Duration, call: u32) -> BreakerStep {
    BreakerStep::succeeded(at, call, ms(10))
}

pub(crate) fn fail(at: Duration, call: u32) -> BreakerStep {
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
    // 40 bytes of bit rings, cursors and the running counts of failed and
    // slow calls, 40 of state (a half-open period keeps its probe counts, its
    // deadline and the count of rejected calls it began at), 12 of epoch and
    // counters, 8 of rejected calls, 4 of padding.
    assert!(
        count_100 - config <= 104,
        "state beside the config must fit 104 bytes"
    );
    assert_eq!(CircuitBreaker::<2, 0>::CALL_CAPACITY, 128);
}

#[test]
fn ts_basic_rule_end_to_end() {
    // closed -> open at 3 consecutive failures, open -> half-open after 10 s,
    // half-open -> closed after 2 successes, half-open -> open on any failure.
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 3,
        open_duration: secs(10),
        success_threshold: 2,
    })
    .unwrap();
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
        BreakerStep::forced(ms(200), ManualState::ForcedOpen), // already there: entered afresh
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
        BreakerStep::forced(secs(2), ManualState::MetricsOnly), // entered afresh: clean window
        BreakerStep::forced(ms(2100), ManualState::Closed),
        BreakerStep::forced(ms(2200), ManualState::Closed), // entered afresh
        req(ms(2300)),
        fail(ms(2400), 7),
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&config, &script).to_string());
}

#[test]
fn illegal_transition_is_a_typed_error_that_changes_nothing() {
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 1,
        open_duration: secs(10),
        success_threshold: 1,
    })
    .unwrap();
    let mut breaker = CircuitBreaker::<0, 0>::new(config).unwrap();
    let before = breaker.clone();
    let err = breaker
        .force(ManualState::HalfOpen, Instant::ORIGIN)
        .unwrap_err();
    assert_eq!(
        err,
        BreakerError::IllegalTransition {
            from: BreakerState::Closed,
            to: BreakerState::HalfOpen
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
        BreakerConfig::basic(BasicRule {
            failure_threshold: 3,
            open_duration: Duration::ZERO,
            success_threshold: 1
        })
        .unwrap_err()
        .field(),
        "open_duration"
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
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 1,
        open_duration: secs(5),
        success_threshold: 1,
    })
    .unwrap();
    let mut breaker = CircuitBreaker::<0, 0>::new(config).unwrap();
    let t0 = Instant::ORIGIN;
    let Admission::Admitted { permit, transition } = breaker.request(t0) else {
        panic!("closed admits")
    };
    assert!(transition.is_none() && !permit.is_probe());
    let t = breaker
        .record(permit, CallOutcome::failure(ms(1)), t0)
        .transition
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

// ---------------------------------------------------------------------------
// Half-open maximum wait, operator actions, the rates verdict, the dashboard.

use retry_core::{BreakerRow, BreakerSimulation, HalfOpenTimeout, HalfOpenVerdict, RateReading};

/// A timeline with the dashboard's readings after every step: the breaker's
/// rates (or "not enough calls"), slow successes and failures, rejected calls.
fn dashboard<const W: usize, const B: usize>(
    breaker: CircuitBreaker<W, B>,
    script: &[BreakerStep],
) -> String {
    let mut out = format!("config: {}\n", breaker.config());
    let rows: Vec<BreakerRow> = BreakerSimulation::<W, B>::from_breaker(breaker, script).collect();
    for row in rows {
        out.push_str(&format!(
            "{:>8}  {:<28}  {:<12}  {}\n{:>8}  {}\n",
            row.at.to_string(),
            row.input.to_string(),
            row.state.to_string(),
            row.output,
            "",
            row.metrics
        ));
    }
    out
}

pub(crate) fn wedgeable(timeout: HalfOpenTimeout) -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(secs(5))
        .half_open_permits(1)
        .max_half_open_wait(secs(20))
        .on_half_open_timeout(timeout)
        .build()
        .unwrap()
}

#[test]
fn half_open_maximum_wait_reopens() {
    // The probe's permit is lost (its call hangs): without a maximum wait the
    // breaker would reject for ever with no time to come back.
    let script = [
        req(ms(0)),
        fail(ms(0), 1), // open for 5 s
        req(secs(5)),   // half-open until 25 s at the latest; call 2 is the probe and hangs
        req(secs(6)),   // rejected, told when the breaker will decide
        req(ms(24_999)),
        req(secs(25)), // the wait has passed: re-opened (for 5 s), rejected until 30 s
        req(secs(30)), // half-open again: a fresh probe
        ok(secs(31), 3),
        ok(secs(32), 2), // the hung call finally ends: late (counted in a window, never in the streak)
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(
        &wedgeable(HalfOpenTimeout::Reopen),
        &script
    )
    .to_string());
}

#[test]
fn half_open_maximum_wait_closes() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1),
        req(secs(5)), // probe, hangs
        req(secs(10)),
        req(secs(25)),     // the wait has passed: closed, and this request runs
        fail(secs(26), 3), // a closed call: trips again
        ok(secs(27), 2),   // the old probe: ignored, the breaker is open
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(
        &wedgeable(HalfOpenTimeout::Close),
        &script
    )
    .to_string());
}

#[test]
fn a_probe_that_reports_after_the_wait_but_before_any_request_still_counts() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1),
        req(secs(5)),
        ok(secs(40), 2), // past the 25 s deadline, but no request has applied it
        req(secs(41)),
    ];
    insta::assert_snapshot!(BreakerTimeline::<0, 0>::new(
        &wedgeable(HalfOpenTimeout::Reopen),
        &script
    )
    .to_string());
}

fn operated() -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(2)
        .count_window(10)
        .minimum_calls(10)
        .open_duration(secs(10))
        .build()
        .unwrap()
}

#[test]
fn operator_opens_for_a_duration_and_until_an_instant() {
    let script = [
        req(ms(0)),
        BreakerStep::forced(ms(100), ManualState::OpenFor(secs(60))), // a deploy
        fail(ms(200), 1), // the call admitted before: ignored, the breaker is open
        req(secs(30)),
        BreakerStep::ensured(secs(31), ManualState::OpenFor(secs(5))), // already open: kept
        BreakerStep::forced(secs(32), ManualState::OpenUntil(Instant::from_secs(40))), // shortened
        req(ms(39_999)),
        req(secs(40)), // the period is over: half-open, a probe
        ok(secs(41), 2),
        BreakerStep::forced(secs(42), ManualState::OpenFor(Duration::ZERO)), // refused
        BreakerStep::forced(secs(42), ManualState::OpenUntil(Instant::from_secs(42))), // refused
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&operated(), &script).to_string());
}

#[test]
fn operator_moves_to_half_open_now() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1),
        req(ms(100)),
        fail(ms(100), 2),                                    // open for 10 s
        BreakerStep::forced(secs(1), ManualState::HalfOpen), // the dependency is back: probe now
        req(secs(1)),
        req(secs(1)),                                        // one probe at a time
        ok(secs(2), 3),                                      // closed
        BreakerStep::forced(secs(3), ManualState::HalfOpen), // closed -> half-open: refused
        BreakerStep::forced(secs(4), ManualState::MetricsOnly),
        BreakerStep::ensured(secs(5), ManualState::HalfOpen), // metrics-only -> half-open: refused
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&operated(), &script).to_string());
}

#[test]
fn operator_resets_from_any_state_and_ensure_answers_for_the_current_one() {
    let script = [
        req(ms(0)),
        fail(ms(0), 1), // one failure in the window
        BreakerStep::ensured(ms(100), ManualState::Closed), // already closed: window kept
        BreakerStep::reset(ms(200)), // closed -> closed: the window is clean
        req(ms(300)),
        fail(ms(300), 2),
        req(ms(400)),
        fail(ms(400), 3),            // open
        req(secs(1)),                // rejected
        BreakerStep::reset(secs(2)), // open -> closed
        req(secs(2)),
        BreakerStep::forced(secs(3), ManualState::ForcedOpen),
        BreakerStep::ensured(secs(4), ManualState::ForcedOpen), // already there
        BreakerStep::forced(secs(5), ManualState::ForcedOpen),  // entered afresh: new epoch
        ok(secs(6), 4),                                         // admitted before: ignored
        BreakerStep::reset(secs(7)),
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&operated(), &script).to_string());
}

#[test]
fn a_breaker_can_start_in_any_state() {
    let config = operated();
    let t0 = Instant::from_secs(100);
    let open =
        CircuitBreaker::<1, 0>::starting_in(config, ManualState::OpenFor(secs(30)), t0).unwrap();
    assert_eq!(open.state(), BreakerState::Open);
    assert_eq!(open.open_until(), Some(Instant::from_secs(130)));
    let script = [
        req(secs(100)),
        req(secs(130)), // half-open: the first probe
        ok(secs(131), 1),
    ];
    insta::assert_snapshot!(dashboard(open, &script));
    for (initial, state) in [
        (ManualState::Closed, BreakerState::Closed),
        (
            ManualState::OpenUntil(Instant::from_secs(200)),
            BreakerState::Open,
        ),
        (ManualState::ForcedOpen, BreakerState::ForcedOpen),
        (ManualState::Disabled, BreakerState::Disabled),
        (ManualState::MetricsOnly, BreakerState::MetricsOnly),
    ] {
        let b = CircuitBreaker::<1, 0>::starting_in(config, initial, t0).unwrap();
        assert_eq!(b.state(), state, "{initial}");
    }
    // Any state may be the first, half-open included (which no operator may move
    // a running closed breaker to): the next request is a probe.
    let mut probing =
        CircuitBreaker::<1, 0>::starting_in(config, ManualState::HalfOpen, t0).unwrap();
    assert_eq!(probing.state(), BreakerState::HalfOpen);
    let Admission::Admitted { permit, .. } = probing.request(t0) else {
        panic!("a half-open breaker admits a probe")
    };
    assert!(permit.is_probe());
    assert_eq!(
        CircuitBreaker::<1, 0>::starting_in(config, ManualState::OpenUntil(t0), t0)
            .unwrap_err()
            .field(),
        "open_until"
    );
}

fn rated(probes: u32) -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .slow_call_rate(Rate::from_percent(60))
        .slow_call_duration(secs(1))
        .count_window(4)
        .minimum_calls(4)
        .open_duration(secs(5))
        .half_open_permits(2)
        .half_open_verdict(HalfOpenVerdict::Rates { probes })
        .build()
        .unwrap()
}

fn trip_four(script: &mut Vec<BreakerStep>) {
    for call in 1..=4 {
        let t = ms(u64::from(call) * 10);
        script.push(req(t));
        script.push(fail(t, call));
    }
}

#[test]
fn rates_verdict_closes_when_the_probes_rates_are_below_the_thresholds() {
    let mut script = Vec::new();
    trip_four(&mut script); // 4 of 4 failed: open
    script.extend([
        req(secs(6)), // half-open: probes 5 and 6 at once (2 permits)
        req(secs(6)),
        req(secs(6)), // a third at once: rejected
        fail(secs(7), 5),
        req(secs(7)),
        ok(secs(7), 6),
        req(secs(7)),                      // the fourth probe of 4
        ok(secs(8), 7),                    // one probe in flight now
        req(secs(8)),                      // a fifth: rejected, all 4 have been admitted
        BreakerStep::released(secs(8), 8), // gives its place back
        req(secs(8)),
        ok(secs(9), 9), // 1 of 4 failed (25 % < 50 %), none slow: closed
    ]);
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&rated(4), &script).to_string());
}

#[test]
fn rates_verdict_reopens_on_the_failure_rate_or_the_slow_call_rate() {
    let mut script = Vec::new();
    trip_four(&mut script);
    script.extend([
        req(secs(6)),
        req(secs(6)),
        fail(secs(7), 5),
        ok(secs(7), 6), // 1 of 2 failed: 50 %, re-opened (for 5 s again)
        req(secs(13)),
        req(secs(13)),
        BreakerStep::succeeded(secs(15), 7, secs(2)),
        BreakerStep::succeeded(secs(15), 8, secs(3)), // 2 of 2 slow: re-opened
    ]);
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&rated(2), &script).to_string());
}

#[test]
fn dashboard_readings() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .slow_call_rate(Rate::from_percent(75))
        .slow_call_duration(secs(1))
        .count_window(8)
        .minimum_calls(4)
        .open_duration(secs(10))
        .build()
        .unwrap();
    let breaker = CircuitBreaker::<1, 0>::new(config).unwrap();
    let slow_ok = |at, call| BreakerStep::succeeded(at, call, secs(2));
    let slow_fail = |at, call| BreakerStep::failed(at, call, secs(2));
    let script = [
        req(ms(0)),
        ok(ms(0), 1), // 1 call: not enough to judge (not 0 %)
        req(ms(10)),
        slow_ok(ms(10), 2),
        req(ms(20)),
        slow_fail(ms(20), 3),
        req(ms(30)),
        fail(ms(30), 4), // 4 calls: judged, 2 of 4 failed = 50 %: trips
        req(ms(40)),     // rejected: counted
        req(ms(50)),
        BreakerStep::reset(ms(60)),
        req(ms(70)),
    ];
    insta::assert_snapshot!(dashboard(breaker, &script));
    // A breaker without a window has no rates to read.
    let plain = CircuitBreaker::<0, 0>::new(BreakerConfig::default()).unwrap();
    let m = plain.metrics(Instant::ORIGIN);
    assert_eq!(m.failure_rate, RateReading::NoWindow);
    assert_eq!(m.slow_call_rate.to_string(), "no window");
}

#[test]
fn metrics_only_reports_an_exceeded_rate_once_per_crossing() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(4)
        .minimum_calls(2)
        .build()
        .unwrap();
    let script = [
        BreakerStep::forced(ms(0), ManualState::MetricsOnly),
        req(ms(10)),
        fail(ms(10), 1),
        req(ms(20)),
        fail(ms(20), 2), // judged at 2 calls: 100 %, exceeded (reported once)
        req(ms(30)),
        fail(ms(30), 3), // still exceeded: not reported again
        req(ms(40)),
        ok(ms(40), 4),
        req(ms(50)),
        ok(ms(50), 5),
        req(ms(60)),
        ok(ms(60), 6), // 1 of 4: below again
        req(ms(70)),
        fail(ms(70), 7),
        req(ms(80)),
        fail(ms(80), 8), // 2 of 4 (calls 5-8): 50 %, crossed again, reported
    ];
    insta::assert_snapshot!(BreakerTimeline::<1, 0>::new(&config, &script).to_string());
}

/// The decision for `minimum_calls` above a count window: refused, naming the
/// field and the largest value that works; equal to the window is accepted and
/// judges exactly when the window is full.
#[test]
fn minimum_calls_above_the_count_window_is_refused() {
    let err = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(5)
        .build()
        .unwrap_err(); // the default minimum is 10
    assert_eq!(
        err,
        BreakerError::MinimumAboveWindow {
            minimum: 10,
            calls: 5
        }
    );
    assert_eq!(err.field(), "minimum_calls");
    assert!(err.to_string().ends_with("(set it to at most 5)"), "{err}");
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(5)
        .minimum_calls(5)
        .build()
        .unwrap();
    let mut breaker = CircuitBreaker::<1, 0>::new(config).unwrap();
    let t = Instant::ORIGIN;
    for i in 0..5 {
        let Admission::Admitted { permit, .. } = breaker.request(t) else {
            panic!("closed admits")
        };
        let recorded = breaker.record(permit, CallOutcome::failure(ms(1)), t);
        assert_eq!(recorded.transition.is_some(), i == 4, "call {i}");
    }
    // A time window holds any number of calls: any minimum goes.
    assert!(BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .time_window(secs(10), 5)
        .minimum_calls(1_000)
        .build()
        .is_ok());
}

#[test]
fn new_config_fields_are_checked() {
    let b = BreakerConfig::builder;
    let err = b()
        .half_open_verdict(HalfOpenVerdict::Rates { probes: 5 })
        .build()
        .unwrap_err();
    assert_eq!(err, BreakerError::VerdictWithoutRate);
    assert_eq!(err.field(), "half_open_verdict");
    let err = b()
        .failure_rate(Rate::from_percent(50))
        .count_window(10)
        .half_open_verdict(HalfOpenVerdict::Rates { probes: 0 })
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "half_open_verdict.probes");
    let err = b().max_half_open_wait(Duration::ZERO).build().unwrap_err();
    assert_eq!(
        (err.field(), err.code()),
        ("max_half_open_wait", "breaker.zero_duration")
    );
}
