//! The two `f64` computations the curves and jitter fractions make, done in
//! integers: a product rounded to the nearest `f64` (ties to even) and its
//! conversion to whole nanoseconds.
//!
//! IEEE-754 multiplication is correctly rounded, so a product computed here
//! from the same operands is the very `f64` the hardware gives, bit for bit;
//! the delays are the ones a floating-point unit computes, on every target.
//! On a target without a double-precision unit (a Cortex-M4F has a
//! single-precision one) no soft-float routine is linked: a factor or a
//! fraction is read from its bits, never used as a float.

/// A positive finite `f64` as `m · 2^e` with `m` in `[2^52, 2^53)`, or
/// infinity (any `e` above [`MAX_E`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Float {
    m: u64,
    e: i32,
}

/// The exponent of the largest finite `f64` in this form (`(2^53 − 1) · 2^971`).
const MAX_E: i32 = 971;
/// The implicit leading bit of a normal `f64`'s significand.
const HIDDEN: u64 = 1 << 52;
/// The bits of `1.0`.
const ONE_BITS: u64 = 0x3FF0_0000_0000_0000;
/// The bits of `2.0`.
pub(crate) const TWO_BITS: u64 = 0x4000_0000_0000_0000;

/// Whether `bits` encode a finite factor of at least 1 (a positive normal
/// `f64` with a biased exponent from 1023 to 2046; the sign bit would put
/// the field at 2048 or more).
#[inline]
pub(crate) const fn is_factor(bits: u64) -> bool {
    let field = bits >> 52;
    field >= 1023 && field <= 2046
}

/// Whether `bits` encode a fraction in `[0, 1]` (`-0.0` included, as the
/// float comparison `0.0 <= f` reads it; NaN and the rest excluded).
#[inline]
pub(crate) const fn is_fraction(bits: u64) -> bool {
    bits <= ONE_BITS || bits == 1 << 63
}

impl Float {
    /// `1.0`.
    pub(crate) const ONE: Float = Float { m: HIDDEN, e: -52 };
    /// Infinity (the form every overflow is kept in).
    const INFINITY: Float = Float {
        m: HIDDEN,
        e: MAX_E.wrapping_add(1),
    };

    /// A factor (or clamped fraction) from its bits: a positive normal `f64`
    /// (`None` for zero and subnormals, whose products with a whole number of
    /// nanoseconds below 2^95 are below 1; the caller reads those as zero).
    #[inline]
    pub(crate) const fn from_bits(bits: u64) -> Option<Float> {
        // The biased exponent, 11 bits: the cast keeps every bit.
        #[allow(clippy::cast_possible_truncation)]
        let field = ((bits >> 52) & 0x7FF) as i32;
        if field == 0 {
            return None;
        }
        Some(Float {
            m: (bits & HIDDEN.wrapping_sub(1)) | HIDDEN,
            // field <= 2047: no overflow.
            e: field.wrapping_sub(1075),
        })
    }

    /// A fraction from its bits, clamped into `[0, 1]` as `f.clamp(0.0, 1.0)`
    /// would (NaN read as 0): `None` for zero (and for what clamps to it, or is
    /// too small to give a nanosecond).
    #[inline]
    pub(crate) const fn fraction(bits: u64) -> Option<Float> {
        if bits > ONE_BITS {
            // Above 1.0: positive NaN and infinity read as 0 and 1 would; the
            // sign bit set (negative, -0.0, negative NaN) reads as 0.
            if bits > 0x7FF0_0000_0000_0000 {
                return None;
            }
            return Some(Float::ONE);
        }
        Float::from_bits(bits)
    }

    /// `q · 2^e` for the top 53 bits `q` of a value whose bits below them
    /// are `rest`, of which `half` is the highest: rounded to the nearest
    /// `f64`, ties to even (`q` in `[2^52, 2^53)`).
    #[inline]
    fn rounded(q: u64, rest: u64, half: u64, e: i32) -> Float {
        let up = rest > half || (rest == half && q & 1 == 1);
        // q < 2^53: the increment cannot wrap.
        let q = q.wrapping_add(u64::from(up));
        let (m, e) = if q == 1 << 53 {
            (HIDDEN, e.wrapping_add(1))
        } else {
            (q, e)
        };
        if e > MAX_E {
            Float::INFINITY
        } else {
            Float { m, e }
        }
    }

    /// A whole number of nanoseconds (not zero) as the nearest `f64`: what
    /// `n as f64` gives.
    #[inline]
    pub(crate) fn from_int(n: u64) -> Float {
        // Up to 53 significant bits the value is exact; beyond, the bits
        // shifted out are rounded off.
        let lz = n.leading_zeros();
        if lz >= 11 {
            // lz <= 63 (n is not zero): a shift by at most 52.
            #[allow(clippy::cast_possible_wrap)]
            let up = lz.wrapping_sub(11) as i32;
            return Float {
                m: n << up,
                e: up.wrapping_neg(),
            };
        }
        // 1 to 11 bits below the significand.
        let down = 11u32.wrapping_sub(lz);
        let mask = (1u64 << down).wrapping_sub(1);
        #[allow(clippy::cast_possible_wrap)]
        Float::rounded(n >> down, n & mask, 1 << down.wrapping_sub(1), down as i32)
    }

    /// The `f64` product `self × other`, rounded as IEEE-754 rounds it; an
    /// infinity stays one (operands at most 2^1024, so the exponents stay
    /// within a few thousand).
    #[inline]
    pub(crate) fn mul(self, other: Float) -> Float {
        // Both significands in [2^52, 2^53): the product is in [2^104, 2^106),
        // so its top 53 bits start at bit 104 or 105.
        let p = u128::from(self.m).wrapping_mul(u128::from(other.m));
        let e = self.e.wrapping_add(other.e);
        // The words of the product; the truncation is the point.
        #[allow(clippy::cast_possible_truncation)]
        let (hi, lo) = ((p >> 64) as u64, p as u64);
        if hi >> 41 != 0 {
            // Top bit at 105: the significand is bits 53..106.
            let q = (hi << 11) | (lo >> 53);
            Float::rounded(q, lo & ((1 << 53) - 1), 1 << 52, e.wrapping_add(53))
        } else {
            let q = (hi << 12) | (lo >> 52);
            Float::rounded(q, lo & ((1 << 52) - 1), 1 << 51, e.wrapping_add(52))
        }
    }

    /// Whether this is infinity.
    #[inline]
    pub(crate) const fn is_infinite(self) -> bool {
        self.e > MAX_E
    }

    /// The value with its fraction dropped, saturating at `u64::MAX`: what
    /// `x as u64` gives.
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[cfg_attr(not(target_pointer_width = "64"), inline(always))]
    pub(crate) fn trunc(self) -> u64 {
        if self.e >= 0 {
            // m < 2^53: shifted by 12 or more it is past u64.
            if self.e >= 12 {
                return u64::MAX;
            }
            #[allow(clippy::cast_sign_loss)]
            return self.m << (self.e as u32);
        }
        let down = self.e.unsigned_abs();
        if down >= 64 {
            0
        } else {
            self.m >> down
        }
    }

    /// `self^n` by repeated squaring, each product rounded to `f64` as it
    /// is made, stopping once the power is infinite (`self` at least 1).
    pub(crate) fn powi(mut self, mut n: u32) -> Float {
        let mut acc = Float::ONE;
        while n > 0 {
            if n & 1 == 1 {
                acc = acc.mul(self);
            }
            n >>= 1;
            if n > 0 {
                self = self.mul(self);
            }
            if acc.is_infinite() {
                break;
            }
        }
        acc
    }
}

/// `⌊f · n⌋` computed as `((n as f64) * f) as u64`, for a fraction given by
/// its bits, clamped into `[0, 1]` first (NaN read as zero).
#[inline]
pub(crate) fn fraction_of(n: u64, f_bits: u64) -> u64 {
    match Float::fraction(f_bits) {
        Some(f) if n != 0 => Float::from_int(n).mul(f).trunc(),
        _ => 0,
    }
}

/// `⌊n · factor^steps⌋` computed as `(n as f64 * powi(factor, steps)) as u64`,
/// `factor` a valid factor's bits, `n` not zero.
#[inline]
pub(crate) fn scale(n: u64, factor_bits: u64, steps: u32) -> u64 {
    let factor = Float::from_bits(factor_bits).unwrap_or(Float::ONE);
    Float::from_int(n).mul(factor.powi(steps)).trunc()
}

#[cfg(test)]
#[allow(
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    clippy::cast_sign_loss,
    clippy::float_cmp
)]
mod tests {
    use super::*;
    use crate::retry::mix64;

    /// The float the hardware gives, for a finite positive `f64` or infinity.
    fn of(x: f64) -> Float {
        if x.is_infinite() {
            return Float::INFINITY;
        }
        Float::from_bits(x.to_bits()).unwrap()
    }

    #[test]
    fn bits_are_read_as_the_float_comparisons_read_them() {
        let samples = [
            0.0,
            -0.0,
            1.0,
            2.0,
            0.5,
            1.0000001,
            0.9999999,
            -1.0,
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            1.0 + f64::EPSILON,
            1.0 - f64::EPSILON / 2.0,
        ];
        for x in samples {
            let b = x.to_bits();
            assert_eq!(is_factor(b), x.is_finite() && x >= 1.0, "{x}");
            assert_eq!(is_fraction(b), (0.0..=1.0).contains(&x), "{x}");
        }
    }

    /// Products and conversions are the hardware's, bit for bit, over a
    /// million random operands of every magnitude (ties to even included:
    /// short significands make exact halves common).
    #[test]
    fn products_are_the_hardware_products() {
        let mut z = 0x5eed_u64;
        let mut next = || {
            z = mix64(z);
            z
        };
        for i in 0..1_000_000u32 {
            let (a, b) = (next(), next());
            // Significands of 1 to 53 bits, exponents around 1 and up to the top.
            let dropped = (a % 53) as u32;
            let fraction = (b & (HIDDEN - 1)) >> dropped << dropped;
            let x = f64::from_bits(((1023 + (a >> 58)) << 52) | fraction);
            let y = f64::from_bits(
                (next() & 0x000F_FFFF_FFFF_FFFF) | ((1023 + (i as u64 % 900)) << 52),
            );
            let hw = x * y;
            assert_eq!(of(x).mul(of(y)), of(hw), "{x:e} × {y:e}");
            // Conversion of whole numbers of every width, and truncation.
            let n = next() >> (i % 64);
            if n != 0 {
                assert_eq!(Float::from_int(n), of(n as f64), "{n}");
            }
            assert_eq!(of(hw).trunc(), hw as u64, "{hw:e}");
            // A fraction of a whole number.
            let f = f64::from_bits(next() % (ONE_BITS + 1));
            assert_eq!(
                fraction_of(n, f.to_bits()),
                ((n as f64) * f) as u64,
                "{n} {f:e}"
            );
        }
        // Ties: 3 × the f64 nearest a third is exactly halfway below 1.
        let third = 1.0 / 3.0;
        assert_eq!(fraction_of(3, f64::to_bits(third)), ((3.0 * third) as u64));
        assert_eq!(fraction_of(3, f64::to_bits(third)), 1);
    }

    #[test]
    fn powers_are_the_hardware_powers() {
        let factors = [
            1.0,
            1.0001,
            1.000_001,
            1.1,
            1.5,
            2.0,
            3.0,
            10.0,
            1e300,
            f64::MAX,
        ];
        for f in factors {
            for n in (0..=200).chain([1000, 65_535, u32::MAX - 1, u32::MAX]) {
                let hw = crate::retry::backoff::powi(f, n);
                assert_eq!(of(f).powi(n), of(hw), "{f}^{n}");
                for base in [1u64, 3, 100_000_000, 999_999_999_999, 1 << 60, u64::MAX] {
                    assert_eq!(
                        scale(base, f.to_bits(), n),
                        (base as f64 * hw) as u64,
                        "{base} × {f}^{n}"
                    );
                }
            }
        }
    }

    #[test]
    fn fractions_clamp_as_floats_do() {
        for f in [
            -0.5,
            -0.0,
            f64::NAN,
            -f64::NAN,
            1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            5e-324,
        ] {
            let c = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
            for n in [0u64, 1, 7, 1 << 60, u64::MAX] {
                assert_eq!(
                    fraction_of(n, f.to_bits()),
                    ((n as f64) * c) as u64,
                    "{n} {f}"
                );
            }
        }
    }
}
