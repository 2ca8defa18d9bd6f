//! A circuit breaker shared by many calls: what a driver asks of one
//! ([`Breaker`]), the in-process one ([`SharedBreaker`]), and the permit an
//! admitted attempt holds until it ends ([`PermitGuard`]).

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Instant;

use retry_core::{
    breaker_outcome, rejection, AbandonedRule, Admission, BreakerConfig, BreakerError,
    BreakerMetrics, BreakerSnapshot, BreakerState, CallOutcome, CircuitBreaker, ClosedPath, Event,
    Exceeded, ManualState, Permit, Recorded, SnapshotError, Transition, Trip, Untimed,
};

use crate::observe;
use crate::saved::Saved;
use crate::time::{since, Clock, Origin};

/// What a driver asks of a circuit breaker: may an attempt start, and how did it
/// end. [`SharedBreaker`] implements it; a breaker kept elsewhere (one shared by
/// a fleet through a store, say) implements it to plug into both adapters and the
/// tower layers.
///
/// Every permit handed out by [`request`](Breaker::request) comes back exactly
/// once, through [`record`](Breaker::record) or [`release`](Breaker::release);
/// [`PermitGuard`] makes sure of it, even when the attempt panics or is dropped.
/// Implementations must not block for long (they are called from async tasks)
/// and must report their own state changes.
pub trait Breaker: Send + Sync + fmt::Debug {
    /// Asks whether an attempt may start now. The breaker reads `clock` only if
    /// its answer depends on the time (an open or half-open breaker, a time
    /// window); a closed one with a count window answers without it.
    fn request(&self, clock: &dyn Clock) -> Gate;

    /// Hands `permit` back with its attempt's `outcome`. The breaker reads
    /// `clock` only if what it records or decides depends on the time. When
    /// [`times_calls`](Breaker::times_calls) is false the caller may pass an
    /// unmeasured duration (`Duration::ZERO`).
    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock);

    /// Hands `permit` back without recording anything: the attempt never ran, or
    /// was abandoned before anything was learnt from it. A half-open probe frees
    /// its slot. The breaker reads `clock` only if it needs the time.
    fn release(&self, permit: Permit, clock: &dyn Clock);

    /// Attempts running longer than this count as slow. An attempt abandoned past
    /// it is recorded as a failure (see [`retry_core::abandoned_outcome`]).
    fn slow_call_duration(&self) -> Duration;

    /// Whether an outcome's duration can change what the breaker records or
    /// decides (a slow-call rule, a time window, a histogram of call
    /// durations). When false, callers need not measure their attempts: an
    /// outcome's duration may be `Duration::ZERO`, read as not slow. The
    /// answer must not change over the breaker's life: callers may ask once
    /// and keep it (the adapters' settings do).
    fn times_calls(&self) -> bool;

    /// How an abandoned attempt counts (see [`AbandonedRule`]): by default the
    /// core's rule, [`AbandonedRule::FailureIfSlow`]. A caller chooses another
    /// by handing out the breaker through [`WithAbandonedRule`].
    fn abandoned_rule(&self) -> AbandonedRule {
        AbandonedRule::FailureIfSlow
    }
}

impl<B: Breaker + ?Sized> Breaker for &B {
    #[inline]
    fn request(&self, clock: &dyn Clock) -> Gate {
        (**self).request(clock)
    }
    // Inlined wherever the breaker's own is (a shared breaker's closed path).
    #[inline(always)]
    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        (**self).record(permit, outcome, clock);
    }
    fn release(&self, permit: Permit, clock: &dyn Clock) {
        (**self).release(permit, clock);
    }
    fn slow_call_duration(&self) -> Duration {
        (**self).slow_call_duration()
    }
    fn times_calls(&self) -> bool {
        (**self).times_calls()
    }
    fn abandoned_rule(&self) -> AbandonedRule {
        (**self).abandoned_rule()
    }
}

impl<B: Breaker + ?Sized> Breaker for Arc<B> {
    #[inline]
    fn request(&self, clock: &dyn Clock) -> Gate {
        (**self).request(clock)
    }
    // Inlined wherever the breaker's own is (a shared breaker's closed path).
    #[inline(always)]
    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        (**self).record(permit, outcome, clock);
    }
    fn release(&self, permit: Permit, clock: &dyn Clock) {
        (**self).release(permit, clock);
    }
    fn slow_call_duration(&self) -> Duration {
        (**self).slow_call_duration()
    }
    fn times_calls(&self) -> bool {
        (**self).times_calls()
    }
    fn abandoned_rule(&self) -> AbandonedRule {
        (**self).abandoned_rule()
    }
}

/// A breaker handed out with another [`AbandonedRule`]: everything is asked of
/// `B`, except how an abandoned attempt counts. What a `Retry`'s or a
/// `BreakerLayer`'s `abandoned(rule)` wraps its breaker in (so that the
/// default costs the hot path nothing). Clones of the inner breaker share its
/// state; the rule belongs to this handle.
///
/// ```
/// use retry_core::{AbandonedRule, BreakerConfig};
/// use retry_shared::{Breaker, SharedBreaker, WithAbandonedRule};
///
/// let breaker = SharedBreaker::new(BreakerConfig::default())?;
/// let counted = WithAbandonedRule::new(breaker.clone(), AbandonedRule::Failure);
/// assert_eq!(counted.abandoned_rule(), AbandonedRule::Failure);
/// assert_eq!(breaker.abandoned_rule(), AbandonedRule::FailureIfSlow);
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Clone, Debug)]
pub struct WithAbandonedRule<B> {
    breaker: B,
    rule: AbandonedRule,
}

impl<B: Breaker> WithAbandonedRule<B> {
    /// `breaker`, counting an abandoned attempt under `rule`.
    #[must_use]
    pub const fn new(breaker: B, rule: AbandonedRule) -> Self {
        WithAbandonedRule { breaker, rule }
    }

    /// The breaker asked for everything else.
    #[must_use]
    pub const fn breaker(&self) -> &B {
        &self.breaker
    }
}

impl<B: Breaker> Breaker for WithAbandonedRule<B> {
    fn request(&self, clock: &dyn Clock) -> Gate {
        self.breaker.request(clock)
    }
    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        self.breaker.record(permit, outcome, clock);
    }
    fn release(&self, permit: Permit, clock: &dyn Clock) {
        self.breaker.release(permit, clock);
    }
    fn slow_call_duration(&self) -> Duration {
        self.breaker.slow_call_duration()
    }
    fn times_calls(&self) -> bool {
        self.breaker.times_calls()
    }
    fn abandoned_rule(&self) -> AbandonedRule {
        self.rule
    }
}

/// The time a caller already knows, or else its clock's reading when asked.
pub(crate) struct Reading<'a, C: ?Sized> {
    clock: &'a C,
    now: Option<Instant>,
}

impl<'a, C: Clock + ?Sized> Reading<'a, C> {
    /// Reads `clock` when asked, unless `now` is already known.
    pub(crate) fn new(clock: &'a C, now: Option<Instant>) -> Self {
        Reading { clock, now }
    }
}

impl<C: Clock + ?Sized> Clock for Reading<'_, C> {
    #[inline]
    fn now(&self) -> Instant {
        match self.now {
            Some(now) => now,
            None => self.clock.now(),
        }
    }
}

/// A breaker's answer to [`Breaker::request`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an admitted permit must be handed back"]
pub enum Gate {
    /// The attempt may run; hand the permit back when it ends.
    Admitted(Permit),
    /// The attempt must not run; the breaker admits again at `until`, if known.
    Rejected {
        /// When the breaker admits again, if it can tell.
        until: Option<Instant>,
    },
}

/// A hook told about every state change of a shared breaker.
type TransitionHook = dyn Fn(&Transition) + Send + Sync;

/// A [`CircuitBreaker`] shared by every call holding a clone, from blocking
/// threads and async tasks alike: asked before every attempt, told every outcome.
/// While it is open, attempts are not run: a call gives up with
/// `retry.circuit_open`, or waits until the breaker admits again if its policy
/// says `on_circuit_open(CircuitOpen::Wait)`.
///
/// Clones share one breaker. While it is closed with a count window (or none)
/// and no slow-call rule, calls are admitted and their outcomes recorded
/// without a lock and without reading the clock: the closed state lives in
/// atomics ([`retry_core::ClosedPath`]), and decides exactly as the sequential
/// machine when calls do not overlap (see its notes for what overlapping calls
/// may reorder). Each thread keeps its outcomes on a stripe of its own
/// while the window is full and far from tripping (failures only as many as
/// could not make a rule stand, however they fell), so threads sharing a
/// busy breaker seldom write a cache line in common; the outcomes kept are
/// counted in, in the order the calls were made, by the next outcome that
/// must be judged, under the closed path's short fold lock. Everything else
/// (open, half-open, time windows, slow-call rules, the trip itself,
/// operators' moves) goes to the
/// [`CircuitBreaker`] behind a `std::sync::Mutex`, held only for the core call,
/// never across an `.await` or while an operation runs; it is the one source of
/// state changes, each reported once. Time is `std::time::Instant`, read only
/// when a decision needs it; the breaker keeps its own time origin, set by the
/// first use that reads the time, so calls that start at different moments
/// agree on its clock.
/// Its state changes go to the hook set with [`on_transition`](Self::on_transition)
/// and, with the `tracing` and `metrics` features, to traces and metrics.
///
/// [`SharedBreaker::new`] holds a count window of up to 1,024 calls (a
/// `CircuitBreaker<16, 0>`, 480 bytes behind its `Arc` on 64-bit targets,
/// beside the closed path's 16 stripes of 512 bytes, one per thread), so
/// every count window a Resilience4j user configures (up to 1,000 calls) fits
/// and the type needs no annotation. The capacity costs no time: a 100-call
/// window costs what it costs in the core's 128-call breaker. Another capacity
/// is a type chosen at compile time:
/// `SharedBreaker<WORDS, BUCKETS>` holds `WORDS × 64` calls and `BUCKETS` time
/// buckets (built with [`SharedBreaker::with_capacity`]); a `WORDS` past what
/// a window's `u16` call count can index is a compile-time error, and a config
/// whose window does not fit the chosen capacity is refused with a typed error.
/// `SharedBreaker<WORDS, BUCKETS, DURATIONS>` also keeps the durations of up
/// to `DURATIONS` calls (0 unless named), so that a count window of at most
/// that many calls reports their total and mean in
/// [`SharedBreaker::metrics`] (a time window always does): 8 bytes a call,
/// and every outcome of such a breaker is timed and goes through its lock
/// (the lock-free closed path keeps no durations).
///
/// The breaker times its calls ([`Breaker::times_calls`]) when an outcome's
/// duration can change a decision (a time window, a slow-call rule), with the
/// `metrics` feature (which reports call durations), and when the config names
/// a slow-call duration of its own: one other than the default 60 s and short
/// of `Duration::MAX` (an explicit 60 s cannot be told from the default). A
/// breaker that does not time calls lets a call through without a clock read.
///
/// # Automatic transitions
/// Off by default, as in Resilience4j: the breaker moves on its own (open to
/// half-open, the half-open maximum wait's decision) when the first call finds
/// the time passed, so a quiet service's dashboard reads "open" until its
/// next call. `retry_tokio::automatic_transitions(&breaker)` (a task) and
/// `retry_std::automatic_transitions(&breaker)` (one timer thread shared by
/// every breaker that asks) move it at the instant itself, with no call, and
/// report the move like any other; [`SharedBreaker::alarm`] hands the
/// breaker to any other timer. Either way the calls' path is unchanged: the
/// timer is told only of state changes.
///
/// # Abandoned attempts
/// An attempt whose driver stops waiting for it (the operation panicked, the
/// attempt's future was dropped by an outer timeout, a `select!` or a task abort,
/// or the call was cancelled mid-attempt) never leaks its permit. If it ran longer
/// than the config's slow-call duration, or reached its own deadline, it is
/// recorded as a failure of the time it ran; otherwise the permit is released
/// without recording anything, and a half-open probe frees its slot
/// ([`retry_core::abandoned_outcome`] decides). How long it ran is known from
/// its start, taken when the attempt starts if the breaker times calls, and
/// otherwise when the attempt first waits ([`PermitGuard::waited`]: for an async
/// attempt, its first pending poll, so the time measured misses at most that
/// poll). An abandoned attempt with no start (a blocking attempt that panics
/// under a breaker that does not time calls) is judged by its deadline if it
/// has one, and otherwise released.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BasicRule, BreakerConfig, BreakerState};
/// use retry_shared::SharedBreaker;
///
/// // Open after 3 consecutive failures, half-open after 5 s, closed after 1 success.
/// let breaker = SharedBreaker::new(BreakerConfig::basic(BasicRule {
///     failure_threshold: 3,
///     open_duration: Duration::from_secs(5),
///     success_threshold: 1,
/// })?)?;
/// let for_another_thread = breaker.clone();
/// assert_eq!(for_another_thread.state(), BreakerState::Closed);
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Clone)]
pub struct SharedBreaker<
    const WORDS: usize = 16,
    const BUCKETS: usize = 0,
    const DURATIONS: usize = 0,
> {
    inner: Arc<Inner<WORDS, BUCKETS, DURATIONS>>,
    /// The config's slow-call duration (a config never changes once shared).
    slow_call_duration: Duration,
    /// Whether outcomes' durations matter (see [`Breaker::times_calls`]).
    times_calls: bool,
    on_transition: Option<Arc<TransitionHook>>,
}

struct Inner<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> {
    /// The closed state while it is handed out: admits and records without
    /// the lock or a clock.
    path: ClosedPath<WORDS>,
    cell: Mutex<BreakerCell<WORDS, BUCKETS, DURATIONS>>,
    /// With automatic transitions on, what tells the timer to read the next
    /// deadline again: called after every transition, by every clone (only
    /// then, so the calls that change nothing never touch it).
    rearm: OnceLock<Box<Rearm>>,
}

/// What a timer is told after a transition: look at the next deadline again.
type Rearm = dyn Fn() + Send + Sync;

struct BreakerCell<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> {
    breaker: CircuitBreaker<WORDS, BUCKETS, DURATIONS>,
    origin: Origin,
}

impl SharedBreaker {
    /// A closed breaker following `config`, with room for a count window of up
    /// to 1,024 calls.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BasicRule, BreakerConfig, Rate};
    /// use retry_shared::SharedBreaker;
    ///
    /// // Resilience4j's defaults: 50 % of the last 100 calls.
    /// let config = BreakerConfig::builder()
    ///     .failure_rate(Rate::from_percent(50))
    ///     .count_window(100)
    ///     .minimum_calls(100)
    ///     .open_duration(Duration::from_secs(60))
    ///     .build()?;
    /// let breaker = SharedBreaker::new(config)?;
    /// # let _ = breaker;
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    ///
    /// # Errors
    /// [`BreakerError::WindowTooLarge`](retry_core::BreakerError::WindowTooLarge)
    /// when the config's window does not fit (more than 1,024 calls, or a time
    /// window: use [`SharedBreaker::with_capacity`] for those).
    pub fn new(config: BreakerConfig) -> Result<SharedBreaker, BreakerError> {
        SharedBreaker::with_capacity(config)
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    SharedBreaker<WORDS, BUCKETS, DURATIONS>
{
    /// A closed breaker following `config`, with the capacity the type names:
    /// `WORDS × 64` calls of count window, `BUCKETS` buckets of time window,
    /// and the durations of `DURATIONS` calls.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BasicRule, BreakerConfig, Rate};
    /// use retry_shared::SharedBreaker;
    ///
    /// // The last 60 seconds in one-second buckets.
    /// let config = BreakerConfig::builder()
    ///     .failure_rate(Rate::from_percent(50))
    ///     .time_window(Duration::from_secs(60), 60)
    ///     .build()?;
    /// let breaker = SharedBreaker::<0, 60>::with_capacity(config)?;
    /// # let _ = breaker;
    /// // The last 100 calls, with their total and mean duration.
    /// let config = BreakerConfig::builder().count_window(100).build()?;
    /// let breaker = SharedBreaker::<2, 0, 100>::with_capacity(config)?;
    /// assert_eq!(breaker.metrics().call_duration_total, Some(Duration::ZERO));
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    ///
    /// # Errors
    /// [`BreakerError::WindowTooLarge`](retry_core::BreakerError::WindowTooLarge)
    /// when the config's window does not fit.
    pub fn with_capacity(config: BreakerConfig) -> Result<Self, BreakerError> {
        const {
            assert!(
                WORDS <= 1023,
                "a count window holds at most 65,472 calls (1,023 words of 64)"
            );
        }
        Ok(SharedBreaker::from_breaker(CircuitBreaker::new(config)?))
    }

    /// Shares an existing breaker (one started in another state with
    /// [`CircuitBreaker::starting_in`], or restored with
    /// [`CircuitBreaker::restore`]). Its clock starts at its first use: a
    /// restored breaker's instants are read as time since then (use
    /// [`SharedBreaker::restore`] to resume one saved with
    /// [`SharedBreaker::save`] where it left off).
    #[must_use]
    pub fn from_breaker(breaker: CircuitBreaker<WORDS, BUCKETS, DURATIONS>) -> Self {
        SharedBreaker::with_origin(breaker, Origin::default())
    }

    fn with_origin(breaker: CircuitBreaker<WORDS, BUCKETS, DURATIONS>, origin: Origin) -> Self {
        let path = breaker.closed_path();
        SharedBreaker {
            slow_call_duration: breaker.config().slow_call_duration(),
            times_calls: !path.is_untimed()
                || cfg!(feature = "metrics")
                || sets_slow_call_duration(breaker.config()),
            inner: Arc::new(Inner {
                path,
                cell: Mutex::new(BreakerCell { breaker, origin }),
                rearm: OnceLock::new(),
            }),
            on_transition: None,
        }
    }

    /// The breaker's state now, read from the system clock, as a [`Saved`]
    /// snapshot ([`SharedBreaker::save_at`] with `Instant::now()`).
    #[must_use]
    pub fn save(&self) -> Saved<BreakerSnapshot<WORDS, BUCKETS, DURATIONS>> {
        self.save_at(Instant::now())
    }

    /// The breaker's state at `now` as a [`Saved`] snapshot: what
    /// [`SharedBreaker::restore`] resumes from, here or in another process.
    #[must_use]
    pub fn save_at(&self, now: Instant) -> Saved<BreakerSnapshot<WORDS, BUCKETS, DURATIONS>> {
        let mut cell = self.lock();
        let at = cell.origin.at(now);
        Saved {
            snapshot: cell.breaker.view(&self.inner.path).snapshot(),
            at,
        }
    }

    /// A shared breaker resumed now, read from the system clock, from `saved`
    /// ([`SharedBreaker::restore_at`] with `Instant::now()`).
    ///
    /// # Errors
    /// As [`SharedBreaker::restore_at`].
    pub fn restore(
        saved: &Saved<BreakerSnapshot<WORDS, BUCKETS, DURATIONS>>,
    ) -> Result<Self, SnapshotError> {
        SharedBreaker::restore_at(saved, Instant::now())
    }

    /// A shared breaker resumed at `now` from `saved`: checked and rebuilt by
    /// [`CircuitBreaker::restore`], with its clock set so that the moment it was
    /// saved is `now` (an open breaker stays open for what was left of its
    /// period). Permits handed out before the save are not part of it.
    ///
    /// # Errors
    /// The [`SnapshotError`] naming the field a corrupt or inconsistent snapshot
    /// gets wrong.
    pub fn restore_at(
        saved: &Saved<BreakerSnapshot<WORDS, BUCKETS, DURATIONS>>,
        now: Instant,
    ) -> Result<Self, SnapshotError> {
        let breaker = CircuitBreaker::restore(&saved.snapshot)?;
        Ok(SharedBreaker::with_origin(
            breaker,
            Origin::resumed(saved.at, now),
        ))
    }

    /// Calls `hook` with every state change made through this handle and the
    /// clones made from it afterwards (for logs and metrics). The hook runs after
    /// the lock is released.
    #[must_use]
    pub fn on_transition(mut self, hook: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_transition = Some(Arc::new(hook));
        self
    }

    /// The state as of the latest request or outcome.
    #[must_use]
    pub fn state(&self) -> BreakerState {
        self.lock().breaker.state()
    }

    /// A copy of the breaker as it stands (its counters, window and config).
    #[must_use]
    pub fn snapshot(&self) -> CircuitBreaker<WORDS, BUCKETS, DURATIONS> {
        self.lock().breaker.view(&self.inner.path)
    }

    /// What a dashboard shows now, read from the system clock
    /// ([`SharedBreaker::metrics_at`] with `Instant::now()`; under tokio's paused
    /// test clock pass `tokio::time::Instant::now().into_std()` to `metrics_at`).
    #[must_use]
    pub fn metrics(&self) -> BreakerMetrics {
        self.metrics_at(Instant::now())
    }

    /// What a dashboard shows at `now` (see [`CircuitBreaker::metrics`]): the
    /// state, the window's rates (or that there are not enough calls yet to
    /// judge them), slow successes and slow failures, the rejected calls.
    #[must_use]
    pub fn metrics_at(&self, now: Instant) -> BreakerMetrics {
        let mut cell = self.lock();
        let at = cell.origin.at(now);
        cell.breaker.view(&self.inner.path).metrics(at)
    }

    /// An operator moves the breaker to `target` now, read from the system
    /// clock ([`SharedBreaker::force_at`] with `Instant::now()`).
    ///
    /// # Errors
    /// As [`SharedBreaker::force_at`].
    pub fn force(&self, target: ManualState) -> Result<Transition, BreakerError> {
        self.force_at(target, Instant::now())
    }

    /// An operator moves the breaker to `target` at `now`, re-entering the state
    /// it is already in (an open period starts afresh, a closed window is
    /// cleaned); see [`CircuitBreaker::force`]. The transition is reported like
    /// any other. An async caller passes `tokio::time::Instant::now().into_std()`.
    ///
    /// # Errors
    /// [`BreakerError`] for a move the breaker's table forbids (closed to
    /// half-open, metrics-only to open or half-open), or an open period that is
    /// empty or already over; the breaker is unchanged.
    pub fn force_at(&self, target: ManualState, now: Instant) -> Result<Transition, BreakerError> {
        let transition = {
            self.change(|cell| {
                let at = cell.origin.at(now);
                cell.breaker.force(target, at)
            })?
        };
        self.tell(Some(transition));
        Ok(transition)
    }

    /// An operator asks for `target` now, read from the system clock
    /// ([`SharedBreaker::ensure_at`] with `Instant::now()`).
    ///
    /// # Errors
    /// As [`SharedBreaker::force_at`].
    pub fn ensure(&self, target: ManualState) -> Result<Option<Transition>, BreakerError> {
        self.ensure_at(target, Instant::now())
    }

    /// An operator asks for `target` at `now`, leaving a breaker already in that
    /// state alone (`Ok(None)`); see [`CircuitBreaker::ensure`].
    ///
    /// # Errors
    /// As [`SharedBreaker::force`].
    pub fn ensure_at(
        &self,
        target: ManualState,
        now: Instant,
    ) -> Result<Option<Transition>, BreakerError> {
        let transition = {
            self.change(|cell| {
                let at = cell.origin.at(now);
                cell.breaker.ensure(target, at)
            })?
        };
        self.tell(transition);
        Ok(transition)
    }

    /// An operator resets the breaker now, read from the system clock
    /// ([`SharedBreaker::reset_at`] with `Instant::now()`).
    pub fn reset(&self) -> Transition {
        self.reset_at(Instant::now())
    }

    /// An operator resets the breaker at `now`: closed with a clean window, from
    /// any state (see [`CircuitBreaker::reset`]). Reported as a transition with
    /// the cause `breaker.reset`, and with the `tracing` feature as a reset
    /// event.
    pub fn reset_at(&self, now: Instant) -> Transition {
        let transition = {
            self.change(|cell| {
                let at = cell.origin.at(now);
                cell.breaker.reset(at)
            })
        };
        self.tell(Some(transition));
        transition
    }

    /// The next instant at which the breaker changes state on its own, with no
    /// call: the end of the open period, or of the half-open maximum wait
    /// ([`CircuitBreaker::next_deadline`]), on the system clock's scale
    /// (`std::time::Instant`, as the adapters' clocks give it, tokio's paused
    /// clock included). `None` in the other states, and before the breaker's
    /// first use has fixed its clock.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        next_deadline(&self.lock())
    }

    /// Applies the passage of time now, read from the system clock
    /// ([`SharedBreaker::wake_at`] with `Instant::now()`).
    pub fn wake(&self) -> Option<Transition> {
        self.wake_at(Instant::now())
    }

    /// Applies the passage of time at `now`, with no call: the move the
    /// breaker makes on its own once its [`next_deadline`](Self::next_deadline)
    /// has passed (open to half-open; the half-open maximum wait's decision),
    /// reported as the first call at `now` would report it: to the hook set
    /// with [`on_transition`](Self::on_transition), and with the `tracing` and
    /// `metrics` features to traces and `circuit_breaker.state_change.total`.
    /// Before that instant, or in any other state, it does nothing (`None`).
    /// A timer calls it; the adapters run one for a breaker that asks
    /// (`retry_tokio::automatic_transitions`, `retry_std::automatic_transitions`).
    pub fn wake_at(&self, now: Instant) -> Option<Transition> {
        let transition = wake_at(&self.inner, now);
        self.tell(transition);
        transition
    }

    /// Turns automatic transitions on, for a timer the caller runs: the
    /// breaker's clock is fixed at `now` if no use has fixed it yet, and
    /// `rearm` is called after every transition of the breaker, made through
    /// any clone (a call's outcome, an operator, the timer itself), so that
    /// the timer reads [`BreakerAlarm::next`] again. The answer is what the
    /// timer holds: the breaker's next deadline and the wake it makes then,
    /// reported through this handle's [`on_transition`](Self::on_transition)
    /// hook; it does not keep the breaker alive (once every clone is dropped
    /// it reads [`Alarm::Gone`], and the timer stops).
    ///
    /// The adapters call it (`retry_tokio::automatic_transitions` spawns a
    /// task, `retry_std::automatic_transitions` hands the breaker to one
    /// timer thread shared by every breaker that asks); call it for another
    /// runtime's timer. Off by default, as Resilience4j's
    /// `automaticTransitionFromOpenToHalfOpenEnabled`: without it the breaker
    /// moves on its own only when a call finds the time passed.
    ///
    /// The alarm holds this handle's hook: a hook that holds a clone of the
    /// breaker keeps the breaker alive as long as the timer runs.
    ///
    /// # Errors
    /// [`AlreadyTimed`] if automatic transitions are on already for this
    /// breaker (through any clone): one timer is enough.
    pub fn alarm(
        &self,
        now: Instant,
        rearm: impl Fn() + Send + Sync + 'static,
    ) -> Result<BreakerAlarm, AlreadyTimed> {
        self.inner
            .rearm
            .set(Box::new(rearm))
            .map_err(|_| AlreadyTimed)?;
        let _ = self.lock().origin.at(now);
        let inner: Arc<dyn Timed> = Arc::clone(&self.inner) as Arc<dyn Timed>;
        Ok(BreakerAlarm {
            breaker: Arc::downgrade(&inner),
            on_transition: self.on_transition.clone(),
        })
    }

    fn tell(&self, transition: Option<Transition>) {
        tell(&*self.inner, self.on_transition.as_ref(), transition);
    }

    fn lock(&self) -> MutexGuard<'_, BreakerCell<WORDS, BUCKETS, DURATIONS>> {
        // The breaker is a plain value updated by whole assignments in the core:
        // a panic elsewhere while the lock was held cannot leave it half-written.
        self.inner
            .cell
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `change` on the machine under the lock, with the closed state taken
    /// back from the lock-free path first and handed out again after (if the
    /// breaker is still, or now, closed).
    fn change<R>(
        &self,
        change: impl FnOnce(&mut BreakerCell<WORDS, BUCKETS, DURATIONS>) -> R,
    ) -> R {
        let mut cell = self.lock();
        cell.breaker.suspend(&self.inner.path);
        let result = change(&mut cell);
        cell.breaker.resume(&self.inner.path);
        result
    }

    /// Asks the machine, under the lock, at the time `clock` reads.
    #[cold]
    fn request_locked(&self, clock: &dyn Clock) -> Gate {
        let (gate, transition) = self.change(|cell| {
            let at = cell.origin.at(clock.now());
            let admission = cell.breaker.request(at);
            match (rejection(&admission), admission) {
                (
                    Some(Event::Rejected { until }),
                    Admission::Rejected {
                        reason, transition, ..
                    },
                ) => {
                    observe::call_rejected(reason);
                    let until = until.and_then(|u| cell.origin.instant(u));
                    (Gate::Rejected { until }, transition)
                }
                (_, Admission::Admitted { permit, transition }) => {
                    (Gate::Admitted(permit), transition)
                }
                (
                    _,
                    Admission::Rejected {
                        reason, transition, ..
                    },
                ) => {
                    observe::call_rejected(reason);
                    (Gate::Rejected { until: None }, transition)
                }
            }
        });
        self.tell(transition);
        gate
    }

    /// Hands the outcome to the machine under the lock.
    #[cold]
    fn record_locked(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        let recorded = self.change(|cell| {
            let at = cell.origin.at(clock.now());
            cell.breaker.record(permit, outcome, at)
        });
        observe::breaker_call(outcome.duration);
        observe::recorded(&recorded);
        self.tell(recorded.transition);
    }

    /// Applies a trip the lock-free path saw, under the lock, at the time
    /// `clock` reads (the open period starts then).
    #[cold]
    fn trip(&self, trip: Trip, outcome: CallOutcome, clock: &dyn Clock) {
        let recorded = {
            let mut cell = self.lock();
            let at = cell.origin.at(clock.now());
            cell.breaker.trip(&self.inner.path, trip, at)
        };
        observe::breaker_call(outcome.duration);
        if let Some(recorded) = recorded {
            observe::recorded(&recorded);
            self.tell(recorded.transition);
        }
    }

    /// What the lock-free path answered for an outcome, other than a quiet
    /// record: reported, or carried to the machine under the lock.
    #[inline(never)]
    fn untimed(&self, untimed: Untimed, outcome: CallOutcome, clock: &dyn Clock) {
        match untimed {
            Untimed::Recorded(exceeded) => {
                observe::breaker_call(outcome.duration);
                if observe::ENABLED {
                    observe::recorded(&Recorded {
                        transition: None,
                        ignored: None,
                        exceeded,
                    });
                }
            }
            Untimed::Trip(trip) => self.trip(trip, outcome, clock),
            Untimed::Locked(permit) => self.record_locked(permit, outcome, clock),
        }
    }
}

/// The calling thread's stripe of every [`ClosedPath`]: its quiet outcomes
/// are kept there, so that threads sharing a breaker do not write a cache
/// line in common while the window is far from tripping. Threads take numbers in the order
/// they first record (the path folds them onto its
/// [`STRIPES`](ClosedPath::STRIPES)), so the first that many threads each have
/// a stripe of their own.
#[inline]
fn stripe() -> usize {
    use core::cell::Cell;
    use core::sync::atomic::{AtomicUsize, Ordering};
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<Option<usize>> = const { Cell::new(None) };
    }
    STRIPE
        .try_with(|stripe| {
            stripe.get().unwrap_or_else(|| {
                let taken = THREADS.fetch_add(1, Ordering::Relaxed);
                stripe.set(Some(taken));
                taken
            })
        })
        // A thread whose locals are being destroyed counts on the first one.
        .unwrap_or(0)
}

/// A breaker's state change, reported: to traces and metrics, to `hook`, and
/// to the timer of a breaker with automatic transitions on.
fn tell(inner: &dyn Timed, hook: Option<&Arc<TransitionHook>>, transition: Option<Transition>) {
    if let Some(t) = transition {
        observe::transition(&t);
        if let Some(hook) = hook {
            hook(&t);
        }
        inner.rearm();
    }
}

/// The breaker's next deadline on the system clock's scale.
fn next_deadline<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
    cell: &BreakerCell<WORDS, BUCKETS, DURATIONS>,
) -> Option<Instant> {
    cell.breaker
        .next_deadline()
        .and_then(|at| cell.origin.instant(at))
}

/// Wakes the machine at `now`, under the lock (not reported).
fn wake_at<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
    inner: &Inner<WORDS, BUCKETS, DURATIONS>,
    now: Instant,
) -> Option<Transition> {
    let mut cell = inner.cell.lock().unwrap_or_else(PoisonError::into_inner);
    // Nothing is due before the deadline: a breaker with none due is left
    // as it is (the lock-free path keeps a closed breaker's state).
    let due = cell.breaker.next_deadline()?;
    let at = cell.origin.at(now);
    if at < due {
        return None;
    }
    cell.breaker.suspend(&inner.path);
    let transition = cell.breaker.wake(at);
    cell.breaker.resume(&inner.path);
    transition
}

/// A shared breaker as its timer sees it, whatever its capacity.
trait Timed: Send + Sync {
    fn next_deadline(&self) -> Option<Instant>;
    fn wake_at(&self, now: Instant) -> Option<Transition>;
    fn rearm(&self);
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> Timed
    for Inner<WORDS, BUCKETS, DURATIONS>
{
    fn next_deadline(&self) -> Option<Instant> {
        next_deadline(&self.cell.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn wake_at(&self, now: Instant) -> Option<Transition> {
        wake_at(self, now)
    }

    fn rearm(&self) {
        if let Some(rearm) = self.rearm.get() {
            rearm();
        }
    }
}

/// Automatic transitions were asked for twice for one breaker
/// ([`SharedBreaker::alarm`]): one timer is enough, and the first one runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AlreadyTimed;

impl fmt::Display for AlreadyTimed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("automatic transitions are on already for this circuit breaker")
    }
}

impl core::error::Error for AlreadyTimed {}

/// What a timer waits for, for one breaker ([`BreakerAlarm::next`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alarm {
    /// Wake the breaker at this instant (with [`BreakerAlarm::ring`]).
    At(Instant),
    /// Nothing is due: wait until the breaker's `rearm` callback is called.
    Idle,
    /// Every handle on the breaker was dropped: stop.
    Gone,
}

/// What a timer holds for a [`SharedBreaker`] with automatic transitions on
/// (made by [`SharedBreaker::alarm`]): when to wake it, and the wake itself.
/// It does not keep the breaker alive. Breakers of every capacity give the
/// same type, so one timer can hold many.
///
/// A timer's loop: read [`next`](Self::next); wait until that instant (or,
/// when [`Alarm::Idle`], for ever), or until the breaker's `rearm` callback
/// says its deadline may have changed; at the instant, [`ring`](Self::ring)
/// with the time read then, which answers what to wait for next; stop at
/// [`Alarm::Gone`]. Ringing early, late or twice is harmless: the breaker
/// moves only once its deadline has passed, and only once.
#[derive(Clone)]
pub struct BreakerAlarm {
    breaker: Weak<dyn Timed>,
    on_transition: Option<Arc<TransitionHook>>,
}

impl BreakerAlarm {
    /// What to wait for: the breaker's next deadline (on the system clock's
    /// scale), nothing, or nothing ever again.
    #[must_use]
    pub fn next(&self) -> Alarm {
        match self.breaker.upgrade() {
            None => Alarm::Gone,
            Some(breaker) => breaker.next_deadline().map_or(Alarm::Idle, Alarm::At),
        }
    }

    /// Wakes the breaker at `now` ([`SharedBreaker::wake_at`]), reporting the
    /// move it made, if any, through the hook of the handle the alarm was made
    /// from, traces and metrics; then answers what to wait for next.
    pub fn ring(&self, now: Instant) -> Alarm {
        let Some(breaker) = self.breaker.upgrade() else {
            return Alarm::Gone;
        };
        let transition = breaker.wake_at(now);
        tell(&*breaker, self.on_transition.as_ref(), transition);
        breaker.next_deadline().map_or(Alarm::Idle, Alarm::At)
    }
}

impl fmt::Debug for BreakerAlarm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerAlarm")
            .field("next", &self.next())
            .finish_non_exhaustive()
    }
}

/// Whether `config` names a slow-call duration of its own (one other than the
/// default 60 s, and short of `Duration::MAX`, which no call exceeds): its user
/// asked for calls to be judged by how long they run, so the attempts are
/// timed, and an abandoned one is judged by the time it ran.
fn sets_slow_call_duration(config: &BreakerConfig) -> bool {
    let slow = config.slow_call_duration();
    slow != BreakerConfig::default().slow_call_duration() && slow < Duration::MAX
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> Breaker
    for SharedBreaker<WORDS, BUCKETS, DURATIONS>
{
    #[inline]
    fn request(&self, clock: &dyn Clock) -> Gate {
        match self.inner.path.request() {
            Some(permit) => Gate::Admitted(permit),
            None => self.request_locked(clock),
        }
    }

    #[inline(always)]
    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        match self.inner.path.record_quiet_on(stripe(), permit, outcome) {
            None => {
                observe::breaker_call(outcome.duration);
                if observe::ENABLED {
                    observe::recorded(&Recorded {
                        transition: None,
                        ignored: None,
                        exceeded: Exceeded::NONE,
                    });
                }
            }
            Some(untimed) => self.untimed(untimed, outcome, clock),
        }
    }

    #[inline]
    fn release(&self, permit: Permit, clock: &dyn Clock) {
        if let Some(permit) = self.inner.path.release(permit) {
            self.change(|cell| {
                let at = cell.origin.at(clock.now());
                cell.breaker.release(permit, at);
            });
        }
    }

    fn slow_call_duration(&self) -> Duration {
        self.slow_call_duration
    }

    fn times_calls(&self) -> bool {
        self.times_calls
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> fmt::Debug
    for SharedBreaker<WORDS, BUCKETS, DURATIONS>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBreaker")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

/// The permit an admitted attempt holds until it ends. It goes back to its
/// breaker `B` exactly once: recorded with the attempt's outcome by
/// [`finish`](PermitGuard::finish), or, if the guard is dropped first (the
/// operation panicked, the attempt's future was dropped), judged as an abandoned
/// attempt by its breaker's [`AbandonedRule`] ([`Breaker::abandoned_rule`]; by
/// default [`retry_core::abandoned_outcome`]'s) at the time `clock` reads then.
///
/// The guard reads `clock` only when a time is needed and the caller did not
/// pass one: at the start, only if the breaker times calls
/// ([`Breaker::times_calls`]); at the end, if the breaker times calls, or the
/// attempt was abandoned. A breaker that does not time calls thus costs a
/// successful attempt no clock read at all. An attempt whose start was not
/// read has an unmeasured duration (`Duration::ZERO`).
///
/// An abandoned attempt is judged by how long it ran, which needs its start:
/// when the guard did not read it, the adapter hands it over with
/// [`waited`](PermitGuard::waited) when the attempt first waits (an async
/// attempt's first pending poll, where the adapter reads the clock anyway), so
/// the time measured misses at most the attempt's first poll. An attempt
/// abandoned with no start known (a blocking attempt that panics under a
/// breaker that does not time calls, or a future dropped before its first
/// poll returned) is judged by its deadline if it has one (past it: a failure),
/// and otherwise released without an outcome: nothing is learnt from it.
///
/// `B` is any [`Breaker`] handle: a borrowed `&dyn Breaker` for a guard that
/// lives inside a call, an `Arc<dyn Breaker>` for one that must own its breaker
/// (a `'static` future).
pub struct PermitGuard<B: Breaker, C: Clock> {
    /// The permit and the clock, taken out together when the permit goes
    /// back (then the guard's drop does nothing). The clock is read through a
    /// reference only once it is out of the guard, so that the guard itself
    /// never has its address taken and stays in registers.
    armed: Option<(Permit, C)>,
    breaker: B,
    started: Option<Instant>,
    deadline: Option<Instant>,
}

impl<B: Breaker, C: Clock> PermitGuard<B, C> {
    /// Asks `breaker` for a permit for an attempt that starts now and must end
    /// by `deadline` (if it has one). `now` is the time if the caller has read
    /// it already; otherwise `clock` is read only if the breaker or the guard
    /// needs the time. `Err` carries when the breaker admits again, if it can
    /// tell.
    ///
    /// # Errors
    /// The breaker's rejection (the attempt must not run).
    #[inline]
    pub fn request(
        breaker: B,
        clock: C,
        now: Option<Instant>,
        deadline: Option<Instant>,
    ) -> Result<PermitGuard<B, C>, Option<Instant>> {
        // Without a time known, the clock itself is handed on (no reading to
        // build).
        let gate = match now {
            None => breaker.request(&clock),
            Some(_) => breaker.request(&Reading::new(&clock, now)),
        };
        match gate {
            Gate::Admitted(permit) => {
                let started = if breaker.times_calls() {
                    Some(now.unwrap_or_else(|| clock.now()))
                } else {
                    now
                };
                Ok(PermitGuard {
                    armed: Some((permit, clock)),
                    breaker,
                    started,
                    deadline,
                })
            }
            Gate::Rejected { until } => Err(until),
        }
    }

    /// Tells the guard the attempt is waiting for the first time, at `now` (an
    /// async attempt's first pending poll): if its start is not known yet, `now`
    /// becomes its start, so that an attempt abandoned later is judged by how
    /// long it ran (missing at most its first poll). Does nothing once the
    /// start is known.
    #[inline]
    pub fn waited(&mut self, now: Instant) {
        if self.started.is_none() {
            self.started = Some(now);
        }
    }

    /// Hands the permit back, with the event the retry machine is told about
    /// the attempt, as [`retry_core::breaker_outcome`] reads it. `now` is the
    /// time if the caller has read it; otherwise the clock is read only if the
    /// outcome's duration matters. An event that records nothing (a call
    /// cancelled mid-attempt) abandons the attempt.
    #[inline]
    pub fn finish(mut self, event: Event, now: Option<Instant>) {
        if let Some((permit, clock)) = self.armed.take() {
            // The end is read once here if the duration matters, and handed on.
            let now = match (self.started, now) {
                (Some(_), None) if self.breaker.times_calls() => Some(clock.now()),
                _ => now,
            };
            let ran = match (self.started, now) {
                (Some(started), Some(now)) => now.saturating_duration_since(started),
                _ => Duration::ZERO,
            };
            match (breaker_outcome(event, ran), now) {
                // Without a time known, the clock itself is handed on.
                (Some(outcome), None) => self.breaker.record(permit, outcome, &clock),
                (Some(outcome), Some(_)) => {
                    self.breaker
                        .record(permit, outcome, &Reading::new(&clock, now));
                }
                (None, _) => {
                    let at = now.unwrap_or_else(|| clock.now());
                    self.abandon(permit, &clock, at);
                }
            }
        }
    }

    /// Hands the permit back for an attempt abandoned at `now`.
    #[cold]
    fn abandon(&self, permit: Permit, clock: &C, now: Instant) {
        let at = Reading::new(clock, Some(now));
        let slow = self.breaker.slow_call_duration();
        let rule = self.breaker.abandoned_rule();
        let outcome = match self.started {
            Some(started) => rule.outcome(
                retry_core::Instant::ORIGIN,
                since(started, now),
                self.deadline.map(|d| since(started, d)),
                slow,
            ),
            // How long it ran is unknown: the rule reads only its deadline.
            None => {
                // Whether the deadline has passed, with the abandonment as the origin.
                let past = self.deadline.is_some_and(|d| now >= d);
                let origin = retry_core::Instant::ORIGIN;
                rule.unmeasured(origin, past.then_some(origin))
            }
        };
        match outcome {
            Some(outcome) => self.breaker.record(permit, outcome, &at),
            None => self.breaker.release(permit, &at),
        }
    }
}

impl<B: Breaker, C: Clock> Drop for PermitGuard<B, C> {
    #[inline]
    fn drop(&mut self) {
        if let Some((permit, clock)) = self.armed.take() {
            self.abandon(permit, &clock, clock.now());
        }
    }
}

impl<B: Breaker, C: Clock> fmt::Debug for PermitGuard<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitGuard")
            .field("breaker", &self.breaker)
            .field("permit", &self.armed.as_ref().map(|(permit, _)| permit))
            .field("started", &self.started)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<'b, B: Breaker + 'b, C: Clock + Clone> PermitGuard<&'b B, C> {
    /// The same guard, holding its breaker as a `&dyn Breaker`: an adapter
    /// that asked a breaker it knows the type of (so that the call on the
    /// success path is direct) hands it on as the driver keeps it.
    #[must_use]
    pub fn into_dyn(mut self) -> PermitGuard<&'b dyn Breaker, C> {
        PermitGuard {
            // Taken: the guard left behind holds nothing, so its drop does
            // nothing.
            armed: self.armed.take(),
            breaker: self.breaker,
            started: self.started,
            deadline: self.deadline,
        }
    }
}
