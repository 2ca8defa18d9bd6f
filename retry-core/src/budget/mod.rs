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

use core::fmt;
use core::time::Duration;

use crate::Instant;

/// Thousandths in one token.
const MILLI: u64 = 1_000;
/// How many slices Finagle's window is cut into.
const SLICES: usize = 10;
/// [`SLICES`] as the type slot numbers use.
const SLICES_U64: u64 = 10;
/// The most a single Finagle slice can hold: deposits of 2^32 - 1 requests.
const SLICE_CAP: i64 = 4_294_967_295 * 1_000;

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
// Errors
// ---------------------------------------------------------------------------

/// An invalid budget configuration. Every variant names its field
/// ([`BudgetError::field`]) and has a stable dotted code ([`BudgetError::code`]).
///
/// ```
/// use retry_core::{BudgetConfig, BudgetError};
/// let err = BudgetConfig::grpc(0, 0.1).unwrap_err();
/// assert_eq!(err, BudgetError::MaxTokensOutOfRange { value: 0 });
/// assert_eq!(err.field(), "max_tokens");
/// assert_eq!(err.code(), "budget.max_tokens_out_of_range");
/// assert_eq!(err.to_string(), "max_tokens: must be in 1..=1000, got 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum BudgetError {
    /// gRPC's `max_tokens` was zero or above 1000.
    MaxTokensOutOfRange {
        /// The rejected value.
        value: u32,
    },
    /// gRPC's `token_ratio` was not a number in `[0.001, 1000]` (NaN, infinite,
    /// negative, zero once cut to three decimals, or too large).
    TokenRatioOutOfRange {
        /// The rejected value.
        value: f64,
    },
    /// The AWS quota's `capacity` was zero.
    ZeroCapacity,
    /// Finagle's `percent_can_retry` was not a fraction in `[0, 1]`.
    PercentOutOfRange {
        /// The rejected value (a fraction: 0.2 is 20%).
        value: f64,
    },
    /// Finagle's `window` was shorter than one second (zero included) or longer
    /// than sixty.
    WindowOutOfRange {
        /// The rejected window.
        window: Duration,
    },
}

impl BudgetError {
    /// The name of the field the error is about, as written in configs.
    #[must_use]
    pub const fn field(&self) -> &'static str {
        match self {
            BudgetError::MaxTokensOutOfRange { .. } => "max_tokens",
            BudgetError::TokenRatioOutOfRange { .. } => "token_ratio",
            BudgetError::ZeroCapacity => "capacity",
            BudgetError::PercentOutOfRange { .. } => "percent_can_retry",
            BudgetError::WindowOutOfRange { .. } => "window",
        }
    }

    /// A stable dotted code for logs and programs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            BudgetError::MaxTokensOutOfRange { .. } => "budget.max_tokens_out_of_range",
            BudgetError::TokenRatioOutOfRange { .. } => "budget.token_ratio_out_of_range",
            BudgetError::ZeroCapacity => "budget.zero_capacity",
            BudgetError::PercentOutOfRange { .. } => "budget.percent_out_of_range",
            BudgetError::WindowOutOfRange { .. } => "budget.window_out_of_range",
        }
    }
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = self.field();
        match self {
            BudgetError::MaxTokensOutOfRange { value } => {
                write!(f, "{field}: must be in 1..=1000, got {value}")
            }
            BudgetError::TokenRatioOutOfRange { value } => write!(
                f,
                "{field}: must be in [0.001, 1000] (decimals past the third are dropped), got {value}"
            ),
            BudgetError::ZeroCapacity => write!(f, "{field}: must be at least 1 token"),
            BudgetError::PercentOutOfRange { value } => write!(
                f,
                "{field}: must be a fraction in [0, 1] (0.2 means 20%), got {value}"
            ),
            BudgetError::WindowOutOfRange { window } => {
                write!(f, "{field}: must be between 1s and 60s, got {window:?}")
            }
        }
    }
}

impl core::error::Error for BudgetError {}

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

// ---------------------------------------------------------------------------
// Configurations
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct GrpcConfig {
    /// Bucket size, thousandths.
    max: u64,
    /// Refill per success, thousandths.
    ratio: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct AwsConfig {
    /// All four in thousandths.
    capacity: u64,
    retry_cost: u64,
    timeout_cost: u64,
    no_retry_increment: u64,
}

impl AwsConfig {
    const fn cost(&self, kind: RetryKind) -> u64 {
        match kind {
            RetryKind::Failure => self.retry_cost,
            RetryKind::Timeout => self.timeout_cost,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FinagleConfig {
    window: Duration,
    min_retries_per_sec: u32,
    /// The fraction of requests that may be retried, in thousandths.
    permille: u32,
    /// Derived: what a request deposits (thousandths of a token).
    deposit: u64,
    /// Derived: what a retry costs.
    withdrawal: u64,
    /// Derived: the standing reserve.
    reserve: u64,
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

    fn slot(&self, now: Instant) -> u64 {
        now.as_nanos().checked_div(self.slice_nanos).unwrap_or(0)
    }

    /// The theoretical ceiling: the reserve plus every slice full.
    fn max(&self) -> u64 {
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
enum Kind {
    Grpc(GrpcConfig),
    Aws(AwsConfig),
    Finagle(FinagleConfig),
}

/// A validated budget configuration; [`RetryBudget::new`] starts a budget from it.
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
    kind: Kind,
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

// ---------------------------------------------------------------------------
// The budget
// ---------------------------------------------------------------------------

/// Finagle's sliding window: ten slices, each tagged with the absolute slot
/// number it holds. Slot `s` covers `[s, s + 1) × slice`; a slice counts while
/// the current slot is less than ten past it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Window {
    slot: [u64; SLICES],
    net: [i64; SLICES],
}

impl Window {
    const EMPTY: Window = Window {
        slot: [0; SLICES],
        net: [0; SLICES],
    };

    /// Adds `amount` (a deposit or, negative, a withdrawal) to slot `at`.
    fn add(&mut self, at: u64, amount: i64) {
        let index = usize::try_from(at.checked_rem(SLICES_U64).unwrap_or(0)).unwrap_or(0);
        if let (Some(slot), Some(net)) = (self.slot.get_mut(index), self.net.get_mut(index)) {
            if *slot != at {
                *slot = at;
                *net = 0;
            }
            *net = net.saturating_add(amount).min(SLICE_CAP);
        }
    }

    /// The net amount of the slices still in the window at slot `now`.
    fn sum(&self, now: u64) -> i64 {
        self.slot
            .iter()
            .zip(self.net.iter())
            .filter(|(slot, _)| **slot <= now && now.saturating_sub(**slot) < SLICES_U64)
            .fold(0_i64, |acc, (_, net)| acc.saturating_add(*net))
    }
}

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

// ---------------------------------------------------------------------------
// Scripted driver
// ---------------------------------------------------------------------------

/// One notification, as data (see [`RetryBudget::apply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetInput {
    /// [`RetryBudget::on_first_attempt`].
    FirstAttempt,
    /// [`RetryBudget::on_failure`].
    Failure,
    /// [`RetryBudget::on_success`].
    Success(AttemptKind),
    /// [`RetryBudget::try_withdraw`].
    Withdraw(RetryKind),
}

impl fmt::Display for BudgetInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetInput::FirstAttempt => f.write_str("first attempt"),
            BudgetInput::Failure => f.write_str("failure"),
            BudgetInput::Success(AttemptKind::First) => f.write_str("success (first)"),
            BudgetInput::Success(AttemptKind::Retry(kind)) => write!(f, "success ({kind})"),
            BudgetInput::Withdraw(kind) => write!(f, "withdraw ({kind})"),
        }
    }
}

/// What [`RetryBudget::apply`] answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetOutput {
    /// A notification was taken in; there is no answer.
    Noted,
    /// The answer to a withdrawal.
    Withdrawal(Withdrawal),
}

impl fmt::Display for BudgetOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetOutput::Noted => f.write_str("-"),
            BudgetOutput::Withdrawal(w) => fmt::Display::fmt(w, f),
        }
    }
}

/// A scripted notification: `input` at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BudgetEvent {
    /// When.
    pub at: Instant,
    /// What.
    pub input: BudgetInput,
}

impl BudgetEvent {
    /// `input` at `at`.
    #[must_use]
    pub const fn new(at: Instant, input: BudgetInput) -> BudgetEvent {
        BudgetEvent { at, input }
    }
}

/// One row of a [`BudgetTimeline`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BudgetStep {
    /// When the input arrived.
    pub at: Instant,
    /// The input.
    pub input: BudgetInput,
    /// The budget's answer.
    pub output: BudgetOutput,
    /// The tokens afterwards.
    pub tokens: Tokens,
}

/// Replays a script of [`BudgetEvent`]s against a budget: an iterator of
/// [`BudgetStep`]s, and a table of them through [`fmt::Display`] (written without
/// allocating; displaying does not advance the iterator).
///
/// ```
/// use retry_core::*;
///
/// let t = Instant::from_millis(250);
/// let script = [
///     BudgetEvent::new(t, BudgetInput::FirstAttempt),
///     BudgetEvent::new(t, BudgetInput::Failure),
///     BudgetEvent::new(t, BudgetInput::Withdraw(RetryKind::Timeout)),
/// ];
/// let timeline = BudgetTimeline::new(RetryBudget::new(BudgetConfig::aws_standard()), &script);
/// let last = timeline.clone().last().unwrap();
/// assert_eq!(last.tokens, Tokens::from_whole(490));
/// assert!(timeline.to_string().contains("granted, cost 10.000"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetTimeline<'s> {
    budget: RetryBudget,
    script: &'s [BudgetEvent],
}

impl<'s> BudgetTimeline<'s> {
    /// A replay of `script` starting from `budget`.
    #[must_use]
    pub const fn new(budget: RetryBudget, script: &'s [BudgetEvent]) -> BudgetTimeline<'s> {
        BudgetTimeline { budget, script }
    }

    /// The budget as it stands.
    #[must_use]
    pub const fn budget(&self) -> &RetryBudget {
        &self.budget
    }
}

impl Iterator for BudgetTimeline<'_> {
    type Item = BudgetStep;

    fn next(&mut self) -> Option<BudgetStep> {
        let (event, rest) = self.script.split_first()?;
        self.script = rest;
        let output = self.budget.apply(event.input, event.at);
        Some(BudgetStep {
            at: event.at,
            input: event.input,
            output,
            tokens: self.budget.tokens(),
        })
    }
}

impl fmt::Display for BudgetTimeline<'_> {
    /// A header naming the configuration, then one aligned row per step:
    /// time, input, answer, tokens after.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.budget.config())?;
        writeln!(
            f,
            "{:>9}  {:<24}  {:<28}  {:>9}",
            "at", "input", "output", "tokens"
        )?;
        for step in self.clone() {
            let input = Cell::render(&step.input)?;
            let output = Cell::render(&step.output)?;
            writeln!(
                f,
                "{:>9}  {:<24}  {:<28}  {:>9}",
                step.at,
                input.as_str(),
                output.as_str(),
                Cell::render(&step.tokens)?.as_str()
            )?;
        }
        Ok(())
    }
}

/// A fixed-size text cell, so that padding applies to a whole rendered value.
struct Cell {
    bytes: [u8; 64],
    len: usize,
}

impl Cell {
    fn render(value: &dyn fmt::Display) -> Result<Cell, fmt::Error> {
        let mut cell = Cell {
            bytes: [0; 64],
            len: 0,
        };
        fmt::write(&mut cell, format_args!("{value}"))?;
        Ok(cell)
    }

    fn as_str(&self) -> &str {
        self.bytes
            .get(..self.len)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or("")
    }
}

impl fmt::Write for Cell {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}
