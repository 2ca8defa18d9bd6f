//! [`BudgetSnapshot`]: a retry budget's state as a versioned record, and the
//! checks that restore it.

use core::time::Duration;

use super::config::Kind;
use super::window::{Window, SLICES};
use super::{BudgetConfig, Engine, RetryBudget, MILLI};
use crate::snapshot::{consistent, SnapshotError};
use crate::Instant;

/// A [`RetryBudget`] as a plain, versioned record: its configuration, its
/// tokens (gRPC, AWS) or the deposits and withdrawals still in its window
/// (Finagle), and the latest time it was told. [`RetryBudget::snapshot`] takes
/// one; [`RetryBudget::restore`] checks one and rebuilds the budget, which then
/// answers every later notification exactly as the original would. With the
/// `serde` feature it serializes to any serde format, without allocating.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use retry_core::{BudgetConfig, BudgetSnapshot, Instant, RetryBudget, RetryKind};
///
/// let mut budget = RetryBudget::new(BudgetConfig::aws_standard());
/// let _ = budget.try_withdraw(RetryKind::Timeout, Instant::ORIGIN);
/// let text = serde_json::to_string(&budget.snapshot()).unwrap();
/// let snapshot: BudgetSnapshot = serde_json::from_str(&text).unwrap();
/// let restored = RetryBudget::restore(&snapshot)?;
/// assert_eq!(restored, budget);
/// # }
/// # Ok::<(), retry_core::SnapshotError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BudgetSnapshot {
    version: u32,
    config: ConfigRecord,
    state: StateRecord,
    latest_now: Instant,
}

/// A configuration as its builder takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
enum ConfigRecord {
    Grpc {
        max_tokens: u32,
        token_ratio_millis: u32,
    },
    /// Whole tokens.
    Aws {
        capacity: u32,
        retry_cost: u32,
        timeout_cost: u32,
        no_retry_increment: u32,
    },
    Finagle {
        window: Duration,
        min_retries_per_sec: u32,
        percent_can_retry_permille: u32,
    },
}

/// One slice of Finagle's window: the slot it holds (time since the origin
/// divided by the slice length) and the net amount deposited in it, in
/// thousandths of a token.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct SliceRecord {
    slot: u64,
    net: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
enum StateRecord {
    /// The tokens in the bucket, in thousandths (gRPC, AWS).
    Tokens { millis: u64 },
    /// The ten slices of the window, in ring order (Finagle).
    Slices { slices: [SliceRecord; SLICES] },
}

impl BudgetSnapshot {
    /// The format version this build writes and reads.
    pub const VERSION: u32 = 1;

    /// The format version of this snapshot.
    #[must_use]
    pub const fn version(&self) -> u32 {
        self.version
    }
}

/// Thousandths back to whole tokens (configs built from whole tokens are
/// multiples of a thousand).
fn whole(millis: u64) -> u32 {
    u32::try_from(millis / MILLI).unwrap_or(u32::MAX)
}

impl ConfigRecord {
    fn config(&self) -> Result<BudgetConfig, SnapshotError> {
        match *self {
            ConfigRecord::Grpc {
                max_tokens,
                token_ratio_millis,
            } => BudgetConfig::grpc_millis(max_tokens, token_ratio_millis),
            ConfigRecord::Aws {
                capacity,
                retry_cost,
                timeout_cost,
                no_retry_increment,
            } => BudgetConfig::aws()
                .capacity(capacity)
                .retry_cost(retry_cost)
                .timeout_cost(timeout_cost)
                .no_retry_increment(no_retry_increment)
                .build(),
            ConfigRecord::Finagle {
                window,
                min_retries_per_sec,
                percent_can_retry_permille,
            } => BudgetConfig::finagle()
                .window(window)
                .min_retries_per_sec(min_retries_per_sec)
                .percent_can_retry_permille(percent_can_retry_permille)
                .build(),
        }
        .map_err(SnapshotError::Budget)
    }
}

impl RetryBudget {
    /// The budget's state as a [`BudgetSnapshot`]: restored with
    /// [`RetryBudget::restore`], it answers every later notification as this
    /// budget would.
    #[must_use]
    pub fn snapshot(&self) -> BudgetSnapshot {
        let (config, state) = match self.engine {
            Engine::Grpc { config, tokens } => (
                ConfigRecord::Grpc {
                    max_tokens: whole(config.max),
                    token_ratio_millis: u32::try_from(config.ratio).unwrap_or(u32::MAX),
                },
                StateRecord::Tokens { millis: tokens },
            ),
            Engine::Aws { config, tokens } => (
                ConfigRecord::Aws {
                    capacity: whole(config.capacity),
                    retry_cost: whole(config.retry_cost),
                    timeout_cost: whole(config.timeout_cost),
                    no_retry_increment: whole(config.no_retry_increment),
                },
                StateRecord::Tokens { millis: tokens },
            ),
            Engine::Finagle { config, window } => {
                let mut slices = [SliceRecord::default(); SLICES];
                for (record, (slot, net)) in slices.iter_mut().zip(window.slices()) {
                    *record = SliceRecord { slot, net };
                }
                (
                    ConfigRecord::Finagle {
                        window: config.window,
                        min_retries_per_sec: config.min_retries_per_sec,
                        percent_can_retry_permille: config.permille,
                    },
                    StateRecord::Slices { slices },
                )
            }
        };
        BudgetSnapshot {
            version: BudgetSnapshot::VERSION,
            config,
            state,
            latest_now: self.last_now,
        }
    }

    /// Rebuilds a budget from `snapshot`, after checking it.
    ///
    /// # Errors
    /// A [`SnapshotError`] naming the field: an unknown `version`; a `config`
    /// its builder refuses ([`SnapshotError::Budget`]); tokens above the
    /// bucket's maximum, or an amount its arithmetic never reaches (a fraction
    /// of a token in an AWS bucket; in a gRPC one, thousandths that are no
    /// sum of whole tokens and ratios); a state of another kind than the
    /// config's; a window slice out of its place in the ring or above what a
    /// slice can hold.
    pub fn restore(snapshot: &BudgetSnapshot) -> Result<RetryBudget, SnapshotError> {
        let s = snapshot;
        if s.version != BudgetSnapshot::VERSION {
            return Err(SnapshotError::UnsupportedVersion {
                found: s.version,
                supported: BudgetSnapshot::VERSION,
            });
        }
        let config = s.config.config()?;
        let engine = match (config.kind, s.state) {
            (Kind::Grpc(config), StateRecord::Tokens { millis }) => {
                above(millis, config.max)?;
                // From a full bucket (whole tokens), failures take whole
                // tokens and successes add the ratio, so the tokens are a
                // multiple of what the two amounts share.
                consistent(
                    millis.checked_rem(gcd(MILLI, config.ratio)) == Some(0),
                    "state.millis",
                    "tokens the gRPC bucket cannot hold: not whole tokens and ratios",
                )?;
                Engine::Grpc {
                    config,
                    tokens: millis,
                }
            }
            (Kind::Aws(config), StateRecord::Tokens { millis }) => {
                above(millis, config.capacity)?;
                // Every AWS amount is whole tokens.
                consistent(
                    millis % MILLI == 0,
                    "state.millis",
                    "a fraction of a token in an AWS bucket, which counts whole tokens",
                )?;
                Engine::Aws {
                    config,
                    tokens: millis,
                }
            }
            (Kind::Finagle(config), StateRecord::Slices { slices }) => {
                let mut raw = [(0u64, 0i64); SLICES];
                for (r, slice) in raw.iter_mut().zip(slices.iter()) {
                    *r = (slice.slot, slice.net);
                }
                let window = Window::from_slices(&raw);
                consistent(
                    window.is_some(),
                    "state.slices",
                    "a slice out of its place in the ring, or above what a slice holds",
                )?;
                Engine::Finagle {
                    config,
                    window: window.unwrap_or(Window::EMPTY),
                }
            }
            _ => {
                return Err(SnapshotError::Inconsistent {
                    field: "state",
                    reason: "a state of another kind than the config's",
                })
            }
        };
        Ok(RetryBudget {
            engine,
            last_now: s.latest_now,
        })
    }
}

/// The greatest common divisor of `a` and `b` (`a` when `b` is zero).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while let Some(rest) = a.checked_rem(b) {
        (a, b) = (b, rest);
    }
    a
}

/// An error if `millis` tokens are above `max`.
fn above(millis: u64, max: u64) -> Result<(), SnapshotError> {
    if millis > max {
        return Err(SnapshotError::AboveMaximum {
            field: "state.millis",
            value: millis,
            maximum: max,
        });
    }
    Ok(())
}
