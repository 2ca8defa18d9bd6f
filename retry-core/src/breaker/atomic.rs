//! The closed path of a breaker shared between threads, decided without a lock
//! and without a clock: [`ClosedPath`], and the [`CircuitBreaker`] methods that
//! hand the closed state to it and take it back.
//!
//! A closed breaker with a count window (or none) and no slow-call rule needs no
//! time to admit a call or to record its outcome: the window is the last N
//! outcomes, the streak counts failures, and neither looks at a clock. Only a
//! trip needs one (the open period starts then). [`ClosedPath`] keeps that state
//! in atomics so that threads sharing one breaker admit and record without
//! taking its lock; everything else (open, half-open, manual states, time
//! windows, slow-call rules, tripping itself) stays with the [`CircuitBreaker`]
//! behind the caller's lock, which hands the closed state out with
//! [`CircuitBreaker::resume`] and takes it back with
//! [`CircuitBreaker::suspend`] (or [`CircuitBreaker::trip`]).
//!
//! # What concurrency can and cannot change
//! Calls made one after another get exactly the decisions of the sequential
//! machine: the same trip on the same outcome, with the same cause, the same
//! window and the same streak. Calls that overlap may differ only in these ways:
//! - Two outcomes recorded at the same time may be counted in either order (in
//!   the streak and in the window). A call takes its slot in the window with one
//!   compare-and-swap of a word holding the cursor, the fill and the failure
//!   count, then writes its slot; to another recorder judging the window in
//!   between, its slot still reads as the call it replaces.
//! - Every recorder judges the trip rules on the window and streak as it reads
//!   them after its own outcome. The recorder whose update comes last sees the
//!   state all of them made, so a trip that state calls for is never lost to a
//!   race; several recorders may see it, and the breaker still opens at most
//!   once, because [`CircuitBreaker::trip`] applies a trip only if the closed
//!   state the recorder saw is still the one handed out.
//! - When the lock takes the closed state back (a trip, an operator's move), a
//!   call that read the gate before but has not yet taken its slot fails its
//!   compare-and-swap and goes to the machine, as a call arriving just after
//!   would. A call that took its slot but had not written it yet is read into
//!   the machine as the call its slot held before; its outcome is dropped, as
//!   the sequential machine drops an outcome arriving once the breaker is open
//!   (after a reset or a forced close, it would have counted it in the fresh
//!   window instead). A call stalled that long that writes its slot after the
//!   state was handed out again may take the place of one call in that window.
//! - Permits are never lost: a closed breaker's permit holds no place (its
//!   release does nothing), and half-open probes are admitted and counted only
//!   by the machine behind the lock, so their bound is exact. Transitions come
//!   only from the machine, each once.

use core::time::Duration;

#[cfg(retry_loom)]
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

#[cfg(not(retry_loom))]
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};

use super::window::CountRing;
use super::{
    CallOutcome, CircuitBreaker, Exceeded, Mode, Permit, Rate, RateReading, Recorded,
    TransitionCause, Window,
};
use crate::Instant;

/// The gate's bit saying the closed state is handed out.
const OPEN_GATE: u64 = 1;

/// A value on a cache line of its own, so that what every call reads (the gate,
/// the config) is not evicted by what every call writes (the window).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line<T>(T);

/// The lock-free closed state of a breaker shared between threads: admits and
/// records without a lock or a clock while its [`CircuitBreaker`] is closed with
/// a count window (or none) and no slow-call rule, and says when the machine
/// behind the caller's lock must decide instead.
///
/// Made by [`CircuitBreaker::closed_path`]; the breaker it came from stays the
/// one source of state changes. The protocol, for a caller keeping the breaker
/// behind a lock:
/// - [`request`](ClosedPath::request) admits at once while the closed state is
///   handed out; `None` means: lock, read the clock, ask the machine.
/// - [`record`](ClosedPath::record) records the outcome and answers
///   [`Untimed::Recorded`] (done), [`Untimed::Trip`] (lock, read the clock, call
///   [`CircuitBreaker::trip`]) or [`Untimed::Locked`] (lock, read the clock,
///   call [`CircuitBreaker::record`] with the permit handed back).
/// - [`release`](ClosedPath::release) does nothing for a permit that holds no
///   place, and hands back the others for [`CircuitBreaker::release`].
/// - Around anything else done to the machine under the lock, call
///   [`CircuitBreaker::suspend`] first and [`CircuitBreaker::resume`] after;
///   to read it (metrics, snapshots), [`CircuitBreaker::view`].
///
/// See the module's notes on what overlapping calls can reorder. Needs 64-bit
/// atomics.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BasicRule, BreakerConfig, BreakerState, CallOutcome, CircuitBreaker, Instant, Untimed};
///
/// let mut machine = CircuitBreaker::<0, 0>::new(BreakerConfig::basic(BasicRule {
///     failure_threshold: 2,
///     open_duration: Duration::from_secs(5),
///     success_threshold: 1,
/// })?)?;
/// let path = machine.closed_path();
/// for _ in 0..2 {
///     let permit = path.request().expect("closed: admitted without a clock");
///     match path.record(permit, CallOutcome::failure(Duration::ZERO)) {
///         Untimed::Trip(trip) => {
///             // The second failure trips: now the time is needed.
///             let recorded = machine.trip(&path, trip, Instant::from_secs(1));
///             assert!(recorded.is_some_and(|r| r.transition.is_some()));
///         }
///         other => assert!(matches!(other, Untimed::Recorded(_))),
///     }
/// }
/// assert_eq!(machine.state(), BreakerState::Open);
/// assert!(path.request().is_none());
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Debug)]
pub struct ClosedPath<const WORDS: usize> {
    /// Read by every call: the gate (epoch, generation, open bit) and the config.
    head: Line<Head>,
    /// Written by every recording.
    tail: Line<Tail<WORDS>>,
}

#[derive(Debug)]
struct Head {
    /// `epoch << 32 | generation << 1 | OPEN_GATE`: the generation changes every
    /// time the lock hands the closed state out or takes it back.
    gate: AtomicU64,
    /// The count window's size (0: none).
    size: u32,
    /// The same, as the window word holds it.
    size16: u16,
    /// The gate bit a quiet success needs: the open bit with a count window,
    /// none without one (then every outcome takes the general path).
    quiet_gate: u64,
    /// Whether the config allows the closed path at all.
    eligible: bool,
    threshold: Option<u32>,
    /// Whether the streak rule trips on a streak of none (a threshold of 0).
    streak_zero_trips: bool,
    rate: Option<Rate>,
    minimum: u32,
    /// The failure-rate rule folded for [`ClosedPath::rate_stands`]: the
    /// calls it needs (at least one; `u32::MAX` without the rule, which no
    /// window reaches) and its threshold (full without the rule).
    rate_minimum: u32,
    rate_value: Rate,
    /// For a full window: the failures from which a rule may stand after a
    /// success (the rate rule's threshold over the whole window; 0 when the
    /// streak rule trips on no streak, so that every outcome is judged;
    /// `u32::MAX` when nothing can stand).
    full_trip: u32,
    slow_after: Duration,
}

#[derive(Debug)]
struct Tail<const WORDS: usize> {
    /// The window's cursor, fill and failure count, and the generation of the
    /// gate it belongs to, in one word (see [`Cursor`]): a call takes its slot
    /// with one compare-and-swap, which fails if the lock took the closed
    /// state back meanwhile.
    window: AtomicU64,
    /// Consecutive failures.
    streak: AtomicU32,
    failed: [AtomicU64; WORDS],
    slow: [AtomicU64; WORDS],
}

/// What [`ClosedPath::record`] did with an outcome.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a trip or a permit handed back must go to the machine"]
pub enum Untimed {
    /// Recorded; nothing else to do. The rates the outcome brought to their
    /// thresholds, as [`Recorded::exceeded`] reports them.
    Recorded(Exceeded),
    /// Recorded, and a trip rule is met: take the lock and hand this to
    /// [`CircuitBreaker::trip`] with the time.
    Trip(Trip),
    /// The closed path does not apply (the breaker is not closed, or its config
    /// needs time): hand the permit to [`CircuitBreaker::record`] under the lock.
    Locked(Permit),
}

/// A trip seen by [`ClosedPath::record`], for [`CircuitBreaker::trip`] to apply.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a trip must be handed to the machine"]
pub struct Trip {
    gate: u64,
    cause: TransitionCause,
    exceeded: Exceeded,
}

impl Trip {
    /// The rule that tripped.
    #[must_use]
    pub const fn cause(&self) -> TransitionCause {
        self.cause
    }
}

/// The window word unpacked: bits 0–15 the slot the next call takes, 16–31
/// the calls held, 32–47 the gate generation it belongs to (its low 16 bits),
/// 48–63 the failures held (kept modulo 2¹⁶, so that a decrement that races
/// ahead of its increment borrows out of the word, not into the other fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    next: u16,
    len: u16,
    generation: u16,
    failures: u16,
}

// Truncation is the point: each field is 16 bits of the packed word.
#[allow(clippy::cast_possible_truncation)]
impl Cursor {
    const fn unpack(word: u64) -> Cursor {
        Cursor {
            next: word as u16,
            len: (word >> 16) as u16,
            generation: (word >> 32) as u16,
            failures: (word >> 48) as u16,
        }
    }

    const fn pack(self) -> u64 {
        (self.next as u64)
            | (self.len as u64) << 16
            | (self.generation as u64) << 32
            | (self.failures as u64) << 48
    }

    /// The cursor once a call has taken the next slot of a window of `size`
    /// (`size` > 0): the slot after it (wrapping), one more call held (up to
    /// `size`).
    fn advanced(self, size: u16) -> Cursor {
        let following = self.next.saturating_add(1);
        Cursor {
            next: if following >= size { 0 } else { following },
            len: self.len.saturating_add(1).min(size),
            ..self
        }
    }

    /// The word of a cursor of a window of `size` (`next` < `size`, `len` ≤
    /// `size`) once a call has taken its next slot: the same as
    /// `Cursor::unpack(word).advanced(size).pack()`, worked on the packed word
    /// (one more call held unless full; the slot after, wrapping).
    #[inline]
    const fn advance(word: u64, size: u16) -> u64 {
        let next = word as u16;
        let len = (word >> 16) as u16;
        let grow: u64 = if len < size { 1 << 16 } else { 0 };
        let wrap: u64 = if next.wrapping_add(1) >= size {
            size as u64
        } else {
            0
        };
        word.wrapping_add(grow | 1).wrapping_sub(wrap)
    }

    /// The failures held, read as at most the calls held (a count caught
    /// between two racing updates is clamped).
    fn failures(self) -> u32 {
        u32::from(self.failures.min(self.len))
    }
}

/// The low 16 bits of a gate's generation, as a window word carries them.
#[allow(clippy::cast_possible_truncation)]
const fn generation_of(gate: u64) -> u16 {
    (gate >> 1) as u16
}

const fn epoch_of(gate: u64) -> u32 {
    (gate >> 32) as u32
}

/// The gate after `gate` with a new generation: open (carrying `epoch`) or shut.
const fn next_gate(gate: u64, epoch: u32, open: bool) -> u64 {
    let generation = (gate >> 1).wrapping_add(1) & 0x7FFF_FFFF;
    ((epoch as u64) << 32) | (generation << 1) | if open { OPEN_GATE } else { 0 }
}

/// Whether `slot` holds a failed or a slow call. A handed-out cursor's slot
/// is always in the window, which fits the rings; the word is picked modulo
/// the rings' length all the same, so that the read needs no bounds check.
#[inline]
fn marked<const WORDS: usize>(tail: &Tail<WORDS>, slot: u16) -> bool {
    let mask = 1u64.wrapping_shl(u32::from(slot % 64));
    let index = usize::from(slot / 64).checked_rem(WORDS).unwrap_or(0);
    let word = |ring: &[AtomicU64]| ring.get(index).map_or(0, |w| w.load(SeqCst));
    (word(&tail.failed) | word(&tail.slow)) & mask != 0
}

fn bit(ring: &[AtomicU64], slot: u32) -> bool {
    let mask = 1u64.wrapping_shl(slot % 64);
    ring.get(usize::try_from(slot / 64).unwrap_or(usize::MAX))
        .is_some_and(|w| w.load(SeqCst) & mask != 0)
}

/// Sets the bit of `slot` to `value`; returns what it was. A bit that already
/// holds the value is only read.
fn put(ring: &[AtomicU64], slot: u32, value: bool) -> bool {
    let mask = 1u64.wrapping_shl(slot % 64);
    let Some(word) = ring.get(usize::try_from(slot / 64).unwrap_or(usize::MAX)) else {
        return false;
    };
    let was = word.load(SeqCst) & mask != 0;
    if was == value {
        return was;
    }
    let old = if value {
        word.fetch_or(mask, SeqCst)
    } else {
        word.fetch_and(!mask, SeqCst)
    };
    old & mask != 0
}

/// The failures a full count window of `size` calls must hold for a rule to
/// stand after a success (see `Head::full_trip`).
fn full_trip(config: &super::BreakerConfig, size: u32) -> u32 {
    if config.failure_threshold() == Some(0) {
        return 0;
    }
    match config.failure_rate() {
        Some(rate) if size >= config.minimum_calls().max(1) => (0..=size)
            .find(|&failures| rate.is_reached(failures, size))
            .unwrap_or(u32::MAX),
        _ => u32::MAX,
    }
}

impl<const WORDS: usize> ClosedPath<WORDS> {
    fn new(config: &super::BreakerConfig) -> Self {
        let (size, counted) = match config.window() {
            Some(Window::Count { calls }) => (u32::from(calls), true),
            None => (0, true),
            Some(Window::Time { .. }) => (0, false),
        };
        let fits = usize::try_from(size).is_ok_and(|s| s <= WORDS.saturating_mul(64));
        ClosedPath {
            head: Line(Head {
                gate: AtomicU64::new(0),
                size,
                size16: u16::try_from(size).unwrap_or(u16::MAX),
                quiet_gate: if size > 0 { OPEN_GATE } else { 0 },
                eligible: counted && fits && config.slow_call_rate().is_none(),
                threshold: config.failure_threshold(),
                streak_zero_trips: config.failure_threshold() == Some(0),
                rate: config.failure_rate(),
                minimum: config.minimum_calls(),
                rate_minimum: config
                    .failure_rate()
                    .map_or(u32::MAX, |_| config.minimum_calls().max(1)),
                rate_value: config.failure_rate().unwrap_or(Rate::FULL),
                full_trip: full_trip(config, size),
                slow_after: config.slow_call_duration(),
            }),
            tail: Line(Tail {
                window: AtomicU64::new(0),
                streak: AtomicU32::new(0),
                failed: core::array::from_fn(|_| AtomicU64::new(0)),
                slow: core::array::from_fn(|_| AtomicU64::new(0)),
            }),
        }
    }

    /// Whether the config lets the closed path decide without time (a count
    /// window or none, no slow-call rule). When it does not, every call goes to
    /// the machine, and an outcome's duration matters.
    #[must_use]
    pub fn is_untimed(&self) -> bool {
        self.head.0.eligible
    }

    /// Whether the closed state is handed out right now.
    #[must_use]
    pub fn is_handed_out(&self) -> bool {
        self.head.0.gate.load(SeqCst) & OPEN_GATE != 0
    }

    /// A permit for a call, if the breaker is closed and its closed state is
    /// handed out; `None`: ask the machine, with the time.
    #[inline]
    pub fn request(&self) -> Option<Permit> {
        let gate = self.head.0.gate.load(SeqCst);
        (gate & OPEN_GATE != 0).then(|| Permit {
            epoch: epoch_of(gate),
            probe: false,
        })
    }

    /// Hands `permit` back without an outcome. `None` when nothing needs doing (a
    /// permit that holds no place: not a probe, or the breaker is closed);
    /// otherwise the permit, for [`CircuitBreaker::release`] under the lock.
    #[inline]
    pub fn release(&self, permit: Permit) -> Option<Permit> {
        (permit.probe && !self.is_handed_out()).then_some(permit)
    }

    /// Records `outcome` for `permit` in the closed state, as
    /// [`CircuitBreaker::record`] would while closed: in the window, in the
    /// streak unless late, and judged by the trip rules unless late. A duration
    /// of zero (unmeasured) is never slow.
    #[inline]
    pub fn record(&self, permit: Permit, outcome: CallOutcome) -> Untimed {
        self.record_quiet(permit, outcome)
            .unwrap_or(Untimed::Recorded(Exceeded::NONE))
    }

    /// [`record`](Self::record), answering `None` where it would answer
    /// `Untimed::Recorded(Exceeded::NONE)`: the outcome is in, no rate reached
    /// its threshold with it, nothing trips. That is the common case, and a
    /// caller with nothing to report then has nothing to do (`Some` may still
    /// carry that answer when a general path found it).
    ///
    /// The common case itself takes no more than a handful of reads and one
    /// compare-and-swap: a success that is not slow, in a count window whose
    /// next slot already reads as one (neither failed nor slow), only takes
    /// that slot (no bit to write, no failure count to move), clears the streak
    /// if it is not clear, and checks that no rate rule stands.
    #[inline]
    pub fn record_quiet(&self, permit: Permit, outcome: CallOutcome) -> Option<Untimed> {
        let head = &self.head.0;
        let tail = &self.tail.0;
        let gate = head.gate.load(SeqCst);
        let size = head.size16;
        if !outcome.success || outcome.duration > head.slow_after || gate & head.quiet_gate == 0 {
            return Some(self.record_any(permit, outcome));
        }
        let mut word = tail.window.load(SeqCst);
        let taken = loop {
            let cursor = Cursor::unpack(word);
            if cursor.generation != generation_of(gate) || marked(tail, cursor.next) {
                return Some(self.record_any(permit, outcome));
            }
            match tail.window.compare_exchange_weak(
                word,
                Cursor::advance(word, size),
                SeqCst,
                SeqCst,
            ) {
                Ok(_) => break word,
                Err(now) => word = now,
            }
        };
        let late = permit.epoch != epoch_of(gate);
        // (The streak is mostly clear already: read it before anything else.)
        if tail.streak.load(SeqCst) != 0 && !late {
            tail.streak.store(0, SeqCst);
        }
        // Mostly no rule is met: say nothing. The window is judged as this
        // call's compare-and-swap left it (an outcome counted since is
        // judged by its own recorder).
        let after = Cursor::unpack(Cursor::advance(taken, size));
        let stands = if after.len == size {
            // The common case, a full window: one compare (failures held
            // against the threshold; never more than the calls held).
            u32::from(after.failures) >= head.full_trip
        } else {
            (!late && head.streak_zero_trips) || self.rate_stands(after)
        };
        if !stands {
            return None;
        }
        Some(self.settle_success(gate, late, taken, after))
    }

    /// The end of [`record_quiet`](Self::record_quiet)'s common case when a
    /// rule stands: the full judgement.
    #[cold]
    #[inline(never)]
    fn settle_success(&self, gate: u64, late: bool, taken: u64, after: Cursor) -> Untimed {
        let pushed_out = (Cursor::unpack(taken).len >= self.head.0.size16).then_some(false);
        self.settle(gate, late, 0, false, after, pushed_out)
    }

    /// The window word as it stands now, or `after` (the word as the caller's
    /// outcome left it) if the lock has taken the window back since.
    #[inline]
    fn window_now(&self, after: Cursor) -> Cursor {
        let now = Cursor::unpack(self.tail.0.window.load(SeqCst));
        if now.generation == after.generation {
            now
        } else {
            after
        }
    }

    /// Whether the failure-rate rule (if there is one) is met by `failures` of
    /// the last `calls`.
    #[inline]
    fn rate_met(&self, failures: u32, calls: u32) -> bool {
        let head = &self.head.0;
        calls >= head.rate_minimum && head.rate_value.is_reached(failures, calls)
    }

    /// Whether the failure-rate rule (if there is one) is met by the window
    /// `now` holds.
    #[inline]
    fn rate_stands(&self, now: Cursor) -> bool {
        self.rate_met(now.failures(), u32::from(now.len))
    }

    /// [`record`](Self::record) in general.
    #[inline(never)]
    fn record_any(&self, permit: Permit, outcome: CallOutcome) -> Untimed {
        let head = &self.head.0;
        let tail = &self.tail.0;
        let gate = head.gate.load(SeqCst);
        if gate & OPEN_GATE == 0 {
            return Untimed::Locked(permit);
        }
        let failed = !outcome.success;
        let slow = outcome.duration > head.slow_after;
        // The window: take this call's slot (and learn whether it pushes an
        // older call out), then write it, then count its failure.
        let mut gate = gate;
        let mut after = Cursor::unpack(0);
        let mut pushed_out = None;
        if head.size > 0 {
            let size = u16::try_from(head.size).unwrap_or(u16::MAX);
            let mut word = tail.window.load(SeqCst);
            let (taken, reserved) = loop {
                let cursor = Cursor::unpack(word);
                if cursor.generation != generation_of(gate) {
                    // The lock took the closed state back (and perhaps handed
                    // it out again) since the gate was read: read it again.
                    gate = head.gate.load(SeqCst);
                    if gate & OPEN_GATE == 0 {
                        return Untimed::Locked(permit);
                    }
                    word = tail.window.load(SeqCst);
                    continue;
                }
                let next = cursor.advanced(size);
                match tail
                    .window
                    .compare_exchange_weak(word, next.pack(), SeqCst, SeqCst)
                {
                    Ok(_) => break (cursor, next),
                    Err(now) => word = now,
                }
            };
            let slot = u32::from(taken.next.min(size.saturating_sub(1)));
            let was_failed = put(&tail.failed, slot, failed);
            let _ = put(&tail.slow, slot, slow);
            let full = taken.len >= size;
            if full {
                pushed_out = Some(was_failed);
            }
            // The failure count moves only when the slot's bit did; a change
            // of generation meanwhile means the window was taken back and its
            // count set afresh, so this one is dropped.
            let delta: u64 = match (was_failed && full, failed) {
                (false, true) => 1 << 48,
                (true, false) => 0xFFFFu64 << 48,
                _ => 0,
            };
            after = reserved;
            if delta != 0 {
                let mut word = tail.window.load(SeqCst);
                loop {
                    let cursor = Cursor::unpack(word);
                    if cursor.generation != taken.generation {
                        break;
                    }
                    let moved = word.wrapping_add(delta);
                    match tail
                        .window
                        .compare_exchange_weak(word, moved, SeqCst, SeqCst)
                    {
                        Ok(_) => {
                            after = Cursor::unpack(moved);
                            break;
                        }
                        Err(now) => word = now,
                    }
                }
            }
        }
        let late = permit.epoch != epoch_of(gate);
        let streak = if late {
            0
        } else if failed {
            tail.streak
                .fetch_update(SeqCst, SeqCst, |s| Some(s.saturating_add(1)))
                .map_or(u32::MAX, |s| s.saturating_add(1))
        } else {
            if tail.streak.load(SeqCst) != 0 {
                tail.streak.store(0, SeqCst);
            }
            0
        };
        self.settle(gate, late, streak, failed, after, pushed_out)
    }

    /// Judges the trip rules once an outcome is in: `after` is the window word
    /// as the outcome left it, `pushed_out` whether the call it replaced had
    /// failed (`None`: it replaced none), `streak` the consecutive failures.
    #[inline(never)]
    fn settle(
        &self,
        gate: u64,
        late: bool,
        streak: u32,
        failed: bool,
        after: Cursor,
        pushed_out: Option<bool>,
    ) -> Untimed {
        let head = &self.head.0;
        // The window as it stands now (only when a rate rule reads it).
        let mut exceeded = Exceeded::NONE;
        let mut rate_trip = false;
        if head.rate.is_some() && head.size > 0 {
            let now = self.window_now(after);
            let calls = u32::from(now.len);
            let failures = now.failures();
            let minimum = head.minimum;
            let reached = |f: u32, c: u32| self.rate_met(f, c);
            rate_trip = reached(failures, calls);
            if rate_trip {
                // Crossed by this outcome: the window before it held the call
                // it pushed out instead (or one call fewer).
                let (calls_before, failures_before) = match pushed_out {
                    Some(f) => (
                        calls,
                        failures
                            .saturating_sub(u32::from(failed))
                            .saturating_add(u32::from(f)),
                    ),
                    None => (
                        calls.saturating_sub(1),
                        failures.saturating_sub(u32::from(failed)),
                    ),
                };
                if !reached(failures_before, calls_before) {
                    exceeded.failure_rate = RateReading::of(failures, calls, minimum).rate();
                }
            }
        }
        if late {
            return Untimed::Recorded(exceeded);
        }
        let cause = if head.threshold.is_some_and(|n| streak >= n) {
            Some(TransitionCause::ConsecutiveFailures)
        } else if rate_trip {
            Some(TransitionCause::FailureRate)
        } else {
            None
        };
        match cause {
            Some(cause) => Untimed::Trip(Trip {
                gate,
                cause,
                exceeded,
            }),
            None => Untimed::Recorded(exceeded),
        }
    }
}

impl<const WORDS: usize, const BUCKETS: usize> CircuitBreaker<WORDS, BUCKETS> {
    /// A [`ClosedPath`] for this breaker, with the closed state handed out to it
    /// if the breaker is closed and its config needs no time.
    #[must_use]
    pub fn closed_path(&self) -> ClosedPath<WORDS> {
        let path = ClosedPath::new(&self.config);
        self.resume(&path);
        path
    }

    /// Takes the closed state back from `path` (its window and streak), so that
    /// the breaker can be changed under the caller's lock. Calls on `path` go to
    /// the machine until [`resume`](Self::resume). Does nothing if the state is
    /// not handed out.
    pub fn suspend(&mut self, path: &ClosedPath<WORDS>) {
        let head = &path.head.0;
        let gate = head.gate.load(SeqCst);
        if gate & OPEN_GATE == 0 {
            return;
        }
        let shut = next_gate(gate, epoch_of(gate), false);
        head.gate.store(shut, SeqCst);
        // Move the window to the shut gate's generation: a call that read the
        // gate before it shut cannot take a slot any more (it reads the gate
        // again and comes to the machine).
        let tail = &path.tail.0;
        let mut word = tail.window.load(SeqCst);
        loop {
            let moved = Cursor {
                generation: generation_of(shut),
                ..Cursor::unpack(word)
            };
            match tail
                .window
                .compare_exchange_weak(word, moved.pack(), SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        self.pull(path);
    }

    /// Hands the closed state out to `path` if the breaker is closed and its
    /// config needs no time (after [`suspend`](Self::suspend) and whatever was
    /// done under the lock).
    pub fn resume(&self, path: &ClosedPath<WORDS>) {
        let head = &path.head.0;
        let tail = &path.tail.0;
        let gate = head.gate.load(SeqCst);
        if gate & OPEN_GATE != 0 || !head.eligible || self.mode != Mode::Closed {
            return;
        }
        let open = next_gate(gate, self.epoch, true);
        tail.streak.store(self.consecutive_failures, SeqCst);
        let size = u16::try_from(head.size).unwrap_or(u16::MAX);
        // The machine's window, oldest call first, from slot 0: its next call
        // goes to slot `len` (0 once full, the oldest).
        let len = self.calls.len().min(size);
        let mut failures = 0u16;
        for slot in 0..size {
            let (failed, slow) = self.calls.get(size, slot).unwrap_or((false, false));
            failures = failures.saturating_add(u16::from(failed));
            let _ = put(&tail.failed, u32::from(slot), failed);
            let _ = put(&tail.slow, u32::from(slot), slow);
        }
        let cursor = Cursor {
            next: if len >= size { 0 } else { len },
            len,
            generation: generation_of(open),
            failures,
        };
        tail.window.store(cursor.pack(), SeqCst);
        head.gate.store(open, SeqCst);
    }

    /// A copy of the breaker with what `path` holds of the closed state (for
    /// metrics and snapshots). Outcomes being recorded meanwhile may or may not
    /// be in it.
    #[must_use]
    pub fn view(&self, path: &ClosedPath<WORDS>) -> Self {
        let mut copy = self.clone();
        if path.is_handed_out() {
            copy.pull(path);
        }
        copy
    }

    /// Applies a trip `path` saw, at `now`: the breaker opens with the trip's
    /// cause if the closed state the recorder saw is still the one handed out
    /// (otherwise another call tripped or changed the breaker first, and
    /// nothing happens: `None`). Call it under the caller's lock.
    pub fn trip(&mut self, path: &ClosedPath<WORDS>, trip: Trip, now: Instant) -> Option<Recorded> {
        if path.head.0.gate.load(SeqCst) != trip.gate || self.mode != Mode::Closed {
            return None;
        }
        self.suspend(path);
        let transition = self.open(now, trip.cause);
        Some(Recorded {
            transition: Some(transition),
            ignored: None,
            exceeded: trip.exceeded,
        })
    }

    /// Copies the window and streak `path` holds into the machine.
    fn pull(&mut self, path: &ClosedPath<WORDS>) {
        let head = &path.head.0;
        let tail = &path.tail.0;
        self.consecutive_failures = tail.streak.load(SeqCst);
        // The streak and window change under the cache of when rules are next
        // checked: check them on the next outcome.
        self.quiet = 0;
        let size = u16::try_from(head.size).unwrap_or(u16::MAX);
        if size == 0 {
            return;
        }
        let cursor = Cursor::unpack(tail.window.load(SeqCst));
        let len = cursor.len.min(size);
        // The oldest call sits `len` slots behind the next one.
        let oldest = u32::from(cursor.next)
            .saturating_add(u32::from(size))
            .saturating_sub(u32::from(len));
        let mut ring = CountRing::new();
        for i in 0..u32::from(len) {
            let slot = oldest
                .saturating_add(i)
                .checked_rem(u32::from(size))
                .unwrap_or(0);
            let _ = ring.push(size, bit(&tail.failed, slot), bit(&tail.slow, slot));
        }
        self.calls = ring;
    }
}

#[cfg(test)]
mod tests {
    use super::{full_trip, Cursor};
    use crate::{BreakerConfig, Rate};

    /// The one compare a quiet success makes on a full window says what the
    /// rules say: a rule may stand exactly when the failures held reach
    /// `full_trip` (every rate, several windows and minimums, with and
    /// without a streak rule tripping on no streak).
    #[test]
    fn the_full_window_threshold_is_the_rate_rule() {
        let mut checked = 0u32;
        for size in [1u16, 2, 3, 7, 10, 64, 100, 101, 999, 1_000] {
            for basis_points in (1..=10_000u16).step_by(37).chain([5_000, 9_999, 10_000]) {
                let rate = Rate::from_basis_points(basis_points);
                for minimum in [
                    0,
                    1,
                    u32::from(size) / 2,
                    u32::from(size),
                    u32::from(size) + 1,
                ] {
                    for threshold in [None, Some(0), Some(3)] {
                        let Ok(config) = BreakerConfig::builder()
                            .failure_rate(rate)
                            .count_window(size)
                            .minimum_calls(minimum)
                            .failure_threshold(threshold)
                            .build()
                        else {
                            continue;
                        };
                        let trip = full_trip(&config, u32::from(size));
                        for failures in 0..=u32::from(size) {
                            let stands = threshold == Some(0)
                                || (u32::from(size) >= minimum
                                    && rate.is_reached(failures, u32::from(size)));
                            assert_eq!(
                                failures >= trip,
                                stands,
                                "{failures} of {size}, {rate:?}, minimum {minimum}, {threshold:?}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    /// The packed-word step is the unpacked one, for every cursor a window
    /// can hold (sizes up to 300 exhaustively, then the largest ones).
    #[test]
    fn advancing_the_packed_word_is_advancing_the_cursor() {
        let sizes = (1..=300u16).chain([1_000, 1_024, 65_471, 65_472, u16::MAX]);
        let mut checked = 0u32;
        for size in sizes {
            let nexts = [0, 1, size / 2, size.saturating_sub(2), size - 1];
            let lens = [0, 1, size / 2, size.saturating_sub(1), size];
            for next in nexts.into_iter().filter(|n| *n < size) {
                for len in lens {
                    for (generation, failures) in [(0, 0), (7, 3), (u16::MAX, u16::MAX)] {
                        let cursor = Cursor {
                            next,
                            len,
                            generation,
                            failures,
                        };
                        assert_eq!(
                            Cursor::advance(cursor.pack(), size),
                            cursor.advanced(size).pack(),
                            "{cursor:?} in a window of {size}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 20_000, "{checked}");
    }
}
