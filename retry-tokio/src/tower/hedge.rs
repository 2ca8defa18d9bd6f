//! [`HedgeLayer`]: hedges the calls of a service under a [`Hedge`], each
//! request only if it may be sent twice.

use core::fmt;
use core::task::{Context, Poll};

use retry_core::{replay_verdict, Failure, FailureKind, RetryError};
use tower::{Layer, Service};

use super::{
    not_recreated, BoxFuture, ByClone, ByMethod, ErrorClassifier, IdempotentWhen, OkIsSuccess,
    Recreate, Replay, ReplayRule, ResponseClassifier,
};
use crate::hedge::{CopyContext, Hedge};
use crate::AttemptContext;

/// Hedges the calls of the wrapped service under a [`Hedge`]: when a call has
/// not answered after the policy's delay (or a copy fails), another copy of the
/// request is sent to a clone of the service, and the first good answer wins;
/// the other copies' futures are dropped. The request must be `Clone`, or
/// [`HedgeLayer::recreate_with`] says how to make each copy.
///
/// **Only requests that may be sent twice are hedged.** The layer reads each
/// request with its [`ReplayRule`] ([`ByMethod`] by default: GET, HEAD and
/// OPTIONS, or an `http::Request` whose extensions hold the core's
/// [`Idempotency::Always`](retry_core::Idempotency::Always)) and hedges it
/// under the core's [`HedgePolicy::for_request`](retry_core::HedgePolicy::for_request):
/// a POST, a PUT, a PATCH or a DELETE is sent once, unless marked (or unless
/// the policy says `hedge_non_idempotent(true)`). For a request type that is
/// not an HTTP request, say which may be sent twice with
/// [`idempotent_when`](HedgeLayer::idempotent_when).
///
/// **A failed copy never wins.** Each copy's response is judged by the layer's
/// [`ResponseClassifier`] (with the `http` feature, `HttpStatus`) and its error
/// by its [`ErrorClassifier`] (by default the hedger's own classifier): a
/// retryable failure (a 503) is a failed copy, and the next copy goes out at
/// once while the others run on; a permanent one (a 400) ends the call and
/// cancels the rest. When every copy failed, the call's answer is the last
/// failed response, `Ok`, as [`RetryLayer`](super::RetryLayer) answers; the
/// service's error otherwise becomes a [`RetryError`].
///
/// Each copy clones the inner service, waits until it is ready and calls it.
/// Copies run inside the call's future: nothing is spawned.
///
/// ```
/// use core::time::Duration;
/// use retry_tokio::{tower::HedgeLayer, Hedge, HedgePolicy};
/// use tower::{service_fn, ServiceBuilder, ServiceExt as _};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let seen = calls.clone();
/// let slow_first = service_fn(move |name: &'static str| {
///     let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
///     async move {
///         // The first request stalls; later ones answer in 5 ms.
///         let takes = if n == 0 { 60_000 } else { 5 };
///         tokio::time::sleep(Duration::from_millis(takes)).await;
///         Ok::<_, std::io::Error>(format!("hello {name} from request {n}"))
///     }
/// });
/// let policy = HedgePolicy::builder().max_attempts(2).fixed_delay(Duration::from_millis(20)).build()?;
/// let service = ServiceBuilder::new()
///     // A lookup by name has no side effect: every request may be sent twice.
///     .layer(HedgeLayer::new(Hedge::new(policy)).idempotent_when(|_: &&str| true))
///     .service(slow_first);
/// let answer = service.oneshot("you").await?;
/// assert_eq!(answer, "hello you from request 1");
/// assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
/// # Ok(())
/// # }
/// ```
pub struct HedgeLayer<E, R = ByClone, C = OkIsSuccess, K = HedgeClassifier<E>, I = ByMethod> {
    hedge: Hedge<E>,
    recreate: R,
    responses: C,
    errors: K,
    rule: I,
}

/// Judges errors with the [`Hedge`]'s own classifier ([`Hedge::classify`]): a
/// [`HedgeLayer`]'s default.
pub struct HedgeClassifier<E> {
    hedge: Hedge<E>,
}

impl<E> Clone for HedgeClassifier<E> {
    fn clone(&self) -> Self {
        HedgeClassifier {
            hedge: self.hedge.clone(),
        }
    }
}

impl<E> fmt::Debug for HedgeClassifier<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeClassifier").finish_non_exhaustive()
    }
}

impl<E> ErrorClassifier<E> for HedgeClassifier<E> {
    fn classify(&self, error: &E, _replay: Replay) -> Failure {
        self.hedge.judge(error)
    }
}

impl<E> HedgeLayer<E> {
    /// A layer hedging under `hedge` the requests that may be sent twice
    /// ([`ByMethod`]), cloning the request for each copy, every response a
    /// success, errors judged by `hedge`'s classifier.
    #[must_use]
    pub fn new(hedge: Hedge<E>) -> HedgeLayer<E> {
        HedgeLayer {
            errors: HedgeClassifier {
                hedge: hedge.clone(),
            },
            hedge,
            recreate: ByClone,
            responses: OkIsSuccess,
            rule: ByMethod,
        }
    }
}

impl<E, R, C, K, I> HedgeLayer<E, R, C, K, I> {
    /// Makes each copy's request with `recreate` instead of cloning it.
    #[must_use]
    pub fn recreate_with<R2>(self, recreate: R2) -> HedgeLayer<E, R2, C, K, I> {
        HedgeLayer {
            hedge: self.hedge,
            recreate,
            responses: self.responses,
            errors: self.errors,
            rule: self.rule,
        }
    }

    /// Judges each copy's response with `classifier` (e.g. `HttpStatus`): a
    /// response it calls a retryable failure is a failed copy (the next copy
    /// goes out at once), a permanent one ends the call.
    #[must_use]
    pub fn classify_responses<C2>(self, classifier: C2) -> HedgeLayer<E, R, C2, K, I> {
        HedgeLayer {
            hedge: self.hedge,
            recreate: self.recreate,
            responses: classifier,
            errors: self.errors,
            rule: self.rule,
        }
    }

    /// Judges each copy's error with `classifier` (told the request's
    /// [`Replay`]) instead of the hedger's classifier.
    #[must_use]
    pub fn classify_errors<K2>(self, classifier: K2) -> HedgeLayer<E, R, C, K2, I> {
        HedgeLayer {
            hedge: self.hedge,
            recreate: self.recreate,
            responses: self.responses,
            errors: classifier,
            rule: self.rule,
        }
    }

    /// Reads whether a request may be sent twice with `rule` instead of
    /// [`ByMethod`] (e.g. `ByMethod.or_when(…)`).
    #[must_use]
    pub fn replay_rule<I2>(self, rule: I2) -> HedgeLayer<E, R, C, K, I2> {
        HedgeLayer {
            hedge: self.hedge,
            recreate: self.recreate,
            responses: self.responses,
            errors: self.errors,
            rule,
        }
    }

    /// Lets `idempotent` say, for any request type, which requests may be
    /// hedged (`|_: &MyRequest| true` when every one may): the rule for a
    /// request that is not an HTTP request.
    #[must_use]
    pub fn idempotent_when<F>(self, idempotent: F) -> HedgeLayer<E, R, C, K, IdempotentWhen<F>> {
        self.replay_rule(IdempotentWhen::new(idempotent))
    }
}

impl<E, R: Clone, C: Clone, K: Clone, I: Clone> Clone for HedgeLayer<E, R, C, K, I> {
    fn clone(&self) -> Self {
        HedgeLayer {
            hedge: self.hedge.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
            rule: self.rule.clone(),
        }
    }
}

impl<E, R, C, K, I> fmt::Debug for HedgeLayer<E, R, C, K, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("hedge", &self.hedge)
            .finish_non_exhaustive()
    }
}

impl<S, E, R: Clone, C: Clone, K: Clone, I: Clone> Layer<S> for HedgeLayer<E, R, C, K, I> {
    type Service = HedgeService<S, E, R, C, K, I>;

    fn layer(&self, inner: S) -> Self::Service {
        HedgeService {
            inner,
            hedge: self.hedge.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
            rule: self.rule.clone(),
        }
    }
}

/// The service made by [`HedgeLayer`].
pub struct HedgeService<S, E, R = ByClone, C = OkIsSuccess, K = HedgeClassifier<E>, I = ByMethod> {
    inner: S,
    hedge: Hedge<E>,
    recreate: R,
    responses: C,
    errors: K,
    rule: I,
}

impl<S: Clone, E, R: Clone, C: Clone, K: Clone, I: Clone> Clone for HedgeService<S, E, R, C, K, I> {
    fn clone(&self) -> Self {
        HedgeService {
            inner: self.inner.clone(),
            hedge: self.hedge.clone(),
            recreate: self.recreate.clone(),
            responses: self.responses.clone(),
            errors: self.errors.clone(),
            rule: self.rule.clone(),
        }
    }
}

impl<S: fmt::Debug, E, R, C, K, I> fmt::Debug for HedgeService<S, E, R, C, K, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeService")
            .field("inner", &self.inner)
            .field("hedge", &self.hedge)
            .finish_non_exhaustive()
    }
}

/// A copy's error: the service's, or its request could not be made.
enum CopyError<E> {
    Service(E),
    NotRecreated,
}

impl<S, Req, R, C, K, I> Service<Req> for HedgeService<S, S::Error, R, C, K, I>
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

    /// Always ready: each copy waits for its own clone of the inner service.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let inner = self.inner.clone();
        let hedge = self.hedge.clone();
        let recreate = self.recreate.clone();
        let responses = self.responses.clone();
        let errors = self.errors.clone();
        let mut replay = self.rule.replay(&request);
        Box::pin(async move {
            // The first copy's request, made before the call so that a request
            // that cannot be made again is known to be sent once.
            let first = CopyContext::first(hedge.cancel_token_ref().cloned());
            let (first, original) =
                match recreate.recreate(&request, &AttemptContext::for_copy(&first)) {
                    Ok(first) => (first, Some(request)),
                    Err(why) => {
                        not_recreated(&why);
                        replay = replay.sent_once();
                        (request, None)
                    }
                };
            // The core decides whether this request is hedged; one that
            // cannot be made again is sent once, whatever the policy allows.
            let mut policy = hedge
                .policy()
                .for_request(replay.method(), replay.idempotency());
            if original.is_none() {
                policy = policy
                    .to_builder()
                    .hedge_non_idempotent(false)
                    .build()
                    .unwrap_or(policy);
            }
            // Copies of a request that may not be replayed are hedged only
            // when the policy allows it anyway: then a failed copy's verdict
            // stands (the caller accepted the repeats).
            let replayable = policy.allowed_attempts() > 1 || replay.may_replay();
            let mut first = Some(first);
            let call = hedge.run(
                &policy,
                move |copy| {
                    let request = match first.take() {
                        Some(request) => Some(request),
                        None => original.as_ref().and_then(|original| {
                            recreate
                                .recreate(original, &AttemptContext::for_copy(&copy))
                                .ok()
                        }),
                    };
                    let mut service = inner.clone();
                    async move {
                        let Some(request) = request else {
                            return Err(CopyError::NotRecreated);
                        };
                        core::future::poll_fn(|cx| service.poll_ready(cx))
                            .await
                            .map_err(CopyError::Service)?;
                        service.call(request).await.map_err(CopyError::Service)
                    }
                },
                |response| responses.classify(response),
                |error| match error {
                    CopyError::Service(error) => {
                        replay_verdict(errors.classify(error, replay), replayable)
                    }
                    // Nothing was sent for this copy; the others run on.
                    CopyError::NotRecreated => Failure::retryable().with_kind(FailureKind::NotSent),
                },
            );
            let done = crate::hedge::instrument(&policy, call).await;
            match done {
                Ok(hedged) => Ok(hedged.value),
                Err((_, Some(response))) => Ok(response),
                Err((error, None)) => Err(service_error(error)),
            }
        })
    }
}

/// The call's error with the service's error as its last (a copy whose
/// request could not be made leaves none).
fn service_error<E>(error: RetryError<CopyError<E>>) -> RetryError<E> {
    let (reason, attempts, elapsed) = (error.reason(), error.attempts(), error.elapsed());
    let (failure, attempt) = (error.last_failure(), error.last_error_attempt());
    let last = match error.into_last_error() {
        Some(CopyError::Service(error)) => Some(error),
        Some(CopyError::NotRecreated) | None => None,
    };
    RetryError::new(reason, attempts, elapsed, last)
        .with_last_failure(failure)
        .with_last_error_attempt(attempt)
}
