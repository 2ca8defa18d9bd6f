//! The blocking adapter for [`retry_core`]: runs an operation on the current
//! thread, retrying it as a [`retry_core::RetryMachine`] decides, with
//! `std::time` and thread sleeps.
//!
//! The machine makes every decision (whether to retry, how long to wait, when to
//! stop); this crate only does the I/O around it: it calls the operation, reads
//! the clock, sleeps and watches a [`CancelToken`]. Everything it shares with the
//! async adapter (`retry-tokio`) lives in [`retry_shared`](mod@retry_shared): the step driver
//! around the machine, the hooks, and the [`SharedBreaker`] and [`SharedBudget`]
//! that many threads (and tokio tasks, in the same program) can share.
//!
//! - [`retry`] runs an operation under a policy with the defaults;
//!   [`Retry`] configures the seed, the classifier, hooks, cancellation, the clock,
//!   the sleeper, a shared retry budget and a shared circuit breaker.
//! - A call returns [`Success`] (the value, attempts, elapsed time) or one
//!   [`RetryError`] carrying the reason (with its stable dotted code), the
//!   attempts, the elapsed time and the operation's last error.
//! - [`ManualClock`] and [`FakeSleeper`] run any schedule in no wall time, for
//!   tests.
//! - [`automatic_transitions`] (off by default) hands a [`SharedBreaker`] to
//!   one timer thread shared by every breaker that asks, which moves it at its
//!   deadlines with no call: open to half-open when the open period ends, the
//!   half-open maximum wait's decision when it ends.
//!
//! The `retry` command-line program lives in a crate of its own, `retry-cli`
//! (`cargo install --path retry-cli`): a library user of this crate compiles
//! none of its dependencies.
//!
//! Blocking code cannot be interrupted: a per-attempt deadline
//! ([`AttemptContext::deadline`]) is advisory, for the operation to pass on to
//! its own timeouts. An error returned at or after the deadline counts as a
//! timed-out attempt (the core's rule for every driver,
//! [`retry_core::attempt_timed_out`]); a success is accepted whenever it
//! arrives, since the work it did cannot be undone by a retry.
//!
//! An operation that panics abandons its attempt: the panic unwinds out of
//! [`Retry::call`], and the breaker's permit goes back on the way (recorded as a
//! failure if the attempt ran past the breaker's slow-call duration or its
//! deadline, released otherwise), so a panic during a half-open probe never
//! wedges the breaker.
//!
//! ```
//! use core::time::Duration;
//! use retry_core::{Backoff, Failure, Jitter, RetryPolicy};
//! use retry_std::Retry;
//!
//! #[derive(Debug, thiserror::Error)]
//! enum FetchError {
//!     #[error("service unavailable")]
//!     Unavailable,
//!     #[error("not found")]
//!     NotFound,
//! }
//!
//! let policy = RetryPolicy::builder()
//!     .max_attempts(4)
//!     .backoff(Backoff::exponential(Duration::from_millis(1), 2.0))
//!     .jitter(Jitter::Full)
//!     .build()?;
//!
//! let done = Retry::new(policy)
//!     .classify(|e: &FetchError| match e {
//!         FetchError::Unavailable => Failure::retryable(),
//!         FetchError::NotFound => Failure::permanent(),
//!     })
//!     .on_retry(|n| eprintln!("attempt {} failed: {:?}; next in {:?}", n.attempt, n.error, n.delay))
//!     .call(|ctx| {
//!         if ctx.attempt() < 3 { Err(FetchError::Unavailable) } else { Ok("payload") }
//!     })?;
//! assert_eq!(done.value, "payload");
//! assert_eq!(done.attempts, 3);
//!
//! let err = Retry::new(policy)
//!     .classify(|_: &FetchError| Failure::permanent())
//!     .call(|_| Err::<(), _>(FetchError::NotFound))
//!     .unwrap_err();
//! assert_eq!(err.code(), "retry.permanent");
//! assert_eq!(err.attempts(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod cancel;
mod clock;
mod retry;
mod timer;

pub use cancel::{CancelToken, Waited};
pub use clock::{Clock, FakeSleeper, ManualClock, Sleeper, Slept, SystemClock, ThreadSleeper};
pub use retry::{retry, AttemptContext, Retry};
pub use retry_core;
pub use retry_shared;
pub use retry_shared::Saved;
pub use retry_shared::{
    describe_metrics, Breaker, Budget, PermitGuard, RetryNotice, SharedBreaker, SharedBudget,
    METRICS,
};
pub use timer::{automatic_transitions, timed_breakers, TimerError};

// What writing a call needs, so that `retry-std` alone in Cargo.toml is
// enough: the policy and its parts, presets, the classifier's verdict, the
// breaker's and budget's configs, and the results and errors.
pub use retry_core::{
    Backoff, BasicRule, BreakerConfig, BreakerConfigBuilder, BreakerError, BreakerMetrics,
    BreakerState, BudgetConfig, BudgetError, Failure, FailureKind, GiveUpReason, HintMode,
    HttpClassifier, Idempotency, Jitter, ManualState, PolicyError, Preset, Rate, Resolution,
    RetryError, RetryPolicy, RetryPolicyBuilder, SnapshotError, Success, Transition, Window,
};
