//! How a finished attempt is classified: exit codes, signals and timeouts, turned
//! into a core `Failure` by the core's [`ProcessClassifier`].
//!
//! The decisions are the core's [`ProcessClassifier`]; this module only knows the
//! platform's signal names. Defaults: `ExitCodePolicy::COMMAND_LINE` for codes,
//! every signal retried except `SIGINT` (someone pressed Ctrl-C) and `SIGPIPE`
//! (the command's reader went away), timeouts retried. `--retry-on` and
//! `--stop-on` replace those defaults: with `--retry-on`, only what it lists is
//! retried; with only `--stop-on`, everything but what it lists is retried. A
//! code, signal or `timeout` in both lists stops. `SIGINT` and `SIGPIPE` keep
//! stopping unless `--retry-on` names them.

use retry_core::{ExitCodeSet, OutcomeSet, ProcessClassifier};

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

/// One parsed `--retry-on` / `--stop-on` list (the core's [`OutcomeSet`]).
pub type OutcomeList = OutcomeSet;

/// Reads `1,2,5-9,SIGTERM,timeout`: codes and ranges go through the core's
/// [`ExitCodeSet::parse`], names are signals, `timeout` is a timed-out attempt.
///
/// # Errors
/// A message naming the bad item.
pub fn parse_list(list: &str) -> Result<OutcomeSet, String> {
    let mut out = OutcomeSet::EMPTY;
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

/// How finished attempts are classified: the core decides.
pub type Classifier = ProcessClassifier;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_name_signals_codes_and_timeouts() {
        let l = parse_list("3,5-7,TERM,sigkill,timeout").unwrap();
        assert!(l.codes.contains(3) && l.codes.contains(6) && !l.codes.contains(4));
        assert!(l.signals.contains(libc::SIGTERM) && l.signals.contains(libc::SIGKILL));
        assert!(l.timeout);
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(99), "SIG99");
    }

    #[test]
    fn the_cores_signal_numbers_are_this_platforms() {
        assert_eq!(retry_core::SIGINT, libc::SIGINT);
        assert_eq!(retry_core::SIGPIPE, libc::SIGPIPE);
    }

    #[test]
    fn bad_lists_are_errors() {
        for bad in ["", "1,,2", "SIGNOPE", "300", "5-1", "x1"] {
            assert!(parse_list(bad).is_err(), "{bad}");
        }
    }
}
