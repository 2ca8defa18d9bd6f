//! State shared by many tasks: the core's retry budget and circuit breaker, each
//! behind a `std::sync::Mutex` that is held only for one core call, never across
//! an `.await`. Clones share one machine through an `Arc`.

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use retry_core::{
    breaker_outcome, feed_budget, rejection, Action, Admission, BreakerConfig, BreakerError,
    BreakerState, BudgetConfig, CallOutcome, CircuitBreaker, Event, ManualState, Permit,
    RetryBudget, RetryMachine, Tokens, Transition,
};
use tokio::time::Instant;

use crate::observe;

/// The time base of a shared machine: the moment it was first used. Calls that
/// start at different moments agree on its clock.
#[derive(Clone, Copy, Debug, Default)]
struct Origin(Option<Instant>);

impl Origin {
    /// `now` on the shared clock (fixing the origin at the first call).
    fn at(&mut self, now: Instant) -> retry_core::Instant {
        let origin = *self.0.get_or_insert(now);
        retry_core::Instant::from_duration(now.saturating_duration_since(origin))
    }

    /// The tokio instant of a point on the shared clock (`None` if it lies past
    /// what tokio can represent).
    fn to_tokio(self, at: retry_core::Instant) -> Option<Instant> {
        self.0?.checked_add(at.as_duration())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every core machine is updated by whole-value assignments: a panic elsewhere
    // while the lock was held cannot leave it half-written.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A [`RetryBudget`] shared by every call holding a clone (SPEC 11): retries
/// withdraw tokens, successes put some back, and while the bucket is low retries
/// are refused while first attempts still run.
///
/// Give it to calls with [`Retry::budget`](crate::Retry::budget) and build their
/// policy with `use_retry_budget(true)`, so the machine asks before every retry.
///
/// ```
/// use retry_core::{BudgetConfig, Tokens};
/// use retry_tokio::SharedBudget;
///
/// let budget = SharedBudget::new(BudgetConfig::grpc(10, 0.1)?);
/// let for_another_task = budget.clone();
/// assert_eq!(for_another_task.tokens(), Tokens::from_whole(10));
/// # Ok::<(), retry_core::BudgetError>(())
/// ```
#[derive(Clone)]
pub struct SharedBudget {
    inner: Arc<Mutex<BudgetCell>>,
}

struct BudgetCell {
    budget: RetryBudget,
    origin: Origin,
}

impl SharedBudget {
    /// A full budget following `config`.
    #[must_use]
    pub fn new(config: BudgetConfig) -> SharedBudget {
        SharedBudget::from_budget(RetryBudget::new(config))
    }

    /// Shares an existing budget (one restored from a snapshot, say).
    #[must_use]
    pub fn from_budget(budget: RetryBudget) -> SharedBudget {
        SharedBudget {
            inner: Arc::new(Mutex::new(BudgetCell {
                budget,
                origin: Origin::default(),
            })),
        }
    }

    /// The tokens in the bucket as of the last call that used it.
    #[must_use]
    pub fn tokens(&self) -> Tokens {
        lock(&self.inner).budget.tokens()
    }

    /// A copy of the budget as it stands.
    #[must_use]
    pub fn snapshot(&self) -> RetryBudget {
        lock(&self.inner).budget
    }

    /// Passes one step of a call to [`retry_core::feed_budget`]; returns the answer
    /// to a withdrawal.
    pub(crate) fn feed(
        &self,
        machine: &RetryMachine,
        event: Event,
        action: Action,
        now: Instant,
    ) -> Option<Event> {
        let mut cell = lock(&self.inner);
        let at = cell.origin.at(now);
        feed_budget(&mut cell.budget, machine, event, action, at)
    }
}

impl fmt::Debug for SharedBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBudget")
            .field("budget", &self.snapshot())
            .finish()
    }
}

/// A [`CircuitBreaker`] shared by every call holding a clone: asked before each
/// attempt, told each outcome. Its transitions are reported to `tracing` and
/// `metrics` when those features are on.
///
/// `WORDS` and `BUCKETS` size the breaker's fixed windows, as in the core; the
/// defaults hold a count window of up to 128 calls.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BreakerConfig, BreakerState};
/// use retry_tokio::SharedBreaker;
///
/// let breaker: SharedBreaker = SharedBreaker::new(BreakerConfig::basic(3, Duration::from_secs(10), 1)?)?;
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
pub struct SharedBreaker<const WORDS: usize = 2, const BUCKETS: usize = 0> {
    inner: Arc<Mutex<BreakerCell<WORDS, BUCKETS>>>,
}

impl<const WORDS: usize, const BUCKETS: usize> Clone for SharedBreaker<WORDS, BUCKETS> {
    fn clone(&self) -> Self {
        SharedBreaker {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct BreakerCell<const WORDS: usize, const BUCKETS: usize> {
    breaker: CircuitBreaker<WORDS, BUCKETS>,
    origin: Origin,
}

impl<const WORDS: usize, const BUCKETS: usize> SharedBreaker<WORDS, BUCKETS> {
    /// A closed breaker following `config`.
    ///
    /// # Errors
    /// The core's [`BreakerError`] when the config's window does not fit `WORDS` /
    /// `BUCKETS`.
    pub fn new(config: BreakerConfig) -> Result<Self, BreakerError> {
        CircuitBreaker::new(config).map(SharedBreaker::from_breaker)
    }

    /// Shares an existing breaker.
    #[must_use]
    pub fn from_breaker(breaker: CircuitBreaker<WORDS, BUCKETS>) -> Self {
        SharedBreaker {
            inner: Arc::new(Mutex::new(BreakerCell {
                breaker,
                origin: Origin::default(),
            })),
        }
    }

    /// The breaker's state.
    #[must_use]
    pub fn state(&self) -> BreakerState {
        lock(&self.inner).breaker.state()
    }

    /// A copy of the breaker as it stands.
    #[must_use]
    pub fn snapshot(&self) -> CircuitBreaker<WORDS, BUCKETS> {
        lock(&self.inner).breaker.clone()
    }

    /// An operator moves the breaker to `target` (the transition is reported like
    /// any other).
    ///
    /// # Errors
    /// [`BreakerError`] when the core breaker refuses the move (one its table
    /// forbids, or an open period that is empty or already over); see
    /// [`CircuitBreaker::force`](retry_core::CircuitBreaker::force), which
    /// re-enters the state the breaker is already in.
    pub fn force(&self, target: ManualState) -> Result<Transition, BreakerError> {
        let now = Instant::now();
        let transition = {
            let mut cell = lock(&self.inner);
            let at = cell.origin.at(now);
            cell.breaker.force(target, at)?
        };
        observe::transition(&transition);
        Ok(transition)
    }
}

impl<const WORDS: usize, const BUCKETS: usize> fmt::Debug for SharedBreaker<WORDS, BUCKETS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBreaker")
            .field("breaker", &self.snapshot())
            .finish()
    }
}

/// A breaker's answer to a request, in tokio time.
pub(crate) enum Gate {
    /// Run the call and hand the permit back.
    Admitted(Permit),
    /// Do not run it; the breaker admits again at `until`, if known.
    Rejected { until: Option<Instant> },
}

/// What the drivers need from a shared breaker, whatever its window sizes.
pub(crate) trait Breaker: Send + Sync {
    fn request(&self, now: Instant) -> Gate;
    fn record(&self, permit: Permit, outcome: CallOutcome, now: Instant);
    fn release(&self, permit: Permit, now: Instant);
}

impl<const WORDS: usize, const BUCKETS: usize> Breaker for SharedBreaker<WORDS, BUCKETS> {
    fn request(&self, now: Instant) -> Gate {
        let (gate, transition) = {
            let mut cell = lock(&self.inner);
            let at = cell.origin.at(now);
            let admission = cell.breaker.request(at);
            match rejection(&admission) {
                Some(Event::Rejected { until }) => {
                    let until = until.and_then(|u| cell.origin.to_tokio(u));
                    (Gate::Rejected { until }, None)
                }
                _ => match admission {
                    Admission::Admitted { permit, transition } => {
                        (Gate::Admitted(permit), transition)
                    }
                    Admission::Rejected { .. } => (Gate::Rejected { until: None }, None),
                },
            }
        };
        if let Some(transition) = transition {
            observe::transition(&transition);
        }
        gate
    }

    fn record(&self, permit: Permit, outcome: CallOutcome, now: Instant) {
        let transition = {
            let mut cell = lock(&self.inner);
            let at = cell.origin.at(now);
            cell.breaker.record(permit, outcome, at).transition
        };
        observe::breaker_call(outcome.duration);
        if let Some(transition) = transition {
            observe::transition(&transition);
        }
    }

    fn release(&self, permit: Permit, now: Instant) {
        let mut cell = lock(&self.inner);
        let at = cell.origin.at(now);
        cell.breaker.release(permit, at);
    }
}

/// A permit held for one call. Handed back exactly once: recorded with the call's
/// outcome by [`PermitGuard::finish`], or released when dropped (the call was
/// cancelled, or its future dropped mid-flight).
pub(crate) struct PermitGuard {
    breaker: Arc<dyn Breaker>,
    permit: Option<Permit>,
    started: Instant,
}

impl PermitGuard {
    pub(crate) fn new(breaker: Arc<dyn Breaker>, permit: Permit, started: Instant) -> Self {
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
        let now = Instant::now();
        let took: Duration = now.saturating_duration_since(self.started);
        if let Some(permit) = self.permit.take() {
            match breaker_outcome(event, took) {
                Some(outcome) => self.breaker.record(permit, outcome, now),
                None => self.breaker.release(permit, now),
            }
        }
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.breaker.release(permit, Instant::now());
        }
    }
}
