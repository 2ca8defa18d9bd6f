//! Saturating conversions between `Duration` and whole nanoseconds in `u64`,
//! the unit the delay arithmetic works in (see
//! [the saturation rule](crate::behaviour#delays-in-64-bit-nanoseconds)).

use core::time::Duration;

const NANOS_PER_SEC_64: u64 = 1_000_000_000;

/// The whole duration in nanoseconds, saturating at `u64::MAX` (about 584.5
/// years): every duration entering the delay arithmetic goes through here
/// (one copy on 32-bit targets, where the multiply is several instructions).
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
pub(crate) const fn sat_nanos(d: Duration) -> u64 {
    // `u64::MAX` ns is 18,446,744,073 s and a fraction: up to that many whole
    // seconds the product fits (18,446,744,073 × 10^9 < 2^64), and only the
    // fraction's sum may pass the top.
    let secs = d.as_secs();
    if secs > u64::MAX / NANOS_PER_SEC_64 {
        return u64::MAX;
    }
    secs.wrapping_mul(NANOS_PER_SEC_64)
        .saturating_add(d.subsec_nanos() as u64)
}

/// The whole duration in nanoseconds, for a duration known to be at most
/// `u64::MAX` ns (one made from a `u64` of nanoseconds, a curve's value
/// below its cap): no saturation check.
#[inline(always)]
pub(crate) const fn exact_nanos(d: Duration) -> u64 {
    d.as_secs()
        .wrapping_mul(NANOS_PER_SEC_64)
        .wrapping_add(d.subsec_nanos() as u64)
}

/// Nanoseconds back to a `Duration` (always exact: `u64::MAX` ns is far below
/// [`Duration::MAX`]).
#[inline]
pub(crate) fn from_nanos(n: u64) -> Duration {
    // On 64-bit targets the division by a constant compiles to a multiply.
    if cfg!(target_pointer_width = "64") {
        Duration::from_nanos(n)
    } else {
        from_nanos_narrow(n)
    }
}

/// [`from_nanos`] in 32-bit steps, the form 32-bit targets take (compiled on
/// every target, so that it is tested everywhere).
#[inline(never)]
fn from_nanos_narrow(n: u64) -> Duration {
    // Elsewhere a 64-bit division is a library call (and `Duration::from_nanos`
    // links a panic path). `10^9 = 2^9 · 1_953_125`: the low nine bits are
    // kept aside, and the rest (below 2^55) is divided by 1_953_125 (below
    // 2^21) in five 11-bit digits, high first, each step a 32-bit division
    // (the running remainder shifted by 11 bits stays below 2^32).
    const M: u32 = 1_953_125;
    let m = n >> 9;
    let (mut q, mut r) = (0u64, 0u32);
    for i in (0..5u32).rev() {
        // The digit is 11 bits: the truncation keeps every bit.
        #[allow(clippy::cast_possible_truncation)]
        let digit = (m >> i.wrapping_mul(11)) as u32 & 0x7ff;
        let x = (r << 11) | digit;
        q = (q << 11) | u64::from(x / M);
        r = x % M;
    }
    // The remainder is below 10^9 (said again with `min`, so that
    // `Duration::new` is seen not to carry into the seconds).
    #[allow(clippy::cast_possible_truncation)]
    let sub = ((r << 9) | (n as u32 & 511)).min(999_999_999);
    Duration::new(q, sub)
}

/// The time from `earlier` to `later` (zero if `earlier` is later), as
/// [`Instant::saturating_duration_since`](crate::Instant::saturating_duration_since)
/// gives it, converted by [`from_nanos`]: no 64-bit division routine and no
/// panic path on 32-bit targets, where `Duration::from_nanos` of a `u64` calls
/// the division helper.
#[inline]
pub(crate) fn between(later: crate::Instant, earlier: crate::Instant) -> Duration {
    from_nanos(later.as_nanos().saturating_sub(earlier.as_nanos()))
}

/// `n % 1 ms` without a 64-bit division: a remainder by a constant on 64-bit
/// targets; elsewhere `10^6 = 2^6 · 15625`, so the low six bits are kept and
/// the rest (below 2^58) is reduced modulo 15625 word by word, every step a
/// 32-bit remainder by a constant.
#[inline]
pub(crate) fn millis_rem(n: u64) -> u64 {
    if cfg!(target_pointer_width = "64") {
        n % 1_000_000
    } else {
        millis_rem_narrow(n)
    }
}

/// [`millis_rem`] in 32-bit steps, the form 32-bit targets take.
#[inline]
fn millis_rem_narrow(n: u64) -> u64 {
    const M: u32 = 15_625;
    // 2^32 mod 15625.
    const WORD: u32 = 14_171;
    let w = n >> 6;
    // The two 32-bit words of w (the high one below 2^26); the truncation is
    // the point.
    #[allow(clippy::cast_possible_truncation)]
    let (hi, lo) = ((w >> 32) as u32, w as u32);
    // (hi mod M) · WORD < 15625 · 14171 < 2^28, plus lo mod M: no wrap.
    let r = ((hi % M).wrapping_mul(WORD).wrapping_add(lo % M)) % M;
    (u64::from(r) << 6) | (n & 63)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Saturation at `u64::MAX` ns: exact below, `u64::MAX` at and above,
    /// whatever the fraction of a second.
    #[test]
    fn durations_saturate_at_the_largest_u64_of_nanoseconds() {
        let top = Duration::from_nanos(u64::MAX);
        assert_eq!(top, Duration::new(18_446_744_073, 709_551_615));
        assert_eq!(sat_nanos(top), u64::MAX);
        assert_eq!(sat_nanos(top - Duration::from_nanos(1)), u64::MAX - 1);
        assert_eq!(sat_nanos(top + Duration::from_nanos(1)), u64::MAX);
        assert_eq!(
            sat_nanos(Duration::new(18_446_744_073, 999_999_999)),
            u64::MAX
        );
        assert_eq!(sat_nanos(Duration::new(18_446_744_074, 0)), u64::MAX);
        assert_eq!(sat_nanos(Duration::MAX), u64::MAX);
        assert_eq!(sat_nanos(Duration::ZERO), 0);
        let mut z = 17u64;
        for i in 0..1_000_000u32 {
            z = crate::retry::mix64(z);
            let sub = u32::try_from(z % 1_000_000_000).unwrap();
            let d = Duration::new(z >> (i % 64), sub);
            let expected = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
            assert_eq!(sat_nanos(d), expected, "{d:?}");
        }
    }

    /// The 32-bit conversion and remainder are the 64-bit ones, at the word
    /// boundaries, around every multiple of a second near the top, and for
    /// random values of every width.
    #[test]
    fn the_narrow_forms_are_the_wide_ones() {
        let check = |n: u64| {
            assert_eq!(from_nanos_narrow(n), Duration::from_nanos(n), "{n}");
            assert_eq!(from_nanos(n), Duration::from_nanos(n), "{n}");
            assert_eq!(millis_rem_narrow(n), n % 1_000_000, "{n}");
            assert_eq!(millis_rem(n), n % 1_000_000, "{n}");
            assert_eq!(sat_nanos(from_nanos(n)), n, "{n}");
        };
        for n in [
            0,
            1,
            63,
            64,
            999_999,
            1_000_000,
            999_999_999,
            1 << 32,
            (1 << 32) - 1,
        ] {
            check(n);
            check(u64::MAX - n);
        }
        for k in 0..5_000u64 {
            let base = u64::MAX / 1_000_000_000 * 1_000_000_000 - k * 1_000_000;
            check(base);
            check(base.wrapping_sub(1));
            check(base.wrapping_add(999_999));
            let hi = k << 32;
            check(hi);
            check(hi.wrapping_sub(1));
        }
        let mut z = 0x5eed_u64;
        for i in 0..1_000_000u32 {
            z = crate::retry::mix64(z);
            check(z >> (i % 64));
        }
    }

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
}
