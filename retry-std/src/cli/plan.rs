//! `retry plan` and `--dry-run`: the schedule the policy would follow, from the
//! core's simulator ([`Simulation`]), without running anything.

use core::fmt::Write as _;
use core::time::Duration;

use retry_core::{
    Action, Event, FailureKind, GiveUp, GiveUpReason, Hint, Instant, RetryPolicy, Scripted,
    Simulation, SleepReason,
};
use serde_json::{json, Value};

use super::args::SimulatedOutcome;
use super::outcome::{signal_name, Classifier};
use super::output::millis;

/// What happened after an attempt in the plan.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Then {
    Sleep {
        delay: Duration,
        reason: SleepReason,
    },
    RetryNow,
    GiveUp(GiveUp),
    Done,
}

/// One attempt of the plan.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Row {
    attempt: u32,
    start: Instant,
    deadline: Option<Instant>,
    outcome: Option<Event>,
    then: Option<Then>,
}

/// The plan of a policy against a script.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    policy: RetryPolicy,
    seed: u64,
    rows: Vec<Row>,
    end: Option<GiveUp>,
    total_sleep: Duration,
    exit_code: i32,
}

/// The core script for the `--simulate` list, classified like real attempts.
fn script(classifier: &Classifier, outcomes: &[SimulatedOutcome]) -> Vec<Scripted> {
    outcomes
        .iter()
        .map(|outcome| match *outcome {
            SimulatedOutcome::Exit(code) => match classifier.exit_failure(code, None) {
                Some(failure) => Scripted::fail(failure),
                None => Scripted::succeed(),
            },
            SimulatedOutcome::Signal(signal) => Scripted::fail(classifier.signal_failure(signal)),
            SimulatedOutcome::Timeout => Scripted::time_out(),
        })
        .collect()
}

/// Most attempts a plan lists; a policy allowing more is cut with a note.
const MAX_ROWS: usize = 1000;

impl Plan {
    /// Simulates `policy` under `seed` against the scripted outcomes (an empty
    /// script fails every attempt retryably).
    #[must_use]
    pub fn new(
        policy: &RetryPolicy,
        seed: u64,
        classifier: &Classifier,
        outcomes: &[SimulatedOutcome],
    ) -> Plan {
        // With nothing scripted, every attempt exits 1.
        let outcomes = match outcomes {
            [] => &[SimulatedOutcome::Exit(1)][..],
            some => some,
        };
        let script = script(classifier, outcomes);
        let mut rows: Vec<Row> = Vec::new();
        let mut end = None;
        let mut total_sleep = Duration::ZERO;
        let mut last_status = 1;
        for step in Simulation::new(policy, seed, &script) {
            if rows.len() > MAX_ROWS {
                break;
            }
            let is_outcome = matches!(
                step.event,
                Event::Succeeded | Event::Failed(_) | Event::TimedOut
            );
            if is_outcome {
                last_status = match step.event {
                    Event::Failed(f) => match f.kind() {
                        FailureKind::Exit(c) => c,
                        FailureKind::Signal(s) => 128_i32.saturating_add(s),
                        _ => 1,
                    },
                    Event::TimedOut => 124,
                    _ => 0,
                };
                if let Some(row) = rows.last_mut() {
                    row.outcome = Some(step.event);
                }
            }
            let then = match step.action {
                Action::Attempt {
                    number, deadline, ..
                } => {
                    if is_outcome {
                        if let Some(row) = rows.last_mut() {
                            row.then = Some(Then::RetryNow);
                        }
                    }
                    rows.push(Row {
                        attempt: number,
                        start: step.at,
                        deadline,
                        outcome: None,
                        then: None,
                    });
                    None
                }
                Action::Sleep { delay, reason, .. } => {
                    total_sleep = total_sleep.saturating_add(delay);
                    Some(Then::Sleep { delay, reason })
                }
                Action::GiveUp(give_up) => {
                    end = Some(give_up);
                    Some(Then::GiveUp(give_up))
                }
                Action::Done { .. } => Some(Then::Done),
                Action::Withdraw { .. } => None,
            };
            if let (Some(then), Some(row)) = (then, rows.last_mut()) {
                row.then = Some(then);
            }
        }
        let exit_code = match end {
            None => 0,
            Some(g) => match g.reason {
                GiveUpReason::TimedOut { .. } | GiveUpReason::Budget => 124,
                _ => last_status,
            },
        };
        Plan {
            policy: *policy,
            seed,
            rows,
            end,
            total_sleep,
            exit_code,
        }
    }

    /// The exit status the run would end with.
    #[must_use]
    pub const fn exit_code(&self) -> i32 {
        self.exit_code
    }

    /// The plan as a table.
    #[must_use]
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "policy: {}", self.policy);
        let _ = writeln!(out, "seed: {}", self.seed);
        let _ = writeln!(
            out,
            "{:>7}  {:>10}  {:>10}  {:<22}  then",
            "attempt", "starts at", "deadline", "outcome"
        );
        for row in &self.rows {
            let deadline = row
                .deadline
                .map(|d| d.to_string())
                .unwrap_or_else(|| "-".to_owned());
            let outcome = row.outcome.map(outcome_text).unwrap_or_default();
            let then = match row.then {
                Some(Then::Sleep { delay, reason }) => {
                    format!("sleep {} ({reason})", retry_core::DisplayDuration(delay))
                }
                Some(Then::RetryNow) => "retry at once".to_owned(),
                Some(Then::GiveUp(g)) => format!("give up: {}", g.reason),
                Some(Then::Done) => "done".to_owned(),
                None => "…".to_owned(),
            };
            let _ = writeln!(
                out,
                "{:>7}  {:>10}  {:>10}  {:<22}  {then}",
                row.attempt,
                row.start.to_string(),
                deadline,
                outcome
            );
        }
        if self.rows.len() > MAX_ROWS {
            let _ = writeln!(out, "(more attempts left out)");
        }
        if let Some(budget) = self.policy.budget() {
            let _ = writeln!(
                out,
                "budget: {} (no sleep may reach it; attempts are cut at it)",
                retry_core::DisplayDuration(budget)
            );
        }
        let result = match self.end {
            Some(g) => format!("{} after {} attempt(s)", g.reason, g.attempts),
            None => format!(
                "succeeded after {} attempt(s)",
                self.rows.last().map_or(0, |r| r.attempt)
            ),
        };
        let _ = writeln!(
            out,
            "result: {result}; {} asleep in total; exit status {}",
            retry_core::DisplayDuration(self.total_sleep),
            self.exit_code
        );
        out
    }

    /// The plan as one JSON document (`"schema": 1`).
    #[must_use]
    pub fn json(&self) -> Value {
        let attempts: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let then = match row.then {
                    Some(Then::Sleep { delay, reason }) => json!({
                        "action": "sleep",
                        "delay_ms": millis(delay),
                        "reason": reason.to_string(),
                    }),
                    Some(Then::RetryNow) => json!({ "action": "retry", "delay_ms": 0 }),
                    Some(Then::GiveUp(g)) => json!({
                        "action": "give_up",
                        "reason": g.reason.code().trim_start_matches("retry."),
                    }),
                    Some(Then::Done) => json!({ "action": "done" }),
                    None => Value::Null,
                };
                json!({
                    "attempt": row.attempt,
                    "start_ms": millis(row.start.as_duration()),
                    "deadline_ms": row.deadline.map(|d| millis(d.as_duration())),
                    "outcome": row.outcome.map(outcome_text),
                    "then": then,
                })
            })
            .collect();
        json!({
            "schema": 1,
            "seed": self.seed,
            "policy": self.policy.to_string(),
            "max_attempts": self.policy.max_attempts(),
            "budget_ms": self.policy.budget().map(millis),
            "attempts": attempts,
            "result": {
                "reason": self.end.map_or("success", |g| g.reason.code().trim_start_matches("retry.")),
                "attempts": self.rows.last().map_or(0, |r| r.attempt),
                "total_sleep_ms": millis(self.total_sleep),
                "exit_code": self.exit_code,
            },
        })
    }
}

/// An attempt's scripted outcome in words.
fn outcome_text(event: Event) -> String {
    match event {
        Event::Succeeded => "exit 0".to_owned(),
        Event::TimedOut => "timeout".to_owned(),
        Event::Failed(f) => {
            let kind = match f.kind() {
                FailureKind::Signal(s) => signal_name(s),
                other => other.to_string(),
            };
            let mut text = kind;
            if !f.is_retryable() {
                text.push_str(" (stop)");
            }
            if let Some(Hint::RetryAfter(d) | Hint::Pushback(d)) = f.hint() {
                let _ = write!(text, " hint {}", retry_core::DisplayDuration(d));
            }
            text
        }
        other => other.to_string(),
    }
}
