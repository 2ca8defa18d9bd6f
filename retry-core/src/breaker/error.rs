//! [`BreakerError`]: an invalid breaker config, a window too big for its storage,
//! or an operator's request the breaker refuses.

use core::fmt;
use core::time::Duration;

use super::BreakerState;
use crate::{DisplayDuration as D, Instant, PolicyError};

/// Why a breaker config, a breaker or a manual transition was refused. Every
/// variant names the field it is about ([`BreakerError::field`]) and has a stable
/// dotted code ([`BreakerError::code`]).
///
/// ```
/// use retry_core::{BreakerConfig, BreakerError};
/// let err = BreakerConfig::builder().half_open_permits(0).build().unwrap_err();
/// assert_eq!(err, BreakerError::Zero { field: "half_open_permits" });
/// assert_eq!(err.code(), "breaker.zero");
/// assert_eq!(err.to_string(), "half_open_permits: must be at least 1");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum BreakerError {
    /// A count that must be positive was zero.
    Zero {
        /// The field's name.
        field: &'static str,
    },
    /// A duration that must be positive was zero (for a time window: shorter than
    /// one nanosecond per bucket).
    ZeroDuration {
        /// The field's name.
        field: &'static str,
    },
    /// A rate was zero or above 100 % (10 000 basis points).
    RateOutOfRange {
        /// The field's name.
        field: &'static str,
        /// The rejected rate, in basis points.
        basis_points: u16,
    },
    /// A rate rule was given without a window to judge it over.
    MissingWindow {
        /// The rate rule that needs the window.
        field: &'static str,
    },
    /// `minimum_calls` is above the count window's size, so no rate could ever be
    /// judged.
    MinimumAboveWindow {
        /// The minimum number of calls.
        minimum: u32,
        /// The count window's size.
        calls: u16,
    },
    /// No trip rule is set: the breaker could never open. Use
    /// [`ManualState::MetricsOnly`](crate::ManualState::MetricsOnly) for a breaker
    /// that only counts.
    NoTripRule,
    /// `max_open_duration` is below the first open duration of the curve.
    MaxBelowInitial {
        /// The cap.
        max: Duration,
        /// The curve's first value.
        initial: Duration,
    },
    /// The open-duration curve or its jitter is invalid.
    InvalidCurve {
        /// `open_backoff` or `open_jitter`.
        field: &'static str,
        /// The core's own verdict on the curve or jitter.
        source: PolicyError,
    },
    /// The config's window needs more storage than the breaker type has.
    WindowTooLarge {
        /// `window.calls` or `window.buckets`.
        field: &'static str,
        /// What the config asks for.
        requested: u32,
        /// What the type holds.
        capacity: usize,
    },
    /// A manual transition the table forbids; the breaker is unchanged.
    IllegalTransition {
        /// The breaker's state.
        from: BreakerState,
        /// The requested state.
        to: BreakerState,
    },
    /// [`HalfOpenVerdict::Rates`](crate::HalfOpenVerdict::Rates) was chosen
    /// without a failure-rate or slow-call-rate rule to judge the probes by.
    VerdictWithoutRate,
    /// An operator asked to open the breaker until an instant that is not after
    /// `now`; the breaker is unchanged.
    NotAfterNow {
        /// The field (`open_until`).
        field: &'static str,
        /// The instant asked for.
        until: Instant,
        /// The time of the request.
        now: Instant,
    },
}

impl BreakerError {
    /// The name of the field the error is about, as written in configs (`state` for
    /// an illegal transition).
    #[must_use]
    pub const fn field(&self) -> &'static str {
        match self {
            BreakerError::Zero { field }
            | BreakerError::ZeroDuration { field }
            | BreakerError::RateOutOfRange { field, .. }
            | BreakerError::MissingWindow { field }
            | BreakerError::InvalidCurve { field, .. }
            | BreakerError::WindowTooLarge { field, .. }
            | BreakerError::NotAfterNow { field, .. } => field,
            BreakerError::MinimumAboveWindow { .. } => "minimum_calls",
            BreakerError::NoTripRule => "failure_threshold",
            BreakerError::MaxBelowInitial { .. } => "max_open_duration",
            BreakerError::IllegalTransition { .. } => "state",
            BreakerError::VerdictWithoutRate => "half_open_verdict",
        }
    }

    /// A stable dotted code for logs and programs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            BreakerError::Zero { .. } => "breaker.zero",
            BreakerError::ZeroDuration { .. } => "breaker.zero_duration",
            BreakerError::RateOutOfRange { .. } => "breaker.rate_out_of_range",
            BreakerError::MissingWindow { .. } => "breaker.missing_window",
            BreakerError::MinimumAboveWindow { .. } => "breaker.minimum_above_window",
            BreakerError::NoTripRule => "breaker.no_trip_rule",
            BreakerError::MaxBelowInitial { .. } => "breaker.max_below_initial",
            BreakerError::InvalidCurve { .. } => "breaker.invalid_curve",
            BreakerError::WindowTooLarge { .. } => "breaker.window_too_large",
            BreakerError::IllegalTransition { .. } => "breaker.illegal_transition",
            BreakerError::VerdictWithoutRate => "breaker.verdict_without_rate",
            BreakerError::NotAfterNow { .. } => "breaker.not_after_now",
        }
    }
}

impl fmt::Display for BreakerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BreakerError::Zero { field } => write!(f, "{field}: must be at least 1"),
            BreakerError::ZeroDuration { field } => {
                write!(f, "{field}: must be greater than zero")
            }
            BreakerError::RateOutOfRange {
                field,
                basis_points,
            } => write!(
                f,
                "{field}: must be above 0 and at most 100%, got {basis_points} basis points"
            ),
            BreakerError::MissingWindow { field } => {
                write!(f, "{field}: a rate rule needs a window (count or time)")
            }
            BreakerError::MinimumAboveWindow { minimum, calls } => write!(
                f,
                "minimum_calls: {minimum} is above the window's {calls} calls, so no rate could be judged (set it to at most {calls})"
            ),
            BreakerError::NoTripRule => f.write_str(
                "failure_threshold: no trip rule is set (consecutive failures, failure rate or slow-call rate)",
            ),
            BreakerError::MaxBelowInitial { max, initial } => write!(
                f,
                "max_open_duration: {} is below the first open duration {}",
                D(max),
                D(initial)
            ),
            BreakerError::InvalidCurve { field, source } => write!(f, "{field}: {source}"),
            BreakerError::WindowTooLarge {
                field,
                requested,
                capacity,
            } => write!(
                f,
                "{field}: {requested} asked for, but this breaker type holds at most {capacity}"
            ),
            BreakerError::IllegalTransition { from, to } => {
                write!(f, "state: no manual transition from {from} to {to}; nothing changed")
            }
            BreakerError::VerdictWithoutRate => f.write_str(
                "half_open_verdict: judging probes by rates needs a failure_rate or slow_call_rate rule",
            ),
            BreakerError::NotAfterNow { field, until, now } => write!(
                f,
                "{field}: {until} is not after now ({now}); nothing changed"
            ),
        }
    }
}

impl core::error::Error for BreakerError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            BreakerError::InvalidCurve { source, .. } => Some(source),
            _ => None,
        }
    }
}
