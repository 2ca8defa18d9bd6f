//! A call guarded by the thread-shared breaker, called N times (default
//! 1,000,000), for counting instructions per call (see `hot_path_blocking` for
//! the method). The first argument picks the path: `retry_std` (a reused
//! `retry_std::Retry`, 1 attempt, a `SharedBreaker`, every call succeeds),
//! `breaker` (the breaker alone as the driver asks it: a `PermitGuard`, then
//! `finish`) or `recloser` (recloser's `call` on the same rule). The `_mix`
//! paths (`retry_std_mix`, `breaker_mix`, `recloser_mix`) are the benchmark's
//! mix on one thread: every 5th call fails (a third argument `k` makes it
//! every `k`th: `1` fails every call).
//!
//! ```text
//! cargo build --release -p retry-std --example hot_path_guarded
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_guarded retry_std 100000
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/hot_path_guarded retry_std 0
//! ```
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use retry_core::{BreakerConfig, Event, Failure, Rate, RetryPolicy};
use retry_shared::{PermitGuard, SharedBreaker};
use retry_std::{Retry, SystemClock};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "retry_std".into());
    let n: u64 = args.next().map_or(1_000_000, |a| a.parse().unwrap());
    let every: u64 = args.next().map_or(5, |a| a.parse().unwrap());
    let fails = |i: u64| black_box(i % every == every - 1);
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let mut sum = 0u64;
    match path.as_str() {
        "retry_std" => {
            let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
            let retrier: Retry<()> = Retry::new(policy).seed(7).breaker(breaker);
            for i in 0..n {
                sum += retrier.call(|_| Ok(black_box(i))).map_or(0, |s| s.value);
            }
        }
        "retry_std_mix" => {
            let policy = RetryPolicy::builder().max_attempts(1).build().unwrap();
            let retrier: Retry<()> = Retry::new(policy).seed(7).breaker(breaker);
            for i in 0..n {
                let fail = fails(i);
                let result = retrier.call(|_| if fail { Err(()) } else { Ok(i) });
                sum += black_box(result).map_or(1, |s| s.value);
            }
        }
        "breaker_mix" => {
            for i in 0..n {
                if let Ok(permit) = PermitGuard::request(&breaker, SystemClock, None, None) {
                    let event = if fails(i) {
                        Event::Failed(Failure::retryable())
                    } else {
                        sum += i;
                        Event::Succeeded
                    };
                    permit.finish(event, None);
                }
            }
        }
        "recloser_mix" => {
            let rc = recloser::Recloser::default();
            for i in 0..n {
                let fail = fails(i);
                let result = rc.call(|| if fail { Err(()) } else { Ok(i) });
                sum += black_box(result).unwrap_or(1);
            }
        }
        "breaker" => {
            for i in 0..n {
                if let Ok(permit) = PermitGuard::request(&breaker, SystemClock, None, None) {
                    sum += black_box(i);
                    permit.finish(Event::Succeeded, None);
                }
            }
        }
        "recloser" => {
            let rc = recloser::Recloser::default();
            for i in 0..n {
                sum += rc.call(|| Ok::<u64, ()>(black_box(i))).unwrap_or(0);
            }
        }
        other => panic!("unknown path {other}: retry_std, breaker or recloser (or a _mix of one)"),
    }
    black_box(sum);
}
