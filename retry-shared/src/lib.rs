//! What the blocking adapter (`retry-std`) and the async adapter (`retry-tokio`)
//! share, written once: state shared by many calls, and the driver that runs one
//! call around [`retry_core`]'s machines.
//!
//! Every decision is made in `retry-core`. This crate does no I/O of its own
//! beyond locking: it never sleeps, never reads a clock it was not given, and
//! never touches an async runtime. Each adapter keeps only its own I/O (the clock,
//! the sleep, the cancellation, running the attempt) and calls the [`Driver`]
//! between them.
//!
//! - [`SharedBreaker`] and [`SharedBudget`]: a circuit breaker and a retry budget
//!   shared by every call holding a clone, from blocking threads and async tasks
//!   alike. Each is a core machine behind a `std::sync::Mutex` held only for one
//!   core call: never across an `.await`, never while an operation runs or a delay
//!   is slept. Both adapters re-export them, so `retry_std::SharedBreaker` and
//!   `retry_tokio::SharedBreaker` are this one type.
//! - [`Breaker`] and [`Budget`]: what a driver asks of a breaker and a retry budget.
//!   The shared types implement them; so can a breaker or budget kept elsewhere
//!   (a fleet-wide one in a store), which then plugs into both adapters and the
//!   tower layers.
//! - [`Settings`] and [`RetryNotice`]: a retrier's policy, seed, classifier, hooks,
//!   budget and breaker, and what the retry hook is told. The adapters' `Retry`
//!   builders share their common methods through [`Settings`].
//! - [`Driver`]: one call's bookkeeping, step by step: the retry machine, the
//!   budget, the breaker's permit, the hooks, the classifier and the outcome
//!   labels, between the adapter's awaits (or blocking waits).
//!
//! # The order a driver follows
//! For every step: read the clock only when the step needs time (the call's start
//! doubles as the time of its first step); tell the retry machine the event; pass
//! the same step to the budget (which answers a withdrawal); then carry out the
//! machine's action. Before each attempt the driver checks cancellation and asks
//! the breaker; the breaker hears the attempt's outcome before the machine does.
//!
//! # Abandoned attempts
//! An attempt is *abandoned* when its driver stops waiting for it before it ends:
//! the operation panics (the blocking adapter's caller may catch that with
//! `catch_unwind`), the attempt's future is dropped (an outer timeout, a
//! `select!`, a task abort), or the call is cancelled while it runs. The breaker
//! permit is never leaked: [`retry_core::abandoned_outcome`] decides what the
//! breaker hears. An attempt abandoned after running longer than the breaker's
//! slow-call duration, or at or after its own deadline, is recorded as a failure
//! of the time it ran (a slow one past the slow-call duration), so a hung
//! dependency trips the breaker even when an outer timeout ends every call; one
//! abandoned earlier is released without recording (a half-open probe frees its
//! slot). The retry budget hears nothing about an abandoned attempt: a withdrawal
//! made for it stands, and no failure or success is noted.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod breaker;
mod budget;
mod driver;
mod notice;
mod observe;
mod saved;
mod seed;
mod settings;
mod time;

pub use breaker::{
    Alarm, AlreadyTimed, Breaker, BreakerAlarm, Gate, PermitGuard, SharedBreaker, WithAbandonedRule,
};
pub use budget::{Budget, SharedBudget};
pub use driver::{Attempt, Driver, Input, QuickFailure, QuickOpening, Ran, Sleep, Step};
pub use notice::RetryNotice;
pub use observe::{
    describe_metrics, hedge_copy_ended, hedge_gave_up, hedge_launched, CopyOutcome, METRICS,
};
pub use saved::Saved;
pub use seed::fresh_seed;
pub use settings::{Classifier, GiveUpHook, RetryHook, Settings};
pub use time::{Clock, Slept};

pub use retry_core;
