#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::unwrap_used,
    clippy::expect_used
)]

mod cancel;
mod retry;
mod shared;
mod time;

pub use cancel::CancelSignal;
pub use retry::{retry, AttemptContext, Retry, RetryNotice};
pub use shared::{SharedBreaker, SharedBudget};

/// The core's types a caller of this crate meets: the policy, the outcome types
/// and the machines' configs.
pub use retry_core::{
    BreakerConfig, BudgetConfig, Failure, GiveUpReason, RetryError, RetryPolicy, Step, Success,
};
