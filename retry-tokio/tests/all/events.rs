#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The breaker's events as tracing events, read back through a small capturing
//! subscriber: call not permitted, outcome ignored, failure rate and slow-call
//! rate exceeded, reset.
#![cfg(feature = "tracing")]

use core::time::Duration;
use std::sync::{Arc, Mutex};

use retry_core::{BreakerConfig, CallOutcome, ManualState, Rate};
use retry_tokio::retry_shared::{Breaker, Clock, Gate};

/// A clock stopped at one instant.
struct At(std::time::Instant);

impl Clock for At {
    fn now(&self) -> std::time::Instant {
        self.0
    }
}
use retry_tokio::SharedBreaker;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every event's message.
#[derive(Clone, Default)]
struct Messages(Arc<Mutex<Vec<String>>>);

struct Message<'a>(&'a mut String);

impl Visit for Message<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn core::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Messages {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut text = String::new();
        event.record(&mut Message(&mut text));
        self.0.lock().unwrap().push(text);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn the_breaker_events_reach_tracing() {
    let messages = Messages::default();
    let seen = messages.clone();
    tracing::subscriber::with_default(messages, || {
        let config = BreakerConfig::builder()
            .failure_threshold(None)
            .failure_rate(Rate::from_percent(50))
            .slow_call_rate(Rate::from_percent(50))
            .slow_call_duration(Duration::from_secs(1))
            .count_window(2)
            .minimum_calls(2)
            .build()
            .unwrap();
        let breaker = SharedBreaker::new(config).unwrap();
        let t = std::time::Instant::now();
        breaker.force_at(ManualState::MetricsOnly, t).unwrap();
        for outcome in [
            CallOutcome::failure(Duration::from_secs(2)),
            CallOutcome::failure(Duration::from_secs(2)),
        ] {
            let Gate::Admitted(permit) = breaker.request(&At(t)) else {
                panic!("metrics-only admits")
            };
            breaker.record(permit, outcome, &At(t));
        }
        let Gate::Admitted(permit) = breaker.request(&At(t)) else {
            panic!("metrics-only admits")
        };
        breaker.force_at(ManualState::ForcedOpen, t).unwrap();
        breaker.record(permit, CallOutcome::success(Duration::ZERO), &At(t)); // ignored
        assert!(matches!(
            breaker.request(&At(t)),
            Gate::Rejected { until: None }
        ));
        let _ = breaker.reset_at(t);
    });
    let seen = seen.0.lock().unwrap();
    for wanted in [
        "circuit breaker: failure rate exceeded",
        "circuit breaker: slow-call rate exceeded",
        "circuit breaker: outcome ignored",
        "circuit breaker: call not permitted",
        "circuit breaker reset",
        "circuit breaker changed state",
    ] {
        assert!(seen.iter().any(|m| m == wanted), "{wanted} not in {seen:?}");
    }
}

/// With automatic transitions on, the timer's move is an event like any other.
#[test]
fn a_move_made_by_the_timer_reaches_tracing() {
    let messages = Messages::default();
    let seen = messages.clone();
    tracing::subscriber::with_default(messages, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(async {
                let breaker = SharedBreaker::new(
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
                        ManualState::OpenFor(Duration::from_secs(2)),
                        tokio::time::Instant::now().into_std(),
                    )
                    .unwrap();
                seen.0.lock().unwrap().clear();
                tokio::time::sleep(Duration::from_secs(3)).await;
            });
    });
    let seen = seen.0.lock().unwrap();
    assert_eq!(*seen, ["circuit breaker changed state"]);
}
