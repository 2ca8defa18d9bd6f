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
//! # Where each outcome goes
//! The state is kept in three places, so that the outcome most calls have
//! writes nothing another thread reads:
//! - **The gate** (its own cache line, read by every call and written only
//!   when the closed state is handed out or taken back, or when the window
//!   starts or stops taking quiet successes): open or shut, the closed
//!   period's epoch, a generation, and the *striped* bit.
//! - **Stripes**: [`ClosedPath::STRIPES`] counters, each on a cache line of its
//!   own. While the striped bit is set (the count window is full and holds
//!   fewer failures than any rule needs to stand after a success; or there is
//!   no window), a success that is not slow and not late only adds one to its
//!   caller's stripe ([`ClosedPath::record_quiet_on`] names it; a thread-shared
//!   breaker gives each thread its own). Nothing is judged: such a success
//!   can make no rule stand, and the streak it clears is cleared when the
//!   successes are next counted in. It reads the gate again after adding:
//!   if the gate changed meanwhile (the striped bit cleared by a late
//!   failure that left a rule standing, or the state taken back), it takes
//!   the fold lock and has the window judged as after a success, so that a
//!   trip it calls for is not lost.
//! - **The window and streak** (the tail's cache line, and the window's rings),
//!   changed only under the *fold lock*: a bit of a lock word on a cache line
//!   of its own (a recorder waiting for it reads that line, not the one the
//!   holder writes), taken with one compare-and-swap. Every other outcome (a
//!   failure, a slow or late call, any outcome while the window fills or
//!   while the striped bit is clear) takes it, first counts in the successes
//!   the stripes gathered since the last time (the sum of the stripes, less
//!   the sum already counted: that many successes, cleared into the window's
//!   next slots, and the streak cleared), then records itself and judges the
//!   rules as the machine does, and sets or clears the striped bit for what
//!   the window now holds. The lock side ([`CircuitBreaker::suspend`],
//!   [`CircuitBreaker::view`]) counts the stripes in the same way before it
//!   reads the window.
//!
//! The stripes only ever grow; the sum already counted moves only under the
//! fold lock, so each success is counted in exactly once. The successes
//! gathered between two outcomes that take the lock are indistinguishable
//! from one another, so counting them in just before the second one gives
//! the window the sequential machine has.
//!
//! # What concurrency can and cannot change
//! Calls made one after another (one thread, or threads whose calls are
//! ordered by other means) get exactly the decisions of the sequential
//! machine: the same trip on the same outcome, with the same cause, the same
//! window and the same streak. A success made before a failure is on its
//! stripe when the failure's recorder adds the stripes up. Calls that overlap
//! may differ only in these ways:
//! - Two outcomes recorded at the same time may be counted in either order (in
//!   the streak and in the window); a quiet success is counted in by the next
//!   outcome that takes the fold lock, so it may land after a failure that
//!   overlapped it.
//! - Every recorder that takes the fold lock judges the trip rules on the
//!   window and streak as they stand after its own outcome. The recorder that
//!   takes the lock last sees the state all of them made, so a trip that state
//!   calls for is never lost to a race; quiet successes never make a rule
//!   stand (the striped bit is clear whenever one could). Several recorders
//!   may see a trip, and the breaker still opens at most once, because
//!   [`CircuitBreaker::trip`] applies a trip only if the closed state the
//!   recorder saw is still the one handed out.
//! - When the lock takes the closed state back (a trip, an operator's move), a
//!   call that read the gate before but has not yet taken the fold lock fails
//!   to take it and goes to the machine, as a call arriving just after would.
//!   A quiet success that read the gate before but adds to its stripe only
//!   after the stripes were counted is dropped, as the sequential machine
//!   drops an outcome arriving once the breaker is open (after a reset or a
//!   forced close it would have counted it in the fresh window instead); one
//!   stalled so long that it adds to its stripe after the state was handed
//!   out again takes the place of one call in that window.
//! - Permits are never lost: a closed breaker's permit holds no place (its
//!   release does nothing), and half-open probes are admitted and counted only
//!   by the machine behind the lock, so their bound is exact. Transitions come
//!   only from the machine, each once.
//!
//! The fold lock is held for a bounded piece of work (adding up the stripes,
//! clearing at most the window's words, recording one outcome, judging it)
//! and never while waiting for anything else; a recorder that finds it taken
//! spins until it is free.
//!
//! # For changes to the breaker's counts
//! While the closed state is handed out, the machine's own window and
//! consecutive-failure count are stale: the live ones are the tail's plus
//! what the stripes gathered. [`CircuitBreaker::suspend`] (and
//! [`CircuitBreaker::view`], on a copy) brings them into the machine, and
//! [`CircuitBreaker::resume`] hands them out again, taking the stripes as
//! they stand as counted (so a reset or any other change made between the
//! two starts from the machine's values). Nothing else about the breaker
//! lives here: calls refused, probes, epochs, open periods and transitions
//! are the machine's, changed only under the caller's lock (a refusal never
//! comes through the closed path: it is handed out only while closed). A
//! count added to the closed state must be counted in on the same fold as
//! the window, or kept by the machine.

use core::time::Duration;

#[cfg(retry_loom)]
use loom::hint::spin_loop;
#[cfg(retry_loom)]
use loom::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Relaxed, Release, SeqCst},
};

#[cfg(not(retry_loom))]
use core::hint::spin_loop;
#[cfg(not(retry_loom))]
use core::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Relaxed, Release, SeqCst},
};

use super::window::CountRing;
use super::{
    CallOutcome, CircuitBreaker, Exceeded, Mode, Permit, Rate, RateReading, Recorded,
    TransitionCause, Window,
};
use crate::Instant;

/// The gate's bit saying the closed state is handed out.
const OPEN_GATE: u64 = 1;

/// The gate's bit saying quiet successes go to the stripes.
const STRIPED: u64 = 2;

/// The gate's generation: bits 2 to 31.
const GENERATION_MASK: u64 = 0x3FFF_FFFF;

/// The lock word's bit saying a recorder holds the fold lock.
const LOCKED: u32 = 1;

/// How many stripes a path counts quiet successes on (a power of two). Under
/// loom, two: enough for every race between stripes, few enough to explore.
#[cfg(not(retry_loom))]
const STRIPE_COUNT: usize = 16;
#[cfg(retry_loom)]
const STRIPE_COUNT: usize = 2;

/// A value on a cache line of its own, so that what every call reads (the gate,
/// the config) is not evicted by what the outcomes that take the fold lock
/// write (the window).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line<T>(T);

/// One stripe's count of quiet successes, on 128 bytes of its own (two cache
/// lines: x86's adjacent-line prefetch pairs them), so that threads counting
/// on different stripes never write a line another one writes.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

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
///   [`record_on`](ClosedPath::record_on) is the same, counting a quiet
///   success on a stripe the caller names: threads that name different
///   stripes record their successes without writing a cache line in common.
/// - [`release`](ClosedPath::release) does nothing for a permit that holds no
///   place, and hands back the others for [`CircuitBreaker::release`].
/// - Around anything else done to the machine under the lock, call
///   [`CircuitBreaker::suspend`] first and [`CircuitBreaker::resume`] after;
///   to read it (metrics, snapshots), [`CircuitBreaker::view`].
///
/// See the module's notes on where each outcome goes and on what overlapping
/// calls can reorder. Needs 64-bit atomics.
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
    /// Read by every call: the gate (epoch, generation, striped and open bits)
    /// and the config.
    head: Line<Head>,
    /// `generation << 1 | LOCKED`: the fold lock, and the generation of the
    /// gate it may be taken under (a recorder that read a gate since taken
    /// back cannot take it). On a line of its own: a recorder waiting for it
    /// reads this line, not the one the holder is writing.
    lock: Line<AtomicU32>,
    /// Written by every outcome that takes the fold lock.
    tail: Line<Tail<WORDS>>,
    /// Written by quiet successes, each by the callers that name it.
    stripes: [Stripe; STRIPE_COUNT],
}

#[derive(Debug)]
struct Head {
    /// `epoch << 32 | generation << 2 | STRIPED | OPEN_GATE`: the generation
    /// changes every time the lock hands the closed state out or takes it back.
    gate: AtomicU64,
    /// The count window's size (0: none).
    size: u32,
    /// The same, as the cursor holds it.
    size16: u16,
    /// Whether the config allows the closed path at all.
    eligible: bool,
    threshold: Option<u32>,
    rate: Option<Rate>,
    minimum: u32,
    /// The failure-rate rule folded for [`ClosedPath::rate_met`]: the calls
    /// it needs (at least one; `u32::MAX` without the rule, which no window
    /// reaches) and its threshold (full without the rule).
    rate_minimum: u32,
    rate_value: Rate,
    /// For a full window (or none): the failures from which a rule may stand
    /// after a success (the rate rule's threshold over the whole window; 0 when
    /// the streak rule trips on no streak, so that every outcome is judged;
    /// `u32::MAX` when nothing can stand). Quiet successes go to the stripes
    /// only below it.
    full_trip: u32,
    slow_after: Duration,
}

/// The window and streak, changed only by the holder of the fold lock (the
/// lock side's [`CircuitBreaker::suspend`] and [`CircuitBreaker::resume`]
/// included: they first move the lock word to a generation no recorder
/// holds).
#[derive(Debug)]
struct Tail<const WORDS: usize> {
    /// Consecutive failures, as of the last outcome counted in.
    streak: AtomicU32,
    /// The window's cursor, fill and failure count (see [`Cursor`]).
    cursor: AtomicU64,
    /// The sum of the stripes already counted in.
    folded: AtomicU64,
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

/// The window's cursor unpacked: bits 0–15 the slot the next call takes,
/// 16–31 the calls held, 32–47 the failures held, 48–63 the slow calls held
/// (a ring with none set is not read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    next: u16,
    len: u16,
    failures: u16,
    slow: u16,
}

// Truncation is the point: each field is 16 bits of the packed word.
#[allow(clippy::cast_possible_truncation)]
impl Cursor {
    const fn unpack(word: u64) -> Cursor {
        Cursor {
            next: word as u16,
            len: (word >> 16) as u16,
            failures: (word >> 32) as u16,
            slow: (word >> 48) as u16,
        }
    }

    const fn pack(self) -> u64 {
        (self.next as u64)
            | (self.len as u64) << 16
            | (self.failures as u64) << 32
            | (self.slow as u64) << 48
    }

    /// The cursor once `count` calls (at most `size`) have taken the next
    /// slots of a window of `size` (`size` > 0, `next` < `size`): the slot
    /// after them (wrapping), `count` more calls held (up to `size`).
    fn advanced(self, count: u16, size: u16) -> Cursor {
        let following = u32::from(self.next).saturating_add(u32::from(count));
        let next = following.checked_sub(u32::from(size)).unwrap_or(following);
        Cursor {
            next: u16::try_from(next).unwrap_or(0),
            len: self.len.saturating_add(count).min(size),
            ..self
        }
    }

    /// The failures held, read as at most the calls held.
    fn failures(self) -> u32 {
        u32::from(self.failures.min(self.len))
    }
}

/// Nothing, but under loom a sequentially consistent fence.
///
/// A quiet success adds to its stripe, then reads the gate; a recorder
/// clearing the striped bit writes the gate, then reads the stripes. Both
/// pairs are sequentially consistent accesses, which the C11 model orders so
/// that at least one side sees the other's write. Loom models such accesses
/// as acquire-release only (its README: "`SeqCst` accesses ... are regarded
/// as `AcqRel`"), which would let both miss; it does model a sequentially
/// consistent fence, so under loom one stands between the two accesses of
/// each pair. Compiled code has none (on x86 the add is a locked
/// instruction, a full barrier already).
#[inline(always)]
fn ordered_under_loom() {
    #[cfg(retry_loom)]
    loom::sync::atomic::fence(SeqCst);
}

/// The gate's generation (30 bits), as the lock word carries it.
#[allow(clippy::cast_possible_truncation)]
const fn generation_of(gate: u64) -> u32 {
    ((gate >> 2) & GENERATION_MASK) as u32
}

const fn epoch_of(gate: u64) -> u32 {
    (gate >> 32) as u32
}

/// The lock word of `gate`'s generation, free.
const fn free_lock(gate: u64) -> u32 {
    generation_of(gate) << 1
}

/// The gate after `gate` with a new generation: open (carrying `epoch`) or
/// shut, not striped.
const fn next_gate(gate: u64, epoch: u32, open: bool) -> u64 {
    let generation = ((gate >> 2).wrapping_add(1)) & GENERATION_MASK;
    ((epoch as u64) << 32) | (generation << 2) | if open { OPEN_GATE } else { 0 }
}

fn bit(ring: &[AtomicU64], slot: u32) -> bool {
    let mask = 1u64.wrapping_shl(slot % 64);
    ring.get(usize::try_from(slot / 64).unwrap_or(usize::MAX))
        .is_some_and(|w| w.load(SeqCst) & mask != 0)
}

/// Sets the bit of `slot` to `value`; returns what it was. Only the holder of
/// the fold lock writes the rings: a bit that already holds the value is only
/// read, and a word is written with a plain store.
fn put(ring: &[AtomicU64], slot: u32, value: bool) -> bool {
    let mask = 1u64.wrapping_shl(slot % 64);
    let Some(word) = ring.get(usize::try_from(slot / 64).unwrap_or(usize::MAX)) else {
        return false;
    };
    let old = word.load(SeqCst);
    let was = old & mask != 0;
    if was != value {
        word.store(old ^ mask, Relaxed);
    }
    was
}

/// Clears the bits of slots `from..from + count` (below 2¹⁶) of `ring`;
/// returns how many were set. A word with none of them set is only read.
fn clear_run(ring: &[AtomicU64], from: u32, count: u32) -> u32 {
    let end = from.saturating_add(count);
    let mut slot = from;
    let mut cleared = 0u32;
    while slot < end {
        let offset = slot % 64;
        let start = slot & !63;
        let upto = end.saturating_sub(start).min(64);
        // Bits `offset..upto` of the word (`offset` < `upto` ≤ 64).
        let mask = u64::MAX.wrapping_shr(64u32.wrapping_sub(upto)) & u64::MAX.wrapping_shl(offset);
        if let Some(word) = ring.get(usize::try_from(slot / 64).unwrap_or(usize::MAX)) {
            let old = word.load(SeqCst);
            if old & mask != 0 {
                word.store(old & !mask, Relaxed);
                cleared = cleared.saturating_add((old & mask).count_ones());
            }
        }
        slot = start.saturating_add(upto);
    }
    cleared
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
    /// How many stripes quiet successes are counted on
    /// ([`record_on`](Self::record_on) takes a stripe's number modulo this).
    pub const STRIPES: usize = STRIPE_COUNT;

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
                eligible: counted && fits && config.slow_call_rate().is_none(),
                threshold: config.failure_threshold(),
                rate: config.failure_rate(),
                minimum: config.minimum_calls(),
                rate_minimum: config
                    .failure_rate()
                    .map_or(u32::MAX, |_| config.minimum_calls().max(1)),
                rate_value: config.failure_rate().unwrap_or(Rate::FULL),
                full_trip: full_trip(config, size),
                slow_after: config.slow_call_duration(),
            }),
            lock: Line(AtomicU32::new(0)),
            tail: Line(Tail {
                streak: AtomicU32::new(0),
                cursor: AtomicU64::new(0),
                folded: AtomicU64::new(0),
                failed: core::array::from_fn(|_| AtomicU64::new(0)),
                slow: core::array::from_fn(|_| AtomicU64::new(0)),
            }),
            stripes: core::array::from_fn(|_| Stripe::default()),
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
    /// of zero (unmeasured) is never slow. A quiet success is counted on
    /// stripe 0: callers on several threads should name their own with
    /// [`record_on`](Self::record_on).
    #[inline]
    pub fn record(&self, permit: Permit, outcome: CallOutcome) -> Untimed {
        self.record_on(0, permit, outcome)
    }

    /// [`record`](Self::record), counting a quiet success on stripe `stripe`
    /// (modulo [`STRIPES`](Self::STRIPES)). Any stripe gives the same answers;
    /// threads that name different ones do not write a cache line in common
    /// when their calls succeed.
    #[inline]
    pub fn record_on(&self, stripe: usize, permit: Permit, outcome: CallOutcome) -> Untimed {
        self.record_quiet_on(stripe, permit, outcome)
            .unwrap_or(Untimed::Recorded(Exceeded::NONE))
    }

    /// [`record`](Self::record), answering `None` where it would answer
    /// `Untimed::Recorded(Exceeded::NONE)`: the outcome is in, no rate reached
    /// its threshold with it, nothing trips. That is the common case, and a
    /// caller with nothing to report then has nothing to do (`Some` may still
    /// carry that answer when a general path found it). Counts a quiet
    /// success on stripe 0 (see [`record_quiet_on`](Self::record_quiet_on)).
    #[inline]
    pub fn record_quiet(&self, permit: Permit, outcome: CallOutcome) -> Option<Untimed> {
        self.record_quiet_on(0, permit, outcome)
    }

    /// [`record_quiet`](Self::record_quiet), counting a quiet success on
    /// stripe `stripe` (modulo [`STRIPES`](Self::STRIPES)).
    ///
    /// The common case takes a read of the gate, one add to the stripe and a
    /// second read of the gate (which no call writes): a success that is
    /// neither slow nor late, while the striped bit is set (a full count
    /// window holding fewer failures than a rule needs to stand after a
    /// success, or no window). Every other outcome takes the fold lock.
    #[inline]
    pub fn record_quiet_on(
        &self,
        stripe: usize,
        permit: Permit,
        outcome: CallOutcome,
    ) -> Option<Untimed> {
        let head = &self.head.0;
        let gate = head.gate.load(SeqCst);
        if outcome.success
            && outcome.duration <= head.slow_after
            && gate & (STRIPED | OPEN_GATE) == STRIPED | OPEN_GATE
            && permit.epoch == epoch_of(gate)
        {
            if let Some(count) = self.stripes.get(stripe % STRIPE_COUNT) {
                count.0.fetch_add(1, SeqCst);
            }
            ordered_under_loom();
            // The gate changed meanwhile (the striped bit cleared, or the state
            // taken back): the success may not be counted in by the outcome
            // that changed it, so it is judged as the machine would.
            if head.gate.load(SeqCst) != gate {
                return self.judge_striped(permit.epoch);
            }
            return None;
        }
        Some(self.record_any(permit, outcome))
    }

    /// A quiet success of `epoch` counted on a stripe while the gate changed:
    /// with the fold lock, the stripes are counted in and the window judged
    /// as after a success. Nothing to do if the closed state is no longer
    /// handed out (the lock side counted it in, or will drop it), or belongs to
    /// another epoch (the success is late there).
    #[cold]
    #[inline(never)]
    fn judge_striped(&self, epoch: u32) -> Option<Untimed> {
        let gate = self.lock()?;
        let cursor = self.fold();
        let answer = if epoch == epoch_of(gate) {
            self.judge_success(gate, cursor)
        } else {
            Untimed::Recorded(Exceeded::NONE)
        };
        Some(self.unlock_after(gate, cursor, answer))
    }

    /// The rules on the window at `cursor` as they stand after a success in
    /// time (not late) that replaced a success: no rate crosses upwards, the
    /// streak is clear.
    fn judge_success(&self, gate: u64, cursor: Cursor) -> Untimed {
        let pushed_out = (cursor.len >= self.head.0.size16).then_some(false);
        self.settle(gate, false, 0, false, cursor, pushed_out)
    }

    /// Takes the fold lock for the closed state handed out now: the gate it
    /// holds it under (read again once held), or `None` if the state is not
    /// handed out (then the lock is not held).
    fn lock(&self) -> Option<u64> {
        let head = &self.head.0;
        let mut gate = head.gate.load(SeqCst);
        loop {
            if gate & OPEN_GATE == 0 {
                return None;
            }
            let free = free_lock(gate);
            match self
                .lock
                .0
                .compare_exchange(free, free | LOCKED, SeqCst, SeqCst)
            {
                Ok(_) => {
                    let now = head.gate.load(SeqCst);
                    if now & OPEN_GATE != 0 && generation_of(now) == generation_of(gate) {
                        return Some(now);
                    }
                    // Taken back since it was read: the lock side waits for
                    // this lock to be free; the outcome goes to the machine.
                    self.lock.0.store(free, Release);
                    return None;
                }
                // Held by another recorder of this generation: wait for it,
                // reading the word (which leaves the holder's cache line in
                // place) rather than trying to take it again.
                Err(word) if word >> 1 == generation_of(gate) => {
                    spin_loop();
                    while self.lock.0.load(SeqCst) == word | LOCKED {
                        spin_loop();
                    }
                }
                // The lock side moved it on: read the gate again.
                Err(_) => gate = head.gate.load(SeqCst),
            }
        }
    }

    /// Frees the fold lock taken under `gate`.
    fn unlock(&self, gate: u64) {
        self.lock.0.store(free_lock(gate), Release);
    }

    /// Counts in the successes the stripes gathered since the last time: that
    /// many calls (at most the window) cleared into the window's next slots,
    /// and the streak cleared. Only with the fold lock held (or the lock word
    /// moved to a generation no recorder holds). The window's cursor after it.
    fn fold(&self) -> Cursor {
        let tail = &self.tail.0;
        let cursor = Cursor::unpack(tail.cursor.load(SeqCst));
        let total = self
            .stripes
            .iter()
            .fold(0u64, |sum, count| sum.wrapping_add(count.0.load(SeqCst)));
        let pending = total.wrapping_sub(tail.folded.load(SeqCst));
        if pending == 0 {
            return cursor;
        }
        tail.folded.store(total, Relaxed);
        if tail.streak.load(SeqCst) != 0 {
            tail.streak.store(0, Relaxed);
        }
        let size = self.head.0.size16;
        if size == 0 {
            return cursor;
        }
        let count = u16::try_from(pending).unwrap_or(u16::MAX).min(size);
        // The slots from `next` on, wrapping at the window's end; a ring
        // holding no call of its kind is left alone.
        let first = size.saturating_sub(cursor.next).min(count);
        let clear = |ring: &[AtomicU64], held: u16| {
            let mut cleared = 0u32;
            if held > 0 {
                for (from, run) in [(cursor.next, first), (0, count.saturating_sub(first))] {
                    cleared =
                        cleared.saturating_add(clear_run(ring, u32::from(from), u32::from(run)));
                }
            }
            u16::try_from(cleared).unwrap_or(u16::MAX)
        };
        let cursor = Cursor {
            failures: cursor
                .failures
                .saturating_sub(clear(&tail.failed, cursor.failures)),
            slow: cursor.slow.saturating_sub(clear(&tail.slow, cursor.slow)),
            ..cursor.advanced(count, size)
        };
        tail.cursor.store(cursor.pack(), Relaxed);
        cursor
    }

    /// Whether quiet successes may go to the stripes with the window at
    /// `cursor`: it is full (or there is none) and holds fewer failures than
    /// a rule needs to stand after a success.
    fn stripes_apply(&self, cursor: Cursor) -> bool {
        let head = &self.head.0;
        cursor.len >= head.size16 && u32::from(cursor.failures) < head.full_trip
    }

    /// The end of every outcome recorded under the fold lock taken under
    /// `gate`, whose `answer` is computed on the window at `cursor`: sets or
    /// clears the gate's striped bit for that window (a gate shut meanwhile is
    /// left alone), frees the lock, and answers.
    ///
    /// A quiet success may have read the gate before its striped bit was
    /// cleared and added to its stripe after this recorder counted the
    /// stripes in. Once the bit is cleared, the stripes are counted in again,
    /// and what they brought is judged: the success that reads the gate
    /// again after adding to its stripe either sees the bit cleared (and is
    /// judged itself) or added before this second count.
    fn unlock_after(&self, gate: u64, cursor: Cursor, answer: Untimed) -> Untimed {
        let head = &self.head.0;
        let striped = if self.stripes_apply(cursor) {
            STRIPED
        } else {
            0
        };
        let mut answer = answer;
        if gate & STRIPED != striped {
            let changed = (gate & !STRIPED) | striped;
            let cleared = head
                .gate
                .compare_exchange(gate, changed, SeqCst, SeqCst)
                .is_ok()
                && striped == 0;
            if cleared && !matches!(answer, Untimed::Trip(_)) {
                ordered_under_loom();
                let folded = self.tail.0.folded.load(SeqCst);
                let cursor = self.fold();
                if self.tail.0.folded.load(SeqCst) != folded {
                    if let Untimed::Trip(trip) = self.judge_success(changed, cursor) {
                        let exceeded = match answer {
                            Untimed::Recorded(exceeded) => exceeded,
                            _ => Exceeded::NONE,
                        };
                        answer = Untimed::Trip(Trip { exceeded, ..trip });
                    }
                }
            }
        }
        self.unlock(gate);
        answer
    }

    /// Whether the failure-rate rule (if there is one) is met by `failures` of
    /// the last `calls`.
    #[inline]
    fn rate_met(&self, failures: u32, calls: u32) -> bool {
        let head = &self.head.0;
        calls >= head.rate_minimum && head.rate_value.is_reached(failures, calls)
    }

    /// [`record`](Self::record) under the fold lock: every outcome but a quiet
    /// success.
    #[inline(never)]
    fn record_any(&self, permit: Permit, outcome: CallOutcome) -> Untimed {
        let head = &self.head.0;
        let tail = &self.tail.0;
        let Some(gate) = self.lock() else {
            return Untimed::Locked(permit);
        };
        let mut cursor = self.fold();
        let failed = !outcome.success;
        let slow = outcome.duration > head.slow_after;
        let size = head.size16;
        let mut pushed_out = None;
        if size > 0 {
            let slot = u32::from(cursor.next.min(size.saturating_sub(1)));
            // A ring holding no call of its kind reads clear at every slot.
            let was_failed = (cursor.failures > 0 || failed) && put(&tail.failed, slot, failed);
            let was_slow = (cursor.slow > 0 || slow) && put(&tail.slow, slot, slow);
            let full = cursor.len >= size;
            if full {
                pushed_out = Some(was_failed);
            }
            let out = |was: bool| u16::from(was && full);
            cursor = Cursor {
                failures: (cursor.failures.saturating_sub(out(was_failed)))
                    .saturating_add(u16::from(failed)),
                slow: (cursor.slow.saturating_sub(out(was_slow))).saturating_add(u16::from(slow)),
                ..cursor.advanced(1, size)
            };
            tail.cursor.store(cursor.pack(), Relaxed);
        }
        let late = permit.epoch != epoch_of(gate);
        let streak = if late {
            0
        } else if failed {
            let streak = tail.streak.load(SeqCst).saturating_add(1);
            tail.streak.store(streak, Relaxed);
            streak
        } else {
            if tail.streak.load(SeqCst) != 0 {
                tail.streak.store(0, Relaxed);
            }
            0
        };
        let answer = self.settle(gate, late, streak, failed, cursor, pushed_out);
        self.unlock_after(gate, cursor, answer)
    }

    /// Judges the trip rules once an outcome is in: `after` is the window as
    /// the outcome left it, `pushed_out` whether the call it replaced had
    /// failed (`None`: it replaced none), `streak` the consecutive failures.
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
        let mut exceeded = Exceeded::NONE;
        let mut rate_trip = false;
        if head.rate.is_some() && head.size > 0 {
            let calls = u32::from(after.len);
            let failures = after.failures();
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

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    CircuitBreaker<WORDS, BUCKETS, DURATIONS>
{
    /// A [`ClosedPath`] for this breaker, with the closed state handed out to it
    /// if the breaker is closed and its config needs no time.
    #[must_use]
    pub fn closed_path(&self) -> ClosedPath<WORDS> {
        let mut path = ClosedPath::new(&self.config);
        // The path keeps no call's duration: a breaker that keeps them for
        // its window hands every outcome to the machine.
        path.head.0.eligible &= !self.keeps_call_durations();
        self.resume(&path);
        path
    }

    /// Takes the closed state back from `path` (its window and streak, with
    /// the successes its stripes gathered), so that the breaker can be changed
    /// under the caller's lock. Calls on `path` go to the machine until
    /// [`resume`](Self::resume). Does nothing if the state is not handed out.
    /// Waits for a recorder that holds the path's fold lock to finish.
    pub fn suspend(&mut self, path: &ClosedPath<WORDS>) {
        let head = &path.head.0;
        let gate = head.gate.load(SeqCst);
        if gate & OPEN_GATE == 0 {
            return;
        }
        let shut = next_gate(gate, epoch_of(gate), false);
        head.gate.store(shut, SeqCst);
        // Wait for the recorder holding the fold lock (if one does), then move
        // the lock word to the shut gate's generation: a recorder that read the
        // gate before it shut cannot take the lock any more (it reads the gate
        // again and comes to the machine).
        while path
            .lock
            .0
            .compare_exchange(free_lock(gate), free_lock(shut), SeqCst, SeqCst)
            .is_err()
        {
            spin_loop();
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
        let size = head.size16;
        // The machine's window, oldest call first, from slot 0: its next call
        // goes to slot `len` (0 once full, the oldest).
        let len = self.calls.len().min(size);
        let mut failures = 0u16;
        let mut slow_calls = 0u16;
        for slot in 0..size {
            let (failed, slow) = self.calls.get(size, slot).unwrap_or((false, false));
            failures = failures.saturating_add(u16::from(failed));
            slow_calls = slow_calls.saturating_add(u16::from(slow));
            let _ = put(&tail.failed, u32::from(slot), failed);
            let _ = put(&tail.slow, u32::from(slot), slow);
        }
        let cursor = Cursor {
            next: if len >= size { 0 } else { len },
            len,
            failures,
            slow: slow_calls,
        };
        tail.cursor.store(cursor.pack(), SeqCst);
        // Successes a stripe gathers from here on count in this window.
        let total = path
            .stripes
            .iter()
            .fold(0u64, |sum, count| sum.wrapping_add(count.0.load(SeqCst)));
        tail.folded.store(total, SeqCst);
        path.lock.0.store(free_lock(open), SeqCst);
        let striped = if path.stripes_apply(cursor) {
            STRIPED
        } else {
            0
        };
        head.gate.store(open | striped, SeqCst);
    }

    /// A copy of the breaker with what `path` holds of the closed state (for
    /// metrics and snapshots; the successes its stripes gathered counted in).
    /// Outcomes being recorded meanwhile may or may not be in it.
    #[must_use]
    pub fn view(&self, path: &ClosedPath<WORDS>) -> Self {
        let mut copy = self.clone();
        if let Some(gate) = path.lock() {
            copy.pull(path);
            path.unlock(gate);
        }
        copy
    }

    /// Applies a trip `path` saw, at `now`: the breaker opens with the trip's
    /// cause if the closed state the recorder saw is still the one handed out
    /// (otherwise another call tripped or changed the breaker first, and
    /// nothing happens: `None`). Call it under the caller's lock.
    pub fn trip(&mut self, path: &ClosedPath<WORDS>, trip: Trip, now: Instant) -> Option<Recorded> {
        let gate = path.head.0.gate.load(SeqCst);
        if (gate ^ trip.gate) & !STRIPED != 0 || self.mode != Mode::Closed {
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

    /// Copies the window and streak `path` holds into the machine, with the
    /// successes its stripes gathered counted in first. Only with the fold
    /// lock held, or the lock word moved to a generation no recorder holds.
    fn pull(&mut self, path: &ClosedPath<WORDS>) {
        let cursor = path.fold();
        let tail = &path.tail.0;
        self.consecutive_failures = tail.streak.load(SeqCst);
        // The streak and window change under the cache of when rules are next
        // checked: check them on the next outcome.
        self.quiet = 0;
        let size = path.head.0.size16;
        if size == 0 {
            return;
        }
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
    use super::{bit, clear_run, full_trip, Cursor};
    use crate::{BreakerConfig, Rate};
    #[cfg(not(retry_loom))]
    use core::sync::atomic::AtomicU64;

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

    /// Advancing by `count` slots at once is advancing by one slot `count`
    /// times, for every cursor of windows up to 130 calls and the largest ones.
    #[test]
    fn advancing_by_several_slots_is_advancing_one_at_a_time() {
        let mut checked = 0u32;
        for size in (1..=130u16).chain([1_000, 1_024, u16::MAX]) {
            let starts = [0, 1, size / 2, size.saturating_sub(2), size - 1];
            let lens = [0, 1, size / 2, size.saturating_sub(1), size];
            let counts = [0, 1, 2, size / 3, size.saturating_sub(1), size];
            for next in starts.into_iter().filter(|n| *n < size) {
                for len in lens {
                    for count in counts.into_iter().filter(|c| *c <= size) {
                        let cursor = Cursor {
                            next,
                            len,
                            failures: 3,
                            slow: 2,
                        };
                        let mut one_by_one = cursor;
                        for _ in 0..count {
                            one_by_one = one_by_one.advanced(1, size);
                        }
                        assert_eq!(
                            cursor.advanced(count, size),
                            one_by_one,
                            "{cursor:?} + {count} in {size}"
                        );
                        assert_eq!(Cursor::unpack(one_by_one.pack()), one_by_one);
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    /// Clearing a run of slots clears exactly those bits and counts the ones
    /// that were set, whatever the run's start and length across words.
    #[test]
    #[cfg(not(retry_loom))]
    fn clearing_a_run_clears_exactly_its_slots() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut draw = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2_000 {
            let words: [u64; 3] = [draw(), draw(), draw()];
            let ring: [AtomicU64; 3] = core::array::from_fn(|i| AtomicU64::new(words[i]));
            let from = u32::try_from(draw() % 192).unwrap_or(0);
            let count = u32::try_from(draw() % u64::from(193 - from)).unwrap_or(0);
            let cleared = clear_run(&ring, from, count);
            let mut expected = 0;
            for slot in 0..192u32 {
                let was = words[(slot / 64) as usize] & (1 << (slot % 64)) != 0;
                let inside = slot >= from && slot < from + count;
                expected += u32::from(was && inside);
                assert_eq!(
                    bit(&ring, slot),
                    was && !inside,
                    "slot {slot} of {from}..+{count}"
                );
            }
            assert_eq!(cleared, expected, "{from}..+{count}");
        }
    }
}
