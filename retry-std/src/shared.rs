//! State shared by many calls on many threads: core machines behind a mutex.
//!
//! The retry budget ([`SharedBudget`]) and the circuit breaker
//! ([`SharedBreaker`]): each a core machine behind a mutex held only for the core
//! call, never while an operation runs or a delay is slept.

use core::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use retry_core::{
    breaker_outcome, feed_budget, Action, Admission, BreakerConfig, BreakerError, BreakerState,
    BudgetConfig, CircuitBreaker, Event, ManualState, Permit, RetryBudget, RetryMachine, Tokens,
    Transition,
};

/// A [`RetryBudget`] shared by every call that holds a clone (SPEC 11): retries
/// withdraw from it, successes refill it, and while it is low, retries are refused
/// while first attempts still run. Prevents retry storms during an outage.
///
/// Clones share one budget (an `Arc` around a `Mutex`); the lock is held only for
/// the core call, never while an operation runs or a delay is slept.
///
/// Give it to a call with [`Retry::budget`](crate::Retry::budget), and build the
/// policy with `use_retry_budget(true)` so that the machine asks it before each
/// retry. (Without that the call still reports its attempts to the budget, but
/// never withdraws from it.)
///
/// The budget keeps its own time origin, set by the first call that uses it, so
/// calls that start at different moments agree on the time (Finagle's window
/// depends on it).
///
/// ```
/// use retry_core::{BudgetConfig, Tokens};
/// use retry_std::SharedBudget;
///
/// let budget = SharedBudget::new(BudgetConfig::grpc(10, 0.1)?);
/// let for_another_thread = budget.clone();
/// assert_eq!(for_another_thread.tokens(), Tokens::from_whole(10));
/// # Ok::<(), retry_core::BudgetError>(())
/// ```
#[derive(Clone)]
pub struct SharedBudget {
    inner: Arc<Mutex<Shared>>,
}

struct Shared {
    budget: RetryBudget,
    /// The instant the budget's time is measured from: the first `now` it saw.
    origin: Option<Instant>,
}

impl SharedBudget {
    /// A fresh budget following `config`.
    #[must_use]
    pub fn new(config: BudgetConfig) -> SharedBudget {
        SharedBudget::from_budget(RetryBudget::new(config))
    }

    /// Shares an existing budget (for instance one restored from a snapshot).
    #[must_use]
    pub fn from_budget(budget: RetryBudget) -> SharedBudget {
        SharedBudget {
            inner: Arc::new(Mutex::new(Shared {
                budget,
                origin: None,
            })),
        }
    }

    /// The tokens in the bucket as of the latest notification.
    #[must_use]
    pub fn tokens(&self) -> Tokens {
        self.lock().budget.tokens()
    }

    /// A copy of the budget as it stands.
    #[must_use]
    pub fn snapshot(&self) -> RetryBudget {
        self.lock().budget
    }

    /// Tells the budget about one step of a call (the `event` sent to `machine`
    /// and the `action` it answered, at `now`) through [`retry_core::feed_budget`],
    /// and returns the event to send back when the action is a withdrawal.
    pub(crate) fn feed(
        &self,
        machine: &RetryMachine,
        event: Event,
        action: Action,
        now: Instant,
    ) -> Option<Event> {
        let mut shared = self.lock();
        let origin = *shared.origin.get_or_insert(now);
        let at = retry_core::Instant::from_duration(now.saturating_duration_since(origin));
        feed_budget(&mut shared.budget, machine, event, action, at)
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // The budget is a plain value updated by whole assignments inside the core:
        // a panic elsewhere cannot leave it half-written.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for SharedBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBudget")
            .field("budget", &self.snapshot())
            .finish()
    }
}

/// A hook told about every state change of a shared breaker.
type TransitionHook = dyn Fn(&Transition) + Send + Sync;

/// A [`CircuitBreaker`] shared by every call holding a clone (SPEC 10): asked
/// before every attempt, told every outcome. While it is open, attempts are not
/// run: the call gives up with `retry.circuit_open`, or waits until the breaker
/// admits again if the policy says `on_circuit_open(CircuitOpen::Wait)`.
///
/// Clones share one breaker (an `Arc` around a `Mutex`); the lock is held only for
/// the core call. The breaker keeps its own time origin, set by its first use.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BreakerConfig, BreakerState};
/// use retry_std::SharedBreaker;
///
/// // Open after 3 consecutive failures, half-open after 5 s, closed after 1 success.
/// let breaker = SharedBreaker::new(BreakerConfig::basic(3, Duration::from_secs(5), 1)?)?;
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Clone)]
pub struct SharedBreaker {
    inner: Arc<Mutex<BreakerCell>>,
    on_transition: Option<Arc<TransitionHook>>,
}

struct BreakerCell {
    breaker: CircuitBreaker,
    origin: Option<Instant>,
}

impl BreakerCell {
    fn at(&mut self, now: Instant) -> retry_core::Instant {
        let origin = *self.origin.get_or_insert(now);
        retry_core::Instant::from_duration(now.saturating_duration_since(origin))
    }
}

/// A breaker's permit for one attempt, with the moment the attempt started.
pub(crate) struct BreakerPermit {
    permit: Permit,
    started: Instant,
}

impl SharedBreaker {
    /// A fresh breaker following `config` (a count window of up to 128 calls).
    ///
    /// # Errors
    /// [`BreakerError`] when the window does not fit.
    pub fn new(config: BreakerConfig) -> Result<SharedBreaker, BreakerError> {
        Ok(SharedBreaker::from_breaker(CircuitBreaker::new(config)?))
    }

    /// Shares an existing breaker.
    #[must_use]
    pub fn from_breaker(breaker: CircuitBreaker) -> SharedBreaker {
        SharedBreaker {
            inner: Arc::new(Mutex::new(BreakerCell {
                breaker,
                origin: None,
            })),
            on_transition: None,
        }
    }

    /// Calls `hook` with every state change (for logs and metrics). The hook runs
    /// after the lock is released.
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

    /// A copy of the breaker as it stands.
    #[must_use]
    pub fn snapshot(&self) -> CircuitBreaker {
        self.lock().breaker.clone()
    }

    /// Puts the breaker under manual control (or back to automatic).
    ///
    /// # Errors
    /// [`BreakerError`] for a transition the breaker's table does not allow; the
    /// breaker is then unchanged.
    pub fn force(&self, target: ManualState, now: Instant) -> Result<Transition, BreakerError> {
        let transition = {
            let mut cell = self.lock();
            let at = cell.at(now);
            cell.breaker.force(target, at)?
        };
        self.tell(Some(transition));
        Ok(transition)
    }

    /// Asks before an attempt at `now`. `Ok` carries the permit to hand back with
    /// [`SharedBreaker::finish`]; `Err` is the event for the retry machine of a call
    /// that started at `call_start` (the rejection's time moved to that call's
    /// clock).
    pub(crate) fn admit(&self, now: Instant, call_start: Instant) -> Result<BreakerPermit, Event> {
        let (result, transition) = {
            let mut cell = self.lock();
            let at = cell.at(now);
            match cell.breaker.request(at) {
                Admission::Admitted { permit, transition } => (
                    Ok(BreakerPermit {
                        permit,
                        started: now,
                    }),
                    transition,
                ),
                Admission::Rejected { until, .. } => {
                    // Breaker time -> wall time -> the call's time.
                    let until = until
                        .and_then(|u| cell.origin.and_then(|o| o.checked_add(u.as_duration())))
                        .map(|wall| {
                            retry_core::Instant::from_duration(
                                wall.saturating_duration_since(call_start),
                            )
                        });
                    (Err(Event::Rejected { until }), None)
                }
            }
        };
        self.tell(transition);
        result
    }

    /// Hands a permit back with the event the retry machine is told about the
    /// attempt (read by [`retry_core::breaker_outcome`]); an event that records
    /// nothing releases the permit.
    pub(crate) fn finish(&self, permit: BreakerPermit, event: Event, now: Instant) {
        let took = now.saturating_duration_since(permit.started);
        let transition = {
            let mut cell = self.lock();
            let at = cell.at(now);
            match breaker_outcome(event, took) {
                Some(outcome) => cell.breaker.record(permit.permit, outcome, at).transition,
                None => {
                    cell.breaker.release(permit.permit, at);
                    None
                }
            }
        };
        self.tell(transition);
    }

    fn tell(&self, transition: Option<Transition>) {
        if let (Some(hook), Some(t)) = (&self.on_transition, transition) {
            hook(&t);
        }
    }

    fn lock(&self) -> MutexGuard<'_, BreakerCell> {
        // The breaker is a plain value updated by whole assignments in the core.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for SharedBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBreaker")
            .field("state", &self.state())
            .finish()
    }
}
