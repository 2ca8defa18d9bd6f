//! An operation that panics abandons its attempt: the breaker's permit and the
//! budget's books stay right, and the next call runs normally.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::panic::AssertUnwindSafe;
use core::time::Duration;
use std::panic::catch_unwind;

use retry_core::{
    feed_budget, Action, Backoff, BasicRule, BreakerConfig, BreakerState, BudgetConfig, Event,
    Failure, Instant, Jitter, RetryBudget, RetryMachine, RetryPolicy,
};
use retry_std::{ManualClock, Retry, SharedBreaker, SharedBudget};

fn one_attempt() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(1)
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

/// Opens after one failure, half-opens 50 ms later, admits one probe at a time.
fn one_probe_breaker() -> SharedBreaker {
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(Duration::from_millis(50))
        .half_open_permits(1)
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .unwrap();
    SharedBreaker::new(config).unwrap()
}

/// The reproduction from the issue: a panic during the only half-open probe must
/// not wedge the breaker.
#[test]
fn a_panic_during_the_half_open_probe_frees_it_for_the_next_call() {
    let clock = ManualClock::new();
    let breaker = one_probe_breaker();
    let retry = Retry::<&str>::new(one_attempt())
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(breaker.clone());

    let err = retry.call(|_| Err::<(), _>("down")).unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(breaker.state(), BreakerState::Open);

    clock.advance(Duration::from_millis(80));
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        retry.call(|_| -> Result<(), &str> { panic!("the operation panics") })
    }));
    assert!(panicked.is_err(), "the panic reaches the caller");
    // The probe ran for no time at all: its permit went back unrecorded.
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight(), 0);

    let done = retry.call(|ctx| Ok::<_, &str>(ctx.attempt())).unwrap();
    assert_eq!((done.value, done.attempts), (1, 1));
    assert_eq!(breaker.state(), BreakerState::Closed);
}

#[test]
fn a_probe_that_panics_after_the_slow_call_duration_is_a_failed_probe() {
    let clock = ManualClock::new();
    let breaker = one_probe_breaker();
    let retry = Retry::<&str>::new(one_attempt())
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(breaker.clone());
    let _ = retry.call(|_| Err::<(), _>("down"));
    clock.advance(Duration::from_millis(80));

    let slow = clock.clone();
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        retry.call(|_| -> Result<(), &str> {
            slow.advance(Duration::from_secs(2));
            panic!("the operation hangs, then panics")
        })
    }));
    assert!(panicked.is_err());
    // Recorded as a failed (slow) probe: the breaker opened again.
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(breaker.snapshot().reopens(), 2);
    let err = retry.call(|_| Ok::<_, &str>(())).unwrap_err();
    assert_eq!(err.code(), "retry.circuit_open");
}

#[test]
fn slow_panics_trip_a_closed_breaker_and_quick_ones_do_not() {
    let clock = ManualClock::new();
    let config = BreakerConfig::builder()
        .failure_threshold(2)
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let retry = Retry::<&str>::new(one_attempt())
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(breaker.clone());
    let panic_after = |ran: Duration| {
        let clock = clock.clone();
        let retry = &retry;
        catch_unwind(AssertUnwindSafe(move || {
            retry.call(|_| -> Result<(), &str> {
                clock.advance(ran);
                panic!("boom")
            })
        }))
        .unwrap_err();
    };
    // Quick panics are released: nothing is recorded, however many.
    for _ in 0..3 {
        panic_after(Duration::from_millis(10));
    }
    assert_eq!(breaker.snapshot().consecutive_failures(), 0);
    assert_eq!(breaker.state(), BreakerState::Closed);
    // Slow ones are failures: two in a row trip it.
    panic_after(Duration::from_millis(1_500));
    assert_eq!(breaker.snapshot().consecutive_failures(), 1);
    panic_after(Duration::from_millis(1_500));
    assert_eq!(breaker.state(), BreakerState::Open);
}

/// An attempt past its deadline that panics is a failure even when quick.
#[test]
fn a_panic_past_the_attempt_deadline_is_a_failure() {
    let clock = ManualClock::new();
    let breaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 1,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(1)
        .attempt_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let retry = Retry::<&str>::new(policy)
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .breaker(breaker.clone());
    let late = clock.clone();
    catch_unwind(AssertUnwindSafe(|| {
        retry.call(|_| -> Result<(), &str> {
            late.advance(Duration::from_millis(100));
            panic!("at the deadline")
        })
    }))
    .unwrap_err();
    assert_eq!(breaker.state(), BreakerState::Open);
}

/// The budget hears every step up to the panic and nothing after it: the
/// withdrawal made for the panicking retry stands, exactly as a core budget fed
/// the same steps says, and later calls go on from there.
#[test]
fn a_panicking_retry_leaves_the_budget_as_the_core_says() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::None)
        .jitter(Jitter::None)
        .use_retry_budget(true)
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let budget = SharedBudget::new(BudgetConfig::aws_standard());
    let breaker = SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 5,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let retry = Retry::<&str>::new(policy)
        .clock(clock.clone())
        .sleeper(clock.sleeper())
        .budget(budget.clone())
        .breaker(breaker.clone());

    // The same steps, fed to a core budget by hand: attempt 1 fails, a retry is
    // withdrawn, attempt 2 starts (and never reports).
    let mut reference = RetryBudget::new(BudgetConfig::aws_standard());
    let mut machine = RetryMachine::new(&policy, 1);
    let t = Instant::ORIGIN;
    let mut event = Event::Start;
    for _ in 0..3 {
        let action = machine.poll(event, t);
        let answer = feed_budget(&mut reference, &machine, event, action, t);
        event = match action {
            Action::Attempt { number: 1, .. } => Event::Failed(Failure::retryable()),
            Action::Withdraw { .. } => answer.unwrap(),
            other => {
                assert!(
                    matches!(other, Action::Attempt { number: 2, .. }),
                    "{other}"
                );
                break;
            }
        };
    }
    assert_eq!(reference.tokens().whole(), 495, "the retry cost 5 tokens");

    let panicked = catch_unwind(AssertUnwindSafe(|| {
        retry.call(|ctx| -> Result<(), &str> {
            if ctx.attempt() == 1 {
                Err("busy")
            } else {
                panic!("attempt {} panics", ctx.attempt())
            }
        })
    }));
    assert!(panicked.is_err());
    assert_eq!(budget.snapshot(), reference);
    // The breaker heard attempt 1's failure only; attempt 2's permit went back.
    assert_eq!(breaker.snapshot().consecutive_failures(), 1);
    assert_eq!(breaker.snapshot().probes_in_flight(), 0);

    // A later call runs against the same books: a first-attempt success adds 1.
    let done = retry.call(|_| Ok::<_, &str>("fine")).unwrap();
    assert_eq!(done.attempts, 1);
    let mut machine = RetryMachine::new(&policy, 2);
    let action = machine.poll(Event::Start, t);
    let _ = feed_budget(&mut reference, &machine, Event::Start, action, t);
    let action = machine.poll(Event::Succeeded, t);
    let _ = feed_budget(&mut reference, &machine, Event::Succeeded, action, t);
    assert_eq!(budget.snapshot(), reference);
    assert_eq!(budget.tokens().whole(), 496);
    assert_eq!(breaker.snapshot().consecutive_failures(), 0);
}
