#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The blocking adapter against virtual time (and, for cancellation, real time).

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use retry_core::{
    Backoff, BudgetConfig, Failure, FailureKind, GiveUpReason, Jitter, RetryPolicy, SleepReason,
    Tokens,
};
use retry_std::{CancelToken, Clock, ManualClock, Retry, RetryError, SharedBudget};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Boom {
    #[error("boom {0}")]
    Transient(u32),
    #[error("fatal")]
    Fatal,
    #[error("slow down")]
    Throttled,
}

fn exponential(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(max_attempts)
        .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

fn virtual_retry(policy: RetryPolicy) -> (Retry<Boom>, ManualClock, retry_std::FakeSleeper) {
    let clock = ManualClock::new();
    let sleeper = clock.sleeper();
    let retry = Retry::new(policy)
        .clock(clock.clone())
        .sleeper(sleeper.clone());
    (retry, clock, sleeper)
}

fn secs(list: &[u64]) -> Vec<Duration> {
    list.iter().copied().map(Duration::from_secs).collect()
}

#[test]
fn five_exponential_attempts_exhaust_in_virtual_time() {
    let (retry, clock, sleeper) = virtual_retry(exponential(5));
    let calls = AtomicU32::new(0);
    let err = retry
        .call(|ctx| {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(Boom::Transient(ctx.attempt()))
        })
        .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Exhausted);
    assert_eq!(err.attempts(), 5);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
    assert_eq!(sleeper.sleeps(), secs(&[1, 2, 4, 8]));
    // The clock was first read when attempt 1 failed: the call's time is
    // not reported (it would leave out attempt 1).
    assert_eq!(err.elapsed(), None);
    assert_eq!(clock.elapsed(), Duration::from_secs(15));
    assert_eq!(err.last_error(), Some(&Boom::Transient(5)));
    assert_eq!(err.last_failure(), Some(FailureKind::Error));
}

#[test]
fn success_on_the_third_attempt() {
    let (retry, _clock, sleeper) = virtual_retry(exponential(5));
    let done = retry
        .measure_elapsed()
        .call(|ctx| {
            if ctx.attempt() < 3 {
                Err(Boom::Transient(ctx.attempt()))
            } else {
                Ok(ctx.attempt() * 10)
            }
        })
        .unwrap();
    assert_eq!(done.value, 30);
    assert_eq!(done.attempts, 3);
    assert_eq!(done.elapsed, Some(Duration::from_secs(3)));
    assert_eq!(sleeper.sleeps(), secs(&[1, 2]));
}

#[test]
fn a_permanent_error_stops_at_once() {
    let (retry, _clock, sleeper) = virtual_retry(exponential(5));
    let err = retry
        .classify(|e| match e {
            Boom::Fatal => Failure::permanent(),
            _ => Failure::retryable(),
        })
        .call(|_| Err::<(), _>(Boom::Fatal))
        .unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Permanent);
    assert_eq!(err.code(), "retry.permanent");
    assert_eq!(err.attempts(), 1);
    assert!(sleeper.sleeps().is_empty());
    assert_eq!(err.into_last_error(), Some(Boom::Fatal));
}

#[test]
fn hooks_hear_the_right_numbers() {
    let (retry, _clock, _sleeper) = virtual_retry(exponential(4));
    let retries = Arc::new(Mutex::new(Vec::new()));
    let give_ups = Arc::new(Mutex::new(Vec::new()));
    let (r, g) = (Arc::clone(&retries), Arc::clone(&give_ups));
    let err = retry
        .on_retry(move |n| {
            r.lock().unwrap().push((
                n.attempt,
                n.next_attempt,
                n.delay,
                n.reason,
                n.error.cloned().expect("the attempt returned an error"),
                n.failure.is_retryable(),
            ));
        })
        .on_give_up(move |e| g.lock().unwrap().push((e.code(), e.attempts())))
        .call(|ctx| Err::<(), _>(Boom::Transient(ctx.attempt())))
        .unwrap_err();
    assert_eq!(err.attempts(), 4);
    let curve = Some(SleepReason::Curve);
    assert_eq!(
        *retries.lock().unwrap(),
        [
            (
                1,
                2,
                Duration::from_secs(1),
                curve,
                Boom::Transient(1),
                true
            ),
            (
                2,
                3,
                Duration::from_secs(2),
                curve,
                Boom::Transient(2),
                true
            ),
            (
                3,
                4,
                Duration::from_secs(4),
                curve,
                Boom::Transient(3),
                true
            ),
        ]
    );
    assert_eq!(*give_ups.lock().unwrap(), [("retry.exhausted", 4)]);
}

#[test]
fn the_retry_hook_fires_for_a_retry_without_delay() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::None)
        .build()
        .unwrap();
    let (retry, _clock, sleeper) = virtual_retry(policy);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let done = retry
        .on_retry(move |n| s.lock().unwrap().push((n.attempt, n.delay, n.reason)))
        .call(|ctx| {
            if ctx.attempt() < 3 {
                Err(Boom::Transient(0))
            } else {
                Ok(())
            }
        })
        .unwrap();
    assert_eq!(done.attempts, 3);
    assert!(sleeper.sleeps().is_empty());
    assert_eq!(
        *seen.lock().unwrap(),
        [(1, Duration::ZERO, None), (2, Duration::ZERO, None)]
    );
}

#[test]
fn a_retry_after_hint_from_the_classifier_is_honoured() {
    let (retry, _clock, sleeper) = virtual_retry(exponential(3));
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&reasons);
    let done = retry
        .measure_elapsed()
        .classify(|e| match e {
            Boom::Throttled => Failure::retry_after(Duration::from_secs(7)),
            _ => Failure::retryable(),
        })
        .on_retry(move |n| r.lock().unwrap().push(n.reason))
        .call(|ctx| {
            if ctx.attempt() == 1 {
                Err(Boom::Throttled)
            } else {
                Ok(())
            }
        })
        .unwrap();
    assert_eq!(done.attempts, 2);
    assert_eq!(sleeper.sleeps(), secs(&[7]));
    assert_eq!(done.elapsed, Some(Duration::from_secs(7)));
    assert_eq!(*reasons.lock().unwrap(), [Some(SleepReason::Hint)]);
}

#[test]
fn the_context_carries_the_attempt_the_retries_and_the_replay_flag() {
    let policy = exponential(3)
        .to_builder()
        .idempotent(false)
        .build()
        .unwrap();
    let (retry, _clock, _sleeper) = virtual_retry(policy);
    let mut seen = Vec::new();
    let done = retry
        .call(|ctx| {
            seen.push((ctx.attempt(), ctx.retries(), ctx.replays_non_idempotent()));
            if ctx.attempt() < 3 {
                Err(Boom::Transient(0))
            } else {
                Ok(())
            }
        })
        .unwrap();
    assert_eq!(done.attempts, 3);
    assert_eq!(seen, [(1, 0, false), (2, 1, true), (3, 2, true)]);

    // An idempotent operation is never flagged.
    let (retry, _clock, _sleeper) = virtual_retry(exponential(2));
    let mut flags = Vec::new();
    let _ = retry.call(|ctx| {
        flags.push(ctx.replays_non_idempotent());
        Err::<(), _>(Boom::Fatal)
    });
    assert_eq!(flags, [false, false]);
}

#[test]
fn an_error_after_the_deadline_is_a_timeout_and_a_late_success_is_accepted() {
    let policy = exponential(2)
        .to_builder()
        .attempt_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let (retry, clock, _sleeper) = virtual_retry(policy);
    let deadlines = Arc::new(Mutex::new(Vec::new()));
    let origin = clock.now();
    let err = retry
        .call(|ctx| {
            let deadline = ctx.deadline().expect("the policy has an attempt timeout");
            deadlines.lock().unwrap().push(deadline - origin);
            clock.advance(Duration::from_secs(3)); // the attempt overruns
            Err::<(), _>(Boom::Transient(ctx.attempt()))
        })
        .unwrap_err();
    assert_eq!(
        err.reason(),
        GiveUpReason::TimedOut {
            timeout: Duration::from_secs(2)
        }
    );
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(err.attempts(), 2);
    assert_eq!(err.last_failure(), Some(FailureKind::Timeout));
    // Attempt 1 at 0 s (deadline 2 s); it ends at 3 s, sleeps 1 s; attempt 2 at 4 s.
    assert_eq!(*deadlines.lock().unwrap(), secs(&[2, 6]));
    assert_eq!(
        err.to_string(),
        "retry.timeout: gave up after 2 attempts in 7s (timeout 2s): boom 2"
    );

    let (retry, clock, _sleeper) = virtual_retry(
        exponential(2)
            .to_builder()
            .attempt_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    );
    let done = retry
        .call(|_| {
            clock.advance(Duration::from_secs(5));
            Ok::<_, Boom>("late but fine")
        })
        .unwrap();
    assert_eq!((done.value, done.attempts), ("late but fine", 1));
}

#[test]
fn an_error_exactly_at_the_deadline_is_a_timeout_as_the_core_rule_says() {
    let policy = exponential(2)
        .to_builder()
        .attempt_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let (retry, clock, _sleeper) = virtual_retry(policy);
    let err = retry
        .call(|ctx| {
            // Ends at the deadline to the nanosecond: the tie goes to the timeout.
            clock.advance(Duration::from_secs(2));
            Err::<(), _>(Boom::Transient(ctx.attempt()))
        })
        .unwrap_err();
    assert_eq!(err.code(), "retry.timeout");
    assert_eq!(err.attempts(), 2);
    assert_eq!(err.last_error_attempt(), Some(2));

    let (retry, clock, _sleeper) = virtual_retry(
        exponential(2)
            .to_builder()
            .attempt_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
    );
    let retry = retry.classify(|e: &Boom| match e {
        Boom::Fatal => retry_core::Failure::permanent(),
        _ => retry_core::Failure::retryable(),
    });
    let err = retry
        .call(|_| {
            clock.advance(Duration::from_secs(2) - Duration::from_nanos(1));
            Err::<(), _>(Boom::Fatal)
        })
        .unwrap_err();
    assert_eq!(
        err.code(),
        "retry.permanent",
        "an error before the deadline is judged"
    );
}

#[test]
fn the_total_budget_stops_a_retry_that_would_not_fit() {
    let policy = exponential(10)
        .to_builder()
        .budget(Duration::from_secs(5))
        .build()
        .unwrap();
    let (retry, _clock, sleeper) = virtual_retry(policy);
    let err = retry
        .call(|ctx| Err::<(), _>(Boom::Transient(ctx.attempt())))
        .unwrap_err();
    // Attempts at 0 s, 1 s and 3 s; the next delay (4 s) would end at 7 s > 5 s.
    assert_eq!(err.reason(), GiveUpReason::Budget);
    assert_eq!(err.code(), "retry.budget");
    assert_eq!(err.attempts(), 3);
    assert_eq!(sleeper.sleeps(), secs(&[1, 2]));
}

#[test]
fn a_seed_makes_jitter_reproducible() {
    let policy = exponential(6)
        .to_builder()
        .jitter(Jitter::Full)
        .build()
        .unwrap();
    let run = |seed: u64| {
        let (retry, _clock, sleeper) = virtual_retry(policy);
        let _ = retry.seed(seed).call(|_| Err::<(), _>(Boom::Fatal));
        sleeper.sleeps()
    };
    assert_eq!(run(42), run(42));
    assert_eq!(run(42).len(), 5);
    assert_ne!(run(42), run(43));
}

#[test]
fn a_shared_budget_refuses_retries_during_an_outage_on_two_threads() {
    // gRPC throttling: 10 tokens, a retry needs more than 5, every failure takes
    // one. Whatever the interleaving, the first four failures are retried and
    // every later retry is refused: ten attempts in all, for six calls.
    let budget = SharedBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());
    let policy = exponential(10)
        .to_builder()
        .use_retry_budget(true)
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let attempts = Arc::new(AtomicU32::new(0));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (budget, clock, attempts) = (budget.clone(), clock.clone(), Arc::clone(&attempts));
            thread::spawn(move || {
                let retry = Retry::new(policy)
                    .clock(clock.clone())
                    .sleeper(clock.sleeper())
                    .budget(budget);
                (0..3)
                    .map(|_| {
                        retry
                            .call(|ctx| {
                                attempts.fetch_add(1, Ordering::SeqCst);
                                Err::<(), _>(Boom::Transient(ctx.attempt()))
                            })
                            .unwrap_err()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let errors: Vec<RetryError<Boom>> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert_eq!(errors.len(), 6);
    assert!(errors.iter().all(|e| e.code() == "retry.retry_budget"));
    assert_eq!(attempts.load(Ordering::SeqCst), 10);
    assert_eq!(errors.iter().map(RetryError::attempts).sum::<u32>(), 10);
    assert_eq!(budget.tokens(), Tokens::ZERO);

    // First attempts still run while retries are refused.
    let retry = Retry::new(policy)
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .budget(budget.clone());
    let done = retry.call(|_| Ok::<_, Boom>("first attempt")).unwrap();
    assert_eq!(done.attempts, 1);
    assert_eq!(budget.tokens(), Tokens::from_millis(100));
}

#[test]
fn without_a_shared_budget_withdrawals_are_granted() {
    let policy = exponential(3)
        .to_builder()
        .use_retry_budget(true)
        .build()
        .unwrap();
    let (retry, _clock, sleeper) = virtual_retry(policy);
    let err = retry.call(|_| Err::<(), _>(Boom::Fatal)).unwrap_err();
    assert_eq!(err.reason(), GiveUpReason::Exhausted);
    assert_eq!(sleeper.sleeps(), secs(&[1, 2]));
}

#[test]
fn cancelling_from_another_thread_wakes_a_real_sleep() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_secs(10)))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let token = CancelToken::new();
    let (attempted, first_attempt) = mpsc::channel();
    let canceller = {
        let token = token.clone();
        thread::spawn(move || {
            first_attempt.recv().unwrap();
            thread::sleep(Duration::from_millis(50)); // let the call start its sleep
            token.cancel();
        })
    };
    let calls = AtomicU32::new(0);
    let began = std::time::Instant::now();
    let err = Retry::new(policy)
        .cancel_token(token.clone())
        .call(|ctx| {
            calls.fetch_add(1, Ordering::SeqCst);
            attempted.send(()).unwrap();
            Err::<(), _>(Boom::Transient(ctx.attempt()))
        })
        .unwrap_err();
    let took = began.elapsed();
    canceller.join().unwrap();
    assert!(err.is_cancelled());
    assert_eq!(err.code(), "retry.cancelled");
    assert_eq!(err.attempts(), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no attempt after cancel");
    assert_eq!(err.last_error(), Some(&Boom::Transient(1)));
    // Liveness, not performance: the 10 s delay was cut short.
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn no_attempt_starts_after_cancel() {
    // Cancelled before the call: nothing runs.
    let token = CancelToken::new();
    token.cancel();
    let (retry, _clock, sleeper) = virtual_retry(exponential(5));
    let mut calls = 0;
    let err = retry
        .cancel_token(token)
        .call(|_| {
            calls += 1;
            Ok::<_, Boom>(())
        })
        .unwrap_err();
    assert_eq!(err.code(), "retry.cancelled");
    assert_eq!(err.attempts(), 0);
    assert_eq!(err.last_error(), None);
    assert_eq!(calls, 0);
    assert!(sleeper.sleeps().is_empty());
    assert_eq!(err.to_string(), "retry.cancelled: gave up after 0 attempts");

    // Cancelled by the operation itself during attempt 2: no attempt 3, no sleep
    // after it.
    let token = CancelToken::new();
    let (retry, _clock, sleeper) = virtual_retry(exponential(5));
    let mut calls = 0;
    let err = retry
        .cancel_token(token)
        .call(|ctx| {
            calls += 1;
            if ctx.attempt() == 2 {
                ctx.cancel_token().cancel();
            }
            Err::<(), _>(Boom::Transient(ctx.attempt()))
        })
        .unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(err.attempts(), 2);
    assert_eq!(calls, 2);
    assert_eq!(sleeper.sleeps(), secs(&[1]));
}

#[test]
fn codes_display_and_source() {
    let (retry, _clock, _sleeper) = virtual_retry(exponential(5));
    let err = retry
        .measure_elapsed()
        .call(|ctx| Err::<(), _>(Boom::Transient(ctx.attempt())))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "retry.exhausted: gave up after 5 attempts in 15s: boom 5"
    );
    let source = core::error::Error::source(&err).expect("the last error is the source");
    assert_eq!(source.to_string(), "boom 5");

    let one = RetryError::new(
        GiveUpReason::Permanent,
        1,
        Duration::from_millis(3200),
        Some(Boom::Fatal),
    );
    assert_eq!(
        one.to_string(),
        "retry.permanent: gave up after 1 attempt in 3.2s: fatal"
    );
    let open = RetryError::<Boom>::new(
        GiveUpReason::CircuitOpen {
            wait: Some(Duration::from_secs(30)),
        },
        0,
        Duration::ZERO,
        None,
    );
    assert_eq!(
        open.to_string(),
        "retry.circuit_open: gave up after 0 attempts in 0ns (circuit admits in 30s)"
    );
    assert!(core::error::Error::source(&open).is_none());

    let codes = [
        (GiveUpReason::Exhausted, "retry.exhausted"),
        (GiveUpReason::Permanent, "retry.permanent"),
        (GiveUpReason::Budget, "retry.budget"),
        (
            GiveUpReason::TimedOut {
                timeout: Duration::from_secs(1),
            },
            "retry.timeout",
        ),
        (GiveUpReason::Cancelled, "retry.cancelled"),
        (GiveUpReason::RetryBudget, "retry.retry_budget"),
        (
            GiveUpReason::CircuitOpen { wait: None },
            "retry.circuit_open",
        ),
    ];
    for (reason, code) in codes {
        assert_eq!(
            RetryError::<Boom>::new(reason, 1, Duration::ZERO, None).code(),
            code
        );
    }
    let mapped = err.map_err(|e| e.to_string());
    assert_eq!(mapped.last_error().map(String::as_str), Some("boom 5"));
}

#[test]
fn the_one_line_form_uses_real_time() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(1)))
        .build()
        .unwrap();
    let done = retry_std::retry(policy, |ctx| {
        if ctx.attempt() < 2 {
            Err(Boom::Transient(1))
        } else {
            Ok("ok")
        }
    })
    .unwrap();
    assert_eq!((done.into_value(), 2), ("ok", 2));
}

#[test]
fn a_retrier_is_send_and_sync_and_reusable() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let (retry, _clock, sleeper) = virtual_retry(exponential(2));
    assert_send_sync(&retry);
    assert_send_sync(&CancelToken::new());
    assert_send_sync(&SharedBudget::new(BudgetConfig::aws_standard()));
    for _ in 0..2 {
        let _ = retry.call(|_| Err::<(), _>(Boom::Fatal));
    }
    assert_eq!(sleeper.sleeps(), secs(&[1, 1]));
}

/// When the clock is read (see `retry_shared::Driver`): a blocking call that
/// needs no time reads none until an attempt fails, so the time it could count
/// from then would leave out the first attempt's run: it reports none, in its
/// success, its error and the error's message (before, it reported the time
/// from attempt 1's failure: 7 s for a call of 9 s).
/// `measure_elapsed` reads the clock from the start and reports it whole.
#[test]
fn elapsed_is_whole_or_not_reported() {
    let (retry, clock, _) = virtual_retry(exponential(3));
    let slow_first = |clock: &ManualClock, ctx: &retry_std::AttemptContext| {
        clock.advance(Duration::from_secs(2));
        if ctx.attempt() < 3 {
            Err(Boom::Transient(ctx.attempt()))
        } else {
            Ok(ctx.attempt())
        }
    };
    let done = retry.call(|_| Ok::<_, Boom>(1)).unwrap();
    assert_eq!(done.elapsed, None);
    // Attempts of 2 s each and delays of 1 and 2 s: 9 s, not measured whole.
    let before = clock.elapsed();
    let done = retry.call(|ctx| slow_first(&clock, ctx)).unwrap();
    assert_eq!(
        clock.elapsed() - before,
        Duration::from_secs(2 + 1 + 2 + 2 + 2)
    );
    assert_eq!(done.elapsed, None);
    let err = retry
        .call(|_| {
            clock.advance(Duration::from_secs(2));
            Err::<(), _>(Boom::Fatal)
        })
        .unwrap_err();
    // Every error is retryable here: three attempts, the time not reported.
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.elapsed(), None);
    assert!(
        err.to_string()
            .starts_with("retry.exhausted: gave up after 3 attempts: "),
        "{err}"
    );

    let (retry, clock, _) = virtual_retry(exponential(3));
    let retry = retry.measure_elapsed();
    let done = retry.call(|_| Ok::<_, Boom>(1)).unwrap();
    assert_eq!(done.elapsed, Some(Duration::ZERO));
    let done = retry.call(|ctx| slow_first(&clock, ctx)).unwrap();
    assert_eq!(done.elapsed, Some(Duration::from_secs(2 + 1 + 2 + 2 + 2)));
    let err = retry
        .call(|_| {
            clock.advance(Duration::from_secs(2));
            Err::<(), _>(Boom::Fatal)
        })
        .unwrap_err();
    assert_eq!(err.elapsed(), Some(Duration::from_secs(2 + 1 + 2 + 2 + 2)));
    assert!(
        err.to_string()
            .starts_with("retry.exhausted: gave up after 3 attempts in 9s: "),
        "{err}"
    );
}

/// The case on the real clock: a first attempt that runs 215 ms and
/// fails, then a quick success: the call's reported time is never shorter than
/// what it ran (none is reported by default; the whole of it when asked).
#[test]
fn a_blocking_call_never_under_reports_its_time() {
    let policy = retry_core::RetryPolicy::builder()
        .max_attempts(3)
        .backoff(retry_core::Backoff::constant(Duration::from_millis(5)))
        .jitter(retry_core::Jitter::None)
        .build()
        .unwrap();
    let op = |ctx: &retry_std::AttemptContext| {
        if ctx.attempt() == 1 {
            std::thread::sleep(Duration::from_millis(215));
            Err(Boom::Transient(1))
        } else {
            Ok(ctx.attempt())
        }
    };
    for measured in [false, true] {
        let mut retry = Retry::<Boom>::new(policy);
        if measured {
            retry = retry.measure_elapsed();
        }
        let started = std::time::Instant::now();
        let done = retry.call(op).unwrap();
        let ran = started.elapsed();
        match done.elapsed {
            Some(elapsed) => {
                assert!(
                    measured,
                    "reported {elapsed:?} without measuring from the start"
                );
                assert!(
                    elapsed >= Duration::from_millis(220),
                    "{elapsed:?} of {ran:?}"
                );
                assert!(elapsed <= ran, "{elapsed:?} of {ran:?}");
            }
            None => assert!(!measured, "measured from the start, yet not reported"),
        }
    }
}
