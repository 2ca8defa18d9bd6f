//! The retry machine composed with a shared retry budget: many calls, one bucket.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    feed_budget, Action, Backoff, BudgetConfig, Event, Failure, GiveUpReason, Instant, Jitter,
    RetryBudget, RetryMachine, RetryPolicy,
};

/// Runs one call to its end, every attempt answered by `outcome`, against the
/// shared budget; returns the final action and the time after it.
fn call(
    policy: &RetryPolicy,
    budget: &mut RetryBudget,
    mut now: Instant,
    outcome: Event,
) -> (Action, Instant) {
    let mut m = RetryMachine::new(policy, 7);
    let mut event = Event::Start;
    loop {
        let action = m.poll(event, now);
        let reply = feed_budget(budget, &m, event, action, now);
        event = match action {
            Action::Attempt { .. } => outcome,
            Action::Sleep { until, .. } => {
                now = until;
                Event::Woke
            }
            Action::Withdraw { .. } => reply.expect("a withdrawal is always answered"),
            Action::GiveUp(_) | Action::Done { .. } => return (action, now),
        };
    }
}

#[test]
fn an_outage_drains_the_grpc_throttle_and_successes_refill_it() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(10)))
        .jitter(Jitter::None)
        .use_retry_budget(true)
        .build()
        .unwrap();
    let mut budget = RetryBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());
    let mut now = Instant::ORIGIN;
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let (action, t) = call(
            &policy,
            &mut budget,
            now,
            Event::Failed(Failure::retryable()),
        );
        now = t;
        let Action::GiveUp(g) = action else {
            panic!("{action}")
        };
        reasons.push((g.reason, g.attempts));
    }
    // Call 1: 3 failures (10 -> 7), both retries granted. Call 2: 7 -> 6 granted
    // (6 > 5), 6 -> 5 refused. Later calls: refused at once after one attempt.
    assert_eq!(
        reasons,
        [
            (GiveUpReason::Exhausted, 3),
            (GiveUpReason::RetryBudget, 2),
            (GiveUpReason::RetryBudget, 1),
            (GiveUpReason::RetryBudget, 1),
        ]
    );
    // The outage left 3 tokens. First attempts still run; 60 successes add 0.1
    // each (3 -> 9), so the next failing call may retry twice again (9 -> 8 -> 7).
    assert_eq!(budget.tokens().whole(), 3);
    for _ in 0..60 {
        let (action, t) = call(&policy, &mut budget, now, Event::Succeeded);
        now = t;
        assert_eq!(action, Action::Done { attempts: 1 });
    }
    let (action, _) = call(
        &policy,
        &mut budget,
        now,
        Event::Failed(Failure::retryable()),
    );
    assert!(matches!(action, Action::GiveUp(g) if g.reason == GiveUpReason::Exhausted));
}

#[test]
fn the_aws_quota_refunds_a_successful_retry() {
    let policy = RetryPolicy::builder()
        .max_attempts(2)
        .backoff(Backoff::None)
        .use_retry_budget(true)
        .build()
        .unwrap();
    let mut budget = RetryBudget::new(BudgetConfig::aws_standard());
    let mut m = RetryMachine::new(&policy, 1);
    let now = Instant::ORIGIN;
    let steps = [
        Event::Start,
        Event::Failed(Failure::retryable()),
        Event::Granted,
        Event::Succeeded,
    ];
    let mut tokens = Vec::new();
    for event in steps {
        let action = m.poll(event, now);
        if let Some(reply) = feed_budget(&mut budget, &m, event, action, now) {
            assert_eq!(reply, Event::Granted);
        }
        tokens.push(budget.tokens().whole());
    }
    assert_eq!(tokens, [500, 495, 495, 500]);
}

/// One call driven through a breaker: each attempt asks the breaker first; the
/// attempt's outcome comes from `outcomes` (true = success). Returns the rows.
fn call_through_breaker(
    policy: &RetryPolicy,
    breaker: &mut retry_core::CircuitBreaker,
    outcomes: &mut impl Iterator<Item = bool>,
) -> Vec<String> {
    use retry_core::{breaker_outcome, rejection, Admission};
    let mut rows = Vec::new();
    let mut m = RetryMachine::new(policy, 3);
    let mut now = Instant::ORIGIN;
    let mut event = Event::Start;
    let took = Duration::from_millis(20);
    loop {
        let action = m.poll(event, now);
        rows.push(format!("{now:>8} {:<28} {action}", event.to_string()));
        event = match action {
            Action::Attempt { .. } => {
                let admission = breaker.request(now);
                if let Admission::Admitted {
                    transition: Some(t),
                    ..
                } = admission
                {
                    rows.push(format!("{now:>8}   breaker: {t}"));
                }
                if let Some(rejected) = rejection(&admission) {
                    rejected
                } else {
                    let Admission::Admitted { permit, .. } = admission else {
                        unreachable!()
                    };
                    now = now + took;
                    let e = if outcomes.next().unwrap_or(false) {
                        Event::Succeeded
                    } else {
                        Event::Failed(Failure::retryable())
                    };
                    let outcome = breaker_outcome(e, took).unwrap();
                    if let Some(t) = breaker.record(permit, outcome, now).transition {
                        rows.push(format!("{now:>8}   breaker: {t}"));
                    }
                    e
                }
            }
            Action::Sleep { until, .. } => {
                now = until;
                Event::Woke
            }
            Action::Withdraw { .. } => Event::Granted,
            Action::GiveUp(_) | Action::Done { .. } => return rows,
        };
    }
}

#[test]
fn a_retry_waits_out_an_open_breaker_without_burning_attempts() {
    use retry_core::{BasicRule, BreakerConfig, CircuitBreaker, CircuitOpen};
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .on_circuit_open(CircuitOpen::Wait)
        .build()
        .unwrap();
    // The TS package's basic rule: open after 3 consecutive failures, half-open
    // after 5 s, closed after 1 successful probe.
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 3,
        open_duration: Duration::from_secs(5),
        success_threshold: 1,
    })
    .unwrap();
    let mut breaker = CircuitBreaker::new(config).unwrap();
    let mut outcomes = [false, false, false, true].into_iter();
    let rows = call_through_breaker(&policy, &mut breaker, &mut outcomes);
    let text = rows.join("\n");
    // Attempts 1-3 fail and open the breaker; attempt 4 is rejected, waited out,
    // and runs as attempt 4 (not 5) once the breaker is half-open.
    assert!(text.contains("done after 4 attempt(s)"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn an_abandoned_attempt_is_a_failure_only_past_the_slow_call_duration_or_its_deadline() {
    use retry_core::{abandoned_outcome, CallOutcome};
    let slow = Duration::from_secs(2);
    let start = Instant::from_secs(10);
    let at = |d: Duration| start + d;
    let ms = Duration::from_millis;
    // No deadline: the slow-call duration decides, strictly (as the breaker's own
    // "slower than" does).
    assert_eq!(abandoned_outcome(start, at(ms(1)), None, slow), None);
    assert_eq!(abandoned_outcome(start, at(slow), None, slow), None);
    let just_over = slow + Duration::from_nanos(1);
    assert_eq!(
        abandoned_outcome(start, at(just_over), None, slow),
        Some(CallOutcome::failure(just_over))
    );
    assert_eq!(
        abandoned_outcome(start, at(ms(60_000)), None, slow),
        Some(CallOutcome::failure(ms(60_000)))
    );
    // A deadline reached (at or after it) is a failure of the time it ran, even
    // before the slow-call duration; one not reached yet changes nothing.
    let deadline = Some(at(ms(500)));
    assert_eq!(abandoned_outcome(start, at(ms(499)), deadline, slow), None);
    assert_eq!(
        abandoned_outcome(start, at(ms(500)), deadline, slow),
        Some(CallOutcome::failure(ms(500)))
    );
    assert_eq!(
        abandoned_outcome(start, at(ms(700)), deadline, slow),
        Some(CallOutcome::failure(ms(700)))
    );
    // A deadline later than the slow-call duration does not shield a slow attempt.
    let far = Some(at(ms(10_000)));
    assert_eq!(
        abandoned_outcome(start, at(ms(3_000)), far, slow),
        Some(CallOutcome::failure(ms(3_000)))
    );
    // Time going backwards is no time passing; a deadline at or before the start
    // has passed by the time anything is abandoned.
    assert_eq!(abandoned_outcome(start, Instant::ORIGIN, None, slow), None);
    assert_eq!(
        abandoned_outcome(start, start, Some(Instant::ORIGIN), slow),
        Some(CallOutcome::failure(Duration::ZERO))
    );
    // A zero slow-call duration makes every abandoned attempt that ran at all a
    // failure.
    assert_eq!(
        abandoned_outcome(start, at(ms(1)), None, Duration::ZERO),
        Some(CallOutcome::failure(ms(1)))
    );
    assert_eq!(abandoned_outcome(start, start, None, Duration::ZERO), None);
}

/// Half-open with a single probe slot: the probe is abandoned, and the breaker
/// is handed what [`retry_core::abandoned_outcome`] says.
#[test]
fn an_abandoned_probe_frees_its_slot_early_and_reopens_the_breaker_late() {
    use retry_core::{abandoned_outcome, Admission, BreakerConfig, BreakerState, CircuitBreaker};
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(Duration::from_millis(50))
        .half_open_permits(1)
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .unwrap();
    let slow = config.slow_call_duration();
    let mut breaker = CircuitBreaker::<0, 0>::new(config).unwrap();
    let fail = |b: &mut CircuitBreaker<0, 0>, now: Instant| {
        let Admission::Admitted { permit, .. } = b.request(now) else {
            panic!("not admitted at {now}")
        };
        let _ = b.record(
            permit,
            retry_core::CallOutcome::failure(Duration::from_millis(1)),
            now,
        );
    };
    fail(&mut breaker, Instant::ORIGIN);
    assert_eq!(breaker.state(), BreakerState::Open);

    // Early: the probe is dropped after 10 ms, the slot is freed, the next probe
    // is admitted and closes the breaker.
    let t = Instant::from_millis(80);
    let Admission::Admitted { permit, .. } = breaker.request(t) else {
        panic!("no probe")
    };
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert!(!breaker.request(t).is_admitted(), "one probe at a time");
    let dropped = t + Duration::from_millis(10);
    assert_eq!(abandoned_outcome(t, dropped, None, slow), None);
    breaker.release(permit, dropped);
    assert_eq!(breaker.probes_in_flight(), 0);
    let Admission::Admitted { permit, .. } = breaker.request(dropped) else {
        panic!("the slot was not freed")
    };
    let _ = breaker.record(
        permit,
        retry_core::CallOutcome::success(Duration::from_millis(1)),
        dropped,
    );
    assert_eq!(breaker.state(), BreakerState::Closed);

    // Late: a probe dropped after the slow-call duration is a failed probe.
    fail(&mut breaker, dropped);
    let t = dropped + Duration::from_millis(60);
    let Admission::Admitted { permit, .. } = breaker.request(t) else {
        panic!("no probe")
    };
    let dropped = t + Duration::from_secs(2);
    let outcome = abandoned_outcome(t, dropped, None, slow).expect("a slow failure");
    let transition = breaker
        .record(permit, outcome, dropped)
        .transition
        .expect("re-opens");
    assert_eq!(transition.to, BreakerState::Open);
}
