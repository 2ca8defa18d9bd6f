//! [`CancelSignal`]: a sticky "stop" that any number of calls wait on.

use core::cell::RefCell;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_sync::blocking_mutex::Mutex;

/// A cancellation signal for retried calls, set from a task or an interrupt
/// handler and seen by every call that was given it.
///
/// Once [`cancel`](CancelSignal::cancel)led it stays cancelled until
/// [`reset`](CancelSignal::reset): a call in a sleep or an attempt ends at once
/// with `retry.cancelled` (the attempt in flight is dropped), and a call that
/// starts afterwards gives up before its first attempt.
///
/// embassy-sync's `Signal` is consumed by the one task that waits on it, so it
/// cannot stop several calls or stay set; this type keeps a flag and the wakers of
/// the waiting tasks behind one of embassy-sync's blocking mutexes (held for a few
/// instructions, never across an await).
///
/// # Waiters
/// `WAITERS` is how many tasks can wait on the signal at once (calls on one task
/// share a slot; a slot is freed when its calls end). A call that finds every
/// slot taken does not wait on the signal: it sees the cancel at its next own
/// wake-up (the end of its sleep or of its attempt) and starts no attempt after
/// it. Nothing spins and no cancel is lost; size `WAITERS` to the tasks that
/// retry concurrently for the cancel to be immediate everywhere.
///
/// `M` is the mutex: `CriticalSectionRawMutex` to cancel from an interrupt
/// handler or another core, `ThreadModeRawMutex` when only thread-mode code
/// touches it (it asserts, with a panic, that it is locked in thread mode). The
/// constructor is `const`, so it can be a `static`:
///
/// ```
/// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
/// use retry_embassy::CancelSignal;
///
/// static STOP: CancelSignal<CriticalSectionRawMutex> = CancelSignal::new();
///
/// assert!(!STOP.is_cancelled());
/// STOP.cancel(); // e.g. from a button's interrupt handler
/// assert!(STOP.is_cancelled());
/// STOP.reset();
/// assert!(!STOP.is_cancelled());
/// ```
pub struct CancelSignal<M: RawMutex, const WAITERS: usize = 4> {
    inner: Mutex<M, RefCell<State<WAITERS>>>,
}

struct State<const WAITERS: usize> {
    cancelled: bool,
    /// Bumped by every cancel, which empties the slots: a registration from an
    /// older generation no longer owns its slot.
    generation: u32,
    slots: [Slot; WAITERS],
}

#[derive(Default)]
struct Slot {
    waker: Option<Waker>,
    /// How many waiting futures share this waker (calls joined on one task).
    waiting: u32,
}

/// Where a waiting future's waker is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    slot: usize,
    generation: u32,
}

impl<M: RawMutex, const WAITERS: usize> CancelSignal<M, WAITERS> {
    /// A signal that is not cancelled.
    #[must_use]
    pub const fn new() -> Self {
        CancelSignal {
            inner: Mutex::new(RefCell::new(State {
                cancelled: false,
                generation: 0,
                slots: [const {
                    Slot {
                        waker: None,
                        waiting: 0,
                    }
                }; WAITERS],
            })),
        }
    }

    /// Cancels every call waiting on this signal, and every later one until
    /// [`reset`](CancelSignal::reset).
    pub fn cancel(&self) {
        let taken = self.with(|state| {
            state.cancelled = true;
            state.generation = state.generation.wrapping_add(1);
            core::array::from_fn::<_, WAITERS, _>(|i| {
                state
                    .slots
                    .get_mut(i)
                    .and_then(|slot| core::mem::take(slot).waker)
            })
        });
        // Woken outside the lock.
        for waker in taken.into_iter().flatten().flatten() {
            waker.wake();
        }
    }

    /// Whether the signal is cancelled.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.with(|state| state.cancelled).unwrap_or(false)
    }

    /// Clears the signal, so new calls run again. Calls already cancelled stay
    /// cancelled.
    pub fn reset(&self) {
        let _ = self.with(|state| state.cancelled = false);
    }

    /// Completes once the signal is cancelled (for code of the caller's own that
    /// wants to stop with the calls).
    pub fn cancelled(&self) -> impl Future<Output = ()> + '_ {
        Waiting::on(Some(self))
    }

    /// Runs `f` on the state under the mutex. The state is borrowed only here and
    /// `f` never calls out (wakers are woken after the lock is released), so the
    /// borrow cannot fail; were it to, `None`, and no panic.
    fn with<U>(&self, f: impl FnOnce(&mut State<WAITERS>) -> U) -> Option<U> {
        self.inner
            .lock(|cell| cell.try_borrow_mut().ok().map(|mut state| f(&mut state)))
    }
}

impl<const WAITERS: usize> State<WAITERS> {
    fn owns(&self, r: Registration, waker: &Waker) -> bool {
        r.generation == self.generation
            && self
                .slots
                .get(r.slot)
                .and_then(|s| s.waker.as_ref())
                .is_some_and(|w| w.will_wake(waker))
    }

    fn release(&mut self, r: Registration) {
        if r.generation != self.generation {
            return;
        }
        if let Some(slot) = self.slots.get_mut(r.slot) {
            slot.waiting = slot.waiting.saturating_sub(1);
            if slot.waiting == 0 {
                slot.waker = None;
            }
        }
    }

    /// Keeps `waker` in a slot: the one already holding it, or a free one.
    /// `None` when every slot holds another task's waker.
    fn register(&mut self, waker: &Waker) -> Option<Registration> {
        let generation = self.generation;
        let shared = self
            .slots
            .iter()
            .position(|s| s.waker.as_ref().is_some_and(|w| w.will_wake(waker)));
        let index = shared.or_else(|| self.slots.iter().position(|s| s.waker.is_none()))?;
        let slot = self.slots.get_mut(index)?;
        if slot.waker.is_none() {
            slot.waker = Some(waker.clone());
        }
        slot.waiting = slot.waiting.saturating_add(1);
        Some(Registration {
            slot: index,
            generation,
        })
    }
}

impl<M: RawMutex, const WAITERS: usize> Default for CancelSignal<M, WAITERS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: RawMutex, const WAITERS: usize> fmt::Debug for CancelSignal<M, WAITERS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelSignal")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// What the driver needs from a cancellation signal, whatever its mutex and
/// number of slots.
pub(crate) trait Cancellation {
    fn is_cancelled(&self) -> bool;
    /// Ready if cancelled; otherwise keeps (or refreshes) `registration` for the
    /// task of `cx`, or leaves it `None` when no slot is free.
    fn poll_cancelled(
        &self,
        cx: &mut Context<'_>,
        registration: &mut Option<Registration>,
    ) -> Poll<()>;
    /// The waiting future is gone: free its share of the slot.
    fn release(&self, registration: Registration);
}

impl<M: RawMutex, const WAITERS: usize> Cancellation for CancelSignal<M, WAITERS> {
    fn is_cancelled(&self) -> bool {
        CancelSignal::is_cancelled(self)
    }

    fn poll_cancelled(
        &self,
        cx: &mut Context<'_>,
        registration: &mut Option<Registration>,
    ) -> Poll<()> {
        let waker = cx.waker();
        let polled = self.with(|state| {
            if state.cancelled {
                if let Some(r) = registration.take() {
                    state.release(r);
                }
                return Poll::Ready(());
            }
            match *registration {
                Some(r) if state.owns(r, waker) => {}
                _ => {
                    if let Some(r) = registration.take() {
                        state.release(r);
                    }
                    *registration = state.register(waker);
                }
            }
            Poll::Pending
        });
        // The state cannot be borrowed twice (see `with`); should it be, this
        // poll is simply not registered, as when every slot is taken.
        polled.unwrap_or(Poll::Pending)
    }

    fn release(&self, registration: Registration) {
        let _ = self.with(|state| state.release(registration));
    }
}

/// Waits for a cancel; frees its slot when dropped.
pub(crate) struct Waiting<'a, C: Cancellation + ?Sized> {
    signal: Option<&'a C>,
    registration: Option<Registration>,
}

impl<'a, C: Cancellation + ?Sized> Waiting<'a, C> {
    /// Waits on `signal`; with none, never completes.
    pub(crate) fn on(signal: Option<&'a C>) -> Self {
        Waiting {
            signal,
            registration: None,
        }
    }
}

impl<C: Cancellation + ?Sized> Future for Waiting<'_, C> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        match this.signal {
            Some(signal) => signal.poll_cancelled(cx, &mut this.registration),
            None => Poll::Pending,
        }
    }
}

impl<C: Cancellation + ?Sized> Drop for Waiting<'_, C> {
    fn drop(&mut self) {
        if let (Some(signal), Some(r)) = (self.signal, self.registration.take()) {
            signal.release(r);
        }
    }
}
