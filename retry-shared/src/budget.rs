//! A retry budget shared by many calls: what a driver asks of one ([`Budget`]) and
//! the in-process one ([`SharedBudget`]).

use core::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use retry_core::{
    feed_budget, feed_hedge_budget, Action, BudgetConfig, BudgetSnapshot, Event, HedgeAction,
    HedgeEvent, RetryBudget, RetryMachine, RetryPolicy, SnapshotError, Tokens,
};

use crate::saved::Saved;
use crate::time::Origin;

/// What a driver asks of a retry budget: it feeds the budget every step of a call
/// (of a retry machine, or of a hedge machine) and, when the machine asks to
/// withdraw a retry, takes the budget's answer. [`SharedBudget`] implements it; a budget kept elsewhere (one shared by
/// a fleet through a store, say) implements it to plug into both adapters.
///
/// Implementations must not block for long (they are called from async tasks); a
/// budget that has to ask over a network bounds the wait and falls back to a
/// local answer.
pub trait Budget: Send + Sync + fmt::Debug {
    /// Tells the budget about one step of a call: the `event` sent to `machine`
    /// (the call's machine, borrowing its policy from the call's settings) and
    /// the `action` it answered, at `now` (as [`retry_core::feed_budget`]
    /// reads them). Returns the event to send back when the action is
    /// [`Action::Withdraw`] ([`Event::Granted`] or [`Event::Refused`]), and
    /// `None` otherwise.
    fn feed(
        &self,
        machine: &RetryMachine<&RetryPolicy>,
        event: Event,
        action: Action,
        now: Instant,
    ) -> Option<Event>;

    /// Tells the budget about one step of a hedged call: the `event` sent to a
    /// hedge machine and the `action` it answered, at `now` (as
    /// [`retry_core::feed_hedge_budget`] reads them). Returns the event to send
    /// back when the action is [`HedgeAction::Withdraw`] ([`HedgeEvent::Granted`]
    /// or [`HedgeEvent::Refused`]), and `None` otherwise.
    fn feed_hedge(
        &self,
        event: HedgeEvent,
        action: HedgeAction,
        now: Instant,
    ) -> Option<HedgeEvent>;
}

impl<B: Budget + ?Sized> Budget for Arc<B> {
    fn feed(
        &self,
        machine: &RetryMachine<&RetryPolicy>,
        event: Event,
        action: Action,
        now: Instant,
    ) -> Option<Event> {
        (**self).feed(machine, event, action, now)
    }

    fn feed_hedge(
        &self,
        event: HedgeEvent,
        action: HedgeAction,
        now: Instant,
    ) -> Option<HedgeEvent> {
        (**self).feed_hedge(event, action, now)
    }
}

/// A [`RetryBudget`] shared by every call holding a clone, from blocking threads
/// and async tasks alike: retries withdraw from it, successes refill it, and while
/// it is low, retries are refused while first attempts still run. Prevents retry
/// storms during an outage.
///
/// Clones share one budget (an `Arc` around a `std::sync::Mutex`); the lock is
/// held only for the core call, never across an `.await`, while an operation runs
/// or while a delay is slept. Time is `std::time::Instant`; the budget keeps its
/// own time origin, set by its first use, so calls that start at different moments
/// agree on the time (a windowed budget depends on it).
///
/// Give it to calls with the adapters' `Retry::budget`, and build their policy
/// with `use_retry_budget(true)` so that the machine asks it before each retry.
/// (Without that, calls still report their attempts to it, but never withdraw.)
///
/// An attempt abandoned by its driver (the operation panicked, its future was
/// dropped) is not reported: a withdrawal made for it stands, and no failure or
/// success is noted.
///
/// ```
/// use retry_core::{BudgetConfig, Tokens};
/// use retry_shared::SharedBudget;
///
/// let budget = SharedBudget::new(BudgetConfig::grpc(10, 0.1)?);
/// let for_another_thread = budget.clone();
/// assert_eq!(for_another_thread.tokens(), Tokens::from_whole(10));
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

    /// Shares an existing budget (one restored with [`RetryBudget::restore`],
    /// say). Its clock starts at its first use (use [`SharedBudget::restore`] to
    /// resume one saved with [`SharedBudget::save`] where it left off).
    #[must_use]
    pub fn from_budget(budget: RetryBudget) -> SharedBudget {
        SharedBudget::with_origin(budget, Origin::default())
    }

    fn with_origin(budget: RetryBudget, origin: Origin) -> SharedBudget {
        SharedBudget {
            inner: Arc::new(Mutex::new(BudgetCell { budget, origin })),
        }
    }

    /// The budget's state now, read from the system clock, as a [`Saved`]
    /// snapshot ([`SharedBudget::save_at`] with `Instant::now()`).
    #[must_use]
    pub fn save(&self) -> Saved<BudgetSnapshot> {
        self.save_at(Instant::now())
    }

    /// The budget's state at `now` as a [`Saved`] snapshot: what
    /// [`SharedBudget::restore`] resumes from, here or in another process.
    #[must_use]
    pub fn save_at(&self, now: Instant) -> Saved<BudgetSnapshot> {
        let mut cell = self.lock();
        let at = cell.origin.at(now);
        Saved {
            snapshot: cell.budget.snapshot(),
            at,
        }
    }

    /// A shared budget resumed now, read from the system clock, from `saved`
    /// ([`SharedBudget::restore_at`] with `Instant::now()`).
    ///
    /// # Errors
    /// As [`SharedBudget::restore_at`].
    pub fn restore(saved: &Saved<BudgetSnapshot>) -> Result<SharedBudget, SnapshotError> {
        SharedBudget::restore_at(saved, Instant::now())
    }

    /// A shared budget resumed at `now` from `saved` (checked and rebuilt by
    /// [`RetryBudget::restore`]), its clock set so that the moment it was saved
    /// is `now`: the deposits and withdrawals of a Finagle window age from there.
    ///
    /// # Errors
    /// The [`SnapshotError`] naming the field a corrupt or inconsistent snapshot
    /// gets wrong.
    pub fn restore_at(
        saved: &Saved<BudgetSnapshot>,
        now: Instant,
    ) -> Result<SharedBudget, SnapshotError> {
        let budget = RetryBudget::restore(&saved.snapshot)?;
        Ok(SharedBudget::with_origin(
            budget,
            Origin::resumed(saved.at, now),
        ))
    }

    /// The tokens in the bucket as of the latest step it was told.
    #[must_use]
    pub fn tokens(&self) -> Tokens {
        self.lock().budget.tokens()
    }

    /// A copy of the budget as it stands.
    #[must_use]
    pub fn snapshot(&self) -> RetryBudget {
        self.lock().budget
    }

    fn lock(&self) -> MutexGuard<'_, BudgetCell> {
        // The budget is a plain value updated by whole assignments in the core: a
        // panic elsewhere while the lock was held cannot leave it half-written.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Budget for SharedBudget {
    fn feed(
        &self,
        machine: &RetryMachine<&RetryPolicy>,
        event: Event,
        action: Action,
        now: Instant,
    ) -> Option<Event> {
        let mut cell = self.lock();
        let at = cell.origin.at(now);
        feed_budget(&mut cell.budget, machine, event, action, at)
    }

    fn feed_hedge(
        &self,
        event: HedgeEvent,
        action: HedgeAction,
        now: Instant,
    ) -> Option<HedgeEvent> {
        let mut cell = self.lock();
        let at = cell.origin.at(now);
        feed_hedge_budget(&mut cell.budget, event, action, at)
    }
}

impl fmt::Debug for SharedBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedBudget")
            .field("budget", &self.snapshot())
            .finish()
    }
}
