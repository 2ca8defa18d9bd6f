//! Classifying a finished process: exit code, death by signal or timeout, and the
//! hint a child may leave in a file.
//!
//! Signal *numbers* are the caller's platform's; the core only sets and compares
//! them. It names two, which a default classifier never retries: `SIGINT` (2 on
//! every POSIX system: someone pressed Ctrl-C) and `SIGPIPE` (13 on Linux, the
//! BSDs and macOS: the reader of the command's output went away, as when
//! `head -n1` has read its line; running the command again cannot help).

use core::fmt;
use core::time::Duration;

use super::failure::{Failure, FailureKind};
use super::sets::{ExitCodePolicy, ExitCodeSet, ExitDecision};

/// `SIGINT`'s number on POSIX systems.
pub const SIGINT: i32 = 2;

/// `SIGPIPE`'s number on Linux, the BSDs and macOS (a caller on a platform where
/// it differs builds its lists with [`ProcessClassifier::from_lists`] instead).
pub const SIGPIPE: i32 = 13;

/// The signals a default classifier never retries: [`SIGINT`] and [`SIGPIPE`].
const NEVER_BY_DEFAULT: SignalSet = SignalSet::EMPTY.with(SIGINT).with(SIGPIPE);

/// A set of signal numbers 1..=64; numbers outside are never members.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SignalSet(u64);

impl SignalSet {
    /// The empty set.
    pub const EMPTY: SignalSet = SignalSet(0);

    const fn bit(signal: i32) -> u64 {
        if signal >= 1 && signal <= 64 {
            // 1..=64 maps to bits 0..=63.
            #[allow(clippy::cast_sign_loss, clippy::arithmetic_side_effects)]
            let shift = (signal - 1) as u32;
            1u64 << shift
        } else {
            0
        }
    }

    /// The set with `signal` added (ignored outside 1..=64).
    #[must_use]
    pub const fn with(self, signal: i32) -> SignalSet {
        SignalSet(self.0 | SignalSet::bit(signal))
    }

    /// Whether `signal` is in the set.
    #[must_use]
    pub const fn contains(self, signal: i32) -> bool {
        let bit = SignalSet::bit(signal);
        bit != 0 && self.0 & bit != 0
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// One `retry-on` or `stop-on` list: exit codes, signals and whether a timeout is
/// included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OutcomeSet {
    /// Exit codes.
    pub codes: ExitCodeSet,
    /// Signals.
    pub signals: SignalSet,
    /// Whether a timed-out attempt is included.
    pub timeout: bool,
}

/// How a finished process is classified ([exit codes](crate::behaviour#classifying-failures), plus signals and
/// timeouts).
///
/// Defaults ([`ProcessClassifier::COMMAND_LINE`]): exit codes by
/// [`ExitCodePolicy::COMMAND_LINE`], every signal retried except `SIGINT` and
/// `SIGPIPE`, timeouts retried. [`ProcessClassifier::from_lists`] replaces the
/// defaults: with a retry list, only what it names retries; with only a stop list,
/// everything else retries; an outcome in both stops; `SIGINT` and `SIGPIPE` keep
/// stopping unless the retry list names them.
///
/// ```
/// use retry_core::{ExitDecision, OutcomeSet, ProcessClassifier, SIGINT, SIGPIPE};
/// let c = ProcessClassifier::COMMAND_LINE;
/// assert_eq!(c.exit(75), ExitDecision::Retry);
/// assert_eq!(c.exit(127), ExitDecision::Stop);
/// assert!(!c.retries_signal(SIGINT));
/// assert!(!c.retries_signal(SIGPIPE));
/// assert!(c.retries_signal(15));
/// assert!(c.retries_timeouts());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessClassifier {
    exits: ExitCodePolicy,
    retry_signals: SignalSet,
    stop_signals: SignalSet,
    retry_other_signals: bool,
    retry_timeouts: bool,
}

impl Default for ProcessClassifier {
    fn default() -> Self {
        ProcessClassifier::COMMAND_LINE
    }
}

impl ProcessClassifier {
    /// The command-line defaults described on the type.
    pub const COMMAND_LINE: ProcessClassifier = ProcessClassifier {
        exits: ExitCodePolicy::COMMAND_LINE,
        retry_signals: SignalSet::EMPTY,
        stop_signals: NEVER_BY_DEFAULT,
        retry_other_signals: true,
        retry_timeouts: true,
    };

    /// The classifier for the given retry and stop lists; the defaults when both
    /// are absent.
    #[must_use]
    pub const fn from_lists(
        retry_on: Option<OutcomeSet>,
        stop_on: Option<OutcomeSet>,
    ) -> ProcessClassifier {
        let others = retry_on.is_none();
        let (retry, stop) = match (retry_on, stop_on) {
            (None, None) => return ProcessClassifier::COMMAND_LINE,
            (Some(r), Some(s)) => (r, s),
            (Some(r), None) => (r, OutcomeSet::EMPTY),
            (None, Some(s)) => (OutcomeSet::EMPTY, s),
        };
        let mut stop_signals = stop.signals;
        if !retry.signals.contains(SIGINT) {
            stop_signals = stop_signals.with(SIGINT);
        }
        if !retry.signals.contains(SIGPIPE) {
            stop_signals = stop_signals.with(SIGPIPE);
        }
        ProcessClassifier {
            exits: ExitCodePolicy::new(retry.codes, stop.codes, others),
            retry_signals: retry.signals,
            stop_signals,
            retry_other_signals: others,
            retry_timeouts: !stop.timeout && (retry.timeout || others),
        }
    }

    /// What exit code `code` means.
    #[must_use]
    pub fn exit(&self, code: i32) -> ExitDecision {
        self.exits.decide(code)
    }

    /// Whether death by `signal` is retried.
    #[must_use]
    pub const fn retries_signal(&self, signal: i32) -> bool {
        if self.stop_signals.contains(signal) {
            return false;
        }
        self.retry_signals.contains(signal) || self.retry_other_signals
    }

    /// Whether a timed-out attempt is retried (feed it to the policy's
    /// `retry_timeouts`).
    #[must_use]
    pub const fn retries_timeouts(&self) -> bool {
        self.retry_timeouts
    }

    /// The exit-code part.
    #[must_use]
    pub const fn exit_codes(&self) -> ExitCodePolicy {
        self.exits
    }

    /// The failure for a process that exited with non-zero `code`, with the
    /// child's hint, if any: a hint's delay applies only when the code retries
    /// anyway; `stop` makes any failure final. `None` for exit code 0.
    #[must_use]
    pub fn exit_failure(&self, code: i32, hint: Option<ChildHint>) -> Option<Failure> {
        let base = match (self.exit(code), hint) {
            (ExitDecision::Success, _) => return None,
            (ExitDecision::Retry, Some(ChildHint::RetryAfter(d))) => Failure::retry_after(d),
            (ExitDecision::Retry, None) => Failure::retryable(),
            (ExitDecision::Retry, Some(ChildHint::Stop)) | (ExitDecision::Stop, _) => {
                Failure::permanent()
            }
        };
        Some(base.with_kind(FailureKind::Exit(code)))
    }

    /// The failure for a process ended by `signal`.
    #[must_use]
    pub const fn signal_failure(&self, signal: i32) -> Failure {
        let base = if self.retries_signal(signal) {
            Failure::retryable()
        } else {
            Failure::permanent()
        };
        base.with_kind(FailureKind::Signal(signal))
    }
}

impl OutcomeSet {
    /// Nothing listed.
    pub const EMPTY: OutcomeSet = OutcomeSet {
        codes: ExitCodeSet::empty(),
        signals: SignalSet::EMPTY,
        timeout: false,
    };
}

/// What a child asked for in its hint file: `retry-after=SECONDS` or `stop`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChildHint {
    /// Wait at least this long before the next attempt.
    RetryAfter(Duration),
    /// Do not retry.
    Stop,
}

impl ChildHint {
    /// Reads a hint file's text in the `key=value` form only (surrounding
    /// whitespace ignored): `stop` in any case; `retry-after=` followed by a
    /// finite, non-negative number of seconds. Anything else is no hint.
    /// [`ChildHint::read`] reads every form (HTTP header dumps included) and says
    /// what it could not read.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::ChildHint;
    /// assert_eq!(ChildHint::parse("retry-after=0.05\n"), Some(ChildHint::RetryAfter(Duration::from_millis(50))));
    /// assert_eq!(ChildHint::parse(" STOP "), Some(ChildHint::Stop));
    /// assert_eq!(ChildHint::parse("retry-after=-1"), None);
    /// ```
    #[must_use]
    pub fn parse(text: &str) -> Option<ChildHint> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("stop") {
            return Some(ChildHint::Stop);
        }
        let secs: f64 = text.strip_prefix("retry-after=")?.trim().parse().ok()?;
        if !secs.is_finite() || secs < 0.0 {
            return None;
        }
        Duration::try_from_secs_f64(secs)
            .ok()
            .map(ChildHint::RetryAfter)
    }
}

impl fmt::Display for ChildHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildHint::RetryAfter(d) => write!(f, "retry-after={}", d.as_secs_f64()),
            ChildHint::Stop => f.write_str("stop"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TERM: i32 = 15;
    const KILL: i32 = 9;

    fn set(codes: &[u8], signals: &[i32], timeout: bool) -> Option<OutcomeSet> {
        let mut s = OutcomeSet::EMPTY;
        for c in codes {
            s.codes.insert(*c);
        }
        for sig in signals {
            s.signals = s.signals.with(*sig);
        }
        s.timeout = timeout;
        Some(s)
    }

    #[test]
    fn lists_replace_the_defaults_and_stop_wins() {
        let c = ProcessClassifier::COMMAND_LINE;
        assert_eq!(c.exit(1), ExitDecision::Retry);
        assert_eq!(c.exit(78), ExitDecision::Stop);
        assert!(!c.retries_signal(SIGINT));
        assert!(c.retries_signal(TERM));

        let c =
            ProcessClassifier::from_lists(set(&[3, 5, 6, 7], &[TERM], true), set(&[6], &[], false));
        assert_eq!(c.exit(3), ExitDecision::Retry);
        assert_eq!(c.exit(6), ExitDecision::Stop);
        assert_eq!(c.exit(1), ExitDecision::Stop);
        assert!(c.retries_signal(TERM));
        assert!(!c.retries_signal(KILL));
        assert!(c.retries_timeouts());

        let c = ProcessClassifier::from_lists(None, set(&[1], &[], true));
        assert_eq!(c.exit(1), ExitDecision::Stop);
        assert_eq!(c.exit(78), ExitDecision::Retry);
        assert!(!c.retries_timeouts());
        assert!(!c.retries_signal(SIGINT));

        let c = ProcessClassifier::from_lists(set(&[], &[SIGINT], false), None);
        assert!(c.retries_signal(SIGINT));
        assert!(!c.retries_signal(SIGPIPE));
        assert!(!c.retries_timeouts());
    }

    #[test]
    fn a_closed_pipe_is_not_retried_unless_asked() {
        let c = ProcessClassifier::COMMAND_LINE;
        assert!(!c.retries_signal(SIGPIPE));
        assert!(!c.signal_failure(SIGPIPE).is_retryable());
        assert_eq!(
            c.signal_failure(SIGPIPE).kind(),
            FailureKind::Signal(SIGPIPE)
        );
        // A stop list alone keeps SIGPIPE stopping, as it keeps SIGINT.
        let c = ProcessClassifier::from_lists(None, set(&[1], &[], false));
        assert!(!c.retries_signal(SIGPIPE));
        assert!(c.retries_signal(TERM));
        // Named in the retry list, it retries; SIGINT still stops.
        let c = ProcessClassifier::from_lists(set(&[], &[SIGPIPE], false), None);
        assert!(c.retries_signal(SIGPIPE));
        assert!(!c.retries_signal(SIGINT));
        // A retry list that names other signals only does not bring it back.
        let c = ProcessClassifier::from_lists(set(&[], &[TERM], false), None);
        assert!(!c.retries_signal(SIGPIPE));
    }

    #[test]
    fn failures_carry_kind_and_hint() {
        let c = ProcessClassifier::COMMAND_LINE;
        assert_eq!(c.exit_failure(0, None), None);
        let f = c
            .exit_failure(75, Some(ChildHint::RetryAfter(Duration::from_secs(2))))
            .unwrap();
        assert!(f.is_retryable());
        assert_eq!(f.kind(), FailureKind::Exit(75));
        assert!(!c
            .exit_failure(75, Some(ChildHint::Stop))
            .unwrap()
            .is_retryable());
        assert!(!c.exit_failure(127, None).unwrap().is_retryable());
        assert!(!c.signal_failure(SIGINT).is_retryable());
        assert_eq!(c.signal_failure(TERM).kind(), FailureKind::Signal(TERM));
    }

    #[test]
    fn signal_sets_ignore_out_of_range() {
        let s = SignalSet::EMPTY.with(0).with(65).with(-3).with(i32::MAX);
        assert!(s.is_empty());
        let s = SignalSet::EMPTY.with(1).with(64);
        assert!(s.contains(1) && s.contains(64) && !s.contains(2));
    }

    #[test]
    fn child_hints() {
        assert_eq!(ChildHint::parse("retry-after=inf"), None);
        assert_eq!(ChildHint::parse("retry-after=NaN"), None);
        assert_eq!(ChildHint::parse(""), None);
        assert_eq!(ChildHint::parse("retry-after=1e400"), None);
        assert_eq!(
            ChildHint::parse("retry-after= 3 "),
            Some(ChildHint::RetryAfter(Duration::from_secs(3)))
        );
    }
}
