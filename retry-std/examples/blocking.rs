//! A flaky operation retried on the current thread, with hooks reporting each
//! retry and the final outcome on stderr.
//!
//! Run with `cargo run -p retry-std --example blocking`.

use core::time::Duration;
use std::process::ExitCode;

use retry_core::{Backoff, Failure, FailureKind, Jitter, RetryPolicy};
use retry_std::Retry;

/// What the pretend service can answer.
#[derive(Debug, thiserror::Error)]
enum ServiceError {
    /// Try again later (HTTP 503).
    #[error("service unavailable")]
    Unavailable,
    /// Slow down, and come back after this long (HTTP 429 with Retry-After).
    #[error("too many requests (retry after {0:?})")]
    TooManyRequests(Duration),
}

fn main() -> ExitCode {
    let policy = match RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::exponential(Duration::from_millis(50), 2.0))
        .max_delay(Duration::from_secs(1))
        .jitter(Jitter::Equal)
        .build()
    {
        Ok(policy) => policy,
        Err(err) => {
            eprintln!("bad policy: {err}");
            return ExitCode::FAILURE;
        }
    };

    // Fails with 503, then 429 asking for 120 ms, then answers.
    let flaky = |attempt: u32| match attempt {
        1 => Err(ServiceError::Unavailable),
        2 => Err(ServiceError::TooManyRequests(Duration::from_millis(120))),
        _ => Ok(format!("payload from attempt {attempt}")),
    };

    let outcome = Retry::new(policy)
        .classify(|e: &ServiceError| match e {
            ServiceError::Unavailable => Failure::retryable().with_kind(FailureKind::Status(503)),
            ServiceError::TooManyRequests(after) => {
                Failure::retry_after(*after).with_kind(FailureKind::Status(429))
            }
        })
        .on_retry(|n| {
            let why = n
                .reason
                .map_or_else(|| "at once".to_owned(), |r| r.to_string());
            eprintln!(
                "attempt {} failed: {} ({}); attempt {} in {:?} ({why})",
                n.attempt,
                n.error
                    .map_or_else(|| "timed out".to_owned(), ToString::to_string),
                n.failure,
                n.next_attempt,
                n.delay
            );
        })
        .on_give_up(|err| eprintln!("giving up: {err}"))
        .call(|ctx| {
            eprintln!(
                "attempt {} (retries so far: {})",
                ctx.attempt(),
                ctx.retries()
            );
            flaky(ctx.attempt())
        });

    match outcome {
        Ok(done) => {
            eprintln!(
                "{} after {} attempts in {:?}",
                done.value, done.attempts, done.elapsed
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("{} ({})", err, err.code());
            ExitCode::FAILURE
        }
    }
}
