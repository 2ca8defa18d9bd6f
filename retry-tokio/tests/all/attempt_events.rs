#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The tracing events, read back through a small in-memory subscriber: an
//! ended attempt carries its failure's kind, durations are fixed-precision
//! milliseconds, and a sleep says why it is as long as it is.
#![cfg(feature = "tracing")]

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{Backoff, Failure, FailureKind, Jitter, Resolution, RetryPolicy};
use retry_tokio::Retry;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every event: its fields as (name, value as text).
type Events = Arc<Mutex<Vec<Vec<(String, String)>>>>;

#[derive(Default)]
struct Memory {
    events: Events,
}

struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.push((field.name().to_owned(), value.to_string()));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl Subscriber for Memory {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        self.events.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn field<'a>(event: &'a [(String, String)], name: &str) -> Option<&'a str> {
    event
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn attempt_events_carry_the_failure_kind_and_whole_microsecond_milliseconds() {
    let subscriber = Memory::default();
    let events = Arc::clone(&subscriber.events);
    tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(async {
                let policy = RetryPolicy::builder()
                    .max_attempts(4)
                    .backoff(Backoff::constant(Duration::from_nanos(333_634_999)))
                    .jitter(Jitter::None)
                    .resolution(Resolution::Nanos)
                    .attempt_timeout(Duration::from_secs(5))
                    .build()
                    .unwrap();
                let _ = Retry::<Failure>::new(policy)
                    .classify(|f| *f)
                    .call(|ctx| async move {
                        match ctx.attempt() {
                            1 => Err::<(), _>(
                                Failure::retryable().with_kind(FailureKind::Status(503)),
                            ),
                            2 => Err(Failure::retryable().with_kind(FailureKind::Connection)),
                            3 => core::future::pending().await,
                            _ => Err(Failure::retry_after(Duration::from_millis(1500))),
                        }
                    })
                    .await;
            });
    });
    let events = events.lock().unwrap();
    let ended: Vec<(Option<&str>, Option<&str>)> = events
        .iter()
        .filter(|e| field(e, "message") == Some("attempt ended"))
        .map(|e| (field(e, "outcome"), field(e, "failure")))
        .collect();
    assert_eq!(
        ended,
        [
            (Some("failure"), Some("status 503")),
            (Some("failure"), Some("connection")),
            (Some("timeout"), Some("timeout")),
            (Some("failure"), Some("error")),
        ]
    );
    let sleeps: Vec<(Option<&str>, Option<&str>)> = events
        .iter()
        .filter(|e| field(e, "message") == Some("sleeping before the next attempt"))
        .map(|e| (field(e, "delay_ms"), field(e, "reason")))
        .collect();
    assert_eq!(
        sleeps,
        [
            (Some("333.634"), Some("curve")),
            (Some("333.634"), Some("curve")),
            (Some("333.634"), Some("curve")),
        ]
    );
    let gave_up = events
        .iter()
        .find(|e| field(e, "message") == Some("giving up"))
        .unwrap();
    // Three sleeps and one 5 s timeout, in milliseconds to the microsecond
    // (the sleeps end on tokio's millisecond ticks, so it is not their sum).
    let elapsed = field(gave_up, "elapsed_ms").unwrap();
    let (whole, fraction) = elapsed.split_once('.').unwrap_or((elapsed, ""));
    assert!(whole.parse::<u64>().unwrap() > 6000, "{elapsed}");
    assert!(fraction.len() <= 3, "{elapsed}");
}

#[test]
fn a_hedged_call_reports_each_copy_sent_and_how_it_ended() {
    let subscriber = Memory::default();
    let events = Arc::clone(&subscriber.events);
    tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(async {
                let policy = retry_tokio::HedgePolicy::builder()
                    .max_attempts(3)
                    .fixed_delay(Duration::from_millis(20))
                    .build()
                    .unwrap();
                // Copy 1 stalls, copy 2 fails at once, copy 3 (sent at once
                // after it) answers in 5 ms.
                let done = retry_tokio::Hedge::<&str>::new(policy)
                    .call(|copy| async move {
                        match copy.copy() {
                            1 => core::future::pending().await,
                            2 => Err("busy"),
                            _ => {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                                Ok(copy.copy())
                            }
                        }
                    })
                    .await
                    .unwrap();
                assert_eq!(done.copy, 3);
            });
    });
    let events = events.lock().unwrap();
    let sent: Vec<Option<&str>> = events
        .iter()
        .filter(|e| field(e, "message") == Some("hedge: copy sent"))
        .map(|e| field(e, "copy"))
        .collect();
    assert_eq!(sent, [Some("1"), Some("2"), Some("3")]);
    let ended: Vec<(Option<&str>, Option<&str>)> = events
        .iter()
        .filter(|e| field(e, "message") == Some("hedge: copy ended"))
        .map(|e| (field(e, "copy"), field(e, "outcome")))
        .collect();
    assert_eq!(
        ended,
        [
            (Some("2"), Some("failure")),
            (Some("1"), Some("cancelled")),
            (Some("3"), Some("won")),
        ]
    );
}
