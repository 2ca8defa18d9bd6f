//! The circuit breaker's closed path (admit + record success) and a failure-heavy
//! mix (every 5th call fails, 10,000 calls), single-threaded and with two threads
//! sharing one breaker; against `failsafe` and `recloser` on the same workloads.
//! Run: `cargo bench -p retry-core --bench breaker`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use core::hint::black_box;
use core::time::Duration;
use std::sync::{Arc, Mutex};
use std::time::Instant as WallInstant;

use criterion::{criterion_group, criterion_main, Criterion};
use failsafe::CircuitBreaker as _;
use retry_core::{Admission, BreakerConfig, CallOutcome, CircuitBreaker, Instant, Rate};

const MIX_CALLS: u64 = 10_000;

/// A breaker judging the failure rate (50 %) over the last 100 calls, as recloser's
/// default does, so a 20 % failure mix never trips it.
fn core_breaker() -> CircuitBreaker {
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
    CircuitBreaker::new(config).unwrap()
}

/// The same rule over the last 1,000 calls (Resilience4j's largest common count
/// window), in the 1,024-call breaker `retry-shared`'s `SharedBreaker` holds.
fn core_breaker_1000() -> CircuitBreaker<16, 0> {
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 1000).unwrap();
    CircuitBreaker::new(config).unwrap()
}

/// One call through the core breaker at `now`; `fail` decides its outcome.
fn core_call<const W: usize>(b: &mut CircuitBreaker<W, 0>, now: Instant, fail: bool) -> bool {
    match b.request(now) {
        Admission::Admitted { permit, .. } => {
            let outcome = CallOutcome {
                success: !fail,
                duration: Duration::from_micros(1),
            };
            let _ = b.record(permit, outcome, now);
            true
        }
        Admission::Rejected { .. } => false,
    }
}

fn closed_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_closed_path");
    let mut b = core_breaker();
    let mut now = Instant::ORIGIN;
    g.bench_function("retry_core", |bench| {
        bench.iter(|| {
            now = now + Duration::from_micros(1);
            black_box(core_call(&mut b, now, false))
        })
    });
    // The same in the 1,024-call breaker, with a 100-call and a 1,000-call window
    // (each full, so every call is judged over the whole window).
    let mut wide = CircuitBreaker::<16, 0>::new(*core_breaker().config()).unwrap();
    g.bench_function("retry_core_1024_capacity_100_window", |bench| {
        bench.iter(|| {
            now = now + Duration::from_micros(1);
            black_box(core_call(&mut wide, now, false))
        })
    });
    let mut thousand = core_breaker_1000();
    g.bench_function("retry_core_1000_window", |bench| {
        bench.iter(|| {
            now = now + Duration::from_micros(1);
            black_box(core_call(&mut thousand, now, false))
        })
    });
    // The same breaker through its lock-free closed path (as a thread-shared
    // breaker calls it): no clock, no lock.
    let path_machine = core_breaker();
    let path = path_machine.closed_path();
    g.bench_function("retry_core_closed_path", |bench| {
        bench.iter(|| {
            let admitted = black_box(&path).request();
            if let Some(permit) = admitted {
                black_box(path.record_quiet(permit, CallOutcome::success(Duration::ZERO)));
            }
        })
    });
    let fs = failsafe::Config::new().build();
    g.bench_function("failsafe", |bench| {
        bench.iter(|| black_box(fs.call(|| Ok::<(), ()>(())).is_ok()))
    });
    let rc = recloser::Recloser::default();
    g.bench_function("recloser", |bench| {
        bench.iter(|| black_box(rc.call(|| Ok::<(), ()>(())).is_ok()))
    });
    g.finish();
}

fn failure_mix(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_failure_mix_10k");
    g.bench_function("retry_core", |bench| {
        bench.iter(|| {
            let mut b = core_breaker();
            let mut admitted = 0u32;
            for i in 0..MIX_CALLS {
                let now = Instant::from_micros(i);
                admitted += u32::from(core_call(&mut b, now, i % 5 == 4));
            }
            black_box(admitted)
        })
    });
    g.bench_function("failsafe", |bench| {
        bench.iter(|| {
            let fs = failsafe::Config::new().build();
            let mut admitted = 0u32;
            for i in 0..MIX_CALLS {
                let r = fs.call(|| if i % 5 == 4 { Err(()) } else { Ok(()) });
                admitted += u32::from(!matches!(r, Err(failsafe::Error::Rejected)));
            }
            black_box(admitted)
        })
    });
    g.bench_function("recloser", |bench| {
        bench.iter(|| {
            let rc = recloser::Recloser::default();
            let mut admitted = 0u32;
            for i in 0..MIX_CALLS {
                let r = rc.call(|| if i % 5 == 4 { Err(()) } else { Ok(()) });
                admitted += u32::from(!matches!(r, Err(recloser::Error::Rejected)));
            }
            black_box(admitted)
        })
    });
    g.finish();
}

/// Runs `per_thread` calls on each of two threads and returns the wall time.
fn two_threads(per_thread: u64, call: impl Fn(u64) + Sync) -> Duration {
    let start = WallInstant::now();
    std::thread::scope(|s| {
        for t in 0..2u64 {
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

fn shared_two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("breaker_failure_mix_10k_two_threads");
    let per_thread = MIX_CALLS / 2;
    g.bench_function("retry_core_mutex", |bench| {
        bench.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let shared = Arc::new(Mutex::new(core_breaker()));
                let origin = WallInstant::now();
                total += two_threads(per_thread, |i| {
                    // The adapter's pattern: read the clock, lock for the core call only.
                    let now = Instant::from_duration(origin.elapsed());
                    let admission = shared.lock().unwrap().request(now);
                    if let Admission::Admitted { permit, .. } = admission {
                        let outcome = CallOutcome {
                            success: i % 5 != 4,
                            duration: Duration::from_micros(1),
                        };
                        let _ = shared.lock().unwrap().record(permit, outcome, now);
                    }
                });
            }
            total
        })
    });
    g.bench_function("failsafe", |bench| {
        bench.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let fs = failsafe::Config::new().build();
                total += two_threads(per_thread, |i| {
                    let _ = black_box(fs.call(|| if i % 5 == 4 { Err(()) } else { Ok(()) }));
                });
            }
            total
        })
    });
    g.bench_function("recloser", |bench| {
        bench.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let rc = recloser::Recloser::default();
                total += two_threads(per_thread, |i| {
                    let _ = black_box(rc.call(|| if i % 5 == 4 { Err(()) } else { Ok(()) }));
                });
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, closed_path, failure_mix, shared_two_threads);
criterion_main!(benches);
