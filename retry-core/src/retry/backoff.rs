//! Backoff curves: the delay before retry `r`, before any cap, floor or jitter.

use core::fmt;
use core::time::Duration;

use super::binary64;
use super::error::PolicyError;
use super::nanos::{from_nanos, nanos};

/// The shape of the delays before successive retries (see [the rules](crate::behaviour#backoff-curves)).
///
/// Retry `r` (r = 1, 2, …) is attempt `r + 1`. The curve gives the raw delay before
/// retry `r`; the policy then caps it with `max_delay`, floors it with `min_delay`
/// and applies jitter. All arithmetic saturates at [`Duration::MAX`] for every `r`.
///
/// ```
/// use core::time::Duration;
/// use retry_core::Backoff;
///
/// let exp = Backoff::exponential(Duration::from_secs(1), 2.0);
/// assert_eq!(exp.delay(1), Duration::from_secs(1));
/// assert_eq!(exp.delay(4), Duration::from_secs(8));
/// assert_eq!(exp.delay(u32::MAX), Duration::MAX);
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

    /// The raw delay before retry `retry` (1-based; 0 is read as 1), saturating at
    /// [`Duration::MAX`]. No cap, floor or jitter is applied here.
    #[must_use]
    pub fn delay(&self, retry: u32) -> Duration {
        let steps = retry.saturating_sub(1);
        // Every curve starts from its initial delay (a constant's delay, zero
        // for none); the sums and products below are not saturated: anything
        // past `Duration::MAX` is, by `from_nanos`.
        let base = nanos(self.initial());
        from_nanos(match *self {
            Backoff::None | Backoff::Constant { .. } => base,
            // Below 2^94 · 2^32 + 2^94: the sum fits.
            Backoff::Linear { increment, .. } => nanos(increment)
                .wrapping_mul(u128::from(steps))
                .wrapping_add(base),
            Backoff::Exponential { factor, .. } => exponential(base, factor, steps),
            Backoff::Fibonacci { .. } => {
                let f = fibonacci(retry);
                // Below 2^128 when the factors' bit lengths add up to at most
                // 128; otherwise at least 2^127, far past `Duration::MAX`.
                if base.leading_zeros().wrapping_add(f.leading_zeros()) >= 64 {
                    base.wrapping_mul(u128::from(f))
                } else {
                    u128::MAX
                }
            }
        })
    }
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

/// `base * factor^steps` for the initial delay's nanoseconds `base`
/// (`u128::MAX` past the largest `u128`): the `f64` computation
/// `(base as f64 * powi(factor, steps)) as u128`, made in integers ([`binary64`]) with the rounding IEEE-754
/// multiplication has everywhere, so the result is identical on every
/// platform, with or without a floating-point unit.
fn exponential(base: u128, factor: f64, steps: u32) -> u128 {
    let bits = factor.to_bits();
    // An invalid factor cannot get past the builder; be total anyway.
    if base == 0 || steps == 0 || !binary64::is_factor(bits) {
        return base;
    }
    // Exact integer path for the common factor 2.
    if bits == binary64::TWO_BITS {
        // `base · 2^steps` is a shift, and overflows exactly when the shift
        // would push out a set bit (a 128-bit multiply is a long routine on
        // 32-bit targets).
        return if steps <= base.leading_zeros() {
            // `base` is not zero: at most 127 leading zeros, so no shift
            // reaches the width.
            base.wrapping_shl(steps)
        } else {
            u128::MAX
        };
    }
    binary64::scale(base, bits, steps)
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

/// The r-th Fibonacci number with F(1) = F(2) = 1, saturating at `u64::MAX`
/// (F(93) is the last that fits).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Doubling by shift is the saturating multiply by `2^steps`, for every
    /// step count and initial delays from 1 ns to `Duration::MAX`.
    #[test]
    fn doubling_is_the_saturating_multiply() {
        let initials = [
            Duration::from_nanos(1),
            Duration::from_nanos(3),
            Duration::from_millis(100),
            Duration::new(1 << 40, 999_999_999),
            Duration::new(u64::MAX, 999_999_999),
        ];
        for initial in initials {
            for steps in 0..=200u32 {
                let expected = match 1u128.checked_shl(steps) {
                    Some(m) => from_nanos(nanos(initial).saturating_mul(m)),
                    None => Duration::MAX,
                };
                assert_eq!(
                    from_nanos(exponential(nanos(initial), 2.0, steps)),
                    expected,
                    "{initial:?} {steps}"
                );
            }
        }
    }

    /// Linear and Fibonacci curves in wrapping 128-bit nanoseconds are the
    /// saturating `Duration` and `u128` formulas, up to `Duration::MAX`.
    #[test]
    fn integer_curves_are_the_saturating_formulas() {
        let values = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(100),
            Duration::new(1 << 33, 5),
            Duration::new(1 << 40, 999_999_999),
            Duration::new(u64::MAX / 3, 1),
            Duration::MAX,
        ];
        for a in values {
            for b in values {
                for r in [0, 1, 2, 3, 50, 93, 94, 95, 1000, u32::MAX - 1, u32::MAX] {
                    let steps = r.saturating_sub(1);
                    assert_eq!(
                        Backoff::linear_by(a, b).delay(r),
                        a.saturating_add(b.saturating_mul(steps)),
                        "{a:?} {b:?} {r}"
                    );
                }
            }
            for r in (0..=200).chain([u32::MAX]) {
                assert_eq!(
                    Backoff::fibonacci(a).delay(r),
                    from_nanos(nanos(a).saturating_mul(u128::from(fibonacci(r)))),
                    "{a:?} {r}"
                );
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
        for r in [1, 2, 64, 93, 94, 127, 128, 129, u32::MAX] {
            let _ = Backoff::linear(big).delay(r);
            let _ = Backoff::fibonacci(big).delay(r);
            let _ = Backoff::exponential(big, 2.0).delay(r);
            let _ = Backoff::exponential(big, 1.0000001).delay(r);
            let _ = Backoff::exponential(Duration::from_nanos(1), f64::MAX).delay(r);
        }
        assert_eq!(
            Backoff::exponential(Duration::from_secs(1), 2.0).delay(200),
            Duration::MAX
        );
        assert_eq!(
            Backoff::exponential(Duration::from_secs(1), 3.0).delay(u32::MAX),
            Duration::MAX
        );
        assert_eq!(Backoff::linear(big).delay(2), Duration::MAX);
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
