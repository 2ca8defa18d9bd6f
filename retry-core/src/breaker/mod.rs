//! The [`CircuitBreaker`]: admission decisions and state changes as a pure state
//! machine, with fixed-size windows and no clock.
//!
//! This file holds the machine, its states and its answers. Beside it: the
//! configuration and its builder (`config.rs`), the errors a bad configuration is
//! refused with (`error.rs`), the count and time windows that outcomes are
//! recorded in (`window.rs`), and the scripted simulator with its printable
//! timeline (`sim.rs`).

use core::fmt;
use core::time::Duration;

use crate::Instant;

mod config;
mod error;
mod sim;
mod window;

pub use config::{BreakerConfig, BreakerConfigBuilder, Rate, Window};
pub use error::BreakerError;
pub use sim::{
    BreakerInput, BreakerOutput, BreakerRow, BreakerSimulation, BreakerStep, BreakerTimeline,
};
pub use window::WindowStats;

use window::{BucketRing, CountRing};

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
    /// [`CircuitBreaker::force`].
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
/// operator may ask for. Every manual request is legal except to the state the
/// breaker is already in; nobody can force `Open` or `HalfOpen`.
#[rustfmt::skip]
const TRANSITIONS: [[u8; 6]; 6] = [
    //               closed  open  half-open  forced-open  disabled  metrics-only
    /* closed */     [NO,     AUTO, NO,        MANUAL,      MANUAL,   MANUAL],
    /* open */       [MANUAL, NO,   AUTO,      MANUAL,      MANUAL,   MANUAL],
    /* half-open */  [BOTH,   AUTO, NO,        MANUAL,      MANUAL,   MANUAL],
    /* forced-open */[MANUAL, NO,   NO,        NO,          MANUAL,   MANUAL],
    /* disabled */   [MANUAL, NO,   NO,        MANUAL,      NO,       MANUAL],
    /* metrics-only*/[MANUAL, NO,   NO,        MANUAL,      MANUAL,   NO],
];

/// The states an operator may put a breaker in with [`CircuitBreaker::force`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ManualState {
    /// Back to automatic control, closed with a clean window.
    Closed,
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
            ManualState::ForcedOpen => BreakerState::ForcedOpen,
            ManualState::Disabled => BreakerState::Disabled,
            ManualState::MetricsOnly => BreakerState::MetricsOnly,
        }
    }
}

impl fmt::Display for ManualState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.state(), f)
    }
}

/// Why a transition happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransitionCause {
    /// The consecutive-failure rule tripped.
    ConsecutiveFailures,
    /// The failure-rate rule tripped.
    FailureRate,
    /// The slow-call-rate rule tripped.
    SlowCallRate,
    /// The open duration passed and a request arrived.
    OpenElapsed,
    /// Enough consecutive probes succeeded.
    ProbesSucceeded,
    /// A probe failed (or was slow, when the slow-call rule is on).
    ProbeFailed,
    /// An operator asked for it.
    Manual,
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
            TransitionCause::Manual => "breaker.manual",
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
            TransitionCause::Manual => "manual",
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
    /// Do not run the call. Ask again at `until` if it is set; if it is `None`
    /// the breaker will admit only after some other input (a probe's outcome or
    /// release, or an operator's [`CircuitBreaker::force`]). `until` is always
    /// after the `now` of the request. A rejection changes nothing.
    Rejected {
        /// When the breaker will next admit, if that is known.
        until: Option<Instant>,
        /// Why.
        reason: RejectReason,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Closed,
    Open { until: Instant },
    HalfOpen { in_flight: u32, successes: u32 },
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
/// # States and transitions
///
/// | from \ to | closed | open | half-open | forced-open | disabled | metrics-only |
/// |---|---|---|---|---|---|---|
/// | closed | – | auto: a rule trips | – | manual | manual | manual |
/// | open | manual | – | auto: next request after the open duration | manual | manual | manual |
/// | half-open | auto: `success_threshold` good probes; manual | auto: a probe fails | – | manual | manual | manual |
/// | forced-open | manual | – | – | – | manual | manual |
/// | disabled | manual | – | – | manual | – | manual |
/// | metrics-only | manual | – | – | manual | manual | – |
///
/// Every entry into closed or metrics-only starts with a clean window and no
/// failure streak; closing (and any manual change) restarts the growth of the
/// open duration. Outcomes are judged only when recorded: a trip happens in
/// [`record`](CircuitBreaker::record), never as time passes.
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
/// and a [`Jitter`](crate::Jitter) and takes 144 bytes on 64-bit targets), a
/// breaker with a 100-call count window (`CircuitBreaker<2, 0>`) is 64 bytes:
/// 32 for the two bit rings, 16 for the state, 16 for counters and ring cursors.
/// Each further 64 calls of capacity add 16 bytes (`CircuitBreaker<16, 0>`,
/// 1,024 calls, holds the 1,000-call windows Resilience4j users configure).
/// Capacity costs no time: judging the rates reads only the words the window in
/// use covers, so a 100-call window costs the same in any capacity, and a
/// 1,000-call one reads 16 words per ring.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Admission, BreakerConfig, CallOutcome, CircuitBreaker, Instant, BreakerState};
///
/// let config = BreakerConfig::basic(2, Duration::from_secs(5), 1)?;
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
#[derive(Clone, Debug, PartialEq)]
pub struct CircuitBreaker<const WORDS: usize = 2, const BUCKETS: usize = 0> {
    config: BreakerConfig,
    mode: Mode,
    epoch: u32,
    reopens: u32,
    consecutive_failures: u32,
    calls: CountRing<WORDS>,
    buckets: BucketRing<BUCKETS>,
}

impl<const WORDS: usize, const BUCKETS: usize> CircuitBreaker<WORDS, BUCKETS> {
    /// How many calls the count window can hold.
    pub const CALL_CAPACITY: usize = CountRing::<WORDS>::CAPACITY;
    /// How many buckets the time window can hold.
    pub const BUCKET_CAPACITY: usize = BUCKETS;

    /// A closed breaker following `config` (copied in).
    ///
    /// # Errors
    /// [`BreakerError::WindowTooLarge`] if the config's window does not fit this
    /// type's storage.
    pub fn new(config: BreakerConfig) -> Result<Self, BreakerError> {
        if let Some(calls) = config.window_calls() {
            if usize::from(calls) > Self::CALL_CAPACITY {
                return Err(BreakerError::WindowTooLarge {
                    field: "window.calls",
                    requested: u32::from(calls),
                    capacity: Self::CALL_CAPACITY,
                });
            }
        }
        if let Some((_, buckets)) = config.bucket_shape() {
            if usize::from(buckets) > BUCKETS {
                return Err(BreakerError::WindowTooLarge {
                    field: "window.buckets",
                    requested: u32::from(buckets),
                    capacity: BUCKETS,
                });
            }
        }
        Ok(CircuitBreaker {
            config,
            mode: Mode::Closed,
            epoch: 0,
            reopens: 0,
            consecutive_failures: 0,
            calls: CountRing::new(),
            buckets: BucketRing::new(),
        })
    }

    // ----- getters -----

    /// The config the breaker follows.
    #[must_use]
    pub const fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The current state. An open breaker whose open duration has passed still
    /// says `Open` until the next [`request`](CircuitBreaker::request).
    #[must_use]
    pub const fn state(&self) -> BreakerState {
        match self.mode {
            Mode::Closed => BreakerState::Closed,
            Mode::Open { .. } => BreakerState::Open,
            Mode::HalfOpen { .. } => BreakerState::HalfOpen,
            Mode::ForcedOpen => BreakerState::ForcedOpen,
            Mode::Disabled => BreakerState::Disabled,
            Mode::MetricsOnly => BreakerState::MetricsOnly,
        }
    }

    /// When an open breaker will next admit (`None` unless open).
    #[must_use]
    pub const fn open_until(&self) -> Option<Instant> {
        match self.mode {
            Mode::Open { until } => Some(until),
            _ => None,
        }
    }

    /// How many times in a row the breaker has opened since it last closed.
    #[must_use]
    pub const fn reopens(&self) -> u32 {
        self.reopens
    }

    /// The current epoch: bumped each time the breaker opens or is forced open.
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

    /// Probes in flight (zero unless half-open).
    #[must_use]
    pub const fn probes_in_flight(&self) -> u32 {
        match self.mode {
            Mode::HalfOpen { in_flight, .. } => in_flight,
            _ => 0,
        }
    }

    /// Consecutive successful probes so far (zero unless half-open).
    #[must_use]
    pub const fn probe_successes(&self) -> u32 {
        match self.mode {
            Mode::HalfOpen { successes, .. } => successes,
            _ => 0,
        }
    }

    /// What the window holds as seen at `now` (a time window drops old buckets
    /// as time passes; a count window ignores `now`). All zero without a window.
    #[must_use]
    pub fn stats(&self, now: Instant) -> WindowStats {
        if self.config.window_calls().is_some() {
            return self.calls.stats();
        }
        match self.config.bucket_shape() {
            Some((nanos, buckets)) => self.buckets.stats(now, nanos, buckets),
            None => WindowStats::default(),
        }
    }

    // ----- inputs -----

    /// Asks whether a call may run at `now`.
    ///
    /// Closed, disabled and metrics-only admit. Open rejects until its open
    /// duration has passed; the first request after that moves the breaker to
    /// half-open (reported in the admission) and is the first probe. Half-open
    /// admits up to `half_open_permits` probes at a time. Forced-open rejects.
    ///
    /// The driver must run the call only if admitted, and then hand the permit back
    /// with [`record`](CircuitBreaker::record) or
    /// [`release`](CircuitBreaker::release).
    pub fn request(&mut self, now: Instant) -> Admission {
        match self.mode {
            Mode::Closed | Mode::Disabled | Mode::MetricsOnly => Admission::Admitted {
                permit: self.permit(false),
                transition: None,
            },
            Mode::ForcedOpen => Admission::Rejected {
                until: None,
                reason: RejectReason::ForcedOpen,
            },
            Mode::Open { until } if now < until => Admission::Rejected {
                until: Some(until),
                reason: RejectReason::Open,
            },
            Mode::Open { .. } => {
                let transition = self.enter(
                    Mode::HalfOpen {
                        in_flight: 1,
                        successes: 0,
                    },
                    now,
                    TransitionCause::OpenElapsed,
                );
                Admission::Admitted {
                    permit: self.permit(true),
                    transition: Some(transition),
                }
            }
            Mode::HalfOpen {
                in_flight,
                successes,
            } => {
                if in_flight < self.config.half_open_permits() {
                    self.mode = Mode::HalfOpen {
                        in_flight: in_flight.saturating_add(1),
                        successes,
                    };
                    Admission::Admitted {
                        permit: self.permit(true),
                        transition: None,
                    }
                } else {
                    Admission::Rejected {
                        until: None,
                        reason: RejectReason::ProbesBusy,
                    }
                }
            }
        }
    }

    /// Hands back `permit` with the outcome of its call, at `now`. Returns the
    /// state change it caused, if any; the driver reports it.
    ///
    /// Closed: the outcome enters the window and the failure streak, then the trip
    /// rules are judged (consecutive failures first, then the failure rate, then
    /// the slow-call rate, rates only once the window holds `minimum_calls`).
    /// Half-open: a failed probe (or a slow one, when the slow-call rule is on)
    /// re-opens the breaker; `success_threshold` good probes in a row close it.
    /// Metrics-only records without judging; open, forced-open and disabled record
    /// nothing. Late permits: see the type's docs.
    #[must_use = "a transition must be reported"]
    pub fn record(
        &mut self,
        permit: Permit,
        outcome: CallOutcome,
        now: Instant,
    ) -> Option<Transition> {
        let late = permit.epoch != self.epoch;
        let failed = !outcome.success;
        let slow = outcome.duration > self.config.slow_call_duration();
        match self.mode {
            Mode::Open { .. } | Mode::ForcedOpen | Mode::Disabled => None,
            Mode::MetricsOnly => {
                self.push(failed, slow, now, late);
                None
            }
            Mode::Closed => {
                self.push(failed, slow, now, late);
                if late {
                    return None;
                }
                let cause = self.trip_cause(now)?;
                Some(self.open(now, cause))
            }
            Mode::HalfOpen {
                in_flight,
                successes,
            } => {
                if late || !permit.probe {
                    return None;
                }
                let bad = failed || (slow && self.config.slow_call_rate().is_some());
                if bad {
                    return Some(self.open(now, TransitionCause::ProbeFailed));
                }
                let successes = successes.saturating_add(1);
                if successes >= self.config.success_threshold() {
                    return Some(self.close(Mode::Closed, now, TransitionCause::ProbesSucceeded));
                }
                self.mode = Mode::HalfOpen {
                    in_flight: in_flight.saturating_sub(1),
                    successes,
                };
                None
            }
        }
    }

    /// Hands back `permit` for a call that never ran (cancelled before it
    /// started, say). Nothing is recorded; a half-open probe frees its slot. A
    /// release never changes the state, so it returns nothing; `now` is taken for
    /// symmetry with the other inputs.
    pub fn release(&mut self, permit: Permit, now: Instant) {
        let _ = now;
        if permit.epoch != self.epoch || !permit.probe {
            return;
        }
        if let Mode::HalfOpen {
            in_flight,
            successes,
        } = self.mode
        {
            self.mode = Mode::HalfOpen {
                in_flight: in_flight.saturating_sub(1),
                successes,
            };
        }
    }

    /// An operator moves the breaker to `target` at `now`.
    ///
    /// Forced-open bumps the epoch, so every permit in flight becomes late.
    /// Closed and metrics-only start with a clean window. Every manual change
    /// restarts the growth of the open duration.
    ///
    /// # Errors
    /// [`BreakerError::IllegalTransition`] when the table forbids it (a request
    /// for the state the breaker is already in); nothing changes.
    pub fn force(&mut self, target: ManualState, now: Instant) -> Result<Transition, BreakerError> {
        let from = self.state();
        if !from.may_be_forced_to(target) {
            return Err(BreakerError::IllegalTransition {
                from,
                to: target.state(),
            });
        }
        let cause = TransitionCause::Manual;
        self.reopens = 0;
        Ok(match target {
            ManualState::Closed => self.close(Mode::Closed, now, cause),
            ManualState::MetricsOnly => self.close(Mode::MetricsOnly, now, cause),
            ManualState::Disabled => self.enter(Mode::Disabled, now, cause),
            ManualState::ForcedOpen => {
                self.epoch = self.epoch.wrapping_add(1);
                self.enter(Mode::ForcedOpen, now, cause)
            }
        })
    }

    // ----- internals -----

    fn permit(&self, probe: bool) -> Permit {
        Permit {
            epoch: self.epoch,
            probe,
        }
    }

    fn enter(&mut self, mode: Mode, now: Instant, cause: TransitionCause) -> Transition {
        let from = self.state();
        self.mode = mode;
        Transition {
            from,
            to: self.state(),
            at: now,
            cause,
        }
    }

    /// Records one outcome in the window, and in the streak unless late.
    fn push(&mut self, failed: bool, slow: bool, now: Instant, late: bool) {
        if let Some(calls) = self.config.window_calls() {
            self.calls.push(calls, failed, slow);
        } else if let Some((nanos, buckets)) = self.config.bucket_shape() {
            self.buckets.push(now, nanos, buckets, failed, slow);
        }
        if !late {
            self.consecutive_failures = if failed {
                self.consecutive_failures.saturating_add(1)
            } else {
                0
            };
        }
    }

    fn trip_cause(&self, now: Instant) -> Option<TransitionCause> {
        let config = &self.config;
        if config
            .failure_threshold()
            .is_some_and(|n| self.consecutive_failures >= n)
        {
            return Some(TransitionCause::ConsecutiveFailures);
        }
        let stats = self.stats(now);
        if stats.calls < config.minimum_calls() {
            return None;
        }
        if config
            .failure_rate()
            .is_some_and(|r| r.is_reached(stats.failures, stats.calls))
        {
            return Some(TransitionCause::FailureRate);
        }
        if config
            .slow_call_rate()
            .is_some_and(|r| r.is_reached(stats.slow, stats.calls))
        {
            return Some(TransitionCause::SlowCallRate);
        }
        None
    }

    fn open(&mut self, now: Instant, cause: TransitionCause) -> Transition {
        self.reopens = self.reopens.saturating_add(1);
        self.epoch = self.epoch.wrapping_add(1);
        self.consecutive_failures = 0;
        let until = now.saturating_add(self.config.open_duration(self.reopens));
        self.enter(Mode::Open { until }, now, cause)
    }

    /// Enters closed or metrics-only with a clean window.
    fn close(&mut self, mode: Mode, now: Instant, cause: TransitionCause) -> Transition {
        self.reopens = 0;
        self.consecutive_failures = 0;
        self.calls = CountRing::new();
        self.buckets = BucketRing::new();
        self.enter(mode, now, cause)
    }
}

impl<const WORDS: usize, const BUCKETS: usize> fmt::Display for CircuitBreaker<WORDS, BUCKETS> {
    /// The state, with when an open breaker admits again.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            Mode::Open { until } => write!(f, "open until {until}"),
            Mode::HalfOpen {
                in_flight,
                successes,
            } => write!(f, "half-open ({in_flight} probing, {successes} good)"),
            _ => fmt::Display::fmt(&self.state(), f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent_with_manual_states() {
        for from in BreakerState::ALL {
            for to in [
                ManualState::Closed,
                ManualState::ForcedOpen,
                ManualState::Disabled,
                ManualState::MetricsOnly,
            ] {
                assert_eq!(
                    from.may_be_forced_to(to),
                    from != to.state(),
                    "{from} -> {to}"
                );
            }
            assert!(!from.changes_automatically_to(from));
        }
        assert!(BreakerState::HalfOpen.changes_automatically_to(BreakerState::Closed));
        assert!(!BreakerState::Closed.changes_automatically_to(BreakerState::HalfOpen));
    }
}
