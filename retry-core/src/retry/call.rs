//! How a retried call ends, for every driver: [`Success`] with the value, or the
//! one error type [`RetryError`] (see [the rules](crate::behaviour#results)). Neither allocates.

use core::fmt;
use core::time::Duration;

use super::machine::GiveUpReason;
use super::nanos::sat_nanos;
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
    /// How long the whole call ran, from its start to the end of the
    /// successful attempt, delays included; `None` when it was not measured
    /// from the call's start. A driver reads the clock at a call's start only
    /// when something needs the time (a time budget, an attempt timeout, a
    /// retry budget, a breaker that times calls, an enabled trace, or a caller
    /// who asked for the elapsed time): a call that read none then reports
    /// `None`, even when it read the clock later (after a failure), since that
    /// time would leave out part of the call (see
    /// [the rules](crate::behaviour#results)). The adapters' docs say how to ask
    /// for it.
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
/// It displays as `<code>: gave up after <n> attempt(s) in <elapsed>` (without
/// ` in <elapsed>` when the time was not measured from the call's start: see
/// [`RetryError::elapsed`]), then the timeout or breaker wait when the reason
/// has one, then `: <last error>`, or `: attempt <k> failed: <last error>` when
/// the error came from an earlier attempt than the last:
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
///
/// // A call whose time was not measured from its start says no time:
/// let err = RetryError::new(GiveUpReason::Exhausted, 2, None, Some("busy"));
/// assert_eq!(err.elapsed(), None);
/// assert_eq!(err.to_string(), "retry.exhausted: gave up after 2 attempts: busy");
/// ```
///
/// [`core::error::Error::source`] is the last error, when `E` is an error type.
///
/// # Size
///
/// The error is built on every path that gives up and travels inside every
/// call's `Result`, so it is kept small: the reason's kind, the kind of the
/// last failure and whether the attempt of the last error was given are a
/// byte each (whether the elapsed time was measured shares the last one), and
/// the elapsed time and the reason's timeout or breaker wait
/// are whole nanoseconds in a `u64` each. A `Result<u64, RetryError<&str>>`
/// takes 48 bytes on a 64-bit target. The accessors rebuild the
/// [`GiveUpReason`] and the [`Duration`]s from these.
///
/// A `u64` of nanoseconds reaches 18,446,744,073.709551615 seconds (about 584
/// years): a longer elapsed time, timeout or breaker wait is kept as that
/// longest one, so the accessors give it back shortened to it, and two errors
/// that differ only in such durations compare equal. Every shorter duration
/// comes back exactly as it was given.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub struct RetryError<E> {
    #[source]
    last_error: Option<E>,
    /// The whole call's time in nanoseconds, saturated at `u64::MAX`, when
    /// [`MEASURED`] is marked (0 otherwise).
    elapsed: u64,
    /// The reason's duration in nanoseconds (the timeout, or the breaker's
    /// wait when it is known), saturated at `u64::MAX`; 0 when it has none.
    reason_nanos: u64,
    attempts: u32,
    /// Which attempt returned the last error, when [`LAST_ERROR_ATTEMPT`] is
    /// marked; 0 otherwise.
    last_error_attempt: u32,
    /// The last failure's number (status, exit code or signal); 0 for a kind
    /// without one.
    failure_code: i32,
    reason: Reason,
    failure: Failure,
    /// [`LAST_ERROR_ATTEMPT`] and [`MEASURED`], or neither.
    marks: u8,
}

/// [`RetryError::marks`]: the attempt that returned the last error was given.
const LAST_ERROR_ATTEMPT: u8 = 1;
/// [`RetryError::marks`]: the elapsed time was measured from the call's start.
const MEASURED: u8 = 2;

/// [`GiveUpReason`] without its duration, in a byte.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Reason {
    Exhausted,
    Permanent,
    Budget,
    TimedOut,
    Cancelled,
    RetryBudget,
    /// A breaker refused, with no known wait.
    CircuitOpen,
    /// A breaker refused and said how long until it admits again.
    CircuitOpenFor,
    NotStarted,
}

/// `Option<FailureKind>` without its number, in a byte.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Failure {
    None,
    Error,
    Timeout,
    Connection,
    NotSent,
    Status,
    Exit,
    Signal,
}

impl Reason {
    /// The byte and the nanoseconds for `reason`.
    const fn of(reason: GiveUpReason) -> (Reason, u64) {
        match reason {
            GiveUpReason::Exhausted => (Reason::Exhausted, 0),
            GiveUpReason::Permanent => (Reason::Permanent, 0),
            GiveUpReason::Budget => (Reason::Budget, 0),
            GiveUpReason::TimedOut { timeout } => (Reason::TimedOut, sat_nanos(timeout)),
            GiveUpReason::Cancelled => (Reason::Cancelled, 0),
            GiveUpReason::RetryBudget => (Reason::RetryBudget, 0),
            GiveUpReason::CircuitOpen { wait: None } => (Reason::CircuitOpen, 0),
            GiveUpReason::CircuitOpen { wait: Some(wait) } => {
                (Reason::CircuitOpenFor, sat_nanos(wait))
            }
            GiveUpReason::NotStarted => (Reason::NotStarted, 0),
        }
    }

    /// The reason back, with its duration from `nanos`.
    const fn with(self, nanos: u64) -> GiveUpReason {
        match self {
            Reason::Exhausted => GiveUpReason::Exhausted,
            Reason::Permanent => GiveUpReason::Permanent,
            Reason::Budget => GiveUpReason::Budget,
            Reason::TimedOut => GiveUpReason::TimedOut {
                timeout: Duration::from_nanos(nanos),
            },
            Reason::Cancelled => GiveUpReason::Cancelled,
            Reason::RetryBudget => GiveUpReason::RetryBudget,
            Reason::CircuitOpen => GiveUpReason::CircuitOpen { wait: None },
            Reason::CircuitOpenFor => GiveUpReason::CircuitOpen {
                wait: Some(Duration::from_nanos(nanos)),
            },
            Reason::NotStarted => GiveUpReason::NotStarted,
        }
    }
}

impl Failure {
    /// The byte and the number for `kind`.
    const fn of(kind: Option<FailureKind>) -> (Failure, i32) {
        match kind {
            None => (Failure::None, 0),
            Some(FailureKind::Error) => (Failure::Error, 0),
            Some(FailureKind::Timeout) => (Failure::Timeout, 0),
            Some(FailureKind::Connection) => (Failure::Connection, 0),
            Some(FailureKind::NotSent) => (Failure::NotSent, 0),
            Some(FailureKind::Status(status)) => (Failure::Status, status as i32),
            Some(FailureKind::Exit(code)) => (Failure::Exit, code),
            Some(FailureKind::Signal(signal)) => (Failure::Signal, signal),
        }
    }

    /// The kind back, with its number from `code`.
    const fn with(self, code: i32) -> Option<FailureKind> {
        Some(match self {
            Failure::None => return None,
            Failure::Error => FailureKind::Error,
            Failure::Timeout => FailureKind::Timeout,
            Failure::Connection => FailureKind::Connection,
            Failure::NotSent => FailureKind::NotSent,
            // Written from a `u16` by `of`: the cast gives it back unchanged.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            Failure::Status => FailureKind::Status(code as u16),
            Failure::Exit => FailureKind::Exit(code),
            Failure::Signal => FailureKind::Signal(code),
        })
    }
}

impl<E> RetryError<E> {
    /// An error for a call that gave up for `reason` after `attempts` attempts
    /// and `elapsed` time (a `Duration`, or `None` when the time was not
    /// measured from the call's start), with the operation's last error (taken
    /// to come from the last attempt unless
    /// [`with_last_error_attempt`](Self::with_last_error_attempt) says
    /// otherwise). The call driver builds these; other drivers (and tests) may
    /// too. Durations past `u64::MAX` nanoseconds are kept as that (see
    /// [the size](RetryError#size)).
    #[must_use]
    // Always inlined, even at opt-level "z": a caller that returns the error
    // from a future must see the fields stored, the last error's presence among
    // them (a `Poll` of the call's result keeps its tag there), or the
    // optimiser cannot prove that the finished future is never polled again,
    // and its "resumed after completion" panic stays (embedded/firmware's
    // panic-never probe then fails to link).
    #[inline(always)]
    pub fn new(
        reason: GiveUpReason,
        attempts: u32,
        elapsed: impl Into<Option<Duration>>,
        last_error: Option<E>,
    ) -> RetryError<E> {
        let (reason, reason_nanos) = Reason::of(reason);
        let (elapsed, marks) = match elapsed.into() {
            Some(elapsed) => (sat_nanos(elapsed), MEASURED),
            None => (0, 0),
        };
        RetryError {
            last_error,
            elapsed,
            reason_nanos,
            attempts,
            last_error_attempt: 0,
            failure_code: 0,
            reason,
            failure: Failure::None,
            marks,
        }
    }

    /// The same error, recording which attempt returned the last error (`None`:
    /// the last attempt, or unknown).
    #[must_use]
    pub fn with_last_error_attempt(mut self, attempt: Option<u32>) -> RetryError<E> {
        self.marks = match attempt {
            Some(_) => self.marks | LAST_ERROR_ATTEMPT,
            None => self.marks & !LAST_ERROR_ATTEMPT,
        };
        self.last_error_attempt = attempt.unwrap_or_default();
        self
    }

    /// The same error, recording the kind of the last failure as the machine saw
    /// it.
    #[must_use]
    pub fn with_last_failure(mut self, kind: Option<FailureKind>) -> RetryError<E> {
        (self.failure, self.failure_code) = Failure::of(kind);
        self
    }

    /// Why the call gave up.
    #[must_use]
    pub const fn reason(&self) -> GiveUpReason {
        self.reason.with(self.reason_nanos)
    }

    /// The reason's stable dotted code, e.g. `retry.exhausted`.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        self.reason().code()
    }

    /// How many attempts ran (the number of the last one).
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How long the whole call took, from its start to giving up, delays
    /// included; `None` when it was not measured from the call's start (the
    /// driver read no clock then: see [`Success::elapsed`]). Never a time that
    /// leaves out part of the call.
    #[must_use]
    pub const fn elapsed(&self) -> Option<Duration> {
        if self.marks & MEASURED == 0 {
            None
        } else {
            Some(Duration::from_nanos(self.elapsed))
        }
    }

    /// The kind of the last failure as the machine recorded it (e.g.
    /// [`FailureKind::Timeout`] for an attempt that ran past its deadline).
    #[must_use]
    pub const fn last_failure(&self) -> Option<FailureKind> {
        self.failure.with(self.failure_code)
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
        match (&self.last_error, self.marks & LAST_ERROR_ATTEMPT != 0) {
            (None, _) => None,
            (Some(_), true) => Some(self.last_error_attempt),
            (Some(_), false) => Some(self.attempts),
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
        matches!(self.reason, Reason::Cancelled)
    }

    /// Whether a circuit breaker refused the call (`retry.circuit_open`).
    #[must_use]
    pub const fn is_circuit_open(&self) -> bool {
        matches!(self.reason, Reason::CircuitOpen | Reason::CircuitOpenFor)
    }

    /// The same error with the last error mapped through `f`.
    #[must_use]
    pub fn map_err<F>(self, f: impl FnOnce(E) -> F) -> RetryError<F> {
        RetryError {
            last_error: self.last_error.map(f),
            elapsed: self.elapsed,
            reason_nanos: self.reason_nanos,
            attempts: self.attempts,
            last_error_attempt: self.last_error_attempt,
            failure_code: self.failure_code,
            reason: self.reason,
            failure: self.failure,
            marks: self.marks,
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
        write!(f, "{}: gave up after {} {noun}", self.code(), self.attempts)?;
        if let Some(elapsed) = self.elapsed() {
            write!(f, " in {elapsed:?}")?;
        }
        match self.reason() {
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
            .field("reason", &self.reason())
            .field("attempts", &self.attempts)
            .field("elapsed", &self.elapsed())
            .field("last_failure", &self.last_failure())
            .field("last_error_attempt", &self.last_error_attempt())
            .field("last_error", &self.last_error)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::format;
    use std::string::ToString;

    use super::*;

    /// The longest duration kept exactly: `u64::MAX` nanoseconds.
    const LONGEST: Duration = Duration::from_nanos(u64::MAX);

    /// Durations at and around the edges: zero, the largest fraction, the
    /// longest kept exactly, and past it.
    fn edges() -> [(Duration, Duration); 7] {
        let one_ns = Duration::from_nanos(1);
        [
            (Duration::ZERO, Duration::ZERO),
            (one_ns, one_ns),
            (Duration::new(1, 999_999_999), Duration::new(1, 999_999_999)),
            (
                Duration::from_nanos(u64::MAX - 1),
                Duration::from_nanos(u64::MAX - 1),
            ),
            (LONGEST, LONGEST),
            (LONGEST.saturating_add(one_ns), LONGEST),
            (Duration::MAX, LONGEST),
        ]
    }

    #[test]
    fn a_result_of_a_word_and_the_error_fits_six_words() {
        // 80 bytes when the error held its `GiveUpReason`, `Duration` and
        // `Option<FailureKind>` as they are.
        if cfg!(target_pointer_width = "64") {
            assert_eq!(size_of::<RetryError<&str>>(), 48);
            assert_eq!(size_of::<Result<u64, RetryError<&str>>>(), 48);
            assert_eq!(size_of::<Result<Success<u64>, RetryError<&str>>>(), 48);
            assert_eq!(size_of::<RetryError<()>>(), 32);
        }
    }

    #[test]
    fn durations_come_back_exactly_up_to_u64_max_nanoseconds_and_saturate_past_it() {
        assert_eq!(LONGEST.as_secs(), 18_446_744_073);
        for (given, kept) in edges() {
            let err = RetryError::new(GiveUpReason::TimedOut { timeout: given }, 2, given, Some(1));
            assert_eq!(err.elapsed(), Some(kept), "elapsed {given:?}");
            assert_eq!(err.reason(), GiveUpReason::TimedOut { timeout: kept });
            let err = RetryError::<()>::new(
                GiveUpReason::CircuitOpen { wait: Some(given) },
                1,
                Duration::ZERO,
                None,
            );
            assert_eq!(err.reason(), GiveUpReason::CircuitOpen { wait: Some(kept) });
        }
        // Saturated durations compare equal; shorter ones never do.
        let at = |elapsed| RetryError::new(GiveUpReason::Exhausted, 3, elapsed, Some("e"));
        assert_eq!(at(Duration::MAX), at(LONGEST));
        assert_eq!(
            at(LONGEST.saturating_add(Duration::from_secs(1))),
            at(LONGEST)
        );
        assert_ne!(at(Duration::from_nanos(u64::MAX - 1)), at(LONGEST));
        assert_ne!(at(Duration::ZERO), at(Duration::from_nanos(1)));
        assert_eq!(
            at(Duration::MAX).to_string(),
            "retry.exhausted: gave up after 3 attempts in 18446744073.709551615s: e"
        );
    }

    #[test]
    fn every_reason_and_failure_kind_comes_back_as_given() {
        let waits = [
            None,
            Some(Duration::ZERO),
            Some(Duration::from_millis(1500)),
        ];
        let mut reasons = std::vec![
            GiveUpReason::Exhausted,
            GiveUpReason::Permanent,
            GiveUpReason::Budget,
            GiveUpReason::TimedOut {
                timeout: Duration::ZERO
            },
            GiveUpReason::TimedOut {
                timeout: Duration::from_micros(250)
            },
            GiveUpReason::Cancelled,
            GiveUpReason::RetryBudget,
            GiveUpReason::NotStarted,
        ];
        reasons.extend(waits.map(|wait| GiveUpReason::CircuitOpen { wait }));
        let kinds = [
            None,
            Some(FailureKind::Error),
            Some(FailureKind::Timeout),
            Some(FailureKind::Connection),
            Some(FailureKind::NotSent),
            Some(FailureKind::Status(0)),
            Some(FailureKind::Status(503)),
            Some(FailureKind::Status(u16::MAX)),
            Some(FailureKind::Exit(-1)),
            Some(FailureKind::Exit(i32::MIN)),
            Some(FailureKind::Exit(i32::MAX)),
            Some(FailureKind::Signal(9)),
            Some(FailureKind::Signal(i32::MIN)),
        ];
        let attempts = [None, Some(0), Some(1), Some(u32::MAX)];
        let mut all = std::vec::Vec::new();
        for reason in &reasons {
            for kind in kinds {
                for attempt in attempts {
                    let err = RetryError::new(*reason, 7, Duration::from_millis(12), Some("e"))
                        .with_last_failure(kind)
                        .with_last_error_attempt(attempt);
                    assert_eq!(err.reason(), *reason);
                    assert_eq!(err.code(), reason.code());
                    assert_eq!(err.last_failure(), kind);
                    assert_eq!(err.last_error_attempt(), Some(attempt.unwrap_or(7)));
                    assert_eq!(err.attempts(), 7);
                    assert_eq!(err.is_cancelled(), *reason == GiveUpReason::Cancelled);
                    assert_eq!(
                        err.is_circuit_open(),
                        matches!(reason, GiveUpReason::CircuitOpen { .. })
                    );
                    let mapped = err.clone().map_err(str::len);
                    assert_eq!(mapped.reason(), *reason);
                    assert_eq!(mapped.last_failure(), kind);
                    assert_eq!(mapped.last_error_attempt(), err.last_error_attempt());
                    assert_eq!(mapped.last_error(), Some(&1));
                    all.push(err);
                }
            }
        }
        // Equal exactly when built from the same parts (an attempt given as
        // the last one still differs from none given, as it always has).
        for (i, a) in all.iter().enumerate() {
            for (j, b) in all.iter().enumerate() {
                assert_eq!(a == b, i == j, "{a:?} against {b:?}");
            }
        }
    }

    #[test]
    fn debug_shows_the_rebuilt_values() {
        let err = RetryError::new(
            GiveUpReason::CircuitOpen {
                wait: Some(Duration::from_millis(20)),
            },
            2,
            Duration::from_millis(350),
            Some("refused"),
        )
        .with_last_failure(Some(FailureKind::Status(503)))
        .with_last_error_attempt(Some(1));
        assert_eq!(
            format!("{err:?}"),
            "RetryError { code: \"retry.circuit_open\", reason: CircuitOpen { wait: Some(20ms) }, \
             attempts: 2, elapsed: Some(350ms), last_failure: Some(Status(503)), \
             last_error_attempt: Some(1), last_error: Some(\"refused\") }"
        );
        assert_eq!(
            err.to_string(),
            "retry.circuit_open: gave up after 2 attempts in 350ms (circuit admits in 20ms): \
             attempt 1 failed: refused"
        );
    }
}
