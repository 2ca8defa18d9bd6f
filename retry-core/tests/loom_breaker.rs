//! Every interleaving (to loom's preemption bound) of threads sharing one
//! breaker through its lock-free closed path ([`ClosedPath`]) and its machine
//! behind a mutex, as the thread-shared breaker uses them. Run:
//!
//! ```text
//! RUSTFLAGS="--cfg retry_loom" LOOM_MAX_PREEMPTIONS=3 \
//!     cargo test -p retry-core --test loom_breaker --release
//! ```
//!
//! What each model checks, in every interleaving:
//! - a trip is never lost: when the outcomes recorded meet a trip rule, the
//!   breaker ends open, whichever order they raced in;
//! - the breaker opens at most once per closed period (one transition, one
//!   new epoch), however many recorders saw the trip;
//! - a permit admitted while another thread trips is handed back without
//!   effect (late), and admission after the trip goes to the machine;
//! - an operator's reset racing with recorders leaves a window whose counts
//!   agree with its calls (never more failures than calls, never more calls
//!   than the window holds), and a closed state handed out again;
//! - successes counted on stripes (a full window far from tripping) are
//!   counted in before a failure that follows them and after one they race,
//!   never twice and never lost, also when an operator's reset races them;
//! - a quiet success racing a late failure that leaves a rule standing is
//!   judged: the trip it calls for is not lost;
//! - failures kept on stripes (a full window, or a streak, far enough from
//!   a rule) never pass the allowance: the failure that makes a rule stand
//!   trips, once, whichever stripes the ones before it were kept on;
//! - a failure is kept only while the failures in a row it can end stay
//!   below the streak rule's: three in a row across two stripes trip, once;
//! - a failure kept on one stripe is counted in before a success recorded
//!   after it on another, and a reset racing kept failures leaves a window
//!   whose counts agree with its calls.
#![cfg(retry_loom)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use core::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use retry_core::{
    BasicRule, BreakerConfig, BreakerState, CallOutcome, CircuitBreaker, ClosedPath, Instant,
    ManualState, Permit, Rate, Untimed,
};

/// A breaker shared as `SharedBreaker` shares it: the closed path, the machine
/// behind a mutex, and a count of the transitions reported.
struct Shared {
    path: ClosedPath<1>,
    machine: Mutex<CircuitBreaker<1, 0>>,
    transitions: AtomicUsize,
}

impl Shared {
    fn new(config: BreakerConfig) -> Arc<Shared> {
        let machine = CircuitBreaker::<1, 0>::new(config).unwrap();
        Arc::new(Shared {
            path: machine.closed_path(),
            machine: Mutex::new(machine),
            transitions: AtomicUsize::new(0),
        })
    }

    fn request(&self) -> Option<Permit> {
        if let Some(permit) = self.path.request() {
            return Some(permit);
        }
        let mut m = self.machine.lock().unwrap();
        m.suspend(&self.path);
        let admission = m.request(Instant::ORIGIN);
        m.resume(&self.path);
        match admission {
            retry_core::Admission::Admitted { permit, .. } => Some(permit),
            retry_core::Admission::Rejected { .. } => None,
        }
    }

    fn record(&self, permit: Permit, success: bool) {
        self.record_on(0, permit, success);
    }

    /// Records with quiet outcomes kept on stripe `stripe`.
    fn record_on(&self, stripe: usize, permit: Permit, success: bool) {
        self.record_taking(stripe, permit, success, Duration::ZERO);
    }

    /// [`record_on`](Self::record_on) for a call that took `duration` (one
    /// past the slow-call duration is never kept on a stripe).
    fn record_taking(&self, stripe: usize, permit: Permit, success: bool, duration: Duration) {
        let outcome = CallOutcome { success, duration };
        let transition = match self.path.record_on(stripe, permit, outcome) {
            Untimed::Recorded(_) => None,
            Untimed::Trip(trip) => {
                let mut m = self.machine.lock().unwrap();
                m.trip(&self.path, trip, Instant::ORIGIN)
                    .and_then(|r| r.transition)
            }
            Untimed::Locked(permit) => {
                let mut m = self.machine.lock().unwrap();
                m.suspend(&self.path);
                let recorded = m.record(permit, outcome, Instant::ORIGIN);
                m.resume(&self.path);
                recorded.transition
            }
        };
        if transition.is_some() {
            self.transitions.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn view(&self) -> CircuitBreaker<1, 0> {
        self.machine.lock().unwrap().view(&self.path)
    }
}

fn consecutive(n: u32) -> BreakerConfig {
    BreakerConfig::basic(BasicRule {
        failure_threshold: n,
        open_duration: Duration::from_secs(5),
        success_threshold: 1,
    })
    .unwrap()
}

/// 50 % of the last `window` calls, judged once the window is full.
fn rate(window: u16) -> BreakerConfig {
    BreakerConfig::failure_rate_over(Rate::from_percent(50), window).unwrap()
}

#[test]
fn racing_failures_trip_once_by_the_streak() {
    loom::model(|| {
        let shared = Shared::new(consecutive(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    if let Some(permit) = shared.request() {
                        shared.record(permit, false);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let view = shared.view();
        assert_eq!(view.state(), BreakerState::Open);
        assert_eq!(view.reopens(), 1);
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 1);
        assert!(shared.path.request().is_none());
    });
}

#[test]
fn a_racing_success_and_failure_trip_the_rate_once_whatever_their_order() {
    loom::model(|| {
        // Two calls of a two-call window, one failed: 50 % once both are in.
        let shared = Shared::new(rate(2));
        let a = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                let permit = shared.request().unwrap();
                shared.record(permit, false);
            })
        };
        let permit = shared.request().unwrap();
        shared.record(permit, true);
        a.join().unwrap();
        let view = shared.view();
        assert_eq!(view.state(), BreakerState::Open, "the trip was lost");
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 1);
        let stats = view.stats(Instant::ORIGIN);
        assert_eq!((stats.calls, stats.failures), (2, 1));
    });
}

#[test]
fn a_permit_admitted_during_a_trip_comes_back_without_effect() {
    loom::model(|| {
        let shared = Shared::new(consecutive(1));
        // Admitted before the race: its failure trips.
        let tripping = shared.request().unwrap();
        let racer = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                // Admitted before or after the trip: before, it is a closed
                // permit that comes back late; after, it is rejected.
                if let Some(permit) = shared.request() {
                    shared.record(permit, false);
                }
            })
        };
        shared.record(tripping, false);
        racer.join().unwrap();
        let view = shared.view();
        assert_eq!(view.state(), BreakerState::Open);
        assert_eq!(view.reopens(), 1, "opened twice");
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_reset_racing_with_recorders_leaves_a_consistent_window() {
    loom::model(|| {
        let shared = Shared::new(rate(3));
        let recorder = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                for success in [false, true] {
                    if let Some(permit) = shared.request() {
                        shared.record(permit, success);
                    }
                }
            })
        };
        {
            let mut m = shared.machine.lock().unwrap();
            m.suspend(&shared.path);
            let _ = m.reset(Instant::ORIGIN);
            m.resume(&shared.path);
        }
        recorder.join().unwrap();
        let view = shared.view();
        let stats = view.stats(Instant::ORIGIN);
        assert!(stats.calls <= 3, "{stats}");
        assert!(stats.failures <= stats.calls, "{stats}");
        // Three calls of three were never recorded: no trip, and still closed.
        assert_eq!(view.state(), BreakerState::Closed);
        assert!(shared.path.is_handed_out());
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 0);
    });
}

/// Two successes through a window of two calls, one at a time: the window is
/// full and holds no failure, so quiet successes go to the stripes from here.
fn filled(config: BreakerConfig) -> Arc<Shared> {
    let shared = Shared::new(config);
    for _ in 0..2 {
        let permit = shared.request().unwrap();
        shared.record(permit, true);
    }
    shared
}

#[test]
fn a_success_on_another_stripe_clears_the_streak_before_a_later_failure() {
    loom::model(|| {
        // No window: every success goes to a stripe.
        let shared = Shared::new(consecutive(2));
        let permit = shared.request().unwrap();
        shared.record(permit, false);
        let other = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                let permit = shared.request().unwrap();
                shared.record_on(1, permit, true);
            })
        };
        other.join().unwrap();
        // After the success (joined): a failure is the first of a new streak.
        let permit = shared.request().unwrap();
        shared.record_on(0, permit, false);
        let view = shared.view();
        assert_eq!(
            view.state(),
            BreakerState::Closed,
            "the success was not counted in first"
        );
        assert_eq!(view.consecutive_failures(), 1);
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_success_on_a_stripe_racing_a_failure_is_counted_once_in_either_order() {
    loom::model(|| {
        // One failure before: the streak trips at two unless the success
        // comes between.
        let shared = Shared::new(consecutive(2));
        let permit = shared.request().unwrap();
        shared.record(permit, false);
        let succeeding = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                if let Some(permit) = shared.request() {
                    shared.record_on(1, permit, true);
                }
            })
        };
        if let Some(permit) = shared.request() {
            shared.record_on(0, permit, false);
        }
        succeeding.join().unwrap();
        let view = shared.view();
        let transitions = shared.transitions.load(Ordering::SeqCst);
        match view.state() {
            // The success came first: the failure starts a new streak.
            BreakerState::Closed => {
                assert_eq!(view.consecutive_failures(), 1);
                assert_eq!(transitions, 0);
            }
            // The failure came first: it tripped, once.
            BreakerState::Open => {
                assert_eq!(view.reopens(), 1);
                assert_eq!(transitions, 1);
            }
            other => panic!("{other:?}"),
        }
    });
}

#[test]
fn striped_successes_racing_a_failure_keep_the_window_whole() {
    loom::model(|| {
        // 100 % of two calls: a full window with one failure is far from it.
        let config = BreakerConfig::failure_rate_over(Rate::from_percent(100), 2).unwrap();
        let shared = filled(config);
        let succeeding = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                for _ in 0..2 {
                    let permit = shared.request().unwrap();
                    shared.record_on(1, permit, true);
                }
            })
        };
        let permit = shared.request().unwrap();
        shared.record_on(0, permit, false);
        succeeding.join().unwrap();
        let view = shared.view();
        assert_eq!(view.state(), BreakerState::Closed);
        let stats = view.stats(Instant::ORIGIN);
        assert_eq!(stats.calls, 2, "{stats}");
        // The failure is held unless both successes were counted in after
        // it, and ends a streak only if it came last.
        assert!(stats.failures <= 1, "{stats}");
        assert!(view.consecutive_failures() <= stats.failures, "{stats}");
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn striped_successes_racing_a_reset_leave_a_consistent_window() {
    loom::model(|| {
        let shared = filled(rate(2));
        let succeeding = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                for _ in 0..2 {
                    if let Some(permit) = shared.request() {
                        shared.record_on(1, permit, true);
                    }
                }
            })
        };
        {
            let mut m = shared.machine.lock().unwrap();
            m.suspend(&shared.path);
            let _ = m.reset(Instant::ORIGIN);
            m.resume(&shared.path);
        }
        succeeding.join().unwrap();
        let view = shared.view();
        let stats = view.stats(Instant::ORIGIN);
        assert!(stats.calls <= 2, "{stats}");
        assert_eq!(stats.failures, 0, "{stats}");
        assert_eq!(view.state(), BreakerState::Closed);
        assert!(shared.path.is_handed_out());
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_quiet_success_racing_a_late_failure_is_judged() {
    loom::model(|| {
        // 50 % of two calls: one failure in a full window stands.
        let shared = Shared::new(rate(2));
        // A permit of the first closed period, late once the breaker has
        // been opened and closed again by an operator.
        let late = shared.request().unwrap();
        {
            let mut m = shared.machine.lock().unwrap();
            m.suspend(&shared.path);
            let open = ManualState::OpenFor(Duration::from_secs(1));
            m.force(open, Instant::ORIGIN).unwrap();
            m.force(ManualState::Closed, Instant::ORIGIN).unwrap();
            m.resume(&shared.path);
        }
        for _ in 0..2 {
            let permit = shared.request().unwrap();
            shared.record(permit, true);
        }
        let failing = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || shared.record_on(0, late, false))
        };
        let permit = shared.request().unwrap();
        shared.record_on(1, permit, true);
        failing.join().unwrap();
        // The success after the late failure trips (one failure of two); the
        // success before it leaves the failure last, and then one more
        // success trips.
        if shared.view().state() == BreakerState::Closed {
            let permit = shared.request().unwrap();
            shared.record(permit, true);
        }
        let view = shared.view();
        assert_eq!(view.state(), BreakerState::Open, "the trip was lost");
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 1);
    });
}

/// `calls` successes, one at a time: a window of that many calls is full.
fn filled_with(config: BreakerConfig, calls: usize) -> Arc<Shared> {
    let shared = Shared::new(config);
    for _ in 0..calls {
        let permit = shared.request().unwrap();
        shared.record(permit, true);
    }
    shared
}

/// `times` calls on `stripe`, each failing if admitted.
fn fail_on(shared: &Shared, stripe: usize, times: usize) {
    for _ in 0..times {
        if let Some(permit) = shared.request() {
            shared.record_on(stripe, permit, false);
        }
    }
}

/// [`fail_on`] on a thread of its own.
fn failing_on(shared: &Arc<Shared>, stripe: usize, times: usize) -> thread::JoinHandle<()> {
    let shared = Arc::clone(shared);
    thread::spawn(move || fail_on(&shared, stripe, times))
}

/// The breaker ended open, by one transition.
fn tripped_once(shared: &Shared) {
    assert_eq!(
        shared.view().state(),
        BreakerState::Open,
        "the trip was lost"
    );
    assert_eq!(shared.transitions.load(Ordering::SeqCst), 1);
}

#[test]
fn failures_kept_on_two_stripes_trip_the_rate_once() {
    loom::model(|| {
        // 100 % of four calls: three failures may be kept, the fourth trips.
        let config = BreakerConfig::failure_rate_over(Rate::from_percent(100), 4).unwrap();
        let shared = filled_with(config, 4);
        let failing = failing_on(&shared, 1, 2);
        fail_on(&shared, 0, 2);
        failing.join().unwrap();
        tripped_once(&shared);
    });
}

#[test]
fn failures_kept_on_two_stripes_trip_the_streak_once() {
    loom::model(|| {
        // No window, three in a row: two failures may be kept.
        let shared = Shared::new(consecutive(3));
        let failing = failing_on(&shared, 1, 1);
        fail_on(&shared, 0, 2);
        failing.join().unwrap();
        tripped_once(&shared);
    });
}

#[test]
fn a_failure_kept_on_one_stripe_stays_before_a_later_success_on_another() {
    loom::model(|| {
        // 100 % of two calls, full of successes: one failure may be kept.
        let config = BreakerConfig::failure_rate_over(Rate::from_percent(100), 2).unwrap();
        let shared = filled_with(config, 2);
        let failing = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                let permit = shared.request().unwrap();
                shared.record_on(1, permit, false);
            })
        };
        failing.join().unwrap();
        // After the failure (joined): the success goes after it, so the
        // window is (failure, success) and one more failure does not trip.
        let permit = shared.request().unwrap();
        shared.record_on(0, permit, true);
        let permit = shared.request().unwrap();
        shared.record_on(0, permit, false);
        let view = shared.view();
        assert_eq!(
            view.state(),
            BreakerState::Closed,
            "the success was counted in before the failure kept earlier"
        );
        let stats = view.stats(Instant::ORIGIN);
        assert_eq!((stats.calls, stats.failures), (2, 1), "{stats}");
        assert_eq!(view.consecutive_failures(), 1);
    });
}

#[test]
fn kept_failures_racing_a_reset_leave_a_consistent_window() {
    loom::model(|| {
        // 100 % of three calls: two failures may be kept.
        let config = BreakerConfig::failure_rate_over(Rate::from_percent(100), 3).unwrap();
        let shared = filled_with(config, 3);
        let failing = failing_on(&shared, 1, 2);
        {
            let mut m = shared.machine.lock().unwrap();
            m.suspend(&shared.path);
            let _ = m.reset(Instant::ORIGIN);
            m.resume(&shared.path);
        }
        failing.join().unwrap();
        let view = shared.view();
        let stats = view.stats(Instant::ORIGIN);
        assert!(stats.calls <= 2, "{stats}");
        assert_eq!(stats.failures, stats.calls, "{stats}");
        assert_eq!(view.consecutive_failures(), stats.failures, "{stats}");
        assert_eq!(view.state(), BreakerState::Closed);
        assert!(shared.path.is_handed_out());
        assert_eq!(shared.transitions.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn a_failure_judged_while_others_are_kept_does_not_widen_the_allowance() {
    loom::model(|| {
        // 100 % of four calls: three failures may be kept. A slow failure
        // (past the default 60 s) is judged under the fold lock while the
        // other thread keeps failures; the fourth failure of the four trips.
        let config = BreakerConfig::failure_rate_over(Rate::from_percent(100), 4).unwrap();
        let shared = filled_with(config, 4);
        let failing = failing_on(&shared, 1, 2);
        if let Some(permit) = shared.request() {
            shared.record_taking(0, permit, false, Duration::from_secs(61));
        }
        if let Some(permit) = shared.request() {
            shared.record_on(0, permit, false);
        }
        failing.join().unwrap();
        tripped_once(&shared);
    });
}

#[test]
fn a_streak_across_two_stripes_trips_once_when_it_stands() {
    loom::model(|| {
        // Three in a row, no window. One thread: a success, then a failure
        // (its success bounds the streak its failure ends); the other: two
        // failures. Three in a row stand when the first thread's failure
        // comes right before or right after the other two.
        let shared = Shared::new(consecutive(3));
        let failing = failing_on(&shared, 1, 2);
        for success in [true, false] {
            if let Some(permit) = shared.request() {
                shared.record_on(0, permit, success);
            }
        }
        failing.join().unwrap();
        let view = shared.view();
        let transitions = shared.transitions.load(Ordering::SeqCst);
        match view.state() {
            BreakerState::Closed => {
                assert!(view.consecutive_failures() < 3, "the trip was lost");
                assert_eq!(transitions, 0);
            }
            BreakerState::Open => assert_eq!(transitions, 1),
            other => panic!("{other:?}"),
        }
    });
}
