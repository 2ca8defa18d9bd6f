//! Saturating conversions between `Duration` and whole nanoseconds in `u128`.

use core::time::Duration;

const NANOS_PER_SEC_64: u64 = 1_000_000_000;

/// The whole duration in nanoseconds (always fits: at most about 1.8e28).
pub(crate) const fn nanos(d: Duration) -> u128 {
    d.as_nanos()
}

/// Nanoseconds back to a `Duration`, saturating at [`Duration::MAX`].
pub(crate) fn from_nanos(n: u128) -> Duration {
    // Fast path on 64-bit targets: up to 584 years fits a u64, whose division
    // by a constant compiles to a multiply. 32-bit targets take the one path
    // below for every value (there a u64 division is a library call too, and
    // a second copy of the conversion only adds code); the result is the same.
    if cfg!(target_pointer_width = "64") {
        if let Ok(small) = u64::try_from(n) {
            return Duration::from_nanos(small);
        }
    }
    // Past `u64::MAX` seconds (the high word at 10^9 or more): saturate.
    // The casts split the value into its words; the truncation is the point.
    #[allow(clippy::cast_possible_truncation)]
    let (hi, lo) = ((n >> 64) as u64, n as u64);
    if hi >= NANOS_PER_SEC_64 {
        return Duration::MAX;
    }
    // Long division by 10^9 in 32-bit digits (the running remainder stays
    // below 10^9 < 2^30, so every digit's dividend is below 2^62), each step
    // a multiply by the reciprocal: no division routine at all on 32-bit
    // targets.
    let top = (hi << 32) | (lo >> 32);
    let (q1, r1) = div_1e9(top);
    let (q0, r0) = div_1e9((r1 << 32) | (lo & 0xFFFF_FFFF));
    // Both quotients are below 2^32; the remainder is below 10^9 (said again
    // with `min`, so that `Duration::new` is seen not to carry into the
    // seconds).
    let sub = u32::try_from(r0).unwrap_or(0).min(999_999_999);
    Duration::new((q1 << 32) | q0, sub)
}

/// The time from `earlier` to `later` (zero if `earlier` is later), as
/// [`Instant::saturating_duration_since`] gives it, converted by [`from_nanos`]:
/// no 64-bit division routine and no panic path on 32-bit targets, where
/// `Duration::from_nanos` of a `u64` calls the division helper.
#[inline]
pub(crate) fn between(later: crate::Instant, earlier: crate::Instant) -> Duration {
    from_nanos(u128::from(
        later.as_nanos().saturating_sub(earlier.as_nanos()),
    ))
}

/// `(x / 10^9, x % 10^9)` for any `x`, by the reciprocal:
/// `M = ⌊(2^64 − 1) / 10^9⌋` gives `⌊x·M / 2^64⌋`, which is the quotient or
/// one less (its error `x·(2^64/10^9 − M)/2^64` is below `x / 2^64`, under 1),
/// and one correction step makes it exact.
#[inline]
const fn div_1e9(x: u64) -> (u64, u64) {
    const M: u64 = u64::MAX / NANOS_PER_SEC_64;
    // The high word of a product below 2^94: the truncation keeps every bit.
    #[allow(clippy::cast_possible_truncation)]
    let q = ((x as u128).wrapping_mul(M as u128) >> 64) as u64;
    // q <= x / 10^9: no wrap; the remainder is below 2 · 10^9.
    let r = x.wrapping_sub(q.wrapping_mul(NANOS_PER_SEC_64));
    if r >= NANOS_PER_SEC_64 {
        (q.wrapping_add(1), r.wrapping_sub(NANOS_PER_SEC_64))
    } else {
        (q, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_saturates() {
        assert_eq!(from_nanos(nanos(Duration::MAX)), Duration::MAX);
        assert_eq!(from_nanos(u128::MAX), Duration::MAX);
        assert_eq!(from_nanos(1_500_000_001), Duration::new(1, 500_000_001));
    }

    /// The reciprocal division is the division, at every boundary and for
    /// random values of every width.
    #[test]
    #[allow(clippy::arithmetic_side_effects)]
    fn reciprocal_division_is_division() {
        let check = |x: u64| assert_eq!(div_1e9(x), (x / 1_000_000_000, x % 1_000_000_000), "{x}");
        for k in 0..=9_223_372_036u64 / 1_000_000 {
            let base = k * 1_000_000 * 1_000_000_000;
            for x in [base, base + 999_999_999, base.saturating_sub(1)] {
                check(x);
            }
        }
        for x in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            (1 << 63) - 1,
            (1 << 62) + 7,
            1 << 63,
            u64::MAX,
            u64::MAX - 1,
            u64::MAX / 1_000_000_000 * 1_000_000_000,
            u64::MAX / 1_000_000_000 * 1_000_000_000 - 1,
        ] {
            check(x);
        }
        let mut z = 9u64;
        for i in 0..1_000_000u32 {
            z = crate::retry::mix64(z);
            check(z >> (i % 64));
            check(u64::MAX - (z >> (i % 64)));
        }
        // Every multiple of 10^9 (and its neighbours) from 2^63 up.
        let mut base = (1u64 << 63) / 1_000_000_000 * 1_000_000_000;
        while let Some(next) = base.checked_add(1_000_000_000_000_000) {
            for x in [base, base + 999_999_999, base - 1] {
                check(x);
            }
            base = next;
        }
    }

    /// The division-free time between two instants is the standard one.
    #[test]
    fn between_is_saturating_duration_since() {
        use crate::Instant;
        let mut z = 3u64;
        for i in 0..1_000_000u32 {
            z = crate::retry::mix64(z);
            let (a, b) = (
                Instant::from_nanos(z >> (i % 64)),
                Instant::from_nanos(z.rotate_left(i)),
            );
            assert_eq!(between(a, b), a.saturating_duration_since(b), "{a:?} {b:?}");
        }
        for (a, b) in [
            (u64::MAX, 0),
            (0, u64::MAX),
            (999_999_999, 0),
            (1_000_000_000, 1),
        ] {
            let (a, b) = (Instant::from_nanos(a), Instant::from_nanos(b));
            assert_eq!(between(a, b), a.saturating_duration_since(b));
        }
    }

    /// The long division is the 128-bit one, across every word boundary and
    /// around the saturation point.
    #[test]
    #[allow(clippy::arithmetic_side_effects, clippy::cast_possible_truncation)]
    fn long_division_is_the_wide_division() {
        let wide = |n: u128| match u64::try_from(n / 1_000_000_000) {
            Ok(secs) => Duration::new(secs, (n % 1_000_000_000) as u32),
            Err(_) => Duration::MAX,
        };
        let top = nanos(Duration::MAX);
        let mut z = 0x5eed_u64;
        for i in 0..300_000u32 {
            z = crate::retry::mix64(z);
            let w = crate::retry::mix64(z ^ 1);
            let n = ((u128::from(z) << 64) | u128::from(w)) >> (i % 128);
            for n in [n, top.wrapping_add(n % 3).wrapping_sub(1), n % (1 << 64)] {
                assert_eq!(from_nanos(n), wide(n), "{n}");
            }
        }
        for n in [
            0,
            1,
            999_999_999,
            1 << 32,
            1 << 64,
            (1 << 64) - 1,
            top,
            top + 1,
        ] {
            assert_eq!(from_nanos(n), wide(n), "{n}");
        }
    }
}
