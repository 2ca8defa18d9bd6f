#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The driver against tokio's paused clock.

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{Backoff, Failure, FailureKind, GiveUpReason, Jitter, RetryPolicy};
use retry_tokio::{retry, CancellationToken, Retry, RetryError};
use tokio::time::Instant;

fn exponential(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn five_attempts_exhaust_in_virtual_time() {
    let wall = std::time::Instant::now();
    let calls = AtomicU32::new(0);
    let started = Instant::now();
    let err = retry(exponential(5), |_ctx| {
        calls.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), _>("down") }
    })
    .await
    .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Exhausted);
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(err.attempts(), 5);
    // No clock read at the call's start: its time is not reported.
    assert_eq!(err.elapsed(), None);
    assert_eq!(started.elapsed(), Duration::from_secs(15));
    assert_eq!(err.last_error(), Some(&"down"));
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    assert!(wall.elapsed() < Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn success_reports_value_attempts_and_elapsed() {
    let done = retry(exponential(5), |ctx| async move {
        if ctx.attempt() < 3 {
            Err("not yet")
        } else {
            Ok(ctx.retries())
        }
    })
    .await
    .unwrap();
    assert_eq!(done.value, 2);
    assert_eq!(done.attempts, 3);
    // Not measured from the call's start: not reported.
    assert_eq!(done.elapsed, None);
    let done = Retry::new(exponential(5))
        .measure_elapsed()
        .call(|ctx| async move {
            if ctx.attempt() < 3 {
                Err("not yet")
            } else {
                Ok(ctx.retries())
            }
        })
        .await
        .unwrap();
    assert_eq!((done.value, done.attempts), (2, 3));
    assert_eq!(done.elapsed, Some(Duration::from_secs(3)));
}

#[tokio::test(start_paused = true)]
async fn permanent_failure_stops_at_once() {
    let err = Retry::new(exponential(5))
        .classify(|e: &u16| {
            if *e == 404 {
                Failure::permanent()
            } else {
                Failure::retryable()
            }
        })
        .call(|_ctx| async { Err::<(), u16>(404) })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.permanent");
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.elapsed(), None);
    assert_eq!(err.into_last_error(), Some(404));
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_sleep_ends_the_call_at_once() {
    let token = CancellationToken::new();
    let calls = Arc::new(AtomicU32::new(0));
    let retrier = Retry::new(exponential(5)).cancel_token(token.clone());
    let counted = Arc::clone(&calls);
    let call = tokio::spawn(async move {
        retrier
            .call(|_ctx| {
                counted.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>("down") }
            })
            .await
    });
    // Attempt 1 at 0 s, attempt 2 at 1 s, then a 2 s sleep: cancel inside it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let cancelled_at = Instant::now();
    token.cancel();
    let err = call.await.unwrap().unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(err.code(), "retry.cancelled");
    assert_eq!(err.attempts(), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(Instant::now(), cancelled_at, "no virtual time passed");
    // The clock was first read when attempt 1 failed: not the call's time.
    assert_eq!(err.elapsed(), None);
}

#[tokio::test(start_paused = true)]
async fn cancelled_before_start_runs_nothing() {
    let token = CancellationToken::new();
    token.cancel();
    let calls = AtomicU32::new(0);
    let err = Retry::new(exponential(5))
        .cancel_token(token)
        .call(|_ctx| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, ()>(()) }
        })
        .await
        .unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(err.attempts(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_an_attempt_drops_it() {
    let token = CancellationToken::new();
    let retrier = Retry::new(exponential(5)).cancel_token(token.clone());
    let call = tokio::spawn(async move {
        retrier
            .call(|_ctx| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, ()>(())
            })
            .await
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    token.cancel();
    let err = call.await.unwrap().unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(err.attempts(), 1);
    // The clock was first read at the cancellation: not the call's time.
    assert_eq!(err.elapsed(), None);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_mid_sleep_leaves_nothing_behind() {
    let held = Arc::new(());
    let in_op = Arc::clone(&held);
    let retrier = Retry::<()>::new(exponential(5));
    let call = retrier.call(move |_ctx| {
        let held = Arc::clone(&in_op);
        async move {
            let _kept_by_the_attempt = held;
            Err::<(), ()>(())
        }
    });
    // Attempt 1 fails at once; the call then sleeps 1 s. Stop it halfway.
    let timed_out = tokio::time::timeout(Duration::from_millis(500), call).await;
    assert!(timed_out.is_err());
    assert_eq!(Arc::strong_count(&held), 1);
}

#[tokio::test(start_paused = true)]
async fn per_attempt_timeout_is_reported_as_timed_out() {
    let policy = exponential(3)
        .to_builder()
        .attempt_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let deadlines = Mutex::new(Vec::new());
    let err = retry(policy, |ctx| {
        deadlines.lock().unwrap().push(ctx.deadline().is_some());
        async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok::<_, ()>(())
        }
    })
    .await
    .unwrap_err();
    assert_eq!(
        err.reason(),
        GiveUpReason::TimedOut {
            timeout: Duration::from_millis(100)
        }
    );
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.last_failure(), Some(FailureKind::Timeout));
    assert!(err.last_error().is_none());
    // 3 timeouts of 100 ms and sleeps of 1 s and 2 s, from the call's start
    // (an attempt timeout reads the clock there).
    assert_eq!(err.elapsed(), Some(Duration::from_millis(3300)));
    assert_eq!(*deadlines.lock().unwrap(), [true, true, true]);
}

#[tokio::test(start_paused = true)]
async fn timeouts_not_retried_give_up_after_one() {
    let policy = exponential(3)
        .to_builder()
        .attempt_timeout(Duration::from_millis(100))
        .retry_timeouts(false)
        .build()
        .unwrap();
    let err = retry(policy, |_ctx| core::future::pending::<Result<(), ()>>())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(err.attempts(), 1);
}

#[tokio::test(start_paused = true)]
async fn hooks_hear_every_retry_and_the_give_up() {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let gave_up = Arc::new(Mutex::new(None));
    let (n, g) = (Arc::clone(&notices), Arc::clone(&gave_up));
    let _ = Retry::new(exponential(4))
        .on_retry(move |notice| {
            n.lock().unwrap().push((
                notice.attempt,
                notice.next_attempt,
                notice.delay,
                *notice.error.unwrap(),
            ));
        })
        .on_give_up(move |err: &RetryError<&str>| {
            *g.lock().unwrap() = Some((err.code(), err.attempts()));
        })
        .call(|_ctx| async { Err::<(), _>("boom") })
        .await;
    let secs = Duration::from_secs;
    assert_eq!(
        *notices.lock().unwrap(),
        [
            (1, 2, secs(1), "boom"),
            (2, 3, secs(2), "boom"),
            (3, 4, secs(4), "boom")
        ]
    );
    assert_eq!(*gave_up.lock().unwrap(), Some(("retry.exhausted", 4)));
}

#[tokio::test(start_paused = true)]
async fn a_fixed_seed_gives_the_same_delays() {
    let policy = exponential(4)
        .to_builder()
        .jitter(Jitter::Full)
        .build()
        .unwrap();
    let run = |seed| async move {
        Retry::new(policy)
            .seed(seed)
            .measure_elapsed()
            .call(|_ctx| async { Err::<(), ()>(()) })
            .await
            .unwrap_err()
            .elapsed()
            .unwrap()
    };
    let a = run(42).await;
    let b = run(42).await;
    assert_eq!(a, b);
    assert!(a <= Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn non_idempotent_replays_are_flagged() {
    let policy = exponential(3)
        .to_builder()
        .idempotent(false)
        .build()
        .unwrap();
    let flags = Mutex::new(Vec::new());
    let _ = retry(policy, |ctx| {
        flags.lock().unwrap().push(ctx.replays_non_idempotent());
        async { Err::<(), ()>(()) }
    })
    .await;
    assert_eq!(*flags.lock().unwrap(), [false, true, true]);
}

#[tokio::test(start_paused = true)]
async fn total_budget_stops_retries() {
    let policy = exponential(10)
        .to_builder()
        .budget(Duration::from_secs(5))
        .build()
        .unwrap();
    let err = retry(policy, |_ctx| async { Err::<(), ()>(()) })
        .await
        .unwrap_err();
    // Attempts at 0, 1 and 3 s; the next would start at 7 s, past the budget.
    assert_eq!(err.code(), "retry.budget");
    assert_eq!(err.attempts(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_future_is_send() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(1)))
        .build()
        .unwrap();
    let retrier: Retry<String> = Retry::new(policy);
    let handle = tokio::spawn(async move {
        retrier
            .call(|ctx| async move {
                tokio::task::yield_now().await;
                if ctx.is_first() {
                    Err("first".to_owned())
                } else {
                    Ok(ctx.attempt())
                }
            })
            .await
    });
    assert_eq!(handle.await.unwrap().unwrap().value, 2);
}

#[tokio::test(start_paused = true)]
async fn error_displays_code_and_last_error() {
    let err = retry(exponential(2), |_ctx| async { Err::<(), _>("refused") })
        .await
        .unwrap_err();
    // No time: it was not measured from the call's start.
    assert_eq!(
        err.to_string(),
        "retry.exhausted: gave up after 2 attempts: refused"
    );
    let err = Retry::new(exponential(2))
        .measure_elapsed()
        .call(|_ctx| async { Err::<(), _>("refused") })
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "retry.exhausted: gave up after 2 attempts in 1s: refused"
    );
}

/// When the clock is read (see `retry_shared::Driver`): a call that needs no
/// time reads no clock at its start, so it reports no time, whether its first
/// attempt succeeds at once, waits, or fails and is retried (a time counted
/// from a later reading would leave out part of the call: before, an attempt
/// that waited was timed from its first wait, leaving out its first poll).
/// With `measure_elapsed` every call reports its whole time.
#[tokio::test(start_paused = true)]
async fn elapsed_is_whole_or_not_reported() {
    for measured in [false, true] {
        let mut retrier = Retry::<&str>::new(exponential(3));
        if measured {
            retrier = retrier.measure_elapsed();
        }
        let whole = |d: u64| measured.then(|| Duration::from_secs(d));
        let at_once = retrier.call(|_ctx| async { Ok(1) }).await.unwrap();
        assert_eq!((at_once.attempts, at_once.elapsed), (1, whole(0)));

        let waited = retrier
            .call(|_ctx| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok(2)
            })
            .await
            .unwrap();
        assert_eq!(waited.elapsed, whole(2));

        // A first attempt that waits 2 s, then fails; the 1 s delay; attempt
        // 2 succeeds at once.
        let retried = retrier
            .call(|ctx| async move {
                if ctx.is_first() {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    Err("busy")
                } else {
                    Ok(3)
                }
            })
            .await
            .unwrap();
        assert_eq!((retried.attempts, retried.elapsed), (2, whole(3)));

        let failed = retrier
            .call(|_ctx| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Err::<(), _>("down")
            })
            .await
            .unwrap_err();
        // 2 + 1 + 2 + 2 + 2: every attempt's wait and both delays.
        assert_eq!(failed.elapsed(), whole(9));
    }
}

/// The case on the real clock: a first attempt that computes for
/// 215 ms before its first wait and then fails must not make the call report
/// less than it ran (the first poll used to be left out).
#[tokio::test(flavor = "current_thread")]
async fn an_async_call_never_under_reports_its_time() {
    let policy = RetryPolicy::builder()
        .max_attempts(2)
        .backoff(Backoff::constant(Duration::from_millis(5)))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    for measured in [false, true] {
        let mut retrier = Retry::<&str>::new(policy);
        if measured {
            retrier = retrier.measure_elapsed();
        }
        let started = std::time::Instant::now();
        let err = retrier
            .call(|_ctx| async {
                // Busy before its first wait, as a CPU-bound first poll is.
                std::thread::sleep(Duration::from_millis(215));
                tokio::task::yield_now().await;
                Err::<(), _>("down")
            })
            .await
            .unwrap_err();
        let ran = started.elapsed();
        match err.elapsed() {
            Some(elapsed) => {
                assert!(
                    measured,
                    "reported {elapsed:?} without measuring from the start"
                );
                assert!(
                    elapsed >= Duration::from_millis(430),
                    "{elapsed:?} of {ran:?}"
                );
                assert!(elapsed <= ran, "{elapsed:?} of {ran:?}");
            }
            None => {
                assert!(!measured, "measured from the start, yet not reported");
                assert!(!err.to_string().contains(" in "), "{err}");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn measure_elapsed_reads_the_clock_from_the_start() {
    let retrier = Retry::<&str>::new(exponential(3)).measure_elapsed();
    let at_once = retrier.call(|_ctx| async { Ok(1) }).await.unwrap();
    assert_eq!(at_once.elapsed, Some(Duration::ZERO));
    // An attempt timeout needs the start too, and so measures it.
    let timed = RetryPolicy::builder()
        .attempt_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let done = Retry::<&str>::new(timed)
        .call(|_ctx| async { Ok(1) })
        .await
        .unwrap();
    assert_eq!(done.elapsed, Some(Duration::ZERO));
}
