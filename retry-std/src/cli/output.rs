//! What `retry` says on stderr: one human line per event, or JSON Lines with
//! `"schema": 1`. Nothing here writes to stdout.

use core::time::Duration;
use std::io::Write;

use retry_core::{Action, GiveUp, SleepReason};
use serde_json::{json, Value};

use super::args::{Format, Verbosity};
use super::duration::humane;
use super::outcome::signal_name;
use super::process::Ending;

/// Milliseconds as an integer, for JSON.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Writes events on stderr.
#[derive(Clone, Copy, Debug)]
pub struct Reporter {
    /// Text or JSON.
    pub format: Format,
    /// How much to say in text.
    pub verbosity: Verbosity,
    /// For "attempt 2/5".
    pub max_attempts: u32,
    /// For "(3.1s of 60s used)".
    pub budget: Option<Duration>,
}

/// How an attempt ended, in words.
#[must_use]
pub fn describe(ending: Ending) -> String {
    match ending {
        Ending::Exited(code) => format!("exited {code}"),
        Ending::Signalled(signal) => format!("died of {}", signal_name(signal)),
        Ending::TimedOut => "timed out".to_owned(),
        Ending::Interrupted(signal) => format!("was stopped by {}", signal_name(signal)),
        Ending::NotStarted(126) => "could not be executed".to_owned(),
        Ending::NotStarted(_) => "was not found".to_owned(),
    }
}

fn reason_name(reason: SleepReason) -> &'static str {
    match reason {
        SleepReason::Curve => "curve",
        SleepReason::Hint => "hint",
        SleepReason::CircuitOpen => "circuit_open",
    }
}

impl Reporter {
    fn line(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "retry: {text}");
    }

    fn event(&self, mut value: Value) {
        if let Some(map) = value.as_object_mut() {
            map.insert("schema".to_owned(), json!(1));
        }
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{value}");
    }

    fn used(&self, elapsed: Duration) -> String {
        match self.budget {
            Some(budget) => format!("{} of {} used", humane(elapsed), humane(budget)),
            None => format!("{} elapsed", humane(elapsed)),
        }
    }

    /// An attempt starts.
    pub fn attempt_start(&self, number: u32, deadline_in: Option<Duration>) {
        match self.format {
            Format::Json => self.event(json!({
                "event": "attempt_start",
                "attempt": number,
                "max_attempts": self.max_attempts,
                "deadline_ms": deadline_in.map(millis),
            })),
            Format::Text if self.verbosity >= Verbosity::Verbose => {
                let limit = deadline_in
                    .map(|d| format!(" (deadline in {})", humane(d)))
                    .unwrap_or_default();
                self.line(&format!(
                    "attempt {number}/{} starting{limit}",
                    self.max_attempts
                ));
            }
            Format::Text => {}
        }
    }

    /// An attempt ended with `ending` after `took`; the machine answered `next`.
    pub fn attempt_end(
        &self,
        number: u32,
        ending: Ending,
        took: Duration,
        next: &Action,
        elapsed: Duration,
    ) {
        let success = ending == Ending::Exited(0);
        match self.format {
            Format::Json => {
                let (code, signal) = match ending {
                    Ending::Exited(c) | Ending::NotStarted(c) => (Some(c), None),
                    Ending::Signalled(s) | Ending::Interrupted(s) => (None, Some(s)),
                    Ending::TimedOut => (None, None),
                };
                self.event(json!({
                    "event": "attempt_end",
                    "attempt": number,
                    "code": code,
                    "signal": signal.map(signal_name),
                    "duration_ms": millis(took),
                    "timed_out": ending == Ending::TimedOut,
                    "success": success,
                }));
                if let Action::Sleep { delay, reason, .. } = *next {
                    self.event(json!({
                        "event": "sleep",
                        "next_attempt": number.saturating_add(1),
                        "delay_ms": millis(delay),
                        "reason": reason_name(reason),
                        "elapsed_ms": millis(elapsed),
                    }));
                }
            }
            Format::Text => {
                if success {
                    if self.verbosity >= Verbosity::Verbose {
                        self.line(&format!(
                            "attempt {number}/{} succeeded after {}",
                            self.max_attempts,
                            humane(took)
                        ));
                    }
                    return;
                }
                if self.verbosity == Verbosity::Quiet {
                    return;
                }
                let then = match *next {
                    Action::GiveUp(_) => {
                        self.line(&format!(
                            "attempt {number}/{} {} after {} ({})",
                            self.max_attempts,
                            describe(ending),
                            humane(took),
                            self.used(elapsed)
                        ));
                        return;
                    }
                    Action::Sleep { delay, reason, .. } => {
                        let why = match reason {
                            SleepReason::Hint => " as the command asked",
                            _ => "",
                        };
                        format!("next in {}{why}", humane(delay))
                    }
                    Action::Attempt { .. } => "retrying now".to_owned(),
                    Action::Done { .. } | Action::Withdraw { .. } => String::new(),
                };
                self.line(&format!(
                    "attempt {number}/{} {} after {}; {then} ({})",
                    self.max_attempts,
                    describe(ending),
                    humane(took),
                    self.used(elapsed)
                ));
            }
        }
    }

    /// The call failed for good; `retry` exits with `exit_code`.
    pub fn give_up(&self, give_up: &GiveUp, exit_code: i32, elapsed: Duration) {
        match self.format {
            Format::Json => self.event(json!({
                "event": "give_up",
                "reason": give_up.reason.code().trim_start_matches("retry."),
                "code": exit_code,
                "attempts": give_up.attempts,
                "elapsed_ms": millis(elapsed),
            })),
            Format::Text if self.verbosity > Verbosity::Quiet => self.line(&format!(
                "giving up after {} attempt(s): {}; exit status {exit_code}",
                give_up.attempts, give_up.reason
            )),
            Format::Text => {}
        }
    }

    /// The command succeeded.
    pub fn done(&self, attempts: u32, elapsed: Duration) {
        match self.format {
            Format::Json => self.event(json!({
                "event": "done",
                "attempts": attempts,
                "elapsed_ms": millis(elapsed),
            })),
            Format::Text if self.verbosity >= Verbosity::Verbose || attempts > 1 => {
                if self.verbosity > Verbosity::Quiet {
                    self.line(&format!(
                        "succeeded on attempt {attempts}/{} ({})",
                        self.max_attempts,
                        self.used(elapsed)
                    ));
                }
            }
            Format::Text => {}
        }
    }

    /// The `--on-retry` hook failed or could not run: always said (not an event).
    pub fn hook_failed(&self, what: &str) {
        match self.format {
            Format::Json => self.event(json!({ "event": "hook_failed", "detail": what })),
            Format::Text => self.line(&format!("--on-retry hook {what}")),
        }
    }

    /// An error of `retry` itself or of starting the command.
    pub fn error(&self, text: &str) {
        match self.format {
            Format::Json => self.event(json!({ "event": "error", "message": text })),
            Format::Text => self.line(text),
        }
    }
}
