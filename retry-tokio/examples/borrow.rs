//! Retrying an operation that borrows state owned outside the closure.
//!
//! `Retry::call_borrowing` takes an async closure whose future borrows the
//! closure's captures, so a `&mut` counter and a `&mut Vec` living on the caller's
//! stack are updated inside every attempt, across awaits, with no `Arc`, no
//! `Mutex` and no clone. `Retry::call` works too when the update happens in the
//! closure itself, before its future starts.

use core::time::Duration;

use retry_core::{Backoff, Jitter, RetryPolicy};
use retry_tokio::Retry;

/// A connection that fails twice before it answers.
struct Flaky {
    failures_left: u32,
}

impl Flaky {
    async fn fetch(&mut self, key: &str) -> Result<String, String> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if self.failures_left > 0 {
            self.failures_left -= 1;
            return Err(format!("{key}: connection reset"));
        }
        Ok(format!("value of {key}"))
    }
}

/// Runs the example and returns what it saw, so a test can check it.
pub(crate) async fn run() -> (String, u32, Vec<String>) {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::constant(Duration::from_millis(10)))
        .jitter(Jitter::None)
        .build()
        .unwrap_or_default();
    let retry = Retry::new(policy);

    // State owned here, borrowed mutably by every attempt.
    let mut connection = Flaky { failures_left: 2 };
    let mut log: Vec<String> = Vec::new();

    let fetched = retry
        .call_borrowing(async |ctx| {
            let result = connection.fetch("answer").await;
            log.push(format!("attempt {}: {result:?}", ctx.attempt()));
            result
        })
        .await;

    // The plain form: the closure updates `&mut` state when it is called.
    let mut calls = 0u32;
    let counted = retry
        .call(|_ctx| {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err("not yet".to_owned())
                } else {
                    Ok(n)
                }
            }
        })
        .await;

    let value = fetched.map(|s| s.value).unwrap_or_else(|e| e.to_string());
    let attempts = counted.map(|s| s.value).unwrap_or(0);
    (value, attempts, log)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (value, calls, log) = run().await;
    for line in &log {
        println!("{line}");
    }
    println!("fetched: {value}");
    println!("the counting closure ran {calls} times");
}
