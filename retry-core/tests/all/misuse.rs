//! Misuse: every event that makes no sense in the machine's phase is answered as the
//! `RetryMachine` docs say, never panics and leaves the machine unchanged.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    Action, Backoff, Event, Failure, GiveUpReason, Instant, Jitter, Misuse, Phase, RetryMachine,
    RetryPolicy, SleepReason,
};

const ALL_EVENTS: [Event; 6] = [
    Event::Start,
    Event::Succeeded,
    Event::Failed(Failure::retryable()),
    Event::TimedOut,
    Event::Woke,
    Event::Cancelled,
];

fn policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_secs(1)))
        .jitter(Jitter::None)
        .attempt_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Sends `event` to a copy of `m` through `try_poll` and `poll`; both must refuse it
/// the same way and leave the machine exactly as it was.
fn assert_refused(m: &RetryMachine, event: Event, now: Instant, expected: Action) {
    let mut a = m.clone();
    let err: Misuse = a.try_poll(event, now).expect_err("must be misuse");
    assert_eq!(err.event, event);
    assert_eq!(err.phase, m.phase());
    assert_eq!(err.answer, expected);
    assert_eq!(&a, m, "try_poll({event}) changed the machine");
    let mut b = m.clone();
    assert_eq!(b.poll(event, now), expected);
    assert_eq!(&b, m, "poll({event}) changed the machine");
}

#[test]
fn outcomes_before_start_are_refused_with_not_started() {
    let m = RetryMachine::new(&policy(), 1);
    let answer = m.clone().poll(Event::Woke, at(0));
    let Action::GiveUp(g) = answer else {
        panic!("{answer}")
    };
    assert_eq!(
        (g.reason, g.attempts, g.last_failure),
        (GiveUpReason::NotStarted, 0, None)
    );
    assert_eq!(g.code(), "retry.not_started");
    for event in [
        Event::Succeeded,
        Event::Failed(Failure::permanent()),
        Event::TimedOut,
        Event::Woke,
    ] {
        assert_refused(&m, event, at(5), answer);
    }
    // The machine still starts normally afterwards.
    let mut m = m;
    assert_eq!(
        m.poll(Event::Start, at(5)),
        Action::Attempt {
            number: 1,
            deadline: Some(at(5_005)),
            replays_non_idempotent: false,
        }
    );
}

#[test]
fn attempting_refuses_start_and_woke_with_the_same_attempt() {
    let mut m = RetryMachine::new(&policy(), 1);
    let attempt = m.poll(Event::Start, at(0));
    assert_eq!(m.phase(), Phase::Attempting);
    for event in [Event::Start, Event::Woke] {
        assert_refused(&m, event, at(10), attempt);
    }
}

#[test]
fn sleeping_refuses_outcomes_with_the_same_sleep() {
    let mut m = RetryMachine::new(&policy(), 1);
    let _ = m.poll(Event::Start, at(0));
    let sleep = m.poll(Event::Failed(Failure::retryable()), at(100));
    assert_eq!(
        sleep,
        Action::Sleep {
            until: at(1_100),
            delay: Duration::from_secs(1),
            reason: SleepReason::Curve
        }
    );
    for event in [
        Event::Start,
        Event::Succeeded,
        Event::Failed(Failure::retryable()),
        Event::TimedOut,
    ] {
        assert_refused(&m, event, at(500), sleep);
    }
}

#[test]
fn an_early_woke_gets_the_same_sleep_and_is_not_misuse() {
    let mut m = RetryMachine::new(&policy(), 1);
    let _ = m.poll(Event::Start, at(0));
    let sleep = m.poll(Event::Failed(Failure::retryable()), at(0));
    for early in [0, 1, 999] {
        assert_eq!(m.try_poll(Event::Woke, at(early)), Ok(sleep));
    }
    assert!(matches!(
        m.poll(Event::Woke, at(1_000)),
        Action::Attempt { number: 2, .. }
    ));
}

#[test]
fn terminal_actions_are_sticky_for_every_event() {
    // Done.
    let mut done = RetryMachine::new(&policy(), 1);
    let _ = done.poll(Event::Start, at(0));
    let d = done.poll(Event::Succeeded, at(1));
    assert_eq!(d, Action::Done { attempts: 1 });
    // Given up, permanently.
    let mut perm = RetryMachine::new(&policy(), 1);
    let _ = perm.poll(Event::Start, at(0));
    let p = perm.poll(Event::Failed(Failure::permanent()), at(1));
    assert!(matches!(p, Action::GiveUp(g) if g.reason == GiveUpReason::Permanent));
    // Cancelled.
    let mut cancelled = RetryMachine::new(&policy(), 1);
    let c = cancelled.poll(Event::Cancelled, at(0));
    assert!(matches!(c, Action::GiveUp(g) if g.reason == GiveUpReason::Cancelled));
    for (m, answer) in [(&done, d), (&perm, p), (&cancelled, c)] {
        assert_eq!(m.phase(), Phase::Finished);
        for event in ALL_EVENTS {
            assert_refused(m, event, at(10_000), answer);
        }
    }
}

#[test]
fn no_attempt_ever_follows_cancellation() {
    for cancel_after in 0..6 {
        let mut m = RetryMachine::new(&policy(), 9);
        let mut now = at(0);
        let mut action = m.poll(Event::Start, now);
        for _ in 0..cancel_after {
            now = now + Duration::from_millis(1_500);
            action = match action {
                Action::Attempt { .. } => m.poll(Event::Failed(Failure::retryable()), now),
                Action::Sleep { .. } => m.poll(Event::Woke, now),
                terminal => terminal,
            };
        }
        let cancelled = m.poll(Event::Cancelled, now);
        if !action.is_terminal() {
            assert!(
                matches!(cancelled, Action::GiveUp(g) if g.reason == GiveUpReason::Cancelled),
                "{cancelled}"
            );
        }
        for event in ALL_EVENTS {
            let next = m.poll(event, now + Duration::from_secs(60));
            assert!(!matches!(next, Action::Attempt { .. }), "{event} -> {next}");
        }
    }
}

#[test]
fn time_going_backwards_counts_as_no_time() {
    let mut m = RetryMachine::new(&policy(), 1);
    let _ = m.poll(Event::Start, at(10_000));
    // The failure is reported "before" the start: treated as at the start.
    let sleep = m.poll(Event::Failed(Failure::retryable()), at(3));
    assert_eq!(
        sleep,
        Action::Sleep {
            until: at(11_000),
            delay: Duration::from_secs(1),
            reason: SleepReason::Curve
        }
    );
    // A wake that goes back in time is early, not late.
    assert_eq!(m.poll(Event::Woke, at(0)), sleep);
}

#[test]
fn misuse_is_displayed_with_the_event_and_phase() {
    let mut m = RetryMachine::new(&policy(), 1);
    let err = m.try_poll(Event::Woke, at(0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event `woke` makes no sense while Idle; the machine is unchanged"
    );
}

/// A sleep that would end past the last representable instant ends there;
/// without a time budget the call goes on (never a `budget` give-up without
/// a budget), with one it ends on the budget. No panic either way.
#[test]
fn the_end_of_time_ends_a_sleep_there_and_only_a_budget_gives_up() {
    let builder = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_secs(1)))
        .jitter(Jitter::None);
    let policy = builder.build().unwrap();
    let mut m = RetryMachine::new(&policy, 1);
    let _ = m.poll(Event::Start, Instant::MAX);
    let a = m.poll(Event::Failed(Failure::retryable()), Instant::MAX);
    assert_eq!(
        a,
        Action::Sleep {
            until: Instant::MAX,
            delay: Duration::from_secs(1),
            reason: SleepReason::Curve
        }
    );
    // Time cannot pass it: a wake there starts the next attempt.
    assert!(matches!(
        m.poll(Event::Woke, Instant::MAX),
        Action::Attempt { number: 2, .. }
    ));

    let budgeted = builder.budget(Duration::from_secs(10)).build().unwrap();
    let mut m = RetryMachine::new(&budgeted, 1);
    let _ = m.poll(Event::Start, Instant::MAX);
    let a = m.poll(Event::Failed(Failure::retryable()), Instant::MAX);
    assert!(matches!(a, Action::GiveUp(g) if g.reason == GiveUpReason::Budget));
}

/// `now + delay` past the instant range without a time budget: the retry
/// sleeps (to the last instant) whatever the instants' origin, as it does
/// when the sum fits; the reason `budget` is never given without a budget.
/// Through the curve, a hint and a retry-budget withdrawal alike.
#[test]
fn a_sleep_past_the_instant_range_goes_ahead_without_a_budget() {
    let top = Duration::from_nanos(u64::MAX);
    for use_retry_budget in [false, true] {
        let policy = RetryPolicy::builder()
            .max_attempts(3)
            .backoff(Backoff::constant(top))
            .max_delay(Duration::MAX)
            .jitter(Jitter::None)
            .resolution(retry_core::Resolution::Nanos)
            .use_retry_budget(use_retry_budget)
            .build()
            .unwrap();
        for origin in [0, 1, 5_000_000_000, u64::MAX / 2] {
            let t0 = Instant::from_nanos(origin);
            let mut m = RetryMachine::new(&policy, 1);
            let _ = m.poll(Event::Start, t0);
            let mut a = m.poll(Event::Failed(Failure::retryable()), t0);
            if use_retry_budget {
                assert!(matches!(a, Action::Withdraw { retry: 1, .. }), "{a}");
                a = m.poll(Event::Granted, t0);
            }
            assert_eq!(
                a,
                Action::Sleep {
                    until: t0.saturating_add(top),
                    delay: top,
                    reason: SleepReason::Curve
                },
                "origin {origin}"
            );
        }
        // An exact pushback hint longer than the instant range.
        let mut m = RetryMachine::new(&policy, 1);
        let t0 = Instant::from_secs(1);
        let _ = m.poll(Event::Start, t0);
        let hinted = Failure::retryable().with_hint(retry_core::Hint::Pushback(Duration::MAX));
        let mut a = m.poll(Event::Failed(hinted), t0);
        if use_retry_budget {
            a = m.poll(Event::Granted, t0);
        }
        assert_eq!(
            a,
            Action::Sleep {
                until: Instant::MAX,
                delay: Duration::MAX,
                reason: SleepReason::Hint
            }
        );
    }
}

#[test]
fn budget_answers_outside_a_withdrawal_are_refused() {
    let p = policy()
        .to_builder()
        .use_retry_budget(true)
        .build()
        .unwrap();
    let mut m = RetryMachine::new(&p, 1);
    let attempt = m.poll(Event::Start, at(0));
    for event in [Event::Granted, Event::Refused] {
        assert_refused(&m, event, at(1), attempt);
    }
    let withdraw = m.poll(Event::Failed(Failure::retryable()), at(2));
    assert_eq!(
        withdraw,
        Action::Withdraw {
            retry: 1,
            after_timeout: false
        }
    );
    assert_eq!(m.phase(), Phase::Withdrawing);
    for event in [
        Event::Start,
        Event::Succeeded,
        Event::Failed(Failure::retryable()),
        Event::TimedOut,
        Event::Woke,
        Event::Rejected { until: Some(at(9)) },
    ] {
        assert_refused(&m, event, at(3), withdraw);
    }
    let sleep = m.poll(Event::Granted, at(3));
    assert!(matches!(sleep, Action::Sleep { until, .. } if until == at(1_003)));
    for event in [
        Event::Granted,
        Event::Refused,
        Event::Rejected { until: Some(at(9)) },
    ] {
        assert_refused(&m, event, at(4), sleep);
    }
}

#[test]
fn a_grant_that_arrives_after_the_budget_ends_starts_no_attempt() {
    // Found by the retry_machine fuzz target: a zero-delay retry whose budget
    // withdrawal is answered only after the time budget has run out.
    let p = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::None)
        .budget(Duration::from_secs(1))
        .use_retry_budget(true)
        .build()
        .unwrap();
    let mut m = RetryMachine::new(&p, 1);
    let _ = m.poll(Event::Start, at(0));
    let w = m.poll(Event::Failed(Failure::retryable()), at(100));
    assert!(matches!(w, Action::Withdraw { .. }));
    let late = m.poll(Event::Granted, at(1_000));
    assert!(
        matches!(late, Action::GiveUp(g) if g.reason == GiveUpReason::Budget && g.attempts == 1),
        "{late}"
    );
}

#[test]
fn getters_report_what_the_machine_was_built_with() {
    let p = policy();
    let m = RetryMachine::new(&p, 0xDEAD_BEEF);
    assert_eq!(m.seed(), 0xDEAD_BEEF);
    assert_eq!(m.policy(), &p);
    assert_eq!(m.phase(), Phase::Idle);
    assert_eq!(m.attempts(), 0);
    assert_eq!(m.started_at(), None);
    assert_eq!(m.pending(), None);
    assert_eq!(m.next_deadline(), None);
}
