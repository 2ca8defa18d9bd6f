//! Automatic transitions for a fleet breaker: a task on the connection's
//! runtime that wakes this member's breaker at its next deadline, so that its
//! state follows the time with no call (asked for with
//! [`FleetBreakerBuilder::automatic_transitions`](crate::FleetBreakerBuilder::automatic_transitions)).

use std::sync::{Arc, Weak};
use std::time::Instant;

use retry_core::Transition;
use tokio::sync::Notify;

/// The breaker's side of its timer task: told after every transition, and
/// once more when the breaker is dropped (so that a task waiting with nothing
/// due learns it is gone and ends).
pub(crate) struct Rearm(Arc<Notify>);

impl Rearm {
    /// A new pair: the breaker's side and the task's.
    pub(crate) fn new() -> (Rearm, Arc<Notify>) {
        let notify = Arc::new(Notify::new());
        (Rearm(Arc::clone(&notify)), notify)
    }

    pub(crate) fn notify(&self) {
        self.0.notify_one();
    }
}

impl Drop for Rearm {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// What the task needs of the breaker it wakes.
pub(crate) trait Timed: Send + Sync {
    /// The breaker's next deadline on the system clock, if it has one.
    fn next_deadline(&self) -> Option<Instant>;
    /// Wakes the breaker at `now` and reports the move it made, if any.
    fn wake_at(&self, now: Instant) -> Option<Transition>;
}

/// The timer task: sleep until the next deadline, or until a transition moves
/// it; wake the breaker then; end when it is gone.
pub(crate) async fn run<T: Timed>(breaker: Weak<T>, changed: Arc<Notify>) {
    loop {
        let next = match breaker.upgrade() {
            None => return,
            Some(b) => b.next_deadline(),
        };
        match next {
            None => changed.notified().await,
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {
                        if let Some(b) = breaker.upgrade() {
                            let _ = b.wake_at(Instant::now());
                        }
                    }
                    () = changed.notified() => {}
                }
            }
        }
    }
}
