//! [`RetryError`], the one error a retried call ends with, and [`Success`], what a
//! successful one returns.

use core::fmt;
use core::time::Duration;

use retry_core::{FailureKind, GiveUpReason};

/// A call that succeeded: the value, how many attempts it took and how long the
/// whole call ran (SPEC 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Success<T> {
    /// What the successful attempt returned.
    pub value: T,
    /// How many attempts ran, the successful one included.
    pub attempts: u32,
    /// From the start of the call to the end of the successful attempt.
    pub elapsed: Duration,
}

impl<T> Success<T> {
    /// Drops the counts and keeps the value.
    pub fn into_value(self) -> T {
        self.value
    }
}

/// Why a retried call failed for good (SPEC 8).
///
/// It holds the core's [`GiveUpReason`] (whose [`code`](RetryError::code) is a
/// stable dotted string such as `retry.exhausted`, `retry.cancelled`,
/// `retry.timeout` or `retry.circuit_open`), the number of attempts that ran, the
/// time the call took and the operation's last error, if an attempt returned one.
///
/// ```
/// use core::time::Duration;
/// use retry_core::GiveUpReason;
/// use retry_tokio::RetryError;
///
/// let err = RetryError::new(GiveUpReason::Exhausted, 3, Duration::from_secs(3), Some("refused"));
/// assert_eq!(err.code(), "retry.exhausted");
/// assert_eq!(err.to_string(), "retry.exhausted: gave up after 3 attempts in 3s: refused");
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub struct RetryError<E> {
    reason: GiveUpReason,
    attempts: u32,
    elapsed: Duration,
    last_failure: Option<FailureKind>,
    #[source]
    last_error: Option<E>,
}

impl<E> RetryError<E> {
    /// An error for a call that stopped for `reason` after `attempts` attempts and
    /// `elapsed` time, keeping the operation's last error.
    #[must_use]
    pub fn new(
        reason: GiveUpReason,
        attempts: u32,
        elapsed: Duration,
        last_error: Option<E>,
    ) -> RetryError<E> {
        RetryError {
            reason,
            attempts,
            elapsed,
            last_failure: None,
            last_error,
        }
    }

    /// The same error, noting the kind of the last failure the machine saw.
    #[must_use]
    pub fn with_last_failure(mut self, kind: Option<FailureKind>) -> RetryError<E> {
        self.last_failure = kind;
        self
    }

    /// Why the call stopped.
    #[must_use]
    pub const fn reason(&self) -> GiveUpReason {
        self.reason
    }

    /// The stable dotted code of the reason, e.g. `retry.exhausted`.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        self.reason.code()
    }

    /// How many attempts ran (the number of the last one).
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// From the start of the call to the moment it gave up, sleeps included.
    #[must_use]
    pub const fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The kind of the last failure as the machine recorded it, e.g.
    /// [`FailureKind::Timeout`] for an attempt that passed its deadline.
    #[must_use]
    pub const fn last_failure(&self) -> Option<FailureKind> {
        self.last_failure
    }

    /// The last error the operation returned, if any.
    #[must_use]
    pub const fn last_error(&self) -> Option<&E> {
        self.last_error.as_ref()
    }

    /// Takes out the last error the operation returned.
    #[must_use]
    pub fn into_last_error(self) -> Option<E> {
        self.last_error
    }

    /// Whether the call was cancelled (`retry.cancelled`).
    #[must_use]
    pub const fn is_cancelled(&self) -> bool {
        matches!(self.reason, GiveUpReason::Cancelled)
    }

    /// Whether a circuit breaker refused the call (`retry.circuit_open`).
    #[must_use]
    pub const fn is_circuit_open(&self) -> bool {
        matches!(self.reason, GiveUpReason::CircuitOpen { .. })
    }

    /// The same error with the last error passed through `f`.
    #[must_use]
    pub fn map_err<F>(self, f: impl FnOnce(E) -> F) -> RetryError<F> {
        RetryError {
            reason: self.reason,
            attempts: self.attempts,
            elapsed: self.elapsed,
            last_failure: self.last_failure,
            last_error: self.last_error.map(f),
        }
    }
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.attempts == 1 { "" } else { "s" };
        write!(
            f,
            "{}: gave up after {} attempt{plural} in {:?}",
            self.code(),
            self.attempts,
            self.elapsed
        )?;
        match self.reason {
            GiveUpReason::TimedOut { timeout } => write!(f, " (timeout {timeout:?})")?,
            GiveUpReason::CircuitOpen { wait: Some(wait) } => {
                write!(f, " (breaker admits in {wait:?})")?;
            }
            _ => {}
        }
        if let Some(error) = &self.last_error {
            write!(f, ": {error}")?;
        }
        Ok(())
    }
}

impl<E: fmt::Debug> fmt::Debug for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryError")
            .field("code", &self.code())
            .field("reason", &self.reason)
            .field("attempts", &self.attempts)
            .field("elapsed", &self.elapsed)
            .field("last_failure", &self.last_failure)
            .field("last_error", &self.last_error)
            .finish()
    }
}
