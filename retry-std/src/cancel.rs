//! [`CancelToken`]: a flag any thread can trip to stop a retrying call.

use core::time::Duration;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// A cancellation flag shared between the thread running a call and any thread
/// that wants to stop it.
///
/// Clones share one flag. [`CancelToken::cancel`] sets it for good and wakes every
/// thread sleeping on it at once: a retry waiting out its delay returns without
/// waiting for the delay to end. The driver checks the flag before every attempt
/// and before every delay, so no attempt starts once the token is tripped. An
/// attempt already running is not interrupted (blocking code cannot be), but the
/// operation can look at [`AttemptContext::cancel_token`](crate::AttemptContext::cancel_token)
/// to stop early on its own.
///
/// ```
/// use retry_std::CancelToken;
///
/// let token = CancelToken::new();
/// let other = token.clone();
/// std::thread::spawn(move || other.cancel()).join().unwrap();
/// assert!(token.is_cancelled());
/// ```
#[derive(Clone, Debug)]
pub struct CancelToken {
    /// `None` for a token that can never be tripped (no allocation).
    inner: Option<Arc<Inner>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken {
            inner: Some(Arc::default()),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    cancelled: Mutex<bool>,
    woken: Condvar,
}

/// How a [`CancelToken::wait_timeout`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Waited {
    /// The whole timeout passed without cancellation.
    TimedOut,
    /// The token was (or already had been) cancelled.
    Cancelled,
}

impl CancelToken {
    /// A token that is not cancelled.
    #[must_use]
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// A token that can never be tripped: what a call without a token of its own
    /// uses, so that it costs no allocation. [`CancelToken::cancel`] on it does
    /// nothing, and [`CancelToken::wait_timeout`] on it simply sleeps.
    #[must_use]
    pub const fn never() -> CancelToken {
        CancelToken { inner: None }
    }

    /// Whether this token can be tripped at all (it is not [`CancelToken::never`]).
    #[must_use]
    pub const fn can_cancel(&self) -> bool {
        self.inner.is_some()
    }

    /// Trips the token: every clone sees it cancelled from now on, and every
    /// thread waiting in [`CancelToken::wait_timeout`] wakes at once. Calling it
    /// again does nothing.
    pub fn cancel(&self) {
        let Some(inner) = &self.inner else { return };
        let mut cancelled = inner
            .cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *cancelled = true;
        drop(cancelled);
        inner.woken.notify_all();
    }

    /// Whether the token has been tripped.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.inner.as_ref().is_some_and(|inner| {
            *inner
                .cancelled
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        })
    }

    /// Blocks the current thread for `timeout`, or until the token is cancelled,
    /// whichever comes first. Waits on a condition variable: no polling, and a
    /// spurious wake-up never ends the wait early.
    pub fn wait_timeout(&self, timeout: Duration) -> Waited {
        let Some(inner) = &self.inner else {
            std::thread::sleep(timeout);
            return Waited::TimedOut;
        };
        let guard = inner
            .cancelled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = inner
            .woken
            .wait_timeout_while(guard, timeout, |cancelled| !*cancelled)
            .unwrap_or_else(PoisonError::into_inner);
        if *guard {
            Waited::Cancelled
        } else {
            Waited::TimedOut
        }
    }
}
