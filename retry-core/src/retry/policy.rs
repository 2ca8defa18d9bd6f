//! [`RetryPolicy`]: how many attempts, how long to wait between them, how to treat
//! server hints, and the time limits. Built and validated by [`RetryPolicyBuilder`].

use core::fmt;
use core::time::Duration;

use super::backoff::{fibonacci_below_cap, Backoff};
use super::error::PolicyError;
use super::jitter::{jitter_draw_nanos, scaled_pick, Jitter};
use super::nanos::{exact_nanos, from_nanos, millis_rem, sat_nanos};

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
#[cfg_attr(target_pointer_width = "32", repr(C))]
pub struct RetryPolicy {
    // On 32-bit targets the fields are in this order (and no other:
    // `repr(C)`), which keeps a default policy's zero fields (`min_delay`,
    // `steady`, the false flags) apart, each run short enough that making or
    // moving a policy is a few stores, not a call to clear memory, on
    // targets built for size. 64-bit targets keep the compiler's order.
    budget: Option<Duration>,
    min_delay: Duration,
    attempt_timeout: Option<Duration>,
    /// Worked out with `steady_step`, zero when the curve does not settle.
    /// With [`STEADY_READY`] (an unjittered policy): the whole answer for
    /// every settled step, rounded and bounded, returned as it is. Otherwise
    /// the settled capped curve value, the base of a settled jittered delay.
    steady: Duration,
    max_delay: Duration,
    backoff: Backoff,
    hints: HintMode,
    jitter: Jitter,
    max_attempts: u32,
    /// Worked out from the fields above whenever a policy is made
    /// ([`RetryPolicy::planned`]): from this step on the capped curve no
    /// longer changes (`u32::MAX` when that is not known).
    steady_step: u32,
    resolution: Resolution,
    retry_timeouts: bool,
    circuit_open: CircuitOpen,
    idempotent: bool,
    cap_attempt_to_budget: bool,
    /// Worked out with `steady_step`: [`SETTLES`], [`STEADY_READY`],
    /// [`JITTER_READY`].
    plan: u8,
    use_retry_budget: bool,
}

/// The curve settles (at `steady_step`); without it nothing is assumed.
const SETTLES: u8 = 4;
/// The curve settles and the policy is unjittered: from `steady_step` on,
/// every delay is the stored `steady`.
const STEADY_READY: u8 = 64;
/// The curve settles, the policy is jittered, and a settled delay takes the
/// short form ([`RetryPolicy::settled_jittered`]).
const JITTER_READY: u8 = 8;
/// The curve settles after its first step, and every delay before it takes a
/// short form on the step's capped curve value ([`RetryPolicy::early_answer`]):
/// unjittered, that value itself; with full jitter, the settled short form's
/// draw on it.
const EARLY_READY: u8 = 16;
/// The policy has no total time budget and no shared retry budget: a retry
/// after a failure with no hint sleeps the curve's delay, with nothing to
/// check it against ([`RetryPolicy::retries_plainly`]). Worked out whatever
/// the curve.
const PLAIN: u8 = 1;
/// With [`EARLY_READY`]: the curve is Fibonacci, whose early values are one
/// lookup and one multiply ([`fibonacci_below_cap`]).
const EARLY_FIBONACCI: u8 = 32;
/// With [`EARLY_READY`]: the curve doubles (an exponential factor of exactly
/// 2), whose early values are one shift.
const EARLY_DOUBLING: u8 = 128;

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
        self.backoff.validate_under(self.max_delay)?;
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
    /// `min_delay`, before jitter. Computed in `u64` nanoseconds: it saturates
    /// at `u64::MAX` ns (about 584.5 years), and so does a cap or floor above
    /// that (see [the rule](crate::behaviour#delays-in-64-bit-nanoseconds)).
    #[must_use]
    pub fn capped_delay(&self, retry: u32) -> Duration {
        from_nanos(self.capped_nanos(retry))
    }

    /// The interval the curve delay before retry `retry` is drawn from: the
    /// jitter kind's interval (see [`Jitter`]) around
    /// [`RetryPolicy::capped_delay`], both ends raised to `min_delay`. `None`
    /// for [`Jitter::Decorrelated`], whose interval depends on the delay
    /// drawn before.
    ///
    /// Every curve delay [`RetryPolicy::delay`] (and the
    /// [`RetryMachine`](crate::RetryMachine), for a curve sleep without a
    /// hint) gives lies in it; under millisecond resolution it is the whole
    /// millisecond nearest the drawn value within it, or, for an interval
    /// holding no whole millisecond (an unjittered 1.5 ms), the nearest whole
    /// millisecond. A program can show it next to the delay drawn: "1.4 s,
    /// jittered within 1 s to 2 s".
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{Backoff, Jitter, RetryPolicy};
    ///
    /// let policy = RetryPolicy::builder()
    ///     .backoff(Backoff::constant(Duration::from_secs(2)))
    ///     .jitter(Jitter::Equal)
    ///     .build()?;
    /// let second = Duration::from_secs(1);
    /// assert_eq!(policy.delay_interval(1), Some((second, 2 * second)));
    /// # Ok::<(), retry_core::PolicyError>(())
    /// ```
    #[must_use]
    pub fn delay_interval(&self, retry: u32) -> Option<(Duration, Duration)> {
        if matches!(self.jitter, Jitter::Decorrelated) {
            return None;
        }
        let (max, min) = (sat_nanos(self.max_delay), sat_nanos(self.min_delay));
        let (_, lo, hi) = self
            .jitter
            .draw_within_nanos(self.capped_nanos(retry), 0, 0, 0, max);
        Some((from_nanos(lo.max(min)), from_nanos(hi.max(min))))
    }

    /// [`RetryPolicy::capped_delay`] in nanoseconds (one copy on 32-bit
    /// targets).
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    pub(crate) fn capped_nanos(&self, retry: u32) -> u64 {
        let (max, min) = (sat_nanos(self.max_delay), sat_nanos(self.min_delay));
        // `bounded`: floored, then capped.
        self.backoff.capped_nanos(retry, max).max(min).min(max)
    }

    /// The longest delay the curve can give, for any retry, seed and previous
    /// delay: the top of the jitter's interval around `max_delay` (above it
    /// only for additive and spread jitter), or `max_delay`. Every curve delay
    /// lies in `[min_delay, longest_curve_delay()]` (`min_delay` counted at
    /// most `u64::MAX` ns). A restored sleep on the curve must too.
    pub(crate) fn longest_curve_delay(&self) -> Duration {
        from_nanos(self.longest_delay_from(sat_nanos(self.max_delay)))
    }

    /// The longest delay a hint honoured in at-least mode with `cap` can
    /// give: as [`RetryPolicy::longest_curve_delay`], around the longer of
    /// the cap and `max_delay` (the hint lifts the ceiling up to itself).
    pub(crate) fn longest_hinted_delay(&self, cap: Duration) -> Duration {
        let top = sat_nanos(cap).max(sat_nanos(self.max_delay));
        from_nanos(self.longest_delay_from(top))
    }

    /// The top of [`RetryPolicy::finish`]'s interval for base delays up to
    /// `top` capped at `top`, over every draw and previous delay: each kind's
    /// top grows with the base, decorrelated jitter's is the cap, and
    /// millisecond rounding stays within the interval or the cap.
    fn longest_delay_from(&self, top: u64) -> u64 {
        let initial = sat_nanos(self.backoff.initial());
        let (_, _, hi) = self
            .jitter
            .draw_within_nanos(top, 0, initial, u64::MAX, top);
        hi.max(top)
    }

    /// The delay before retry `retry` (1-based) under `seed`, for every jitter kind
    /// but [`Jitter::Decorrelated`], whose draws depend on the previous delay (this
    /// method then treats the previous delay as the curve's initial one; the
    /// [`RetryMachine`](crate::RetryMachine) tracks the real one).
    #[must_use]
    #[inline]
    pub fn delay(&self, retry: u32, seed: u64) -> Duration {
        if let Some(d) = self.short_delay(retry, retry, seed) {
            return d;
        }
        self.long_delay(retry, seed)
    }

    /// [`RetryPolicy::delay`] where [`RetryPolicy::short_delay`] has no
    /// answer.
    #[cfg_attr(target_pointer_width = "64", inline(never))]
    #[cfg_attr(not(target_pointer_width = "64"), inline)]
    fn long_delay(&self, retry: u32, seed: u64) -> Duration {
        // Only decorrelated jitter reads the previous delay.
        let previous = match self.jitter {
            Jitter::Decorrelated => self.backoff.initial(),
            _ => Duration::ZERO,
        };
        from_nanos(self.long_nanos(retry, retry, seed, previous))
    }

    /// The policy with its plan worked out: the step from which the capped
    /// curve stops changing, what it settles at, and, unjittered, the delay
    /// from there on. Only curves whose growth is exact or clearly above
    /// rounding error get a settling step (integer curves, flat curves, and
    /// exponential factors of at least 1.0001, whose computed powers then grow
    /// strictly); the rest keep `u32::MAX` and are computed in full at every
    /// step.
    fn planned(self) -> RetryPolicy {
        let mut planned = self.planned_curve();
        if PLAN && planned.budget.is_none() && !planned.use_retry_budget {
            planned.plan |= PLAIN;
        }
        planned
    }

    /// [`RetryPolicy::planned`] for the curve: the settling step, the
    /// settled value and the short forms.
    fn planned_curve(mut self) -> RetryPolicy {
        // Nothing from an earlier plan survives (a policy is compared whole).
        self.steady = Duration::ZERO;
        self.steady_step = u32::MAX;
        self.plan = 0;
        if !PLAN {
            return self;
        }
        let max = sat_nanos(self.max_delay);
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
        } else if monotone && self.capped_nanos(u32::MAX) == max {
            // The capped curve never decreases: the first step at the cap.
            let (mut lo, mut hi) = (1u32, u32::MAX);
            while lo < hi {
                let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
                if self.capped_nanos(mid) == max {
                    hi = mid;
                } else {
                    lo = mid.saturating_add(1);
                }
            }
            (lo, true, true)
        } else {
            (u32::MAX, false, false)
        };
        if !settles {
            return self;
        }
        self.steady_step = step;
        self.plan = SETTLES;
        let steady = if at_max { max } else { self.capped_nanos(1) };
        self.steady = from_nanos(steady);
        if matches!(self.jitter, Jitter::None) {
            // Unjittered, a settled step's delay depends on nothing but the
            // settled curve value: worked out once, by the path every delay
            // takes (reading the settled value just stored).
            self.steady = from_nanos(self.full_nanos(step, step, 0, Duration::ZERO));
            self.plan |= STEADY_READY;
        } else {
            self.plan_settled_jitter(steady);
        }
        if step > 1 && self.early_is_exact() {
            self.plan |= EARLY_READY
                | match self.backoff {
                    Backoff::Fibonacci { .. } => EARLY_FIBONACCI,
                    Backoff::Exponential { factor, .. }
                        if factor.to_bits() == super::binary64::TWO_BITS =>
                    {
                        EARLY_DOUBLING
                    }
                    _ => 0,
                };
        }
        self
    }

    /// Whether every delay before the curve settles is its short form (see
    /// [`EARLY_READY`]), from the policy's fields alone (whatever the step):
    /// - unjittered, the full computation bounds the capped curve value and
    ///   rounds it to the policy's resolution; the value is already bounded,
    ///   and under millisecond resolution it is a whole millisecond whenever
    ///   the floor, the cap and the curve's own durations are (a curve of
    ///   sums and doublings of whole milliseconds, saturating only past the
    ///   cap; an exponential factor other than 2 rounds its product to the
    ///   nanosecond, and is left out). The floor must be at most the curve's
    ///   first value, so that it moves no early value (the curve only grows
    ///   before it settles);
    /// - with full jitter the interval is `[0, n]` for the curve value `n`
    ///   (at most the cap): its ends are the short form's when there is no
    ///   floor, and under millisecond resolution `0` is a whole millisecond and
    ///   the top stays a millisecond below `u64::MAX` ns when the cap does.
    fn early_is_exact(&self) -> bool {
        let whole = |n: u64| self.resolution == Resolution::Nanos || millis_rem(n) == 0;
        let (max, min) = (sat_nanos(self.max_delay), sat_nanos(self.min_delay));
        match self.jitter {
            Jitter::None => {
                let curve = match self.backoff {
                    Backoff::None => true,
                    Backoff::Constant { delay } => whole(sat_nanos(delay)),
                    Backoff::Linear { initial, increment } => {
                        whole(sat_nanos(initial)) && whole(sat_nanos(increment))
                    }
                    Backoff::Exponential { initial, factor } => {
                        factor.to_bits() == super::binary64::TWO_BITS && whole(sat_nanos(initial))
                    }
                    Backoff::Fibonacci { initial } => whole(sat_nanos(initial)),
                };
                curve && whole(max) && whole(min) && self.backoff.capped_nanos(1, max) >= min
            }
            Jitter::Full => {
                min == 0 && (self.resolution == Resolution::Nanos || max <= u64::MAX - MS)
            }
            _ => false,
        }
    }

    /// The delay in nanoseconds at `step` before the curve settles, for a
    /// policy marked [`EARLY_READY`] (`step` below the settling one): the
    /// capped curve value at `step` (there the curve lies below the cap, and
    /// the floor is at most the curve's first value, see `early_is_exact`:
    /// neither moves it), as it is or jittered in the settled short form.
    #[inline]
    fn early_short(&self, retry: u32, step: u32, seed: u64) -> u64 {
        let n = self
            .closed_early_curve(step)
            .unwrap_or_else(|| self.capped_nanos(step));
        self.early_jittered(n, retry, seed)
    }

    /// The capped curve value at `step`, below the settling step of a policy
    /// marked [`EARLY_FIBONACCI`] (one lookup and one multiply) or
    /// [`EARLY_DOUBLING`] (one shift): nothing to saturate or cap there.
    /// `None` for the other curves.
    #[inline(always)]
    fn closed_early_curve(&self, step: u32) -> Option<u64> {
        if self.plan & EARLY_FIBONACCI != 0 {
            if let Backoff::Fibonacci { initial } = self.backoff {
                return Some(fibonacci_below_cap(exact_nanos(initial), step));
            }
        } else if self.plan & EARLY_DOUBLING != 0 {
            if let Backoff::Exponential { initial, .. } = self.backoff {
                return Some(exact_nanos(initial).wrapping_shl(step.saturating_sub(1)));
            }
        }
        None
    }

    /// The early short form on the capped curve value `n`: `n` itself
    /// unjittered; with full jitter (the only other kind marked),
    /// [`RetryPolicy::short_jittered`] for the interval `[0, n]`, without
    /// going through the kinds.
    #[inline(always)]
    fn early_jittered(&self, n: u64, retry: u32, seed: u64) -> u64 {
        match self.jitter {
            Jitter::None => n,
            _ => {
                let v = scaled_pick(jitter_draw_nanos(seed, retry, n), n.wrapping_add(1));
                match self.resolution {
                    Resolution::Nanos => v,
                    Resolution::Millis => (v.wrapping_add(MS / 2) / MS)
                        .wrapping_mul(MS)
                        .min(floor_millis(n)),
                }
            }
        }
    }

    /// Marks a jittered policy whose settled delay takes the short form of
    /// [`RetryPolicy::finish`] for the settled curve value `n`: the kind's
    /// interval is `base +` a pick in `[0, width]` with nothing saturating
    /// (see [`Jitter::affine_interval`]), neither the floor nor the cap
    /// moves its ends, and under millisecond resolution `base` is a whole
    /// millisecond and the top stays at least a millisecond below `u64::MAX`
    /// ns (rounding up never saturates). Otherwise nothing is marked and the
    /// delay is computed in full.
    fn plan_settled_jitter(&mut self, n: u64) {
        let (base, width, exact) = self.jitter.affine_interval(n);
        if !exact {
            return;
        }
        let top = base.wrapping_add(width);
        let (max, floor) = (sat_nanos(self.max_delay), sat_nanos(self.min_delay));
        // The interval `finish` clamps to (the draw only moves the value).
        let (_, lo, hi) = self.jitter.draw_within_nanos(n, 0, 0, 0, max);
        if lo.max(floor) != base || hi.max(floor) != top {
            return;
        }
        if self.resolution == Resolution::Millis && (millis_rem(base) != 0 || top > u64::MAX - MS) {
            return;
        }
        self.plan |= JITTER_READY;
    }

    /// The delay in nanoseconds at a step where the curve has settled, for
    /// a policy marked [`JITTER_READY`]: the draw, one pick and, under
    /// millisecond resolution, the rounding.
    ///
    /// This is [`RetryPolicy::finish`] with what the mark guarantees: the
    /// value `base + pick` already lies in `[base, top]`, the bounds there;
    /// the nearest whole millisecond to it is at least `base` (a whole
    /// millisecond itself) and is kept at or below the last whole
    /// millisecond in the interval, as `millis_within` keeps it.
    #[inline(always)]
    fn settled_jittered(&self, retry: u32, seed: u64) -> u64 {
        // Stored from a u64 of nanoseconds: no saturation check.
        self.short_jittered(exact_nanos(self.steady), retry, seed)
    }

    /// The short form of [`RetryPolicy::finish`] for the curve value `n`,
    /// where the plan found it exact: the settled value of a policy marked
    /// [`JITTER_READY`], or any step's value of one marked [`EARLY_READY`].
    #[inline(always)]
    fn short_jittered(&self, n: u64, retry: u32, seed: u64) -> u64 {
        // The interval the plan checked for this `n`: exact.
        let (base, width, _) = self.jitter.affine_interval(n);
        let draw = jitter_draw_nanos(seed, retry, n);
        // `width < u64::MAX` and `base + width` does not wrap.
        let v = base.wrapping_add(scaled_pick(draw, width.wrapping_add(1)));
        match self.resolution {
            Resolution::Nanos => v,
            // The nearest whole millisecond, halves up (at least a
            // millisecond below the top of the range: no wrap).
            Resolution::Millis => (v.wrapping_add(MS / 2) / MS)
                .wrapping_mul(MS)
                .min(floor_millis(base.wrapping_add(width))),
        }
    }

    /// Whether a retry after a failure with no hint is the curve's sleep and
    /// nothing else: no total time budget to fit it in, no shared retry
    /// budget to ask (see [`PLAIN`]; never without the plan).
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) const fn retries_plainly(&self) -> bool {
        self.plan & PLAIN != 0
    }

    /// Whether the capped curve has settled by `step`.
    #[inline]
    const fn settled(&self, step: u32) -> bool {
        self.plan & SETTLES != 0 && step >= self.steady_step
    }

    /// The full curve computation. `retry` keys the jitter draw; `step` is the
    /// position on the curve (they differ after a pushback restarts the curve);
    /// `previous` is the previous delay (decorrelated jitter only).
    ///
    /// Every delay is computed in `u64` nanoseconds (see
    /// [the rule](crate::behaviour#delays-in-64-bit-nanoseconds)). Once the
    /// capped curve has settled, an unjittered delay is the value worked out
    /// when the policy was made, and a jittered one starts from the settled
    /// curve value.
    #[inline(always)]
    pub(crate) fn curve_delay(
        &self,
        retry: u32,
        step: u32,
        seed: u64,
        previous: Duration,
    ) -> Duration {
        if let Some(d) = self.short_delay(retry, step, seed) {
            return d;
        }
        from_nanos(self.long_nanos(retry, step, seed, previous))
    }

    /// The delay at `step` where the plan has it in a few instructions:
    /// from the settling step on, the stored value of an unjittered policy
    /// ([`STEADY_READY`]) or the short form of a jittered one
    /// ([`JITTER_READY`]); before it, the early short form of a curve with a
    /// closed form here ([`EARLY_FIBONACCI`], [`EARLY_DOUBLING`]). `None`
    /// otherwise (the other early short forms included: they take a call),
    /// and always where the plan is not worked out. One compare of the step
    /// says which side of the settling step it is; nothing here calls out,
    /// so that wherever it is inlined it saves no registers.
    #[inline(always)]
    pub(crate) fn short_delay(&self, retry: u32, step: u32, seed: u64) -> Option<Duration> {
        if !PLAN {
            None
        } else if step >= self.steady_step {
            if self.plan & STEADY_READY != 0 {
                Some(self.steady)
            } else if self.plan & JITTER_READY != 0 {
                Some(from_nanos(self.settled_jittered(retry, seed)))
            } else {
                None
            }
        } else {
            let n = self.closed_early_curve(step)?;
            Some(from_nanos(self.early_jittered(n, retry, seed)))
        }
    }

    /// [`RetryPolicy::curve_delay`] in nanoseconds where
    /// [`RetryPolicy::short_delay`] has no answer: the other early short
    /// forms, or the full computation.
    #[cfg_attr(target_pointer_width = "64", inline(never))]
    #[cfg_attr(not(target_pointer_width = "64"), inline)]
    fn long_nanos(&self, retry: u32, step: u32, seed: u64, previous: Duration) -> u64 {
        if PLAN && self.plan & EARLY_READY != 0 && step < self.steady_step {
            return self.early_short(retry, step, seed);
        }
        self.full_nanos(retry, step, seed, previous)
    }

    /// [`RetryPolicy::short_delay`] from the settling step on (for tests).
    #[cfg(test)]
    fn settled_answer(&self, retry: u32, step: u32, seed: u64) -> Option<Duration> {
        if step < self.steady_step {
            return None;
        }
        self.short_delay(retry, step, seed)
    }

    /// [`RetryPolicy::short_delay`] before the settling step, in nanoseconds
    /// (for tests).
    #[cfg(test)]
    fn early_nanos(&self, retry: u32, step: u32, seed: u64) -> Option<u64> {
        (PLAN && self.plan & EARLY_READY != 0 && step < self.steady_step)
            .then(|| self.early_short(retry, step, seed))
    }

    /// [`RetryPolicy::curve_delay`] in nanoseconds, in full: the bounded
    /// curve value (the settled one from `steady_step` on), jittered, floored
    /// and rounded. Out of line, so that the short forms stay a few
    /// instructions wherever they are inlined (and do not pay for this
    /// one's registers).
    #[inline(never)]
    fn full_nanos(&self, retry: u32, step: u32, seed: u64, previous: Duration) -> u64 {
        let (max, min) = (sat_nanos(self.max_delay), sat_nanos(self.min_delay));
        let n = if self.settled(step) {
            // Stored from a u64 of nanoseconds: it converts back without a
            // saturation check.
            exact_nanos(self.steady)
        } else {
            self.backoff.capped_nanos(step, max).max(min).min(max)
        };
        self.finish(n, retry, seed, previous, max, min)
    }

    /// The delay for a retry whose curve value gives way to an honoured hint
    /// (`honoured`, in nanoseconds): `base` (the longer of the hint and the
    /// capped curve value) jittered, then bounded and rounded, with the hint
    /// as a floor on top of `min_delay` and a ceiling of `max_delay` or the
    /// hint, whichever is longer.
    ///
    /// The result lies in the kind's interval (see [`Jitter`]) with both ends
    /// raised to the floor. Under millisecond resolution it is the whole
    /// millisecond nearest the jittered value *within* that interval; only an
    /// interval that holds no whole millisecond at all (narrower than one, as an
    /// unjittered 1.5 ms) gives the nearest whole millisecond instead, kept within
    /// the floor and the cap. Every duration counts as at most `u64::MAX` ns.
    pub(crate) fn hinted(
        &self,
        base: u64,
        retry: u32,
        seed: u64,
        previous: Duration,
        honoured: u64,
    ) -> Duration {
        let (max, min) = (sat_nanos(self.max_delay), sat_nanos(self.min_delay));
        from_nanos(self.finish(
            base,
            retry,
            seed,
            previous,
            max.max(honoured),
            honoured.max(min),
        ))
    }

    /// [`RetryPolicy::jittered`] in nanoseconds (`floor` already raised to
    /// `min_delay`). One copy on 32-bit targets (shared by the curve and the
    /// hint paths), inlined on 64-bit ones.
    #[cfg_attr(target_pointer_width = "64", inline(always))]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    fn finish(
        &self,
        n: u64,
        retry: u32,
        seed: u64,
        previous: Duration,
        cap: u64,
        floor: u64,
    ) -> u64 {
        // No randomness to draw for unjittered policies, and only decorrelated
        // jitter reads the initial delay.
        let draw = match self.jitter {
            Jitter::None => 0,
            _ => jitter_draw_nanos(seed, retry, n),
        };
        let (initial, previous) = match self.jitter {
            Jitter::Decorrelated => (sat_nanos(self.backoff.initial()), sat_nanos(previous)),
            _ => (0, 0),
        };
        let (value, lo, hi) = self
            .jitter
            .draw_within_nanos(n, draw, initial, previous, cap);
        let (lo, hi) = (lo.max(floor), hi.max(floor));
        let value = value.max(lo).min(hi);
        match self.resolution {
            Resolution::Nanos => value,
            Resolution::Millis => millis_within(value, lo, hi, floor, cap),
        }
    }

    /// Rounds to the policy's resolution (the nearest whole millisecond,
    /// halves up; a value that would round up past `u64::MAX` ns gives the
    /// last whole millisecond below it).
    #[cfg(test)]
    pub(crate) fn round(&self, d: Duration) -> Duration {
        match self.resolution {
            Resolution::Nanos => d,
            Resolution::Millis => from_nanos(nearest_millis(sat_nanos(d))),
        }
    }
}

/// `value` (in `[lo, hi]`) rounded to the whole millisecond nearest it among
/// those in `[lo, hi]`; when there are none, the nearest whole millisecond
/// kept within `floor` and `cap` (additive jitter's top `hi` included).
#[inline]
fn millis_within(value: u64, lo: u64, hi: u64, floor: u64, cap: u64) -> u64 {
    let (first, last) = (ceil_millis(lo), floor_millis(hi));
    let (a, b) = if first <= last {
        (first, last)
    } else {
        (floor, cap.max(hi))
    };
    nearest_millis(value).max(a).min(b)
}

/// One millisecond in nanoseconds.
const MS: u64 = 1_000_000;

/// `n` rounded down to a whole millisecond.
#[inline]
fn floor_millis(n: u64) -> u64 {
    n.wrapping_sub(millis_rem(n))
}

/// `n` rounded up to a whole millisecond, saturating at `u64::MAX` (not a
/// whole millisecond: an interval starting in the last millisecond below it
/// holds none).
#[inline]
fn ceil_millis(n: u64) -> u64 {
    match millis_rem(n) {
        0 => n,
        r => n.wrapping_sub(r).saturating_add(MS),
    }
}

/// The whole millisecond nearest `n`, halves up; the last whole millisecond
/// below `u64::MAX` ns when rounding up would pass it.
#[inline]
fn nearest_millis(n: u64) -> u64 {
    let r = millis_rem(n);
    let down = n.wrapping_sub(r);
    if r >= MS / 2 {
        down.checked_add(MS).unwrap_or(down)
    } else {
        down
    }
}

/// Whether the settling step is worked out when a policy is made: on 64-bit
/// targets, where it pays for its code. Elsewhere (a 32-bit microcontroller,
/// where code size counts most) every delay is computed in full; the results
/// are the same to the nanosecond either way.
const PLAN: bool = cfg!(target_pointer_width = "64");

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
    /// The cap on every curve delay. It may not be below the curve's first
    /// delay (a constant curve's delay, the others' initial delay): such a cap
    /// would flatten every delay to itself, so
    /// [`build`](RetryPolicyBuilder::build) refuses it with
    /// [`PolicyError::MaxBelowInitial`], naming both.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{Backoff, PolicyError, RetryPolicy};
    ///
    /// let err = RetryPolicy::builder()
    ///     .backoff(Backoff::exponential(Duration::from_secs(2), 2.0))
    ///     .max_delay(Duration::from_secs(1))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err, PolicyError::MaxBelowInitial {
    ///     max: Duration::from_secs(1),
    ///     initial: Duration::from_secs(2),
    /// });
    /// assert_eq!(err.to_string(), "max_delay: 1s is below the curve's initial delay 2s");
    /// ```
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
    /// attempt counts, a bad factor or jitter fraction, `min_delay > max_delay`,
    /// `max_delay` below the curve's first delay, an inverted hint clamp, a zero
    /// budget or timeout.
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
        // The cap at least the curve's first delay.
        let (a, b) = (a, b.max(backoff.initial()));
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
mod delay_path_tests {
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
                4 => Duration::new(
                    18_446_744_072 + self.below(3),
                    709_551_614 + self.below(3) as u32,
                ),
                5 => Duration::MAX,
                6 => Duration::new(self.next(), 0),
                _ => Duration::from_micros(self.below(10_000_000)),
            }
        }
        fn fraction(&mut self) -> f64 {
            [0.0, 0.1, 0.25, 0.5, 1.0, 0.333][self.below(6) as usize]
        }
    }

    /// Millisecond rounding is the nanosecond-count formula
    /// (`(n + ½ ms) / ms · ms`, saturating at `u64::MAX` ns), around every
    /// boundary up to and past the saturation point.
    #[test]
    fn millisecond_rounding_is_the_nanosecond_formula() {
        let policy = RetryPolicy::builder().build().unwrap_or_default();
        assert_eq!(policy.resolution, Resolution::Millis);
        let formula = |d: Duration| {
            let ms = 1_000_000u128;
            let n = u128::from(sat_nanos(d));
            let up = (n + ms / 2) / ms * ms;
            Duration::from_nanos(u64::try_from(up).unwrap_or(u64::MAX / 1_000_000 * 1_000_000))
        };
        let top = Duration::from_nanos(u64::MAX);
        let edges = [
            Duration::MAX,
            top,
            top - Duration::from_nanos(51_615),
            top - Duration::from_nanos(51_616),
            top - Duration::from_nanos(1_051_615),
            top + Duration::from_nanos(1),
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
    /// `Duration`s (kept here as the reference), for intervals of every width
    /// up to `u64::MAX` ns, its last millisecond included.
    #[test]
    fn millisecond_rounding_within_is_the_duration_rounding() {
        const MS: u32 = 1_000_000;
        let floor_ms =
            |d: Duration| Duration::new(d.as_secs(), d.subsec_nanos() - d.subsec_nanos() % MS);
        let ceil_ms = |d: Duration| {
            if d.subsec_nanos() % MS == 0 {
                d
            } else {
                floor_ms(d) + Duration::from_millis(1)
            }
        };
        // Halves up, unless that passes u64::MAX ns: then down.
        let round = |d: Duration| {
            if d.subsec_nanos() % MS >= MS / 2 && ceil_ms(d) <= Duration::from_nanos(u64::MAX) {
                ceil_ms(d)
            } else {
                floor_ms(d)
            }
        };
        let reference = |value: u64, lo: u64, hi: u64, floor: u64, cap: u64| {
            let d = Duration::from_nanos;
            let first = ceil_ms(d(lo));
            let r = if first <= floor_ms(d(hi)) {
                round(d(value)).max(first).min(floor_ms(d(hi)))
            } else {
                round(d(value)).max(d(floor)).min(d(cap.max(hi)))
            };
            // Past the top only by rounding up: the last whole millisecond.
            u64::try_from(r.as_nanos()).unwrap_or(u64::MAX / 1_000_000 * 1_000_000)
        };
        let top = u64::MAX;
        let mut g = Gen(5);
        for i in 0..300_000u32 {
            let near = |g: &mut Gen| match g.below(4) {
                0 => top - g.below(3_000_000),
                1 => sat_nanos(g.duration()),
                2 => g.below(5_000_000),
                _ => g.next(),
            };
            let mut v = [near(&mut g), near(&mut g), near(&mut g)];
            v.sort_unstable();
            let [lo, value, hi] = v;
            let (floor, cap) = (lo.min(near(&mut g)), hi.max(near(&mut g)));
            let floor = if i % 2 == 0 { floor } else { lo };
            assert_eq!(
                millis_within(value, lo, hi, floor, cap),
                reference(value, lo, hi, floor, cap),
                "{value} in [{lo}, {hi}], floor {floor}, cap {cap}"
            );
        }
    }

    /// The delay path as it was before it moved to 64-bit nanoseconds,
    /// restated in exact 128-bit nanoseconds: the curve (hardware `f64` for
    /// exponential factors other than 2), the bounds, each jitter kind's
    /// interval and pick, the floor, and millisecond rounding within the
    /// interval. Valid for inputs below 2^62 ns (about 146 years), where no
    /// step reaches `u64::MAX` ns and the saturation rule changes nothing.
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    fn wide_reference(
        p: &RetryPolicy,
        retry: u32,
        step: u32,
        seed: u64,
        previous: Duration,
    ) -> Duration {
        let ns = |d: Duration| d.as_nanos();
        let steps = step.saturating_sub(1);
        let curve: u128 = match p.backoff {
            Backoff::None => 0,
            Backoff::Constant { delay } => ns(delay),
            Backoff::Linear { initial, increment } => {
                ns(initial) + ns(increment) * u128::from(steps)
            }
            Backoff::Exponential { initial, factor } => {
                let a = ns(initial);
                if a == 0 || steps == 0 {
                    a
                } else if factor.to_bits() == 2.0f64.to_bits() {
                    1u128
                        .checked_shl(steps)
                        .map_or(u128::MAX, |m| a.saturating_mul(m))
                } else {
                    (a as f64 * crate::retry::backoff::powi(factor, steps)) as u128
                }
            }
            Backoff::Fibonacci { initial } => {
                let (mut a, mut b) = (0u128, 1u128);
                for _ in 1..step.clamp(1, 200) {
                    (a, b) = (b, a.saturating_add(b));
                }
                ns(initial).saturating_mul(b)
            }
        };
        let (min, max) = (ns(p.min_delay), ns(p.max_delay));
        let n = curve.max(min).min(max);
        let draw = crate::retry::jitter_draw(seed, retry, Duration::from_nanos(n as u64));
        let pick = |x: u128| (u128::from(draw) * (x + 1)) >> 64;
        let span = |f: f64| (n as f64 * f) as u128;
        let (value, lo, hi) = match p.jitter {
            Jitter::None => (n, n, n),
            Jitter::Full => (pick(n), 0, n),
            Jitter::Equal => (n / 2 + pick(n - n / 2), n / 2, n),
            Jitter::Decorrelated => {
                let (i, top) = (ns(p.backoff.initial()), 3 * ns(previous));
                let hi = top.max(i);
                ((i + pick(hi - i)).min(max), i.min(max), hi.min(max))
            }
            Jitter::Subtract(f) => {
                let s = span(f);
                (n.saturating_sub(pick(s)), n.saturating_sub(s), n)
            }
            Jitter::Add(f) => {
                let w = span(f).saturating_sub(1);
                (n + pick(w), n, n + w)
            }
            Jitter::Spread(f) => {
                let s = span(f);
                let v = (n + pick(2 * s)).saturating_sub(s);
                (v.min(max), n.saturating_sub(s).min(max), (n + s).min(max))
            }
        };
        let (lo, hi) = (lo.max(min), hi.max(min));
        let value = value.max(lo).min(hi);
        let out = match p.resolution {
            Resolution::Nanos => value,
            Resolution::Millis => {
                let ms = 1_000_000u128;
                let (first, last) = (lo.div_ceil(ms) * ms, hi / ms * ms);
                let nearest = (value + ms / 2) / ms * ms;
                if first <= last {
                    nearest.max(first).min(last)
                } else {
                    nearest.max(min).min(max.max(hi))
                }
            }
        };
        Duration::from_nanos(out as u64)
    }

    /// The 64-bit delay path gives exactly what the 128-bit one gave, for
    /// every curve, jitter kind, resolution and bound, retry, step, seed and
    /// previous delay below 2^62 ns (500,000 random cases); and every result,
    /// whatever the inputs (up to `Duration::MAX`), is at most `u64::MAX` ns.
    #[test]
    fn the_delay_path_is_the_wide_one_below_saturation() {
        let mut g = Gen(7);
        let mut compared = 0u32;
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
                // A valid cap is at least the curve's first delay.
                .max_delay(a.max(b).max(backoff.initial()))
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
            let got = policy.curve_delay(retry, step, seed, previous);
            assert!(got <= Duration::from_nanos(u64::MAX), "{policy}");
            let limit = Duration::from_nanos(1 << 62);
            let below = |d: Duration| d < limit;
            let inputs = [
                policy.backoff.initial(),
                match backoff {
                    Backoff::Linear { increment, .. } => increment,
                    _ => Duration::ZERO,
                },
                policy.max_delay,
                previous,
            ];
            if inputs.iter().all(|d| below(*d)) {
                compared += 1;
                assert_eq!(
                    got,
                    wide_reference(&policy, retry, step, seed, previous),
                    "{policy} retry {retry} step {step} seed {seed} previous {previous:?}"
                );
            }
            // The public random-access delay, with its own early answer for
            // settled unjittered curves, is the machine's path at step = retry.
            let assumed_previous = match jitter {
                Jitter::Decorrelated => policy.backoff().initial(),
                _ => Duration::ZERO,
            };
            assert_eq!(
                policy.delay(retry, seed),
                policy.curve_delay(retry, retry, seed, assumed_previous),
                "{policy} delay({retry}, {seed})"
            );
            // Without the plan (the 32-bit build's path) the delay is the same.
            let unplanned = RetryPolicy {
                plan: 0,
                steady_step: u32::MAX,
                steady: Duration::ZERO,
                ..policy
            };
            assert_eq!(
                unplanned.curve_delay(retry, step, seed, previous),
                got,
                "{policy} unplanned"
            );
        }
        assert!(compared > 60_000, "compared {compared} times");
    }

    /// Every delay before the curve settles, in its short form (the policies
    /// the plan marks [`EARLY_READY`]), is the full computation's delay: the
    /// integer curves and others, whole and odd milliseconds, floors, caps,
    /// both resolutions, every step before the settling one, any retry and
    /// seed. Only unjittered and fully jittered policies are marked.
    #[test]
    fn the_early_short_form_is_the_full_computation() {
        let mut g = Gen(41);
        let (mut marked, mut compared) = (0u32, 0u32);
        for _ in 0..50_000 {
            let d = |g: &mut Gen| match g.below(4) {
                0 => Duration::from_millis(1 + g.below(10_000)),
                1 => Duration::from_secs(1 + g.below(100)),
                2 => Duration::from_nanos(1 + g.below(1 << 40)),
                _ => g.duration(),
            };
            let backoff = match g.below(5) {
                0 => Backoff::constant(d(&mut g)),
                1 => Backoff::exponential(d(&mut g), [2.0, 1.5, 3.0][g.below(3) as usize]),
                2 => Backoff::linear_by(d(&mut g), d(&mut g)),
                _ => Backoff::fibonacci(d(&mut g)),
            };
            let jitter = match g.below(6) {
                0 | 1 => Jitter::None,
                2 | 3 => Jitter::Full,
                4 => Jitter::Equal,
                _ => Jitter::Add(g.fraction()),
            };
            let (a, b) = (d(&mut g), d(&mut g));
            let min = if g.below(2) == 0 {
                Duration::ZERO
            } else {
                a.min(b)
            };
            let resolution = if g.below(3) == 0 {
                Resolution::Nanos
            } else {
                Resolution::Millis
            };
            let build = |max: Duration| {
                RetryPolicy::builder()
                    .backoff(backoff)
                    .jitter(jitter)
                    .min_delay(min)
                    .max_delay(max)
                    .resolution(resolution)
                    .build()
            };
            // A cap below the curve's first delay is refused: cap at the
            // first delay itself then (a curve flat from its start).
            let policy = match build(a.max(b)) {
                Err(PolicyError::MaxBelowInitial { initial, .. }) => build(initial.max(min)),
                built => built,
            }
            .unwrap();
            if policy.plan & EARLY_READY == 0 {
                continue;
            }
            marked += 1;
            assert!(matches!(jitter, Jitter::None | Jitter::Full), "{policy}");
            assert!(policy.steady_step > 1, "{policy}");
            let unplanned = RetryPolicy {
                plan: 0,
                steady_step: u32::MAX,
                steady: Duration::ZERO,
                ..policy
            };
            let last = policy.steady_step.saturating_add(2);
            let steps = (0..last.min(120)).chain([last.saturating_sub(3), last, u32::MAX]);
            for step in steps {
                let (retry, seed) = (g.next() as u32, g.next());
                let early = policy.early_nanos(retry, step, seed).map(from_nanos);
                assert_eq!(
                    early.is_some(),
                    step < policy.steady_step,
                    "{policy} step {step}"
                );
                let full = unplanned.curve_delay(retry, step, seed, Duration::ZERO);
                assert_eq!(
                    policy.curve_delay(retry, step, seed, Duration::ZERO),
                    full,
                    "{policy} retry {retry} step {step} seed {seed}"
                );
                if let Some(short) = early {
                    assert_eq!(
                        short, full,
                        "{policy} retry {retry} step {step} seed {seed}"
                    );
                    compared += 1;
                }
            }
        }
        assert!(marked > 5_000 && compared > 50_000, "{marked} {compared}");
    }

    /// A settled jittered delay in its short form (the policies the plan
    /// marks [`JITTER_READY`]) is the full computation's delay, and the
    /// machine's path with it: every kind, curve, bound and resolution,
    /// settled steps from the first to the last, any retry and seed. The
    /// kinds the short form does not cover are never marked.
    #[test]
    fn the_settled_jitter_short_form_is_the_full_computation() {
        let mut g = Gen(23);
        let (mut marked, mut compared) = (0u32, 0u32);
        for _ in 0..40_000 {
            let d = |g: &mut Gen| match g.below(3) {
                0 => Duration::from_millis(1 + g.below(10_000)),
                _ => g.duration(),
            };
            let backoff = match g.below(3) {
                0 => Backoff::constant(d(&mut g)),
                1 => Backoff::exponential(d(&mut g), [2.0, 1.5, 1.0][g.below(3) as usize]),
                _ => Backoff::fibonacci(d(&mut g)),
            };
            let jitter = match g.below(8) {
                0 => Jitter::None,
                1 => Jitter::Decorrelated,
                2 => Jitter::Subtract(g.fraction()),
                3 => Jitter::Equal,
                4 | 5 => Jitter::Add(g.fraction()),
                6 => Jitter::Spread(g.fraction()),
                _ => Jitter::Full,
            };
            let (a, b) = (d(&mut g), d(&mut g));
            let min = if g.below(2) == 0 {
                Duration::ZERO
            } else {
                a.min(b)
            };
            let resolution = if g.below(3) == 0 {
                Resolution::Nanos
            } else {
                Resolution::Millis
            };
            let policy = RetryPolicy::builder()
                .backoff(backoff)
                .jitter(jitter)
                .min_delay(min)
                .max_delay(a.max(b).max(backoff.initial()))
                .resolution(resolution)
                .build()
                .unwrap();
            if policy.plan & JITTER_READY == 0 {
                continue;
            }
            marked += 1;
            assert!(
                matches!(
                    jitter,
                    Jitter::Full | Jitter::Equal | Jitter::Add(_) | Jitter::Spread(_)
                ),
                "{policy}"
            );
            let unplanned = RetryPolicy {
                plan: 0,
                steady_step: u32::MAX,
                steady: Duration::ZERO,
                ..policy
            };
            for k in 0..16u32 {
                let step = match k {
                    0 => policy.steady_step,
                    1 => u32::MAX,
                    _ => policy.steady_step.saturating_add(g.below(1000) as u32),
                };
                let (retry, seed) = (g.next() as u32, g.next());
                let short = policy.settled_answer(retry, step, seed);
                assert_eq!(
                    short,
                    Some(from_nanos(policy.settled_jittered(retry, seed))),
                    "{policy} step {step}"
                );
                assert_eq!(
                    short,
                    Some(unplanned.curve_delay(retry, step, seed, Duration::ZERO)),
                    "{policy} retry {retry} step {step} seed {seed}"
                );
                assert_eq!(
                    policy.curve_delay(retry, step, seed, Duration::ZERO),
                    unplanned.curve_delay(retry, step, seed, Duration::ZERO),
                );
                compared += 1;
            }
            // Before the curve settles the short form does not apply.
            if policy.steady_step > 1 {
                assert_eq!(policy.settled_answer(1, 1, 0), None, "{policy}");
            }
        }
        assert!(marked > 8_000 && compared > 100_000, "{marked} {compared}");
    }
}
