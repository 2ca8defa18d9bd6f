//! `reqwest` in one line (feature `reqwest`): a request sent through [`send`]
//! comes back as a [`Reply`] (the response, which remembers the request's
//! method), or as a [`RequestError`] that already carries the core's verdict on
//! it, so a retrier needs only [`RequestError::failure`] as its classifier.
//! Reading the body inside the retried operation (`send(…).await?.text().await`)
//! judges a body that fails half-way the same way: retried for a GET, never
//! replayed for a POST (the server has acted on it).
//!
//! Every decision is the core's [`HttpClassifier`]: statuses (408, 429 and 5xx
//! retry; other statuses from 400 up are permanent), the retry headers
//! (`retry-after-ms`, then `Retry-After` in seconds or as an HTTP date read
//! against the wall clock to the nanosecond, then gRPC pushback), and the
//! request's method for transport errors: a connection that could not be made
//! sent nothing and is always retried; a timeout or a connection lost after the
//! request may have gone out is retried only for methods safe to replay (GET,
//! HEAD, OPTIONS), never for a POST.
//!
//! The shortest correct client:
//!
//! ```
//! use retry_tokio::reqwest_call::{send, RequestError};
//! use retry_tokio::{Preset, Retry};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // A server on 127.0.0.1 that is busy once, then answers.
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let url = format!("http://{}/items", listener.local_addr()?);
//! # tokio::spawn(async move {
//! #     use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
//! #     for status in ["503 Service Unavailable", "200 OK"] {
//! #         let (mut socket, _) = listener.accept().await.unwrap();
//! #         let mut request = [0u8; 1024];
//! #         let _ = socket.read(&mut request).await;
//! #         let reply = format!("HTTP/1.1 {status}\r\ncontent-length: 5\r\nconnection: close\r\n\r\nitems");
//! #         socket.write_all(reply.as_bytes()).await.unwrap();
//! #     }
//! # });
//! let client = reqwest::Client::new();
//! // 3 attempts, 500 ms doubling, Retry-After honoured, GETs replayed, POSTs not.
//! let retry = Retry::new(Preset::http_client().policy()).classify(RequestError::failure);
//! let done = retry
//!     .call(|_attempt| async { send(client.get(&url)).await?.text().await })
//!     .await?;
//! assert_eq!(done.attempts, 2); // a 503, then the answer
//! assert_eq!(done.value, "items");
//! # Ok(())
//! # }
//! ```
//!
//! A call that gives up on a response (a 400, or a 503 after the last retry)
//! keeps it in its error: `err.into_last_error()` gives the [`RequestError`],
//! and [`RequestError::into_response`] the response with its body.

use core::fmt;
use core::ops::Deref;

use retry_core::{Failure, FailureKind, HttpClassifier, Method};

use crate::http::{method, retry_headers, unix_time};

/// What a request sent through [`send`] or [`classify`] failed with: a response
/// whose status is a failure, or an error with no usable response (the
/// connection, the request, or reading the body failed). Either way it carries
/// the core's verdict ([`RequestError::failure`]).
#[derive(Debug)]
pub enum RequestError {
    /// The server answered with a failing status (400 and up).
    Status {
        /// The response, body unread (boxed: a `Result` carrying this error
        /// stays small).
        response: Box<reqwest::Response>,
        /// The core's verdict on its status and retry headers.
        failure: Failure,
    },
    /// No usable response: the connection failed, the request timed out, the
    /// body could not be read, or the request could not be built.
    Transport {
        /// reqwest's error.
        error: reqwest::Error,
        /// The core's verdict, for the request's method.
        failure: Failure,
    },
}

impl RequestError {
    /// The core's verdict: the classifier for [`Retry::classify`](crate::Retry::classify).
    #[must_use]
    pub fn failure(&self) -> Failure {
        match self {
            RequestError::Status { failure, .. } | RequestError::Transport { failure, .. } => {
                *failure
            }
        }
    }

    /// The response's status, if the server answered.
    #[must_use]
    pub fn status(&self) -> Option<http::StatusCode> {
        match self {
            RequestError::Status { response, .. } => Some(response.status()),
            RequestError::Transport { error, .. } => error.status(),
        }
    }

    /// The response, if the server answered with a failing status (to read
    /// its body).
    #[must_use]
    pub fn into_response(self) -> Option<reqwest::Response> {
        match self {
            RequestError::Status { response, .. } => Some(*response),
            RequestError::Transport { .. } => None,
        }
    }
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Status { response, .. } => {
                write!(
                    f,
                    "HTTP status {} from {}",
                    response.status(),
                    response.url()
                )
            }
            RequestError::Transport { error, .. } => fmt::Display::fmt(error, f),
        }
    }
}

impl core::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            RequestError::Status { .. } => None,
            RequestError::Transport { error, .. } => Some(error),
        }
    }
}

/// A successful response to a request sent through [`send`], which remembers
/// the request's method so that reading its body judges a failure the way the
/// request itself is judged: [`text`](Reply::text), [`bytes`](Reply::bytes)
/// (and `json`, with the `json` feature) fail with a [`RequestError`] whose
/// verdict is the core's for a connection lost after the request went out:
/// retryable for a GET, HEAD or OPTIONS, permanent for a POST (the server has
/// acted on it; replaying it may act twice). Everything else of the response
/// (status, headers, URL) is read through `Deref`.
#[derive(Debug)]
pub struct Reply {
    response: reqwest::Response,
    method: Method,
    classifier: HttpClassifier,
}

impl Reply {
    /// The request's method, as the core names it.
    #[must_use]
    pub const fn method(&self) -> Method {
        self.method
    }

    /// The response itself.
    #[must_use]
    pub fn into_inner(self) -> reqwest::Response {
        self.response
    }

    /// The body as text.
    ///
    /// # Errors
    /// A [`RequestError::Transport`] judged for the request's method when the
    /// body cannot be read or decoded.
    pub async fn text(self) -> Result<String, RequestError> {
        let judge = self.body_judge();
        self.response.text().await.map_err(judge)
    }

    /// The body's bytes.
    ///
    /// # Errors
    /// As [`Reply::text`].
    pub async fn bytes(self) -> Result<bytes::Bytes, RequestError> {
        let judge = self.body_judge();
        self.response.bytes().await.map_err(judge)
    }

    /// The body read as JSON into `T` (feature `json`). A body that is not
    /// valid JSON for `T` is permanent: reading it again gives the same
    /// bytes, and for a POST the server has acted.
    ///
    /// # Errors
    /// As [`Reply::text`]; a decoding error is permanent.
    #[cfg(feature = "json")]
    #[cfg_attr(docsrs, doc(cfg(feature = "json")))]
    pub async fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, RequestError> {
        let judge = self.body_judge();
        self.response.json::<T>().await.map_err(judge)
    }

    /// Turns a body error into a [`RequestError`] with the verdict for this
    /// request.
    fn body_judge(&self) -> impl FnOnce(reqwest::Error) -> RequestError {
        let (classifier, method) = (self.classifier, self.method);
        move |error| {
            let failure = judge_error(&classifier, &error, method);
            RequestError::Transport { error, failure }
        }
    }
}

impl Deref for Reply {
    type Target = reqwest::Response;

    fn deref(&self) -> &reqwest::Response {
        &self.response
    }
}

/// A reqwest error for a request with method `method`, under
/// [`HttpClassifier::DEFAULT`]: a failed connect sent nothing (kind
/// [`FailureKind::NotSent`], always retryable); a timeout (kind
/// [`FailureKind::Timeout`]) or a connection or body error after the request may
/// have gone out (kind [`FailureKind::Connection`]) is retryable for methods safe
/// to replay; an error made from a status (`error_for_status`) is judged by the
/// status; a body that could not be decoded (not valid JSON, say), a request
/// that could not be built, or a redirect loop, is permanent.
#[must_use]
pub fn classify_error(error: &reqwest::Error, method: &http::Method) -> Failure {
    classify_error_with(&HttpClassifier::DEFAULT, error, method)
}

/// [`classify_error`] under `classifier`.
#[must_use]
pub fn classify_error_with(
    classifier: &HttpClassifier,
    error: &reqwest::Error,
    http_method: &http::Method,
) -> Failure {
    judge_error(classifier, error, method(http_method))
}

/// [`classify_error_with`] for the core's [`Method`].
pub(crate) fn judge_error(
    classifier: &HttpClassifier,
    error: &reqwest::Error,
    method: Method,
) -> Failure {
    if error.is_connect() {
        classifier.classify_connection_error(method, true)
    } else if error.is_timeout() {
        classifier.classify_timeout(method)
    } else if let Some(status) = error.status() {
        let status = status.as_u16();
        classifier
            .classify_status_at(status, retry_core::RetryHeaders::default(), unix_time())
            .unwrap_or_else(|| Failure::permanent().with_kind(FailureKind::Status(status)))
    } else if error.is_decode() && !lost_in_transit(error) {
        // The bytes arrived, and will read the same again.
        Failure::permanent()
    } else if error.is_request() || error.is_body() || error.is_decode() {
        classifier.classify_connection_error(method, false)
    } else {
        Failure::permanent()
    }
}

/// Whether a decoding error came from the body failing in transit (reqwest
/// reports a body that broke off while being read as a decoding error whose
/// source is the body's error), not from bytes that do not decode.
fn lost_in_transit(error: &reqwest::Error) -> bool {
    let mut source = core::error::Error::source(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<reqwest::Error>()
            .is_some_and(|e| e.is_body() || e.is_timeout() || e.is_connect())
            || cause.is::<std::io::Error>()
        {
            return true;
        }
        source = cause.source();
    }
    false
}

/// A response under [`HttpClassifier::DEFAULT`]: `None` for a success (below
/// 400), else the failure with its server hint.
#[must_use]
pub fn classify_response(response: &reqwest::Response) -> Option<Failure> {
    classify_response_with(&HttpClassifier::DEFAULT, response)
}

/// [`classify_response`] under `classifier`.
#[must_use]
pub fn classify_response_with(
    classifier: &HttpClassifier,
    response: &reqwest::Response,
) -> Option<Failure> {
    classifier.classify_status_at(
        response.status().as_u16(),
        retry_headers(response.headers()),
        unix_time(),
    )
}

/// The outcome of a request with method `method`, judged in one call: the
/// response if it succeeded, else a [`RequestError`] carrying the verdict.
///
/// # Errors
/// [`RequestError::Status`] for a response of 400 and up,
/// [`RequestError::Transport`] for an error.
pub fn classify(
    result: Result<reqwest::Response, reqwest::Error>,
    method: &http::Method,
) -> Result<Reply, RequestError> {
    classify_with(&HttpClassifier::DEFAULT, result, method)
}

/// [`classify`] under `classifier`.
///
/// # Errors
/// As [`classify`].
pub fn classify_with(
    classifier: &HttpClassifier,
    result: Result<reqwest::Response, reqwest::Error>,
    http_method: &http::Method,
) -> Result<Reply, RequestError> {
    let method = method(http_method);
    match result {
        Ok(response) => match classify_response_with(classifier, &response) {
            None => Ok(Reply {
                response,
                method,
                classifier: *classifier,
            }),
            Some(failure) => Err(RequestError::Status {
                response: Box::new(response),
                failure,
            }),
        },
        Err(error) => {
            let failure = judge_error(classifier, &error, method);
            Err(RequestError::Transport { error, failure })
        }
    }
}

/// Sends `request` and judges the outcome with [`classify`]: the operation of a
/// retried reqwest call (build the request inside the closure, so each attempt
/// sends a fresh one). Read the body from the [`Reply`] inside the operation
/// too, and a body that fails half-way is judged for the request's method.
///
/// # Errors
/// As [`classify`]; a request that cannot be built is a permanent
/// [`RequestError::Transport`].
pub async fn send(request: reqwest::RequestBuilder) -> Result<Reply, RequestError> {
    let (client, request) = request.build_split();
    match request {
        Ok(request) => {
            let method = request.method().clone();
            classify(client.execute(request).await, &method)
        }
        Err(error) => Err(RequestError::Transport {
            error,
            failure: Failure::permanent(),
        }),
    }
}
