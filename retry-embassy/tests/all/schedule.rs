//! The driver follows the core's timeline to the tick: a call run on embassy's
//! mock clock takes exactly the steps, at exactly the instants, that the core's
//! simulator gives for the same policy, seed and outcomes.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use core::cell::RefCell;
use core::time::Duration;

use embassy_time::{Duration as Ticks, Timer};
use retry_core::{Backoff, Failure, GiveUpReason, Jitter, RetryPolicy, Scripted, Simulation, Step};
use retry_embassy::{Retry, RetryNotice};
use support::{now, virtual_time, Tasks};

const STEP: Ticks = Ticks::from_millis(1);
const LIMIT: Ticks = Ticks::from_secs(60);

/// Runs one call on the mock clock with attempt `n` behaving as `script[n - 1]`
/// (the last entry repeating), recording every step the machine takes.
fn run(
    policy: RetryPolicy,
    seed: u64,
    script: &[Scripted],
) -> (Vec<Step>, Result<u32, retry_core::RetryError<&'static str>>) {
    let steps = RefCell::new(Vec::new());
    let result = RefCell::new(None);
    let retry = Retry::new(policy, seed).on_step(|s: &Step| steps.borrow_mut().push(*s));
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let outcome = retry
            .call(async |ctx| {
                let i = usize::try_from(ctx.retries()).unwrap();
                let scripted = script.get(i).or(script.last()).copied().unwrap();
                Timer::after(Ticks::from_micros(
                    u64::try_from(scripted.took.as_micros()).unwrap(),
                ))
                .await;
                match scripted.outcome {
                    retry_core::Outcome::Succeed => Ok(ctx.attempt()),
                    retry_core::Outcome::Fail(_) => Err("flaky"),
                    // Hangs until the driver's deadline drops it.
                    retry_core::Outcome::TimeOut => core::future::pending().await,
                    other => panic!("not scripted here: {other:?}"),
                }
            })
            .await
            .map(|s| s.value);
        *result.borrow_mut() = Some(outcome);
    });
    tasks.run(STEP, LIMIT);
    drop(tasks);
    let result = result.into_inner().expect("the call finished");
    (steps.into_inner(), result)
}

fn five_attempts_exponential() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::exponential(Duration::from_millis(100), 2.0))
        .max_delay(Duration::from_secs(2))
        .jitter(Jitter::Full)
        .build()
        .unwrap()
}

#[test]
fn five_attempt_exponential_schedule_is_the_simulators_timeline() {
    let _clock = virtual_time();
    let policy = five_attempts_exponential();
    let script = [Scripted::fail(Failure::retryable()).after(Duration::from_millis(7))];
    for seed in [0, 1, 0x5eed, u64::MAX] {
        support::reset_clock();
        let expected: Vec<Step> = Simulation::new(&policy, seed, &script).collect();
        let (steps, result) = run(policy, seed, &script);
        assert_eq!(steps, expected, "seed {seed}");
        // start, then four failures each followed by a sleep and a wake, then the
        // last failure: 1 + 4 * 2 + 1 rows.
        assert_eq!(steps.len(), 10);
        let err = result.unwrap_err();
        assert_eq!(err.reason(), GiveUpReason::Exhausted);
        assert_eq!(err.attempts(), 5);
        // The call ended when the last attempt did, on the clock the test moved.
        assert_eq!(Some(now()), expected.last().map(|s| s.at.as_duration()));
        assert_eq!(err.elapsed(), Some(now()));
    }
}

#[test]
fn success_after_failures_and_a_timed_out_attempt_is_the_simulators_timeline() {
    let _clock = virtual_time();
    let policy = five_attempts_exponential()
        .to_builder()
        .attempt_timeout(Duration::from_millis(250))
        .build()
        .unwrap();
    let script = [
        Scripted::fail(Failure::retryable()).after(Duration::from_millis(3)),
        Scripted::time_out(),
        Scripted::fail(Failure::retryable()).after(Duration::from_millis(40)),
        Scripted::succeed().after(Duration::from_millis(12)),
    ];
    let expected: Vec<Step> = Simulation::new(&policy, 99, &script).collect();
    let (steps, result) = run(policy, 99, &script);
    assert_eq!(steps, expected);
    assert_eq!(result.unwrap(), 4);
    assert!(
        steps
            .iter()
            .any(|s| s.event == retry_core::Event::TimedOut && s.at.as_duration() > Duration::ZERO),
        "the second attempt ran into its deadline: {steps:#?}"
    );
}

#[test]
fn the_retry_hook_hears_each_delay_the_machine_chose() {
    let _clock = virtual_time();
    let policy = five_attempts_exponential();
    let notices = RefCell::new(Vec::new());
    let retry = Retry::new(policy, 7).on_retry(|n: &RetryNotice<'_, u8>| {
        notices
            .borrow_mut()
            .push((n.attempt, n.next_attempt, n.delay, n.error.copied()));
    });
    let mut tasks = Tasks::new();
    tasks.spawn(async {
        let _ = retry
            .call(async |ctx| Err::<(), u8>(ctx.attempt() as u8))
            .await;
    });
    tasks.run(STEP, LIMIT);
    drop(tasks);
    let expected: Vec<_> = Simulation::new(&policy, 7, &[])
        .filter_map(|s| match s.action {
            retry_core::Action::Sleep { delay, .. } => Some(delay),
            _ => None,
        })
        .enumerate()
        .map(|(i, delay)| {
            let attempt = u32::try_from(i).unwrap() + 1;
            (attempt, attempt + 1, delay, Some(attempt as u8))
        })
        .collect();
    assert_eq!(notices.into_inner(), expected);
}

#[test]
fn an_attempt_ending_exactly_at_its_deadline_is_timed_out_as_in_the_simulator() {
    let _clock = virtual_time();
    let policy = five_attempts_exponential()
        .to_builder()
        .attempt_timeout(Duration::from_millis(250))
        .build()
        .unwrap();
    // Each attempt's answer is ready on the very tick of its deadline: the core's
    // rule makes that a timeout, whatever `with_deadline` hands back first.
    let script = [
        Scripted::succeed().after(Duration::from_millis(250)),
        Scripted::fail(Failure::retryable()).after(Duration::from_millis(250)),
        Scripted::succeed().after(Duration::from_millis(249)),
    ];
    let expected: Vec<Step> = Simulation::new(&policy, 5, &script).collect();
    let (steps, result) = run(policy, 5, &script);
    assert_eq!(steps, expected);
    let timed_out = steps
        .iter()
        .filter(|s| s.event == retry_core::Event::TimedOut)
        .count();
    assert_eq!(timed_out, 2, "{steps:#?}");
    assert_eq!(result.unwrap(), 3);
}
