//! What the core costs in memory: zero heap allocations for any policy (a counting
//! global allocator watches every machine, parser and timeline), and the sizes of
//! its values, printed for the docs (`cargo test -p retry-core --test all footprint:: --
//! --nocapture`).

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::fmt::Write as _;
use core::time::Duration;

use retry_core::{
    parse_retry_after, retry_after_from_headers, Action, Admission, Backoff, BreakerConfig,
    BudgetConfig, CallOutcome, CircuitBreaker, Event, Failure, Hint, HintMode, Instant, Jitter,
    Rate, RetryBudget, RetryKind, RetryMachine, RetryPolicy, Scripted, Simulation, Timeline,
};

use crate::counting::allocations;

/// A sink for formatted text that never allocates.
struct Sink(usize);
impl core::fmt::Write for Sink {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0 += s.len();
        Ok(())
    }
}

fn policies() -> Vec<RetryPolicy> {
    let jitters = [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
        Jitter::Subtract(0.25),
        Jitter::Add(0.1),
        Jitter::Spread(0.1),
    ];
    let curves = [
        Backoff::None,
        Backoff::constant(Duration::from_millis(10)),
        Backoff::linear(Duration::from_millis(10)),
        Backoff::exponential(Duration::from_millis(10), 1.5),
        Backoff::fibonacci(Duration::from_millis(10)),
    ];
    let hints = [
        HintMode::OVERRIDE_DEFAULT,
        HintMode::AT_LEAST_DEFAULT,
        HintMode::Ignore,
    ];
    let mut out = Vec::new();
    for jitter in jitters {
        for backoff in curves {
            for hints in hints {
                out.push(
                    RetryPolicy::builder()
                        .max_attempts(6)
                        .backoff(backoff)
                        .jitter(jitter)
                        .hints(hints)
                        .budget(Duration::from_secs(30))
                        .attempt_timeout(Duration::from_secs(2))
                        .cap_attempt_to_budget(true)
                        .use_retry_budget(true)
                        .build()
                        .unwrap(),
                );
            }
        }
    }
    out
}

#[test]
fn the_core_never_allocates() {
    let policies = policies();
    let script = [
        Scripted::fail(Failure::retryable().with_hint(Hint::RetryAfter(Duration::from_secs(1)))),
        Scripted::time_out(),
        Scripted::fail(Failure::retryable().with_hint(Hint::Pushback(Duration::from_millis(5)))),
        Scripted::rejected(Duration::from_millis(50)),
        Scripted::fail(Failure::retryable()),
    ];
    let count = allocations(|| {
        for policy in &policies {
            // Driving a machine by hand, through every action.
            let mut m = RetryMachine::new(policy, 7);
            let mut now = Instant::ORIGIN;
            let mut action = m.poll(Event::Start, now);
            for _ in 0..20 {
                now = now + Duration::from_millis(3);
                action = match action {
                    Action::Attempt { .. } => m.poll(Event::Failed(Failure::retryable()), now),
                    Action::Sleep { until, .. } => m.poll(Event::Woke, until),
                    Action::Withdraw { .. } => m.poll(Event::Granted, now),
                    terminal => m.poll(Event::Cancelled, now).max_with(terminal),
                };
            }
            // The simulator and the timeline written through core::fmt.
            let steps = Simulation::new(policy, 1, &script).count();
            assert!(steps > 0);
            let mut sink = Sink(0);
            write!(sink, "{}", Timeline::new(policy, 1, &script)).unwrap();
            assert!(sink.0 > 0);
        }
        // The breaker and the budget.
        let config = BreakerConfig::builder()
            .failure_rate(Rate::from_percent(50))
            .count_window(100)
            .minimum_calls(10)
            .build()
            .unwrap();
        let mut breaker: CircuitBreaker = CircuitBreaker::new(config).unwrap();
        let mut budget = RetryBudget::new(BudgetConfig::aws_standard());
        for i in 0..1_000u64 {
            let now = Instant::from_millis(i);
            if let Admission::Admitted { permit, .. } = breaker.request(now) {
                let outcome = CallOutcome {
                    success: i % 3 != 0,
                    duration: Duration::from_millis(1),
                };
                let _ = breaker.record(permit, outcome, now);
            }
            let _ = budget.try_withdraw(RetryKind::Failure, now);
        }
        // The parsers.
        for value in ["120", "Sun, 06 Nov 1994 08:49:37 GMT", "garbage", "1e309"] {
            let _ = parse_retry_after(value.as_bytes(), 1_000_000_000);
        }
        let _ = retry_after_from_headers(Some(b"1500"), Some(b"3"), 0);
    });
    assert_eq!(count, 0, "retry-core allocated {count} times");
    // The counter itself works: a box is one allocation.
    assert_eq!(
        allocations(|| drop(core::hint::black_box(Box::new(7u64)))),
        1
    );
}

/// Keeps the terminal action (the machine answers it again anyway).
trait MaxWith {
    fn max_with(self, other: Action) -> Action;
}
impl MaxWith for Action {
    fn max_with(self, other: Action) -> Action {
        assert_eq!(self, other, "terminal actions are sticky");
        self
    }
}

#[test]
fn sizes_are_small() {
    let sizes = [
        ("RetryPolicy", size_of::<RetryPolicy>()),
        ("RetryMachine", size_of::<RetryMachine>()),
        (
            "RetryMachine<&RetryPolicy>",
            size_of::<RetryMachine<&RetryPolicy>>(),
        ),
        ("Action", size_of::<Action>()),
        ("Event", size_of::<Event>()),
        ("BreakerConfig", size_of::<BreakerConfig>()),
        (
            "CircuitBreaker (count window <= 128 calls)",
            size_of::<CircuitBreaker>(),
        ),
        ("RetryBudget", size_of::<RetryBudget>()),
    ];
    for (name, size) in sizes {
        println!("size_of {name}: {size} bytes");
    }
    // Bounds that keep them cheap to copy and store (the docs state the figures).
    assert!(size_of::<RetryPolicy>() <= 176);
    assert!(size_of::<RetryMachine>() <= 272);
    // A machine borrowing its policy holds a pointer instead of the copy.
    assert!(
        size_of::<RetryMachine<&RetryPolicy>>()
            <= size_of::<RetryMachine>() - size_of::<RetryPolicy>() + size_of::<usize>()
    );
    assert!(size_of::<CircuitBreaker>() <= 256);
}

#[test]
fn the_hedge_machine_never_allocates() {
    use retry_core::{
        feed_hedge_budget, HedgeMode, HedgePolicy, HedgeSimulation, HedgeTimeline, LatencyHistogram,
    };
    let ms = Duration::from_millis;
    let policies: Vec<HedgePolicy> = [HedgeMode::Latency, HedgeMode::Fallback, HedgeMode::Parallel]
        .into_iter()
        .flat_map(|mode| {
            [false, true].map(|budget| {
                HedgePolicy::builder()
                    .max_attempts(4)
                    .max_in_flight(3)
                    .mode(mode)
                    .adaptive_delay(95.0, 5, ms(40))
                    .jitter(Jitter::Spread(0.1))
                    .timeout(ms(900))
                    .use_retry_budget(budget)
                    .build()
                    .unwrap()
            })
        })
        .collect();
    let script = [
        Scripted::succeed().after(ms(500)),
        Scripted::fail(Failure::retryable().with_hint(Hint::Pushback(ms(30)))).after(ms(10)),
        Scripted::fail(Failure::retryable()).after(ms(20)),
        Scripted::succeed().after(ms(15)),
    ];
    let count = allocations(|| {
        let mut latencies = LatencyHistogram::new();
        for i in 0..2_000u64 {
            latencies.record(Duration::from_micros(i * 37 % 90_000));
        }
        let _ = latencies.percentile(99.0);
        let mut budget = RetryBudget::new(BudgetConfig::aws_standard());
        for policy in &policies {
            let mut steps = 0;
            for step in HedgeSimulation::with_latencies(policy, 3, &latencies, &script) {
                let _ = feed_hedge_budget(&mut budget, step.event, step.action, step.at);
                if let retry_core::HedgeAction::Done { latency, .. } = step.action {
                    latencies.record(latency);
                }
                steps += 1;
            }
            assert!(steps > 0);
            let mut sink = Sink(0);
            write!(
                sink,
                "{}",
                HedgeTimeline::new(policy, 3, &script).latencies(&latencies)
            )
            .unwrap();
            assert!(sink.0 > 0);
        }
    });
    assert_eq!(count, 0, "the hedge machine allocated {count} times");
}

#[test]
fn hedge_sizes_are_small() {
    use retry_core::{HedgeAction, HedgeEvent, HedgeMachine, HedgePolicy, LatencyHistogram};
    let sizes = [
        ("HedgePolicy", size_of::<HedgePolicy>()),
        ("HedgeMachine", size_of::<HedgeMachine>()),
        ("HedgeAction", size_of::<HedgeAction>()),
        ("HedgeEvent", size_of::<HedgeEvent>()),
        ("LatencyHistogram", size_of::<LatencyHistogram>()),
    ];
    for (name, size) in sizes {
        println!("size_of {name}: {size} bytes");
    }
    assert!(size_of::<HedgeMachine>() <= 384);
    assert!(size_of::<LatencyHistogram>() <= 272);
}
