//! The no-panic proof for retry-core and retry-embassy: a program that drives
//! `Retry::call_seeded` (breaker, retry budget, cancel signal, attempt
//! deadlines, sleeps, every hook) with inputs the optimiser cannot see through,
//! linked with a panic handler that does not exist. It links only if no panic
//! path is left anywhere in it; the firmware's own panic paths (in embassy's
//! executor, embassy-sync's async mutex, and the checks rustc puts in every
//! async state machine) stay out because this program uses none of them.
//!
//! `cargo build --release --target thumbv7em-none-eabihf --features panic-never
//! --bin panic-probe` in this folder.

#![no_std]
#![no_main]

use core::cell::Cell;
use core::future::Future;
use core::hint::black_box;
use core::pin::{pin, Pin};
use core::sync::atomic::{AtomicU32, Ordering};
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use cortex_m as _; // its critical section
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex as Cs;
use retry_core::{BasicRule, 
    Backoff, BreakerConfig, BudgetConfig, CircuitOpen, Failure, Jitter, RetryError, RetryPolicy,
    Step,
};
use retry_embassy::{AttemptContext, CancelSignal, Retry, RetryNotice, SharedBreaker, SharedBudget};

/// A clock that moves on by an unknown step at every reading, so sleeps end and
/// deadlines pass; wake-ups are immediate (the loop below polls again anyway).
struct Clock;

static TICKS: AtomicU32 = AtomicU32::new(0);

embassy_time_driver::time_driver_impl!(static CLOCK: Clock = Clock);

impl embassy_time_driver::Driver for Clock {
    fn now(&self) -> u64 {
        u64::from(TICKS.fetch_add(black_box(7), Ordering::Relaxed))
    }
    fn schedule_wake(&self, _at: u64, waker: &Waker) {
        waker.wake_by_ref();
    }
}

/// An attempt that succeeds, fails or hangs, as an unknown value says.
struct Read {
    outcome: u32,
}

impl Future for Read {
    type Output = Result<u32, u32>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        match black_box(self.outcome) % 4 {
            0 => Poll::Ready(Ok(black_box(21))),
            1 => Poll::Ready(Err(1)),
            2 => Poll::Ready(Err(2)),
            _ => Poll::Pending,
        }
    }
}

fn classify(error: &u32) -> Failure {
    match black_box(*error) {
        1 => Failure::retryable(),
        _ => Failure::permanent(),
    }
}
fn on_retry(notice: &RetryNotice<'_, u32>) {
    black_box((notice.attempt, notice.delay));
}
fn on_give_up(error: &RetryError<u32>) {
    black_box((error.attempts(), error.elapsed()));
}
fn on_step(step: &Step) {
    black_box(step.at);
}

static BUDGET: SharedBudget<Cs> = SharedBudget::new(BudgetConfig::aws_standard());
static STOP: CancelSignal<Cs> = CancelSignal::new();

fn policy() -> Result<RetryPolicy, retry_core::PolicyError> {
    let wait = if black_box(true) {
        CircuitOpen::Wait
    } else {
        CircuitOpen::GiveUp
    };
    RetryPolicy::builder()
        .max_attempts(black_box(5))
        .backoff(Backoff::exponential(Duration::from_millis(black_box(100)), 2.0))
        .max_delay(Duration::from_secs(black_box(10)))
        .jitter(Jitter::Full)
        .attempt_timeout(Duration::from_millis(black_box(50)))
        .budget(Duration::from_secs(black_box(30)))
        .use_retry_budget(black_box(true))
        .on_circuit_open(wait)
        .build()
}

#[cortex_m_rt::entry]
fn main() -> ! {
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: black_box(3),
        open_duration: Duration::from_secs(black_box(5)),
        success_threshold: 1,
    });
    if let (Ok(policy), Ok(config)) = (policy(), config) {
        if let Ok(breaker) = SharedBreaker::<Cs, 0, 0>::new(config) {
            let retry = Retry::new(policy, 1)
                .classify(classify)
                .on_retry(on_retry)
                .on_give_up(on_give_up)
                .on_step(on_step)
                .breaker(&breaker)
                .budget(&BUDGET)
                .cancel_on(&STOP);
            let mut cx = Context::from_waker(Waker::noop());
            let mut seed = 1u64;
            loop {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                match black_box(seed) & 0xff {
                    0 => STOP.cancel(),
                    1 => STOP.reset(),
                    _ => {}
                }
                let attempts = Cell::new(0u32);
                let mut call = pin!(retry.call_seeded(seed, |_: AttemptContext| {
                    attempts.set(attempts.get().wrapping_add(1));
                    Read {
                        outcome: black_box(seed as u32) ^ attempts.get(),
                    }
                }));
                loop {
                    if let Poll::Ready(result) = call.as_mut().poll(&mut cx) {
                        let _ = black_box(result.map(|s| s.value));
                        break;
                    }
                }
                black_box((breaker.state(), BUDGET.tokens()));
            }
        }
    }
    loop {
        cortex_m::asm::wfi();
    }
}

/// Links only if the optimiser removed every call to it.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    unsafe extern "Rust" {
        fn a_panic_path_is_left_in_retry_core_or_retry_embassy() -> !;
    }
    // SAFETY: never called: the symbol does not exist, so a build in which this
    // line survives does not link.
    unsafe { a_panic_path_is_left_in_retry_core_or_retry_embassy() }
}
