//! The blocking adapter with a shared circuit breaker, in virtual time.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{
    Backoff, BasicRule, BreakerConfig, BreakerState, CircuitOpen, GiveUpReason, Jitter, Rate,
    RetryPolicy, SleepReason,
};
use retry_shared::Breaker as _;
use retry_std::{ManualClock, Retry, SharedBreaker};

fn policy(attempts: u32, on_open: CircuitOpen) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .on_circuit_open(on_open)
        .build()
        .unwrap()
}

#[test]
fn an_open_breaker_stops_calls_without_running_them() {
    let clock = ManualClock::new();
    let transitions = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&transitions);
    let breaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 2,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap()
    .on_transition(move |t| seen.lock().unwrap().push((t.from, t.to)));
    let retry = Retry::<&str>::new(policy(3, CircuitOpen::GiveUp))
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(breaker.clone());
    let calls = AtomicU32::new(0);
    // Two failures open the breaker; the third attempt is rejected before running.
    let err = retry
        .call(|_| {
            calls.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>("down")
        })
        .unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        err.reason(),
        GiveUpReason::CircuitOpen {
            wait: Some(Duration::from_millis(4_900))
        }
    );
    assert_eq!(err.code(), "retry.circuit_open");
    assert_eq!(err.attempts(), 2);
    assert_eq!(breaker.state(), BreakerState::Open);
    // A later call is turned away at once.
    let err = retry.call(|_| -> Result<(), &str> { panic!("must not run") });
    assert!(matches!(err, Err(e) if e.attempts() == 0));
    assert_eq!(
        transitions.lock().unwrap().as_slice(),
        [(BreakerState::Closed, BreakerState::Open)]
    );
}

#[test]
fn a_waiting_call_probes_once_the_breaker_half_opens() {
    let clock = ManualClock::new();
    let sleeper = clock.sleeper();
    let breaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 2,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let retry = Retry::<&str>::new(policy(5, CircuitOpen::Wait))
        .clock(clock.clone())
        .sleeper(sleeper.clone())
        .breaker(breaker.clone());
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reasons);
    let retry = retry.on_retry(move |n| seen.lock().unwrap().push(n.reason));
    let ok = retry
        .call(|ctx| {
            if ctx.attempt() <= 2 {
                Err("down")
            } else {
                Ok(ctx.attempt())
            }
        })
        .unwrap();
    // Attempts 1 and 2 fail (opening the breaker at 0.1 s); attempt 3 is rejected,
    // the call sleeps until the breaker half-opens at 5.1 s, and attempt 3 runs as
    // the probe and closes it.
    assert_eq!(ok.value, 3);
    assert_eq!(ok.attempts, 3);
    assert_eq!(
        sleeper.sleeps(),
        [
            Duration::from_millis(100),
            Duration::from_millis(100),
            Duration::from_millis(4_900)
        ]
    );
    assert_eq!(clock.elapsed(), Duration::from_millis(5_100));
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(
        reasons.lock().unwrap().first().copied().flatten(),
        Some(SleepReason::Curve)
    );
}

/// A breaker and a budget saved in one "process" (one clock) and resumed in
/// another (a clock that starts afresh): the open breaker turns calls away for
/// exactly what was left of its open period, then probes and closes; the budget
/// resumes with the tokens it had.
#[cfg(feature = "serde")]
#[test]
fn a_saved_breaker_and_budget_resume_in_another_process() {
    use retry_core::{BreakerSnapshot, BudgetConfig, BudgetSnapshot, ManualState, Tokens};
    use retry_std::retry_shared::Saved;
    use retry_std::Clock;
    use retry_std::SharedBudget;

    let first = ManualClock::new();
    let breaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 2,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let budget = SharedBudget::new(BudgetConfig::aws_standard());
    let retry = Retry::<&str>::new(
        RetryPolicy::builder()
            .max_attempts(3)
            .backoff(Backoff::constant(Duration::from_millis(100)))
            .jitter(Jitter::None)
            .use_retry_budget(true)
            .build()
            .unwrap(),
    )
    .clock(first.clone())
    .sleeper(first.sleeper())
    .breaker(breaker.clone())
    .budget(budget.clone());
    let _ = retry.call(|_| Err::<(), _>("down"));
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(budget.tokens(), Tokens::from_whole(490)); // two retries, 5 tokens each
    first.advance(Duration::from_secs(1));
    let breaker_text = serde_json::to_string(&breaker.save_at(first.now())).unwrap();
    let budget_text = serde_json::to_string(&budget.save_at(first.now())).unwrap();

    // Another process: its own clock, its own origin.
    let second = ManualClock::new();
    second.advance(Duration::from_secs(3_600));
    let saved: Saved<BreakerSnapshot> = serde_json::from_str(&breaker_text).unwrap();
    let resumed = SharedBreaker::restore_at(&saved, second.now()).unwrap();
    let saved: Saved<BudgetSnapshot> = serde_json::from_str(&budget_text).unwrap();
    let resumed_budget = SharedBudget::restore_at(&saved, second.now()).unwrap();
    assert_eq!(resumed.state(), BreakerState::Open);
    assert_eq!(resumed_budget.tokens(), Tokens::from_whole(490));
    let retry = Retry::<&str>::new(policy(3, CircuitOpen::GiveUp))
        .clock(second.clone())
        .sleeper(second.sleeper())
        .breaker(resumed.clone());
    // Opened at 0.1 s for 5 s; saved at 1.2 s (a second sleep of 0.1 s, a
    // rejected third attempt, 1 s more): 3.9 s left.
    let err = retry
        .call(|_| -> Result<(), &str> { panic!("must not run") })
        .unwrap_err();
    assert_eq!(
        err.reason(),
        GiveUpReason::CircuitOpen {
            wait: Some(Duration::from_millis(3_900))
        }
    );
    assert_eq!(resumed.metrics_at(second.now()).rejected, 2);
    second.advance(Duration::from_millis(3_900));
    assert_eq!(retry.call(|_| Ok::<_, &str>(7)).unwrap().value, 7);
    assert_eq!(resumed.state(), BreakerState::Closed);
    // The operator's levers on the shared breaker.
    assert_eq!(
        resumed
            .ensure_at(ManualState::Closed, second.now())
            .unwrap(),
        None
    );
    let t = resumed.reset_at(second.now());
    assert_eq!(t.cause.code(), "breaker.reset");
    // A corrupt snapshot is a typed error naming the field.
    let version = format!("\"version\":{}", BreakerSnapshot::<16, 0>::VERSION);
    let bad = breaker_text.replace(&version, "\"version\":7");
    let saved: Saved<BreakerSnapshot> = serde_json::from_str(&bad).unwrap();
    assert_eq!(
        SharedBreaker::restore_at(&saved, second.now())
            .unwrap_err()
            .field(),
        "version"
    );
}

/// A call whose first attempt needs nothing of the driver asks the breaker once
/// and tells it once: a success is recorded as one call, a refusal counted as
/// one rejected call, and a failed first attempt recorded once before the
/// driver takes the call over.
///
/// Run twice: with the `SharedBreaker` itself (which the adapter calls directly)
/// and behind an `Arc` (which it calls as any other breaker, through `dyn
/// Breaker`); both must count the same.
#[test]
fn the_first_attempt_asks_and_tells_the_breaker_exactly_once() {
    first_attempt_asks_and_tells_once(|b| b);
    first_attempt_asks_and_tells_once(std::sync::Arc::new);
}

fn first_attempt_asks_and_tells_once<B: retry_shared::Breaker + 'static>(
    handle: impl Fn(SharedBreaker) -> B,
) {
    let clock = ManualClock::new();
    // Opens at a 50 % failure rate over the last 4 calls, judged from 4 calls.
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 4).unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let retry = Retry::<&str>::new(policy(2, CircuitOpen::GiveUp))
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(handle(breaker.clone()));

    let done = retry.call(|_| Ok::<_, &str>(7)).unwrap();
    // Unmeasured, unless the breaker times calls (the metrics feature's
    // call-duration histogram): then the manual clock's zero.
    let elapsed = breaker.times_calls().then_some(Duration::ZERO);
    assert_eq!((done.value, done.attempts, done.elapsed), (7, 1, elapsed));
    let m = breaker.metrics_at(std::time::Instant::now());
    assert_eq!((m.window.calls, m.window.failures), (1, 0));

    // Fails, then succeeds on the retry: two calls recorded, one failed.
    let mut first = true;
    let done = retry
        .call(|_| {
            if core::mem::take(&mut first) {
                Err("busy")
            } else {
                Ok(8)
            }
        })
        .unwrap();
    assert_eq!((done.value, done.attempts), (8, 2));
    let m = breaker.metrics_at(std::time::Instant::now());
    assert_eq!((m.window.calls, m.window.failures), (3, 1));

    // A failure makes it 2 of 4: it opens, and the retry is refused.
    let err = retry.call(|_| Err::<(), _>("down")).unwrap_err();
    assert_eq!(err.attempts(), 1);
    assert_eq!(breaker.state(), BreakerState::Open);
    // The next call is refused once, and not run.
    let rejected = breaker.metrics_at(std::time::Instant::now()).rejected;
    let err = retry
        .call(|_| -> Result<(), &str> { panic!("must not run") })
        .unwrap_err();
    assert_eq!(err.attempts(), 0);
    assert!(matches!(err.reason(), GiveUpReason::CircuitOpen { .. }));
    assert_eq!(
        breaker.metrics_at(std::time::Instant::now()).rejected,
        rejected + 1
    );
}

/// A shared breaker that keeps its calls' durations (`SharedBreaker<2, 0,
/// 100>`) reports the total and mean duration of exactly the calls its count
/// window holds, as the blocking adapter timed them; the default type reports
/// none for a count window.
#[test]
fn a_shared_breaker_keeping_durations_reports_its_windows_call_durations() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(10)
        .build()
        .unwrap();
    let kept = SharedBreaker::<2, 0, 100>::with_capacity(config).unwrap();
    let plain = SharedBreaker::<2, 0>::with_capacity(config).unwrap();
    assert!(kept.times_calls(), "durations are measured for every call");
    let clock = ManualClock::new();
    let run = |retry: &Retry<&str>, ms: u64| {
        retry
            .call(|_| {
                clock.advance(Duration::from_millis(ms));
                Ok::<_, &str>(())
            })
            .unwrap();
    };
    let with_kept = Retry::<&str>::new(policy(1, CircuitOpen::GiveUp))
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(kept.clone());
    let with_plain = Retry::<&str>::new(policy(1, CircuitOpen::GiveUp))
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(plain.clone());
    for ms in 1..=15 {
        run(&with_kept, ms);
        run(&with_plain, ms);
    }
    // The window holds the last 10 calls: 6 ms to 15 ms.
    let m = kept.metrics();
    assert_eq!(m.window.calls, 10);
    assert_eq!(m.call_duration_total, Some(Duration::from_millis(105)));
    assert_eq!(m.call_duration_mean, Some(Duration::from_micros(10_500)));
    let m = plain.metrics();
    assert_eq!(m.window.calls, 10);
    assert_eq!((m.call_duration_total, m.call_duration_mean), (None, None));
}
