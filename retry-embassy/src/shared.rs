//! State shared by many calls: the core's circuit breaker and retry budget, each
//! behind one of embassy-sync's blocking mutexes. A mutex is held for one core
//! call (a few hundred instructions at most) and never across an await: the
//! blocking mutex only lends its value to a closure, which cannot await.
//!
//! Both run on the boot clock (embassy's `Instant` since tick zero), so calls
//! that start at different moments, on different tasks or interrupt priorities,
//! agree on their time.

use core::cell::RefCell;
use core::fmt;
use core::time::Duration;

use embassy_futures::select::{select, Either};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::blocking_mutex::Mutex;
use embassy_sync::signal::Signal;
use embassy_time::{Instant as Tick, Timer};
use retry_core::{
    breaker_outcome, feed_budget, Action, Admission, BreakerConfig, BreakerError, BreakerState,
    BudgetConfig, CallOutcome, CircuitBreaker, Event, ManualState, Permit, RetryBudget,
    RetryMachine, Tokens, Transition,
};

use crate::time::{boot_now, tick_at, ticks_duration};

/// Runs `f` on the value in `mutex`. Nothing borrows the cell but these
/// closures, which never call out, so the borrow cannot fail; were it to, `None`
/// instead of a panic.
fn with<M: RawMutex, T, U>(mutex: &Mutex<M, RefCell<T>>, f: impl FnOnce(&mut T) -> U) -> Option<U> {
    mutex.lock(|cell| cell.try_borrow_mut().ok().map(|mut value| f(&mut value)))
}

/// A [`CircuitBreaker`] shared by every call given a reference to it: asked before
/// each attempt, told each outcome.
///
/// `M` is the blocking mutex: `CriticalSectionRawMutex` when calls run on
/// executors of different interrupt priorities (or cores), `ThreadModeRawMutex`
/// when they all run on one thread-mode executor (it asserts, with a panic, that
/// it is locked in thread mode). A call needs the mutex to be `Sync`, which
/// `NoopRawMutex` is not. `WORDS` and `BUCKETS` size the breaker's fixed windows,
/// as in the core; the defaults hold a count window of up to 128 calls.
/// `DURATIONS` (0 unless named) is how many calls' durations it keeps, as in
/// the core: a count window of at most that many calls reports their total
/// and mean duration (in the metrics of [`SharedBreaker::snapshot`]), for 8
/// bytes a call.
///
/// ```
/// use core::time::Duration;
/// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
/// use retry_core::{BasicRule, BreakerConfig, BreakerState};
/// use retry_embassy::SharedBreaker;
///
/// let breaker: SharedBreaker<CriticalSectionRawMutex> =
///     SharedBreaker::new(BreakerConfig::basic(BasicRule {
///         failure_threshold: 3,
///         open_duration: Duration::from_secs(10),
///         success_threshold: 1,
///     })?)?;
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
///
/// To share it between spawned tasks it must live for `'static`: a
/// `static_cell::StaticCell`, say, filled once in `main`, or
/// [`SharedBreaker::from_breaker`], which is `const`, in a `static` built from a
/// breaker made at compile time.
///
/// # Automatic transitions
/// Off by default (as Resilience4j's
/// `automaticTransitionFromOpenToHalfOpenEnabled`): the breaker moves on its
/// own only when a call finds the time passed. A task that awaits
/// [`SharedBreaker::automatic_transitions`] turns them on: it sleeps on an
/// embassy-time timer until the breaker's next deadline (the end of its open
/// period, or of its half-open maximum wait) and moves it then, with no call,
/// telling its callback of each move within one tick of the instant.
pub struct SharedBreaker<
    M: RawMutex,
    const WORDS: usize = 2,
    const BUCKETS: usize = 0,
    const DURATIONS: usize = 0,
> {
    inner: Mutex<M, RefCell<CircuitBreaker<WORDS, BUCKETS, DURATIONS>>>,
    /// Signalled after every transition, so that a task running
    /// [`SharedBreaker::automatic_transitions`] reads the next deadline again.
    changed: Signal<M, ()>,
}

impl<M: RawMutex, const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    SharedBreaker<M, WORDS, BUCKETS, DURATIONS>
{
    /// A closed breaker following `config`.
    ///
    /// # Errors
    /// The core's [`BreakerError`] when the config's window does not fit `WORDS` /
    /// `BUCKETS`.
    pub fn new(config: BreakerConfig) -> Result<Self, BreakerError> {
        CircuitBreaker::new(config).map(SharedBreaker::from_breaker)
    }

    /// Shares an existing breaker (one restored from a snapshot, say). Its times
    /// are read on the boot clock.
    #[must_use]
    pub const fn from_breaker(breaker: CircuitBreaker<WORDS, BUCKETS, DURATIONS>) -> Self {
        SharedBreaker {
            inner: Mutex::new(RefCell::new(breaker)),
            changed: Signal::new(),
        }
    }

    /// The breaker's state.
    #[must_use]
    pub fn state(&self) -> BreakerState {
        with(&self.inner, |b| b.state()).unwrap_or(BreakerState::Closed)
    }

    /// How many half-open probes are running now.
    #[must_use]
    pub fn probes_in_flight(&self) -> u32 {
        with(&self.inner, |b| b.probes_in_flight()).unwrap_or(0)
    }

    /// A copy of the breaker as it stands (`None` only if called from inside
    /// another access to it, which this crate never does).
    #[must_use]
    pub fn snapshot(&self) -> Option<CircuitBreaker<WORDS, BUCKETS, DURATIONS>> {
        with(&self.inner, |b| b.clone())
    }

    /// An operator moves the breaker to `target` (an emergency stop, a
    /// maintenance switch).
    ///
    /// # Errors
    /// [`BreakerError`] when the core breaker refuses the move (one its table
    /// forbids, or an open period that is empty or already over); see
    /// [`CircuitBreaker::force`](retry_core::CircuitBreaker::force), which
    /// re-enters the state the breaker is already in.
    pub fn force(&self, target: ManualState) -> Result<Transition, BreakerError> {
        let forced = with(&self.inner, |b| {
            let (_, now) = boot_now();
            b.force(target, now)
        });
        let forced = forced.unwrap_or(Err(BreakerError::IllegalTransition {
            from: BreakerState::Closed,
            to: target.state(),
        }));
        self.moved(forced.ok());
        forced
    }

    /// The next instant at which the breaker changes state on its own, with no
    /// call: the end of its open period, or of its half-open maximum wait
    /// ([`CircuitBreaker::next_deadline`]), on the boot clock. `None` in the
    /// other states.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Tick> {
        with(&self.inner, |b| b.next_deadline())
            .flatten()
            .map(|at| tick_at(Tick::from_ticks(0), at))
    }

    /// Applies the passage of time now, with no call: the move the breaker
    /// makes on its own once its [`next_deadline`](Self::next_deadline) has
    /// passed (open to half-open; the half-open maximum wait's decision), as
    /// the first call now would make it ([`CircuitBreaker::wake`]). Before
    /// then, or in any other state, nothing (`None`).
    pub fn wake(&self) -> Option<Transition> {
        let moved = with(&self.inner, |b| {
            let (_, now) = boot_now();
            b.wake(now)
        })
        .flatten();
        self.moved(moved);
        moved
    }

    /// Runs the breaker's automatic transitions, for ever: sleeps on an
    /// embassy-time timer until the breaker's
    /// [`next_deadline`](Self::next_deadline), or until a call or an operator
    /// changes the state (and with it the deadline); at the deadline,
    /// [`wake`](Self::wake)s the breaker and tells `on_transition` of the move
    /// (log it, count it). The move happens on the first tick at or after the
    /// instant, whether or not a call comes. The future never completes: await
    /// it in a task of its own (one per breaker), or select it against the
    /// task's other work.
    ///
    /// ```no_run
    /// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
    /// use retry_embassy::SharedBreaker;
    ///
    /// // In firmware: an `#[embassy_executor::task]`, spawned once for the
    /// // breaker; it never returns.
    /// async fn breaker_timer(breaker: &'static SharedBreaker<CriticalSectionRawMutex>) {
    ///     breaker
    ///         .automatic_transitions(|t| {
    ///             // Log it (`defmt::info!` on a probe), count it.
    ///             let _moved_to = t.to;
    ///         })
    ///         .await
    /// }
    /// ```
    ///
    /// Only one task may run it for a breaker (the change signal has one
    /// waiter); a second one would take turns with the first to notice
    /// changes, and the breaker would still move only once at each deadline.
    pub async fn automatic_transitions(&self, mut on_transition: impl FnMut(&Transition)) {
        loop {
            match self.next_deadline() {
                None => self.changed.wait().await,
                Some(at) => match select(Timer::at(at), self.changed.wait()).await {
                    Either::First(()) => {
                        if let Some(t) = self.wake() {
                            on_transition(&t);
                        }
                    }
                    Either::Second(()) => {}
                },
            }
        }
    }

    /// After an input: a transition moves the next deadline.
    fn moved(&self, transition: Option<Transition>) {
        if transition.is_some() {
            self.changed.signal(());
        }
    }
}

impl<M: RawMutex, const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> fmt::Debug
    for SharedBreaker<M, WORDS, BUCKETS, DURATIONS>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBreaker")
            .field("breaker", &self.snapshot())
            .finish()
    }
}

/// A breaker's answer to a request, in embassy time.
pub(crate) enum Gate {
    /// Run the attempt; hand the permit back.
    Admitted(Permit, Tick),
    /// Do not run it; the breaker admits again at `until`, if known.
    Rejected { until: Option<Tick> },
}

/// What the driver needs from a shared breaker, whatever its mutex and windows.
pub(crate) trait Breaker {
    fn request(&self) -> Gate;
    fn record(&self, permit: Permit, outcome: CallOutcome);
    fn release(&self, permit: Permit);
}

impl<M: RawMutex, const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> Breaker
    for SharedBreaker<M, WORDS, BUCKETS, DURATIONS>
{
    fn request(&self) -> Gate {
        let answer = with(&self.inner, |b| {
            // The clock is read under the lock, so the breaker sees requests in
            // the order of their times.
            let (tick, now) = boot_now();
            match b.request(now) {
                Admission::Admitted { permit, transition } => {
                    (Gate::Admitted(permit, tick), transition)
                }
                Admission::Rejected {
                    until, transition, ..
                } => (
                    Gate::Rejected {
                        until: until.map(|u| tick_at(Tick::from_ticks(0), u)),
                    },
                    transition,
                ),
            }
        });
        let (gate, transition) = answer.unwrap_or((Gate::Rejected { until: None }, None));
        self.moved(transition);
        gate
    }

    fn record(&self, permit: Permit, outcome: CallOutcome) {
        let recorded = with(&self.inner, |b| {
            let (_, now) = boot_now();
            b.record(permit, outcome, now)
        });
        self.moved(recorded.and_then(|r| r.transition));
    }

    fn release(&self, permit: Permit) {
        let _ = with(&self.inner, |b| {
            let (_, now) = boot_now();
            b.release(permit, now);
        });
    }
}

/// A permit held for one attempt. Handed back exactly once: recorded with the
/// attempt's outcome by [`PermitGuard::finish`], or released when dropped (the
/// call was cancelled, or its future dropped mid-attempt).
pub(crate) struct PermitGuard<'a> {
    breaker: &'a (dyn Breaker + Sync),
    permit: Option<Permit>,
    started: Tick,
}

impl<'a> PermitGuard<'a> {
    pub(crate) fn new(breaker: &'a (dyn Breaker + Sync), permit: Permit, started: Tick) -> Self {
        PermitGuard {
            breaker,
            permit: Some(permit),
            started,
        }
    }

    /// Records the outcome the retry machine is told (`event`), as
    /// [`retry_core::breaker_outcome`] reads it; an event that records nothing
    /// releases the permit.
    pub(crate) fn finish(mut self, event: Event) {
        let took: Duration = ticks_duration(
            Tick::now()
                .as_ticks()
                .saturating_sub(self.started.as_ticks()),
        );
        if let Some(permit) = self.permit.take() {
            match breaker_outcome(event, took) {
                Some(outcome) => self.breaker.record(permit, outcome),
                None => self.breaker.release(permit),
            }
        }
    }
}

impl Drop for PermitGuard<'_> {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.breaker.release(permit);
        }
    }
}

/// A [`RetryBudget`] shared by every call given a reference to it: retries
/// withdraw tokens, successes put some back, and while the bucket is low retries
/// are refused while first attempts still run.
///
/// Give it to calls with [`Retry::budget`](crate::Retry::budget) and build their
/// policy with `use_retry_budget(true)`, so the machine asks before every retry.
/// The constructor is `const`, so a budget can be a `static`:
///
/// ```
/// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
/// use retry_core::{BudgetConfig, Tokens};
/// use retry_embassy::SharedBudget;
///
/// static BUDGET: SharedBudget<CriticalSectionRawMutex> =
///     SharedBudget::new(BudgetConfig::aws_standard());
/// assert_eq!(BUDGET.tokens(), Tokens::from_whole(500));
/// ```
pub struct SharedBudget<M: RawMutex> {
    inner: Mutex<M, RefCell<RetryBudget>>,
}

impl<M: RawMutex> SharedBudget<M> {
    /// A full budget following `config`.
    #[must_use]
    pub const fn new(config: BudgetConfig) -> Self {
        SharedBudget::from_budget(RetryBudget::new(config))
    }

    /// Shares an existing budget (one restored from a snapshot, say). Its times
    /// are read on the boot clock.
    #[must_use]
    pub const fn from_budget(budget: RetryBudget) -> Self {
        SharedBudget {
            inner: Mutex::new(RefCell::new(budget)),
        }
    }

    /// The tokens in the bucket as of the last call that used it.
    #[must_use]
    pub fn tokens(&self) -> Tokens {
        with(&self.inner, |b| b.tokens()).unwrap_or(Tokens::from_whole(0))
    }

    /// A copy of the budget as it stands (`None` only if called from inside
    /// another access to it, which this crate never does).
    #[must_use]
    pub fn snapshot(&self) -> Option<RetryBudget> {
        with(&self.inner, |b| *b)
    }
}

impl<M: RawMutex> fmt::Debug for SharedBudget<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBudget")
            .field("budget", &self.snapshot())
            .finish()
    }
}

/// What the driver needs from a shared budget, whatever its mutex.
pub(crate) trait Budget {
    /// Passes one step of a call to [`retry_core::feed_budget`]; returns the
    /// answer to a withdrawal.
    fn feed(&self, machine: &RetryMachine, event: Event, action: Action) -> Option<Event>;
}

impl<M: RawMutex> Budget for SharedBudget<M> {
    fn feed(&self, machine: &RetryMachine, event: Event, action: Action) -> Option<Event> {
        with(&self.inner, |b| {
            let (_, now) = boot_now();
            feed_budget(b, machine, event, action, now)
        })
        .flatten()
    }
}
