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
//!   the streak and in the window), and a recording still in flight reads, to
//!   another recorder judging the window, as the call it replaces.
//! - The trip is judged by every recorder on the window and streak as it reads
//!   them after its own outcome. Whichever recording completes the state that
//!   meets a trip rule sees it (so a trip is never lost to a race), and several
//!   racing recorders may see it; the breaker still opens at most once, because
//!   [`CircuitBreaker::trip`] applies a trip only if the closed state handed out
//!   is still the one the recorder saw.
//! - An outcome whose recording overlaps the lock taking the closed state back
//!   (a trip, an operator's change) is either counted before the change or
//!   dropped: as the sequential machine does for an outcome that arrives once
//!   the breaker is open, but not for one that arrives after a reset or a
//!   forced close, which it would count in the fresh window. An outcome whose
//!   recording overlaps the whole of an open and half-open period may take the
//!   place of one call in the window that follows. The counts are always read
//!   from the window's bits, so no race leaves them out of step with it.
//! - Permits are never lost: a closed breaker's permit holds no place (its
//!   release does nothing), and half-open probes are admitted and counted only
//!   by the machine behind the lock, so their bound is exact.

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
/// use retry_core::{BreakerConfig, BreakerState, CallOutcome, CircuitBreaker, Instant, Untimed};
///
/// let mut machine = CircuitBreaker::<0, 0>::new(BreakerConfig::basic(2, Duration::from_secs(5), 1)?)?;
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
    /// Whether the config allows the closed path at all.
    eligible: bool,
    threshold: Option<u32>,
    rate: Option<Rate>,
    minimum: u32,
    slow_after: Duration,
}

#[derive(Debug)]
struct Tail<const WORDS: usize> {
    /// Calls numbered since the path was made; call `k` sits in slot `k % size`.
    next: AtomicU64,
    /// The number of the window's first call (a multiple of the size).
    start: AtomicU64,
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

const fn epoch_of(gate: u64) -> u32 {
    (gate >> 32) as u32
}

/// The gate after `gate` with a new generation: open (carrying `epoch`) or shut.
const fn next_gate(gate: u64, epoch: u32, open: bool) -> u64 {
    let generation = (gate >> 1).wrapping_add(1) & 0x7FFF_FFFF;
    ((epoch as u64) << 32) | (generation << 1) | if open { OPEN_GATE } else { 0 }
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

/// The bits set among the first `bits` slots.
fn count(ring: &[AtomicU64], bits: u32) -> u32 {
    let full = usize::try_from(bits / 64).unwrap_or(usize::MAX);
    let rest = bits % 64;
    let whole = ring
        .iter()
        .take(full)
        .fold(0u32, |n, w| n.saturating_add(w.load(SeqCst).count_ones()));
    let part = match ring.get(full) {
        Some(w) if rest > 0 => (w.load(SeqCst) & (1u64.wrapping_shl(rest).wrapping_sub(1))).count_ones(),
        _ => 0,
    };
    whole.saturating_add(part)
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
                eligible: counted && fits && config.slow_call_rate().is_none(),
                threshold: config.failure_threshold(),
                rate: config.failure_rate(),
                minimum: config.minimum_calls(),
                slow_after: config.slow_call_duration(),
            }),
            tail: Line(Tail {
                next: AtomicU64::new(0),
                start: AtomicU64::new(0),
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
    pub fn is_open(&self) -> bool {
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
        (permit.probe && !self.is_open()).then_some(permit)
    }

    /// Records `outcome` for `permit` in the closed state, as
    /// [`CircuitBreaker::record`] would while closed: in the window, in the
    /// streak unless late, and judged by the trip rules unless late. A duration
    /// of zero (unmeasured) is never slow.
    #[inline]
    pub fn record(&self, permit: Permit, outcome: CallOutcome) -> Untimed {
        let head = &self.head.0;
        let tail = &self.tail.0;
        let gate = head.gate.load(SeqCst);
        if gate & OPEN_GATE == 0 {
            return Untimed::Locked(permit);
        }
        let late = permit.epoch != epoch_of(gate);
        let failed = !outcome.success;
        let slow = outcome.duration > head.slow_after;
        // The window: this call's slot, and whether it pushed an older call out.
        let mut pushed_out = None;
        if head.size > 0 {
            let number = tail.next.fetch_add(1, SeqCst);
            let start = tail.start.load(SeqCst);
            let size = u64::from(head.size);
            let slot = u32::try_from(number % size).unwrap_or(0);
            let was_failed = put(&tail.failed, slot, failed);
            let _ = put(&tail.slow, slot, slow);
            if number.wrapping_sub(start) >= size && number >= start {
                pushed_out = Some(was_failed);
            }
        }
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
        // The window as it stands now (only when a rate rule reads it).
        let mut exceeded = Exceeded::NONE;
        let mut rate_trip = false;
        if let (Some(rate), true) = (head.rate, head.size > 0) {
            let start = tail.start.load(SeqCst);
            let held = tail.next.load(SeqCst).saturating_sub(start);
            let calls = u32::try_from(held.min(u64::from(head.size))).unwrap_or(head.size);
            let failures = count(&tail.failed, calls);
            let minimum = head.minimum;
            let reached = |f: u32, c: u32| c >= minimum && rate.is_reached(f, c);
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
            rate_trip = reached(failures, calls);
            if rate_trip && !reached(failures_before, calls_before) {
                exceeded.failure_rate = RateReading::of(failures, calls, minimum).rate();
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
        let gate = path.head.0.gate.load(SeqCst);
        if gate & OPEN_GATE == 0 {
            return;
        }
        path.head
            .0
            .gate
            .store(next_gate(gate, epoch_of(gate), false), SeqCst);
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
        tail.streak.store(self.consecutive_failures, SeqCst);
        let size = head.size;
        if size > 0 {
            let len = u32::from(self.calls.len()).min(size);
            // The window starts on a multiple of the size, so its calls sit in
            // slots 0.. until it is full, as in the machine's ring.
            let mut current = tail.next.load(SeqCst);
            let start = loop {
                let start = current
                    .div_ceil(u64::from(size))
                    .saturating_mul(u64::from(size));
                match tail.next.compare_exchange(
                    current,
                    start.saturating_add(u64::from(len)),
                    SeqCst,
                    SeqCst,
                ) {
                    Ok(_) => break start,
                    Err(now) => current = now,
                }
            };
            let window = u16::try_from(size).unwrap_or(u16::MAX);
            for slot in 0..size {
                let (failed, slow) = u16::try_from(slot)
                    .ok()
                    .and_then(|i| self.calls.get(window, i))
                    .unwrap_or((false, false));
                let _ = put(&tail.failed, slot, failed);
                let _ = put(&tail.slow, slot, slow);
            }
            tail.start.store(start, SeqCst);
        }
        head.gate.store(next_gate(gate, self.epoch, true), SeqCst);
    }

    /// A copy of the breaker with what `path` holds of the closed state (for
    /// metrics and snapshots). Outcomes being recorded meanwhile may or may not
    /// be in it.
    #[must_use]
    pub fn view(&self, path: &ClosedPath<WORDS>) -> Self {
        let mut copy = self.clone();
        if path.is_open() {
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
        if head.size == 0 {
            return;
        }
        let size = u64::from(head.size);
        let next = tail.next.load(SeqCst);
        let held = next.saturating_sub(tail.start.load(SeqCst)).min(size);
        let window = u16::try_from(head.size).unwrap_or(u16::MAX);
        let mut ring = CountRing::new();
        for number in next.saturating_sub(held)..next {
            let slot = u32::try_from(number % size).unwrap_or(0);
            let _ = ring.push(window, bit(&tail.failed, slot), bit(&tail.slow, slot));
        }
        self.calls = ring;
    }
}
