//! [`LatencyHistogram`]: recent latencies in a fixed number of buckets, from
//! which an adaptive hedge delay reads a percentile.

use core::fmt;
use core::time::Duration;

/// Octave of the first bucket above the smallest one: 2^10 ns (1.024 µs).
const FIRST_OCTAVE: u32 = 10;
/// One past the last octave with its own buckets: 2^40 ns (about 18 minutes).
const END_OCTAVE: u32 = 40;
/// Buckets per octave (each a quarter of the octave wide).
const PER_OCTAVE: u32 = 4;
/// Every bucket: one below 1.024 µs, four per octave up to 2^40 ns, one above.
const BUCKETS: usize = 2 + ((END_OCTAVE - FIRST_OCTAVE) * PER_OCTAVE) as usize;

/// Recent latencies, counted in fixed buckets: a plain `Copy` value of about
/// 260 bytes that a driver keeps between calls (behind a lock when calls run
/// concurrently) and that an adaptive hedge delay reads a percentile from
/// (see [`HedgeDelay::Percentile`](crate::HedgeDelay::Percentile)).
///
/// Buckets: one for everything below 1.024 µs (2^10 ns); then each doubling of
/// the latency from 2^10 ns to 2^40 ns (about 18 minutes) is cut into four
/// buckets of equal width, so a bucket is at most a quarter wider than its lower
/// edge; one bucket holds everything from 2^40 ns up.
///
/// *Recent*: once [`count`](Self::count) reaches the histogram's memory (1,000
/// samples unless set with [`with_memory`](Self::with_memory)), every bucket's
/// count is halved, rounding down. Older samples weigh half as much at each
/// halving, so the percentile follows a latency that changes.
///
/// ```
/// use core::time::Duration;
/// use retry_core::LatencyHistogram;
///
/// let mut latencies = LatencyHistogram::new();
/// for ms in 1..=100 {
///     latencies.record(Duration::from_millis(ms));
/// }
/// assert_eq!(latencies.count(), 100);
/// // The 95th sample is 95 ms; the estimate is its bucket's upper edge, never below it.
/// let p95 = latencies.percentile(95.0).unwrap();
/// assert!(p95 >= Duration::from_millis(95) && p95 <= Duration::from_millis(119));
/// assert_eq!(latencies.percentile(100.0), Some(Duration::from_millis(100)));
/// assert_eq!(LatencyHistogram::new().percentile(50.0), None);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LatencyHistogram {
    counts: [u16; BUCKETS],
    count: u32,
    memory: u16,
    /// The longest latency recorded, in nanoseconds (saturated at `u64::MAX`).
    max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// The number of buckets.
    pub const BUCKETS: usize = BUCKETS;
    /// The default memory: counts are halved when 1,000 samples are held.
    pub const DEFAULT_MEMORY: u16 = 1_000;

    /// An empty histogram with the default memory.
    #[must_use]
    pub const fn new() -> LatencyHistogram {
        LatencyHistogram {
            counts: [0; BUCKETS],
            count: 0,
            memory: LatencyHistogram::DEFAULT_MEMORY,
            max: 0,
        }
    }

    /// An empty histogram that halves its counts when `samples` are held
    /// (at least 2: a smaller value is read as 2).
    #[must_use]
    pub const fn with_memory(samples: u16) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        h.memory = if samples < 2 { 2 } else { samples };
        h
    }

    /// The number of samples held at which every count is halved.
    #[must_use]
    pub const fn memory(&self) -> u16 {
        self.memory
    }

    /// The samples held (after halvings; always below [`memory`](Self::memory)).
    #[must_use]
    pub const fn count(&self) -> u32 {
        self.count
    }

    /// The longest latency ever recorded (`None` before the first).
    #[must_use]
    pub const fn max(&self) -> Option<Duration> {
        if self.count == 0 && self.max == 0 {
            None
        } else {
            Some(Duration::from_nanos(self.max))
        }
    }

    /// The count in every bucket, from the shortest latencies to the longest.
    #[must_use]
    pub const fn bucket_counts(&self) -> &[u16; BUCKETS] {
        &self.counts
    }

    /// The upper edge (exclusive) of bucket `index`, in nanoseconds; `None` for
    /// the last bucket, which has none, and past the end.
    #[must_use]
    pub fn bucket_upper_edge(index: usize) -> Option<u64> {
        if index == 0 {
            return Some(1 << FIRST_OCTAVE);
        }
        if index >= BUCKETS.saturating_sub(1) {
            return None;
        }
        // 1 <= index < BUCKETS - 1: the octave is in FIRST_OCTAVE..END_OCTAVE.
        let i = u32::try_from(index.saturating_sub(1)).ok()?;
        let octave = FIRST_OCTAVE.saturating_add(i / PER_OCTAVE);
        let quarter = i % PER_OCTAVE;
        let steps = u64::from(PER_OCTAVE.saturating_add(quarter).saturating_add(1));
        Some(steps.wrapping_shl(octave.saturating_sub(2)))
    }

    /// The bucket a latency of `nanos` falls in.
    fn bucket(nanos: u64) -> usize {
        if nanos < (1 << FIRST_OCTAVE) {
            return 0;
        }
        // nanos >= 2^10, so the octave is in 10..=63.
        let octave = 63u32.saturating_sub(nanos.leading_zeros());
        if octave >= END_OCTAVE {
            return BUCKETS.saturating_sub(1);
        }
        let quarter = nanos.wrapping_shr(octave.saturating_sub(2)) & 3;
        let index = u64::from(octave.saturating_sub(FIRST_OCTAVE))
            .saturating_mul(u64::from(PER_OCTAVE))
            .saturating_add(quarter)
            .saturating_add(1);
        usize::try_from(index).unwrap_or(BUCKETS.saturating_sub(1))
    }

    /// Records one latency. When the samples held reach the memory, every count
    /// is halved (rounding down).
    pub fn record(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.max = self.max.max(nanos);
        if let Some(c) = self.counts.get_mut(LatencyHistogram::bucket(nanos)) {
            *c = c.saturating_add(1);
        }
        self.count = self.count.saturating_add(1);
        if self.count >= u32::from(self.memory) {
            let mut count: u32 = 0;
            for c in &mut self.counts {
                *c /= 2;
                count = count.saturating_add(u32::from(*c));
            }
            self.count = count;
        }
    }

    /// Forgets every sample.
    pub fn clear(&mut self) {
        *self = LatencyHistogram::with_memory(self.memory);
    }

    /// The `p`-th percentile of the samples held, `p` in `(0, 100]`: the upper
    /// edge of the bucket that holds the sample of rank ⌈p/100 × count⌉, but never
    /// more than the longest latency recorded. So the estimate is never below the
    /// true percentile, and at most a quarter above it (or 1.024 µs, for the
    /// smallest bucket). `None` when empty or when `p` is not in `(0, 100]`.
    #[must_use]
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        if self.count == 0 || p.is_nan() || p <= 0.0 || p > 100.0 {
            return None;
        }
        let rank = rank(self.count, p);
        let mut seen: u32 = 0;
        for (index, c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(u32::from(*c));
            if seen >= rank {
                let edge = LatencyHistogram::bucket_upper_edge(index).unwrap_or(u64::MAX);
                return Some(Duration::from_nanos(edge.min(self.max)));
            }
        }
        Some(Duration::from_nanos(self.max))
    }
}

/// ⌈p/100 × count⌉, at least 1 and at most `count`, for `p` in `(0, 100]`.
fn rank(count: u32, p: f64) -> u32 {
    let exact = f64::from(count) * p / 100.0;
    // `as` saturates and drops the fraction: the floor of a non-negative value.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let floor = exact as u32;
    let ceil = if f64::from(floor) < exact {
        floor.saturating_add(1)
    } else {
        floor
    };
    ceil.clamp(1, count.max(1))
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("count", &self.count)
            .field("memory", &self.memory)
            .field("max", &self.max())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range() {
        assert_eq!(LatencyHistogram::bucket(0), 0);
        assert_eq!(LatencyHistogram::bucket(1023), 0);
        assert_eq!(LatencyHistogram::bucket(1024), 1);
        assert_eq!(LatencyHistogram::bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(LatencyHistogram::bucket(1 << 40), BUCKETS - 1);
        assert_eq!(LatencyHistogram::bucket((1 << 40) - 1), BUCKETS - 2);
        // Every bucket's upper edge is the next bucket's first value.
        for index in 0..BUCKETS - 1 {
            let edge = LatencyHistogram::bucket_upper_edge(index).unwrap();
            assert_eq!(LatencyHistogram::bucket(edge - 1), index, "{index}");
            assert_eq!(LatencyHistogram::bucket(edge), index + 1, "{index}");
        }
        assert_eq!(LatencyHistogram::bucket_upper_edge(BUCKETS - 1), None);
    }

    #[test]
    fn halving_forgets_the_old() {
        let mut h = LatencyHistogram::with_memory(10);
        for _ in 0..9 {
            h.record(Duration::from_secs(1));
        }
        assert_eq!(h.count(), 9);
        h.record(Duration::from_secs(1)); // 10 held: halved to 5
        assert_eq!(h.count(), 5);
        for _ in 0..4 {
            h.record(Duration::from_millis(1));
        }
        // 5 old, 4 new: the median is still old.
        assert!(h.percentile(50.0).unwrap() >= Duration::from_secs(1));
        h.record(Duration::from_millis(1)); // 10: halved to 2 old + 2 new (5/2, 5/2)
        assert_eq!(h.count(), 4);
        h.record(Duration::from_millis(1));
        assert!(h.percentile(50.0).unwrap() < Duration::from_secs(1));
        assert_eq!(LatencyHistogram::with_memory(0).memory(), 2);
    }

    #[test]
    fn percentile_rejects_nonsense() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::from_millis(3));
        for p in [0.0, -1.0, 100.5, f64::NAN, f64::INFINITY] {
            assert_eq!(h.percentile(p), None, "{p}");
        }
        assert_eq!(h.percentile(0.001), Some(Duration::from_millis(3)));
        assert_eq!(rank(10, 95.0), 10);
        assert_eq!(rank(100, 95.0), 95);
        assert_eq!(rank(1, 0.0001), 1);
    }
}
