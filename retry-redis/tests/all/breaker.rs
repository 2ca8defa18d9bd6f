//! The fleet breaker against a real redis-server: three independent instances
//! (each its own connection, thread and runtime), the two rules, fleet-wide
//! probes and their verdict, bounded keys, and bad data.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common::Redis;

use core::time::Duration;
use std::time::Instant;

use retry_core::{BreakerConfig, BreakerState, CallOutcome, FleetConfig, FleetRule, Rate};
use retry_redis::FleetBreaker;
use retry_shared::{Breaker, Clock, Gate};

/// The system clock, as the adapters read it.
struct Wall;

impl Clock for Wall {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

const INTERVAL: Duration = Duration::from_millis(100);
/// Scheduling slack on a loaded machine (2 cores shared by several builds).
const MARGIN: Duration = Duration::from_millis(150);

fn config(open: Duration) -> BreakerConfig {
    BreakerConfig::builder()
        .failure_threshold(3)
        .open_duration(open)
        .half_open_permits(1)
        .success_threshold(1)
        .build()
        .unwrap()
}

/// Three instances, each on its own connection (and so its own thread and
/// runtime), sharing the breaker `name`.
fn three(redis: &Redis, ns: &str, fleet: FleetConfig, open: Duration) -> Vec<FleetBreaker> {
    (0..3)
        .map(|_| {
            redis
                .fleet()
                .namespace(ns)
                .unwrap()
                .breaker("dep", config(open), fleet)
                .build()
                .unwrap()
        })
        .collect()
}

fn fail(b: &FleetBreaker) -> bool {
    match b.request(&Wall) {
        Gate::Admitted(permit) => {
            b.record(
                permit,
                CallOutcome::failure(Duration::from_millis(1)),
                &Wall,
            );
            true
        }
        Gate::Rejected { .. } => false,
    }
}

fn succeed(b: &FleetBreaker) -> bool {
    match b.request(&Wall) {
        Gate::Admitted(permit) => {
            b.record(
                permit,
                CallOutcome::success(Duration::from_millis(1)),
                &Wall,
            );
            true
        }
        Gate::Rejected { .. } => false,
    }
}

/// Waits (up to `limit`) until `done`; how long it took.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() <= limit {
        if done() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

fn all_synced(members: &[FleetBreaker], n: u64) {
    let ok = wait_for(Duration::from_secs(10), || {
        members.iter().all(|m| m.syncs() >= n)
    });
    assert!(ok.is_some(), "every member synced {n} times");
}

fn failures_at_one_instance_open_the_others_within_one_sync_interval(redis: &Redis) {
    let fleet = FleetConfig::new(FleetRule::Quorum(1)).sync_interval(INTERVAL);
    let members = three(redis, "one", fleet, Duration::from_secs(30));
    all_synced(&members, 2);
    let (a, others) = members.split_first().unwrap();
    for _ in 0..3 {
        assert!(fail(a));
    }
    assert_eq!(a.state(), BreakerState::Open);
    // A publishes at its next sync: the decision appears in Redis.
    let mut conn = redis.conn();
    let published = wait_for(INTERVAL + MARGIN, || {
        redis::cmd("GET")
            .arg(a.decision_key())
            .query::<Option<String>>(&mut *conn)
            .unwrap()
            .is_some_and(|d| d.starts_with("1|open|"))
    });
    assert!(
        published.is_some(),
        "A published the open decision within one interval"
    );
    // From then, B and C open within one sync interval.
    let opened = wait_for(INTERVAL + MARGIN, || {
        others.iter().all(|m| m.state() == BreakerState::Open)
    });
    let took = opened.expect("B and C opened within one interval (plus a margin)");
    eprintln!("B and C opened {took:?} after the decision was published (interval {INTERVAL:?})");
    for m in others {
        assert!(m.is_following());
        assert!(!succeed(m), "B and C reject without having seen a failure");
    }
    // Through a retrier, as a user sees it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let retry =
        retry_tokio::Retry::<&str>::new(retry_core::RetryPolicy::builder().build().unwrap())
            .breaker(others[0].clone());
    let err = runtime
        .block_on(retry.call(|_| async { Ok::<_, &str>(()) }))
        .unwrap_err();
    assert_eq!(err.code(), "retry.circuit_open");
}

fn under_a_quorum_of_two_one_failing_instance_does_not_open_the_others(redis: &Redis) {
    let fleet = FleetConfig::new(FleetRule::Quorum(2)).sync_interval(INTERVAL);
    let members = three(redis, "quorum", fleet, Duration::from_secs(30));
    let (a, b, c) = (&members[0], &members[1], &members[2]);
    for _ in 0..3 {
        assert!(fail(a));
    }
    assert_eq!(a.state(), BreakerState::Open);
    // Ten sync rounds later, B and C still admit and the fleet counts one open member.
    let start = a.syncs();
    all_synced(&members, start + 10);
    assert!(succeed(b) && succeed(c));
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(c.state(), BreakerState::Closed);
    let view = c.last_sync().unwrap().view;
    assert_eq!((view.members, view.open_members), (3, 1));
    assert_eq!(c.epoch(), 0, "no decision was ever published");
    // A second failing instance makes the quorum: C opens too.
    for _ in 0..3 {
        assert!(fail(b));
    }
    let opened = wait_for(2 * INTERVAL + MARGIN, || c.state() == BreakerState::Open);
    assert!(opened.is_some(), "C opened once two instances had");
}

fn the_aggregate_rule_opens_on_the_summed_window(redis: &Redis) {
    let breaker = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(20)
        .minimum_calls(10)
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap();
    let fleet = FleetConfig::new(FleetRule::Aggregate).sync_interval(INTERVAL);
    let members: Vec<FleetBreaker> = (0..3)
        .map(|_| {
            redis
                .fleet()
                .namespace("sum")
                .unwrap()
                .breaker("dep", breaker, fleet)
                .build()
                .unwrap()
        })
        .collect();
    // Each instance: 4 failures in 8 calls, below its own minimum of 10 calls;
    // together 12 of 24, past 50 % of at least 10.
    for m in &members {
        for k in 0..8 {
            assert!(if k % 2 == 0 { fail(m) } else { succeed(m) });
        }
        assert_eq!(m.state(), BreakerState::Closed);
    }
    let opened = wait_for(3 * INTERVAL + MARGIN, || {
        members.iter().all(|m| m.state() == BreakerState::Open)
    });
    assert!(
        opened.is_some(),
        "every instance opened on the summed window"
    );
}

fn half_open_probes_are_limited_fleet_wide_and_their_verdict_closes_the_fleet(redis: &Redis) {
    let open = Duration::from_millis(400);
    let fleet = FleetConfig::new(FleetRule::Quorum(1))
        .sync_interval(INTERVAL)
        .probes(1);
    let members = three(redis, "probes", fleet, open);
    for _ in 0..3 {
        assert!(fail(&members[0]));
    }
    let opened = wait_for(2 * INTERVAL + MARGIN, || {
        members.iter().all(|m| m.state() == BreakerState::Open)
    });
    assert!(opened.is_some());
    // After the open period and a sync, exactly one instance holds the slot:
    // offer every instance a call until one is admitted; the others reject.
    std::thread::sleep(open);
    let mut admitted = Vec::new();
    let found = wait_for(Duration::from_secs(3), || {
        for (i, m) in members.iter().enumerate() {
            if let Gate::Admitted(permit) = m.request(&Wall) {
                admitted.push((i, permit));
            }
        }
        !admitted.is_empty()
    });
    assert!(found.is_some(), "a probe was admitted");
    // Nobody else probes while the first probe is out.
    for _ in 0..5 {
        for m in &members {
            if let Gate::Admitted(permit) = m.request(&Wall) {
                admitted.push((usize::MAX, permit));
            }
        }
        std::thread::sleep(INTERVAL);
    }
    assert_eq!(
        admitted.len(),
        1,
        "one probe fleet-wide: {:?}",
        admitted.iter().map(|a| a.0).collect::<Vec<_>>()
    );
    let (prober, permit) = admitted.pop().unwrap();
    members[prober].record(
        permit,
        CallOutcome::success(Duration::from_millis(1)),
        &Wall,
    );
    assert_eq!(members[prober].state(), BreakerState::Closed);
    // The verdict closes everyone within a sync or two.
    let closed = wait_for(2 * INTERVAL + MARGIN, || {
        members.iter().all(|m| m.state() == BreakerState::Closed)
    });
    assert!(closed.is_some(), "the fleet closed on the probe's verdict");
    for m in &members {
        assert!(succeed(m));
    }
}

fn keys_are_namespaced_expiring_and_bounded(redis: &Redis) {
    let interval = Duration::from_millis(20);
    let fleet = FleetConfig::new(FleetRule::Quorum(2)).sync_interval(interval);
    let members = three(redis, "bounded", fleet, Duration::from_millis(50));
    let mut most = 0;
    let start = members[0].syncs();
    // Many syncs and calls, the fleet opening and closing along the way.
    while members[0].syncs() < start + 100 {
        for m in &members {
            let _ = fail(m);
            let _ = succeed(m);
        }
        let keys = redis.keys("*");
        assert!(
            keys.iter().all(|k| k.starts_with("bounded:breaker:{dep}:")),
            "{keys:?}"
        );
        most = most.max(keys.len());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(most <= 6, "at most 6 keys: {most}");
    let mut conn = redis.conn();
    for key in redis.keys("*") {
        // -1 would be a key without an expiry; -2 one that expired since;
        // 0 one that expires within the millisecond (PTTL rounds down).
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut *conn).unwrap();
        assert!(ttl >= 0 || ttl == -2, "{key} expires: {ttl}");
    }
}

fn bad_data_fails_the_sync_with_a_typed_error_logged_once_never_a_panic(redis: &Redis) {
    let fleet = FleetConfig::new(FleetRule::Quorum(1)).sync_interval(INTERVAL);
    let members = three(redis, "bad", fleet, Duration::from_secs(30));
    all_synced(&members, 2);
    let key = members[0].decision_key().to_owned();
    let mut conn = redis.conn();
    let check = |what: &str, logged: u32| {
        let errors = members[0].sync_errors();
        let failed = wait_for(Duration::from_secs(3), || {
            members[0].sync_errors() >= errors + 3
        });
        assert!(failed.is_some(), "{what}: the syncs fail");
        for m in &members {
            assert_eq!(m.logged(), logged, "{what}: each kind logged once");
            assert!(succeed(m), "{what}: the instance keeps deciding alone");
        }
    };
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("not a decision")
        .query(&mut *conn)
        .unwrap();
    check("garbage", 1);
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("1|open|12|x")
        .query(&mut *conn)
        .unwrap();
    check("garbage again", 1);
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("9|open|12|34|more")
        .query(&mut *conn)
        .unwrap();
    check("a future format", 2);
    let _: () = redis::cmd("DEL").arg(&key).query(&mut *conn).unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(&key)
        .arg("a list")
        .query(&mut *conn)
        .unwrap();
    check("a wrong type", 3);
    // Cleaned up, the syncs succeed again.
    let _: () = redis::cmd("DEL").arg(&key).query(&mut *conn).unwrap();
    let syncs = members[0].syncs();
    assert!(wait_for(Duration::from_secs(3), || members[0].syncs() > syncs + 2).is_some());
    // A member's own report overwritten with garbage (the only report a
    // member reads back) is left out of the sums, and logged once.
    let logged = members[0].logged();
    for _ in 0..3 {
        for b in redis.keys("bad:breaker:{dep}:reports:*") {
            let _: () = redis::cmd("HSET")
                .arg(&b)
                .arg(members[0].member_id())
                .arg("1|x|y")
                .query(&mut *conn)
                .unwrap();
        }
        let syncs = members[0].syncs();
        assert!(wait_for(Duration::from_secs(3), || members[0].syncs() > syncs).is_some());
    }
    assert_eq!(
        members[0].logged(),
        logged,
        "garbage: a kind logged once already (the decision's)"
    );
    let syncs = members[0].syncs();
    assert!(wait_for(Duration::from_secs(3), || members[0].syncs() > syncs + 2).is_some());
    assert_eq!(members[0].last_sync().unwrap().view.members, 3);
    // Garbage in the sums fails the sync (typed, logged once) until the
    // interval's keys expire; then the fleet's view is whole again.
    for b in redis.keys("bad:breaker:{dep}:sums:*") {
        let _: () = redis::cmd("HSET")
            .arg(&b)
            .arg("v:n")
            .arg("lots")
            .query(&mut *conn)
            .unwrap();
    }
    let syncs = members[0].syncs();
    assert!(wait_for(Duration::from_secs(3), || members[0].syncs() > syncs + 3).is_some());
    assert_eq!(members[0].last_sync().unwrap().view.members, 3);
}

fn the_tower_breaker_layer_takes_a_fleet_breaker(redis: &Redis) {
    use tower::{Layer as _, ServiceExt as _};
    let fleet = FleetConfig::new(FleetRule::Quorum(1)).sync_interval(INTERVAL);
    let members = three(redis, "tower", fleet, Duration::from_secs(30));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let failing = retry_tokio::tower::BreakerLayer::new(members[0].clone())
            .layer(tower::service_fn(|_: ()| async { Err::<(), _>("down") }));
        for _ in 0..3 {
            let err = failing.clone().oneshot(()).await.unwrap_err();
            assert!(!err.is_circuit_open());
        }
        let healthy = retry_tokio::tower::BreakerLayer::new(members[2].clone())
            .layer(tower::service_fn(|_: ()| async { Ok::<_, &str>(1) }));
        let start = Instant::now();
        loop {
            match healthy.clone().oneshot(()).await {
                Ok(_) => assert!(start.elapsed() < Duration::from_secs(3), "C never opened"),
                Err(e) => {
                    assert!(e.is_circuit_open());
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

fn a_store_that_lost_its_keys_lets_the_instances_decide_alone(redis: &Redis) {
    let open = Duration::from_millis(300);
    let fleet = FleetConfig::new(FleetRule::Quorum(1)).sync_interval(INTERVAL);
    let members = three(redis, "lost", fleet, open);
    for _ in 0..3 {
        assert!(fail(&members[0]));
    }
    let followed = wait_for(2 * INTERVAL + MARGIN, || {
        members[1..].iter().all(|m| m.is_following())
    });
    assert!(followed.is_some());
    // Redis loses everything (a restart without persistence, a flush).
    redis.flushall();
    // The dependency is healthy again: every instance gets back to closed (on
    // its own or through a new fleet decision and its probe), none stays stuck
    // following a decision nobody holds.
    let recovered = wait_for(open + Duration::from_secs(3), || {
        for m in &members {
            let _ = succeed(m);
        }
        members.iter().all(|m| m.state() == BreakerState::Closed)
    });
    assert!(
        recovered.is_some(),
        "{:?}",
        members
            .iter()
            .map(|m| (
                m.state(),
                m.is_following(),
                m.epoch(),
                m.syncs(),
                m.sync_errors(),
                m.last_sync()
            ))
            .collect::<Vec<_>>()
    );
}

/// Three members, a quorum of one, one probe fleet-wide with claims lasting
/// `claim`: member 0 fails and the whole fleet opens for `open`.
fn open_fleet(redis: &Redis, ns: &str, open: Duration, claim: Duration) -> Vec<FleetBreaker> {
    let fleet = FleetConfig::new(FleetRule::Quorum(1))
        .sync_interval(INTERVAL)
        .probes(1)
        .claim_ttl(claim);
    let members = three(redis, ns, fleet, open);
    all_synced(&members, 1);
    for _ in 0..3 {
        assert!(fail(&members[0]));
    }
    // (How fast is another test's subject: this one's is what follows.)
    let opened = wait_for(Duration::from_secs(3), || {
        members[1..].iter().all(FleetBreaker::is_following)
    });
    assert!(opened.is_some(), "the fleet opened");
    members
}

/// Offers every member a call until one is admitted (it succeeds); who.
fn first_admitted(members: &[FleetBreaker], limit: Duration) -> Option<(usize, Duration)> {
    let start = Instant::now();
    while start.elapsed() <= limit {
        for (i, m) in members.iter().enumerate() {
            if succeed(m) {
                return Some((i, start.elapsed()));
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

fn a_probe_claim_beyond_the_claim_lifetime_does_not_hold_the_slot(redis: &Redis) {
    let open = Duration::from_millis(400);
    let claim = Duration::from_millis(300);
    let members = open_fleet(redis, "claim", open, claim);
    // Someone claims the only slot until the year 33658.
    let _: () = redis::cmd("ZADD")
        .arg(members[0].probes_key())
        .arg(1_000_000_000_000_000_u64)
        .arg("intruder#1")
        .query(&mut *redis.conn())
        .unwrap();
    // After the open period, the claim lasts at most a claim's lifetime: a
    // member gets the slot and probes.
    let probed = first_admitted(&members, open + claim + 3 * INTERVAL + MARGIN);
    assert!(
        probed.is_some(),
        "a probe ran once the intruder's claim was cut to a claim's lifetime: {:?}",
        members
            .iter()
            .map(|m| (m.state(), m.is_following(), m.syncs(), m.sync_errors()))
            .collect::<Vec<_>>()
    );
}

fn a_probes_key_of_the_wrong_type_while_half_open_does_not_wedge_the_followers(redis: &Redis) {
    let open = Duration::from_millis(400);
    let members = open_fleet(redis, "probetype", open, Duration::from_secs(10));
    let opened = Instant::now();
    let _: () = redis::cmd("SET")
        .arg(members[0].probes_key())
        .arg("not a sorted set")
        .query(&mut *redis.conn())
        .unwrap();
    // The claims fail; after two sync intervals without a completed sync the
    // followers decide alone and probe on their own.
    let bound = open + 2 * INTERVAL;
    let probed = first_admitted(&members[1..], bound + MARGIN + Duration::from_secs(2));
    let (_, _) = probed.unwrap_or_else(|| {
        panic!(
            "a follower probed on its own: {:?}",
            members
                .iter()
                .map(|m| (m.state(), m.is_following(), m.syncs(), m.sync_errors()))
                .collect::<Vec<_>>()
        )
    });
    let took = opened.elapsed();
    eprintln!("a follower admitted a call {took:?} after the fleet opened (bound {bound:?})");
    assert!(took <= bound + MARGIN, "{took:?}");
    assert!(
        members[1..].iter().any(|m| m.logged() >= 1),
        "the wrong type was logged"
    );
    // Its verdict closes the fleet (publishing it clears the bad key).
    let closed = wait_for(Duration::from_secs(3), || {
        members.iter().all(|m| {
            let _ = succeed(m);
            m.state() == BreakerState::Closed
        })
    });
    assert!(
        closed.is_some(),
        "the fleet closed on the follower's verdict"
    );
}

fn the_claim_script_refuses_a_claim_for_another_decision_and_cuts_long_claims(redis: &Redis) {
    let script = redis::Script::new(include_str!("../../src/lua/claim.lua"));
    let mut conn = redis.conn();
    let now_ms = || -> u64 {
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut *redis.conn()).unwrap();
        secs * 1_000 + micros / 1_000
    };
    let (probes, decision) = ("t:breaker:{x}:probes", "t:breaker:{x}:decision");
    let _: () = redis::cmd("SET")
        .arg(decision)
        .arg(format!("1|open|{}|7", now_ms() - 1))
        .query(&mut *conn)
        .unwrap();
    let claim = |conn: &mut dyn redis::ConnectionLike, member: &str, epoch: u64| -> Vec<i64> {
        script
            .key(probes)
            .key(decision)
            .arg(member)
            .arg(1)
            .arg(1)
            .arg(1_000)
            .arg(epoch)
            .invoke(conn)
            .unwrap()
    };
    assert_eq!(
        claim(&mut *conn, "late", 6),
        [0, 0],
        "an older epoch is refused"
    );
    assert_eq!(
        claim(&mut *conn, "now", 7),
        [0, 1],
        "the current epoch is granted"
    );
    let _: () = redis::cmd("DEL").arg(probes).query(&mut *conn).unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(probes)
        .arg(1_000_000_000_000_000_u64)
        .arg("intruder#1")
        .query(&mut *conn)
        .unwrap();
    let before = now_ms();
    assert_eq!(claim(&mut *conn, "now", 7), [0, 0], "the slot is taken");
    let score: f64 = redis::cmd("ZSCORE")
        .arg(probes)
        .arg("intruder#1")
        .query(&mut *conn)
        .unwrap();
    assert!(
        score <= (now_ms() + 1_000) as f64 && score >= before as f64,
        "the claim was cut to one claim lifetime from now: {score}"
    );
}

crate::on_single_and_cluster!(
    the_tower_breaker_layer_takes_a_fleet_breaker,
    failures_at_one_instance_open_the_others_within_one_sync_interval,
    under_a_quorum_of_two_one_failing_instance_does_not_open_the_others,
    the_aggregate_rule_opens_on_the_summed_window,
    half_open_probes_are_limited_fleet_wide_and_their_verdict_closes_the_fleet,
    keys_are_namespaced_expiring_and_bounded,
    bad_data_fails_the_sync_with_a_typed_error_logged_once_never_a_panic,
    a_store_that_lost_its_keys_lets_the_instances_decide_alone,
    a_probe_claim_beyond_the_claim_lifetime_does_not_hold_the_slot,
    a_probes_key_of_the_wrong_type_while_half_open_does_not_wedge_the_followers,
    the_claim_script_refuses_a_claim_for_another_decision_and_cuts_long_claims,
);

/// On a cluster: each breaker's and budget's keys live on one node (one hash
/// slot), and different names spread over the three nodes.
#[test]
fn on_a_cluster_each_name_keeps_to_one_slot_and_names_spread_over_the_shards() {
    let test = "on_a_cluster_each_name_keeps_to_one_slot_and_names_spread_over_the_shards";
    let Some(redis) = Redis::cluster(test) else {
        return;
    };
    let fleet = redis.fleet().namespace("spread").unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("dependency-{i}")).collect();
    let breakers: Vec<FleetBreaker> = names
        .iter()
        .map(|name| {
            fleet
                .breaker(
                    name,
                    config(Duration::from_secs(30)),
                    FleetConfig::new(FleetRule::Quorum(1)).sync_interval(INTERVAL),
                )
                .build()
                .unwrap()
        })
        .collect();
    let budgets: Vec<retry_redis::FleetBudget> = names
        .iter()
        .map(|name| {
            fleet
                .budget(name, retry_core::BudgetConfig::aws_standard())
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap()
        })
        .collect();
    for b in &budgets {
        let answer = b
            .apply_blocking(
                &[retry_core::BudgetInput::Withdraw(
                    retry_core::RetryKind::Failure,
                )],
                None,
            )
            .unwrap();
        assert!(answer.withdrawal.unwrap().is_granted());
    }
    // Open every breaker, so that each has a decision as well as its sums.
    for b in &breakers {
        for _ in 0..3 {
            assert!(fail(b));
        }
    }
    let published = wait_for(Duration::from_secs(5), || {
        let decisions = redis.keys("spread:breaker:*:decision");
        decisions.len() == names.len()
    });
    assert!(published.is_some(), "every breaker published its decision");
    let Redis::Cluster(cluster, ..) = &redis else {
        unreachable!()
    };
    let mut used = std::collections::BTreeSet::new();
    for name in &names {
        let holders: Vec<usize> = cluster
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| !node.keys(&format!("spread:*{{{name}}}*")).is_empty())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(holders.len(), 1, "{name}'s keys on one node: {holders:?}");
        let on_it = cluster.nodes[holders[0]].keys(&format!("spread:*{{{name}}}*"));
        assert!(
            on_it.len() >= 3,
            "{name}: its budget, decision and members' sums together: {on_it:?}"
        );
        used.insert(holders[0]);
    }
    assert_eq!(used.len(), 3, "the names spread over the three nodes");
    for b in &breakers {
        assert_eq!(b.sync_errors(), 0, "{:?}", b.decision_key());
    }
}

/// Names, namespaces and member ids: what a key may hold (no Redis needed:
/// the connection is made on first use).
#[test]
fn names_that_would_break_a_key_or_its_hash_tag_are_refused() {
    let fleet = retry_redis::Fleet::connect("redis://127.0.0.1:1/").unwrap();
    for bad in ["", "a{b", "a}b", "a:b", "a b", "a\u{7}b", &"x".repeat(201)] {
        let err = fleet.clone().namespace(bad).unwrap_err();
        assert!(
            matches!(
                err,
                retry_redis::SetupError::Name {
                    field: "namespace",
                    ..
                }
            ),
            "{bad:?}: {err}"
        );
        assert!(fleet.clone().member(bad).is_err(), "member {bad:?}");
        let breaker = fleet
            .breaker(
                bad,
                config(Duration::from_secs(1)),
                FleetConfig::new(FleetRule::Quorum(1)),
            )
            .build();
        assert!(breaker.is_err(), "breaker {bad:?}");
        let budget = fleet
            .budget(bad, retry_core::BudgetConfig::aws_standard())
            .build();
        assert!(budget.is_err(), "budget {bad:?}");
    }
    let fleet = fleet
        .namespace("checkout")
        .unwrap()
        .member("pod-7.eu_west")
        .unwrap();
    assert_eq!(fleet.member_id(), "pod-7.eu_west");
    let breaker = fleet
        .breaker(
            "payments-v2",
            config(Duration::from_secs(1)),
            FleetConfig::new(FleetRule::Quorum(1)),
        )
        .build()
        .unwrap();
    assert_eq!(
        breaker.decision_key(),
        "checkout:breaker:{payments-v2}:decision"
    );
    assert_eq!(
        breaker.probes_key(),
        "checkout:breaker:{payments-v2}:probes"
    );
    assert_eq!(breaker.member_id(), "pod-7.eu_west");
    let budget = fleet
        .budget("payments-v2", retry_core::BudgetConfig::aws_standard())
        .build()
        .unwrap();
    assert_eq!(budget.key(), "checkout:budget:{payments-v2}");
}
