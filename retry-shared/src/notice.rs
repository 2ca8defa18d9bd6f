//! What the retry hook is told.

use core::time::Duration;

use retry_core::{Failure, SleepReason};

/// What the retry hook (`Retry::on_retry` in both adapters) is told after a
/// failed attempt, once a retry has been decided and before its delay starts.
#[derive(Debug)]
#[non_exhaustive]
pub struct RetryNotice<'a, E> {
    /// The number of the attempt that failed.
    pub attempt: u32,
    /// The number of the attempt that follows the delay (`attempt + 1`).
    pub next_attempt: u32,
    /// How long the driver will sleep before it; zero when the machine retries at
    /// once.
    pub delay: Duration,
    /// Where the delay came from; `None` when the machine retried at once without
    /// a sleep (the core does not say why a retry has no delay).
    pub reason: Option<SleepReason>,
    /// The error the failed attempt returned; `None` when it timed out without
    /// returning one (the async adapter stops waiting at the deadline), or when
    /// it returned a value that a response classifier judged a failure (a 503
    /// response through the tower retry layer: see `failure` for its status and
    /// hint).
    pub error: Option<&'a E>,
    /// How the failure was reported to the machine: the classifier's verdict, or
    /// a retryable failure of kind [`FailureKind::Timeout`](retry_core::FailureKind::Timeout)
    /// when the attempt timed out (the blocking adapter's attempt that returned
    /// its error at or after its deadline included).
    pub failure: Failure,
    pub(crate) timed_out: bool,
}

impl<E> RetryNotice<'_, E> {
    /// Whether the failed attempt was reported to the machine as timed out (it
    /// ran to its deadline) rather than as a failure the classifier judged.
    #[must_use]
    pub const fn timed_out(&self) -> bool {
        self.timed_out
    }
}
