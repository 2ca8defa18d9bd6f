//! [`CancelSignal`]: a sticky "stop" that any number of calls wait on.

use core::cell::RefCell;
use core::fmt;
use core::future::poll_fn;
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
/// up to `WAITERS` waiting calls behind one of embassy-sync's blocking mutexes
/// (held for a few instructions, never across an await). With more waiters than
/// that, registering one more wakes the others, which simply register again.
///
/// `M` is the mutex: `CriticalSectionRawMutex` to cancel from an interrupt
/// handler or another core, `ThreadModeRawMutex` or `NoopRawMutex` when only tasks
/// of one executor touch it. The constructor is `const`, so it can be a `static`:
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
    waiters: [Option<Waker>; WAITERS],
}

impl<M: RawMutex, const WAITERS: usize> CancelSignal<M, WAITERS> {
    /// A signal that is not cancelled.
    #[must_use]
    pub const fn new() -> Self {
        CancelSignal {
            inner: Mutex::new(RefCell::new(State {
                cancelled: false,
                waiters: [const { None }; WAITERS],
            })),
        }
    }

    /// Cancels every call waiting on this signal, and every later one until
    /// [`reset`](CancelSignal::reset).
    pub fn cancel(&self) {
        let waiting = self.with(|state| {
            state.cancelled = true;
            core::mem::replace(&mut state.waiters, [const { None }; WAITERS])
        });
        // Woken outside the lock.
        for waker in waiting.into_iter().flatten().flatten() {
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

    /// Completes once the signal is cancelled.
    pub async fn cancelled(&self) {
        poll_fn(|cx| self.poll_cancelled(cx)).await;
    }

    fn poll_cancelled(&self, cx: &mut Context<'_>) -> Poll<()> {
        let polled = self.with(|state| {
            if state.cancelled {
                return Poll::Ready(());
            }
            let waker = cx.waker();
            if state.waiters.iter().flatten().any(|w| w.will_wake(waker)) {
                return Poll::Pending;
            }
            if let Some(free) = state.waiters.iter_mut().find(|w| w.is_none()) {
                *free = Some(waker.clone());
                return Poll::Pending;
            }
            // Every slot taken: wake them all (they register again when polled)
            // and keep this one in the first slot.
            let mut mine = Some(waker.clone());
            for waiter in &mut state.waiters {
                if let Some(other) = core::mem::replace(waiter, mine.take()) {
                    other.wake();
                }
            }
            if mine.is_some() {
                // No slot at all (`WAITERS` is 0): poll again rather than never.
                waker.wake_by_ref();
            }
            Poll::Pending
        });
        polled.unwrap_or_else(|| {
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    /// Runs `f` on the state under the mutex. The state is borrowed only here and
    /// `f` never calls out (waking a task only schedules it), so the borrow
    /// cannot fail; were it to, `None`, and no panic.
    fn with<U>(&self, f: impl FnOnce(&mut State<WAITERS>) -> U) -> Option<U> {
        self.inner
            .lock(|cell| cell.try_borrow_mut().ok().map(|mut state| f(&mut state)))
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

/// What the driver needs from a cancellation signal, whatever its mutex.
pub(crate) trait Cancellation {
    fn is_cancelled(&self) -> bool;
    fn poll_cancelled(&self, cx: &mut Context<'_>) -> Poll<()>;
}

impl<M: RawMutex, const WAITERS: usize> Cancellation for CancelSignal<M, WAITERS> {
    fn is_cancelled(&self) -> bool {
        CancelSignal::is_cancelled(self)
    }
    fn poll_cancelled(&self, cx: &mut Context<'_>) -> Poll<()> {
        CancelSignal::poll_cancelled(self, cx)
    }
}
