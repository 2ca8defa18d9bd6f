//! quickcheck properties of the hedge machine over random policies, seeds,
//! latency histories and scripts (10,000 cases each): never more copies in
//! flight than allowed; exactly one winner or one give-up; every losing copy
//! cancelled; the same policy, seed and script give the same timeline.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use retry_core::{
    Copies, Failure, FailureKind, HedgeAction, HedgeDelay, HedgeEvent, HedgeMode, HedgePolicy,
    HedgeSimulation, HedgeStep, Hint, Instant, Jitter, LatencyHistogram, Outcome, Scripted,
    MAX_COPIES,
};

const CASES: u64 = 10_000;

fn check<A: quickcheck::Testable>(prop: A) {
    QuickCheck::new()
        .tests(CASES)
        .max_tests(CASES * 10)
        .quickcheck(prop);
}

/// Mostly humane durations, sometimes zero or extreme.
fn duration(g: &mut Gen) -> Duration {
    match u8::arbitrary(g) % 12 {
        0 => Duration::ZERO,
        1 => Duration::MAX,
        2 => Duration::from_nanos(u64::arbitrary(g)),
        3 => Duration::from_nanos(u64::from(u16::arbitrary(g))),
        _ => Duration::from_millis(u64::arbitrary(g) % 400),
    }
}

fn fraction(g: &mut Gen) -> f64 {
    f64::from(u16::arbitrary(g) % 1001) / 1000.0
}

#[derive(Clone, Debug)]
struct Case {
    policy: HedgePolicy,
    seed: u64,
    latencies: LatencyHistogram,
    script: Vec<Scripted>,
    grants: u32,
    cancel_at: Duration,
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Self {
        let attempts = u32::arbitrary(g) % MAX_COPIES + 1;
        let mode = *g
            .choose(&[HedgeMode::Latency, HedgeMode::Fallback, HedgeMode::Parallel])
            .unwrap();
        let delay = if bool::arbitrary(g) {
            HedgeDelay::Fixed(duration(g))
        } else {
            HedgeDelay::Percentile {
                percentile: f64::from(u16::arbitrary(g) % 1000 + 1) / 10.0,
                min_samples: u32::arbitrary(g) % 30,
                fallback: duration(g),
            }
        };
        let jitter = match u8::arbitrary(g) % 6 {
            0 => Jitter::Full,
            1 => Jitter::Equal,
            2 => Jitter::Subtract(fraction(g)),
            3 => Jitter::Add(fraction(g)),
            4 => Jitter::Spread(fraction(g)),
            _ => Jitter::None,
        };
        let mut builder = HedgePolicy::builder()
            .max_attempts(attempts)
            .mode(mode)
            .delay(delay)
            .jitter(jitter)
            .timeout(bool::arbitrary(g).then(|| duration(g).max(Duration::from_nanos(1))))
            .use_retry_budget(bool::arbitrary(g))
            .idempotent(u8::arbitrary(g) % 4 != 0)
            .hedge_non_idempotent(bool::arbitrary(g));
        if bool::arbitrary(g) {
            builder = builder.max_in_flight(u32::arbitrary(g) % MAX_COPIES + 1);
        }
        let policy = builder.build().expect("a valid policy");
        let mut latencies = LatencyHistogram::with_memory(u16::arbitrary(g) % 200 + 2);
        for _ in 0..usize::arbitrary(g) % 60 {
            latencies.record(duration(g));
        }
        let script = (0..usize::arbitrary(g) % 8)
            .map(|_| {
                let outcome = match u8::arbitrary(g) % 12 {
                    0 => Outcome::TimeOut,
                    1 => Outcome::Cancel,
                    2 => Outcome::Rejected { wait: duration(g) },
                    3 => Outcome::Fail(Failure::permanent()),
                    4 | 5 => {
                        let hint = if bool::arbitrary(g) {
                            Hint::Pushback(duration(g))
                        } else {
                            Hint::RetryAfter(duration(g))
                        };
                        Outcome::Fail(Failure::retryable().with_hint(hint))
                    }
                    6 | 7 => {
                        Outcome::Fail(Failure::retryable().with_kind(FailureKind::Status(503)))
                    }
                    _ => Outcome::Succeed,
                };
                Scripted {
                    outcome,
                    took: duration(g),
                }
            })
            .collect();
        Case {
            policy,
            seed: u64::arbitrary(g),
            latencies,
            script,
            grants: if bool::arbitrary(g) {
                u32::MAX
            } else {
                u32::arbitrary(g) % 4
            },
            // Always a cancellation, so that copies that hang cannot stall a case.
            cancel_at: match u8::arbitrary(g) % 3 {
                0 => duration(g),
                _ => Duration::from_secs(3_600),
            },
        }
    }
}

impl Case {
    fn run(&self) -> Vec<HedgeStep> {
        HedgeSimulation::with_latencies(&self.policy, self.seed, &self.latencies, &self.script)
            .retry_budget(self.grants)
            .cancel_at(self.cancel_at)
            .take(10_000)
            .collect()
    }
}

#[test]
fn never_more_copies_in_flight_or_in_total_than_allowed() {
    fn prop(case: Case) -> TestResult {
        let steps = case.run();
        let p = &case.policy;
        let mut sent = 0u32;
        for step in &steps {
            if step.in_flight.len() > p.max_in_flight() {
                return TestResult::error(format!("{} in flight: {step}", step.in_flight));
            }
            if let HedgeEvent::Launched { copy } = step.event {
                sent = copy;
            }
            if let HedgeAction::Launch { copy, .. } = step.action {
                if copy != sent + 1 {
                    return TestResult::error(format!("copy {copy} after {sent}: {step}"));
                }
            }
        }
        if sent > p.allowed_attempts() {
            return TestResult::error(format!(
                "{sent} copies sent, {} allowed",
                p.allowed_attempts()
            ));
        }
        if !p.is_idempotent() && !p.hedges_non_idempotent() && sent > 1 {
            return TestResult::error("a non-idempotent call was hedged");
        }
        TestResult::passed()
    }
    check(prop as fn(Case) -> TestResult);
}

#[test]
fn exactly_one_winner_or_one_give_up() {
    fn prop(case: Case) -> TestResult {
        let steps = case.run();
        let terminal: Vec<usize> = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.action.is_terminal())
            .map(|(i, _)| i)
            .collect();
        if terminal != [steps.len() - 1] {
            return TestResult::error(format!("terminal steps at {terminal:?} of {}", steps.len()));
        }
        let last = steps.last().unwrap();
        if !last.in_flight.is_empty() {
            return TestResult::error(format!("copies left running: {last}"));
        }
        if let HedgeAction::Done { copy, launched, .. } = last.action {
            let won = steps
                .iter()
                .any(|s| s.event == HedgeEvent::Succeeded { copy });
            if !won || copy > launched {
                return TestResult::error(format!("a winner that did not succeed: {last}"));
            }
        }
        TestResult::passed()
    }
    check(prop as fn(Case) -> TestResult);
}

#[test]
fn every_losing_copy_is_cancelled() {
    fn prop(case: Case) -> TestResult {
        let steps = case.run();
        let mut launched = Copies::EMPTY;
        let mut answered = Copies::EMPTY;
        let mut cancelled = Copies::EMPTY;
        for step in &steps {
            match step.event {
                HedgeEvent::Launched { copy } => launched = launched.with(copy),
                HedgeEvent::Succeeded { copy } | HedgeEvent::Failed { copy, .. } => {
                    if cancelled.contains(copy) || answered.contains(copy) {
                        return TestResult::error(format!("an answer after the end: {step}"));
                    }
                    answered = answered.with(copy);
                }
                _ => {}
            }
            if let HedgeAction::Cancel { copies } = step.action {
                if copies.is_empty() {
                    return TestResult::error(format!("an empty cancel: {step}"));
                }
                for copy in copies {
                    if !launched.contains(copy)
                        || answered.contains(copy)
                        || cancelled.contains(copy)
                    {
                        return TestResult::error(format!("cancelled a copy not running: {step}"));
                    }
                    cancelled = cancelled.with(copy);
                }
            }
        }
        // Every copy sent either answered or was cancelled, never both.
        let accounted = answered
            .iter()
            .chain(cancelled.iter())
            .fold(Copies::EMPTY, Copies::with);
        if accounted != launched || answered.len() + cancelled.len() != launched.len() {
            return TestResult::error(format!(
                "sent {launched}, answered {answered}, cancelled {cancelled}"
            ));
        }
        TestResult::passed()
    }
    check(prop as fn(Case) -> TestResult);
}

#[test]
fn the_same_policy_seed_and_script_give_the_same_timeline() {
    fn prop(case: Case) -> bool {
        case.run() == case.run()
    }
    check(prop as fn(Case) -> bool);
}

#[test]
fn waits_are_always_in_the_future_and_copies_after_the_first_are_withdrawn() {
    fn prop(case: Case) -> TestResult {
        let steps = case.run();
        for (i, step) in steps.iter().enumerate() {
            if let HedgeAction::Wait { until: Some(u), .. } = step.action {
                if u <= step.at {
                    return TestResult::error(format!("a wait due already: {step}"));
                }
            }
            if let HedgeAction::Launch { copy, .. } = step.action {
                let withdrawn = step.event == HedgeEvent::Granted
                    && i > 0
                    && steps[i - 1].action == HedgeAction::Withdraw { copy };
                if copy > 1 && case.policy.uses_retry_budget() && !withdrawn {
                    return TestResult::error(format!("copy {copy} sent without a withdrawal"));
                }
                if !case.policy.uses_retry_budget() && step.event == HedgeEvent::Granted {
                    return TestResult::error("a grant without a budget");
                }
            }
        }
        TestResult::passed()
    }
    check(prop as fn(Case) -> TestResult);
}

#[test]
fn nothing_is_sent_after_a_refusal_or_a_rejection() {
    fn prop(case: Case) -> TestResult {
        let steps = case.run();
        let mut halted = false;
        for step in &steps {
            if halted
                && matches!(
                    step.action,
                    HedgeAction::Launch { .. } | HedgeAction::Withdraw { .. }
                )
            {
                return TestResult::error(format!("sent after a stop: {step}"));
            }
            if matches!(
                step.event,
                HedgeEvent::Refused | HedgeEvent::Rejected { .. }
            ) {
                halted = true;
            }
        }
        TestResult::passed()
    }
    check(prop as fn(Case) -> TestResult);
}

#[test]
fn a_hinted_failure_holds_the_next_copy_back_for_the_hint() {
    fn prop(case: Case) -> TestResult {
        let steps = case.run();
        let mut not_before: Option<Instant> = None;
        for step in &steps {
            match step.event {
                HedgeEvent::Failed { failure, .. } => {
                    not_before = match failure.hint() {
                        Some(Hint::Pushback(d) | Hint::RetryAfter(d)) => {
                            Some(step.at.saturating_add(d))
                        }
                        None => None,
                    };
                }
                HedgeEvent::Launched { .. } => {
                    if not_before.is_some_and(|t| step.at < t) {
                        return TestResult::error(format!("sent before the hint ended: {step}"));
                    }
                    not_before = None;
                }
                _ => {}
            }
        }
        TestResult::passed()
    }
    check(prop as fn(Case) -> TestResult);
}

#[test]
fn the_latency_mode_sends_no_hedge_before_the_delay() {
    fn prop(case: Case) -> TestResult {
        if case.policy.mode() != HedgeMode::Latency || case.policy.jitter() != Jitter::None {
            return TestResult::discard();
        }
        let delay = case.policy.delay().resolve(&case.latencies);
        let steps = case.run();
        let mut last_sent: Option<Instant> = None;
        let mut failed_since = false;
        for step in &steps {
            match step.event {
                HedgeEvent::Failed { .. } => failed_since = true,
                HedgeEvent::Launched { .. } => {
                    if let Some(prev) = last_sent {
                        let early = step.at < prev.saturating_add(delay);
                        if early && !failed_since {
                            return TestResult::error(format!("a hedge before the delay: {step}"));
                        }
                    }
                    last_sent = Some(step.at);
                    failed_since = false;
                }
                _ => {}
            }
        }
        TestResult::passed()
    }
    check(prop as fn(Case) -> TestResult);
}
