#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Conformance with the core's simulator: the same policy, seed and scripted
//! outcomes give, through this adapter under tokio's paused time, exactly the
//! simulator's timeline (every step's time, event and action), for every jitter
//! kind, and the same result.
//!
//! The adapter's steps are read from inside it: the driver tells its retry
//! budget every step (event, action, time), so the budget here records them,
//! and answers withdrawals as the script says. A breaker here rejects the
//! attempts the script says it rejects, and the operation plays the rest (a
//! success, a failure, a hang into the deadline, a cancellation) after its
//! scripted time.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{
    Action, Backoff, BasicRule, BreakerConfig, CallOutcome, CircuitOpen, Event, Failure,
    FailureKind, HedgeAction, HedgeEvent, Hint, Instant, Jitter, Outcome, Permit, RetryMachine,
    RetryPolicy, Scripted, Simulation, Step,
};
use retry_shared::{Clock, Gate};
use retry_tokio::{Breaker, Budget, CancellationToken, Retry, SharedBreaker};

const SEED: u64 = 0x5EED_2026;

fn jitters() -> [Jitter; 7] {
    [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
        Jitter::Subtract(0.25),
        Jitter::Add(0.1),
        Jitter::Spread(0.1),
    ]
}

/// Records every step the driver tells it, and grants the first `grants`
/// withdrawals.
#[derive(Debug)]
struct Recorder {
    start: Mutex<Option<std::time::Instant>>,
    steps: Mutex<Vec<Step>>,
    grants: AtomicU32,
}

impl Budget for Recorder {
    fn feed(
        &self,
        _machine: &RetryMachine<&RetryPolicy>,
        event: Event,
        action: Action,
        now: std::time::Instant,
    ) -> Option<Event> {
        // The first step is the call's start: its time is the call's origin.
        let start = *self.start.lock().unwrap().get_or_insert(now);
        let at = Instant::from_duration(now.duration_since(start));
        self.steps.lock().unwrap().push(Step { at, event, action });
        match action {
            Action::Withdraw { .. } => Some(
                match self
                    .grants
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                {
                    Ok(_) => Event::Granted,
                    Err(_) => Event::Refused,
                },
            ),
            _ => None,
        }
    }

    fn feed_hedge(
        &self,
        _event: HedgeEvent,
        _action: HedgeAction,
        _now: std::time::Instant,
    ) -> Option<HedgeEvent> {
        // No hedged call runs here.
        None
    }
}

/// Plays the script's rejections; admits the rest (with permits from a breaker
/// that never trips) and leaves their outcome for the operation.
#[derive(Debug)]
struct Player {
    script: Vec<Scripted>,
    next: AtomicUsize,
    current: Mutex<Option<Scripted>>,
    mint: SharedBreaker,
}

impl Player {
    fn entry(&self, index: usize) -> Scripted {
        match self.script.get(index).or(self.script.last()) {
            Some(s) => *s,
            None => Scripted::fail(Failure::retryable()),
        }
    }
}

impl Breaker for Player {
    fn request(&self, clock: &dyn Clock) -> Gate {
        let entry = self.entry(self.next.fetch_add(1, Ordering::SeqCst));
        match entry.outcome {
            Outcome::Rejected { wait } => Gate::Rejected {
                until: Some(clock.now() + wait),
            },
            _ => {
                *self.current.lock().unwrap() = Some(entry);
                self.mint.request(clock)
            }
        }
    }
    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        self.mint.record(permit, outcome, clock);
    }
    fn release(&self, permit: Permit, clock: &dyn Clock) {
        self.mint.release(permit, clock);
    }
    fn slow_call_duration(&self) -> Duration {
        self.mint.slow_call_duration()
    }
    fn times_calls(&self) -> bool {
        self.mint.times_calls()
    }
}

/// What the adapter ended with: attempts, elapsed, and the reason's code (or
/// "done").
type Ending = (u32, Duration, &'static str);

/// Runs `script` through the adapter under paused time; returns its steps and
/// how the call ended.
fn through_the_adapter(
    policy: &RetryPolicy,
    script: &[Scripted],
    grants: u32,
) -> (Vec<Step>, Ending) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let recorder = Arc::new(Recorder {
            start: Mutex::new(None),
            steps: Mutex::new(Vec::new()),
            grants: AtomicU32::new(grants),
        });
        let player = Arc::new(Player {
            script: script.to_vec(),
            next: AtomicUsize::new(0),
            current: Mutex::new(None),
            mint: SharedBreaker::new(
                BreakerConfig::basic(BasicRule {
                    failure_threshold: u32::MAX,
                    open_duration: Duration::from_secs(1),
                    success_threshold: 1,
                })
                .unwrap(),
            )
            .unwrap(),
        });
        let token = CancellationToken::new();
        let retry = Retry::<Failure>::new(*policy)
            .seed(SEED)
            .classify(|f: &Failure| *f)
            .budget(Arc::clone(&recorder))
            .breaker(Arc::clone(&player));
        let result = retry
            .call_with(&token, |_ctx| {
                let entry = player.current.lock().unwrap().take().unwrap();
                let token = token.clone();
                async move {
                    tokio::time::sleep(entry.took).await;
                    match entry.outcome {
                        Outcome::Succeed => Ok(()),
                        Outcome::Fail(failure) => Err(failure),
                        Outcome::Cancel => {
                            token.cancel();
                            core::future::pending().await
                        }
                        Outcome::TimeOut | Outcome::Rejected { .. } => {
                            core::future::pending().await
                        }
                    }
                }
            })
            .await;
        let ending = match result {
            // A retry budget makes the call read the clock from its start.
            Ok(done) => (done.attempts, done.elapsed.unwrap(), "done"),
            Err(err) => (err.attempts(), err.elapsed().unwrap(), err.code()),
        };
        let steps = recorder.steps.lock().unwrap().clone();
        (steps, ending)
    })
}

fn through_the_simulator(
    policy: &RetryPolicy,
    script: &[Scripted],
    grants: u32,
) -> (Vec<Step>, Ending) {
    let steps: Vec<Step> = Simulation::new(policy, SEED, script)
        .retry_budget(grants)
        .collect();
    let last = *steps.last().unwrap();
    let elapsed = last.at.as_duration();
    let ending = match last.action {
        Action::Done { attempts } => (attempts, elapsed, "done"),
        Action::GiveUp(give_up) => (give_up.attempts, elapsed, give_up.code()),
        other => panic!("the simulation ended on {other}"),
    };
    (steps, ending)
}

fn conforms(name: &str, policy: &RetryPolicy, script: &[Scripted], grants: u32) {
    let expected = through_the_simulator(policy, script, grants);
    assert!(
        expected.0.len() >= 4,
        "{name}: a timeline worth comparing has a retry in it"
    );
    let got = through_the_adapter(policy, script, grants);
    let show = |steps: &[Step]| {
        steps
            .iter()
            .map(|s| format!("  {s}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        got.0,
        expected.0,
        "{name}: the adapter's timeline\n{}\ndiffers from the simulator's\n{}",
        show(&got.0),
        show(&expected.0)
    );
    assert_eq!(got.1, expected.1, "{name}: how the call ended");
}

fn base(jitter: Jitter) -> retry_core::RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(6)
        .backoff(Backoff::exponential(Duration::from_millis(100), 2.0))
        .max_delay(Duration::from_secs(2))
        .jitter(jitter)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn status(code: u16) -> Failure {
    Failure::retryable().with_kind(FailureKind::Status(code))
}

#[test]
fn failures_then_success_for_every_jitter_kind() {
    for jitter in jitters() {
        let policy = base(jitter).build().unwrap();
        let script = [
            Scripted::fail(status(503)).after(ms(7)),
            Scripted::fail(status(502)).after(ms(13)),
            Scripted::fail(Failure::retryable()),
            Scripted::succeed().after(ms(40)),
        ];
        conforms(jitter.name(), &policy, &script, u32::MAX);
    }
}

#[test]
fn exhaustion_timeouts_and_the_deadline_tie_for_every_jitter_kind() {
    for jitter in jitters() {
        let policy = base(jitter)
            .max_attempts(5)
            .attempt_timeout(ms(250))
            .build()
            .unwrap();
        let script = [
            Scripted::fail(status(500)).after(ms(20)),
            Scripted::time_out(),
            // Ends exactly at its deadline: a timeout, by the core's rule.
            Scripted::succeed().after(ms(250)),
            Scripted::fail(status(503)).after(ms(250)),
            Scripted::fail(status(503)).after(ms(249)),
        ];
        conforms(jitter.name(), &policy, &script, u32::MAX);
    }
}

#[test]
fn hints_pushback_and_a_permanent_failure_for_every_jitter_kind() {
    for jitter in jitters() {
        let policy = base(jitter).build().unwrap();
        let script = [
            Scripted::fail(Failure::retry_after(ms(1500))),
            Scripted::fail(Failure::retryable().with_hint(Hint::Pushback(ms(333)))),
            Scripted::fail(status(503)).after(ms(5)),
            Scripted::fail(Failure::permanent().with_kind(FailureKind::Status(404))),
        ];
        conforms(jitter.name(), &policy, &script, u32::MAX);
    }
}

#[test]
fn a_time_budget_and_a_retry_budget_for_every_jitter_kind() {
    for jitter in jitters() {
        let policy = base(jitter).budget(Duration::from_secs(1)).build().unwrap();
        let script = [Scripted::fail(status(503)).after(ms(90))];
        conforms(jitter.name(), &policy, &script, u32::MAX);

        let policy = base(jitter).use_retry_budget(true).build().unwrap();
        conforms(jitter.name(), &policy, &script, 2);
    }
}

#[test]
fn breaker_rejections_and_cancellation_for_every_jitter_kind() {
    for jitter in jitters() {
        let waiting = base(jitter)
            .on_circuit_open(CircuitOpen::Wait)
            .build()
            .unwrap();
        let script = [
            Scripted::fail(status(503)).after(ms(10)),
            Scripted::rejected(ms(700)),
            Scripted::fail(status(503)).after(ms(10)),
            Scripted::cancel().after(ms(30)),
        ];
        conforms(jitter.name(), &waiting, &script, u32::MAX);

        let giving_up = base(jitter).build().unwrap();
        let script = [
            Scripted::fail(status(503)).after(ms(10)),
            Scripted::rejected(ms(700)),
        ];
        conforms(jitter.name(), &giving_up, &script, u32::MAX);
    }
}
