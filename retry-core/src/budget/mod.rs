//! A retry budget shared by many calls: a token bucket that stops retries while
//! a dependency is failing, so that an outage is not made worse by retry storms.
//!
//! [`RetryBudget`] is a plain, single-threaded, sans-IO value. It never reads a
//! clock: every notification carries the current [`Instant`]. Adapters that share
//! one budget between concurrent calls put it behind a mutex.
//!
//! Three ready configurations reproduce the budgets of well-known systems (see
//! [`BudgetConfig`]): gRPC retry throttling, the AWS SDKs' "standard" retry quota
//! and Finagle's percentage budget over a sliding window. [`RetryBudget`] lists
//! the driver's duties.
//!
//! Tokens are fixed-point integers counted in thousandths ([`Tokens`]); no float
//! is touched after a configuration is built.
//!
//! This file holds the budget, the tokens it counts, and its inputs and answers.
//! Beside it: the three configurations and their builders (`config.rs`), the
//! errors a bad configuration is refused with (`error.rs`), Finagle's sliding
//! window (`window.rs`), the scripted driver with its printable timeline
//! (`sim.rs`), and the versioned snapshot (`snapshot.rs`).

use core::fmt;

use crate::Instant;

mod config;
mod error;
mod sim;
mod snapshot;
mod window;

pub use config::{AwsQuotaBuilder, BudgetConfig, BudgetParameters, FinagleBudgetBuilder};
pub use error::BudgetError;
pub use sim::{BudgetEvent, BudgetInput, BudgetOutput, BudgetStep, BudgetTimeline};
pub use snapshot::BudgetSnapshot;

use config::{AwsConfig, FinagleConfig, GrpcConfig, Kind};
use window::Window;

/// Thousandths in one token.
const MILLI: u64 = 1_000;

// ---------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------

/// A token count in thousandths of a token (fixed point, never negative).
///
/// ```
/// use retry_core::Tokens;
/// let t = Tokens::from_millis(9_900);
/// assert_eq!(t.whole(), 9);
/// assert_eq!(t.to_string(), "9.900");
/// assert_eq!(Tokens::from_whole(5), Tokens::from_millis(5_000));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tokens {
    millis: u64,
}

impl Tokens {
    /// No tokens.
    pub const ZERO: Tokens = Tokens { millis: 0 };

    /// `millis` thousandths of a token.
    #[must_use]
    pub const fn from_millis(millis: u64) -> Tokens {
        Tokens { millis }
    }

    /// `whole` tokens.
    #[must_use]
    pub const fn from_whole(whole: u32) -> Tokens {
        // u32::MAX * 1000 fits in a u64.
        Tokens {
            millis: (whole as u64).saturating_mul(MILLI),
        }
    }

    /// The count in thousandths of a token.
    #[must_use]
    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// The whole tokens, rounded down.
    #[must_use]
    pub const fn whole(self) -> u64 {
        self.millis / MILLI
    }
}

impl fmt::Display for Tokens {
    /// Whole tokens and three decimals, e.g. `9.900`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.millis / MILLI, self.millis % MILLI)
    }
}

// ---------------------------------------------------------------------------
// Inputs and answers
// ---------------------------------------------------------------------------

/// What a retry is retrying: AWS charges more for a retry after a timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RetryKind {
    /// A retry after an ordinary failure (an error, a throttle, a 5xx...).
    #[default]
    Failure,
    /// A retry after the previous attempt timed out.
    Timeout,
}

impl fmt::Display for RetryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RetryKind::Failure => "retry",
            RetryKind::Timeout => "timeout retry",
        })
    }
}

/// Which attempt of a call succeeded, told to [`RetryBudget::on_success`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptKind {
    /// The first attempt: no retry was involved.
    First,
    /// A retry, of the kind that was granted for it by [`RetryBudget::try_withdraw`]
    /// (the last one, if the call retried several times).
    Retry(RetryKind),
}

/// What a retry needs from the budget to be granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Requirement {
    /// Strictly more tokens than this threshold (gRPC: more than half the bucket).
    Above(Tokens),
    /// At least this many tokens, which the retry then spends (AWS, Finagle).
    AtLeast(Tokens),
}

impl Requirement {
    /// Whether `tokens` meets the requirement.
    #[must_use]
    pub fn is_met_by(self, tokens: Tokens) -> bool {
        match self {
            Requirement::Above(threshold) => tokens > threshold,
            Requirement::AtLeast(cost) => tokens >= cost,
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Above(t) => write!(f, "> {t}"),
            Requirement::AtLeast(t) => write!(f, ">= {t}"),
        }
    }
}

/// The budget's answer to [`RetryBudget::try_withdraw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a refused withdrawal means the retry must not be sent"]
pub enum Withdrawal {
    /// The retry may be sent.
    Granted {
        /// What the retry spent (zero under gRPC, which never charges retries).
        cost: Tokens,
        /// The tokens left afterwards.
        left: Tokens,
    },
    /// The retry must not be sent: the call fails with its last failure. Nothing
    /// was spent.
    Refused {
        /// The tokens in the bucket.
        left: Tokens,
        /// What a retry would have needed.
        needs: Requirement,
    },
}

impl Withdrawal {
    /// Whether the retry was granted.
    #[must_use]
    pub const fn is_granted(&self) -> bool {
        matches!(self, Withdrawal::Granted { .. })
    }

    /// A stable dotted code for logs and metrics.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Withdrawal::Granted { .. } => "budget.granted",
            Withdrawal::Refused { .. } => "budget.refused",
        }
    }
}

impl fmt::Display for Withdrawal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Withdrawal::Granted { cost, .. } => write!(f, "granted, cost {cost}"),
            Withdrawal::Refused { needs, .. } => write!(f, "refused, needs {needs}"),
        }
    }
}

// ---------------------------------------------------------------------------
// The budget
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Engine {
    Grpc {
        config: GrpcConfig,
        tokens: u64,
    },
    Aws {
        config: AwsConfig,
        tokens: u64,
    },
    Finagle {
        config: FinagleConfig,
        window: Window,
    },
}

/// A retry budget shared by many calls; [`BudgetConfig`] describes the three
/// configurations.
///
/// # The driver's duties
///
/// For every call that shares the budget, the driver:
///
/// 1. calls [`RetryBudget::on_first_attempt`] when it sends the first attempt
///    (there is no way to refuse a first attempt: budgets only ever limit retries);
/// 2. calls [`RetryBudget::on_failure`] when an attempt fails in a way the retry
///    policy would retry (whether or not attempts remain);
/// 3. calls [`RetryBudget::try_withdraw`] before each retry, and only retries on
///    [`Withdrawal::Granted`];
/// 4. calls [`RetryBudget::on_success`] when an attempt succeeds, saying whether
///    it was the first attempt or a retry (and of which [`RetryKind`]).
///
/// Permanent failures need no notification. Each configuration ignores the
/// notifications it has no use for, so a driver always sends all four.
///
/// The budget is a small `Copy` value whose answers depend only on its
/// configuration and the notifications it was given. Time going backwards counts
/// as no time passing. Nothing panics, whatever the input.
///
/// ```
/// use retry_core::{AttemptKind, BudgetConfig, Instant, RetryBudget, RetryKind, Tokens};
///
/// let mut budget = RetryBudget::new(BudgetConfig::grpc(10, 0.1)?);
/// let now = Instant::ORIGIN;
/// // An outage: every call fails.
/// for _ in 0..4 {
///     budget.on_first_attempt(now);
///     budget.on_failure(now);
/// }
/// assert!(budget.try_withdraw(RetryKind::Failure, now).is_granted()); // 6 > 5
/// budget.on_failure(now); // the retry fails too
/// assert!(!budget.try_withdraw(RetryKind::Failure, now).is_granted()); // 5 is not > 5
/// // Recovery: successes add 0.1 each.
/// budget.on_success(now, AttemptKind::First);
/// assert_eq!(budget.tokens(), Tokens::from_millis(5_100));
/// assert!(budget.try_withdraw(RetryKind::Failure, now).is_granted());
/// # Ok::<(), retry_core::BudgetError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryBudget {
    engine: Engine,
    /// The latest `now` seen; earlier times are read as this one.
    last_now: Instant,
}

impl RetryBudget {
    /// A budget following `config`, with [`BudgetConfig::initial_tokens`].
    #[must_use]
    pub const fn new(config: BudgetConfig) -> RetryBudget {
        let engine = match config.kind {
            Kind::Grpc(config) => Engine::Grpc {
                config,
                tokens: config.max,
            },
            Kind::Aws(config) => Engine::Aws {
                config,
                tokens: config.capacity,
            },
            Kind::Finagle(config) => Engine::Finagle {
                config,
                window: Window::EMPTY,
            },
        };
        RetryBudget {
            engine,
            last_now: Instant::ORIGIN,
        }
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> BudgetConfig {
        let kind = match self.engine {
            Engine::Grpc { config, .. } => Kind::Grpc(config),
            Engine::Aws { config, .. } => Kind::Aws(config),
            Engine::Finagle { config, .. } => Kind::Finagle(config),
        };
        BudgetConfig { kind }
    }

    /// The tokens in the bucket as of the latest notification, in
    /// `[0, max_tokens]`. (Finagle's raw balance can dip below zero when deposits
    /// age out before the withdrawals they paid for; it reads as zero here.)
    #[must_use]
    pub fn tokens(&self) -> Tokens {
        self.tokens_at(self.last_now)
    }

    /// The tokens as they stand at `now` without notifying anything: only
    /// Finagle's balance changes with time alone, as old slices age out.
    #[must_use]
    pub fn tokens_at(&self, now: Instant) -> Tokens {
        let now = now.max(self.last_now);
        match self.engine {
            Engine::Grpc { tokens, .. } | Engine::Aws { tokens, .. } => Tokens::from_millis(tokens),
            Engine::Finagle { config, window } => finagle_tokens(&config, &window, now),
        }
    }

    /// The bucket's ceiling (see [`BudgetConfig::max_tokens`]).
    #[must_use]
    pub fn max_tokens(&self) -> Tokens {
        self.config().max_tokens()
    }

    /// The first attempt of a call is being sent at `now`. First attempts are
    /// never refused. Finagle deposits a request's credit; the others ignore it.
    pub fn on_first_attempt(&mut self, now: Instant) {
        let now = self.advance(now);
        if let Engine::Finagle { config, window } = &mut self.engine {
            let amount = i64::try_from(config.deposit).unwrap_or(0);
            window.add(config.slot(now), amount);
        }
    }

    /// An attempt (first or retry) failed at `now` in a way the retry policy would
    /// retry, whether or not it has attempts left. Send it before
    /// [`RetryBudget::try_withdraw`]. gRPC takes one token; the others ignore it.
    pub fn on_failure(&mut self, now: Instant) {
        self.advance(now);
        if let Engine::Grpc { tokens, .. } = &mut self.engine {
            *tokens = tokens.saturating_sub(MILLI);
        }
    }

    /// An attempt succeeded at `now`; `attempt` says whether it was the first one
    /// or a retry of some kind. gRPC adds `token_ratio`; AWS refunds that retry's
    /// cost, or adds its no-retry increment for a first attempt; Finagle ignores
    /// it. The count never passes the maximum.
    pub fn on_success(&mut self, now: Instant, attempt: AttemptKind) {
        self.advance(now);
        match &mut self.engine {
            Engine::Grpc { config, tokens } => {
                *tokens = tokens.saturating_add(config.ratio).min(config.max);
            }
            Engine::Aws { config, tokens } => {
                let refund = match attempt {
                    AttemptKind::First => config.no_retry_increment,
                    AttemptKind::Retry(kind) => config.cost(kind),
                };
                *tokens = tokens.saturating_add(refund).min(config.capacity);
            }
            Engine::Finagle { .. } => {}
        }
    }

    /// Asks, at `now`, to send a retry of `kind`. Call it before every retry and
    /// never before a first attempt; send the retry only if it is
    /// [`Withdrawal::Granted`]. On a refusal nothing changes and the call should
    /// end with its last failure.
    pub fn try_withdraw(&mut self, kind: RetryKind, now: Instant) -> Withdrawal {
        let now = self.advance(now);
        match &mut self.engine {
            Engine::Grpc { config, tokens } => {
                let left = Tokens::from_millis(*tokens);
                let needs = Requirement::Above(Tokens::from_millis(config.max / 2));
                if needs.is_met_by(left) {
                    Withdrawal::Granted {
                        cost: Tokens::ZERO,
                        left,
                    }
                } else {
                    Withdrawal::Refused { left, needs }
                }
            }
            Engine::Aws { config, tokens } => {
                let cost = config.cost(kind);
                match tokens.checked_sub(cost) {
                    Some(rest) => {
                        *tokens = rest;
                        Withdrawal::Granted {
                            cost: Tokens::from_millis(cost),
                            left: Tokens::from_millis(rest),
                        }
                    }
                    None => Withdrawal::Refused {
                        left: Tokens::from_millis(*tokens),
                        needs: Requirement::AtLeast(Tokens::from_millis(cost)),
                    },
                }
            }
            Engine::Finagle { config, window } => {
                let cost = Tokens::from_millis(config.withdrawal);
                let left = finagle_tokens(config, window, now);
                let needs = Requirement::AtLeast(cost);
                if needs.is_met_by(left) {
                    let amount = i64::try_from(config.withdrawal).unwrap_or(i64::MAX);
                    window.add(config.slot(now), amount.saturating_neg());
                    Withdrawal::Granted {
                        cost,
                        left: finagle_tokens(config, window, now),
                    }
                } else {
                    Withdrawal::Refused { left, needs }
                }
            }
        }
    }

    /// Applies one [`BudgetInput`] at `now`: the four notifications behind one
    /// entry point, for scripted drivers.
    pub fn apply(&mut self, input: BudgetInput, now: Instant) -> BudgetOutput {
        match input {
            BudgetInput::FirstAttempt => {
                self.on_first_attempt(now);
                BudgetOutput::Noted
            }
            BudgetInput::Failure => {
                self.on_failure(now);
                BudgetOutput::Noted
            }
            BudgetInput::Success(attempt) => {
                self.on_success(now, attempt);
                BudgetOutput::Noted
            }
            BudgetInput::Withdraw(kind) => BudgetOutput::Withdrawal(self.try_withdraw(kind, now)),
        }
    }

    fn advance(&mut self, now: Instant) -> Instant {
        self.last_now = self.last_now.max(now);
        self.last_now
    }
}

/// Finagle's balance at `now`, clamped into `[0, max]`.
fn finagle_tokens(config: &FinagleConfig, window: &Window, now: Instant) -> Tokens {
    let reserve = i64::try_from(config.reserve).unwrap_or(i64::MAX);
    let count = reserve.saturating_add(window.sum(config.slot(now)));
    let count = u64::try_from(count).unwrap_or(0).min(config.max());
    Tokens::from_millis(count)
}
