#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The metrics `retry_core::behaviour` names, read back through a small in-memory recorder.
#![cfg(feature = "metrics")]

use core::time::Duration;
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use retry_core::{Backoff, BasicRule, BreakerConfig, Jitter, RetryPolicy};
use retry_tokio::{Retry, SharedBreaker};

/// Every increment and record: (name, sorted labels, value).
type Log = Arc<Mutex<Vec<(String, Vec<(String, String)>, f64)>>>;

struct Handle {
    name: String,
    labels: Vec<(String, String)>,
    log: Log,
}

impl Handle {
    fn push(&self, value: f64) {
        let entry = (self.name.clone(), self.labels.clone(), value);
        self.log.lock().unwrap().push(entry);
    }
}

impl CounterFn for Handle {
    fn increment(&self, value: u64) {
        self.push(value as f64);
    }
    fn absolute(&self, value: u64) {
        self.push(value as f64);
    }
}

impl HistogramFn for Handle {
    fn record(&self, value: f64) {
        self.push(value);
    }
}

/// A metric's name, unit and description.
type Description = (String, Option<Unit>, String);

#[derive(Default)]
struct Memory {
    log: Log,
    /// Every description: (name, unit, text).
    described: Arc<Mutex<Vec<Description>>>,
}

impl Memory {
    fn describe(&self, name: KeyName, unit: Option<Unit>, text: SharedString) {
        let entry = (name.as_str().to_owned(), unit, text.into_owned());
        self.described.lock().unwrap().push(entry);
    }
}

impl Memory {
    fn handle(&self, key: &Key) -> Arc<Handle> {
        let mut labels: Vec<_> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        labels.sort();
        Arc::new(Handle {
            name: key.name().to_owned(),
            labels,
            log: Arc::clone(&self.log),
        })
    }
}

impl Recorder for Memory {
    fn describe_counter(&self, name: KeyName, unit: Option<Unit>, text: SharedString) {
        self.describe(name, unit, text);
    }
    fn describe_gauge(&self, name: KeyName, unit: Option<Unit>, text: SharedString) {
        self.describe(name, unit, text);
    }
    fn describe_histogram(&self, name: KeyName, unit: Option<Unit>, text: SharedString) {
        self.describe(name, unit, text);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.handle(key))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.handle(key))
    }
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn attempts_delays_and_breaker_changes_are_counted() {
    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let policy = RetryPolicy::builder()
                .max_attempts(3)
                .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
                .jitter(Jitter::None)
                .build()
                .unwrap();
            let breaker: SharedBreaker = SharedBreaker::new(
                BreakerConfig::basic(BasicRule {
                    failure_threshold: 3,
                    open_duration: Duration::from_secs(9),
                    success_threshold: 1,
                })
                .unwrap(),
            )
            .unwrap();
            let _ = Retry::<()>::new(policy)
                .breaker(breaker)
                .call(|_ctx| async { Err::<(), ()>(()) })
                .await;
            let _ = Retry::<()>::new(policy)
                .call(|_ctx| async { Ok::<_, ()>(()) })
                .await;
        });
    });
    let log = log.lock().unwrap();
    let count = |name: &str, with: &[(&str, &str)]| {
        log.iter()
            .filter(|(n, l, _)| n == name && *l == labels(with))
            .count()
    };
    // Every attempt once: the three failures (the last one too, on which the
    // call gave up), then the success.
    assert_eq!(count("retry.attempt.total", &[("outcome", "failure")]), 3);
    assert_eq!(count("retry.attempt.total", &[("outcome", "exhausted")]), 0);
    assert_eq!(count("retry.attempt.total", &[("outcome", "success")]), 1);
    let delays: Vec<f64> = log
        .iter()
        .filter(|(n, l, _)| {
            n == "retry.attempt.delay_ms"
                && *l == labels(&[("curve", "exponential"), ("reason", "curve")])
        })
        .map(|(_, _, v)| *v)
        .collect();
    assert_eq!(delays, [1000.0, 2000.0]);
    assert_eq!(
        count(
            "circuit_breaker.state_change.total",
            &[("from", "closed"), ("to", "open")]
        ),
        1
    );
    assert_eq!(count("circuit_breaker.call.duration_ms", &[]), 3);
}

/// Runs `body` on a paused current-thread runtime with `recorder` installed.
fn with_recorder(recorder: &Memory, body: impl core::future::Future<Output = ()>) {
    metrics::with_local_recorder(recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(body);
    });
}

fn counted(log: &Log, name: &str, with: &[(&str, &str)]) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|(n, l, _)| n == name && *l == labels(with))
        .count()
}

#[test]
fn every_metric_has_a_description_and_a_unit() {
    let recorder = Memory::default();
    metrics::with_local_recorder(&recorder, retry_tokio::describe_metrics);
    let described = recorder.described.lock().unwrap();
    let names: Vec<&str> = described.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "retry.attempt.total",
            "retry.attempt.delay_ms",
            "circuit_breaker.state_change.total",
            "circuit_breaker.call.duration_ms",
            "circuit_breaker.call.rejected.total",
            "hedge.copy.launched.total",
            "hedge.copy.total",
        ]
    );
    for (name, unit, text) in described.iter() {
        let expected = if name.ends_with("_ms") {
            Unit::Milliseconds
        } else {
            Unit::Count
        };
        assert_eq!(unit.as_ref(), Some(&expected), "{name}");
        assert!(text.len() > 20, "{name}: {text}");
    }
}

/// A call that sleeps for each reason: attempt 1 fails with a 1 s
/// Retry-After (a hint), attempt 2 with a plain failure (the curve, 200 ms)
/// that opens `breaker` (two failures in a row, open 3 s); attempt 3 waits
/// for it (circuit open), then succeeds.
async fn sleep_for_every_reason(
    breaker: SharedBreaker,
) -> Result<retry_core::Success<()>, retry_core::RetryError<retry_core::Failure>> {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(200)))
        .jitter(Jitter::None)
        .on_circuit_open(retry_core::CircuitOpen::Wait)
        .build()
        .unwrap();
    Retry::<retry_core::Failure>::new(policy)
        .classify(|f| *f)
        .breaker(breaker)
        .call(|ctx| async move {
            match ctx.attempt() {
                1 => Err(retry_core::Failure::retry_after(Duration::from_secs(1))),
                2 => Err(retry_core::Failure::retryable()),
                _ => Ok(()),
            }
        })
        .await
}

#[test]
fn delays_are_labelled_with_their_reason() {
    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    with_recorder(&recorder, async {
        let breaker: SharedBreaker = SharedBreaker::new(
            BreakerConfig::basic(BasicRule {
                failure_threshold: 2,
                open_duration: Duration::from_secs(3),
                success_threshold: 1,
            })
            .unwrap(),
        )
        .unwrap();
        let done = sleep_for_every_reason(breaker).await.unwrap();
        assert_eq!(done.attempts, 3);
    });
    let delays: Vec<(Vec<(String, String)>, f64)> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _, _)| n == "retry.attempt.delay_ms")
        .map(|(_, l, v)| (l.clone(), *v))
        .collect();
    assert_eq!(
        delays,
        [
            (labels(&[("curve", "constant"), ("reason", "hint")]), 1000.0),
            (labels(&[("curve", "constant"), ("reason", "curve")]), 200.0),
            (
                labels(&[("curve", "constant"), ("reason", "circuit_open")]),
                2800.0
            ),
        ]
    );
}

#[test]
fn a_call_cancelled_between_attempts_counts_as_aborted_and_one_refused_by_the_breaker_as_rejected()
{
    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    with_recorder(&recorder, async {
        let policy = RetryPolicy::builder()
            .max_attempts(5)
            .backoff(Backoff::constant(Duration::from_secs(1)))
            .jitter(Jitter::None)
            .build()
            .unwrap();
        let retry = Retry::<()>::new(policy);

        // Cancelled during the sleep after a failed attempt.
        let token = retry_tokio::CancellationToken::new();
        let cancel = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            cancel.cancel();
        });
        let err = retry
            .call_with(&token, |_| async { Err::<(), _>(()) })
            .await
            .unwrap_err();
        assert!(err.is_cancelled());
        assert_eq!(err.attempts(), 1);

        // Cancelled before its first attempt.
        let err = retry
            .call_with(&token, |_| async { Ok::<_, ()>(()) })
            .await
            .unwrap_err();
        assert_eq!(err.attempts(), 0);

        // Turned away by an open breaker.
        let breaker: SharedBreaker = SharedBreaker::new(
            BreakerConfig::basic(BasicRule {
                failure_threshold: 1,
                open_duration: Duration::from_secs(60),
                success_threshold: 1,
            })
            .unwrap(),
        )
        .unwrap();
        let guarded = Retry::<()>::new(policy).breaker(breaker);
        let err = guarded
            .call(|_| async { Err::<(), _>(()) })
            .await
            .unwrap_err();
        assert!(err.is_circuit_open());
        assert_eq!(err.attempts(), 1);
    });
    // The first call: one failure, then aborted in its sleep. The second:
    // aborted before it began. The third: one failure (which opens the
    // breaker), then refused: rejected.
    assert_eq!(
        counted(&log, "retry.attempt.total", &[("outcome", "failure")]),
        2
    );
    assert_eq!(
        counted(&log, "retry.attempt.total", &[("outcome", "aborted")]),
        2
    );
    assert_eq!(
        counted(&log, "retry.attempt.total", &[("outcome", "rejected")]),
        1
    );
    assert_eq!(
        counted(&log, "retry.attempt.total", &[("outcome", "exhausted")]),
        0
    );
}

#[test]
fn durations_are_whole_microseconds_of_a_millisecond() {
    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    with_recorder(&recorder, async {
        let policy = RetryPolicy::builder()
            .max_attempts(2)
            .backoff(Backoff::constant(Duration::from_nanos(333_634_999)))
            .jitter(Jitter::None)
            .resolution(retry_core::Resolution::Nanos)
            .build()
            .unwrap();
        let _ = Retry::<()>::new(policy)
            .call(|_| async { Err::<(), _>(()) })
            .await;
    });
    let delays: Vec<f64> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(n, _, _)| n == "retry.attempt.delay_ms")
        .map(|(_, _, v)| *v)
        .collect();
    assert_eq!(delays, [333.634]);
    assert_eq!(delays[0].to_string(), "333.634");
}

#[test]
fn rejected_calls_are_counted_by_reason() {
    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let policy = RetryPolicy::builder()
                .max_attempts(1)
                .jitter(Jitter::None)
                .build()
                .unwrap();
            let breaker: SharedBreaker = SharedBreaker::new(
                BreakerConfig::basic(BasicRule {
                    failure_threshold: 1,
                    open_duration: Duration::from_secs(9),
                    success_threshold: 1,
                })
                .unwrap(),
            )
            .unwrap();
            let retry = Retry::<()>::new(policy).breaker(breaker.clone());
            let _ = retry.call(|_ctx| async { Err::<(), ()>(()) }).await; // trips
            for _ in 0..3 {
                let _ = retry.call(|_ctx| async { Ok::<_, ()>(()) }).await;
            }
            let now = tokio::time::Instant::now().into_std();
            breaker
                .force_at(retry_core::ManualState::ForcedOpen, now)
                .unwrap();
            let _ = retry.call(|_ctx| async { Ok::<_, ()>(()) }).await;
            assert_eq!(breaker.metrics_at(now).rejected, 4);
        });
    });
    let log = log.lock().unwrap();
    let count = |reason: &str| {
        log.iter()
            .filter(|(n, l, _)| {
                n == "circuit_breaker.call.rejected.total" && *l == labels(&[("reason", reason)])
            })
            .count()
    };
    assert_eq!(count("breaker.open"), 3);
    assert_eq!(count("breaker.forced_open"), 1);
}

/// The labels `retry_core::behaviour` gives each metric: the backticked
/// names in the `(labels …)` after the metric's name, or none for `(no
/// labels)`. `None` when the page does not name the metric that way.
fn documented_labels(page: &str, metric: &str) -> Option<Vec<String>> {
    let after = page.split(&format!("`{metric}` (")).nth(1)?;
    let inside = after.split(')').next()?;
    if inside == "no labels" {
        return Some(Vec::new());
    }
    let list = inside.strip_prefix("labels ")?;
    let mut labels: Vec<String> = list
        .split(", ")
        .map(|l| l.trim_matches('`').to_owned())
        .collect();
    labels.sort();
    Some(labels)
}

/// The behaviour page and the adapters agree on every metric's labels: each
/// metric the adapters record (all of them, from calls that retry on the curve
/// and on a hint, wait out an open breaker, are turned away by one, and are
/// hedged) is
/// named on the page with exactly the label keys it is recorded with.
#[test]
fn the_behaviour_page_names_every_metric_with_its_labels() {
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../retry-core/src/behaviour.rs"
    ))
    .unwrap();
    // The page's prose, without the comment markers.
    let page: String = page
        .lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .collect::<Vec<_>>()
        .join(" ");
    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    with_recorder(&recorder, async {
        let breaker: SharedBreaker = SharedBreaker::new(
            BreakerConfig::basic(BasicRule {
                failure_threshold: 2,
                open_duration: Duration::from_secs(3),
                success_threshold: 1,
            })
            .unwrap(),
        )
        .unwrap();
        let _ = sleep_for_every_reason(breaker.clone()).await;
        let now = tokio::time::Instant::now().into_std();
        breaker
            .force_at(retry_core::ManualState::ForcedOpen, now)
            .unwrap();
        let once = RetryPolicy::builder().max_attempts(1).build().unwrap();
        let _ = Retry::<retry_core::Failure>::new(once)
            .breaker(breaker)
            .call(|_| async { Ok::<_, retry_core::Failure>(()) })
            .await;
        // A hedged call whose first copy fails: two copies launched, one
        // failed, one won.
        let hedged = retry_tokio::HedgePolicy::builder()
            .max_attempts(2)
            .fixed_delay(Duration::from_millis(10))
            .build()
            .unwrap();
        let _ = retry_tokio::Hedge::<&str>::new(hedged)
            .call(|ctx| async move {
                if ctx.is_first() {
                    Err("busy")
                } else {
                    Ok(())
                }
            })
            .await;
    });
    let mut recorded: Vec<(String, Vec<String>)> = log
        .lock()
        .unwrap()
        .iter()
        .map(|(name, labels, _)| {
            let keys = labels.iter().map(|(k, _)| k.clone()).collect();
            (name.clone(), keys)
        })
        .collect();
    recorded.sort();
    recorded.dedup();
    let names: Vec<&str> = recorded.iter().map(|(n, _)| n.as_str()).collect();
    let all: Vec<&str> = retry_tokio::retry_shared::METRICS
        .iter()
        .map(|m| m.0)
        .collect();
    for name in &all {
        assert!(names.contains(name), "{name} was not recorded: {names:?}");
    }
    for (name, keys) in &recorded {
        assert_eq!(
            documented_labels(&page, name).as_ref(),
            Some(keys),
            "the behaviour page's labels for {name}"
        );
    }
}

/// With automatic transitions on, the timer's move at the end of the open
/// period is counted like any other, with no call.
#[test]
fn a_move_made_by_the_timer_is_counted() {
    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    with_recorder(&recorder, async {
        let breaker: SharedBreaker = SharedBreaker::new(
            BreakerConfig::builder()
                .failure_threshold(1)
                .open_duration(Duration::from_secs(2))
                .build()
                .unwrap(),
        )
        .unwrap();
        retry_tokio::automatic_transitions(&breaker).unwrap();
        breaker
            .force_at(
                retry_tokio::ManualState::OpenFor(Duration::from_secs(2)),
                tokio::time::Instant::now().into_std(),
            )
            .unwrap();
        tokio::time::sleep(Duration::from_secs(2) + Duration::from_millis(1)).await;
    });
    let moved = counted(
        &log,
        "circuit_breaker.state_change.total",
        &[("from", "open"), ("to", "half-open")],
    );
    assert_eq!(moved, 1);
}

/// Every attempt against a real server counted once, with the outcome it had:
/// `success`, `failure`, `permanent`, `timeout`, `aborted` (a cancellation, and
/// a call dropped by an outer timeout mid-attempt), `rejected`; and a hedged
/// call's copies.
#[cfg(all(feature = "reqwest", feature = "tower"))]
#[test]
fn every_attempt_against_a_server_is_counted_once_with_its_outcome() {
    use crate::support;
    use retry_tokio::reqwest_call::{send, RequestError};
    use retry_tokio::{Hedge, HedgePolicy};

    let recorder = Memory::default();
    let log = Arc::clone(&recorder.log);
    let mut seen = 0;
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        seen = runtime.block_on(async {
            let server = support::start().await;
            let client = support::client();
            let policy = |attempts: u32| {
                RetryPolicy::builder()
                    .max_attempts(attempts)
                    .backoff(Backoff::constant(Duration::from_millis(5)))
                    .jitter(Jitter::None)
                    .build()
                    .unwrap()
            };
            let retry = Retry::new(policy(3)).classify(RequestError::failure);
            // 503, 503, 200: failure, failure, success.
            let done = retry
                .call(|_| async { send(client.get(server.url("/flaky"))).await?.text().await })
                .await
                .unwrap();
            assert_eq!(done.value, "ok");
            // A 400: permanent.
            let err = retry
                .call(|_| send(client.get(server.url("/bad"))))
                .await
                .unwrap_err();
            assert_eq!(err.code(), "retry.permanent");
            // Past the attempt's 50 ms deadline: timeout.
            let timed = RetryPolicy::builder()
                .max_attempts(1)
                .attempt_timeout(Duration::from_millis(50))
                .build()
                .unwrap();
            let err = Retry::new(timed)
                .classify(RequestError::failure)
                .call(|_| send(client.get(server.url("/hang"))))
                .await
                .unwrap_err();
            assert_eq!(err.code(), "retry.timeout");
            // Dropped by an outer timeout mid-attempt: aborted.
            let once = Retry::new(policy(1)).classify(RequestError::failure);
            let dropped = tokio::time::timeout(
                Duration::from_millis(50),
                once.call(|_| send(client.get(server.url("/hang")))),
            )
            .await;
            assert!(dropped.is_err());
            // Cancelled mid-attempt: aborted.
            let token = retry_tokio::CancellationToken::new();
            let cancel = token.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                cancel.cancel();
            });
            let err = once
                .call_with(&token, |_| send(client.get(server.url("/hang"))))
                .await
                .unwrap_err();
            assert!(err.is_cancelled());
            // A 503 that opens the breaker (failure), then a refusal (rejected).
            let breaker: SharedBreaker = SharedBreaker::new(
                BreakerConfig::basic(BasicRule {
                    failure_threshold: 1,
                    open_duration: Duration::from_secs(60),
                    success_threshold: 1,
                })
                .unwrap(),
            )
            .unwrap();
            let guarded = once.clone().breaker(breaker);
            for _ in 0..2 {
                let _ = guarded
                    .call(|_| send(client.get(server.url("/always-503"))))
                    .await;
            }
            // A hedged call: copy 1 stalls, copy 2 (after 20 ms; the fourth
            // request `/flaky` sees, which it answers) wins.
            let hedge = Hedge::<RequestError>::new(
                HedgePolicy::builder()
                    .max_attempts(2)
                    .fixed_delay(Duration::from_millis(20))
                    .build()
                    .unwrap(),
            );
            let done = hedge
                .call(|copy| {
                    let path = if copy.is_first() { "/hang" } else { "/flaky" };
                    let url = server.url(path);
                    let client = client.clone();
                    async move { send(client.get(url)).await?.text().await }
                })
                .await;
            assert_eq!(
                done.map(|d| (d.copy, d.value)).ok(),
                Some((2, "ok".to_owned()))
            );
            ["/flaky", "/bad", "/hang", "/always-503"]
                .iter()
                .map(|path| server.books.count(path))
                .sum::<u32>()
        });
    });
    let outcome = |label: &str| counted(&log, "retry.attempt.total", &[("outcome", label)]);
    let counts = [
        "success",
        "failure",
        "permanent",
        "timeout",
        "aborted",
        "rejected",
    ]
    .map(|label| (label, outcome(label)));
    assert_eq!(
        counts,
        [
            ("success", 1),
            ("failure", 3),
            ("permanent", 1),
            ("timeout", 1),
            ("aborted", 2),
            ("rejected", 1),
        ]
    );
    // Every attempt the server saw has exactly one outcome (the refused one
    // never reached it; the hedged copies are counted as copies).
    let attempts: usize = counts.iter().map(|(_, n)| n).sum();
    assert_eq!(attempts - 1 + 2, seen as usize);
    let copies = |label: &str| counted(&log, "hedge.copy.total", &[("outcome", label)]);
    assert_eq!(counted(&log, "hedge.copy.launched.total", &[]), 2);
    assert_eq!(
        (copies("won"), copies("cancelled"), copies("failure")),
        (1, 1, 0),
        "copy 2 won and copy 1 was cancelled"
    );
}
