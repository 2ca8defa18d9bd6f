//! What an invalid budget configuration is refused with.

use core::fmt;
use core::time::Duration;

/// An invalid budget configuration. Every variant names its field
/// ([`BudgetError::field`]) and has a stable dotted code ([`BudgetError::code`]).
///
/// ```
/// use retry_core::{BudgetConfig, BudgetError};
/// let err = BudgetConfig::grpc(0, 0.1).unwrap_err();
/// assert_eq!(err, BudgetError::MaxTokensOutOfRange { value: 0 });
/// assert_eq!(err.field(), "max_tokens");
/// assert_eq!(err.code(), "budget.max_tokens_out_of_range");
/// assert_eq!(err.to_string(), "max_tokens: must be in 1..=1000, got 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum BudgetError {
    /// gRPC's `max_tokens` was zero or above 1000.
    MaxTokensOutOfRange {
        /// The rejected value.
        value: u32,
    },
    /// gRPC's `token_ratio` was not a number in `[0.001, 1000]` (NaN, infinite,
    /// negative, zero once cut to three decimals, or too large).
    TokenRatioOutOfRange {
        /// The rejected value.
        value: f64,
    },
    /// The AWS quota's `capacity` was zero.
    ZeroCapacity,
    /// Finagle's `percent_can_retry` was not a fraction in `[0, 1]`.
    PercentOutOfRange {
        /// The rejected value (a fraction: 0.2 is 20%).
        value: f64,
    },
    /// Finagle's `window` was shorter than one second (zero included) or longer
    /// than sixty.
    WindowOutOfRange {
        /// The rejected window.
        window: Duration,
    },
}

impl BudgetError {
    /// The name of the field the error is about, as written in configs.
    #[must_use]
    pub const fn field(&self) -> &'static str {
        match self {
            BudgetError::MaxTokensOutOfRange { .. } => "max_tokens",
            BudgetError::TokenRatioOutOfRange { .. } => "token_ratio",
            BudgetError::ZeroCapacity => "capacity",
            BudgetError::PercentOutOfRange { .. } => "percent_can_retry",
            BudgetError::WindowOutOfRange { .. } => "window",
        }
    }

    /// A stable dotted code for logs and programs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            BudgetError::MaxTokensOutOfRange { .. } => "budget.max_tokens_out_of_range",
            BudgetError::TokenRatioOutOfRange { .. } => "budget.token_ratio_out_of_range",
            BudgetError::ZeroCapacity => "budget.zero_capacity",
            BudgetError::PercentOutOfRange { .. } => "budget.percent_out_of_range",
            BudgetError::WindowOutOfRange { .. } => "budget.window_out_of_range",
        }
    }
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = self.field();
        match self {
            BudgetError::MaxTokensOutOfRange { value } => {
                write!(f, "{field}: must be in 1..=1000, got {value}")
            }
            BudgetError::TokenRatioOutOfRange { value } => write!(
                f,
                "{field}: must be in [0.001, 1000] (decimals past the third are dropped), got {value}"
            ),
            BudgetError::ZeroCapacity => write!(f, "{field}: must be at least 1 token"),
            BudgetError::PercentOutOfRange { value } => write!(
                f,
                "{field}: must be a fraction in [0, 1] (0.2 means 20%), got {value}"
            ),
            BudgetError::WindowOutOfRange { window } => {
                write!(f, "{field}: must be between 1s and 60s, got {window:?}")
            }
        }
    }
}

impl core::error::Error for BudgetError {}
