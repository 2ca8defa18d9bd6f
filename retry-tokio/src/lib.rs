//! The async (tokio) adapter for `retry-core`.
//!
//! `retry-core` makes every decision; this crate only does the I/O: it reads
//! tokio's clock (so `tokio::time::pause` gives virtual time), sleeps with tokio
//! timers, bounds each attempt by racing it against a tokio timer set for its
//! deadline, and listens to a [`CancellationToken`]. Everything it shares with the blocking adapter
//! (`retry-std`) lives in [`retry_shared`](mod@retry_shared): the step driver around the machine,
//! the hooks, and the shared budget and breaker, whose locks are held for the
//! length of one core call and never across an `.await`.
//!
//! - [`retry`] and [`Retry`]: retry an async operation under a policy.
//! - [`SharedBudget`] and [`SharedBreaker`]: a retry budget and a circuit breaker
//!   shared by many tasks, and by blocking threads using `retry-std` in the same
//!   program (they are the same types). Their time is `std::time::Instant`; this
//!   crate converts tokio's with `into_std`, which keeps paused time consistent.
//!   [`automatic_transitions`] (off by default) runs a task that moves a
//!   breaker at its deadlines with no call: open to half-open when the open
//!   period ends, the half-open maximum wait's decision when it ends.
//! - [`Hedge`]: send extra copies of a slow idempotent call and keep the first
//!   good answer; the copies run concurrently in the calling task.
//! - [`RetryStreamExt`]: map a stream through a retried operation with bounded
//!   concurrency.
//! - `tower` feature: [`tower::RetryLayer`], [`tower::HedgeLayer`] and
//!   [`tower::BreakerLayer`]; every layer judges errors and responses alike (a
//!   client's 503 is an `Ok` response), and a request is sent twice only if
//!   its method allows it or the caller marks it (see
//!   [what is sent twice](tower#what-is-sent-twice)).
//! - `http` feature: [`http`] classifies responses in one line.
//! - `reqwest` feature: [`reqwest_call`] sends a request and judges the outcome
//!   (status, retry headers, transport errors and body errors by method) in
//!   one call.
//! - `tracing` and `metrics` features: a span per call, events per attempt, sleep
//!   and give-up, per hedged copy; the counters `retry.attempt.total` (one
//!   outcome per attempt: `success`, `failure`, `permanent`, `timeout`,
//!   `aborted` for one cancelled or abandoned, its future dropped, `rejected`
//!   for one a breaker turned away), `hedge.copy.launched.total`,
//!   `hedge.copy.total` (`won`, `failure`, `permanent`, `cancelled`,
//!   `rejected`), `circuit_breaker.state_change.total` and
//!   `circuit_breaker.call.rejected.total` (by reason), and the histograms
//!   `retry.attempt.delay_ms` (labelled by curve and by reason: `curve`, `hint`,
//!   `circuit_open`) and `circuit_breaker.call.duration_ms`, whose descriptions
//!   and units [`describe_metrics`] registers.
//!   Durations are milliseconds to the microsecond; a call cancelled between
//!   attempts counts its next attempt once as `aborted`.
//!
//! # Giving the runtime a turn
//! Every retry gives the runtime a turn, a zero delay included: a sleep that is
//! over at once (a zero delay, a delay already past) still yields
//! ([`tokio::task::yield_now`]), so a retry loop whose operation fails without
//! awaiting never keeps the thread from other tasks or from an outer timeout
//! (the timer the driver waits on is polled outside tokio's cooperative budget,
//! so that an attempt that spends the budget still sees its deadline; the
//! yield is what hands the turn back). The same holds in [`tower::RetryLayer`],
//! [`RetryStreamExt`] and [`Hedge`] (each copy after the first yields before it
//! is sent). A first attempt that succeeds does not yield.
//!
//! # Time
//! Sleeps and attempt deadlines are tokio timers, and tokio's timer counts in
//! whole milliseconds: a deadline between two ticks fires at the later one. So
//! a delay that is not a whole number of milliseconds (a policy with
//! nanosecond [`Resolution`], or a `retry-after-ms` of
//! `0.25`) ends up to 1 ms late, under paused time
//! (`tokio::time::pause`) as in real time; with the default millisecond
//! resolution every delay is whole, and under paused time a call's timeline is
//! the core simulator's to the nanosecond. An attempt that ends exactly at its
//! deadline is timed out, as the core's [`attempt_timed_out`](retry_core::attempt_timed_out)
//! rule says for every driver. A `Retry-After` HTTP date is read against the
//! wall clock to the nanosecond (the `http` and `reqwest` modules).
//!
//! A call's future may be dropped at any point (an outer timeout, a `select!`, a
//! task abort); a dropped attempt is *abandoned* and never leaks its breaker
//! permit. By default ([`AbandonedRule::FailureIfSlow`]) if it ran longer than
//! the breaker's slow-call duration, or reached its own deadline, it is
//! recorded as a failure; otherwise the permit is released without recording,
//! and a half-open probe frees its slot. [`Retry::abandoned`] chooses another
//! rule: with [`AbandonedRule::Failure`] a hung backend that only an outer
//! timeout ends trips the breaker. A timeout of the policy's own (an attempt
//! timeout) is not an abandonment but a failure the breaker records. A
//! cancellation during an attempt, and an operation that panics inside a task,
//! abandon it the same way.
//!
//! ```
//! use core::time::Duration;
//! use retry_tokio::{Backoff, Jitter, Retry, RetryPolicy};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), retry_tokio::PolicyError> {
//! let policy = RetryPolicy::builder()
//!     .max_attempts(5)
//!     .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
//!     .jitter(Jitter::None)
//!     .build()?;
//! let err = Retry::new(policy)
//!     .measure_elapsed() // the call's whole time, read from its start
//!     .call(|_ctx| async { Err::<(), _>("down") })
//!     .await
//!     .unwrap_err();
//! assert_eq!(err.code(), "retry.exhausted");
//! assert_eq!(err.attempts(), 5);
//! assert_eq!(err.elapsed(), Some(Duration::from_secs(15))); // 1 + 2 + 4 + 8, in virtual time
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod hedge;
mod retry;
mod stream;
mod timer;

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub mod reqwest_call;
#[cfg(feature = "tower")]
pub mod tower;

pub use hedge::{CopyContext, Hedge, Hedged};
pub use retry::{retry, AttemptContext, Retry};
pub use retry_shared::Saved;
pub use retry_shared::{
    describe_metrics, Breaker, Budget, PermitGuard, RetryNotice, SharedBreaker, SharedBudget,
    METRICS,
};

// What writing a call needs, so that `retry-tokio` alone in Cargo.toml is
// enough: the policy and its parts, presets, the classifier's verdict, the
// breaker's, budget's and hedge's configs, and the results and errors.
pub use retry_core::{
    AbandonedRule, Backoff, BasicRule, BreakerConfig, BreakerConfigBuilder, BreakerError,
    BreakerMetrics, BreakerState, BudgetConfig, BudgetError, Failure, FailureKind, GiveUpReason,
    HedgeMode, HedgePolicy, HedgePolicyBuilder, HedgePolicyError, HintMode, HttpClassifier,
    Idempotency, Jitter, ManualState, Method, PolicyError, Preset, Rate, Resolution, RetryError,
    RetryPolicy, RetryPolicyBuilder, SnapshotError, Success, Transition, Window,
};
pub use stream::RetryStreamExt;
pub use timer::{automatic_transitions, TimerError};

pub use retry_core;
pub use retry_shared;
pub use tokio_util::sync::CancellationToken;

// The workspace README's Rust blocks, compiled and run as this crate's
// doctests: they use retry-tokio (with `reqwest` and `tower`), retry-std,
// reqwest, axum and tokio, all dependencies or dev-dependencies here.
#[cfg(all(doctest, feature = "reqwest", feature = "tower"))]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
