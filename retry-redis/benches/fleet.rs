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

/// A number from the environment, or `default`.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A field of `INFO` (`name:value` lines) as a number.
fn info_field(info: &str, name: &str) -> f64 {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `calls` and `usec` of one command in `INFO commandstats`.
fn command_stats(info: &str, command: &str) -> (f64, f64) {
    let Some(line) = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
    else {
        return (0.0, 0.0);
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    (field("calls"), field("usec"))
}

/// With `FLEET_LOAD_MEMBERS=n`: `n` live fleet members, each on its own
/// connection (its own thread and runtime, as separate processes would be),
/// syncing every `FLEET_LOAD_INTERVAL_MS` (default 250) against a fresh
/// redis-server. After `FLEET_LOAD_WARMUP_SECS` (default 3) it resets Redis's
/// statistics, waits `FLEET_LOAD_SECS` (default 10) and prints the script
/// calls per second, the server's time per script call (`INFO commandstats`,
/// time inside the command) and Redis's CPU (`INFO cpu`, user + system, so
/// network I/O included) as a share of one core. Uses the public API only, so
/// the same harness measures any version of the crate.
fn load(n: u64) {
    let Some(server) = common::start("the fleet load benchmark") else {
        return;
    };
    let interval = Duration::from_millis(env_or("FLEET_LOAD_INTERVAL_MS", 250));
    let warmup = Duration::from_secs(env_or("FLEET_LOAD_WARMUP_SECS", 3));
    let secs = env_or("FLEET_LOAD_SECS", 10);
    let config = BreakerConfig::builder()
        .failure_threshold(5)
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap();
    let members: Vec<_> = (0..n)
        .map(|_| {
            Fleet::connect(&server.url())
                .unwrap()
                .namespace("load")
                .unwrap()
                .breaker(
                    "dep",
                    config,
                    FleetConfig::new(FleetRule::Quorum(2)).sync_interval(interval),
                )
                .build()
                .unwrap()
        })
        .collect();
    // Each member sees some traffic, so its report is not empty.
    for m in &members {
        for _ in 0..3 {
            admit(m);
        }
    }
    std::thread::sleep(warmup);
    let mut conn = server.conn();
    let info = |conn: &mut redis::Connection, section: &str| -> String {
        redis::cmd("INFO").arg(section).query(conn).unwrap()
    };
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .unwrap();
    let cpu = info(&mut conn, "cpu");
    let cpu0 = info_field(&cpu, "used_cpu_user") + info_field(&cpu, "used_cpu_sys");
    let syncs0: u64 = members.iter().map(|m| m.syncs()).sum();
    let errors0: u64 = members.iter().map(|m| m.sync_errors()).sum();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let took = start.elapsed().as_secs_f64();
    let cpu = info(&mut conn, "cpu");
    let cpu1 = info_field(&cpu, "used_cpu_user") + info_field(&cpu, "used_cpu_sys");
    let stats = info(&mut conn, "commandstats");
    let syncs = members.iter().map(|m| m.syncs()).sum::<u64>() - syncs0;
    let errors = members.iter().map(|m| m.sync_errors()).sum::<u64>() - errors0;
    let (mut calls, mut usec) = (0.0, 0.0);
    for command in ["evalsha", "eval", "fcall"] {
        let (c, u) = command_stats(&stats, command);
        calls += c;
        usec += u;
    }
    let view = members[0].last_sync().map(|s| s.view.members);
    eprintln!(
        "fleet load: {n} members, sync every {interval:?}, {took:.1} s: {:.0} syncs/s ({errors} failed), \
         {:.0} script calls/s at {:.1} us each inside redis; redis cpu {:.1} % of a core \
         ({:.1} us of cpu per script call); members seen by one member: {view:?}",
        syncs as f64 / took,
        calls / took,
        if calls > 0.0 { usec / calls } else { 0.0 },
        100.0 * (cpu1 - cpu0) / took,
        if calls > 0.0 { 1e6 * (cpu1 - cpu0) / calls } else { 0.0 },
    );
    drop(members);
}

fn main() {
    if let Some(n) = std::env::var("FLEET_LOAD_MEMBERS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        load(n);
        return;
    }
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
