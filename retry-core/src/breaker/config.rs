//! [`BreakerConfig`]: the trip rules, the window they are judged over, how long
//! the breaker stays open, and how it probes. Built and validated by
//! [`BreakerConfigBuilder`].

use core::fmt;
use core::num::NonZeroU64;
use core::time::Duration;

use super::BreakerError;
use crate::retry::jitter_draw_nanos;
use crate::retry::nanos::{from_nanos, sat_nanos};
use crate::{Backoff, DisplayDuration as D, Jitter};

/// A rate in basis points (1/100 of a percent): `Rate::from_percent(50)` is 5 000.
///
/// Rates are compared with integers only: `count` out of `calls` reaches the rate
/// when `count × 10 000 >= basis_points × calls`, exactly, with no rounding.
///
/// ```
/// use retry_core::Rate;
/// let half = Rate::from_percent(50);
/// assert_eq!(half.basis_points(), 5_000);
/// assert!(half.is_reached(5, 10));
/// assert!(!half.is_reached(4, 10));
/// assert_eq!(Rate::from_basis_points(3_333).to_string(), "33.33%");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u16);

impl Rate {
    /// One hundred percent.
    pub const FULL: Rate = Rate(10_000);

    /// `percent` percent (saturating; the builder rejects anything above 100).
    #[must_use]
    pub const fn from_percent(percent: u16) -> Rate {
        Rate(percent.saturating_mul(100))
    }

    /// `basis_points` hundredths of a percent.
    #[must_use]
    pub const fn from_basis_points(basis_points: u16) -> Rate {
        Rate(basis_points)
    }

    /// The rate in basis points.
    #[must_use]
    pub const fn basis_points(self) -> u16 {
        self.0
    }

    /// Whether `count` out of `calls` is at or above the rate. Zero calls never
    /// reach a rate.
    #[must_use]
    pub const fn is_reached(self, count: u32, calls: u32) -> bool {
        if calls == 0 {
            return false;
        }
        // u32 × 10 000 and u16 × u32 both fit in u64, so neither product wraps.
        let lhs = (count as u64).saturating_mul(10_000);
        let rhs = (self.0 as u64).saturating_mul(calls as u64);
        lhs >= rhs
    }

    fn is_valid(self) -> bool {
        self.0 > 0 && self.0 <= Rate::FULL.0
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}%", self.0 / 100, self.0 % 100)
    }
}

/// The sliding window that failure and slow-call rates are judged over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Window {
    /// The last `calls` recorded calls. Costs two bits per call of the breaker's
    /// `WORDS` capacity.
    Count {
        /// How many calls the window holds.
        calls: u16,
    },
    /// The last `length` of time, in `buckets` fixed buckets of `length / buckets`
    /// (rounded down) aligned to the origin of time. A call counts while its
    /// bucket is one of the newest `buckets` (the current one included), so calls
    /// leave the window a whole bucket at a time.
    Time {
        /// How much time the window covers.
        length: Duration,
        /// How many buckets it is split into.
        buckets: u16,
    },
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Window::Count { calls } => write!(f, "last {calls} calls"),
            Window::Time { length, buckets } => {
                write!(f, "last {} in {buckets} buckets", D(length))
            }
        }
    }
}

/// How a half-open breaker's probes decide between closing and re-opening.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HalfOpenVerdict {
    /// At most `half_open_permits` probes at a time; any failed probe (or slow one,
    /// when the slow-call rule is on) re-opens the breaker, and
    /// `success_threshold` good probes in a row close it.
    #[default]
    Consecutive,
    /// `probes` probes in all (at most `half_open_permits` of them at a time; a
    /// released probe gives its place back); once every one of them has reported,
    /// their failure rate and slow-call rate are held to the closed state's
    /// thresholds: either rate at or above its threshold re-opens the breaker,
    /// otherwise it closes. Needs a failure-rate or slow-call-rate rule.
    Rates {
        /// How many probes are judged together.
        probes: u32,
    },
}

impl fmt::Display for HalfOpenVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HalfOpenVerdict::Consecutive => f.write_str("consecutive"),
            HalfOpenVerdict::Rates { probes } => write!(f, "rates over {probes} probe(s)"),
        }
    }
}

/// What a half-open breaker does when its maximum wait
/// ([`BreakerConfigBuilder::max_half_open_wait`]) passes before its probes have
/// decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HalfOpenTimeout {
    /// Open again, for the next open duration of the curve.
    #[default]
    Reopen,
    /// Close, with a clean window.
    Close,
}

impl fmt::Display for HalfOpenTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HalfOpenTimeout::Reopen => "re-open",
            HalfOpenTimeout::Close => "close",
        })
    }
}

/// A validated breaker config. Build one with [`BreakerConfig::builder`], or
/// [`BreakerConfig::basic`] for the plain consecutive-failure rule.
///
/// Defaults: trip at 5 consecutive failures, no rate rules and no window, rates
/// judged from 10 calls on, calls slower than 60 s count as slow, open for a
/// constant 30 s (capped at 5 min, no jitter, seed 0), 1 half-open probe at a
/// time, 1 successful probe closes ([`HalfOpenVerdict::Consecutive`]), no
/// maximum wait in half-open (re-open when one is set and passes).
///
/// # `minimum_calls` and a count window
/// A `minimum_calls` above a count window's size is refused
/// ([`BreakerError::MinimumAboveWindow`]) rather than cut down to the window:
/// the window could never hold that many calls, so the config asks for a rate
/// rule that could never fire, and saying so beats quietly judging from fewer
/// calls than written. Set `minimum_calls` to the window's size to judge once
/// the window is full. (A time window holds any number of calls: any minimum
/// goes.)
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Backoff, BreakerConfig, Rate};
///
/// let config = BreakerConfig::builder()
///     .failure_threshold(None)
///     .failure_rate(Rate::from_percent(50))
///     .count_window(100)
///     .minimum_calls(20)
///     .open_backoff(Backoff::exponential(Duration::from_secs(5), 2.0))
///     .max_open_duration(Duration::from_secs(60))
///     .half_open_permits(3)
///     .success_threshold(3)
///     .build()?;
/// assert_eq!(config.open_duration(1), Duration::from_secs(5));
/// assert_eq!(config.open_duration(3), Duration::from_secs(20));
/// assert_eq!(config.open_duration(9), Duration::from_secs(60));
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BreakerConfig {
    // The fields in this order (and no other: `repr(C)`) take the same 152
    // bytes as in any order, and keep the fields a default config leaves at
    // zero apart, in runs short enough that building a config is a few
    // stores, not a call to clear memory, on targets built for size.
    /// The consecutive-failure threshold, 0 when that rule is off (a zero
    /// threshold is refused by the builder), so the config takes 152 bytes.
    failure_threshold: u32,
    failure_rate: Option<Rate>,
    slow_call_duration: Duration,
    slow_call_rate: Option<Rate>,
    minimum_calls: u32,
    seed: u64,
    max_open_duration: Duration,
    /// The half-open maximum wait in nanoseconds, if any (a plain count for
    /// the same reason; waits past 584 years saturate).
    max_half_open_wait: Option<NonZeroU64>,
    window: Option<Window>,
    open_backoff: Backoff,
    open_jitter: Jitter,
    half_open_permits: u32,
    /// The rates verdict's number of probes; 0 for the consecutive verdict
    /// (kept as a plain count so that the config stays small).
    rates_over_probes: u32,
    success_threshold: u32,
    half_open_timeout: HalfOpenTimeout,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: 5,
            failure_rate: None,
            slow_call_rate: None,
            slow_call_duration: Duration::from_secs(60),
            window: None,
            minimum_calls: 10,
            open_backoff: Backoff::constant(Duration::from_secs(30)),
            max_open_duration: Duration::from_secs(300),
            open_jitter: Jitter::None,
            seed: 0,
            half_open_permits: 1,
            success_threshold: 1,
            rates_over_probes: 0,
            max_half_open_wait: None,
            half_open_timeout: HalfOpenTimeout::Reopen,
        }
    }
}

/// The three settings of [`BreakerConfig::basic`], each by its name, so that a
/// call reads as what it sets (`BreakerConfig::basic(3, 10 s, 1)` would leave
/// the reader to guess which number is which, and that the duration is how long
/// the breaker stays open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BasicRule {
    /// Consecutive failures that open a closed breaker (at least 1).
    pub failure_threshold: u32,
    /// How long the breaker stays open before it lets probes through (more
    /// than zero); the same length every time.
    pub open_duration: Duration,
    /// Consecutive successful probes that close a half-open breaker (at least 1).
    pub success_threshold: u32,
}

impl BreakerConfig {
    /// A builder starting from the defaults.
    pub fn builder() -> BreakerConfigBuilder {
        BreakerConfigBuilder {
            config: BreakerConfig::default(),
            zero_threshold: false,
            zero_probes: false,
            zero_wait: false,
        }
    }

    /// A builder starting from this config, to derive a variant of it.
    pub fn to_builder(&self) -> BreakerConfigBuilder {
        BreakerConfigBuilder {
            config: *self,
            zero_threshold: false,
            zero_probes: false,
            zero_wait: false,
        }
    }

    /// The TypeScript package's rule, exactly, with its three settings named
    /// by a [`BasicRule`]: closed → open at `failure_threshold` consecutive
    /// failures; open → half-open once `open_duration` has passed; half-open →
    /// closed after `success_threshold` consecutive successes; half-open → open
    /// on any failure. The open duration never grows, there is no window, and
    /// half-open lets every request through (that package does not limit
    /// probes; narrow it with [`BreakerConfigBuilder::half_open_permits`] if
    /// wanted).
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BasicRule, BreakerConfig};
    /// let config = BreakerConfig::basic(BasicRule {
    ///     failure_threshold: 3,
    ///     open_duration: Duration::from_secs(10),
    ///     success_threshold: 2,
    /// })?;
    /// assert_eq!(config.failure_threshold(), Some(3));
    /// assert_eq!(config.open_duration(7), Duration::from_secs(10));
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    ///
    /// # Errors
    /// [`BreakerError::Zero`] for a zero threshold, [`BreakerError::ZeroDuration`]
    /// for a zero open duration.
    pub fn basic(rule: BasicRule) -> Result<BreakerConfig, BreakerError> {
        let BasicRule {
            failure_threshold,
            open_duration: timeout,
            success_threshold,
        } = rule;
        if timeout.is_zero() {
            return Err(BreakerError::ZeroDuration {
                field: "open_duration",
            });
        }
        // What the builder would make of these settings, and refuse, built
        // in place.
        if failure_threshold == 0 {
            return Err(BreakerError::Zero {
                field: "failure_threshold",
            });
        }
        // Of `validate`'s checks, the two these settings can fail, in its
        // order (the rest hold for any arguments; the test below holds this
        // equal to the builder).
        let open_backoff = Backoff::constant(timeout);
        open_backoff
            .validate()
            .map_err(|source| BreakerError::InvalidCurve {
                field: "open_backoff",
                source,
            })?;
        if success_threshold == 0 {
            return Err(BreakerError::Zero {
                field: "success_threshold",
            });
        }
        Ok(BreakerConfig {
            failure_threshold,
            open_backoff,
            max_open_duration: timeout,
            half_open_permits: u32::MAX,
            success_threshold,
            ..BreakerConfig::default()
        })
    }

    /// A failure-rate rule over a count window, judged only once the window is
    /// full: a closed breaker opens when at least `rate` of the last `calls`
    /// calls failed. There is no consecutive-failures rule; every other setting
    /// is the builder's default. With 50 % over 100 calls this is the rule
    /// `recloser` applies by default.
    ///
    /// ```
    /// use retry_core::{BreakerConfig, Rate};
    /// let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100)?;
    /// assert_eq!(config.failure_rate(), Some(Rate::from_percent(50)));
    /// assert_eq!(config.minimum_calls(), 100);
    /// assert_eq!(config.failure_threshold(), None);
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    ///
    /// # Errors
    /// What [`BreakerConfigBuilder::build`] refuses: a zero `calls`, say.
    pub fn failure_rate_over(rate: Rate, calls: u16) -> Result<BreakerConfig, BreakerError> {
        BreakerConfig::builder()
            .failure_threshold(None)
            .failure_rate(rate)
            .count_window(calls)
            .minimum_calls(u32::from(calls))
            .build()
    }

    /// Consecutive failures that trip a closed breaker, if that rule is on.
    #[must_use]
    pub const fn failure_threshold(&self) -> Option<u32> {
        match self.failure_threshold {
            0 => None,
            n => Some(n),
        }
    }
    /// The failure rate that trips a closed breaker, if that rule is on.
    #[must_use]
    pub const fn failure_rate(&self) -> Option<Rate> {
        self.failure_rate
    }
    /// The slow-call rate that trips a closed breaker, if that rule is on.
    #[must_use]
    pub const fn slow_call_rate(&self) -> Option<Rate> {
        self.slow_call_rate
    }
    /// A call that takes longer than this is slow (successful or not).
    #[must_use]
    pub const fn slow_call_duration(&self) -> Duration {
        self.slow_call_duration
    }
    /// The window rates are judged over, if any.
    #[must_use]
    pub const fn window(&self) -> Option<Window> {
        self.window
    }
    /// Rates are judged only once the window holds at least this many calls.
    #[must_use]
    pub const fn minimum_calls(&self) -> u32 {
        self.minimum_calls
    }
    /// The curve of open durations over consecutive re-opens.
    #[must_use]
    pub const fn open_backoff(&self) -> Backoff {
        self.open_backoff
    }
    /// The cap on every open duration (before jitter).
    #[must_use]
    pub const fn max_open_duration(&self) -> Duration {
        self.max_open_duration
    }
    /// The jitter applied to each open duration.
    #[must_use]
    pub const fn open_jitter(&self) -> Jitter {
        self.open_jitter
    }
    /// The seed the jitter draws are keyed on.
    #[must_use]
    pub const fn seed(&self) -> u64 {
        self.seed
    }
    /// How many half-open probes may be in flight at once.
    #[must_use]
    pub const fn half_open_permits(&self) -> u32 {
        self.half_open_permits
    }
    /// How many consecutive successful probes close a half-open breaker (under
    /// [`HalfOpenVerdict::Consecutive`]).
    #[must_use]
    pub const fn success_threshold(&self) -> u32 {
        self.success_threshold
    }
    /// How half-open probes decide.
    #[must_use]
    pub const fn half_open_verdict(&self) -> HalfOpenVerdict {
        match self.rates_over_probes {
            0 => HalfOpenVerdict::Consecutive,
            probes => HalfOpenVerdict::Rates { probes },
        }
    }
    /// The longest a breaker stays half-open before deciding on its own, if set.
    #[must_use]
    pub const fn max_half_open_wait(&self) -> Option<Duration> {
        match self.max_half_open_wait {
            Some(nanos) => Some(Duration::from_nanos(nanos.get())),
            None => None,
        }
    }
    /// What a half-open breaker does when its maximum wait passes.
    #[must_use]
    pub const fn half_open_timeout(&self) -> HalfOpenTimeout {
        self.half_open_timeout
    }

    /// How long the breaker stays open the `reopen`-th time in a row (1-based; 0
    /// reads as 1; the count restarts when the breaker closes):
    /// `open_backoff.delay(reopen)` capped at `max_open_duration`, then jittered
    /// with the draw `jitter_draw(seed, reopen, capped)`. Decorrelated jitter
    /// takes the capped curve value of the previous re-open as its "previous".
    #[must_use]
    pub fn open_duration(&self, reopen: u32) -> Duration {
        from_nanos(self.open_nanos(reopen))
    }

    /// [`BreakerConfig::open_duration`] in nanoseconds (it saturates at
    /// `u64::MAX` ns as the retry delays do): the breaker adds it to an
    /// instant, so it is never made a `Duration` on that path.
    pub(crate) fn open_nanos(&self, reopen: u32) -> u64 {
        let reopen = reopen.max(1);
        let cap = sat_nanos(self.max_open_duration);
        let initial = sat_nanos(self.open_backoff.initial());
        // The capped curve at `reopen - 1` (the initial delay before the
        // first) and at `reopen`, in one loop so that the curve is written
        // once in the code.
        let mut base = initial;
        let mut n = reopen.saturating_sub(1).max(1);
        let previous = loop {
            let previous = base;
            base = self.open_backoff.capped_nanos(n, cap);
            if n >= reopen {
                break previous;
            }
            n = n.saturating_add(1);
        };
        let draw = jitter_draw_nanos(self.seed, reopen, base);
        self.open_jitter
            .draw_within_nanos(base, draw, initial, previous, cap)
            .0
    }

    /// Checks every field; the builder calls this, so a built config is valid.
    ///
    /// # Errors
    /// The first invalid field, as a [`BreakerError`] naming it.
    pub fn validate(&self) -> Result<(), BreakerError> {
        for (field, rate) in [
            ("failure_rate", self.failure_rate),
            ("slow_call_rate", self.slow_call_rate),
        ] {
            if let Some(rate) = rate {
                if !rate.is_valid() {
                    return Err(BreakerError::RateOutOfRange {
                        field,
                        basis_points: rate.basis_points(),
                    });
                }
                if self.window.is_none() {
                    return Err(BreakerError::MissingWindow { field });
                }
            }
        }
        if self.failure_threshold == 0
            && self.failure_rate.is_none()
            && self.slow_call_rate.is_none()
        {
            return Err(BreakerError::NoTripRule);
        }
        if self.slow_call_rate.is_some() && self.slow_call_duration.is_zero() {
            return Err(BreakerError::ZeroDuration {
                field: "slow_call_duration",
            });
        }
        match self.window {
            Some(Window::Count { calls: 0 }) => {
                return Err(BreakerError::Zero {
                    field: "window.calls",
                })
            }
            Some(Window::Count { calls }) if self.minimum_calls > u32::from(calls) => {
                return Err(BreakerError::MinimumAboveWindow {
                    minimum: self.minimum_calls,
                    calls,
                })
            }
            Some(Window::Time { buckets: 0, .. }) => {
                return Err(BreakerError::Zero {
                    field: "window.buckets",
                })
            }
            Some(Window::Time { length, buckets }) if length.as_nanos() < u128::from(buckets) => {
                return Err(BreakerError::ZeroDuration {
                    field: "window.length",
                })
            }
            _ => {}
        }
        if self.minimum_calls == 0 {
            return Err(BreakerError::Zero {
                field: "minimum_calls",
            });
        }
        self.open_backoff
            .validate()
            .map_err(|source| BreakerError::InvalidCurve {
                field: "open_backoff",
                source,
            })?;
        self.open_jitter
            .validate()
            .map_err(|source| BreakerError::InvalidCurve {
                field: "open_jitter",
                source,
            })?;
        let initial = self.open_backoff.initial();
        if initial.is_zero() {
            return Err(BreakerError::ZeroDuration {
                field: "open_backoff",
            });
        }
        if self.max_open_duration < initial {
            return Err(BreakerError::MaxBelowInitial {
                max: self.max_open_duration,
                initial,
            });
        }
        if self.half_open_permits == 0 {
            return Err(BreakerError::Zero {
                field: "half_open_permits",
            });
        }
        if self.success_threshold == 0 {
            return Err(BreakerError::Zero {
                field: "success_threshold",
            });
        }
        if self.rates_over_probes > 0
            && self.failure_rate.is_none()
            && self.slow_call_rate.is_none()
        {
            return Err(BreakerError::VerdictWithoutRate);
        }
        Ok(())
    }

    /// The time window's bucket length in nanoseconds and bucket count, if the
    /// window is time-based. A length of 0 means a bucket longer than the
    /// clock's whole range (past `u64::MAX` ns): every instant is in bucket 0.
    pub(crate) fn bucket_shape(&self) -> Option<(u64, u16)> {
        match self.window {
            Some(Window::Time { length, buckets }) => {
                // The length in nanoseconds divided by the bucket count,
                // exactly, in 64-bit words (no u128 division and no `Duration`
                // built, so no overflow check left behind on small targets):
                // with secs = q × buckets + carry, length ÷ buckets is
                // q × 10⁹ + (carry × 10⁹ + subsec) ÷ buckets. No bucket count
                // is zero (the builder refuses it).
                // (Dividing the seconds and the nanoseconds apart, as
                // `Duration::checked_div` does, loses up to a nanosecond per
                // bucket, which moves bucket edges late in a long run.)
                let per_bucket = NonZeroU64::new(u64::from(buckets)).unwrap_or(NonZeroU64::MIN);
                let secs = length.as_secs();
                // carry < buckets ≤ 65,535: carry × 10⁹ + subsec fits in 64 bits.
                let carry = secs % per_bucket;
                let rest = carry
                    .saturating_mul(1_000_000_000)
                    .saturating_add(u64::from(length.subsec_nanos()))
                    / per_bucket;
                // Past 64 bits no instant reaches the second bucket: 0 says so
                // (a saturated length would put the clock's very last instant
                // in bucket 1).
                let nanos = (secs / per_bucket)
                    .checked_mul(1_000_000_000)
                    .and_then(|n| n.checked_add(rest))
                    .map_or(0, |n| n.max(1));
                Some((nanos, buckets))
            }
            _ => None,
        }
    }

    /// The half-open maximum wait in nanoseconds, if set.
    pub(crate) fn max_half_open_wait_nanos(&self) -> Option<u64> {
        self.max_half_open_wait.map(NonZeroU64::get)
    }

    /// Whether a failure streak of `streak` trips the consecutive-failure rule
    /// (never when the rule is off: its threshold is stored as 0).
    #[inline]
    pub(crate) const fn streak_trips(&self, streak: u32) -> bool {
        self.failure_threshold.wrapping_sub(1) < streak
    }

    /// The count window's size, if the window is count-based.
    pub(crate) fn window_calls(&self) -> Option<u16> {
        match self.window {
            Some(Window::Count { calls }) => Some(calls),
            _ => None,
        }
    }
}

impl fmt::Display for BreakerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("trip on")?;
        let mut sep = " ";
        if let Some(n) = self.failure_threshold() {
            write!(f, "{sep}{n} consecutive failure(s)")?;
            sep = " or ";
        }
        if let Some(r) = self.failure_rate {
            write!(f, "{sep}failure rate >= {r}")?;
            sep = " or ";
        }
        if let Some(r) = self.slow_call_rate {
            write!(
                f,
                "{sep}slow-call rate >= {r} (slow: over {})",
                D(self.slow_call_duration)
            )?;
        }
        if let Some(w) = self.window {
            write!(
                f,
                ", window {w}, judged from {} call(s)",
                self.minimum_calls
            )?;
        }
        write!(
            f,
            "; open {} up to {}",
            self.open_backoff,
            D(self.max_open_duration)
        )?;
        if self.open_jitter != Jitter::None {
            write!(f, ", jitter {} seed {}", self.open_jitter, self.seed)?;
        }
        if self.half_open_permits == u32::MAX {
            f.write_str("; half-open probes unlimited")?;
        } else {
            write!(f, "; half-open probes {}", self.half_open_permits)?;
        }
        match self.half_open_verdict() {
            HalfOpenVerdict::Consecutive => {
                write!(f, ", close after {} success(es)", self.success_threshold)?;
            }
            HalfOpenVerdict::Rates { probes } => {
                write!(f, ", judged by rates over {probes} probe(s)")?;
            }
        }
        if let Some(wait) = self.max_half_open_wait() {
            write!(
                f,
                ", {} after {} half-open",
                self.half_open_timeout,
                D(wait)
            )?;
        }
        Ok(())
    }
}

/// Builds a [`BreakerConfig`]; [`BreakerConfigBuilder::build`] validates it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use]
pub struct BreakerConfigBuilder {
    config: BreakerConfig,
    /// `failure_threshold(0)` was asked for.
    zero_threshold: bool,
    /// `half_open_verdict(Rates { probes: 0 })` was asked for.
    zero_probes: bool,
    /// `max_half_open_wait(Duration::ZERO)` was asked for.
    zero_wait: bool,
}

impl BreakerConfigBuilder {
    /// Trip at this many consecutive failures, or `None` to turn the rule off.
    pub fn failure_threshold(mut self, n: impl Into<Option<u32>>) -> Self {
        let n = n.into();
        // A zero threshold is refused by `build`.
        self.zero_threshold = n == Some(0);
        self.config.failure_threshold = n.unwrap_or(0);
        self
    }
    /// Trip when the window's failure rate reaches this, or `None` for no such rule.
    pub fn failure_rate(mut self, rate: impl Into<Option<Rate>>) -> Self {
        self.config.failure_rate = rate.into();
        self
    }
    /// Trip when the window's slow-call rate reaches this, or `None` for no such
    /// rule.
    pub fn slow_call_rate(mut self, rate: impl Into<Option<Rate>>) -> Self {
        self.config.slow_call_rate = rate.into();
        self
    }
    /// A call that takes longer than this counts as slow.
    pub fn slow_call_duration(mut self, d: Duration) -> Self {
        self.config.slow_call_duration = d;
        self
    }
    /// The window rates are judged over, or `None` for none.
    pub fn window(mut self, window: impl Into<Option<Window>>) -> Self {
        self.config.window = window.into();
        self
    }
    /// A window of the last `calls` calls.
    pub fn count_window(self, calls: u16) -> Self {
        self.window(Window::Count { calls })
    }
    /// A window of the last `length`, in `buckets` buckets.
    pub fn time_window(self, length: Duration, buckets: u16) -> Self {
        self.window(Window::Time { length, buckets })
    }
    /// Judge rates only once the window holds this many calls.
    pub fn minimum_calls(mut self, n: u32) -> Self {
        self.config.minimum_calls = n;
        self
    }
    /// Stay open for this long every time (a constant curve, capped at it too).
    pub fn open_duration(mut self, d: Duration) -> Self {
        self.config.open_backoff = Backoff::constant(d);
        self.config.max_open_duration = d;
        self
    }
    /// The curve of open durations over consecutive re-opens.
    pub fn open_backoff(mut self, backoff: Backoff) -> Self {
        self.config.open_backoff = backoff;
        self
    }
    /// The cap on every open duration (before jitter).
    pub fn max_open_duration(mut self, d: Duration) -> Self {
        self.config.max_open_duration = d;
        self
    }
    /// The jitter applied to each open duration.
    pub fn open_jitter(mut self, jitter: Jitter) -> Self {
        self.config.open_jitter = jitter;
        self
    }
    /// The seed the jitter draws are keyed on.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }
    /// How many half-open probes may be in flight at once.
    pub fn half_open_permits(mut self, n: u32) -> Self {
        self.config.half_open_permits = n;
        self
    }
    /// How many consecutive successful probes close a half-open breaker (under
    /// [`HalfOpenVerdict::Consecutive`]).
    pub fn success_threshold(mut self, n: u32) -> Self {
        self.config.success_threshold = n;
        self
    }
    /// How half-open probes decide (default [`HalfOpenVerdict::Consecutive`]).
    pub fn half_open_verdict(mut self, verdict: HalfOpenVerdict) -> Self {
        match verdict {
            HalfOpenVerdict::Consecutive => {
                self.zero_probes = false;
                self.config.rates_over_probes = 0;
            }
            HalfOpenVerdict::Rates { probes } => {
                // Zero probes could never judge: refused by `build`.
                self.zero_probes = probes == 0;
                self.config.rates_over_probes = probes;
            }
        }
        self
    }
    /// The longest a breaker stays half-open, or `None` for no limit (the
    /// default). Once it has passed, the first request (or the driver's timer,
    /// through [`CircuitBreaker::wake`](crate::CircuitBreaker::wake)) decides as
    /// [`on_half_open_timeout`](Self::on_half_open_timeout) says, and until then
    /// a request rejected in half-open is told that time. A breaker whose probes
    /// never report (a lost permit, a hung call) then cannot stay half-open for
    /// ever.
    pub fn max_half_open_wait(mut self, wait: impl Into<Option<Duration>>) -> Self {
        let wait = wait.into();
        // A zero wait is refused by `build`.
        self.zero_wait = wait == Some(Duration::ZERO);
        self.config.max_half_open_wait =
            wait.and_then(|d| NonZeroU64::new(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)));
        self
    }
    /// What a half-open breaker does when its maximum wait passes (default
    /// [`HalfOpenTimeout::Reopen`]).
    pub fn on_half_open_timeout(mut self, timeout: HalfOpenTimeout) -> Self {
        self.config.half_open_timeout = timeout;
        self
    }

    /// Validates and returns the config.
    ///
    /// # Errors
    /// A [`BreakerError`] naming the first invalid field (see
    /// [`BreakerConfig::validate`]).
    pub fn build(self) -> Result<BreakerConfig, BreakerError> {
        // The threshold is the first field checked.
        if self.zero_threshold {
            return Err(BreakerError::Zero {
                field: "failure_threshold",
            });
        }
        self.config.validate()?;
        if self.zero_probes {
            return Err(BreakerError::Zero {
                field: "half_open_verdict.probes",
            });
        }
        if self.zero_wait {
            return Err(BreakerError::ZeroDuration {
                field: "max_half_open_wait",
            });
        }
        Ok(self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The open period as it was computed before it moved to nanoseconds:
    /// through `Duration`s, with the public curve, draw and jitter.
    fn open_duration_by_durations(c: &BreakerConfig, reopen: u32) -> Duration {
        let reopen = reopen.max(1);
        let cap = c.max_open_duration;
        let initial = c.open_backoff.initial();
        let mut base = initial;
        let mut n = reopen.saturating_sub(1).max(1);
        let previous = loop {
            let previous = base;
            base = c.open_backoff.delay(n).min(cap);
            if n >= reopen {
                break previous;
            }
            n = n.saturating_add(1);
        };
        let draw = crate::jitter_draw(c.seed, reopen, base);
        c.open_jitter.apply(base, draw, initial, previous, cap)
    }

    /// `open_nanos` (the breaker's path) and `open_duration` give what the
    /// `Duration` form gives, for every curve and jitter kind, caps past
    /// `u64::MAX` ns included, and the end instant saturates as
    /// `Instant::checked_add` did.
    #[test]
    fn the_open_period_in_nanoseconds_is_the_duration_form() {
        let ms = Duration::from_millis;
        let curves = [
            Backoff::None,
            Backoff::constant(ms(250)),
            Backoff::linear_by(ms(100), ms(333)),
            Backoff::exponential(ms(100), 2.0),
            Backoff::exponential(Duration::from_secs(3), 1.5),
            Backoff::fibonacci(ms(7)),
            Backoff::exponential(Duration::MAX, 2.0),
        ];
        let jitters = [
            Jitter::None,
            Jitter::Full,
            Jitter::Equal,
            Jitter::Decorrelated,
            Jitter::Subtract(0.25),
            Jitter::Add(0.5),
        ];
        let caps = [
            ms(1),
            Duration::from_secs(60),
            Duration::from_nanos(u64::MAX),
            Duration::MAX,
        ];
        let nows = [
            crate::Instant::ORIGIN,
            crate::Instant::from_secs(1_000),
            crate::Instant::MAX,
        ];
        let mut checked = 0u32;
        for curve in curves {
            for jitter in jitters {
                for cap in caps {
                    for seed in [0, 1, 0x9e37_79b9_7f4a_7c15] {
                        let c = BreakerConfig {
                            open_backoff: curve,
                            open_jitter: jitter,
                            max_open_duration: cap,
                            seed,
                            ..BreakerConfig::default()
                        };
                        for reopen in [0, 1, 2, 3, 7, 40, 100, u32::MAX] {
                            let want = open_duration_by_durations(&c, reopen);
                            assert_eq!(c.open_duration(reopen), want, "{c:?} reopen {reopen}");
                            let nanos = c.open_nanos(reopen);
                            assert_eq!(Duration::from_nanos(nanos), want, "{c:?} reopen {reopen}");
                            for now in nows {
                                let until = crate::Instant::from_nanos(
                                    now.as_nanos().saturating_add(nanos),
                                );
                                let by_durations =
                                    now.checked_add(want).unwrap_or(crate::Instant::MAX);
                                assert_eq!(until, by_durations, "{c:?} reopen {reopen}");
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 7 * 6 * 4 * 3 * 8);
    }

    /// `basic` builds its config in place; it must give what the builder
    /// gives for the same settings, errors included, the order in which
    /// fields are refused too.
    #[test]
    fn basic_is_the_builder_with_its_settings() {
        let by_builder = |threshold: u32, timeout: Duration, successes: u32| {
            if timeout.is_zero() {
                return Err(BreakerError::ZeroDuration {
                    field: "open_duration",
                });
            }
            BreakerConfig::builder()
                .failure_threshold(threshold)
                .open_duration(timeout)
                .max_open_duration(timeout)
                .half_open_permits(u32::MAX)
                .success_threshold(successes)
                .build()
        };
        let timeouts = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::from_secs(5),
            Duration::MAX,
        ];
        for threshold in [0, 1, 3, u32::MAX] {
            for timeout in timeouts {
                for successes in [0, 1, 2, u32::MAX] {
                    assert_eq!(
                        BreakerConfig::basic(BasicRule {
                            failure_threshold: threshold,
                            open_duration: timeout,
                            success_threshold: successes
                        }),
                        by_builder(threshold, timeout, successes),
                        "basic({threshold}, {timeout:?}, {successes})"
                    );
                }
            }
        }
    }

    /// A time window's bucket is its length divided by the bucket count to the
    /// nanosecond (rounded down), for lengths whose seconds and nanoseconds
    /// do not divide apart (found by the breaker fuzz target: 2.857 s in 3
    /// buckets read 952,333,332 ns, so bucket edges near the end of the clock
    /// fell a bucket later than the model's), and is 0 past `u64::MAX` (a
    /// bucket wider than the clock).
    #[test]
    fn a_bucket_is_the_length_divided_exactly() {
        let lengths = [
            Duration::from_millis(2_857),
            Duration::from_nanos(1),
            Duration::new(1, 999_999_999),
            Duration::new(65_534, 999_999_999),
            Duration::new(7, 1),
            Duration::from_secs(u64::MAX / 1_000_000_000),
            Duration::new(u64::MAX, 999_999_999),
        ];
        for length in lengths {
            for buckets in [1u16, 2, 3, 7, 8, 1_000, u16::MAX] {
                let c = BreakerConfig::builder()
                    .window(Window::Time { length, buckets })
                    .build();
                let Ok(c) = c else { continue };
                let exact = (length.as_nanos() / u128::from(buckets)).max(1);
                // Wider than the clock's range: 0 (every instant in bucket 0).
                let expected = u64::try_from(exact).unwrap_or(0);
                assert_eq!(
                    c.bucket_shape(),
                    Some((expected, buckets)),
                    "{length:?} in {buckets} buckets"
                );
            }
        }
    }
}
