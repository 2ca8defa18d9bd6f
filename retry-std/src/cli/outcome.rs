//! How a finished attempt is classified: exit codes through the core's
//! [`ExitCodePolicy`], plus the signals and timeouts that only a process runner
//! sees, turned into a core [`Failure`].
//!
//! Defaults: [`ExitCodePolicy::COMMAND_LINE`] for codes, every signal retried except
//! `SIGINT` (someone pressed Ctrl-C), timeouts retried. `--retry-on` and `--stop-on`
//! replace those defaults: with `--retry-on`, only what it lists is retried; with
//! only `--stop-on`, everything but what it lists is retried. A code, signal or
//! `timeout` in both lists stops. `SIGINT` keeps stopping unless `--retry-on` names it.

use core::time::Duration;

use retry_core::{ExitCodePolicy, ExitCodeSet, ExitDecision, Failure, FailureKind};

/// The known signal names, without the `SIG` prefix.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", libc::SIGHUP),
    ("INT", libc::SIGINT),
    ("QUIT", libc::SIGQUIT),
    ("ILL", libc::SIGILL),
    ("TRAP", libc::SIGTRAP),
    ("ABRT", libc::SIGABRT),
    ("BUS", libc::SIGBUS),
    ("FPE", libc::SIGFPE),
    ("KILL", libc::SIGKILL),
    ("USR1", libc::SIGUSR1),
    ("SEGV", libc::SIGSEGV),
    ("USR2", libc::SIGUSR2),
    ("PIPE", libc::SIGPIPE),
    ("ALRM", libc::SIGALRM),
    ("TERM", libc::SIGTERM),
    ("CHLD", libc::SIGCHLD),
    ("CONT", libc::SIGCONT),
    ("STOP", libc::SIGSTOP),
    ("TSTP", libc::SIGTSTP),
    ("TTIN", libc::SIGTTIN),
    ("TTOU", libc::SIGTTOU),
    ("URG", libc::SIGURG),
    ("XCPU", libc::SIGXCPU),
    ("XFSZ", libc::SIGXFSZ),
    ("VTALRM", libc::SIGVTALRM),
    ("PROF", libc::SIGPROF),
    ("WINCH", libc::SIGWINCH),
    ("SYS", libc::SIGSYS),
];

/// A signal's number from its name (`SIGTERM`, `TERM`, any case).
#[must_use]
pub fn signal_number(name: &str) -> Option<i32> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(n, _)| *n == bare).map(|(_, s)| *s)
}

/// A signal's name (`SIGTERM`), or `SIG<n>` for one without a name here.
#[must_use]
pub fn signal_name(signal: i32) -> String {
    match SIGNALS.iter().find(|(_, s)| *s == signal) {
        Some((n, _)) => format!("SIG{n}"),
        None => format!("SIG{signal}"),
    }
}

/// A set of signal numbers 1..=64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignalSet(u64);

impl SignalSet {
    fn bit(signal: i32) -> Option<u64> {
        let n = u32::try_from(signal).ok()?.checked_sub(1)?;
        1u64.checked_shl(n)
    }
    /// The set with `signal` added.
    #[must_use]
    pub fn with(self, signal: i32) -> SignalSet {
        SignalSet(self.0 | SignalSet::bit(signal).unwrap_or(0))
    }
    /// Whether `signal` is in the set.
    #[must_use]
    pub fn contains(self, signal: i32) -> bool {
        SignalSet::bit(signal).is_some_and(|b| self.0 & b != 0)
    }
}

/// One parsed `--retry-on` / `--stop-on` list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutcomeList {
    /// Exit codes and ranges.
    pub codes: ExitCodeSet,
    /// Signals.
    pub signals: SignalSet,
    /// Whether `timeout` was listed.
    pub timeout: bool,
}

impl OutcomeList {
    /// Reads `1,2,5-9,SIGTERM,timeout`: codes and ranges go through the core's
    /// [`ExitCodeSet::parse`], names are signals, `timeout` is a timed-out attempt.
    ///
    /// # Errors
    /// A message naming the bad item.
    pub fn parse(list: &str) -> Result<OutcomeList, String> {
        let mut out = OutcomeList::default();
        let mut numeric = Vec::new();
        for item in list.split(',') {
            let word = item.trim();
            if word.is_empty() {
                return Err(format!("`{list}` has an empty item"));
            }
            if word.eq_ignore_ascii_case("timeout") {
                out.timeout = true;
            } else if word.starts_with(|c: char| c.is_ascii_alphabetic()) {
                let signal = signal_number(word)
                    .ok_or_else(|| format!("`{word}` is not a signal name, exit code or `timeout`"))?;
                out.signals = out.signals.with(signal);
            } else {
                numeric.push(word);
            }
        }
        let joined = numeric.join(",");
        out.codes = ExitCodeSet::parse(&joined).map_err(|e| e.to_string())?;
        Ok(out)
    }
}

/// Classifies finished attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classifier {
    /// Exit codes: the core's policy.
    pub exits: ExitCodePolicy,
    /// Signals always retried (unless in `stop_signals`).
    pub retry_signals: SignalSet,
    /// Signals never retried.
    pub stop_signals: SignalSet,
    /// Whether other signals are retried.
    pub retry_other_signals: bool,
    /// Whether a timed-out attempt is retried (given to the policy as
    /// `retry_timeouts`).
    pub retry_timeouts: bool,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier {
            exits: ExitCodePolicy::COMMAND_LINE,
            retry_signals: SignalSet::default(),
            stop_signals: SignalSet::default().with(libc::SIGINT),
            retry_other_signals: true,
            retry_timeouts: true,
        }
    }
}

impl Classifier {
    /// The classifier for the given `--retry-on` / `--stop-on` lists (defaults when
    /// both are absent).
    #[must_use]
    pub fn from_lists(retry_on: Option<OutcomeList>, stop_on: Option<OutcomeList>) -> Classifier {
        if retry_on.is_none() && stop_on.is_none() {
            return Classifier::default();
        }
        let others = retry_on.is_none();
        let retry = retry_on.unwrap_or_default();
        let stop = stop_on.unwrap_or_default();
        let mut stop_signals = stop.signals;
        if !retry.signals.contains(libc::SIGINT) {
            stop_signals = stop_signals.with(libc::SIGINT);
        }
        Classifier {
            exits: ExitCodePolicy::new(retry.codes, stop.codes, others),
            retry_signals: retry.signals,
            stop_signals,
            retry_other_signals: others,
            retry_timeouts: !stop.timeout && (retry.timeout || others),
        }
    }

    /// What exit code `code` means (the core decides).
    #[must_use]
    pub fn exit(&self, code: i32) -> ExitDecision {
        self.exits.decide(code)
    }

    /// Whether death by `signal` is retried.
    #[must_use]
    pub fn retries_signal(&self, signal: i32) -> bool {
        if self.stop_signals.contains(signal) {
            return false;
        }
        self.retry_signals.contains(signal) || self.retry_other_signals
    }

    /// The core failure for a process that exited with `code` (non-zero), with the
    /// child's hint, if any.
    #[must_use]
    pub fn exit_failure(&self, code: i32, hint: Option<ChildHint>) -> Failure {
        let base = match self.exit(code) {
            ExitDecision::Retry => match hint {
                Some(ChildHint::RetryAfter(d)) => Failure::retry_after(d),
                Some(ChildHint::Stop) => Failure::permanent(),
                None => Failure::retryable(),
            },
            ExitDecision::Stop | ExitDecision::Success => Failure::permanent(),
        };
        base.with_kind(FailureKind::Exit(code))
    }

    /// The core failure for a process ended by `signal`.
    #[must_use]
    pub fn signal_failure(&self, signal: i32) -> Failure {
        let base = if self.retries_signal(signal) {
            Failure::retryable()
        } else {
            Failure::permanent()
        };
        base.with_kind(FailureKind::Signal(signal))
    }
}

/// What a child wrote to its hint file (`RETRY_HINT_FILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildHint {
    /// `retry-after=SECONDS`: wait at least this long.
    RetryAfter(Duration),
    /// `stop`: do not retry.
    Stop,
}

impl ChildHint {
    /// Reads a hint file's text; anything unreadable is no hint.
    #[must_use]
    pub fn parse(text: &str) -> Option<ChildHint> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("stop") {
            return Some(ChildHint::Stop);
        }
        let value = text.strip_prefix("retry-after=")?.trim();
        let secs: f64 = value.parse().ok()?;
        if !secs.is_finite() || secs < 0.0 {
            return None;
        }
        Duration::try_from_secs_f64(secs).ok().map(ChildHint::RetryAfter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_replace_the_defaults_and_stop_wins() {
        let c = Classifier::default();
        assert_eq!(c.exit(1), ExitDecision::Retry);
        assert_eq!(c.exit(78), ExitDecision::Stop);
        assert!(!c.retries_signal(libc::SIGINT));
        assert!(c.retries_signal(libc::SIGTERM));

        let list = |t: &str| OutcomeList::parse(t).ok();
        let c = Classifier::from_lists(list("3,5-7,TERM,timeout"), list("6"));
        assert_eq!(c.exit(3), ExitDecision::Retry);
        assert_eq!(c.exit(6), ExitDecision::Stop);
        assert_eq!(c.exit(1), ExitDecision::Stop);
        assert!(c.retries_signal(libc::SIGTERM));
        assert!(!c.retries_signal(libc::SIGKILL));
        assert!(c.retry_timeouts);

        let c = Classifier::from_lists(None, list("1,timeout"));
        assert_eq!(c.exit(1), ExitDecision::Stop);
        assert_eq!(c.exit(78), ExitDecision::Retry);
        assert!(!c.retry_timeouts);
        assert!(!c.retries_signal(libc::SIGINT));
    }

    #[test]
    fn bad_lists_are_errors() {
        for bad in ["", "1,,2", "SIGNOPE", "300", "5-1", "x1"] {
            assert!(OutcomeList::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hints() {
        assert_eq!(
            ChildHint::parse("retry-after=0.05\n"),
            Some(ChildHint::RetryAfter(Duration::from_millis(50)))
        );
        assert_eq!(ChildHint::parse(" stop "), Some(ChildHint::Stop));
        assert_eq!(ChildHint::parse("retry-after=-1"), None);
        assert_eq!(ChildHint::parse("retry-after=inf"), None);
        assert_eq!(ChildHint::parse(""), None);
    }
}
