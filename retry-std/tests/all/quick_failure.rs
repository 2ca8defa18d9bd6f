//! A call whose first attempt fails ends the same whether `Retry::call` takes
//! its quick opening (no cancel token: the failure settled with no driver when
//! the policy gives up on it at once) or runs the whole call through the
//! driver (a cancel token that is never tripped turns the quick opening off):
//! the same results, hook calls, classifier calls and breaker state, call
//! after call.
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
use retry_std::{CancelToken, Clock as _, ManualClock, Retry, SharedBreaker};

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
/// `i % 7 == 3`), and its later attempts succeed; each attempt runs 10 ms.
fn run(attempts: u32, guard: Guard, hook: bool, classify: bool, quick: bool) -> Run {
    let clock = ManualClock::new();
    let policy = RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let mut retry = Retry::<u32>::new(policy)
        .seed(7)
        .clock(clock.clone())
        .sleeper(clock.sleeper());
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
    if !quick {
        retry = retry.cancel_token(CancelToken::new());
    }
    let mut results = Vec::new();
    let mut saved = Vec::new();
    for i in 0..40u32 {
        let result = retry.call(|ctx| {
            clock.advance(Duration::from_millis(10));
            if ctx.attempt() == 1 && i % 2 == 1 {
                Err(i)
            } else {
                Ok(i)
            }
        });
        results.push(result);
        if guard != Guard::None {
            saved.push(breaker.save_at(clock.now()));
        }
        clock.advance(Duration::from_millis(20));
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

#[test]
fn the_quick_opening_fails_a_call_as_the_driver_does() {
    for attempts in [1, 2] {
        for guard in [Guard::None, Guard::Shared, Guard::Dyn] {
            for hook in [false, true] {
                for classify in [false, true] {
                    let quick = run(attempts, guard, hook, classify, true);
                    let driven = run(attempts, guard, hook, classify, false);
                    let case = (attempts, guard, hook, classify);
                    assert_eq!(quick, driven, "{case:?}");
                    // Not idle: calls failed (with one attempt, or a
                    // permanent failure) and the others were retried.
                    let failed = quick.results.iter().filter(|r| r.is_err()).count();
                    assert_eq!(failed > 0, attempts == 1 || classify, "{case:?}");
                    let retried = quick
                        .results
                        .iter()
                        .any(|r| matches!(r, Ok(s) if s.attempts == 2));
                    assert_eq!(retried, attempts == 2, "{case:?}");
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
