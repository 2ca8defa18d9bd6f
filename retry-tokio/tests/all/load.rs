#![allow(clippy::expect_used, clippy::unwrap_used)]
//! A counted load test (counted, not timed): 10,000 reqwest calls, at most 200 in
//! flight, against the local axum server, a fifth of whose answers are 503s, all
//! sharing one circuit breaker and one retry budget, with cancellations and task
//! aborts mixed in, during attempts and during sleeps. Every call ends exactly
//! once; the attempts the callers report equal the requests the server saw; the
//! half-open probe bound holds; and no permit is leaked: after the load the
//! breaker admits a probe.
#![cfg(all(feature = "reqwest", feature = "tower"))]

use crate::support;

use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{
    Backoff, BreakerConfig, BreakerState, BudgetConfig, CallOutcome, CircuitOpen, Jitter, Permit,
    RetryError, RetryPolicy, Success,
};
use retry_shared::{Clock, Gate};

/// A clock stopped at one instant.
struct At(std::time::Instant);

impl Clock for At {
    fn now(&self) -> std::time::Instant {
        self.0
    }
}
use retry_tokio::reqwest_call::{send, RequestError};
use retry_tokio::{Breaker, CancellationToken, Retry, SharedBreaker, SharedBudget};
use tokio::sync::{oneshot, Semaphore};

const CALLS: u32 = 10_000;
const IN_FLIGHT: usize = 200;
const PROBES: u32 = 2;

/// The shared breaker, counting the permits it hands out and gets back: how
/// many are out now, how many half-open probes are out now, and the most
/// probes ever out at once.
#[derive(Clone, Debug)]
struct Counting {
    breaker: SharedBreaker,
    books: Arc<PermitBooks>,
}

#[derive(Debug, Default)]
struct PermitBooks {
    out: AtomicU64,
    probes_out: AtomicU32,
    most_probes_out: AtomicU32,
    probes_admitted: AtomicU64,
    rejected: AtomicU64,
}

impl Counting {
    fn returned(&self, permit: &Permit) {
        self.books.out.fetch_sub(1, Ordering::SeqCst);
        if permit.is_probe() {
            self.books.probes_out.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Breaker for Counting {
    fn request(&self, clock: &dyn Clock) -> Gate {
        let gate = self.breaker.request(clock);
        match &gate {
            Gate::Admitted(permit) => {
                self.books.out.fetch_add(1, Ordering::SeqCst);
                if permit.is_probe() {
                    self.books.probes_admitted.fetch_add(1, Ordering::SeqCst);
                    let out = self.books.probes_out.fetch_add(1, Ordering::SeqCst) + 1;
                    self.books.most_probes_out.fetch_max(out, Ordering::SeqCst);
                }
            }
            Gate::Rejected { .. } => {
                self.books.rejected.fetch_add(1, Ordering::SeqCst);
            }
        }
        gate
    }

    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        self.returned(&permit);
        self.breaker.record(permit, outcome, clock);
    }

    fn release(&self, permit: Permit, clock: &dyn Clock) {
        self.returned(&permit);
        self.breaker.release(permit, clock);
    }

    fn slow_call_duration(&self) -> Duration {
        self.breaker.slow_call_duration()
    }

    fn times_calls(&self) -> bool {
        self.breaker.times_calls()
    }
}

/// How a call is disturbed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    /// Its token is cancelled once the server has its (hanging) request.
    CancelInAttempt,
    /// Its first attempt fails, and its token is cancelled before the sleep.
    CancelInSleep,
    /// Its task is aborted once the server has its (hanging) request.
    AbortInAttempt,
    /// Its first attempt fails; its task is aborted during the minute-long
    /// sleep that follows.
    AbortInSleep,
}

fn kind(id: u32) -> Kind {
    match id % 50 {
        7 => Kind::CancelInAttempt,
        17 => Kind::CancelInSleep,
        27 => Kind::AbortInAttempt,
        37 => Kind::AbortInSleep,
        _ => Kind::Plain,
    }
}

/// What the callers saw.
#[derive(Default)]
struct Tally {
    /// How many times each call ended (must be once each).
    ended: Vec<AtomicU32>,
    /// Attempts the callers report: a finished call's own count, or, for a call
    /// whose task was aborted, the attempts its operation started.
    attempts: AtomicU64,
    succeeded: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    aborted: AtomicU64,
    circuit_open: AtomicU64,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

impl Tally {
    fn end<T>(&self, id: u32, result: &Result<Success<T>, RetryError<RequestError>>) {
        self.ended[id as usize].fetch_add(1, Ordering::SeqCst);
        match result {
            Ok(done) => {
                self.attempts
                    .fetch_add(u64::from(done.attempts), Ordering::SeqCst);
                self.succeeded.fetch_add(1, Ordering::SeqCst);
            }
            Err(err) => {
                self.attempts
                    .fetch_add(u64::from(err.attempts()), Ordering::SeqCst);
                if err.is_cancelled() {
                    self.cancelled.fetch_add(1, Ordering::SeqCst);
                } else if err.is_circuit_open() {
                    self.circuit_open.fetch_add(1, Ordering::SeqCst);
                } else {
                    self.failed.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn end_aborted(&self, id: u32, started: u32) {
        self.ended[id as usize].fetch_add(1, Ordering::SeqCst);
        self.attempts
            .fetch_add(u64::from(started), Ordering::SeqCst);
        self.aborted.fetch_add(1, Ordering::SeqCst);
    }
}

/// Three attempts `delay` apart, withdrawing retries from the budget, and
/// waiting for the breaker when it is open (so calls keep coming through
/// half-open) unless `delay` is long, within ten seconds in all.
fn policy(delay: Duration) -> RetryPolicy {
    let on_open = if delay < Duration::from_secs(1) {
        CircuitOpen::Wait
    } else {
        CircuitOpen::GiveUp
    };
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(delay))
        .jitter(Jitter::None)
        .use_retry_budget(true)
        .on_circuit_open(on_open)
        .budget(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_end_once_and_match_the_server_count() {
    let server = Arc::new(support::start().await);
    let client = support::client();

    // Four failures in a row open it for 20 ms; two probes at a time.
    let config = BreakerConfig::builder()
        .failure_threshold(4)
        .open_duration(Duration::from_millis(20))
        .half_open_permits(PROBES)
        .success_threshold(2)
        .build()
        .unwrap();
    let opened = Arc::new(AtomicU32::new(0));
    let counted_opens = Arc::clone(&opened);
    let breaker = Counting {
        breaker: SharedBreaker::new(config).unwrap().on_transition(move |t| {
            if t.to == BreakerState::Open {
                counted_opens.fetch_add(1, Ordering::SeqCst);
            }
        }),
        books: Arc::default(),
    };
    let budget = SharedBudget::new(BudgetConfig::aws_standard());
    let quick = Retry::new(policy(Duration::from_millis(2)))
        .classify(RequestError::failure)
        .breaker(breaker.clone())
        .budget(budget.clone());
    let slow = Retry::new(policy(Duration::from_secs(60)))
        .classify(RequestError::failure)
        .breaker(breaker.clone())
        .budget(budget.clone());

    let tally = Arc::new(Tally {
        ended: (0..CALLS).map(|_| AtomicU32::new(0)).collect(),
        ..Tally::default()
    });
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut calls = Vec::with_capacity(CALLS as usize);
    for id in 0..CALLS {
        let slot = Arc::clone(&slots).acquire_owned().await.unwrap();
        let in_flight = tally.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        tally.most_in_flight.fetch_max(in_flight, Ordering::SeqCst);
        let (server, client, tally) = (Arc::clone(&server), client.clone(), Arc::clone(&tally));
        let (quick, slow) = (quick.clone(), slow.clone());
        calls.push(tokio::spawn(async move {
            run_one(id, &server, &client, &quick, &slow, &tally).await;
            tally.in_flight.fetch_sub(1, Ordering::SeqCst);
            drop(slot);
        }));
    }
    for call in calls {
        call.await.unwrap();
    }

    // Every call ended exactly once.
    for (id, ended) in tally.ended.iter().enumerate() {
        assert_eq!(ended.load(Ordering::SeqCst), 1, "call {id}");
    }
    let count = |n: &AtomicU64| n.load(Ordering::SeqCst);
    let ends = count(&tally.succeeded)
        + count(&tally.failed)
        + count(&tally.cancelled)
        + count(&tally.aborted)
        + count(&tally.circuit_open);
    assert_eq!(ends, u64::from(CALLS));
    assert!(tally.most_in_flight.load(Ordering::SeqCst) <= IN_FLIGHT);

    // The attempts the callers report are the requests the server saw.
    assert_eq!(
        count(&tally.attempts),
        u64::from(server.books.load.load(Ordering::SeqCst)),
        "attempts reported vs requests seen"
    );

    // The half-open probe bound held, and half-open was really visited.
    let permits = &breaker.books;
    assert!(permits.most_probes_out.load(Ordering::SeqCst) <= PROBES);
    assert!(count(&permits.probes_admitted) > 0, "no probe ran");
    assert!(
        opened.load(Ordering::SeqCst) > 0,
        "the breaker never opened"
    );

    // No permit leaked: none is out, and a probe is admitted once the breaker
    // can admit again.
    assert_eq!(count(&permits.out), 0, "permits never handed back");
    assert_eq!(permits.probes_out.load(Ordering::SeqCst), 0);
    tokio::time::sleep(Duration::from_millis(25)).await;
    let now = At(tokio::time::Instant::now().into_std());
    match breaker.request(&now) {
        Gate::Admitted(permit) => {
            breaker.record(permit, CallOutcome::success(Duration::ZERO), &now)
        }
        Gate::Rejected { until } => panic!(
            "the breaker refused a call after the load (state {:?}, until {until:?})",
            breaker.breaker.state()
        ),
    }

    eprintln!(
        "load: {} requests; {} succeeded, {} failed, {} cancelled, {} aborted, {} refused by the \
         open breaker; opened {} times, {} probes, {} rejections",
        server.books.load.load(Ordering::SeqCst),
        count(&tally.succeeded),
        count(&tally.failed),
        count(&tally.cancelled),
        count(&tally.aborted),
        count(&tally.circuit_open),
        opened.load(Ordering::SeqCst),
        count(&permits.probes_admitted),
        count(&permits.rejected),
    );
    assert!(count(&tally.cancelled) > 0 && count(&tally.aborted) > 0);
}

/// Runs call `id` to its end, disturbed as its kind says, and tallies it.
async fn run_one(
    id: u32,
    server: &Arc<support::Server>,
    client: &reqwest::Client,
    quick: &Retry<RequestError>,
    slow: &Retry<RequestError>,
    tally: &Tally,
) {
    let started = Arc::new(AtomicU32::new(0));
    match kind(id) {
        Kind::Plain => {
            let url = server.url("/load");
            let result = quick.call(|_| send(client.get(&url))).await;
            tally.end(id, &result);
        }
        Kind::CancelInAttempt => {
            let token = CancellationToken::new();
            let arrived = server.books.expect_arrival(id);
            let url = server.url(&format!("/load?hang={id}"));
            let call = quick.call_with(&token, |_| send(client.get(&url)));
            tokio::pin!(call);
            let result = tokio::select! {
                result = &mut call => result,
                _ = arrived => {
                    token.cancel();
                    call.await
                }
            };
            tally.end(id, &result);
        }
        Kind::CancelInSleep => {
            let token = CancellationToken::new();
            let url = server.url("/load?fail=1");
            let result = quick
                .call_with(&token, |_| {
                    let sent = send(client.get(&url));
                    let token = token.clone();
                    async move {
                        let result = sent.await;
                        if result.is_err() {
                            token.cancel();
                        }
                        result
                    }
                })
                .await;
            tally.end(id, &result);
        }
        Kind::AbortInAttempt => {
            let arrived = server.books.expect_arrival(id);
            let url = server.url(&format!("/load?hang={id}"));
            let (quick, client, counter) = (quick.clone(), client.clone(), Arc::clone(&started));
            let mut task = tokio::spawn(async move {
                quick
                    .call(|_| {
                        counter.fetch_add(1, Ordering::SeqCst);
                        send(client.get(&url))
                    })
                    .await
            });
            let joined = tokio::select! {
                joined = &mut task => joined,
                _ = arrived => {
                    task.abort();
                    task.await
                }
            };
            match joined {
                Ok(result) => tally.end(id, &result),
                Err(e) if e.is_cancelled() => tally.end_aborted(id, started.load(Ordering::SeqCst)),
                Err(e) => panic!("call {id} panicked: {e}"),
            }
        }
        Kind::AbortInSleep => {
            let (failed_tx, failed) = oneshot::channel();
            let failed_tx = Arc::new(Mutex::new(Some(failed_tx)));
            let url = server.url("/load?fail=1");
            let (slow, client, counter) = (slow.clone(), client.clone(), Arc::clone(&started));
            let mut task = tokio::spawn(async move {
                slow.call(|_| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    let sent = send(client.get(&url));
                    let failed_tx = Arc::clone(&failed_tx);
                    async move {
                        let result = sent.await;
                        if result.is_err() {
                            if let Some(tx) = failed_tx.lock().unwrap().take() {
                                let _ = tx.send(());
                            }
                        }
                        result
                    }
                })
                .await
            });
            let joined = tokio::select! {
                joined = &mut task => joined,
                Ok(()) = failed => {
                    // The attempt has ended; the retry now sleeps a minute.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    task.abort();
                    task.await
                }
            };
            match joined {
                Ok(result) => tally.end(id, &result),
                Err(e) if e.is_cancelled() => tally.end_aborted(id, started.load(Ordering::SeqCst)),
                Err(e) => panic!("call {id} panicked: {e}"),
            }
        }
    }
}
