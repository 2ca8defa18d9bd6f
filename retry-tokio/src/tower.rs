//! Tower middleware (feature `tower`): [`RetryLayer`] retries a service's calls
//! under a [`Retry`], and [`BreakerLayer`] puts a [`SharedBreaker`](crate::SharedBreaker)
//! (or any other [`Breaker`]) in front of a service, failing fast with
//! [`BreakerServiceError::CircuitOpen`] while it is open.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use retry_core::{Event, Failure};
use retry_shared::{Breaker, Clock as _, PermitGuard};
use tower::{Layer, Service};

use crate::retry::{Retry, TokioClock};
use retry_core::{RetryError, Success};

/// A boxed, sendable future, as the services here return.
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How a [`RetryService`] makes a fresh request for each attempt from the
/// original one.
pub trait Recreate<Req> {
    /// A request for one more attempt.
    fn recreate(&self, original: &Req) -> Req;
}

/// Recreates a request by cloning it (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct ByClone;

impl<Req: Clone> Recreate<Req> for ByClone {
    fn recreate(&self, original: &Req) -> Req {
        original.clone()
    }
}

impl<Req, F: Fn(&Req) -> Req> Recreate<Req> for F {
    fn recreate(&self, original: &Req) -> Req {
        self(original)
    }
}

/// Retries every call of the wrapped service under a [`Retry`]. The request must
/// be `Clone`, or [`RetryLayer::recreate_with`] says how to rebuild it.
///
/// Each attempt clones the inner service, waits until it is ready and calls it;
/// an error from either is judged by the retrier's classifier. The service's error
/// becomes a [`RetryError`].
pub struct RetryLayer<E, R = ByClone> {
    retry: Retry<E>,
    recreate: R,
}

impl<E> RetryLayer<E> {
    /// A layer retrying under `retry`, cloning the request for each attempt.
    #[must_use]
    pub fn new(retry: Retry<E>) -> RetryLayer<E> {
        RetryLayer {
            retry,
            recreate: ByClone,
        }
    }
}

impl<E, R> RetryLayer<E, R> {
    /// Rebuilds the request for each attempt with `recreate` instead of cloning it
    /// (for requests that are not `Clone`, such as ones with a streaming body).
    #[must_use]
    pub fn recreate_with<R2>(self, recreate: R2) -> RetryLayer<E, R2> {
        RetryLayer {
            retry: self.retry,
            recreate,
        }
    }
}

impl<E, R: Clone> Clone for RetryLayer<E, R> {
    fn clone(&self) -> Self {
        RetryLayer {
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
        }
    }
}

impl<E, R> fmt::Debug for RetryLayer<E, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl<S, E, R: Clone> Layer<S> for RetryLayer<E, R> {
    type Service = RetryService<S, E, R>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
        }
    }
}

/// The service made by [`RetryLayer`].
pub struct RetryService<S, E, R = ByClone> {
    inner: S,
    retry: Retry<E>,
    recreate: R,
}

impl<S: Clone, E, R: Clone> Clone for RetryService<S, E, R> {
    fn clone(&self) -> Self {
        RetryService {
            inner: self.inner.clone(),
            retry: self.retry.clone(),
            recreate: self.recreate.clone(),
        }
    }
}

impl<S: fmt::Debug, E, R> fmt::Debug for RetryService<S, E, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryService")
            .field("inner", &self.inner)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl<S, Req, R> Service<Req> for RetryService<S, S::Error, R>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send + 'static,
    Req: Send + 'static,
    R: Recreate<Req> + Clone + Send + Sync + 'static,
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
        Box::pin(async move {
            retry
                .call(move |_ctx| {
                    let mut service = inner.clone();
                    let request = recreate.recreate(&request);
                    async move {
                        core::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                        service.call(request).await
                    }
                })
                .await
                .map(Success::into_value)
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
/// tells it the outcome (`Ok` a success, `Err` a failure). A refused call fails
/// at once with [`BreakerServiceError::CircuitOpen`] without reaching the inner
/// service.
///
/// A call whose future is dropped before it ends (an outer timeout, a
/// `select!`, a task abort) is abandoned, and never leaks its permit: if it ran
/// longer than the breaker's slow-call duration it is recorded as a failure (so
/// a hung backend behind an outer timeout still trips the breaker), otherwise
/// the permit is released without recording.
#[derive(Clone)]
pub struct BreakerLayer {
    breaker: Arc<dyn Breaker>,
}

impl BreakerLayer {
    /// A layer guarded by `breaker`: a [`SharedBreaker`](crate::SharedBreaker)
    /// (clones of it share its state) or any other [`Breaker`].
    #[must_use]
    pub fn new(breaker: impl Breaker + 'static) -> BreakerLayer {
        BreakerLayer {
            breaker: Arc::new(breaker),
        }
    }
}

impl fmt::Debug for BreakerLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = BreakerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BreakerService {
            inner,
            breaker: Arc::clone(&self.breaker),
        }
    }
}

/// The service made by [`BreakerLayer`].
#[derive(Clone)]
pub struct BreakerService<S> {
    inner: S,
    breaker: Arc<dyn Breaker>,
}

impl<S: fmt::Debug> fmt::Debug for BreakerService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, Req> Service<Req> for BreakerService<S>
where
    S: Service<Req>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
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
        let now = TokioClock.now();
        match PermitGuard::request(Arc::clone(&self.breaker), TokioClock, now, None) {
            Err(until) => {
                let retry_after = until.map(|until| until.saturating_duration_since(now));
                Box::pin(core::future::ready(Err(BreakerServiceError::CircuitOpen {
                    retry_after,
                })))
            }
            Ok(permit) => {
                // Abandoned (recorded or released) if this future is dropped
                // before the call ends.
                let call = self.inner.call(request);
                Box::pin(async move {
                    let result = call.await;
                    let event = match result {
                        Ok(_) => Event::Succeeded,
                        Err(_) => Event::Failed(Failure::retryable()),
                    };
                    permit.finish(event, TokioClock.now());
                    result.map_err(BreakerServiceError::Inner)
                })
            }
        }
    }
}
