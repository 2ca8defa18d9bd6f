//! HTTP classification in one line (feature `http`): reads the status and the
//! retry headers of an `http::Response` and asks the core's [`HttpClassifier`].
//!
//! Dates in `Retry-After` are turned into delays against the wall clock
//! ([`SystemTime`]), to the nanosecond: a date one second ahead of a clock at
//! `…:00.900` is a wait of 100 ms, not a whole second. Everything else is the
//! core's decision.
//!
//! ```
//! use http::{Response, StatusCode};
//! use retry_tokio::{http::classify_response, Retry};
//!
//! // An operation that returns non-2xx responses as its error:
//! let retry: Retry<Response<()>> = Retry::new(Default::default())
//!     .classify(retry_tokio::http::response_failure);
//!
//! let busy = Response::builder().status(503).header("retry-after", "2").body(()).unwrap();
//! assert!(classify_response(&busy).unwrap().is_retryable());
//! let missing = Response::builder().status(StatusCode::NOT_FOUND).body(()).unwrap();
//! assert!(!classify_response(&missing).unwrap().is_retryable());
//! # let _ = retry;
//! ```

use core::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use http::{HeaderMap, Response, StatusCode};
use retry_core::{Failure, FailureKind, HttpClassifier, Method, RetryHeaders};

/// The retry headers of `headers`: `retry-after-ms`, `Retry-After` and
/// `grpc-retry-pushback-ms`, as raw bytes.
#[must_use]
pub fn retry_headers(headers: &HeaderMap) -> RetryHeaders<'_> {
    let raw = |name: &str| headers.get(name).map(http::HeaderValue::as_bytes);
    RetryHeaders {
        retry_after_ms: raw("retry-after-ms"),
        retry_after: raw(http::header::RETRY_AFTER.as_str()),
        grpc_pushback_ms: raw("grpc-retry-pushback-ms"),
    }
}

/// Seconds since the Unix epoch on the wall clock (0 if the clock is before it).
#[must_use]
pub fn unix_now() -> u64 {
    unix_time().as_secs()
}

/// The wall clock's time since the Unix epoch, to the nanosecond (zero if the
/// clock is before it): what a `Retry-After` date is read against, so it is
/// turned into a delay with sub-second precision.
#[must_use]
pub fn unix_time() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
}

/// A status and its headers under [`HttpClassifier::DEFAULT`] (408, 429 and 5xx
/// retry): `None` for a success, else the failure with any server hint.
#[must_use]
pub fn classify_status(status: StatusCode, headers: &HeaderMap) -> Option<Failure> {
    classify_status_with(&HttpClassifier::DEFAULT, status, headers)
}

/// A status and its headers under `classifier`.
#[must_use]
pub fn classify_status_with(
    classifier: &HttpClassifier,
    status: StatusCode,
    headers: &HeaderMap,
) -> Option<Failure> {
    classifier.classify_status_at(status.as_u16(), retry_headers(headers), unix_time())
}

/// A response under [`HttpClassifier::DEFAULT`]: `None` for a success.
#[must_use]
pub fn classify_response<B>(response: &Response<B>) -> Option<Failure> {
    classify_status(response.status(), response.headers())
}

/// A response under `classifier`: `None` for a success.
#[must_use]
pub fn classify_response_with<B>(
    classifier: &HttpClassifier,
    response: &Response<B>,
) -> Option<Failure> {
    classify_status_with(classifier, response.status(), response.headers())
}

/// A classifier for [`Retry::classify`](crate::Retry::classify) when the
/// operation's error is the response itself: the core's verdict on it, and a
/// permanent failure for a response the core calls a success (an operation that
/// returned it as an error meant it).
#[must_use]
pub fn response_failure<B>(response: &Response<B>) -> Failure {
    classify_response(response).unwrap_or_else(|| {
        Failure::permanent().with_kind(FailureKind::Status(response.status().as_u16()))
    })
}

/// The core's [`Method`] for an `http::Method`, for
/// [`HttpClassifier::classify_connection_error`] and
/// [`HttpClassifier::classify_timeout`].
#[must_use]
pub fn method(method: &http::Method) -> Method {
    Method::parse(method.as_str().as_bytes())
}
