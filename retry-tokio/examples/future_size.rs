//! Prints the size of the futures `retry_tokio::Retry::call` returns for the
//! success-path benchmark's operation (and backon's, for comparison), and of the
//! results they produce: the bytes built and moved on every call.
//!
//! ```text
//! cargo run --release -p retry-tokio --example future_size
//! ```
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]
use core::hint::black_box;
use core::time::Duration;

use backon::Retryable as _;
use retry_core::{Backoff, Jitter, RetryError, RetryPolicy, Success};
use retry_tokio::{CancellationToken, Retry};

async fn op(x: u64) -> Result<u64, &'static str> {
    Ok(black_box(x) + 1)
}

fn main() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::exponential(Duration::from_millis(100), 2.0))
        .jitter(Jitter::Full)
        .build()
        .unwrap();
    let retrier: Retry<&'static str> = Retry::new(policy).seed(7);
    let token = CancellationToken::new();
    let backon_policy = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_times(2)
        .with_jitter();
    let rows = [
        ("operation's future", size_of_val(&op(1))),
        ("Retry::call", size_of_val(&retrier.call(|_| op(1)))),
        (
            "Retry::call_with",
            size_of_val(&retrier.call_with(&token, |_| op(1))),
        ),
        (
            "backon Retryable",
            size_of_val(&(|| op(1)).retry(backon_policy).sleep(tokio::time::sleep)),
        ),
        (
            "Result<Success<u64>, RetryError<&str>> (Retry::call's output)",
            size_of::<Result<Success<u64>, RetryError<&'static str>>>(),
        ),
        (
            "Result<u64, RetryError<&str>> (the bench's row, value kept)",
            size_of::<Result<u64, RetryError<&'static str>>>(),
        ),
        ("Success<u64>", size_of::<Success<u64>>()),
        (
            "Result<u64, &str> (backon Retryable's output)",
            size_of::<Result<u64, &'static str>>(),
        ),
    ];
    for (name, size) in rows {
        println!("{name}: {size} bytes");
    }
}
