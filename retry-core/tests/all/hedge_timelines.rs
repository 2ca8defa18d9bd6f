//! Hedge timelines recorded whole and compared as insta snapshots, one per mode
//! and per rule. The numbers a rule is about (who won, which copies were
//! cancelled, when a copy was sent) are asserted as well.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    Copies, Failure, GiveUpReason, HedgeAction, HedgeEvent, HedgeMode, HedgePolicy,
    HedgePolicyBuilder, HedgeSimulation, HedgeStep, HedgeTimeline, Hint, Instant, Jitter,
    LatencyHistogram, Scripted,
};

const SEED: u64 = 0x00C0_FFEE;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ok_after(n: u64) -> Scripted {
    Scripted::succeed().after(ms(n))
}

fn fail_after(n: u64) -> Scripted {
    Scripted::fail(Failure::retryable()).after(ms(n))
}

fn hedge(attempts: u32, delay: u64) -> HedgePolicyBuilder {
    HedgePolicy::builder()
        .max_attempts(attempts)
        .fixed_delay(ms(delay))
}

fn steps(policy: &HedgePolicy, script: &[Scripted]) -> Vec<HedgeStep> {
    HedgeSimulation::new(policy, SEED, script).collect()
}

/// When each copy was sent.
fn launches(steps: &[HedgeStep]) -> Vec<(u32, Duration)> {
    steps
        .iter()
        .filter_map(|s| match s.event {
            HedgeEvent::Launched { copy } => Some((copy, s.at.as_duration())),
            _ => None,
        })
        .collect()
}

fn cancelled(steps: &[HedgeStep]) -> Vec<Copies> {
    steps
        .iter()
        .filter_map(|s| match s.action {
            HedgeAction::Cancel { copies } => Some(copies),
            _ => None,
        })
        .collect()
}

fn last(steps: &[HedgeStep]) -> HedgeAction {
    steps.last().expect("at least one step").action
}

fn set(copies: &[u32]) -> Copies {
    copies.iter().fold(Copies::EMPTY, |s, c| s.with(*c))
}

fn give_up_reason(action: HedgeAction) -> GiveUpReason {
    match action {
        HedgeAction::GiveUp(g) => g.reason,
        other => panic!("expected a give-up, got {other}"),
    }
}

fn snapshot(name: &str, timeline: HedgeTimeline<'_>) {
    insta::assert_snapshot!(name, timeline.to_string());
}

#[test]
fn latency_mode_slow_first_copy_loses_to_the_hedge() {
    let policy = hedge(2, 50).build().unwrap();
    let script = [ok_after(300), ok_after(20)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(50))]);
    assert_eq!(cancelled(&s), [set(&[1])]);
    assert_eq!(
        last(&s),
        HedgeAction::Done {
            copy: 2,
            launched: 2,
            latency: ms(20)
        }
    );
    assert_eq!(s.last().unwrap().at.as_duration(), ms(70));
    snapshot(
        "latency_slow_first_copy",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn latency_mode_fast_first_copy_sends_no_hedge() {
    let policy = hedge(3, 50).build().unwrap();
    let script = [ok_after(30)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0))]);
    assert!(cancelled(&s).is_empty());
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 1,
            launched: 1,
            ..
        }
    ));
    snapshot(
        "latency_fast_first_copy",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn latency_mode_three_copies_every_delay() {
    let policy = hedge(3, 100).build().unwrap();
    let script = [ok_after(1_000), ok_after(1_000), ok_after(50)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(100)), (3, ms(200))]);
    assert_eq!(cancelled(&s), [set(&[1, 2])]);
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 3,
            launched: 3,
            ..
        }
    ));
    snapshot(
        "latency_three_copies",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn in_flight_limit_holds_a_due_copy_until_a_slot_frees() {
    // Three copies, two at a time: copy 3 is due at 200 ms but waits for copy 1's
    // failure at 250 ms.
    let policy = hedge(3, 100).max_in_flight(2).build().unwrap();
    let script = [fail_after(250), ok_after(1_000), ok_after(10)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(100)), (3, ms(250))]);
    assert!(s.iter().all(|step| step.in_flight.len() <= 2));
    assert_eq!(cancelled(&s), [set(&[2])]);
    assert!(matches!(last(&s), HedgeAction::Done { copy: 3, .. }));
    snapshot(
        "in_flight_limit",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn fallback_mode_sends_the_next_copy_only_after_a_failure() {
    let policy = hedge(3, 10).mode(HedgeMode::Fallback).build().unwrap();
    // Copy 1 is slow and fails: no timer sends copy 2 before that.
    let script = [fail_after(400), fail_after(30), ok_after(20)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(400)), (3, ms(430))]);
    assert!(cancelled(&s).is_empty());
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 3,
            launched: 3,
            ..
        }
    ));
    snapshot("fallback_mode", HedgeTimeline::new(&policy, SEED, &script));
}

#[test]
fn parallel_mode_sends_every_copy_at_once_and_cancels_the_losers() {
    let policy = hedge(3, 100).mode(HedgeMode::Parallel).build().unwrap();
    let script = [ok_after(80), ok_after(40), ok_after(60)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(0)), (3, ms(0))]);
    assert_eq!(cancelled(&s), [set(&[1, 3])]);
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 2,
            launched: 3,
            ..
        }
    ));
    snapshot("parallel_mode", HedgeTimeline::new(&policy, SEED, &script));
}

#[test]
fn parallel_mode_respects_the_in_flight_limit_and_refills_after_a_failure() {
    let policy = hedge(4, 100)
        .mode(HedgeMode::Parallel)
        .max_in_flight(2)
        .build()
        .unwrap();
    let script = [fail_after(30), ok_after(500), ok_after(100), ok_after(1)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(0)), (3, ms(30))]);
    assert_eq!(cancelled(&s), [set(&[2])]);
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 3,
            launched: 3,
            ..
        }
    ));
    snapshot(
        "parallel_in_flight_limit",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn a_non_fatal_failure_sends_the_next_copy_at_once() {
    let policy = hedge(3, 100).build().unwrap();
    let script = [fail_after(20), ok_after(30)];
    let s = steps(&policy, &script);
    // Not at 100 ms: at the failure.
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(20))]);
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 2,
            launched: 2,
            ..
        }
    ));
    snapshot(
        "non_fatal_failure",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn a_permanent_failure_ends_the_call_and_cancels_the_rest() {
    let policy = hedge(3, 50).build().unwrap();
    let script = [
        ok_after(1_000),
        Scripted::fail(Failure::permanent().with_kind(retry_core::FailureKind::Status(404)))
            .after(ms(10)),
    ];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(50))]);
    assert_eq!(cancelled(&s), [set(&[1])]);
    let HedgeAction::GiveUp(g) = last(&s) else {
        panic!("{}", last(&s))
    };
    assert_eq!(g.reason, GiveUpReason::Permanent);
    assert_eq!(g.attempts, 2);
    assert_eq!(g.last_failure, Some(retry_core::FailureKind::Status(404)));
    assert_eq!(s.last().unwrap().at.as_duration(), ms(60));
    snapshot(
        "permanent_failure",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn pushback_delays_the_next_copy_by_exactly_the_hint() {
    let policy = hedge(3, 100).build().unwrap();
    let pushback = Failure::retryable().with_hint(Hint::Pushback(ms(250)));
    let script = [Scripted::fail(pushback).after(ms(20)), ok_after(10)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(270))]);
    assert!(matches!(last(&s), HedgeAction::Done { copy: 2, .. }));
    snapshot("pushback", HedgeTimeline::new(&policy, SEED, &script));
}

#[test]
fn pushback_while_another_copy_runs_postpones_the_next_hedge() {
    // Copy 1 is slow; copy 2 (sent at 50 ms) is pushed back by 300 ms at 60 ms:
    // copy 3 is sent at 360 ms, not at 100 ms.
    let policy = hedge(3, 50).build().unwrap();
    let pushback = Failure::retryable().with_hint(Hint::Pushback(ms(300)));
    let script = [
        ok_after(2_000),
        Scripted::fail(pushback).after(ms(10)),
        ok_after(5),
    ];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(50)), (3, ms(360))]);
    assert_eq!(cancelled(&s), [set(&[1])]);
    snapshot(
        "pushback_in_flight",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn every_hedge_withdraws_from_the_retry_budget() {
    let policy = hedge(3, 50).use_retry_budget(true).build().unwrap();
    let script = [ok_after(1_000), ok_after(1_000), ok_after(20)];
    let s = steps(&policy, &script);
    let withdrawals: Vec<u32> = s
        .iter()
        .filter_map(|s| match s.action {
            HedgeAction::Withdraw { copy } => Some(copy),
            _ => None,
        })
        .collect();
    assert_eq!(withdrawals, [2, 3], "one per copy after the first");
    assert!(matches!(last(&s), HedgeAction::Done { copy: 3, .. }));
    snapshot(
        "retry_budget_grants",
        HedgeTimeline::new(&policy, SEED, &script),
    );
}

#[test]
fn a_budget_refusal_stops_hedging_without_failing_the_copy_in_flight() {
    let policy = hedge(3, 50).use_retry_budget(true).build().unwrap();
    let script = [ok_after(400), ok_after(1)];
    let s: Vec<_> = HedgeSimulation::new(&policy, SEED, &script)
        .retry_budget(0)
        .collect();
    assert_eq!(launches(&s), [(1, ms(0))]);
    assert!(s.iter().any(|s| s.event == HedgeEvent::Refused));
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 1,
            launched: 1,
            ..
        }
    ));
    assert_eq!(s.last().unwrap().at.as_duration(), ms(400));
    snapshot(
        "retry_budget_refuses",
        HedgeTimeline::new(&policy, SEED, &script).retry_budget(0),
    );
}

#[test]
fn a_budget_refusal_with_nothing_in_flight_gives_up() {
    let policy = hedge(3, 50).use_retry_budget(true).build().unwrap();
    let script = [fail_after(10)];
    let s: Vec<_> = HedgeSimulation::new(&policy, SEED, &script)
        .retry_budget(0)
        .collect();
    assert_eq!(give_up_reason(last(&s)), GiveUpReason::RetryBudget);
    snapshot(
        "retry_budget_refuses_after_failure",
        HedgeTimeline::new(&policy, SEED, &script).retry_budget(0),
    );
}

#[test]
fn a_non_idempotent_call_is_never_hedged_unless_allowed() {
    let script = [ok_after(500), ok_after(10)];
    let never = hedge(3, 50).idempotent(false).build().unwrap();
    let s = steps(&never, &script);
    assert_eq!(launches(&s), [(1, ms(0))]);
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 1,
            launched: 1,
            ..
        }
    ));
    snapshot(
        "non_idempotent_never",
        HedgeTimeline::new(&never, SEED, &script),
    );

    // A failure is not replayed either.
    let fails = [fail_after(10)];
    let s = steps(&never, &fails);
    assert_eq!(launches(&s), [(1, ms(0))]);
    assert_eq!(give_up_reason(last(&s)), GiveUpReason::Exhausted);

    let allowed = hedge(3, 50)
        .idempotent(false)
        .hedge_non_idempotent(true)
        .build()
        .unwrap();
    let s = steps(&allowed, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(50))]);
    assert!(s.iter().any(|s| s.action
        == HedgeAction::Launch {
            copy: 2,
            replays_non_idempotent: true
        }));
    snapshot(
        "non_idempotent_allowed",
        HedgeTimeline::new(&allowed, SEED, &script),
    );
}

#[test]
fn an_adaptive_delay_waits_for_enough_samples() {
    let policy = hedge(2, 0)
        .adaptive_delay(90.0, 10, ms(200))
        .build()
        .unwrap();
    let script = [ok_after(1_000), ok_after(5)];
    let mut latencies = LatencyHistogram::new();
    for n in 1..=9 {
        latencies.record(ms(n * 10));
    }
    // Nine samples: the fallback, 200 ms.
    let s: Vec<_> = HedgeSimulation::with_latencies(&policy, SEED, &latencies, &script).collect();
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(200))]);
    snapshot(
        "adaptive_before_min_samples",
        HedgeTimeline::new(&policy, SEED, &script).latencies(&latencies),
    );
    // The tenth sample: the 90th percentile of 10..=100 ms is the ninth, 90 ms,
    // read as its bucket's upper edge (no more than a quarter above it).
    latencies.record(ms(100));
    let s: Vec<_> = HedgeSimulation::with_latencies(&policy, SEED, &latencies, &script).collect();
    let sent = launches(&s)[1].1;
    assert!(sent >= ms(90) && sent <= ms(112), "{sent:?}");
    snapshot(
        "adaptive_from_min_samples",
        HedgeTimeline::new(&policy, SEED, &script).latencies(&latencies),
    );
}

#[test]
fn the_timeout_cancels_every_copy_in_flight() {
    let policy = hedge(3, 100).timeout(ms(250)).build().unwrap();
    let script = [Scripted::time_out()];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(100)), (3, ms(200))]);
    assert_eq!(cancelled(&s), [set(&[1, 2, 3])]);
    assert_eq!(
        give_up_reason(last(&s)),
        GiveUpReason::TimedOut { timeout: ms(250) }
    );
    assert_eq!(s.last().unwrap().at.as_duration(), ms(250));
    snapshot("timeout", HedgeTimeline::new(&policy, SEED, &script));
}

#[test]
fn the_caller_cancelling_stops_every_copy() {
    let policy = hedge(3, 100).build().unwrap();
    let script = [Scripted::time_out()];
    let s: Vec<_> = HedgeSimulation::new(&policy, SEED, &script)
        .cancel_at(ms(150))
        .collect();
    assert_eq!(cancelled(&s), [set(&[1, 2])]);
    assert_eq!(give_up_reason(last(&s)), GiveUpReason::Cancelled);
    snapshot(
        "cancelled",
        HedgeTimeline::new(&policy, SEED, &script).cancel_at(ms(150)),
    );
    // Cancelled before the start: nothing is sent.
    let s: Vec<_> = HedgeSimulation::new(&policy, SEED, &script)
        .cancel_at(Duration::ZERO)
        .collect();
    assert!(launches(&s).is_empty());
    assert_eq!(give_up_reason(last(&s)), GiveUpReason::Cancelled);
}

#[test]
fn a_breaker_rejecting_a_hedge_stops_hedging_but_not_the_first_copy() {
    let policy = hedge(3, 50).build().unwrap();
    let script = [ok_after(300), Scripted::rejected(ms(1_000))];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0))]);
    assert!(matches!(
        last(&s),
        HedgeAction::Done {
            copy: 1,
            launched: 1,
            ..
        }
    ));
    snapshot(
        "breaker_rejects_hedge",
        HedgeTimeline::new(&policy, SEED, &script),
    );

    let all_rejected = [Scripted::rejected(ms(1_000))];
    let s = steps(&policy, &all_rejected);
    assert_eq!(
        give_up_reason(last(&s)),
        GiveUpReason::CircuitOpen {
            wait: Some(ms(1_000))
        }
    );
    snapshot(
        "breaker_rejects_first",
        HedgeTimeline::new(&policy, SEED, &all_rejected),
    );
}

#[test]
fn every_copy_failing_exhausts_the_call() {
    let policy = hedge(3, 50).build().unwrap();
    let script = [fail_after(70)];
    let s = steps(&policy, &script);
    assert_eq!(launches(&s), [(1, ms(0)), (2, ms(50)), (3, ms(70))]);
    let HedgeAction::GiveUp(g) = last(&s) else {
        panic!()
    };
    assert_eq!((g.reason, g.attempts), (GiveUpReason::Exhausted, 3));
    snapshot("exhausted", HedgeTimeline::new(&policy, SEED, &script));
}

#[test]
fn jittered_delays_are_fixed_by_the_seed() {
    for jitter in [Jitter::Full, Jitter::Equal, Jitter::Spread(0.2)] {
        let policy = hedge(4, 100).jitter(jitter).build().unwrap();
        let script = [ok_after(1_000)];
        let a = steps(&policy, &script);
        assert_eq!(a, steps(&policy, &script));
        snapshot(
            &format!("jitter_{}", jitter.name()),
            HedgeTimeline::new(&policy, SEED, &script),
        );
    }
}

#[test]
fn a_late_answer_of_a_cancelled_copy_is_refused() {
    let policy = hedge(2, 50).build().unwrap();
    let mut m = retry_core::HedgeMachine::new(&policy, SEED);
    let at = Instant::from_millis;
    let _ = m.poll(HedgeEvent::Start, at(0));
    let _ = m.poll(HedgeEvent::Launched { copy: 1 }, at(0));
    let _ = m.poll(HedgeEvent::Woke, at(50));
    let _ = m.poll(HedgeEvent::Launched { copy: 2 }, at(50));
    let _ = m.poll(HedgeEvent::Succeeded { copy: 2 }, at(60));
    let done = m.poll(HedgeEvent::Stopped, at(60));
    let before = m;
    let misuse = m
        .try_poll(HedgeEvent::Succeeded { copy: 1 }, at(70))
        .unwrap_err();
    assert_eq!(misuse.answer, done);
    assert_eq!(m, before);
}

#[test]
fn a_timeout_at_the_moment_a_copy_is_due_wins_the_tie() {
    // The second copy would be due at 100 ms, when the call's time is up: the
    // wait names the timeout, and no copy is sent at the end.
    let policy = hedge(2, 100).timeout(ms(100)).build().unwrap();
    let s = steps(&policy, &[Scripted::time_out()]);
    assert!(s.iter().any(|s| s.action
        == HedgeAction::Wait {
            until: Some(Instant::from_millis(100)),
            reason: retry_core::WaitReason::Timeout
        }));
    assert_eq!(launches(&s), [(1, ms(0))]);
    assert_eq!(
        give_up_reason(last(&s)),
        GiveUpReason::TimedOut { timeout: ms(100) }
    );
}
