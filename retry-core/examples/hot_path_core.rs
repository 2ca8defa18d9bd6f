//! The core's hot paths as fixed workloads for counting instructions per call
//! (callgrind measures those steadily on a shared, noisy machine, where time
//! does not): `delay-<curve>-<jitter>` is `RetryPolicy::delay` for retries
//! 1, 2, 3, …; `decision-<jitter>` is one retry decision (a failure answered
//! with a sleep, the wake with the next attempt); `breaker` is the breaker's
//! closed path (admit + record a success, 100-call window). The peers' workloads
//! run the same way for comparison: `backon-<curve>-<none|jitter>` is backon's
//! `next()` on the same curve, cap and jitter as the `next_delay` benchmark.
//! `early-<curve>-<jitter>`, `early-decision-<jitter>` and
//! `backon-early-<curve>-<none|jitter>` are the `_retries_1_to_16` groups of
//! `benches/decision.rs`: from 1 s, capped at 60 s, retries 1 to 16 over and
//! over (a fresh machine, or a fresh backon iterator, every 16).
//!
//! ```text
//! cargo build --release -p retry-core --example hot_path_core
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_core delay-exponential-full 100000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_core delay-exponential-full 0
//! ```
//!
//! (the difference of the two `I refs` totals, divided by 100,000).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use core::time::Duration;
use retry_core::{
    Action, Admission, Backoff, BreakerConfig, CallOutcome, CircuitBreaker, Event, Failure,
    Instant, Jitter, Rate, RetryMachine, RetryPolicy,
};

fn policy(backoff: Backoff, jitter: Jitter) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(u32::MAX)
        .backoff(backoff)
        .max_delay(Duration::from_secs(1))
        .jitter(jitter)
        .build()
        .unwrap()
}

/// Retries per call in the `early-` workloads.
const EARLY_RETRIES: u32 = 16;

/// The peers' defaults: from 1 s, capped at 60 s, 16 retries.
fn early(backoff: Backoff, jitter: Jitter) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(EARLY_RETRIES + 1)
        .backoff(backoff)
        .max_delay(Duration::from_secs(60))
        .jitter(jitter)
        .build()
        .unwrap()
}

fn jitter(name: &str) -> Jitter {
    match name {
        "none" => Jitter::None,
        "full" => Jitter::Full,
        "add" => Jitter::Add(1.0),
        "decorrelated" => Jitter::Decorrelated,
        other => panic!("unknown jitter {other}"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args
        .next()
        .unwrap_or_else(|| "delay-exponential-full".into());
    let n: u32 = args.next().map_or(1_000_000, |a| a.parse().unwrap());
    let ms10 = Duration::from_millis(10);
    let parts: Vec<&str> = what.split('-').collect();
    let mut sum = 0u128;
    match parts.as_slice() {
        ["delay", curve, j] => {
            let backoff = match *curve {
                "exponential" => Backoff::exponential(ms10, 2.0),
                "constant" => Backoff::constant(ms10),
                "fibonacci" => Backoff::fibonacci(ms10),
                other => panic!("unknown curve {other}"),
            };
            let p = policy(backoff, jitter(j));
            for r in 1..=n {
                sum += black_box(&p).delay(r, black_box(0x5eed)).as_nanos();
            }
        }
        ["early", "decision", j] => {
            let p = early(Backoff::exponential(Duration::from_secs(1), 2.0), jitter(j));
            let mut m = RetryMachine::new(&p, 0x5eed);
            let mut now = Instant::ORIGIN;
            let _ = m.poll(Event::Start, now);
            for _ in 0..n {
                if let Action::Sleep { until, .. } =
                    black_box(&mut m).poll(Event::Failed(Failure::retryable()), now)
                {
                    now = until;
                }
                match black_box(m.poll(Event::Woke, now)) {
                    Action::Attempt { number, .. } if number > EARLY_RETRIES => {
                        m = RetryMachine::new(&p, 0x5eed);
                        now = Instant::ORIGIN;
                        let _ = m.poll(Event::Start, now);
                    }
                    other => sum += u128::from(matches!(other, Action::Attempt { .. })),
                }
            }
        }
        ["early", curve, j] => {
            let s1 = Duration::from_secs(1);
            let backoff = match *curve {
                "exponential" => Backoff::exponential(s1, 2.0),
                "constant" => Backoff::constant(s1),
                "fibonacci" => Backoff::fibonacci(s1),
                other => panic!("unknown curve {other}"),
            };
            let p = early(backoff, jitter(j));
            let mut r = 0;
            for _ in 0..n {
                r = if r >= EARLY_RETRIES { 1 } else { r + 1 };
                sum += black_box(&p).delay(r, black_box(0x5eed)).as_nanos();
            }
        }
        ["backon", "early", curve, j] => {
            use backon::BackoffBuilder as _;
            let times = EARLY_RETRIES as usize;
            let jittered = *j == "jitter";
            // A fresh iterator every 16 delays, as a new call builds one.
            let build = || -> Box<dyn Iterator<Item = Duration>> {
                match (*curve, jittered) {
                    ("exponential", false) => Box::new(
                        backon::ExponentialBuilder::new()
                            .with_max_times(times)
                            .build(),
                    ),
                    ("exponential", true) => Box::new(
                        backon::ExponentialBuilder::new()
                            .with_max_times(times)
                            .with_jitter()
                            .with_jitter_seed(0x5eed)
                            .build(),
                    ),
                    ("constant", false) => {
                        Box::new(backon::ConstantBuilder::new().with_max_times(times).build())
                    }
                    ("constant", true) => Box::new(
                        backon::ConstantBuilder::new()
                            .with_max_times(times)
                            .with_jitter()
                            .with_jitter_seed(0x5eed)
                            .build(),
                    ),
                    ("fibonacci", false) => Box::new(
                        backon::FibonacciBuilder::new()
                            .with_max_times(times)
                            .build(),
                    ),
                    ("fibonacci", true) => Box::new(
                        backon::FibonacciBuilder::new()
                            .with_max_times(times)
                            .with_jitter()
                            .with_jitter_seed(0x5eed)
                            .build(),
                    ),
                    (other, _) => panic!("unknown curve {other}"),
                }
            };
            let mut it = build();
            for _ in 0..n {
                let d = match black_box(&mut it).next() {
                    Some(d) => d,
                    None => {
                        it = build();
                        it.next().unwrap_or_default()
                    }
                };
                sum += d.as_nanos();
            }
        }
        ["decision", j] => {
            let p = policy(Backoff::exponential(ms10, 2.0), jitter(j));
            let mut m = RetryMachine::new(&p, 0x5eed);
            let mut now = Instant::ORIGIN;
            let _ = m.poll(Event::Start, now);
            for _ in 0..n {
                match black_box(&mut m).poll(Event::Failed(Failure::retryable()), now) {
                    Action::Sleep { until, .. } => {
                        now = until;
                        let _ = black_box(m.poll(Event::Woke, until));
                    }
                    other => sum += u128::from(matches!(other, Action::Attempt { .. })),
                }
            }
        }
        ["backon", curve, j] => {
            use backon::BackoffBuilder as _;
            let max = Duration::from_secs(1);
            let jittered = match *j {
                "none" => false,
                "jitter" => true,
                other => panic!("unknown backon jitter {other}"),
            };
            let mut it: Box<dyn Iterator<Item = Duration>> = match (*curve, jittered) {
                ("exponential", false) => Box::new(
                    backon::ExponentialBuilder::new()
                        .with_min_delay(ms10)
                        .with_max_delay(max)
                        .with_factor(2.0)
                        .without_max_times()
                        .build(),
                ),
                ("exponential", true) => Box::new(
                    backon::ExponentialBuilder::new()
                        .with_min_delay(ms10)
                        .with_max_delay(max)
                        .with_factor(2.0)
                        .without_max_times()
                        .with_jitter()
                        .with_jitter_seed(0x5eed)
                        .build(),
                ),
                ("constant", false) => Box::new(
                    backon::ConstantBuilder::new()
                        .with_delay(ms10)
                        .without_max_times()
                        .build(),
                ),
                ("constant", true) => Box::new(
                    backon::ConstantBuilder::new()
                        .with_delay(ms10)
                        .without_max_times()
                        .with_jitter()
                        .with_jitter_seed(0x5eed)
                        .build(),
                ),
                ("fibonacci", false) => Box::new(
                    backon::FibonacciBuilder::new()
                        .with_min_delay(ms10)
                        .with_max_delay(max)
                        .without_max_times()
                        .build(),
                ),
                ("fibonacci", true) => Box::new(
                    backon::FibonacciBuilder::new()
                        .with_min_delay(ms10)
                        .with_max_delay(max)
                        .without_max_times()
                        .with_jitter()
                        .with_jitter_seed(0x5eed)
                        .build(),
                ),
                (other, _) => panic!("unknown curve {other}"),
            };
            for _ in 0..n {
                sum += black_box(&mut it).next().map_or(0, |d| d.as_nanos());
            }
        }
        ["breaker"] => {
            let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
            let mut b = CircuitBreaker::<2, 0>::new(config).unwrap();
            for i in 0..n {
                let now = Instant::from_micros(u64::from(i));
                if let Admission::Admitted { permit, .. } = black_box(&mut b).request(now) {
                    let outcome = CallOutcome::success(Duration::from_micros(1));
                    let _ = black_box(b.record(permit, outcome, now));
                    sum += 1;
                }
            }
        }
        _ => panic!("unknown workload {what}"),
    }
    black_box(sum);
}
