//! The presets' timelines: every attempt failing, and a server asking for 0 s, 3 s
//! and 10 min. Each is a snapshot; the documented numbers are asserted as well.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use retry_core::{
    Action, Backoff, ExitDecision, Failure, HintMode, Idempotency, Jitter, Method, Preset,
    PresetError, RetryHeaders, Scripted, Simulation, Timeline,
};

const SEED: u64 = 42;

fn hints_script() -> [Scripted; 3] {
    [
        Scripted::fail(Failure::retry_after(Duration::ZERO)),
        Scripted::fail(Failure::retry_after(Duration::from_secs(3))),
        Scripted::fail(Failure::retry_after(Duration::from_secs(600))),
    ]
}

fn snapshot(preset: &Preset, label: &str) {
    let seed = preset.seed().unwrap_or(SEED);
    insta::assert_snapshot!(
        format!("{label}_all_fail"),
        Timeline::new(&preset.policy(), seed, &[]).to_string()
    );
    insta::assert_snapshot!(
        format!("{label}_hints"),
        Timeline::new(&preset.policy(), seed, &hints_script()).to_string()
    );
}

fn sleeps(preset: &Preset, script: &[Scripted]) -> Vec<Duration> {
    Simulation::new(&preset.policy(), preset.seed().unwrap_or(SEED), script)
        .filter_map(|s| match s.action {
            Action::Sleep { delay, .. } => Some(delay),
            _ => None,
        })
        .collect()
}

#[test]
fn pipeline() {
    let p = Preset::pipeline("deploy");
    assert_eq!(p.policy().max_attempts(), 8);
    assert_eq!(
        p.policy().backoff(),
        Backoff::exponential(Duration::from_secs(1), 2.0)
    );
    assert_eq!(p.policy().max_delay(), Duration::from_secs(60));
    assert_eq!(p.policy().jitter(), Jitter::Add(0.1));
    assert_eq!(
        p.policy().hints(),
        HintMode::AtLeast {
            cap: Duration::from_secs(300)
        }
    );
    assert_eq!(p.exit_codes().decide(78), ExitDecision::Stop);
    assert_eq!(p.exit_codes().decide(1), ExitDecision::Retry);
    assert_eq!(p.exit_codes().decide(0), ExitDecision::Success);
    // Keyed on the step: the same step always jitters the same way.
    assert_eq!(p.seed(), Preset::pipeline("deploy").seed());
    assert_ne!(p.seed(), Preset::pipeline("test").seed());
    // add(0.1) on 1, 2, 4, ... 60 s: each sleep within [d, 1.1 d).
    let curve = [1, 2, 4, 8, 16, 32, 60];
    for (got, want) in sleeps(&p, &[]).iter().zip(curve) {
        let d = Duration::from_secs(want);
        assert!(*got >= d && *got < d.mul_f64(1.1), "{got:?} vs {d:?}");
    }
    // At least the hint, capped at 5 min.
    let hinted = sleeps(&p, &hints_script());
    assert!(hinted[1] >= Duration::from_secs(3));
    assert!(hinted[2] >= Duration::from_secs(300) && hinted[2] < Duration::from_secs(331));
    snapshot(&p, "pipeline");
}

#[test]
fn http_sdk() {
    let p = Preset::http_sdk();
    assert_eq!(p.policy().max_attempts(), 3);
    assert_eq!(p.policy().jitter(), Jitter::Subtract(0.25));
    assert_eq!(p.policy().budget(), Some(Duration::from_secs(30)));
    let http = p.http().unwrap();
    assert!(http.classify_timeout(Method::Post).is_retryable());
    // Hints used as they are: 0 s means no sleep at all, 10 min is beyond the
    // 30 s budget.
    let hinted = sleeps(&p, &hints_script());
    assert_eq!(hinted, [Duration::from_secs(3)]);
    snapshot(&p, "http_sdk");
}

#[test]
fn http_client() {
    let p = Preset::http_client();
    assert_eq!(p.policy().hints(), HintMode::OVERRIDE_DEFAULT);
    let http = p.http().unwrap();
    assert_eq!(http.idempotency(), Idempotency::Auto);
    assert!(http.classify_timeout(Method::Get).is_retryable());
    assert!(!http.classify_timeout(Method::Post).is_retryable());
    let busy = http
        .classify_status(
            429,
            RetryHeaders {
                retry_after: Some(b"3"),
                ..RetryHeaders::default()
            },
            0,
        )
        .unwrap();
    assert!(busy.is_retryable());
    // 0 s is floored at 100 ms; 3 s as is; the third attempt is the last.
    assert_eq!(
        sleeps(&p, &hints_script()),
        [Duration::from_millis(100), Duration::from_secs(3)]
    );
    snapshot(&p, "http_client");
}

#[test]
fn ts_package() {
    let p = Preset::ts_package(
        5,
        Backoff::exponential(Duration::from_millis(128), 2.0),
        Jitter::Decorrelated,
        Duration::from_millis(50),
        Duration::from_secs(30),
    )
    .unwrap();
    for d in sleeps(&p, &[]) {
        assert!(d >= Duration::from_millis(50) && d <= Duration::from_secs(30));
    }
    let err = Preset::ts_package(
        5,
        Backoff::None,
        Jitter::Spread(0.1),
        Duration::ZERO,
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert_eq!(err, PresetError::Jitter("spread"));
    assert!(Preset::ts_package(
        5,
        Backoff::None,
        Jitter::None,
        Duration::from_secs(2),
        Duration::from_secs(1)
    )
    .is_err());
    snapshot(&p, "ts_package");
}

#[test]
fn streaming() {
    let p = Preset::streaming();
    assert_eq!(p.policy().max_attempts(), 1);
    assert!(sleeps(&p, &[]).is_empty(), "no retry unless asked");
    let codes = p.error_codes().unwrap();
    for code in ["TRANSIENT", "TIMEOUT", "RATE_LIMIT"] {
        assert!(codes.contains(code));
    }
    assert!(!codes.contains("INVALID_ARGUMENT"));
    snapshot(&p, "streaming");
    let four = Preset::streaming_with_attempts(4);
    for (got, want) in sleeps(&four, &[]).iter().zip([100u64, 200, 400]) {
        let d = Duration::from_millis(want);
        assert!(*got >= d.mul_f64(0.9) && *got <= d.mul_f64(1.1), "{got:?}");
    }
    snapshot(&four, "streaming_4_attempts");
}

#[test]
fn recommended() {
    let p = Preset::recommended();
    assert_eq!(p.policy().max_attempts(), 4);
    assert!(p.policy().caps_attempt_to_budget());
    snapshot(&p, "recommended");
}
