//! Timelines recorded whole and compared as insta snapshots: a reviewer reads the
//! table, not a hundred asserts. Where a number is part of the contract (the curves'
//! worked examples in `retry_core::behaviour`, the budget edge), it is asserted as well.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    total_sleep, Action, Backoff, Failure, FailureKind, GiveUpReason, Hint, HintMode, Jitter,
    RetryPolicy, Scripted, Simulation, Timeline,
};

const SEED: u64 = 0x00C0_FFEE;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn sleeps(policy: &RetryPolicy, script: &[Scripted]) -> Vec<Duration> {
    Simulation::new(policy, SEED, script)
        .filter_map(|s| match s.action {
            Action::Sleep { delay, .. } => Some(delay),
            _ => None,
        })
        .collect()
}

fn last_action(policy: &RetryPolicy, script: &[Scripted]) -> Action {
    Simulation::new(policy, SEED, script)
        .last()
        .expect("a simulation has at least one step")
        .action
}

fn no_jitter() -> retry_core::RetryPolicyBuilder {
    RetryPolicy::builder().jitter(Jitter::None)
}

#[test]
fn spec2_exponential_1s_cap_60s_8_attempts() {
    let policy = no_jitter()
        .max_attempts(8)
        .backoff(Backoff::exponential(secs(1), 2.0))
        .max_delay(secs(60))
        .build()
        .unwrap();
    let delays = sleeps(&policy, &[]);
    assert_eq!(
        delays,
        [1, 2, 4, 8, 16, 32, 60].map(secs).to_vec(),
        "worked example: 1, 2, 4, 8, 16, 32, 60 s"
    );
    assert_eq!(total_sleep(Simulation::new(&policy, SEED, &[])), secs(123));
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &[]).to_string());
}

#[test]
fn spec2_5ms_cap_12ms_4_attempts() {
    let policy = no_jitter()
        .max_attempts(4)
        .backoff(Backoff::exponential(ms(5), 2.0))
        .max_delay(ms(12))
        .build()
        .unwrap();
    assert_eq!(sleeps(&policy, &[]), [ms(5), ms(10), ms(12)]);
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &[]).to_string());
}

#[test]
fn spec2_500ms_cap_5s_3_attempts() {
    let policy = no_jitter()
        .max_attempts(3)
        .backoff(Backoff::exponential(ms(500), 2.0))
        .max_delay(secs(5))
        .build()
        .unwrap();
    assert_eq!(sleeps(&policy, &[]), [ms(500), secs(1)]);
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &[]).to_string());
}

#[test]
fn every_jitter_kind_with_a_fixed_seed() {
    let kinds = [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
        Jitter::Subtract(0.25),
        Jitter::Add(0.1),
        Jitter::Spread(0.1),
    ];
    for jitter in kinds {
        let policy = RetryPolicy::builder()
            .max_attempts(7)
            .backoff(Backoff::exponential(ms(100), 2.0))
            .max_delay(secs(2))
            .jitter(jitter)
            .build()
            .unwrap();
        insta::assert_snapshot!(
            format!("jitter_{}", jitter.name()),
            Timeline::new(&policy, SEED, &[]).to_string()
        );
    }
}

#[test]
fn the_other_curves() {
    let curves = [
        Backoff::None,
        Backoff::constant(ms(250)),
        Backoff::linear(ms(200)),
        Backoff::fibonacci(ms(100)),
    ];
    for backoff in curves {
        let policy = no_jitter()
            .max_attempts(6)
            .backoff(backoff)
            .max_delay(secs(1))
            .build()
            .unwrap();
        insta::assert_snapshot!(
            format!("curve_{}", backoff.name()),
            Timeline::new(&policy, SEED, &[]).to_string()
        );
    }
}

#[test]
fn budget_stops_a_retry_whose_delay_would_reach_it_exactly() {
    let policy = no_jitter()
        .max_attempts(10)
        .backoff(Backoff::constant(secs(1)))
        .budget(secs(3))
        .build()
        .unwrap();
    // Sleeps end at 1 s and 2 s; the third would end at 3 s = the budget: reaching
    // it counts as exceeding it.
    assert_eq!(sleeps(&policy, &[]), [secs(1), secs(1)]);
    let Action::GiveUp(g) = last_action(&policy, &[]) else {
        panic!("must give up")
    };
    assert_eq!((g.reason, g.attempts), (GiveUpReason::Budget, 3));
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &[]).to_string());
}

#[test]
fn budget_counts_the_attempts_own_time() {
    let policy = no_jitter()
        .max_attempts(10)
        .backoff(Backoff::constant(secs(1)))
        .budget(secs(5))
        .attempt_timeout(secs(2))
        .cap_attempt_to_budget(true)
        .build()
        .unwrap();
    let script = [Scripted::fail(Failure::retryable()).after(ms(1500))];
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &script).to_string());
}

#[test]
fn timeout_on_the_last_attempt_vs_an_earlier_one() {
    let policy = no_jitter()
        .max_attempts(3)
        .backoff(Backoff::constant(ms(100)))
        .attempt_timeout(secs(1))
        .build()
        .unwrap();
    let earlier = [Scripted::time_out(), Scripted::succeed()];
    let last = [
        Scripted::fail(Failure::retryable()),
        Scripted::fail(Failure::retryable()),
        Scripted::time_out(),
    ];
    assert_eq!(last_action(&policy, &earlier), Action::Done { attempts: 2 });
    let Action::GiveUp(g) = last_action(&policy, &last) else {
        panic!("must give up")
    };
    assert_eq!(
        (g.reason, g.attempts, g.last_failure),
        (
            GiveUpReason::TimedOut { timeout: secs(1) },
            3,
            Some(FailureKind::Timeout)
        )
    );
    insta::assert_snapshot!(
        "timeout_earlier",
        Timeline::new(&policy, SEED, &earlier).to_string()
    );
    insta::assert_snapshot!(
        "timeout_last",
        Timeline::new(&policy, SEED, &last).to_string()
    );
    // Timeouts not retried: the first timeout ends the call.
    let strict = policy.to_builder().retry_timeouts(false).build().unwrap();
    insta::assert_snapshot!(
        "timeout_not_retried",
        Timeline::new(&strict, SEED, &earlier).to_string()
    );
}

#[test]
fn permanent_failure_on_attempt_2() {
    let policy = RetryPolicy::builder().max_attempts(5).build().unwrap();
    let script = [
        Scripted::fail(Failure::retryable()).after(ms(30)),
        Scripted::fail(Failure::permanent().with_kind(FailureKind::Status(404))).after(ms(20)),
    ];
    let Action::GiveUp(g) = last_action(&policy, &script) else {
        panic!("must give up")
    };
    assert_eq!(g.reason, GiveUpReason::Permanent);
    assert_eq!(g.attempts, 2);
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &script).to_string());
}

#[test]
fn cancellation_during_a_sleep_and_before_an_attempt() {
    let policy = no_jitter()
        .max_attempts(5)
        .backoff(Backoff::constant(secs(2)))
        .build()
        .unwrap();
    let during = Timeline::new(&policy, SEED, &[]).cancel_at(ms(700));
    // The first sleep ends at 2 s: cancelling then comes before attempt 2 starts.
    let before = Timeline::new(&policy, SEED, &[]).cancel_at(secs(2));
    let before_first = Timeline::new(&policy, SEED, &[]).cancel_at(Duration::ZERO);
    for t in [during, before, before_first] {
        let last = t.steps().last().unwrap();
        let Action::GiveUp(g) = last.action else {
            panic!("must give up")
        };
        assert_eq!(g.reason, GiveUpReason::Cancelled);
    }
    assert_eq!(before.steps().last().unwrap().at.as_duration(), secs(2));
    insta::assert_snapshot!("cancel_during_sleep", during.to_string());
    insta::assert_snapshot!("cancel_before_attempt", before.to_string());
    insta::assert_snapshot!("cancel_before_first_attempt", before_first.to_string());
}

#[test]
fn server_delay_under_both_modes() {
    let base = no_jitter()
        .max_attempts(5)
        .backoff(Backoff::exponential(secs(1), 2.0))
        .max_delay(secs(30));
    let script = [
        Scripted::fail(Failure::retry_after(Duration::ZERO)),
        Scripted::fail(Failure::retry_after(secs(3))),
        Scripted::fail(Failure::retry_after(secs(600))),
        Scripted::fail(Failure::retryable()),
        Scripted::succeed(),
    ];
    let override_ = base.hints(HintMode::OVERRIDE_DEFAULT).build().unwrap();
    // 0 -> floor 100 ms; 3 s as is; 10 min -> ceiling 60 s; then the curve (8 s).
    assert_eq!(
        sleeps(&override_, &script),
        [ms(100), secs(3), secs(60), secs(8)]
    );
    let at_least = base
        .hints(HintMode::AtLeast { cap: secs(300) })
        .jitter(Jitter::Add(0.1))
        .build()
        .unwrap();
    let at_least_sleeps = sleeps(&at_least, &script);
    // max(curve, hint) plus additive jitter, never below the honoured hint (capped at 5 min).
    assert!(at_least_sleeps[0] >= secs(1) && at_least_sleeps[0] < ms(1100));
    assert!(at_least_sleeps[1] >= secs(3) && at_least_sleeps[1] < ms(3300));
    assert!(at_least_sleeps[2] >= secs(300) && at_least_sleeps[2] < secs(330));
    let ignore = base.hints(HintMode::Ignore).build().unwrap();
    assert_eq!(
        sleeps(&ignore, &script),
        [secs(1), secs(2), secs(4), secs(8)]
    );
    insta::assert_snapshot!(
        "hint_override",
        Timeline::new(&override_, SEED, &script).to_string()
    );
    insta::assert_snapshot!(
        "hint_at_least",
        Timeline::new(&at_least, SEED, &script).to_string()
    );
    insta::assert_snapshot!(
        "hint_ignore",
        Timeline::new(&ignore, SEED, &script).to_string()
    );
}

#[test]
fn pushback_is_exact_and_restarts_the_curve() {
    let policy = no_jitter()
        .max_attempts(6)
        .backoff(Backoff::exponential(secs(1), 2.0))
        .build()
        .unwrap();
    let script = [
        Scripted::fail(Failure::retryable()),
        Scripted::fail(Failure::retryable()),
        Scripted::fail(Failure::retryable().with_hint(Hint::Pushback(ms(1234)))),
        Scripted::fail(Failure::retryable()),
        Scripted::fail(Failure::retryable()),
    ];
    assert_eq!(
        sleeps(&policy, &script),
        [secs(1), secs(2), ms(1234), secs(1), secs(2)]
    );
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &script).to_string());
}

#[test]
fn timeline_cuts_long_runs() {
    let policy = no_jitter()
        .max_attempts(u32::MAX)
        .backoff(Backoff::constant(ms(1)))
        .build()
        .unwrap();
    let text = Timeline::new(&policy, SEED, &[]).max_rows(5).to_string();
    insta::assert_snapshot!(text);
}

#[test]
fn a_shared_retry_budget_refuses_the_third_retry() {
    let policy = no_jitter()
        .max_attempts(6)
        .backoff(Backoff::constant(ms(100)))
        .use_retry_budget(true)
        .build()
        .unwrap();
    let timeline = Timeline::new(&policy, SEED, &[]);
    let steps: Vec<_> = Simulation::new(&policy, SEED, &[])
        .retry_budget(2)
        .collect();
    let Action::GiveUp(g) = steps.last().unwrap().action else {
        panic!("must give up")
    };
    assert_eq!((g.reason, g.attempts), (GiveUpReason::RetryBudget, 3));
    assert_eq!(g.code(), "retry.retry_budget");
    // With every withdrawal granted the call runs to exhaustion.
    assert!(matches!(
        timeline.steps().last().unwrap().action,
        Action::GiveUp(g) if g.reason == GiveUpReason::Exhausted && g.attempts == 6
    ));
    let rows: Vec<String> = steps.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!(rows.join("\n"));
}

#[test]
fn an_open_circuit_gives_up_or_waits_without_burning_an_attempt() {
    use retry_core::CircuitOpen;
    let script = [
        Scripted::fail(Failure::retryable()),
        Scripted::rejected(secs(5)),
        Scripted::succeed(),
    ];
    let base = no_jitter()
        .max_attempts(3)
        .backoff(Backoff::constant(secs(1)));
    let give_up = base.build().unwrap();
    let Action::GiveUp(g) = last_action(&give_up, &script) else {
        panic!("must give up")
    };
    assert_eq!(
        (g.reason, g.attempts),
        (
            GiveUpReason::CircuitOpen {
                wait: Some(secs(5))
            },
            1
        )
    );
    assert_eq!(g.code(), "retry.circuit_open");
    let wait = base.on_circuit_open(CircuitOpen::Wait).build().unwrap();
    assert_eq!(last_action(&wait, &script), Action::Done { attempts: 2 });
    // Waiting counts against the time budget like any sleep.
    let tight = base
        .on_circuit_open(CircuitOpen::Wait)
        .budget(secs(4))
        .build()
        .unwrap();
    let Action::GiveUp(g) = last_action(&tight, &script) else {
        panic!("must give up")
    };
    assert_eq!(g.reason, GiveUpReason::Budget);
    insta::assert_snapshot!(
        "circuit_open_give_up",
        Timeline::new(&give_up, SEED, &script).to_string()
    );
    insta::assert_snapshot!(
        "circuit_open_wait",
        Timeline::new(&wait, SEED, &script).to_string()
    );
    insta::assert_snapshot!(
        "circuit_open_wait_budget",
        Timeline::new(&tight, SEED, &script).to_string()
    );
}

#[test]
fn a_non_idempotent_replay_is_flagged_even_when_it_succeeds() {
    let policy = no_jitter()
        .max_attempts(3)
        .backoff(Backoff::constant(ms(100)))
        .idempotent(false)
        .build()
        .unwrap();
    let script = [Scripted::fail(Failure::retryable()), Scripted::succeed()];
    let flags: Vec<(u32, bool)> = Simulation::new(&policy, SEED, &script)
        .filter_map(|s| match s.action {
            Action::Attempt {
                number,
                replays_non_idempotent,
                ..
            } => Some((number, replays_non_idempotent)),
            _ => None,
        })
        .collect();
    assert_eq!(flags, [(1, false), (2, true)]);
    insta::assert_snapshot!(Timeline::new(&policy, SEED, &script).to_string());
}
