//! Snapshots of real machines, changed field by field.
//!
//! The input builds a machine (a retry machine under an arbitrary valid
//! policy, a circuit breaker under an arbitrary config, a retry budget of any
//! kind), drives it a few steps, takes its snapshot and writes it out as JSON.
//! Then it changes one to three fields of the record: a number set to zero,
//! one, its double or half, a second or a day more, the largest value or the
//! value of another field; a flag flipped; an optional value removed or filled
//! in with another field's; a name swapped for another variant's; a list
//! grown or shrunk. A record that still decodes is restored.
//!
//! A record that is refused must be refused with an error naming a field. A
//! record that is accepted must give a machine that keeps every invariant its
//! policy states, checked here from the documented rules, not from the code
//! that restores:
//!
//! - retry machine: an attempt in flight has exactly the deadline its policy
//!   gives an attempt started when it did; a pending sleep is due after the
//!   latest time seen (or at the last instant), ends no later than its delay
//!   after it, before the time budget's end, with a delay inside the bounds of
//!   its reason (a curve delay within `min_delay` and `max_delay` plus additive
//!   jitter and rounding, a hint within the override clamp or under the
//!   at-least cap, an exact pushback as given, a circuit-open wait of at
//!   least a millisecond under a policy that waits); a pending withdrawal,
//!   once granted at that time, sleeps within those bounds and never gives up
//!   on the time budget; attempts never above the maximum. The same holds of
//!   every answer while the restored machine is driven on;
//! - breaker: a half-open period has a deadline exactly when the config has a
//!   maximum wait, and the first request at that deadline ends the period;
//!   probes in flight within the permits, probes reported below what the
//!   verdict needs (and the half-open reading is theirs); a count window
//!   within its size, in every state;
//! - budget: tokens within the capacity, before and after more notifications.
//!
//! Either way the machine's own snapshot restores to an equal machine.

use core::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use retry_core::{
    Action, Admission, AttemptKind, BreakerConfig, BreakerState, BudgetConfig, BudgetSnapshot,
    CallOutcome, CircuitBreaker, CircuitOpen, Event, HalfOpenVerdict, HintMode, Instant, Jitter,
    ManualState, Resolution, RetryBudget, RetryKind, RetryMachine, RetryPolicy, SleepReason,
    SnapshotError, Window,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::shared::{ensure, rarely, scaled, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "snapshot_fields";

/// Steps a machine is driven before its snapshot is taken.
const SETUP_STEPS: usize = 24;
/// Steps a restored machine is driven.
const DRIVE_STEPS: usize = 16;
/// The breaker type records are restored into.
type Breaker = CircuitBreaker<2, 8>;

/// What one input came to, for tests that count what the target reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The input ran out before a record was changed, or the changed record
    /// no longer decodes.
    Skipped,
    /// The changed record was refused with an error naming this field.
    Refused(&'static str),
    /// The changed record was restored and kept its invariants; `changed`
    /// says whether it differs from the record taken.
    Accepted {
        /// The record restored is not the one taken.
        changed: bool,
    },
}

/// Runs the check (see the module docs).
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    run(data).map(|_| ())
}

/// [`check`], saying what the input came to.
///
/// # Errors
/// The first [`Violation`].
pub fn run(data: &[u8]) -> Result<Outcome, Violation> {
    let mut u = Unstructured::new(data);
    match u.int_in_range(0..=2u8).unwrap_or(0) {
        0 => retry(&mut u),
        1 => breaker(&mut u),
        _ => budget(&mut u),
    }
}

// ---------------------------------------------------------------------------
// Changing a record field by field.

/// One step of a path into a JSON value.
#[derive(Clone, Debug)]
enum Key {
    Field(String),
    Index(usize),
}

/// Every node of `value` but the root, by path.
fn nodes(value: &Value, path: &mut Vec<Key>, out: &mut Vec<Vec<Key>>) {
    match value {
        Value::Object(map) => {
            for (name, child) in map {
                path.push(Key::Field(name.clone()));
                out.push(path.clone());
                nodes(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                path.push(Key::Index(i));
                out.push(path.clone());
                nodes(child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'v>(value: &'v mut Value, path: &[Key]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |v, key| match key {
        Key::Field(name) => v.get_mut(name.as_str()),
        Key::Index(i) => v.get_mut(*i),
    })
}

fn node<'v>(value: &'v Value, path: &[Key]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, key| match key {
        Key::Field(name) => v.get(name.as_str()),
        Key::Index(i) => v.get(*i),
    })
}

/// The names of the records' enum variants and kinds, to swap one for another.
const NAMES: [&str; 40] = [
    "idle",
    "attempting",
    "sleeping",
    "withdrawing",
    "done",
    "gave_up",
    "curve",
    "hint",
    "circuit_open",
    "exhausted",
    "permanent",
    "budget",
    "cancelled",
    "retry_budget",
    "not_started",
    "error",
    "timeout",
    "connection",
    "none",
    "full",
    "equal",
    "decorrelated",
    "constant",
    "linear",
    "exponential",
    "fibonacci",
    "override",
    "at_least",
    "ignore",
    "closed",
    "open",
    "half_open",
    "forced_open",
    "disabled",
    "metrics_only",
    "count",
    "time",
    "tokens",
    "slices",
    "aws",
];

const DAY_NANOS: u64 = 86_400_000_000_000;

/// A number changed as the input says.
fn changed_number(
    n: &serde_json::Number,
    other: Option<&Value>,
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<Value> {
    if let Some(x) = n.as_u64() {
        let x = match u.int_in_range(0..=12u8)? {
            0 => 0,
            1 => 1,
            2 => x.saturating_add(1),
            3 => x.saturating_sub(1),
            4 => x.saturating_mul(2),
            5 => x / 2,
            6 => u64::MAX,
            7 => x.saturating_add(DAY_NANOS),
            8 => x.saturating_add(1_000_000_000),
            9 => u64::from(u32::MAX),
            10 => x.saturating_add(86_400),
            11 => return Ok(other.cloned().unwrap_or(Value::from(x))),
            _ => u.arbitrary()?,
        };
        return Ok(Value::from(x));
    }
    let f = n.as_f64().unwrap_or(0.0);
    let f = match u.int_in_range(0..=5u8)? {
        0 => 0.0,
        1 => 1.0,
        2 => f * 2.0,
        3 => f / 2.0,
        4 => -f,
        _ => f64::from(u.arbitrary::<u16>()?) / 100.0,
    };
    Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
}

/// Changes one node of `record`, picked and changed as the input says.
fn change_one(record: &mut Value, u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let mut paths = Vec::new();
    nodes(record, &mut Vec::new(), &mut paths);
    if paths.is_empty() {
        return Ok(());
    }
    let at = u.choose_index(paths.len())?;
    let other_at = u.choose_index(paths.len())?;
    let (Some(path), Some(other_path)) = (paths.get(at), paths.get(other_at)) else {
        return Ok(());
    };
    let other = node(record, other_path).cloned();
    let Some(slot) = node_mut(record, path) else {
        return Ok(());
    };
    let copy_other = rarely(u, 6)?;
    let new = if copy_other {
        // Another field's value, of whatever kind.
        other.unwrap_or(Value::Null)
    } else {
        match &*slot {
            Value::Number(n) => changed_number(n, other.as_ref(), u)?,
            Value::Bool(b) => Value::Bool(!b),
            Value::Null => match u.int_in_range(0..=2u8)? {
                0 => Value::from(u.arbitrary::<u64>()?),
                1 => serde_json::json!({ "secs": u.int_in_range(0..=86_400u64)?, "nanos": 0 }),
                _ => other.unwrap_or(Value::Null),
            },
            Value::String(_) => Value::from(*u.choose(&NAMES)?),
            Value::Array(items) => {
                let mut items = items.clone();
                if u.arbitrary()? || items.is_empty() {
                    items.push(items.last().cloned().unwrap_or(Value::from(0u64)));
                } else {
                    items.pop();
                }
                Value::Array(items)
            }
            Value::Object(map) => {
                // A variant swapped for another (a one-key object), or the
                // value removed.
                match (map.iter().next(), map.len(), u.arbitrary::<bool>()?) {
                    (Some((_, inner)), 1, true) => {
                        let mut swapped = Map::new();
                        swapped.insert((*u.choose(&NAMES)?).to_owned(), inner.clone());
                        Value::Object(swapped)
                    }
                    _ => Value::Null,
                }
            }
        }
    };
    *slot = new;
    Ok(())
}

/// `snapshot` as JSON with one to three fields changed, decoded back; `None`
/// when the input ran out or the record no longer decodes.
fn changed<T: Serialize + DeserializeOwned>(snapshot: &T, u: &mut Unstructured<'_>) -> Option<T> {
    let mut record = serde_json::to_value(snapshot).ok()?;
    let edits = u.int_in_range(1..=3u8).ok()?;
    for _ in 0..edits {
        change_one(&mut record, u).ok()?;
    }
    serde_json::from_value(record).ok()
}

/// A refused record's error must name its field.
fn refused(e: &SnapshotError) -> Result<Outcome, Violation> {
    let field = e.field();
    ensure(
        !field.is_empty() && e.code().starts_with("snapshot.") && e.to_string().contains(field),
        TARGET,
        0,
        "a refused record's error does not name its field",
    )?;
    Ok(Outcome::Refused(field))
}

// ---------------------------------------------------------------------------
// The retry machine.

/// A sensible event for `m`'s pending action, sometimes any event.
fn retry_event(
    m: &RetryMachine,
    now: Instant,
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<Event> {
    if rarely(u, 8)? {
        return u.arbitrary();
    }
    let pick = u.int_in_range(0..=15u8)?;
    Ok(match m.pending() {
        None => Event::Start,
        Some(Action::Attempt { .. }) => match pick {
            0..=2 => Event::Succeeded,
            3..=10 => Event::Failed(crate::retry_machine::some_failure(u)?),
            11 | 12 => Event::TimedOut,
            13 => Event::Cancelled,
            _ => Event::Rejected {
                until: if u.arbitrary()? {
                    Some(now.saturating_add(Duration::from_millis(u.int_in_range(0..=3_000)?)))
                } else {
                    None
                },
            },
        },
        Some(Action::Sleep { .. }) => {
            if pick == 0 {
                Event::Cancelled
            } else {
                Event::Woke
            }
        }
        Some(Action::Withdraw { .. }) => match pick {
            0 => Event::Cancelled,
            1..=3 => Event::Refused,
            _ => Event::Granted,
        },
        Some(_) => u.arbitrary()?,
    })
}

/// The next time: mostly the pending sleep's end or a little later.
fn retry_now(
    m: &RetryMachine,
    now: Instant,
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<Instant> {
    Ok(match u.int_in_range(0..=5u8)? {
        0 => now,
        1 | 2 => m.next_deadline().unwrap_or(now).max(now),
        3 => now.saturating_add(Duration::from_millis(u.int_in_range(0..=2_000)?)),
        4 => Instant::from_nanos(u.arbitrary()?),
        _ => now.saturating_add(Duration::from_micros(u.arbitrary::<u32>()?.into())),
    })
}

/// The documented bounds on a delay for `reason` under `policy`: a curve
/// delay within `min_delay` and `max_delay` (plus additive jitter and half a
/// millisecond of rounding), a hint within the clamp or under the at-least
/// cap (`None` when any length may be: an exact pushback), a circuit-open wait
/// of at least a millisecond. `pushback`: the sleep follows a pushback.
fn delay_bounds(
    policy: &RetryPolicy,
    reason: SleepReason,
    pushback: bool,
) -> Option<(Duration, Duration)> {
    let top = Duration::from_nanos(u64::MAX);
    let floor = policy.min_delay().min(top);
    let above = |ceiling: Duration| {
        let extra = match policy.jitter() {
            Jitter::Add(f) => scaled(ceiling, f),
            _ => Duration::ZERO,
        };
        let slack = match policy.resolution() {
            Resolution::Millis => Duration::from_micros(500),
            Resolution::Nanos => Duration::ZERO,
        };
        ceiling
            .saturating_add(extra)
            .saturating_add(slack)
            .saturating_add(Duration::from_micros(1))
    };
    match reason {
        SleepReason::CircuitOpen => Some((Duration::from_millis(1), Duration::MAX)),
        SleepReason::Curve => Some((floor, above(policy.max_delay()))),
        SleepReason::Hint if pushback => None,
        SleepReason::Hint => match policy.hints() {
            HintMode::Override { min, max } => Some((min, max)),
            HintMode::AtLeast { cap } => Some((floor, above(policy.max_delay().max(cap)))),
            // No hint under a policy that ignores them: an empty range.
            HintMode::Ignore => Some((Duration::MAX, Duration::ZERO)),
        },
    }
}

/// A record's field as an instant (the records write instants as nanoseconds).
fn instant_at(record: &Value, path: &[&str]) -> Option<Instant> {
    let v = path.iter().try_fold(record, |v, name| v.get(name))?;
    v.as_u64().map(Instant::from_nanos)
}

fn u32_at(record: &Value, name: &str) -> Option<u32> {
    record
        .get(name)?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}

/// The machine's own record of where it is: the times and counters its
/// pending action was checked against.
struct Seen {
    started_at: Instant,
    latest_now: Instant,
    attempt_started: Option<Instant>,
    pushback: bool,
}

fn seen(m: &RetryMachine) -> Option<Seen> {
    let record = serde_json::to_value(m.snapshot()).ok()?;
    let attempts = u32_at(&record, "attempts")?;
    Some(Seen {
        started_at: instant_at(&record, &["started_at"])?,
        latest_now: instant_at(&record, &["latest_now"])?,
        attempt_started: instant_at(&record, &["phase", "attempting", "started"]),
        pushback: attempts >= 1 && u32_at(&record, "curve_restarted_at") == Some(attempts),
    })
}

/// The deadline `policy` gives an attempt started at `started` in a call
/// started at `call_start`, restated from the rules.
fn expected_deadline(
    policy: &RetryPolicy,
    call_start: Instant,
    started: Instant,
) -> Option<Instant> {
    let own = policy
        .attempt_timeout()
        .and_then(|t| started.checked_add(t));
    match policy.budget() {
        Some(budget) if policy.caps_attempt_to_budget() => {
            let end = call_start.saturating_add(budget);
            Some(own.map_or(end, |d| d.min(end)))
        }
        _ => own,
    }
}

/// Checks `action`, answered at `now` (`None`: the pending action of a
/// restored machine, checked against its record), against the policy's
/// invariants.
fn retry_invariants(
    m: &RetryMachine,
    action: Action,
    now: Option<Instant>,
    step: usize,
) -> Result<(), Violation> {
    let policy = *m.policy();
    let Some(seen) = seen(m) else {
        return ensure(
            false,
            TARGET,
            step,
            "a restored machine's snapshot does not serialize",
        );
    };
    let budget_end = policy.budget().map(|b| seen.started_at.saturating_add(b));
    match action {
        Action::Attempt {
            number, deadline, ..
        } => {
            ensure(
                number >= 1 && (policy.attempts_are_unlimited() || number <= policy.max_attempts()),
                TARGET,
                step,
                "an attempt numbered 0 or above the maximum",
            )?;
            let started = now.or(seen.attempt_started).unwrap_or(seen.latest_now);
            ensure(
                deadline == expected_deadline(&policy, seen.started_at, started),
                TARGET,
                step,
                "an attempt's deadline is not the one its policy gives",
            )?;
        }
        Action::Sleep {
            until,
            delay,
            reason,
        } => {
            let asked = now.unwrap_or(seen.latest_now);
            ensure(
                !delay.is_zero() && (until > asked || until == Instant::MAX),
                TARGET,
                step,
                "a sleep of no length or not due after the latest time seen",
            )?;
            ensure(
                until <= asked.saturating_add(delay),
                TARGET,
                step,
                "a sleep ends later than its delay after the latest time seen",
            )?;
            ensure(
                budget_end.is_none_or(|end| until < end),
                TARGET,
                step,
                "a sleep reaches the end of the time budget",
            )?;
            ensure(
                reason != SleepReason::CircuitOpen || policy.circuit_open() == CircuitOpen::Wait,
                TARGET,
                step,
                "a circuit-open wait under a policy that gives up on open circuits",
            )?;
            // Driven on, a hint may come with any failure: only a restored
            // sleep is held to the hint bounds (the drive's failures carry
            // hints the check does not see).
            if now.is_none() || reason != SleepReason::Hint {
                if let Some((lo, hi)) = delay_bounds(&policy, reason, seen.pushback) {
                    ensure(
                        delay >= lo && delay <= hi,
                        TARGET,
                        step,
                        "a delay outside the bounds its reason allows",
                    )?;
                }
            }
        }
        Action::Withdraw { .. } => ensure(
            policy.uses_retry_budget(),
            TARGET,
            step,
            "a withdrawal under a policy without a retry budget",
        )?,
        Action::GiveUp(_) | Action::Done { .. } => {}
    }
    Ok(())
}

fn retry(u: &mut Unstructured<'_>) -> Result<Outcome, Violation> {
    let Ok(policy) = RetryPolicy::arbitrary(u) else {
        return Ok(Outcome::Skipped);
    };
    let Ok(policy) = crate::retry_machine::shape_policy(policy, u) else {
        return Ok(Outcome::Skipped);
    };
    let mut m = RetryMachine::new(&policy, u.arbitrary().unwrap_or(0));
    let mut now = Instant::from_nanos(if rarely(u, 4).unwrap_or(false) {
        u.arbitrary().unwrap_or(0)
    } else {
        0
    });
    let steps = u.int_in_range(0..=SETUP_STEPS).unwrap_or(0);
    for _ in 0..steps {
        let (Ok(event), Ok(at)) = (retry_event(&m, now, u), retry_now(&m, now, u)) else {
            break;
        };
        now = at;
        let _ = m.try_poll(event, now);
        now = now.max(seen(&m).map_or(now, |s| s.latest_now));
    }
    let taken = m.snapshot();
    let Some(record) = changed(&taken, u) else {
        return Ok(Outcome::Skipped);
    };
    let mut restored = match RetryMachine::restore(&record) {
        Ok(restored) => restored,
        Err(e) => return refused(&e),
    };
    ensure(
        RetryMachine::restore(&restored.snapshot()).as_ref() == Ok(&restored),
        TARGET,
        0,
        "a restored machine's own snapshot restores to another machine",
    )?;
    let policy = *restored.policy();
    ensure(
        policy.attempts_are_unlimited() || restored.attempts() <= policy.max_attempts(),
        TARGET,
        0,
        "attempts above the maximum after a restore",
    )?;
    if let Some(pending) = restored.pending() {
        retry_invariants(&restored, pending, None, 0)?;
        if let Action::Withdraw { .. } = pending {
            // Granted at once, the recorded delay is slept (or the retry
            // starts): the budget had room for it.
            let mut granted = restored.clone();
            let at = seen(&granted).map_or(Instant::ORIGIN, |s| s.latest_now);
            let answer = granted.poll(Event::Granted, at);
            ensure(
                !matches!(answer, Action::GiveUp(_)),
                TARGET,
                0,
                "a restored withdrawal, granted at once, gives up",
            )?;
            if let Action::Sleep { reason, delay, .. } = answer {
                let pushback = seen(&restored).is_some_and(|s| s.pushback);
                if let Some((lo, hi)) = delay_bounds(&policy, reason, pushback) {
                    ensure(
                        delay >= lo && delay <= hi,
                        TARGET,
                        0,
                        "a restored withdrawal's delay outside the bounds its reason allows",
                    )?;
                }
            }
        }
    }
    let mut now = seen(&restored).map_or(Instant::ORIGIN, |s| s.latest_now);
    for step in 1..=DRIVE_STEPS {
        let (Ok(event), Ok(at)) = (retry_event(&restored, now, u), retry_now(&restored, now, u))
        else {
            break;
        };
        now = at.max(now);
        if let Ok(action) = restored.try_poll(event, now) {
            retry_invariants(&restored, action, Some(now), step)?;
        }
    }
    Ok(Outcome::Accepted {
        changed: record != taken,
    })
}

// ---------------------------------------------------------------------------
// The circuit breaker.

fn breaker_invariants(b: &Breaker, config: &BreakerConfig, step: usize) -> Result<(), Violation> {
    ensure(
        b.probes_in_flight() <= config.half_open_permits(),
        TARGET,
        step,
        "more probes in flight than permits",
    )?;
    if b.state() == BreakerState::HalfOpen {
        ensure(
            b.half_open_until().is_some() == config.max_half_open_wait().is_some(),
            TARGET,
            step,
            "a half-open period without the deadline its maximum wait calls for",
        )?;
    }
    if b.state() == BreakerState::Open {
        ensure(b.open_until().is_some(), TARGET, step, "open with no end")?;
    }
    if b.state() == BreakerState::HalfOpen {
        // Half-open, the dashboard reads the probes, and they stay below what
        // the verdict needs (it is given as the last one reports).
        let probes = b.probe_results();
        ensure(
            b.metrics(Instant::ORIGIN).window == probes,
            TARGET,
            step,
            "a half-open reading that is not the probes'",
        )?;
        let needed = match config.half_open_verdict() {
            HalfOpenVerdict::Consecutive => config.success_threshold(),
            HalfOpenVerdict::Rates { probes } => probes,
        };
        ensure(
            probes.calls < needed,
            TARGET,
            step,
            "half-open with as many probes reported as the verdict needs",
        )?;
    }
    if let Some(Window::Count { calls }) = config.window() {
        // The window itself (`stats`), in every state: the dashboard's
        // reading is the probes' while half-open.
        let held = b.stats(Instant::ORIGIN).calls;
        ensure(
            held <= u32::from(calls),
            TARGET,
            step,
            "a count window holding more calls than its size",
        )?;
    }
    Ok(())
}

fn breaker(u: &mut Unstructured<'_>) -> Result<Outcome, Violation> {
    let Ok(Ok(config)) = crate::breaker::breaker_config(u) else {
        return Ok(Outcome::Skipped);
    };
    let Ok(mut b) = Breaker::new(config) else {
        return Ok(Outcome::Skipped);
    };
    let mut now = Instant::ORIGIN;
    let steps = u.int_in_range(0..=SETUP_STEPS).unwrap_or(0);
    for _ in 0..steps {
        now = now.saturating_add(Duration::from_millis(
            u.int_in_range(0..=2_000).unwrap_or(0),
        ));
        match u.int_in_range(0..=9u8).unwrap_or(0) {
            0..=6 => {
                if let Admission::Admitted { permit, .. } = b.request(now) {
                    let outcome = CallOutcome {
                        success: u.ratio(2, 3).unwrap_or(true),
                        duration: Duration::from_millis(u.int_in_range(0..=600).unwrap_or(0)),
                    };
                    // Sometimes held across the snapshot: never handed back
                    // (a half-open probe then never reports).
                    if !u.ratio(1, 8).unwrap_or(false) {
                        let _ = b.record(permit, outcome, now);
                    }
                }
            }
            7 => {
                let _ = b.force(ManualState::HalfOpen, now);
            }
            8 => {
                let _ = b.force(ManualState::OpenFor(Duration::from_millis(500)), now);
            }
            _ => {
                let _ = b.force(ManualState::ForcedOpen, now);
            }
        }
    }
    let taken = b.snapshot();
    let Some(record) = changed(&taken, u) else {
        return Ok(Outcome::Skipped);
    };
    let mut restored = match Breaker::restore(&record) {
        Ok(restored) => restored,
        Err(e) => return refused(&e),
    };
    ensure(
        Breaker::restore(&restored.snapshot()).as_ref() == Ok(&restored),
        TARGET,
        0,
        "a restored breaker's own snapshot restores to another breaker",
    )?;
    let config = *restored.config();
    breaker_invariants(&restored, &config, 0)?;
    // The half-open maximum wait holds: the first request at the deadline
    // ends the period, whatever the probes did.
    if let Some(deadline) = restored.half_open_until() {
        let mut late = restored.clone();
        let _ = late.request(deadline);
        ensure(
            late.state() != BreakerState::HalfOpen,
            TARGET,
            0,
            "a restored half-open breaker outlives its maximum wait",
        )?;
    }
    for step in 1..=DRIVE_STEPS {
        if u.is_empty() {
            break;
        }
        now = now.saturating_add(Duration::from_millis(
            u.int_in_range(0..=3_000).unwrap_or(0),
        ));
        if let Admission::Admitted { permit, .. } = restored.request(now) {
            let outcome = CallOutcome {
                success: u.arbitrary().unwrap_or(true),
                duration: Duration::from_millis(u.int_in_range(0..=600).unwrap_or(0)),
            };
            let _ = restored.record(permit, outcome, now);
        }
        breaker_invariants(&restored, &config, step)?;
    }
    Ok(Outcome::Accepted {
        changed: record != taken,
    })
}

// ---------------------------------------------------------------------------
// The retry budget.

fn budget_config(u: &mut Unstructured<'_>) -> arbitrary::Result<Option<BudgetConfig>> {
    Ok(match u.int_in_range(0..=2u8)? {
        0 => BudgetConfig::grpc_millis(u.int_in_range(1..=1_000)?, u.int_in_range(1..=2_000)?).ok(),
        1 => BudgetConfig::aws()
            .capacity(u.int_in_range(1..=600)?)
            .retry_cost(u.int_in_range(0..=20)?)
            .timeout_cost(u.int_in_range(0..=20)?)
            .no_retry_increment(u.int_in_range(0..=3)?)
            .build()
            .ok(),
        _ => BudgetConfig::finagle()
            .window(Duration::from_millis(u.int_in_range(1_000..=60_000)?))
            .min_retries_per_sec(u.int_in_range(0..=20)?)
            .percent_can_retry_permille(u.int_in_range(0..=1_000)?)
            .build()
            .ok(),
    })
}

fn budget_step(b: &mut RetryBudget, now: Instant, u: &mut Unstructured<'_>) {
    let kind = if u.arbitrary().unwrap_or(false) {
        RetryKind::Timeout
    } else {
        RetryKind::Failure
    };
    match u.int_in_range(0..=4u8).unwrap_or(0) {
        0 => b.on_first_attempt(now),
        1 => b.on_failure(now),
        2 => b.on_success(now, AttemptKind::First),
        3 => b.on_success(now, AttemptKind::Retry(kind)),
        _ => {
            let _ = b.try_withdraw(kind, now);
        }
    }
}

fn budget(u: &mut Unstructured<'_>) -> Result<Outcome, Violation> {
    let Ok(Some(config)) = budget_config(u) else {
        return Ok(Outcome::Skipped);
    };
    let mut b = RetryBudget::new(config);
    let mut now = Instant::ORIGIN;
    let steps = u.int_in_range(0..=SETUP_STEPS).unwrap_or(0);
    for _ in 0..steps {
        now = now.saturating_add(Duration::from_millis(
            u.int_in_range(0..=2_000).unwrap_or(0),
        ));
        budget_step(&mut b, now, u);
    }
    let taken: BudgetSnapshot = b.snapshot();
    let Some(record) = changed(&taken, u) else {
        return Ok(Outcome::Skipped);
    };
    let mut restored = match RetryBudget::restore(&record) {
        Ok(restored) => restored,
        Err(e) => return refused(&e),
    };
    ensure(
        RetryBudget::restore(&restored.snapshot()) == Ok(restored),
        TARGET,
        0,
        "a restored budget's own snapshot restores to another budget",
    )?;
    ensure(
        restored.tokens() <= restored.max_tokens(),
        TARGET,
        0,
        "tokens above the capacity after a restore",
    )?;
    for step in 1..=DRIVE_STEPS {
        if u.is_empty() {
            break;
        }
        now = now.saturating_add(Duration::from_millis(
            u.int_in_range(0..=2_000).unwrap_or(0),
        ));
        budget_step(&mut restored, now, u);
        ensure(
            restored.tokens() <= restored.max_tokens(),
            TARGET,
            step,
            "tokens above the capacity after a restore",
        )?;
    }
    Ok(Outcome::Accepted {
        changed: record != taken,
    })
}
