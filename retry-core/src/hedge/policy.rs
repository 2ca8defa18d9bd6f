//! [`HedgePolicy`]: how many copies of a call may run, when each one is sent,
//! and what limits the whole. Built and validated by [`HedgePolicyBuilder`].

use core::fmt;
use core::time::Duration;

use super::copies::MAX_COPIES;
use super::error::HedgePolicyError;
use super::latency::LatencyHistogram;
use crate::classify::{may_replay, Idempotency, Method};
use crate::retry::{jitter_draw, Jitter};
use crate::time::DisplayDuration as D;

/// When the copies after the first are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum HedgeMode {
    /// The next copy is sent when the hedge delay has passed since the last one
    /// was sent and no answer has come (the tail-latency hedge); also at once
    /// after a failure.
    #[default]
    Latency,
    /// The next copy is sent only after a copy fails: no timer, one copy at a time
    /// unless failures come faster than answers.
    Fallback,
    /// Every copy allowed in flight is sent at once; a failure sends the next.
    Parallel,
}

impl HedgeMode {
    /// The mode's name.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            HedgeMode::Latency => "latency",
            HedgeMode::Fallback => "fallback",
            HedgeMode::Parallel => "parallel",
        }
    }
}

impl fmt::Display for HedgeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How long the latency mode waits for an answer before it sends the next copy.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum HedgeDelay {
    /// Always this long.
    Fixed(Duration),
    /// A percentile of recent latencies, read from the [`LatencyHistogram`] the
    /// driver passes to [`HedgeMachine::with_latencies`](crate::HedgeMachine::with_latencies)
    /// when the call starts; `fallback` until it holds `min_samples`.
    Percentile {
        /// Which percentile, in `(0, 100]` (95.0 sends a second copy for about
        /// one call in twenty).
        percentile: f64,
        /// How many samples the histogram must hold before its percentile is used.
        min_samples: u32,
        /// The delay used until then.
        fallback: Duration,
    },
}

impl Default for HedgeDelay {
    fn default() -> Self {
        HedgeDelay::Fixed(Duration::from_millis(100))
    }
}

impl HedgeDelay {
    /// The delay for a call that starts now, with `latencies` as the recent
    /// history.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{HedgeDelay, LatencyHistogram};
    /// let adaptive = HedgeDelay::Percentile {
    ///     percentile: 50.0,
    ///     min_samples: 3,
    ///     fallback: Duration::from_secs(1),
    /// };
    /// let mut latencies = LatencyHistogram::new();
    /// latencies.record(Duration::from_millis(10));
    /// latencies.record(Duration::from_millis(10));
    /// assert_eq!(adaptive.resolve(&latencies), Duration::from_secs(1)); // 2 < 3 samples
    /// latencies.record(Duration::from_millis(10));
    /// assert_eq!(adaptive.resolve(&latencies), Duration::from_millis(10));
    /// ```
    #[must_use]
    pub fn resolve(&self, latencies: &LatencyHistogram) -> Duration {
        match *self {
            HedgeDelay::Fixed(delay) => delay,
            HedgeDelay::Percentile {
                percentile,
                min_samples,
                fallback,
            } => {
                if latencies.count() < min_samples.max(1) {
                    return fallback;
                }
                latencies.percentile(percentile).unwrap_or(fallback)
            }
        }
    }
}

impl fmt::Display for HedgeDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HedgeDelay::Fixed(d) => write!(f, "delay {}", D(d)),
            HedgeDelay::Percentile {
                percentile,
                min_samples,
                fallback,
            } => write!(
                f,
                "delay p{percentile} of recent latencies (from {min_samples} samples; {} before)",
                D(fallback)
            ),
        }
    }
}

/// A validated hedge policy. Build one with [`HedgePolicy::builder`]; every field
/// has a getter. `Copy`: a [`HedgeMachine`](crate::HedgeMachine) keeps its own.
///
/// Defaults: 2 copies in total, as many in flight, the latency mode with a fixed
/// 100 ms delay, no jitter, no timeout, no retry budget, an idempotent operation.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{HedgeMode, HedgePolicy};
///
/// let policy = HedgePolicy::builder()
///     .max_attempts(3)
///     .max_in_flight(2)
///     .fixed_delay(Duration::from_millis(50))
///     .timeout(Duration::from_secs(2))
///     .build()?;
/// assert_eq!(policy.mode(), HedgeMode::Latency);
/// assert_eq!(policy.allowed_attempts(), 3);
/// assert_eq!(
///     policy.to_string(),
///     "latency mode, 3 copies (2 in flight), delay 0.050s, timeout 2.000s"
/// );
/// # Ok::<(), retry_core::HedgePolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HedgePolicy {
    max_attempts: u32,
    max_in_flight: Option<u32>,
    mode: HedgeMode,
    delay: HedgeDelay,
    jitter: Jitter,
    timeout: Option<Duration>,
    use_retry_budget: bool,
    idempotent: bool,
    hedge_non_idempotent: bool,
}

impl Default for HedgePolicy {
    fn default() -> Self {
        HedgePolicy {
            max_attempts: 2,
            max_in_flight: None,
            mode: HedgeMode::Latency,
            delay: HedgeDelay::default(),
            jitter: Jitter::None,
            timeout: None,
            use_retry_budget: false,
            idempotent: true,
            hedge_non_idempotent: false,
        }
    }
}

impl HedgePolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> HedgePolicyBuilder {
        HedgePolicyBuilder {
            policy: HedgePolicy::default(),
        }
    }

    /// A builder starting from this policy.
    pub fn to_builder(&self) -> HedgePolicyBuilder {
        HedgePolicyBuilder { policy: *self }
    }

    /// The most copies sent in total, the first included, as configured.
    #[must_use]
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The most copies that run at the same time (never more than
    /// [`max_attempts`](Self::max_attempts)).
    #[must_use]
    pub const fn max_in_flight(&self) -> u32 {
        match self.max_in_flight {
            Some(n) if n < self.max_attempts => n,
            _ => self.max_attempts,
        }
    }

    /// The copies a call may really send: [`max_attempts`](Self::max_attempts),
    /// except 1 for a non-idempotent operation that the caller did not allow to
    /// be hedged.
    #[must_use]
    pub const fn allowed_attempts(&self) -> u32 {
        if self.idempotent || self.hedge_non_idempotent {
            self.max_attempts
        } else {
            1
        }
    }

    /// When the copies after the first are sent.
    #[must_use]
    pub const fn mode(&self) -> HedgeMode {
        self.mode
    }

    /// The hedge delay (the latency mode's wait).
    #[must_use]
    pub const fn delay(&self) -> HedgeDelay {
        self.delay
    }

    /// The jitter applied to each hedge delay.
    #[must_use]
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The time limit for the whole call, if any: when it passes, the copies in
    /// flight are cancelled and the call gives up.
    #[must_use]
    pub const fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Whether every copy after the first withdraws from a shared retry budget.
    #[must_use]
    pub const fn uses_retry_budget(&self) -> bool {
        self.use_retry_budget
    }

    /// Whether the operation is safe to send more than once.
    #[must_use]
    pub const fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// Whether the caller allows a non-idempotent operation to be hedged anyway.
    #[must_use]
    pub const fn hedges_non_idempotent(&self) -> bool {
        self.hedge_non_idempotent
    }

    /// This policy for one request with `method`, marked with `idempotency` by
    /// its caller: what an HTTP layer hedges under, so that the rule of
    /// [`allowed_attempts`](Self::allowed_attempts) decides for each request.
    ///
    /// - [`Idempotency::Auto`] (no mark): the request is idempotent when the
    ///   policy says the operation is and its method is safe to send twice
    ///   (GET, HEAD, OPTIONS, as [`may_replay`](crate::may_replay) says); a
    ///   POST, a PATCH, a PUT, a DELETE or an unknown method is sent once.
    /// - [`Idempotency::Always`]: the caller vouches for this request (it
    ///   carries an idempotency key, say): hedged like a GET.
    /// - [`Idempotency::Never`]: sent once, even a GET.
    ///
    /// A request judged non-idempotent is still hedged when the policy says
    /// [`hedge_non_idempotent`](HedgePolicyBuilder::hedge_non_idempotent), its
    /// copies flagged as repeats.
    ///
    /// ```
    /// use retry_core::{HedgePolicy, Idempotency, Method};
    ///
    /// let policy = HedgePolicy::builder().max_attempts(3).build()?;
    /// assert_eq!(policy.for_request(Method::Get, Idempotency::Auto).allowed_attempts(), 3);
    /// assert_eq!(policy.for_request(Method::Post, Idempotency::Auto).allowed_attempts(), 1);
    /// assert_eq!(policy.for_request(Method::Post, Idempotency::Always).allowed_attempts(), 3);
    /// assert_eq!(policy.for_request(Method::Get, Idempotency::Never).allowed_attempts(), 1);
    /// # Ok::<(), retry_core::HedgePolicyError>(())
    /// ```
    #[must_use]
    pub const fn for_request(&self, method: Method, idempotency: Idempotency) -> HedgePolicy {
        let mut policy = *self;
        policy.idempotent = match idempotency {
            Idempotency::Always => true,
            Idempotency::Never => false,
            Idempotency::Auto => self.idempotent && may_replay(Idempotency::Auto, method, false),
        };
        policy
    }

    /// The delay before copy `copy` (2 or later) under `seed`, from `base`: the
    /// policy's jitter, keyed on `(seed, copy, base)` as the retry jitter is.
    pub(crate) fn jittered(&self, base: Duration, copy: u32, seed: u64) -> Duration {
        match self.jitter {
            Jitter::None => base,
            jitter => {
                let draw = jitter_draw(seed, copy, base);
                // No cap: a hedge delay has none (spread may go either way).
                jitter.apply(base, draw, base, base, Duration::MAX)
            }
        }
    }

    /// Checks every field; the builder calls this, so a built policy is valid.
    ///
    /// # Errors
    /// The first invalid field, as a [`HedgePolicyError`] naming it.
    pub fn validate(&self) -> Result<(), HedgePolicyError> {
        if self.max_attempts == 0 {
            return Err(HedgePolicyError::ZeroAttempts);
        }
        if self.max_attempts > MAX_COPIES {
            return Err(HedgePolicyError::TooManyAttempts {
                got: self.max_attempts,
            });
        }
        if self.max_in_flight == Some(0) {
            return Err(HedgePolicyError::ZeroInFlight);
        }
        if let HedgeDelay::Percentile { percentile, .. } = self.delay {
            if percentile.is_nan() || percentile <= 0.0 || percentile > 100.0 {
                return Err(HedgePolicyError::InvalidPercentile { value: percentile });
            }
        }
        match self.jitter {
            Jitter::Decorrelated => return Err(HedgePolicyError::DecorrelatedJitter),
            jitter => {
                if let Some(f) = jitter.fraction() {
                    if !(0.0..=1.0).contains(&f) {
                        return Err(HedgePolicyError::InvalidJitterFraction {
                            kind: jitter.name(),
                            value: f,
                        });
                    }
                }
            }
        }
        if let Some(value) = self.timeout.filter(|t| t.is_zero()) {
            return Err(HedgePolicyError::ZeroTimeout { value });
        }
        Ok(())
    }
}

impl fmt::Display for HedgePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} mode, {} cop{} ({} in flight)",
            self.mode,
            self.max_attempts,
            if self.max_attempts == 1 { "y" } else { "ies" },
            self.max_in_flight()
        )?;
        if self.mode == HedgeMode::Latency {
            write!(f, ", {}", self.delay)?;
        }
        if self.jitter != Jitter::None {
            write!(f, ", jitter {}", self.jitter)?;
        }
        if let Some(t) = self.timeout {
            write!(f, ", timeout {}", D(t))?;
        }
        if self.use_retry_budget {
            f.write_str(", retry budget")?;
        }
        match (self.idempotent, self.hedge_non_idempotent) {
            (true, _) => {}
            (false, false) => f.write_str(", not idempotent: never hedged")?,
            (false, true) => f.write_str(", not idempotent, hedged as the caller allows")?,
        }
        Ok(())
    }
}

/// Builds a [`HedgePolicy`]; [`HedgePolicyBuilder::build`] validates every field.
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use]
pub struct HedgePolicyBuilder {
    policy: HedgePolicy,
}

impl HedgePolicyBuilder {
    /// The most copies sent in total, the first included (at most
    /// [`MAX_COPIES`](crate::MAX_COPIES)). `1` disables hedging.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.policy.max_attempts = n;
        self
    }

    /// The most copies running at the same time (default: all of them).
    pub fn max_in_flight(mut self, n: u32) -> Self {
        self.policy.max_in_flight = Some(n);
        self
    }

    /// When the copies after the first are sent.
    pub fn mode(mut self, mode: HedgeMode) -> Self {
        self.policy.mode = mode;
        self
    }

    /// The hedge delay.
    pub fn delay(mut self, delay: HedgeDelay) -> Self {
        self.policy.delay = delay;
        self
    }

    /// A fixed hedge delay.
    pub fn fixed_delay(self, delay: Duration) -> Self {
        self.delay(HedgeDelay::Fixed(delay))
    }

    /// An adaptive hedge delay: the `percentile` of recent latencies once the
    /// histogram holds `min_samples`, `fallback` before.
    pub fn adaptive_delay(self, percentile: f64, min_samples: u32, fallback: Duration) -> Self {
        self.delay(HedgeDelay::Percentile {
            percentile,
            min_samples,
            fallback,
        })
    }

    /// Jitter on each hedge delay, keyed on the machine's seed and the copy
    /// number (default none; decorrelated jitter is refused).
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.policy.jitter = jitter;
        self
    }

    /// A time limit for the whole call, or `None` for none.
    pub fn timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.policy.timeout = timeout.into();
        self
    }

    /// Withdraw from a shared retry budget before every copy after the first
    /// (default `false`). A refusal stops further copies; those in flight go on.
    pub fn use_retry_budget(mut self, use_it: bool) -> Self {
        self.policy.use_retry_budget = use_it;
        self
    }

    /// Whether the operation is safe to send more than once (default `true`).
    /// A non-idempotent operation is sent once and never hedged, unless
    /// [`hedge_non_idempotent`](Self::hedge_non_idempotent) says otherwise.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.policy.idempotent = idempotent;
        self
    }

    /// Hedge a non-idempotent operation anyway (default `false`): the caller
    /// vouches that running it twice is harmless. Every copy after the first
    /// then carries a warning flag.
    pub fn hedge_non_idempotent(mut self, allow: bool) -> Self {
        self.policy.hedge_non_idempotent = allow;
        self
    }

    /// Validates and returns the policy.
    ///
    /// # Errors
    /// A [`HedgePolicyError`] naming the first invalid field.
    pub fn build(self) -> Result<HedgePolicy, HedgePolicyError> {
        self.policy.validate()?;
        Ok(self.policy)
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for HedgePolicy {
    /// An arbitrary *valid* policy: raw values drawn freely, then mended where
    /// the builder would refuse them.
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let clamp = |f: f64| if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
        let jitter = match u.arbitrary()? {
            Jitter::Subtract(f) => Jitter::Subtract(clamp(f)),
            Jitter::Add(f) => Jitter::Add(clamp(f)),
            Jitter::Spread(f) => Jitter::Spread(clamp(f)),
            Jitter::Decorrelated => Jitter::Full,
            other => other,
        };
        let delay = match u.arbitrary()? {
            HedgeDelay::Percentile {
                percentile,
                min_samples,
                fallback,
            } => HedgeDelay::Percentile {
                percentile: if percentile.is_nan() {
                    50.0
                } else {
                    percentile.clamp(0.01, 100.0)
                },
                min_samples,
                fallback,
            },
            fixed => fixed,
        };
        let max_attempts = u.int_in_range(1..=MAX_COPIES)?;
        let max_in_flight = if u.arbitrary()? {
            Some(u.int_in_range(1..=MAX_COPIES)?)
        } else {
            None
        };
        let timeout: Option<Duration> = u.arbitrary()?;
        let policy = HedgePolicy {
            max_attempts,
            max_in_flight,
            mode: u.arbitrary()?,
            delay,
            jitter,
            timeout: timeout.filter(|t| !t.is_zero()),
            use_retry_budget: u.arbitrary()?,
            idempotent: u.arbitrary()?,
            hedge_non_idempotent: u.arbitrary()?,
        };
        debug_assert!(policy.validate().is_ok());
        Ok(policy)
    }
}
