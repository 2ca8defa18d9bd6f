//! When the driver reads the clock, and what the elapsed times it reports mean:
//! the whole time when the call reads the clock at its start, and none
//! otherwise (a later first reading times the sleeps, but a time counted from
//! it would leave out part of the call).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use core::time::Duration;
use std::sync::Arc;
use std::time::Instant;

use retry_core::{
    Backoff, BasicRule, BreakerConfig, BudgetConfig, Jitter, Rate, RetryError, RetryPolicy,
    RetryPolicyBuilder, Success,
};
use retry_shared::{
    Breaker as _, Clock, Driver, Input, Ran, Settings, SharedBreaker, SharedBudget, Slept, Step,
};

/// A virtual clock that counts its readings.
#[derive(Clone)]
struct Counting {
    base: Instant,
    offset_ms: Arc<AtomicU64>,
    reads: Arc<AtomicU32>,
}

impl Counting {
    fn new() -> Counting {
        Counting {
            base: Instant::now(),
            offset_ms: Arc::new(AtomicU64::new(0)),
            reads: Arc::new(AtomicU32::new(0)),
        }
    }
    fn advance(&self, ms: u64) {
        self.offset_ms.fetch_add(ms, Ordering::SeqCst);
    }
    fn reads(&self) -> u32 {
        self.reads.load(Ordering::SeqCst)
    }
}

impl Clock for Counting {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.base + Duration::from_millis(self.offset_ms.load(Ordering::SeqCst))
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy() -> RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(ms(100)))
        .jitter(Jitter::None)
}

/// How one attempt goes: it runs `ran_ms` of virtual time (`waits`: the adapter
/// says it waited first, as an async one does), then returns `result`.
struct Attempt {
    ran_ms: u64,
    waits: bool,
    result: Result<u32, &'static str>,
}

fn ok(ran_ms: u64) -> Attempt {
    Attempt {
        ran_ms,
        waits: false,
        result: Ok(7),
    }
}

fn err(ran_ms: u64) -> Attempt {
    Attempt {
        ran_ms,
        waits: false,
        result: Err("busy"),
    }
}

/// Drives a call through `attempts` (one per attempt) as an adapter would, the
/// clock advancing while attempts run and sleeps last.
fn drive(
    settings: &Settings<&'static str>,
    clock: &Counting,
    attempts: Vec<Attempt>,
) -> Result<Success<u32>, RetryError<&'static str>> {
    let mut script = attempts.into_iter();
    let mut driver = Driver::new(settings, clock.clone(), || false);
    let mut input = Input::Start;
    loop {
        input = match driver.poll(input) {
            Step::Attempt(_) => {
                let attempt = script.next().expect("the script has an attempt for each");
                if attempt.waits {
                    driver.attempt_waiting();
                }
                clock.advance(attempt.ran_ms);
                Input::Ended(Ran::Returned(attempt.result))
            }
            Step::Sleep(sleep) => {
                clock.advance(u64::try_from(sleep.delay.as_millis()).unwrap());
                Input::Slept(Slept::Elapsed)
            }
            Step::Finished(result) => return result,
        };
    }
}

#[test]
fn a_first_attempt_success_that_needs_no_time_reads_no_clock() {
    let settings = Settings::new(policy().build().unwrap());
    let clock = Counting::new();
    let done = drive(&settings, &clock, vec![ok(250)]).unwrap();
    assert_eq!((done.value, done.attempts, done.elapsed), (7, 1, None));
    assert_eq!(clock.reads(), 0);
}

#[test]
fn with_no_fixed_seed_one_is_drawn_only_when_a_delay_could_be() {
    let settings = Settings::<&'static str>::new(policy().build().unwrap());
    let clock = Counting::new();
    let mut driver = Driver::<u32, _, _, _>::new(&settings, clock.clone(), || false);
    // The machine shows its seed in the driver's debug form; a driver whose
    // call has needed no time has no machine yet, and so no seed.
    let seed = |driver: &dyn core::fmt::Debug| {
        let shown = format!("{driver:?}");
        let at = shown.find("seed: ")? + "seed: ".len();
        Some(shown[at..].split(',').next()?.parse::<u64>().unwrap())
    };
    assert!(matches!(driver.poll(Input::Start), Step::Attempt(_)));
    assert_eq!(seed(&driver), None, "not drawn before the first attempt");
    let Step::Sleep(_) = driver.poll(Input::Ended(Ran::Returned(Err("busy")))) else {
        panic!("a retry follows")
    };
    // Drawn from the OS-keyed hasher: zero only once in 2^64 calls.
    assert!(
        seed(&driver).is_some_and(|s| s != 0),
        "drawn at the first failure"
    );

    let mut lucky = Driver::<u32, _, _, _>::new(&settings, clock.clone(), || false);
    assert!(matches!(lucky.poll(Input::Start), Step::Attempt(_)));
    let Step::Finished(Ok(done)) = lucky.poll(Input::Ended(Ran::Returned(Ok(1)))) else {
        panic!("a success ends the call")
    };
    assert_eq!(done.elapsed, None);
    assert_eq!(seed(&lucky), None, "never drawn on a first-attempt success");

    // A call that needs time builds its machine at once, still unseeded (0).
    let mut timed = settings.clone();
    timed.set_measure_elapsed();
    let mut measured = Driver::<u32, _, _, _>::new(&timed, clock.clone(), || false);
    assert!(matches!(measured.poll(Input::Start), Step::Attempt(_)));
    let Step::Finished(Ok(done)) = measured.poll(Input::Ended(Ran::Returned(Ok(1)))) else {
        panic!("a success ends the call")
    };
    assert!(done.elapsed.is_some());
    assert_eq!(
        seed(&measured),
        Some(0),
        "never drawn on a first-attempt success"
    );
}

#[test]
fn a_call_that_needs_time_reads_the_clock_from_its_start_and_reports_it_whole() {
    let budget = SharedBudget::new(BudgetConfig::grpc(10, 0.1).unwrap());
    let cases: Vec<(&str, Settings<&'static str>)> = vec![
        (
            "attempt timeout",
            Settings::new(policy().attempt_timeout(ms(1_000)).build().unwrap()),
        ),
        (
            "time budget",
            Settings::new(policy().budget(ms(10_000)).build().unwrap()),
        ),
        ("retry budget", {
            let mut s = Settings::new(policy().build().unwrap());
            s.set_budget(budget);
            s
        }),
        ("a breaker that times calls", {
            let mut s = Settings::new(policy().build().unwrap());
            s.set_breaker(slow_call_breaker());
            s
        }),
        ("asked for", {
            let mut s = Settings::new(policy().build().unwrap());
            s.set_measure_elapsed();
            s
        }),
    ];
    for (name, settings) in &cases {
        let clock = Counting::new();
        let done = drive(settings, &clock, vec![ok(250)]).unwrap();
        assert_eq!(done.elapsed, Some(ms(250)), "{name}");
        assert_eq!(clock.reads(), 2, "{name}: the start and the attempt's end");

        // A first attempt that fails after 300 ms: its time counts.
        let clock = Counting::new();
        let done = drive(settings, &clock, vec![err(300), ok(50)]).unwrap();
        assert_eq!(done.elapsed, Some(ms(300 + 100 + 50)), "{name}");
        let clock = Counting::new();
        let error = drive(settings, &clock, vec![err(300), err(20), err(5)]).unwrap_err();
        assert_eq!(
            error.elapsed(),
            Some(ms(300 + 100 + 20 + 100 + 5)),
            "{name}"
        );
    }
}

/// A breaker with a slow-call rule: it times every call.
fn slow_call_breaker() -> SharedBreaker {
    let config = BreakerConfig::builder()
        .failure_rate(Rate::from_percent(50))
        .slow_call_rate(Rate::from_percent(50))
        .slow_call_duration(ms(5_000))
        .count_window(10)
        .minimum_calls(10)
        .build()
        .unwrap();
    SharedBreaker::new(config).unwrap()
}

#[test]
fn a_breaker_that_does_not_time_calls_needs_no_clock_on_a_first_attempt_success() {
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 3,
        open_duration: ms(1_000),
        success_threshold: 1,
    })
    .unwrap();
    let breaker = SharedBreaker::new(config).unwrap();
    let mut settings = Settings::new(policy().build().unwrap());
    settings.set_breaker(breaker.clone());
    let clock = Counting::new();
    let done = drive(&settings, &clock, vec![ok(250)]).unwrap();
    if cfg!(feature = "metrics") {
        // The call-duration histogram times every call the breaker admits.
        assert!(breaker.times_calls());
        assert_eq!((done.elapsed, clock.reads()), (Some(ms(250)), 2));
    } else {
        assert!(!breaker.times_calls());
        // Neither the driver nor the permit guard reads the clock: a breaker
        // that does not time calls learns an attempt's start only from its
        // first wait (`PermitGuard::waited`), and this attempt did not wait.
        assert_eq!((done.elapsed, clock.reads()), (None, 0));
    }
}

/// Issue 28: a call whose clock starts at its first failure must not report
/// the time since then as the call's (before: 150 ms for a call of 450 ms, and
/// "gave up after 3 attempts in 225ms" for one of 525 ms).
#[test]
fn without_a_reading_at_the_start_the_time_is_not_reported() {
    let settings = Settings::new(policy().build().unwrap());
    // Attempt 1 runs 300 ms and fails: the clock starts at its end. The sleep is
    // the curve's, measured from there; attempt 2 succeeds 50 ms after waking.
    let clock = Counting::new();
    let done = drive(&settings, &clock, vec![err(300), ok(50)]).unwrap();
    assert_eq!(done.attempts, 2);
    assert_eq!(done.elapsed, None);
    // Read at attempt 1's end, on waking, at attempt 2's end.
    assert_eq!(clock.reads(), 3);

    let clock = Counting::new();
    let error = drive(&settings, &clock, vec![err(300), err(20), err(5)]).unwrap_err();
    assert_eq!(error.attempts(), 3);
    assert_eq!(error.elapsed(), None);
    assert_eq!(
        error.to_string(),
        "retry.exhausted: gave up after 3 attempts: busy"
    );

    // The same timeline whatever attempt 1's run time: the delays do not move.
    let sleeps = |first: u64| {
        let clock = Counting::new();
        let mut driver = Driver::<u32, _, _, _>::new(&settings, clock.clone(), || false);
        let mut input = Input::Start;
        let mut seen = Vec::new();
        let mut ran = [first, 20, 5].into_iter();
        loop {
            input = match driver.poll(input) {
                Step::Attempt(_) => {
                    clock.advance(ran.next().unwrap());
                    Input::Ended(Ran::Returned(Err("busy")))
                }
                Step::Sleep(sleep) => {
                    seen.push(sleep.delay);
                    clock.advance(u64::try_from(sleep.delay.as_millis()).unwrap());
                    Input::Slept(Slept::Elapsed)
                }
                Step::Finished(_) => return seen,
            };
        }
    };
    assert_eq!(sleeps(0), sleeps(300));
}

/// An attempt that waits (an async one that returned pending) reads the clock
/// then only under a breaker, whose permit learns the attempt's start; the
/// call's time is not reported either way, as it would leave out the
/// attempt's first poll (before: 250 ms reported for the attempt after its
/// first wait).
#[test]
fn an_attempt_that_waits_reads_the_clock_only_for_a_breaker() {
    let settings = Settings::new(policy().build().unwrap());
    let waiting = |ran_ms, result| Attempt {
        ran_ms,
        waits: true,
        result,
    };
    let clock = Counting::new();
    let done = drive(&settings, &clock, vec![waiting(250, Ok(1))]).unwrap();
    assert_eq!((done.elapsed, clock.reads()), (None, 0));

    let clock = Counting::new();
    let error = drive(
        &settings,
        &clock,
        vec![waiting(300, Err("busy")), err(20), err(5)],
    )
    .unwrap_err();
    assert_eq!(error.elapsed(), None);

    let mut guarded = Settings::new(policy().build().unwrap());
    guarded.set_breaker(
        SharedBreaker::new(
            BreakerConfig::basic(BasicRule {
                failure_threshold: 3,
                open_duration: ms(1_000),
                success_threshold: 1,
            })
            .unwrap(),
        )
        .unwrap(),
    );
    if !cfg!(feature = "metrics") {
        // A breaker that times calls reads the clock from the start instead.
        let clock = Counting::new();
        let done = drive(&guarded, &clock, vec![waiting(250, Ok(1))]).unwrap();
        // Read at the first wait (the permit's start) and at the attempt's end.
        assert_eq!((done.elapsed, clock.reads()), (None, 2));
    }
}

#[test]
fn a_call_cancelled_before_its_first_attempt_reads_no_clock() {
    let settings = Settings::<&'static str>::new(policy().build().unwrap());
    let clock = Counting::new();
    let mut driver = Driver::<u32, _, _, _>::new(&settings, clock.clone(), || true);
    let Step::Finished(Err(error)) = driver.poll(Input::Start) else {
        panic!("a cancelled call ends at once")
    };
    assert!(error.is_cancelled());
    assert_eq!((error.attempts(), error.elapsed()), (0, None));
    assert_eq!(clock.reads(), 0);
}

#[test]
fn a_fixed_seed_gives_the_same_delays_whether_or_not_the_clock_was_read() {
    let jittered = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::exponential(ms(100), 2.0))
        .jitter(Jitter::Full)
        .build()
        .unwrap();
    let sleeps = |settings: &Settings<&'static str>| {
        let clock = Counting::new();
        let mut driver = Driver::<u32, _, _, _>::new(settings, clock.clone(), || false);
        let mut input = Input::Start;
        let mut seen = Vec::new();
        loop {
            input = match driver.poll(input) {
                Step::Attempt(_) => Input::Ended(Ran::Returned(Err("busy"))),
                Step::Sleep(sleep) => {
                    seen.push(sleep.delay);
                    clock.advance(u64::try_from(sleep.delay.as_millis()).unwrap());
                    Input::Slept(Slept::Elapsed)
                }
                Step::Finished(_) => return seen,
            };
        }
    };
    let mut lazy = Settings::new(jittered);
    lazy.set_seed(7);
    let mut timed = lazy.clone();
    timed.set_measure_elapsed();
    let delays = sleeps(&lazy);
    assert_eq!(delays.len(), 4);
    assert_eq!(delays, sleeps(&timed));
    let machine = retry_core::RetryMachine::new(&jittered, 7);
    let expected: Vec<Duration> = (1..=4).map(|r| jittered.delay(r, 7)).collect();
    assert_eq!(delays, expected, "{machine:?}");
}

/// A delay so long that the sleep's end passes the core's instant range
/// (`u64::MAX` ns from the call's origin): without a time budget the retry
/// sleeps whether the clock was read at the call's start (elapsed time asked
/// for) or only at the first failure; before, the first gave up with
/// `retry.budget` though no budget was set, and the second slept.
#[test]
fn a_delay_past_the_instant_range_gets_the_same_answer_whenever_the_clock_started() {
    let top = Duration::from_nanos(u64::MAX);
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(top))
        .max_delay(Duration::MAX)
        .jitter(Jitter::None)
        .resolution(retry_core::Resolution::Nanos)
        .build()
        .unwrap();
    let lazy = Settings::<&'static str>::new(policy);
    let mut measured = lazy.clone();
    measured.set_measure_elapsed();
    for (name, settings) in [("lazy", &lazy), ("measured", &measured)] {
        let clock = Counting::new();
        let mut driver = Driver::<u32, _, _, _>::new(settings, clock.clone(), || false);
        assert!(
            matches!(driver.poll(Input::Start), Step::Attempt(_)),
            "{name}"
        );
        clock.advance(5);
        match driver.poll(Input::Ended(Ran::Returned(Err("busy")))) {
            Step::Sleep(sleep) => assert_eq!(sleep.delay, top, "{name}"),
            Step::Finished(Err(e)) => panic!("{name}: gave up: {e}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}
