//! A call guarded by the thread-shared breaker exactly as the adapters use it,
//! against `recloser` and `failsafe`, on one thread and on two threads sharing
//! one breaker. Run: `cargo bench -p retry-std --bench breaker`.
//!
//! - `guarded_call`: one call that succeeds. `retry_std` is a reused
//!   `retry_std::Retry` (1 attempt, a `SharedBreaker`); `shared_breaker` is the
//!   breaker alone as the driver asks it: a `PermitGuard` requested with no
//!   time read beforehand, the operation, `finish` (the guard and the breaker
//!   read the system clock only when they need a time: with the default
//!   config, never on a closed breaker's success); `shared_breaker_untimed` is
//!   the same with a slow-call duration of `Duration::MAX` (no clock read
//!   either); the peers' `call`.
//! - `two_threads_mix`: 200,000 calls, every 5th failing, split over two threads
//!   sharing one breaker; the time is per call. Each run of 200,000 calls
//!   builds its breakers afresh.
//! - `long_lived_two_threads` and `long_lived_one_thread`: the breakers (and
//!   the `Retry`) built once and kept for every run of every criterion
//!   iteration, as a service holds them; a run is 100,000 calls on each of
//!   two threads (or on one), every 5th failing; the time is per call. The
//!   two-thread rows against the one-thread rows are the scaling of the
//!   shared breaker. `FAIL_EVERY=N` in the environment makes every Nth call
//!   fail instead (0: none fail), to see what the failures cost apart from
//!   the successes; the figures of record use the default, 5.
//!
//! Our breaker judges the failure rate (50 %) over the last 100 calls once it
//! holds 100, recloser's default rule; failsafe keeps its default. The
//! long-lived groups also time our default config (five failures in a row,
//! no window) as `shared_breaker_five_in_a_row`, a row of our own scaling
//! with no peer beside it, and `order_floor`: no breaker, only what keeping
//! the calls' order across threads costs at the least (each call takes its
//! thread's own lock and reads one shared word; a failure also advances
//! that word). Its two-thread row is the floor under the shared breaker's.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use core::hint::black_box;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use failsafe::CircuitBreaker as _;
use retry_core::{BreakerConfig, Event, Failure, Rate, RetryPolicy};
use retry_shared::{PermitGuard, SharedBreaker};
use retry_std::{Retry, SystemClock};

const MIX_CALLS: u64 = 200_000;

fn shared() -> SharedBreaker {
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
    SharedBreaker::new(config).unwrap()
}

/// The same rule, with no slow-call duration to judge abandoned attempts by.
fn shared_untimed() -> SharedBreaker {
    let config = BreakerConfig::builder()
        .failure_rate(Rate::from_percent(50))
        .count_window(100)
        .minimum_calls(100)
        .slow_call_duration(Duration::MAX)
        .build()
        .unwrap();
    SharedBreaker::new(config).unwrap()
}

fn retrier(breaker: &SharedBreaker) -> Retry<()> {
    let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
    Retry::new(policy).seed(7).breaker(breaker.clone())
}

/// One call through the shared breaker as the driver makes it.
fn shared_call(b: &SharedBreaker, fail: bool) -> bool {
    match PermitGuard::request(b, SystemClock, None, None) {
        Ok(permit) => {
            let ok = black_box(!fail);
            let event = if ok {
                Event::Succeeded
            } else {
                Event::Failed(Failure::retryable())
            };
            permit.finish(event, None);
            ok
        }
        Err(_) => false,
    }
}

fn guarded_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("guarded_call");
    let b = shared();
    let r = retrier(&b);
    g.bench_function("retry_std", |bench| {
        bench.iter(|| black_box(r.call(|_| Ok::<_, ()>(black_box(1u64))).is_ok()))
    });
    let b = shared();
    g.bench_function("shared_breaker", |bench| {
        bench.iter(|| black_box(shared_call(&b, false)))
    });
    let b = shared_untimed();
    g.bench_function("shared_breaker_untimed", |bench| {
        bench.iter(|| black_box(shared_call(&b, false)))
    });
    let rc = recloser::Recloser::default();
    g.bench_function("recloser", |bench| {
        bench.iter(|| black_box(rc.call(|| Ok::<u64, ()>(black_box(1))).is_ok()))
    });
    let fs = failsafe::Config::new().build();
    g.bench_function("failsafe", |bench| {
        bench.iter(|| black_box(fs.call(|| Ok::<u64, ()>(black_box(1))).is_ok()))
    });
    g.finish();
}

/// `calls` calls split over `threads` threads; returns the wall time.
fn spread(threads: u64, calls: u64, call: impl Fn(u64) + Sync) -> Duration {
    let per_thread = calls / threads;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let call = &call;
            s.spawn(move || {
                for i in 0..per_thread {
                    call(t * per_thread + i);
                }
            });
        }
    });
    start.elapsed()
}

/// Per call: each criterion iteration is one call's share of a run of
/// `MIX_CALLS` calls on `threads` threads.
fn per_call(iters: u64, run: impl Fn() -> Duration) -> Duration {
    let runs = iters.div_ceil(MIX_CALLS).max(1);
    let mut total = Duration::ZERO;
    for _ in 0..runs {
        total += run();
    }
    total.mul_f64(iters as f64 / (runs * MIX_CALLS) as f64)
}

fn mix(c: &mut Criterion, threads: u64) {
    let name = if threads == 1 {
        "one_thread_mix"
    } else {
        "two_threads_mix"
    };
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    g.bench_function("retry_std", |bench| {
        bench.iter_custom(|iters| {
            per_call(iters, || {
                let b = shared();
                let r = retrier(&b);
                spread(threads, MIX_CALLS, |i| {
                    let _ = black_box(r.call(|_| if i % 5 == 4 { Err(()) } else { Ok(i) }));
                })
            })
        })
    });
    g.bench_function("shared_breaker", |bench| {
        bench.iter_custom(|iters| {
            per_call(iters, || {
                let b = shared();
                spread(threads, MIX_CALLS, |i| {
                    black_box(shared_call(&b, i % 5 == 4));
                })
            })
        })
    });
    g.bench_function("shared_breaker_untimed", |bench| {
        bench.iter_custom(|iters| {
            per_call(iters, || {
                let b = shared_untimed();
                spread(threads, MIX_CALLS, |i| {
                    black_box(shared_call(&b, i % 5 == 4));
                })
            })
        })
    });
    g.bench_function("recloser", |bench| {
        bench.iter_custom(|iters| {
            per_call(iters, || {
                let rc = recloser::Recloser::default();
                spread(threads, MIX_CALLS, |i| {
                    let _ = black_box(rc.call(|| if i % 5 == 4 { Err(()) } else { Ok(i) }));
                })
            })
        })
    });
    g.bench_function("failsafe", |bench| {
        bench.iter_custom(|iters| {
            per_call(iters, || {
                let fs = failsafe::Config::new().build();
                spread(threads, MIX_CALLS, |i| {
                    let _ = black_box(fs.call(|| if i % 5 == 4 { Err(()) } else { Ok(i) }));
                })
            })
        })
    });
    g.finish();
}

fn mixes(c: &mut Criterion) {
    mix(c, 1);
    mix(c, 2);
}

/// Calls per thread in a run of the long-lived groups.
const LONG_LIVED_CALLS: u64 = 100_000;

/// Per call: runs of `LONG_LIVED_CALLS` calls on each of `threads` threads,
/// as many as `iters` asks for, on the breaker `call` holds (built once).
fn long_lived_time(threads: u64, iters: u64, call: impl Fn(u64) + Sync) -> Duration {
    let per_run = threads * LONG_LIVED_CALLS;
    let runs = iters.div_ceil(per_run).max(1);
    let mut total = Duration::ZERO;
    for _ in 0..runs {
        total += spread(threads, per_run, &call);
    }
    total.mul_f64(iters as f64 / (runs * per_run) as f64)
}

/// A word on 128 bytes of its own.
#[derive(Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

/// See the `order_floor` row: a shared ticket and a lock per thread.
#[derive(Default)]
struct OrderFloor {
    ticket: Padded,
    stripes: [Padded; 2],
}

impl OrderFloor {
    fn call(&self, thread: usize, fail: bool) {
        let Some(stripe) = self.stripes.get(thread) else {
            return;
        };
        let mut state = stripe.0.load(Ordering::SeqCst);
        loop {
            if state & 1 == 0 {
                match stripe.0.compare_exchange(
                    state,
                    state | 1,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(_) => break,
                    Err(now) => state = now,
                }
            } else {
                core::hint::spin_loop();
                state = stripe.0.load(Ordering::SeqCst);
            }
        }
        let tag = if fail {
            self.ticket.0.fetch_add(1, Ordering::SeqCst)
        } else {
            self.ticket.0.load(Ordering::SeqCst)
        };
        black_box(tag);
        stripe.0.store(state.wrapping_add(2), Ordering::Release);
    }
}

/// Calls a breaker refused in a long-lived group, by row: every call of
/// these groups should be admitted (a fifth failing never trips any of the
/// three), so a count here means that row measured rejections, not calls.
#[derive(Default)]
struct Refused([AtomicU64; 4]);

impl Refused {
    const ROWS: [&'static str; 4] = ["retry_std", "shared_breaker", "recloser", "failsafe"];

    fn count(&self, row: usize, refused: bool) {
        if refused {
            if let Some(n) = self.0.get(row) {
                n.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn report(&self, group: &str) {
        for (row, n) in Self::ROWS.iter().zip(&self.0) {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                eprintln!("WARNING: {group}/{row}: the breaker refused {n} calls");
            }
        }
    }
}

fn long_lived(c: &mut Criterion, threads: u64) {
    let name = if threads == 1 {
        "long_lived_one_thread"
    } else {
        "long_lived_two_threads"
    };
    let every: u64 = std::env::var("FAIL_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let fails = |i: u64| every > 0 && i % every == every - 1;
    let refused = Refused::default();
    let mut g = c.benchmark_group(name);
    g.sample_size(10);
    let b = shared();
    let r = retrier(&b);
    g.bench_function("retry_std", |bench| {
        bench.iter_custom(|iters| {
            long_lived_time(threads, iters, |i| {
                let result = black_box(r.call(|_| if fails(i) { Err(()) } else { Ok(i) }));
                refused.count(0, result.is_err_and(|e| e.is_circuit_open()));
            })
        })
    });
    let b = shared();
    g.bench_function("shared_breaker", |bench| {
        bench.iter_custom(|iters| {
            long_lived_time(threads, iters, |i| {
                let fail = fails(i);
                refused.count(1, black_box(shared_call(&b, fail)) == fail);
            })
        })
    });
    // The default config (five failures in a row, no window), as
    // `SharedBreaker::new(BreakerConfig::default())` builds it: every 5th
    // call failing never makes a streak of two.
    let five = SharedBreaker::new(BreakerConfig::default()).unwrap();
    g.bench_function("shared_breaker_five_in_a_row", |bench| {
        bench.iter_custom(|iters| {
            long_lived_time(threads, iters, |i| {
                let fail = fails(i);
                refused.count(1, black_box(shared_call(&five, fail)) == fail);
            })
        })
    });
    // The floor of keeping calls' order across threads, with no breaker
    // around it: each call takes its thread's own lock and reads a shared
    // ticket, and a failure also advances the ticket (what a kept outcome
    // does on the closed path, without the window, the folds or the rules).
    let floor = OrderFloor::default();
    g.bench_function("order_floor", |bench| {
        bench.iter_custom(|iters| {
            long_lived_time(threads, iters, |i| {
                floor.call((i / LONG_LIVED_CALLS) as usize, fails(i));
            })
        })
    });
    let rc = recloser::Recloser::default();
    g.bench_function("recloser", |bench| {
        bench.iter_custom(|iters| {
            long_lived_time(threads, iters, |i| {
                let result = black_box(rc.call(|| if fails(i) { Err(()) } else { Ok(i) }));
                refused.count(2, matches!(result, Err(recloser::Error::Rejected)));
            })
        })
    });
    let fs = failsafe::Config::new().build();
    g.bench_function("failsafe", |bench| {
        bench.iter_custom(|iters| {
            long_lived_time(threads, iters, |i| {
                let result = black_box(fs.call(|| if fails(i) { Err(()) } else { Ok(i) }));
                refused.count(3, matches!(result, Err(failsafe::Error::Rejected)));
            })
        })
    });
    g.finish();
    refused.report(name);
}

fn long_lived_groups(c: &mut Criterion) {
    long_lived(c, 2);
    long_lived(c, 1);
}

criterion_group!(benches, guarded_call, mixes, long_lived_groups);
criterion_main!(benches);
