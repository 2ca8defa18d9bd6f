//! The size of the future `Retry::call` returns: every call builds it, so its
//! bytes are written on the success path too. `cargo test -p retry-tokio --test
//! all footprint:: -- --nocapture` prints the figures (`examples/future_size.rs`
//! prints them for a release build, next to backon's).
#![allow(clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{Backoff, Jitter, RetryError, RetryPolicy, Success};
use retry_tokio::{CancellationToken, Retry};

async fn op(x: u64) -> Result<u64, &'static str> {
    Ok(x + 1)
}

#[test]
fn the_call_future_stays_small() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::exponential(Duration::from_millis(100), 2.0))
        .jitter(Jitter::Full)
        .build()
        .unwrap();
    let retrier: Retry<&'static str> = Retry::new(policy).seed(7);
    let token = CancellationToken::new();
    let operation = size_of_val(&op(1));
    let call = size_of_val(&retrier.call(|_| op(1)));
    let call_with = size_of_val(&retrier.call_with(&token, |_| op(1)));
    println!("operation's future: {operation} bytes");
    println!("Retry::call: {call} bytes");
    println!("Retry::call_with: {call_with} bytes");
    // 1,344 bytes before the driver borrowed its policy and the slow path got a
    // future of its own (without tracing and metrics). With either feature
    // the call also holds its span and the attempt label waiting for its
    // outcome.
    let bound = if cfg!(any(feature = "tracing", feature = "metrics")) {
        896
    } else {
        768
    };
    assert!(call <= bound + operation, "{call} bytes");
    assert!(call_with <= bound + operation, "{call_with} bytes");
}

/// The call's result: every call writes it and its caller moves it. Once
/// 80 bytes for a `u64` value and a `&str` error (the error held its
/// `GiveUpReason` and `Duration`s as they are); now the error keeps its
/// durations as nanoseconds and its kinds as bytes.
#[test]
fn the_call_result_stays_small() {
    let output = size_of::<Result<Success<u64>, RetryError<&'static str>>>();
    let value = size_of::<Result<u64, RetryError<&'static str>>>();
    let success = size_of::<Success<u64>>();
    println!("Result<Success<u64>, RetryError<&str>>: {output} bytes");
    println!("Result<u64, RetryError<&str>>: {value} bytes");
    println!("Success<u64>: {success} bytes");
    if cfg!(target_pointer_width = "64") {
        assert!(output <= 48, "{output} bytes");
        assert!(value <= 48, "{value} bytes");
        assert!(success <= 32, "{success} bytes");
    }
}
