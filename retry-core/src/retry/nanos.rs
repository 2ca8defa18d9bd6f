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
    // Long division by 10^9 in 32-bit digits, each step a u64 division (the
    // running remainder stays below 10^9 < 2^30, so no step overflows): on
    // 32-bit targets one library call each, with no 128-bit arithmetic.
    let top = (hi << 32) | (lo >> 32);
    let (q1, r1) = (top / NANOS_PER_SEC_64, top % NANOS_PER_SEC_64);
    let bottom = (r1 << 32) | (lo & 0xFFFF_FFFF);
    let (q0, r0) = (bottom / NANOS_PER_SEC_64, bottom % NANOS_PER_SEC_64);
    // Both quotients are below 2^32; the remainder is below 10^9 (said again
    // with `min`: on 32-bit targets it comes from a library call, and
    // `Duration::new` must see that it cannot carry into the seconds).
    let sub = u32::try_from(r0).unwrap_or(0).min(999_999_999);
    Duration::new((q1 << 32) | q0, sub)
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
