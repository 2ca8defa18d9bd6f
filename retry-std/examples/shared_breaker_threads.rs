//! The long-lived shared breaker under contention, timed without criterion
//! (quick to build, for iterating; `benches/breaker.rs`'s
//! `long_lived_two_threads` and `long_lived_one_thread` groups are the
//! figures of record).
//!
//! One breaker of each kind is built once and kept for the whole run, as a
//! service holds it: ours through a reused `retry_std::Retry` (1 attempt, a
//! `SharedBreaker`), ours alone as the driver asks it, recloser's and
//! failsafe's `call`. A round runs, for each in turn (the order rotating from
//! round to round), 100,000 calls on each of `threads` threads (every 5th
//! failing) and prints the time per call; the end prints each one's median
//! over the rounds and its ratio to recloser's.
//!
//! ```text
//! cargo run --release -p retry-std --example shared_breaker_threads -- [threads] [rounds] [k]
//! ```
//! (defaults: 2 threads, 15 rounds, every 5th call failing; `1` thread for the
//! one-thread cost the scaling target compares with; `k` makes every `k`-th
//! call fail instead, `0` none).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::time::Instant;

use failsafe::CircuitBreaker as _;
use retry_core::{BreakerConfig, Event, Failure, Rate, RetryPolicy};
use retry_shared::{PermitGuard, SharedBreaker};
use retry_std::{Retry, SystemClock};

const CALLS_PER_THREAD: u64 = 100_000;

fn shared() -> SharedBreaker {
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
    SharedBreaker::new(config).unwrap()
}

/// `CALLS_PER_THREAD` calls on each of `threads` threads; the time per call.
fn per_call(threads: u64, call: &(dyn Fn(u64) + Sync)) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..CALLS_PER_THREAD {
                    call(t * CALLS_PER_THREAD + i);
                }
            });
        }
    });
    let elapsed: Duration = start.elapsed();
    elapsed.as_secs_f64() * 1e9 / (threads * CALLS_PER_THREAD) as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: u64 = args.next().map_or(2, |a| a.parse().unwrap());
    let rounds: usize = args.next().map_or(15, |a| a.parse().unwrap());
    let every: u64 = args.next().map_or(5, |a| a.parse().unwrap());
    let fails = |i: u64| every != 0 && black_box(i % every == every - 1);

    let breaker = shared();
    let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
    let retrier: Retry<()> = Retry::new(policy).seed(7).breaker(breaker.clone());
    let alone = shared();
    let rc = recloser::Recloser::default();
    let fs = failsafe::Config::new().build();

    let retry_std = |i: u64| {
        let _ = black_box(retrier.call(|_| if fails(i) { Err(()) } else { Ok(i) }));
    };
    let shared_breaker = |i: u64| {
        if let Ok(permit) = PermitGuard::request(&alone, SystemClock, None, None) {
            let event = if fails(i) {
                Event::Failed(Failure::retryable())
            } else {
                Event::Succeeded
            };
            permit.finish(event, None);
        }
    };
    // Calls the peers refused (none, unless one tripped: then its row timed
    // rejections, not calls).
    let refused = [AtomicU64::new(0), AtomicU64::new(0)];
    let recloser = |i: u64| {
        let result = black_box(rc.call(|| if fails(i) { Err(()) } else { Ok(i) }));
        if matches!(result, Err(recloser::Error::Rejected)) {
            refused[0].fetch_add(1, Ordering::Relaxed);
        }
    };
    let failsafe = |i: u64| {
        let result = black_box(fs.call(|| if fails(i) { Err(()) } else { Ok(i) }));
        if matches!(result, Err(failsafe::Error::Rejected)) {
            refused[1].fetch_add(1, Ordering::Relaxed);
        }
    };
    let paths: [(&str, &(dyn Fn(u64) + Sync)); 4] = [
        ("retry_std", &retry_std),
        ("shared_breaker", &shared_breaker),
        ("recloser", &recloser),
        ("failsafe", &failsafe),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    // A warm-up round, not kept.
    for (_, call) in paths {
        per_call(threads, call);
    }
    for round in 0..rounds {
        let mut line = format!("round {round:2}:");
        for k in 0..paths.len() {
            let at = (k + round) % paths.len();
            let (name, call) = paths[at];
            let ns = per_call(threads, call);
            times[at].push(ns);
            line.push_str(&format!(" {name} {ns:.1}"));
        }
        println!("{line}");
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let medians: Vec<f64> = times.iter_mut().map(median).collect();
    let peer = medians[2];
    println!("{threads} thread(s), {CALLS_PER_THREAD} calls each, every {every}th failing (0: none), median of {rounds} rounds:");
    for ((name, _), ns) in paths.iter().zip(&medians) {
        println!(
            "  {name:15} {ns:7.2} ns per call  {:.2}x recloser",
            ns / peer
        );
    }
    println!(
        "breaker state: {:?} / {:?}; calls refused by recloser {}, by failsafe {}",
        breaker.state(),
        alone.state(),
        refused[0].load(Ordering::Relaxed),
        refused[1].load(Ordering::Relaxed)
    );
}
