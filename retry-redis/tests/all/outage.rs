//! Redis killed in the middle of a run and restarted: every call ends exactly
//! once, no withdrawal waits past the timeout, the fallbacks are counted; once
//! Redis is back, syncing resumes and the fleet's view converges.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::Arc;
use std::time::Instant;

use retry_core::{
    Action, BreakerConfig, BudgetConfig, BudgetInput, Event, FleetConfig, FleetRule, HedgeAction,
    HedgeEvent, Rate, RetryKind, RetryMachine, RetryPolicy,
};
use retry_redis::{FleetBreaker, FleetBudget};
use retry_shared::Budget;

const TIMEOUT: Duration = Duration::from_millis(20);
const INTERVAL: Duration = Duration::from_millis(100);

/// A budget that measures how long each withdrawal waited.
#[derive(Debug)]
struct Timed {
    budget: FleetBudget,
    longest_micros: AtomicU64,
    withdrawals: AtomicU64,
}

impl Budget for Timed {
    fn feed(
        &self,
        machine: &RetryMachine<&RetryPolicy>,
        event: Event,
        action: Action,
        now: Instant,
    ) -> Option<Event> {
        let start = Instant::now();
        let answer = self.budget.feed(machine, event, action, now);
        if answer.is_some() {
            let waited = u64::try_from(start.elapsed().as_micros()).unwrap();
            self.longest_micros.fetch_max(waited, Ordering::Relaxed);
            self.withdrawals.fetch_add(1, Ordering::Relaxed);
        }
        answer
    }

    fn feed_hedge(
        &self,
        event: HedgeEvent,
        action: HedgeAction,
        now: Instant,
    ) -> Option<HedgeEvent> {
        self.budget.feed_hedge(event, action, now)
    }
}

struct Instance {
    budget: Arc<Timed>,
    breaker: FleetBreaker,
    started: Arc<AtomicU64>,
    ended: Arc<AtomicU64>,
}

#[test]
fn redis_killed_mid_run_and_restarted() {
    // Its waits are timed: not beside a cluster's three servers.
    let _turn = common::heavy_turn();
    if let Some(mut redis) = common::Redis::single("redis_killed_mid_run_and_restarted") {
        killed_mid_run_and_restarted(&mut redis);
    }
}

/// The same with every node of a three-node Redis Cluster killed and started
/// again (empty; the nodes find each other from their saved configuration).
#[test]
fn a_redis_cluster_killed_mid_run_and_restarted() {
    if let Some(mut redis) = common::Redis::cluster("a_redis_cluster_killed_mid_run_and_restarted")
    {
        killed_mid_run_and_restarted(&mut redis);
    }
}

fn killed_mid_run_and_restarted(server: &mut common::Redis) {
    let breaker_config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(90))
        .count_window(100)
        .minimum_calls(100)
        .build()
        .unwrap();
    let policy = common::one_retry();
    let stop = Arc::new(AtomicBool::new(false));
    let mut instances = Vec::new();
    let mut threads = Vec::new();
    for _ in 0..3 {
        let fleet = server.fleet().namespace("outage").unwrap();
        let budget = Arc::new(Timed {
            budget: fleet
                .budget(
                    "shared",
                    BudgetConfig::aws().capacity(100_000).build().unwrap(),
                )
                .timeout(TIMEOUT)
                .build()
                .unwrap(),
            longest_micros: AtomicU64::new(0),
            withdrawals: AtomicU64::new(0),
        });
        let breaker = fleet
            .breaker(
                "dep",
                breaker_config,
                FleetConfig::new(FleetRule::Quorum(1)).sync_interval(INTERVAL),
            )
            .build()
            .unwrap();
        let instance = Instance {
            budget,
            breaker,
            started: Arc::new(AtomicU64::new(0)),
            ended: Arc::new(AtomicU64::new(0)),
        };
        let retry = Arc::new(
            retry_tokio::Retry::<&str>::new(policy)
                .budget(Arc::clone(&instance.budget))
                .breaker(instance.breaker.clone()),
        );
        let (stop, started, ended) = (
            Arc::clone(&stop),
            Arc::clone(&instance.started),
            Arc::clone(&instance.ended),
        );
        threads.push(std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let workers: Vec<_> = (0..20)
                    .map(|_| {
                        let (retry, stop, started, ended) = (
                            Arc::clone(&retry),
                            Arc::clone(&stop),
                            Arc::clone(&started),
                            Arc::clone(&ended),
                        );
                        tokio::spawn(async move {
                            while !stop.load(Ordering::Relaxed) {
                                started.fetch_add(1, Ordering::Relaxed);
                                // The first attempt fails, the retry (if granted) succeeds.
                                let _ = retry
                                    .call(|a| async move {
                                        if a.is_first() {
                                            Err("once")
                                        } else {
                                            Ok(())
                                        }
                                    })
                                    .await;
                                ended.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(2)).await;
                            }
                        })
                    })
                    .collect();
                for w in workers {
                    w.await.unwrap();
                }
            });
        }));
        instances.push(instance);
    }

    std::thread::sleep(Duration::from_millis(500));
    let before: Vec<u64> = instances
        .iter()
        .map(|i| i.budget.budget.fallbacks())
        .collect();
    let synced: Vec<u64> = instances.iter().map(|i| i.breaker.syncs()).collect();
    assert!(
        synced.iter().all(|s| *s >= 2),
        "syncing while redis is up: {synced:?}"
    );

    server.kill();
    let killed = Instant::now();
    std::thread::sleep(Duration::from_millis(800));
    for (n, i) in instances.iter().enumerate() {
        let fallbacks = i.budget.budget.fallbacks();
        assert!(
            fallbacks > before[n],
            "instance {n}: withdrawals fell back ({fallbacks})"
        );
        assert!(
            i.breaker.sync_errors() > 0,
            "instance {n}: failed syncs are counted"
        );
    }

    server.restart();
    let restarted = Instant::now();
    eprintln!("redis was down for {:?}", restarted - killed);
    // Syncing resumes and every instance sees all three members again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let converged = loop {
        let all = instances.iter().all(|i| {
            i.breaker
                .last_sync()
                .is_some_and(|s| s.at > restarted && s.view.members == 3)
        });
        if all || Instant::now() > deadline {
            break all;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(converged, "the fleet view converged after the restart");
    eprintln!(
        "the fleet view converged {:?} after the restart",
        restarted.elapsed()
    );
    // The budget answers from Redis again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while instances[0]
        .budget
        .budget
        .apply_blocking(&[BudgetInput::Withdraw(RetryKind::Failure)], None)
        .is_err()
    {
        assert!(Instant::now() < deadline, "the budget reconnected");
        std::thread::sleep(Duration::from_millis(20));
    }

    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    for (n, i) in instances.iter().enumerate() {
        let (started, ended) = (
            i.started.load(Ordering::Relaxed),
            i.ended.load(Ordering::Relaxed),
        );
        assert_eq!(
            started, ended,
            "instance {n}: every call ended exactly once"
        );
        let longest = Duration::from_micros(i.budget.longest_micros.load(Ordering::Relaxed));
        eprintln!(
            "instance {n}: {started} calls, {} withdrawals, {} fallbacks, longest wait {longest:?} (timeout {TIMEOUT:?})",
            i.budget.withdrawals.load(Ordering::Relaxed),
            i.budget.budget.fallbacks()
        );
        // The wait is bounded by the timeout; the slack is the thread being
        // scheduled again on a loaded machine, not Redis.
        assert!(
            longest <= TIMEOUT + Duration::from_millis(30),
            "instance {n}: waited {longest:?}"
        );
        assert!(i.budget.budget.logged() >= 1);
    }
}
