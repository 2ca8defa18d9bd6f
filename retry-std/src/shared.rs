//! State shared by many calls on many threads: core machines behind a mutex.
//!
//! Today that is the retry budget ([`SharedBudget`]). The circuit breaker will
//! live here too once `retry-core` has its breaker machine: a `SharedBreaker`
//! wrapping it the same way (a mutex held only for the core call), asked by the
//! driver before every attempt, answering with `Event::Rejected { until }` when
//! it refuses (see `Retry::call`'s loop, which marks the spot).

use core::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use retry_core::{feed_budget, Action, BudgetConfig, Event, RetryBudget, RetryMachine, Tokens};

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
