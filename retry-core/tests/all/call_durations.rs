//! The total and mean call duration of a count window, kept by a breaker
//! whose third capacity (`DURATIONS`) holds the window's calls: exactly the
//! calls the window holds, across wrap-around, reset, half-open and restore;
//! `None` where a duration is not known or 64 bits of nanoseconds overflow,
//! and for every count window of a type that keeps none.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::mem::size_of;
use core::time::Duration;

use retry_core::{
    Admission, BreakerConfig, BreakerMetrics, BreakerState, CallOutcome, CircuitBreaker, Instant,
    ManualState, Permit, Rate,
};

/// A failure rate of 50 % over the last `calls` calls, judged once full.
fn rate_over(calls: u16) -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(calls)
        .minimum_calls(u32::from(calls))
        .open_duration(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn admit<const W: usize, const B: usize, const D: usize>(
    b: &mut CircuitBreaker<W, B, D>,
    now: Instant,
) -> Permit {
    match b.request(now) {
        Admission::Admitted { permit, .. } => permit,
        Admission::Rejected { reason, .. } => panic!("rejected: {reason}"),
    }
}

/// One call through the breaker, admitted, that failed or not and took
/// `took`.
fn call<const W: usize, const B: usize, const D: usize>(
    b: &mut CircuitBreaker<W, B, D>,
    now: Instant,
    failed: bool,
    took: Duration,
) {
    let permit = admit(b, now);
    let _ = b.record(
        permit,
        CallOutcome {
            success: !failed,
            duration: took,
        },
        now,
    );
}

/// The total and mean of `durations` as the metrics give them.
fn expected(durations: &[Duration]) -> (Option<Duration>, Option<Duration>) {
    let total: u128 = durations.iter().map(Duration::as_nanos).sum();
    let Ok(total) = u64::try_from(total) else {
        return (None, None);
    };
    if total == u64::MAX {
        return (None, None);
    }
    let mean = total.checked_div(u64::try_from(durations.len()).unwrap());
    (
        Some(Duration::from_nanos(total)),
        mean.map(Duration::from_nanos),
    )
}

fn durations(m: &BreakerMetrics) -> (Option<Duration>, Option<Duration>) {
    (m.call_duration_total, m.call_duration_mean)
}

/// A small pseudo-random sequence (xorshift), the same every run.
fn draws(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// Over thousands of calls (the ring wrapping many times, the closed path
/// skipping the rules while far from the threshold and judging them in full
/// near it, late outcomes and metrics-only included), the total is the sum of
/// the durations of exactly the calls the window holds, and the mean that
/// over their number, for windows smaller than, equal to and (reading `None`)
/// larger than what the type keeps.
#[test]
fn a_count_window_reports_the_durations_of_exactly_its_calls() {
    fn run<const W: usize, const D: usize>(window: u16) {
        let mut b = CircuitBreaker::<W, 0, D>::new(rate_over(window)).unwrap();
        let kept = usize::from(window) <= D;
        let mut held: Vec<Duration> = Vec::new();
        let mut next = draws(0x9e37_79b9_7f4a_7c15 ^ u64::from(window));
        let mut late: Option<(Permit, Duration)> = None;
        for step in 0..5_000u64 {
            let now = Instant::from_millis(step);
            if b.state() == BreakerState::Open {
                // The window that tripped it, with its durations.
                let m = b.metrics(now);
                let want = if kept { expected(&held) } else { (None, None) };
                assert_eq!(durations(&m), want, "open, step {step}");
                b.force(ManualState::Closed, now).unwrap();
                held.clear();
            }
            if step == 2_500 {
                b.force(ManualState::MetricsOnly, now).unwrap();
                held.clear();
            }
            let took = Duration::from_nanos(next() % 5_000_000_000);
            // Failures come in stretches, so the rate nears its threshold
            // (judged in full) and stays far from it (the quiet path).
            let failed = next() % 100 < [3, 45][usize::try_from(step / 700 % 2).unwrap()];
            let permit = admit(&mut b, now);
            // Now and then an outcome is handed in after a later one.
            let (permit, took) = match late.take() {
                Some(older) if step % 11 == 0 => {
                    late = Some((permit, took));
                    older
                }
                None if step % 13 == 0 => {
                    late = Some((permit, took));
                    continue;
                }
                other => {
                    late = other;
                    (permit, took)
                }
            };
            let outcome = CallOutcome {
                success: !failed,
                duration: took,
            };
            let recorded = b.record(permit, outcome, now);
            if recorded.ignored.is_none() {
                held.push(took);
                let skip = held.len().saturating_sub(usize::from(window));
                held.drain(..skip);
            }
            let m = b.metrics(now);
            assert_eq!(m.window.calls, u32::try_from(held.len()).unwrap());
            let want = if kept { expected(&held) } else { (None, None) };
            assert_eq!(durations(&m), want, "window {window}, D {D}, step {step}");
        }
    }
    run::<2, 128>(100);
    run::<2, 128>(128);
    run::<2, 128>(1);
    run::<1, 64>(64);
    run::<2, 64>(100);
    run::<16, 1024>(1000);
}

/// The default type (and any type keeping no durations) reads `None` for a
/// count window, exactly as before, and is no larger for the new parameter.
#[test]
fn a_type_without_durations_reports_none_for_a_count_window() {
    let mut b = CircuitBreaker::<2, 0>::new(rate_over(100)).unwrap();
    for i in 0..100 {
        call(
            &mut b,
            Instant::from_millis(i),
            true,
            Duration::from_millis(3),
        );
    }
    assert_eq!(b.state(), BreakerState::Open);
    let m = b.metrics(Instant::from_millis(100));
    assert_eq!(m.window.calls, 100);
    assert_eq!(durations(&m), (None, None));
    assert_eq!(
        size_of::<CircuitBreaker<2, 0>>(),
        size_of::<CircuitBreaker<2, 0, 0>>()
    );
    assert_eq!(CircuitBreaker::<2, 0>::DURATION_CAPACITY, 0);
    #[cfg(target_pointer_width = "64")]
    {
        assert_eq!(size_of::<CircuitBreaker<2, 0>>(), 256);
        // 8 bytes a call kept.
        assert_eq!(size_of::<CircuitBreaker<2, 0, 128>>(), 256 + 8 * 128);
    }
}

/// `reset` and every entry into closed or metrics-only start a clean window:
/// the durations with it.
#[test]
fn a_reset_or_a_clean_window_clears_the_durations() {
    let mut b = CircuitBreaker::<1, 0, 64>::new(rate_over(10)).unwrap();
    let t = Instant::from_secs(1);
    for ms in 1..=8 {
        call(&mut b, t, true, Duration::from_millis(ms));
    }
    assert_eq!(
        durations(&b.metrics(t)),
        (
            Some(Duration::from_millis(36)),
            Some(Duration::from_micros(4_500))
        )
    );
    let _ = b.reset(t);
    let m = b.metrics(t);
    assert_eq!(
        (m.window.calls, durations(&m)),
        (0, (Some(Duration::ZERO), None))
    );
    call(&mut b, t, true, Duration::from_millis(7));
    assert_eq!(
        durations(&b.metrics(t)),
        (
            Some(Duration::from_millis(7)),
            Some(Duration::from_millis(7))
        )
    );
    // Metrics-only and closed again: each a clean window.
    b.force(ManualState::MetricsOnly, t).unwrap();
    assert_eq!(durations(&b.metrics(t)), (Some(Duration::ZERO), None));
    call(&mut b, t, true, Duration::from_millis(5));
    call(&mut b, t, false, Duration::from_millis(6));
    assert_eq!(
        durations(&b.metrics(t)),
        (
            Some(Duration::from_millis(11)),
            Some(Duration::from_micros(5_500))
        )
    );
    b.force(ManualState::Closed, t).unwrap();
    assert_eq!(durations(&b.metrics(t)), (Some(Duration::ZERO), None));
}

/// Half-open, the readings are the probes' and no durations are reported
/// (as for a time window); the window the breaker closes with is a clean
/// one, whose durations start from zero.
#[test]
fn half_open_reports_no_durations_and_closing_starts_from_zero() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(4)
        .minimum_calls(4)
        .open_duration(Duration::from_secs(5))
        .success_threshold(2)
        .build()
        .unwrap();
    let mut b = CircuitBreaker::<1, 0, 4>::new(config).unwrap();
    let t0 = Instant::ORIGIN;
    for ms in [10, 20, 30, 40] {
        call(&mut b, t0, true, Duration::from_millis(ms));
    }
    assert_eq!(b.state(), BreakerState::Open);
    // Open: the window that tripped it.
    assert_eq!(
        durations(&b.metrics(t0)),
        (
            Some(Duration::from_millis(100)),
            Some(Duration::from_millis(25))
        )
    );
    let t1 = Instant::from_secs(5);
    call(&mut b, t1, false, Duration::from_millis(1));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    let m = b.metrics(t1);
    assert_eq!((m.window.calls, durations(&m)), (1, (None, None)));
    call(&mut b, t1, false, Duration::from_millis(2));
    assert_eq!(b.state(), BreakerState::Closed);
    let m = b.metrics(t1);
    assert_eq!(
        (m.window.calls, durations(&m)),
        (0, (Some(Duration::ZERO), None))
    );
    call(&mut b, t1, false, Duration::from_millis(9));
    assert_eq!(
        durations(&b.metrics(t1)),
        (
            Some(Duration::from_millis(9)),
            Some(Duration::from_millis(9))
        )
    );
}

/// A snapshot keeps no count window's durations: the restored breaker equals
/// the one it was taken from, answers alike, and reads `None` until every
/// restored call has left the window; from then on, exactly the new calls'.
#[test]
fn a_restored_breaker_knows_its_durations_once_the_restored_calls_have_left() {
    let mut b = CircuitBreaker::<2, 0, 100>::new(rate_over(100)).unwrap();
    let t = Instant::from_secs(1);
    // 130 calls: the ring has wrapped, so its calls start mid-ring.
    for i in 0..130u64 {
        call(&mut b, t, i % 10 == 0, Duration::from_millis(i));
    }
    let mut restored = CircuitBreaker::<2, 0, 100>::restore(&b.snapshot()).unwrap();
    assert_eq!(restored, b, "durations are left out of equality");
    assert_eq!(restored.metrics(t).window, b.metrics(t).window);
    assert_eq!(durations(&restored.metrics(t)), (None, None));
    assert!(durations(&b.metrics(t)).0.is_some());
    let mut fresh = Vec::new();
    for i in 0..100u64 {
        let took = Duration::from_micros(7 * i + 1);
        call(&mut restored, t, false, took);
        call(&mut b, t, false, took);
        fresh.push(took);
        assert_eq!(restored, b);
        let m = restored.metrics(t);
        if i < 99 {
            assert_eq!(
                durations(&m),
                (None, None),
                "call {i}: restored calls remain"
            );
        } else {
            assert_eq!(durations(&m), expected(&fresh));
            assert_eq!(durations(&m), durations(&b.metrics(t)));
        }
    }
    // A breaker whose window is not full: the restored calls are the oldest.
    let mut short = CircuitBreaker::<2, 0, 100>::new(rate_over(100)).unwrap();
    for _ in 0..3 {
        call(&mut short, t, false, Duration::from_millis(1));
    }
    let mut restored = CircuitBreaker::<2, 0, 100>::restore(&short.snapshot()).unwrap();
    for _ in 0..97 {
        call(&mut restored, t, false, Duration::from_millis(2));
        assert_eq!(durations(&restored.metrics(t)), (None, None));
    }
    for n in 1..=3u64 {
        call(&mut restored, t, false, Duration::from_millis(2));
        let m = restored.metrics(t);
        let known = n == 3;
        assert_eq!(m.call_duration_total.is_some(), known, "after {n}");
    }
    assert_eq!(
        durations(&restored.metrics(t)),
        (
            Some(Duration::from_millis(200)),
            Some(Duration::from_millis(2))
        )
    );
    // An empty window restores knowing its (no) durations.
    let empty = CircuitBreaker::<2, 0, 100>::new(rate_over(100)).unwrap();
    let restored = CircuitBreaker::<2, 0, 100>::restore(&empty.snapshot()).unwrap();
    assert_eq!(
        durations(&restored.metrics(t)),
        (Some(Duration::ZERO), None)
    );
}

/// Past what 64 bits of nanoseconds hold (584 years), the total is not known
/// (`None`, never a smaller number), until the calls that pushed it there
/// leave the window; a call of `Duration::MAX` is not known either.
#[test]
fn durations_past_64_bits_read_as_unknown_until_they_leave() {
    let mut b = CircuitBreaker::<1, 0, 3>::new(rate_over(3)).unwrap();
    let t = Instant::ORIGIN;
    let half = Duration::from_nanos(u64::MAX / 2 + 1);
    call(&mut b, t, false, half);
    assert_eq!(durations(&b.metrics(t)).0, Some(half));
    call(&mut b, t, false, half);
    assert_eq!(durations(&b.metrics(t)), (None, None));
    call(&mut b, t, false, Duration::from_nanos(4));
    assert_eq!(durations(&b.metrics(t)), (None, None));
    call(&mut b, t, false, Duration::from_nanos(5));
    let total = Duration::from_nanos(u64::MAX / 2 + 10);
    assert_eq!(
        durations(&b.metrics(t)),
        (
            Some(total),
            Some(Duration::from_nanos((u64::MAX / 2 + 10) / 3))
        )
    );
    // A sum of exactly `u64::MAX` ns is the saturated value: not known.
    let mut b = CircuitBreaker::<1, 0, 3>::new(rate_over(3)).unwrap();
    call(&mut b, t, false, Duration::from_nanos(u64::MAX - 1));
    call(&mut b, t, false, Duration::from_nanos(1));
    assert_eq!(durations(&b.metrics(t)), (None, None));
    // One call longer than 64 bits of nanoseconds.
    let mut b = CircuitBreaker::<1, 0, 3>::new(rate_over(3)).unwrap();
    call(&mut b, t, false, Duration::MAX);
    call(&mut b, t, false, Duration::from_nanos(1));
    assert_eq!(durations(&b.metrics(t)), (None, None));
    call(&mut b, t, false, Duration::from_nanos(2));
    call(&mut b, t, false, Duration::from_nanos(3));
    assert_eq!(
        durations(&b.metrics(t)),
        (Some(Duration::from_nanos(6)), Some(Duration::from_nanos(2)))
    );
}

/// The lock-free closed path keeps no durations: a breaker that keeps them
/// for its window sends every outcome to the machine; one whose window is
/// larger than what it keeps (so reports none) still hands its closed state
/// out.
#[test]
fn the_closed_path_is_not_used_while_durations_are_kept() {
    let config = rate_over(100);
    assert!(CircuitBreaker::<2, 0>::new(config)
        .unwrap()
        .closed_path()
        .is_untimed());
    assert!(CircuitBreaker::<2, 0, 64>::new(config)
        .unwrap()
        .closed_path()
        .is_untimed());
    let kept = CircuitBreaker::<2, 0, 100>::new(config).unwrap();
    let path = kept.closed_path();
    assert!(!path.is_untimed());
    assert!(!path.is_handed_out());
    assert!(path.request().is_none(), "every call goes to the machine");
    // A time window keeps its own durations: the parameter changes nothing.
    let timed = BreakerConfig::builder()
        .time_window(Duration::from_secs(4), 4)
        .build()
        .unwrap();
    let b = CircuitBreaker::<0, 4, 64>::new(timed).unwrap();
    assert!(!b.closed_path().is_untimed());
}

/// The record is the same whatever the type keeps: a breaker that keeps
/// durations writes, in JSON and postcard, exactly what one that keeps none
/// writes after the same calls, and either record restores into either type
/// (the type it restores into is the record's third parameter).
#[cfg(feature = "serde")]
#[test]
fn a_snapshot_is_the_same_record_whatever_durations_the_type_keeps() {
    use retry_core::BreakerSnapshot;
    let t = Instant::from_secs(2);
    let mut kept = CircuitBreaker::<2, 0, 100>::new(rate_over(100)).unwrap();
    let mut plain = CircuitBreaker::<2, 0>::new(rate_over(100)).unwrap();
    for i in 0..150u64 {
        call(&mut kept, t, i % 7 == 0, Duration::from_millis(i));
        call(&mut plain, t, i % 7 == 0, Duration::from_millis(i));
    }
    let json = serde_json::to_string(&kept.snapshot()).unwrap();
    assert_eq!(json, serde_json::to_string(&plain.snapshot()).unwrap());
    let bytes = postcard::to_allocvec(&kept.snapshot()).unwrap();
    assert_eq!(bytes, postcard::to_allocvec(&plain.snapshot()).unwrap());
    // The type to restore into comes from the record's type.
    let record: BreakerSnapshot<2, 0, 100> = serde_json::from_str(&json).unwrap();
    let restored = CircuitBreaker::restore(&record).unwrap();
    assert_eq!(restored, kept);
    assert_eq!(durations(&restored.metrics(t)), (None, None));
    let record: BreakerSnapshot<2, 0> = postcard::from_bytes(&bytes).unwrap();
    let restored = CircuitBreaker::restore(&record).unwrap();
    assert_eq!(restored, plain);
}
