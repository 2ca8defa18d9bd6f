//! One retry decision: a failure answered with a Sleep, then the wake answered with
//! an Attempt, in retry-core; against `backon`'s and `backoff`'s next delay.
//! Run: `cargo bench -p retry-core --bench decision`.

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

criterion_group!(benches, next_delay, bench);
criterion_main!(benches);
