//! The smallest useful program around retry-core on a Cortex-M4F: one retry
//! machine (borrowing its policy) and one circuit breaker, driven by inputs the optimizer cannot see
//! through (`black_box`), so every decision path stays in the binary.
//!
//! Build and measure (see BENCHMARKS.md):
//! `cargo build --release --target thumbv7em-none-eabihf` in this folder, then
//! `llvm-size target/thumbv7em-none-eabihf/release/retry-embedded-footprint`.

#![no_std]
#![no_main]

use core::hint::black_box;
use core::panic::PanicInfo;
use core::time::Duration;

use retry_core::{BasicRule, 
    Action, Admission, Backoff, BreakerConfig, CallOutcome, CircuitBreaker, Event, Failure,
    Instant, Jitter, RetryMachine, RetryPolicy,
};

/// Runs one call: `outcomes` says, attempt by attempt, whether it succeeds; the
/// breaker is asked before each attempt. Returns the attempts that ran.
fn call(policy: &RetryPolicy, breaker: &mut CircuitBreaker, outcomes: u32, seed: u64) -> u32 {
    let mut m = RetryMachine::with_policy(policy, seed);
    let mut now = Instant::ORIGIN;
    let mut event = Event::Start;
    loop {
        match m.poll(event, now) {
            Action::Attempt { number, .. } => match breaker.request(now) {
                Admission::Admitted { permit, .. } => {
                    let ok = outcomes & (1 << (number % 32)) != 0;
                    // The attempt took 5 ms. Time comes in as firmware gets
                    // it, from its timer (here a 64-bit count of nanoseconds
                    // that wraps as hardware counters do, opaque to the
                    // optimizer), not by adding a `Duration` to an `Instant`.
                    let ticks = now.as_nanos().wrapping_add(5_000_000);
                    now = Instant::from_nanos(black_box(ticks));
                    let outcome = CallOutcome {
                        success: ok,
                        duration: Duration::from_millis(5),
                    };
                    let _ = breaker.record(permit, outcome, now);
                    event = if ok {
                        Event::Succeeded
                    } else {
                        Event::Failed(Failure::retryable())
                    };
                }
                Admission::Rejected { until, .. } => event = Event::Rejected { until },
            },
            Action::Sleep { until, .. } => {
                now = until;
                event = Event::Woke;
            }
            Action::Withdraw { .. } => event = Event::Granted,
            Action::GiveUp(g) => return g.attempts,
            Action::Done { attempts } => return attempts,
        }
    }
}

#[no_mangle]
pub extern "C" fn _start() -> ! {
    // Each value is checked where it is made and then kept in place, as a
    // firmware author would write it: moving the two `Result`s into one
    // tuple to match them together would copy the 176-byte policy and the
    // 256-byte breaker through `memcpy`, which measures the harness rather
    // than the crate. The same things are exercised: one policy from the
    // builder, one breaker from `BreakerConfig::basic`, every input opaque.
    let Ok(policy) = RetryPolicy::builder()
        .max_attempts(black_box(5))
        .backoff(Backoff::exponential(Duration::from_millis(100), 2.0))
        .max_delay(Duration::from_secs(10))
        .jitter(Jitter::Full)
        .build()
    else {
        loop {}
    };
    let Ok(mut breaker) =
        BreakerConfig::basic(BasicRule {
            failure_threshold: black_box(3),
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        }).and_then(CircuitBreaker::new)
    else {
        loop {}
    };
    let mut seed = 1u64;
    loop {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        black_box(call(&policy, &mut breaker, black_box(seed as u32), seed));
    }
}

#[panic_handler]
fn panic(_: &PanicInfo<'_>) -> ! {
    loop {}
}
