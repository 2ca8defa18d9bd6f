//! A quick opening's failed first attempt ends the call exactly as a driver
//! would: [`QuickOpening::failure`] (and [`Driver::after_quick_failure`] when
//! the call goes on) against the driver taking the call over
//! ([`Driver::after_quick_opening`] polled with the error) and against a
//! driver that ran the whole call. Every path must give the same result,
//! leave the breaker in the same state with the same outcomes recorded at the
//! same times, tell the give-up hook once with the same error, and ask the
//! classifier once per failed attempt.
//!
//! With traces or metrics compiled in, no call opens quickly (every call is
//! observed through the driver), and there is nothing to compare.

#![cfg(not(any(feature = "tracing", feature = "metrics")))]
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use retry_core::{
    Backoff, BasicRule, BreakerConfig, CallOutcome, Failure, GiveUpReason, Jitter, Permit, Rate,
    RetryError, RetryPolicy, Success,
};
use retry_shared::{
    Breaker, Clock, Driver, Gate, Input, PermitGuard, Ran, Saved, Settings, SharedBreaker, Slept,
    Step,
};

type Result = core::result::Result<Success<u32>, RetryError<&'static str>>;

/// A virtual clock, moved by hand, counting its readings.
#[derive(Clone)]
struct Manual {
    base: Instant,
    offset_ms: Arc<AtomicU64>,
    reads: Arc<AtomicU32>,
}

impl Manual {
    fn new(base: Instant) -> Manual {
        Manual {
            base,
            offset_ms: Arc::new(AtomicU64::new(0)),
            reads: Arc::new(AtomicU32::new(0)),
        }
    }
    fn advance(&self, ms: u64) {
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for Manual {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.base + Duration::from_millis(self.offset_ms.load(Ordering::SeqCst))
    }
}

/// A breaker known only as `dyn Breaker` that writes down every permit it
/// hands out and gets back, with the outcome and the time its clock reads.
#[derive(Debug)]
struct Logging {
    inner: SharedBreaker,
    log: Arc<Mutex<Vec<String>>>,
}

impl Breaker for Logging {
    fn request(&self, clock: &dyn Clock) -> Gate {
        let gate = self.inner.request(clock);
        self.log.lock().unwrap().push(format!("request: {gate:?}"));
        gate
    }
    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn Clock) {
        self.log.lock().unwrap().push(format!(
            "record {permit:?}: {outcome:?} at {:?}",
            clock.now()
        ));
        self.inner.record(permit, outcome, clock);
    }
    fn release(&self, permit: Permit, clock: &dyn Clock) {
        self.log
            .lock()
            .unwrap()
            .push(format!("release {permit:?} at {:?}", clock.now()));
        self.inner.release(permit, clock);
    }
    fn slow_call_duration(&self) -> Duration {
        self.inner.slow_call_duration()
    }
    fn times_calls(&self) -> bool {
        self.inner.times_calls()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum BreakerKind {
    None,
    /// A `SharedBreaker` of the default shape (the settings keep it for a
    /// direct call), opening on the first failure.
    Shared,
    /// The same behind an `Arc`: only a `dyn Breaker` to the settings.
    ArcShared,
    /// A failure-rate breaker over a count window (stays closed).
    Rate,
    /// A logging `dyn Breaker`.
    Logging,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    attempts: u32,
    classifier: bool,
    breaker: BreakerKind,
    hook: bool,
    /// The first attempt waited (an async one) 10 ms in.
    waited: bool,
    /// Every attempt's error.
    error: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// `QuickOpening::failure`, then `Driver::after_quick_failure`.
    Quick,
    /// `Driver::after_quick_opening`, polled with the error.
    TakeOver,
    /// A driver from the call's start.
    Fresh,
}

/// What a call left behind.
#[derive(Debug, PartialEq)]
struct Seen {
    result: Result,
    /// The quick path ended the call itself.
    quick_ended: bool,
    /// How often the call's clock was read (by the driver, the guard or the
    /// breaker).
    reads: u32,
    breaker: Option<Saved<retry_core::BreakerSnapshot<16, 0>>>,
    log: Vec<String>,
    transitions: Vec<String>,
    given_up: Vec<RetryError<&'static str>>,
    classified: u32,
}

struct Rig {
    settings: Settings<&'static str>,
    shared: Option<SharedBreaker>,
    log: Arc<Mutex<Vec<String>>>,
    transitions: Arc<Mutex<Vec<String>>>,
    given_up: Arc<Mutex<Vec<RetryError<&'static str>>>>,
    classified: Arc<AtomicU32>,
}

impl Rig {
    fn seen(&self, result: Result, quick_ended: bool, clock: &Manual) -> Seen {
        let reads = clock.reads.load(Ordering::SeqCst);
        let now = clock.now();
        let log = self.log.lock().unwrap().clone();
        let transitions = self.transitions.lock().unwrap().clone();
        let given_up = self.given_up.lock().unwrap().clone();
        Seen {
            result,
            quick_ended,
            reads,
            breaker: self.shared.as_ref().map(|b| b.save_at(now)),
            log,
            transitions,
            given_up,
            classified: self.classified.load(Ordering::SeqCst),
        }
    }
}

fn rig(case: Case) -> Rig {
    let policy = RetryPolicy::builder()
        .max_attempts(case.attempts)
        .backoff(Backoff::constant(Duration::from_millis(100)))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let mut settings = Settings::new(policy);
    settings.set_seed(7);
    let classified = Arc::new(AtomicU32::new(0));
    if case.classifier {
        let count = Arc::clone(&classified);
        settings.set_classifier(move |e: &&'static str| {
            count.fetch_add(1, Ordering::SeqCst);
            if *e == "fatal" {
                Failure::permanent()
            } else {
                Failure::retryable()
            }
        });
    }
    let given_up = Arc::new(Mutex::new(Vec::new()));
    if case.hook {
        let seen = Arc::clone(&given_up);
        settings.set_on_give_up(move |e: &RetryError<&'static str>| {
            seen.lock().unwrap().push(e.clone());
        });
    }
    let transitions = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(Vec::new()));
    let config = match case.breaker {
        BreakerKind::Rate => BreakerConfig::failure_rate_over(Rate::from_percent(50), 4).unwrap(),
        _ => BreakerConfig::basic(BasicRule {
            failure_threshold: 1,
            open_duration: Duration::from_secs(5),
            success_threshold: 1,
        })
        .unwrap(),
    };
    let heard = Arc::clone(&transitions);
    let shared = SharedBreaker::new(config)
        .unwrap()
        .on_transition(move |t| heard.lock().unwrap().push(format!("{t:?}")));
    let shared = match case.breaker {
        BreakerKind::None => None,
        BreakerKind::Shared | BreakerKind::Rate => {
            settings.set_breaker(shared.clone());
            Some(shared)
        }
        BreakerKind::ArcShared => {
            settings.set_breaker(Arc::new(shared.clone()));
            Some(shared)
        }
        BreakerKind::Logging => {
            settings.set_breaker(Logging {
                inner: shared.clone(),
                log: Arc::clone(&log),
            });
            Some(shared)
        }
    };
    assert_eq!(
        settings.shared_breaker().is_some(),
        matches!(case.breaker, BreakerKind::Shared | BreakerKind::Rate)
    );
    Rig {
        settings,
        shared,
        log,
        transitions,
        given_up,
        classified,
    }
}

/// Carries a call on from `step`: every attempt fails with `error` after
/// 50 ms, every sleep is slept out.
fn drive<C: Fn() -> bool>(
    mut driver: Driver<'_, u32, &'static str, Manual, C>,
    mut step: Step<u32, &'static str>,
    clock: &Manual,
    error: &'static str,
) -> Result {
    loop {
        let input = match step {
            Step::Attempt(_) => {
                clock.advance(50);
                Input::Ended(Ran::Returned(Err(error)))
            }
            Step::Sleep(sleep) => {
                clock.advance(u64::try_from(sleep.delay.as_millis()).unwrap());
                Input::Slept(Slept::Elapsed)
            }
            Step::Finished(result) => return result,
        };
        step = driver.poll(input);
    }
}

fn run(case: Case, path: Path, base: Instant) -> Seen {
    let rig = rig(case);
    let settings = &rig.settings;
    let clock = Manual::new(base);
    let never = || false;
    clock.advance(5);
    let quick = settings
        .quick_opening()
        .expect("these settings open quickly");
    let mut quick_ended = false;
    let result = if path == Path::Fresh {
        let mut driver = Driver::new(settings, clock.clone(), never);
        let Step::Attempt(first) = driver.poll(Input::Start) else {
            panic!("the call starts with an attempt")
        };
        assert_eq!(first, quick.attempt);
        if case.waited {
            clock.advance(10);
            driver.attempt_waiting();
            clock.advance(40);
        } else {
            clock.advance(50);
        }
        let step = driver.poll(Input::Ended(Ran::Returned(Err(case.error))));
        drive(driver, step, &clock, case.error)
    } else {
        let mut permit = quick.admit(settings, &clock).unwrap();
        let mut waited = None;
        if case.waited {
            clock.advance(10);
            // As an adapter does: the first wait is read only under a
            // breaker, for its permit.
            if let Some(permit) = permit.as_mut() {
                let now = clock.now();
                waited = Some(now);
                permit.waited(now);
            }
            clock.advance(40);
        } else {
            clock.advance(50);
        }
        match path {
            Path::TakeOver => {
                let mut driver =
                    Driver::after_quick_opening(settings, clock.clone(), never, waited, permit);
                let step = driver.poll(Input::Ended(Ran::Returned(Err(case.error))));
                drive(driver, step, &clock, case.error)
            }
            _ => match quick.failure(settings, &clock, case.error, waited, permit) {
                Ok(error) => {
                    quick_ended = true;
                    Err(error)
                }
                Err(failed) => {
                    assert_eq!(*failed.error(), case.error);
                    let (driver, step) =
                        Driver::after_quick_failure(settings, clock.clone(), never, failed);
                    drive(driver, step, &clock, case.error)
                }
            },
        }
    };
    rig.seen(result, quick_ended, &clock)
}

/// The same call through a breaker of the default shape, asked directly (as
/// retry-std asks it): the quick failure with a guard over `&SharedBreaker`.
fn run_direct(case: Case, base: Instant) -> Seen {
    let rig = rig(case);
    let settings = &rig.settings;
    let clock = Manual::new(base);
    clock.advance(5);
    let quick = settings.quick_opening().unwrap();
    let shared = settings.shared_breaker().unwrap();
    let mut permit = PermitGuard::request(shared, clock.clone(), None, None).unwrap();
    let mut waited = None;
    if case.waited {
        clock.advance(10);
        waited = Some(clock.now());
        permit.waited(clock.now());
        clock.advance(40);
    } else {
        clock.advance(50);
    }
    let mut quick_ended = false;
    let result = match quick.failure(settings, &clock, case.error, waited, Some(permit)) {
        Ok(error) => {
            quick_ended = true;
            Err(error)
        }
        Err(failed) => {
            let failed = failed.map_permit(PermitGuard::into_dyn);
            let (driver, step) =
                Driver::after_quick_failure(settings, clock.clone(), || false, failed);
            drive(driver, step, &clock, case.error)
        }
    };
    rig.seen(result, quick_ended, &clock)
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for attempts in [1, 3] {
        for classifier in [false, true] {
            for breaker in [
                BreakerKind::None,
                BreakerKind::Shared,
                BreakerKind::ArcShared,
                BreakerKind::Rate,
                BreakerKind::Logging,
            ] {
                for hook in [false, true] {
                    for waited in [false, true] {
                        for error in ["busy", "fatal"] {
                            cases.push(Case {
                                attempts,
                                classifier,
                                breaker,
                                hook,
                                waited,
                                error,
                            });
                        }
                    }
                }
            }
        }
    }
    cases
}

#[test]
fn a_quick_failure_ends_the_call_as_the_driver_would() {
    let base = Instant::now();
    let mut quick_ends = 0;
    for case in cases() {
        let quick = run(case, Path::Quick, base);
        let mut take_over = run(case, Path::TakeOver, base);
        let mut fresh = run(case, Path::Fresh, base);
        // Everything but who ended the call and how often the clock was read
        // is the same.
        for other in [&mut take_over, &mut fresh] {
            other.quick_ended = quick.quick_ended;
            // (The logging breaker reads the clock it is given: the quick
            // path's own, where a driver hands on its reading.)
            if case.breaker != BreakerKind::Logging {
                assert!(other.reads >= quick.reads, "{case:?}");
            }
            other.reads = quick.reads;
        }
        assert_eq!(quick, take_over, "{case:?}");
        assert_eq!(quick, fresh, "{case:?}");
        if matches!(case.breaker, BreakerKind::Shared | BreakerKind::Rate) {
            let mut direct = run_direct(case, base);
            direct.reads = quick.reads;
            assert_eq!(direct, quick, "{case:?}, asked directly");
        }

        // What the quick path decided, stated: a permanent failure (only the
        // classifier makes one) or a policy of one attempt ends it.
        let permanent = case.classifier && case.error == "fatal";
        assert_eq!(
            quick.quick_ended,
            permanent || case.attempts == 1,
            "{case:?}"
        );
        quick_ends += u32::from(quick.quick_ended);
        let error = quick.result.as_ref().unwrap_err();
        assert_eq!(error.last_error(), Some(&case.error));
        // The hook heard the call's error, once.
        let heard: &[RetryError<&str>] = if case.hook {
            core::slice::from_ref(error)
        } else {
            &[]
        };
        assert_eq!(quick.given_up, heard, "{case:?}");
        // The breaker heard the attempt: one that opens on the first failure
        // opened on a retryable one (a permanent failure is a success to a
        // breaker), and the logging one recorded it.
        let opens = !matches!(case.breaker, BreakerKind::None | BreakerKind::Rate);
        assert_eq!(
            !quick.transitions.is_empty(),
            opens && !permanent,
            "{case:?}: {quick:?}"
        );
        if case.breaker == BreakerKind::Logging {
            assert!(
                quick.log.iter().any(|l| l.starts_with("record")),
                "{case:?}: {:?}",
                quick.log
            );
        }
        if !quick.quick_ended {
            continue;
        }
        // A call the quick path ended: one attempt, the failure's reason, no
        // time reported (none was read at the call's start, whether the
        // attempt waited 40 ms or not); the classifier asked once (if there
        // is one); the breaker opened once.
        assert_eq!(error.attempts(), 1, "{case:?}");
        assert_eq!(error.last_error_attempt(), Some(1), "{case:?}");
        let reason = if permanent {
            GiveUpReason::Permanent
        } else {
            GiveUpReason::Exhausted
        };
        assert_eq!(error.reason(), reason, "{case:?}");
        assert_eq!(error.elapsed(), None, "{case:?}");
        assert_eq!(quick.classified, u32::from(case.classifier), "{case:?}");
        // The clock: read once under a breaker, for the end of an attempt
        // that waited (its permit's; the read of its first wait is the
        // test's own); not at all otherwise, unless the breaker needs the
        // time (opening, or logging).
        let guarded = case.breaker != BreakerKind::None;
        let reads = u32::from(case.waited && guarded) * 2;
        if !opens || permanent && case.breaker != BreakerKind::Logging {
            assert_eq!(quick.reads, reads, "{case:?}");
        }
        let transitions = usize::from(opens && !permanent);
        assert_eq!(quick.transitions.len(), transitions, "{case:?}: {quick:?}");
    }
    assert!(quick_ends > 0);
}
