//! `RetryMachine::needs_start_time` and `set_seed`: the facts a driver relies on
//! to read no clock (and draw no seed) on a call whose first attempt succeeds.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    Action, Backoff, Event, Failure, Instant, Jitter, RetryMachine, RetryPolicy, RetryPolicyBuilder,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at(d: Duration) -> Instant {
    Instant::from_duration(d)
}

fn base() -> RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::exponential(ms(100), 2.0))
        .jitter(Jitter::Full)
}

/// Runs a call whose attempts fail until the last, the call starting at `start`
/// and the first attempt running for `first_ran`, the later ones instantly; every
/// sleep is woken exactly when due. Returns each action with the time it was
/// answered at, relative to the end of the first attempt (`None` before it).
fn run(policy: &RetryPolicy, seed: u64, start: Duration, first_ran: Duration) -> Vec<String> {
    let mut m = RetryMachine::new(policy, seed);
    let mut seen = Vec::new();
    let first = m.poll(Event::Start, at(start));
    seen.push(format!("{first:?}"));
    let end = start + first_ran;
    let mut now = end;
    let mut action = m.poll(Event::Failed(Failure::retryable()), at(now));
    loop {
        let relative = |a: &Action| match *a {
            Action::Sleep {
                until,
                delay,
                reason,
            } => format!(
                "sleep {delay:?} ({reason}) until +{:?}",
                until.saturating_duration_since(at(end))
            ),
            other => format!("{other:?}"),
        };
        seen.push(relative(&action));
        action = match action {
            Action::Sleep { until, .. } => {
                now = until.saturating_duration_since(Instant::ORIGIN);
                m.poll(Event::Woke, until)
            }
            Action::Attempt { number: 4, .. } => m.poll(Event::Succeeded, at(now)),
            Action::Attempt { .. } => m.poll(Event::Failed(Failure::retryable()), at(now)),
            Action::Withdraw { .. } => m.poll(Event::Granted, at(now)),
            Action::GiveUp(_) | Action::Done { .. } => break,
        };
    }
    seen
}

#[test]
fn without_budget_or_timeout_the_answers_ignore_the_start_and_the_first_attempts_time() {
    for policy in [
        base().build().unwrap(),
        base().jitter(Jitter::Decorrelated).build().unwrap(),
        base().use_retry_budget(true).build().unwrap(),
        base().max_attempts(1).build().unwrap(),
    ] {
        let m = RetryMachine::new(&policy, 7);
        assert!(!m.needs_start_time(), "{policy:?}");
        // The clock-free driver's way (everything at the origin) against real
        // start times and a first attempt that ran a long time.
        let origin = run(&policy, 7, Duration::ZERO, Duration::ZERO);
        for (start, ran) in [
            (ms(5), ms(0)),
            (ms(0), ms(3_000)),
            (ms(86_400_000), ms(250)),
        ] {
            assert_eq!(run(&policy, 7, start, ran), origin, "{policy:?}");
        }
        assert!(origin.last().unwrap().contains("Done") || policy.max_attempts() == 1);
    }
}

#[test]
fn a_time_budget_or_an_attempt_timeout_needs_the_start() {
    let budget = base().budget(ms(1_000)).build().unwrap();
    let timeout = base().attempt_timeout(ms(500)).build().unwrap();
    for policy in [budget, timeout] {
        assert!(RetryMachine::new(&policy, 7).needs_start_time());
    }
    // And the fact is not idle: the first attempt's run time changes the answers.
    assert_ne!(
        run(&budget, 7, Duration::ZERO, Duration::ZERO),
        run(&budget, 7, Duration::ZERO, ms(1_500))
    );
    assert_ne!(
        run(&timeout, 7, Duration::ZERO, Duration::ZERO),
        run(&timeout, 7, ms(40), Duration::ZERO)
    );
}

#[test]
fn a_seed_set_before_the_first_failure_decides_as_the_seed_given_at_birth() {
    let policy = base().build().unwrap();
    for seed in [0, 7, u64::MAX, 0x00C0_FFEE] {
        let mut late = RetryMachine::new(&policy, 12_345);
        let born = RetryMachine::new(&policy, seed);
        let start = late.poll(Event::Start, Instant::ORIGIN);
        late.set_seed(seed);
        assert_eq!(late.seed(), seed);
        let mut early = born;
        assert_eq!(early.poll(Event::Start, Instant::ORIGIN), start);
        let mut now = Instant::ORIGIN;
        for _ in 0..3 {
            let a = late.poll(Event::Failed(Failure::retryable()), now);
            let b = early.poll(Event::Failed(Failure::retryable()), now);
            assert_eq!(a, b);
            let Action::Sleep { until, .. } = a else {
                panic!("expected a sleep, got {a:?}")
            };
            now = until;
            assert_eq!(late.poll(Event::Woke, now), early.poll(Event::Woke, now));
        }
        assert_eq!(late, early);
    }
}

#[test]
fn the_opening_is_what_the_machine_answers() {
    let policies = [
        base().build().unwrap(),
        base().idempotent(false).build().unwrap(),
        base().max_attempts(1).build().unwrap(),
        base().use_retry_budget(true).build().unwrap(),
        base().budget(ms(1_000)).build().unwrap(),
        base().attempt_timeout(ms(500)).build().unwrap(),
        base()
            .budget(ms(1_000))
            .attempt_timeout(ms(500))
            .build()
            .unwrap(),
    ];
    for policy in policies {
        let mut m = RetryMachine::new(&policy, 7);
        match RetryMachine::opening(&policy) {
            Some((first, on_success)) => {
                assert!(!m.needs_start_time());
                assert_eq!(m.poll(Event::Start, Instant::ORIGIN), first, "{policy:?}");
                assert_eq!(
                    m.poll(Event::Succeeded, Instant::ORIGIN),
                    on_success,
                    "{policy:?}"
                );
            }
            None => assert!(m.needs_start_time(), "{policy:?}"),
        }
    }
}

/// The cases `opening_failure` answers, by hand: a permanent failure under
/// any policy, a retryable one under a policy of one attempt; and the ones it
/// leaves to the machine.
#[test]
fn the_opening_failure_by_hand() {
    use retry_core::{FailureKind, GiveUp, GiveUpReason};
    let once = base().max_attempts(1).build().unwrap();
    let four = base().build().unwrap();
    let timed = base()
        .max_attempts(1)
        .budget(ms(1_000))
        .attempt_timeout(ms(500))
        .build()
        .unwrap();
    let unlimited = base().unlimited_attempts().build().unwrap();
    let status = Failure::retryable().with_kind(FailureKind::Status(503));
    let permanent = Failure::permanent().with_kind(FailureKind::Connection);
    let cases = [
        (&once, Event::Failed(status), Some(GiveUpReason::Exhausted)),
        (
            &once,
            Event::Failed(permanent),
            Some(GiveUpReason::Permanent),
        ),
        (&timed, Event::Failed(status), Some(GiveUpReason::Exhausted)),
        (
            &four,
            Event::Failed(permanent),
            Some(GiveUpReason::Permanent),
        ),
        (
            &unlimited,
            Event::Failed(permanent),
            Some(GiveUpReason::Permanent),
        ),
        (&four, Event::Failed(status), None),
        (&unlimited, Event::Failed(status), None),
        (&once, Event::TimedOut, None),
        (&timed, Event::TimedOut, None),
        (&once, Event::Succeeded, None),
        (&once, Event::Cancelled, None),
        (&once, Event::Start, None),
    ];
    for (policy, event, reason) in cases {
        let said = RetryMachine::opening_failure(policy, event);
        assert_eq!(said.map(|g| g.reason), reason, "{policy:?} {event}");
        let Some(give_up) = said else { continue };
        let Event::Failed(failure) = event else {
            panic!("only a failure gives up")
        };
        assert_eq!(give_up.attempts, 1);
        assert_eq!(give_up.last_failure, Some(failure.kind()));
        for (start, ran) in [(ms(0), ms(0)), (ms(7), ms(3_000)), (ms(86_400_000), ms(1))] {
            let mut m = RetryMachine::new(policy, 7);
            let _ = m.poll(Event::Start, at(start));
            assert_eq!(m.poll(event, at(start + ran)), Action::GiveUp(give_up));
        }
    }
    // A one-attempt policy gives up on every failure, as exhausted or permanent.
    let any: GiveUp = RetryMachine::opening_failure(&once, Event::Failed(status)).unwrap();
    assert_eq!(any.code(), "retry.exhausted");
}
