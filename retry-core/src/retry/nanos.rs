//! Saturating conversions between `Duration` and whole nanoseconds in `u128`.

use core::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;

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
    let secs = n / NANOS_PER_SEC;
    // The remainder is below 1e9 and so always fits a u32.
    let sub = u32::try_from(n % NANOS_PER_SEC).unwrap_or(0);
    match u64::try_from(secs) {
        Ok(secs) => Duration::new(secs, sub),
        Err(_) => Duration::MAX,
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
}
