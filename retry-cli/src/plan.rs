//! `retry plan` and `--dry-run`: the schedule the policy would follow, from the
//! core's simulator ([`Simulation`]), without running anything.
//!
//! The scripted outcomes go through the same deciders as a real run: the
//! classifier, the run's [`ProcessGoal`] and an explicit [`DelayList`], in that
//! order, so the plan shows what `retry` would do.

use core::fmt::Write as _;
use core::time::Duration;

use retry_core::{
    Action, DelayList, Event, FailureKind, GiveUp, GiveUpReason, Goal, Hint, Instant, ProcessGoal,
    RetryPolicy, Scripted, Simulation, SleepReason,
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
        /// The interval a jittered curve delay was drawn from.
        range: Option<(Duration, Duration)>,
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
    goal: Goal,
    delays: Option<Vec<Duration>>,
    rows: Vec<Row>,
    end: Option<GiveUp>,
    total_sleep: Duration,
    exit_code: i32,
}

/// What the classifier makes of a scripted outcome.
fn classified(classifier: &Classifier, outcome: SimulatedOutcome) -> Event {
    match outcome {
        SimulatedOutcome::Exit(code) => match classifier.exit_failure(code, None) {
            Some(failure) => Event::Failed(failure),
            None => Event::Succeeded,
        },
        SimulatedOutcome::Signal(signal) => Event::Failed(classifier.signal_failure(signal)),
        SimulatedOutcome::Timeout => Event::TimedOut,
    }
}

/// The exit status of a scripted outcome.
fn status(outcome: SimulatedOutcome) -> i32 {
    match outcome {
        SimulatedOutcome::Exit(code) => code,
        SimulatedOutcome::Signal(signal) => 128_i32.saturating_add(signal),
        SimulatedOutcome::Timeout => 124,
    }
}

/// The event a machine event stands for, as a simulator script entry.
fn scripted(event: Event) -> Scripted {
    match event {
        Event::Failed(failure) => Scripted::fail(failure),
        Event::TimedOut => Scripted::time_out(),
        _ => Scripted::succeed(),
    }
}

/// The version of `retry plan --json`'s records: 3 since the seed became a
/// string.
const PLAN_SCHEMA: u32 = 3;

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
        Plan::with(policy, seed, classifier, outcomes, Goal::Success, None)
    }

    /// As [`Plan::new`], toward `goal` and with an explicit delay list.
    #[must_use]
    pub fn with(
        policy: &RetryPolicy,
        seed: u64,
        classifier: &Classifier,
        outcomes: &[SimulatedOutcome],
        goal: Goal,
        delays: Option<&[Duration]>,
    ) -> Plan {
        // With nothing scripted, every attempt exits 1.
        let outcomes = match outcomes {
            [] => &[SimulatedOutcome::Exit(1)][..],
            some => some,
        };
        let outcome_of = |attempt: u32| {
            let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
            outcomes
                .get(index)
                .or(outcomes.last())
                .copied()
                .unwrap_or(SimulatedOutcome::Exit(1))
        };
        let list = delays.and_then(DelayList::new);
        let machine_policy = list.and_then(|l| l.policy(policy).ok()).unwrap_or(*policy);
        // The script the machine sees: each attempt's outcome, classified, judged
        // toward the goal, then given the list's delay. One entry per attempt the
        // plan can show; the last repeats past them.
        let shown = u32::try_from(MAX_ROWS)
            .unwrap_or(u32::MAX)
            .saturating_add(2);
        let mut tracker = ProcessGoal::new(goal);
        let script: Vec<Scripted> = (1..=policy.max_attempts().min(shown))
            .map(|attempt| {
                let event = tracker.judge(classified(classifier, outcome_of(attempt)));
                let event = match list {
                    Some(list) => list.event(policy, attempt, event),
                    None => event,
                };
                scripted(event)
            })
            .collect();
        let mut rows: Vec<Row> = Vec::new();
        let mut end = None;
        let mut total_sleep = Duration::ZERO;
        for step in Simulation::new(&machine_policy, seed, &script) {
            if rows.len() > MAX_ROWS {
                break;
            }
            let is_outcome = matches!(
                step.event,
                Event::Succeeded | Event::Failed(_) | Event::TimedOut
            );
            if is_outcome {
                if let Some(row) = rows.last_mut() {
                    row.outcome = Some(classified(classifier, outcome_of(row.attempt)));
                }
            }
            let then = match step.action {
                Action::Attempt {
                    number, deadline, ..
                } => {
                    // An attempt right after an outcome (or after a grant of the
                    // retry budget that followed it) is a retry at once.
                    if let Some(row) = rows.last_mut() {
                        if row.outcome.is_some() && row.then.is_none() {
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
                    // The interval of a jittered curve delay (a scripted
                    // outcome carries no hint; a delay list has no jitter).
                    let range = match (reason, list, rows.last()) {
                        (SleepReason::Curve, None, Some(row)) => machine_policy
                            .delay_interval(row.attempt)
                            .filter(|(lo, hi)| lo < hi),
                        _ => None,
                    };
                    Some(Then::Sleep {
                        delay,
                        reason,
                        range,
                    })
                }
                Action::GiveUp(give_up) => {
                    end = Some(give_up);
                    Some(Then::GiveUp(give_up))
                }
                Action::Done { .. } => Some(Then::Done),
                // The simulator grants the withdrawal: what follows is the
                // answer to the attempt's outcome.
                Action::Withdraw { .. } => None,
            };
            if let (Some(then), Some(row)) = (then, rows.last_mut()) {
                row.then = Some(then);
            }
        }
        let last_status = rows.last().map_or(1, |row| status(outcome_of(row.attempt)));
        let exit_code = match end {
            None if goal == Goal::Failure => last_status,
            None => 0,
            Some(g) => match g.reason {
                GiveUpReason::TimedOut { .. } | GiveUpReason::Budget => 124,
                _ => last_status,
            },
        };
        Plan {
            policy: *policy,
            seed,
            goal,
            delays: delays.map(<[Duration]>::to_vec),
            rows,
            end,
            total_sleep,
            exit_code,
        }
    }

    /// How a sleep's reason reads: with a delay list, the list's delays come to
    /// the machine as exact hints.
    fn reason_text(&self, reason: SleepReason) -> String {
        match (reason, &self.delays) {
            (SleepReason::Hint, Some(_)) => "delays".to_owned(),
            (reason, _) => reason.to_string(),
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
        if let Some(delays) = &self.delays {
            let _ = writeln!(out, "delays: {} (the last repeats)", delay_text(delays));
        }
        if self.goal != Goal::Success {
            let _ = writeln!(out, "goal: {}", self.goal);
        }
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
                Some(Then::Sleep {
                    delay,
                    reason,
                    range,
                }) => match range {
                    Some((lo, hi)) => format!(
                        "sleep {} ({}, jittered within {} to {})",
                        retry_core::DisplayDuration(delay),
                        self.reason_text(reason),
                        retry_core::DisplayDuration(lo),
                        retry_core::DisplayDuration(hi)
                    ),
                    None => format!(
                        "sleep {} ({})",
                        retry_core::DisplayDuration(delay),
                        self.reason_text(reason)
                    ),
                },
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
        let attempts = self.rows.last().map_or(0, |r| r.attempt);
        let result = match (self.end, self.goal) {
            (Some(g), _) => format!("{} after {} attempt(s)", g.reason, g.attempts),
            (None, Goal::Failure) => format!("failed, as waited for, after {attempts} attempt(s)"),
            (None, _) => format!("succeeded after {attempts} attempt(s)"),
        };
        let _ = writeln!(
            out,
            "result: {result}; {} asleep in total; exit status {}",
            retry_core::DisplayDuration(self.total_sleep),
            self.exit_code
        );
        out
    }

    /// The plan as JSON Lines: one object per line, each with `"schema": 3` and
    /// a `"record"`: first `policy` (its `seed` a string of decimal digits, which
    /// no JSON reader rounds), then one `attempt` per row, then `result`. A
    /// jittered curve sleep carries the interval it was drawn from,
    /// `delay_min_ms` to `delay_max_ms` (`null` otherwise).
    #[must_use]
    pub fn json_lines(&self) -> String {
        let mut out = String::new();
        let mut put = |value: Value| {
            out.push_str(&value.to_string());
            out.push('\n');
        };
        put(json!({
            "schema": PLAN_SCHEMA,
            "record": "policy",
            "seed": self.seed.to_string(),
            "policy": self.policy.to_string(),
            "max_attempts": self.policy.max_attempts(),
            "budget_ms": self.policy.budget().map(millis),
            "delays_ms": self.delays.as_ref().map(|d| d.iter().copied().map(millis).collect::<Vec<_>>()),
            "goal": self.goal.to_string(),
        }));
        for row in &self.rows {
            let then = match row.then {
                Some(Then::Sleep {
                    delay,
                    reason,
                    range,
                }) => json!({
                    "action": "sleep",
                    "delay_ms": millis(delay),
                    "reason": self.reason_text(reason),
                    "delay_min_ms": range.map(|(lo, _)| millis(lo)),
                    "delay_max_ms": range.map(|(_, hi)| millis(hi)),
                }),
                Some(Then::RetryNow) => json!({ "action": "retry", "delay_ms": 0 }),
                Some(Then::GiveUp(g)) => json!({
                    "action": "give_up",
                    "reason": g.reason.code().trim_start_matches("retry."),
                }),
                Some(Then::Done) => json!({ "action": "done" }),
                None => Value::Null,
            };
            put(json!({
                "schema": PLAN_SCHEMA,
                "record": "attempt",
                "attempt": row.attempt,
                "start_ms": millis(row.start.as_duration()),
                "deadline_ms": row.deadline.map(|d| millis(d.as_duration())),
                "outcome": row.outcome.map(outcome_text),
                "then": then,
            }));
        }
        put(json!({
            "schema": PLAN_SCHEMA,
            "record": "result",
            "reason": match (self.end, self.goal) {
                (Some(g), _) => g.reason.code().trim_start_matches("retry."),
                // The run ended at the failure --until-fail waited for.
                (None, Goal::Failure) => "failed",
                (None, _) => "success",
            },
            "attempts": self.rows.last().map_or(0, |r| r.attempt),
            "total_sleep_ms": millis(self.total_sleep),
            "exit_code": self.exit_code,
            "truncated": self.rows.len() > MAX_ROWS,
        }));
        out
    }
}

/// A delay list as text: `1s,2s,5s`.
fn delay_text(delays: &[Duration]) -> String {
    delays
        .iter()
        .map(|d| retry_core::DisplayDuration(*d).to_string())
        .collect::<Vec<_>>()
        .join(",")
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
