//! [`RetryPolicy`]: how many attempts, how long to wait between them, how to treat
//! server hints, and the time limits. Built and validated by [`RetryPolicyBuilder`].

use core::fmt;
use core::time::Duration;

use super::backoff::{powi, Backoff};
use super::error::PolicyError;
use super::jitter::{jitter_draw, jitter_draw_nanos, Jitter};
use super::nanos::{from_nanos, nanos};

/// How delays are rounded after jitter (see [the rules](crate::behaviour#jitter)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Resolution {
    /// To the nearest whole millisecond (the default), kept inside the policy's bounds.
    #[default]
    Millis,
    /// Every nanosecond kept.
    Nanos,
}

/// What a retry does when the circuit breaker in front of it rejects an attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum CircuitOpen {
    /// Give up at once with [`GiveUpReason::CircuitOpen`](crate::GiveUpReason::CircuitOpen).
    #[default]
    GiveUp,
    /// Sleep until the breaker would admit again, then try the same attempt. The
    /// sleep counts against the total budget like any other and never burns an
    /// attempt.
    Wait,
}

/// How a server's delay hint (Retry-After and kin) combines with the curve (see [the rules](crate::behaviour#server-hints)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum HintMode {
    /// The server's delay replaces the curve's, without jitter, clamped into
    /// `[min, max]`. The floor keeps "0", empty headers and past dates from making a
    /// tight loop against a struggling server.
    Override {
        /// The shortest honoured delay (100 ms unless set).
        min: Duration,
        /// The longest honoured delay (60 s unless set).
        max: Duration,
    },
    /// Sleep `max(curve, min(hint, cap))`, then the policy's jitter; never shorter
    /// than the honoured hint.
    AtLeast {
        /// The longest hint honoured (5 minutes unless set).
        cap: Duration,
    },
    /// Hints are ignored entirely (`respect_retry_after = false`).
    Ignore,
}

impl HintMode {
    /// Override with the default clamp of `[100 ms, 60 s]`.
    pub const OVERRIDE_DEFAULT: HintMode = HintMode::Override {
        min: Duration::from_millis(100),
        max: Duration::from_secs(60),
    };
    /// At-least with the default 5 minute cap.
    pub const AT_LEAST_DEFAULT: HintMode = HintMode::AtLeast {
        cap: Duration::from_secs(300),
    };

    /// The mode's name, as used in configs.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            HintMode::Override { .. } => "override",
            HintMode::AtLeast { .. } => "at-least",
            HintMode::Ignore => "ignore",
        }
    }
}

impl Default for HintMode {
    fn default() -> Self {
        HintMode::OVERRIDE_DEFAULT
    }
}

/// A validated retry policy. Build one with [`RetryPolicy::builder`]; every field
/// has a getter. The policy is `Copy`: a [`RetryMachine`](crate::RetryMachine)
/// keeps its own copy.
///
/// Defaults: 5 attempts, exponential from 1 s doubling, capped at 60 s, full
/// jitter, millisecond resolution, hints in override mode clamped to
/// `[100 ms, 60 s]`, no total budget, no per-attempt timeout, timeouts retried.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Backoff, Jitter, RetryPolicy};
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(8)
///     .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
///     .max_delay(Duration::from_secs(60))
///     .jitter(Jitter::None)
///     .build()?;
/// let delays: Vec<u64> = (1..8).map(|r| policy.delay(r, 0).as_secs()).collect();
/// assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60]);
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Backoff,
    max_delay: Duration,
    min_delay: Duration,
    jitter: Jitter,
    resolution: Resolution,
    hints: HintMode,
    budget: Option<Duration>,
    attempt_timeout: Option<Duration>,
    cap_attempt_to_budget: bool,
    retry_timeouts: bool,
    use_retry_budget: bool,
    circuit_open: CircuitOpen,
    idempotent: bool,
    /// Worked out from the fields above whenever a policy is made
    /// ([`RetryPolicy::planned`]): from this step on the capped curve no
    /// longer changes (`u32::MAX` when that is not known).
    steady_step: u32,
    /// Worked out with `steady_step`: [`STEADY_IS_MAX`], [`STEADY_IS_EXACT`],
    /// [`SETTLES`], [`FAST_BOUNDS`], [`STEADY_READY`].
    plan: u8,
    /// Worked out with `steady_step`, zero when the curve does not settle.
    /// With [`STEADY_READY`] (an unjittered policy): the whole answer for
    /// every settled step, rounded and bounded, returned as it is. Otherwise
    /// the settled capped curve value, the base of a settled jittered delay
    /// (read in nanoseconds where [`FAST_BOUNDS`] holds).
    steady: Duration,
}

/// The capped curve settles at `max_delay` (otherwise at the bounded initial
/// delay: a flat curve).
const STEADY_IS_MAX: u8 = 1;
/// The settled value needs no rounding: unjittered, it is the delay itself.
const STEADY_IS_EXACT: u8 = 2;
/// The curve settles (at `steady_step`); without it nothing is assumed.
const SETTLES: u8 = 4;
/// The 64-bit path is compiled in and the cap and floor (so the settled
/// value, one of the cap, the floor and the initial delay) are below
/// [`FAST_SECS`] seconds.
const FAST_BOUNDS: u8 = 8;
/// The settled value is the curve's initial delay itself (a flat curve inside
/// its bounds).
const STEADY_IS_INITIAL: u8 = 16;
/// The jitter's fraction is exactly 1: the span of a delay below 2^53 ns is
/// the delay itself (the `f64` product is then exact).
const WHOLE_FRACTION: u8 = 32;
/// The curve settles and the policy is unjittered: from `steady_step` on,
/// every delay is the stored `steady`.
const STEADY_READY: u8 = 64;

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            backoff: Backoff::default(),
            max_delay: Duration::from_secs(60),
            min_delay: Duration::ZERO,
            jitter: Jitter::Full,
            resolution: Resolution::Millis,
            hints: HintMode::default(),
            budget: None,
            attempt_timeout: None,
            cap_attempt_to_budget: false,
            retry_timeouts: true,
            use_retry_budget: false,
            circuit_open: CircuitOpen::GiveUp,
            idempotent: true,
            steady_step: u32::MAX,
            plan: 0,
            steady: Duration::ZERO,
        }
        .planned()
    }
}

impl RetryPolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::from_policy(RetryPolicy::default())
    }

    /// A builder starting from this policy, to derive a variant of it.
    pub fn to_builder(&self) -> RetryPolicyBuilder {
        RetryPolicyBuilder::from_policy(*self)
    }

    /// The value of [`max_attempts`](RetryPolicy::max_attempts) that means no
    /// limit on the number of attempts (`u32::MAX`).
    pub const UNLIMITED_ATTEMPTS: u32 = u32::MAX;

    /// The most attempts, the first included (`max_retries + 1`);
    /// [`RetryPolicy::UNLIMITED_ATTEMPTS`] when there is no limit.
    #[must_use]
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }
    /// The most retries (`max_attempts - 1`; `u32::MAX - 1` when unlimited).
    #[must_use]
    pub const fn max_retries(&self) -> u32 {
        self.max_attempts.saturating_sub(1)
    }
    /// Whether the number of attempts is unlimited: the call then ends only on
    /// success, a permanent failure, cancellation, a refusal of the shared retry
    /// budget, an open circuit (when the policy gives up on those), or the total
    /// time budget when one is set. Attempt numbers stop growing at `u32::MAX`.
    #[must_use]
    pub const fn attempts_are_unlimited(&self) -> bool {
        self.max_attempts == RetryPolicy::UNLIMITED_ATTEMPTS
    }
    /// Whether attempt `number` is the last one the policy allows.
    pub(crate) const fn is_last_attempt(&self, number: u32) -> bool {
        !self.attempts_are_unlimited() && number >= self.max_attempts
    }
    /// The backoff curve.
    #[must_use]
    pub const fn backoff(&self) -> Backoff {
        self.backoff
    }
    /// The cap on every curve delay.
    #[must_use]
    pub const fn max_delay(&self) -> Duration {
        self.max_delay
    }
    /// The floor on every curve delay (after jitter).
    #[must_use]
    pub const fn min_delay(&self) -> Duration {
        self.min_delay
    }
    /// The jitter kind.
    #[must_use]
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }
    /// How curve delays are rounded.
    #[must_use]
    pub const fn resolution(&self) -> Resolution {
        self.resolution
    }
    /// How server hints are treated.
    #[must_use]
    pub const fn hints(&self) -> HintMode {
        self.hints
    }
    /// The total time budget for the whole call, if any.
    #[must_use]
    pub const fn budget(&self) -> Option<Duration> {
        self.budget
    }
    /// The per-attempt timeout, if any.
    #[must_use]
    pub const fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }
    /// Whether each attempt's deadline is capped at the budget's end.
    #[must_use]
    pub const fn caps_attempt_to_budget(&self) -> bool {
        self.cap_attempt_to_budget
    }
    /// Whether a timed-out attempt is retried.
    #[must_use]
    pub const fn retries_timeouts(&self) -> bool {
        self.retry_timeouts
    }

    /// Whether every retry first asks a shared retry budget
    /// ([`Action::Withdraw`](crate::Action::Withdraw)).
    #[must_use]
    pub const fn uses_retry_budget(&self) -> bool {
        self.use_retry_budget
    }
    /// What happens when a circuit breaker rejects an attempt.
    #[must_use]
    pub const fn circuit_open(&self) -> CircuitOpen {
        self.circuit_open
    }

    /// Whether the operation is safe to repeat; when not, every repeated attempt
    /// carries a warning flag.
    #[must_use]
    pub const fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// Checks every field; the builder calls this, so a built policy is valid.
    ///
    /// # Errors
    /// The first invalid field, as a [`PolicyError`] naming it.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.max_attempts == 0 {
            return Err(PolicyError::ZeroAttempts);
        }
        self.backoff.validate()?;
        self.jitter.validate()?;
        if self.min_delay > self.max_delay {
            return Err(PolicyError::MinAboveMax {
                min: self.min_delay,
                max: self.max_delay,
            });
        }
        if let HintMode::Override { min, max } = self.hints {
            if min > max {
                return Err(PolicyError::HintMinAboveMax { min, max });
            }
        }
        if self.budget == Some(Duration::ZERO) {
            return Err(PolicyError::ZeroDuration { field: "budget" });
        }
        if self.attempt_timeout == Some(Duration::ZERO) {
            return Err(PolicyError::ZeroDuration {
                field: "attempt_timeout",
            });
        }
        Ok(())
    }

    /// The curve's delay before retry `retry`, capped by `max_delay` and floored by
    /// `min_delay`, before jitter.
    #[must_use]
    pub fn capped_delay(&self, retry: u32) -> Duration {
        bounded(self.backoff.delay(retry), self.min_delay, self.max_delay)
    }

    /// The delay before retry `retry` (1-based) under `seed`, for every jitter kind
    /// but [`Jitter::Decorrelated`], whose draws depend on the previous delay (this
    /// method then treats the previous delay as the curve's initial one; the
    /// [`RetryMachine`](crate::RetryMachine) tracks the real one).
    #[must_use]
    #[inline]
    pub fn delay(&self, retry: u32, seed: u64) -> Duration {
        if let Some(d) = self.settled_exact(retry) {
            return d;
        }
        // Only decorrelated jitter reads the previous delay.
        let previous = match self.jitter {
            Jitter::Decorrelated => self.backoff.initial(),
            _ => Duration::ZERO,
        };
        self.curve_delay(retry, retry, seed, previous)
    }

    /// The policy with its plan worked out: the step from which the capped
    /// curve stops changing, what it settles at, and whether that value needs
    /// rounding. Only curves whose growth is exact or clearly above rounding
    /// error get a settling step (integer curves, flat curves, and exponential
    /// factors of at least 1.0001, whose computed powers then grow strictly);
    /// the rest keep `u32::MAX` and are computed in full at every step.
    fn planned(mut self) -> RetryPolicy {
        // Nothing from an earlier plan survives (a policy is compared whole).
        self.steady = Duration::ZERO;
        if !FAST_PATH {
            return self;
        }
        let flat = match self.backoff {
            Backoff::None | Backoff::Constant { .. } => true,
            Backoff::Linear { increment, .. } => increment.is_zero(),
            // A factor of 1 keeps the initial delay exactly while it converts
            // to `f64` exactly (below 2^53 ns, about 104 days).
            Backoff::Exponential { initial, factor } => {
                initial.is_zero()
                    || !(factor.is_finite() && factor >= 1.0)
                    || (factor <= 1.0 && initial.as_nanos() <= 1 << 53)
            }
            Backoff::Fibonacci { initial } => initial.is_zero(),
        };
        let monotone = match self.backoff {
            Backoff::Exponential { factor, .. } => factor >= 1.0001,
            _ => true,
        };
        let (step, at_max, settles) = if flat {
            (1, false, true)
        } else if monotone && self.capped_delay(u32::MAX) == self.max_delay {
            // The capped curve never decreases: the first step at the cap.
            let (mut lo, mut hi) = (1u32, u32::MAX);
            while lo < hi {
                let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
                if self.capped_delay(mid) == self.max_delay {
                    hi = mid;
                } else {
                    lo = mid.saturating_add(1);
                }
            }
            (lo, true, true)
        } else {
            (u32::MAX, false, false)
        };
        self.steady_step = step;
        self.plan = 0;
        if at_max {
            self.plan |= STEADY_IS_MAX;
        }
        if settles {
            self.plan |= SETTLES;
        }
        let steady = self.steady();
        let exact = match self.resolution {
            Resolution::Nanos => true,
            Resolution::Millis => steady.subsec_nanos() % 1_000_000 == 0,
        };
        if exact {
            self.plan |= STEADY_IS_EXACT;
        }
        if small_nanos(self.max_delay).is_some() && small_nanos(self.min_delay).is_some() {
            self.plan |= FAST_BOUNDS;
        }
        // A flat curve may settle at the cap too (an initial delay above it).
        if settles && steady == self.max_delay {
            self.plan |= STEADY_IS_MAX;
        }
        if steady == self.backoff.initial() {
            self.plan |= STEADY_IS_INITIAL;
        }
        if self.jitter.fraction() == Some(1.0) {
            self.plan |= WHOLE_FRACTION;
        }
        if settles && matches!(self.jitter, Jitter::None) {
            // Unjittered, a settled step's delay depends on nothing but the
            // settled curve value: worked out once, by the general path.
            let step = self.steady_step;
            self.steady = self.general_delay(step, step, 0, Duration::ZERO);
            self.plan |= STEADY_READY;
        } else if settles {
            self.steady = steady;
        }
        self
    }

    /// Whether the capped curve has settled by `step`.
    #[inline]
    const fn settled(&self, step: u32) -> bool {
        self.plan & SETTLES != 0 && step >= self.steady_step
    }

    /// The capped curve's value from `steady_step` on.
    #[inline]
    fn steady(&self) -> Duration {
        if self.plan & STEADY_IS_MAX != 0 {
            self.max_delay
        } else {
            bounded(self.backoff.initial(), self.min_delay, self.max_delay)
        }
    }

    /// The full curve computation. `retry` keys the jitter draw; `step` is the
    /// position on the curve (they differ after a pushback restarts the curve);
    /// `previous` is the previous delay (decorrelated jitter only).
    ///
    /// Policies whose delays all stay below about 292 years (every practical
    /// one) take a path in 64-bit whole nanoseconds ([`RetryPolicy::fast_delay`]);
    /// the rest the general one. Both give the same delay to the nanosecond.
    /// Once the capped curve has settled, an unjittered delay is the value
    /// worked out when the policy was made, and a jittered one starts from it.
    #[inline(always)]
    pub(crate) fn curve_delay(
        &self,
        retry: u32,
        step: u32,
        seed: u64,
        previous: Duration,
    ) -> Duration {
        // The plan is worked out only where the 64-bit path is compiled in;
        // elsewhere this branch is left out of the code altogether.
        if let Some(d) = self.settled_exact(step) {
            return d;
        }
        if FAST_PATH && self.settled(step) && self.plan & FAST_BOUNDS != 0 {
            if let Some(n) = self.settled_jittered(retry, seed, previous) {
                return Duration::from_nanos(n);
            }
        }
        self.unsettled_delay(retry, step, seed, previous)
    }

    /// The delay at `step` when the curve has settled there, is unjittered
    /// and needs no rounding: a stored value (the cap, the initial delay or
    /// the floor). `None` otherwise, and always where the 64-bit path is
    /// compiled out (the plan is not worked out there).
    #[inline(always)]
    fn settled_exact(&self, step: u32) -> Option<Duration> {
        if FAST_PATH && self.plan & STEADY_READY != 0 && step >= self.steady_step {
            Some(self.steady)
        } else {
            None
        }
    }

    /// A settled delay under jitter, on the 64-bit path (`FAST_BOUNDS` set).
    /// Kept out of line so that the unjittered answer above stays a few
    /// instructions wherever it is inlined.
    #[inline(never)]
    fn settled_jittered(&self, retry: u32, seed: u64, previous: Duration) -> Option<u64> {
        // `FAST_BOUNDS`: the cap, the floor and the settled value (stored in
        // `steady`, one of the three) are all below `FAST_SECS` seconds.
        let (max, min) = (fast_nanos(self.max_delay), fast_nanos(self.min_delay));
        self.fast_finish(fast_nanos(self.steady), max, min, retry, seed, previous)
    }

    /// [`RetryPolicy::curve_delay`] before the curve settles (or when it is not
    /// known to): the 64-bit path when it applies, else the general one.
    #[inline(never)]
    fn unsettled_delay(&self, retry: u32, step: u32, seed: u64, previous: Duration) -> Duration {
        match self.fast_delay(retry, step, seed, previous) {
            Some(n) => Duration::from_nanos(n),
            None => self.general_delay(retry, step, seed, previous),
        }
    }

    /// The general path of [`RetryPolicy::curve_delay`], in `Duration`s and
    /// 128-bit nanoseconds, for any bounds.
    pub(crate) fn general_delay(
        &self,
        retry: u32,
        step: u32,
        seed: u64,
        previous: Duration,
    ) -> Duration {
        let capped = self.capped_delay(step);
        self.jittered(
            capped,
            retry,
            seed,
            previous,
            self.max_delay,
            Duration::ZERO,
        )
    }

    /// [`RetryPolicy::curve_delay`] in 64-bit whole nanoseconds, when the cap
    /// (and so every bound) is below [`FAST_SECS`] seconds, and the initial and
    /// previous delays too under decorrelated jitter; `None` otherwise. Every
    /// value then fits a `u64` with room to double, the curve is capped as it
    /// is computed (a factor-2 curve is a shift, a Fibonacci curve stops adding
    /// at the cap), the jitter's multiply-high works on one word, and
    /// millisecond rounding is a remainder by a constant (a multiply, no
    /// division). The same arithmetic as the general path, step for step.
    #[inline]
    fn fast_delay(&self, retry: u32, step: u32, seed: u64, previous: Duration) -> Option<u64> {
        if !FAST_PATH {
            return None;
        }
        let max = small_nanos(self.max_delay)?;
        let min = small_nanos(self.min_delay)?;
        // `bounded`: floored, then capped.
        let n = if self.settled(step) {
            small_nanos(self.steady())?
        } else {
            self.fast_curve(step, max).max(min).min(max)
        };
        self.fast_finish(n, max, min, retry, seed, previous)
    }

    /// Jitters the bounded curve value `n` (at most `max`, both below
    /// [`FAST_SECS`] seconds), then floors it at `min` and rounds it: the
    /// 64-bit form of [`RetryPolicy::jittered`] with the policy's own cap and
    /// no extra floor. `None` when decorrelated jitter's inputs are too long.
    #[inline(always)]
    fn fast_finish(
        &self,
        n: u64,
        max: u64,
        min: u64,
        retry: u32,
        seed: u64,
        previous: Duration,
    ) -> Option<u64> {
        // `Jitter::draw_within` on one word: every value below 2^63 + 2^63.
        let draw = || jitter_draw_nanos(seed, retry, n);
        let (value, lo, hi) = match self.jitter {
            Jitter::None => (n, n, n),
            Jitter::Full => (uniform_below(draw(), n), 0, n),
            Jitter::Equal => {
                let lo = n / 2;
                (
                    lo.wrapping_add(uniform_below(draw(), n.wrapping_sub(lo))),
                    lo,
                    n,
                )
            }
            Jitter::Subtract(f) => {
                // d minus up to f·d: the draw counts down from the top.
                let s = self.span(n, f);
                (
                    n.saturating_sub(uniform_below(draw(), s)),
                    n.saturating_sub(s),
                    n,
                )
            }
            Jitter::Add(f) => {
                // `[n, n + span)`: s - 1 < 2^63, so the top fits.
                let top = self.span(n, f).saturating_sub(1);
                (
                    n.wrapping_add(uniform_below(draw(), top)),
                    n,
                    n.wrapping_add(top),
                )
            }
            _ => self.fast_other_jitter(n, max, draw(), previous)?,
        };
        let (lo, hi) = (lo.max(min), hi.max(min));
        let value = value.max(lo).min(hi);
        Some(match self.resolution {
            Resolution::Nanos => value,
            Resolution::Millis => {
                const MS: u64 = 1_000_000;
                // All values are below 2^64 - 2 ms: no sum below can wrap.
                let floor = |v: u64| v.wrapping_sub(v % MS);
                let ceil = |v: u64| match v % MS {
                    0 => v,
                    r => v.wrapping_add(MS.wrapping_sub(r)),
                };
                let (first, last) = (ceil(lo), floor(hi));
                // The nearest whole millisecond, halves up (`floor(v + ½ ms)`
                // is `ceil(v)` exactly when `v % ms >= ½ ms`, else `floor(v)`).
                let nearest = floor(value.wrapping_add(MS / 2));
                // Within the whole milliseconds inside `[lo, hi]`; when there
                // are none, within the floor and the cap (additive jitter's
                // top included).
                let (a, b) = if first <= last {
                    (first, last)
                } else {
                    (min, max.max(hi))
                };
                nearest.max(a).min(b)
            }
        })
    }

    /// `f · n` rounded down for the policy's jitter fraction `f` and `n`
    /// below 2^63: [`span64`], with a whole fraction and a delay below 2^53
    /// (where the product is exact) read off at once.
    #[inline(always)]
    fn span(&self, n: u64, f: f64) -> u64 {
        if self.plan & WHOLE_FRACTION != 0 && n < 1 << 53 {
            n
        } else {
            span64(n, f)
        }
    }

    /// The kinds [`RetryPolicy::fast_finish`] leaves to the 128-bit
    /// [`Jitter::draw_within_nanos`] (spread and decorrelated), as (value, lo,
    /// hi); `None` when decorrelated jitter's inputs are too long.
    #[inline(never)]
    fn fast_other_jitter(
        &self,
        n: u64,
        max: u64,
        draw: u64,
        previous: Duration,
    ) -> Option<(u64, u64, u64)> {
        let (initial, previous) = match self.jitter {
            Jitter::Decorrelated => (small_nanos(self.backoff.initial())?, small_nanos(previous)?),
            _ => (0, 0),
        };
        let (value, lo, hi) = self.jitter.draw_within_nanos(
            u128::from(n),
            draw,
            u128::from(initial),
            u128::from(previous),
            u128::from(max),
        );
        // Within `[0, 2 max + 1]`: one word each.
        Some((
            u64::try_from(value).ok()?,
            u64::try_from(lo).ok()?,
            u64::try_from(hi).ok()?,
        ))
    }

    /// The curve's delay before step `step`, capped at `max` nanoseconds (below
    /// 2^63): [`Backoff::delay`] followed by the cap, without ever computing
    /// past the cap.
    #[inline]
    fn fast_curve(&self, step: u32, max: u64) -> u64 {
        let steps = step.saturating_sub(1);
        // Below the cap, so below 2^63 ns.
        let below = |d: Duration| small_nanos(d.min(self.max_delay)).unwrap_or(max);
        let wide = |n: u128| u64::try_from(n.min(u128::from(max))).unwrap_or(max);
        match self.backoff {
            Backoff::None => 0,
            Backoff::Constant { delay } => below(delay),
            Backoff::Linear { initial, increment } => {
                // Both below 2^63, `steps` below 2^32: the sum fits a u128.
                let (a, b) = (u128::from(below(initial)), u128::from(below(increment)));
                wide(a.saturating_add(b.saturating_mul(u128::from(steps))))
            }
            Backoff::Exponential { initial, factor } => {
                let base = below(initial);
                if base == 0 || steps == 0 || base == max || !(factor.is_finite() && factor >= 1.0)
                {
                    return base;
                }
                // Exact integer path for the common factor 2 (an exact comparison
                // on purpose), as in `Backoff::delay`.
                #[allow(clippy::float_cmp)]
                let doubling = factor == 2.0;
                if doubling {
                    // base >= 1 and max < 2^63: 2^63 and beyond are past the cap.
                    return if steps >= 63 {
                        max
                    } else {
                        wide(u128::from(base) << steps)
                    };
                }
                #[allow(clippy::cast_precision_loss)]
                let scaled = base as f64 * powi(factor, steps);
                // Below 2^63, `as` truncates (and reads NaN as zero) exactly as the
                // general path's conversion to u128 does.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                if scaled >= 9_223_372_036_854_775_808.0 {
                    max
                } else {
                    (scaled as u64).min(max)
                }
            }
            Backoff::Fibonacci { initial } => {
                let base = u128::from(below(initial));
                if base == 0 || base == u128::from(max) {
                    return wide(base);
                }
                // F(94) and beyond saturate a u64: past any cap below 2^63.
                if step > 93 {
                    return max;
                }
                // F(step) with F(1) = F(2) = 1, stopping at the cap: at most 92
                // additions, usually a handful.
                let (mut a, mut b) = (0u64, 1u64);
                for _ in 1..step.max(1) {
                    if base.saturating_mul(u128::from(b)) >= u128::from(max) {
                        return max;
                    }
                    let next = a.saturating_add(b);
                    a = b;
                    b = next;
                }
                wide(base.saturating_mul(u128::from(b)))
            }
        }
    }

    /// Jitters `base`, then bounds and rounds it. `cap` is the ceiling the capping
    /// kinds respect (the policy's `max_delay`, or a larger honoured hint); `floor`
    /// is a lower bound on top of `min_delay` (an honoured hint, or zero).
    ///
    /// The result lies in the kind's interval (see [`Jitter`]) with both ends
    /// raised to the floor. Under millisecond resolution it is the whole
    /// millisecond nearest the jittered value *within* that interval; only an
    /// interval that holds no whole millisecond at all (narrower than one, as an
    /// unjittered 1.5 ms) gives the nearest whole millisecond instead, kept within
    /// the floor and the cap.
    pub(crate) fn jittered(
        &self,
        base: Duration,
        retry: u32,
        seed: u64,
        previous: Duration,
        cap: Duration,
        floor: Duration,
    ) -> Duration {
        // No randomness to draw for unjittered policies.
        let draw = match self.jitter {
            Jitter::None => 0,
            _ => jitter_draw(seed, retry, base),
        };
        let initial = self.backoff.initial();
        let (jittered, lo, hi) = self.jitter.draw_within(base, draw, initial, previous, cap);
        let floor = nanos(floor.max(self.min_delay));
        // Only durations are results: nothing past `Duration::MAX`.
        let top = nanos(Duration::MAX);
        // Only additive jitter's top may pass `Duration::MAX`; the floor and
        // every other end are durations.
        let (lo, hi) = (lo.max(floor), hi.max(floor).min(top));
        let value = jittered.max(lo).min(hi);
        if self.resolution == Resolution::Nanos {
            return from_nanos(value);
        }
        millis_within(value, lo, hi, floor, nanos(cap))
    }

    /// Rounds to the policy's resolution (the nearest whole millisecond,
    /// halves up; a value rounding up past the largest `Duration` gives
    /// `Duration::MAX`).
    #[cfg(test)]
    pub(crate) fn round(&self, d: Duration) -> Duration {
        match self.resolution {
            Resolution::Nanos => d,
            Resolution::Millis => from_nanos(nearest_millis(nanos(d))),
        }
    }
}

/// `value` (in `[lo, hi]`, all at most `Duration::MAX`) rounded to the whole
/// millisecond nearest it among those in `[lo, hi]`; when there are none,
/// the nearest whole millisecond kept within `floor` and `cap` (additive
/// jitter's top `hi` included).
#[inline(always)]
fn millis_within(value: u128, lo: u128, hi: u128, floor: u128, cap: u128) -> Duration {
    let (first, last) = (ceil_millis(lo), floor_millis(hi));
    let (a, b) = if first <= last {
        (first, last)
    } else {
        (floor, cap.max(hi))
    };
    // At most `hi` or the cap, so at most `Duration::MAX`.
    from_nanos(nearest_millis(value).max(a).min(b))
}

/// One millisecond in nanoseconds.
const MS: u128 = 1_000_000;

/// `n % 1 ms`, read off the sub-second part of `n` as a `Duration` (`n` at
/// most `Duration::MAX`): one 32-bit remainder, no wide division.
fn millis_rem(n: u128) -> u128 {
    u128::from(from_nanos(n).subsec_nanos() % 1_000_000)
}

/// `n` rounded down to a whole millisecond.
fn floor_millis(n: u128) -> u128 {
    n.wrapping_sub(millis_rem(n))
}

/// `n` rounded up to a whole millisecond (past `Duration::MAX` for `n` in its
/// last millisecond: an interval there holds no whole millisecond).
fn ceil_millis(n: u128) -> u128 {
    match millis_rem(n) {
        0 => n,
        r => n.wrapping_sub(r).wrapping_add(MS),
    }
}

/// The whole millisecond nearest `n`, halves up (past `Duration::MAX` when
/// `n` rounds up from its last millisecond; the callers bound it, and
/// `from_nanos` saturates).
fn nearest_millis(n: u128) -> u128 {
    if millis_rem(n) >= MS / 2 {
        ceil_millis(n)
    } else {
        floor_millis(n)
    }
}

/// Whether the 64-bit path and the settling step are compiled in: on 64-bit
/// targets, where they pay for their code. Elsewhere (a 32-bit microcontroller,
/// where code size counts most) every delay takes the general path; the
/// results are the same to the nanosecond either way.
const FAST_PATH: bool = cfg!(target_pointer_width = "64");

/// Below this many seconds a duration's nanoseconds fit a `u64` with room to
/// double: 9 × 10^18 ns < 2^63 ns (about 285 years).
pub(crate) const FAST_SECS: u64 = 9_000_000_000;

/// The whole duration in nanoseconds if it is below [`FAST_SECS`] seconds.
#[inline]
pub(crate) const fn small_nanos(d: Duration) -> Option<u64> {
    let secs = d.as_secs();
    if secs < FAST_SECS {
        // secs < 9e9 and the fraction < 1e9: at most 9e18 + 1e9 < 2^63.
        Some(
            secs.wrapping_mul(1_000_000_000)
                .wrapping_add(d.subsec_nanos() as u64),
        )
    } else {
        None
    }
}

/// The whole duration in nanoseconds for one known to be below
/// [`FAST_SECS`] seconds (checked when the policy was planned).
#[inline(always)]
const fn fast_nanos(d: Duration) -> u64 {
    d.as_secs()
        .wrapping_mul(1_000_000_000)
        .wrapping_add(d.subsec_nanos() as u64)
}

/// Uniform in `[0, x]` from one draw by multiply-high, for `x < 2^64 - 1`:
/// the one-word case of the jitter's uniform pick, with the same result.
#[inline]
fn uniform_below(draw: u64, x: u64) -> u64 {
    let range = u128::from(x.wrapping_add(1));
    // The high word of a 64 × 64-bit product; the truncation is the point.
    #[allow(clippy::cast_possible_truncation)]
    // draw < 2^64 and range <= 2^64: the product fits, nothing wraps.
    let pick = (u128::from(draw).wrapping_mul(range) >> 64) as u64;
    pick
}

/// `f · n` rounded down, for `n` below 2^63: the jitter's span on one word,
/// with the same `f64` arithmetic (a fraction outside `[0, 1]` is clamped; the
/// builder rejects it earlier). The product is at most 2^63.
#[inline]
fn span64(n: u64, f: f64) -> u64 {
    let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
    // n < 2^63 converts through i64 in one instruction, rounding as u64 does.
    #[allow(clippy::cast_possible_wrap, clippy::cast_precision_loss)]
    let product = (n as i64) as f64 * f;
    if product >= 9_223_372_036_854_775_808.0 {
        1 << 63
    } else {
        // Below 2^63 and not negative: `as` drops the fraction (rounding down).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let span = product as i64 as u64;
        span
    }
}

/// `d` floored at `lo` and then capped at `hi` (total even if `lo > hi`).
pub(crate) fn bounded(d: Duration, lo: Duration, hi: Duration) -> Duration {
    d.max(lo).min(hi)
}

impl fmt::Display for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::time::DisplayDuration as D;
        if self.attempts_are_unlimited() {
            f.write_str("unlimited attempts")?;
        } else {
            write!(f, "{} attempt(s)", self.max_attempts)?;
        }
        write!(
            f,
            ", {}, delays in [{}, {}], jitter {}",
            self.backoff,
            D(self.min_delay),
            D(self.max_delay),
            self.jitter
        )?;
        match self.hints {
            HintMode::Override { min, max } if max == Duration::MAX => {
                write!(f, ", hints override [{}, none]", D(min))?;
            }
            HintMode::Override { min, max } => {
                write!(f, ", hints override [{}, {}]", D(min), D(max))?;
            }
            HintMode::AtLeast { cap } => write!(f, ", hints at-least (cap {})", D(cap))?,
            HintMode::Ignore => f.write_str(", hints ignored")?,
        }
        if let Some(b) = self.budget {
            write!(f, ", budget {}", D(b))?;
        }
        if let Some(t) = self.attempt_timeout {
            write!(f, ", attempt timeout {}", D(t))?;
        }
        if self.cap_attempt_to_budget {
            f.write_str(", attempts capped at the budget")?;
        }
        if !self.retry_timeouts {
            f.write_str(", timeouts not retried")?;
        }
        if self.use_retry_budget {
            f.write_str(", retry budget")?;
        }
        if self.circuit_open == CircuitOpen::Wait {
            f.write_str(", waits out open circuits")?;
        }
        if !self.idempotent {
            f.write_str(", not idempotent")?;
        }
        Ok(())
    }
}

/// Builds a [`RetryPolicy`]; [`RetryPolicyBuilder::build`] validates every field.
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use]
pub struct RetryPolicyBuilder {
    policy: RetryPolicy,
    attempts: Option<u32>,
    retries: Option<u32>,
}

impl RetryPolicyBuilder {
    fn from_policy(policy: RetryPolicy) -> Self {
        RetryPolicyBuilder {
            policy,
            attempts: None,
            retries: None,
        }
    }

    /// The most attempts, the first included. `1` disables retrying;
    /// `u32::MAX` ([`RetryPolicy::UNLIMITED_ATTEMPTS`]) is no limit, as
    /// [`unlimited_attempts`](RetryPolicyBuilder::unlimited_attempts).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.attempts = Some(n);
        self
    }
    /// The most retries after the first attempt: `n` allows `n + 1` attempts
    /// (`u32::MAX` and `u32::MAX - 1` are no limit). `0` disables retrying.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.retries = Some(n);
        self
    }
    /// No limit on the number of attempts: the call retries until it succeeds or
    /// something else ends it (a permanent failure, cancellation, the total time
    /// budget or the shared retry budget when set). It is an attempt count like
    /// [`max_attempts`](RetryPolicyBuilder::max_attempts) (the later call wins);
    /// with [`max_retries`](RetryPolicyBuilder::max_retries) as well it is the
    /// same error as giving both counts.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::RetryPolicy;
    ///
    /// let policy = RetryPolicy::builder()
    ///     .unlimited_attempts()
    ///     .budget(Duration::from_secs(30)) // the time budget is what ends it
    ///     .build()?;
    /// assert!(policy.attempts_are_unlimited());
    /// assert_eq!(policy.max_attempts(), RetryPolicy::UNLIMITED_ATTEMPTS);
    /// # Ok::<(), retry_core::PolicyError>(())
    /// ```
    pub fn unlimited_attempts(mut self) -> Self {
        self.attempts = Some(RetryPolicy::UNLIMITED_ATTEMPTS);
        self
    }
    /// The backoff curve.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.policy.backoff = backoff;
        self
    }
    /// The cap on every curve delay.
    pub fn max_delay(mut self, d: Duration) -> Self {
        self.policy.max_delay = d;
        self
    }
    /// The floor on every curve delay (after jitter).
    pub fn min_delay(mut self, d: Duration) -> Self {
        self.policy.min_delay = d;
        self
    }
    /// The jitter kind.
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.policy.jitter = jitter;
        self
    }
    /// How delays are rounded.
    pub fn resolution(mut self, resolution: Resolution) -> Self {
        self.policy.resolution = resolution;
        self
    }
    /// How server hints are treated.
    pub fn hints(mut self, hints: HintMode) -> Self {
        self.policy.hints = hints;
        self
    }
    /// A total time budget for the whole call, or `None` for none.
    pub fn budget(mut self, budget: impl Into<Option<Duration>>) -> Self {
        self.policy.budget = budget.into();
        self
    }
    /// A per-attempt timeout, or `None` for none.
    pub fn attempt_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.policy.attempt_timeout = timeout.into();
        self
    }
    /// Cap each attempt's deadline at the budget's end (an option; see [time limits](crate::behaviour#time-budget-and-attempt-timeout)).
    pub fn cap_attempt_to_budget(mut self, cap: bool) -> Self {
        self.policy.cap_attempt_to_budget = cap;
        self
    }
    /// Whether a timed-out attempt is retried (default `true`).
    pub fn retry_timeouts(mut self, retry: bool) -> Self {
        self.policy.retry_timeouts = retry;
        self
    }

    /// Ask a shared retry budget before every retry (default `false`): the machine
    /// answers a retryable failure with [`Action::Withdraw`](crate::Action::Withdraw)
    /// first, and a refusal ends the call with
    /// [`GiveUpReason::RetryBudget`](crate::GiveUpReason::RetryBudget).
    pub fn use_retry_budget(mut self, use_it: bool) -> Self {
        self.policy.use_retry_budget = use_it;
        self
    }
    /// What to do when a circuit breaker rejects an attempt (default: give up).
    pub fn on_circuit_open(mut self, mode: CircuitOpen) -> Self {
        self.policy.circuit_open = mode;
        self
    }

    /// Whether the operation is safe to repeat (default `true`). A policy for a
    /// non-idempotent operation still retries, but every repeated
    /// [`Action::Attempt`](crate::Action::Attempt) carries a warning flag.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.policy.idempotent = idempotent;
        self
    }

    /// Validates and returns the policy.
    ///
    /// # Errors
    /// A [`PolicyError`] naming the first invalid field: zero attempts, both
    /// attempt counts, a bad factor or jitter fraction, `min_delay > max_delay`, an
    /// inverted hint clamp, a zero budget or timeout.
    pub fn build(self) -> Result<RetryPolicy, PolicyError> {
        let mut policy = self.policy;
        policy.max_attempts = match (self.attempts, self.retries) {
            (Some(_), Some(_)) => return Err(PolicyError::BothAttemptCounts),
            (Some(n), None) => n,
            (None, Some(r)) => r.saturating_add(1),
            (None, None) => policy.max_attempts,
        };
        policy.validate()?;
        Ok(policy.planned())
    }
}

#[cfg(feature = "arbitrary")]
impl<'a> arbitrary::Arbitrary<'a> for RetryPolicy {
    /// An arbitrary *valid* policy: raw values are drawn freely, then anything the
    /// builder would reject is mended (factor to 2, fractions clamped into [0, 1],
    /// swapped bounds put in order, zero budget or timeout dropped).
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut backoff: Backoff = u.arbitrary()?;
        if backoff.validate().is_err() {
            if let Backoff::Exponential { initial, .. } = backoff {
                backoff = Backoff::exponential(initial, 2.0);
            }
        }
        let clamp = |f: f64| if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
        let jitter = match u.arbitrary()? {
            Jitter::Subtract(f) => Jitter::Subtract(clamp(f)),
            Jitter::Add(f) => Jitter::Add(clamp(f)),
            Jitter::Spread(f) => Jitter::Spread(clamp(f)),
            other => other,
        };
        let (a, b): (Duration, Duration) = (u.arbitrary()?, u.arbitrary()?);
        let hints = match u.arbitrary()? {
            HintMode::Override { min, max } => HintMode::Override {
                min: min.min(max),
                max: min.max(max),
            },
            other => other,
        };
        let nonzero = |d: Option<Duration>| d.filter(|d| !d.is_zero());
        let policy = RetryPolicy {
            max_attempts: u.arbitrary::<u32>()?.max(1),
            backoff,
            max_delay: a.max(b),
            min_delay: a.min(b),
            jitter,
            resolution: u.arbitrary()?,
            hints,
            budget: nonzero(u.arbitrary()?),
            attempt_timeout: nonzero(u.arbitrary()?),
            cap_attempt_to_budget: u.arbitrary()?,
            retry_timeouts: u.arbitrary()?,
            use_retry_budget: u.arbitrary()?,
            circuit_open: u.arbitrary()?,
            idempotent: u.arbitrary()?,
            steady_step: u32::MAX,
            plan: 0,
            steady: Duration::ZERO,
        }
        .planned();
        debug_assert!(policy.validate().is_ok());
        Ok(policy)
    }
}

#[cfg(test)]
#[allow(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::indexing_slicing
)]
mod fast_path_tests {
    use super::*;
    use crate::retry::mix64;

    /// A small deterministic generator of test inputs.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(1);
            mix64(self.0)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// Durations around every boundary the paths care about: whole and
        /// fractional milliseconds, the fast path's limit, `Duration::MAX`.
        fn duration(&mut self) -> Duration {
            match self.below(8) {
                0 => Duration::ZERO,
                1 => Duration::from_nanos(self.below(5_000_000)),
                2 => Duration::from_millis(self.below(100_000)),
                3 => Duration::from_nanos(self.next() >> self.below(64)),
                4 => Duration::new(FAST_SECS - 1 + self.below(3), 999_999_999),
                5 => Duration::MAX,
                6 => Duration::new(self.next(), 0),
                _ => Duration::from_micros(self.below(10_000_000)),
            }
        }
        fn fraction(&mut self) -> f64 {
            [0.0, 0.1, 0.25, 0.5, 1.0, 0.333][self.below(6) as usize]
        }
    }

    /// Millisecond rounding on the sub-second part is the nanosecond-count
    /// formula it replaced (`(n + ½ ms) / ms · ms`, saturating at
    /// `Duration::MAX`), around every boundary up to `Duration::MAX`.
    #[test]
    fn millisecond_rounding_is_the_nanosecond_formula() {
        let policy = RetryPolicy::builder().build().unwrap_or_default();
        assert_eq!(policy.resolution, Resolution::Millis);
        let formula = |d: Duration| {
            let ms = 1_000_000u128;
            crate::retry::nanos::from_nanos((d.as_nanos() + ms / 2) / ms * ms)
        };
        let edges = [
            Duration::MAX,
            Duration::new(u64::MAX, 999_499_999),
            Duration::new(u64::MAX, 999_500_000),
            Duration::new(u64::MAX, 999_000_001),
            Duration::new(u64::MAX, 998_500_000),
            Duration::new(1, 499_999),
            Duration::new(1, 500_000),
            Duration::new(0, 999_500_000),
            Duration::ZERO,
        ];
        for d in edges {
            assert_eq!(policy.round(d), formula(d), "{d:?}");
        }
        let mut g = Gen(11);
        for _ in 0..200_000 {
            let d = g.duration();
            assert_eq!(policy.round(d), formula(d), "{d:?}");
        }
    }

    /// Rounding within an interval on nanosecond counts is the rounding on
    /// `Duration`s it replaced (kept here as the reference), for intervals
    /// of every width up to `Duration::MAX`, its last millisecond included.
    #[test]
    fn millisecond_rounding_within_is_the_duration_rounding() {
        const MS: u32 = 1_000_000;
        let floor_ms =
            |d: Duration| Duration::new(d.as_secs(), d.subsec_nanos() - d.subsec_nanos() % MS);
        let ceil_ms = |d: Duration| {
            if d.subsec_nanos() % MS == 0 {
                Some(d)
            } else {
                floor_ms(d).checked_add(Duration::from_millis(1))
            }
        };
        let round_ms = |d: Duration| {
            if d.subsec_nanos() % MS >= MS / 2 {
                ceil_ms(d).unwrap_or_else(|| floor_ms(d))
            } else {
                floor_ms(d)
            }
        };
        let round = |d: Duration| {
            if d.subsec_nanos() % MS >= MS / 2 {
                ceil_ms(d).unwrap_or(Duration::MAX)
            } else {
                floor_ms(d)
            }
        };
        let reference = |value: u128, lo: u128, hi: u128, floor: u128, cap: u128| {
            let d = crate::retry::nanos::from_nanos;
            let within = ceil_ms(d(lo))
                .filter(|first| *first <= floor_ms(d(hi)))
                .map(|first| round_ms(d(value)).max(first).min(floor_ms(d(hi))));
            match within {
                Some(x) => x,
                None => d((round(d(value)).as_nanos()).max(floor).min(cap.max(hi))),
            }
        };
        let top = Duration::MAX.as_nanos();
        let mut g = Gen(5);
        for i in 0..300_000u32 {
            let near = |g: &mut Gen| match g.below(4) {
                0 => top - u128::from(g.below(3_000_000)),
                1 => g.duration().as_nanos(),
                2 => u128::from(g.below(5_000_000)),
                _ => (u128::from(g.next()) << 64 | u128::from(g.next())) % (top + 1),
            };
            let mut v = [near(&mut g), near(&mut g), near(&mut g)];
            v.sort_unstable();
            let [lo, value, hi] = v;
            let (floor, cap) = (lo.min(near(&mut g)), hi.max(near(&mut g)).min(top));
            let floor = if i % 2 == 0 { floor } else { lo };
            assert_eq!(
                millis_within(value, lo, hi, floor, cap),
                reference(value, lo, hi, floor, cap),
                "{value} in [{lo}, {hi}], floor {floor}, cap {cap}"
            );
        }
    }

    /// The 64-bit path gives exactly what the general one gives, for every
    /// curve, jitter kind, resolution and bound, retry, step, seed and previous
    /// delay (500,000 random cases).
    #[test]
    fn the_fast_path_is_the_general_path() {
        let mut g = Gen(7);
        let mut fast_taken = 0u32;
        for _ in 0..500_000 {
            let backoff = match g.below(5) {
                0 => Backoff::None,
                1 => Backoff::constant(g.duration()),
                2 => Backoff::linear_by(g.duration(), g.duration()),
                3 => Backoff::exponential(
                    g.duration(),
                    [1.0, 1.5, 2.0, 3.0, 1.000_001, 10.0, 1.0001][g.below(7) as usize],
                ),
                _ => Backoff::fibonacci(g.duration()),
            };
            let jitter = match g.below(7) {
                0 => Jitter::None,
                1 => Jitter::Full,
                2 => Jitter::Equal,
                3 => Jitter::Decorrelated,
                4 => Jitter::Subtract(g.fraction()),
                5 => Jitter::Add(g.fraction()),
                _ => Jitter::Spread(g.fraction()),
            };
            let (a, b) = (g.duration(), g.duration());
            let resolution = if g.below(2) == 0 {
                Resolution::Millis
            } else {
                Resolution::Nanos
            };
            let policy = RetryPolicy::builder()
                .backoff(backoff)
                .jitter(jitter)
                .min_delay(a.min(b))
                .max_delay(a.max(b))
                .resolution(resolution)
                .build()
                .unwrap();
            let small = |g: &mut Gen| match g.below(4) {
                0 => 1 + g.below(10) as u32,
                1 => 1 + g.below(100) as u32,
                2 => g.next() as u32,
                _ => u32::MAX - g.below(2) as u32,
            };
            let (retry, step, seed) = (small(&mut g), small(&mut g), g.next());
            let previous = g.duration();
            let general = policy.general_delay(retry, step, seed, previous);
            if let Some(fast) = policy.fast_delay(retry, step, seed, previous) {
                fast_taken += 1;
                assert_eq!(
                    Duration::from_nanos(fast),
                    general,
                    "{policy} retry {retry} step {step} seed {seed} previous {previous:?}"
                );
            }
            assert_eq!(
                policy.curve_delay(retry, step, seed, previous),
                general,
                "{policy} retry {retry} step {step} seed {seed} previous {previous:?}"
            );
            // The public random-access delay, with its own early answer for
            // settled unjittered curves, is the general path at step = retry.
            let assumed_previous = match jitter {
                Jitter::Decorrelated => policy.backoff().initial(),
                _ => Duration::ZERO,
            };
            assert_eq!(
                policy.delay(retry, seed),
                policy.general_delay(retry, retry, seed, assumed_previous),
                "{policy} delay({retry}, {seed})"
            );
        }
        assert!(fast_taken > 150_000, "the fast path ran {fast_taken} times");
    }
}
