//! What a failed attempt was: retryable or not, what kind, and any delay the
//! server asked for.

use core::fmt;
use core::time::Duration;

use crate::hint::Hint;

/// What kind of failure an attempt ended in; reported back in
/// [`GiveUp::last_failure`](crate::GiveUp::last_failure).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[non_exhaustive]
pub enum FailureKind {
    /// The operation returned an error.
    #[default]
    Error,
    /// The attempt ran past its deadline.
    Timeout,
    /// A connection failed after the request may have been sent.
    Connection,
    /// Nothing was sent (e.g. no connection could be had): always safe to retry.
    NotSent,
    /// An HTTP response with this status.
    Status(u16),
    /// A process exited with this code.
    Exit(i32),
    /// A process was ended by this signal.
    Signal(i32),
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureKind::Error => f.write_str("error"),
            FailureKind::Timeout => f.write_str("timeout"),
            FailureKind::Connection => f.write_str("connection"),
            FailureKind::NotSent => f.write_str("not-sent"),
            FailureKind::Status(s) => write!(f, "status {s}"),
            FailureKind::Exit(c) => write!(f, "exit {c}"),
            FailureKind::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// A failed attempt, as the caller's classifier describes it (see [the rules](crate::behaviour#classifying-failures)).
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Failure, FailureKind, Hint};
/// let f = Failure::retryable()
///     .with_kind(FailureKind::Status(429))
///     .with_hint(Hint::RetryAfter(Duration::from_secs(3)));
/// assert!(f.is_retryable());
/// assert_eq!(f.hint(), Some(Hint::RetryAfter(Duration::from_secs(3))));
/// assert!(!Failure::permanent().is_retryable());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Failure {
    retryable: bool,
    kind: FailureKind,
    hint: Option<Hint>,
}

impl Failure {
    /// A failure that a retry may fix, of kind [`FailureKind::Error`].
    #[must_use]
    pub const fn retryable() -> Failure {
        Failure {
            retryable: true,
            kind: FailureKind::Error,
            hint: None,
        }
    }

    /// A failure no retry will fix: the call ends at once.
    #[must_use]
    pub const fn permanent() -> Failure {
        Failure {
            retryable: false,
            kind: FailureKind::Error,
            hint: None,
        }
    }

    /// A retryable failure whose server asked for `delay` (Retry-After).
    #[must_use]
    pub const fn retry_after(delay: Duration) -> Failure {
        Failure::retryable().with_hint(Hint::RetryAfter(delay))
    }

    /// The same failure with another kind.
    #[must_use]
    pub const fn with_kind(mut self, kind: FailureKind) -> Failure {
        self.kind = kind;
        self
    }

    /// The same failure with a server hint.
    #[must_use]
    pub const fn with_hint(mut self, hint: Hint) -> Failure {
        self.hint = Some(hint);
        self
    }

    /// Whether a retry may fix it.
    #[must_use]
    pub const fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// Its kind.
    #[must_use]
    pub const fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The server's hint, if any.
    #[must_use]
    pub const fn hint(&self) -> Option<Hint> {
        self.hint
    }
}

impl Default for Failure {
    fn default() -> Self {
        Failure::retryable()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::time::DisplayDuration as D;
        f.write_str(if self.retryable { "" } else { "permanent " })?;
        fmt::Display::fmt(&self.kind, f)?;
        match self.hint {
            Some(Hint::RetryAfter(d)) => write!(f, ", retry-after {}", D(d)),
            Some(Hint::Pushback(d)) => write!(f, ", pushback {}", D(d)),
            None => Ok(()),
        }
    }
}
