//! The fleet breaker's admission (ask, then record a success) with syncing on,
//! against the plain in-process `SharedBreaker`, in the same run; and the fleet
//! budget's withdrawal latency against a local redis-server (p50 and p99 of
//! 20,000 round trips, printed), beside the in-process `SharedBudget`.
//! Run: `cargo bench -p retry-redis --bench fleet` (needs `redis-server` on PATH;
//! it starts its own on a free port).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/all/common/mod.rs"]
mod common;

use core::hint::black_box;
use core::time::Duration;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use retry_core::{
    BasicRule, BreakerConfig, BudgetConfig, BudgetInput, CallOutcome, FleetConfig, FleetRule,
    RetryKind,
};
use retry_redis::Fleet;
use retry_shared::{Breaker, Clock, Gate, SharedBreaker};

/// The time read once per call, handed to both questions.
struct Read(Instant);

impl Clock for Read {
    fn now(&self) -> Instant {
        self.0
    }
}

fn admit(b: &dyn Breaker) {
    let now = Read(Instant::now());
    match b.request(&now) {
        Gate::Admitted(permit) => b.record(
            permit,
            CallOutcome::success(Duration::from_micros(50)),
            &now,
        ),
        Gate::Rejected { .. } => panic!("the benchmark's breaker must stay closed"),
    }
}

/// The two breakers compared: in-process, and shared by a fleet through the
/// Redis at `url`, syncing every 10 ms (25 times as often as the default) to
/// make any interference from the sync task visible.
fn breakers(url: &str) -> (SharedBreaker, retry_redis::FleetBreaker) {
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 5,
        open_duration: Duration::from_secs(30),
        success_threshold: 1,
    })
    .unwrap();
    let shared = SharedBreaker::new(config).unwrap();
    let fleet = Fleet::connect(url).unwrap().namespace("bench").unwrap();
    let fleet_breaker = fleet
        .breaker(
            "admission",
            config,
            FleetConfig::new(FleetRule::Quorum(2)).sync_interval(Duration::from_millis(10)),
        )
        .build()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    (shared, fleet_breaker)
}

fn breaker(c: &mut Criterion, url: &str) {
    let (shared, fleet_breaker) = breakers(url);
    assert!(
        fleet_breaker.syncs() > 0,
        "the fleet breaker syncs during the benchmark"
    );
    let mut g = c.benchmark_group("breaker_admission");
    // Measured twice, interleaved, so that the order does not favour either.
    for round in ["a", "b"] {
        g.bench_function(format!("shared_breaker/{round}"), |b| {
            b.iter(|| admit(black_box(&shared)));
        });
        g.bench_function(format!("fleet_breaker_syncing/{round}"), |b| {
            b.iter(|| admit(black_box(&fleet_breaker)));
        });
    }
    g.finish();
    eprintln!(
        "fleet breaker: {} syncs, {} failed, during the benchmark",
        fleet_breaker.syncs(),
        fleet_breaker.sync_errors()
    );
}

fn budget(c: &mut Criterion, url: &str) {
    let fleet = Fleet::connect(url).unwrap().namespace("bench").unwrap();
    let config = BudgetConfig::aws()
        .capacity(1_000_000)
        .retry_cost(0)
        .build()
        .unwrap();
    let budget = fleet
        .budget("withdrawals", config)
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let withdraw = [
        BudgetInput::Failure,
        BudgetInput::Withdraw(RetryKind::Failure),
    ];
    // Warm up (loads the script), then time each round trip.
    for _ in 0..1_000 {
        budget.apply_blocking(&withdraw, None).unwrap();
    }
    let mut micros: Vec<f64> = (0..20_000)
        .map(|_| {
            let start = Instant::now();
            let answer = budget.apply_blocking(&withdraw, None).unwrap();
            let took = start.elapsed();
            assert!(answer.withdrawal.is_some_and(|w| w.is_granted()));
            took.as_secs_f64() * 1e6
        })
        .collect();
    micros.sort_by(f64::total_cmp);
    let at = |q: f64| micros[((micros.len() as f64 - 1.0) * q) as usize];
    eprintln!(
        "fleet budget withdrawal (failure + withdraw, one script) against the local redis: \
         p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs over {} round trips",
        at(0.5),
        at(0.9),
        at(0.99),
        micros[micros.len() - 1],
        micros.len()
    );
    let shared = retry_shared::SharedBudget::new(config);
    let mut local = shared.snapshot();
    let mut g = c.benchmark_group("budget_withdrawal");
    g.bench_function("core_retry_budget", |b| {
        b.iter(|| {
            local.on_failure(retry_core::Instant::ORIGIN);
            black_box(local.try_withdraw(RetryKind::Failure, retry_core::Instant::ORIGIN))
        });
    });
    g.bench_function("fleet_budget_redis", |b| {
        b.iter(|| black_box(budget.apply_blocking(&withdraw, None).unwrap()));
    });
    g.finish();
}

fn all(c: &mut Criterion) {
    let Some(server) = common::start("the fleet benchmark") else {
        return;
    };
    let url = server.url();
    breaker(c, &url);
    budget(c, &url);
}

criterion_group!(benches, all);

/// `n` admissions on the in-process breaker (for callgrind's `--toggle-collect`).
#[inline(never)]
fn loop_shared(b: &SharedBreaker, n: u64) {
    for _ in 0..n {
        admit(black_box(b));
    }
}

/// `n` admissions on the fleet breaker, its sync task running meanwhile.
#[inline(never)]
fn loop_fleet(b: &retry_redis::FleetBreaker, n: u64) {
    for _ in 0..n {
        admit(black_box(b));
    }
}

/// With `FLEET_BENCH_COUNT=n`: `n` admissions on each breaker and nothing else,
/// for instruction counts under callgrind (repeatable on a loaded machine):
/// `FLEET_BENCH_COUNT=100000 valgrind --tool=callgrind --toggle-collect='*loop_shared*' ...`.
fn count_only(n: u64) {
    let Some(server) = common::start("the fleet benchmark") else {
        return;
    };
    let (shared, fleet_breaker) = breakers(&server.url());
    loop_shared(&shared, n);
    loop_fleet(&fleet_breaker, n);
    eprintln!(
        "{n} admissions each; fleet breaker synced {} times",
        fleet_breaker.syncs()
    );
}

fn main() {
    if let Some(n) = std::env::var("FLEET_BENCH_COUNT")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        count_only(n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
