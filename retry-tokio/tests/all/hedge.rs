//! `Hedge::call` in virtual time (tokio's paused clock): which copies run, when,
//! in which task, which one wins, and that the losers are dropped, with a
//! shared budget and breaker.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{
    BasicRule, BreakerConfig, BudgetConfig, Failure, GiveUpReason, HedgeMode, HedgePolicy,
    HedgePolicyBuilder, Hint, ManualState,
};
use retry_tokio::{CancellationToken, Hedge, SharedBreaker, SharedBudget};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn hedge(attempts: u32, delay: u64) -> HedgePolicyBuilder {
    HedgePolicy::builder()
        .max_attempts(attempts)
        .fixed_delay(ms(delay))
}

/// Counts copies started and copies dropped before they finished.
#[derive(Clone, Default)]
struct Tally {
    started: Arc<Mutex<Vec<(u32, Duration)>>>,
    dropped: Arc<AtomicU32>,
}

impl Tally {
    fn started(&self) -> Vec<(u32, Duration)> {
        self.started.lock().unwrap().clone()
    }
    fn dropped(&self) -> u32 {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// Bumps the drop count unless disarmed (the copy finished).
struct DropGuard(Arc<AtomicU32>, bool);

impl Drop for DropGuard {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A copy that answers `result` after `takes`, recording itself in `tally`.
async fn copy<T>(
    tally: &Tally,
    start: Instant,
    copy: u32,
    takes: Duration,
    result: Result<T, &'static str>,
) -> Result<T, &'static str> {
    tally.started.lock().unwrap().push((copy, start.elapsed()));
    let mut guard = DropGuard(Arc::clone(&tally.dropped), true);
    tokio::time::sleep(takes).await;
    guard.1 = false;
    result
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_slow_first_copy_loses_to_the_hedge_and_is_dropped() {
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(3, 50).build().unwrap())
        .call(|ctx| {
            let takes = if ctx.is_first() { ms(10_000) } else { ms(20) };
            copy(&tally, start, ctx.copy(), takes, Ok(ctx.copy()))
        })
        .await
        .unwrap();
    assert_eq!((done.value, done.copy, done.launched), (2, 2, 2));
    assert_eq!(done.elapsed, ms(70));
    assert_eq!(tally.started(), [(1, ms(0)), (2, ms(50))]);
    assert_eq!(tally.dropped(), 1, "the first copy was dropped unfinished");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn copies_run_in_the_calling_task_and_nothing_is_spawned() {
    let task = tokio::spawn(async {
        let outer = tokio::task::id();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hedger = Hedge::new(hedge(3, 10).build().unwrap());
        let done = hedger
            .call(|ctx| {
                let seen = Arc::clone(&seen);
                async move {
                    let alive = tokio::runtime::Handle::current()
                        .metrics()
                        .num_alive_tasks();
                    seen.lock().unwrap().push((tokio::task::id(), alive));
                    let takes = if ctx.copy() < 3 { ms(1_000) } else { ms(5) };
                    tokio::time::sleep(takes).await;
                    Ok::<_, ()>(ctx.copy())
                }
            })
            .await
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        (outer, seen, done.copy)
    });
    let (outer, seen, winner) = task.await.unwrap();
    assert_eq!(winner, 3);
    assert_eq!(seen.len(), 3);
    for (id, alive) in seen {
        assert_eq!(id, outer, "a copy ran in another task");
        assert_eq!(alive, 1, "only the calling task is alive");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fast_first_copy_sends_no_hedge() {
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(3, 50).build().unwrap())
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(30), Ok(())))
        .await
        .unwrap();
    assert_eq!((done.copy, done.launched, done.elapsed), (1, 1, ms(30)));
    assert_eq!(tally.dropped(), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failure_sends_the_next_copy_at_once_and_a_permanent_one_ends_the_call() {
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(3, 100).build().unwrap())
        .call(|ctx| {
            let (takes, result) = match ctx.copy() {
                1 => (ms(20), Err("busy")),
                _ => (ms(30), Ok(ctx.copy())),
            };
            copy(&tally, start, ctx.copy(), takes, result)
        })
        .await
        .unwrap();
    assert_eq!(tally.started(), [(1, ms(0)), (2, ms(20))]);
    assert_eq!((done.value, done.elapsed), (2, ms(50)));

    let tally = Tally::default();
    let err = Hedge::new(hedge(3, 50).build().unwrap())
        .classify(|e: &&str| {
            if *e == "not found" {
                Failure::permanent()
            } else {
                Failure::retryable()
            }
        })
        .call(|ctx| {
            let (takes, result) = match ctx.copy() {
                1 => (ms(10_000), Ok(())),
                _ => (ms(10), Err("not found")),
            };
            copy(&tally, start, ctx.copy(), takes, result)
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.permanent");
    assert_eq!(err.attempts(), 2);
    assert_eq!(err.last_error(), Some(&"not found"));
    assert_eq!(tally.dropped(), 1, "the first copy was cancelled");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn pushback_delays_the_next_copy_by_exactly_the_hint() {
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(2, 50).build().unwrap())
        .classify(|_: &&str| Failure::retryable().with_hint(Hint::Pushback(ms(333))))
        .call(|ctx| {
            let result = if ctx.is_first() {
                Err("slow down")
            } else {
                Ok(())
            };
            copy(&tally, start, ctx.copy(), ms(7), result)
        })
        .await
        .unwrap();
    assert_eq!(tally.started(), [(1, ms(0)), (2, ms(340))]);
    assert_eq!(done.elapsed, ms(347));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_copy_failing_exhausts_the_call() {
    let tally = Tally::default();
    let start = Instant::now();
    let err = Hedge::new(hedge(3, 50).build().unwrap())
        .call(|ctx| copy::<()>(&tally, start, ctx.copy(), ms(70), Err("down")))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.last_error(), Some(&"down"));
    assert_eq!(tally.started(), [(1, ms(0)), (2, ms(50)), (3, ms(70))]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_modes() {
    // Parallel: both copies at once; the faster wins.
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(2, 1_000).mode(HedgeMode::Parallel).build().unwrap())
        .call(|ctx| {
            let takes = if ctx.is_first() { ms(40) } else { ms(25) };
            copy(&tally, start, ctx.copy(), takes, Ok(ctx.copy()))
        })
        .await
        .unwrap();
    assert_eq!(tally.started(), [(1, ms(0)), (2, ms(0))]);
    assert_eq!((done.copy, done.elapsed), (2, ms(25)));
    assert_eq!(tally.dropped(), 1);

    // Fallback: a slow copy is never hedged on a timer.
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(2, 10).mode(HedgeMode::Fallback).build().unwrap())
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(900), Ok(ctx.copy())))
        .await
        .unwrap();
    assert_eq!(tally.started(), [(1, ms(0))]);
    assert_eq!((done.copy, done.elapsed), (1, ms(900)));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_non_idempotent_call_is_never_hedged_unless_allowed() {
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(3, 50).idempotent(false).build().unwrap())
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(500), Ok(())))
        .await
        .unwrap();
    assert_eq!((done.copy, done.launched), (1, 1));
    assert_eq!(tally.started(), [(1, ms(0))]);

    let flagged = Arc::new(Mutex::new(Vec::new()));
    let done = Hedge::new(
        hedge(2, 50)
            .idempotent(false)
            .hedge_non_idempotent(true)
            .build()
            .unwrap(),
    )
    .call(|ctx| {
        flagged
            .lock()
            .unwrap()
            .push((ctx.copy(), ctx.replays_non_idempotent()));
        async move {
            tokio::time::sleep(if ctx.is_first() { ms(500) } else { ms(1) }).await;
            Ok::<_, ()>(())
        }
    })
    .await
    .unwrap();
    assert_eq!(done.copy, 2);
    assert_eq!(*flagged.lock().unwrap(), [(1, false), (2, true)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_budget_refusal_stops_hedging_without_failing_the_copy_in_flight() {
    // gRPC throttling: 10 tokens, retries need more than 5. Six failures leave 4.
    let budget = SharedBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());
    let drain = Hedge::new(hedge(1, 50).build().unwrap()).budget(budget.clone());
    for _ in 0..6 {
        let err = drain.call(|_| async { Err::<(), _>("down") }).await;
        assert_eq!(err.unwrap_err().code(), "retry.exhausted");
    }
    assert_eq!(budget.tokens().whole(), 4);

    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(3, 50).use_retry_budget(true).build().unwrap())
        .budget(budget.clone())
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(400), Ok(ctx.copy())))
        .await
        .unwrap();
    assert_eq!((done.copy, done.launched, done.elapsed), (1, 1, ms(400)));
    assert_eq!(tally.started(), [(1, ms(0))]);

    // With nothing in flight, the refusal ends the call.
    let err = Hedge::new(hedge(3, 50).use_retry_budget(true).build().unwrap())
        .budget(budget.clone())
        .call(|_| async { Err::<(), _>("down") })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.retry_budget");
    assert_eq!(err.attempts(), 1);

    // A healthy budget grants the hedges.
    let healthy = SharedBudget::new(BudgetConfig::aws_standard());
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(3, 50).use_retry_budget(true).build().unwrap())
        .budget(healthy.clone())
        .call(|ctx| {
            let takes = if ctx.copy() < 3 { ms(1_000) } else { ms(5) };
            copy(&tally, start, ctx.copy(), takes, Ok(ctx.copy()))
        })
        .await
        .unwrap();
    assert_eq!(done.copy, 3);
    // Two withdrawals of 5 tokens; the winning hedge refunds one.
    assert_eq!(healthy.tokens().whole(), 495);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_breaker_admits_each_copy() {
    // Three failures in a row open it for a second; one probe when half-open.
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 3,
        open_duration: ms(1_000),
        success_threshold: 1,
    })
    .unwrap()
    .to_builder()
    .half_open_permits(1)
    .build()
    .unwrap();
    // Forced open: nothing runs.
    let open = SharedBreaker::new(config).unwrap();
    open.force_at(ManualState::ForcedOpen, Instant::now().into_std())
        .unwrap();
    let ran = AtomicU32::new(0);
    let err = Hedge::new(hedge(3, 50).build().unwrap())
        .breaker(open)
        .call(|_| {
            ran.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, ()>(()) }
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.circuit_open");
    assert_eq!(err.attempts(), 0);
    assert_eq!(ran.load(Ordering::SeqCst), 0);

    // Half-open with one probe: the first copy is the probe, the hedge is
    // rejected (and stops hedging), the first copy's success closes the breaker.
    let breaker = SharedBreaker::new(config).unwrap();
    for _ in 0..3 {
        let _ = Hedge::new(hedge(1, 50).build().unwrap())
            .breaker(breaker.clone())
            .call(|_| async { Err::<(), _>("down") })
            .await;
    }
    assert_eq!(breaker.state(), retry_core::BreakerState::Open);
    tokio::time::sleep(ms(1_000)).await;
    let tally = Tally::default();
    let start = Instant::now();
    let done = Hedge::new(hedge(3, 50).build().unwrap())
        .breaker(breaker.clone())
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(200), Ok(ctx.copy())))
        .await
        .unwrap();
    assert_eq!((done.copy, done.launched), (1, 1));
    assert_eq!(tally.started(), [(1, ms(0))]);
    assert_eq!(breaker.state(), retry_core::BreakerState::Closed);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_losing_copy_gives_its_breaker_permit_back() {
    // Two probe slots, half-open: a hedged call takes both; its loser is dropped
    // and must give its slot back without recording anything.
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(ms(100))
        .half_open_permits(2)
        .success_threshold(2)
        .build()
        .unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let _ = Hedge::new(hedge(1, 50).build().unwrap())
        .breaker(breaker.clone())
        .call(|_| async { Err::<(), _>("down") })
        .await;
    tokio::time::sleep(ms(100)).await;
    let done = Hedge::new(hedge(2, 10).build().unwrap())
        .breaker(breaker.clone())
        .call(|ctx| async move {
            tokio::time::sleep(if ctx.is_first() { ms(1_000) } else { ms(5) }).await;
            Ok::<_, ()>(ctx.copy())
        })
        .await
        .unwrap();
    assert_eq!(done.copy, 2);
    // One success of two needed; the loser's probe slot is free again.
    assert_eq!(breaker.state(), retry_core::BreakerState::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight(), 0);
    assert_eq!(breaker.snapshot().probe_successes(), 1);
    let done = Hedge::new(hedge(1, 10).build().unwrap())
        .breaker(breaker.clone())
        .call(|_| async { Ok::<_, ()>(()) })
        .await;
    assert!(done.is_ok());
    assert_eq!(breaker.state(), retry_core::BreakerState::Closed);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn cancelling_drops_every_copy() {
    let token = CancellationToken::new();
    let tally = Tally::default();
    let start = Instant::now();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(ms(120)).await;
        cancel.cancel();
    });
    let err = Hedge::new(hedge(3, 50).build().unwrap())
        .cancel_token(token.clone())
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(10_000), Ok(())))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.cancelled");
    assert_eq!((err.attempts(), err.elapsed()), (3, Some(ms(120))));
    assert_eq!(tally.dropped(), 3);
    // Cancelled before the start: nothing runs.
    let err = Hedge::new(hedge(3, 50).build().unwrap())
        .cancel_token(token)
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(1), Ok(())))
        .await
        .unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.cancelled", 0));
    assert_eq!(tally.started().len(), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_timeout_drops_every_copy() {
    let tally = Tally::default();
    let start = Instant::now();
    let err = Hedge::new(hedge(2, 50).timeout(ms(300)).build().unwrap())
        .call(|ctx| copy(&tally, start, ctx.copy(), ms(10_000), Ok(())))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(err.reason(), GiveUpReason::TimedOut { timeout: ms(300) });
    assert_eq!(err.elapsed(), Some(ms(300)));
    assert_eq!(tally.dropped(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn dropping_the_call_drops_every_copy() {
    let tally = Tally::default();
    let start = Instant::now();
    let hedger = Hedge::new(hedge(3, 50).build().unwrap());
    let call = hedger.call(|ctx| copy(&tally, start, ctx.copy(), ms(10_000), Ok(())));
    assert!(tokio::time::timeout(ms(130), call).await.is_err());
    assert_eq!(tally.started().len(), 3);
    assert_eq!(tally.dropped(), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_adaptive_delay_learns_from_the_winners() {
    let hedger = Hedge::new(
        hedge(2, 0)
            .adaptive_delay(90.0, 10, ms(500))
            .build()
            .unwrap(),
    );
    // Ten calls answering in 40 ms: no hedge (the fallback is 500 ms).
    for _ in 0..10 {
        let done = hedger
            .call(|_| async {
                tokio::time::sleep(ms(40)).await;
                Ok::<_, &str>(())
            })
            .await
            .unwrap();
        assert_eq!(done.launched, 1);
    }
    let history = hedger.latency_history();
    assert_eq!(history.count(), 10);
    let delay = hedger.policy().delay().resolve(&history);
    assert!(delay >= ms(40) && delay <= ms(50), "{delay:?}");
    // Now a stuck first copy is hedged after about 40 ms, not 500.
    let tally = Tally::default();
    let start = Instant::now();
    let done = hedger
        .call(|ctx| {
            let takes = if ctx.is_first() { ms(10_000) } else { ms(40) };
            copy(&tally, start, ctx.copy(), takes, Ok(()))
        })
        .await
        .unwrap();
    assert_eq!(done.copy, 2);
    assert_eq!(tally.started()[1], (2, delay));
}

#[cfg(feature = "tower")]
mod tower_layer {
    use super::*;
    use retry_tokio::tower::HedgeLayer;
    use tower::{service_fn, ServiceBuilder, ServiceExt as _};

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_layer_hedges_a_stalled_request_and_drops_the_loser() {
        let tally = Tally::default();
        let counter = Arc::new(AtomicU32::new(0));
        let (t, c) = (tally.clone(), Arc::clone(&counter));
        let start = Instant::now();
        let inner = service_fn(move |request: u32| {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            let t = t.clone();
            // Request 1 stalls; the rest answer in 15 ms.
            let takes = if n == 1 { ms(60_000) } else { ms(15) };
            async move { copy(&t, start, n, takes, Ok(request * 10 + n)).await }
        });
        let service = ServiceBuilder::new()
            .layer(
                HedgeLayer::new(Hedge::new(hedge(2, 40).build().unwrap()))
                    .idempotent_when(|_: &u32| true),
            )
            .service(inner);
        let answer = service.clone().oneshot(7).await.unwrap();
        assert_eq!(answer, 72, "the second request answered");
        assert_eq!(counter.load(Ordering::SeqCst), 2);
        assert_eq!(tally.started(), [(1, ms(0)), (2, ms(40))]);
        assert_eq!(tally.dropped(), 1);
        assert_eq!(start.elapsed(), ms(55));
        // A fast request is sent once.
        let answer = service.oneshot(8).await.unwrap();
        assert_eq!(answer, 83);
        assert_eq!(counter.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_layer_classifies_the_services_errors() {
        let counter = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&counter);
        let inner = service_fn(move |_: ()| {
            c.fetch_add(1, Ordering::SeqCst);
            async { Err::<(), _>("bad request") }
        });
        let hedger = Hedge::new(hedge(3, 40).build().unwrap()).classify(|e: &&str| {
            if e.starts_with("bad") {
                Failure::permanent()
            } else {
                Failure::retryable()
            }
        });
        let err = ServiceBuilder::new()
            .layer(HedgeLayer::new(hedger).idempotent_when(|_: &()| true))
            .service(inner)
            .oneshot(())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "retry.permanent");
        assert_eq!(
            counter.load(Ordering::SeqCst),
            1,
            "a permanent error is not hedged"
        );
    }
}
