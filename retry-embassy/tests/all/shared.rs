//! A breaker and a budget shared by calls on several tasks, on the mock clock.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use core::cell::{Cell, RefCell};
use core::time::Duration;

use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_time::{Duration as Ticks, Timer};
use retry_core::{
    AttemptKind, Backoff, BasicRule, BreakerConfig, BreakerState, BudgetConfig, CircuitOpen, Event,
    GiveUpReason, Instant, Jitter, RetryBudget, RetryKind, RetryPolicy, Step,
};
use retry_embassy::{Retry, SharedBreaker, SharedBudget};
use support::{now, virtual_time, Tasks};

const MS: Ticks = Ticks::from_millis(1);

/// What the tasks saw of the half-open breaker.
#[derive(Debug, Default)]
struct Seen {
    /// Probes running at once, at most.
    most_probes: u32,
    /// Probes run in all.
    probes: u32,
    /// Attempts the breaker turned away because its probe slots were taken.
    turned_away: u32,
    /// Calls that succeeded.
    successes: u32,
}

/// `tasks` tasks read a device that fails until 1.5 s, each read taking 30 ms,
/// in calls that wait while the circuit is open; all share one breaker allowing
/// `permits` half-open probes. Runs until every task has had a successful read
/// after 2 s.
fn device_recovers_behind_a_shared_breaker(tasks_n: u8, permits: u32) -> Seen {
    let config = BreakerConfig::builder()
        .failure_threshold(2)
        .open_duration(Duration::from_millis(200))
        .half_open_permits(permits)
        .success_threshold(3)
        .build()
        .unwrap();
    let breaker: SharedBreaker<CriticalSectionRawMutex> = SharedBreaker::new(config).unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::exponential(Duration::from_millis(20), 2.0))
        .max_delay(Duration::from_millis(100))
        .jitter(Jitter::Full)
        .on_circuit_open(CircuitOpen::Wait)
        .build()
        .unwrap();
    let seen = RefCell::new(Seen::default());
    let probes_running = Cell::new(0u32);
    let turned_away = |s: &Step| {
        // A probe-slot rejection carries no time to come back at.
        if s.event == (Event::Rejected { until: None }) {
            seen.borrow_mut().turned_away += 1;
        }
    };
    let mut tasks = Tasks::new();
    for task in 0..tasks_n {
        let (breaker, seen, probes_running) = (&breaker, &seen, &probes_running);
        let retry = Retry::new(policy, u64::from(task))
            .breaker(breaker)
            .on_step(turned_away);
        tasks.spawn(async move {
            loop {
                let read = retry
                    .call(async |_| {
                        // Admitted while half-open: this attempt is a probe.
                        let probe = breaker.state() == BreakerState::HalfOpen;
                        if probe {
                            probes_running.set(probes_running.get() + 1);
                            let mut s = seen.borrow_mut();
                            s.probes += 1;
                            s.most_probes = s.most_probes.max(probes_running.get());
                            assert!(breaker.probes_in_flight() <= permits);
                        }
                        Timer::after(Ticks::from_millis(30)).await;
                        if probe {
                            probes_running.set(probes_running.get() - 1);
                        }
                        if now() < Duration::from_millis(1_500) {
                            Err("bus error")
                        } else {
                            Ok(())
                        }
                    })
                    .await;
                if read.is_ok() {
                    seen.borrow_mut().successes += 1;
                    if now() >= Duration::from_secs(2) {
                        return;
                    }
                }
                Timer::after(Ticks::from_millis(10)).await;
            }
        });
    }
    tasks.run(MS, Ticks::from_secs(30));
    drop(tasks);
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(breaker.probes_in_flight(), 0);
    seen.into_inner()
}

#[test]
fn two_tasks_never_run_more_than_the_one_allowed_probe() {
    let _clock = virtual_time();
    let seen = device_recovers_behind_a_shared_breaker(2, 1);
    assert_eq!(seen.most_probes, 1, "{seen:?}");
    // The limit was contended: the other task was turned away while a probe ran.
    assert!(seen.turned_away > 0, "{seen:?}");
    assert!(seen.probes >= 3, "{seen:?}");
    assert!(seen.successes >= 2, "{seen:?}");
}

#[test]
fn three_tasks_never_run_more_than_two_allowed_probes() {
    let _clock = virtual_time();
    let seen = device_recovers_behind_a_shared_breaker(3, 2);
    assert_eq!(seen.most_probes, 2, "{seen:?}");
    assert!(seen.turned_away > 0, "{seen:?}");
    assert!(seen.successes >= 3, "{seen:?}");
}

#[test]
fn an_open_breaker_turns_calls_away_without_running_them() {
    let _clock = virtual_time();
    let breaker: SharedBreaker<CriticalSectionRawMutex> = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 1,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let retry = Retry::new(policy, 1).breaker(&breaker);
    let ran = Cell::new(0);
    let results = RefCell::new(Vec::new());
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        for _ in 0..2 {
            let r = retry
                .call(async |_| {
                    ran.set(ran.get() + 1);
                    Err::<(), _>("timeout on the bus")
                })
                .await;
            results
                .borrow_mut()
                .push(r.map_err(|e| (e.reason(), e.attempts())));
        }
    });
    tasks.run(MS, Ticks::from_secs(1));
    drop(tasks);
    assert_eq!(ran.get(), 1, "the second attempt never ran");
    assert_eq!(
        results.into_inner(),
        [
            // The first failure opens the breaker for 5 s; the retry, 100 ms
            // later, is turned away; so is the next call, at the same moment.
            Err((
                GiveUpReason::CircuitOpen {
                    wait: Some(Duration::from_millis(4_900))
                },
                1
            )),
            Err((
                GiveUpReason::CircuitOpen {
                    wait: Some(Duration::from_millis(4_900))
                },
                0
            )),
        ]
    );
}

#[test]
fn two_tasks_draw_on_one_retry_budget_until_it_refuses() {
    let _clock = virtual_time();
    // Room for two retries: each costs 5 tokens of 10.
    let config = BudgetConfig::aws()
        .capacity(10)
        .retry_cost(5)
        .build()
        .unwrap();
    let budget: SharedBudget<CriticalSectionRawMutex> = SharedBudget::new(config);
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::constant(Duration::from_millis(10)))
        .jitter(Jitter::None)
        .use_retry_budget(true)
        .build()
        .unwrap();
    let results = RefCell::new(Vec::new());
    let mut tasks = Tasks::new();
    for task in 0..2u64 {
        let (budget, results) = (&budget, &results);
        tasks.spawn(async move {
            let retry = Retry::new(policy, task).budget(budget);
            let r = retry.call(async |_| Err::<(), _>(task)).await;
            let e = r.unwrap_err();
            results.borrow_mut().push((task, e.reason(), e.attempts()));
        });
    }
    tasks.run(MS, Ticks::from_secs(1));
    drop(tasks);
    let mut results = results.into_inner();
    results.sort_by_key(|r| r.0);
    // Both tasks fail at 0 ms and withdraw one retry each; at 10 ms both fail
    // again and the bucket is empty: both are refused, after two attempts each.
    assert_eq!(
        results,
        [
            (0, GiveUpReason::RetryBudget, 2),
            (1, GiveUpReason::RetryBudget, 2)
        ]
    );
    // The core's budget, told the same, holds the same tokens.
    let mut expected = RetryBudget::new(config);
    let t0 = Instant::ORIGIN;
    expected.on_first_attempt(t0);
    expected.on_first_attempt(t0);
    for _ in 0..2 {
        expected.on_failure(t0);
        assert!(expected.try_withdraw(RetryKind::Failure, t0).is_granted());
    }
    let t10 = Instant::from_millis(10);
    for _ in 0..2 {
        expected.on_failure(t10);
        assert!(!expected.try_withdraw(RetryKind::Failure, t10).is_granted());
    }
    assert_eq!(budget.tokens(), expected.tokens());
    assert_eq!(budget.tokens().whole(), 0);

    // A first-attempt success puts a token back (AWS refunds only retries, so
    // nothing here); a call that needs no retry still runs with an empty bucket.
    let ok = Cell::new(None);
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let retry = Retry::new(policy, 9).budget(&budget);
        ok.set(Some(retry.call(async |_| Ok::<u8, ()>(1)).await.is_ok()));
    });
    tasks.run(MS, Ticks::from_secs(1));
    assert_eq!(ok.get(), Some(true));
    expected.on_first_attempt(t10);
    expected.on_success(t10, AttemptKind::First);
    assert_eq!(budget.tokens(), expected.tokens());
}

#[test]
fn a_call_guarded_by_static_shared_state_is_send_for_an_interrupt_executor() {
    // An interrupt executor's spawner takes only `Send` futures.
    fn assert_send<T: Send>(_: &T) {}
    static BREAKER_CELL: std::sync::OnceLock<SharedBreaker<CriticalSectionRawMutex>> =
        std::sync::OnceLock::new();
    static BUDGET: SharedBudget<CriticalSectionRawMutex> =
        SharedBudget::new(BudgetConfig::aws_standard());
    static STOP: retry_embassy::CancelSignal<CriticalSectionRawMutex> =
        retry_embassy::CancelSignal::new();
    let breaker = BREAKER_CELL.get_or_init(|| {
        SharedBreaker::new(
            BreakerConfig::basic(BasicRule {
                failure_threshold: 3,
                open_duration: Duration::from_secs(1),
                success_threshold: 1,
            })
            .unwrap(),
        )
        .unwrap()
    });
    let retry = Retry::new(RetryPolicy::default(), 1)
        .breaker(breaker)
        .budget(&BUDGET)
        .cancel_on(&STOP)
        .classify(|_: &u8| retry_core::Failure::retryable());
    let call = retry.call(|ctx: retry_embassy::AttemptContext| async move {
        Timer::after(Ticks::from_millis(1)).await;
        Ok::<u32, u8>(ctx.attempt())
    });
    assert_send(&call);
}
