//! Attempts abandoned mid-flight (the call's future dropped by an outer timeout or
//! a task abort, a panicking operation, a cancellation): the breaker's permit goes
//! back as the core decides, and the budget's books stay right.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::future::pending;
use core::time::Duration;

use retry_core::{
    feed_budget, Action, Backoff, BreakerConfig, BreakerState, BudgetConfig, Event, Failure,
    Instant, Jitter, RetryBudget, RetryMachine, RetryPolicy,
};
use retry_tokio::{CancellationToken, Retry, SharedBreaker, SharedBudget};

fn one_attempt() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(1)
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

/// Opens after one failure, half-opens 50 ms later, admits one probe at a time;
/// attempts over 1 s are slow.
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

/// The reproduction, with the probe's future dropped (by an outer
/// timeout, then by a task abort) instead of panicking.
#[tokio::test(start_paused = true)]
async fn a_probe_dropped_early_frees_its_slot_for_the_next_call() {
    let breaker = one_probe_breaker();
    let retry = Retry::<&str>::new(one_attempt()).breaker(breaker.clone());
    let _ = retry.call(|_| async { Err::<(), _>("down") }).await;
    assert_eq!(breaker.state(), BreakerState::Open);
    tokio::time::sleep(Duration::from_millis(80)).await;

    // An outer timeout drops the probe after 10 ms.
    let dropped = tokio::time::timeout(
        Duration::from_millis(10),
        retry.call(|_| pending::<Result<(), &str>>()),
    )
    .await;
    assert!(dropped.is_err(), "the outer timeout fired");
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight(), 0);

    // A task abort drops the next probe.
    let hung = retry.clone();
    let task = tokio::spawn(async move { hung.call(|_| pending::<Result<(), &str>>()).await });
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(breaker.snapshot().probes_in_flight(), 1, "the probe runs");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(breaker.snapshot().probes_in_flight(), 0);

    let done = retry.call(|_| async { Ok::<_, &str>("up") }).await.unwrap();
    assert_eq!(done.value, "up");
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// The same with an operation that panics inside a spawned task (tokio catches the
/// panic and drops the call's future).
#[tokio::test(start_paused = true)]
async fn a_probe_that_panics_in_a_task_frees_its_slot() {
    let breaker = one_probe_breaker();
    let retry = Retry::<&str>::new(one_attempt()).breaker(breaker.clone());
    let _ = retry.call(|_| async { Err::<(), _>("down") }).await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    let panicking = retry.clone();
    let joined = tokio::spawn(async move {
        panicking
            .call(|_| async { panic!("the operation panics") })
            .await
            .map(|s: retry_tokio::Success<()>| s.value)
    })
    .await;
    assert!(joined.unwrap_err().is_panic());
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let done = retry.call(|_| async { Ok::<_, &str>(()) }).await;
    assert!(done.is_ok());
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A hung backend behind an outer timeout: every call is dropped after 2 s, past
/// the 1 s slow-call duration, so each is recorded as a slow failure and the
/// breaker trips.
#[tokio::test(start_paused = true)]
async fn a_hung_attempt_dropped_by_an_outer_timeout_trips_the_breaker() {
    let config = BreakerConfig::builder()
        .failure_threshold(2)
        .slow_call_duration(Duration::from_secs(1))
        .open_duration(Duration::from_secs(30))
        .build()
        .unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let retry = Retry::<&str>::new(one_attempt()).breaker(breaker.clone());
    let hung = || {
        tokio::time::timeout(
            Duration::from_secs(2),
            retry.call(|_| pending::<Result<(), &str>>()),
        )
    };
    assert!(hung().await.is_err());
    assert_eq!(breaker.snapshot().consecutive_failures(), 1);
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert!(hung().await.is_err());
    assert_eq!(breaker.state(), BreakerState::Open);
    let err = retry
        .call(|_| async { Ok::<_, &str>(()) })
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.circuit_open");

    // Dropped before the slow-call duration, a hung call is released instead.
    let breaker = SharedBreaker::new(config).unwrap();
    let retry = Retry::<&str>::new(one_attempt()).breaker(breaker.clone());
    for _ in 0..3 {
        let dropped = tokio::time::timeout(
            Duration::from_millis(500),
            retry.call(|_| pending::<Result<(), &str>>()),
        )
        .await;
        assert!(dropped.is_err());
    }
    assert_eq!(breaker.snapshot().consecutive_failures(), 0);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A cancellation during an attempt abandons it the same way: a long-running one
/// is a failure.
#[tokio::test(start_paused = true)]
async fn cancelling_a_slow_attempt_records_it_and_a_quick_one_releases_it() {
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .slow_call_duration(Duration::from_secs(1))
        .build()
        .unwrap();
    for (after, state) in [
        (Duration::from_millis(100), BreakerState::Closed),
        (Duration::from_secs(3), BreakerState::Open),
    ] {
        let breaker = SharedBreaker::new(config).unwrap();
        let token = CancellationToken::new();
        let retry = Retry::<&str>::new(one_attempt())
            .breaker(breaker.clone())
            .cancel_token(token.clone());
        let canceller = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            token.cancel();
        });
        let err = retry
            .call(|_| pending::<Result<(), &str>>())
            .await
            .unwrap_err();
        canceller.await.unwrap();
        assert_eq!(err.code(), "retry.cancelled");
        assert_eq!(breaker.state(), state, "cancelled after {after:?}");
    }
}

/// A hung inner service behind the breaker layer and an outer timeout.
#[cfg(feature = "tower")]
#[tokio::test(start_paused = true)]
async fn the_breaker_layer_records_a_hung_call_dropped_by_an_outer_timeout() {
    use tower::{service_fn, Layer as _, Service as _, ServiceExt as _};
    let config = BreakerConfig::builder()
        .failure_threshold(2)
        .slow_call_duration(Duration::from_secs(1))
        .half_open_permits(1)
        .open_duration(Duration::from_secs(10))
        .build()
        .unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let mut service = retry_tokio::tower::BreakerLayer::new(breaker.clone())
        .layer(service_fn(|_: ()| pending::<Result<(), &str>>()));
    for _ in 0..2 {
        let ready = service.ready().await.unwrap();
        let dropped = tokio::time::timeout(Duration::from_secs(2), ready.call(())).await;
        assert!(dropped.is_err());
    }
    assert_eq!(breaker.state(), BreakerState::Open);

    // Half-open: a probe dropped early frees its slot; the next one is admitted.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let ready = service.ready().await.unwrap();
    let dropped = tokio::time::timeout(Duration::from_millis(100), ready.call(())).await;
    assert!(dropped.is_err());
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    let ok = retry_tokio::tower::BreakerLayer::new(breaker.clone())
        .layer(service_fn(|_: ()| async { Ok::<_, &str>(1) }))
        .oneshot(())
        .await;
    assert_eq!(ok, Ok(1));
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A retry whose attempt is dropped mid-flight: the budget keeps the withdrawal
/// made for it, exactly as a core budget fed the same steps says.
#[tokio::test(start_paused = true)]
async fn a_dropped_retry_leaves_the_budget_as_the_core_says() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::None)
        .jitter(Jitter::None)
        .use_retry_budget(true)
        .build()
        .unwrap();
    let budget = SharedBudget::new(BudgetConfig::aws_standard());
    let retry = Retry::<&str>::new(policy).budget(budget.clone());
    let dropped = tokio::time::timeout(
        Duration::from_millis(10),
        retry.call(|ctx| async move {
            if ctx.attempt() == 1 {
                Err::<(), _>("busy")
            } else {
                pending().await
            }
        }),
    )
    .await;
    assert!(dropped.is_err());

    let mut reference = RetryBudget::new(BudgetConfig::aws_standard());
    let mut machine = RetryMachine::new(&policy, 1);
    let t = Instant::ORIGIN;
    let mut event = Event::Start;
    loop {
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
    assert_eq!(budget.snapshot(), reference);
    assert_eq!(budget.tokens().whole(), 495);

    let done = retry.call(|_| async { Ok::<_, &str>(()) }).await.unwrap();
    assert_eq!(done.attempts, 1);
    assert_eq!(budget.tokens().whole(), 496);
}

/// With the default slow-call duration (60 s) the breaker does not time calls,
/// so no clock is read when the probe starts; the attempt's first wait gives its
/// start instead. Dropped after 61 s of waiting it is a failed (slow) probe and
/// the breaker opens again; dropped after 10 s it is released.
#[tokio::test(start_paused = true)]
async fn with_the_default_slow_call_duration_a_probe_is_judged_from_its_first_wait() {
    let config = BreakerConfig::builder()
        .failure_threshold(1)
        .open_duration(Duration::from_millis(50))
        .half_open_permits(1)
        .build()
        .unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let retry = Retry::<&str>::new(one_attempt()).breaker(breaker.clone());
    let _ = retry.call(|_| async { Err::<(), _>("down") }).await;
    assert_eq!(breaker.state(), BreakerState::Open);
    tokio::time::sleep(Duration::from_millis(80)).await;

    let early = tokio::time::timeout(
        Duration::from_secs(10),
        retry.call(|_| pending::<Result<(), &str>>()),
    )
    .await;
    assert!(early.is_err(), "the outer timeout fired");
    assert_eq!(
        breaker.state(),
        BreakerState::HalfOpen,
        "released, not judged"
    );
    assert_eq!(breaker.snapshot().probes_in_flight(), 0);

    let late = tokio::time::timeout(
        Duration::from_secs(61),
        retry.call(|_| pending::<Result<(), &str>>()),
    )
    .await;
    assert!(late.is_err(), "the outer timeout fired");
    assert_eq!(
        breaker.state(),
        BreakerState::Open,
        "a probe abandoned past the slow-call duration is a failed probe"
    );
}
