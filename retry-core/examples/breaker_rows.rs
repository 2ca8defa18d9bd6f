//! The breaker benchmark's rows as fixed workloads for counting instructions
//! per call with callgrind (steady on a shared, noisy machine, where criterion
//! times are not): `c2-100` and `c16-100` are the closed path (admit + record
//! a success) in a `CircuitBreaker<2, 0>` and a `CircuitBreaker<16, 0>` with a
//! 100-call window, `c16-1000` the same with a 1,000-call window, `mix` the
//! failure mix (every 5th call fails) in a `CircuitBreaker<2, 0>`; each with the
//! failure-rate rule of `benches/breaker.rs` (50 % over the window, judged once
//! it is full). `t8` is the closed path of a time window (the last 4 s in 8
//! buckets, the same rule) in a `CircuitBreaker<0, 8>`. `d2-100` is `c2-100`
//! in a breaker that keeps its calls' durations (`CircuitBreaker<2, 0, 128>`).
//!
//! ```text
//! cargo build --release -p retry-core --example breaker_rows
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/breaker_rows mix 100000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/breaker_rows mix 0
//! ```
//!
//! (the difference of the two `I refs` totals, divided by 100,000).
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]
use core::hint::black_box;
use core::time::Duration;
use retry_core::{Admission, BreakerConfig, CallOutcome, CircuitBreaker, Instant, Rate};

fn config(window: u16) -> BreakerConfig {
    BreakerConfig::failure_rate_over(Rate::from_percent(50), window).unwrap()
}

fn call<const W: usize, const B: usize, const D: usize>(
    b: &mut CircuitBreaker<W, B, D>,
    now: Instant,
    fail: bool,
) -> bool {
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

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap();
    let n: u64 = args.next().unwrap().parse().unwrap();
    let mut sum = 0u32;
    match what.as_str() {
        "mix" => {
            let mut b = CircuitBreaker::<2, 0>::new(config(100)).unwrap();
            for i in 0..n {
                sum += u32::from(call(black_box(&mut b), Instant::from_micros(i), i % 5 == 4));
            }
        }
        "c16-100" => {
            let mut b = CircuitBreaker::<16, 0>::new(config(100)).unwrap();
            for i in 0..n {
                sum += u32::from(call(black_box(&mut b), Instant::from_micros(i), false));
            }
        }
        "c16-1000" => {
            let mut b = CircuitBreaker::<16, 0>::new(config(1000)).unwrap();
            for i in 0..n {
                sum += u32::from(call(black_box(&mut b), Instant::from_micros(i), false));
            }
        }
        "t8" => {
            // A time window: the last 4 s in 8 buckets (one call a microsecond).
            let config = BreakerConfig::builder()
                .failure_threshold(None)
                .failure_rate(Rate::from_percent(50))
                .time_window(Duration::from_secs(4), 8)
                .build()
                .unwrap();
            let mut b = CircuitBreaker::<0, 8>::new(config).unwrap();
            for i in 0..n {
                sum += u32::from(call(black_box(&mut b), Instant::from_micros(i), false));
            }
        }
        "c2-100" => {
            let mut b = CircuitBreaker::<2, 0>::new(config(100)).unwrap();
            for i in 0..n {
                sum += u32::from(call(black_box(&mut b), Instant::from_micros(i), false));
            }
        }
        "d2-100" => {
            let mut b = CircuitBreaker::<2, 0, 128>::new(config(100)).unwrap();
            for i in 0..n {
                sum += u32::from(call(black_box(&mut b), Instant::from_micros(i), false));
            }
        }
        other => panic!("unknown workload {other}"),
    }
    black_box(sum);
}
