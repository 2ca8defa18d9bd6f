//! Classifying HTTP outcomes into [`Failure`]s: statuses, retry headers,
//! connection errors and timeouts, with the method deciding what may be replayed.

use core::time::Duration;

use super::failure::{Failure, FailureKind};
use super::sets::{may_retry_connection_error, Idempotency, Method, StatusSet};
use crate::hint::{parse_grpc_pushback, Hint, Pushback, RetryHeaders};

/// Classifies HTTP outcomes (see [the rules](crate::behaviour#classifying-failures)): which statuses retry, and whether connection
/// errors and timeouts may be replayed for a method.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{HttpClassifier, Hint, Method, RetryHeaders};
///
/// let http = HttpClassifier::DEFAULT;
/// assert_eq!(http.classify_status(200, RetryHeaders::default(), 0), None);
/// let busy = http
///     .classify_status(503, RetryHeaders { retry_after: Some(b"3"), ..Default::default() }, 0)
///     .unwrap();
/// assert!(busy.is_retryable());
/// assert_eq!(busy.hint(), Some(Hint::RetryAfter(Duration::from_secs(3))));
/// assert!(!http.classify_status(404, RetryHeaders::default(), 0).unwrap().is_retryable());
/// // A POST that may have reached the server is not replayed; one never sent is.
/// assert!(!http.classify_connection_error(Method::Post, false).is_retryable());
/// assert!(http.classify_connection_error(Method::Post, true).is_retryable());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpClassifier {
    statuses: StatusSet,
    idempotency: Idempotency,
    replay_put_delete: bool,
}

impl Default for HttpClassifier {
    fn default() -> Self {
        HttpClassifier::DEFAULT
    }
}

impl HttpClassifier {
    /// Statuses 408, 429 and 500-599 retry; connection errors and timeouts are
    /// replayed for GET, HEAD and OPTIONS only.
    pub const DEFAULT: HttpClassifier = HttpClassifier {
        statuses: StatusSet::DEFAULT_RETRYABLE,
        idempotency: Idempotency::Auto,
        replay_put_delete: false,
    };

    /// The same classifier with another set of retryable statuses.
    #[must_use]
    pub const fn with_statuses(mut self, statuses: StatusSet) -> HttpClassifier {
        self.statuses = statuses;
        self
    }

    /// The same classifier with another idempotency rule.
    #[must_use]
    pub const fn with_idempotency(mut self, idempotency: Idempotency) -> HttpClassifier {
        self.idempotency = idempotency;
        self
    }

    /// Also replay PUT and DELETE (idempotent by the HTTP standard) under
    /// [`Idempotency::Auto`].
    #[must_use]
    pub const fn replay_put_delete(mut self, replay: bool) -> HttpClassifier {
        self.replay_put_delete = replay;
        self
    }

    /// The retryable statuses.
    #[must_use]
    pub const fn statuses(&self) -> StatusSet {
        self.statuses
    }

    /// The idempotency rule.
    #[must_use]
    pub const fn idempotency(&self) -> Idempotency {
        self.idempotency
    }

    /// A response: `None` for success (any status below 400), else a failure of
    /// kind [`FailureKind::Status`], retryable when the status is in the set and no
    /// pushback header says stop, carrying the headers' hint.
    ///
    /// `now_unix_secs` resolves a `Retry-After` date in whole seconds;
    /// [`classify_status_at`](Self::classify_status_at) reads it to the
    /// nanosecond.
    #[must_use]
    pub fn classify_status(
        &self,
        status: u16,
        headers: RetryHeaders<'_>,
        now_unix_secs: u64,
    ) -> Option<Failure> {
        self.classify_status_at(status, headers, Duration::from_secs(now_unix_secs))
    }

    /// Like [`classify_status`](Self::classify_status), with the wall clock's
    /// time since the Unix epoch to the nanosecond, so a `Retry-After` date is
    /// turned into a delay with sub-second precision.
    #[must_use]
    pub fn classify_status_at(
        &self,
        status: u16,
        headers: RetryHeaders<'_>,
        now_since_epoch: Duration,
    ) -> Option<Failure> {
        if status < 400 {
            return None;
        }
        let base = Failure::retryable().with_kind(FailureKind::Status(status));
        let failure = match headers.hint_at(now_since_epoch) {
            Err(()) => Failure::permanent().with_kind(FailureKind::Status(status)),
            Ok(Some(hint)) => base.with_hint(hint),
            Ok(None) => base,
        };
        if self.statuses.contains(status) {
            Some(failure)
        } else {
            Some(Failure::permanent().with_kind(FailureKind::Status(status)))
        }
    }

    /// A connection error for `method`: retryable when nothing was sent, or when
    /// the request may be replayed. Kind [`FailureKind::NotSent`] or
    /// [`FailureKind::Connection`].
    #[must_use]
    pub const fn classify_connection_error(&self, method: Method, nothing_sent: bool) -> Failure {
        let kind = if nothing_sent {
            FailureKind::NotSent
        } else {
            FailureKind::Connection
        };
        self.replayable(method, nothing_sent).with_kind(kind)
    }

    /// A timeout waiting for the response to `method`: retryable when the request
    /// may be replayed.
    #[must_use]
    pub const fn classify_timeout(&self, method: Method) -> Failure {
        self.replayable(method, false)
            .with_kind(FailureKind::Timeout)
    }

    const fn replayable(&self, method: Method, nothing_sent: bool) -> Failure {
        if may_retry_connection_error(
            self.idempotency,
            method,
            self.replay_put_delete,
            nothing_sent,
        ) {
            Failure::retryable()
        } else {
            Failure::permanent()
        }
    }
}

/// The verdict on a failed attempt, once the request it sent is known to be
/// replayable (`may_replay`: its method is safe to send twice, or the caller
/// marked it, as [`may_replay`](crate::may_replay) decides) or not.
///
/// A request that may not be replayed is sent again only when the failure
/// says the server cannot have acted on it, or asked for it again itself:
///
/// - nothing was sent ([`FailureKind::NotSent`]: no connection could be had);
/// - the server answered with a status the classifier retries (a 503, a 429:
///   [`FailureKind::Status`]) or with a retry hint;
///
/// Any other retryable failure (a connection lost or a timeout after the
/// request may have gone out, or an error of unknown kind: whatever failed, the
/// request's bytes may have reached the server) becomes permanent, so a POST
/// is never charged twice by a replay. An error of unknown kind is reported as
/// kind [`FailureKind::Connection`]: the exchange failed after the request was
/// handed over, and a circuit breaker counts it as a failure (see
/// [`breaker_outcome`](crate::breaker_outcome)). A replayable request, and a
/// failure already permanent, keep the verdict as it is.
///
/// ```
/// use retry_core::{replay_verdict, Failure, FailureKind};
/// let dropped = Failure::retryable().with_kind(FailureKind::Connection);
/// assert!(replay_verdict(dropped, true).is_retryable());
/// assert!(!replay_verdict(dropped, false).is_retryable());
/// // Refused before anything was sent, or a 503: sent again all the same.
/// let refused = Failure::retryable().with_kind(FailureKind::NotSent);
/// assert!(replay_verdict(refused, false).is_retryable());
/// let busy = Failure::retryable().with_kind(FailureKind::Status(503));
/// assert!(replay_verdict(busy, false).is_retryable());
/// // An error the classifier knows nothing about: it may have been sent.
/// let unknown = replay_verdict(Failure::retryable(), false);
/// assert_eq!((unknown.is_retryable(), unknown.kind()), (false, FailureKind::Connection));
/// ```
#[must_use]
pub const fn replay_verdict(failure: Failure, may_replay: bool) -> Failure {
    if may_replay || !failure.is_retryable() || failure.hint().is_some() {
        return failure;
    }
    match failure.kind() {
        FailureKind::NotSent | FailureKind::Status(_) => failure,
        FailureKind::Error => Failure::permanent().with_kind(FailureKind::Connection),
        kind => Failure::permanent().with_kind(kind),
    }
}

/// A failure built from a gRPC pushback value: retry after exactly that long (and
/// restart the curve), or stop.
#[must_use]
pub fn pushback_failure(value: &[u8]) -> Failure {
    match parse_grpc_pushback(value) {
        Pushback::RetryAfter(d) => Failure::retryable().with_hint(Hint::Pushback(d)),
        Pushback::Stop => Failure::permanent(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushback_wins_and_can_stop() {
        let http = HttpClassifier::DEFAULT;
        let headers = RetryHeaders {
            retry_after: Some(b"10"),
            grpc_pushback_ms: Some(b"250"),
            ..RetryHeaders::default()
        };
        let f = http.classify_status(503, headers, 0).unwrap();
        assert_eq!(f.hint(), Some(Hint::Pushback(Duration::from_millis(250))));
        let stop = RetryHeaders {
            grpc_pushback_ms: Some(b"-1"),
            ..RetryHeaders::default()
        };
        assert!(!http.classify_status(503, stop, 0).unwrap().is_retryable());
        assert!(!pushback_failure(b"x").is_retryable());
        assert_eq!(
            pushback_failure(b"5").hint(),
            Some(Hint::Pushback(Duration::from_millis(5)))
        );
    }

    #[test]
    fn statuses_follow_the_set() {
        let http = HttpClassifier::DEFAULT;
        let none = RetryHeaders::default();
        for s in [408, 429, 500, 503, 599] {
            assert!(
                http.classify_status(s, none, 0).unwrap().is_retryable(),
                "{s}"
            );
        }
        for s in [400, 401, 404, 409, 499, 600, u16::MAX] {
            assert!(
                !http.classify_status(s, none, 0).unwrap().is_retryable(),
                "{s}"
            );
        }
        for s in [0, 100, 200, 204, 301, 399] {
            assert_eq!(http.classify_status(s, none, 0), None, "{s}");
        }
    }

    #[test]
    fn idempotency_decides_connection_errors_and_timeouts() {
        let auto = HttpClassifier::DEFAULT;
        for m in [Method::Get, Method::Head, Method::Options] {
            assert!(auto.classify_timeout(m).is_retryable());
        }
        for m in [Method::Post, Method::Patch, Method::Put, Method::Delete] {
            assert!(!auto.classify_timeout(m).is_retryable());
        }
        let put = auto.replay_put_delete(true);
        assert!(put.classify_timeout(Method::Put).is_retryable());
        assert!(!put.classify_timeout(Method::Post).is_retryable());
        let always = auto.with_idempotency(Idempotency::Always);
        assert!(always
            .classify_connection_error(Method::Post, false)
            .is_retryable());
        let never = auto.with_idempotency(Idempotency::Never);
        assert!(!never
            .classify_connection_error(Method::Get, false)
            .is_retryable());
        assert!(never
            .classify_connection_error(Method::Post, true)
            .is_retryable());
        assert_eq!(
            never.classify_connection_error(Method::Post, true).kind(),
            FailureKind::NotSent
        );
    }
}
