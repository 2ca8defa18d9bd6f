//! Streams mapped through a retried operation with bounded concurrency.

use core::future::Future;
use std::sync::Arc;

use futures_core::Stream;
use futures_util::StreamExt as _;

use crate::retry::{AttemptContext, Retry};
use retry_core::{RetryError, Success};

/// Maps a stream's items through a fallible async operation, each item retried
/// under a [`Retry`], with at most `limit` items in flight.
///
/// An item holds one slot from its first attempt to its last, sleeps included, and
/// never more than one. An item that gives up yields `Err` for that item alone;
/// the items after it go on. Nothing is spawned: the items run inside the stream
/// as it is polled.
///
/// ```
/// use futures_util::StreamExt as _;
/// use retry_core::RetryPolicy;
/// use retry_tokio::{Retry, RetryStreamExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let retry = Retry::new(RetryPolicy::builder().max_attempts(3).build().unwrap());
/// let doubled: Vec<_> = futures_util::stream::iter([1, 2, 3])
///     .retry_map(retry, 2, |n: u32, ctx| async move {
///         if ctx.attempt() < 2 { Err("flaky") } else { Ok(n * 2) }
///     })
///     .collect()
///     .await;
/// assert_eq!(doubled, [Ok(2), Ok(4), Ok(6)]);
/// # }
/// ```
pub trait RetryStreamExt: Stream + Sized {
    /// Maps every item through `op`, retried under `retry`, with at most `limit`
    /// items in flight (at least one), yielding results in the input's order.
    /// `op` gets the item (cloned for each attempt) and the attempt's context.
    fn retry_map<T, E, F, Fut>(
        self,
        retry: Retry<E>,
        limit: usize,
        op: F,
    ) -> impl Stream<Item = Result<T, RetryError<E>>>
    where
        Self::Item: Clone,
        F: Fn(Self::Item, AttemptContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let op = Arc::new(op);
        self.map(move |item| one_item(retry.clone(), Arc::clone(&op), item))
            .buffered(limit.max(1))
    }

    /// Like [`retry_map`](RetryStreamExt::retry_map), but yields each result as
    /// soon as its item finishes, whatever the input's order.
    fn retry_map_unordered<T, E, F, Fut>(
        self,
        retry: Retry<E>,
        limit: usize,
        op: F,
    ) -> impl Stream<Item = Result<T, RetryError<E>>>
    where
        Self::Item: Clone,
        F: Fn(Self::Item, AttemptContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let op = Arc::new(op);
        self.map(move |item| one_item(retry.clone(), Arc::clone(&op), item))
            .buffer_unordered(limit.max(1))
    }
}

impl<S: Stream> RetryStreamExt for S {}

/// One item's whole retried call: the unit that holds one slot.
async fn one_item<I, T, E, F, Fut>(retry: Retry<E>, op: Arc<F>, item: I) -> Result<T, RetryError<E>>
where
    I: Clone,
    F: Fn(I, AttemptContext) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retry
        .call(|ctx| op(item.clone(), ctx))
        .await
        .map(Success::into_value)
}
