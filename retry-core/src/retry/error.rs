//! Typed errors for invalid configuration.

use core::time::Duration;

/// An invalid retry policy value. Every variant names the field it is about
/// ([`PolicyError::field`]) and has a stable dotted code ([`PolicyError::code`]).
///
/// ```
/// use retry_core::{PolicyError, RetryPolicy};
/// let err = RetryPolicy::builder().max_attempts(0).build().unwrap_err();
/// assert_eq!(err, PolicyError::ZeroAttempts);
/// assert_eq!(err.field(), "max_attempts");
/// assert_eq!(err.to_string(), "max_attempts: must be at least 1 (use 1 to disable retrying)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// `max_attempts` was zero (or `max_retries` overflowed).
    #[error("max_attempts: must be at least 1 (use 1 to disable retrying)")]
    ZeroAttempts,
    /// Both `max_attempts` and `max_retries` were given.
    #[error("max_attempts, max_retries: give one or the other, not both")]
    BothAttemptCounts,
    /// The exponential factor was NaN, infinite or below 1.
    #[error("factor: must be a finite number >= 1, got {value}")]
    InvalidFactor {
        /// The rejected factor.
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
    /// `min_delay` was above `max_delay`.
    #[error("min_delay: {min:?} is above max_delay {max:?}")]
    MinAboveMax {
        /// The floor.
        min: Duration,
        /// The cap.
        max: Duration,
    },
    /// `max_delay` was below the curve's first delay (a constant curve's
    /// delay, the initial delay of the others): every delay would be flattened
    /// to the cap, the curve never showing.
    #[error("max_delay: {max:?} is below the curve's initial delay {initial:?}")]
    MaxBelowInitial {
        /// The cap.
        max: Duration,
        /// The curve's first delay.
        initial: Duration,
    },
    /// The hint clamp's floor was above its ceiling.
    #[error("retry_after_min: {min:?} is above retry_after_max {max:?}")]
    HintMinAboveMax {
        /// The floor.
        min: Duration,
        /// The ceiling.
        max: Duration,
    },
    /// A duration that must be positive was zero.
    #[error("{field}: must be greater than zero")]
    ZeroDuration {
        /// The field's name.
        field: &'static str,
    },
}

impl PolicyError {
    /// The name of the field the error is about, as written in configs.
    #[must_use]
    pub const fn field(&self) -> &'static str {
        match self {
            PolicyError::ZeroAttempts => "max_attempts",
            PolicyError::BothAttemptCounts => "max_retries",
            PolicyError::InvalidFactor { .. } => "factor",
            PolicyError::InvalidJitterFraction { .. } => "jitter",
            PolicyError::MinAboveMax { .. } => "min_delay",
            PolicyError::MaxBelowInitial { .. } => "max_delay",
            PolicyError::HintMinAboveMax { .. } => "retry_after_min",
            PolicyError::ZeroDuration { field } => field,
        }
    }

    /// A stable dotted code for logs and programs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            PolicyError::ZeroAttempts => "policy.zero_attempts",
            PolicyError::BothAttemptCounts => "policy.both_attempt_counts",
            PolicyError::InvalidFactor { .. } => "policy.invalid_factor",
            PolicyError::InvalidJitterFraction { .. } => "policy.invalid_jitter_fraction",
            PolicyError::MinAboveMax { .. } => "policy.min_above_max",
            PolicyError::MaxBelowInitial { .. } => "policy.max_below_initial",
            PolicyError::HintMinAboveMax { .. } => "policy.hint_min_above_max",
            PolicyError::ZeroDuration { .. } => "policy.zero_duration",
        }
    }
}
