//! [`BudgetConfig`]: the three kinds of budget (gRPC retry throttling, the AWS
//! SDKs' retry quota, Finagle's retry budget), their builders and their checks.

use core::fmt;
use core::time::Duration;

use super::window::{SLICES_U64, SLICE_CAP};
use super::{AttemptKind, BudgetError, BudgetInput, RetryKind, Tokens, MILLI};
use crate::Instant;

/// `value` in thousandths, decimals past the third dropped (as gRPC does). A tiny
/// tolerance keeps binary fractions such as `0.57` (really `0.5699999...`) from
/// losing a thousandth. `None` for NaN, infinities, negatives and huge values.
fn to_thousandths(value: f64) -> Option<u64> {
    // NaN and the infinities fall outside the range too.
    if !(0.0..=1.0e12).contains(&value) {
        return None;
    }
    let scaled = value * 1000.0 + 1.0e-6;
    // In range and non-negative (checked above), so the cast only drops the fraction.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let millis = scaled as u64;
    Some(millis)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct GrpcConfig {
    /// Bucket size, thousandths.
    pub(super) max: u64,
    /// Refill per success, thousandths.
    pub(super) ratio: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct AwsConfig {
    /// All four in thousandths.
    pub(super) capacity: u64,
    pub(super) retry_cost: u64,
    pub(super) timeout_cost: u64,
    pub(super) no_retry_increment: u64,
}

impl AwsConfig {
    pub(super) const fn cost(&self, kind: RetryKind) -> u64 {
        match kind {
            RetryKind::Failure => self.retry_cost,
            RetryKind::Timeout => self.timeout_cost,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct FinagleConfig {
    pub(super) window: Duration,
    pub(super) min_retries_per_sec: u32,
    /// The fraction of requests that may be retried, in thousandths.
    pub(super) permille: u32,
    /// Derived: what a request deposits (thousandths of a token).
    pub(super) deposit: u64,
    /// Derived: what a retry costs.
    pub(super) withdrawal: u64,
    /// Derived: the standing reserve.
    pub(super) reserve: u64,
    /// Derived: the length of one slice, nanoseconds (at least 100 ms).
    slice_nanos: u64,
}

impl FinagleConfig {
    fn new(
        window: Duration,
        min_retries_per_sec: u32,
        permille: u32,
    ) -> Result<FinagleConfig, BudgetError> {
        check_window(window)?;
        if permille > 1_000 {
            return Err(BudgetError::PercentOutOfRange {
                value: f64::from(permille) / 1000.0,
            });
        }
        // Finagle: with no percentage a request deposits nothing and a retry costs
        // one unit; otherwise a request deposits 1000 units and a retry costs
        // 1000 / percent (rounded down).
        let (deposit, withdrawal) = match 1_000_000_u64.checked_div(u64::from(permille)) {
            None => (0, 1),
            Some(w) => (MILLI, w),
        };
        let secs = window.as_secs(); // whole seconds, as Finagle's `ttl.inSeconds`
        let reserve = u64::from(min_retries_per_sec)
            .saturating_mul(secs)
            .saturating_mul(withdrawal);
        let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        Ok(FinagleConfig {
            window,
            min_retries_per_sec,
            permille,
            deposit,
            withdrawal,
            reserve,
            slice_nanos: nanos.checked_div(SLICES_U64).unwrap_or(1).max(1),
        })
    }

    pub(super) fn slot(&self, now: Instant) -> u64 {
        now.as_nanos().checked_div(self.slice_nanos).unwrap_or(0)
    }

    /// The theoretical ceiling: the reserve plus every slice full.
    pub(super) fn max(&self) -> u64 {
        let cap = SLICE_CAP.unsigned_abs().saturating_mul(SLICES_U64);
        self.reserve.saturating_add(cap)
    }
}

/// Finagle's window must be within `[1 s, 60 s]`.
fn check_window(window: Duration) -> Result<(), BudgetError> {
    if window < Duration::from_secs(1) || window > Duration::from_secs(60) {
        return Err(BudgetError::WindowOutOfRange { window });
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Grpc(GrpcConfig),
    Aws(AwsConfig),
    Finagle(FinagleConfig),
}

/// A validated budget configuration; [`RetryBudget::new`](super::RetryBudget::new) starts a budget from it.
///
/// # gRPC retry throttling ([`BudgetConfig::grpc`])
/// The bucket holds `max_tokens` and starts full. Every failed attempt the client
/// would consider retrying takes one token; every success adds `token_ratio`
/// (kept to three decimals); the count stays in `[0, max_tokens]`. A retry is
/// allowed only while the count is strictly above `max_tokens / 2`. Retries are
/// not charged: only failures drain the bucket.
///
/// # AWS SDK "standard" retry quota ([`BudgetConfig::aws_standard`])
/// The bucket holds 500 tokens and starts full. A retry costs 5 tokens, or 10
/// after a timeout, and is refused when fewer tokens than that remain. A success
/// refunds what the retry that succeeded cost, or adds 1 token when the first
/// attempt succeeded; the count never exceeds the capacity.
///
/// # Finagle retry budget ([`BudgetConfig::finagle_default`])
/// Every request deposits credit and every retry withdraws from it, within a
/// sliding window (10 s by default). Over any window, retries may reach
/// `percent_can_retry` of the requests plus a floor of
/// `min_retries_per_sec × window` retries. In Finagle's own integer units, which
/// this budget keeps as thousandths of a token: a request deposits 1 token, a
/// retry costs `1 / percent` tokens (5 at 20%), and a standing reserve of
/// `min_retries_per_sec × window seconds × cost` is always added to the balance.
/// Both deposits and withdrawals age out of the window, so the reserve refills
/// as old retries expire. With 100 requests in a 10 s window at 20% and 10 per
/// second, `100 / 5 + 10 × 10 = 120` retries are allowed.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BudgetConfig, Tokens};
///
/// let grpc = BudgetConfig::grpc(10, 0.1)?;
/// assert_eq!(grpc.max_tokens(), Tokens::from_whole(10));
/// let aws = BudgetConfig::aws().retry_cost(7).build()?;
/// assert_eq!(aws.max_tokens(), Tokens::from_whole(500));
/// let finagle = BudgetConfig::finagle()
///     .window(Duration::from_secs(5))
///     .percent_can_retry(0.1)
///     .build()?;
/// assert_eq!(finagle.to_string(), "finagle(window 5s, min_retries_per_sec 10, percent_can_retry 0.100)");
/// # Ok::<(), retry_core::BudgetError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BudgetConfig {
    pub(super) kind: Kind,
}

impl BudgetConfig {
    /// gRPC retry throttling with `max_tokens` (1 to 1000) and `token_ratio`
    /// (0.001 to 1000; decimals past the third are dropped, as gRPC does).
    ///
    /// # Errors
    /// [`BudgetError::MaxTokensOutOfRange`] or [`BudgetError::TokenRatioOutOfRange`].
    pub fn grpc(max_tokens: u32, token_ratio: f64) -> Result<BudgetConfig, BudgetError> {
        let millis = to_thousandths(token_ratio)
            .and_then(|m| u32::try_from(m).ok())
            .ok_or(BudgetError::TokenRatioOutOfRange { value: token_ratio });
        BudgetConfig::grpc_checked(max_tokens, millis, token_ratio)
    }

    /// Like [`BudgetConfig::grpc`] with the ratio in thousandths (`100` is 0.1).
    ///
    /// # Errors
    /// As [`BudgetConfig::grpc`].
    pub fn grpc_millis(
        max_tokens: u32,
        token_ratio_millis: u32,
    ) -> Result<BudgetConfig, BudgetError> {
        let value = f64::from(token_ratio_millis) / 1000.0;
        BudgetConfig::grpc_checked(max_tokens, Ok(token_ratio_millis), value)
    }

    fn grpc_checked(
        max_tokens: u32,
        ratio_millis: Result<u32, BudgetError>,
        ratio: f64,
    ) -> Result<BudgetConfig, BudgetError> {
        if max_tokens == 0 || max_tokens > 1000 {
            return Err(BudgetError::MaxTokensOutOfRange { value: max_tokens });
        }
        let millis = ratio_millis?;
        if millis == 0 || millis > 1_000_000 {
            return Err(BudgetError::TokenRatioOutOfRange { value: ratio });
        }
        Ok(BudgetConfig {
            kind: Kind::Grpc(GrpcConfig {
                max: u64::from(max_tokens).saturating_mul(MILLI),
                ratio: u64::from(millis),
            }),
        })
    }

    /// The AWS SDKs' standard retry quota: 500 tokens, a retry costs 5, a
    /// timeout retry 10, a success without retry adds 1.
    #[must_use]
    pub const fn aws_standard() -> BudgetConfig {
        BudgetConfig {
            kind: Kind::Aws(AwsConfig {
                capacity: 500 * MILLI,
                retry_cost: 5 * MILLI,
                timeout_cost: 10 * MILLI,
                no_retry_increment: MILLI,
            }),
        }
    }

    /// A builder for an AWS-style quota, starting from [`BudgetConfig::aws_standard`].
    pub const fn aws() -> AwsQuotaBuilder {
        AwsQuotaBuilder {
            capacity: 500,
            retry_cost: 5,
            timeout_cost: 10,
            no_retry_increment: 1,
        }
    }

    /// Finagle's default budget: a 10 s window, 10 retries per second, 20% of
    /// requests.
    #[must_use]
    pub const fn finagle_default() -> BudgetConfig {
        // What `FinagleConfig::new(10 s, 10, 200)` derives (a test checks it).
        BudgetConfig {
            kind: Kind::Finagle(FinagleConfig {
                window: Duration::from_secs(10),
                min_retries_per_sec: 10,
                permille: 200,
                deposit: MILLI,
                withdrawal: 5 * MILLI,
                reserve: 10 * 10 * 5 * MILLI,
                slice_nanos: 1_000_000_000,
            }),
        }
    }

    /// A builder for a Finagle-style budget, starting from Finagle's defaults.
    pub const fn finagle() -> FinagleBudgetBuilder {
        FinagleBudgetBuilder {
            window: Duration::from_secs(10),
            min_retries_per_sec: 10,
            permille: Ok(200),
        }
    }

    /// The configuration's name: `grpc`, `aws` or `finagle`.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self.kind {
            Kind::Grpc(_) => "grpc",
            Kind::Aws(_) => "aws",
            Kind::Finagle(_) => "finagle",
        }
    }

    /// The bucket's ceiling. For Finagle, which has none, the theoretical bound
    /// where this budget saturates: the reserve plus 2^32 - 1 requests in every
    /// slice of the window.
    #[must_use]
    pub fn max_tokens(&self) -> Tokens {
        Tokens::from_millis(match self.kind {
            Kind::Grpc(g) => g.max,
            Kind::Aws(a) => a.capacity,
            Kind::Finagle(fc) => fc.max(),
        })
    }

    /// The tokens a new budget starts with: full for gRPC and AWS, the reserve
    /// for Finagle.
    #[must_use]
    pub const fn initial_tokens(&self) -> Tokens {
        Tokens::from_millis(match self.kind {
            Kind::Grpc(g) => g.max,
            Kind::Aws(a) => a.capacity,
            Kind::Finagle(fc) => fc.reserve,
        })
    }
}

impl fmt::Display for BudgetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Grpc(g) => write!(
                f,
                "grpc(max_tokens {}, token_ratio {})",
                g.max / MILLI,
                Tokens::from_millis(g.ratio)
            ),
            Kind::Aws(a) => write!(
                f,
                "aws(capacity {}, retry_cost {}, timeout_cost {}, no_retry_increment {})",
                a.capacity / MILLI,
                a.retry_cost / MILLI,
                a.timeout_cost / MILLI,
                a.no_retry_increment / MILLI
            ),
            Kind::Finagle(fc) => write!(
                f,
                "finagle(window {:?}, min_retries_per_sec {}, percent_can_retry {})",
                fc.window,
                fc.min_retries_per_sec,
                Tokens::from_millis(u64::from(fc.permille))
            ),
        }
    }
}

/// Builds an AWS-style quota; whole tokens throughout. Start with
/// [`BudgetConfig::aws`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub struct AwsQuotaBuilder {
    capacity: u32,
    retry_cost: u32,
    timeout_cost: u32,
    no_retry_increment: u32,
}

impl AwsQuotaBuilder {
    /// The bucket size and starting count (default 500).
    pub const fn capacity(mut self, tokens: u32) -> Self {
        self.capacity = tokens;
        self
    }
    /// What a retry after an ordinary failure costs (default 5).
    pub const fn retry_cost(mut self, tokens: u32) -> Self {
        self.retry_cost = tokens;
        self
    }
    /// What a retry after a timeout costs (default 10).
    pub const fn timeout_cost(mut self, tokens: u32) -> Self {
        self.timeout_cost = tokens;
        self
    }
    /// What a success without any retry adds back (default 1).
    pub const fn no_retry_increment(mut self, tokens: u32) -> Self {
        self.no_retry_increment = tokens;
        self
    }

    /// Validates and returns the configuration. Costs above the capacity are
    /// allowed (such retries are always refused); zero costs make retries free.
    ///
    /// # Errors
    /// [`BudgetError::ZeroCapacity`].
    pub fn build(self) -> Result<BudgetConfig, BudgetError> {
        if self.capacity == 0 {
            return Err(BudgetError::ZeroCapacity);
        }
        let m = |t: u32| u64::from(t).saturating_mul(MILLI);
        Ok(BudgetConfig {
            kind: Kind::Aws(AwsConfig {
                capacity: m(self.capacity),
                retry_cost: m(self.retry_cost),
                timeout_cost: m(self.timeout_cost),
                no_retry_increment: m(self.no_retry_increment),
            }),
        })
    }
}

/// Builds a Finagle-style budget. Start with [`BudgetConfig::finagle`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use]
pub struct FinagleBudgetBuilder {
    window: Duration,
    min_retries_per_sec: u32,
    /// Thousandths, or the rejected fraction.
    permille: Result<u32, f64>,
}

impl FinagleBudgetBuilder {
    /// How long deposits and withdrawals count (Finagle's `ttl`; 1 s to 60 s,
    /// default 10 s). The reserve uses the window's whole seconds.
    pub const fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }
    /// The floor: retries per second allowed however few requests there are
    /// (default 10).
    pub const fn min_retries_per_sec(mut self, n: u32) -> Self {
        self.min_retries_per_sec = n;
        self
    }
    /// The fraction of requests that may be retried on top of the floor, in
    /// `[0, 1]` (default 0.2, i.e. 20%); kept to three decimals.
    pub fn percent_can_retry(mut self, fraction: f64) -> Self {
        self.permille = to_thousandths(fraction)
            .and_then(|m| u32::try_from(m).ok())
            .ok_or(fraction);
        self
    }
    /// [`FinagleBudgetBuilder::percent_can_retry`] in thousandths (`200` is 20%).
    pub const fn percent_can_retry_permille(mut self, permille: u32) -> Self {
        self.permille = Ok(permille);
        self
    }

    /// Validates and returns the configuration.
    ///
    /// # Errors
    /// [`BudgetError::WindowOutOfRange`] or [`BudgetError::PercentOutOfRange`].
    pub fn build(self) -> Result<BudgetConfig, BudgetError> {
        let permille = self
            .permille
            .map_err(|value| BudgetError::PercentOutOfRange { value });
        check_window(self.window)?;
        let config = FinagleConfig::new(self.window, self.min_retries_per_sec, permille?)?;
        Ok(BudgetConfig {
            kind: Kind::Finagle(config),
        })
    }
}

/// The integer parameters of a [`BudgetConfig`], every amount in thousandths of
/// a token: what a budget kept outside this process (in a shared store, say)
/// needs to do exactly the arithmetic of [`RetryBudget`](super::RetryBudget).
///
/// ```
/// use retry_core::{BudgetConfig, BudgetParameters};
///
/// let p = BudgetConfig::aws_standard().parameters();
/// assert_eq!(
///     p,
///     BudgetParameters::Aws { capacity: 500_000, retry_cost: 5_000, timeout_cost: 10_000, no_retry_increment: 1_000 }
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BudgetParameters {
    /// gRPC throttling: the bucket starts at `max`; a retryable failure takes
    /// 1,000 (saturating at zero); a success adds `ratio` (capped at `max`); a
    /// retry is granted, free, while the bucket holds more than `max / 2`
    /// (integer division).
    Grpc {
        /// The bucket size.
        max: u64,
        /// What a success adds.
        ratio: u64,
    },
    /// The AWS quota: the bucket starts at `capacity`; a retry takes its cost
    /// (`timeout_cost` after a timeout) if at least that much is left, and is
    /// refused otherwise; a success refunds its retry's cost, or
    /// `no_retry_increment` for a first attempt (capped at `capacity`).
    Aws {
        /// The bucket size and starting count.
        capacity: u64,
        /// What a retry after an ordinary failure costs.
        retry_cost: u64,
        /// What a retry after a timeout costs.
        timeout_cost: u64,
        /// What a success of a first attempt adds.
        no_retry_increment: u64,
    },
    /// Finagle: ten slices of `slice_nanos` each; slot `s` of time `t` is
    /// `t / slice_nanos` (nanoseconds since the budget's origin). A first
    /// attempt adds `deposit` to its slot's slice, a granted retry subtracts
    /// `withdrawal`; a slice is reset when a new slot lands on it (slot modulo
    /// ten), and holds at most `slice_cap`. The balance at slot `s` is
    /// `reserve` plus the slices whose slot is in `(s - 10, s]`, clamped into
    /// `[0, max]`; a retry is granted when the balance is at least `withdrawal`.
    Finagle {
        /// What a request deposits.
        deposit: u64,
        /// What a retry costs.
        withdrawal: u64,
        /// The standing reserve.
        reserve: u64,
        /// The most one slice holds.
        slice_cap: u64,
        /// The ceiling of the balance.
        max: u64,
        /// The length of one slice, in nanoseconds (at least 100 ms).
        slice_nanos: u64,
    },
}

impl BudgetParameters {
    /// Whether `input` can change a budget with these parameters: a budget kept
    /// elsewhere (in a store shared by a fleet) need not send it when it
    /// cannot. A withdrawal always can (and is answered). A first attempt
    /// changes only Finagle's window (if it deposits), a failure only gRPC's
    /// bucket, a success gRPC's and AWS's (by a non-zero amount). Time alone
    /// changes nothing: Finagle's window moves with the next input that comes.
    ///
    /// ```
    /// use retry_core::{AttemptKind, BudgetConfig, BudgetInput, RetryKind};
    ///
    /// let aws = BudgetConfig::aws_standard().parameters();
    /// assert!(!aws.heeds(BudgetInput::FirstAttempt));
    /// assert!(!aws.heeds(BudgetInput::Failure));
    /// assert!(aws.heeds(BudgetInput::Success(AttemptKind::First)));
    /// assert!(aws.heeds(BudgetInput::Withdraw(RetryKind::Failure)));
    /// let finagle = BudgetConfig::finagle_default().parameters();
    /// assert!(finagle.heeds(BudgetInput::FirstAttempt));
    /// assert!(!finagle.heeds(BudgetInput::Success(AttemptKind::First)));
    /// ```
    #[must_use]
    pub const fn heeds(&self, input: BudgetInput) -> bool {
        match (self, input) {
            (_, BudgetInput::Withdraw(_)) => true,
            (BudgetParameters::Grpc { .. }, BudgetInput::Failure) => true,
            (BudgetParameters::Grpc { ratio, .. }, BudgetInput::Success(_)) => *ratio > 0,
            (
                BudgetParameters::Aws {
                    no_retry_increment, ..
                },
                BudgetInput::Success(AttemptKind::First),
            ) => *no_retry_increment > 0,
            (
                BudgetParameters::Aws {
                    retry_cost,
                    timeout_cost,
                    ..
                },
                BudgetInput::Success(AttemptKind::Retry(kind)),
            ) => match kind {
                RetryKind::Failure => *retry_cost > 0,
                RetryKind::Timeout => *timeout_cost > 0,
            },
            (BudgetParameters::Finagle { deposit, .. }, BudgetInput::FirstAttempt) => *deposit > 0,
            _ => false,
        }
    }
}

impl BudgetConfig {
    /// The configuration's integer parameters (see [`BudgetParameters`]).
    #[must_use]
    pub fn parameters(&self) -> BudgetParameters {
        match self.kind {
            Kind::Grpc(g) => BudgetParameters::Grpc {
                max: g.max,
                ratio: g.ratio,
            },
            Kind::Aws(a) => BudgetParameters::Aws {
                capacity: a.capacity,
                retry_cost: a.retry_cost,
                timeout_cost: a.timeout_cost,
                no_retry_increment: a.no_retry_increment,
            },
            Kind::Finagle(fc) => BudgetParameters::Finagle {
                deposit: fc.deposit,
                withdrawal: fc.withdrawal,
                reserve: fc.reserve,
                slice_cap: SLICE_CAP.unsigned_abs(),
                max: fc.max(),
                slice_nanos: fc.slice_nanos,
            },
        }
    }
}
