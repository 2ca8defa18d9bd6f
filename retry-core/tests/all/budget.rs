//! Tests of the shared retry budget: exact numbers for each configuration,
//! snapshots of outages and recoveries, and properties against a naive model.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use quickcheck::QuickCheck;
use retry_core::{
    AttemptKind, BudgetConfig, BudgetError, BudgetEvent, BudgetInput, BudgetOutput, BudgetStep,
    BudgetTimeline, Instant, Requirement, RetryBudget, RetryKind, Tokens, Withdrawal,
};

const T0: Instant = Instant::ORIGIN;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

fn tok(millis: u64) -> Tokens {
    Tokens::from_millis(millis)
}

fn withdraw(b: &mut RetryBudget, now: Instant) -> Withdrawal {
    b.try_withdraw(RetryKind::Failure, now)
}

// ---------------------------------------------------------------------------
// gRPC
// ---------------------------------------------------------------------------

fn grpc_10() -> RetryBudget {
    RetryBudget::new(BudgetConfig::grpc(10, 0.1).unwrap())
}

#[test]
fn grpc_five_failures_leave_five_tokens_and_refuse() {
    let mut b = grpc_10();
    assert_eq!(b.tokens(), Tokens::from_whole(10));
    assert_eq!(b.max_tokens(), Tokens::from_whole(10));
    for _ in 0..5 {
        b.on_failure(T0);
    }
    assert_eq!(b.tokens(), Tokens::from_whole(5));
    assert_eq!(
        withdraw(&mut b, T0),
        Withdrawal::Refused {
            left: Tokens::from_whole(5),
            needs: Requirement::Above(Tokens::from_whole(5)),
        }
    );
    // Refusal spends nothing; a timeout retry is judged the same way.
    assert_eq!(b.tokens(), Tokens::from_whole(5));
    assert!(!b.try_withdraw(RetryKind::Timeout, T0).is_granted());
}

#[test]
fn grpc_four_failures_leave_six_tokens_and_allow() {
    let mut b = grpc_10();
    for _ in 0..4 {
        b.on_failure(T0);
    }
    assert_eq!(b.tokens(), Tokens::from_whole(6));
    assert_eq!(
        withdraw(&mut b, T0),
        Withdrawal::Granted {
            cost: Tokens::ZERO,
            left: Tokens::from_whole(6),
        }
    );
    // gRPC never charges the retry itself.
    assert_eq!(b.tokens(), Tokens::from_whole(6));
}

#[test]
fn grpc_successes_add_a_tenth_and_clamp() {
    let mut b = grpc_10();
    for _ in 0..5 {
        b.on_failure(T0);
    }
    b.on_success(T0, AttemptKind::First);
    assert_eq!(b.tokens(), tok(5_100));
    assert!(withdraw(&mut b, T0).is_granted());
    b.on_success(T0, AttemptKind::Retry(RetryKind::Timeout));
    assert_eq!(b.tokens(), tok(5_200));
    for _ in 0..100 {
        b.on_success(T0, AttemptKind::First);
    }
    assert_eq!(b.tokens(), Tokens::from_whole(10));
    for _ in 0..50 {
        b.on_failure(T0);
    }
    assert_eq!(b.tokens(), Tokens::ZERO);
    // From empty, 51 successes are needed to rise above the threshold (5.1 > 5).
    for _ in 0..50 {
        b.on_success(T0, AttemptKind::First);
    }
    assert_eq!(b.tokens(), Tokens::from_whole(5));
    assert!(!withdraw(&mut b, T0).is_granted());
    b.on_success(T0, AttemptKind::First);
    assert!(withdraw(&mut b, T0).is_granted());
}

#[test]
fn grpc_ratio_keeps_three_decimals() {
    let millis = |r: f64| {
        let mut b = RetryBudget::new(BudgetConfig::grpc(10, r).unwrap());
        for _ in 0..10 {
            b.on_failure(T0);
        }
        b.on_success(T0, AttemptKind::First);
        b.tokens().as_millis()
    };
    assert_eq!(millis(0.1), 100);
    assert_eq!(millis(0.57), 570);
    assert_eq!(millis(0.1239), 123);
    assert_eq!(millis(0.001), 1);
    assert_eq!(millis(1.6), 1_600);
    assert_eq!(
        BudgetConfig::grpc(10, 0.1).unwrap(),
        BudgetConfig::grpc_millis(10, 100).unwrap()
    );
}

// ---------------------------------------------------------------------------
// AWS
// ---------------------------------------------------------------------------

#[test]
fn aws_hundred_retries_drain_the_quota() {
    let mut b = RetryBudget::new(BudgetConfig::aws_standard());
    assert_eq!(b.tokens(), Tokens::from_whole(500));
    for i in 1..=100_u32 {
        assert_eq!(
            withdraw(&mut b, T0),
            Withdrawal::Granted {
                cost: Tokens::from_whole(5),
                left: Tokens::from_whole(500 - 5 * i),
            }
        );
    }
    assert_eq!(b.tokens(), Tokens::ZERO);
    assert_eq!(
        withdraw(&mut b, T0),
        Withdrawal::Refused {
            left: Tokens::ZERO,
            needs: Requirement::AtLeast(Tokens::from_whole(5)),
        }
    );
    // First attempts and failures cost nothing under AWS.
    b.on_first_attempt(T0);
    b.on_failure(T0);
    assert_eq!(b.tokens(), Tokens::ZERO);
}

#[test]
fn aws_timeout_retry_costs_ten() {
    let mut b = RetryBudget::new(BudgetConfig::aws_standard());
    assert_eq!(
        b.try_withdraw(RetryKind::Timeout, T0),
        Withdrawal::Granted {
            cost: Tokens::from_whole(10),
            left: Tokens::from_whole(490),
        }
    );
    // With 5..=9 tokens left an ordinary retry passes but a timeout retry does not.
    let mut b = RetryBudget::new(BudgetConfig::aws().capacity(9).build().unwrap());
    assert!(!b.try_withdraw(RetryKind::Timeout, T0).is_granted());
    assert!(b.try_withdraw(RetryKind::Failure, T0).is_granted());
    assert_eq!(b.tokens(), Tokens::from_whole(4));
}

#[test]
fn aws_refunds_and_clamps() {
    let mut b = RetryBudget::new(BudgetConfig::aws_standard());
    b.on_success(T0, AttemptKind::First);
    assert_eq!(b.tokens(), Tokens::from_whole(500)); // clamped
    assert!(b.try_withdraw(RetryKind::Timeout, T0).is_granted());
    b.on_success(T0, AttemptKind::Retry(RetryKind::Timeout));
    assert_eq!(b.tokens(), Tokens::from_whole(500)); // the 10 came back
    assert!(withdraw(&mut b, T0).is_granted());
    assert!(withdraw(&mut b, T0).is_granted());
    assert_eq!(b.tokens(), Tokens::from_whole(490));
    b.on_success(T0, AttemptKind::First);
    assert_eq!(b.tokens(), Tokens::from_whole(491));
    b.on_success(T0, AttemptKind::Retry(RetryKind::Failure));
    assert_eq!(b.tokens(), Tokens::from_whole(496));
    b.on_success(T0, AttemptKind::Retry(RetryKind::Timeout));
    assert_eq!(b.tokens(), Tokens::from_whole(500)); // 506 clamped
}

// ---------------------------------------------------------------------------
// Finagle
// ---------------------------------------------------------------------------

#[test]
fn finagle_default_matches_its_builder() {
    assert_eq!(
        BudgetConfig::finagle_default(),
        BudgetConfig::finagle().build().unwrap()
    );
    assert_eq!(
        BudgetConfig::finagle_default(),
        BudgetConfig::finagle()
            .percent_can_retry(0.2)
            .min_retries_per_sec(10)
            .window(Duration::from_secs(10))
            .build()
            .unwrap()
    );
    assert_eq!(
        BudgetConfig::finagle_default().initial_tokens(),
        Tokens::from_whole(500)
    );
}

#[test]
fn finagle_hundred_requests_allow_hundred_twenty_retries() {
    let mut b = RetryBudget::new(BudgetConfig::finagle_default());
    for i in 0..100 {
        b.on_first_attempt(ms(i * 50)); // all within 5 s
    }
    // 100 requests deposit 100 tokens, the reserve holds 500, a retry costs 5.
    assert_eq!(b.tokens(), Tokens::from_whole(600));
    let now = ms(5_000);
    for _ in 0..120 {
        assert!(withdraw(&mut b, now).is_granted());
    }
    assert_eq!(
        withdraw(&mut b, now),
        Withdrawal::Refused {
            left: Tokens::ZERO,
            needs: Requirement::AtLeast(Tokens::from_whole(5)),
        }
    );
}

#[test]
fn finagle_deposits_and_withdrawals_age_out() {
    let mut b = RetryBudget::new(BudgetConfig::finagle_default());
    // 100 retries drain the reserve at t = 0.5 s.
    for _ in 0..100 {
        assert!(withdraw(&mut b, ms(500)).is_granted());
    }
    assert!(!withdraw(&mut b, ms(500)).is_granted());
    // Slot 0 stays in the window up to 9.999 s and leaves at 10 s.
    assert_eq!(b.tokens_at(ms(9_999)), Tokens::ZERO);
    assert_eq!(b.tokens_at(ms(10_000)), Tokens::from_whole(500));
    // A deposit late in slot 10 counts until slot 20 begins.
    b.on_first_attempt(ms(10_900));
    assert_eq!(b.tokens(), Tokens::from_whole(501));
    assert_eq!(b.tokens_at(ms(19_999)), Tokens::from_whole(501));
    assert_eq!(b.tokens_at(ms(20_000)), Tokens::from_whole(500));
}

#[test]
fn finagle_balance_can_dip_and_reads_as_zero() {
    // No reserve: only deposits pay for retries.
    let config = BudgetConfig::finagle()
        .min_retries_per_sec(0)
        .percent_can_retry(0.5)
        .build()
        .unwrap();
    let mut b = RetryBudget::new(config);
    assert!(!withdraw(&mut b, T0).is_granted());
    b.on_first_attempt(T0);
    b.on_first_attempt(T0);
    assert!(withdraw(&mut b, ms(5_000)).is_granted());
    // The deposits leave at 10 s, the withdrawal only at 15 s.
    assert_eq!(b.tokens_at(ms(12_000)), Tokens::ZERO);
    assert!(!withdraw(&mut b, ms(12_000)).is_granted());
    b.on_first_attempt(ms(12_000));
    b.on_first_attempt(ms(12_000));
    // Raw balance is -2 + 2 = 0: still no retry.
    assert!(!withdraw(&mut b, ms(12_000)).is_granted());
    assert_eq!(b.tokens_at(ms(15_000)), Tokens::from_whole(2));
}

#[test]
fn finagle_edge_configs() {
    // Neither percentage nor floor: never retries (Finagle's empty budget).
    let none = BudgetConfig::finagle()
        .min_retries_per_sec(0)
        .percent_can_retry(0.0)
        .build()
        .unwrap();
    let mut b = RetryBudget::new(none);
    for _ in 0..1000 {
        b.on_first_attempt(T0);
    }
    assert!(!withdraw(&mut b, T0).is_granted());
    // Only the floor: 10 per second over 10 s = 100 retries, costing 0.001 each.
    let floor = BudgetConfig::finagle()
        .percent_can_retry(0.0)
        .build()
        .unwrap();
    let mut b = RetryBudget::new(floor);
    for _ in 0..1000 {
        b.on_first_attempt(T0);
    }
    let granted = (0..200)
        .filter(|_| withdraw(&mut b, T0).is_granted())
        .count();
    assert_eq!(granted, 100);
    // 100%: one retry per request, on top of the floor.
    let all = BudgetConfig::finagle()
        .min_retries_per_sec(0)
        .percent_can_retry(1.0)
        .build()
        .unwrap();
    let mut b = RetryBudget::new(all);
    for _ in 0..7 {
        b.on_first_attempt(T0);
    }
    let granted = (0..20)
        .filter(|_| withdraw(&mut b, T0).is_granted())
        .count();
    assert_eq!(granted, 7);
}

#[test]
fn time_going_backwards_counts_as_no_time() {
    let mut b = RetryBudget::new(BudgetConfig::finagle_default());
    for _ in 0..100 {
        assert!(withdraw(&mut b, ms(500)).is_granted());
    }
    b.on_first_attempt(ms(10_000)); // everything above has aged out
    assert_eq!(b.tokens(), Tokens::from_whole(501));
    // Earlier times read as 10 s: the old withdrawals stay aged out.
    assert!(withdraw(&mut b, ms(100)).is_granted());
    assert_eq!(b.tokens_at(T0), Tokens::from_whole(496));
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

#[test]
fn errors_name_their_fields() {
    let cases: [(Result<BudgetConfig, BudgetError>, &str, &str); 14] = [
        (
            BudgetConfig::grpc(0, 0.1),
            "max_tokens",
            "budget.max_tokens_out_of_range",
        ),
        (
            BudgetConfig::grpc(1001, 0.1),
            "max_tokens",
            "budget.max_tokens_out_of_range",
        ),
        (
            BudgetConfig::grpc(10, 0.0),
            "token_ratio",
            "budget.token_ratio_out_of_range",
        ),
        (
            BudgetConfig::grpc(10, 0.0004),
            "token_ratio",
            "budget.token_ratio_out_of_range",
        ),
        (
            BudgetConfig::grpc(10, -0.5),
            "token_ratio",
            "budget.token_ratio_out_of_range",
        ),
        (
            BudgetConfig::grpc(10, f64::NAN),
            "token_ratio",
            "budget.token_ratio_out_of_range",
        ),
        (
            BudgetConfig::grpc(10, 1000.5),
            "token_ratio",
            "budget.token_ratio_out_of_range",
        ),
        (
            BudgetConfig::grpc_millis(10, 0),
            "token_ratio",
            "budget.token_ratio_out_of_range",
        ),
        (
            BudgetConfig::aws().capacity(0).build(),
            "capacity",
            "budget.zero_capacity",
        ),
        (
            BudgetConfig::finagle().percent_can_retry(1.5).build(),
            "percent_can_retry",
            "budget.percent_out_of_range",
        ),
        (
            BudgetConfig::finagle().percent_can_retry(-0.1).build(),
            "percent_can_retry",
            "budget.percent_out_of_range",
        ),
        (
            BudgetConfig::finagle()
                .percent_can_retry_permille(1001)
                .build(),
            "percent_can_retry",
            "budget.percent_out_of_range",
        ),
        (
            BudgetConfig::finagle().window(Duration::ZERO).build(),
            "window",
            "budget.window_out_of_range",
        ),
        (
            BudgetConfig::finagle()
                .window(Duration::from_millis(60_001))
                .build(),
            "window",
            "budget.window_out_of_range",
        ),
    ];
    for (result, field, code) in cases {
        let err = result.unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        assert_eq!(err.code(), code, "{err}");
        assert!(err.to_string().starts_with(field), "{err}");
    }
    assert_eq!(
        BudgetConfig::finagle()
            .window(Duration::from_millis(999))
            .build(),
        Err(BudgetError::WindowOutOfRange {
            window: Duration::from_millis(999)
        })
    );
    let err: &dyn core::error::Error = &BudgetError::ZeroCapacity;
    assert_eq!(err.to_string(), "capacity: must be at least 1 token");
    assert_eq!(
        BudgetError::PercentOutOfRange { value: 1.5 }.to_string(),
        "percent_can_retry: must be a fraction in [0, 1] (0.2 means 20%), got 1.5"
    );
    // The edges are accepted.
    assert!(BudgetConfig::grpc(1, 0.001).is_ok());
    assert!(BudgetConfig::grpc(1000, 1000.0).is_ok());
    assert!(BudgetConfig::finagle()
        .window(Duration::from_secs(1))
        .build()
        .is_ok());
    assert!(BudgetConfig::finagle()
        .window(Duration::from_secs(60))
        .build()
        .is_ok());
}

// ---------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------

/// How one attempt of a scripted call ends.
#[derive(Clone, Copy)]
enum Outcome {
    Succeed,
    Fail,
    TimeOut,
}

/// Records the events a driver following the budget's rules would send for one
/// call of at most `outcomes.len()` attempts, all at `at`.
fn call(
    budget: &mut RetryBudget,
    events: &mut Vec<BudgetEvent>,
    at: Instant,
    outcomes: &[Outcome],
) {
    let mut send = |budget: &mut RetryBudget, input| {
        events.push(BudgetEvent::new(at, input));
        budget.apply(input, at)
    };
    send(budget, BudgetInput::FirstAttempt);
    let mut attempt = AttemptKind::First;
    for (i, outcome) in outcomes.iter().enumerate() {
        let kind = match outcome {
            Outcome::Succeed => {
                send(budget, BudgetInput::Success(attempt));
                return;
            }
            Outcome::Fail => RetryKind::Failure,
            Outcome::TimeOut => RetryKind::Timeout,
        };
        send(budget, BudgetInput::Failure);
        if i + 1 == outcomes.len() {
            return;
        }
        match send(budget, BudgetInput::Withdraw(kind)) {
            BudgetOutput::Withdrawal(w) if w.is_granted() => attempt = AttemptKind::Retry(kind),
            _ => return,
        }
    }
}

/// Replays the recorded events from a fresh budget into a table.
fn render(config: BudgetConfig, events: &[BudgetEvent]) -> String {
    BudgetTimeline::new(RetryBudget::new(config), events).to_string()
}

use Outcome::{Fail, Succeed, TimeOut};

#[test]
fn snapshot_grpc_outage_and_recovery() {
    let config = BudgetConfig::grpc(10, 0.5).unwrap();
    let mut b = RetryBudget::new(config);
    let mut events = Vec::new();
    // Outage: every attempt fails; calls may make 3 attempts.
    for i in 0..4 {
        call(&mut b, &mut events, ms(i * 1_000), &[Fail, Fail, Fail]);
    }
    // Recovery: first attempts succeed and refill half a token each.
    for i in 0..8 {
        call(&mut b, &mut events, ms(10_000 + i * 100), &[Succeed]);
    }
    call(&mut b, &mut events, ms(11_000), &[Fail, Succeed]);
    insta::assert_snapshot!("grpc_outage", render(config, &events));
}

#[test]
fn snapshot_aws_outage_and_recovery() {
    let config = BudgetConfig::aws().capacity(30).build().unwrap();
    let mut b = RetryBudget::new(config);
    let mut events = Vec::new();
    for i in 0..4 {
        call(&mut b, &mut events, ms(i * 1_000), &[TimeOut, Fail, Fail]);
    }
    // Recovery: each first-attempt success adds 1 token; a successful retry gets
    // its cost back.
    for i in 0..12 {
        call(&mut b, &mut events, ms(10_000 + i * 100), &[Succeed]);
    }
    call(&mut b, &mut events, ms(11_500), &[Fail, Succeed]);
    call(&mut b, &mut events, ms(12_000), &[TimeOut, Succeed]);
    call(
        &mut b,
        &mut events,
        ms(12_500),
        &[TimeOut, TimeOut, Succeed],
    );
    insta::assert_snapshot!("aws_outage", render(config, &events));
}

#[test]
fn snapshot_finagle_outage_and_recovery() {
    // 2 s window, floor of 1 retry per second, 50% of requests: a retry costs
    // 2 tokens, a request deposits 1, the reserve is 1 × 2 × 2 = 4 tokens.
    let config = BudgetConfig::finagle()
        .window(Duration::from_secs(2))
        .min_retries_per_sec(1)
        .percent_can_retry(0.5)
        .build()
        .unwrap();
    let mut b = RetryBudget::new(config);
    let mut events = Vec::new();
    for i in 0..6 {
        call(&mut b, &mut events, ms(i * 200), &[Fail, Fail, Fail]);
    }
    // Later the window has moved on: the reserve is whole again.
    call(&mut b, &mut events, ms(3_000), &[Fail, Fail, Succeed]);
    call(&mut b, &mut events, ms(3_100), &[Succeed]);
    insta::assert_snapshot!("finagle_outage", render(config, &events));
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

/// A naive, allocating, obviously correct model of the three budgets.
#[derive(Clone, Debug)]
enum Model {
    Grpc {
        max: i128,
        ratio: i128,
        tokens: i128,
    },
    Aws {
        capacity: i128,
        retry_cost: i128,
        timeout_cost: i128,
        increment: i128,
        tokens: i128,
    },
    Finagle {
        slice_nanos: u64,
        deposit: i128,
        withdrawal: i128,
        reserve: i128,
        /// Every deposit (+) and withdrawal (-) ever made, with its slot.
        log: Vec<(u64, i128)>,
        now: Instant,
    },
}

impl Model {
    fn finagle_balance(&self, now: Instant) -> i128 {
        let Model::Finagle {
            slice_nanos,
            reserve,
            log,
            now: last,
            ..
        } = self
        else {
            unreachable!()
        };
        let slot = now.max(*last).as_nanos() / slice_nanos;
        reserve
            + log
                .iter()
                .filter(|(s, _)| s + 10 > slot)
                .map(|(_, a)| a)
                .sum::<i128>()
    }

    fn tokens(&self) -> Tokens {
        let t = match self {
            Model::Grpc { tokens, .. } | Model::Aws { tokens, .. } => *tokens,
            Model::Finagle { now, .. } => self.finagle_balance(*now).max(0),
        };
        Tokens::from_millis(u64::try_from(t).unwrap())
    }

    fn step(&mut self, input: BudgetInput, at: Instant) -> BudgetOutput {
        let t = |m: i128| Tokens::from_millis(u64::try_from(m).unwrap());
        if let Model::Finagle { now, .. } = self {
            *now = (*now).max(at);
        }
        let balance = match &*self {
            Model::Finagle { now, .. } => self.finagle_balance(*now),
            _ => 0,
        };
        match (self, input) {
            (Model::Grpc { tokens, .. }, BudgetInput::Failure) => *tokens = (*tokens - 1000).max(0),
            (Model::Grpc { max, ratio, tokens }, BudgetInput::Success(_)) => {
                *tokens = (*tokens + *ratio).min(*max)
            }
            (Model::Grpc { max, tokens, .. }, BudgetInput::Withdraw(_)) => {
                let w = if *tokens * 2 > *max {
                    Withdrawal::Granted {
                        cost: Tokens::ZERO,
                        left: t(*tokens),
                    }
                } else {
                    Withdrawal::Refused {
                        left: t(*tokens),
                        needs: Requirement::Above(t(*max / 2)),
                    }
                };
                return BudgetOutput::Withdrawal(w);
            }
            (
                Model::Aws {
                    capacity,
                    retry_cost,
                    timeout_cost,
                    increment,
                    tokens,
                },
                BudgetInput::Success(a),
            ) => {
                let refund = match a {
                    AttemptKind::First => *increment,
                    AttemptKind::Retry(RetryKind::Failure) => *retry_cost,
                    AttemptKind::Retry(RetryKind::Timeout) => *timeout_cost,
                };
                *tokens = (*tokens + refund).min(*capacity);
            }
            (
                Model::Aws {
                    retry_cost,
                    timeout_cost,
                    tokens,
                    ..
                },
                BudgetInput::Withdraw(kind),
            ) => {
                let cost = if kind == RetryKind::Timeout {
                    *timeout_cost
                } else {
                    *retry_cost
                };
                let w = if *tokens >= cost {
                    *tokens -= cost;
                    Withdrawal::Granted {
                        cost: t(cost),
                        left: t(*tokens),
                    }
                } else {
                    Withdrawal::Refused {
                        left: t(*tokens),
                        needs: Requirement::AtLeast(t(cost)),
                    }
                };
                return BudgetOutput::Withdrawal(w);
            }
            (
                Model::Finagle {
                    slice_nanos,
                    deposit,
                    log,
                    now,
                    ..
                },
                BudgetInput::FirstAttempt,
            ) => {
                log.push((now.as_nanos() / *slice_nanos, *deposit));
            }
            (
                Model::Finagle {
                    slice_nanos,
                    withdrawal,
                    log,
                    now,
                    ..
                },
                BudgetInput::Withdraw(_),
            ) => {
                let cost = *withdrawal;
                let w = if balance >= cost {
                    log.push((now.as_nanos() / *slice_nanos, -cost));
                    Withdrawal::Granted {
                        cost: t(cost),
                        left: t((balance - cost).max(0)),
                    }
                } else {
                    Withdrawal::Refused {
                        left: t(balance.max(0)),
                        needs: Requirement::AtLeast(t(cost)),
                    }
                };
                return BudgetOutput::Withdrawal(w);
            }
            _ => {}
        }
        BudgetOutput::Noted
    }
}

/// A random, valid configuration and its model, from raw numbers.
fn config_and_model(kind: u8, a: u16, b: u16, c: u16, d: u16) -> (BudgetConfig, Model) {
    match kind % 3 {
        0 => {
            let max = 1 + u32::from(a) % 1000;
            let ratio = 1 + u32::from(b) % 3000;
            let config = BudgetConfig::grpc_millis(max, ratio).unwrap();
            let max = i128::from(max) * 1000;
            (
                config,
                Model::Grpc {
                    max,
                    ratio: i128::from(ratio),
                    tokens: max,
                },
            )
        }
        1 => {
            let capacity = 1 + u32::from(a) % 600;
            let (rc, tc, inc) = (u32::from(b) % 20, u32::from(c) % 30, u32::from(d) % 5);
            let config = BudgetConfig::aws()
                .capacity(capacity)
                .retry_cost(rc)
                .timeout_cost(tc)
                .no_retry_increment(inc)
                .build()
                .unwrap();
            let m = |x: u32| i128::from(x) * 1000;
            let model = Model::Aws {
                capacity: m(capacity),
                retry_cost: m(rc),
                timeout_cost: m(tc),
                increment: m(inc),
                tokens: m(capacity),
            };
            (config, model)
        }
        _ => {
            let window_ms = 1_000 + u64::from(a) % 59_001;
            let min = u32::from(b) % 20;
            let permille = u32::from(c) % 1001;
            let config = BudgetConfig::finagle()
                .window(Duration::from_millis(window_ms))
                .min_retries_per_sec(min)
                .percent_can_retry_permille(permille)
                .build()
                .unwrap();
            let (deposit, withdrawal) = if permille == 0 {
                (0, 1)
            } else {
                (1000, 1_000_000 / i128::from(permille))
            };
            let model = Model::Finagle {
                slice_nanos: window_ms * 1_000_000 / 10,
                deposit,
                withdrawal,
                reserve: i128::from(min) * i128::from(window_ms / 1000) * withdrawal,
                log: Vec::new(),
                now: T0,
            };
            (config, model)
        }
    }
}

/// A random script: each op moves time (mostly forward) and sends one input.
fn script(ops: &[(u16, u8)]) -> Vec<BudgetEvent> {
    let mut now = 0_u64;
    ops.iter()
        .map(|&(dt, op)| {
            let dt = u64::from(dt) % 3_000;
            now = if op & 0x80 != 0 && op & 0x40 != 0 {
                now.saturating_sub(dt) // sometimes time goes backwards
            } else {
                now + dt
            };
            let input = match op % 7 {
                0 => BudgetInput::FirstAttempt,
                1 => BudgetInput::Failure,
                2 => BudgetInput::Success(AttemptKind::First),
                3 => BudgetInput::Success(AttemptKind::Retry(RetryKind::Failure)),
                4 => BudgetInput::Success(AttemptKind::Retry(RetryKind::Timeout)),
                5 => BudgetInput::Withdraw(RetryKind::Failure),
                _ => BudgetInput::Withdraw(RetryKind::Timeout),
            };
            BudgetEvent::new(ms(now), input)
        })
        .collect()
}

type Prop = fn(u8, u16, u16, u16, u16, Vec<(u16, u8)>) -> bool;

fn check(prop: Prop) {
    QuickCheck::new().tests(10_000).quickcheck(prop);
}

#[test]
fn prop_tokens_stay_in_bounds() {
    fn prop(kind: u8, a: u16, b: u16, c: u16, d: u16, ops: Vec<(u16, u8)>) -> bool {
        let (config, _) = config_and_model(kind, a, b, c, d);
        let budget = RetryBudget::new(config);
        let max = budget.max_tokens();
        BudgetTimeline::new(budget, &script(&ops)).all(|step| {
            let in_bounds = |t: Tokens| t <= max;
            in_bounds(step.tokens)
                && match step.output {
                    BudgetOutput::Withdrawal(Withdrawal::Granted { left, .. })
                    | BudgetOutput::Withdrawal(Withdrawal::Refused { left, .. }) => in_bounds(left),
                    BudgetOutput::Noted => true,
                }
        })
    }
    check(prop);
}

#[test]
fn prop_first_attempts_never_refused_and_never_cost() {
    // There is no way to refuse a first attempt: the notification answers
    // nothing, and it never takes tokens away.
    fn prop(kind: u8, a: u16, b: u16, c: u16, d: u16, ops: Vec<(u16, u8)>) -> bool {
        let (config, _) = config_and_model(kind, a, b, c, d);
        let mut budget = RetryBudget::new(config);
        script(&ops).into_iter().all(|e| {
            let before = budget.tokens_at(e.at);
            let out = budget.apply(e.input, e.at);
            match e.input {
                BudgetInput::FirstAttempt => {
                    out == BudgetOutput::Noted && budget.tokens() >= before
                }
                BudgetInput::Withdraw(_) => match out {
                    BudgetOutput::Withdrawal(Withdrawal::Refused { left, .. }) => {
                        left == before && budget.tokens() == before
                    }
                    BudgetOutput::Withdrawal(Withdrawal::Granted { cost, left }) => {
                        left == budget.tokens() && cost.as_millis() <= before.as_millis()
                    }
                    BudgetOutput::Noted => false,
                },
                _ => out == BudgetOutput::Noted,
            }
        })
    }
    check(prop);
}

#[test]
fn prop_deterministic() {
    fn prop(kind: u8, a: u16, b: u16, c: u16, d: u16, ops: Vec<(u16, u8)>) -> bool {
        let (config, _) = config_and_model(kind, a, b, c, d);
        let events = script(&ops);
        let first: Vec<BudgetStep> =
            BudgetTimeline::new(RetryBudget::new(config), &events).collect();
        let second: Vec<BudgetStep> =
            BudgetTimeline::new(RetryBudget::new(config), &events).collect();
        // A copy taken half-way continues exactly like the original.
        let half = events.len() / 2;
        let mut timeline = BudgetTimeline::new(RetryBudget::new(config), &events[..half]);
        timeline.by_ref().for_each(drop);
        let copy = *timeline.budget();
        let rest: Vec<BudgetStep> = BudgetTimeline::new(copy, &events[half..]).collect();
        first == second && first[half..] == rest[..]
    }
    check(prop);
}

#[test]
fn prop_agrees_with_model() {
    fn prop(kind: u8, a: u16, b: u16, c: u16, d: u16, ops: Vec<(u16, u8)>) -> bool {
        let (config, mut model) = config_and_model(kind, a, b, c, d);
        let mut budget = RetryBudget::new(config);
        for e in script(&ops) {
            let got = budget.apply(e.input, e.at);
            let want = model.step(e.input, e.at);
            assert_eq!(got, want, "{config} at {} {}", e.at, e.input);
            assert_eq!(
                budget.tokens(),
                model.tokens(),
                "{config} at {} {}",
                e.at,
                e.input
            );
        }
        true
    }
    check(prop);
}

#[test]
fn prop_an_input_the_parameters_do_not_heed_changes_nothing() {
    // A budget kept in a store sends only the inputs its parameters heed: fed
    // only those (on a clock that never goes back, as a store's), it answers
    // and holds exactly what a budget fed every input does.
    fn prop(kind: u8, a: u16, b: u16, c: u16, d: u16, ops: Vec<(u16, u8)>) -> bool {
        let (config, _) = config_and_model(kind, a, b, c, d);
        let parameters = config.parameters();
        let mut every = RetryBudget::new(config);
        let mut heeded = RetryBudget::new(config);
        let mut latest = retry_core::Instant::ORIGIN;
        let mut skipped = 0;
        for e in script(&ops) {
            latest = latest.max(e.at);
            let answer = every.apply(e.input, latest);
            if parameters.heeds(e.input) {
                if heeded.apply(e.input, latest) != answer {
                    return false;
                }
            } else {
                skipped += 1;
                if answer != BudgetOutput::Noted {
                    return false;
                }
            }
            if every.tokens_at(latest) != heeded.tokens_at(latest) {
                return false;
            }
        }
        SKIPPED.fetch_add(skipped, core::sync::atomic::Ordering::Relaxed);
        true
    }
    static SKIPPED: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    check(prop);
    assert!(
        SKIPPED.load(core::sync::atomic::Ordering::Relaxed) > 10_000,
        "the scripts hold inputs the parameters ignore"
    );
}

#[test]
fn prop_builders_never_panic() {
    fn prop(
        max: u32,
        ratio: f64,
        ratio_millis: u32,
        cap: u32,
        percent: f64,
        window_ms: u64,
    ) -> bool {
        let grpc = BudgetConfig::grpc(max, ratio);
        // Thousandths, decimals past the third dropped, with the library's tolerance.
        let thousandths = |x: f64| (x * 1000.0 + 1e-6).floor();
        let grpc_ok = (1..=1000).contains(&max)
            && ratio >= 0.0
            && (1.0..=1_000_000.0).contains(&thousandths(ratio));
        let millis_ok = (1..=1000).contains(&max) && (1..=1_000_000).contains(&ratio_millis);
        let aws_ok = cap > 0;
        let window = Duration::from_millis(window_ms);
        let finagle = BudgetConfig::finagle()
            .percent_can_retry(percent)
            .window(window)
            .build();
        let finagle_ok = percent >= 0.0
            && thousandths(percent) <= 1000.0
            && (1_000..=60_000).contains(&window_ms);
        grpc.is_ok() == grpc_ok
            && BudgetConfig::grpc_millis(max, ratio_millis).is_ok() == millis_ok
            && BudgetConfig::aws().capacity(cap).build().is_ok() == aws_ok
            && finagle.is_ok() == finagle_ok
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(u32, f64, u32, u32, f64, u64) -> bool);
}
