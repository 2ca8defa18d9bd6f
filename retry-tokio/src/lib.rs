//! The async (tokio) adapter for `retry-core`.
//!
//! `retry-core` makes every decision; this crate only does the I/O: it reads
//! tokio's clock (so `tokio::time::pause` gives virtual time), sleeps with tokio
//! timers, bounds attempts with `tokio::time::timeout_at` and listens to a
//! [`CancellationToken`]. Everything it shares with the blocking adapter
//! (`retry-std`) lives in [`retry_shared`]: the step driver around the machine,
//! the hooks, and the shared budget and breaker, whose locks are held for the
//! length of one core call and never across an `.await`.
//!
//! - [`retry`] and [`Retry`]: retry an async operation under a policy.
//! - [`SharedBudget`] and [`SharedBreaker`]: a retry budget and a circuit breaker
//!   shared by many tasks, and by blocking threads using `retry-std` in the same
//!   program (they are the same types). Their time is `std::time::Instant`; this
//!   crate converts tokio's with `into_std`, which keeps paused time consistent.
//! - [`RetryStreamExt`]: map a stream through a retried operation with bounded
//!   concurrency.
//! - `tower` feature: [`tower::RetryLayer`] and [`tower::BreakerLayer`].
//! - `http` feature: [`http`] classifies responses in one line.
//! - `tracing` and `metrics` features: a span per call, events per attempt, sleep
//!   and give-up; the counters `retry.attempt.total` and
//!   `circuit_breaker.state_change.total`, and the histograms
//!   `retry.attempt.delay_ms` and `circuit_breaker.call.duration_ms`.
//!
//! A call's future may be dropped at any point (an outer timeout, a `select!`, a
//! task abort); a dropped attempt is *abandoned* and never leaks its breaker
//! permit. If it ran longer than the breaker's slow-call duration, or reached its
//! own deadline, it is recorded as a failure (so a hung backend behind an outer
//! timeout still trips the breaker); otherwise the permit is released without
//! recording, and a half-open probe frees its slot. A cancellation during an
//! attempt, and an operation that panics inside a task, abandon it the same way.
//!
//! ```
//! use core::time::Duration;
//! use retry_core::{Backoff, Jitter, RetryPolicy};
//! use retry_tokio::Retry;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), retry_core::PolicyError> {
//! let policy = RetryPolicy::builder()
//!     .max_attempts(5)
//!     .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
//!     .jitter(Jitter::None)
//!     .build()?;
//! let err = Retry::new(policy)
//!     .call(|_ctx| async { Err::<(), _>("down") })
//!     .await
//!     .unwrap_err();
//! assert_eq!(err.code(), "retry.exhausted");
//! assert_eq!(err.attempts(), 5);
//! assert_eq!(err.elapsed(), Duration::from_secs(15)); // 1 + 2 + 4 + 8, in virtual time
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod retry;
mod stream;

#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "tower")]
pub mod tower;

pub use retry::{retry, AttemptContext, Retry};
pub use retry_core::{RetryError, Success};
pub use retry_shared::{Breaker, Budget, RetryNotice, SharedBreaker, SharedBudget};
pub use stream::RetryStreamExt;

pub use retry_core;
pub use retry_shared;
pub use tokio_util::sync::CancellationToken;
