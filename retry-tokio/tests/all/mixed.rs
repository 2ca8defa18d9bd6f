//! One breaker and one retry budget shared by a blocking thread (retry-std) and a
//! tokio task (retry-tokio) at the same time, in real time.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;
use std::sync::mpsc;

use retry_core::{
    BasicRule, BreakerConfig, BreakerState, BudgetConfig, Jitter, RetryPolicy, Tokens,
};

fn one_attempt() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(1)
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

#[test]
fn a_blocking_thread_and_a_tokio_task_share_one_breaker_and_one_budget() {
    // The same types under both names: this only compiles if they are one type.
    let breaker: retry_std::SharedBreaker = retry_tokio::SharedBreaker::new(
        BreakerConfig::basic(BasicRule {
            failure_threshold: 6,
            open_duration: Duration::from_secs(60),
            success_threshold: 1,
        })
        .unwrap(),
    )
    .unwrap();
    let budget: retry_tokio::SharedBudget =
        retry_std::SharedBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());

    let blocking = retry_std::Retry::<&str>::new(one_attempt())
        .breaker(breaker.clone())
        .budget(budget.clone());
    let task = retry_tokio::Retry::<&str>::new(one_attempt())
        .breaker(breaker.clone())
        .budget(budget.clone());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();

    // The blocking thread's first attempt stays in flight (holding its permit)
    // until the tokio task has finished two failing calls through the same
    // breaker and budget: neither lock is held while an operation runs.
    let (task_done, wait_for_task) = mpsc::channel::<()>();
    let (thread_in_attempt, wait_for_thread) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let mut first = true;
        for _ in 0..3 {
            let err = blocking
                .call(|_| {
                    if first {
                        first = false;
                        thread_in_attempt.send(()).unwrap();
                        wait_for_task
                            .recv_timeout(Duration::from_secs(30))
                            .expect("the tokio task finished while this attempt ran");
                    }
                    Err::<(), _>("blocking side down")
                })
                .unwrap_err();
            assert_eq!(err.code(), "retry.exhausted");
        }
        blocking
    });
    wait_for_thread
        .recv_timeout(Duration::from_secs(30))
        .expect("the blocking attempt started");
    let task = runtime.block_on(async move {
        tokio::spawn(async move {
            for _ in 0..2 {
                let err = task
                    .call(|_| async { Err::<(), _>("async side down") })
                    .await
                    .unwrap_err();
                assert_eq!(err.code(), "retry.exhausted");
            }
            task
        })
        .await
        .unwrap()
    });
    // The tokio task's two failures are already in the shared books while the
    // blocking attempt is still running.
    assert_eq!(breaker.snapshot().consecutive_failures(), 2);
    assert_eq!(budget.tokens(), Tokens::from_whole(8));
    task_done.send(()).unwrap();
    let blocking = thread.join().unwrap();

    // Five failures, from two adapters, in one breaker and one bucket.
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(breaker.snapshot().consecutive_failures(), 5);
    assert_eq!(budget.tokens(), Tokens::from_whole(5));

    // The task's next failure is the sixth: the breaker opens, and the blocking
    // side is turned away without running its operation.
    let err = runtime
        .block_on(task.call(|_| async { Err::<(), _>("async side down") }))
        .unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(budget.tokens(), Tokens::from_whole(4));
    let err = blocking
        .call(|_| -> Result<(), &str> { panic!("must not run while the breaker is open") })
        .unwrap_err();
    assert_eq!(err.code(), "retry.circuit_open");
    assert_eq!(err.attempts(), 0);
    let wait = match err.reason() {
        retry_core::GiveUpReason::CircuitOpen { wait } => wait.expect("the breaker says when"),
        other => panic!("{other:?}"),
    };
    assert!(
        wait > Duration::from_secs(50) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
}
