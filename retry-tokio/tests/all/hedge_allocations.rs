//! Heap allocations per hedged call, counted by a global allocator on a
//! current-thread runtime (`cargo test -p retry-tokio --test all hedge_allocations::
//! -- --nocapture` prints the figures quoted in BENCHMARKS.md). The copies in
//! flight live in a `FuturesUnordered`: the set itself costs two allocations
//! and each copy one more. Nothing else of the call allocates.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::HedgePolicy;
use retry_tokio::Hedge;

use crate::counting::allocations_async as count;

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn allocations_per_hedged_call() {
    let ms = Duration::from_millis;
    let policy = HedgePolicy::builder()
        .max_attempts(3)
        .fixed_delay(ms(10))
        .build()
        .unwrap();
    let hedge = Hedge::<()>::new(policy).seed(1);
    // Warm up tokio's timer wheel and thread-locals, and the runtime's list
    // of tasks that yielded (a copy after the first joins it; it grows once
    // per runtime).
    let _ = hedge.call(|_| async { Ok::<_, ()>(()) }).await;
    tokio::task::yield_now().await;

    let one_copy = count(async {
        let done = hedge.call(|_| async { Ok::<_, ()>(1) }).await.unwrap();
        assert_eq!(done.launched, 1);
    })
    .await;
    let two_copies = count(async {
        let done = hedge
            .call(|ctx| async move {
                tokio::time::sleep(if ctx.is_first() { ms(1_000) } else { ms(1) }).await;
                Ok::<_, ()>(())
            })
            .await
            .unwrap();
        assert_eq!(done.launched, 2);
    })
    .await;
    let three_failures = count(async {
        let err = hedge
            .call(|_| async { Err::<(), _>(()) })
            .await
            .unwrap_err();
        assert_eq!(err.attempts(), 3);
    })
    .await;
    println!("allocations: first copy wins {one_copy}, hedge wins {two_copies}, three copies fail {three_failures}");
    // The counter counts: a box is one allocation.
    let boxed = count(async { drop(core::hint::black_box(Box::new(7u64))) }).await;
    assert_eq!(boxed, 1);
    // The copies' set (2) plus one per copy sent.
    assert_eq!((one_copy, two_copies, three_failures), (3, 4, 5));
}
