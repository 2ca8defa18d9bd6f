//! The [`CircuitBreaker`]: admission decisions and state changes as a pure state
//! machine, with fixed-size windows and no clock.
//!
//! This file holds the machine, its states and its answers. Beside it: the
//! configuration and its builder (`config.rs`), the errors a bad configuration or
//! an operator's request is refused with (`error.rs`), what an outcome did and
//! the dashboard's readings (`report.rs`), the count and time windows that
//! outcomes are recorded in (`window.rs`), the scripted simulator with its
//! printable timeline (`sim.rs`), and the versioned snapshot (`snapshot.rs`).

use core::fmt;
use core::time::Duration;

use crate::Instant;

#[cfg(target_has_atomic = "64")]
mod atomic;
mod config;
mod error;
mod report;
mod sim;
mod snapshot;
mod window;

#[cfg(target_has_atomic = "64")]
pub use atomic::{ClosedPath, Trip, Untimed};
pub use config::{
    BasicRule, BreakerConfig, BreakerConfigBuilder, HalfOpenTimeout, HalfOpenVerdict, Rate, Window,
};
pub use error::BreakerError;
pub use report::{BreakerMetrics, Exceeded, Ignored, RateReading, Recorded};
pub use sim::{
    BreakerInput, BreakerOutput, BreakerRow, BreakerSimulation, BreakerStep, BreakerTimeline,
};
pub use snapshot::BreakerSnapshot;
pub use window::WindowStats;

use window::{BucketRing, CallDurations, CountRing};

/// Where a breaker is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BreakerState {
    /// Calls run; outcomes are recorded and may trip the breaker.
    Closed,
    /// Calls are rejected until the open duration has passed.
    Open,
    /// A limited number of probe calls run; their outcomes close or re-open it.
    HalfOpen,
    /// Manual: every call is rejected until an operator changes the state.
    ForcedOpen,
    /// Manual: every call runs and nothing is recorded.
    Disabled,
    /// Manual: every call runs and is recorded, but the breaker never trips.
    MetricsOnly,
}

impl BreakerState {
    /// Every state, in the order of the rows and columns of the transition table.
    pub const ALL: [BreakerState; 6] = [
        BreakerState::Closed,
        BreakerState::Open,
        BreakerState::HalfOpen,
        BreakerState::ForcedOpen,
        BreakerState::Disabled,
        BreakerState::MetricsOnly,
    ];

    /// The state's name, as used in configs, logs and metric labels.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
            BreakerState::ForcedOpen => "forced-open",
            BreakerState::Disabled => "disabled",
            BreakerState::MetricsOnly => "metrics-only",
        }
    }

    /// Whether the state is one an operator put the breaker in.
    #[must_use]
    pub const fn is_manual(self) -> bool {
        matches!(
            self,
            BreakerState::ForcedOpen | BreakerState::Disabled | BreakerState::MetricsOnly
        )
    }

    const fn index(self) -> usize {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::HalfOpen => 2,
            BreakerState::ForcedOpen => 3,
            BreakerState::Disabled => 4,
            BreakerState::MetricsOnly => 5,
        }
    }

    fn cell(self, to: BreakerState) -> u8 {
        TRANSITIONS
            .get(self.index())
            .and_then(|row| row.get(to.index()))
            .copied()
            .unwrap_or(NO)
    }

    /// Whether the breaker moves from `self` to `to` on its own (see the table on
    /// [`CircuitBreaker`]).
    #[must_use]
    pub fn changes_automatically_to(self, to: BreakerState) -> bool {
        self.cell(to) & AUTO != 0
    }

    /// Whether an operator may move the breaker from `self` to `to` with
    /// [`CircuitBreaker::force`] (or [`CircuitBreaker::ensure`], when it is not
    /// already there).
    #[must_use]
    pub fn may_be_forced_to(self, to: ManualState) -> bool {
        self.cell(to.state()) & MANUAL != 0
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

const NO: u8 = 0;
const AUTO: u8 = 1;
const MANUAL: u8 = 2;
const BOTH: u8 = AUTO | MANUAL;

/// The legal transitions, `TRANSITIONS[from][to]` in the order of
/// [`BreakerState::ALL`]: `AUTO` the breaker makes on its own, `MANUAL` an
/// operator may ask for. An operator may re-enter any state (the diagonal), and
/// go anywhere but from closed to half-open and from metrics-only to open or
/// half-open (a breaker that only watches is never made to reject by its own
/// probes; force it open instead).
#[rustfmt::skip]
const TRANSITIONS: [[u8; 6]; 6] = [
    //               closed  open    half-open  forced-open  disabled  metrics-only
    /* closed */     [MANUAL, BOTH,   NO,        MANUAL,      MANUAL,   MANUAL],
    /* open */       [MANUAL, MANUAL, BOTH,      MANUAL,      MANUAL,   MANUAL],
    /* half-open */  [BOTH,   BOTH,   MANUAL,    MANUAL,      MANUAL,   MANUAL],
    /* forced-open */[MANUAL, MANUAL, MANUAL,    MANUAL,      MANUAL,   MANUAL],
    /* disabled */   [MANUAL, MANUAL, MANUAL,    MANUAL,      MANUAL,   MANUAL],
    /* metrics-only*/[MANUAL, NO,     NO,        MANUAL,      MANUAL,   MANUAL],
];

/// The states an operator may put a breaker in with [`CircuitBreaker::force`] or
/// [`CircuitBreaker::ensure`], or start it in with
/// [`CircuitBreaker::starting_in`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ManualState {
    /// Back to automatic control, closed with a clean window.
    Closed,
    /// Open for this long from now (a deploy of the dependency, say); then
    /// half-open as after any open period. Must not be zero.
    OpenFor(Duration),
    /// Open until this instant; then half-open as after any open period. Must be
    /// after `now`.
    OpenUntil(Instant),
    /// Half-open now: probes decide, as after an open period.
    HalfOpen,
    /// Reject every call until told otherwise.
    ForcedOpen,
    /// Admit every call, record nothing.
    Disabled,
    /// Admit and record every call, never trip.
    MetricsOnly,
}

impl ManualState {
    /// The breaker state this request leads to.
    #[must_use]
    pub const fn state(self) -> BreakerState {
        match self {
            ManualState::Closed => BreakerState::Closed,
            ManualState::OpenFor(_) | ManualState::OpenUntil(_) => BreakerState::Open,
            ManualState::HalfOpen => BreakerState::HalfOpen,
            ManualState::ForcedOpen => BreakerState::ForcedOpen,
            ManualState::Disabled => BreakerState::Disabled,
            ManualState::MetricsOnly => BreakerState::MetricsOnly,
        }
    }
}

impl fmt::Display for ManualState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManualState::OpenFor(d) => write!(f, "open for {}", crate::DisplayDuration(*d)),
            ManualState::OpenUntil(t) => write!(f, "open until {t}"),
            other => fmt::Display::fmt(&other.state(), f),
        }
    }
}

/// Why a transition happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransitionCause {
    /// The consecutive-failure rule tripped.
    ConsecutiveFailures,
    /// The failure-rate rule tripped (over the window, or over the probes under
    /// [`HalfOpenVerdict::Rates`]).
    FailureRate,
    /// The slow-call-rate rule tripped (over the window, or over the probes).
    SlowCallRate,
    /// The open duration passed: noticed by the first request after it, or
    /// applied at its end by the driver's timer ([`CircuitBreaker::wake`]).
    OpenElapsed,
    /// The probes passed: enough consecutive good ones, or rates below their
    /// thresholds under [`HalfOpenVerdict::Rates`].
    ProbesSucceeded,
    /// A probe failed (or was slow, when the slow-call rule is on).
    ProbeFailed,
    /// The maximum wait in half-open passed before the probes decided.
    HalfOpenTimeout,
    /// An operator asked for it.
    Manual,
    /// An operator reset the breaker ([`CircuitBreaker::reset`]).
    Reset,
}

impl TransitionCause {
    /// A stable dotted code for logs and metric labels.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            TransitionCause::ConsecutiveFailures => "breaker.consecutive_failures",
            TransitionCause::FailureRate => "breaker.failure_rate",
            TransitionCause::SlowCallRate => "breaker.slow_call_rate",
            TransitionCause::OpenElapsed => "breaker.open_elapsed",
            TransitionCause::ProbesSucceeded => "breaker.probes_succeeded",
            TransitionCause::ProbeFailed => "breaker.probe_failed",
            TransitionCause::HalfOpenTimeout => "breaker.half_open_timeout",
            TransitionCause::Manual => "breaker.manual",
            TransitionCause::Reset => "breaker.reset",
        }
    }
}

impl fmt::Display for TransitionCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransitionCause::ConsecutiveFailures => "consecutive failures",
            TransitionCause::FailureRate => "failure rate",
            TransitionCause::SlowCallRate => "slow-call rate",
            TransitionCause::OpenElapsed => "open duration elapsed",
            TransitionCause::ProbesSucceeded => "probes succeeded",
            TransitionCause::ProbeFailed => "probe failed",
            TransitionCause::HalfOpenTimeout => "half-open wait passed",
            TransitionCause::Manual => "manual",
            TransitionCause::Reset => "reset",
        })
    }
}

/// A state change, reported to the driver by the method that caused it, so an
/// adapter can emit an event and count `circuit_breaker.state_change.total`.
///
/// ```
/// use retry_core::{BreakerState, Instant, Transition, TransitionCause};
/// let t = Transition {
///     from: BreakerState::Closed,
///     to: BreakerState::Open,
///     at: Instant::from_millis(2500),
///     cause: TransitionCause::ConsecutiveFailures,
/// };
/// assert_eq!(t.to_string(), "closed -> open at 2.500s (consecutive failures)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
    /// When it happened (the `now` of the call that caused it).
    pub at: Instant,
    /// Why.
    pub cause: TransitionCause,
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} -> {} at {} ({})",
            self.from, self.to, self.at, self.cause
        )
    }
}

/// The right to run one call. Hand it back exactly once: to
/// [`CircuitBreaker::record`] with the call's outcome, or to
/// [`CircuitBreaker::release`] if the call never ran. It is deliberately neither
/// `Clone` nor `Copy`, so it cannot be handed back twice.
///
/// A permit remembers the breaker's epoch (bumped each time the breaker opens):
/// one handed back after the breaker opened again is *late* and can never trip or
/// re-open the breaker.
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "a permit must be handed back with `record` or `release`"]
pub struct Permit {
    epoch: u32,
    probe: bool,
}

impl Permit {
    /// The breaker epoch the permit was issued in.
    #[must_use]
    pub const fn epoch(&self) -> u32 {
        self.epoch
    }
    /// Whether the permit is for a half-open probe.
    #[must_use]
    pub const fn is_probe(&self) -> bool {
        self.probe
    }
}

/// Why a request was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// The breaker is open.
    Open,
    /// The breaker is half-open and every probe slot is taken.
    ProbesBusy,
    /// An operator forced the breaker open.
    ForcedOpen,
}

impl RejectReason {
    /// A stable dotted code for logs and metric labels.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            RejectReason::Open => "breaker.open",
            RejectReason::ProbesBusy => "breaker.probes_busy",
            RejectReason::ForcedOpen => "breaker.forced_open",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::Open => "open",
            RejectReason::ProbesBusy => "probes busy",
            RejectReason::ForcedOpen => "forced open",
        })
    }
}

/// The answer to [`CircuitBreaker::request`].
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "an admission says whether the call may run"]
pub enum Admission {
    /// Run the call, then hand `permit` back: to [`CircuitBreaker::record`] with
    /// its outcome, or to [`CircuitBreaker::release`] if it never ran. If
    /// `transition` is set (open → half-open), report it.
    Admitted {
        /// The permit to hand back.
        permit: Permit,
        /// The state change this request caused, if any.
        transition: Option<Transition>,
    },
    /// Do not run the call. Ask again at `until` if it is set: the end of the
    /// open period, or, in half-open with a maximum wait, the moment the breaker
    /// decides on its own. If it is `None` the breaker will admit only after some
    /// other input (a probe's outcome or release, or an operator's
    /// [`CircuitBreaker::force`]). `until` is always after the `now` of the
    /// request. A rejection changes nothing but the counts of rejected calls
    /// (in all and in the state), unless it reports a `transition`: a
    /// half-open breaker whose maximum wait has passed re-opens on the request
    /// that finds it so (report it).
    Rejected {
        /// When the breaker will next admit, or decide, if that is known.
        until: Option<Instant>,
        /// Why.
        reason: RejectReason,
        /// The state change this request caused, if any (half-open → open).
        transition: Option<Transition>,
    },
}

impl Admission {
    /// Whether the call may run.
    #[must_use]
    pub const fn is_admitted(&self) -> bool {
        matches!(self, Admission::Admitted { .. })
    }
}

/// How a call ended: whether it succeeded (as the caller's classifier sees it) and
/// how long it took (for the slow-call rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CallOutcome {
    /// Whether the call succeeded.
    pub success: bool,
    /// How long the call took.
    pub duration: Duration,
}

impl CallOutcome {
    /// A success that took `duration`.
    #[must_use]
    pub const fn success(duration: Duration) -> CallOutcome {
        CallOutcome {
            success: true,
            duration,
        }
    }
    /// A failure that took `duration`.
    #[must_use]
    pub const fn failure(duration: Duration) -> CallOutcome {
        CallOutcome {
            success: false,
            duration,
        }
    }
}

/// A half-open period's bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probing {
    /// Probes admitted and not yet handed back. With those that reported,
    /// the probes admitted in this period and not released (kept as the sum,
    /// not a third count, so that the period fits beside its count of
    /// rejected calls).
    pub(crate) in_flight: u32,
    /// The probes that reported. Under the consecutive verdict every one was
    /// good (a bad one ends the period), so their count is the streak.
    pub(crate) results: WindowStats,
    /// When the breaker decides on its own, if `timed` (the origin
    /// otherwise, so that equal periods compare equal): an instant and a flag
    /// rather than an `Option`, whose 64-bit tag would become the tag of
    /// every [`Mode`], compared in two halves on 32-bit targets. The flag's
    /// spare values tell the modes apart instead, in one byte.
    deadline_at: Instant,
    timed: bool,
}

impl Probing {
    /// A half-open period with these probe counts, with this maximum-wait
    /// deadline.
    pub(crate) const fn new(
        in_flight: u32,
        results: WindowStats,
        deadline: Option<Instant>,
    ) -> Probing {
        let (deadline_at, timed) = match deadline {
            Some(at) => (at, true),
            None => (Instant::ORIGIN, false),
        };
        Probing {
            in_flight,
            results,
            deadline_at,
            timed,
        }
    }

    /// The probes admitted in this period and not released: those in flight
    /// and those that reported.
    pub(crate) const fn admitted(&self) -> u32 {
        self.in_flight.saturating_add(self.results.calls)
    }

    /// When the breaker decides on its own, if it has a maximum wait.
    pub(crate) const fn deadline(&self) -> Option<Instant> {
        if self.timed {
            Some(self.deadline_at)
        } else {
            None
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Closed,
    /// Open until `until`.
    Open {
        until: Instant,
    },
    HalfOpen(Probing),
    /// Forced open by an operator.
    ForcedOpen,
    Disabled,
    MetricsOnly,
}

/// A circuit breaker: [`request`](CircuitBreaker::request) asks whether a call may
/// run, [`record`](CircuitBreaker::record) and
/// [`release`](CircuitBreaker::release) hand the permit back, and
/// [`force`](CircuitBreaker::force) is the operator's lever. Each method that can
/// change the state returns the [`Transition`] it made. The breaker never reads a
/// clock, allocates or panics; time enters as `now` with every call.
///
/// `WORDS` is the count window's capacity in 64-call words (a 100-call window
/// needs 2, a 1,000-call one 16); `BUCKETS` is the time window's capacity in buckets. The config picks
/// the window actually used; [`CircuitBreaker::new`] refuses one that does not
/// fit. A type with both at 0 holds no window (consecutive failures only).
///
/// `DURATIONS` (0 unless asked for) is how many calls' durations the breaker
/// keeps, one `u64` of nanoseconds each, so that a count window of at most
/// that many calls reports its calls' total and mean duration in
/// [`metrics`](CircuitBreaker::metrics) (a time window reports them at no
/// cost; a larger count window, and any count window of a type with
/// `DURATIONS` at 0, reports `None`). The breaker is then `8 × DURATIONS`
/// bytes larger, and its [`closed_path`](CircuitBreaker::closed_path), which
/// keeps no durations, hands every outcome to the machine.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Admission, BreakerConfig, CallOutcome, CircuitBreaker, Instant};
///
/// let config = BreakerConfig::builder().count_window(100).build()?;
/// // 128 calls' durations: enough for the 100-call window.
/// let mut breaker = CircuitBreaker::<2, 0, 128>::new(config)?;
/// let t = Instant::ORIGIN;
/// for ms in 1..=150 {
///     let Admission::Admitted { permit, .. } = breaker.request(t) else { unreachable!() };
///     let _ = breaker.record(permit, CallOutcome::success(Duration::from_millis(ms)), t);
/// }
/// // The window holds the last 100 calls: 51 ms to 150 ms.
/// let m = breaker.metrics(t);
/// assert_eq!(m.call_duration_total, Some(Duration::from_millis(10_050)));
/// assert_eq!(m.call_duration_mean, Some(Duration::from_micros(100_500)));
/// // The default type keeps no durations for a count window.
/// let plain = CircuitBreaker::<2, 0>::new(config)?;
/// assert_eq!(plain.metrics(t).call_duration_total, None);
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
///
/// # States and transitions
///
/// | from \\ to | closed | open | half-open | forced-open | disabled | metrics-only |
/// |---|---|---|---|---|---|---|
/// | closed | manual | auto: a rule trips; manual | – | manual | manual | manual |
/// | open | manual | manual | auto: next request after the open duration; manual | manual | manual | manual |
/// | half-open | auto: the probes pass, or the maximum wait passes ([`HalfOpenTimeout::Close`]); manual | auto: a probe fails, the probes' rates fail, or the maximum wait passes; manual | manual | manual | manual | manual |
/// | forced-open | manual | manual | manual | manual | manual | manual |
/// | disabled | manual | manual | manual | manual | manual | manual |
/// | metrics-only | manual | – | – | manual | manual | manual |
///
/// Manual moves are [`force`](CircuitBreaker::force) (which re-enters the state
/// the breaker is in, the diagonal), [`ensure`](CircuitBreaker::ensure) (which
/// answers `None` for it instead) and [`reset`](CircuitBreaker::reset) (to closed
/// from anywhere). Every entry into closed or metrics-only starts with a clean
/// window and no failure streak; closing (and any manual change) restarts the
/// growth of the open duration. Outcomes are judged only when recorded: a trip
/// happens in [`record`](CircuitBreaker::record), never as time passes, and the
/// timed moves (open to half-open, the half-open maximum wait) happen on the
/// first request that finds their time passed, or earlier, at the instant
/// itself, when the driver keeps a timer: it reads
/// [`next_deadline`](CircuitBreaker::next_deadline) and calls
/// [`wake`](CircuitBreaker::wake) then (the adapters do, when asked to:
/// Resilience4j's automatic transition from open to half-open, and its
/// scheduled half-open timeout).
///
/// # Late outcomes
/// A permit issued before the breaker last opened (its epoch is older) is late.
/// Its outcome is added to the window if the breaker is closed or metrics-only,
/// but it never counts towards the failure streak, never trips the breaker, and
/// while open or half-open it is ignored altogether. Epochs are `u32` and wrap:
/// a permit held across 2³² openings would pass for a fresh one.
///
/// # Size
/// Apart from its [`BreakerConfig`] (which carries a [`Backoff`](crate::Backoff)
/// and a [`Jitter`](crate::Jitter) and takes 152 bytes on 64-bit targets), a
/// breaker with a 100-call count window (`CircuitBreaker<2, 0>`) is 104 bytes:
/// 40 for the two bit rings, their cursors and the running counts of failed
/// and slow calls, 40 for the state (a half-open period keeps its probe counts,
/// its deadline and the count of rejected calls it began at), 12 for the epoch
/// and the counters, 8 for the count of rejected calls, 4 for the window's
/// size and how many outcomes may still be
/// recorded before a rate rule must be checked. Each further 64 calls of
/// capacity add 16 bytes (`CircuitBreaker<16, 0>`, 1,024 calls, holds the
/// 1,000-call windows Resilience4j users configure); each call whose
/// duration is kept (`DURATIONS`) adds 8 (`CircuitBreaker<2, 0, 128>`, 1,280
/// bytes on 64-bit targets). Capacity costs no time:
/// the window's counts are kept as calls come and go, so recording an outcome
/// costs the same in any window and any capacity. While the window is far
/// enough from every rate threshold that no run of outcomes short of a bound
/// could reach one, recording an outcome checks only the failure streak; the
/// bound is worked out again when it runs out.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BasicRule, Admission, BreakerConfig, CallOutcome, CircuitBreaker, Instant, BreakerState};
///
/// let config = BreakerConfig::basic(BasicRule {
///     failure_threshold: 2,
///     open_duration: Duration::from_secs(5),
///     success_threshold: 1,
/// })?;
/// let mut breaker = CircuitBreaker::<0, 0>::new(config)?;
/// let t0 = Instant::ORIGIN;
/// for _ in 0..2 {
///     let Admission::Admitted { permit, .. } = breaker.request(t0) else { unreachable!() };
///     let _ = breaker.record(permit, CallOutcome::failure(Duration::from_millis(20)), t0);
/// }
/// assert_eq!(breaker.state(), BreakerState::Open);
/// let Admission::Rejected { until, .. } = breaker.request(t0) else { unreachable!() };
/// assert_eq!(until, Some(t0 + Duration::from_secs(5)));
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Clone, Debug)]
#[repr(C)]
pub struct CircuitBreaker<
    const WORDS: usize = 2,
    const BUCKETS: usize = 0,
    const DURATIONS: usize = 0,
> {
    // The fields in this order (and no other: `repr(C)`) keep a new
    // breaker's zeroed fields apart, in runs short enough that building one
    // is a few stores, not a call to clear memory, on targets built for size;
    // the size is the same as in any order (256 bytes for `<2, 0>` on 64-bit
    // targets).
    config: BreakerConfig,
    epoch: u32,
    reopens: u32,
    mode: Mode,
    consecutive_failures: u32,
    /// How many more outcomes [`record`](Self::record) may take in closed or
    /// metrics-only, into the count window, before a rate rule could stand at
    /// its threshold, even were every one of them a slow failure: until then
    /// only the streak rule is checked. Zero in every other state, and
    /// whenever unknown (then the next outcome is judged in full and sets it
    /// again). A cache of what the rules and the window say, so not part of
    /// equality.
    quiet: u16,
    /// The count window's size when this type holds it, 0 otherwise (no
    /// window, a time window, or no words): fixed by the config. Just before
    /// the 8-aligned `rejected`, so the zeroed run that follows (`rejected`
    /// and the count ring) is cleared with the same 8-aligned routine as the
    /// policy's, not a second one.
    count_window: u16,
    rejected: u64,
    /// `rejected` when the breaker entered the state it is in: the calls
    /// rejected in a rejecting state are those counted since. (One count
    /// for every state, set where a state is entered, rather than one in
    /// each rejecting state's record: less code where states change.)
    rejected_at_entry: u64,
    calls: CountRing<WORDS>,
    buckets: BucketRing<BUCKETS>,
    /// The count window's calls' durations, slot by slot beside `calls`
    /// (none when `DURATIONS` is 0: then the field takes no space). Left out
    /// of equality (see the `PartialEq` impl).
    durations: CallDurations<DURATIONS>,
}

/// Two breakers are equal when they would answer every later input alike:
/// the same config, state, counters and windows. The durations a count
/// window keeps (`DURATIONS`) are left out: they decide nothing, and a
/// snapshot does not carry them, so a breaker restored from its own snapshot
/// (whose calls' durations are not known) equals the breaker it was taken
/// from, as it does without them. (A time window's buckets carry their
/// durations in the snapshot, and are compared with them.)
impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> PartialEq
    for CircuitBreaker<WORDS, BUCKETS, DURATIONS>
{
    fn eq(&self, other: &Self) -> bool {
        // `quiet` is left out: it only says when the rules are next checked.
        self.config == other.config
            && self.mode == other.mode
            && self.epoch == other.epoch
            && self.reopens == other.reopens
            && self.consecutive_failures == other.consecutive_failures
            && self.rejected == other.rejected
            && self.rejected_calls_in_state() == other.rejected_calls_in_state()
            && self.calls == other.calls
            && self.buckets == other.buckets
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    CircuitBreaker<WORDS, BUCKETS, DURATIONS>
{
    /// How many calls the count window can hold.
    pub const CALL_CAPACITY: usize = CountRing::<WORDS>::CAPACITY;
    /// How many buckets the time window can hold.
    pub const BUCKET_CAPACITY: usize = BUCKETS;
    /// The largest count window whose calls' durations the breaker keeps
    /// (for [`BreakerMetrics::call_duration_total`]): `DURATIONS`.
    pub const DURATION_CAPACITY: usize = DURATIONS;

    /// A closed breaker following `config` (copied in).
    ///
    /// # Errors
    /// [`BreakerError::WindowTooLarge`] if the config's window does not fit this
    /// type's storage.
    pub fn new(config: BreakerConfig) -> Result<Self, BreakerError> {
        Self::check_fits(&config)?;
        let count_window = match config.window_calls() {
            Some(size) if WORDS > 0 => size,
            _ => 0,
        };
        Ok(CircuitBreaker {
            count_window,
            quiet: 0,
            config,
            mode: Mode::Closed,
            epoch: 0,
            reopens: 0,
            consecutive_failures: 0,
            rejected: 0,
            rejected_at_entry: 0,
            calls: CountRing::EMPTY,
            buckets: BucketRing::new(),
            durations: CallDurations::EMPTY,
        })
    }

    /// A breaker following `config` that starts in `initial` at `now`, as if an
    /// operator had put a new breaker there (a breaker brought up open while its
    /// dependency is known to be down, say). No transition is reported.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BasicRule, Admission, BreakerConfig, BreakerState, CircuitBreaker, Instant, ManualState};
    ///
    /// let config = BreakerConfig::basic(BasicRule {
    ///     failure_threshold: 3,
    ///     open_duration: Duration::from_secs(5),
    ///     success_threshold: 1,
    /// })?;
    /// let t0 = Instant::from_secs(100);
    /// let mut breaker =
    ///     CircuitBreaker::<0, 0>::starting_in(config, ManualState::OpenFor(Duration::from_secs(30)), t0)?;
    /// assert_eq!(breaker.state(), BreakerState::Open);
    /// assert_eq!(breaker.open_until(), Some(Instant::from_secs(130)));
    /// assert!(!breaker.request(t0).is_admitted());
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    ///
    /// # Errors
    /// As [`CircuitBreaker::new`], and for an invalid `initial` as
    /// [`CircuitBreaker::force`] (any state may be the first, half-open
    /// included).
    pub fn starting_in(
        config: BreakerConfig,
        initial: ManualState,
        now: Instant,
    ) -> Result<Self, BreakerError> {
        let mut breaker = Self::new(config)?;
        if initial != ManualState::Closed {
            // A new breaker has no history to protect: any state may be the
            // first, half-open included (the table forbids it from closed).
            let _ = breaker.carry_out(initial, now)?;
        }
        Ok(breaker)
    }

    fn check_fits(config: &BreakerConfig) -> Result<(), BreakerError> {
        if let Some(calls) = config.window_calls() {
            if usize::from(calls) > Self::CALL_CAPACITY {
                return Err(BreakerError::WindowTooLarge {
                    field: "window.calls",
                    requested: u32::from(calls),
                    capacity: Self::CALL_CAPACITY,
                });
            }
        }
        if let Some(Window::Time { buckets, .. }) = config.window() {
            if usize::from(buckets) > BUCKETS {
                return Err(BreakerError::WindowTooLarge {
                    field: "window.buckets",
                    requested: u32::from(buckets),
                    capacity: BUCKETS,
                });
            }
        }
        Ok(())
    }

    // ----- getters -----

    /// The config the breaker follows.
    #[must_use]
    pub const fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The current state. An open breaker whose open duration has passed still
    /// says `Open` until the next [`request`](CircuitBreaker::request) or
    /// [`wake`](CircuitBreaker::wake); so does a half-open one whose maximum
    /// wait has passed say `HalfOpen`.
    #[must_use]
    pub const fn state(&self) -> BreakerState {
        match self.mode {
            Mode::Closed => BreakerState::Closed,
            Mode::Open { .. } => BreakerState::Open,
            Mode::HalfOpen(_) => BreakerState::HalfOpen,
            Mode::ForcedOpen => BreakerState::ForcedOpen,
            Mode::Disabled => BreakerState::Disabled,
            Mode::MetricsOnly => BreakerState::MetricsOnly,
        }
    }

    /// When an open breaker will next admit (`None` unless open).
    #[must_use]
    pub const fn open_until(&self) -> Option<Instant> {
        match self.mode {
            Mode::Open { until, .. } => Some(until),
            _ => None,
        }
    }

    /// When a half-open breaker decides on its own (`None` unless half-open with
    /// a maximum wait).
    #[must_use]
    pub const fn half_open_until(&self) -> Option<Instant> {
        match self.mode {
            Mode::HalfOpen(p) => p.deadline(),
            _ => None,
        }
    }

    /// The next instant at which the breaker changes state on its own, with no
    /// request: the end of the open period (open → half-open), or the end of
    /// the half-open maximum wait (half-open → open or closed, as
    /// [`HalfOpenTimeout`] says). `None` in every other state, and half-open
    /// without a maximum wait: then only an input moves it. As
    /// [`RetryMachine::next_deadline`](crate::RetryMachine::next_deadline) is
    /// for a call, this is when a driver that wants the breaker's state to
    /// follow the time (a dashboard that must not read "open" all night, the
    /// state-change event emitted when the open period ends) sets its timer;
    /// when it fires, it calls [`wake`](Self::wake) with the time it reads
    /// then. The answer changes only with the state: read it again after
    /// every input that reports a transition.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BreakerConfig, BreakerState, CircuitBreaker, Instant, ManualState, TransitionCause};
    ///
    /// let config = BreakerConfig::builder()
    ///     .open_duration(Duration::from_secs(30))
    ///     .max_half_open_wait(Duration::from_secs(10))
    ///     .build()?;
    /// let t0 = Instant::from_secs(100);
    /// let mut breaker = CircuitBreaker::<0, 0>::starting_in(config, ManualState::OpenFor(Duration::from_secs(30)), t0)?;
    /// assert_eq!(breaker.next_deadline(), Some(Instant::from_secs(130)));
    /// // The driver's timer fires at 130 s; no call came meanwhile.
    /// let moved = breaker.wake(Instant::from_secs(130)).expect("the open period is over");
    /// assert_eq!((moved.from, moved.to, moved.cause), (BreakerState::Open, BreakerState::HalfOpen, TransitionCause::OpenElapsed));
    /// // Now the half-open maximum wait is the next moment it moves.
    /// assert_eq!(breaker.next_deadline(), Some(Instant::from_secs(140)));
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    #[must_use]
    pub const fn next_deadline(&self) -> Option<Instant> {
        match self.mode {
            Mode::Open { until, .. } => Some(until),
            Mode::HalfOpen(p) => p.deadline(),
            _ => None,
        }
    }

    /// How many times in a row the breaker has opened since it last closed.
    #[must_use]
    pub const fn reopens(&self) -> u32 {
        self.reopens
    }

    /// The current epoch: bumped each time the breaker opens, is forced open or
    /// is sent to half-open by an operator.
    #[must_use]
    pub const fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The current streak of failures (closed or metrics-only; late outcomes
    /// excluded).
    #[must_use]
    pub const fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Calls rejected since the breaker was built or last
    /// [`reset`](Self::reset).
    #[must_use]
    pub const fn rejected_calls(&self) -> u64 {
        self.rejected
    }

    /// Calls rejected since the breaker entered the state it is in (open,
    /// half-open or forced-open; zero in the states that admit every call).
    /// Every transition starts the count again, an operator's re-entry of the
    /// same state included.
    #[must_use]
    pub const fn rejected_calls_in_state(&self) -> u64 {
        match self.mode {
            Mode::Open { .. } | Mode::ForcedOpen | Mode::HalfOpen(_) => {
                self.rejected.saturating_sub(self.rejected_at_entry)
            }
            _ => 0,
        }
    }

    /// Probes in flight (zero unless half-open).
    #[must_use]
    pub const fn probes_in_flight(&self) -> u32 {
        match self.mode {
            Mode::HalfOpen(p) => p.in_flight,
            _ => 0,
        }
    }

    /// Probes that succeeded so far in this half-open period (zero unless
    /// half-open). Under [`HalfOpenVerdict::Consecutive`] they are the good
    /// probes in a row that `success_threshold` counts.
    #[must_use]
    pub const fn probe_successes(&self) -> u32 {
        match self.mode {
            Mode::HalfOpen(p) => p.results.calls.saturating_sub(p.results.failures),
            _ => 0,
        }
    }

    /// The probes admitted in this half-open period and not released (zero
    /// unless half-open).
    #[must_use]
    pub const fn probes_admitted(&self) -> u32 {
        match self.mode {
            Mode::HalfOpen(p) => p.admitted(),
            _ => 0,
        }
    }

    /// What the probes of this half-open period reported (all zero unless
    /// half-open).
    #[must_use]
    pub const fn probe_results(&self) -> WindowStats {
        match self.mode {
            Mode::HalfOpen(p) => p.results,
            _ => WindowStats {
                calls: 0,
                failures: 0,
                slow: 0,
                slow_failures: 0,
            },
        }
    }

    /// What the window holds as seen at `now` (a time window drops old buckets
    /// as time passes; a count window ignores `now`). All zero without a window.
    #[must_use]
    pub fn stats(&self, now: Instant) -> WindowStats {
        if self.config.window_calls().is_some() {
            return self.calls.stats();
        }
        // A type without buckets holds no time window (`new` refuses one).
        if BUCKETS == 0 {
            return WindowStats::default();
        }
        match self.config.bucket_shape() {
            Some((nanos, buckets)) => self.buckets.stats(now, nanos, buckets),
            None => WindowStats::default(),
        }
    }

    /// What a dashboard shows at `now`, for the state the breaker is in: the
    /// state, the counts with slow successes and slow failures apart, the
    /// failure and slow-call rates (or that there are not enough calls yet to
    /// judge them), the rejected calls (since the breaker was built or last
    /// reset, and in this state), the calls' total and mean duration where the
    /// window keeps them, and the half-open probes.
    ///
    /// Half-open, the counts and rates are the probes' (as Resilience4j reads
    /// its half-open state's own window), not the window that tripped the
    /// breaker: judged once as many probes have reported as the verdict needs
    /// (`success_threshold` good ones in a row, or the rates verdict's number
    /// of probes), "not enough calls" until then. In every other state they
    /// are the window's (an open breaker shows the window that tripped it).
    ///
    /// The durations are known for a time window: each bucket adds up its
    /// calls' durations as they are recorded. A count window must remember
    /// each call's duration to take it out again when the call leaves (8
    /// bytes a call), so it keeps them only when asked to: in a breaker whose
    /// `DURATIONS` is at least the window's size (`CircuitBreaker<2, 0,
    /// 128>` for a 100-call window); then the total is that of exactly the
    /// calls the window holds. The durations are `None` for a count window
    /// larger than `DURATIONS` (every count window of the default type),
    /// without a window, half-open (the probes' durations are not kept), past
    /// what 64 bits of nanoseconds hold (584 years), and while a call or a
    /// bucket restored from a snapshot that did not keep its duration is in
    /// the window (a snapshot keeps a time window's durations, not a count
    /// window's).
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BasicRule, Admission, BreakerConfig, CallOutcome, CircuitBreaker, Instant, Rate, RateReading};
    ///
    /// let config = BreakerConfig::builder()
    ///     .failure_threshold(None)
    ///     .failure_rate(Rate::from_percent(50))
    ///     .count_window(10)
    ///     .minimum_calls(4)
    ///     .build()?;
    /// let mut breaker = CircuitBreaker::<1, 0>::new(config)?;
    /// let t = Instant::ORIGIN;
    /// let Admission::Admitted { permit, .. } = breaker.request(t) else { unreachable!() };
    /// let _ = breaker.record(permit, CallOutcome::failure(Duration::from_millis(5)), t);
    /// let m = breaker.metrics(t);
    /// assert_eq!(m.failure_rate, RateReading::NotEnoughCalls { calls: 1, minimum: 4 });
    /// assert_eq!(m.failure_rate.to_string(), "not enough calls (1 of 4)");
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    #[must_use]
    pub fn metrics(&self, now: Instant) -> BreakerMetrics {
        // Half-open: the probes, judged once the verdict has what it needs.
        let (window, minimum, rated, nanos) = match self.mode {
            Mode::HalfOpen(p) => {
                let needed = match self.config.half_open_verdict() {
                    HalfOpenVerdict::Consecutive => self.config.success_threshold(),
                    HalfOpenVerdict::Rates { probes } => probes,
                };
                (p.results, needed, true, None)
            }
            _ => (
                self.stats(now),
                self.config.minimum_calls(),
                self.config.window().is_some(),
                self.window_nanos(now),
            ),
        };
        let reading = |count| {
            if rated {
                RateReading::of(count, window.calls, minimum)
            } else {
                RateReading::NoWindow
            }
        };
        let mean = nanos.and_then(|n| n.checked_div(u64::from(window.calls)));
        BreakerMetrics {
            state: self.state(),
            window,
            failure_rate: reading(window.failures),
            slow_call_rate: reading(window.slow),
            rejected: self.rejected,
            rejected_in_state: self.rejected_calls_in_state(),
            consecutive_failures: self.consecutive_failures,
            probes_in_flight: self.probes_in_flight(),
            probes: self.probe_results(),
            call_duration_total: nanos.map(crate::retry::nanos::from_nanos),
            call_duration_mean: mean.map(crate::retry::nanos::from_nanos),
        }
    }

    /// The durations of the calls the window holds at `now`, added up in
    /// nanoseconds: a time window's, or a count window's when the breaker
    /// keeps durations for a window of its size (`None` otherwise, when a
    /// duration is not known, or past what 64 bits hold).
    fn window_nanos(&self, now: Instant) -> Option<u64> {
        if self.keeps_call_durations() {
            return self.durations.total(self.calls.len());
        }
        if BUCKETS == 0 {
            return None;
        }
        let (nanos, buckets) = self.config.bucket_shape()?;
        self.buckets.nanos(now, nanos, buckets)
    }

    // ----- inputs -----

    /// Asks whether a call may run at `now`.
    ///
    /// Closed, disabled and metrics-only admit. Open rejects until its open
    /// duration has passed; the first request after that moves the breaker to
    /// half-open (reported in the admission) and is the first probe. Half-open
    /// admits probes as its [`HalfOpenVerdict`] allows (at most
    /// `half_open_permits` at a time; under the rates verdict, its number of
    /// probes in all) and rejects the rest, telling them when it will decide on
    /// its own if it has a maximum wait. The first request at or after that
    /// moment makes the decision ([`HalfOpenTimeout`]): re-opened, the request is
    /// rejected; closed, it is admitted. Forced-open rejects. Every rejection is
    /// counted.
    ///
    /// The driver must run the call only if admitted, and then hand the permit back
    /// with [`record`](CircuitBreaker::record) or
    /// [`release`](CircuitBreaker::release).
    #[inline]
    pub fn request(&mut self, now: Instant) -> Admission {
        // The closed path first, small enough to inline at every call site.
        if matches!(self.mode, Mode::Closed) {
            return Admission::Admitted {
                permit: self.permit(false),
                transition: None,
            };
        }
        self.request_other(now)
    }

    /// [`request`](Self::request) in any state: first the timed move the
    /// request finds due (open to half-open once the open period is over; the
    /// half-open maximum wait's decision), then the answer of the state the
    /// breaker is in after it.
    #[inline(never)]
    fn request_other(&mut self, now: Instant) -> Admission {
        let transition = self.due(now);
        let mut probe = false;
        let (until, reason) = match self.mode {
            Mode::Closed | Mode::Disabled | Mode::MetricsOnly => (None, None),
            Mode::ForcedOpen => (None, Some(RejectReason::ForcedOpen)),
            // At the end of time an open period may not end after now.
            Mode::Open { until, .. } => (Some(until), Some(RejectReason::Open)),
            Mode::HalfOpen(p) => {
                let room = match self.config.half_open_verdict() {
                    HalfOpenVerdict::Consecutive => true,
                    HalfOpenVerdict::Rates { probes } => p.admitted() < probes,
                };
                if room && p.in_flight < self.config.half_open_permits() {
                    self.mode = Mode::HalfOpen(Probing {
                        in_flight: p.in_flight.saturating_add(1),
                        ..p
                    });
                    probe = true;
                    (None, None)
                } else {
                    (p.deadline(), Some(RejectReason::ProbesBusy))
                }
            }
        };
        match reason {
            None => Admission::Admitted {
                permit: self.permit(probe),
                transition,
            },
            // `until` is after `now`: a deadline or an open period that had
            // ended was applied above.
            Some(reason) => self.reject(until.filter(|u| *u > now), reason, transition),
        }
    }

    /// Hands back `permit` with the outcome of its call, at `now`. Returns what
    /// the outcome did: the state change it caused (the driver reports it),
    /// whether it was ignored, and the rates it pushed over their thresholds.
    ///
    /// Closed: the outcome enters the window and the failure streak, then the trip
    /// rules are judged (consecutive failures first, then the failure rate, then
    /// the slow-call rate, rates only once the window holds `minimum_calls`).
    /// Half-open, [`HalfOpenVerdict::Consecutive`]: a failed probe (or a slow one,
    /// when the slow-call rule is on) re-opens the breaker; `success_threshold`
    /// good probes in a row close it. [`HalfOpenVerdict::Rates`]: once every probe
    /// has reported, the probes' failure rate and slow-call rate are held to the
    /// closed thresholds: re-open if either is reached, close otherwise. An
    /// outcome that arrives after a half-open breaker's maximum wait, but before
    /// the request that would apply it, still counts. Metrics-only records
    /// without judging; open, forced-open and disabled record nothing (the outcome
    /// is [`Ignored`]). Late permits: see the type's docs.
    #[inline]
    pub fn record(&mut self, permit: Permit, outcome: CallOutcome, now: Instant) -> Recorded {
        // The closed path while no rule can stand, small enough to inline at
        // every call site: the streak and the count window take the outcome,
        // and nothing is judged (`quiet` is zero in every other state).
        let failed = !outcome.success;
        let slow = || outcome.duration > self.config.slow_call_duration();
        if let Some(quiet) = self.quiet.checked_sub(1) {
            let streak = if permit.epoch != self.epoch {
                self.consecutive_failures
            } else if failed {
                self.consecutive_failures.saturating_add(1)
            } else {
                0
            };
            // The streak rule is the one `quiet` does not cover.
            if !self.config.streak_trips(streak) {
                self.quiet = quiet;
                self.consecutive_failures = streak;
                let slow = slow();
                let _ = self.push_call(self.count_window, (failed, slow), outcome.duration);
                return Recorded::nothing();
            }
        }
        self.record_other(permit, (failed, slow()), outcome.duration, now)
    }

    /// [`record`](Self::record) in any state, when the closed path cannot
    /// skip the rules, with whether the call failed and whether it was slow
    /// (as `record` worked them out) and how long it took (for a time
    /// window's durations).
    #[inline(never)]
    fn record_other(
        &mut self,
        permit: Permit,
        (failed, slow): (bool, bool),
        took: Duration,
        now: Instant,
    ) -> Recorded {
        let late = permit.epoch != self.epoch;
        let (verdict, exceeded) = match self.mode {
            Mode::Closed | Mode::MetricsOnly => self.record_closed(late, (failed, slow), took, now),
            Mode::HalfOpen(_) if !late && permit.probe => self.judge_probe(failed, slow),
            mode => {
                let ignored = match mode {
                    Mode::HalfOpen(_) => Ignored::Late,
                    Mode::Open { .. } => Ignored::Open,
                    Mode::ForcedOpen => Ignored::ForcedOpen,
                    _ => Ignored::Disabled,
                };
                return Recorded::ignored(ignored);
            }
        };
        Recorded {
            transition: verdict.map(|(reopen, cause)| self.settle(reopen, now, cause)),
            ignored: None,
            exceeded,
        }
    }

    /// Hands back `permit` for a call that never ran (cancelled before it
    /// started, say). Nothing is recorded; a half-open probe frees its place (and,
    /// under the rates verdict, its place among the probes judged). A release
    /// never changes the state, so it returns nothing; `now` is taken for
    /// symmetry with the other inputs.
    pub fn release(&mut self, permit: Permit, now: Instant) {
        let _ = now;
        if permit.epoch != self.epoch || !permit.probe {
            return;
        }
        if let Mode::HalfOpen(p) = self.mode {
            self.mode = Mode::HalfOpen(Probing {
                in_flight: p.in_flight.saturating_sub(1),
                ..p
            });
        }
    }

    /// Applies the passage of time at `now`, with no request: the move the
    /// breaker makes on its own once [`next_deadline`](Self::next_deadline)
    /// has passed, exactly as the first request at `now` would make it before
    /// answering (open → half-open with the cause
    /// [`TransitionCause::OpenElapsed`]; at the end of the half-open maximum
    /// wait, re-opened or closed with [`TransitionCause::HalfOpenTimeout`]),
    /// and reported the same way, stamped `now`. Nothing else changes: no
    /// probe is admitted, no call counted, and the half-open maximum wait (if
    /// any) starts at `now`, as it would at that request.
    ///
    /// A wake before the deadline, in any other state, or after an operator
    /// or an outcome moved the breaker on (a timer armed for an open period
    /// that was replaced) does nothing and answers `None`: an early or stale
    /// timer is harmless. One wake makes at most one move (a re-opening whose
    /// jittered open period came out empty is due again at once: the next
    /// wake takes it to half-open).
    pub fn wake(&mut self, now: Instant) -> Option<Transition> {
        self.due(now)
    }

    /// An operator moves the breaker to `target` at `now`, even if it is there
    /// already: the state is entered afresh (closed or metrics-only with a clean
    /// window, open for the new period, half-open with no probes out, forced-open
    /// with a new epoch). For a request that leaves a breaker already in the
    /// target state alone, use [`ensure`](CircuitBreaker::ensure).
    ///
    /// Open (for a duration or until an instant), half-open and forced-open bump
    /// the epoch, so every permit in flight becomes late. Closed and metrics-only
    /// start with a clean window. Every manual change restarts the growth of the
    /// open duration.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BasicRule, BreakerConfig, BreakerState, CircuitBreaker, Instant, ManualState};
    ///
    /// let mut breaker = CircuitBreaker::<0, 0>::new(BreakerConfig::default())?;
    /// let t = Instant::from_secs(10);
    /// // A deploy of the dependency: hold calls back for two minutes.
    /// let moved = breaker.force(ManualState::OpenFor(Duration::from_secs(120)), t)?;
    /// assert_eq!((moved.from, moved.to), (BreakerState::Closed, BreakerState::Open));
    /// assert_eq!(breaker.open_until(), Some(Instant::from_secs(130)));
    /// // Asked again, it is entered afresh: open for another two minutes from now.
    /// let again = breaker.force(ManualState::OpenFor(Duration::from_secs(120)), Instant::from_secs(20))?;
    /// assert_eq!((again.from, again.to), (BreakerState::Open, BreakerState::Open));
    /// assert_eq!(breaker.open_until(), Some(Instant::from_secs(140)));
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    ///
    /// # Errors
    /// Nothing changes on an error:
    /// [`BreakerError::IllegalTransition`] when the table forbids the move
    /// (closed to half-open, metrics-only to open or half-open);
    /// [`BreakerError::ZeroDuration`] for [`ManualState::OpenFor`] a zero
    /// duration; [`BreakerError::NotAfterNow`] for [`ManualState::OpenUntil`] an
    /// instant not after `now`.
    pub fn force(&mut self, target: ManualState, now: Instant) -> Result<Transition, BreakerError> {
        let from = self.state();
        if !from.may_be_forced_to(target) {
            return Err(BreakerError::IllegalTransition {
                from,
                to: target.state(),
            });
        }
        self.carry_out(target, now)
    }

    /// Moves to `target` at `now` whatever the table says (the caller has
    /// checked it), refusing only an invalid target.
    fn carry_out(&mut self, target: ManualState, now: Instant) -> Result<Transition, BreakerError> {
        let open_until = match target {
            ManualState::OpenFor(d) if d.is_zero() => {
                return Err(BreakerError::ZeroDuration { field: "open_for" })
            }
            ManualState::OpenFor(d) => now.saturating_add(d),
            ManualState::OpenUntil(until) if until <= now => {
                return Err(BreakerError::NotAfterNow {
                    field: "open_until",
                    until,
                    now,
                })
            }
            ManualState::OpenUntil(until) => until,
            _ => now,
        };
        let cause = TransitionCause::Manual;
        self.reopens = 0;
        Ok(match target {
            ManualState::Closed => self.close(BreakerState::Closed, now, cause),
            ManualState::MetricsOnly => self.close(BreakerState::MetricsOnly, now, cause),
            ManualState::Disabled => self.enter(BreakerState::Disabled, now, false, now, cause),
            ManualState::ForcedOpen => {
                self.epoch = self.epoch.wrapping_add(1);
                self.enter(BreakerState::ForcedOpen, now, false, now, cause)
            }
            ManualState::OpenFor(_) | ManualState::OpenUntil(_) => {
                self.epoch = self.epoch.wrapping_add(1);
                self.consecutive_failures = 0;
                self.enter(BreakerState::Open, open_until, true, now, cause)
            }
            ManualState::HalfOpen => {
                self.epoch = self.epoch.wrapping_add(1);
                self.consecutive_failures = 0;
                self.half_open(now, cause)
            }
        })
    }

    /// An operator asks for `target` at `now`, leaving the breaker alone if it is
    /// in that state already: then the answer is `Ok(None)` (an open breaker
    /// asked to open keeps its period; a closed one keeps its window). Otherwise
    /// as [`force`](CircuitBreaker::force).
    ///
    /// ```
    /// use retry_core::{BasicRule, BreakerConfig, CircuitBreaker, Instant, ManualState};
    ///
    /// let mut breaker = CircuitBreaker::<0, 0>::new(BreakerConfig::default())?;
    /// assert_eq!(breaker.ensure(ManualState::Closed, Instant::ORIGIN)?, None);
    /// assert!(breaker.ensure(ManualState::ForcedOpen, Instant::ORIGIN)?.is_some());
    /// assert_eq!(breaker.ensure(ManualState::ForcedOpen, Instant::ORIGIN)?, None);
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    ///
    /// # Errors
    /// As [`force`](CircuitBreaker::force) (an invalid target is refused even
    /// when the breaker is in its state).
    pub fn ensure(
        &mut self,
        target: ManualState,
        now: Instant,
    ) -> Result<Option<Transition>, BreakerError> {
        match target {
            ManualState::OpenFor(d) if d.is_zero() => {
                return Err(BreakerError::ZeroDuration { field: "open_for" })
            }
            ManualState::OpenUntil(until) if until <= now => {
                return Err(BreakerError::NotAfterNow {
                    field: "open_until",
                    until,
                    now,
                })
            }
            _ => {}
        }
        if self.state() == target.state() {
            return Ok(None);
        }
        self.force(target, now).map(Some)
    }

    /// An operator resets the breaker at `now`: closed, from any state (closed
    /// included), with a clean window, no failure streak and the open duration's
    /// growth restarted. The transition's cause is
    /// [`TransitionCause::Reset`] (the adapters' "reset" event). Every count
    /// starts again: the window's, the streak, and the rejected calls, in all
    /// and in the state.
    pub fn reset(&mut self, now: Instant) -> Transition {
        self.reopens = 0;
        self.rejected = 0;
        self.close(BreakerState::Closed, now, TransitionCause::Reset)
    }

    // ----- internals -----

    /// The timed move due at `now`, made: open to half-open once the open
    /// period is over, the half-open maximum wait's decision once it has
    /// passed. Written once for [`request`](Self::request) and
    /// [`wake`](Self::wake), and inlined into each, so that the request path
    /// is the code it was.
    #[inline(always)]
    fn due(&mut self, now: Instant) -> Option<Transition> {
        match self.mode {
            Mode::Open { until, .. } if now >= until => {
                Some(self.half_open(now, TransitionCause::OpenElapsed))
            }
            Mode::HalfOpen(p) if p.timed && now >= p.deadline_at => {
                let reopen = self.config.half_open_timeout() == HalfOpenTimeout::Reopen;
                Some(self.settle(reopen, now, TransitionCause::HalfOpenTimeout))
            }
            _ => None,
        }
    }

    fn permit(&self, probe: bool) -> Permit {
        Permit {
            epoch: self.epoch,
            probe,
        }
    }

    #[inline(never)]
    fn reject(
        &mut self,
        until: Option<Instant>,
        reason: RejectReason,
        transition: Option<Transition>,
    ) -> Admission {
        self.rejected = self.rejected.saturating_add(1);
        Admission::Rejected {
            until,
            reason,
            transition,
        }
    }

    /// Moves to `to` at `now`, entering it afresh: open until `until`,
    /// half-open with no probes out and `until` as its deadline if `timed`;
    /// `until` means nothing for the other states. The one place a state is
    /// built, so each is written once in the code. (An instant and a flag,
    /// not an `Option`: on 32-bit targets that is a 64-bit tag on the stack.)
    #[inline(never)]
    fn enter(
        &mut self,
        to: BreakerState,
        until: Instant,
        timed: bool,
        now: Instant,
        cause: TransitionCause,
    ) -> Transition {
        let from = self.state();
        self.rejected_at_entry = self.rejected;
        self.mode = match to {
            BreakerState::Closed => Mode::Closed,
            BreakerState::Open => Mode::Open { until },
            BreakerState::HalfOpen => Mode::HalfOpen(Probing::new(
                0,
                WindowStats::default(),
                timed.then_some(until),
            )),
            BreakerState::ForcedOpen => Mode::ForcedOpen,
            BreakerState::Disabled => Mode::Disabled,
            BreakerState::MetricsOnly => Mode::MetricsOnly,
        };
        self.quiet = 0;
        Transition {
            from,
            to,
            at: now,
            cause,
        }
    }

    /// Enters half-open with no probes out.
    fn half_open(&mut self, now: Instant, cause: TransitionCause) -> Transition {
        // In nanoseconds, as `Instant::saturating_add` would, with no
        // division: a wait past the last instant ends there (as an open
        // period does), so a configured wait always gives a deadline.
        let deadline = self
            .config
            .max_half_open_wait_nanos()
            .map(|wait| now.as_nanos().saturating_add(wait));
        let until = Instant::from_nanos(deadline.unwrap_or(0));
        self.enter(
            BreakerState::HalfOpen,
            until,
            deadline.is_some(),
            now,
            cause,
        )
    }

    /// [`record`](Self::record) closed or metrics-only: the outcome enters the
    /// streak (unless late) and the window. When no rule stands at its
    /// threshold after it, nothing crossed a threshold and nothing trips: the
    /// common case, which ends here, with how many outcomes may come before a
    /// rule could stand (`quiet`); otherwise [`judge`](Self::judge) decides.
    /// Returns the verdict and the rates reached, as `judge` does.
    fn record_closed(
        &mut self,
        late: bool,
        (failed, slow): (bool, bool),
        took: Duration,
        now: Instant,
    ) -> (Verdict, Exceeded) {
        if !late {
            self.consecutive_failures = if failed {
                self.consecutive_failures.saturating_add(1)
            } else {
                0
            };
        }
        let size = self.count_window;
        // What the window held before and after the outcome (all zero
        // without a window).
        let (mut before, mut after) = (WindowStats::default(), WindowStats::default());
        if size > 0 {
            let evicted = self.push_call(size, (failed, slow), took);
            after = self.calls.counts();
            before = before_count(after, evicted, failed, slow);
        } else if let Some((nanos, buckets)) = self.config.bucket_shape().filter(|_| BUCKETS > 0) {
            // A type without buckets holds no time window (`new` refuses one).
            before = self.buckets.stats(now, nanos, buckets);
            let took = crate::retry::nanos::sat_nanos(took);
            self.buckets.push(now, nanos, buckets, (failed, slow), took);
            after = self.buckets.stats(now, nanos, buckets);
        }
        if self.stands(after) {
            // Judged in full until a rule no longer stands (`record` comes
            // here with `quiet` still set when the streak rule stands).
            self.quiet = 0;
            return self.judge(before, after, late);
        }
        if size > 0 {
            self.quiet = self.quiet_after(after);
        }
        (None, Exceeded::NONE)
    }

    /// Whether the breaker keeps its count window's calls' durations: it has
    /// a count window, of at most `DURATIONS` calls.
    #[inline(always)]
    pub(crate) const fn keeps_call_durations(&self) -> bool {
        DURATIONS > 0 && self.count_window > 0 && self.count_window as usize <= DURATIONS
    }

    /// Pushes a call into the count window of `size` calls, with its duration
    /// when the breaker keeps durations (with `DURATIONS` at 0 this is the
    /// count ring's push alone). Returns what the ring pushed out.
    #[inline(always)]
    fn push_call(&mut self, size: u16, (failed, slow): (bool, bool), took: Duration) -> u32 {
        if DURATIONS > 0 {
            let nanos = crate::retry::nanos::sat_nanos(took);
            self.durations.put(self.calls.next_slot(), nanos);
        }
        self.calls.push(size, failed, slow)
    }

    /// How many outcomes a count window holding `now` may take, with no rate
    /// standing at its threshold now, before a rate could: each outcome adds
    /// at most one to the failed and slow counts, and the window's calls never
    /// shrink, so a rate needs at least the share of `max(calls,
    /// minimum_calls)` its threshold asks for. At most `u16::MAX`. (The streak
    /// rule is checked on every outcome.)
    fn quiet_after(&self, now: WindowStats) -> u16 {
        let config = &self.config;
        let calls = now.calls.max(config.minimum_calls());
        let room = room(config.failure_rate(), now.failures, calls).min(room(
            config.slow_call_rate(),
            now.slow,
            calls,
        ));
        u16::try_from(room).unwrap_or(u16::MAX)
    }

    /// Whether a rule stands at its threshold, the window holding `window`
    /// (all zero without one): the streak, or a rate once the window holds
    /// `minimum_calls`.
    #[cfg_attr(not(target_pointer_width = "64"), inline(always))]
    fn stands(&self, window: WindowStats) -> bool {
        let config = &self.config;
        let minimum = config.minimum_calls();
        config.streak_trips(self.consecutive_failures)
            || reached(
                config.failure_rate(),
                window.failures,
                window.calls,
                minimum,
            )
            || reached(config.slow_call_rate(), window.slow, window.calls, minimum)
    }

    /// Judges the outcome just pushed, closed or metrics-only, once some rule
    /// stands at its threshold: the rates it brought to their thresholds
    /// (reached after it, not before), and, closed and unless the outcome is
    /// late, the rule that trips the breaker, in the order consecutive
    /// failures, failure rate, slow-call rate (rates only once the window holds
    /// `minimum_calls`). `before` and `after` are what the window held before
    /// and after the outcome (all zero without a window).
    #[cold]
    #[cfg_attr(target_pointer_width = "64", inline(never))]
    fn judge(&self, before: WindowStats, after: WindowStats, late: bool) -> (Verdict, Exceeded) {
        let config = &self.config;
        let minimum = config.minimum_calls();
        let (f, s) = (config.failure_rate(), config.slow_call_rate());
        let (failing, failure_rate) = crossed(
            f,
            before.failures,
            before.calls,
            after.failures,
            after.calls,
            minimum,
        );
        let (slowing, slow_call_rate) = crossed(
            s,
            before.slow,
            before.calls,
            after.slow,
            after.calls,
            minimum,
        );
        let exceeded = Exceeded {
            failure_rate,
            slow_call_rate,
        };
        // Metrics-only records and reports without judging; a late outcome
        // never trips.
        if late || !matches!(self.mode, Mode::Closed) {
            return (None, exceeded);
        }
        let cause = if config.streak_trips(self.consecutive_failures) {
            TransitionCause::ConsecutiveFailures
        } else if failing {
            TransitionCause::FailureRate
        } else if slowing {
            TransitionCause::SlowCallRate
        } else {
            return (None, exceeded);
        };
        (Some((true, cause)), exceeded)
    }

    /// A probe's outcome, half-open. Consecutive verdict: a bad probe (failed,
    /// or slow when the slow-call rule is on) re-opens the breaker, and
    /// `success_threshold` good ones close it. Rates verdict: once all the
    /// probes have reported, the verdict on their rates.
    #[cfg_attr(not(target_pointer_width = "64"), inline(always))]
    fn judge_probe(&mut self, failed: bool, slow: bool) -> (Verdict, Exceeded) {
        let probes = self.config.half_open_verdict();
        let bad = failed || slow && self.config.slow_call_rate().is_some();
        if probes == HalfOpenVerdict::Consecutive && bad {
            return (Some((true, TransitionCause::ProbeFailed)), Exceeded::NONE);
        }
        let Mode::HalfOpen(p) = &mut self.mode else {
            return (None, Exceeded::NONE);
        };
        p.results.add(failed, slow);
        p.in_flight = p.in_flight.saturating_sub(1);
        let results = p.results;
        let (calls, f, s) = (results.calls, results.failures, results.slow);
        let (enough, exceeded) = match probes {
            HalfOpenVerdict::Consecutive => (self.config.success_threshold(), Exceeded::NONE),
            // The probes' rates, reported when they reach their thresholds
            // (from nothing: before them the period had no outcomes), once
            // every probe has reported.
            HalfOpenVerdict::Rates { probes } if calls >= probes => (
                probes,
                Exceeded {
                    failure_rate: crossed(self.config.failure_rate(), 0, 0, f, calls, 1).1,
                    slow_call_rate: crossed(self.config.slow_call_rate(), 0, 0, s, calls, 1).1,
                },
            ),
            HalfOpenVerdict::Rates { probes } => (probes, Exceeded::NONE),
        };
        if calls < enough {
            return (None, exceeded);
        }
        let verdict = if exceeded.failure_rate.is_some() {
            (true, TransitionCause::FailureRate)
        } else if exceeded.slow_call_rate.is_some() {
            (true, TransitionCause::SlowCallRate)
        } else {
            (false, TransitionCause::ProbesSucceeded)
        };
        (Some(verdict), exceeded)
    }

    /// Carries out a verdict the breaker reached on its own: re-opens it
    /// (`reopen`), or closes it with a clean window. The one place both
    /// verdicts are made, for the outcomes and the half-open maximum wait.
    #[inline(never)]
    fn settle(&mut self, reopen: bool, now: Instant, cause: TransitionCause) -> Transition {
        if reopen {
            self.open(now, cause)
        } else {
            self.close(BreakerState::Closed, now, cause)
        }
    }

    fn open(&mut self, now: Instant, cause: TransitionCause) -> Transition {
        self.reopens = self.reopens.saturating_add(1);
        self.epoch = self.epoch.wrapping_add(1);
        self.consecutive_failures = 0;
        // Saturating, as `Instant::saturating_add`; the open duration in
        // nanoseconds, never made a `Duration` here.
        let until = Instant::from_nanos(
            now.as_nanos()
                .saturating_add(self.config.open_nanos(self.reopens)),
        );
        self.enter(BreakerState::Open, until, true, now, cause)
    }

    /// Enters closed or metrics-only with a clean window.
    fn close(&mut self, to: BreakerState, now: Instant, cause: TransitionCause) -> Transition {
        self.reopens = 0;
        self.consecutive_failures = 0;
        self.calls.clear();
        self.buckets = BucketRing::new();
        self.durations.clear();
        self.enter(to, now, false, now, cause)
    }
}

/// What the rules decided about an outcome: nothing, or a move the breaker
/// makes on its own (re-open if `true`, close otherwise) and why.
type Verdict = Option<(bool, TransitionCause)>;

/// Whether `count` out of `calls` reaches `rate`, judged from `minimum` calls on.
#[inline]
fn reached(rate: Option<Rate>, count: u32, calls: u32, minimum: u32) -> bool {
    calls >= minimum && rate.is_some_and(|r| r.is_reached(count, calls))
}

/// How many more calls, each one counted, `count` may take before `count`
/// out of `calls` could reach `rate` (all of them with no rate): the fewest of
/// `calls` that reach it, less those counted and the one that would reach it.
/// `calls` is at most a count window's 65,535, so the product fits.
#[inline(never)]
fn room(rate: Option<Rate>, count: u32, calls: u32) -> u32 {
    match rate {
        Some(rate) => u32::from(rate.basis_points())
            .saturating_mul(calls)
            .div_ceil(10_000)
            .saturating_sub(count)
            .saturating_sub(1),
        None => u32::MAX,
    }
}

/// Whether `count` out of `calls` reaches `rate` (judged from `minimum`
/// calls on), and the rate measured if the outcome just recorded brought it
/// there: reached now, not before (`count_before` out of `calls_before`).
fn crossed(
    rate: Option<Rate>,
    count_before: u32,
    calls_before: u32,
    count: u32,
    calls: u32,
    minimum: u32,
) -> (bool, Option<Rate>) {
    let now = reached(rate, count, calls, minimum);
    let measured = if now && !reached(rate, count_before, calls_before, minimum) {
        RateReading::of(count, calls, minimum).rate()
    } else {
        None
    };
    (now, measured)
}

/// What a count window held before a call (`failed`, `slow`) was pushed in,
/// from what it holds `after` and what `CountRing::push` said it pushed out.
fn before_count(after: WindowStats, evicted: u32, failed: bool, slow: bool) -> WindowStats {
    let (out, out_failed, out_slow) = window::pushed_out(evicted);
    // `after` counts the call just pushed, so none of these wraps.
    WindowStats {
        calls: after.calls.wrapping_sub(u32::from(!out)),
        failures: after
            .failures
            .wrapping_sub(u32::from(failed))
            .wrapping_add(u32::from(out_failed)),
        slow: after
            .slow
            .wrapping_sub(u32::from(slow))
            .wrapping_add(u32::from(out_slow)),
        slow_failures: 0,
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> fmt::Display
    for CircuitBreaker<WORDS, BUCKETS, DURATIONS>
{
    /// The state, with when an open breaker admits again.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            Mode::Open { until, .. } => write!(f, "open until {until}"),
            Mode::HalfOpen(p) => write!(
                f,
                "half-open ({} probing, {} good)",
                p.in_flight,
                p.results.calls.saturating_sub(p.results.failures)
            ),
            _ => fmt::Display::fmt(&self.state(), f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `quiet` lets `record` skip the rate rules; a breaker that never skips
    /// them (its `quiet` cleared before every outcome) must answer every input
    /// the same way and end in the same state, over mixes of failures, slow
    /// calls, late permits, metrics-only and operators' moves.
    #[test]
    fn skipping_the_rules_while_quiet_changes_no_answer() {
        let configs = [
            (100, 100, Some(5), Some(50), None),
            (100, 20, None, Some(30), Some(40)),
            (7, 3, Some(2), Some(60), Some(90)),
            (64, 64, None, None, Some(25)),
            (128, 1, Some(40), Some(1), None),
            (33, 33, None, Some(100), Some(100)),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            seed >> 33
        };
        for (calls, minimum, streak, failure, slow) in configs {
            let config = BreakerConfig::builder()
                .failure_threshold(streak)
                .failure_rate(failure.map(Rate::from_percent))
                .slow_call_rate(slow.map(Rate::from_percent))
                .slow_call_duration(Duration::from_millis(10))
                .count_window(calls)
                .minimum_calls(minimum)
                .open_duration(Duration::from_millis(50))
                .build()
                .unwrap();
            let mut fast = CircuitBreaker::<2, 0>::new(config).unwrap();
            let mut full = fast.clone();
            let mut held: Option<(Permit, Permit)> = None;
            let mut now = Instant::ORIGIN;
            let mut skipped = 0u32;
            for step in 0..40_000u32 {
                now = now + Duration::from_millis(1);
                let r = next();
                // Rare operators' moves; otherwise mostly calls.
                if r % 997 == 0 {
                    let to =
                        [ManualState::MetricsOnly, ManualState::Closed][(r / 997 % 2) as usize];
                    assert_eq!(fast.force(to, now), full.force(to, now));
                    continue;
                }
                // Failure mixes that drift: some stretches fail often.
                let phase = (step / 3_000) % 4;
                let failed = next() % 100 < [5, 45, 70, 0][phase as usize];
                let took = Duration::from_millis(if next() % 100 < 20 { 20 } else { 1 });
                let outcome = CallOutcome {
                    success: !failed,
                    duration: took,
                };
                let (a, b) = (fast.request(now), full.request(now));
                assert_eq!(a, b, "request at step {step}");
                let (
                    Admission::Admitted { permit: pa, .. },
                    Admission::Admitted { permit: pb, .. },
                ) = (a, b)
                else {
                    continue;
                };
                // Now and then a permit is held back and handed in late.
                let (pa, pb) = match held.take() {
                    Some(old) if r % 5 == 0 => {
                        held = Some((pa, pb));
                        old
                    }
                    None if r % 7 == 0 => {
                        held = Some((pa, pb));
                        continue;
                    }
                    other => {
                        held = other;
                        (pa, pb)
                    }
                };
                skipped += u32::from(fast.quiet > 0);
                full.quiet = 0;
                assert_eq!(
                    fast.record(pa, outcome, now),
                    full.record(pb, outcome, now),
                    "record at step {step}"
                );
                assert_eq!(fast, full, "state after step {step}");
                assert_eq!(fast.metrics(now), full.metrics(now));
            }
            assert!(skipped > 1_000, "the quiet path ran {skipped} times");
        }
    }

    #[test]
    fn table_matches_the_documented_manual_moves() {
        use BreakerState as S;
        let forbidden = [
            (S::Closed, S::HalfOpen),
            (S::MetricsOnly, S::Open),
            (S::MetricsOnly, S::HalfOpen),
        ];
        for from in BreakerState::ALL {
            for to in [
                ManualState::Closed,
                ManualState::OpenFor(Duration::from_secs(1)),
                ManualState::OpenUntil(Instant::MAX),
                ManualState::HalfOpen,
                ManualState::ForcedOpen,
                ManualState::Disabled,
                ManualState::MetricsOnly,
            ] {
                assert_eq!(
                    from.may_be_forced_to(to),
                    !forbidden.contains(&(from, to.state())),
                    "{from} -> {to}"
                );
            }
            assert!(!from.changes_automatically_to(from));
        }
        assert!(BreakerState::HalfOpen.changes_automatically_to(BreakerState::Closed));
        assert!(!BreakerState::Closed.changes_automatically_to(BreakerState::HalfOpen));
    }
}
