//! The dashboard's readings per state: half-open reads the probes, not the
//! window that tripped; rejected calls are counted in all (since the breaker
//! was built or reset) and in the state; a time window adds up its calls'
//! durations. Each timeline prints every reading after every step.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::fmt::Write as _;
use core::time::Duration;

use crate::breaker::{ms, req, secs};
use retry_core::{
    BreakerConfig, BreakerMetrics, BreakerSimulation, BreakerStep, CircuitBreaker, HalfOpenVerdict,
    Instant, ManualState, Rate, RateReading,
};

fn ok(at: Duration, call: u32, took: Duration) -> BreakerStep {
    BreakerStep::succeeded(at, call, took)
}

fn fail(at: Duration, call: u32, took: Duration) -> BreakerStep {
    BreakerStep::failed(at, call, took)
}

fn readings(m: &BreakerMetrics) -> String {
    let w = m.window;
    let mut out = format!(
        "{} calls, {} failed, {} slow; failure rate {}, slow-call rate {}; rejected {} ({} in state)",
        w.calls, w.failures, w.slow, m.failure_rate, m.slow_call_rate, m.rejected, m.rejected_in_state
    );
    if let (Some(total), mean) = (m.call_duration_total, m.call_duration_mean) {
        let mean = mean.map_or("-".to_owned(), |d| format!("{d:?}"));
        write!(out, "; took {total:?} in all, {mean} each").unwrap();
    }
    out
}

/// A run with the timer, every row followed by the readings after it.
fn dashboard<const W: usize, const B: usize>(
    breaker: CircuitBreaker<W, B>,
    script: &[BreakerStep],
) -> String {
    let mut out = format!("config: {}\n", breaker.config());
    for row in BreakerSimulation::<W, B>::from_breaker(breaker, script).with_timer() {
        writeln!(
            out,
            "{:>8}  {:<30}  {:<12}  {}\n{:>8}  {}",
            row.at.to_string(),
            row.input.to_string(),
            row.state.to_string(),
            row.output,
            "",
            readings(&row.metrics)
        )
        .unwrap();
    }
    out
}

/// A failure rate over the last 4 calls, 2 probes judged on their rates.
fn rated() -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(4)
        .minimum_calls(4)
        .open_duration(secs(5))
        .half_open_permits(1)
        .half_open_verdict(HalfOpenVerdict::Rates { probes: 2 })
        .build()
        .unwrap()
}

#[test]
fn half_open_reads_the_probes_and_rejections_are_counted_per_state() {
    let script = [
        req(ms(0)),
        fail(ms(1), 1, ms(1)),
        req(ms(2)),
        fail(ms(3), 2, ms(1)),
        req(ms(4)),
        ok(ms(5), 3, ms(1)),
        req(ms(6)),
        ok(ms(7), 4, ms(1)), // 2 of 4 failed: open until 5.007 s
        req(secs(1)),
        req(secs(2)), // 2 rejected while open
        // 5.007 s: half-open by the timer; the readings are the probes'.
        req(secs(6)),           // probe 1
        req(secs(6)),           // rejected: the one probe place is taken
        ok(secs(7), 5, ms(30)), // 1 of 2 probes reported: not judged yet
        req(secs(8)),           // probe 2
        ok(secs(9), 6, ms(30)), // both good: closed, the count in the state is over
        req(secs(10)),
        BreakerStep::forced(secs(11), ManualState::ForcedOpen),
        req(secs(12)),
        BreakerStep::reset(secs(13)), // every count starts again
    ];
    insta::assert_snapshot!(dashboard(
        CircuitBreaker::<1, 0>::new(rated()).unwrap(),
        &script
    ));
}

#[test]
fn a_time_window_adds_up_its_calls_durations() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(60))
        .time_window(secs(4), 4)
        .minimum_calls(2)
        .open_duration(secs(10))
        .build()
        .unwrap();
    let script = [
        req(ms(0)),
        ok(ms(100), 1, ms(100)),
        req(ms(1_000)),
        fail(ms(1_250), 2, ms(250)),
        req(ms(1_300)),
        ok(ms(1_350), 3, ms(50)),
        req(ms(4_000)), // the first second has left the window
        req(ms(5_500)),
        fail(ms(5_700), 4, ms(200)),
        req(ms(5_800)),
        fail(ms(5_900), 5, ms(100)), // 3 of 4 failed: open, the window that tripped kept
        req(ms(6_000)),
        req(secs(20)), // half-open since 15.9 s: the probes' readings, no durations
        ok(secs(21), 7, ms(40)),
        req(secs(30)), // closed with a clean window
    ];
    insta::assert_snapshot!(dashboard(
        CircuitBreaker::<0, 4>::new(config).unwrap(),
        &script
    ));
}

#[test]
fn half_open_readings_need_what_the_verdict_needs() {
    // Consecutive verdict: three good probes in a row close it, so the
    // probes are "not enough calls (n of 3)" for as long as it is half-open.
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(secs(1))
        .half_open_permits(3)
        .success_threshold(3)
        .build()
        .unwrap();
    let mut b = CircuitBreaker::<0, 0>::starting_in(config, ManualState::HalfOpen, Instant::ORIGIN)
        .unwrap();
    let m = b.metrics(Instant::ORIGIN);
    assert_eq!(
        m.failure_rate,
        RateReading::NotEnoughCalls {
            calls: 0,
            minimum: 3
        }
    );
    let retry_core::Admission::Admitted { permit, .. } = b.request(Instant::ORIGIN) else {
        panic!()
    };
    let _ = b.record(
        permit,
        retry_core::CallOutcome::success(ms(3)),
        Instant::ORIGIN,
    );
    let m = b.metrics(Instant::ORIGIN);
    assert_eq!(m.window, b.probe_results());
    assert_eq!(
        m.slow_call_rate,
        RateReading::NotEnoughCalls {
            calls: 1,
            minimum: 3
        }
    );
    assert_eq!(m.call_duration_total, None);
    // A count window keeps no durations: none in any state.
    let mut counted = CircuitBreaker::<1, 0>::new(rated()).unwrap();
    let retry_core::Admission::Admitted { permit, .. } = counted.request(Instant::ORIGIN) else {
        panic!()
    };
    let _ = counted.record(
        permit,
        retry_core::CallOutcome::success(ms(3)),
        Instant::ORIGIN,
    );
    let m = counted.metrics(Instant::ORIGIN);
    assert_eq!((m.call_duration_total, m.call_duration_mean), (None, None));
}
