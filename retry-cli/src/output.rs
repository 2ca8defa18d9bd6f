//! What `retry` reports: human lines on stderr, and JSON Lines events on a
//! channel of their own (`--events FILE|fd:N`, or stderr with `--json`).
//! Nothing here writes to stdout.
//!
//! Every event is one JSON object on one line, written with a single `write(2)`
//! so that it never interleaves with the command's own output, even on a shared
//! stderr. Each carries `"schema": 2`, `"event"`, `"time"` (RFC 3339 UTC wall
//! time, milliseconds) and `"elapsed_ms"` (monotonic, since the run began).
//! Schema 2: the `start` event's `seed` is a string of decimal digits (a
//! number above 2^53 would be rounded by jq and JavaScript; `--seed` takes the
//! string back, quotes included), and a jittered curve `sleep` carries the
//! interval it was drawn from.

use core::time::Duration;
use std::fs::File;
use std::io::Write;
use std::time::{Instant as WallInstant, SystemTime, UNIX_EPOCH};

use retry_core::{Action, GiveUp, Goal, HintProblem, SleepReason};
use serde_json::{json, Value};

use super::args::{Events, Verbosity};
use super::duration::humane;
use super::outcome::signal_name;
use super::process::Ending;

/// The version of the events' schema: 2 since the seed became a string.
pub(crate) const EVENT_SCHEMA: u32 = 2;

/// Milliseconds as an integer, for JSON.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Where events go.
#[derive(Debug)]
enum Sink {
    Stderr,
    File(File),
}

/// Writes human lines and events.
#[derive(Debug)]
pub struct Reporter {
    /// How much to say in human lines (`None`: stderr carries the events).
    verbosity: Option<Verbosity>,
    sink: Option<Sink>,
    /// For "attempt 2/5" (`None`: unlimited).
    max_attempts: Option<u32>,
    /// For "(3.1s of 60s used)".
    budget: Option<Duration>,
    goal: Goal,
    start: WallInstant,
}

/// The run's time at a report, both measured from the run's start: wall time,
/// and the time that counts against `--max-time` (wall time less the time the
/// job spent stopped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spent {
    /// Since the run started.
    pub elapsed: Duration,
    /// Of that, what counts against the budget.
    pub counted: Duration,
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

/// `unix_ms` as RFC 3339 UTC with milliseconds: `2024-05-01T12:34:56.789Z`.
#[must_use]
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let ms = unix_ms % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rest / 3600,
        (rest % 3600) / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (the classic
/// era-based conversion: 400-year eras of 146 097 days).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(millis)
        .unwrap_or(0)
}

impl Reporter {
    /// A reporter for a run that started at `started` (every `elapsed_ms` is
    /// measured from there). `events` opens its sink: the returned error names
    /// the destination that could not be opened. Call before `retry` opens any
    /// descriptor of its own (`--events fd:N` takes the caller's `N`).
    ///
    /// # Errors
    /// A message when the events destination cannot be opened.
    pub fn new(
        started: WallInstant,
        verbosity: Verbosity,
        events: Option<&Events>,
        max_attempts: Option<u32>,
        budget: Option<Duration>,
        goal: Goal,
    ) -> Result<Reporter, String> {
        let sink = match events {
            None => None,
            Some(Events::Stderr) => Some(Sink::Stderr),
            Some(Events::File(path)) => Some(Sink::File(
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(path)
                    .map_err(|e| format!("--events {}: {e}", path.display()))?,
            )),
            Some(Events::Fd(fd)) => Some(Sink::File(File::from(
                super::sys::take_inherited(*fd).map_err(|e| format!("--events fd:{fd}: {e}"))?,
            ))),
        };
        // Events on stderr replace the human lines there.
        let verbosity = match sink {
            Some(Sink::Stderr) => None,
            _ => Some(verbosity),
        };
        Ok(Reporter {
            verbosity,
            sink,
            max_attempts,
            budget,
            goal,
            start: started,
        })
    }

    fn says(&self, level: Verbosity) -> bool {
        self.verbosity.is_some_and(|v| v >= level)
    }

    fn line(&self, text: &str) {
        let line = format!("retry: {text}\n");
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    /// Writes event `name` with the fields `fields` builds (only called when
    /// events are wanted: a run without `--events` or `--json` builds none).
    fn event(&self, name: &str, fields: impl FnOnce() -> Value) {
        let Some(sink) = &self.sink else {
            return;
        };
        let mut record = serde_json::Map::new();
        record.insert("schema".to_owned(), json!(EVENT_SCHEMA));
        record.insert("event".to_owned(), json!(name));
        record.insert("time".to_owned(), json!(rfc3339(unix_ms_now())));
        record.insert("elapsed_ms".to_owned(), json!(millis(self.start.elapsed())));
        if let Value::Object(map) = fields() {
            record.extend(map);
        }
        let mut line = Value::Object(record).to_string();
        line.push('\n');
        // One write: a line never interleaves with another writer's.
        let _ = match sink {
            Sink::Stderr => std::io::stderr().lock().write_all(line.as_bytes()),
            Sink::File(file) => (&*file).write_all(line.as_bytes()),
        };
    }

    fn of(&self, number: u32) -> String {
        match self.max_attempts {
            Some(max) => format!("{number}/{max}"),
            None => number.to_string(),
        }
    }

    /// The run's time so far: since it started, and, with a budget, how much
    /// of it counts (stopped time does not).
    fn used(&self, spent: Spent) -> String {
        match self.budget {
            Some(budget) if spent.counted == spent.elapsed => {
                format!("{} of {} used", humane(spent.counted), humane(budget))
            }
            Some(budget) => format!(
                "{} of {} used, {} elapsed",
                humane(spent.counted),
                humane(budget),
                humane(spent.elapsed)
            ),
            None => format!("{} elapsed", humane(spent.elapsed)),
        }
    }

    /// The run begins.
    /// `policy` describes the policy; it is called only when events are written.
    pub fn start(
        &self,
        command: &[std::ffi::OsString],
        policy: impl FnOnce() -> String,
        seed: u64,
    ) {
        self.event("start", || {
            let argv: Vec<String> = command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            json!({
                "command": argv,
                "policy": policy(),
                "max_attempts": self.max_attempts,
                "goal": self.goal.to_string(),
                "seed": seed.to_string(),
                "pid": super::sys::own_pid().as_raw_nonzero(),
            })
        });
    }

    /// An attempt starts.
    pub fn attempt_start(&self, number: u32, deadline_in: Option<Duration>) {
        self.event("attempt_start", || {
            json!({
                "attempt": number,
                "max_attempts": self.max_attempts,
                "deadline_ms": deadline_in.map(millis),
            })
        });
        if self.says(Verbosity::Verbose) {
            let limit = deadline_in
                .map(|d| format!(" (deadline in {})", humane(d)))
                .unwrap_or_default();
            self.line(&format!("attempt {} starting{limit}", self.of(number)));
        }
    }

    /// The command's group was stopped (Ctrl-Z) or continued.
    pub fn job_control(&self, number: u32, stopped: Option<i32>, after: Option<Duration>) {
        match (stopped, after) {
            (Some(signal), _) => self.event(
                "stopped",
                || json!({ "attempt": number, "signal": signal_name(signal) }),
            ),
            (None, Some(d)) => self.event(
                "continued",
                || json!({ "attempt": number, "stopped_ms": millis(d) }),
            ),
            (None, None) => {}
        }
    }

    /// The attempt's hint file asked for `hint` (verbose and events only).
    pub fn hint(&self, number: u32, hint: retry_core::ChildHint) {
        let (delay, stop) = match hint {
            retry_core::ChildHint::RetryAfter(d) => (Some(d), false),
            retry_core::ChildHint::Stop => (None, true),
        };
        self.event(
            "hint",
            || json!({ "attempt": number, "retry_after_ms": delay.map(millis), "stop": stop }),
        );
        if self.says(Verbosity::Verbose) {
            match delay {
                Some(d) => self.line(&format!(
                    "attempt {}: the command asks to wait at least {}",
                    self.of(number),
                    humane(d)
                )),
                None => self.line(&format!(
                    "attempt {}: the command asks not to be retried",
                    self.of(number)
                )),
            }
        }
    }

    /// A line of the attempt's hint file could not be read: always said.
    pub fn hint_unreadable(&self, number: u32, problem: HintProblem, text: &str) {
        self.event("hint_unreadable", || {
            json!({
                "attempt": number,
                "line": problem.line,
                "text": text,
                "problem": problem.to_string(),
            })
        });
        if self.verbosity.is_some_and(|v| v > Verbosity::Quiet) {
            self.line(&format!(
                "attempt {}: hint file {problem}; ignored: {text:?}",
                self.of(number)
            ));
        }
    }

    /// An attempt ended with `ending` after `took`; the machine answered `next`
    /// (never `Withdraw`: the caller answers that first). `range`: the interval
    /// a jittered curve delay was drawn from.
    #[allow(clippy::too_many_arguments)]
    pub fn attempt_end(
        &self,
        number: u32,
        ending: Ending,
        pid: Option<u32>,
        took: Duration,
        next: &Action,
        range: Option<(Duration, Duration)>,
        spent: Spent,
    ) {
        let success = ending == Ending::Exited(0);
        let (code, signal) = match ending {
            Ending::Exited(c) | Ending::NotStarted(c) => (Some(c), None),
            Ending::Signalled(s) | Ending::Interrupted(s) => (None, Some(s)),
            Ending::TimedOut => (None, None),
        };
        self.event("attempt_end", || {
            json!({
                "attempt": number,
                "pid": pid,
                "code": code,
                "signal": signal.map(signal_name),
                "status": ending.status_code(),
                "duration_ms": millis(took),
                "timed_out": ending == Ending::TimedOut,
                "success": success,
            })
        });
        if let Action::Sleep {
            delay,
            reason,
            until,
        } = *next
        {
            self.event("sleep", || {
                json!({
                    "next_attempt": number.saturating_add(1),
                    "delay_ms": millis(delay),
                    "reason": reason_name(reason),
                    "until_ms": millis(until.as_duration()),
                    "delay_min_ms": range.map(|(lo, _)| millis(lo)),
                    "delay_max_ms": range.map(|(_, hi)| millis(hi)),
                })
            });
        }
        let expected = match self.goal {
            Goal::Failure => !success,
            _ => success,
        };
        if expected && matches!(next, Action::Done { .. }) {
            if self.says(Verbosity::Verbose) {
                self.line(&format!(
                    "attempt {} {} after {}",
                    self.of(number),
                    if success {
                        "succeeded".to_owned()
                    } else {
                        describe(ending)
                    },
                    humane(took)
                ));
            }
            return;
        }
        if success && !self.says(Verbosity::Verbose) && self.goal == Goal::Success {
            return;
        }
        if !self.says(Verbosity::Normal) {
            return;
        }
        let what = if success {
            "succeeded".to_owned()
        } else {
            describe(ending)
        };
        let then = match *next {
            Action::GiveUp(_) | Action::Done { .. } => String::new(),
            Action::Sleep { delay, reason, .. } => {
                let why = match (reason, range) {
                    (SleepReason::Hint, _) => " as the command asked".to_owned(),
                    (_, Some((lo, hi))) => {
                        format!(", jittered within {} to {}", humane(lo), humane(hi))
                    }
                    _ => String::new(),
                };
                format!("; next in {}{why}", humane(delay))
            }
            Action::Attempt { .. } => "; retrying now".to_owned(),
            Action::Withdraw { .. } => "; waiting for the retry budget".to_owned(),
        };
        self.line(&format!(
            "attempt {} {what} after {}{then} ({})",
            self.of(number),
            humane(took),
            self.used(spent)
        ));
    }

    /// The run failed for good; `retry` exits with `exit_code`.
    pub fn give_up(&self, give_up: &GiveUp, exit_code: i32, spent: Spent) {
        self.event("give_up", || {
            json!({
                "reason": give_up.reason.code().trim_start_matches("retry."),
                "code": exit_code,
                "attempts": give_up.attempts,
            })
        });
        if self.says(Verbosity::Normal) {
            let why = match (self.goal, give_up.reason) {
                (Goal::Failure, retry_core::GiveUpReason::Exhausted) => {
                    "every attempt succeeded".to_owned()
                }
                (Goal::Successes(n), retry_core::GiveUpReason::Exhausted) => {
                    format!("attempts exhausted before {n} successes in a row")
                }
                (_, reason) => reason.to_string(),
            };
            self.line(&format!(
                "giving up after {} attempt(s): {why}; exit status {exit_code} ({})",
                give_up.attempts,
                self.used(spent)
            ));
        }
    }

    /// The run reached its goal; `retry` exits with `exit_code`.
    pub fn done(&self, attempts: u32, exit_code: i32, spent: Spent) {
        self.event(
            "done",
            || json!({ "attempts": attempts, "code": exit_code }),
        );
        let worth_saying = attempts > 1 || self.goal != Goal::Success;
        if self.says(Verbosity::Verbose) || (worth_saying && self.says(Verbosity::Normal)) {
            let what = match self.goal {
                Goal::Success => "succeeded".to_owned(),
                Goal::Failure => {
                    format!("failed (exit status {exit_code}), as --until-fail waits for,")
                }
                Goal::Successes(n) => format!("succeeded {n} times in a row, the last"),
            };
            self.line(&format!(
                "{what} on attempt {} ({})",
                self.of(attempts),
                self.used(spent)
            ));
        }
    }

    /// A hook failed or could not run: always said.
    pub fn hook_failed(&self, hook: &str, what: &str) {
        self.event("hook_failed", || json!({ "hook": hook, "detail": what }));
        if self.verbosity.is_some() {
            self.line(&format!("{hook} hook {what}"));
        }
    }

    /// An error of `retry` itself or of starting the command: always said.
    pub fn error(&self, text: &str) {
        self.event("error", || json!({ "message": text }));
        if self.verbosity.is_some() {
            self.line(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(784_111_777_042), "1994-11-06T08:49:37.042Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_709_164_800_999), "2024-02-29T00:00:00.999Z");
        assert_eq!(rfc3339(4_102_444_799_000), "2099-12-31T23:59:59.000Z");
        // Never panics, even at the end of time (year 584 556 019).
        assert!(rfc3339(u64::MAX).starts_with("584556019-"));
    }
}
