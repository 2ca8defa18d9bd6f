//! Backoff curves: the delay before retry `r`, before any cap, floor or jitter.

use core::fmt;
use core::time::Duration;

use super::binary64;
use super::error::PolicyError;
use super::nanos::{from_nanos, sat_nanos};

/// The shape of the delays before successive retries (see [the rules](crate::behaviour#backoff-curves)).
///
/// Retry `r` (r = 1, 2, …) is attempt `r + 1`. The curve gives the raw delay before
/// retry `r`; the policy then caps it with `max_delay`, floors it with `min_delay`
/// and applies jitter. The curve is computed in whole nanoseconds in a `u64`:
/// a delay above `u64::MAX` ns (about 584.5 years) counts as `u64::MAX` ns, and
/// every result saturates there, for every `r` (see
/// [the rule](crate::behaviour#delays-in-64-bit-nanoseconds)).
///
/// ```
/// use core::time::Duration;
/// use retry_core::Backoff;
///
/// let exp = Backoff::exponential(Duration::from_secs(1), 2.0);
/// assert_eq!(exp.delay(1), Duration::from_secs(1));
/// assert_eq!(exp.delay(4), Duration::from_secs(8));
/// // Saturated at u64::MAX nanoseconds, about 584.5 years.
/// assert_eq!(exp.delay(u32::MAX), Duration::from_nanos(u64::MAX));
///
/// let fib = Backoff::fibonacci(Duration::from_millis(100));
/// let delays: Vec<_> = (1..=6).map(|r| fib.delay(r).as_millis()).collect();
/// assert_eq!(delays, [100, 100, 200, 300, 500, 800]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Backoff {
    /// No delay at all: every retry starts at once.
    None,
    /// The same delay before every retry.
    Constant {
        /// The delay.
        delay: Duration,
    },
    /// `initial + (r - 1) * increment`.
    Linear {
        /// The delay before retry 1.
        initial: Duration,
        /// Added for every further retry.
        increment: Duration,
    },
    /// `initial * factor^(r - 1)`.
    Exponential {
        /// The delay before retry 1.
        initial: Duration,
        /// The growth factor; any finite value >= 1.
        factor: f64,
    },
    /// Each delay is the sum of the previous two: `initial, initial, 2·initial,
    /// 3·initial, 5·initial, …`.
    Fibonacci {
        /// The delay before retries 1 and 2.
        initial: Duration,
    },
}

impl Default for Backoff {
    /// Exponential from 1 s, doubling.
    fn default() -> Self {
        Backoff::exponential(Duration::from_secs(1), 2.0)
    }
}

impl Backoff {
    /// A constant delay.
    #[must_use]
    pub const fn constant(delay: Duration) -> Backoff {
        Backoff::Constant { delay }
    }

    /// A linear curve whose increment equals its initial delay (the default increment, see [curves](crate::behaviour#backoff-curves)).
    #[must_use]
    pub const fn linear(initial: Duration) -> Backoff {
        Backoff::Linear {
            initial,
            increment: initial,
        }
    }

    /// A linear curve with its own increment.
    #[must_use]
    pub const fn linear_by(initial: Duration, increment: Duration) -> Backoff {
        Backoff::Linear { initial, increment }
    }

    /// An exponential curve: `initial × factor^(r − 1)` before retry `r`, so
    /// `initial` is the delay before the first retry. `factor` must be finite and
    /// at least 1; the policy builder rejects anything else with
    /// [`PolicyError::InvalidFactor`].
    ///
    /// Formulas written as `base × 2^attempt` differ only in where they count
    /// from; read off the delay before the first retry and pass that as
    /// `initial`:
    ///
    /// | formula | first delay | curve |
    /// |---|---|---|
    /// | `base × 2^n`, `n` = 0 for the first retry | `base` | `exponential(base, 2.0)` |
    /// | `base × 2^n`, `n` = 1 for the first retry (AWS's "exponential backoff and jitter", where `n` counts the retries) | `2 × base` | `exponential(2 * base, 2.0)` |
    /// | `base × 2^n`, `n` = the number of the failed attempt (1 for the first) | `2 × base` | `exponential(2 * base, 2.0)` |
    ///
    /// AWS's `base` is thus the delay before the first retry divided by 2. Its
    /// `min(cap, …)` is the policy's `max_delay`, and its "full jitter" is
    /// [`Jitter::Full`](crate::Jitter::Full).
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::Backoff;
    ///
    /// // sleep = base × 2^attempt with base = 100 ms, attempt = 1 for the first retry
    /// let base = Duration::from_millis(100);
    /// let aws = Backoff::exponential(base * 2, 2.0);
    /// for retry in 1..=5u32 {
    ///     assert_eq!(aws.delay(retry), base * 2u32.pow(retry));
    /// }
    /// // sleep = base × 2^n with n = 0 for the first retry
    /// let zero_based = Backoff::exponential(base, 2.0);
    /// assert_eq!(zero_based.delay(1), base);
    /// assert_eq!(zero_based.delay(4), base * 8);
    /// ```
    #[must_use]
    pub const fn exponential(initial: Duration, factor: f64) -> Backoff {
        Backoff::Exponential { initial, factor }
    }

    /// A Fibonacci curve.
    #[must_use]
    pub const fn fibonacci(initial: Duration) -> Backoff {
        Backoff::Fibonacci { initial }
    }

    /// The curve's name, as used in configs, command-line flags and metric labels.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Backoff::None => "none",
            Backoff::Constant { .. } => "constant",
            Backoff::Linear { .. } => "linear",
            Backoff::Exponential { .. } => "exponential",
            Backoff::Fibonacci { .. } => "fibonacci",
        }
    }

    /// The delay before retry 1 (zero for [`Backoff::None`]); decorrelated jitter
    /// draws from here upwards.
    #[must_use]
    pub const fn initial(&self) -> Duration {
        match *self {
            Backoff::None => Duration::ZERO,
            Backoff::Constant { delay } => delay,
            Backoff::Linear { initial, .. }
            | Backoff::Exponential { initial, .. }
            | Backoff::Fibonacci { initial } => initial,
        }
    }

    /// Checks the curve's parameters.
    ///
    /// # Errors
    /// [`PolicyError::InvalidFactor`] for an exponential factor that is NaN,
    /// infinite or below 1.
    pub fn validate(&self) -> Result<(), PolicyError> {
        match *self {
            Backoff::Exponential { factor, .. } if !binary64::is_factor(factor.to_bits()) => {
                Err(PolicyError::InvalidFactor { value: factor })
            }
            _ => Ok(()),
        }
    }

    /// [`Backoff::validate`], and the cap `max` at least the curve's first
    /// delay.
    pub(crate) fn validate_under(&self, max: Duration) -> Result<(), PolicyError> {
        let (initial, factor) = match *self {
            Backoff::None => return Ok(()),
            Backoff::Constant { delay } => (delay, None),
            Backoff::Linear { initial, .. } | Backoff::Fibonacci { initial } => (initial, None),
            Backoff::Exponential { initial, factor } => (initial, Some(factor)),
        };
        if let Some(value) = factor.filter(|f| !binary64::is_factor(f.to_bits())) {
            return Err(PolicyError::InvalidFactor { value });
        }
        if initial > max {
            return Err(PolicyError::MaxBelowInitial { max, initial });
        }
        Ok(())
    }

    /// The raw delay before retry `retry` (1-based; 0 is read as 1), saturating at
    /// `u64::MAX` nanoseconds (about 584.5 years). No cap, floor or jitter is
    /// applied here.
    #[must_use]
    pub fn delay(&self, retry: u32) -> Duration {
        from_nanos(self.capped_nanos(retry, u64::MAX))
    }

    /// [`Backoff::delay`] in nanoseconds, capped at `max`: the curve's value
    /// before retry `retry`, never computed past the cap (a Fibonacci curve
    /// stops adding there).
    #[inline]
    pub(crate) fn capped_nanos(&self, retry: u32, max: u64) -> u64 {
        let steps = retry.saturating_sub(1);
        let base = sat_nanos(self.initial());
        match *self {
            Backoff::None | Backoff::Constant { .. } => base.min(max),
            Backoff::Linear { increment, .. } => {
                mul_add(sat_nanos(increment), steps, base).min(max)
            }
            Backoff::Exponential { factor, .. } => exponential(base, factor, steps).min(max),
            Backoff::Fibonacci { .. } if cfg!(target_pointer_width = "64") => {
                fibonacci_nanos(base, retry, max)
            }
            Backoff::Fibonacci { .. } => fibonacci_added(base, retry, max),
        }
    }
}

/// `base · F(retry)` (retry 0 read as 1), saturating, capped at `max`: one
/// lookup and one multiply, the same for every retry number (past F(93) the
/// product saturates for any `base` of at least 1 ns). The 64-bit targets'
/// form of the Fibonacci curve.
#[inline(always)]
pub(crate) fn fibonacci_nanos(base: u64, retry: u32, max: u64) -> u64 {
    let f = usize::try_from(retry.max(1))
        .ok()
        .and_then(|r| FIBONACCI.get(r))
        .copied()
        .unwrap_or(u64::MAX);
    base.saturating_mul(f).min(max)
}

/// `base · F(retry)` (retry 0 read as 1) for a retry at which the
/// Fibonacci curve from `base` lies below its cap: nothing saturates and
/// nothing is capped, so it is one lookup and one multiply, with no check
/// (the curve passes any cap by F(94), so such a retry is at most 93; the
/// table's index is masked into it whatever the retry). 64-bit targets only.
#[inline(always)]
pub(crate) fn fibonacci_below_cap(base: u64, retry: u32) -> u64 {
    let f = FIBONACCI_FROM_ONE
        .get(usize::try_from(retry & 127).unwrap_or(0))
        .copied()
        .unwrap_or(u64::MAX);
    base.wrapping_mul(f)
}

/// F(r) for r from 0 (read as 1, as retry 0 is) up to 93, then `u64::MAX`
/// (past the last that fits), 128 of them, for [`fibonacci_below_cap`].
// Worked out while compiling: an index out of range would fail the build.
#[allow(clippy::indexing_slicing)]
const FIBONACCI_FROM_ONE: [u64; 128] = {
    let mut table = [u64::MAX; 128];
    let mut r = 0;
    while r < FIBONACCI.len() {
        table[r] = FIBONACCI[r];
        r += 1;
    }
    table[0] = 1;
    table
};

/// `base · F(retry)` (retry 0 read as 1) capped at `max`, by adding the two
/// before it up to the cap: exact while it fits, at most 92 additions (F(94)
/// · 1 ns is past `u64::MAX`). The form of targets without the table.
#[inline]
fn fibonacci_added(base: u64, retry: u32, max: u64) -> u64 {
    if base == 0 {
        return 0;
    }
    let (mut a, mut b) = (0u64, base);
    for _ in 1..retry {
        if b >= max {
            break;
        }
        let next = a.saturating_add(b);
        a = b;
        b = next;
    }
    b.min(max)
}

/// The Fibonacci numbers F(0) = 0, F(1) = F(2) = 1, … up to F(93), the last
/// that fits a `u64`, for the 64-bit targets' closed form of the curve (the
/// others add up to the cap, which takes no table and no 64-bit multiply).
// Worked out while compiling: an index out of range would fail the build.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const FIBONACCI: [u64; 94] = {
    let mut table = [0u64; 94];
    table[1] = 1;
    let mut r = 2;
    while r < table.len() {
        table[r] = table[r - 1].wrapping_add(table[r - 2]);
        r += 1;
    }
    table
};

/// `a · k + b`, saturating at `u64::MAX`, in 32-bit halves (a 64-bit
/// overflow check is a library call on 32-bit targets).
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
fn mul_add(a: u64, k: u32, b: u64) -> u64 {
    let k = u64::from(k);
    // Each half times k fits a u64.
    let low = (a & 0xFFFF_FFFF).wrapping_mul(k);
    let high = (a >> 32).wrapping_mul(k);
    if high >> 32 != 0 {
        return u64::MAX;
    }
    (high << 32).saturating_add(low).saturating_add(b)
}

impl fmt::Display for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::time::DisplayDuration as D;
        match *self {
            Backoff::None => f.write_str("none"),
            Backoff::Constant { delay } => write!(f, "constant {}", D(delay)),
            Backoff::Linear { initial, increment } => {
                write!(f, "linear {} +{}", D(initial), D(increment))
            }
            Backoff::Exponential { initial, factor } => {
                write!(f, "exponential {} x{factor}", D(initial))
            }
            Backoff::Fibonacci { initial } => write!(f, "fibonacci {}", D(initial)),
        }
    }
}

/// `base * factor^steps` for the initial delay's nanoseconds `base`,
/// saturating at `u64::MAX`: the `f64` computation
/// `(base as f64 * powi(factor, steps)) as u64`. On 64-bit targets it is made
/// in hardware; elsewhere in integers ([`binary64`]) with the rounding
/// IEEE-754 multiplication has everywhere, so the result is identical on every
/// platform, with or without a floating-point unit.
#[inline]
fn exponential(base: u64, factor: f64, steps: u32) -> u64 {
    let bits = factor.to_bits();
    // An invalid factor cannot get past the builder; be total anyway.
    if base == 0 || steps == 0 || !binary64::is_factor(bits) {
        return base;
    }
    // Exact integer path for the common factor 2: `base · 2^steps` is a
    // shift, and overflows exactly when the shift would push out a set bit.
    if bits == binary64::TWO_BITS {
        return if steps <= base.leading_zeros() {
            // `base` is not zero: at most 63 leading zeros.
            base << steps
        } else {
            u64::MAX
        };
    }
    if cfg!(target_pointer_width = "64") {
        // `as` saturates at u64::MAX (an infinite power included) and drops
        // the fraction.
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let scaled = (base as f64 * powi(factor, steps)) as u64;
        scaled
    } else {
        binary64::scale(base, bits, steps)
    }
}

/// `x^n` by repeated squaring (core has no `powi` without std): the 64-bit
/// path's hardware form of [`binary64::Float::powi`], with the same result
/// (compiled out with that path on other targets).
pub(crate) fn powi(mut x: f64, mut n: u32) -> f64 {
    let mut acc = 1.0_f64;
    while n > 0 {
        if n & 1 == 1 {
            acc *= x;
        }
        n >>= 1;
        if n > 0 {
            x *= x;
        }
        if acc.is_infinite() {
            break;
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's closed form (64-bit targets) and the additions up to the
    /// cap (the others) give the same curve: every retry number up to past
    /// the table's end, initial delays and caps from 1 ns to `u64::MAX`.
    #[test]
    fn the_fibonacci_table_is_the_sum_up_to_the_cap() {
        let values = [
            0,
            1,
            2,
            7,
            999_999,
            1_000_000,
            1_000_000_000,
            60_000_000_000,
            1 << 40,
            u64::MAX / 3,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut checked = 0u32;
        for base in values {
            for max in values {
                for retry in 0..=200u32 {
                    let table = Backoff::Fibonacci {
                        initial: Duration::from_nanos(base),
                    }
                    .capped_nanos(retry, max);
                    assert_eq!(
                        table,
                        fibonacci_added(base, retry, max),
                        "{base} {retry} {max}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 25_000);
        assert_eq!(FIBONACCI[93], fibonacci(93));
    }

    /// The r-th Fibonacci number with F(1) = F(2) = 1, saturating at
    /// `u64::MAX` (F(93) is the last that fits): the reference.
    fn fibonacci(r: u32) -> u64 {
        if r > 93 {
            return u64::MAX;
        }
        let (mut a, mut b) = (0u64, 1u64);
        for _ in 1..r.max(1) {
            let next = a.saturating_add(b);
            a = b;
            b = next;
        }
        b
    }

    /// The saturation rule as a reference: a value in 128-bit nanoseconds
    /// (exact for every curve below) cut to `u64::MAX` ns.
    fn sat(n: u128) -> Duration {
        Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
    }

    /// Inputs around the saturation point: `u64::MAX` ns, one below and
    /// above, and `Duration::MAX`.
    const TOP: Duration = Duration::new(18_446_744_073, 709_551_615);

    /// Doubling by shift is the saturating multiply by `2^steps`, for every
    /// step count and initial delays from 1 ns to past `u64::MAX` ns.
    #[test]
    fn doubling_is_the_saturating_multiply() {
        let initials = [
            Duration::from_nanos(1),
            Duration::from_nanos(3),
            Duration::from_millis(100),
            Duration::new(1 << 20, 999_999_999),
            TOP - Duration::from_nanos(1),
            TOP,
            TOP + Duration::from_nanos(1),
            Duration::MAX,
        ];
        for initial in initials {
            let n = u128::from(sat_nanos(initial));
            for r in 1..=200u32 {
                let expected = match 1u128.checked_shl(r - 1) {
                    Some(m) => sat(n.saturating_mul(m)),
                    None => TOP,
                };
                let b = Backoff::exponential(initial, 2.0);
                assert_eq!(b.delay(r), expected, "{initial:?} {r}");
            }
        }
    }

    /// Linear and Fibonacci curves in saturating 64-bit nanoseconds are the
    /// exact 128-bit formulas cut at `u64::MAX` ns, for inputs past it too.
    #[test]
    fn integer_curves_are_the_saturating_formulas() {
        let values = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(100),
            Duration::new(1 << 33, 5),
            Duration::new(u64::MAX / 3_000_000_000, 1),
            TOP - Duration::from_nanos(1),
            TOP,
            TOP + Duration::from_nanos(1),
            Duration::new(u64::MAX / 3, 1),
            Duration::MAX,
        ];
        for a in values {
            let an = u128::from(sat_nanos(a));
            for b in values {
                let bn = u128::from(sat_nanos(b));
                for r in [0, 1, 2, 3, 50, 93, 94, 95, 1000, u32::MAX - 1, u32::MAX] {
                    let steps = u128::from(r.saturating_sub(1));
                    assert_eq!(
                        Backoff::linear_by(a, b).delay(r),
                        sat(an + bn * steps),
                        "{a:?} {b:?} {r}"
                    );
                }
            }
            for r in (0..=200).chain([u32::MAX]) {
                assert_eq!(
                    Backoff::fibonacci(a).delay(r),
                    sat(an.saturating_mul(u128::from(fibonacci(r)))),
                    "{a:?} {r}"
                );
                // Capped at every point around the value: the early stop at
                // the cap gives the capped value.
                let exact = an.saturating_mul(u128::from(fibonacci(r)));
                for cap in [exact.saturating_sub(1), exact, exact + 1, 0, 1] {
                    let cap64 = u64::try_from(cap).unwrap_or(u64::MAX);
                    assert_eq!(
                        u128::from(Backoff::fibonacci(a).capped_nanos(r, cap64)),
                        exact.min(u128::from(cap64)),
                        "{a:?} {r} {cap}"
                    );
                }
            }
        }
        let mut z = 5u64;
        for _ in 0..200_000 {
            z = crate::retry::mix64(z);
            let (a, k, b) = (z, u32::try_from(z >> 32).unwrap(), crate::retry::mix64(z));
            let exact = u128::from(a) * u128::from(k) + u128::from(b);
            assert_eq!(
                mul_add(a >> (k % 64), k, b >> (k % 61)),
                u64::try_from(
                    u128::from(a >> (k % 64)) * u128::from(k) + u128::from(b >> (k % 61))
                )
                .unwrap_or(u64::MAX)
            );
            assert_eq!(mul_add(a, k, b), u64::try_from(exact).unwrap_or(u64::MAX));
        }
    }

    /// Exponential curves with any factor are the hardware `f64` formula,
    /// saturating at `u64::MAX` ns, huge factors and initial delays past the
    /// saturation point included.
    #[test]
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    fn exponential_curves_are_the_float_formula() {
        // Factor 2 is an exact shift (`doubling_is_the_saturating_multiply`).
        let factors = [
            1.0,
            1.000_001,
            1.0001,
            1.5,
            1.999,
            3.0,
            10.0,
            1e300,
            f64::MAX,
        ];
        let initials = [
            Duration::from_nanos(1),
            Duration::from_millis(100),
            Duration::new(1 << 33, 5),
            TOP - Duration::from_nanos(1),
            TOP,
            TOP + Duration::from_nanos(1),
            Duration::MAX,
        ];
        for f in factors {
            for initial in initials {
                let n = sat_nanos(initial);
                for r in (2..=130).chain([1000, u32::MAX]) {
                    let expected = (n as f64 * powi(f, r - 1)) as u64;
                    let b = Backoff::exponential(initial, f);
                    assert_eq!(sat_nanos(b.delay(r)), expected, "{initial:?} {f} {r}");
                    assert_eq!(sat_nanos(b.delay(1)), n, "{initial:?} {f}");
                    assert_eq!(
                        binary64::scale(n, f.to_bits(), r - 1),
                        expected,
                        "{initial:?} {f} {r}"
                    );
                }
            }
        }
    }

    #[test]
    fn worked_curves() {
        let ms = Duration::from_millis;
        assert_eq!(Backoff::None.delay(7), Duration::ZERO);
        assert_eq!(Backoff::constant(ms(5)).delay(9), ms(5));
        assert_eq!(Backoff::linear(ms(100)).delay(3), ms(300));
        assert_eq!(Backoff::linear_by(ms(100), ms(10)).delay(3), ms(120));
        assert_eq!(Backoff::exponential(ms(5), 2.0).delay(3), ms(20));
        assert_eq!(Backoff::exponential(ms(100), 1.5).delay(3), ms(225));
        // Odd powers take the multiply-into-accumulator branch of the squaring.
        assert_eq!(
            Backoff::exponential(ms(100), 1.5).delay(4),
            Duration::from_micros(337_500)
        );
        assert_eq!(
            Backoff::exponential(ms(1), 3.0).delay(8),
            ms(2187),
            "3^7 by squaring"
        );
        assert_eq!(Backoff::exponential(ms(100), 1.0).delay(1000), ms(100));
        assert_eq!(Backoff::fibonacci(ms(1)).delay(10), ms(55));
        assert_eq!(Backoff::fibonacci(ms(1)).delay(0), ms(1));
    }

    #[test]
    fn saturates_everywhere() {
        let big = Duration::MAX;
        let top = Duration::from_nanos(u64::MAX);
        for r in [1, 2, 64, 93, 94, 127, 128, 129, u32::MAX] {
            assert!(Backoff::linear(big).delay(r) <= top, "{r}");
            assert!(Backoff::fibonacci(big).delay(r) <= top, "{r}");
            assert!(Backoff::exponential(big, 2.0).delay(r) <= top, "{r}");
            assert!(Backoff::exponential(big, 1.0000001).delay(r) <= top, "{r}");
            assert!(
                Backoff::exponential(Duration::from_nanos(1), f64::MAX).delay(r) <= top,
                "{r}"
            );
        }
        assert_eq!(
            Backoff::exponential(Duration::from_secs(1), 2.0).delay(200),
            top
        );
        assert_eq!(
            Backoff::exponential(Duration::from_secs(1), 3.0).delay(u32::MAX),
            top
        );
        assert_eq!(Backoff::linear(big).delay(2), top);
        assert_eq!(Backoff::constant(big).delay(2), top);
        assert_eq!(Backoff::fibonacci(big).delay(1), top);
        assert_eq!(fibonacci(93), 12_200_160_415_121_876_738);
        assert_eq!(fibonacci(94), u64::MAX);
    }

    #[test]
    fn an_unvalidated_bad_factor_keeps_the_initial_delay() {
        // The builder rejects these; `delay` is still total and keeps `initial`.
        for bad in [0.5, 0.0, -3.0, f64::NAN, f64::INFINITY] {
            let b = Backoff::exponential(Duration::from_secs(1), bad);
            assert_eq!(b.delay(5), Duration::from_secs(1), "{bad}");
        }
    }

    #[test]
    fn validation_names_the_factor() {
        for bad in [f64::NAN, f64::INFINITY, 0.5, -2.0, f64::NEG_INFINITY] {
            let err = Backoff::exponential(Duration::from_secs(1), bad)
                .validate()
                .unwrap_err();
            assert_eq!(err.field(), "factor");
        }
        assert!(Backoff::exponential(Duration::from_secs(1), 1.0)
            .validate()
            .is_ok());
    }
}
