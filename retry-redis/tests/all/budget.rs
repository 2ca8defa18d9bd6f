//! The fleet budget against a real redis-server: the same tokens and answers as
//! the core's `RetryBudget` for random operation sequences, no lost update under
//! three processes' worth of concurrent retries, and bad data.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common::{self, Redis};

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::sync::Arc;

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use retry_core::{AttemptKind, BudgetConfig, BudgetInput, Instant, RetryBudget, RetryKind, Tokens};
use retry_redis::{Fallback, Fleet, StoreError};

/// A generous timeout: these tests check answers, not latency (the machine is
/// shared).
const PATIENT: Duration = Duration::from_secs(2);

#[derive(Clone, Debug)]
struct Case {
    config: BudgetConfig,
    /// (microseconds later, inputs applied in one script)
    steps: Vec<(u64, Vec<BudgetInput>)>,
}

fn input(g: &mut Gen) -> BudgetInput {
    let kind = *g.choose(&[RetryKind::Failure, RetryKind::Timeout]).unwrap();
    match u8::arbitrary(g) % 7 {
        0 => BudgetInput::FirstAttempt,
        1 | 2 => BudgetInput::Failure,
        3 => BudgetInput::Success(AttemptKind::First),
        4 => BudgetInput::Success(AttemptKind::Retry(kind)),
        _ => BudgetInput::Withdraw(kind),
    }
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        let config = match u8::arbitrary(g) % 5 {
            0 => BudgetConfig::grpc(1 + u32::arbitrary(g) % 20, 0.1).unwrap(),
            1 => BudgetConfig::grpc_millis(
                1 + u32::arbitrary(g) % 1000,
                1 + u32::arbitrary(g) % 3000,
            )
            .unwrap(),
            2 => BudgetConfig::aws()
                .capacity(1 + u32::arbitrary(g) % 60)
                .retry_cost(u32::arbitrary(g) % 8)
                .timeout_cost(u32::arbitrary(g) % 15)
                .no_retry_increment(u32::arbitrary(g) % 3)
                .build()
                .unwrap(),
            3 => BudgetConfig::finagle()
                .window(Duration::from_secs(1 + u64::arbitrary(g) % 5))
                .min_retries_per_sec(u32::arbitrary(g) % 3)
                .percent_can_retry_permille(u32::arbitrary(g) % 1001)
                .build()
                .unwrap(),
            _ => BudgetConfig::finagle_default(),
        };
        let n = u8::arbitrary(g) % 40;
        let steps = (0..n)
            .map(|_| {
                let later = match u8::arbitrary(g) % 4 {
                    0 => 0,
                    1 => u64::arbitrary(g) % 1_000,
                    2 => u64::arbitrary(g) % 700_000,
                    _ => u64::arbitrary(g) % 4_000_000,
                };
                // A withdrawal comes last in a batch, as a call's step sends it.
                let batch = if bool::arbitrary(g) {
                    vec![input(g)]
                } else {
                    vec![
                        BudgetInput::Failure,
                        BudgetInput::Withdraw(RetryKind::Failure),
                    ]
                };
                (later, batch)
            })
            .collect();
        Case { config, steps }
    }
}

fn random_sequences_give_the_core_budgets_tokens_and_answers(redis: &Redis) {
    PROP_FLEET.with(|f| *f.borrow_mut() = Some(redis.fleet().namespace("prop").unwrap()));
    fn prop(case: Case) -> TestResult {
        let n = CASES.fetch_add(1, Ordering::Relaxed);
        let budget = PROP_FLEET
            .with(|f| f.borrow().clone())
            .unwrap()
            .budget(&format!("case{n}"), case.config)
            .timeout(PATIENT)
            .build()
            .unwrap();
        let mut core = RetryBudget::new(case.config);
        let mut now = Instant::ORIGIN;
        for (later, batch) in &case.steps {
            now = now.saturating_add(Duration::from_micros(*later));
            let answer = budget.apply_blocking(batch, Some(now)).unwrap();
            let mut expected = None;
            for i in batch {
                if let retry_core::BudgetOutput::Withdrawal(w) = core.apply(*i, now) {
                    expected = Some(w);
                }
            }
            WITHDRAWALS.fetch_add(u64::from(expected.is_some()), Ordering::Relaxed);
            if answer.withdrawal != expected || answer.tokens != core.tokens() {
                return TestResult::error(format!(
                    "{}: after {batch:?} at {now}: redis {answer:?}, core {expected:?} with {} tokens",
                    case.config,
                    core.tokens()
                ));
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Case) -> TestResult);
    let withdrawals = WITHDRAWALS.load(Ordering::Relaxed);
    assert!(withdrawals > 1_000, "the cases withdrew ({withdrawals})");
}

thread_local! {
    /// The fleet the property's cases run on (the property is a plain `fn`).
    static PROP_FLEET: core::cell::RefCell<Option<Fleet>> = const { core::cell::RefCell::new(None) };
}
static CASES: AtomicU64 = AtomicU64::new(0);
static WITHDRAWALS: AtomicU64 = AtomicU64::new(0);

fn three_processes_of_a_thousand_concurrent_retries_withdraw_exactly_the_quota(redis: &Redis) {
    // AWS: 500 tokens, 5 a retry: exactly 100 retries, whatever the order (no
    // call succeeds, so nothing is refunded).
    let config = BudgetConfig::aws_standard();
    let policy = common::one_retry();
    let attempts = Arc::new(AtomicU64::new(0));

    let instances: Vec<_> = (0..3)
        .map(|_| {
            let (fleet, policy, attempts) = (redis.fleet(), policy, Arc::clone(&attempts));
            std::thread::spawn(move || {
                // Its own connection and its own runtime: an independent instance.
                let fleet = fleet.namespace("quota").unwrap();
                let budget = fleet
                    .budget("shared", config)
                    .timeout(PATIENT)
                    .build()
                    .unwrap();
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    let retry =
                        Arc::new(retry_tokio::Retry::<&str>::new(policy).budget(budget.clone()));
                    let calls: Vec<_> = (0..1_000)
                        .map(|_| {
                            let (retry, attempts) = (Arc::clone(&retry), Arc::clone(&attempts));
                            tokio::spawn(async move {
                                retry
                                    .call(|_| {
                                        attempts.fetch_add(1, Ordering::Relaxed);
                                        async { Err::<(), _>("down") }
                                    })
                                    .await
                                    .unwrap_err()
                            })
                        })
                        .collect();
                    for call in calls {
                        let _ = call.await.unwrap();
                    }
                });
                (budget.fallbacks(), budget.errors())
            })
        })
        .collect();
    for instance in instances {
        assert_eq!(
            instance.join().unwrap(),
            (0, 0),
            "every answer came from redis"
        );
    }
    let retries = attempts.load(Ordering::Relaxed) - 3_000;
    // The core model: the same 3,000 withdrawals on one budget, one by one.
    let mut model = RetryBudget::new(config);
    let allowed = (0..3_000)
        .filter(|_| {
            model
                .try_withdraw(RetryKind::Failure, Instant::ORIGIN)
                .is_granted()
        })
        .count() as u64;
    assert_eq!(allowed, 100);
    assert_eq!(retries, allowed, "no lost update, no double spend");
    let tokens: String = redis::cmd("HGET")
        .arg("quota:budget:{shared}")
        .arg("t")
        .query(&mut *redis.conn())
        .unwrap();
    assert_eq!(tokens, "0");
}

fn bad_data_is_a_typed_error_logged_once_with_the_local_fallback(redis: &Redis) {
    let fleet = redis.fleet().namespace("bad").unwrap();
    let mut conn = redis.conn();
    let budget = |name: &str| {
        fleet
            .budget(name, BudgetConfig::aws_standard())
            .timeout(PATIENT)
            .build()
            .unwrap()
    };
    let withdraw = [BudgetInput::Withdraw(RetryKind::Failure)];

    // A wrong type.
    let _: () = redis::cmd("SET")
        .arg("bad:budget:{str}")
        .arg("hello")
        .query(&mut *conn)
        .unwrap();
    let b = budget("str");
    let err = b.apply_blocking(&withdraw, None).unwrap_err();
    assert!(
        matches!(err, StoreError::WrongType { ref found, .. } if found == "string"),
        "{err}"
    );
    assert!(err.is_bad_data());

    // Garbage in a field.
    let b = budget("garbage");
    b.apply_blocking(&withdraw, None).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("bad:budget:{garbage}")
        .arg("t")
        .arg("lots")
        .query(&mut *conn)
        .unwrap();
    let err = b.apply_blocking(&withdraw, None).unwrap_err();
    assert_eq!(
        err,
        StoreError::Garbage {
            key: "bad:budget:{garbage}".into(),
            field: "t".into()
        }
    );
    // Tokens beyond the bucket are garbage too.
    let _: () = redis::cmd("HSET")
        .arg("bad:budget:{garbage}")
        .arg("t")
        .arg("999999999")
        .query(&mut *conn)
        .unwrap();
    assert!(matches!(
        b.apply_blocking(&withdraw, None),
        Err(StoreError::Garbage { .. })
    ));

    // A future format version.
    let b = budget("future");
    b.apply_blocking(&withdraw, None).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("bad:budget:{future}")
        .arg("v")
        .arg("7")
        .query(&mut *conn)
        .unwrap();
    let err = b.apply_blocking(&withdraw, None).unwrap_err();
    assert_eq!(err.code(), "redis.future_format");
    assert!(err.to_string().contains("format 7"), "{err}");

    // Another configuration under the same key.
    let grpc = fleet
        .budget("future", BudgetConfig::grpc(10, 0.1).unwrap())
        .timeout(PATIENT)
        .build()
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("bad:budget:{future}")
        .arg("v")
        .arg("1")
        .query(&mut *conn)
        .unwrap();
    assert!(matches!(
        grpc.apply_blocking(&withdraw, None),
        Err(StoreError::ConfigMismatch { .. })
    ));

    // Through the Budget trait: every withdrawal still ends, answered by the
    // local budget (fail open) or refused (fail closed), counted, logged once.
    let _: () = redis::cmd("SET")
        .arg("bad:budget:{trait}")
        .arg("x")
        .query(&mut *conn)
        .unwrap();
    let open = fleet
        .budget("trait", BudgetConfig::aws_standard())
        .timeout(PATIENT)
        .build()
        .unwrap();
    let closed = fleet
        .budget("trait", BudgetConfig::aws_standard())
        .timeout(PATIENT)
        .fallback(Fallback::Refuse)
        .build()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let policy = common::one_retry();
    for (budget, attempts_each) in [(&open, 2), (&closed, 1)] {
        let retry = retry_tokio::Retry::<&str>::new(policy).budget(budget.clone());
        for _ in 0..5 {
            let attempts = AtomicU64::new(0);
            let _ = runtime.block_on(retry.call(|_| {
                attempts.fetch_add(1, Ordering::Relaxed);
                async { Err::<(), _>("down") }
            }));
            assert_eq!(attempts.load(Ordering::Relaxed), attempts_each);
        }
        assert_eq!(budget.fallbacks(), 5);
        assert_eq!(budget.logged(), 1, "one kind of error, logged once");
    }
    assert_eq!(
        open.local().tokens(),
        Tokens::from_whole(475),
        "the local budget paid"
    );
}

fn the_key_is_namespaced_expires_and_stays_single(redis: &Redis) {
    let fleet = redis.fleet().namespace("keys").unwrap();
    let budget = fleet
        .budget("one", BudgetConfig::finagle_default())
        .timeout(PATIENT)
        .build()
        .unwrap();
    let inputs = [
        BudgetInput::FirstAttempt,
        BudgetInput::Failure,
        BudgetInput::Withdraw(RetryKind::Failure),
    ];
    for i in 0..2_000_u64 {
        let at = Instant::from_millis(i * 37);
        let _ = budget
            .apply_blocking(&inputs[(i % 3) as usize..], Some(at))
            .unwrap();
    }
    assert_eq!(redis.keys("*"), vec!["keys:budget:{one}".to_owned()]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg("keys:budget:{one}")
        .query(&mut *redis.conn())
        .unwrap();
    assert!(
        ttl > 0 && ttl <= 20_000,
        "expires in twice the window: {ttl} ms"
    );
}

/// Withdrawals until the first refusal, on the server's clock: how many were
/// granted.
fn withdraw_until_refused(budget: &retry_redis::FleetBudget) -> u32 {
    let mut granted = 0;
    loop {
        let answer = budget
            .apply_blocking(&[BudgetInput::Withdraw(RetryKind::Failure)], None)
            .unwrap();
        if !answer.withdrawal.unwrap().is_granted() {
            return granted;
        }
        granted += 1;
        assert!(granted < 1_000, "the budget never refuses");
    }
}

fn server_micros(conn: &mut dyn redis::ConnectionLike) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    secs * 1_000_000 + micros
}

/// Finagle over a 1 s window, 10 retries a second from the reserve and no
/// deposits: every second's window grants exactly 10.
fn ten_a_second() -> BudgetConfig {
    BudgetConfig::finagle()
        .window(Duration::from_secs(1))
        .min_retries_per_sec(10)
        .percent_can_retry_permille(0)
        .build()
        .unwrap()
}

fn a_stored_time_ahead_of_the_server_clock_does_not_freeze_a_finagle_budget(redis: &Redis) {
    let fleet = redis.fleet().namespace("ahead").unwrap();
    let budget = fleet
        .budget("window", ten_a_second())
        .timeout(PATIENT)
        .build()
        .unwrap();
    let mut conn = redis.conn();
    assert_eq!(withdraw_until_refused(&budget), 10);
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(withdraw_until_refused(&budget), 10, "the window moved on");
    assert_eq!(budget.logged(), 0);
    // The stored time one hour ahead of the server's (as after a failover to a
    // replica whose clock is an hour behind).
    let ahead = server_micros(&mut *conn) + 3_600_000_000;
    let _: () = redis::cmd("HSET")
        .arg(budget.key())
        .arg("last")
        .arg(ahead)
        .query(&mut *conn)
        .unwrap();
    let first = withdraw_until_refused(&budget);
    std::thread::sleep(Duration::from_millis(1_100));
    let second = withdraw_until_refused(&budget);
    std::thread::sleep(Duration::from_millis(1_100));
    let third = withdraw_until_refused(&budget);
    assert_eq!(
        (second, third),
        (10, 10),
        "the window keeps moving after the clock stepped back (first window {first})"
    );
    assert_eq!(budget.logged(), 1, "the step was logged, once");
    let last: u64 = redis::cmd("HGET")
        .arg(budget.key())
        .arg("last")
        .query(&mut *conn)
        .unwrap();
    assert!(
        last <= server_micros(&mut *conn),
        "the stored time was repaired"
    );
}

fn a_clock_step_backwards_counts_as_no_time_passing_and_the_window_moves_on(redis: &Redis) {
    let fleet = redis.fleet().namespace("step").unwrap();
    let budget = fleet
        .budget("window", ten_a_second())
        .timeout(PATIENT)
        .build()
        .unwrap();
    let withdraw = [BudgetInput::Withdraw(RetryKind::Failure)];
    let granted_at = |at: Instant| {
        (0..20)
            .filter(|_| {
                budget
                    .apply_blocking(&withdraw, Some(at))
                    .unwrap()
                    .withdrawal
                    .unwrap()
                    .is_granted()
            })
            .count()
    };
    assert_eq!(granted_at(Instant::from_secs(100)), 10);
    // The clock steps back 90 s: no time passed, the window is as it was.
    assert_eq!(granted_at(Instant::from_secs(10)), 0);
    // 1.1 s later on the new clock the window has moved on.
    assert_eq!(granted_at(Instant::from_millis(11_100)), 10);
    assert_eq!(granted_at(Instant::from_millis(12_200)), 10);
}

fn a_withdrawal_that_timed_out_is_not_applied_when_redis_resumes(redis: &Redis) {
    let fleet = redis.fleet().namespace("late").unwrap();
    let budget = fleet
        .budget("quota", BudgetConfig::aws_standard())
        .timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let withdraw = [
        BudgetInput::Failure,
        BudgetInput::Withdraw(RetryKind::Failure),
    ];
    // Redis answers (and learns the budget): 500 - 5 tokens.
    let answered = || {
        (0..100).find_map(|_| {
            let answer = budget.apply_blocking(&withdraw, None).ok();
            if answer.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            answer
        })
    };
    assert_eq!(answered().unwrap().tokens, Tokens::from_whole(495));
    let tokens = |conn: &mut dyn redis::ConnectionLike| -> String {
        redis::cmd("HGET")
            .arg(budget.key())
            .arg("t")
            .query(conn)
            .unwrap()
    };
    let mut conn = redis.conn();
    assert_eq!(tokens(&mut *conn), "495000");
    redis.stop();
    for _ in 0..6 {
        let err = budget.apply_blocking(&withdraw, None).unwrap_err();
        assert_eq!(err.code(), "redis.timeout", "{err}");
    }
    redis.resume();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        tokens(&mut *conn),
        "495000",
        "the six withdrawals that timed out were not charged"
    );
    assert_eq!(
        answered().unwrap().tokens,
        Tokens::from_whole(490),
        "redis answers again"
    );
}

/// The scripts Redis ran (`EVALSHA` calls, every node) since the last reset.
fn scripts_run(redis: &Redis) -> u64 {
    redis
        .servers()
        .iter()
        .map(|server| {
            let stats: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut server.conn())
                .unwrap();
            stats
                .lines()
                .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
                .and_then(|rest| rest.split(',').next())
                .map_or(0, |n| n.parse::<u64>().unwrap())
        })
        .sum()
}

fn reset_stats(redis: &Redis) {
    for server in redis.servers() {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut server.conn())
            .unwrap();
    }
}

fn a_call_costs_one_script_per_input_its_budget_heeds(redis: &Redis) {
    let fleet = redis.fleet().namespace("heeds").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let configs = [
        ("grpc", BudgetConfig::grpc(100, 1.0).unwrap()),
        ("aws", BudgetConfig::aws_standard()),
        ("finagle", BudgetConfig::finagle_default()),
    ];
    for (name, config) in configs {
        let budget = fleet.budget(name, config).timeout(PATIENT).build().unwrap();
        let retry = retry_tokio::Retry::<&str>::new(common::one_retry()).budget(budget.clone());
        // Warm: the script loaded and the server's clock read.
        runtime
            .block_on(retry.call(|_| async { Ok::<_, &str>(()) }))
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        reset_stats(redis);
        for _ in 0..10 {
            runtime
                .block_on(retry.call(|_| async { Ok::<_, &str>(()) }))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            scripts_run(redis),
            10,
            "{name}: a call that succeeds at once costs one script (its first attempt or its success)"
        );
        reset_stats(redis);
        for _ in 0..10 {
            runtime
                .block_on(retry.call(|a| async move {
                    if a.is_first() {
                        Err("once")
                    } else {
                        Ok(())
                    }
                }))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            scripts_run(redis),
            20,
            "{name}: a call retried once costs two scripts"
        );
        assert_eq!((budget.fallbacks(), budget.errors()), (0, 0), "{name}");
    }
}

crate::on_single_and_cluster!(
    a_call_costs_one_script_per_input_its_budget_heeds,
    random_sequences_give_the_core_budgets_tokens_and_answers,
    three_processes_of_a_thousand_concurrent_retries_withdraw_exactly_the_quota,
    bad_data_is_a_typed_error_logged_once_with_the_local_fallback,
    the_key_is_namespaced_expires_and_stays_single,
    a_stored_time_ahead_of_the_server_clock_does_not_freeze_a_finagle_budget,
    a_clock_step_backwards_counts_as_no_time_passing_and_the_window_moves_on,
    a_withdrawal_that_timed_out_is_not_applied_when_redis_resumes,
);
