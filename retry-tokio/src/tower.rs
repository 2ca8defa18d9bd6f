//! Tower middleware (feature `tower`): [`RetryLayer`] retries a service's calls
//! under a [`Retry`], [`HedgeLayer`] hedges them under a [`Hedge`](crate::Hedge)
//! (in `tower/hedge.rs`), and [`BreakerLayer`] puts a [`SharedBreaker`](crate::SharedBreaker)
//! (or any other [`Breaker`]) in front of a service, failing fast with
//! [`BreakerServiceError::CircuitOpen`] while it is open.
//!
//! # What is sent twice
//! A layer that sends a request again (a retry, a hedge) first asks whether it
//! may: a [`ReplayRule`] reads the request ([`ByMethod`] by default: GET, HEAD
//! and OPTIONS may be sent twice, anything else only when the caller marks it),
//! and the core decides with it. [`HedgeLayer`] hedges only such requests
//! (the core's [`HedgePolicy::for_request`](retry_core::HedgePolicy::for_request));
//! everything else is sent once. [`RetryLayer`] retries a failure of any other
//! request only when the core's [`replay_verdict`]
//! says the server cannot have acted on it (nothing was sent) or asked for it
//! again (a 503, a 429): a POST whose connection dropped after it was sent is
//! not replayed. Mark a request that may be sent twice (it carries an
//! idempotency key, say) with the core's [`Idempotency::Always`] in an
//! `http::Request`'s extensions, or give the layer a rule
//! ([`ByMethod::or_when`], [`RetryLayer::idempotent_when`]). A request type
//! the layer cannot read (not an HTTP request) needs a rule: the layer will
//! not guess.
//!
//! # Judging responses and errors
//! Every layer judges errors *and* responses. A client service (a `reqwest`
//! client, a hyper client) answers a 503 with `Ok(response)`; give the layers a
//! [`ResponseClassifier`] (with the `http` feature, the ready [`HttpStatus`],
//! which reads the status and the retry headers through the core's
//! [`HttpClassifier`](retry_core::HttpClassifier)) and such a response is
//! retried (or, under [`HedgeLayer`], is a failed copy: the next copy goes out
//! at once, and the 503 never wins over a later 200), its `Retry-After`
//! honoured, and counted by the breaker as the core says (a retryable status
//! is a failure, a 404 is not). Errors are judged by an [`ErrorClassifier`],
//! told what the layer knows of the request ([`Replay`]); with the `reqwest`
//! feature [`ReqwestErrors`] is the core's judgement of `reqwest::Error`
//! (a failed connect sent nothing; a dropped connection or a timeout may have).
//!
//! # A reqwest client as a service
//! ```
//! use core::time::Duration;
//! use retry_tokio::tower::{HttpStatus, ReqwestErrors, RetryLayer, TryClone};
//! use retry_tokio::{Preset, Retry};
//! use tower::{ServiceBuilder, ServiceExt as _};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let url = format!("http://{}/charge", listener.local_addr()?);
//! # tokio::spawn(async move {
//! #     use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
//! #     let (mut socket, _) = listener.accept().await.unwrap();
//! #     let mut request = [0u8; 1024];
//! #     let _ = socket.read(&mut request).await;
//! #     let reply = "HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\ncharged";
//! #     socket.write_all(reply.as_bytes()).await.unwrap();
//! # });
//! let client = reqwest::Client::new();
//! let service = ServiceBuilder::new()
//!     .layer(
//!         RetryLayer::new(Retry::new(Preset::http_client().policy()))
//!             .recreate_with(TryClone) // reqwest::Request is not Clone
//!             .classify_responses(HttpStatus) // 408, 429, 5xx retried
//!             .classify_errors(ReqwestErrors), // a dropped POST is not
//!     )
//!     .service(client.clone());
//! let charge = client.post(&url).body("42").build()?;
//! let response = service.oneshot(charge).await?;
//! assert_eq!(response.text().await?, "charged");
//! # Ok(())
//! # }
//! ```
//!
//! # Where the timeout goes
//! A timeout *inside* [`BreakerLayer`] (a `tower::timeout::TimeoutLayer`
//! between the breaker and the service, or a policy's attempt timeout) fails
//! the call, and the breaker counts that failure with the default
//! classification: a backend that hangs trips it.
//!
//! ```text
//! ServiceBuilder::new()
//!     .layer(RetryLayer::new(retry))            // retries, the breaker's refusals included
//!     .layer(BreakerLayer::new(breaker))        // counts the timeout as a failure
//!     .layer(TimeoutLayer::new(timeout))        // inside the breaker
//!     .service(client)
//! ```
//!
//! A timeout *outside* it (or any other drop: a `select!`, a task abort)
//! abandons the call, which the breaker counts by its [`AbandonedRule`]: by
//! default only past the breaker's slow-call duration (60 s unless set);
//! [`BreakerLayer::abandoned`] with [`AbandonedRule::Failure`] counts every one.
//!
//! ```text
//! ServiceBuilder::new()
//!     .layer(TimeoutLayer::new(timeout))        // outside: the call is dropped
//!     .layer(BreakerLayer::new(breaker).abandoned(AbandonedRule::Failure))
//!     .service(client)
//! ```

use core::convert::Infallible;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use retry_core::{
    replay_verdict, AbandonedRule, Event, Failure, FailureKind, GiveUpReason, Idempotency, Method,
    RetryError,
};
use retry_shared::{
    Breaker, Clock as _, Driver, Input, PermitGuard, Ran, Settings, Step, WithAbandonedRule,
};
use tower::{Layer, Service};

use crate::retry::{context, take_turn, Cancel, Retry, TokioClock, Waits};
use crate::AttemptContext;

mod hedge;

pub use hedge::{HedgeClassifier, HedgeLayer, HedgeService};

/// A boxed, sendable future, as the services here return.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a layer knows about whether a request may be sent twice: its method
/// (the core's [`Method`]; [`Method::Other`] for a request that has none) and
/// the caller's mark ([`Idempotency::Auto`] when unmarked). The core decides
/// with them ([`Replay::may_replay`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Replay {
    method: Method,
    idempotency: Idempotency,
}

impl Replay {
    /// Nothing is known: no method, no mark. Never sent twice.
    pub const UNKNOWN: Replay = Replay::new(Method::Other, Idempotency::Auto);

    /// A request with `method`, marked with `idempotency`.
    #[must_use]
    pub const fn new(method: Method, idempotency: Idempotency) -> Replay {
        Replay {
            method,
            idempotency,
        }
    }

    /// The request's method ([`Method::Other`] when it has none).
    #[must_use]
    pub const fn method(self) -> Method {
        self.method
    }

    /// The caller's mark.
    #[must_use]
    pub const fn idempotency(self) -> Idempotency {
        self.idempotency
    }

    /// Whether the request may be sent again after the server may have seen
    /// it, as the core's [`may_replay`](retry_core::may_replay) says: GET, HEAD
    /// and OPTIONS, or any request marked [`Idempotency::Always`]; never one
    /// marked [`Idempotency::Never`].
    #[must_use]
    pub const fn may_replay(self) -> bool {
        retry_core::may_replay(self.idempotency, self.method, false)
    }

    /// The same request, which can no longer be sent at all after this
    /// attempt (its body could not be made again): marked never to replay.
    #[must_use]
    pub const fn sent_once(self) -> Replay {
        Replay::new(self.method, Idempotency::Never)
    }
}

/// How a layer reads a request's [`Replay`]: whether it may be sent twice.
/// [`ByMethod`] (the default) reads an HTTP request's method and mark;
/// [`IdempotentWhen`] asks a predicate, for any request type.
#[diagnostic::on_unimplemented(
    message = "the layer cannot tell whether a `{Req}` may be sent twice",
    label = "no rule for this request type",
    note = "`ByMethod` reads `http::Request` and `reqwest::Request`; for another request type say which requests are idempotent: `.idempotent_when(|request: &{Req}| …)` (or `|_| true` when every one is)"
)]
pub trait ReplayRule<Req> {
    /// What the layer knows of `request`.
    fn replay(&self, request: &Req) -> Replay;
}

/// The default [`ReplayRule`]: an HTTP request's method, and the
/// [`Idempotency`] it carries in its extensions if the caller put one there
/// (`request.extensions_mut().insert(Idempotency::Always)` marks a POST that
/// may be sent twice; `Idempotency::Never` keeps even a GET from it). A
/// `reqwest::Request` has no public extensions: mark it with
/// [`ByMethod::or_when`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ByMethod;

impl ByMethod {
    /// The method's rule, and also every request `marked` says may be sent
    /// twice (one that carries an `Idempotency-Key` header, say).
    #[must_use]
    pub const fn or_when<F>(self, marked: F) -> MethodOrWhen<F> {
        MethodOrWhen { marked }
    }
}

#[cfg(feature = "http")]
impl<B> ReplayRule<http::Request<B>> for ByMethod {
    fn replay(&self, request: &http::Request<B>) -> Replay {
        let mark = request
            .extensions()
            .get::<Idempotency>()
            .copied()
            .unwrap_or_default();
        Replay::new(crate::http::method(request.method()), mark)
    }
}

#[cfg(feature = "reqwest")]
impl ReplayRule<reqwest::Request> for ByMethod {
    fn replay(&self, request: &reqwest::Request) -> Replay {
        Replay::new(crate::http::method(request.method()), Idempotency::Auto)
    }
}

/// [`ByMethod`], and also the requests a predicate marks (see
/// [`ByMethod::or_when`]).
#[derive(Clone, Copy, Debug)]
pub struct MethodOrWhen<F> {
    marked: F,
}

impl<Req, F: Fn(&Req) -> bool> ReplayRule<Req> for MethodOrWhen<F>
where
    ByMethod: ReplayRule<Req>,
{
    fn replay(&self, request: &Req) -> Replay {
        let by_method = ByMethod.replay(request);
        if (self.marked)(request) {
            Replay::new(by_method.method(), Idempotency::Always)
        } else {
            by_method
        }
    }
}

/// A predicate decides, for any request type: `true` may be sent twice,
/// `false` is sent once (see [`RetryLayer::idempotent_when`]).
#[derive(Clone, Copy, Debug)]
pub struct IdempotentWhen<F> {
    idempotent: F,
}

impl<F> IdempotentWhen<F> {
    /// The rule `idempotent` decides.
    #[must_use]
    pub const fn new(idempotent: F) -> IdempotentWhen<F> {
        IdempotentWhen { idempotent }
    }
}

impl<Req, F: Fn(&Req) -> bool> ReplayRule<Req> for IdempotentWhen<F> {
    fn replay(&self, request: &Req) -> Replay {
        let mark = if (self.idempotent)(request) {
            Idempotency::Always
        } else {
            Idempotency::Never
        };
        Replay::new(Method::Other, mark)
    }
}

/// How a [`RetryService`] (or a [`HedgeService`]) makes a fresh request for each
/// attempt from the original one, knowing which attempt it is for (to stamp a
/// retry count, say: see `RetryCountHeader` with the `http` feature). A hedged
/// copy is told its copy number as the attempt, with no deadline.
///
/// When it cannot ([`Recreate::Error`]: a `reqwest::Request` whose body is a
/// stream, see [`TryClone`]), the layer sends the original itself, once: the
/// call is not retried or hedged (a failure of it is final, and when a
/// response fails the call ends with it).
pub trait Recreate<Req> {
    /// Why a request could not be made again.
    type Error: fmt::Display;

    /// The request for the attempt `attempt` describes.
    ///
    /// # Errors
    /// When the original cannot be made again.
    fn recreate(&self, original: &Req, attempt: &AttemptContext) -> Result<Req, Self::Error>;
}

/// Recreates a request by cloning it (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct ByClone;

impl<Req: Clone> Recreate<Req> for ByClone {
    type Error = Infallible;

    fn recreate(&self, original: &Req, _attempt: &AttemptContext) -> Result<Req, Infallible> {
        Ok(original.clone())
    }
}

impl<Req, F: Fn(&Req, &AttemptContext) -> Req> Recreate<Req> for F {
    type Error = Infallible;

    fn recreate(&self, original: &Req, attempt: &AttemptContext) -> Result<Req, Infallible> {
        Ok(self(original, attempt))
    }
}

/// Recreates a `reqwest::Request` with `try_clone` (feature `reqwest`): every
/// body but a stream can be cloned. A request with a streaming body is
/// refused with [`BodyNotCloneable`], and sent once.
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
#[derive(Clone, Copy, Debug, Default)]
pub struct TryClone;

/// A request whose body is a stream cannot be sent twice: [`TryClone`]'s error.
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the {method} request to {url} has a streaming body, which cannot be sent twice")]
pub struct BodyNotCloneable {
    method: http::Method,
    url: String,
}

#[cfg(feature = "reqwest")]
impl BodyNotCloneable {
    /// The request's method.
    #[must_use]
    pub const fn method(&self) -> &http::Method {
        &self.method
    }

    /// The request's URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
}

#[cfg(feature = "reqwest")]
impl Recreate<reqwest::Request> for TryClone {
    type Error = BodyNotCloneable;

    fn recreate(
        &self,
        original: &reqwest::Request,
        _attempt: &AttemptContext,
    ) -> Result<reqwest::Request, BodyNotCloneable> {
        original.try_clone().ok_or_else(|| BodyNotCloneable {
            method: original.method().clone(),
            url: original.url().to_string(),
        })
    }
}

/// Says whether a service's successful response (`Ok`) is a failed attempt all
/// the same: `None` for a success, or the failure (retryable or not, with any
/// server hint) as the core's [`Failure`] describes it.
pub trait ResponseClassifier<Resp> {
    /// The verdict on `response`.
    fn classify(&self, response: &Resp) -> Option<Failure>;
}

impl<Resp, F: Fn(&Resp) -> Option<Failure>> ResponseClassifier<Resp> for F {
    fn classify(&self, response: &Resp) -> Option<Failure> {
        self(response)
    }
}

/// Every response is a success: only `Err` is a failure (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct OkIsSuccess;

impl<Resp> ResponseClassifier<Resp> for OkIsSuccess {
    fn classify(&self, _response: &Resp) -> Option<Failure> {
        None
    }
}

/// Says what a service's error (`Err`) means, as the core's [`Failure`]
/// describes it: for a [`RetryLayer`] or a [`HedgeLayer`] whether another
/// attempt may fix it; for a [`BreakerService`] whether it counts against the
/// breaker (a retryable failure does, a permanent one does not: the
/// dependency answered; the fault lies with the request).
///
/// It is told what the layer knows of the request ([`Replay`]: its method and
/// mark), so that a transport error can be judged by it. The retry and hedge
/// layers then apply the core's [`replay_verdict`]
/// themselves: a classifier need not know the rule. A closure `Fn(&E) ->
/// Failure` is one that ignores the request. A [`BreakerService`] does not
/// read requests and passes [`Replay::UNKNOWN`].
pub trait ErrorClassifier<E> {
    /// The verdict on `error`, returned for a request described by `replay`.
    fn classify(&self, error: &E, replay: Replay) -> Failure;
}

impl<E, F: Fn(&E) -> Failure> ErrorClassifier<E> for F {
    fn classify(&self, error: &E, _replay: Replay) -> Failure {
        self(error)
    }
}

/// Every error is a retryable failure (a [`BreakerLayer`]'s default): of kind
/// timeout when it is a timeout (tower's `Elapsed` in a `BoxError`, as a
/// `TimeoutLayer` inside the breaker returns it, or tokio's), of unknown kind
/// otherwise.
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrIsFailure;

impl<E: 'static> ErrorClassifier<E> for ErrIsFailure {
    fn classify(&self, error: &E, _replay: Replay) -> Failure {
        if is_timeout(error) {
            Failure::retryable().with_kind(FailureKind::Timeout)
        } else {
            Failure::retryable()
        }
    }
}

/// Whether `error` is a timeout's: tower's `Elapsed` (alone or in a
/// `BoxError`) or tokio's.
fn is_timeout<E: 'static>(error: &E) -> bool {
    let any: &dyn core::any::Any = error;
    if any.is::<tower::timeout::error::Elapsed>() || any.is::<tokio::time::error::Elapsed>() {
        return true;
    }
    any.downcast_ref::<tower::BoxError>().is_some_and(|boxed| {
        boxed.is::<tower::timeout::error::Elapsed>() || boxed.is::<tokio::time::error::Elapsed>()
    })
}

/// Judges errors with the [`Retry`]'s own classifier ([`Retry::classify`]): a
/// [`RetryLayer`]'s default.
pub struct RetryClassifier<E> {
    settings: Settings<E>,
}

impl<E> Clone for RetryClassifier<E> {
    fn clone(&self) -> Self {
        RetryClassifier {
            settings: self.settings.clone(),
        }
    }
}

impl<E> fmt::Debug for RetryClassifier<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryClassifier").finish_non_exhaustive()
    }
}

impl<E> ErrorClassifier<E> for RetryClassifier<E> {
    fn classify(&self, error: &E, _replay: Replay) -> Failure {
        self.settings.classify(error)
    }
}

/// The core's judgement of a `reqwest::Error` for the request it came from
/// (feature `reqwest`), as [`reqwest_call`](crate::reqwest_call) judges it: a
/// connection that could not be made sent nothing (retried); a timeout or a
/// connection lost after the request may have gone out is retried only for a
/// request that may be replayed; an error made from a status is judged by it; a
/// request that could not be built is permanent. For a
/// [`BreakerServiceError`] around one, a refusal of the breaker is final.
#[cfg(feature = "reqwest")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
#[derive(Clone, Copy, Debug, Default)]
pub struct ReqwestErrors;

#[cfg(feature = "reqwest")]
impl ErrorClassifier<reqwest::Error> for ReqwestErrors {
    fn classify(&self, error: &reqwest::Error, replay: Replay) -> Failure {
        let classifier = retry_core::HttpClassifier::DEFAULT.with_idempotency(replay.idempotency());
        crate::reqwest_call::judge_error(&classifier, error, replay.method())
    }
}

/// A `tower::BoxError`, as a `TimeoutLayer` (or another layer) between the
/// client and this one returns it: reqwest's error as above; tower's (or
/// tokio's) `Elapsed` as a timeout waiting for the answer, retried only for a
/// request that may be replayed (its bytes went out); anything else an error
/// of unknown kind.
#[cfg(feature = "reqwest")]
impl ErrorClassifier<tower::BoxError> for ReqwestErrors {
    fn classify(&self, error: &tower::BoxError, replay: Replay) -> Failure {
        if let Some(error) = error.downcast_ref::<reqwest::Error>() {
            self.classify(error, replay)
        } else if is_timeout(error) {
            retry_core::HttpClassifier::DEFAULT
                .with_idempotency(replay.idempotency())
                .classify_timeout(replay.method())
        } else {
            Failure::retryable()
        }
    }
}

/// The error of a [`BreakerLayer`] below: a refusal of the breaker is final
/// (the breaker says when it admits again; hammering it helps nobody), the
/// service's error as above.
#[cfg(feature = "reqwest")]
impl<E> ErrorClassifier<BreakerServiceError<E>> for ReqwestErrors
where
    ReqwestErrors: ErrorClassifier<E>,
{
    fn classify(&self, error: &BreakerServiceError<E>, replay: Replay) -> Failure {
        match error {
            BreakerServiceError::CircuitOpen { .. } => Failure::permanent(),
            BreakerServiceError::Inner(error) => self.classify(error, replay),
        }
    }
}

/// Judges an HTTP response by its status and retry headers with the core's
/// [`HttpClassifier::DEFAULT`](retry_core::HttpClassifier::DEFAULT) (408, 429
/// and 5xx retry, other statuses from 400 up are permanent, a `Retry-After`,
/// `retry-after-ms` or gRPC pushback is the hint), for `http::Response` and,
/// with the `reqwest` feature, `reqwest::Response`.
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpStatus;

#[cfg(feature = "http")]
impl<B> ResponseClassifier<http::Response<B>> for HttpStatus {
    fn classify(&self, response: &http::Response<B>) -> Option<Failure> {
        crate::http::classify_response(response)
    }
}

#[cfg(feature = "reqwest")]
impl ResponseClassifier<reqwest::Response> for HttpStatus {
    fn classify(&self, response: &reqwest::Response) -> Option<Failure> {
        crate::reqwest_call::classify_response(response)
    }
}

/// Stamps the retry count on each attempt's request in a header (by default
/// `x-retry-count`): `0` on the first attempt, `1` on the first retry, and so
/// on, as HTTP SDKs do so that a server can tell retries from new requests and
/// shed them first. A [`Recreate`] for [`RetryLayer::recreate_with`] that clones
/// the request and sets the header.
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
#[derive(Clone, Debug)]
pub struct RetryCountHeader {
    name: http::HeaderName,
}

#[cfg(feature = "http")]
impl RetryCountHeader {
    /// The header `x-retry-count`.
    #[must_use]
    pub fn new() -> RetryCountHeader {
        RetryCountHeader {
            name: http::HeaderName::from_static("x-retry-count"),
        }
    }

    /// Another header name (e.g. the one a vendor's SDK uses).
    #[must_use]
    pub fn named(name: http::HeaderName) -> RetryCountHeader {
        RetryCountHeader { name }
    }

    /// The header's name.
    #[must_use]
    pub const fn name(&self) -> &http::HeaderName {
        &self.name
    }
}

#[cfg(feature = "http")]
impl Default for RetryCountHeader {
    fn default() -> Self {
        RetryCountHeader::new()
    }
}

#[cfg(feature = "http")]
impl<B: Clone> Recreate<http::Request<B>> for RetryCountHeader {
    type Error = Infallible;

    fn recreate(
        &self,
        original: &http::Request<B>,
        attempt: &AttemptContext,
    ) -> Result<http::Request<B>, Infallible> {
        let mut request = original.clone();
        request.headers_mut().insert(
            self.name.clone(),
            http::HeaderValue::from(attempt.retries()),
        );
        Ok(request)
    }
}

/// Retries every call of the wrapped service under a [`Retry`]. The request must
/// be `Clone`, or [`RetryLayer::recreate_with`] says how to rebuild it.
///
/// Each attempt clones the inner service, waits until it is ready and calls it.
/// An error from either is judged by the layer's [`ErrorClassifier`] (by
/// default the retrier's own classifier, [`RetryClassifier`]), then by the
/// core's [`replay_verdict`] for the request: a
/// request the [`ReplayRule`] (by default [`ByMethod`]) does not say may be
/// replayed is sent again only when nothing was sent or the server asked for
/// it, so a POST whose connection dropped after it went out is not sent twice.
/// A response is judged by the layer's [`ResponseClassifier`] (by default
/// every response is a success): a retryable one (a 503) is the server's own
/// answer, and is retried whatever the method. The service's error becomes a
/// [`RetryError`].
///
/// When the call gives up on a failed *response* (retries, time or retry
/// budget ran out, or its status is permanent, such as a 400), that response is
/// the call's answer, `Ok`, as an HTTP client returns the last response it got.
/// Otherwise (the last attempt failed with an error or timed out, the call was
/// cancelled, a breaker refused it) the answer is the `RetryError`.
///
/// A zero delay between attempts still gives the runtime a turn, as
/// [`Retry::call`] does.
pub struct RetryLayer<E, R = ByClone, C = OkIsSuccess, K = RetryClassifier<E>, I = ByMethod> {
    retry: Retry<E>,
    recreate: R,
    responses: C,
    errors: K,
    rule: I,
}

impl<E> RetryLayer<E> {
    /// A layer retrying under `retry`, cloning the request for each attempt,
    /// every response a success, errors judged by `retry`'s classifier, and a
    /// request replayed after it may have been sent only if its method allows
    /// it.
    #[must_use]
    pub fn new(retry: Retry<E>) -> RetryLayer<E> {
        RetryLayer {
            errors: RetryClassifier {
                settings: retry.settings().clone(),
            },
            retry,
            recreate: ByClone,
            responses: OkIsSuccess,
            rule: ByMethod,
        }
    }
}

impl<E, R, C, K, I> RetryLayer<E, R, C, K, I> {
    /// Rebuilds the request for each attempt with `recreate` instead of cloning it
    /// (for requests that are not `Clone`, such as ones with a streaming body, or
    /// to stamp the attempt on it).
    #[must_use]
    pub fn recreate_with<R2>(self, recreate: R2) -> RetryLayer<E, R2, C, K, I> {
        RetryLayer {
            retry: self.retry,
            recreate,
            responses: self.responses,
            errors: self.errors,
            rule: self.rule,
        }
    }

    /// Judges successful responses with `classifier`: one it calls a failure is
    /// retried (honouring its hint) like an error.
    #[must_use]
    pub fn classify_responses<C2>(self, classifier: C2) -> RetryLayer<E, R, C2, K, I> {
        RetryLayer {
            retry: self.retry,
            recreate: self.recreate,
            responses: classifier,
            errors: self.errors,
            rule: self.rule,
        }
    }

    /// Judges the service's errors with `classifier` (told the request's
    /// [`Replay`]) instead of the retrier's classifier: with the `reqwest`
    /// feature, [`ReqwestErrors`].
    #[must_use]
    pub fn classify_errors<K2>(self, classifier: K2) -> RetryLayer<E, R, C, K2, I> {
        RetryLayer {
            retry: self.retry,
            recreate: self.recreate,
            responses: self.responses,
            errors: classifier,
            rule: self.rule,
        }
    }

    /// Reads whether a request may be sent twice with `rule` instead of
    /// [`ByMethod`] (e.g. `ByMethod.or_when(…)`).
    #[must_use]
    pub fn replay_rule<I2>(self, rule: I2) -> RetryLayer<E, R, C, K, I2> {
        RetryLayer {
            retry: self.retry,
            recreate: self.recreate,
            responses: self.responses,
            errors: self.errors,
            rule,
        }
    }

    /// Lets `idempotent` say, for any request type, which requests may be
    /// sent twice (`|_: &MyRequest| true` when every one may): the rule for a
    /// request that is not an HTTP request. For an HTTP request, prefer
    /// `replay_rule(ByMethod.or_when(…))`, which keeps the method's rule.
    #[must_use]
    pub fn idempotent_when<F>(self, idempotent: F) -> RetryLayer<E, R, C, K, IdempotentWhen<F>> {
        self.replay_rule(IdempotentWhen::new(idempotent))
    }
}

impl<E, R: Clone, C: Clone, K: Clone, I: Clone> Clone for RetryLayer<E, R, C, K, I> {
    fn clone(&self) -> Self {
        RetryLayer {
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
            rule: self.rule.clone(),
        }
    }
}

impl<E, R, C, K, I> fmt::Debug for RetryLayer<E, R, C, K, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl<S, E, R: Clone, C: Clone, K: Clone, I: Clone> Layer<S> for RetryLayer<E, R, C, K, I> {
    type Service = RetryService<S, E, R, C, K, I>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
            rule: self.rule.clone(),
        }
    }
}

/// The service made by [`RetryLayer`].
pub struct RetryService<S, E, R = ByClone, C = OkIsSuccess, K = RetryClassifier<E>, I = ByMethod> {
    inner: S,
    retry: Retry<E>,
    recreate: R,
    responses: C,
    errors: K,
    rule: I,
}

impl<S: Clone, E, R: Clone, C: Clone, K: Clone, I: Clone> Clone for RetryService<S, E, R, C, K, I> {
    fn clone(&self) -> Self {
        RetryService {
            inner: self.inner.clone(),
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
            rule: self.rule.clone(),
        }
    }
}

impl<S: fmt::Debug, E, R, C, K, I> fmt::Debug for RetryService<S, E, R, C, K, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryService")
            .field("inner", &self.inner)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// A failure of a request that cannot be sent again at all: final, of the
/// same kind (an error of unknown kind is a failed exchange, as the core's
/// [`replay_verdict`] reads it, so that a breaker counts it).
fn sent_once(failure: Failure) -> Failure {
    let failure = replay_verdict(failure, false);
    if failure.is_retryable() {
        Failure::permanent().with_kind(failure.kind())
    } else {
        failure
    }
}

/// Says, with the `tracing` feature, that a request could not be made again.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn not_recreated(why: &dyn fmt::Display) {
    #[cfg(feature = "tracing")]
    tracing::warn!(reason = %why, "the request cannot be made again: it is sent once");
}

impl<S, Req, R, C, K, I> Service<Req> for RetryService<S, S::Error, R, C, K, I>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send + 'static,
    Req: Send + 'static,
    R: Recreate<Req> + Clone + Send + Sync + 'static,
    C: ResponseClassifier<S::Response> + Clone + Send + Sync + 'static,
    K: ErrorClassifier<S::Error> + Clone + Send + Sync + 'static,
    I: ReplayRule<Req>,
{
    type Response = S::Response;
    type Error = RetryError<S::Error>;
    type Future = BoxFuture<Result<S::Response, RetryError<S::Error>>>;

    /// Always ready: each attempt waits for its own clone of the inner service.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let inner = self.inner.clone();
        let retry = self.retry.clone();
        let recreate = self.recreate.clone();
        let responses = self.responses.clone();
        let errors = self.errors.clone();
        let replay = self.rule.replay(&request);
        Box::pin(async move {
            let retry = &retry;
            let cancel = Cancel {
                call: None,
                retry: retry.cancel_token_ref(),
            };
            // Owns the request and the service: only `&Retry` is held across
            // awaits, so neither needs to be `Sync`.
            let call = async move {
                let mut driver =
                    Driver::new(retry.settings(), TokioClock, || cancel.is_cancelled());
                let mut waits = core::pin::pin!(Waits::new(cancel));
                let mut input = Input::Start;
                // Kept to make each attempt's request from; taken when it
                // cannot be made again and is sent itself, once.
                let mut original = Some(request);
                let mut replay = replay;
                // Whether the call has waited since the last attempt ended.
                let mut turned = false;
                loop {
                    input = match driver.poll(input) {
                        Step::Attempt(attempt)
                            if !turned && attempt.number > 1 && !take_turn(cancel).await =>
                        {
                            // Cancelled while it gave the runtime a turn.
                            Input::Ended(Ran::Cancelled)
                        }
                        Step::Attempt(attempt) => {
                            turned = false;
                            let ctx = context(attempt, cancel);
                            let request = match attempt_request(
                                &recreate,
                                &mut original,
                                &ctx,
                                attempt.number,
                            ) {
                                Made::Fresh(request) => request,
                                Made::Original(request) => {
                                    replay = replay.sent_once();
                                    request
                                }
                                // It cannot be sent again: the call ends on
                                // the last failed response, which the driver
                                // still holds (the attempt it had just
                                // admitted never runs: it is abandoned).
                                Made::Nothing => {
                                    return driver.take_failed_value().ok_or_else(|| {
                                        cannot_go_on(&driver, attempt.number.saturating_sub(1))
                                    });
                                }
                            };
                            let mut service = inner.clone();
                            let sent = async move {
                                core::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                                service.call(request).await
                            };
                            let ran = waits
                                .as_mut()
                                .attempt(sent, attempt.deadline, || driver.attempt_waiting())
                                .await;
                            let ran = match ran {
                                Ran::Returned(Ok(response)) => {
                                    match responses.classify(&response) {
                                        Some(failure) => Ran::FailedValue {
                                            value: response,
                                            failure,
                                        },
                                        None => Ran::Returned(Ok(response)),
                                    }
                                }
                                Ran::Returned(Err(error)) => {
                                    let failure = errors.classify(&error, replay);
                                    let failure = if original.is_some() {
                                        replay_verdict(failure, replay.may_replay())
                                    } else {
                                        sent_once(failure)
                                    };
                                    Ran::Failed { error, failure }
                                }
                                other => other,
                            };
                            Input::Ended(ran)
                        }
                        Step::Sleep(sleep) => {
                            turned = true;
                            Input::Slept(waits.as_mut().sleep(sleep).await)
                        }
                        Step::Finished(Ok(success)) => return Ok(success.value),
                        Step::Finished(Err(error)) => {
                            return driver.take_failed_value().ok_or(error);
                        }
                    };
                }
            };
            retry.instrument(call).await
        })
    }
}

/// The request for an attempt.
enum Made<Req> {
    /// Made from the original.
    Fresh(Req),
    /// The original itself: it could not be made again, so it is sent once.
    Original(Req),
    /// None: the original was sent already, or cannot be made again.
    Nothing,
}

/// The request for attempt `number` (described by `ctx`) made from
/// `original` by `recreate`; the first attempt sends the original itself when
/// it cannot be made again.
fn attempt_request<Req, R: Recreate<Req>>(
    recreate: &R,
    original: &mut Option<Req>,
    ctx: &AttemptContext,
    number: u32,
) -> Made<Req> {
    let Some(from) = original.as_ref() else {
        return Made::Nothing;
    };
    match recreate.recreate(from, ctx) {
        Ok(request) => Made::Fresh(request),
        Err(why) => {
            not_recreated(&why);
            match original.take() {
                Some(request) if number == 1 => Made::Original(request),
                // (A recreation that failed only now leaves the original
                // where it was.)
                Some(request) => {
                    *original = Some(request);
                    Made::Nothing
                }
                None => Made::Nothing,
            }
        }
    }
}

/// The error of a call that cannot go on (its request could not be made again,
/// and no failed response is left to answer with) after `attempts` attempts.
fn cannot_go_on<T, E, K: Fn() -> bool>(
    driver: &Driver<'_, T, E, TokioClock, K>,
    attempts: u32,
) -> RetryError<E> {
    let elapsed = driver
        .started()
        .map(|start| TokioClock.now().saturating_duration_since(start))
        .unwrap_or_default();
    RetryError::new(GiveUpReason::Permanent, attempts, elapsed, None)
}

/// What a [`BreakerService`] fails with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BreakerServiceError<E> {
    /// The breaker refused the call; the inner service was not called.
    #[error("retry.circuit_open: the circuit breaker refused the call")]
    CircuitOpen {
        /// How long until the breaker admits again, if known.
        retry_after: Option<Duration>,
    },
    /// The inner service failed.
    #[error("{0}")]
    Inner(E),
}

impl<E> BreakerServiceError<E> {
    /// Whether the breaker refused the call.
    #[must_use]
    pub const fn is_circuit_open(&self) -> bool {
        matches!(self, BreakerServiceError::CircuitOpen { .. })
    }
}

/// Puts a circuit breaker in front of a service: each call asks it first and
/// tells it the outcome, judged as the core's `breaker_outcome` reads a
/// [`Failure`]: a success, or a permanent failure (a 404: the dependency
/// answered), count as successes; a retryable failure counts against the
/// breaker. By default every `Ok` is a success and every `Err` a retryable
/// failure; [`classify_responses`](BreakerLayer::classify_responses) and
/// [`classify_errors`](BreakerLayer::classify_errors) refine that (give it the
/// same classification as the [`Retry`] around it). A refused call fails at once
/// with [`BreakerServiceError::CircuitOpen`] without reaching the inner service.
///
/// A timeout inside the layer (a `tower::timeout::TimeoutLayer` between it and
/// the service) fails the call with tower's `Elapsed`, which the default
/// classification counts as a failure (of kind timeout): a backend that hangs
/// past it trips the breaker. A call whose future is dropped before it ends
/// (a timeout outside the layer, a `select!`, a task abort) is abandoned, and
/// never leaks its permit: it counts as its [`AbandonedRule`] says
/// ([`abandoned`](BreakerLayer::abandoned)); by default a failure only if it
/// ran longer than the breaker's slow-call duration (60 s unless set), the
/// permit released without recording otherwise. See
/// [where the timeout goes](self#where-the-timeout-goes).
pub struct BreakerLayer<C = OkIsSuccess, K = ErrIsFailure> {
    breaker: Arc<dyn Breaker>,
    responses: C,
    errors: K,
}

impl BreakerLayer {
    /// A layer guarded by `breaker`: a [`SharedBreaker`](crate::SharedBreaker)
    /// (clones of it share its state) or any other [`Breaker`].
    #[must_use]
    pub fn new(breaker: impl Breaker + 'static) -> BreakerLayer {
        BreakerLayer {
            breaker: Arc::new(breaker),
            responses: OkIsSuccess,
            errors: ErrIsFailure,
        }
    }
}

impl<C, K> BreakerLayer<C, K> {
    /// Judges successful responses with `classifier` (e.g. `HttpStatus`): a
    /// retryable failure counts against the breaker.
    #[must_use]
    pub fn classify_responses<C2>(self, classifier: C2) -> BreakerLayer<C2, K> {
        BreakerLayer {
            breaker: self.breaker,
            responses: classifier,
            errors: self.errors,
        }
    }

    /// Judges errors with `classifier` (told [`Replay::UNKNOWN`]: the breaker
    /// does not read requests): a permanent failure does not count against
    /// the breaker, unless the dependency did not answer (a permanent timeout
    /// or lost connection still counts, as the core's
    /// [`breaker_outcome`](retry_core::breaker_outcome) says).
    #[must_use]
    pub fn classify_errors<K2>(self, classifier: K2) -> BreakerLayer<C, K2> {
        BreakerLayer {
            breaker: self.breaker,
            responses: self.responses,
            errors: classifier,
        }
    }

    /// Counts a call abandoned from outside (its future dropped by a timeout
    /// outside the layer, a `select!`, a task abort) under `rule`: with
    /// [`AbandonedRule::Failure`], every such call is a failure, so a backend
    /// that hangs until an outer timeout drops it trips the breaker.
    #[must_use]
    pub fn abandoned(mut self, rule: AbandonedRule) -> Self {
        self.breaker = Arc::new(WithAbandonedRule::new(self.breaker, rule));
        self
    }
}

impl<C: Clone, K: Clone> Clone for BreakerLayer<C, K> {
    fn clone(&self) -> Self {
        BreakerLayer {
            breaker: Arc::clone(&self.breaker),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
        }
    }
}

impl<C, K> fmt::Debug for BreakerLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer")
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

impl<S, C: Clone, K: Clone> Layer<S> for BreakerLayer<C, K> {
    type Service = BreakerService<S, C, K>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService {
            inner,
            breaker: Arc::clone(&self.breaker),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
        }
    }
}

/// The service made by [`BreakerLayer`].
pub struct BreakerService<S, C = OkIsSuccess, K = ErrIsFailure> {
    inner: S,
    breaker: Arc<dyn Breaker>,
    responses: C,
    errors: K,
}

impl<S: Clone, C: Clone, K: Clone> Clone for BreakerService<S, C, K> {
    fn clone(&self) -> Self {
        BreakerService {
            inner: self.inner.clone(),
            breaker: Arc::clone(&self.breaker),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
        }
    }
}

impl<S: fmt::Debug, C, K> fmt::Debug for BreakerService<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, Req, C, K> Service<Req> for BreakerService<S, C, K>
where
    S: Service<Req>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    C: ResponseClassifier<S::Response> + Clone + Send + 'static,
    K: ErrorClassifier<S::Error> + Clone + Send + 'static,
{
    type Response = S::Response;
    type Error = BreakerServiceError<S::Error>;
    type Future = BoxFuture<Result<S::Response, BreakerServiceError<S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(BreakerServiceError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        match PermitGuard::request(Arc::clone(&self.breaker), TokioClock, None, None) {
            Err(until) => {
                let now = TokioClock.now();
                let retry_after = until.map(|until| until.saturating_duration_since(now));
                Box::pin(core::future::ready(Err(BreakerServiceError::CircuitOpen {
                    retry_after,
                })))
            }
            Ok(permit) => {
                // Abandoned (recorded or released) if this future is dropped
                // before the call ends.
                let call = self.inner.call(request);
                let responses = self.responses.clone();
                let errors = self.errors.clone();
                Box::pin(async move {
                    let mut permit = permit;
                    let mut call = core::pin::pin!(call);
                    // A breaker that does not time calls took no start: the
                    // call's first wait gives it, so that an abandoned call is
                    // judged by how long it ran.
                    let mut waited = false;
                    let result = core::future::poll_fn(|cx| match call.as_mut().poll(cx) {
                        Poll::Ready(result) => Poll::Ready(result),
                        Poll::Pending => {
                            if !waited {
                                waited = true;
                                permit.waited(TokioClock.now());
                            }
                            Poll::Pending
                        }
                    })
                    .await;
                    let event = match &result {
                        Ok(response) => match responses.classify(response) {
                            Some(failure) => Event::Failed(failure),
                            None => Event::Succeeded,
                        },
                        Err(error) => Event::Failed(errors.classify(error, Replay::UNKNOWN)),
                    };
                    permit.finish(event, None);
                    result.map_err(BreakerServiceError::Inner)
                })
            }
        }
    }
}
