//! Snapshots that resume: a machine snapshotted at a random step, carried through
//! JSON and through postcard (a compact binary format that is not
//! self-describing) and restored, answers every later input exactly as the
//! original. Random policies, configs and inputs, 2 000 cases per machine. Then
//! the errors: every kind of corrupt or inconsistent snapshot is a typed error
//! naming its field.

#![cfg(feature = "serde")]
// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck};
use retry_core::{
    Action, Admission, AttemptKind, Backoff, BreakerConfig, BreakerSnapshot, BudgetConfig,
    BudgetSnapshot, CallOutcome, CircuitBreaker, CircuitOpen, Event, Failure, FailureKind,
    HalfOpenTimeout, HalfOpenVerdict, Hint, HintMode, Instant, Jitter, ManualState, Permit, Rate,
    Resolution, RetryBudget, RetryKind, RetryMachine, RetryPolicy, RetrySnapshot, SnapshotError,
    Window,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

const CASES: u64 = 2_000;

fn check<A: quickcheck::Testable>(prop: A) {
    QuickCheck::new()
        .tests(CASES)
        .max_tests(CASES * 10)
        .quickcheck(prop);
}

fn below(g: &mut Gen, n: u64) -> u64 {
    u64::arbitrary(g) % n.max(1)
}

fn pick<T: Copy>(g: &mut Gen, items: &[T]) -> T {
    *g.choose(items).unwrap()
}

/// Through JSON and back.
fn via_json<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let text = serde_json::to_string(value).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Through postcard and back.
fn via_postcard<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let bytes = postcard::to_allocvec(value).unwrap();
    postcard::from_bytes(&bytes).unwrap()
}

// ---------------------------------------------------------------------------
// The retry machine.

fn duration(g: &mut Gen) -> Duration {
    match below(g, 8) {
        0 => Duration::ZERO,
        1 => Duration::MAX,
        2 => Duration::from_nanos(u64::arbitrary(g)),
        3 => Duration::new(u64::arbitrary(g), u32::arbitrary(g) % 1_000_000_000),
        _ => Duration::from_millis(below(g, 5_000)),
    }
}

fn fraction(g: &mut Gen) -> f64 {
    below(g, 1001) as f64 / 1000.0
}

fn jitter(g: &mut Gen) -> Jitter {
    match below(g, 7) {
        0 => Jitter::None,
        1 => Jitter::Full,
        2 => Jitter::Equal,
        3 => Jitter::Decorrelated,
        4 => Jitter::Subtract(fraction(g)),
        5 => Jitter::Add(fraction(g)),
        _ => Jitter::Spread(fraction(g)),
    }
}

fn backoff(g: &mut Gen) -> Backoff {
    match below(g, 5) {
        0 => Backoff::None,
        1 => Backoff::constant(duration(g)),
        2 => Backoff::linear_by(duration(g), duration(g)),
        3 => Backoff::exponential(duration(g), pick(g, &[1.0, 1.5, 2.0, 3.3, 1e300])),
        _ => Backoff::fibonacci(duration(g)),
    }
}

fn sorted(a: Duration, b: Duration) -> (Duration, Duration) {
    (a.min(b), a.max(b))
}

fn policy(g: &mut Gen) -> RetryPolicy {
    let (min_delay, max_delay) = sorted(duration(g), duration(g));
    let (hint_min, hint_max) = sorted(duration(g), duration(g));
    let positive =
        |g: &mut Gen| bool::arbitrary(g).then(|| duration(g).max(Duration::from_nanos(1)));
    let backoff = backoff(g);
    RetryPolicy::builder()
        .max_attempts(match below(g, 10) {
            0 => u32::MAX,
            _ => 1 + below(g, 12) as u32,
        })
        .backoff(backoff)
        .min_delay(min_delay)
        // A valid cap is at least the curve's first delay.
        .max_delay(max_delay.max(backoff.initial()))
        .jitter(jitter(g))
        .resolution(pick(g, &[Resolution::Millis, Resolution::Nanos]))
        .hints(match below(g, 3) {
            0 => HintMode::Override {
                min: hint_min,
                max: hint_max,
            },
            1 => HintMode::AtLeast { cap: duration(g) },
            _ => HintMode::Ignore,
        })
        .budget(positive(g))
        .attempt_timeout(positive(g))
        .cap_attempt_to_budget(bool::arbitrary(g))
        .retry_timeouts(bool::arbitrary(g))
        .use_retry_budget(bool::arbitrary(g))
        .on_circuit_open(pick(g, &[CircuitOpen::GiveUp, CircuitOpen::Wait]))
        .idempotent(bool::arbitrary(g))
        .build()
        .unwrap()
}

fn failure(g: &mut Gen) -> Failure {
    let f = if below(g, 6) == 0 {
        Failure::permanent()
    } else {
        Failure::retryable()
    }
    .with_kind(pick(
        g,
        &[
            FailureKind::Error,
            FailureKind::Connection,
            FailureKind::Status(503),
        ],
    ));
    match below(g, 5) {
        0 => f.with_hint(Hint::RetryAfter(duration(g))),
        1 => f.with_hint(Hint::Pushback(duration(g))),
        _ => f,
    }
}

/// What the driver does next: mostly the sensible answer to the pending
/// action, sometimes any event at all (misuse), with time moving on.
#[derive(Clone, Debug)]
struct Choice {
    pick: u8,
    advance: Duration,
    failure: Failure,
    until: Option<Duration>,
}

impl Arbitrary for Choice {
    fn arbitrary(g: &mut Gen) -> Self {
        Choice {
            pick: u8::arbitrary(g),
            advance: match below(g, 4) {
                0 => Duration::ZERO,
                1 => duration(g),
                _ => Duration::from_millis(below(g, 3_000)),
            },
            failure: failure(g),
            until: bool::arbitrary(g).then(|| Duration::from_millis(below(g, 10_000))),
        }
    }
}

fn event_for(pending: Option<Action>, c: &Choice, now: Instant) -> (Event, Instant) {
    let later = now.saturating_add(c.advance);
    let rejected = Event::Rejected {
        until: c.until.map(|d| later.saturating_add(d)),
    };
    let any = [
        Event::Start,
        Event::Succeeded,
        Event::Failed(c.failure),
        Event::TimedOut,
        Event::Woke,
        Event::Cancelled,
        Event::Granted,
        Event::Refused,
        rejected,
    ];
    if c.pick % 10 == 0 {
        return (any[usize::from(c.pick / 10) % any.len()], later);
    }
    let event = match pending {
        None => Event::Start,
        Some(Action::Attempt { .. }) => match c.pick % 7 {
            0 => Event::Succeeded,
            1 => Event::TimedOut,
            2 => rejected,
            3 if c.pick > 200 => Event::Cancelled,
            _ => Event::Failed(c.failure),
        },
        Some(Action::Sleep { until, .. }) => {
            return match c.pick % 5 {
                0 => (Event::Woke, later), // maybe early, maybe late
                1 if c.pick > 200 => (Event::Cancelled, later),
                _ => (Event::Woke, until.max(now)),
            };
        }
        Some(Action::Withdraw { .. }) => {
            if c.pick % 4 == 0 {
                Event::Refused
            } else {
                Event::Granted
            }
        }
        Some(_) => any[usize::from(c.pick) % any.len()],
    };
    (event, later)
}

#[test]
fn a_retry_machine_resumes_exactly_through_json_and_postcard() {
    fn prop(seed: u64, choices: Vec<Choice>, cut: usize, g_seed: u64) -> Result<(), String> {
        let mut g = Gen::new(64);
        // The policy from its own seed, so that quickcheck's size does not bias it.
        for _ in 0..(g_seed % 7) {
            let _ = u8::arbitrary(&mut g);
        }
        let policy = policy(&mut g);
        let cut = cut % (choices.len() + 1);
        let mut original = RetryMachine::new(&policy, seed);
        let mut now = Instant::ORIGIN;
        let mut copies: Vec<RetryMachine> = Vec::new();
        for (i, c) in choices.iter().enumerate() {
            if i == cut {
                let snapshot = original.snapshot();
                for restored in [via_json(&snapshot), via_postcard(&snapshot)] {
                    if restored != snapshot {
                        return Err(format!("the snapshot changed on its way: {restored:?}"));
                    }
                    let machine = RetryMachine::restore(&restored)
                        .map_err(|e| format!("a snapshot of a real machine refused: {e}"))?;
                    if machine.snapshot() != snapshot {
                        return Err("a restored machine snapshots differently".into());
                    }
                    if machine != original {
                        return Err(format!("restored {machine:?} != {original:?}"));
                    }
                    copies.push(machine);
                }
            }
            let (event, at) = event_for(original.pending(), c, now);
            now = at;
            let expected = original.try_poll(event, now);
            for copy in &mut copies {
                let got = copy.try_poll(event, now);
                if got != expected {
                    return Err(format!(
                        "{policy}: step {i} ({event} at {now}): original {expected:?}, restored {got:?}"
                    ));
                }
            }
        }
        Ok(())
    }
    check(prop as fn(u64, Vec<Choice>, usize, u64) -> Result<(), String>);
}

// ---------------------------------------------------------------------------
// The circuit breaker.

type Breaker = CircuitBreaker<2, 8>;

fn rate(g: &mut Gen) -> Rate {
    Rate::from_basis_points(pick(g, &[1, 2_500, 5_000, 6_667, 10_000]))
}

fn breaker_config(g: &mut Gen) -> BreakerConfig {
    let window = match below(g, 3) {
        0 => None,
        1 => Some(Window::Count {
            calls: 1 + below(g, 128) as u16,
        }),
        _ => Some(Window::Time {
            length: Duration::from_millis(100 + below(g, 5_000)),
            buckets: 1 + below(g, 8) as u16,
        }),
    };
    let (failure_rate, slow_rate) = match window {
        Some(_) => (
            bool::arbitrary(g).then(|| rate(g)),
            bool::arbitrary(g).then(|| rate(g)),
        ),
        None => (None, None),
    };
    let threshold = if failure_rate.is_none() && slow_rate.is_none() || bool::arbitrary(g) {
        Some(1 + below(g, 5) as u32)
    } else {
        None
    };
    let max_minimum = match window {
        Some(Window::Count { calls }) => u64::from(calls),
        _ => 20,
    };
    let verdict = if (failure_rate.is_some() || slow_rate.is_some()) && bool::arbitrary(g) {
        HalfOpenVerdict::Rates {
            probes: 1 + below(g, 5) as u32,
        }
    } else {
        HalfOpenVerdict::Consecutive
    };
    let initial = Duration::from_millis(1 + below(g, 1_000));
    BreakerConfig::builder()
        .failure_threshold(threshold)
        .failure_rate(failure_rate)
        .slow_call_rate(slow_rate)
        .slow_call_duration(Duration::from_millis(1 + below(g, 500)))
        .window(window)
        .minimum_calls(1 + below(g, max_minimum.min(20)) as u32)
        .open_backoff(pick(
            g,
            &[
                Backoff::constant(initial),
                Backoff::exponential(initial, 2.0),
                Backoff::fibonacci(initial),
            ],
        ))
        .max_open_duration(initial * (1 + below(g, 10) as u32))
        .open_jitter(jitter(g))
        .seed(u64::arbitrary(g))
        .half_open_permits(1 + below(g, 4) as u32)
        .success_threshold(1 + below(g, 4) as u32)
        .half_open_verdict(verdict)
        .max_half_open_wait(bool::arbitrary(g).then(|| Duration::from_millis(1 + below(g, 5_000))))
        .on_half_open_timeout(pick(g, &[HalfOpenTimeout::Reopen, HalfOpenTimeout::Close]))
        .build()
        .unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Advance(u64),
    Request,
    Record {
        index: usize,
        success: bool,
        took_ms: u64,
    },
    Release {
        index: usize,
    },
    Force(ManualState),
    Ensure(ManualState),
    Reset,
}

fn manual(g: &mut Gen) -> ManualState {
    match below(g, 7) {
        0 => ManualState::Closed,
        1 => ManualState::ForcedOpen,
        2 => ManualState::Disabled,
        3 => ManualState::MetricsOnly,
        4 => ManualState::OpenFor(Duration::from_millis(below(g, 10_000))),
        5 => ManualState::OpenUntil(Instant::from_millis(below(g, 100_000))),
        _ => ManualState::HalfOpen,
    }
}

#[derive(Clone, Debug)]
struct BreakerCase {
    config: BreakerConfig,
    ops: Vec<Op>,
    cut: usize,
}

impl Arbitrary for BreakerCase {
    fn arbitrary(g: &mut Gen) -> Self {
        let config = breaker_config(g);
        let len = below(g, 150) as usize;
        let ops = (0..len)
            .map(|_| match below(g, 100) {
                0..=19 => Op::Advance(pick(g, &[0, 1, 50, 250, 999, 2_000, 7_000])),
                20..=49 => Op::Request,
                50..=84 => Op::Record {
                    index: below(g, 8) as usize,
                    success: bool::arbitrary(g),
                    took_ms: pick(g, &[0, 1, 100, 300, 600]),
                },
                85..=92 => Op::Release {
                    index: below(g, 8) as usize,
                },
                93..=95 => Op::Force(manual(g)),
                96..=98 => Op::Ensure(manual(g)),
                _ => Op::Reset,
            })
            .collect();
        let cut = below(g, len as u64 + 1) as usize;
        BreakerCase { config, ops, cut }
    }
}

/// A breaker and the permits its driver holds.
struct Driver {
    breaker: Breaker,
    permits: Vec<Permit>,
    now: Instant,
}

impl Driver {
    fn step(&mut self, op: Op) -> String {
        let now = self.now;
        match op {
            Op::Advance(ms) => {
                self.now = now.saturating_add(Duration::from_millis(ms));
                String::new()
            }
            Op::Request => match self.breaker.request(now) {
                Admission::Admitted { permit, transition } => {
                    let text = format!("admitted {} {transition:?}", permit.is_probe());
                    self.permits.push(permit);
                    text
                }
                rejected => format!("{rejected:?}"),
            },
            Op::Record {
                index,
                success,
                took_ms,
            } => {
                if self.permits.is_empty() {
                    return String::new();
                }
                let permit = self.permits.remove(index % self.permits.len());
                let outcome = CallOutcome {
                    success,
                    duration: Duration::from_millis(took_ms),
                };
                format!("{:?}", self.breaker.record(permit, outcome, now))
            }
            Op::Release { index } => {
                if !self.permits.is_empty() {
                    let permit = self.permits.remove(index % self.permits.len());
                    self.breaker.release(permit, now);
                }
                String::new()
            }
            Op::Force(target) => format!("{:?}", self.breaker.force(target, now)),
            Op::Ensure(target) => format!("{:?}", self.breaker.ensure(target, now)),
            Op::Reset => format!("{:?}", self.breaker.reset(now)),
        }
    }
}

#[test]
fn a_breaker_resumes_exactly_through_json_and_postcard() {
    fn prop(case: BreakerCase) -> Result<(), String> {
        // Permits are not `Clone`: each copy's driver gets its own by running
        // the same inputs up to the cut (the breaker is deterministic), and then
        // its breaker is replaced by the restored one.
        let drivers = || Driver {
            breaker: Breaker::new(case.config).unwrap(),
            permits: Vec::new(),
            now: Instant::ORIGIN,
        };
        let (mut original, mut json, mut binary) = (drivers(), drivers(), drivers());
        for op in &case.ops[..case.cut] {
            original.step(*op);
            json.step(*op);
            binary.step(*op);
        }
        let snapshot = original.breaker.snapshot();
        let (a, b) = (via_json(&snapshot), via_postcard(&snapshot));
        if a != snapshot || b != snapshot {
            return Err("the snapshot changed on its way".into());
        }
        json.breaker =
            Breaker::restore(&a).map_err(|e| format!("a real breaker's snapshot refused: {e}"))?;
        binary.breaker = Breaker::restore(&b).map_err(|e| format!("refused: {e}"))?;
        if json.breaker.snapshot() != snapshot {
            return Err("a restored breaker snapshots differently".into());
        }
        // Equal as the docs promise (a wrapped count window included).
        if json.breaker != original.breaker || binary.breaker != original.breaker {
            return Err(format!(
                "restored {:?} != {:?}",
                json.breaker, original.breaker
            ));
        }
        for (i, op) in case.ops[case.cut..].iter().enumerate() {
            let expected = original.step(*op);
            let (x, y) = (json.step(*op), binary.step(*op));
            if x != expected || y != expected {
                return Err(format!(
                    "step {} ({op:?}): original {expected}, json {x}, postcard {y}",
                    case.cut + i
                ));
            }
            let now = original.now;
            if json.breaker.metrics(now) != original.breaker.metrics(now) {
                return Err(format!("step {}: the readings differ", case.cut + i));
            }
        }
        Ok(())
    }
    check(prop as fn(BreakerCase) -> Result<(), String>);
}

// ---------------------------------------------------------------------------
// The retry budget.

fn budget_config(g: &mut Gen) -> BudgetConfig {
    match below(g, 3) {
        0 => BudgetConfig::grpc_millis(1 + below(g, 1000) as u32, 1 + below(g, 2_000) as u32)
            .unwrap(),
        1 => BudgetConfig::aws()
            .capacity(1 + below(g, 600) as u32)
            .retry_cost(below(g, 20) as u32)
            .timeout_cost(below(g, 20) as u32)
            .no_retry_increment(below(g, 3) as u32)
            .build()
            .unwrap(),
        _ => BudgetConfig::finagle()
            .window(Duration::from_millis(1_000 + below(g, 59_000)))
            .min_retries_per_sec(below(g, 20) as u32)
            .percent_can_retry_permille(below(g, 1_001) as u32)
            .build()
            .unwrap(),
    }
}

#[test]
fn a_retry_budget_resumes_exactly_through_json_and_postcard() {
    fn prop(steps: Vec<(u8, u16)>, cut: usize, g_seed: u8) -> Result<(), String> {
        let mut g = Gen::new(64);
        for _ in 0..g_seed {
            let _ = u8::arbitrary(&mut g);
        }
        let config = budget_config(&mut g);
        let cut = cut % (steps.len() + 1);
        let mut original = RetryBudget::new(config);
        let mut copies: Vec<RetryBudget> = Vec::new();
        let mut now = Instant::ORIGIN;
        for (i, (op, dt)) in steps.iter().enumerate() {
            if i == cut {
                let snapshot = original.snapshot();
                for s in [via_json(&snapshot), via_postcard(&snapshot)] {
                    let restored = RetryBudget::restore(&s).map_err(|e| format!("refused: {e}"))?;
                    if restored != original {
                        return Err("a restored budget differs".into());
                    }
                    copies.push(restored);
                }
            }
            now = now.saturating_add(Duration::from_millis(u64::from(*dt)));
            let apply = |b: &mut RetryBudget| -> String {
                match op % 5 {
                    0 => {
                        b.on_first_attempt(now);
                        String::new()
                    }
                    1 => {
                        b.on_failure(now);
                        String::new()
                    }
                    2 => {
                        b.on_success(now, AttemptKind::First);
                        String::new()
                    }
                    3 => {
                        b.on_success(now, AttemptKind::Retry(RetryKind::Timeout));
                        String::new()
                    }
                    _ => format!("{:?}", b.try_withdraw(RetryKind::Failure, now)),
                }
            };
            let expected = apply(&mut original);
            for copy in &mut copies {
                if apply(copy) != expected || copy.tokens() != original.tokens() {
                    return Err(format!("{config}: step {i} differs"));
                }
            }
        }
        Ok(())
    }
    check(prop as fn(Vec<(u8, u16)>, usize, u8) -> Result<(), String>);
}

// ---------------------------------------------------------------------------
// Corrupt and inconsistent snapshots: typed errors naming the field.

/// `value` as JSON, changed by `edit`, read back: the decoded snapshot.
fn edited<T: Serialize + DeserializeOwned>(
    value: &T,
    edit: impl FnOnce(&mut serde_json::Value),
) -> T {
    let mut json = serde_json::to_value(value).unwrap();
    edit(&mut json);
    serde_json::from_value(json).unwrap()
}

fn sleeping_machine() -> RetryMachine {
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let mut m = RetryMachine::new(&policy, 1);
    let _ = m.poll(Event::Start, Instant::ORIGIN);
    let _ = m.poll(Event::Failed(Failure::retryable()), Instant::from_millis(5));
    m
}

#[test]
fn corrupt_retry_snapshots_are_typed_errors_naming_the_field() {
    let s = sleeping_machine().snapshot();
    let err =
        |edit: fn(&mut serde_json::Value)| RetryMachine::restore(&edited(&s, edit)).unwrap_err();

    let e = err(|j| j["version"] = 2.into());
    assert_eq!(
        e,
        SnapshotError::UnsupportedVersion {
            found: 2,
            supported: 1
        }
    );
    assert_eq!(
        (e.field(), e.code()),
        ("version", "snapshot.unsupported_version")
    );

    let e = err(|j| j["attempts"] = 7.into());
    assert_eq!(
        e,
        SnapshotError::AboveMaximum {
            field: "attempts",
            value: 7,
            maximum: 3
        }
    );

    let e = err(|j| j["policy"]["max_attempts"] = 0.into());
    assert_eq!((e.field(), e.code()), ("max_attempts", "snapshot.policy"));
    let e = err(|j| j["policy"]["jitter"] = serde_json::json!({ "add": 1.5 }));
    assert_eq!((e.field(), e.code()), ("jitter", "snapshot.policy"));

    // A sleep that is already over is not pending.
    let e = err(|j| j["latest_now"] = serde_json::to_value(Instant::from_secs(3_600)).unwrap());
    assert_eq!(
        (e.field(), e.code()),
        ("phase.until", "snapshot.inconsistent")
    );
    // An idle machine that has run attempts.
    let e = err(|j| j["phase"] = "idle".into());
    assert_eq!(e.field(), "phase");
    // An attempt in flight that is not the last one started.
    let e = err(
        |j| j["phase"] = serde_json::json!({ "attempting": { "number": 2, "started": 5_000_000, "deadline": null } }),
    );
    assert_eq!(e.field(), "phase.number");
    // Waiting for a retry budget the policy does not use.
    let e = err(
        |j| j["phase"] = serde_json::json!({ "withdrawing": { "retry": 1, "after_timeout": false, "delay": { "secs": 1, "nanos": 0 }, "reason": "curve" } }),
    );
    assert_eq!(e.field(), "phase");
    // A finished call that ran another number of attempts.
    let e = err(|j| j["phase"] = serde_json::json!({ "done": { "attempts": 2 } }));
    assert_eq!(e.field(), "phase.attempts");
    let e = err(|j| j["curve_restarted_at"] = 3.into());
    assert_eq!(e.field(), "curve_restarted_at");
    for e in [
        err(|j| j["version"] = 9.into()),
        err(|j| j["attempts"] = 70.into()),
    ] {
        assert!(e.to_string().starts_with(e.field()), "{e}");
    }
}

fn breaker_with_calls() -> CircuitBreaker<1, 0> {
    let config = BreakerConfig::builder()
        .failure_threshold(3)
        .failure_rate(Rate::from_percent(50))
        .count_window(8)
        .minimum_calls(8)
        .half_open_permits(2)
        .max_half_open_wait(Duration::from_secs(9))
        .build()
        .unwrap();
    let mut b = CircuitBreaker::<1, 0>::new(config).unwrap();
    for success in [true, false, true] {
        let Admission::Admitted { permit, .. } = b.request(Instant::ORIGIN) else {
            panic!()
        };
        let _ = b.record(
            permit,
            CallOutcome {
                success,
                duration: Duration::from_millis(1),
            },
            Instant::ORIGIN,
        );
    }
    b
}

#[test]
fn corrupt_breaker_snapshots_are_typed_errors_naming_the_field() {
    let s = breaker_with_calls().snapshot();
    let err = |edit: fn(&mut serde_json::Value)| {
        CircuitBreaker::<1, 0>::restore(&edited(&s, edit)).unwrap_err()
    };
    assert_eq!(err(|j| j["version"] = 0.into()).field(), "version");
    // More calls than the window holds.
    let e = err(|j| j["window"]["count"]["calls"] = 9.into());
    assert_eq!(
        e,
        SnapshotError::AboveMaximum {
            field: "window.calls",
            value: 9,
            maximum: 8
        }
    );
    // More words than this breaker type holds (one 64-call word).
    let e = err(|j| j["window"]["count"]["failed"] = serde_json::json!([0, 0]));
    assert_eq!(
        e,
        SnapshotError::AboveCapacity {
            field: "window.failed",
            requested: 2,
            capacity: 1
        }
    );
    // A call marked past the window's calls.
    let e = err(|j| j["window"]["count"]["slow"] = serde_json::json!([8]));
    assert_eq!(e.field(), "window.failed");
    // A window of another kind than the config's.
    let e = err(|j| j["window"] = "none".into());
    assert_eq!((e.field(), e.code()), ("window", "snapshot.inconsistent"));
    // A config that fails validation, or does not fit this type.
    let e = err(|j| j["config"]["half_open_permits"] = 0.into());
    assert_eq!(
        (e.field(), e.code()),
        ("half_open_permits", "snapshot.breaker_config")
    );
    let e = err(|j| {
        j["config"]["window"] = serde_json::json!({ "count": { "calls": 100 } });
        j["config"]["minimum_calls"] = 10.into();
    });
    assert_eq!(e.field(), "window.calls");
    // A streak that should have tripped the breaker.
    let e = err(|j| j["consecutive_failures"] = 3.into());
    assert_eq!(e.field(), "consecutive_failures");
    assert_eq!(err(|j| j["reopens"] = 2.into()).field(), "reopens");
    // Half-open probe counts that do not add up, or exceed the permits.
    let probing = |in_flight: u32, admitted: u32, calls: u32, failures: u32| {
        serde_json::json!({ "half_open": {
            "in_flight": in_flight, "admitted": admitted,
            "reported": { "calls": calls, "failures": failures, "slow": 0, "slow_failures": 0 },
            "deadline": 9_000_000_000u64 } })
    };
    let restore_state = |state: serde_json::Value| {
        let mut j = serde_json::to_value(s).unwrap();
        j["state"] = state;
        CircuitBreaker::<1, 0>::restore(&serde_json::from_value(j).unwrap())
    };
    assert!(restore_state(probing(1, 1, 0, 0)).is_ok());
    assert_eq!(
        restore_state(probing(1, 2, 0, 0)).unwrap_err().field(),
        "state.admitted"
    );
    assert_eq!(
        restore_state(probing(3, 3, 0, 0)).unwrap_err().field(),
        "state.in_flight"
    );
    assert_eq!(
        restore_state(probing(0, 1, 1, 1)).unwrap_err().field(),
        "state.reported"
    );
    assert_eq!(
        restore_state(probing(0, 2, 2, 3)).unwrap_err().field(),
        "state.reported"
    );
    // Calls rejected in a closed breaker, or more in the state than in all.
    assert_eq!(
        err(|j| j["rejected_in_state"] = 1.into()).field(),
        "rejected_in_state"
    );
    let e = err(|j| {
        j["state"] = serde_json::json!({ "open": { "until": 9 } });
        j["rejected"] = 2.into();
        j["rejected_in_state"] = 3.into();
    });
    assert_eq!(e.field(), "rejected_in_state");
    // Durations for a window without buckets.
    let e = err(|j| j["bucket_nanos"] = serde_json::json!([5]));
    assert_eq!(
        (e.field(), e.code()),
        ("bucket_nanos", "snapshot.above_capacity")
    );
}

/// A time-window breaker with calls in two buckets, rejected twice while open.
fn timed_breaker() -> CircuitBreaker<0, 4> {
    let config = BreakerConfig::builder()
        .failure_threshold(2)
        .time_window(Duration::from_secs(4), 4)
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut b = CircuitBreaker::<0, 4>::new(config).unwrap();
    for (at, success) in [(500, true), (1_500, false), (1_600, false)] {
        let now = Instant::from_millis(at);
        let Admission::Admitted { permit, .. } = b.request(now) else {
            panic!()
        };
        let _ = b.record(
            permit,
            CallOutcome {
                success,
                duration: Duration::from_millis(at / 100),
            },
            now,
        );
    }
    for _ in 0..2 {
        assert!(!b.request(Instant::from_secs(2)).is_admitted());
    }
    b
}

#[test]
fn a_version_2_snapshot_keeps_the_counts_in_the_state_and_the_durations() {
    let b = timed_breaker();
    let now = Instant::from_secs(3);
    let m = b.metrics(now);
    assert_eq!((m.rejected, m.rejected_in_state), (2, 2));
    assert_eq!(
        m.call_duration_total,
        Some(Duration::from_millis(5 + 15 + 16))
    );
    assert_eq!(m.call_duration_mean, Some(Duration::from_millis(12)));
    let s = b.snapshot();
    let text = serde_json::to_string(&s).unwrap();
    assert!(
        text.ends_with(r#""rejected_in_state":2,"bucket_nanos":[5000000,31000000]}"#),
        "{text}"
    );
    for restored in [
        CircuitBreaker::<0, 4>::restore(&via_json(&s)).unwrap(),
        CircuitBreaker::<0, 4>::restore(&via_postcard(&s)).unwrap(),
    ] {
        assert_eq!(restored, b);
        assert_eq!(restored.metrics(now), m);
    }
    // Listed for some buckets and not others.
    let e = CircuitBreaker::<0, 4>::restore(&edited(&s, |j| {
        j["bucket_nanos"] = serde_json::json!([5]);
    }))
    .unwrap_err();
    assert_eq!(e.field(), "bucket_nanos");
}

/// Version 1 snapshots (before the count of calls rejected in the state and
/// the buckets' durations) still restore, from JSON and from postcard: the
/// count in the state starts at zero, and a bucket's durations are not known
/// until it leaves the window.
#[test]
fn a_version_1_snapshot_restores_with_what_it_did_not_keep_as_unknown() {
    let b = timed_breaker();
    let v2 = b.snapshot();
    let mut json = serde_json::to_value(v2).unwrap();
    json["version"] = 1.into();
    let fields = json.as_object_mut().unwrap();
    fields.remove("rejected_in_state");
    fields.remove("bucket_nanos");
    let v1: BreakerSnapshot<0, 4> = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(v1.version(), 1);
    let restored = CircuitBreaker::<0, 4>::restore(&v1).unwrap();
    assert_eq!(restored.state(), b.state());
    assert_eq!(restored.rejected_calls(), 2);
    assert_eq!(restored.rejected_calls_in_state(), 0);
    let m = restored.metrics(Instant::from_secs(3));
    assert_eq!((m.call_duration_total, m.call_duration_mean), (None, None));
    assert_eq!(m.window, b.metrics(Instant::from_secs(3)).window);
    // Once the restored buckets have left the window, the durations read again.
    let later = restored.metrics(Instant::from_secs(60));
    assert_eq!(later.call_duration_total, Some(Duration::ZERO));
    assert_eq!(later.call_duration_mean, None);
    // The same snapshot in postcard, as version 1 wrote it: its fields by
    // position, ending after the window.
    let closed = breaker_with_calls();
    let bytes = postcard::to_allocvec(&closed.snapshot()).unwrap();
    // Version 2 of a closed count-window breaker ends with its two new
    // fields: no rejected call in the state (0) and no bucket durations (an
    // empty list, 0). Version 1 is the rest, with its own version number.
    assert_eq!(bytes[0], 2);
    assert_eq!(&bytes[bytes.len() - 2..], [0, 0]);
    let mut old = bytes[..bytes.len() - 2].to_vec();
    old[0] = 1;
    let v1: BreakerSnapshot<1, 0> = postcard::from_bytes(&old).unwrap();
    assert_eq!(v1.version(), 1);
    let restored = CircuitBreaker::<1, 0>::restore(&v1).unwrap();
    assert_eq!(restored, closed);
}

/// A record holds the fields of the version it names, and only those: a
/// version 1 record has no count of the calls rejected in the state and no
/// bucket durations (a version 1 breaker kept neither), and a version 2 one
/// lists both, with a duration (or `null`, not known) for every bucket of a
/// time window, as a version 2 breaker always writes them. JSON and postcard
/// read the same record the same way.
#[test]
fn a_record_holds_the_fields_of_its_version() {
    let b = timed_breaker();
    let s = b.snapshot();
    let restore = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut json = serde_json::to_value(s).unwrap();
        edit(&mut json);
        serde_json::from_value::<BreakerSnapshot<0, 4>>(json)
            .map_err(|e| e.to_string())
            .and_then(|r| CircuitBreaker::<0, 4>::restore(&r).map_err(|e| e.field().to_owned()))
    };
    // As written, and as version 1 wrote it (both fields left out).
    assert_eq!(restore(&|_| {}), Ok(b));
    let as_v1 = |j: &mut serde_json::Value| {
        j["version"] = 1.into();
        let fields = j.as_object_mut().unwrap();
        fields.remove("rejected_in_state");
        fields.remove("bucket_nanos");
    };
    assert!(restore(&as_v1).is_ok());
    // Version 1 with what only version 2 keeps: refused, naming the field
    // (postcard never reads them from a version 1 record).
    let e = restore(&|j| {
        as_v1(j);
        j["rejected_in_state"] = 2.into();
    });
    assert_eq!(e, Err("rejected_in_state".to_owned()));
    let e = restore(&|j| {
        as_v1(j);
        j["bucket_nanos"] = serde_json::json!([5_000_000, 31_000_000]);
    });
    assert_eq!(e, Err("bucket_nanos".to_owned()));
    // Version 2 with the durations of no bucket, or of some: refused.
    for listed in [serde_json::json!([]), serde_json::json!([5_000_000])] {
        let e = restore(&|j| j["bucket_nanos"] = listed.clone());
        assert_eq!(e, Err("bucket_nanos".to_owned()), "{listed}");
    }
    // Durations not known (a breaker restored from version 1 writes these).
    assert!(restore(&|j| j["bucket_nanos"] = serde_json::json!([null, null])).is_ok());
    // Version 2 without either field: a decode error naming it, as postcard
    // gives for a version 2 record cut short.
    for field in ["rejected_in_state", "bucket_nanos"] {
        let e = restore(&|j| {
            j.as_object_mut().unwrap().remove(field);
        })
        .unwrap_err();
        assert!(e.contains(field) && e.contains("missing"), "{e}");
    }
    let bytes = postcard::to_allocvec(&s).unwrap();
    let cut = &bytes[..bytes.len() - 1];
    assert!(postcard::from_bytes::<BreakerSnapshot<0, 4>>(cut).is_err());
    // A version this build does not know is refused as that, fields or not.
    let e = restore(&|j| {
        as_v1(j);
        j["version"] = 3.into();
    });
    assert_eq!(e, Err("version".to_owned()));
}

#[test]
fn corrupt_budget_snapshots_are_typed_errors_naming_the_field() {
    let aws = RetryBudget::new(BudgetConfig::aws_standard()).snapshot();
    let err = |s: &BudgetSnapshot, edit: fn(&mut serde_json::Value)| {
        RetryBudget::restore(&edited(s, edit)).unwrap_err()
    };
    assert_eq!(err(&aws, |j| j["version"] = 5.into()).field(), "version");
    let e = err(&aws, |j| j["state"]["tokens"]["millis"] = 500_001.into());
    assert_eq!(
        e,
        SnapshotError::AboveMaximum {
            field: "state.millis",
            value: 500_001,
            maximum: 500_000
        }
    );
    let e = err(&aws, |j| j["config"]["aws"]["capacity"] = 0.into());
    assert_eq!(
        (e.field(), e.code()),
        ("capacity", "snapshot.budget_config")
    );
    let finagle = RetryBudget::new(BudgetConfig::finagle_default()).snapshot();
    let e = err(&aws, |j| {
        j["state"] = serde_json::json!({ "slices": { "slices": [
            {"slot": 0, "net": 0}, {"slot": 0, "net": 0}, {"slot": 0, "net": 0}, {"slot": 0, "net": 0},
            {"slot": 0, "net": 0}, {"slot": 0, "net": 0}, {"slot": 0, "net": 0}, {"slot": 0, "net": 0},
            {"slot": 0, "net": 0}, {"slot": 0, "net": 0}] } })
    });
    assert_eq!(e.field(), "state");
    let e = err(&finagle, |j| {
        j["state"]["slices"]["slices"][3]["slot"] = 14.into()
    });
    assert_eq!(e.field(), "state.slices");
    let e = err(&finagle, |j| {
        j["config"]["finagle"]["window"]["secs"] = 0.into()
    });
    assert_eq!(e.field(), "window");
    assert!(RetryBudget::restore(&finagle).is_ok());
}

#[test]
fn snapshots_are_versioned_and_read_as_documented() {
    assert_eq!(RetrySnapshot::VERSION, 1);
    assert_eq!(sleeping_machine().snapshot().version(), 1);
    // Version 2 added the calls rejected in the state and the buckets'
    // durations; version 1 still restores (see the test above).
    assert_eq!(BreakerSnapshot::<1, 0>::VERSION, 2);
    assert_eq!(BreakerSnapshot::<1, 0>::OLDEST_VERSION, 1);
    assert_eq!(BudgetSnapshot::VERSION, 1);
    // The JSON form says what it holds.
    let text = serde_json::to_string(&sleeping_machine().snapshot()).unwrap();
    assert!(
        text.starts_with(r#"{"version":1,"policy":{"max_attempts":3,"#),
        "{text}"
    );
    assert!(text.contains(r#""phase":{"sleeping":{"until":"#), "{text}");
    let text = serde_json::to_string(&breaker_with_calls().snapshot()).unwrap();
    // Calls oldest first: ok, failed, ok.
    assert!(
        text.contains(r#""window":{"count":{"calls":3,"failed":[2],"slow":[0]}}"#),
        "{text}"
    );
    // Garbage is a decoding error, never a panic.
    assert!(serde_json::from_str::<RetrySnapshot>("{}").is_err());
    assert!(postcard::from_bytes::<BreakerSnapshot>(&[1, 2, 3]).is_err());
}

// ---------------------------------------------------------------------------
// Records a policy could not have produced (issue 28): each refused with the
// field named, where each was accepted before.

/// A machine whose attempt 1 runs under a 2 s attempt timeout, started at
/// T = 100 s.
fn attempting_machine() -> RetryMachine {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .attempt_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut m = RetryMachine::new(&policy, 1);
    let _ = m.poll(Event::Start, Instant::from_secs(100));
    m
}

#[test]
fn a_restored_attempt_keeps_the_deadline_its_policy_gives() {
    let s = attempting_machine().snapshot();
    let restored = RetryMachine::restore(&s).unwrap();
    assert_eq!(restored.next_deadline(), Some(Instant::from_secs(102)));
    let err =
        |edit: fn(&mut serde_json::Value)| RetryMachine::restore(&edited(&s, edit)).unwrap_err();
    let day = Instant::from_secs(100 + 86_400);
    // A day instead of 2 s; no deadline at all; a deadline earlier than given.
    for e in [
        err(|j| {
            j["phase"]["attempting"]["deadline"] =
                serde_json::to_value(Instant::from_secs(100 + 86_400)).unwrap()
        }),
        err(|j| j["phase"]["attempting"]["deadline"] = serde_json::Value::Null),
        err(|j| {
            j["phase"]["attempting"]["deadline"] =
                serde_json::to_value(Instant::from_secs(101)).unwrap()
        }),
    ] {
        assert_eq!(
            (e.field(), e.code()),
            ("phase.deadline", "snapshot.inconsistent"),
            "{e}"
        );
    }
    let _ = day;
    // Under a policy capping attempts at the budget's end, the cap holds.
    let capped = RetryPolicy::builder()
        .attempt_timeout(Duration::from_secs(2))
        .budget(Duration::from_secs(1))
        .cap_attempt_to_budget(true)
        .build()
        .unwrap();
    let mut m = RetryMachine::new(&capped, 1);
    let _ = m.poll(Event::Start, Instant::from_secs(100));
    let s = m.snapshot();
    assert_eq!(
        RetryMachine::restore(&s).unwrap().next_deadline(),
        Some(Instant::from_secs(101))
    );
    let e = RetryMachine::restore(&edited(&s, |j| {
        j["phase"]["attempting"]["deadline"] =
            serde_json::to_value(Instant::from_secs(102)).unwrap();
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.deadline");
    // An attempt that did not start at the latest time seen.
    let s = attempting_machine().snapshot();
    let e = RetryMachine::restore(&edited(&s, |j| {
        j["latest_now"] = serde_json::to_value(Instant::from_secs(150)).unwrap();
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.started");
}

/// A machine under max_delay 60 s without jitter, sleeping its first 1 s
/// delay after attempt 1 failed at T = 5 ms.
fn unjittered_sleeping_machine(use_retry_budget: bool) -> RetryMachine {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .jitter(Jitter::None)
        .use_retry_budget(use_retry_budget)
        .build()
        .unwrap();
    let mut m = RetryMachine::new(&policy, 1);
    let _ = m.poll(Event::Start, Instant::ORIGIN);
    let _ = m.poll(Event::Failed(Failure::retryable()), Instant::from_millis(5));
    m
}

fn duration_json(d: Duration) -> serde_json::Value {
    serde_json::to_value(d).unwrap()
}

#[test]
fn a_restored_sleep_stays_within_what_its_reason_allows() {
    let day = Duration::from_secs(86_400);
    let m = unjittered_sleeping_machine(false);
    let s = m.snapshot();
    assert!(RetryMachine::restore(&s).is_ok());
    // A curve delay of a day under a 60 s cap, everything else consistent
    // with it (the end, the previous delay recorded).
    let e = RetryMachine::restore(&edited(&s, |j| {
        let day = Duration::from_secs(86_400);
        j["phase"]["sleeping"]["delay"] = duration_json(day);
        j["phase"]["sleeping"]["until"] =
            serde_json::to_value(Instant::from_millis(5).saturating_add(day)).unwrap();
        j["previous_delay"] = duration_json(day);
    }))
    .unwrap_err();
    assert_eq!(
        (e.field(), e.code()),
        ("phase.delay", "snapshot.inconsistent"),
        "{e}"
    );
    // A delay of 1 s whose end lies a day past the latest time seen.
    let e = RetryMachine::restore(&edited(&s, |j| {
        j["phase"]["sleeping"]["until"] = serde_json::to_value(Instant::from_secs(86_400)).unwrap();
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.until", "{e}");
    // A curve delay that is not the one recorded as the previous delay.
    let e = RetryMachine::restore(&edited(&s, |j| {
        j["previous_delay"] = duration_json(Duration::from_secs(2))
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.delay", "{e}");
    // A hinted delay of a day: above the hint clamp's 60 s (and not a pushback).
    let e = RetryMachine::restore(&edited(&s, |j| {
        let day = Duration::from_secs(86_400);
        j["phase"]["sleeping"]["delay"] = duration_json(day);
        j["phase"]["sleeping"]["reason"] = "hint".into();
        j["phase"]["sleeping"]["until"] =
            serde_json::to_value(Instant::from_millis(5).saturating_add(day)).unwrap();
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.delay", "{e}");
    // A circuit-open wait under a policy that gives up on open circuits.
    let e = RetryMachine::restore(&edited(&s, |j| {
        j["phase"]["sleeping"]["reason"] = "circuit_open".into()
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.delay", "{e}");

    // A withdrawing record whose delay is a day.
    let w = unjittered_sleeping_machine(true).snapshot();
    assert!(RetryMachine::restore(&w).is_ok());
    let e = RetryMachine::restore(&edited(&w, |j| {
        let day = Duration::from_secs(86_400);
        j["phase"]["withdrawing"]["delay"] = duration_json(day);
        j["previous_delay"] = duration_json(day);
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.delay", "{e}");
    let _ = day;
}

#[test]
fn an_exact_pushback_and_the_end_of_time_restore() {
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    // A pushback of a day is exact: restored as it was.
    let mut m = RetryMachine::new(&policy, 1);
    let _ = m.poll(Event::Start, Instant::ORIGIN);
    let pushback = Failure::retryable().with_hint(Hint::Pushback(Duration::from_secs(86_400)));
    let _ = m.poll(Event::Failed(pushback), Instant::from_millis(5));
    let restored = RetryMachine::restore(&m.snapshot()).unwrap();
    assert_eq!(restored, m);
    // A sleep asked at the last instant ends there, and restores.
    let mut m = RetryMachine::new(&policy, 1);
    let _ = m.poll(Event::Start, Instant::MAX);
    let _ = m.poll(Event::Failed(Failure::retryable()), Instant::MAX);
    assert_eq!(m.next_deadline(), Some(Instant::MAX));
    assert_eq!(RetryMachine::restore(&m.snapshot()).unwrap(), m);
}

/// A breaker with a 9 s half-open maximum wait, half-open since T = 1 s.
fn half_open_breaker(at: Instant) -> CircuitBreaker<1, 0> {
    let mut b = breaker_with_calls();
    b.force(ManualState::ForcedOpen, at).unwrap();
    b.force(ManualState::HalfOpen, at).unwrap();
    b
}

#[test]
fn a_half_open_record_with_a_maximum_wait_carries_its_deadline() {
    let b = half_open_breaker(Instant::from_secs(1));
    let s = b.snapshot();
    let mut restored = CircuitBreaker::<1, 0>::restore(&s).unwrap();
    assert_eq!(restored.half_open_until(), Some(Instant::from_secs(10)));
    // Its wait holds: the first request after it ends the period.
    assert!(matches!(
        restored.request(Instant::from_secs(10)),
        Admission::Admitted {
            transition: Some(_),
            ..
        } | Admission::Rejected { .. }
    ));
    assert_ne!(restored.state(), retry_core::BreakerState::HalfOpen);
    let e = CircuitBreaker::<1, 0>::restore(&edited(&s, |j| {
        j["state"]["half_open"]["deadline"] = serde_json::Value::Null;
    }))
    .unwrap_err();
    assert_eq!(
        (e.field(), e.code()),
        ("state.deadline", "snapshot.inconsistent"),
        "{e}"
    );
    // Half-open so late that the wait passes the last instant: the deadline
    // is that instant, never none.
    let late = half_open_breaker(Instant::MAX.saturating_sub(Duration::from_secs(1)));
    assert_eq!(late.half_open_until(), Some(Instant::MAX));
    assert_eq!(
        CircuitBreaker::<1, 0>::restore(&late.snapshot()).unwrap(),
        late
    );
}

#[test]
fn a_breaker_equals_its_restored_snapshot_after_its_window_wraps() {
    let mut b = breaker_with_calls();
    // 8-call window: 3 calls so far; 10 more wrap it (none trips it: at
    // most 3 of 8 fail, under the 50 % rate, never 3 in a row).
    for i in 0..10u32 {
        let Admission::Admitted { permit, .. } = b.request(Instant::ORIGIN) else {
            panic!("closed")
        };
        let outcome = CallOutcome {
            success: i % 3 != 0,
            duration: Duration::from_millis(1),
        };
        let _ = b.record(permit, outcome, Instant::ORIGIN);
    }
    let restored = CircuitBreaker::<1, 0>::restore(&b.snapshot()).unwrap();
    assert_eq!(
        restored.metrics(Instant::ORIGIN),
        b.metrics(Instant::ORIGIN)
    );
    assert_eq!(restored, b);
}

/// The rule of `retry_core::behaviour#restoring-under-another-policy`: a
/// record whose policy or config was replaced is judged as a record of the
/// new one; accepted, its pending action is kept as it was and later
/// decisions follow the new policy.
#[test]
fn restoring_under_another_policy_follows_the_documented_rule() {
    let s = unjittered_sleeping_machine(false).snapshot();
    let restore = |edit: fn(&mut serde_json::Value)| RetryMachine::restore(&edited(&s, edit));
    // More attempts and another curve: accepted; the pending 1 s sleep as it
    // was, the next delay from the new curve.
    let mut m = restore(|j| {
        j["policy"]["max_attempts"] = 5.into();
        j["policy"]["backoff"] =
            serde_json::json!({ "constant": { "delay": { "secs": 1, "nanos": 0 } } });
    })
    .unwrap();
    assert_eq!(m.policy().max_attempts(), 5);
    let Some(Action::Sleep { until, delay, .. }) = m.pending() else {
        panic!("sleeping")
    };
    assert_eq!(
        (until, delay),
        (Instant::from_millis(1_005), Duration::from_secs(1))
    );
    let _ = m.poll(Event::Woke, until);
    let next = m.poll(Event::Failed(Failure::retryable()), until);
    assert!(matches!(next, Action::Sleep { delay, .. } if delay == Duration::from_secs(1)));
    // A cap below the pending sleep (the curve's first delay lowered with it).
    let e = restore(|j| {
        j["policy"]["max_delay"] = serde_json::json!({ "secs": 0, "nanos": 500_000_000 });
        j["policy"]["backoff"] = serde_json::json!({ "exponential": {
            "initial": { "secs": 0, "nanos": 100_000_000 }, "factor": 2.0 } });
    })
    .unwrap_err();
    assert_eq!(e.field(), "phase.delay", "{e}");
    // No attempt left for the pending sleep.
    let e = restore(|j| j["policy"]["max_attempts"] = 1.into()).unwrap_err();
    assert_eq!(e.field(), "phase", "{e}");
    // A retry budget the record never asked: accepted (the sleep comes after
    // the grant); waiting for one the new policy does not use: refused.
    assert!(restore(|j| j["policy"]["use_retry_budget"] = true.into()).is_ok());
    let w = unjittered_sleeping_machine(true).snapshot();
    let e = RetryMachine::restore(&edited(&w, |j| {
        j["policy"]["use_retry_budget"] = false.into()
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase", "{e}");
    // An attempt in flight under another timeout: not the deadline it has.
    let a = attempting_machine().snapshot();
    let e = RetryMachine::restore(&edited(&a, |j| {
        j["policy"]["attempt_timeout"] = serde_json::json!({ "secs": 3, "nanos": 0 });
    }))
    .unwrap_err();
    assert_eq!(e.field(), "phase.deadline", "{e}");

    // A breaker: a smaller window that still holds the calls is accepted;
    // one that does not, refused; a half-open period without the deadline a
    // new maximum wait calls for, refused.
    let b = breaker_with_calls().snapshot();
    let smaller = CircuitBreaker::<1, 0>::restore(&edited(&b, |j| {
        j["config"]["window"] = serde_json::json!({ "count": { "calls": 4 } });
        j["config"]["minimum_calls"] = 4.into();
    }))
    .unwrap();
    assert_eq!(smaller.stats(Instant::ORIGIN).calls, 3);
    let e = CircuitBreaker::<1, 0>::restore(&edited(&b, |j| {
        j["config"]["window"] = serde_json::json!({ "count": { "calls": 2 } });
        j["config"]["minimum_calls"] = 2.into();
    }))
    .unwrap_err();
    assert_eq!(e.field(), "window.calls", "{e}");
    let mut no_wait = breaker_with_calls();
    no_wait
        .force(ManualState::ForcedOpen, Instant::ORIGIN)
        .unwrap();
    no_wait
        .force(ManualState::HalfOpen, Instant::ORIGIN)
        .unwrap();
    let h = no_wait.snapshot();
    let e = CircuitBreaker::<1, 0>::restore(&edited(&h, |j| {
        j["config"]["max_half_open_wait"] = serde_json::Value::Null;
    }))
    .unwrap_err();
    assert_eq!(e.field(), "state.deadline", "{e}");

    // A budget: gRPC tokens under an AWS config pass only as whole tokens,
    // and never under a Finagle config.
    let mut grpc = RetryBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());
    for _ in 0..3 {
        grpc.on_failure(Instant::ORIGIN);
    }
    grpc.on_success(Instant::ORIGIN, AttemptKind::First);
    let g = grpc.snapshot(); // 7.1 tokens
    let aws = serde_json::json!({ "aws": {
        "capacity": 500, "retry_cost": 5, "timeout_cost": 10, "no_retry_increment": 1 } });
    let e = RetryBudget::restore(&edited(&g, |j| {
        j["config"] = serde_json::json!({ "aws": {
            "capacity": 500, "retry_cost": 5, "timeout_cost": 10, "no_retry_increment": 1 } });
    }))
    .unwrap_err();
    assert_eq!(
        (e.field(), e.code()),
        ("state.millis", "snapshot.inconsistent"),
        "{e}"
    );
    let mut whole = serde_json::to_value(g).unwrap();
    whole["config"] = aws;
    whole["state"]["tokens"]["millis"] = 7_000.into();
    let restored = RetryBudget::restore(&serde_json::from_value(whole).unwrap()).unwrap();
    assert_eq!(restored.tokens().as_millis(), 7_000);
    let e = RetryBudget::restore(&edited(&g, |j| {
        j["config"] = serde_json::json!({ "finagle": {
            "window": { "secs": 10, "nanos": 0 }, "min_retries_per_sec": 10,
            "percent_can_retry_permille": 200 } });
    }))
    .unwrap_err();
    assert_eq!(e.field(), "state", "{e}");
}

#[test]
fn budget_tokens_are_amounts_the_arithmetic_gives() {
    let g = RetryBudget::new(BudgetConfig::grpc(10, 0.25).unwrap()).snapshot();
    let tokens = |millis: u64| {
        RetryBudget::restore(&edited(&g, move |j| {
            j["state"]["tokens"]["millis"] = millis.into();
        }))
    };
    // Whole tokens and quarters (the ratio) are reachable; 0.1 of a token is not.
    assert!(tokens(9_000).is_ok() && tokens(8_250).is_ok());
    assert_eq!(tokens(8_100).unwrap_err().field(), "state.millis");
    let a = RetryBudget::new(BudgetConfig::aws_standard()).snapshot();
    let e = RetryBudget::restore(&edited(&a, |j| {
        j["state"]["tokens"]["millis"] = 1_500.into()
    }))
    .unwrap_err();
    assert_eq!(e.field(), "state.millis");
}
