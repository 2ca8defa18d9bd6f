//! Misuse of the hedge machine: every event that makes no sense in its phase is
//! refused as the `HedgeMachine` docs say, never panics, and leaves the machine
//! unchanged; every event that does make sense is accepted.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    Copies, Failure, GiveUpReason, HedgeAction, HedgeEvent, HedgeMachine, HedgeMisuse, HedgePhase,
    HedgePolicy, Instant, WaitReason,
};

fn events() -> Vec<HedgeEvent> {
    let mut all = vec![
        HedgeEvent::Start,
        HedgeEvent::Granted,
        HedgeEvent::Refused,
        HedgeEvent::Woke,
        HedgeEvent::Stopped,
        HedgeEvent::Cancelled,
    ];
    for copy in [0, 1, 2, 3, 17, u32::MAX] {
        all.extend([
            HedgeEvent::Launched { copy },
            HedgeEvent::Rejected { copy, until: None },
            HedgeEvent::Succeeded { copy },
            HedgeEvent::Failed {
                copy,
                failure: Failure::retryable(),
            },
            HedgeEvent::Failed {
                copy,
                failure: Failure::permanent(),
            },
        ]);
    }
    all
}

fn policy(budget: bool) -> HedgePolicy {
    HedgePolicy::builder()
        .max_attempts(3)
        .fixed_delay(Duration::from_millis(100))
        .timeout(Duration::from_secs(1))
        .use_retry_budget(budget)
        .build()
        .unwrap()
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// Sends every event to copies of `m`: those `accepts` lets through must change
/// nothing but be answered; the rest must be refused the same way by `try_poll`
/// and `poll`, leaving the machine exactly as it was.
fn check_phase(m: &HedgeMachine, phase: HedgePhase, accepts: impl Fn(&HedgeEvent) -> bool) {
    assert_eq!(m.phase(), phase);
    let expected = m.pending().unwrap_or(HedgeAction::GiveUp(not_started()));
    for event in events() {
        let mut a = *m;
        match a.try_poll(event, at(500)) {
            Ok(_) => assert!(accepts(&event), "{phase:?} accepted {event}"),
            Err(misuse) => {
                let HedgeMisuse {
                    event: e,
                    phase: p,
                    answer,
                } = misuse;
                assert!(!accepts(&event), "{phase:?} refused {event}");
                assert_eq!((e, p, answer), (event, phase, expected));
                assert_eq!(&a, m, "try_poll({event}) changed the machine");
                let mut b = *m;
                assert_eq!(b.poll(event, at(500)), expected);
                assert_eq!(&b, m, "poll({event}) changed the machine");
                assert!(!misuse.to_string().is_empty());
            }
        }
    }
}

fn not_started() -> retry_core::GiveUp {
    let mut m = HedgeMachine::new(&policy(false), 0);
    match m.poll(HedgeEvent::Woke, at(0)) {
        HedgeAction::GiveUp(g) => g,
        other => panic!("{other}"),
    }
}

#[test]
fn before_start_only_start_and_cancel_are_accepted() {
    let g = not_started();
    assert_eq!(
        (g.reason, g.attempts, g.last_failure),
        (GiveUpReason::NotStarted, 0, None)
    );
    assert_eq!(g.code(), "retry.not_started");
    let m = HedgeMachine::new(&policy(false), 0);
    assert_eq!(m.pending(), None);
    check_phase(&m, HedgePhase::Idle, |e| {
        matches!(e, HedgeEvent::Start | HedgeEvent::Cancelled)
    });
}

#[test]
fn launching_accepts_only_that_copy_and_cancel() {
    let mut m = HedgeMachine::new(&policy(false), 0);
    assert_eq!(
        m.poll(HedgeEvent::Start, at(0)),
        HedgeAction::Launch {
            copy: 1,
            replays_non_idempotent: false
        }
    );
    check_phase(&m, HedgePhase::Launching, |e| {
        matches!(
            e,
            HedgeEvent::Launched { copy: 1 }
                | HedgeEvent::Rejected { copy: 1, .. }
                | HedgeEvent::Cancelled
        )
    });
}

#[test]
fn withdrawing_accepts_only_the_budgets_answer_and_cancel() {
    let mut m = HedgeMachine::new(&policy(true), 0);
    let _ = m.poll(HedgeEvent::Start, at(0));
    let _ = m.poll(HedgeEvent::Launched { copy: 1 }, at(0));
    assert_eq!(
        m.poll(HedgeEvent::Woke, at(100)),
        HedgeAction::Withdraw { copy: 2 }
    );
    check_phase(&m, HedgePhase::Withdrawing, |e| {
        matches!(
            e,
            HedgeEvent::Granted | HedgeEvent::Refused | HedgeEvent::Cancelled
        )
    });
}

#[test]
fn waiting_accepts_only_answers_of_copies_in_flight() {
    let mut m = HedgeMachine::new(&policy(false), 0);
    let _ = m.poll(HedgeEvent::Start, at(0));
    let _ = m.poll(HedgeEvent::Launched { copy: 1 }, at(0));
    let _ = m.poll(HedgeEvent::Woke, at(100));
    let wait = m.poll(HedgeEvent::Launched { copy: 2 }, at(100));
    assert_eq!(
        wait,
        HedgeAction::Wait {
            until: Some(at(200)),
            reason: WaitReason::Hedge
        }
    );
    assert_eq!(m.in_flight(), Copies::EMPTY.with(1).with(2));
    check_phase(&m, HedgePhase::Waiting, |e| match e {
        HedgeEvent::Succeeded { copy } | HedgeEvent::Failed { copy, .. } => {
            *copy == 1 || *copy == 2
        }
        HedgeEvent::Woke | HedgeEvent::Cancelled => true,
        _ => false,
    });
    // Waking early is harmless: the same wait again, nothing changed.
    let mut early = m;
    assert_eq!(early.poll(HedgeEvent::Woke, at(150)), wait);
    assert_eq!(early.in_flight(), m.in_flight());
    assert_eq!(early.launched(), 2);
}

#[test]
fn cancelling_accepts_only_stopped_and_finished_accepts_nothing() {
    let mut m = HedgeMachine::new(&policy(false), 0);
    let _ = m.poll(HedgeEvent::Start, at(0));
    let _ = m.poll(HedgeEvent::Launched { copy: 1 }, at(0));
    let _ = m.poll(HedgeEvent::Woke, at(100));
    let _ = m.poll(HedgeEvent::Launched { copy: 2 }, at(100));
    assert_eq!(
        m.poll(HedgeEvent::Succeeded { copy: 1 }, at(120)),
        HedgeAction::Cancel {
            copies: Copies::EMPTY.with(2)
        }
    );
    check_phase(&m, HedgePhase::Cancelling, |e| *e == HedgeEvent::Stopped);
    let done = m.poll(HedgeEvent::Stopped, at(120));
    assert_eq!(
        done,
        HedgeAction::Done {
            copy: 1,
            launched: 2,
            latency: Duration::from_millis(120)
        }
    );
    assert!(m.in_flight().is_empty());
    check_phase(&m, HedgePhase::Finished, |_| false);
}

#[test]
fn time_going_backwards_counts_as_no_time() {
    let mut m = HedgeMachine::new(&policy(false), 0);
    let _ = m.poll(HedgeEvent::Start, at(50));
    let wait = m.poll(HedgeEvent::Launched { copy: 1 }, at(50));
    assert_eq!(
        wait,
        HedgeAction::Wait {
            until: Some(at(150)),
            reason: WaitReason::Hedge
        }
    );
    // A clock that jumps back to 0 is read as 50: still waiting.
    assert_eq!(m.poll(HedgeEvent::Woke, at(0)), wait);
    assert_eq!(m.started_at(), Some(at(50)));
    assert_eq!(m.deadline(), Some(at(1_050)));
    assert_eq!(m.next_deadline(), Some(at(150)));
    assert_eq!(m.launched_at(1), Some(at(50)));
    assert_eq!(m.launched_at(2), None);
    assert_eq!(m.next_launch_at(), Some(at(150)));
}

#[test]
fn extreme_instants_never_panic_and_never_ask_a_wait_already_due() {
    let p = HedgePolicy::builder()
        .max_attempts(3)
        .fixed_delay(Duration::MAX)
        .timeout(Duration::MAX)
        .build()
        .unwrap();
    let mut m = HedgeMachine::new(&p, 0);
    // A timeout that ends past the last instant is no timeout at all.
    assert!(matches!(
        m.poll(HedgeEvent::Start, Instant::MAX),
        HedgeAction::Launch { copy: 1, .. }
    ));
    assert_eq!(m.deadline(), None);
    // At the end of time the delay saturates to now: the next copy is due at once.
    assert!(matches!(
        m.poll(HedgeEvent::Launched { copy: 1 }, Instant::MAX),
        HedgeAction::Launch { copy: 2, .. }
    ));
    let _ = m.poll(HedgeEvent::Launched { copy: 2 }, Instant::MAX);
    // Every copy is sent: a failure with a pushback past the end of time leaves
    // the call waiting for the two copies in flight.
    let pushback = Failure::retryable().with_hint(retry_core::Hint::Pushback(Duration::MAX));
    let _ = m.poll(HedgeEvent::Launched { copy: 3 }, Instant::MAX);
    let action = m.poll(
        HedgeEvent::Failed {
            copy: 3,
            failure: pushback,
        },
        Instant::MAX,
    );
    assert_eq!(
        action,
        HedgeAction::Wait {
            until: None,
            reason: WaitReason::Answer
        }
    );
}
