//! The deadline rule: when an attempt with a deadline has timed out. One rule,
//! followed by every driver (the simulator, the blocking, tokio and embassy
//! adapters), so the same script gives the same timeline in all of them.

use crate::time::Instant;

/// Whether an attempt whose outcome arrives at `ended` has timed out, given its
/// `deadline` (from [`Action::Attempt`](crate::Action::Attempt)).
///
/// The deadline is the first instant at which the attempt has run out of time:
/// an outcome that arrives strictly before it counts, one that arrives at the
/// deadline or later is a timeout ([`Event::TimedOut`](crate::Event::TimedOut)).
/// A tie goes to the timeout. An attempt with no deadline never times out.
///
/// Why the tie goes this way: a driver that stops attempts at their deadline can
/// always apply it (the timer fired, or the outcome came in and the clock it reads
/// afterwards is at or past the deadline), however its runtime orders two wake-ups
/// due at the same instant; the opposite rule would depend on that order.
///
/// A driver that cannot stop an attempt (a blocking one) follows the rule for
/// failures; a success that it receives late is the operation's own doing, and
/// such a driver may keep it rather than repeat work that has taken effect (the
/// blocking adapter does, and says so).
///
/// ```
/// use retry_core::{attempt_timed_out, Instant};
/// let deadline = Some(Instant::from_millis(100));
/// assert!(!attempt_timed_out(deadline, Instant::from_millis(99)));
/// assert!(attempt_timed_out(deadline, Instant::from_millis(100)));
/// assert!(attempt_timed_out(deadline, Instant::from_millis(101)));
/// assert!(!attempt_timed_out(None, Instant::MAX));
/// ```
#[must_use]
#[inline]
pub fn attempt_timed_out(deadline: Option<Instant>, ended: Instant) -> bool {
    match deadline {
        Some(deadline) => ended >= deadline,
        None => false,
    }
}
