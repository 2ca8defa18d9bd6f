//! How a retried call ends, for every driver: [`Success`] with the value, or the
//! one error type [`RetryError`] (see [the rules](crate::behaviour#results)). Neither allocates.

use core::fmt;
use core::time::Duration;

use super::machine::GiveUpReason;
use crate::classify::FailureKind;

/// A call that succeeded: the value, how many attempts it took and, when the
/// driver measured it, how long the whole call ran, delays included (see
/// [the rules](crate::behaviour#results)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Success<T> {
    /// What the successful attempt returned.
    pub value: T,
    /// How many attempts ran, the successful one included.
    pub attempts: u32,
    /// How long the call ran, to the end of the successful attempt; `None` when
    /// the call read no clock. A driver reads none when nothing needed time: the
    /// first attempt succeeded, and neither the policy (no time budget, no
    /// attempt timeout) nor anything around it (a retry budget, a breaker that
    /// times calls, a caller who asked for the elapsed time) needed a clock.
    /// When the driver read no clock before the first attempt, the time is
    /// counted from its first reading (the first attempt's first wait, for an
    /// async one, or its failure): it leaves out what that attempt ran before.
    /// The adapters' docs say when each happens and how to ask for the whole
    /// time.
    pub elapsed: Option<Duration>,
}

impl<T> Success<T> {
    /// Drops the counts and keeps the value.
    pub fn into_value(self) -> T {
        self.value
    }
}

/// Why a retried call failed, with what it had got to (see [the rules](crate::behaviour#results)).
///
/// It carries the core's [`GiveUpReason`] (each with a stable dotted code:
/// `retry.exhausted`, `retry.permanent`, `retry.budget`, `retry.timeout`,
/// `retry.cancelled`, `retry.retry_budget`, `retry.circuit_open`), how many
/// attempts ran, how long the whole call took, and the last error the operation
/// returned, if any (a call cancelled before its first attempt has none).
///
/// The last error need not come from the last attempt: when attempt 1 returns an
/// error and attempts 2 and 3 time out, the error is attempt 1's.
/// [`last_error_attempt`](RetryError::last_error_attempt) says which attempt
/// returned it, so a timeout is never paired with an older error unawares.
///
/// It displays as `<code>: gave up after <n> attempt(s) in <elapsed>`, then the
/// timeout or breaker wait when the reason has one, then `: <last error>`, or
/// `: attempt <k> failed: <last error>` when the error came from an earlier
/// attempt than the last:
///
/// ```
/// use core::time::Duration;
/// use retry_core::GiveUpReason;
/// use retry_core::RetryError;
///
/// let err = RetryError::new(GiveUpReason::Exhausted, 5, Duration::from_millis(3200), Some("connection refused"));
/// assert_eq!(err.code(), "retry.exhausted");
/// assert_eq!(err.to_string(), "retry.exhausted: gave up after 5 attempts in 3.2s: connection refused");
///
/// // Attempt 1 failed with an error, attempts 2 and 3 timed out:
/// let timeout = Duration::from_secs(1);
/// let err = RetryError::new(GiveUpReason::TimedOut { timeout }, 3, Duration::from_secs(4), Some("refused"))
///     .with_last_error_attempt(Some(1));
/// assert_eq!(err.last_error_attempt(), Some(1));
/// assert_eq!(
///     err.to_string(),
///     "retry.timeout: gave up after 3 attempts in 4s (timeout 1s): attempt 1 failed: refused"
/// );
/// ```
///
/// [`core::error::Error::source`] is the last error, when `E` is an error type.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub struct RetryError<E> {
    reason: GiveUpReason,
    attempts: u32,
    elapsed: Duration,
    last_failure: Option<FailureKind>,
    last_error_attempt: Option<u32>,
    #[source]
    last_error: Option<E>,
}

impl<E> RetryError<E> {
    /// An error for a call that gave up for `reason` after `attempts` attempts
    /// and `elapsed` time, with the operation's last error (taken to come from
    /// the last attempt unless [`with_last_error_attempt`](Self::with_last_error_attempt)
    /// says otherwise). The call driver builds these; other drivers (and tests)
    /// may too.
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
            last_error_attempt: None,
            last_error,
        }
    }

    /// The same error, recording which attempt returned the last error (`None`:
    /// the last attempt, or unknown).
    #[must_use]
    pub fn with_last_error_attempt(mut self, attempt: Option<u32>) -> RetryError<E> {
        self.last_error_attempt = attempt;
        self
    }

    /// The same error, recording the kind of the last failure as the machine saw
    /// it.
    #[must_use]
    pub fn with_last_failure(mut self, kind: Option<FailureKind>) -> RetryError<E> {
        self.last_failure = kind;
        self
    }

    /// Why the call gave up.
    #[must_use]
    pub const fn reason(&self) -> GiveUpReason {
        self.reason
    }

    /// The reason's stable dotted code, e.g. `retry.exhausted`.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        self.reason.code()
    }

    /// How many attempts ran (the number of the last one).
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How long the call took, to giving up, delays included: from the call's
    /// start, or, when the driver read no clock before the first attempt
    /// (nothing needed time then: see [`Success::elapsed`]), from its first
    /// reading (the first attempt's first wait, for an async one, or its end),
    /// leaving out what that attempt ran before.
    #[must_use]
    pub const fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The kind of the last failure as the machine recorded it (e.g.
    /// [`FailureKind::Timeout`] for an attempt that ran past its deadline).
    #[must_use]
    pub const fn last_failure(&self) -> Option<FailureKind> {
        self.last_failure
    }

    /// The last error the operation returned, if an attempt failed.
    #[must_use]
    pub const fn last_error(&self) -> Option<&E> {
        self.last_error.as_ref()
    }

    /// Which attempt returned [`last_error`](Self::last_error): `None` when there
    /// is no last error. It may be older than the last attempt (which then
    /// timed out, or was cancelled or refused without returning an error).
    #[must_use]
    pub const fn last_error_attempt(&self) -> Option<u32> {
        match (&self.last_error, self.last_error_attempt) {
            (None, _) => None,
            (Some(_), Some(attempt)) => Some(attempt),
            (Some(_), None) => Some(self.attempts),
        }
    }

    /// Takes the last error out.
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

    /// The same error with the last error mapped through `f`.
    #[must_use]
    pub fn map_err<F>(self, f: impl FnOnce(E) -> F) -> RetryError<F> {
        RetryError {
            reason: self.reason,
            attempts: self.attempts,
            elapsed: self.elapsed,
            last_failure: self.last_failure,
            last_error_attempt: self.last_error_attempt,
            last_error: self.last_error.map(f),
        }
    }
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let noun = if self.attempts == 1 {
            "attempt"
        } else {
            "attempts"
        };
        write!(
            f,
            "{}: gave up after {} {noun} in {:?}",
            self.code(),
            self.attempts,
            self.elapsed
        )?;
        match self.reason {
            GiveUpReason::TimedOut { timeout } => write!(f, " (timeout {timeout:?})")?,
            GiveUpReason::CircuitOpen { wait: Some(wait) } => {
                write!(f, " (circuit admits in {wait:?})")?;
            }
            _ => {}
        }
        match (&self.last_error, self.last_error_attempt()) {
            (Some(error), Some(attempt)) if attempt != self.attempts => {
                write!(f, ": attempt {attempt} failed: {error}")
            }
            (Some(error), _) => write!(f, ": {error}"),
            (None, _) => Ok(()),
        }
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
            .field("last_error_attempt", &self.last_error_attempt())
            .field("last_error", &self.last_error)
            .finish()
    }
}
