//! The fleet breaker's automatic transitions against a real redis-server: a
//! member whose breaker opened turns half-open at the end of its open period
//! with no call, and says so. Real time: nothing here asserts how late the
//! timer wakes, only that it does, at or after the instant.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use core::time::Duration;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use retry_core::{
    BreakerConfig, BreakerState, CallOutcome, FleetConfig, FleetRule, Transition, TransitionCause,
};
use retry_redis::{Fleet, FleetBreaker};
use retry_shared::{Breaker, Clock, Gate};

struct Wall;

impl Clock for Wall {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

fn member(url: &str, automatic: bool) -> (FleetBreaker, Arc<Mutex<Vec<Transition>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let config = BreakerConfig::builder()
        .failure_threshold(3)
        .open_duration(Duration::from_millis(300))
        .build()
        .unwrap();
    let builder = Fleet::connect(url)
        .unwrap()
        .namespace("auto")
        .unwrap()
        .breaker(
            "dep",
            config,
            FleetConfig::new(FleetRule::Quorum(5)).sync_interval(Duration::from_millis(100)),
        )
        .on_transition(move |t| log.lock().unwrap().push(*t));
    let builder = if automatic {
        builder.automatic_transitions()
    } else {
        builder
    };
    (builder.build().unwrap(), seen)
}

fn trip(b: &FleetBreaker) {
    for _ in 0..3 {
        let Gate::Admitted(permit) = b.request(&Wall) else {
            panic!("closed: admitted")
        };
        b.record(
            permit,
            CallOutcome::failure(Duration::from_millis(1)),
            &Wall,
        );
    }
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn an_open_member_turns_half_open_at_the_end_of_its_open_period_with_no_call() {
    let Some(server) =
        common::start("an_open_member_turns_half_open_at_the_end_of_its_open_period_with_no_call")
    else {
        return;
    };
    let (timed, seen) = member(&server.url(), true);
    let (plain, _) = member(&server.url(), false);
    trip(&timed);
    trip(&plain);
    let deadline = timed.next_deadline().unwrap();
    let start = Instant::now();
    while timed.state() != BreakerState::HalfOpen {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "not within a minute"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(Instant::now() >= deadline);
    let seen = seen.lock().unwrap().clone();
    let last = seen.last().unwrap();
    assert_eq!(
        (last.from, last.to, last.cause),
        (
            BreakerState::Open,
            BreakerState::HalfOpen,
            TransitionCause::OpenElapsed
        )
    );
    // Without automatic transitions (the default) the other member stays
    // open until a call comes, however long past its open period.
    std::thread::sleep(Duration::from_millis(100));
    assert!(plain.next_deadline().unwrap() <= Instant::now());
    assert_eq!(plain.state(), BreakerState::Open);
}

/// With the `metrics` feature, the fleet breaker counts its changes of state
/// (`retry_redis_breaker_transitions`, by `from` and `to`) where it reports
/// them to the hook and to traces: on a call here, read back through a
/// recorder local to this thread; an automatic move reports from the same
/// place (the test above sees it reach the hook).
#[cfg(feature = "metrics")]
#[test]
fn a_change_of_state_is_counted() {
    use metrics::{
        Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };

    type Log = Arc<Mutex<Vec<(String, Vec<(String, String)>, u64)>>>;

    struct Handle {
        name: String,
        labels: Vec<(String, String)>,
        log: Log,
    }

    impl CounterFn for Handle {
        fn increment(&self, value: u64) {
            let entry = (self.name.clone(), self.labels.clone(), value);
            self.log.lock().unwrap().push(entry);
        }
        fn absolute(&self, value: u64) {
            self.increment(value);
        }
    }

    #[derive(Default)]
    struct Counters(Log);

    impl Recorder for Counters {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let mut labels: Vec<_> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            Counter::from_arc(Arc::new(Handle {
                name: key.name().to_owned(),
                labels,
                log: Arc::clone(&self.0),
            }))
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    let Some(server) = common::start("a_change_of_state_is_counted") else {
        return;
    };
    let (member, _) = member(&server.url(), false);
    let recorder = Counters::default();
    let log = Arc::clone(&recorder.0);
    metrics::with_local_recorder(&recorder, || trip(&member));
    let transitions: Vec<_> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|(name, _, _)| name == "retry_redis_breaker_transitions")
        .cloned()
        .collect();
    let labels = vec![
        ("from".to_owned(), "closed".to_owned()),
        ("to".to_owned(), "open".to_owned()),
    ];
    assert_eq!(
        transitions,
        vec![("retry_redis_breaker_transitions".to_owned(), labels, 1)]
    );
}
