#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The metrics the SPEC names, read back through a small in-memory recorder.
#![cfg(feature = "metrics")]

use core::time::Duration;
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use retry_core::{Backoff, BreakerConfig, Jitter, RetryPolicy};
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

#[derive(Default)]
struct Memory {
    log: Log,
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
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
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
            let breaker: SharedBreaker =
                SharedBreaker::new(BreakerConfig::basic(3, Duration::from_secs(9), 1).unwrap())
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
    assert_eq!(count("retry.attempt.total", &[("outcome", "failure")]), 2);
    assert_eq!(count("retry.attempt.total", &[("outcome", "exhausted")]), 1);
    assert_eq!(count("retry.attempt.total", &[("outcome", "success")]), 1);
    let delays: Vec<f64> = log
        .iter()
        .filter(|(n, l, _)| {
            n == "retry.attempt.delay_ms" && *l == labels(&[("curve", "exponential")])
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
            let breaker: SharedBreaker =
                SharedBreaker::new(BreakerConfig::basic(1, Duration::from_secs(9), 1).unwrap())
                    .unwrap();
            let retry = Retry::<()>::new(policy).breaker(breaker.clone());
            let _ = retry.call(|_ctx| async { Err::<(), ()>(()) }).await; // trips
            for _ in 0..3 {
                let _ = retry.call(|_ctx| async { Ok::<_, ()>(()) }).await;
            }
            let now = tokio::time::Instant::now().into_std();
            breaker
                .force(retry_core::ManualState::ForcedOpen, now)
                .unwrap();
            let _ = retry.call(|_ctx| async { Ok::<_, ()>(()) }).await;
            assert_eq!(breaker.metrics(now).rejected, 4);
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
