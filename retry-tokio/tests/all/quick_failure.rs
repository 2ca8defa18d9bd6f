//! A call whose first attempt fails ends the same whether `Retry::call` takes
//! its quick opening (the failure settled with no driver when the policy gives
//! up on it at once) or runs the whole call through the driver
//! (`call_with` a token that is never cancelled turns the quick opening off):
//! the same results, elapsed times included, hook calls, classifier calls and
//! breaker state, call after call, for attempts that wait and ones that do
//! not.
//!
//! (With traces or metrics compiled in, no call opens quickly: both runs
//! then take the driver, and agree trivially.)

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{
    Backoff, BreakerConfig, BreakerSnapshot, Failure, Jitter, Rate, RetryError, RetryPolicy,
    Success,
};
use retry_shared::Saved;
use retry_tokio::{CancellationToken, Retry, SharedBreaker};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Guard {
    None,
    /// Kept by the settings for a direct call.
    Shared,
    /// Behind an `Arc`: a `dyn Breaker` only.
    Dyn,
}

type Outcome = Result<Success<u32>, RetryError<u32>>;

/// What a run of calls left behind, after each call.
#[derive(Debug, PartialEq)]
struct Run {
    results: Vec<Outcome>,
    breaker: Vec<Saved<BreakerSnapshot<16, 0>>>,
    given_up: Vec<RetryError<u32>>,
    classified: u32,
    transitions: Vec<String>,
}

/// 40 calls through one retrier: call `i` fails with error `i` on its first
/// attempt when `i` is odd (the classifier, if any, calls it permanent when
/// `i % 7 == 3`), and its later attempts succeed. An attempt of a call with
/// `i % 4 < 2` waits 10 ms first; the others return at once.
async fn run(attempts: u32, guard: Guard, hook: bool, classify: bool, quick: bool) -> Run {
    let policy = RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let mut retry = Retry::<u32>::new(policy).seed(7);
    let classified = Arc::new(AtomicU32::new(0));
    if classify {
        let count = Arc::clone(&classified);
        retry = retry.classify(move |e: &u32| {
            count.fetch_add(1, Ordering::SeqCst);
            if e % 7 == 3 {
                Failure::permanent()
            } else {
                Failure::retryable()
            }
        });
    }
    let given_up = Arc::new(Mutex::new(Vec::new()));
    if hook {
        let seen = Arc::clone(&given_up);
        retry = retry.on_give_up(move |e: &RetryError<u32>| seen.lock().unwrap().push(e.clone()));
    }
    let transitions = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&transitions);
    // Half of the last 6 calls failing opens it; it half-opens after 50 ms.
    let config = BreakerConfig::builder()
        .failure_rate(Rate::from_percent(50))
        .count_window(6)
        .minimum_calls(6)
        .open_duration(Duration::from_millis(50))
        .build()
        .unwrap();
    let breaker = SharedBreaker::new(config)
        .unwrap()
        .on_transition(move |t| heard.lock().unwrap().push(format!("{t:?}")));
    retry = match guard {
        Guard::None => retry,
        Guard::Shared => retry.breaker(breaker.clone()),
        Guard::Dyn => retry.breaker(Arc::new(breaker.clone())),
    };
    let token = CancellationToken::new();
    let mut results = Vec::new();
    let mut saved = Vec::new();
    for i in 0..40u32 {
        let op = |ctx: retry_tokio::AttemptContext| async move {
            if i % 4 < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if ctx.attempt() == 1 && i % 2 == 1 {
                Err(i)
            } else {
                Ok(i)
            }
        };
        let result = if quick {
            retry.call(op).await
        } else {
            retry.call_with(&token, op).await
        };
        results.push(result);
        if guard != Guard::None {
            saved.push(breaker.save_at(tokio::time::Instant::now().into_std()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let given_up = given_up.lock().unwrap().clone();
    let transitions = transitions.lock().unwrap().clone();
    Run {
        results,
        breaker: saved,
        given_up,
        classified: classified.load(Ordering::SeqCst),
        transitions,
    }
}

#[tokio::test(start_paused = true)]
async fn the_quick_opening_fails_a_call_as_the_driver_does() {
    for attempts in [1, 2] {
        for guard in [Guard::None, Guard::Shared, Guard::Dyn] {
            for hook in [false, true] {
                for classify in [false, true] {
                    let quick = run(attempts, guard, hook, classify, true).await;
                    let driven = run(attempts, guard, hook, classify, false).await;
                    let case = (attempts, guard, hook, classify);
                    assert_eq!(quick, driven, "{case:?}");
                    // Not idle: calls failed (with one attempt, or a
                    // permanent failure) and the others were retried; a
                    // failed call reports no time (none read at its start),
                    // whether its attempt waited or not, unless a breaker
                    // that times calls (with the metrics) read it there.
                    let failed = quick.results.iter().filter(|r| r.is_err()).count();
                    assert_eq!(failed > 0, attempts == 1 || classify, "{case:?}");
                    let retried = quick
                        .results
                        .iter()
                        .any(|r| matches!(r, Ok(s) if s.attempts == 2));
                    assert_eq!(retried, attempts == 2, "{case:?}");
                    if attempts == 1 {
                        let waited = quick.results[1].as_ref().unwrap_err();
                        let timed = guard != Guard::None && cfg!(feature = "metrics");
                        let whole = |ms| timed.then_some(Duration::from_millis(ms));
                        assert_eq!(waited.elapsed(), whole(10), "{case:?}");
                        let at_once = quick.results[3].as_ref().unwrap_err();
                        assert_eq!(at_once.elapsed(), whole(0), "{case:?}");
                    }
                    if hook {
                        assert_eq!(quick.given_up.len(), failed, "{case:?}");
                    }
                    if guard != Guard::None && attempts == 1 {
                        assert!(!quick.transitions.is_empty(), "{case:?}: never opened");
                    }
                }
            }
        }
    }
}
