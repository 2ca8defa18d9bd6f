//! Tower middleware (feature `tower`): [`RetryLayer`] retries a service's calls
//! under a [`Retry`], [`HedgeLayer`] hedges them under a [`Hedge`](crate::Hedge)
//! (in `tower/hedge.rs`), and [`BreakerLayer`] puts a [`SharedBreaker`](crate::SharedBreaker)
//! (or any other [`Breaker`]) in front of a service, failing fast with
//! [`BreakerServiceError::CircuitOpen`] while it is open.
//!
//! Both layers judge errors *and* responses. A client service (a `reqwest`
//! client, a hyper client) answers a 503 with `Ok(response)`; give the layers a
//! [`ResponseClassifier`] (with the `http` feature, the ready [`HttpStatus`],
//! which reads the status and the retry headers through the core's
//! [`HttpClassifier`](retry_core::HttpClassifier)) and such a response is
//! retried, its `Retry-After` honoured, and counted by the breaker as the core
//! says (a retryable status is a failure, a 404 is not).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use retry_core::{Event, Failure, RetryError};
use retry_shared::{Breaker, Clock as _, Driver, Input, PermitGuard, Ran, Step};
use tower::{Layer, Service};

use crate::retry::{context, Cancel, Retry, TokioClock, Waits};
use crate::AttemptContext;

mod hedge;

pub use hedge::{HedgeLayer, HedgeService};

/// A boxed, sendable future, as the services here return.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How a [`RetryService`] (or a [`HedgeService`]) makes a fresh request for each
/// attempt from the original one, knowing which attempt it is for (to stamp a
/// retry count, say: see `RetryCountHeader` with the `http` feature). A hedged
/// copy is told its copy number as the attempt, with no deadline.
pub trait Recreate<Req> {
    /// The request for the attempt `attempt` describes.
    fn recreate(&self, original: &Req, attempt: &AttemptContext) -> Req;
}

/// Recreates a request by cloning it (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct ByClone;

impl<Req: Clone> Recreate<Req> for ByClone {
    fn recreate(&self, original: &Req, _attempt: &AttemptContext) -> Req {
        original.clone()
    }
}

impl<Req, F: Fn(&Req, &AttemptContext) -> Req> Recreate<Req> for F {
    fn recreate(&self, original: &Req, attempt: &AttemptContext) -> Req {
        self(original, attempt)
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

/// Says what a service's error (`Err`) means to a [`BreakerService`], as the
/// core's [`Failure`] describes it: a retryable failure counts against the
/// breaker, a permanent one does not (the dependency answered; the fault lies
/// with the request).
pub trait ErrorClassifier<E> {
    /// The verdict on `error`.
    fn classify(&self, error: &E) -> Failure;
}

impl<E, F: Fn(&E) -> Failure> ErrorClassifier<E> for F {
    fn classify(&self, error: &E) -> Failure {
        self(error)
    }
}

/// Every error is a retryable failure (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrIsFailure;

impl<E> ErrorClassifier<E> for ErrIsFailure {
    fn classify(&self, _error: &E) -> Failure {
        Failure::retryable()
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
        crate::reqwest::classify_response(response)
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
    fn recreate(&self, original: &http::Request<B>, attempt: &AttemptContext) -> http::Request<B> {
        let mut request = original.clone();
        request.headers_mut().insert(
            self.name.clone(),
            http::HeaderValue::from(attempt.retries()),
        );
        request
    }
}

/// Retries every call of the wrapped service under a [`Retry`]. The request must
/// be `Clone`, or [`RetryLayer::recreate_with`] says how to rebuild it.
///
/// Each attempt clones the inner service, waits until it is ready and calls it.
/// An error from either is judged by the retrier's classifier; a response by the
/// layer's [`ResponseClassifier`] (by default every response is a success). The
/// service's error becomes a [`RetryError`].
///
/// When the call gives up on a failed *response* (retries, time or retry
/// budget ran out, or its status is permanent, such as a 400), that response is
/// the call's answer, `Ok`, as an HTTP client returns the last response it got.
/// Otherwise (the last attempt failed with an error or timed out, the call was
/// cancelled, a breaker refused it) the answer is the `RetryError`.
pub struct RetryLayer<E, R = ByClone, C = OkIsSuccess> {
    retry: Retry<E>,
    recreate: R,
    responses: C,
}

impl<E> RetryLayer<E> {
    /// A layer retrying under `retry`, cloning the request for each attempt,
    /// every response a success.
    #[must_use]
    pub fn new(retry: Retry<E>) -> RetryLayer<E> {
        RetryLayer {
            retry,
            recreate: ByClone,
            responses: OkIsSuccess,
        }
    }
}

impl<E, R, C> RetryLayer<E, R, C> {
    /// Rebuilds the request for each attempt with `recreate` instead of cloning it
    /// (for requests that are not `Clone`, such as ones with a streaming body, or
    /// to stamp the attempt on it).
    #[must_use]
    pub fn recreate_with<R2>(self, recreate: R2) -> RetryLayer<E, R2, C> {
        RetryLayer {
            retry: self.retry,
            recreate,
            responses: self.responses,
        }
    }

    /// Judges successful responses with `classifier`: one it calls a failure is
    /// retried (honouring its hint) like an error.
    #[must_use]
    pub fn classify_responses<C2>(self, classifier: C2) -> RetryLayer<E, R, C2> {
        RetryLayer {
            retry: self.retry,
            recreate: self.recreate,
            responses: classifier,
        }
    }
}

impl<E, R: Clone, C: Clone> Clone for RetryLayer<E, R, C> {
    fn clone(&self) -> Self {
        RetryLayer {
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
        }
    }
}

impl<E, R, C> fmt::Debug for RetryLayer<E, R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl<S, E, R: Clone, C: Clone> Layer<S> for RetryLayer<E, R, C> {
    type Service = RetryService<S, E, R, C>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
        }
    }
}

/// The service made by [`RetryLayer`].
pub struct RetryService<S, E, R = ByClone, C = OkIsSuccess> {
    inner: S,
    retry: Retry<E>,
    recreate: R,
    responses: C,
}

impl<S: Clone, E, R: Clone, C: Clone> Clone for RetryService<S, E, R, C> {
    fn clone(&self) -> Self {
        RetryService {
            inner: self.inner.clone(),
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
        }
    }
}

impl<S: fmt::Debug, E, R, C> fmt::Debug for RetryService<S, E, R, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryService")
            .field("inner", &self.inner)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl<S, Req, R, C> Service<Req> for RetryService<S, S::Error, R, C>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send + 'static,
    Req: Send + 'static,
    R: Recreate<Req> + Clone + Send + Sync + 'static,
    C: ResponseClassifier<S::Response> + Clone + Send + Sync + 'static,
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
                loop {
                    input = match driver.poll(input) {
                        Step::Attempt(attempt) => {
                            let ctx = context(attempt, cancel);
                            let mut service = inner.clone();
                            let request = recreate.recreate(&request, &ctx);
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
                                other => other,
                            };
                            Input::Ended(ran)
                        }
                        Step::Sleep(sleep) => Input::Slept(waits.as_mut().sleep(sleep).await),
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
/// A call whose future is dropped before it ends (an outer timeout, a
/// `select!`, a task abort) is abandoned, and never leaks its permit: if it ran
/// longer than the breaker's slow-call duration it is recorded as a failure (so
/// a hung backend behind an outer timeout still trips the breaker), otherwise
/// the permit is released without recording.
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

    /// Judges errors with `classifier`: a permanent failure does not count
    /// against the breaker.
    #[must_use]
    pub fn classify_errors<K2>(self, classifier: K2) -> BreakerLayer<C, K2> {
        BreakerLayer {
            breaker: self.breaker,
            responses: self.responses,
            errors: classifier,
        }
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
                    let result = call.await;
                    let event = match &result {
                        Ok(response) => match responses.classify(response) {
                            Some(failure) => Event::Failed(failure),
                            None => Event::Succeeded,
                        },
                        Err(error) => Event::Failed(errors.classify(error)),
                    };
                    permit.finish(event, None);
                    result.map_err(BreakerServiceError::Inner)
                })
            }
        }
    }
}
