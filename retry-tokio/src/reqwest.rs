//! `reqwest` in one line (feature `reqwest`): a request sent through [`send`]
//! comes back as the response, or as an [`Error`] that already carries the
//! core's verdict on it, so a retrier needs only [`Error::failure`] as its
//! classifier.
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
//! use retry_core::Preset;
//! use retry_tokio::{reqwest::{send, Error}, Retry};
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
//! let retry = Retry::new(Preset::http_client().policy()).classify(Error::failure);
//! let done = retry.call(|_attempt| send(client.get(&url))).await?;
//! assert_eq!(done.attempts, 2); // a 503, then the answer
//! assert_eq!(done.value.text().await?, "items");
//! # Ok(())
//! # }
//! ```
//!
//! A call that gives up on a response (a 400, or a 503 after the last retry)
//! keeps it in its error: `err.into_last_error()` gives the [`Error`], and
//! [`Error::into_response`] the response with its body.

use core::fmt;

use retry_core::{Failure, FailureKind, HttpClassifier};

use crate::http::{method, retry_headers, unix_time};

/// What a request sent through [`send`] or [`classify`] failed with: a response
/// whose status is a failure, or an error with no response. Either way it
/// carries the core's verdict ([`Error::failure`]).
#[derive(Debug)]
pub enum Error {
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

impl Error {
    /// The core's verdict: the classifier for [`Retry::classify`](crate::Retry::classify).
    #[must_use]
    pub fn failure(&self) -> Failure {
        match self {
            Error::Status { failure, .. } | Error::Transport { failure, .. } => *failure,
        }
    }

    /// The response's status, if the server answered.
    #[must_use]
    pub fn status(&self) -> Option<http::StatusCode> {
        match self {
            Error::Status { response, .. } => Some(response.status()),
            Error::Transport { error, .. } => error.status(),
        }
    }

    /// The response, if the server answered (to read its body).
    #[must_use]
    pub fn into_response(self) -> Option<reqwest::Response> {
        match self {
            Error::Status { response, .. } => Some(*response),
            Error::Transport { .. } => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Status { response, .. } => {
                write!(
                    f,
                    "HTTP status {} from {}",
                    response.status(),
                    response.url()
                )
            }
            Error::Transport { error, .. } => fmt::Display::fmt(error, f),
        }
    }
}

impl core::error::Error for Error {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Error::Status { .. } => None,
            Error::Transport { error, .. } => Some(error),
        }
    }
}

/// A reqwest error for a request with method `method`, under
/// [`HttpClassifier::DEFAULT`]: a failed connect sent nothing (kind
/// [`FailureKind::NotSent`], always retryable); a timeout (kind
/// [`FailureKind::Timeout`]) or a connection or body error after the request may
/// have gone out (kind [`FailureKind::Connection`]) is retryable for methods safe
/// to replay; an error made from a status (`error_for_status`) is judged by the
/// status; a request that could not be built, or a redirect loop, is permanent.
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
    let method = method(http_method);
    if error.is_connect() {
        classifier.classify_connection_error(method, true)
    } else if error.is_timeout() {
        classifier.classify_timeout(method)
    } else if let Some(status) = error.status() {
        let status = status.as_u16();
        classifier
            .classify_status_at(status, retry_core::RetryHeaders::default(), unix_time())
            .unwrap_or_else(|| Failure::permanent().with_kind(FailureKind::Status(status)))
    } else if error.is_request() || error.is_body() || error.is_decode() {
        classifier.classify_connection_error(method, false)
    } else {
        Failure::permanent()
    }
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
/// response if it succeeded, else an [`Error`] carrying the verdict.
///
/// # Errors
/// [`Error::Status`] for a response of 400 and up, [`Error::Transport`] for an
/// error.
pub fn classify(
    result: Result<reqwest::Response, reqwest::Error>,
    method: &http::Method,
) -> Result<reqwest::Response, Error> {
    classify_with(&HttpClassifier::DEFAULT, result, method)
}

/// [`classify`] under `classifier`.
///
/// # Errors
/// As [`classify`].
pub fn classify_with(
    classifier: &HttpClassifier,
    result: Result<reqwest::Response, reqwest::Error>,
    method: &http::Method,
) -> Result<reqwest::Response, Error> {
    match result {
        Ok(response) => match classify_response_with(classifier, &response) {
            None => Ok(response),
            Some(failure) => Err(Error::Status {
                response: Box::new(response),
                failure,
            }),
        },
        Err(error) => {
            let failure = classify_error_with(classifier, &error, method);
            Err(Error::Transport { error, failure })
        }
    }
}

/// Sends `request` and judges the outcome with [`classify`]: the operation of a
/// retried reqwest call (build the request inside the closure, so each attempt
/// sends a fresh one).
///
/// # Errors
/// As [`classify`]; a request that cannot be built is a permanent
/// [`Error::Transport`].
pub async fn send(request: reqwest::RequestBuilder) -> Result<reqwest::Response, Error> {
    let (client, request) = request.build_split();
    match request {
        Ok(request) => {
            let method = request.method().clone();
            classify(client.execute(request).await, &method)
        }
        Err(error) => Err(Error::Transport {
            error,
            failure: Failure::permanent(),
        }),
    }
}
