//! Between embassy's clock (ticks of `TICK_HZ` since boot) and the core's
//! (nanoseconds since an origin the driver picks). Every conversion saturates;
//! none divides by a value that is not a non-zero constant.

use core::time::Duration;

use embassy_time::{Instant as Tick, TICK_HZ};

const NANOS_PER_SEC: u64 = 1_000_000_000;

const fn gcd(a: u64, b: u64) -> u64 {
    match a.checked_rem(b) {
        Some(rest) => gcd(b, rest),
        None => a,
    }
}

/// `TICK_HZ` ticks are `NANOS_PER_SEC` nanoseconds; reduced, `PER_TICKS` ticks are
/// `NANOS` nanoseconds, with both as small as they can be.
const COMMON: u64 = gcd(TICK_HZ, NANOS_PER_SEC);
const NANOS: u64 = NANOS_PER_SEC / COMMON;
const PER_TICKS: u64 = TICK_HZ / COMMON;

/// `ticks` as nanoseconds, rounded down, saturating at `u64::MAX` ns (584 years).
pub(crate) const fn ticks_to_nanos(ticks: u64) -> u64 {
    match ticks.checked_mul(NANOS) {
        Some(scaled) => scaled / PER_TICKS,
        // Past about 2^64 / NANOS ticks: coarser, still monotonic.
        None => (ticks / PER_TICKS).saturating_mul(NANOS),
    }
}

/// `nanos` as ticks, rounded up (a wake-up is never early), saturating.
pub(crate) const fn nanos_to_ticks(nanos: u64) -> u64 {
    match nanos.checked_mul(PER_TICKS) {
        Some(scaled) => scaled.div_ceil(NANOS),
        None => nanos.div_ceil(NANOS).saturating_mul(PER_TICKS),
    }
}

/// The time from `origin` to `now` on the core's clock (zero if `now` is
/// earlier).
pub(crate) const fn since(origin: Tick, now: Tick) -> retry_core::Instant {
    retry_core::Instant::from_nanos(ticks_to_nanos(
        now.as_ticks().saturating_sub(origin.as_ticks()),
    ))
}

/// The embassy instant of `at`, a point on the core's clock whose origin is
/// `origin`: the first tick at or after it.
pub(crate) const fn tick_at(origin: Tick, at: retry_core::Instant) -> Tick {
    Tick::from_ticks(
        origin
            .as_ticks()
            .saturating_add(nanos_to_ticks(at.as_nanos())),
    )
}

/// How long `ticks` ticks are.
pub(crate) const fn ticks_duration(ticks: u64) -> Duration {
    Duration::from_nanos(ticks_to_nanos(ticks))
}

/// Now, on the shared clock of the breaker and the budget: time since boot.
pub(crate) fn boot_now() -> (Tick, retry_core::Instant) {
    let now = Tick::now();
    (now, since(Tick::from_ticks(0), now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mock_clock_ticks_in_microseconds_and_converts_exactly() {
        assert_eq!(TICK_HZ, 1_000_000);
        assert_eq!(ticks_to_nanos(1), 1_000);
        assert_eq!(nanos_to_ticks(1_000), 1);
        assert_eq!(nanos_to_ticks(1_001), 2, "rounded up: never early");
        assert_eq!(nanos_to_ticks(0), 0);
        for ticks in [0, 1, 999, 1_000_000, 86_400_000_000] {
            assert_eq!(nanos_to_ticks(ticks_to_nanos(ticks)), ticks);
        }
    }

    #[test]
    fn conversions_saturate_instead_of_overflowing() {
        assert_eq!(ticks_to_nanos(u64::MAX), u64::MAX);
        assert!(ticks_to_nanos(u64::MAX / 1_000 + 1) >= ticks_to_nanos(u64::MAX / 1_000));
        assert_eq!(nanos_to_ticks(u64::MAX), u64::MAX.div_ceil(1_000));
        let origin = Tick::from_ticks(u64::MAX - 1);
        assert_eq!(
            tick_at(origin, retry_core::Instant::from_secs(1)),
            Tick::from_ticks(u64::MAX)
        );
        assert_eq!(
            since(Tick::from_ticks(10), Tick::from_ticks(5)),
            retry_core::Instant::ORIGIN
        );
    }
}
