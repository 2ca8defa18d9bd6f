//! The retry budget against a reference model.
//!
//! Drives a [`RetryBudget`] (gRPC, AWS or Finagle, arbitrary parameters) with an
//! arbitrary list of notifications and clock moves. The model restates each
//! variant in plain integers (thousandths of a token): gRPC's ratio and half-full
//! threshold, AWS's costs and refunds, Finagle's ten slices of dated deposits and
//! withdrawals. It also holds config validation to the documented ranges and the
//! float entry points to the thousandths ones.

use core::time::Duration;

use arbitrary::Unstructured;
use retry_core::{
    AttemptKind, BudgetConfig, BudgetInput, BudgetOutput, Instant, Requirement, RetryBudget,
    RetryKind, Tokens, Withdrawal,
};

use crate::shared::{ensure, rarely, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "budget";

/// Notifications per input; also the Finagle model's history capacity.
const BUDGET_STEPS: usize = 256;
/// Thousandths in a token.
const MILLI: u64 = 1_000;
/// The most one Finagle slice can hold, in thousandths.
const FINAGLE_SLICE_CAP: u64 = 4_294_967_295_000;

/// A budget restated: plain integers, and Finagle's window as a list of dated
/// deposits and withdrawals.
// The Finagle variant carries its whole history; the model is built once per input.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum BudgetModel {
    Grpc {
        max: u64,
        ratio: u64,
        tokens: u64,
    },
    Aws {
        capacity: u64,
        retry: u64,
        timeout: u64,
        increment: u64,
        tokens: u64,
    },
    Finagle {
        deposit: u64,
        cost: u64,
        reserve: u64,
        slice: u64,
        entries: [(u64, i64); BUDGET_STEPS],
        len: usize,
    },
}

impl BudgetModel {
    fn finagle_max(reserve: u64) -> u64 {
        reserve.saturating_add(FINAGLE_SLICE_CAP.saturating_mul(10))
    }

    /// Finagle's balance at slot `now`: the reserve plus what the last ten
    /// slices hold, read as zero when negative.
    fn finagle_balance(reserve: u64, entries: &[(u64, i64)], now: u64) -> u64 {
        let net = entries
            .iter()
            .filter(|(slot, _)| *slot <= now && now.saturating_sub(*slot) < 10)
            .fold(0i128, |acc, (_, amount)| {
                acc.saturating_add(i128::from(*amount))
            });
        let total = i128::from(reserve).saturating_add(net).max(0);
        u64::try_from(total)
            .unwrap_or(u64::MAX)
            .min(Self::finagle_max(reserve))
    }

    fn tokens(&self, now: Instant) -> u64 {
        match self {
            BudgetModel::Grpc { tokens, .. } | BudgetModel::Aws { tokens, .. } => *tokens,
            BudgetModel::Finagle {
                reserve,
                slice,
                entries,
                len,
                ..
            } => Self::finagle_balance(
                *reserve,
                entries.get(..*len).unwrap_or(&[]),
                now.as_nanos().checked_div(*slice).unwrap_or(0),
            ),
        }
    }

    fn max(&self) -> u64 {
        match self {
            BudgetModel::Grpc { max, .. } => *max,
            BudgetModel::Aws { capacity, .. } => *capacity,
            BudgetModel::Finagle { reserve, .. } => Self::finagle_max(*reserve),
        }
    }

    fn apply(&mut self, input: BudgetInput, now: Instant) -> BudgetOutput {
        let left = Tokens::from_millis(self.tokens(now));
        match self {
            BudgetModel::Grpc { max, ratio, tokens } => match input {
                BudgetInput::Failure => *tokens = tokens.saturating_sub(MILLI),
                BudgetInput::Success(_) => *tokens = tokens.saturating_add(*ratio).min(*max),
                BudgetInput::Withdraw(_) => {
                    let needs = Requirement::Above(Tokens::from_millis(*max / 2));
                    return BudgetOutput::Withdrawal(if *tokens > *max / 2 {
                        Withdrawal::Granted {
                            cost: Tokens::ZERO,
                            left,
                        }
                    } else {
                        Withdrawal::Refused { left, needs }
                    });
                }
                BudgetInput::FirstAttempt => {}
            },
            BudgetModel::Aws {
                capacity,
                retry,
                timeout,
                increment,
                tokens,
            } => {
                let cost_of = |kind| match kind {
                    RetryKind::Failure => *retry,
                    RetryKind::Timeout => *timeout,
                };
                match input {
                    BudgetInput::Success(AttemptKind::First) => {
                        *tokens = tokens.saturating_add(*increment).min(*capacity);
                    }
                    BudgetInput::Success(AttemptKind::Retry(kind)) => {
                        *tokens = tokens.saturating_add(cost_of(kind)).min(*capacity);
                    }
                    BudgetInput::Withdraw(kind) => {
                        let cost = cost_of(kind);
                        return BudgetOutput::Withdrawal(if *tokens >= cost {
                            *tokens = tokens.saturating_sub(cost);
                            Withdrawal::Granted {
                                cost: Tokens::from_millis(cost),
                                left: Tokens::from_millis(*tokens),
                            }
                        } else {
                            Withdrawal::Refused {
                                left,
                                needs: Requirement::AtLeast(Tokens::from_millis(cost)),
                            }
                        });
                    }
                    BudgetInput::FirstAttempt | BudgetInput::Failure => {}
                }
            }
            BudgetModel::Finagle {
                deposit,
                cost,
                reserve,
                slice,
                entries,
                len,
            } => {
                let slot = now.as_nanos().checked_div(*slice).unwrap_or(0);
                let mut push = |amount: u64, negative: bool| {
                    let amount = i64::try_from(amount).unwrap_or(i64::MAX);
                    let amount = if negative {
                        amount.saturating_neg()
                    } else {
                        amount
                    };
                    if let Some(entry) = entries.get_mut(*len) {
                        *entry = (slot, amount);
                        *len = len.saturating_add(1);
                    }
                };
                match input {
                    BudgetInput::FirstAttempt => push(*deposit, false),
                    BudgetInput::Withdraw(_) => {
                        let needs = Requirement::AtLeast(Tokens::from_millis(*cost));
                        if left.as_millis() < *cost {
                            return BudgetOutput::Withdrawal(Withdrawal::Refused { left, needs });
                        }
                        push(*cost, true);
                        let after = Self::finagle_balance(
                            *reserve,
                            entries.get(..*len).unwrap_or(&[]),
                            slot,
                        );
                        return BudgetOutput::Withdrawal(Withdrawal::Granted {
                            cost: Tokens::from_millis(*cost),
                            left: Tokens::from_millis(after),
                        });
                    }
                    BudgetInput::Failure | BudgetInput::Success(_) => {}
                }
            }
        }
        BudgetOutput::Noted
    }
}

fn budget_setup(
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<Result<Option<(BudgetConfig, BudgetModel)>, ()>> {
    // Ok(None): refused as documented; Err(()): accepted or refused against the docs.
    let some = |config: Result<BudgetConfig, _>, model| config.ok().map(|c| (c, model));
    Ok(Ok(match u.int_in_range(0..=2u8)? {
        0 => {
            let max_tokens = if rarely(u, 8)? {
                u.arbitrary()?
            } else {
                u.int_in_range(1..=1_000u32)?
            };
            let ratio = if rarely(u, 8)? {
                u.arbitrary()?
            } else {
                u.int_in_range(1..=2_000u32)?
            };
            let config = BudgetConfig::grpc_millis(max_tokens, ratio);
            let valid = (1..=1_000).contains(&max_tokens) && (1..=1_000_000).contains(&ratio);
            if config.is_ok() != valid {
                return Ok(Err(()));
            }
            let max = u64::from(max_tokens).saturating_mul(MILLI);
            some(
                config,
                BudgetModel::Grpc {
                    max,
                    ratio: u64::from(ratio),
                    tokens: max,
                },
            )
        }
        1 => {
            let mut pick = || -> arbitrary::Result<u32> {
                Ok(if rarely(u, 8)? {
                    u.arbitrary()?
                } else {
                    u.int_in_range(0..=20u32)?
                })
            };
            let (capacity, retry, timeout, increment) = (pick()?.max(1), pick()?, pick()?, pick()?);
            let capacity = if capacity <= 20 {
                capacity.saturating_mul(10)
            } else {
                capacity
            };
            let m = |t: u32| u64::from(t).saturating_mul(MILLI);
            let config = BudgetConfig::aws()
                .capacity(capacity)
                .retry_cost(retry)
                .timeout_cost(timeout)
                .no_retry_increment(increment)
                .build();
            some(
                config,
                BudgetModel::Aws {
                    capacity: m(capacity),
                    retry: m(retry),
                    timeout: m(timeout),
                    increment: m(increment),
                    tokens: m(capacity),
                },
            )
        }
        _ => {
            let window = if rarely(u, 8)? {
                u.arbitrary::<Duration>()?
            } else {
                Duration::from_millis(u.int_in_range(1_000..=60_000)?)
            };
            let per_sec = if rarely(u, 4)? {
                u.arbitrary()?
            } else {
                u.int_in_range(0..=20u32)?
            };
            let permille = if rarely(u, 8)? {
                u.arbitrary()?
            } else {
                u.int_in_range(0..=1_000u32)?
            };
            let config = BudgetConfig::finagle()
                .window(window)
                .min_retries_per_sec(per_sec)
                .percent_can_retry_permille(permille)
                .build();
            let in_range = window >= Duration::from_secs(1)
                && window <= Duration::from_secs(60)
                && permille <= 1_000;
            if config.is_ok() != in_range {
                return Ok(Err(()));
            }
            // As documented: a request deposits a token and a retry costs
            // 1 / percent tokens; with no percentage, nothing and one thousandth.
            let (deposit, cost) = match 1_000_000u64.checked_div(u64::from(permille)) {
                Some(cost) => (MILLI, cost),
                None => (0, 1),
            };
            let reserve = u64::from(per_sec)
                .saturating_mul(window.as_secs())
                .saturating_mul(cost);
            let slice = u64::try_from(window.as_nanos().checked_div(10).unwrap_or(0))
                .unwrap_or(u64::MAX)
                .max(1);
            some(
                config,
                BudgetModel::Finagle {
                    deposit,
                    cost,
                    reserve,
                    slice,
                    entries: [(0, 0); BUDGET_STEPS],
                    len: 0,
                },
            )
        }
    }))
}

/// Checks the float entry points against the thousandths ones: a value of
/// `m / 1000` must give the same config as `m` thousandths.
fn budget_floats(u: &mut Unstructured<'_>) -> Result<(), Violation> {
    let m = u.int_in_range(1..=1_000_000u32).unwrap_or(1);
    let exact = BudgetConfig::grpc(10, f64::from(m) / 1000.0);
    ensure(
        exact.ok() == BudgetConfig::grpc_millis(10, m).ok(),
        TARGET,
        0,
        "grpc ratio m/1000 differs from m thousandths",
    )?;
    let p = m % 1_001;
    ensure(
        BudgetConfig::finagle()
            .percent_can_retry(f64::from(p) / 1000.0)
            .build()
            .ok()
            == BudgetConfig::finagle()
                .percent_can_retry_permille(p)
                .build()
                .ok(),
        TARGET,
        0,
        "finagle percent p/1000 differs from p permille",
    )?;
    // Any float at all: refused or accepted, never a panic.
    let raw = f64::from_bits(u.arbitrary().unwrap_or(0));
    let _ = BudgetConfig::grpc(u.arbitrary().unwrap_or(1), raw);
    let _ = BudgetConfig::finagle().percent_can_retry(raw).build();
    Ok(())
}

/// Drives a [`RetryBudget`] (gRPC, AWS or Finagle, arbitrary parameters) with an
/// arbitrary list of notifications and clock moves, against the reference
/// model. Checks: no panic; tokens always in `[0, max]`; every answer and token
/// count equals the model's; first attempts never cost; refusals change nothing.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    budget_floats(&mut u)?;
    let setup = match budget_setup(&mut u) {
        Ok(Ok(Some(setup))) => setup,
        Ok(Ok(None)) | Err(_) => return Ok(()),
        Ok(Err(())) => {
            return Err(Violation {
                target: TARGET,
                step: 0,
                invariant: "a config was accepted or refused against its documented ranges",
            })
        }
    };
    let (config, mut model) = setup;
    let mut budget = RetryBudget::new(config);
    ensure(
        budget.max_tokens().as_millis() == model.max(),
        TARGET,
        0,
        "max tokens differ from the model",
    )?;
    ensure(
        budget.tokens() == config.initial_tokens(),
        TARGET,
        0,
        "a new budget does not hold its initial tokens",
    )?;
    ensure(
        budget.tokens().as_millis() == model.tokens(Instant::ORIGIN),
        TARGET,
        0,
        "a new budget's tokens differ from the model",
    )?;
    let mut now = Instant::ORIGIN;
    let mut last = Instant::ORIGIN;
    for step in 1..=BUDGET_STEPS {
        if u.is_empty() {
            break;
        }
        let Ok(pick) = u.int_in_range(0..=9u8) else {
            break;
        };
        let kind = if u.arbitrary().unwrap_or(false) {
            RetryKind::Timeout
        } else {
            RetryKind::Failure
        };
        let input = match pick {
            0 | 1 => BudgetInput::FirstAttempt,
            2 | 3 => BudgetInput::Failure,
            4 => BudgetInput::Success(AttemptKind::First),
            5 => BudgetInput::Success(AttemptKind::Retry(kind)),
            6 | 7 => BudgetInput::Withdraw(kind),
            8 => {
                now = now.saturating_add(Duration::from_millis(
                    u.int_in_range(0..=3_000).unwrap_or(0),
                ));
                continue;
            }
            _ => {
                now = match u.int_in_range(0..=2u8).unwrap_or(0) {
                    0 => now.saturating_sub(Duration::from_millis(
                        u.int_in_range(0..=5_000).unwrap_or(0),
                    )),
                    1 => Instant::from_nanos(u.arbitrary().unwrap_or(0)),
                    _ => now
                        .saturating_add(Duration::from_secs(u.int_in_range(0..=120).unwrap_or(0))),
                };
                continue;
            }
        };
        // Time going backwards counts as no time passing.
        last = last.max(now);
        let before = budget;
        let expected = model.apply(input, last);
        let output = budget.apply(input, now);
        ensure(
            output == expected,
            TARGET,
            step,
            "the answer differs from the reference model",
        )?;
        if let BudgetOutput::Withdrawal(Withdrawal::Refused { .. }) = output {
            ensure(
                budget.tokens_at(last) == before.tokens_at(last),
                TARGET,
                step,
                "a refusal changed the tokens",
            )?;
        }
        if input == BudgetInput::FirstAttempt {
            ensure(
                budget.tokens() >= before.tokens_at(last),
                TARGET,
                step,
                "a first attempt cost tokens",
            )?;
        }
        let tokens = budget.tokens().as_millis();
        ensure(
            tokens == model.tokens(last),
            TARGET,
            step,
            "tokens differ from the model",
        )?;
        ensure(
            tokens <= budget.max_tokens().as_millis(),
            TARGET,
            step,
            "tokens above the maximum",
        )?;
        let ahead = last.saturating_add(Duration::from_secs(u.int_in_range(0..=30).unwrap_or(0)));
        ensure(
            budget.tokens_at(ahead).as_millis() == model.tokens(ahead),
            TARGET,
            step,
            "tokens ahead in time differ from the model",
        )?;
    }
    Ok(())
}
