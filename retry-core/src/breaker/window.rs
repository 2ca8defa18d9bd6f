//! Fixed-size sliding windows: a ring of bits for the last N calls, and a ring of
//! counting buckets for the last T of time. Neither allocates; their capacity is a
//! const generic, their size in use comes from the config.

use core::fmt;

use crate::Instant;

/// What a window holds right now: calls, and how many of them failed or were slow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WindowStats {
    /// Calls in the window.
    pub calls: u32,
    /// Of those, calls that failed.
    pub failures: u32,
    /// Of those, calls slower than the slow-call duration (failed or not).
    pub slow: u32,
    /// Of the slow calls, those that failed.
    pub slow_failures: u32,
}

impl WindowStats {
    /// Slow calls that succeeded (`slow - slow_failures`).
    #[must_use]
    pub const fn slow_successes(&self) -> u32 {
        self.slow.saturating_sub(self.slow_failures)
    }

    /// One more call.
    pub(crate) fn add(&mut self, failed: bool, slow: bool) {
        self.calls = self.calls.saturating_add(1);
        self.failures = self.failures.saturating_add(u32::from(failed));
        self.slow = self.slow.saturating_add(u32::from(slow));
        self.slow_failures = self.slow_failures.saturating_add(u32::from(failed && slow));
    }

    /// The sum of two counts.
    pub(crate) const fn plus(self, other: WindowStats) -> WindowStats {
        WindowStats {
            calls: self.calls.saturating_add(other.calls),
            failures: self.failures.saturating_add(other.failures),
            slow: self.slow.saturating_add(other.slow),
            slow_failures: self.slow_failures.saturating_add(other.slow_failures),
        }
    }
}

impl fmt::Display for WindowStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} calls, {} failed, {} slow",
            self.calls, self.failures, self.slow
        )
    }
}

/// The last `len` calls, two bits each (failed, slow) in a ring of
/// `WORDS × 64` calls, with the number of failed and slow calls held kept as
/// calls come and go (so reading the window's counts is a load, not a count of
/// bits). Slot `next` is overwritten by the next call. The ring is kept in
/// `u32` words of 16 calls (bit `k` failed, bit `16 + k` slow for the call in
/// slot `16w + k`: a call's bits shifted down by `k` are already its share of
/// the counts), so it is 4-aligned and its cursors and counts pack in beside
/// it: a 128-call ring takes 40 bytes.
///
/// Two rings are equal when they hold the same calls in the same order, from
/// whichever slot each starts (a ring restored from a snapshot starts at slot
/// 0; the one it was taken from, once it has wrapped, does not), so a
/// breaker compares equal to its own restored snapshot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CountRing<const WORDS: usize> {
    bits: [[u32; 4]; WORDS],
    next: u16,
    len: u16,
    /// The failed calls among the `len` held (low 16 bits) and the slow ones
    /// (high 16 bits): one word, so a call is counted in and out with one
    /// subtraction and one addition. Neither half can carry into the other:
    /// each counts at most `len` calls.
    counts: u32,
}

/// What [`CountRing::push`] returns when no call was pushed out (a call pushed
/// out is returned as its share of the counts: bit 0 failed, bit 16 slow).
const NOTHING_OUT: u32 = 4;

/// A call's two bits (failed, slow) as its share of [`CountRing::counts`], and
/// of its word shifted down to slot 0.
const SHARE: u32 = 0x1_0001;

/// What [`CountRing::push`] returned, as (a call was pushed out, it had failed,
/// it was slow).
pub(crate) const fn pushed_out(code: u32) -> (bool, bool, bool) {
    (code != NOTHING_OUT, code & 1 != 0, code & 0x1_0000 != 0)
}

impl<const WORDS: usize> PartialEq for CountRing<WORDS> {
    fn eq(&self, other: &Self) -> bool {
        // The `i`-th oldest call sits `i` slots after `next` (modulo the
        // window's size) in a full ring, and in slot `i` in one that is not
        // full (there `next == len`): `get` with the size taken as `len`
        // reads both.
        self.len == other.len
            && self.counts == other.counts
            && (0..self.len).all(|i| self.get(self.len, i) == other.get(other.len, i))
    }
}

impl<const WORDS: usize> Eq for CountRing<WORDS> {}

impl<const WORDS: usize> CountRing<WORDS> {
    /// How many calls the ring can hold.
    pub(crate) const CAPACITY: usize = WORDS.saturating_mul(64);
    /// The last of its 16-call words (0 when it has none).
    const LAST_WORD: usize = WORDS.saturating_mul(4).saturating_sub(1);

    /// An empty ring, as a constant.
    pub(crate) const EMPTY: Self = Self::new();

    pub(crate) const fn new() -> Self {
        CountRing {
            bits: [[0; 4]; WORDS],
            next: 0,
            len: 0,
            counts: 0,
        }
    }

    /// Empties the ring, in place (as [`CountRing::new`] would build it).
    pub(crate) fn clear(&mut self) {
        for word in self.bits.as_flattened_mut() {
            *word = 0;
        }
        self.next = 0;
        self.len = 0;
        self.counts = 0;
    }

    /// Adds one call to a window of `size` calls, pushing out the oldest once full.
    /// Returns what was pushed out, as [`pushed_out`] reads it. The ring must be
    /// pushed with one size, from 1 to its capacity, all its life (the
    /// breaker's window never changes, and it refuses a window that does not
    /// fit); pushed otherwise it stays total but its counts mean nothing.
    #[inline]
    pub(crate) fn push(&mut self, size: u16, failed: bool, slow: bool) -> u32 {
        // `next < size ≤ capacity`: the word exists and `slot + 1` cannot
        // overflow. (The clamp keeps the index in the ring, without a branch,
        // whatever the ring was pushed with.)
        let slot = self.next;
        let index = usize::from(slot / 16).min(Self::LAST_WORD);
        let Some(word) = self.bits.as_flattened_mut().get_mut(index) else {
            return NOTHING_OUT;
        };
        let k = u32::from(slot % 16);
        // Once full, the slot written next holds the oldest call; until then
        // its bits are clear.
        let old = (*word >> k) & SHARE;
        let new = u32::from(failed) | u32::from(slow) << 16;
        *word ^= (old ^ new) << k;
        // The call pushed out was counted, so neither half wraps.
        self.counts = self.counts.wrapping_add(new).wrapping_sub(old);
        let next = slot.wrapping_add(1);
        self.next = if next >= size { 0 } else { next };
        if self.len >= size {
            old
        } else {
            self.len = self.len.wrapping_add(1);
            NOTHING_OUT
        }
    }

    /// The calls, failures and slow calls held (slow failures left at zero:
    /// the trip rules need no more).
    #[inline]
    pub(crate) const fn counts(&self) -> WindowStats {
        WindowStats {
            calls: self.len as u32,
            failures: self.counts & 0xffff,
            slow: self.counts >> 16,
            slow_failures: 0,
        }
    }

    /// The calls held with their failures, slow calls and slow failures.
    pub(crate) fn stats(&self) -> WindowStats {
        // The window's calls sit in slots 0..len: only those words hold bits.
        let words = usize::from(self.len).div_ceil(16);
        let slow_failures = self
            .bits
            .as_flattened()
            .iter()
            .take(words)
            .fold(0u32, |n, w| {
                n.saturating_add((w & w >> 16 & 0xffff).count_ones())
            });
        WindowStats {
            slow_failures,
            ..self.counts()
        }
    }

    /// How many calls the ring holds.
    pub(crate) const fn len(&self) -> u16 {
        self.len
    }

    /// The slot the next call is written to. The calls held sit in slots
    /// `0..len` (the ring fills from slot 0, and once full every slot of the
    /// window holds one), so a second ring indexed by this slot holds
    /// something of each call ([`CallDurations`]).
    pub(crate) const fn next_slot(&self) -> u16 {
        self.next
    }

    /// The `i`-th oldest call held (failed, slow), for `i < len`, in a window of
    /// `size` calls.
    pub(crate) fn get(&self, size: u16, i: u16) -> Option<(bool, bool)> {
        if i >= self.len || size == 0 {
            return None;
        }
        // The oldest call sits `len` slots behind the next one to be written.
        let oldest = u32::from(self.next)
            .saturating_add(u32::from(size))
            .saturating_sub(u32::from(self.len));
        let slot = oldest
            .saturating_add(u32::from(i))
            .checked_rem(u32::from(size))?;
        let word = self
            .bits
            .as_flattened()
            .get(usize::try_from(slot / 16).ok()?)?;
        let pair = word >> (slot % 16);
        Some((pair & 1 != 0, pair & 0x1_0000 != 0))
    }
}

/// The durations of a count window's calls, in nanoseconds, one for each
/// slot of its [`CountRing`] (slot `i` holds the duration of the call in the
/// ring's slot `i`, so the calls held have theirs in slots `0..len`):
/// [`UNKNOWN`] where it is not known (the call was restored from a snapshot,
/// which keeps no durations, or took 2⁶⁴ − 1 ns or more). The total is added
/// up when read, so recording a call costs one store; a ring of `N` slots
/// takes `8 × N` bytes and none at all for `N = 0`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallDurations<const N: usize> {
    nanos: [u64; N],
}

impl<const N: usize> CallDurations<N> {
    /// No durations, as a constant.
    pub(crate) const EMPTY: Self = CallDurations { nanos: [0; N] };

    /// Puts the duration of the call written to `slot` (nothing for a slot
    /// past the ring's capacity: a window that large keeps no durations).
    #[inline(always)]
    pub(crate) fn put(&mut self, slot: u16, nanos: u64) {
        if let Some(kept) = self.nanos.get_mut(usize::from(slot)) {
            *kept = nanos;
        }
    }

    /// Marks the durations of the calls in slots `0..len` as not known.
    pub(crate) fn forget(&mut self, len: u16) {
        for kept in self.nanos.iter_mut().take(usize::from(len)) {
            *kept = UNKNOWN;
        }
    }

    /// Empties the ring, in place.
    pub(crate) fn clear(&mut self) {
        self.nanos = [0; N];
    }

    /// The durations of the calls in slots `0..len` added up, if every one is
    /// known, the sum stays below [`UNKNOWN`], and the ring holds `len`
    /// slots.
    pub(crate) fn total(&self, len: u16) -> Option<u64> {
        self.nanos
            .get(..usize::from(len))?
            .iter()
            .try_fold(0u64, |sum, &nanos| match sum.checked_add(nanos) {
                Some(total) if nanos != UNKNOWN && total != UNKNOWN => Some(total),
                _ => None,
            })
    }
}

/// One bucket of a time window: its absolute bucket number, its counts and
/// its calls' durations added up (in nanoseconds; [`UNKNOWN`] if they are not
/// known).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bucket {
    number: u64,
    counts: WindowStats,
    nanos: u64,
}

/// A bucket's durations when they are not known: restored from a snapshot
/// that did not keep them, or past what 64 bits of nanoseconds hold (584
/// years of calls in one bucket).
const UNKNOWN: u64 = u64::MAX;

/// The last `buckets` buckets of `bucket_nanos` each, as a ring indexed by the
/// absolute bucket number (`now / bucket_nanos`) modulo the bucket count. Each
/// bucket carries its own number, so stale buckets are recognised (and reset) on
/// sight and no clearing pass is needed when time jumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BucketRing<const BUCKETS: usize> {
    ring: [Bucket; BUCKETS],
}

impl<const BUCKETS: usize> BucketRing<BUCKETS> {
    pub(crate) const fn new() -> Self {
        BucketRing {
            ring: [Bucket {
                number: 0,
                counts: WindowStats {
                    calls: 0,
                    failures: 0,
                    slow: 0,
                    slow_failures: 0,
                },
                nanos: 0,
            }; BUCKETS],
        }
    }

    /// The newest bucket number at `now`; time going backwards reads as the
    /// newest bucket already written. A `bucket_nanos` of 0 is a bucket wider
    /// than the clock's range: every instant is in bucket 0.
    fn current(&self, now: Instant, bucket_nanos: u64) -> u64 {
        let k = now.as_nanos().checked_div(bucket_nanos).unwrap_or(0);
        self.ring.iter().fold(k, |k, b| {
            if b.counts.calls > 0 {
                k.max(b.number)
            } else {
                k
            }
        })
    }

    /// Adds one call at `now`, which took `took` nanoseconds.
    pub(crate) fn push(
        &mut self,
        now: Instant,
        bucket_nanos: u64,
        buckets: u16,
        (failed, slow): (bool, bool),
        took: u64,
    ) {
        let n = u64::from(buckets).min(u64::try_from(BUCKETS).unwrap_or(u64::MAX));
        let k = self.current(now, bucket_nanos);
        let Some(index) = k.checked_rem(n).and_then(|i| usize::try_from(i).ok()) else {
            return;
        };
        if let Some(bucket) = self.ring.get_mut(index) {
            if bucket.number != k {
                *bucket = Bucket {
                    number: k,
                    counts: WindowStats::default(),
                    nanos: 0,
                };
            }
            bucket.counts.add(failed, slow);
            // Past 64 bits the sum reads as unknown (`UNKNOWN` is the
            // saturated value), never as a smaller one.
            bucket.nanos = bucket.nanos.saturating_add(took);
        }
    }

    /// The buckets holding calls, as (bucket number, counts, durations in
    /// nanoseconds if known), in ring order.
    pub(crate) fn buckets(&self) -> impl Iterator<Item = (u64, WindowStats, Option<u64>)> + '_ {
        self.ring
            .iter()
            .filter(|b| b.counts.calls > 0)
            .map(|b| (b.number, b.counts, Some(b.nanos).filter(|n| *n != UNKNOWN)))
    }

    /// Puts `counts`, with their durations (`None`: not known), in bucket
    /// `number` of a window of `buckets` buckets, replacing what its slot
    /// held. False if the slot is outside the ring.
    pub(crate) fn put(
        &mut self,
        number: u64,
        buckets: u16,
        counts: WindowStats,
        nanos: Option<u64>,
    ) -> bool {
        let n = u64::from(buckets).min(u64::try_from(BUCKETS).unwrap_or(u64::MAX));
        let slot = number
            .checked_rem(n)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| self.ring.get_mut(i));
        match slot {
            Some(bucket) => {
                *bucket = Bucket {
                    number,
                    counts,
                    nanos: nanos.unwrap_or(UNKNOWN),
                };
                true
            }
            None => false,
        }
    }

    /// The counts of the newest `buckets` buckets at `now`.
    pub(crate) fn stats(&self, now: Instant, bucket_nanos: u64, buckets: u16) -> WindowStats {
        self.in_window(now, bucket_nanos, buckets)
            .fold(WindowStats::default(), |acc, b| acc.plus(b.counts))
    }

    /// The durations of the calls in the newest `buckets` buckets at `now`,
    /// added up in nanoseconds, if every one of those buckets knows its own.
    pub(crate) fn nanos(&self, now: Instant, bucket_nanos: u64, buckets: u16) -> Option<u64> {
        self.in_window(now, bucket_nanos, buckets)
            .try_fold(0u64, |sum, b| match sum.checked_add(b.nanos) {
                Some(total) if b.nanos != UNKNOWN && total != UNKNOWN => Some(total),
                _ => None,
            })
    }

    /// The buckets of the newest `buckets` at `now` that hold calls.
    fn in_window(
        &self,
        now: Instant,
        bucket_nanos: u64,
        buckets: u16,
    ) -> impl Iterator<Item = &Bucket> + '_ {
        let k = self.current(now, bucket_nanos);
        let oldest = k.saturating_sub(u64::from(buckets).saturating_sub(1));
        self.ring
            .iter()
            .take(usize::from(buckets))
            .filter(move |b| b.counts.calls > 0 && b.number >= oldest && b.number <= k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_ring_forgets_the_oldest() {
        let mut ring = CountRing::<2>::new();
        for i in 0..100u16 {
            ring.push(100, i < 10, i % 2 == 0);
        }
        assert_eq!(
            ring.stats(),
            WindowStats {
                calls: 100,
                failures: 10,
                slow: 50,
                slow_failures: 5,
            }
        );
        assert_eq!(ring.get(100, 0), Some((true, true)));
        assert_eq!(ring.get(100, 99), Some((false, false)));
        for _ in 0..10 {
            ring.push(100, false, false);
        }
        assert_eq!(ring.stats().failures, 0);
        assert_eq!(ring.stats().calls, 100);
        assert_eq!(ring.stats().slow, 45);
    }

    #[test]
    fn a_thousand_call_ring_keeps_its_counts() {
        let mut ring = CountRing::<16>::new();
        for i in 0..3000u16 {
            ring.push(1000, i % 5 == 0, i % 7 == 0);
            let first = (i + 1).saturating_sub(1000);
            let count = |every: u16| (first..=i).filter(|j| j % every == 0).count();
            let failures = u32::try_from(count(5)).unwrap();
            let slow = u32::try_from(count(7)).unwrap();
            let slow_failures = u32::try_from(count(35)).unwrap();
            assert_eq!(
                ring.stats(),
                WindowStats {
                    calls: u32::from(i + 1).min(1000),
                    failures,
                    slow,
                    slow_failures,
                },
                "after call {i}"
            );
        }
    }

    /// Rings holding the same calls in the same order are equal, whichever
    /// slot they start from; other calls, order or length are not.
    #[test]
    fn rings_compare_by_the_calls_they_hold() {
        let calls = |n: u16| (0..n).map(|i| (i % 3 == 0, i % 5 == 0));
        // A 10-call window: `skip` calls pushed out before the 10 that stay.
        let filled = |skip: u16| {
            let mut ring = CountRing::<2>::new();
            for _ in 0..skip {
                ring.push(10, true, true);
            }
            for (failed, slow) in calls(10) {
                ring.push(10, failed, slow);
            }
            ring
        };
        let fresh = filled(0);
        for skip in [1, 7, 13, 64] {
            let wrapped = filled(skip);
            assert_ne!(wrapped.next, fresh.next, "skip {skip}: the cursors differ");
            assert_eq!(wrapped, fresh, "skip {skip}");
        }
        let mut other = fresh;
        other.push(10, false, false);
        assert_ne!(other, fresh);
        let mut reordered = CountRing::<2>::new();
        let all: [(bool, bool); 10] = core::array::from_fn(|i| (i % 3 == 0, i % 5 == 0));
        for (failed, slow) in all.into_iter().rev() {
            reordered.push(10, failed, slow);
        }
        assert_eq!(reordered.counts(), fresh.counts());
        assert_ne!(reordered, fresh);
        let mut shorter = CountRing::<2>::new();
        for (failed, slow) in calls(9) {
            shorter.push(10, failed, slow);
        }
        assert_ne!(shorter, fresh);
    }

    #[test]
    fn count_ring_with_no_words_is_total() {
        let mut ring = CountRing::<0>::new();
        ring.push(10, true, true);
        assert_eq!(ring.stats(), WindowStats::default());
    }

    #[test]
    fn unknown_durations_read_as_unknown_until_their_bucket_leaves() {
        let mut ring = BucketRing::<4>::new();
        let sec = 1_000_000_000;
        let counts = WindowStats {
            calls: 2,
            failures: 0,
            slow: 0,
            slow_failures: 0,
        };
        assert!(ring.put(0, 4, counts, None));
        ring.push(Instant::from_millis(1500), sec, 4, (false, false), 9);
        assert_eq!(ring.nanos(Instant::from_millis(3999), sec, 4), None);
        assert_eq!(ring.stats(Instant::from_millis(3999), sec, 4).calls, 3);
        assert_eq!(ring.nanos(Instant::from_millis(4000), sec, 4), Some(9));
        // A sum that would pass 64 bits is not known either.
        ring.push(
            Instant::from_millis(2500),
            sec,
            4,
            (false, false),
            u64::MAX - 5,
        );
        assert_eq!(ring.nanos(Instant::from_millis(4000), sec, 4), None);
    }

    /// A bucket wider than the clock's range (length 0 here, as
    /// `bucket_shape` gives it) holds every instant, the very last one too:
    /// with the length saturated to `u64::MAX` ns instead, that instant fell
    /// in bucket 1 and the window emptied (found by the breaker fuzz target).
    #[test]
    fn a_bucket_wider_than_the_clock_holds_every_instant() {
        let mut ring = BucketRing::<1>::new();
        ring.push(Instant::from_millis(500), 0, 1, (false, true), 3);
        assert_eq!(ring.stats(Instant::MAX, 0, 1).calls, 1);
        assert_eq!(ring.nanos(Instant::MAX, 0, 1), Some(3));
    }

    #[test]
    fn buckets_expire_whole() {
        let mut ring = BucketRing::<4>::new();
        let sec = 1_000_000_000;
        ring.push(Instant::from_millis(500), sec, 4, (true, false), 7);
        ring.push(Instant::from_millis(3500), sec, 4, (false, false), 5);
        let at = |ms| ring.stats(Instant::from_millis(ms), sec, 4);
        let nanos = |ms| ring.nanos(Instant::from_millis(ms), sec, 4);
        assert_eq!(at(3999).calls, 2);
        assert_eq!(nanos(3999), Some(12));
        assert_eq!(at(4000).calls, 1);
        assert_eq!(nanos(4000), Some(5));
        assert_eq!(at(7000).calls, 0);
        assert_eq!(nanos(7000), Some(0));
        // Time going backwards reads as the newest bucket.
        assert_eq!(at(0).calls, 2);
    }
}
