//! The thread-shared breaker's lock-free closed path with real threads: many
//! threads recording at once trip it exactly once (one transition reported to
//! the hook), admit nothing after, and never count more failures than calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use core::sync::atomic::{AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::Arc;
use std::time::Instant;

use retry_core::{BasicRule, BreakerConfig, BreakerState, CallOutcome, Rate};
use retry_shared::{Breaker, Clock, Gate, SharedBreaker};

/// The system clock, counting its readings.
#[derive(Default)]
struct Counted(AtomicUsize);

impl Clock for Counted {
    fn now(&self) -> Instant {
        self.0.fetch_add(1, Ordering::SeqCst);
        Instant::now()
    }
}

fn hammer(
    breaker: &SharedBreaker,
    clock: &Counted,
    threads: usize,
    calls: usize,
    fail: fn(usize) -> bool,
) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..calls {
                    if let Gate::Admitted(permit) = breaker.request(clock) {
                        let outcome = CallOutcome {
                            success: !fail(t * calls + i),
                            duration: Duration::ZERO,
                        };
                        breaker.record(permit, outcome, clock);
                    }
                }
            });
        }
    });
}

#[test]
fn racing_failures_trip_once_and_report_it_once() {
    for _ in 0..50 {
        let transitions = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&transitions);
        let config = BreakerConfig::basic(BasicRule {
            failure_threshold: 20,
            open_duration: Duration::from_secs(60),
            success_threshold: 1,
        })
        .unwrap();
        let breaker = SharedBreaker::new(config).unwrap().on_transition(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        });
        let clock = Counted::default();
        hammer(&breaker, &clock, 4, 200, |_| true);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(transitions.load(Ordering::SeqCst), 1);
        assert_eq!(breaker.snapshot().reopens(), 1);
        assert!(matches!(breaker.request(&clock), Gate::Rejected { .. }));
    }
}

#[test]
fn a_busy_closed_breaker_reads_no_clock_and_keeps_its_window_whole() {
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    assert!(!breaker.times_calls() || cfg!(feature = "metrics"));
    let clock = Counted::default();
    hammer(&breaker, &clock, 4, 50_000, |i| i % 5 == 4);
    assert_eq!(
        clock.0.load(Ordering::SeqCst),
        0,
        "a closed breaker read the clock"
    );
    assert_eq!(breaker.state(), BreakerState::Closed);
    let m = breaker.metrics_at(Instant::now());
    assert_eq!(m.window.calls, 100);
    assert!(m.window.failures <= 100);
}

#[test]
fn outcomes_kept_on_stripes_are_counted_in_exactly_once() {
    // A full window of 1,000 successes far from its rule (every call must
    // fail to trip): the 800 calls after it are kept on the threads'
    // stripes (failures too, the allowance being 999), or judged when a
    // stripe runs full. However they interleave, the window then holds the
    // 800 new calls and 200 of the old successes, so exactly the 160
    // failures made.
    for _ in 0..20 {
        let config = BreakerConfig::failure_rate_over(Rate::from_percent(100), 1_000).unwrap();
        let breaker = SharedBreaker::new(config).unwrap();
        let clock = Counted::default();
        hammer(&breaker, &clock, 1, 1_000, |_| false);
        hammer(&breaker, &clock, 4, 200, |i| i % 5 == 4);
        assert_eq!(
            clock.0.load(Ordering::SeqCst),
            0,
            "a closed breaker read the clock"
        );
        let m = breaker.metrics_at(Instant::now());
        assert_eq!(m.state, BreakerState::Closed);
        assert_eq!(
            (m.window.calls, m.window.failures),
            (1_000, 160),
            "{}",
            m.window
        );
    }
}

#[test]
fn failures_kept_on_many_stripes_trip_once_when_the_rate_stands() {
    // Half of the last 100 calls: a quarter of the calls failing keeps it
    // closed; then every call fails, and however the kept failures fell the
    // one that brings the window to half trips it, once.
    for _ in 0..50 {
        let transitions = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&transitions);
        let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
        let breaker = SharedBreaker::new(config).unwrap().on_transition(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        });
        let clock = Counted::default();
        hammer(&breaker, &clock, 4, 400, |i| i % 4 == 3);
        assert_eq!(breaker.state(), BreakerState::Closed);
        hammer(&breaker, &clock, 4, 100, |_| true);
        assert_eq!(breaker.state(), BreakerState::Open);
        assert_eq!(transitions.load(Ordering::SeqCst), 1);
        assert_eq!(breaker.snapshot().reopens(), 1);
    }
}
