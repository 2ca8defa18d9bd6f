//! One retry decision: a failure answered with a Sleep, then the wake answered with
//! an Attempt, in retry-core; against `backon`'s and `backoff`'s next delay.
//! Run: `cargo bench -p retry-core --bench decision`.
//!
//! Two settings:
//! - `next_delay` and `retry_decision`: from 10 ms, capped at 1 s, retry
//!   numbers counting up without end (almost every delay is on the settled
//!   part of the curve);
//! - `next_delay_retries_1_to_16` and `retry_decision_retries_1_to_16`: the
//!   peers' defaults (from 1 s, capped at 60 s, exponential doubling), retries
//!   1 to 16 over and over, as a call that retries 16 times makes them: the
//!   early retries, before the curve settles, are most of them. backon's
//!   iterator is built with at most 16 delays and built afresh when it runs
//!   out; ours is `RetryPolicy::delay(r, seed)` for r = 1, …, 16, 1, …, and
//!   the decision a machine made afresh (`RetryMachine::new`, `Start`) every
//!   16 retries.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use core::hint::black_box;
use core::time::Duration;

use backoff::backoff::Backoff as _;
use backon::BackoffBuilder as _;
use criterion::{criterion_group, criterion_main, Criterion};
use retry_core::{Action, Backoff, Event, Failure, Instant, Jitter, RetryMachine, RetryPolicy};

/// A machine that has started and may fail (practically) forever, with delays
/// capped at 1 s so virtual time stays far from the end of representable time.
fn machine(jitter: Jitter, backoff: Backoff) -> RetryMachine {
    let policy = RetryPolicy::builder()
        .max_attempts(u32::MAX)
        .backoff(backoff)
        .max_delay(Duration::from_secs(1))
        .jitter(jitter)
        .build()
        .unwrap();
    let mut m = RetryMachine::new(&policy, 0x5eed);
    let _ = m.poll(Event::Start, Instant::ORIGIN);
    m
}

/// Failed -> Sleep, Woke -> Attempt: one full retry decision (a jittered delay
/// that rounds to zero goes straight to the Attempt).
fn decide(m: &mut RetryMachine, now: &mut Instant) -> u32 {
    match m.poll(Event::Failed(Failure::retryable()), *now) {
        Action::Sleep { until, .. } => {
            *now = until;
            match m.poll(Event::Woke, until) {
                Action::Attempt { number, .. } => number,
                other => unreachable!("a due wake always attempts, got {other}"),
            }
        }
        Action::Attempt { number, .. } => number,
        other => unreachable!("an unbounded policy always retries, got {other}"),
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("retry_decision");
    let exp = Backoff::exponential(Duration::from_millis(10), 2.0);
    for (name, jitter, backoff) in [
        ("retry_core/exponential_none", Jitter::None, exp),
        ("retry_core/exponential_full", Jitter::Full, exp),
        (
            "retry_core/constant_none",
            Jitter::None,
            Backoff::constant(Duration::from_millis(10)),
        ),
        (
            "retry_core/exponential_decorrelated",
            Jitter::Decorrelated,
            exp,
        ),
    ] {
        let mut m = machine(jitter, backoff);
        let mut now = Instant::ORIGIN;
        g.bench_function(name, |b| b.iter(|| black_box(decide(&mut m, &mut now))));
    }

    let builder = backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(10))
        .with_max_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .without_max_times();
    let mut plain = builder.build();
    g.bench_function("backon/exponential_next", |b| {
        b.iter(|| black_box(plain.next()))
    });
    let mut jittered = builder.with_jitter().with_jitter_seed(0x5eed).build();
    g.bench_function("backon/exponential_jitter_next", |b| {
        b.iter(|| black_box(jittered.next()))
    });

    let mut eb = backoff::ExponentialBackoffBuilder::new()
        .with_initial_interval(Duration::from_millis(10))
        .with_max_interval(Duration::from_secs(1))
        .with_multiplier(2.0)
        .with_max_elapsed_time(None)
        .build();
    g.bench_function("backoff/exponential_next_backoff", |b| {
        b.iter(|| black_box(eb.next_backoff()))
    });
    g.finish();
}

/// A policy whose delays follow `backoff` from 10 ms, capped at 1 s, as the
/// backon builders below are configured.
fn policy(backoff: Backoff, jitter: Jitter) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(u32::MAX)
        .backoff(backoff)
        .max_delay(Duration::from_secs(1))
        .jitter(jitter)
        .build()
        .unwrap()
}

/// The next delay alone: `RetryPolicy::delay(r, seed)` for r = 1, 2, 3, … (the
/// same sequence a backon iterator walks with `next()`), against backon's
/// `next()` on the same curve, cap and jitter. backon's jitter adds up to the
/// whole delay again, as `Jitter::Add(1.0)` does; `Jitter::Full` (our default)
/// is measured too.
fn next_delay(c: &mut Criterion) {
    let mut g = c.benchmark_group("next_delay");
    let ms10 = Duration::from_millis(10);
    let curves = [
        ("exponential", Backoff::exponential(ms10, 2.0)),
        ("constant", Backoff::constant(ms10)),
        ("fibonacci", Backoff::fibonacci(ms10)),
    ];
    for (curve, backoff) in curves {
        for (jname, jitter) in [
            ("none", Jitter::None),
            ("add_1", Jitter::Add(1.0)),
            ("full", Jitter::Full),
        ] {
            let p = policy(backoff, jitter);
            let mut r = 0u32;
            g.bench_function(format!("retry_core/{curve}_{jname}"), |b| {
                b.iter(|| {
                    r = r.wrapping_add(1);
                    black_box(black_box(&p).delay(r, black_box(0x5eed)))
                })
            });
        }
    }
    let max = Duration::from_secs(1);
    let exp = backon::ExponentialBuilder::new()
        .with_min_delay(ms10)
        .with_max_delay(max)
        .with_factor(2.0)
        .without_max_times();
    let constant = backon::ConstantBuilder::new()
        .with_delay(ms10)
        .without_max_times();
    let fib = backon::FibonacciBuilder::new()
        .with_min_delay(ms10)
        .with_max_delay(max)
        .without_max_times();
    let mut it = exp.build();
    g.bench_function("backon/exponential_none", |b| {
        b.iter(|| black_box(it.next()))
    });
    let mut it = exp.with_jitter().with_jitter_seed(0x5eed).build();
    g.bench_function("backon/exponential_jitter", |b| {
        b.iter(|| black_box(it.next()))
    });
    let mut it = constant.build();
    g.bench_function("backon/constant_none", |b| b.iter(|| black_box(it.next())));
    let mut it = constant.with_jitter().with_jitter_seed(0x5eed).build();
    g.bench_function("backon/constant_jitter", |b| {
        b.iter(|| black_box(it.next()))
    });
    let mut it = fib.build();
    g.bench_function("backon/fibonacci_none", |b| b.iter(|| black_box(it.next())));
    let mut it = fib.with_jitter().with_jitter_seed(0x5eed).build();
    g.bench_function("backon/fibonacci_jitter", |b| {
        b.iter(|| black_box(it.next()))
    });
    g.finish();
}

/// The peers' default curves (from 1 s, capped at 60 s; exponential
/// doubling), retries 1 to 16 over and over.
fn early_policy(backoff: Backoff, jitter: Jitter) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(EARLY_RETRIES + 1)
        .backoff(backoff)
        .max_delay(Duration::from_secs(60))
        .jitter(jitter)
        .build()
        .unwrap()
}

/// Retries per call in the `_retries_1_to_16` groups.
const EARLY_RETRIES: u32 = 16;

/// The next retry number after `r` in 1, …, 16, 1, ….
fn cycle(r: u32) -> u32 {
    if r >= EARLY_RETRIES {
        1
    } else {
        r + 1
    }
}

/// The next delay of a backon iterator built from `builder` with at most 16
/// delays, built afresh when it runs out (a new call's retries).
fn backon_cycled<B>(builder: B) -> impl FnMut() -> Option<Duration>
where
    B: backon::BackoffBuilder + Copy,
{
    let mut it = builder.build();
    move || match it.next() {
        Some(d) => Some(d),
        None => {
            it = builder.build();
            it.next()
        }
    }
}

fn next_delay_early(c: &mut Criterion) {
    let mut g = c.benchmark_group("next_delay_retries_1_to_16");
    let s1 = Duration::from_secs(1);
    let curves = [
        ("exponential", Backoff::exponential(s1, 2.0)),
        ("constant", Backoff::constant(s1)),
        ("fibonacci", Backoff::fibonacci(s1)),
    ];
    for (curve, backoff) in curves {
        for (jname, jitter) in [("none", Jitter::None), ("full", Jitter::Full)] {
            let p = early_policy(backoff, jitter);
            let mut r = 0u32;
            g.bench_function(format!("retry_core/{curve}_{jname}"), |b| {
                b.iter(|| {
                    r = cycle(r);
                    black_box(black_box(&p).delay(r, black_box(0x5eed)))
                })
            });
        }
    }
    let times = EARLY_RETRIES as usize;
    let exp = backon::ExponentialBuilder::new().with_max_times(times);
    let constant = backon::ConstantBuilder::new().with_max_times(times);
    let fib = backon::FibonacciBuilder::new().with_max_times(times);
    let mut next = backon_cycled(exp);
    g.bench_function("backon/exponential_none", |b| b.iter(|| black_box(next())));
    let mut next = backon_cycled(exp.with_jitter().with_jitter_seed(0x5eed));
    g.bench_function("backon/exponential_jitter", |b| {
        b.iter(|| black_box(next()))
    });
    let mut next = backon_cycled(constant);
    g.bench_function("backon/constant_none", |b| b.iter(|| black_box(next())));
    let mut next = backon_cycled(constant.with_jitter().with_jitter_seed(0x5eed));
    g.bench_function("backon/constant_jitter", |b| b.iter(|| black_box(next())));
    let mut next = backon_cycled(fib);
    g.bench_function("backon/fibonacci_none", |b| b.iter(|| black_box(next())));
    let mut next = backon_cycled(fib.with_jitter().with_jitter_seed(0x5eed));
    g.bench_function("backon/fibonacci_jitter", |b| b.iter(|| black_box(next())));
    g.finish();
}

fn decision_early(c: &mut Criterion) {
    let mut g = c.benchmark_group("retry_decision_retries_1_to_16");
    let exp = Backoff::exponential(Duration::from_secs(1), 2.0);
    for (name, jitter) in [
        ("retry_core/exponential_none", Jitter::None),
        ("retry_core/exponential_full", Jitter::Full),
    ] {
        let policy = early_policy(exp, jitter);
        let fresh = || {
            let mut m = RetryMachine::new(&policy, 0x5eed);
            let _ = m.poll(Event::Start, Instant::ORIGIN);
            m
        };
        let mut m = fresh();
        let mut now = Instant::ORIGIN;
        g.bench_function(name, |b| {
            b.iter(|| {
                let number = decide(&mut m, &mut now);
                if number > EARLY_RETRIES {
                    m = fresh();
                    now = Instant::ORIGIN;
                }
                black_box(number)
            })
        });
    }
    let builder = backon::ExponentialBuilder::new()
        .with_max_times(EARLY_RETRIES as usize)
        .with_jitter()
        .with_jitter_seed(0x5eed);
    let mut next = backon_cycled(builder);
    g.bench_function("backon/exponential_jitter_next", |b| {
        b.iter(|| black_box(next()))
    });
    g.finish();
}

criterion_group!(benches, next_delay, bench, next_delay_early, decision_early);
criterion_main!(benches);
