//! Snapshots decoded from arbitrary bytes.
//!
//! The first byte picks the machine (retry machine, circuit breaker, retry
//! budget) and the format (JSON, or postcard, which is not self-describing); the
//! rest is decoded as that machine's snapshot. Whatever the bytes, decoding and
//! restoring never panic. A snapshot that decodes either restores or is refused
//! with a typed [`SnapshotError`] that names its field (a non-empty field, a
//! `snapshot.` code, a message that names the field). A snapshot that restores
//! gives a machine that keeps its invariants: its own snapshot is the one it was
//! restored from as far as the machine can tell (restoring that again gives the
//! same snapshot, through either format), and driven by a few events taken from
//! the end of the input it answers as a copy restored through the other format
//! does, with attempts never above the maximum, sleeps and rejections always in
//! the future, probes never above their permits, tokens never above the
//! maximum. A breaker snapshot is also restored into a type that keeps its
//! calls' durations (`CircuitBreaker<2, 8, 64>`): the same record restores
//! there, answers alike, and reads every metric alike but a count window's
//! durations, which are not known while a restored call is in the window and
//! are then exactly those of the calls recorded since.

use core::time::Duration;

use arbitrary::Unstructured;
use retry_core::{
    Action, Admission, AttemptKind, BreakerSnapshot, BreakerState, BudgetSnapshot, CallOutcome,
    CircuitBreaker, Event, Failure, Instant, Permit, RetryBudget, RetryKind, RetryMachine,
    RetrySnapshot, SnapshotError, Transition,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::shared::{ensure, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "snapshot";

/// Events driven through a restored machine.
const DRIVE_STEPS: usize = 24;
/// The breaker type the snapshots are restored into: 128 calls or 8 buckets.
type Breaker = CircuitBreaker<2, 8>;
/// The durations [`Kept`] keeps.
const KEPT_DURATIONS: usize = 64;
/// The same, keeping the durations of count windows up to 64 calls.
type Kept = CircuitBreaker<2, 8, KEPT_DURATIONS>;

/// The machine a snapshot input is for, and the format it is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A [`RetrySnapshot`].
    Retry,
    /// A [`BreakerSnapshot`] of a `CircuitBreaker<2, 8>`.
    Breaker,
    /// A [`BudgetSnapshot`].
    Budget,
}

/// The first byte of an input for `kind` written as JSON (`json`) or postcard.
#[must_use]
pub const fn header(kind: Kind, json: bool) -> u8 {
    match (kind, json) {
        (Kind::Retry, true) => 0,
        (Kind::Retry, false) => 1,
        (Kind::Breaker, true) => 2,
        (Kind::Breaker, false) => 3,
        (Kind::Budget, true) => 4,
        (Kind::Budget, false) => 5,
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8], json: bool) -> Option<T> {
    if json {
        serde_json::from_slice(bytes).ok()
    } else {
        postcard::from_bytes(bytes).ok()
    }
}

/// `value` through the other format and back (`json`: the format it came in).
fn other_format<T: Serialize + DeserializeOwned>(value: &T, json: bool) -> Option<T> {
    if json {
        postcard::from_bytes(&postcard::to_allocvec(value).ok()?).ok()
    } else {
        serde_json::from_slice(&serde_json::to_vec(value).ok()?).ok()
    }
}

/// A refused snapshot: the error must name a field and say so.
fn refused(e: &SnapshotError) -> Result<(), Violation> {
    let field = e.field();
    ensure(
        !field.is_empty() && e.code().starts_with("snapshot.") && e.to_string().contains(field),
        TARGET,
        0,
        "a refused snapshot's error does not name its field",
    )
}

/// Decodes `data` as a snapshot (see the module docs) and checks it.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let Some((&first, rest)) = data.split_first() else {
        return Ok(());
    };
    let json = first % 2 == 0;
    // The snapshot is everything up to a NUL (JSON) or all of it (postcard,
    // which ignores what follows the value); the drive reads the input's end.
    let tail = rest
        .iter()
        .rposition(|b| *b == 0)
        .and_then(|i| rest.get(i..))
        .unwrap_or(&[]);
    let body = if json {
        rest.split(|b| *b == 0).next().unwrap_or(&[])
    } else {
        rest
    };
    let mut u = Unstructured::new(tail);
    match first / 2 % 3 {
        0 => retry(body, json, &mut u),
        1 => breaker(body, json, &mut u),
        _ => budget(body, json, &mut u),
    }
}

fn retry(body: &[u8], json: bool, u: &mut Unstructured<'_>) -> Result<(), Violation> {
    let Some(snapshot) = decode::<RetrySnapshot>(body, json) else {
        return Ok(());
    };
    let mut m = match RetryMachine::restore(&snapshot) {
        Ok(m) => m,
        Err(e) => return refused(&e),
    };
    let again = m.snapshot();
    let twin_snapshot = other_format(&again, json);
    ensure(
        twin_snapshot == Some(again),
        TARGET,
        0,
        "a restored machine's snapshot does not survive the other format",
    )?;
    let mut twin = match RetryMachine::restore(&again) {
        Ok(twin) if twin.snapshot() == again => twin,
        _ => {
            return ensure(
                false,
                TARGET,
                0,
                "a restored machine's own snapshot does not restore to the same",
            )
        }
    };
    let policy = *m.policy();
    let mut now = Instant::from_nanos(u.arbitrary().unwrap_or(0));
    for step in 1..=DRIVE_STEPS {
        if u.is_empty() {
            break;
        }
        let event = match u.int_in_range(0..=9u8).unwrap_or(0) {
            0 => Event::Start,
            1 => Event::Succeeded,
            2 => Event::Failed(if u.arbitrary().unwrap_or(true) {
                Failure::retryable()
            } else {
                Failure::permanent()
            }),
            3 => Event::TimedOut,
            4 | 5 => Event::Woke,
            6 => Event::Cancelled,
            7 => Event::Granted,
            8 => Event::Refused,
            _ => Event::Rejected {
                until: Some(now.saturating_add(Duration::from_millis(50))),
            },
        };
        now = now.saturating_add(Duration::from_millis(u64::from(
            u.arbitrary::<u16>().unwrap_or(0),
        )));
        let action = m.try_poll(event, now);
        ensure(
            twin.try_poll(event, now) == action,
            TARGET,
            step,
            "a restored machine and its copy through the other format answer differently",
        )?;
        ensure(
            policy.attempts_are_unlimited() || m.attempts() <= policy.max_attempts(),
            TARGET,
            step,
            "attempts above the maximum after a restore",
        )?;
        if let Ok(Action::Sleep { until, .. }) = action {
            ensure(
                until > now || until == Instant::MAX,
                TARGET,
                step,
                "a sleep not after now from a restored machine",
            )?;
        }
        if let Ok(Action::Attempt { number, .. }) = action {
            ensure(
                number == m.attempts()
                    && (policy.attempts_are_unlimited() || number <= policy.max_attempts()),
                TARGET,
                step,
                "an attempt numbered other than the count, or above the maximum",
            )?;
        }
    }
    Ok(())
}

fn breaker(body: &[u8], json: bool, u: &mut Unstructured<'_>) -> Result<(), Violation> {
    let Some(snapshot) = decode::<BreakerSnapshot<2, 8>>(body, json) else {
        return Ok(());
    };
    let mut b = match Breaker::restore(&snapshot) {
        Ok(b) => b,
        Err(e) => return refused(&e),
    };
    let again = b.snapshot();
    ensure(
        other_format(&again, json) == Some(again),
        TARGET,
        0,
        "a restored breaker's snapshot does not survive the other format",
    )?;
    let mut twin = match Breaker::restore(&again) {
        Ok(twin) if twin.snapshot() == again => twin,
        _ => {
            return ensure(
                false,
                TARGET,
                0,
                "a restored breaker's own snapshot does not restore to the same",
            )
        }
    };
    // The record read for a type that keeps durations: the same record, the
    // same breaker.
    let kept_record = decode::<BreakerSnapshot<2, 8, KEPT_DURATIONS>>(body, json);
    let Some(mut kept) = kept_record.and_then(|r| Kept::restore(&r).ok()) else {
        return ensure(
            false,
            TARGET,
            0,
            "a record that restores does not restore into a type keeping durations",
        );
    };
    ensure(
        serde_json::to_vec(&kept.snapshot()).ok() == serde_json::to_vec(&again).ok(),
        TARGET,
        0,
        "a breaker keeping durations snapshots differently",
    )?;
    let config = *b.config();
    // A count window whose durations `kept` keeps: its size.
    let kept_window = match config.window() {
        Some(retry_core::Window::Count { calls }) if usize::from(calls) <= KEPT_DURATIONS => {
            Some(calls)
        }
        _ => None,
    };
    // The durations recorded into the window since the restore, and whether
    // the restored calls are known to be gone (none restored, or the window
    // cleaned since).
    let mut since: Vec<Duration> = Vec::new();
    let mut clean = b.stats(Instant::ORIGIN).calls == 0;
    let mut now = Instant::from_nanos(u.arbitrary().unwrap_or(0));
    let mut permits: [Option<(Permit, Permit, Permit)>; 8] = Default::default();
    for step in 1..=DRIVE_STEPS {
        if u.is_empty() {
            break;
        }
        now = now.saturating_add(Duration::from_millis(u64::from(
            u.arbitrary::<u16>().unwrap_or(0),
        )));
        let slot: usize = u.int_in_range(0..=7).unwrap_or(0);
        match u.int_in_range(0..=2u8).unwrap_or(0) {
            0 => {
                let Some(free) = permits.get_mut(slot).filter(|p| p.is_none()) else {
                    continue;
                };
                match (b.request(now), twin.request(now), kept.request(now)) {
                    (
                        Admission::Admitted { permit, transition },
                        Admission::Admitted {
                            permit: p2,
                            transition: t2,
                        },
                        Admission::Admitted {
                            permit: p3,
                            transition: t3,
                        },
                    ) => {
                        ensure(
                            transition == t2 && permit == p2 && t3 == t2 && p3 == p2,
                            TARGET,
                            step,
                            "a restored breaker and its copy admit differently",
                        )?;
                        if cleans(transition) {
                            clean = true;
                            since.clear();
                        }
                        *free = Some((permit, p2, p3));
                    }
                    (
                        rejected @ Admission::Rejected {
                            until, transition, ..
                        },
                        other,
                        third,
                    ) => {
                        ensure(
                            rejected == other && until.is_none_or(|t| t > now) && third == other,
                            TARGET,
                            step,
                            "a rejection differs from the copy's or names a past time",
                        )?;
                        if cleans(transition) {
                            clean = true;
                            since.clear();
                        }
                    }
                    _ => ensure(
                        false,
                        TARGET,
                        step,
                        "a restored breaker and its copy disagree on admitting",
                    )?,
                }
            }
            1 => {
                let Some((p1, p2, p3)) = permits.get_mut(slot).and_then(Option::take) else {
                    continue;
                };
                let outcome = CallOutcome {
                    success: u.arbitrary().unwrap_or(true),
                    duration: Duration::from_millis(u64::from(u.arbitrary::<u8>().unwrap_or(0))),
                };
                let into_window =
                    matches!(b.state(), BreakerState::Closed | BreakerState::MetricsOnly);
                let recorded = b.record(p1, outcome, now);
                ensure(
                    recorded == twin.record(p2, outcome, now)
                        && recorded == kept.record(p3, outcome, now),
                    TARGET,
                    step,
                    "a restored breaker and its copy record differently",
                )?;
                if into_window && recorded.ignored.is_none() {
                    since.push(outcome.duration);
                }
                if cleans(recorded.transition) {
                    clean = true;
                    since.clear();
                }
            }
            _ => {
                let Some((p1, p2, p3)) = permits.get_mut(slot).and_then(Option::take) else {
                    continue;
                };
                b.release(p1, now);
                twin.release(p2, now);
                kept.release(p3, now);
            }
        }
        ensure(
            b.probes_in_flight() <= config.half_open_permits(),
            TARGET,
            step,
            "more probes in flight than permits after a restore",
        )?;
        let calls = b.stats(now).calls;
        let fits = match config.window() {
            Some(retry_core::Window::Count { calls: size }) => calls <= u32::from(size),
            _ => true,
        };
        ensure(
            fits && b.metrics(now) == twin.metrics(now),
            TARGET,
            step,
            "a window above its size, or readings that differ from the copy's",
        )?;
        let mut read = kept.metrics(now);
        let expected = match kept_window {
            Some(size) if b.state() != BreakerState::HalfOpen => {
                kept_durations(&since, clean, size, read.window.calls)
            }
            _ => (read.call_duration_total, read.call_duration_mean),
        };
        ensure(
            (read.call_duration_total, read.call_duration_mean) == expected,
            TARGET,
            step,
            "a count window's durations are not those of the calls recorded since the restore",
        )?;
        if kept_window.is_some() {
            let plain = b.metrics(now);
            read.call_duration_total = plain.call_duration_total;
            read.call_duration_mean = plain.call_duration_mean;
        }
        ensure(
            read == b.metrics(now),
            TARGET,
            step,
            "a breaker keeping durations reads differently",
        )?;
    }
    Ok(())
}

/// Whether a transition starts a clean window (closed or metrics-only).
fn cleans(transition: Option<Transition>) -> bool {
    transition.is_some_and(|t| matches!(t.to, BreakerState::Closed | BreakerState::MetricsOnly))
}

/// The total and mean duration a count window of `size` calls that holds
/// `calls` reads, `since` recorded into it after the restore (or the clean
/// window that followed it, `clean`): not known while a restored call is
/// still in the window, then those of its last `calls` calls.
fn kept_durations(
    since: &[Duration],
    clean: bool,
    size: u16,
    calls: u32,
) -> (Option<Duration>, Option<Duration>) {
    if !clean && since.len() < usize::from(size) {
        return (None, None);
    }
    let held = since
        .len()
        .min(usize::try_from(calls).unwrap_or(usize::MAX));
    let total: u128 = since
        .get(since.len().saturating_sub(held)..)
        .unwrap_or(&[])
        .iter()
        .map(Duration::as_nanos)
        .sum();
    match u64::try_from(total) {
        Ok(nanos) if nanos != u64::MAX => (
            Some(Duration::from_nanos(nanos)),
            nanos
                .checked_div(u64::from(calls))
                .map(Duration::from_nanos),
        ),
        _ => (None, None),
    }
}

fn budget(body: &[u8], json: bool, u: &mut Unstructured<'_>) -> Result<(), Violation> {
    let Some(snapshot) = decode::<BudgetSnapshot>(body, json) else {
        return Ok(());
    };
    let mut b = match RetryBudget::restore(&snapshot) {
        Ok(b) => b,
        Err(e) => return refused(&e),
    };
    ensure(
        b.snapshot() == snapshot && other_format(&snapshot, json) == Some(snapshot),
        TARGET,
        0,
        "a restored budget's snapshot differs from the one it came from",
    )?;
    let mut now = Instant::from_nanos(u.arbitrary().unwrap_or(0));
    for step in 1..=DRIVE_STEPS {
        if u.is_empty() {
            break;
        }
        now = now.saturating_add(Duration::from_millis(u64::from(
            u.arbitrary::<u16>().unwrap_or(0),
        )));
        match u.int_in_range(0..=3u8).unwrap_or(0) {
            0 => b.on_first_attempt(now),
            1 => b.on_failure(now),
            2 => b.on_success(now, AttemptKind::First),
            _ => {
                let _ = b.try_withdraw(RetryKind::Failure, now);
            }
        }
        ensure(
            b.tokens() <= b.max_tokens(),
            TARGET,
            step,
            "tokens above the maximum after a restore",
        )?;
    }
    Ok(())
}
