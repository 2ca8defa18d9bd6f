//! Policy validation: every invalid value is a typed error naming its field.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{Backoff, HintMode, Jitter, PolicyError, RetryPolicy};

#[test]
fn every_invalid_value_names_its_field() {
    let b = RetryPolicy::builder;
    let cases: Vec<(Result<RetryPolicy, PolicyError>, &str, &str)> = vec![
        (
            b().max_attempts(0).build(),
            "max_attempts",
            "policy.zero_attempts",
        ),
        (
            b().max_attempts(3).max_retries(2).build(),
            "max_retries",
            "policy.both_attempt_counts",
        ),
        (
            b().backoff(Backoff::exponential(Duration::from_secs(1), f64::NAN))
                .build(),
            "factor",
            "policy.invalid_factor",
        ),
        (
            b().backoff(Backoff::exponential(Duration::from_secs(1), -2.0))
                .build(),
            "factor",
            "policy.invalid_factor",
        ),
        (
            b().backoff(Backoff::exponential(Duration::from_secs(1), 0.99))
                .build(),
            "factor",
            "policy.invalid_factor",
        ),
        (
            b().backoff(Backoff::exponential(Duration::from_secs(1), f64::INFINITY))
                .build(),
            "factor",
            "policy.invalid_factor",
        ),
        (
            b().jitter(Jitter::Subtract(-0.1)).build(),
            "jitter",
            "policy.invalid_jitter_fraction",
        ),
        (
            b().jitter(Jitter::Add(1.5)).build(),
            "jitter",
            "policy.invalid_jitter_fraction",
        ),
        (
            b().jitter(Jitter::Spread(f64::NAN)).build(),
            "jitter",
            "policy.invalid_jitter_fraction",
        ),
        (
            b().min_delay(Duration::from_secs(2))
                .max_delay(Duration::from_secs(1))
                .build(),
            "min_delay",
            "policy.min_above_max",
        ),
        (
            b().hints(HintMode::Override {
                min: Duration::from_secs(2),
                max: Duration::from_secs(1),
            })
            .build(),
            "retry_after_min",
            "policy.hint_min_above_max",
        ),
        (
            b().budget(Duration::ZERO).build(),
            "budget",
            "policy.zero_duration",
        ),
        (
            b().attempt_timeout(Duration::ZERO).build(),
            "attempt_timeout",
            "policy.zero_duration",
        ),
    ];
    for (result, field, code) in cases {
        let err = result.expect_err(field);
        assert_eq!(err.field(), field, "{err}");
        assert_eq!(err.code(), code, "{err}");
        assert!(
            err.to_string().contains(field.split('.').next().unwrap()),
            "the message names the field: {err}"
        );
    }
}

#[test]
fn messages_say_what_was_wrong() {
    let err = RetryPolicy::builder()
        .backoff(Backoff::exponential(Duration::from_secs(1), 0.5))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "factor: must be a finite number >= 1, got 0.5"
    );
    let err = RetryPolicy::builder()
        .jitter(Jitter::Spread(2.0))
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "jitter: spread jitter needs a fraction in [0, 1], got 2"
    );
}

#[test]
fn attempts_and_retries_count_as_spec_1_says() {
    let p = RetryPolicy::builder().max_retries(0).build().unwrap();
    assert_eq!((p.max_attempts(), p.max_retries()), (1, 0));
    let p = RetryPolicy::builder().max_retries(4).build().unwrap();
    assert_eq!((p.max_attempts(), p.max_retries()), (5, 4));
    let p = RetryPolicy::builder().max_attempts(1).build().unwrap();
    assert_eq!(p.max_retries(), 0);
    let p = RetryPolicy::builder()
        .max_retries(u32::MAX)
        .build()
        .unwrap();
    assert_eq!(p.max_attempts(), u32::MAX);
}

#[test]
fn defaults_are_documented_values() {
    let p = RetryPolicy::default();
    assert_eq!(p.max_attempts(), 5);
    assert_eq!(
        p.backoff(),
        Backoff::exponential(Duration::from_secs(1), 2.0)
    );
    assert_eq!(p.max_delay(), Duration::from_secs(60));
    assert_eq!(p.jitter(), Jitter::Full);
    assert_eq!(p.hints(), HintMode::OVERRIDE_DEFAULT);
    assert_eq!(p.budget(), None);
    assert!(p.retries_timeouts());
    assert_eq!(RetryPolicy::builder().build(), Ok(p));
}

#[test]
fn a_derived_policy_keeps_the_rest() {
    let base = RetryPolicy::builder()
        .max_attempts(9)
        .budget(Duration::from_secs(30))
        .build()
        .unwrap();
    let derived = base.to_builder().jitter(Jitter::None).build().unwrap();
    assert_eq!(derived.max_attempts(), 9);
    assert_eq!(derived.budget(), Some(Duration::from_secs(30)));
    assert_eq!(derived.jitter(), Jitter::None);
    assert_eq!(base.jitter(), Jitter::Full, "the base is untouched");
}

#[test]
fn names_are_the_config_words() {
    assert_eq!(HintMode::OVERRIDE_DEFAULT.name(), "override");
    assert_eq!(HintMode::AT_LEAST_DEFAULT.name(), "at-least");
    assert_eq!(HintMode::Ignore.name(), "ignore");
    let names: Vec<&str> = [
        Backoff::None,
        Backoff::constant(Duration::ZERO),
        Backoff::linear(Duration::ZERO),
        Backoff::exponential(Duration::ZERO, 2.0),
        Backoff::fibonacci(Duration::ZERO),
    ]
    .iter()
    .map(Backoff::name)
    .collect();
    assert_eq!(
        names,
        ["none", "constant", "linear", "exponential", "fibonacci"]
    );
}

#[test]
fn an_at_least_hint_equal_to_the_curve_is_reported_as_the_curve() {
    use retry_core::{Action, Event, Failure, Instant, RetryMachine, SleepReason};
    let policy = RetryPolicy::builder()
        .backoff(Backoff::constant(Duration::from_secs(2)))
        .jitter(Jitter::None)
        .hints(HintMode::AT_LEAST_DEFAULT)
        .build()
        .unwrap();
    let reason_for = |hint: u64| {
        let mut m = RetryMachine::new(&policy, 1);
        let _ = m.poll(Event::Start, Instant::ORIGIN);
        match m.poll(
            Event::Failed(Failure::retry_after(Duration::from_secs(hint))),
            Instant::ORIGIN,
        ) {
            Action::Sleep { reason, delay, .. } => (reason, delay.as_secs()),
            other => panic!("{other}"),
        }
    };
    // The hint decides only when it is longer than the curve.
    assert_eq!(reason_for(1), (SleepReason::Curve, 2));
    assert_eq!(reason_for(2), (SleepReason::Curve, 2));
    assert_eq!(reason_for(3), (SleepReason::Hint, 3));
}

#[test]
fn delay_computes_each_retry_on_its_own() {
    let policy = RetryPolicy::builder()
        .backoff(Backoff::exponential(Duration::from_millis(250), 2.0))
        .max_delay(Duration::from_secs(3))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let delays: Vec<u128> = (1..=6).map(|r| policy.delay(r, 0).as_millis()).collect();
    assert_eq!(delays, [250, 500, 1000, 2000, 3000, 3000]);
    // With jitter, the same (seed, retry) gives the same delay, within bounds.
    let full = policy.to_builder().jitter(Jitter::Full).build().unwrap();
    assert_eq!(full.delay(4, 9), full.delay(4, 9));
    assert!(full.delay(4, 9) <= Duration::from_secs(2));
    assert!((0..50).any(|seed| full.delay(4, seed) != full.delay(4, 0)));
}

#[test]
fn millisecond_rounding_is_exact_at_the_far_end() {
    // Delays are computed in u64 nanoseconds: near its 584-year end a delay
    // rounds half up to a whole millisecond like any other, and one that would
    // round up past u64::MAX ns takes the last whole millisecond below it.
    let constant = |d: Duration| {
        RetryPolicy::builder()
            .backoff(Backoff::constant(d))
            .max_delay(Duration::MAX)
            .jitter(Jitter::None)
            .build()
            .unwrap()
    };
    let last_whole_ms = 18_446_744_073_709_000_000u64;
    for (nanos, expected) in [
        (u64::MAX, last_whole_ms),
        (last_whole_ms + 500_000, last_whole_ms),
        (last_whole_ms + 499_999, last_whole_ms),
        (last_whole_ms - 500_000, last_whole_ms),
        (last_whole_ms - 500_001, last_whole_ms - 1_000_000),
    ] {
        assert_eq!(
            constant(Duration::from_nanos(nanos)).delay(1, 0),
            Duration::from_nanos(expected),
            "{nanos} ns"
        );
    }
    // A constant delay past u64::MAX ns counts as u64::MAX ns.
    assert_eq!(
        constant(Duration::MAX).delay(1, 0),
        Duration::from_nanos(last_whole_ms)
    );
    let half = RetryPolicy::builder()
        .backoff(Backoff::constant(Duration::from_nanos(1_500_000)))
        .jitter(Jitter::None)
        .build()
        .unwrap();
    assert_eq!(half.delay(1, 0), Duration::from_millis(2));
    let below = half
        .to_builder()
        .backoff(Backoff::constant(Duration::from_nanos(1_499_999)))
        .build()
        .unwrap();
    assert_eq!(below.delay(1, 0), Duration::from_millis(1));
}

#[test]
fn unlimited_attempts_end_only_on_something_else() {
    use retry_core::{Action, Event, Failure, GiveUpReason, Instant, RetryMachine};
    let p = RetryPolicy::builder()
        .unlimited_attempts()
        .backoff(Backoff::constant(Duration::from_millis(10)))
        .jitter(Jitter::None)
        .budget(Duration::from_secs(60))
        .build()
        .unwrap();
    assert!(p.attempts_are_unlimited());
    assert_eq!(p.max_attempts(), RetryPolicy::UNLIMITED_ATTEMPTS);
    assert_eq!(p.to_string().split(',').next(), Some("unlimited attempts"));
    assert!(RetryPolicy::builder()
        .max_attempts(u32::MAX)
        .build()
        .unwrap()
        .attempts_are_unlimited());
    assert!(!RetryPolicy::default().attempts_are_unlimited());
    assert_eq!(
        RetryPolicy::builder()
            .unlimited_attempts()
            .max_retries(3)
            .build()
            .unwrap_err(),
        PolicyError::BothAttemptCounts
    );
    // Every failure is retried; the 60 s budget is what ends the call, after
    // 6 000 attempts 10 ms apart.
    let mut m = RetryMachine::new(&p, 1);
    let mut now = Instant::ORIGIN;
    let mut action = m.poll(Event::Start, now);
    loop {
        match action {
            Action::Attempt { .. } => action = m.poll(Event::Failed(Failure::retryable()), now),
            Action::Sleep { until, .. } => {
                now = until;
                action = m.poll(Event::Woke, now);
            }
            Action::GiveUp(g) => {
                assert_eq!(g.reason, GiveUpReason::Budget);
                assert_eq!(g.attempts, 6_000);
                break;
            }
            other => panic!("unexpected {other}"),
        }
    }
    // The same policy without a budget still retries past any small count.
    let endless = p.to_builder().budget(None).build().unwrap();
    let mut m = RetryMachine::new(&endless, 1);
    let mut now = Instant::ORIGIN;
    let mut action = m.poll(Event::Start, now);
    for _ in 0..20_000 {
        action = match action {
            Action::Attempt { .. } => m.poll(Event::Failed(Failure::retryable()), now),
            Action::Sleep { until, .. } => {
                now = until;
                m.poll(Event::Woke, now)
            }
            other => panic!("an unlimited policy stopped: {other}"),
        };
    }
    assert!(m.attempts() >= 10_000);
}

/// `delay_interval` is the interval every curve delay is drawn from: the
/// policy's delays and the machine's curve sleeps lie in it, whatever the seed
/// (a program shows it next to the delay drawn).
#[test]
fn every_curve_delay_lies_in_its_delay_interval() {
    use retry_core::{Action, Event, Failure, Instant, Resolution, RetryMachine, SleepReason};
    let ms = Duration::from_millis;
    let kinds = [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Subtract(0.25),
        Jitter::Add(0.1),
        Jitter::Spread(0.5),
    ];
    let curves = [
        Backoff::exponential(ms(100), 2.0),
        Backoff::constant(ms(5)),
        Backoff::linear(Duration::from_micros(1500)),
        Backoff::fibonacci(ms(3)),
        Backoff::None,
    ];
    for jitter in kinds {
        for backoff in curves {
            for (min, max) in [(Duration::ZERO, ms(60_000)), (ms(40), ms(700))] {
                for resolution in [Resolution::Millis, Resolution::Nanos] {
                    let policy = RetryPolicy::builder()
                        .max_attempts(10)
                        .backoff(backoff)
                        .jitter(jitter)
                        .min_delay(min)
                        .max_delay(max)
                        .resolution(resolution)
                        .build()
                        .unwrap();
                    let within = |retry: u32, d: Duration| {
                        let (lo, hi) = policy.delay_interval(retry).unwrap();
                        assert!(lo <= hi, "{policy}: retry {retry}");
                        let whole_ms_inside = resolution == Resolution::Nanos
                            || lo.as_nanos().div_ceil(1_000_000) <= hi.as_nanos() / 1_000_000;
                        if whole_ms_inside {
                            assert!(
                                lo <= d && d <= hi,
                                "{policy}: retry {retry}: {d:?} not in [{lo:?}, {hi:?}]"
                            );
                        } else {
                            // No whole millisecond inside: the nearest one.
                            assert!(
                                d.abs_diff(lo) <= ms(1) && d.abs_diff(hi) <= ms(1),
                                "{policy}: retry {retry}: {d:?} vs [{lo:?}, {hi:?}]"
                            );
                        }
                    };
                    for seed in 0..64 {
                        for retry in 1..10 {
                            within(retry, policy.delay(retry, seed));
                        }
                        let mut m = RetryMachine::new(&policy, seed);
                        let mut now = Instant::ORIGIN;
                        let mut action = m.poll(Event::Start, now);
                        loop {
                            action = match action {
                                Action::Attempt { number, .. } => {
                                    let next = m.poll(Event::Failed(Failure::retryable()), now);
                                    if let Action::Sleep { delay, reason, .. } = next {
                                        assert_eq!(reason, SleepReason::Curve);
                                        within(number, delay);
                                    }
                                    next
                                }
                                Action::Sleep { until, .. } => {
                                    now = until;
                                    m.poll(Event::Woke, now)
                                }
                                _ => break,
                            };
                        }
                    }
                }
            }
        }
    }
    // The interval of each kind, on a 2 s delay.
    let two = Duration::from_secs(2);
    let of = |jitter: Jitter| {
        RetryPolicy::builder()
            .backoff(Backoff::constant(two))
            .jitter(jitter)
            .build()
            .unwrap()
            .delay_interval(1)
    };
    assert_eq!(of(Jitter::None), Some((two, two)));
    assert_eq!(of(Jitter::Full), Some((Duration::ZERO, two)));
    assert_eq!(of(Jitter::Equal), Some((two / 2, two)));
    assert_eq!(of(Jitter::Subtract(0.25)), Some((ms(1500), two)));
    assert_eq!(of(Jitter::Decorrelated), None);
}

/// A cap below the curve's first delay would flatten every delay to the cap:
/// the builder refuses it with an error naming both values, for every curve
/// that has a first delay (decorrelated jitter draws from it too); a cap
/// equal to it is a valid constant curve, and a curve without delays has
/// nothing to check.
#[test]
fn a_cap_below_the_first_delay_is_refused_naming_both() {
    let s = Duration::from_secs;
    for backoff in [
        Backoff::constant(s(3)),
        Backoff::linear_by(s(3), s(1)),
        Backoff::exponential(s(3), 2.0),
        Backoff::fibonacci(s(3)),
    ] {
        for jitter in [Jitter::None, Jitter::Full, Jitter::Decorrelated] {
            let err = RetryPolicy::builder()
                .backoff(backoff)
                .jitter(jitter)
                .max_delay(s(2))
                .build()
                .unwrap_err();
            assert_eq!(
                err,
                PolicyError::MaxBelowInitial {
                    max: s(2),
                    initial: s(3)
                },
                "{backoff}"
            );
            assert_eq!(
                (err.field(), err.code()),
                ("max_delay", "policy.max_below_initial")
            );
            assert_eq!(
                err.to_string(),
                "max_delay: 2s is below the curve's initial delay 3s"
            );
            let at_cap = RetryPolicy::builder()
                .backoff(backoff)
                .jitter(jitter)
                .max_delay(s(3))
                .build()
                .unwrap();
            assert_eq!(at_cap.capped_delay(1), s(3));
        }
    }
    // No curve, no first delay: any cap.
    let none = RetryPolicy::builder()
        .backoff(Backoff::None)
        .max_delay(Duration::ZERO)
        .build()
        .unwrap();
    assert_eq!(none.capped_delay(1), Duration::ZERO);
    // The default cap (60 s) under a longer constant delay is refused too.
    let err = RetryPolicy::builder()
        .backoff(Backoff::constant(s(120)))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "max_delay");
}
