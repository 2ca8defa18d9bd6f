//! quickcheck properties over random policies, seeds and scripts, 10,000 cases each.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck};
use retry_core::{
    Action, Backoff, CircuitOpen, Event, Failure, FailureKind, GiveUpReason, Hint, HintMode,
    Instant, Jitter, Outcome, Resolution, RetryMachine, RetryPolicy, Scripted, Simulation,
    SleepReason, Step,
};

const CASES: u64 = 10_000;
/// Steps looked at per simulation (a policy may allow u32::MAX attempts).
const MAX_STEPS: usize = 300;

fn check<A: quickcheck::Testable>(prop: A) {
    QuickCheck::new()
        .tests(CASES)
        .max_tests(CASES * 10)
        .quickcheck(prop);
}

fn pick<T: Copy>(g: &mut Gen, items: &[T]) -> T {
    *g.choose(items).expect("non-empty")
}

/// A duration from a mix of ordinary and extreme ranges.
fn duration(g: &mut Gen) -> Duration {
    match u8::arbitrary(g) % 10 {
        0 => Duration::ZERO,
        1 => Duration::MAX,
        2 => Duration::from_nanos(u64::arbitrary(g)),
        3 => Duration::new(u64::arbitrary(g), u32::arbitrary(g) % 1_000_000_000),
        4 => Duration::from_nanos(u64::from(u32::arbitrary(g))),
        _ => Duration::from_millis(u64::arbitrary(g) % 5_000),
    }
}

fn fraction(g: &mut Gen) -> f64 {
    f64::from(u16::arbitrary(g) % 1001) / 1000.0
}

fn jitter(g: &mut Gen) -> Jitter {
    match u8::arbitrary(g) % 7 {
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
    match u8::arbitrary(g) % 5 {
        0 => Backoff::None,
        1 => Backoff::constant(duration(g)),
        2 => Backoff::linear_by(duration(g), duration(g)),
        3 => {
            let factor = pick(g, &[1.0, 1.5, 2.0, 3.0, 10.0, 1e300]);
            Backoff::exponential(duration(g), factor)
        }
        _ => Backoff::fibonacci(duration(g)),
    }
}

fn sorted(a: Duration, b: Duration) -> (Duration, Duration) {
    (a.min(b), a.max(b))
}

fn nonzero(d: Duration) -> Duration {
    d.max(Duration::from_nanos(1))
}

#[derive(Clone, Debug)]
struct P(RetryPolicy);

impl Arbitrary for P {
    fn arbitrary(g: &mut Gen) -> Self {
        let attempts = match u8::arbitrary(g) % 20 {
            0 => u32::MAX,
            _ => u32::arbitrary(g) % 12 + 1,
        };
        let (min_delay, max_delay) = sorted(duration(g), duration(g));
        let (hint_min, hint_max) = sorted(duration(g), duration(g));
        let hints = match u8::arbitrary(g) % 3 {
            0 => HintMode::Override {
                min: hint_min,
                max: hint_max,
            },
            1 => HintMode::AtLeast { cap: duration(g) },
            _ => HintMode::Ignore,
        };
        let budget = bool::arbitrary(g).then(|| nonzero(duration(g)));
        let timeout = bool::arbitrary(g).then(|| nonzero(duration(g)));
        let backoff = backoff(g);
        let policy = RetryPolicy::builder()
            .max_attempts(attempts)
            .backoff(backoff)
            .min_delay(min_delay)
            // A valid cap is at least the curve's first delay.
            .max_delay(max_delay.max(backoff.initial()))
            .jitter(jitter(g))
            .resolution(if bool::arbitrary(g) {
                Resolution::Millis
            } else {
                Resolution::Nanos
            })
            .hints(hints)
            .budget(budget)
            .attempt_timeout(timeout)
            .cap_attempt_to_budget(bool::arbitrary(g))
            .retry_timeouts(bool::arbitrary(g))
            .use_retry_budget(bool::arbitrary(g))
            .idempotent(bool::arbitrary(g))
            .on_circuit_open(if bool::arbitrary(g) {
                CircuitOpen::Wait
            } else {
                CircuitOpen::GiveUp
            })
            .build()
            .expect("generated policies are valid by construction");
        P(policy)
    }
}

fn failure(g: &mut Gen) -> Failure {
    let base = if u8::arbitrary(g) % 6 == 0 {
        Failure::permanent()
    } else {
        Failure::retryable()
    };
    let base = base.with_kind(pick(
        g,
        &[
            FailureKind::Error,
            FailureKind::Connection,
            FailureKind::Status(503),
        ],
    ));
    match u8::arbitrary(g) % 5 {
        0 => base.with_hint(Hint::RetryAfter(duration(g))),
        1 => base.with_hint(Hint::Pushback(duration(g))),
        _ => base,
    }
}

#[derive(Clone, Debug)]
struct Script(Vec<Scripted>, Option<Duration>, u32);

impl Arbitrary for Script {
    fn arbitrary(g: &mut Gen) -> Self {
        let len = usize::arbitrary(g) % 12;
        let steps = (0..len)
            .map(|_| {
                let outcome = match u8::arbitrary(g) % 13 {
                    0 => Outcome::Succeed,
                    3 => Outcome::Rejected { wait: duration(g) },
                    1 => Outcome::TimeOut,
                    2 => Outcome::Cancel,
                    _ => Outcome::Fail(failure(g)),
                };
                let took = match u8::arbitrary(g) % 3 {
                    0 => Duration::ZERO,
                    _ => duration(g),
                };
                Scripted { outcome, took }
            })
            .collect();
        let cancel = (u8::arbitrary(g) % 5 == 0).then(|| duration(g));
        Script(steps, cancel, u32::arbitrary(g) % 8)
    }
}

fn run(policy: &RetryPolicy, seed: u64, script: &Script) -> Vec<Step> {
    let sim = Simulation::new(policy, seed, &script.0).retry_budget(script.2);
    let sim = match script.1 {
        Some(at) => sim.cancel_at(at),
        None => sim,
    };
    sim.take(MAX_STEPS).collect()
}

/// Checks every step of a run against the contract; returns a message on the first
/// violation.
fn violations(policy: &RetryPolicy, steps: &[Step]) -> Result<(), String> {
    let start = steps.first().map_or(Instant::ORIGIN, |s| s.at);
    let budget_end = policy.budget().map(|b| start.saturating_add(b));
    let mut expected_attempt = 1u32;
    let mut terminal_seen = false;
    let mut withdrawn = false;
    for (i, step) in steps.iter().enumerate() {
        if terminal_seen {
            return Err(format!("step {i} after a terminal action"));
        }
        if let Event::Rejected { .. } = step.event {
            // The rejected attempt never ran: the same number comes again.
            expected_attempt = expected_attempt.saturating_sub(1);
        }
        match step.action {
            Action::Attempt {
                number,
                deadline,
                replays_non_idempotent,
            } => {
                if replays_non_idempotent != (number > 1 && !policy.is_idempotent()) {
                    return Err(format!("attempt {number}: wrong replay warning"));
                }
                if number != expected_attempt {
                    return Err(format!("attempt {number}, expected {expected_attempt}"));
                }
                if number > policy.max_attempts() {
                    return Err(format!("attempt {number} above the maximum"));
                }
                if let Some(d) = deadline {
                    if d <= step.at {
                        return Err(format!("deadline {d} not after {}", step.at));
                    }
                }
                if policy.caps_attempt_to_budget() {
                    if let Some(end) = budget_end {
                        match deadline {
                            Some(d) if d <= end => {}
                            other => {
                                return Err(format!(
                                    "attempt {number}: deadline {other:?} not capped at {end}"
                                ))
                            }
                        }
                    }
                }
                expected_attempt = expected_attempt.saturating_add(1);
            }
            Action::Withdraw { retry, .. } => {
                if !policy.uses_retry_budget() {
                    return Err("withdraw without a retry budget".into());
                }
                if retry.saturating_add(1) != expected_attempt {
                    return Err(format!(
                        "withdraw for retry {retry} before attempt {expected_attempt}"
                    ));
                }
                withdrawn = true;
            }
            Action::Sleep {
                until,
                delay,
                reason,
            } => {
                // After now; only a sleep asked at the last instant (where
                // time ends) ends there.
                if until <= step.at && until != Instant::MAX {
                    return Err(format!("sleep until {until} at {}", step.at));
                }
                if until != step.at.saturating_add(delay) {
                    return Err(format!("sleep until {until} is not now + {delay:?}"));
                }
                if let Some(end) = budget_end {
                    if until >= end {
                        return Err(format!("sleep to {until} reaches the budget end {end}"));
                    }
                }
                if expected_attempt.saturating_sub(1) >= policy.max_attempts() {
                    return Err("sleep after the final attempt".into());
                }
                if reason != SleepReason::CircuitOpen {
                    // The failure that led here is the previous step's event when
                    // a budget was asked in between.
                    let event = if withdrawn {
                        steps[i - 1].event
                    } else {
                        step.event
                    };
                    check_delay(policy, event, delay, reason)?;
                }
                withdrawn = false;
            }
            Action::GiveUp(g) => {
                // Time alone ends a call only under a time budget (a sleep
                // past the last instant ends there instead).
                if g.reason == GiveUpReason::Budget && policy.budget().is_none() {
                    return Err(format!("gave up on a time budget the policy lacks: {g}"));
                }
                terminal_seen = true;
            }
            Action::Done { .. } => terminal_seen = true,
        }
        match step.event {
            Event::Rejected { .. }
                if !matches!(step.action, Action::Sleep { .. } | Action::GiveUp(_)) =>
            {
                return Err(format!("rejection answered with {}", step.action));
            }
            Event::Refused => match step.action {
                Action::GiveUp(g) if g.reason == GiveUpReason::RetryBudget => {}
                other => return Err(format!("refusal answered with {other}")),
            },
            Event::Succeeded if !matches!(step.action, Action::Done { .. }) => {
                return Err(format!("success answered with {}", step.action));
            }
            Event::Failed(f) if !f.is_retryable() => match step.action {
                Action::GiveUp(g) if g.reason == GiveUpReason::Permanent => {}
                other => return Err(format!("permanent failure answered with {other}")),
            },
            _ => {}
        }
    }
    Ok(())
}

/// `d × f` plus a nanosecond for float rounding, saturating at `Duration::MAX`
/// (`Duration::mul_f64` panics on overflow).
fn scaled(d: Duration, f: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * f)
        .unwrap_or(Duration::MAX)
        .saturating_add(Duration::from_nanos(1))
}

/// Half a millisecond of rounding slack, where rounding applies.
fn slack(policy: &RetryPolicy) -> Duration {
    match policy.resolution() {
        Resolution::Millis => Duration::from_micros(500),
        Resolution::Nanos => Duration::ZERO,
    }
}

fn check_delay(
    policy: &RetryPolicy,
    event: Event,
    delay: Duration,
    reason: SleepReason,
) -> Result<(), String> {
    let hint = match event {
        Event::Failed(f) if policy.hints() != HintMode::Ignore => f.hint(),
        _ => None,
    };
    let cap = policy.max_delay();
    let add_limit = match policy.jitter() {
        Jitter::Add(f) => cap
            .saturating_add(scaled(cap, f))
            .saturating_add(slack(policy)),
        _ => cap,
    };
    match (hint, policy.hints()) {
        (None, _) => {
            if reason != SleepReason::Curve {
                return Err(format!("no hint but reason {reason}"));
            }
            // Curve delays are computed in u64 nanoseconds: a floor past
            // u64::MAX ns counts as u64::MAX ns.
            if delay < policy.min_delay().min(Duration::from_nanos(u64::MAX)) || delay > add_limit {
                return Err(format!(
                    "curve delay {delay:?} outside [{:?}, {add_limit:?}]",
                    policy.min_delay()
                ));
            }
        }
        (Some(Hint::Pushback(p)), _) => {
            if delay != p {
                return Err(format!("pushback {p:?} but slept {delay:?}"));
            }
        }
        (Some(Hint::RetryAfter(h)), HintMode::Override { min, max }) => {
            if delay != h.max(min).min(max) {
                return Err(format!("override of {h:?} gave {delay:?}"));
            }
        }
        (Some(Hint::RetryAfter(h)), HintMode::AtLeast { cap: hint_cap }) => {
            // The honoured hint floors the delay, counted (as every duration
            // in the delay arithmetic) at most u64::MAX ns.
            let honoured = h.min(hint_cap).min(Duration::from_nanos(u64::MAX));
            if delay < honoured {
                return Err(format!("at-least: {delay:?} below the hint {honoured:?}"));
            }
            let ceiling = add_limit.max(
                honoured
                    .saturating_add(scaled(honoured, policy.jitter().fraction().unwrap_or(0.0)))
                    .saturating_add(slack(policy)),
            );
            if delay > ceiling {
                return Err(format!("at-least: {delay:?} above {ceiling:?}"));
            }
        }
        (Some(_), HintMode::Ignore) => unreachable!("filtered above"),
    }
    Ok(())
}

#[test]
fn every_run_keeps_the_contract() {
    fn prop(p: P, seed: u64, script: Script) -> Result<(), String> {
        let steps = run(&p.0, seed, &script);
        violations(&p.0, &steps)
    }
    check(prop as fn(P, u64, Script) -> Result<(), String>);
}

#[test]
fn the_same_inputs_give_the_same_timeline() {
    fn prop(p: P, seed: u64, script: Script) -> bool {
        run(&p.0, seed, &script) == run(&p.0, seed, &script)
    }
    check(prop as fn(P, u64, Script) -> bool);
}

#[test]
fn a_clone_mid_flight_continues_identically() {
    fn prop(p: P, seed: u64, script: Script, cut: usize) -> bool {
        let steps = run(&p.0, seed, &script);
        let cut = cut % steps.len().max(1);
        let mut original = RetryMachine::new(&p.0, seed);
        let mut copy = None;
        for (i, step) in steps.iter().enumerate() {
            if i == cut {
                copy = Some(original.clone());
            }
            let a = original.poll(step.event, step.at);
            if a != step.action {
                return false;
            }
            if let Some(c) = copy.as_mut() {
                if c.poll(step.event, step.at) != a {
                    return false;
                }
            }
        }
        copy.is_none_or(|c| c == original)
    }
    check(prop as fn(P, u64, Script, usize) -> bool);
}

#[test]
fn a_machine_borrowing_its_policy_answers_as_one_owning_it() {
    // The simulated timeline (outcomes, budget refusals, cancellation) and a
    // random stream of events, misuse included: every answer, every getter and
    // the snapshot after each step are the same.
    fn prop(p: P, seed: u64, script: Script, events: Vec<(u8, u64)>) -> Result<(), String> {
        let policy = p.0;
        let mut owned = RetryMachine::new(&policy, seed);
        let mut borrowed = RetryMachine::with_policy(&policy, seed);
        let timeline = run(&policy, seed, &script);
        let mut now = timeline.last().map_or(Instant::ORIGIN, |s| s.at);
        let scripted = timeline.iter().map(|s| (s.event, s.at));
        let random = events.into_iter().map(|(kind, dt)| {
            now = now.saturating_add(Duration::from_nanos(dt % 10_000_000_000));
            let event = match kind % 8 {
                0 => Event::Start,
                1 => Event::Succeeded,
                2 => Event::Failed(Failure::retryable()),
                3 => Event::TimedOut,
                4 => Event::Woke,
                5 => Event::Granted,
                6 => Event::Rejected { until: None },
                _ => Event::Cancelled,
            };
            (event, now)
        });
        for (i, (event, at)) in scripted.chain(random).enumerate() {
            let (a, b) = (owned.try_poll(event, at), borrowed.try_poll(event, at));
            if a != b {
                return Err(format!(
                    "step {i}: {event} at {at}: owned {a:?}, borrowed {b:?}"
                ));
            }
            if i < timeline.len() && a != Ok(timeline[i].action) {
                return Err(format!("step {i}: the owned machine left the simulation"));
            }
            let same = owned.snapshot() == borrowed.snapshot()
                && owned.pending() == borrowed.pending()
                && owned.next_deadline() == borrowed.next_deadline()
                && owned.phase() == borrowed.phase()
                && owned.budget_end() == borrowed.budget_end()
                && owned.needs_start_time() == borrowed.needs_start_time();
            if !same {
                return Err(format!("step {i}: the machines' states differ"));
            }
        }
        Ok(())
    }
    check(prop as fn(P, u64, Script, Vec<(u8, u64)>) -> Result<(), String>);
}

#[test]
fn a_different_seed_changes_only_jitter() {
    // Without jitter the seed must not matter at all.
    fn prop(p: P, a: u64, b: u64, script: Script) -> bool {
        let policy = p.0.to_builder().jitter(Jitter::None).build().unwrap();
        run(&policy, a, &script) == run(&policy, b, &script)
    }
    check(prop as fn(P, u64, u64, Script) -> bool);
}

#[test]
fn each_jitter_kind_stays_inside_its_bounds() {
    fn prop(raw: u64, draw: u64, f: u16, extra: u64) -> Result<(), String> {
        let d = Duration::from_nanos(raw);
        let cap = d.saturating_add(Duration::from_nanos(extra % 1_000_000_000_000));
        let f = f64::from(f % 1001) / 1000.0;
        let z = Duration::ZERO;
        let within = |name: &str, x: Duration, lo: Duration, hi: Duration| {
            if x < lo || x > hi {
                Err(format!(
                    "{name}: {x:?} outside [{lo:?}, {hi:?}] for d = {d:?}"
                ))
            } else {
                Ok(())
            }
        };
        // Slack for the float product f·d: a nanosecond plus a few ulps of d.
        let ns = Duration::from_nanos(1 + raw / (1 << 50));
        let span = d.mul_f64(f);
        within("none", Jitter::None.apply(d, draw, z, z, cap), d, d)?;
        within("full", Jitter::Full.apply(d, draw, z, z, cap), z, d)?;
        within("equal", Jitter::Equal.apply(d, draw, z, z, cap), d / 2, d)?;
        within(
            "subtract",
            Jitter::Subtract(f).apply(d, draw, z, z, cap),
            d.saturating_sub(span).saturating_sub(ns),
            d,
        )?;
        within(
            "add",
            Jitter::Add(f).apply(d, draw, z, z, cap),
            d,
            d.saturating_add(span).saturating_add(ns),
        )?;
        within(
            "spread",
            Jitter::Spread(f).apply(d, draw, z, z, cap),
            d.saturating_sub(span).saturating_sub(ns),
            d.saturating_add(span).saturating_add(ns).min(cap),
        )?;
        let initial = Duration::from_nanos(extra % 1_000_000_000);
        let previous = d;
        let dec = Jitter::Decorrelated.apply(d, draw, initial, previous, cap);
        let hi = previous.saturating_mul(3).max(initial).min(cap);
        within("decorrelated", dec, initial.min(cap), hi)
    }
    check(prop as fn(u64, u64, u16, u64) -> Result<(), String>);
}

#[test]
fn no_arithmetic_overflow_for_any_retry_or_duration() {
    fn prop(p: P, retry: u32, seed: u64) -> bool {
        let policy = &p.0;
        // Whatever the retry number, these are total and bounded.
        let d = policy.delay(retry, seed);
        let d_max = policy.delay(u32::MAX, seed);
        let raw = policy.backoff().delay(retry);
        let capped = policy.capped_delay(retry);
        capped <= policy.max_delay().max(policy.min_delay())
            && raw >= Duration::ZERO
            && (policy.jitter().may_exceed_cap()
                || (d <= policy.max_delay() && d_max <= policy.max_delay()))
    }
    check(prop as fn(P, u32, u64) -> bool);
}

#[test]
fn random_event_streams_never_break_the_machine() {
    fn prop(p: P, seed: u64, events: Vec<(u8, u64)>) -> Result<(), String> {
        let mut m = RetryMachine::new(&p.0, seed);
        let mut now = Instant::ORIGIN;
        let mut terminal: Option<Action> = None;
        for (kind, dt) in events {
            // Time mostly moves forward, sometimes jumps back.
            now = if dt % 7 == 0 {
                now.saturating_sub(Duration::from_nanos(dt))
            } else {
                now.saturating_add(Duration::from_nanos(dt % 10_000_000_000))
            };
            let event = match kind % 9 {
                6 => Event::Granted,
                7 => Event::Refused,
                8 => Event::Rejected {
                    until: (dt % 3 != 0).then(|| now.saturating_add(Duration::from_nanos(dt))),
                },
                0 => Event::Start,
                1 => Event::Succeeded,
                2 => Event::Failed(if kind & 0x80 == 0 {
                    Failure::retryable()
                } else {
                    Failure::permanent()
                }),
                3 => Event::TimedOut,
                4 => Event::Woke,
                _ => Event::Cancelled,
            };
            let before = m.clone();
            match m.try_poll(event, now) {
                Err(misuse) => {
                    if m != before {
                        return Err(format!("misuse {misuse} changed the machine"));
                    }
                    if Some(misuse.answer) != before.pending() && before.pending().is_some() {
                        return Err("misuse answered with something else".into());
                    }
                }
                Ok(action) => {
                    if let Some(t) = terminal {
                        return Err(format!("{event} after terminal {t} accepted as {action}"));
                    }
                    match action {
                        Action::Sleep { until, .. } if until <= now && until != Instant::MAX => {
                            return Err(format!("sleep until {until} not after {now}"));
                        }
                        Action::Attempt { number, .. } if number > p.0.max_attempts() => {
                            return Err(format!("attempt {number} above the maximum"));
                        }
                        a if a.is_terminal() => terminal = Some(a),
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }
    check(prop as fn(P, u64, Vec<(u8, u64)>) -> Result<(), String>);
}

/// The interval a jitter kind documents for base delay `d` (already capped), in
/// nanoseconds and closed at both ends, restated from the table on [`Jitter`]:
/// `add(f)`'s open top is one nanosecond below `d + f·d`; the capping kinds stay
/// at or below `cap`. `f·d` is rounded down, as documented. Every duration
/// counts as at most `u64::MAX` ns (the delay arithmetic's saturation rule);
/// the caller cuts the ends there.
fn documented_interval(
    kind: Jitter,
    d: Duration,
    initial: Duration,
    previous: Duration,
    cap: Duration,
) -> (u128, u128) {
    let top = Duration::from_nanos(u64::MAX);
    let (d, initial, previous, cap) = (
        d.min(top),
        initial.min(top),
        previous.min(top),
        cap.min(top),
    );
    let n = d.as_nanos();
    let cap = cap.as_nanos();
    // `f` is at most 1, so `f·d` is at most `d`; above 2^53 ns the product in
    // f64 can round up past `d`, which the min undoes.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let part = |f: f64| ((n as f64 * f) as u128).min(n);
    match kind {
        Jitter::None => (n, n),
        Jitter::Full => (0, n),
        Jitter::Equal => (n / 2, n),
        Jitter::Decorrelated => {
            let lo = initial.as_nanos();
            let hi = (previous.as_nanos() * 3).max(lo);
            (lo.min(cap), hi.min(cap))
        }
        Jitter::Subtract(f) => (n - part(f), n),
        Jitter::Add(f) => (n, (n + part(f)).saturating_sub(1).max(n)),
        Jitter::Spread(f) => ((n.saturating_sub(part(f))).min(cap), (n + part(f)).min(cap)),
    }
}

/// Every curve delay, for every jitter kind, policy and seed, is a multiple of
/// the policy's resolution and inside its kind's documented interval (both ends
/// raised to `min_delay`, which floors every delay after jitter). The one case
/// where both cannot hold, an interval that contains no multiple of the
/// resolution at all (an unjittered 1.5 ms under millisecond resolution), gets
/// the multiple nearest the interval, within `min_delay` and the cap.
#[test]
fn every_delay_is_a_multiple_of_the_resolution_inside_its_kinds_interval() {
    fn prop(p: P, retry: u32, seed: u64) -> Result<(), String> {
        let policy = &p.0;
        let retry = retry % 40 + 1;
        let delay = policy.delay(retry, seed).as_nanos();
        let base = policy.capped_delay(retry);
        let initial = policy.backoff().initial();
        let cap = policy.max_delay();
        let (lo, hi) = documented_interval(policy.jitter(), base, initial, initial, cap);
        // Delays are computed in u64 nanoseconds: nothing past u64::MAX ns is
        // a result, and a floor past it counts as u64::MAX ns.
        let top = u128::from(u64::MAX);
        let floor = policy.min_delay().as_nanos().min(top);
        let (lo, hi) = (lo.max(floor).min(top), hi.max(floor).min(top));
        let step: u128 = match policy.resolution() {
            Resolution::Millis => 1_000_000,
            Resolution::Nanos => 1,
        };
        let holds_a_multiple = lo.div_ceil(step) * step <= hi;
        let context = || {
            format!(
                "{policy}: retry {retry}, seed {seed}: delay {delay} ns, interval [{lo}, {hi}] ns"
            )
        };
        if holds_a_multiple {
            if delay % step != 0 {
                return Err(format!("not a multiple of {step} ns: {}", context()));
            }
            if delay < lo || delay > hi {
                return Err(format!("outside the interval: {}", context()));
            }
        } else {
            let ceiling = cap.as_nanos().max(hi);
            if delay < floor || delay > ceiling {
                return Err(format!("outside [min_delay, cap]: {}", context()));
            }
            let near = delay + step > lo && delay < hi + step;
            if !near {
                return Err(format!(
                    "not the multiple nearest the interval: {}",
                    context()
                ));
            }
            let clamped = delay == floor || delay == ceiling;
            if delay % step != 0 && !clamped {
                return Err(format!("not a multiple of {step} ns: {}", context()));
            }
        }
        Ok(())
    }
    check(prop as fn(P, u32, u64) -> Result<(), String>);
}

/// The two cases that broke the rule: additive jitter rounded up onto its
/// excluded top, and a cap that undid the rounding of an additive delay.
#[test]
fn additive_jitter_rounds_within_its_interval() {
    let capped = RetryPolicy::builder()
        .backoff(Backoff::constant(Duration::from_millis(300)))
        .max_delay(Duration::from_millis(300))
        .jitter(Jitter::Add(0.5))
        .build()
        .unwrap();
    let d = capped.delay(1, 11);
    assert_eq!(d.subsec_nanos() % 1_000_000, 0, "{d:?} is not whole ms");
    assert!(d >= Duration::from_millis(300) && d < Duration::from_millis(450));
    // add(0.1) on 1 s: [1 s, 1.1 s); 1.1 s itself is never a result.
    let top = RetryPolicy::builder()
        .backoff(Backoff::constant(Duration::from_secs(1)))
        .max_delay(Duration::from_secs(1))
        .jitter(Jitter::Add(0.1))
        .build()
        .unwrap();
    let mut seen_top = false;
    for seed in 0..20_000 {
        let d = top.delay(1, seed);
        assert!(
            d >= Duration::from_secs(1) && d < Duration::from_millis(1100),
            "seed {seed}: {d:?}"
        );
        seen_top |= d == Duration::from_millis(1099);
    }
    assert!(
        seen_top,
        "the top whole millisecond inside the interval is reachable"
    );
}

/// A failure drawn as the simulations draw them (permanent or retryable, of
/// several kinds, with or without a hint).
#[derive(Clone, Debug)]
struct F(Failure);

impl Arbitrary for F {
    fn arbitrary(g: &mut Gen) -> Self {
        F(failure(g))
    }
}

/// [`RetryMachine::opening_failure`] is what a real machine answers when its
/// first attempt ends with that event, whatever the seed, the start and how
/// long the attempt ran; and when it answers `None` to a failure, the machine
/// does not give up as permanent or exhausted (no such give-up is missed).
#[test]
fn the_opening_failure_is_what_the_machine_answers() {
    fn prop(p: P, seed: u64, f: F, kind: u8, start: u64, ran: u64) -> Result<(), String> {
        let policy = &p.0;
        let event = match kind % 8 {
            0..=3 => Event::Failed(f.0),
            4 => Event::TimedOut,
            5 => Event::Succeeded,
            6 => Event::Cancelled,
            _ => Event::Rejected { until: None },
        };
        let start = Instant::ORIGIN.saturating_add(Duration::from_nanos(start));
        let end = start.saturating_add(Duration::from_nanos(ran));
        let mut m = RetryMachine::new(policy, seed);
        let _ = m.poll(Event::Start, start);
        let answer = m.poll(event, end);
        match RetryMachine::opening_failure(policy, event) {
            Some(give_up) if answer == Action::GiveUp(give_up) => Ok(()),
            Some(give_up) => Err(format!(
                "{policy}: {event} at {end}: said {give_up}, the machine {answer}"
            )),
            None => match (event, answer) {
                (
                    Event::Failed(_),
                    Action::GiveUp(retry_core::GiveUp {
                        reason: GiveUpReason::Permanent | GiveUpReason::Exhausted,
                        ..
                    }),
                ) => Err(format!(
                    "{policy}: {event}: said nothing, the machine {answer}"
                )),
                _ => Ok(()),
            },
        }
    }
    check(prop as fn(P, u64, F, u8, u64, u64) -> Result<(), String>);
}
