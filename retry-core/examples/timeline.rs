//! Prints the timelines of a few policies against scripted runs, straight from the
//! core simulator: what the `retry` program's dry run will show.

use core::time::Duration;

use retry_core::{
    Backoff, Failure, HintMode, Jitter, PolicyError, RetryPolicy, Scripted, Timeline,
};

fn main() -> Result<(), PolicyError> {
    let exponential = RetryPolicy::builder()
        .max_attempts(8)
        .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
        .max_delay(Duration::from_secs(60))
        .jitter(Jitter::Full)
        .budget(Duration::from_secs(90))
        .build()?;
    println!("Every attempt fails (full jitter, 90 s budget):");
    println!("{}", Timeline::new(&exponential, 2026, &[]));

    let sdk = RetryPolicy::builder()
        .max_retries(2)
        .backoff(Backoff::exponential(Duration::from_millis(500), 2.0))
        .max_delay(Duration::from_secs(5))
        .jitter(Jitter::Subtract(0.25))
        .hints(HintMode::OVERRIDE_DEFAULT)
        .build()?;
    let script = [
        Scripted::fail(Failure::retry_after(Duration::from_secs(3)))
            .after(Duration::from_millis(40)),
        Scripted::fail(Failure::retryable()).after(Duration::from_millis(35)),
        Scripted::succeed().after(Duration::from_millis(20)),
    ];
    println!("A server asks for 3 s, then the call succeeds on the third attempt:");
    println!("{}", Timeline::new(&sdk, 7, &script));
    Ok(())
}
