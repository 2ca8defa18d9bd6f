//! [`HedgePolicyError`]: why a hedge policy was refused.

use core::time::Duration;

use super::copies::MAX_COPIES;

/// An invalid hedge policy value. Every variant names the field it is about
/// ([`HedgePolicyError::field`]) and has a stable dotted code
/// ([`HedgePolicyError::code`]).
///
/// ```
/// use retry_core::{HedgePolicy, HedgePolicyError};
/// let err = HedgePolicy::builder().max_attempts(40).build().unwrap_err();
/// assert_eq!(err, HedgePolicyError::TooManyAttempts { got: 40 });
/// assert_eq!(err.field(), "max_attempts");
/// assert_eq!(err.code(), "hedge.too_many_attempts");
/// assert_eq!(err.to_string(), "max_attempts: at most 16 copies, got 40");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HedgePolicyError {
    /// `max_attempts` was zero.
    #[error("max_attempts: must be at least 1 (the first copy)")]
    ZeroAttempts,
    /// `max_attempts` was above [`MAX_COPIES`](crate::MAX_COPIES).
    #[error("max_attempts: at most {MAX_COPIES} copies, got {got}")]
    TooManyAttempts {
        /// The rejected count.
        got: u32,
    },
    /// `max_in_flight` was zero.
    #[error("max_in_flight: must be at least 1")]
    ZeroInFlight,
    /// The adaptive delay's percentile was NaN or outside `(0, 100]`.
    #[error("percentile: must lie in (0, 100], got {value}")]
    InvalidPercentile {
        /// The rejected percentile.
        value: f64,
    },
    /// A jitter fraction was NaN or outside `[0, 1]`.
    #[error("jitter: {kind} jitter needs a fraction in [0, 1], got {value}")]
    InvalidJitterFraction {
        /// The jitter kind's name.
        kind: &'static str,
        /// The rejected fraction.
        value: f64,
    },
    /// Decorrelated jitter draws from the previous delay of a backoff curve;
    /// a hedge delay has no curve.
    #[error("jitter: decorrelated jitter needs a backoff curve; a hedge delay has none")]
    DecorrelatedJitter,
    /// The call's timeout was zero.
    #[error("timeout: must be greater than zero, got {value:?}")]
    ZeroTimeout {
        /// The rejected timeout.
        value: Duration,
    },
}

impl HedgePolicyError {
    /// The name of the field the error is about.
    #[must_use]
    pub const fn field(&self) -> &'static str {
        match self {
            HedgePolicyError::ZeroAttempts | HedgePolicyError::TooManyAttempts { .. } => {
                "max_attempts"
            }
            HedgePolicyError::ZeroInFlight => "max_in_flight",
            HedgePolicyError::InvalidPercentile { .. } => "percentile",
            HedgePolicyError::InvalidJitterFraction { .. }
            | HedgePolicyError::DecorrelatedJitter => "jitter",
            HedgePolicyError::ZeroTimeout { .. } => "timeout",
        }
    }

    /// A stable dotted code for logs and programs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            HedgePolicyError::ZeroAttempts => "hedge.zero_attempts",
            HedgePolicyError::TooManyAttempts { .. } => "hedge.too_many_attempts",
            HedgePolicyError::ZeroInFlight => "hedge.zero_in_flight",
            HedgePolicyError::InvalidPercentile { .. } => "hedge.invalid_percentile",
            HedgePolicyError::InvalidJitterFraction { .. } => "hedge.invalid_jitter_fraction",
            HedgePolicyError::DecorrelatedJitter => "hedge.decorrelated_jitter",
            HedgePolicyError::ZeroTimeout { .. } => "hedge.zero_timeout",
        }
    }
}
