//! [`HedgeLayer`]: hedges every call of a service under a [`Hedge`].

use core::fmt;
use core::task::{Context, Poll};

use retry_core::RetryError;
use tower::{Layer, Service};

use super::{BoxFuture, ByClone, Recreate};
use crate::hedge::Hedge;
use crate::AttemptContext;

/// Hedges every call of the wrapped service under a [`Hedge`]: when the call has
/// not answered after the policy's delay (or a copy fails), another copy of the
/// request is sent to a clone of the service, and the first good answer wins;
/// the other copies' futures are dropped. The request must be `Clone`, or
/// [`HedgeLayer::recreate_with`] says how to make each copy.
///
/// Each copy clones the inner service, waits until it is ready and calls it; an
/// error from either is judged by the hedger's classifier. The service's error
/// becomes a [`RetryError`]. Copies run inside the call's future: nothing is
/// spawned.
///
/// ```
/// use core::time::Duration;
/// use retry_core::HedgePolicy;
/// use retry_tokio::{tower::HedgeLayer, Hedge};
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
///     .layer(HedgeLayer::new(Hedge::new(policy)))
///     .service(slow_first);
/// let answer = service.oneshot("you").await?;
/// assert_eq!(answer, "hello you from request 1");
/// assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 2);
/// # Ok(())
/// # }
/// ```
pub struct HedgeLayer<E, R = ByClone> {
    hedge: Hedge<E>,
    recreate: R,
}

impl<E> HedgeLayer<E> {
    /// A layer hedging under `hedge`, cloning the request for each copy.
    #[must_use]
    pub fn new(hedge: Hedge<E>) -> HedgeLayer<E> {
        HedgeLayer {
            hedge,
            recreate: ByClone,
        }
    }
}

impl<E, R> HedgeLayer<E, R> {
    /// Makes each copy's request with `recreate` instead of cloning it.
    #[must_use]
    pub fn recreate_with<R2>(self, recreate: R2) -> HedgeLayer<E, R2> {
        HedgeLayer {
            hedge: self.hedge,
            recreate,
        }
    }
}

impl<E, R: Clone> Clone for HedgeLayer<E, R> {
    fn clone(&self) -> Self {
        HedgeLayer {
            hedge: self.hedge.clone(),
            recreate: self.recreate.clone(),
        }
    }
}

impl<E, R> fmt::Debug for HedgeLayer<E, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("hedge", &self.hedge)
            .finish_non_exhaustive()
    }
}

impl<S, E, R: Clone> Layer<S> for HedgeLayer<E, R> {
    type Service = HedgeService<S, E, R>;

    fn layer(&self, inner: S) -> Self::Service {
        HedgeService {
            inner,
            hedge: self.hedge.clone(),
            recreate: self.recreate.clone(),
        }
    }
}

/// The service made by [`HedgeLayer`].
pub struct HedgeService<S, E, R = ByClone> {
    inner: S,
    hedge: Hedge<E>,
    recreate: R,
}

impl<S: Clone, E, R: Clone> Clone for HedgeService<S, E, R> {
    fn clone(&self) -> Self {
        HedgeService {
            inner: self.inner.clone(),
            hedge: self.hedge.clone(),
            recreate: self.recreate.clone(),
        }
    }
}

impl<S: fmt::Debug, E, R> fmt::Debug for HedgeService<S, E, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeService")
            .field("inner", &self.inner)
            .field("hedge", &self.hedge)
            .finish_non_exhaustive()
    }
}

impl<S, Req, R> Service<Req> for HedgeService<S, S::Error, R>
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

    /// Always ready: each copy waits for its own clone of the inner service.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let inner = self.inner.clone();
        let hedge = self.hedge.clone();
        let recreate = self.recreate.clone();
        Box::pin(async move {
            hedge
                .call(move |copy| {
                    let mut service = inner.clone();
                    let request = recreate.recreate(&request, &AttemptContext::for_copy(&copy));
                    async move {
                        core::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                        service.call(request).await
                    }
                })
                .await
                .map(|hedged| hedged.value)
        })
    }
}
