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
//! The state is kept in three places, so that the outcomes most calls have
//! write nothing another thread writes:
//! - **The head** (its own cache line, read by every call): the gate, the
//!   ticket and the config. The gate (written only when the closed state is
//!   handed out or taken back, or when the window starts or stops taking
//!   quiet outcomes) says open or shut, the closed period's epoch, a
//!   generation, and the *striped* bit. The ticket is the number the next
//!   failure kept on a stripe takes, and the *allowance*: how many more
//!   failures may be kept before one must be judged.
//! - **Stripes**: [`ClosedPath::STRIPES`] of them, each a short list of
//!   outcomes on lines of its own, behind a spin lock of its own
//!   ([`ClosedPath::record_quiet_on`] names the stripe; a thread-shared
//!   breaker gives each thread its own, so the lock is uncontended). While
//!   the striped bit is set (the count window is full and holds fewer
//!   failures than any rule needs to stand after a success; or there is no
//!   window), an outcome that is not slow and not late is *kept* on its
//!   caller's stripe, and nothing is judged:
//!   - a success reads the ticket's number (its *tag*: how many kept
//!     failures were numbered before it) and joins the stripe's last run of
//!     successes with that tag, or starts one. It can make no rule stand.
//!   - a failure is kept only while the allowance lasts: it takes a number
//!     and one of the allowance with one compare-and-swap on the ticket.
//!     The allowance is set, whenever the stripes are counted in, to the
//!     failures that could follow without the rate rule standing however
//!     they fell (its threshold less the failures held, less one). With a
//!     streak rule, a failure is also kept only if the failures in a row it
//!     can end stay below the rule's: at most those numbered since its own
//!     stripe's last success (which came after every failure numbered
//!     before its tag), or, with none on the stripe, the streak the last
//!     fold left plus every failure numbered since. So a kept failure can
//!     make no rule stand either.
//! - **The window and streak** (the tail's cache line, and the window's
//!   rings), changed only under the *fold lock*: a bit of a lock word on a
//!   cache line of its own (a recorder waiting for it reads that line, not
//!   the one the holder writes), taken with one compare-and-swap. Every other
//!   outcome (a failure once the allowance is spent, a slow or late call,
//!   any outcome while the window fills or while the striped bit is clear,
//!   one whose stripe is full) takes it. It first *counts in* what the
//!   stripes kept: it spends the allowance (no failure is kept meanwhile),
//!   takes every stripe's lock, and merges their entries into the window's
//!   next slots and the streak, in the order the tags and numbers give
//!   (successes tagged `t` just before the failure numbered `t`). Then it
//!   records itself, judges the rules as the machine does, sets or clears
//!   the striped bit for what the window now holds, and sets the allowance
//!   again. The lock side ([`CircuitBreaker::suspend`],
//!   [`CircuitBreaker::view`]) counts the stripes in the same way before it
//!   reads the window.
//!
//! A stripe's entries are counted in once: the fold empties every stripe
//! while it holds their locks. Kept outcomes are counted in in an order
//! consistent with the order their calls were made in: a success made after
//! a kept failure returned reads a later number than that failure's, one
//! made before that failure began reads its number or an earlier one, and the successes
//! between two numbered failures are indistinguishable from one another;
//! each stripe keeps its own outcomes in the order they came.
//!
//! # What concurrency can and cannot change
//! Calls made one after another (one thread, or threads whose calls are
//! ordered by other means) get exactly the decisions of the sequential
//! machine: the same trip on the same outcome, with the same cause, the same
//! window and the same streak. Calls that overlap may differ only in these
//! ways:
//! - Two outcomes recorded at the same time may be counted in either order (in
//!   the streak and in the window); a quiet success kept while another
//!   outcome is being judged may be counted in after it.
//! - Every recorder that takes the fold lock judges the trip rules on the
//!   window and streak as they stand after its own outcome. The recorder that
//!   takes the lock last sees the state all of them made, so a trip that state
//!   calls for is never lost to a race; kept outcomes never make a rule stand
//!   (the striped bit is clear whenever a success could, and the allowance
//!   is spent before a failure could). Several recorders may see a trip, and
//!   the breaker still opens at most once, because
//!   [`CircuitBreaker::trip`] applies a trip only if the closed state the
//!   recorder saw is still the one handed out.
//! - When the lock takes the closed state back (a trip, an operator's move), a
//!   call that read the gate before but has not yet taken the fold lock fails
//!   to take it and goes to the machine, as a call arriving just after would.
//!   An outcome kept on its stripe before the gate shut is counted in by the
//!   lock side as it takes the state back (a stripe's caller reads the gate
//!   under the stripe's lock, and the lock side takes every stripe's lock
//!   after shutting it), so it lands in the window the state had, as if it
//!   had come just before the trip or the operator's move.
//! - Permits are never lost: a closed breaker's permit holds no place (its
//!   release does nothing), and half-open probes are admitted and counted only
//!   by the machine behind the lock, so their bound is exact. Transitions come
//!   only from the machine, each once.
//!
//! The fold lock is held for a bounded piece of work (merging at most the
//! stripes' entries, clearing at most the window's words, recording one
//! outcome, judging it) and never while waiting for anything but a stripe's
//! lock, itself held for a few loads and stores; a caller that finds either
//! taken spins until it is free. A stripe's lock is never held while waiting
//! for the fold lock.
//!
//! # For changes to the breaker's counts
//! While the closed state is handed out, the machine's own window and
//! consecutive-failure count are stale: the live ones are the tail's plus
//! what the stripes kept. [`CircuitBreaker::suspend`] (and
//! [`CircuitBreaker::view`], on a copy) brings them into the machine, and
//! [`CircuitBreaker::resume`] hands them out again, to empty stripes (so a
//! reset or any other change made between the two starts from the machine's
//! values). Nothing else about the breaker
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

/// The gate's bit saying quiet outcomes are kept on the stripes.
const STRIPED: u64 = 2;

/// The gate's generation: bits 2 to 31.
const GENERATION_MASK: u64 = 0x3FFF_FFFF;

/// The lock word's bit saying a recorder holds the fold lock.
const LOCKED: u32 = 1;

/// How many stripes a path keeps quiet outcomes on (a power of two, at most
/// 32: [`Head::used`] has a bit for each). Under loom, two: enough for every
/// race between stripes, few enough to explore.
#[cfg(not(retry_loom))]
const STRIPE_COUNT: usize = 16;
#[cfg(retry_loom)]
const STRIPE_COUNT: usize = 2;

/// How many entries a stripe holds before its outcomes must be counted in
/// (62: with its lock and length, a stripe takes 512 bytes). Under loom,
/// three, so that a stripe running full is explored too.
#[cfg(not(retry_loom))]
const ENTRIES: usize = 62;
#[cfg(retry_loom)]
const ENTRIES: usize = 3;

/// An entry's bit saying it is a failure (its low 47 bits: the failure's
/// number); without it, the entry is a run of successes (bits 16 to 62: the
/// tag they read, bits 0 to 15: how many, at most `RUN_MAX`).
const FAILURE_ENTRY: u64 = 1 << 63;

/// Failure numbers and tags are counted modulo 2⁴⁷.
const NUMBER_MASK: u64 = (1 << 47) - 1;

/// The ticket's low 16 bits: how many more failures may be kept on stripes
/// before one must be judged (see [`Head::ticket`]).
const ALLOWANCE_MASK: u64 = 0xFFFF;

/// The most successes one run entry counts.
const RUN_MAX: u64 = 0xFFFF;

/// A value on a cache line of its own, so that what every call reads (the gate,
/// the config) is not evicted by what the outcomes that take the fold lock
/// write (the window).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line<T>(T);

/// One stripe's quiet outcomes, in the order its callers recorded them, on
/// 512 bytes of its own (the 128-byte alignment keeps x86's adjacent-line
/// prefetch from pairing it with another stripe's line), so that threads
/// recording on different stripes never write a line another one writes.
///
/// Guarded by its own spin lock: its callers take it for a handful of loads
/// and stores (uncontended, it is one compare-and-swap on a line already
/// theirs); the fold takes every stripe's lock while it counts them in.
#[derive(Debug)]
#[repr(align(128))]
struct Stripe {
    /// `len << 2 | NAMED | HELD`: the entries in use (from 0), whether the
    /// stripe is named in [`Head::used`], and whether its lock is held. One
    /// word, so that taking the lock reads the length and freeing it writes
    /// the new one.
    state: AtomicU32,
    /// Runs of successes and failures (see [`FAILURE_ENTRY`]), oldest first.
    entries: [AtomicU64; ENTRIES],
}

/// A stripe's state bit saying its lock is held.
const HELD: u32 = 1;

/// A stripe's state bit saying it is named in [`Head::used`].
const NAMED: u32 = 2;

impl Default for Stripe {
    fn default() -> Self {
        Stripe {
            state: AtomicU32::new(0),
            entries: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// A stripe whose lock is held, with its state as the holder changes it.
struct Held<'a> {
    stripe: &'a Stripe,
    /// The state to leave when the lock is freed (without [`HELD`]).
    state: u32,
}

impl Stripe {
    /// Takes the stripe's lock (spinning while another holds it).
    fn acquire(&self) -> Held<'_> {
        loop {
            let state = self.state.load(SeqCst);
            if state & HELD == 0
                && self
                    .state
                    .compare_exchange(state, state | HELD, SeqCst, SeqCst)
                    .is_ok()
            {
                return Held {
                    stripe: self,
                    state,
                };
            }
            // Wait reading, which leaves the holder's line where it is.
            spin_loop();
        }
    }
}

impl Held<'_> {
    /// The entries in use.
    fn len(&self) -> usize {
        usize::try_from(self.state >> 2).map_or(ENTRIES, |n| n.min(ENTRIES))
    }

    /// Frees the lock, leaving the entries and name as changed.
    fn release(self) {
        self.stripe.state.store(self.state & !HELD, Release);
    }

    /// Adds a success that read the tag `tag`: to the last run if it read the
    /// same one, else as a new run. False when the stripe is full.
    fn push_success(&mut self, tag: u64) -> bool {
        let len = self.len();
        if let Some(last) = len.checked_sub(1).and_then(|i| self.stripe.entries.get(i)) {
            let entry = last.load(Relaxed);
            if entry & FAILURE_ENTRY == 0 && entry >> 16 == tag && entry & RUN_MAX < RUN_MAX {
                last.store(entry.wrapping_add(1), Relaxed);
                return true;
            }
        }
        self.push(tag << 16 | 1)
    }

    /// The tag of the stripe's last run of successes, if it holds one.
    fn last_success_tag(&self) -> Option<u64> {
        self.stripe
            .entries
            .iter()
            .take(self.len())
            .rev()
            .map(|e| e.load(Relaxed))
            .find(|e| e & FAILURE_ENTRY == 0)
            .map(|e| e >> 16)
    }

    /// Appends `entry`. False when the stripe is full.
    fn push(&mut self, entry: u64) -> bool {
        let len = self.len();
        match self.stripe.entries.get(len) {
            Some(slot) => {
                slot.store(entry, Relaxed);
                self.state = self.state.wrapping_add(4);
                true
            }
            None => false,
        }
    }

    /// Empties the stripe (its name stays).
    fn empty(&mut self) {
        self.state &= NAMED;
    }
}

/// Where an entry goes among those counted in on one fold, whose failures are
/// numbered from `base`: a run of successes that read tag `t` just before
/// failure `t` (key `2(t - base)`), failure `n` at key `2(n - base) + 1`. An
/// entry numbered before `base` (a success that read its tag while the
/// stripes were being counted in) goes first.
fn key(entry: u64, base: u64) -> u64 {
    let (number, odd) = if entry & FAILURE_ENTRY != 0 {
        (entry & NUMBER_MASK, 1)
    } else {
        (entry >> 16 & NUMBER_MASK, 0)
    };
    let distance = number.wrapping_sub(base) & NUMBER_MASK;
    if distance > NUMBER_MASK / 2 {
        0
    } else {
        distance << 1 | odd
    }
}

/// The stripes a mask names (bit `i`: stripe `i`).
fn named(mask: u32) -> impl Iterator<Item = usize> {
    (0..STRIPE_COUNT)
        .filter(move |i| mask & 1u32.wrapping_shl(u32::try_from(*i).unwrap_or(31)) != 0)
}

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
///   outcome on a stripe the caller names: threads that name different
///   stripes record their quiet outcomes without writing a cache line in
///   common.
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
    /// Written by quiet outcomes, each by the callers that name it.
    stripes: [Stripe; STRIPE_COUNT],
}

#[derive(Debug)]
struct Head {
    /// `epoch << 32 | generation << 2 | STRIPED | OPEN_GATE`: the generation
    /// changes every time the lock hands the closed state out or takes it back.
    gate: AtomicU64,
    /// `number << 16 | allowance`: the number the next failure kept on a
    /// stripe takes (modulo 2⁴⁷; it orders that failure among the outcomes
    /// of every stripe), and how many more failures may be kept on stripes
    /// before one must be judged. A quiet success reads it (its tag: the
    /// failures numbered before it); a failure kept on a stripe takes a number
    /// and one of the allowance with one compare-and-swap. The fold empties
    /// the allowance while it counts the stripes in, and sets it again for
    /// the window it leaves (zero unless the gate is striped).
    ticket: AtomicU64,
    /// The stripes ever recorded on (bit `i`: stripe `i`): the fold takes the
    /// locks of these only. Set once per stripe, before its first outcome.
    used: AtomicU32,
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
    /// `u32::MAX` when nothing can stand). Quiet outcomes are kept on the
    /// stripes only below it.
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
    /// The ticket's number when the stripes were last counted in: the
    /// failures kept on stripes since are numbered from it.
    base: AtomicU64,
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
    /// How many stripes quiet outcomes are kept on
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
                ticket: AtomicU64::new(0),
                used: AtomicU32::new(0),
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
                base: AtomicU64::new(0),
                failed: core::array::from_fn(|_| AtomicU64::new(0)),
                slow: core::array::from_fn(|_| AtomicU64::new(0)),
            }),
            stripes: core::array::from_fn(|_| Stripe::default()),
        }
    }

    /// Whether the config lets the closed path decide without time (a count
    /// window or none, no slow-call rule) and the breaker it came from keeps
    /// no call's duration for its window. When it does not, every call goes
    /// to the machine, and an outcome's duration matters.
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
    /// of zero (unmeasured) is never slow. A quiet outcome is kept on
    /// stripe 0: callers on several threads should name their own with
    /// [`record_on`](Self::record_on).
    #[inline]
    pub fn record(&self, permit: Permit, outcome: CallOutcome) -> Untimed {
        self.record_on(0, permit, outcome)
    }

    /// [`record`](Self::record), keeping a quiet outcome on stripe `stripe`
    /// (modulo [`STRIPES`](Self::STRIPES)). Any stripe gives the same answers;
    /// threads that name different ones do not write a cache line in common
    /// while their outcomes are kept.
    #[inline]
    pub fn record_on(&self, stripe: usize, permit: Permit, outcome: CallOutcome) -> Untimed {
        self.record_quiet_on(stripe, permit, outcome)
            .unwrap_or(Untimed::Recorded(Exceeded::NONE))
    }

    /// [`record`](Self::record), answering `None` where it would answer
    /// `Untimed::Recorded(Exceeded::NONE)`: the outcome is in, no rate reached
    /// its threshold with it, nothing trips. That is the common case, and a
    /// caller with nothing to report then has nothing to do (`Some` may still
    /// carry that answer when a general path found it). Keeps a quiet
    /// outcome on stripe 0 (see [`record_quiet_on`](Self::record_quiet_on)).
    #[inline]
    pub fn record_quiet(&self, permit: Permit, outcome: CallOutcome) -> Option<Untimed> {
        self.record_quiet_on(0, permit, outcome)
    }

    /// [`record_quiet`](Self::record_quiet), keeping a quiet outcome on
    /// stripe `stripe` (modulo [`STRIPES`](Self::STRIPES)).
    ///
    /// The common case takes the stripe's lock (one compare-and-swap on a
    /// line the caller's thread already holds), reads the gate and the
    /// ticket, and adds the outcome to the stripe: a success that is neither
    /// slow nor late while the gate is striped (a full count window holding
    /// fewer failures than a rule needs to stand, or no window), or such a
    /// failure while the ticket's allowance says no rule can stand however
    /// the outcomes kept on stripes fall (it then takes a number and one of
    /// the allowance). Every other outcome takes the fold lock.
    #[inline]
    pub fn record_quiet_on(
        &self,
        stripe: usize,
        permit: Permit,
        outcome: CallOutcome,
    ) -> Option<Untimed> {
        if outcome.duration <= self.head.0.slow_after
            && self.keep(stripe % STRIPE_COUNT, &permit, outcome.success)
        {
            return None;
        }
        Some(self.record_any(permit, outcome))
    }

    /// Keeps a quiet outcome of `permit` on stripe `index`, if the gate is
    /// striped and of the permit's epoch, the stripe has room, and (for a
    /// failure) the allowance is not spent. False: it was not kept.
    #[inline]
    fn keep(&self, index: usize, permit: &Permit, success: bool) -> bool {
        let head = &self.head.0;
        let Some(stripe) = self.stripes.get(index) else {
            return false;
        };
        let mut held = stripe.acquire();
        if held.state & NAMED == 0 {
            // Named before the stripe is first written: a fold that takes
            // the stripes' locks after emptying the allowance either sees the
            // bit or comes before this outcome's read of the ticket (then the
            // allowance it reads is spent: a failure is judged, and a
            // success's tag is the fold's last number, so it is counted in
            // after all the fold counted in).
            head.used.fetch_or(
                1u32.wrapping_shl(u32::try_from(index).unwrap_or(31)),
                SeqCst,
            );
            held.state |= NAMED;
        }
        let gate = head.gate.load(SeqCst);
        let kept = gate & (STRIPED | OPEN_GATE) == STRIPED | OPEN_GATE
            && permit.epoch == epoch_of(gate)
            && if success {
                held.push_success(head.ticket.load(SeqCst) >> 16)
            } else {
                self.keep_failure(&mut held)
            };
        held.release();
        kept
    }

    /// Keeps a failure on `stripe` (held): takes a number and one of the
    /// allowance, if the stripe has room, the allowance is not spent, and
    /// (with a streak rule) the streak the failure can end is shorter than
    /// the rule's.
    ///
    /// That streak is bounded from what the failing caller knows: its own
    /// last success still on the stripe, tagged `t`, comes after every
    /// failure numbered below `t` and before this one (numbered `n`), so the
    /// failures in a row up to this one are at most those numbered `t` to
    /// `n`; with none on the stripe, at most the streak the last fold left
    /// and every failure numbered since. The base and streak are read after
    /// the ticket, and the compare-and-swap checks they are still those of
    /// its fold: every fold changes the ticket (it spends the allowance, and
    /// the refill takes a number of its own).
    fn keep_failure(&self, stripe: &mut Held<'_>) -> bool {
        if stripe.len() >= ENTRIES {
            return false;
        }
        let head = &self.head.0;
        let ticket = &head.ticket;
        let mut current = ticket.load(SeqCst);
        loop {
            if current & ALLOWANCE_MASK == 0 {
                return false;
            }
            let number = current >> 16;
            if let Some(threshold) = head.threshold {
                let in_a_row = match stripe.last_success_tag() {
                    Some(tag) => (number.wrapping_sub(tag) & NUMBER_MASK).saturating_add(1),
                    None => {
                        let tail = &self.tail.0;
                        let since = number.wrapping_sub(tail.base.load(SeqCst)) & NUMBER_MASK;
                        since.saturating_add(u64::from(tail.streak.load(SeqCst)))
                    }
                };
                if in_a_row >= u64::from(threshold) {
                    return false;
                }
            }
            let next = (number.wrapping_add(1) & NUMBER_MASK) << 16
                | (current & ALLOWANCE_MASK).wrapping_sub(1);
            match ticket.compare_exchange(current, next, SeqCst, SeqCst) {
                Ok(_) => return stripe.push(FAILURE_ENTRY | number),
                Err(now) => current = now,
            }
        }
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

    /// Counts in the outcomes the stripes kept since the last time, in the
    /// order their tags and numbers give: the window takes them in its next
    /// slots and the streak follows them. Only with the fold lock held (or
    /// the lock word moved to a generation no recorder holds). Empties the
    /// allowance first, so no failure is kept while the stripes are counted
    /// in; the caller sets it again ([`refill`](Self::refill)). The window's
    /// cursor after it, and whether anything was counted in.
    fn fold(&self) -> (Cursor, bool) {
        let head = &self.head.0;
        let tail = &self.tail.0;
        let mut ticket = head.ticket.load(SeqCst);
        while ticket & ALLOWANCE_MASK != 0 {
            match head
                .ticket
                .compare_exchange(ticket, ticket & !ALLOWANCE_MASK, SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(now) => ticket = now,
            }
        }
        // Every stripe recorded on, its lock held: a failure holds its
        // stripe's lock while it takes a number, so once all are held every
        // failure numbered so far is on its stripe.
        let mut named_held = 0u32;
        let mut held: [Option<Held<'_>>; STRIPE_COUNT] = core::array::from_fn(|_| None);
        loop {
            let more = head.used.load(SeqCst) & !named_held;
            if more == 0 {
                break;
            }
            for i in named(more) {
                if let (Some(stripe), Some(slot)) = (self.stripes.get(i), held.get_mut(i)) {
                    *slot = Some(stripe.acquire());
                }
            }
            named_held |= more;
        }
        let number = head.ticket.load(SeqCst) >> 16;
        let base = tail.base.load(SeqCst);
        let mut cursor = Cursor::unpack(tail.cursor.load(SeqCst));
        let mut streak = tail.streak.load(SeqCst);
        // The stripes holding entries, and how far each has been counted in.
        let mut active = [(0usize, 0usize, 0usize); STRIPE_COUNT];
        let mut live = 0usize;
        for (i, h) in held.iter().enumerate() {
            let len = h.as_ref().map_or(0, Held::len);
            if len > 0 {
                if let Some(slot) = active.get_mut(live) {
                    *slot = (i, 0, len);
                    live = live.saturating_add(1);
                }
            }
        }
        let counted = live > 0;
        let entry_at = |i: usize, pos: usize| {
            held.get(i)
                .and_then(Option::as_ref)
                .and_then(|h| h.stripe.entries.get(pos))
                .map_or(0, |e| e.load(Relaxed))
        };
        // The stripes merged by key (each stripe's own entries are in order;
        // one stripe alone is taken as it is).
        while live > 0 {
            let mut best = 0usize;
            if live > 1 {
                let mut best_key = u64::MAX;
                for (n, &(i, pos, _)) in active.iter().take(live).enumerate() {
                    let k = key(entry_at(i, pos), base);
                    if k < best_key {
                        best_key = k;
                        best = n;
                    }
                }
            }
            let Some((i, pos, len)) = active.get_mut(best) else {
                break;
            };
            let entry = entry_at(*i, *pos);
            *pos = pos.saturating_add(1);
            if *pos >= *len {
                // Exhausted: the last active stripe takes its place.
                live = live.saturating_sub(1);
                active.swap(best, live);
            }
            if entry & FAILURE_ENTRY != 0 {
                cursor = self.count_failure(cursor);
                streak = streak.saturating_add(1);
            } else {
                let run = u16::try_from(entry & RUN_MAX).unwrap_or(u16::MAX);
                cursor = self.count_successes(cursor, run);
                streak = 0;
            }
        }
        for mut h in held.into_iter().flatten() {
            h.empty();
            h.release();
        }
        tail.base.store(number, SeqCst);
        if counted {
            tail.cursor.store(cursor.pack(), SeqCst);
            tail.streak.store(streak, SeqCst);
        }
        (cursor, counted)
    }

    /// The window at `cursor` with `count` successes (neither slow) in its
    /// next slots (the rings written; the cursor returned, not stored).
    fn count_successes(&self, cursor: Cursor, count: u16) -> Cursor {
        let tail = &self.tail.0;
        let size = self.head.0.size16;
        if size == 0 || count == 0 {
            return cursor;
        }
        let count = count.min(size);
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
        // Once full, every slot written held a call, which leaves.
        Cursor {
            failures: cursor
                .failures
                .saturating_sub(clear(&tail.failed, cursor.failures)),
            slow: cursor.slow.saturating_sub(clear(&tail.slow, cursor.slow)),
            ..cursor.advanced(count, size)
        }
    }

    /// The window at `cursor` with a failure (not slow) in its next slot.
    fn count_failure(&self, cursor: Cursor) -> Cursor {
        let tail = &self.tail.0;
        let size = self.head.0.size16;
        if size == 0 {
            return cursor;
        }
        let slot = u32::from(cursor.next.min(size.saturating_sub(1)));
        let full = cursor.len >= size;
        let was_failed = put(&tail.failed, slot, true);
        let was_slow = cursor.slow > 0 && put(&tail.slow, slot, false);
        let out = |was: bool| u16::from(was && full);
        Cursor {
            failures: cursor
                .failures
                .saturating_sub(out(was_failed))
                .saturating_add(1),
            slow: cursor.slow.saturating_sub(out(was_slow)),
            ..cursor.advanced(1, size)
        }
    }

    /// How many failures may be kept on stripes with the window at `cursor`,
    /// so that the rate rule cannot stand however they and the successes
    /// kept with them fall: the failures the window holds grow by at most one
    /// per failure kept. (The streak rule is checked per failure, by
    /// [`keep_failure`](Self::keep_failure).)
    fn allowance(&self, cursor: Cursor) -> u64 {
        let by_rate = self
            .head
            .0
            .full_trip
            .saturating_sub(1)
            .saturating_sub(cursor.failures());
        u64::from(by_rate).min(ALLOWANCE_MASK)
    }

    /// Sets the allowance for the window at `cursor` if `gate` is striped;
    /// leaves it spent otherwise. Only with the fold lock held, after
    /// [`fold`](Self::fold) (or from the lock side, the state not handed
    /// out), with the tail's base and streak final. The ticket takes a number
    /// of its own, so that it never holds again a value it held before this
    /// fold (see [`keep_failure`](Self::keep_failure)).
    fn refill(&self, gate: u64, cursor: Cursor) {
        if gate & STRIPED == 0 {
            return;
        }
        let head = &self.head.0;
        // Spent since the fold: no failure takes a number meanwhile.
        let number = head.ticket.load(SeqCst) >> 16;
        let next = number.wrapping_add(1) & NUMBER_MASK;
        head.ticket
            .store(next << 16 | self.allowance(cursor), SeqCst);
    }

    /// Whether quiet outcomes may be kept on the stripes with the window at
    /// `cursor`: it is full (or there is none) and holds fewer failures than
    /// a rule needs to stand after a success.
    fn stripes_apply(&self, cursor: Cursor) -> bool {
        let head = &self.head.0;
        cursor.len >= head.size16 && u32::from(cursor.failures) < head.full_trip
    }

    /// The end of every outcome recorded under the fold lock taken under
    /// `gate`, whose `answer` is computed on the window at `cursor`: sets or
    /// clears the gate's striped bit for that window (a gate shut meanwhile is
    /// left alone), sets the allowance again, frees the lock, and answers.
    ///
    /// A quiet success may have been kept on its stripe after this recorder
    /// counted the stripes in, while the gate was still striped (no failure
    /// can be: the allowance is spent). Once the bit is cleared, the stripes
    /// are counted in again, and what they brought is judged: a success
    /// reads the gate under its stripe's lock, so it either was kept before
    /// this second count or sees the bit cleared and is judged itself.
    fn unlock_after(&self, gate: u64, cursor: Cursor, answer: Untimed) -> Untimed {
        let head = &self.head.0;
        let striped = if self.stripes_apply(cursor) {
            STRIPED
        } else {
            0
        };
        let mut answer = answer;
        let mut now = gate;
        if gate & STRIPED != striped {
            let changed = (gate & !STRIPED) | striped;
            if head
                .gate
                .compare_exchange(gate, changed, SeqCst, SeqCst)
                .is_ok()
            {
                now = changed;
                if striped == 0 && !matches!(answer, Untimed::Trip(_)) {
                    let (cursor, counted) = self.fold();
                    if counted {
                        if let Untimed::Trip(trip) = self.judge_success(changed, cursor) {
                            let exceeded = match answer {
                                Untimed::Recorded(exceeded) => exceeded,
                                _ => Exceeded::NONE,
                            };
                            answer = Untimed::Trip(Trip { exceeded, ..trip });
                        }
                    }
                }
            } else {
                // Shut by the lock side meanwhile: it counts the stripes in.
                now = 0;
            }
        }
        self.refill(now, cursor);
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
        let (mut cursor, _) = self.fold();
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
    /// the outcomes its stripes kept), so that the breaker can be changed
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
        // The stripes are empty (the lock side counted them in when it took
        // the state back): failures kept from here on are numbered from the
        // ticket's number.
        let number = head.ticket.load(SeqCst) & !ALLOWANCE_MASK;
        head.ticket.store(number, SeqCst);
        tail.base.store(number >> 16, SeqCst);
        path.lock.0.store(free_lock(open), SeqCst);
        let striped = if path.stripes_apply(cursor) {
            path.refill(STRIPED, cursor);
            STRIPED
        } else {
            0
        };
        head.gate.store(open | striped, SeqCst);
    }

    /// A copy of the breaker with what `path` holds of the closed state (for
    /// metrics and snapshots; the outcomes its stripes kept counted in).
    /// Outcomes being recorded meanwhile may or may not be in it.
    #[must_use]
    pub fn view(&self, path: &ClosedPath<WORDS>) -> Self {
        let mut copy = self.clone();
        if let Some(gate) = path.lock() {
            let cursor = copy.pull(path);
            path.refill(gate, cursor);
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
    /// outcomes its stripes kept counted in first. Only with the fold
    /// lock held, or the lock word moved to a generation no recorder holds.
    fn pull(&mut self, path: &ClosedPath<WORDS>) -> Cursor {
        let (cursor, _) = path.fold();
        let tail = &path.tail.0;
        self.consecutive_failures = tail.streak.load(SeqCst);
        // The streak and window change under the cache of when rules are next
        // checked: check them on the next outcome.
        self.quiet = 0;
        let size = path.head.0.size16;
        if size == 0 {
            return cursor;
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
        cursor
    }
}

#[cfg(test)]
mod tests {
    #[cfg(not(retry_loom))]
    use super::{bit, clear_run};
    use super::{full_trip, key, Cursor, FAILURE_ENTRY, NUMBER_MASK};
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

    /// A stripe is the 512 bytes its docs say, so 16 take 8 KiB.
    #[test]
    #[cfg(not(retry_loom))]
    fn a_stripe_takes_512_bytes() {
        assert_eq!(core::mem::size_of::<super::Stripe>(), 512);
        assert_eq!(core::mem::align_of::<super::Stripe>(), 128);
    }

    /// Successes tagged `t` sort just before the failure numbered `t` and
    /// after the one numbered `t - 1`, from any base, across the numbers'
    /// wrap; an entry numbered before the base sorts first.
    #[test]
    fn entries_sort_by_their_numbers_from_the_base() {
        let success = |tag: u64| (tag & NUMBER_MASK) << 16 | 1;
        let failure = |number: u64| FAILURE_ENTRY | (number & NUMBER_MASK);
        for base in [0, 1, 1_000, NUMBER_MASK - 2, NUMBER_MASK] {
            let at = |d: u64| base.wrapping_add(d) & NUMBER_MASK;
            let order = [
                success(at(0)),
                failure(at(0)),
                success(at(1)),
                failure(at(1)),
                failure(at(2)),
                success(at(3)),
                failure(at(3)),
            ];
            for pair in order.windows(2) {
                assert!(key(pair[0], base) < key(pair[1], base), "{base}: {pair:x?}");
            }
            assert_eq!(key(success(base.wrapping_sub(1) & NUMBER_MASK), base), 0);
            assert_eq!(key(success(base), base), 0);
        }
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
