//! Policies as configuration: TOML and JSON examples, field-named errors, round
//! trips, overrides and layering, durations.

#![cfg(feature = "serde")]
// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck};
use retry_core::duration_text::{parse_duration, DurationParseError, DurationText};
use retry_core::{
    Backoff, ConfigError, Curve, HintMode, Jitter, PolicyError, PolicyOverride, Resolution,
    RetryAfter, RetryPolicy,
};

const MS: fn(u64) -> Duration = Duration::from_millis;
const S: fn(u64) -> Duration = Duration::from_secs;

fn toml_policy(text: &str) -> RetryPolicy {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

fn json_policy(text: &str) -> RetryPolicy {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

fn toml_err(text: &str) -> String {
    match toml::from_str::<RetryPolicy>(text) {
        Ok(p) => panic!("accepted {text:?} as {p:?}"),
        Err(e) => e.to_string(),
    }
}

fn json_err(text: &str) -> String {
    match serde_json::from_str::<RetryPolicy>(text) {
        Ok(p) => panic!("accepted {text:?} as {p:?}"),
        Err(e) => e.to_string(),
    }
}

// ---------- every field, in both formats ----------

const TOML_EXPONENTIAL: &str = r#"
max_attempts = 8
backoff = "exponential"
initial_delay = "250ms"
factor = 1.5
max_delay = "1m30s"
min_delay = "50ms"
jitter = "full"
resolution = "ms"
retry_after = "override"
retry_after_min = "100ms"
retry_after_max = "45s"
respect_retry_after = true
budget = "30s"
attempt_timeout = 5000
cap_attempt_to_budget = true
retry_timeouts = false
"#;

const JSON_EXPONENTIAL: &str = r#"{
  "max_attempts": 8,
  "backoff": "exponential",
  "initial_delay": "250ms",
  "factor": 1.5,
  "max_delay": "1m30s",
  "min_delay": "50ms",
  "jitter": "full",
  "resolution": "ms",
  "retry_after": "override",
  "retry_after_min": "100ms",
  "retry_after_max": "45s",
  "respect_retry_after": true,
  "budget": "30s",
  "attempt_timeout": 5000,
  "cap_attempt_to_budget": true,
  "retry_timeouts": false
}"#;

fn exponential_expected() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(8)
        .backoff(Backoff::exponential(MS(250), 1.5))
        .max_delay(S(90))
        .min_delay(MS(50))
        .jitter(Jitter::Full)
        .resolution(Resolution::Millis)
        .hints(HintMode::Override {
            min: MS(100),
            max: S(45),
        })
        .budget(S(30))
        .attempt_timeout(S(5))
        .cap_attempt_to_budget(true)
        .retry_timeouts(false)
        .build()
        .unwrap()
}

const TOML_LINEAR: &str = r#"
max_retries = 4
backoff = "linear"
initial_delay = "1.5s"
increment = "500ms"
max_delay = "2h"
min_delay = 0
jitter = "subtract:0.25"
resolution = "ns"
retry_after = "at-least"
retry_after_cap = "5m"
budget = "none"
attempt_timeout = "250us"
"#;

const JSON_LINEAR: &str = r#"{
  "max_retries": 4,
  "backoff": "linear",
  "initial_delay": "1.5s",
  "increment": "500ms",
  "max_delay": "2h",
  "min_delay": 0,
  "jitter": "subtract:0.25",
  "resolution": "ns",
  "retry_after": "at-least",
  "retry_after_cap": "5m",
  "budget": "none",
  "attempt_timeout": "250µs"
}"#;

fn linear_expected() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::linear_by(MS(1500), MS(500)))
        .max_delay(S(7200))
        .min_delay(Duration::ZERO)
        .jitter(Jitter::Subtract(0.25))
        .resolution(Resolution::Nanos)
        .hints(HintMode::AtLeast { cap: S(300) })
        .attempt_timeout(Duration::from_micros(250))
        .build()
        .unwrap()
}

#[test]
fn toml_every_field() {
    assert_eq!(toml_policy(TOML_EXPONENTIAL), exponential_expected());
    assert_eq!(toml_policy(TOML_LINEAR), linear_expected());
}

#[test]
fn json_every_field() {
    assert_eq!(json_policy(JSON_EXPONENTIAL), exponential_expected());
    assert_eq!(json_policy(JSON_LINEAR), linear_expected());
}

#[test]
fn empty_config_is_the_default() {
    assert_eq!(toml_policy(""), RetryPolicy::default());
    assert_eq!(json_policy("{}"), RetryPolicy::default());
}

#[test]
fn every_curve_and_jitter_name() {
    let curves = [
        ("none", Backoff::None),
        ("constant", Backoff::constant(S(1))),
        ("linear", Backoff::linear(S(1))),
        ("exponential", Backoff::exponential(S(1), 2.0)),
        ("fibonacci", Backoff::fibonacci(S(1))),
    ];
    for (name, backoff) in curves {
        let p = toml_policy(&format!("backoff = {name:?}"));
        assert_eq!(p.backoff(), backoff, "{name}");
    }
    assert_eq!(
        toml_policy("backoff = \"constant\"\ninitial_delay = \"2s\"").backoff(),
        Backoff::constant(S(2))
    );
    assert_eq!(
        toml_policy("backoff = \"linear\"\ninitial_delay = \"2s\"").backoff(),
        Backoff::linear(S(2)),
        "the increment defaults to the initial delay"
    );
    let jitters = [
        ("none", Jitter::None),
        ("full", Jitter::Full),
        ("equal", Jitter::Equal),
        ("decorrelated", Jitter::Decorrelated),
        ("subtract:0.25", Jitter::Subtract(0.25)),
        ("add:0.1", Jitter::Add(0.1)),
        ("spread:1", Jitter::Spread(1.0)),
        ("spread:0", Jitter::Spread(0.0)),
    ];
    for (name, jitter) in jitters {
        assert_eq!(toml_policy(&format!("jitter = {name:?}")).jitter(), jitter);
        assert_eq!(
            json_policy(&format!("{{\"jitter\": {name:?}}}")).jitter(),
            jitter
        );
    }
}

#[test]
fn hint_modes() {
    assert_eq!(
        toml_policy("respect_retry_after = false").hints(),
        HintMode::Ignore
    );
    assert_eq!(
        toml_policy("retry_after = \"ignore\"").hints(),
        HintMode::Ignore
    );
    assert_eq!(
        toml_policy("retry_after = \"at-least\"").hints(),
        HintMode::AT_LEAST_DEFAULT
    );
    assert_eq!(
        json_policy(r#"{"retry_after_max": "2m"}"#).hints(),
        HintMode::Override {
            min: MS(100),
            max: S(120)
        }
    );
}

// ---------- errors name their field ----------

/// (TOML, JSON or "" when JSON cannot say it, text the message must contain)
const BAD: &[(&str, &str, &str)] = &[
    ("retries = 3", r#"{"retries": 3}"#, "unknown field `retries`"),
    (
        "max_attempts = 3\nmax_retries = 2",
        r#"{"max_attempts": 3, "max_retries": 2}"#,
        "max_attempts, max_retries",
    ),
    ("max_attempts = 0", r#"{"max_attempts": 0}"#, "max_attempts"),
    ("max_attempts = -1", r#"{"max_attempts": -1}"#, "max_attempts: must not be negative"),
    ("max_attempts = 2.5", r#"{"max_attempts": 2.5}"#, "max_attempts"),
    ("max_retries = 5000000000", r#"{"max_retries": 5000000000}"#, "max_retries"),
    ("factor = \"nan\"", r#"{"factor": "nan"}"#, "factor"),
    ("factor = nan", "", "factor"),
    ("factor = inf", "", "factor"),
    ("factor = 0.5", r#"{"factor": 0.5}"#, "factor"),
    ("factor = -2", r#"{"factor": -2}"#, "factor"),
    (
        "backoff = \"linear\"\nfactor = 3",
        r#"{"backoff": "linear", "factor": 3}"#,
        "factor: only applies with backoff = \"exponential\"",
    ),
    (
        "increment = \"1s\"",
        r#"{"increment": "1s"}"#,
        "increment: only applies with backoff = \"linear\"",
    ),
    (
        "backoff = \"none\"\ninitial_delay = \"1s\"",
        r#"{"backoff": "none", "initial_delay": "1s"}"#,
        "initial_delay",
    ),
    (
        "backoff = \"cubic\"",
        r#"{"backoff": "cubic"}"#,
        "backoff: unknown curve `cubic` (expected one of none, constant, linear, exponential, fibonacci)",
    ),
    ("jitter = \"subtract:1.5\"", r#"{"jitter": "subtract:1.5"}"#, "jitter"),
    ("jitter = \"add:-0.1\"", r#"{"jitter": "add:-0.1"}"#, "jitter"),
    ("jitter = \"spread:nan\"", r#"{"jitter": "spread:nan"}"#, "jitter"),
    ("jitter = \"spread\"", r#"{"jitter": "spread"}"#, "jitter: `spread` needs a fraction"),
    ("jitter = \"full:0.5\"", r#"{"jitter": "full:0.5"}"#, "jitter: `full` takes no fraction"),
    ("jitter = \"add:lots\"", r#"{"jitter": "add:lots"}"#, "jitter: bad fraction"),
    ("jitter = \"wobbly\"", r#"{"jitter": "wobbly"}"#, "jitter: unknown kind `wobbly`"),
    ("resolution = \"us\"", r#"{"resolution": "us"}"#, "resolution"),
    ("retry_after = \"sometimes\"", r#"{"retry_after": "sometimes"}"#, "retry_after"),
    (
        "min_delay = \"2m\"\nmax_delay = \"1m\"",
        r#"{"min_delay": "2m", "max_delay": "1m"}"#,
        "min_delay",
    ),
    (
        "retry_after_min = \"2m\"",
        r#"{"retry_after_min": "2m"}"#,
        "retry_after_min",
    ),
    ("retry_after_cap = \"1m\"", r#"{"retry_after_cap": "1m"}"#, "retry_after_cap"),
    (
        "retry_after = \"at-least\"\nretry_after_max = \"1m\"",
        r#"{"retry_after": "at-least", "retry_after_max": "1m"}"#,
        "retry_after_max",
    ),
    (
        "respect_retry_after = false\nretry_after = \"at-least\"",
        r#"{"respect_retry_after": false, "retry_after": "at-least"}"#,
        "respect_retry_after",
    ),
    (
        "respect_retry_after = true\nretry_after = \"ignore\"",
        r#"{"respect_retry_after": true, "retry_after": "ignore"}"#,
        "respect_retry_after",
    ),
    ("attempt_timeout = \"0s\"", r#"{"attempt_timeout": "0s"}"#, "attempt_timeout: must be greater than zero"),
    ("attempt_timeout = 0", r#"{"attempt_timeout": 0}"#, "attempt_timeout"),
    ("budget = \"0ms\"", r#"{"budget": "0ms"}"#, "budget: must be greater than zero"),
    ("budget = true", r#"{"budget": true}"#, "budget"),
    ("initial_delay = \"1m30\"", r#"{"initial_delay": "1m30"}"#, "initial_delay: invalid duration"),
    ("max_delay = -5", r#"{"max_delay": -5}"#, "max_delay: a duration cannot be negative"),
    ("max_delay = \"-5s\"", r#"{"max_delay": "-5s"}"#, "max_delay"),
    ("max_delay = 1.5", r#"{"max_delay": 1.5}"#, "max_delay"),
    ("min_delay = \"5 s\"", r#"{"min_delay": "5 s"}"#, "min_delay"),
    (
        "retry_after_max = \"99999999999999999999s\"",
        r#"{"retry_after_max": "99999999999999999999s"}"#,
        "retry_after_max",
    ),
    ("retry_timeouts = \"yes\"", r#"{"retry_timeouts": "yes"}"#, "retry_timeouts"),
    ("cap_attempt_to_budget = 1", r#"{"cap_attempt_to_budget": 1}"#, "cap_attempt_to_budget"),
    ("", r#"{"budget": null}"#, "budget"),
    ("", r#"{"max_attempts": 2, "max_attempts": 3}"#, "duplicate field `max_attempts`"),
];

#[test]
fn bad_values_name_their_field() {
    for (toml_text, json_text, expected) in BAD {
        if !toml_text.is_empty() {
            let msg = toml_err(toml_text);
            assert!(msg.contains(expected), "TOML {toml_text:?}: {msg}");
        }
        if !json_text.is_empty() {
            let msg = json_err(json_text);
            assert!(msg.contains(expected), "JSON {json_text:?}: {msg}");
        }
    }
}

#[test]
fn exact_messages() {
    assert!(json_err(r#"{"backoff": "cubic"}"#).starts_with(
        "backoff: unknown curve `cubic` (expected one of none, constant, linear, exponential, fibonacci)"
    ));
    assert!(json_err(r#"{"jitter": "subtract:1.5"}"#)
        .starts_with("jitter: subtract jitter needs a fraction in [0, 1], got 1.5"));
    assert!(json_err(r#"{"max_attempts": 3, "max_retries": 2}"#)
        .starts_with("max_attempts, max_retries: give one or the other, not both"));
    assert!(json_err(r#"{"attempt_timeout": 0}"#)
        .starts_with("attempt_timeout: must be greater than zero"));
}

/// A cap below the curve's first delay, in a config or an override over a
/// base, is refused naming both values (not flattened in silence).
#[test]
fn a_cap_below_the_first_delay_is_a_config_error() {
    let msg = "max_delay: 2s is below the curve's initial delay 3s";
    assert!(
        toml_err("initial_delay = \"3s\"\nmax_delay = \"2s\"").starts_with(msg),
        "{}",
        toml_err("initial_delay = \"3s\"\nmax_delay = \"2s\"")
    );
    assert!(
        json_err(r#"{"backoff": "constant", "initial_delay": "3s", "max_delay": 2000}"#)
            .starts_with(msg)
    );
    // The default cap, 60 s, under a two-minute constant delay.
    assert!(
        json_err(r#"{"backoff": "constant", "initial_delay": "2m"}"#)
            .starts_with("max_delay: 60s is below the curve's initial delay 120s")
    );
    // An override that lowers the cap under the base's first delay.
    let base = RetryPolicy::builder()
        .backoff(Backoff::exponential(S(3), 2.0))
        .build()
        .unwrap();
    let err = toml_override("max_delay = \"2s\"")
        .apply(&base)
        .unwrap_err();
    assert_eq!(
        err,
        ConfigError::Policy(PolicyError::MaxBelowInitial {
            max: S(2),
            initial: S(3)
        })
    );
    assert_eq!(
        (err.field(), err.code()),
        ("max_delay", "policy.max_below_initial")
    );
}

// ---------- durations ----------

#[test]
fn durations_in_configs() {
    assert_eq!(toml_policy("max_delay = \"1m30s\"").max_delay(), S(90));
    assert_eq!(toml_policy("max_delay = 1500").max_delay(), MS(1500));
    assert_eq!(toml_policy("max_delay = \"1500\"").max_delay(), MS(1500));
    assert_eq!(toml_policy("max_delay = \"1.5s\"").max_delay(), MS(1500));
    assert_eq!(json_policy(r#"{"max_delay": "1m30s"}"#).max_delay(), S(90));
    assert_eq!(json_policy(r#"{"max_delay": 1500}"#).max_delay(), MS(1500));
    assert_eq!(
        json_policy(r#"{"max_delay": "1.5s"}"#).max_delay(),
        MS(1500)
    );
    assert_eq!(json_policy(r#"{"max_delay": " 2h "}"#).max_delay(), S(7200));
}

#[test]
fn duration_grammar() {
    let ok = |s: &str| parse_duration(s).unwrap();
    assert_eq!(ok("1m30s"), S(90));
    assert_eq!(ok("1500"), MS(1500));
    assert_eq!(ok("1.5s"), MS(1500));
    assert_eq!(ok("500ms"), MS(500));
    assert_eq!(ok("2h"), S(7200));
    assert_eq!(ok("1d"), S(86_400));
    assert_eq!(ok("250us"), Duration::from_micros(250));
    assert_eq!(ok("250µs"), Duration::from_micros(250));
    assert_eq!(ok("10ns"), Duration::from_nanos(10));
    assert_eq!(ok("1d2h3m4s5ms6us7ns"), Duration::new(93_784, 5_006_007));
    assert_eq!(ok("0.001ms"), Duration::from_micros(1));
    assert_eq!(ok("1.25d"), S(108_000));
    let err = |s: &str| parse_duration(s).unwrap_err();
    assert_eq!(err("   "), DurationParseError::Empty);
    assert_eq!(err("1m30"), DurationParseError::MissingUnit);
    assert_eq!(err("5w"), DurationParseError::UnknownUnit);
    assert_eq!(err("1s1m"), DurationParseError::OutOfOrder);
    assert_eq!(err("1.5m3s"), DurationParseError::FractionNotLast);
    assert_eq!(err("-1s"), DurationParseError::Signed);
    assert_eq!(err("0.5ns"), DurationParseError::TooPrecise);
    assert_eq!(err("213503982334601d8h"), DurationParseError::Overflow);
    assert_eq!(err("99999999999999999999999"), DurationParseError::Overflow);
    assert_eq!(
        DurationParseError::Overflow.to_string(),
        "larger than the longest duration (Duration::MAX)"
    );
    assert_eq!(DurationText(S(90)).to_string(), "1m30s");
    assert_eq!(DurationText(MS(1500)).to_string(), "1s500ms");
    assert_eq!(DurationText(Duration::ZERO).to_string(), "0s");
}

fn any_duration(g: &mut Gen) -> Duration {
    match u8::arbitrary(g) % 6 {
        0 => MS(u64::arbitrary(g) % 1_000_000),
        1 => S(u64::arbitrary(g) % 10_000_000),
        2 => Duration::new(u64::arbitrary(g), u32::arbitrary(g) % 1_000_000_000),
        3 => Duration::from_nanos(u64::arbitrary(g)),
        4 => Duration::from_micros(u64::arbitrary(g) % 1_000_000_000),
        _ => *g
            .choose(&[
                Duration::ZERO,
                Duration::MAX,
                Duration::from_nanos(1),
                S(86_400),
                Duration::new(u64::MAX, 0),
            ])
            .unwrap(),
    }
}

#[derive(Clone, Debug)]
struct AnyDuration(Duration);

impl Arbitrary for AnyDuration {
    fn arbitrary(g: &mut Gen) -> Self {
        AnyDuration(any_duration(g))
    }
}

#[test]
fn duration_text_round_trips() {
    fn prop(d: AnyDuration) -> bool {
        let text = DurationText(d.0).to_string();
        assert_eq!(parse_duration(&text), Ok(d.0), "{text}");
        true
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(AnyDuration) -> bool);
}

// ---------- random valid policies ----------

fn any_fraction(g: &mut Gen) -> f64 {
    match u8::arbitrary(g) % 4 {
        0 => *g
            .choose(&[0.0, 1.0, 0.25, 0.1, 1e-300, f64::MIN_POSITIVE])
            .unwrap(),
        _ => f64::from(u32::arbitrary(g)) / f64::from(u32::MAX),
    }
}

fn any_factor(g: &mut Gen) -> f64 {
    match u8::arbitrary(g) % 4 {
        0 => *g
            .choose(&[1.0, 2.0, 1.5, 1.000_000_000_000_000_2, 1e300, f64::MAX])
            .unwrap(),
        _ => 1.0 + f64::from(u32::arbitrary(g)) / f64::from(u16::arbitrary(g).max(1)),
    }
}

fn ordered(g: &mut Gen) -> (Duration, Duration) {
    let (a, b) = (any_duration(g), any_duration(g));
    (a.min(b), a.max(b))
}

fn positive(g: &mut Gen) -> Option<Duration> {
    let d = any_duration(g);
    (bool::arbitrary(g) && !d.is_zero()).then_some(d)
}

fn any_policy(g: &mut Gen) -> RetryPolicy {
    let initial = any_duration(g);
    let backoff = match u8::arbitrary(g) % 5 {
        0 => Backoff::None,
        1 => Backoff::constant(initial),
        2 => Backoff::linear_by(initial, any_duration(g)),
        3 => Backoff::exponential(initial, any_factor(g)),
        _ => Backoff::fibonacci(initial),
    };
    let jitter = match u8::arbitrary(g) % 7 {
        0 => Jitter::None,
        1 => Jitter::Full,
        2 => Jitter::Equal,
        3 => Jitter::Decorrelated,
        4 => Jitter::Subtract(any_fraction(g)),
        5 => Jitter::Add(any_fraction(g)),
        _ => Jitter::Spread(any_fraction(g)),
    };
    let hints = match u8::arbitrary(g) % 3 {
        0 => {
            let (min, max) = ordered(g);
            HintMode::Override { min, max }
        }
        1 => HintMode::AtLeast {
            cap: any_duration(g),
        },
        _ => HintMode::Ignore,
    };
    let (min_delay, max_delay) = ordered(g);
    let builder = RetryPolicy::builder()
        .backoff(backoff)
        .jitter(jitter)
        .hints(hints)
        .min_delay(min_delay)
        // A valid cap is at least the curve's first delay.
        .max_delay(max_delay.max(backoff.initial()))
        .resolution(if bool::arbitrary(g) {
            Resolution::Millis
        } else {
            Resolution::Nanos
        })
        .budget(positive(g))
        .attempt_timeout(positive(g))
        .cap_attempt_to_budget(bool::arbitrary(g))
        .retry_timeouts(bool::arbitrary(g))
        .use_retry_budget(bool::arbitrary(g))
        .idempotent(bool::arbitrary(g))
        .on_circuit_open(if bool::arbitrary(g) {
            retry_core::CircuitOpen::Wait
        } else {
            retry_core::CircuitOpen::GiveUp
        });
    let builder = if bool::arbitrary(g) {
        builder.max_attempts(u32::arbitrary(g).max(1))
    } else {
        builder.max_retries(u32::arbitrary(g))
    };
    builder.build().unwrap()
}

#[derive(Clone, Debug)]
struct AnyPolicy(RetryPolicy);

impl Arbitrary for AnyPolicy {
    fn arbitrary(g: &mut Gen) -> Self {
        AnyPolicy(any_policy(g))
    }
}

#[test]
fn toml_round_trips_every_valid_policy() {
    fn prop(p: AnyPolicy) -> bool {
        let text = toml::to_string(&p.0).unwrap();
        let back: RetryPolicy = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
        assert_eq!(back, p.0, "{text}");
        true
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(AnyPolicy) -> bool);
}

#[test]
fn json_round_trips_every_valid_policy() {
    fn prop(p: AnyPolicy) -> bool {
        let text = serde_json::to_string(&p.0).unwrap();
        let back: RetryPolicy =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}\n{e}"));
        assert_eq!(back, p.0, "{text}");
        true
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(AnyPolicy) -> bool);
}

#[test]
fn a_written_policy_replaces_any_base() {
    fn prop(p: AnyPolicy, base: AnyPolicy) -> bool {
        let full = PolicyOverride::from_policy(&p.0);
        assert_eq!(full.apply(&base.0), Ok(p.0));
        true
    }
    QuickCheck::new()
        .tests(2_000)
        .quickcheck(prop as fn(AnyPolicy, AnyPolicy) -> bool);
}

#[test]
fn default_policy_reads_well() {
    let text = toml::to_string(&RetryPolicy::default()).unwrap();
    assert_eq!(
        text,
        r#"max_attempts = 5
backoff = "exponential"
initial_delay = "1s"
factor = 2.0
max_delay = "1m"
min_delay = "0s"
jitter = "full"
resolution = "ms"
retry_after = "override"
retry_after_min = "100ms"
retry_after_max = "1m"
budget = "none"
attempt_timeout = "none"
cap_attempt_to_budget = false
retry_timeouts = true
use_retry_budget = false
wait_on_open_circuit = false
idempotent = true
"#
    );
}

// ---------- overrides ----------

fn toml_override(text: &str) -> PolicyOverride {
    toml::from_str(text).unwrap_or_else(|e| panic!("{text}\n{e}"))
}

#[test]
fn override_changes_only_what_it_sets() {
    let base = exponential_expected();
    let before = base;
    let o = toml_override("max_delay = \"2m\"\njitter = \"equal\"");
    let p = o.apply(&base).unwrap();
    assert_eq!(base, before, "the base is untouched");
    assert_eq!(p.max_delay(), S(120));
    assert_eq!(p.jitter(), Jitter::Equal);
    let expected = base
        .to_builder()
        .max_delay(S(120))
        .jitter(Jitter::Equal)
        .build()
        .unwrap();
    assert_eq!(p, expected);
    assert_eq!(PolicyOverride::default().apply(&base), Ok(base));
}

#[test]
fn override_counts_replace_the_base_count() {
    let base = RetryPolicy::builder().max_attempts(8).build().unwrap();
    let p = toml_override("max_retries = 2").apply(&base).unwrap();
    assert_eq!(p.max_attempts(), 3);
    assert_eq!(base.max_attempts(), 8);
    let err = toml_override("max_retries = 2\nmax_attempts = 3")
        .apply(&base)
        .unwrap_err();
    assert_eq!(err, ConfigError::Policy(PolicyError::BothAttemptCounts));
}

#[test]
fn override_factor_needs_an_exponential_curve() {
    let base = linear_expected();
    let err = toml_override("factor = 3").apply(&base).unwrap_err();
    assert_eq!(err.field(), "factor");
    assert_eq!(err.code(), "config.not_applicable");
    assert_eq!(
        err.to_string(),
        "factor: only applies with backoff = \"exponential\", not with backoff = \"linear\""
    );
    let p = toml_override("backoff = \"exponential\"\nfactor = 3")
        .apply(&base)
        .unwrap();
    assert_eq!(p.backoff(), Backoff::exponential(MS(1500), 3.0));
}

#[test]
fn override_curve_switches_keep_what_they_can() {
    let base = exponential_expected(); // 250 ms × 1.5
    let initial_only = toml_override("initial_delay = \"1s\"")
        .apply(&base)
        .unwrap();
    assert_eq!(initial_only.backoff(), Backoff::exponential(S(1), 1.5));
    let to_linear = toml_override("backoff = \"linear\"").apply(&base).unwrap();
    assert_eq!(to_linear.backoff(), Backoff::linear(MS(250)));
    let restated = toml_override("backoff = \"exponential\"")
        .apply(&base)
        .unwrap();
    assert_eq!(
        restated.backoff(),
        Backoff::exponential(MS(250), 2.0),
        "naming the curve restates its factor"
    );
    let clamp = toml_override("retry_after = \"override\"")
        .apply(&base)
        .unwrap();
    assert_eq!(clamp.hints(), HintMode::OVERRIDE_DEFAULT);
    let none = RetryPolicy::builder()
        .backoff(Backoff::None)
        .build()
        .unwrap();
    let from_none = toml_override("backoff = \"constant\"")
        .apply(&none)
        .unwrap();
    assert_eq!(from_none.backoff(), Backoff::constant(S(1)));
}

#[test]
fn override_limits_can_be_removed() {
    let base = exponential_expected();
    let p = toml_override("budget = \"none\"\nattempt_timeout = \"none\"")
        .apply(&base)
        .unwrap();
    assert_eq!((p.budget(), p.attempt_timeout()), (None, None));
    assert!(toml::from_str::<PolicyOverride>("budget = \"0s\"").is_err());
}

#[test]
fn override_hint_modes() {
    let base = exponential_expected();
    let ignore = toml_override("respect_retry_after = false")
        .apply(&base)
        .unwrap();
    assert_eq!(ignore.hints(), HintMode::Ignore);
    let back_on = toml_override("respect_retry_after = true")
        .apply(&ignore)
        .unwrap();
    assert_eq!(back_on.hints(), HintMode::OVERRIDE_DEFAULT);
    let at_least = toml_override("retry_after = \"at-least\"")
        .apply(&base)
        .unwrap();
    assert_eq!(at_least.hints(), HintMode::AT_LEAST_DEFAULT);
    let err = toml_override("retry_after_cap = \"1m\"")
        .apply(&base)
        .unwrap_err();
    assert_eq!(err.field(), "retry_after_cap");
}

#[test]
fn override_rejects_unknown_fields_and_bad_values() {
    for (text, field) in [
        ("colour = \"red\"", "colour"),
        ("factor = 0.5", "factor"),
        ("jitter = \"wobbly\"", "jitter"),
        ("max_delay = -1", "max_delay"),
        ("attempt_timeout = 0", "attempt_timeout"),
    ] {
        let msg = toml::from_str::<PolicyOverride>(text)
            .unwrap_err()
            .to_string();
        assert!(msg.contains(field), "{text}: {msg}");
    }
}

#[test]
fn override_layering() {
    let site = toml_override("max_attempts = 10\nbudget = \"1m\"\njitter = \"full\"");
    let service = toml_override("max_retries = 2\nmax_delay = \"5s\"");
    let local = toml_override("budget = \"none\"\njitter = \"spread:0.1\"");
    let merged = site.merge(service).merge(local);
    assert_eq!(
        merged.max_attempts, None,
        "a later count replaces both spellings"
    );
    assert_eq!(merged.max_retries, Some(2));
    assert_eq!(merged.budget, Some(None));
    assert_eq!(merged.jitter, Some(Jitter::Spread(0.1)));
    assert_eq!(merged.max_delay, Some(S(5)));
    let base = RetryPolicy::default();
    let p = merged.apply(&base).unwrap();
    assert_eq!(p.max_attempts(), 3);
    assert_eq!(p.budget(), None);
    assert_eq!(base, RetryPolicy::default());

    let linear = toml_override("backoff = \"linear\"\nincrement = \"2s\"");
    let exponential = toml_override("backoff = \"exponential\"\nfactor = 3");
    let layered = linear.merge(exponential);
    assert_eq!(
        layered.increment, None,
        "the later curve drops the earlier's increment"
    );
    assert_eq!(
        layered.apply(&base).unwrap().backoff(),
        Backoff::exponential(S(1), 3.0)
    );
    let written = toml::to_string(&layered).unwrap();
    assert_eq!(written, "backoff = \"exponential\"\nfactor = 3.0\n");
}

// ---------- random overrides ----------

fn maybe<T>(g: &mut Gen, make: impl FnOnce(&mut Gen) -> T) -> Option<T> {
    (u8::arbitrary(g) % 5 == 0).then(|| make(g))
}

fn small_duration(g: &mut Gen) -> Duration {
    *g.choose(&[MS(1), MS(100), S(1), S(30), S(60), S(600)])
        .unwrap()
}

fn any_override(g: &mut Gen) -> PolicyOverride {
    let mut o = PolicyOverride::default();
    let count = maybe(g, |g| u32::from(u8::arbitrary(g)));
    match u8::arbitrary(g) % 8 {
        0 => (o.max_attempts, o.max_retries) = (count, count),
        1..=3 => o.max_attempts = count,
        _ => o.max_retries = count,
    }
    o.backoff = maybe(g, |g| {
        *g.choose(&[
            Curve::None,
            Curve::Constant,
            Curve::Linear,
            Curve::Exponential,
            Curve::Fibonacci,
        ])
        .unwrap()
    });
    o.initial_delay = maybe(g, small_duration);
    o.factor = maybe(g, |g| *g.choose(&[1.0, 1.5, 3.0]).unwrap());
    o.increment = maybe(g, small_duration);
    o.max_delay = maybe(g, small_duration);
    o.min_delay = maybe(g, small_duration);
    o.jitter = maybe(g, |g| *g.choose(&[Jitter::Full, Jitter::Add(0.5)]).unwrap());
    o.resolution = maybe(g, |g| {
        *g.choose(&[Resolution::Millis, Resolution::Nanos]).unwrap()
    });
    o.retry_after = maybe(g, |g| {
        *g.choose(&[
            RetryAfter::Override,
            RetryAfter::AtLeast,
            RetryAfter::Ignore,
        ])
        .unwrap()
    });
    o.retry_after_min = maybe(g, small_duration);
    o.retry_after_max = maybe(g, small_duration);
    o.retry_after_cap = maybe(g, small_duration);
    o.respect_retry_after = maybe(g, bool::arbitrary);
    o.budget = maybe(g, |g| maybe(g, small_duration));
    o.attempt_timeout = maybe(g, |g| maybe(g, small_duration));
    o.cap_attempt_to_budget = maybe(g, bool::arbitrary);
    o.retry_timeouts = maybe(g, bool::arbitrary);
    o
}

#[derive(Clone, Debug)]
struct AnyOverride(PolicyOverride);

impl Arbitrary for AnyOverride {
    fn arbitrary(g: &mut Gen) -> Self {
        AnyOverride(any_override(g))
    }
}

/// A policy with everyday values: random overrides applied to the default.
#[derive(Clone, Debug)]
struct SmallPolicy(RetryPolicy);

impl Arbitrary for SmallPolicy {
    fn arbitrary(g: &mut Gen) -> Self {
        let mut policy = RetryPolicy::default();
        for _ in 0..3 {
            if let Ok(p) = any_override(g).apply(&policy) {
                policy = p;
            }
        }
        SmallPolicy(policy)
    }
}

#[test]
fn merging_is_applying_in_turn() {
    fn prop(a: AnyOverride, b: AnyOverride, base: SmallPolicy) -> bool {
        let before = base.0;
        if let Ok(step) = a.0.apply(&base.0) {
            if let Ok(expected) = b.0.apply(&step) {
                let merged = a.0.merge(b.0).apply(&base.0).unwrap();
                // The one documented difference: a linear increment left to its
                // default follows the merged initial delay, where applying in turn
                // froze it at the first layer's.
                let linear_default = a.0.backoff == Some(Curve::Linear)
                    && a.0.increment.is_none()
                    && b.0.increment.is_none();
                if linear_default {
                    if let (
                        Backoff::Linear { initial: m, .. },
                        Backoff::Linear { initial: e, .. },
                    ) = (merged.backoff(), expected.backoff())
                    {
                        assert_eq!(m, e);
                        let same_curve = expected.to_builder().backoff(merged.backoff());
                        assert_eq!(merged, same_curve.build().unwrap());
                        return true;
                    }
                }
                assert_eq!(merged, expected);
            }
        }
        assert_eq!(base.0, before);
        true
    }
    // Most random pairs do not both apply (a factor over a linear curve, min above
    // max, …); 50,000 cases give several thousand that do.
    QuickCheck::new()
        .tests(50_000)
        .max_tests(100_000)
        .quickcheck(prop as fn(AnyOverride, AnyOverride, SmallPolicy) -> bool);
}

#[test]
fn overrides_round_trip() {
    fn prop(o: AnyOverride) -> bool {
        let text = toml::to_string(&o.0).unwrap();
        let back: Result<PolicyOverride, _> = toml::from_str(&text);
        // Zero attempts and zero limits are refused on reading, as they should be.
        if let Ok(back) = back {
            assert_eq!(back, o.0, "{text}");
        }
        let json = serde_json::to_string(&o.0).unwrap();
        if let Ok(back) = serde_json::from_str::<PolicyOverride>(&json) {
            assert_eq!(back, o.0, "{json}");
        }
        true
    }
    QuickCheck::new()
        .tests(2_000)
        .quickcheck(prop as fn(AnyOverride) -> bool);
}

// ---------- no panics on any input ----------

#[derive(Clone, Debug)]
struct DurationLike(String);

impl Arbitrary for DurationLike {
    fn arbitrary(g: &mut Gen) -> Self {
        let alphabet = [
            "0",
            "1",
            "5",
            "9",
            ".",
            "d",
            "h",
            "m",
            "s",
            "ms",
            "us",
            "µs",
            "ns",
            "n",
            "u",
            "µ",
            " ",
            "-",
            "+",
            "x",
            "99999999999999999999",
        ];
        let len = usize::from(u8::arbitrary(g) % 12);
        let text = (0..len).map(|_| *g.choose(&alphabet).unwrap()).collect();
        DurationLike(text)
    }
}

#[test]
fn duration_parsing_never_panics() {
    fn prop(text: String, like: DurationLike) -> bool {
        for t in [text.as_str(), like.0.as_str()] {
            if let Ok(d) = parse_duration(t) {
                assert_eq!(parse_duration(&DurationText(d).to_string()), Ok(d), "{t:?}");
            }
        }
        true
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(String, DurationLike) -> bool);
}

#[derive(Clone, Debug)]
struct WeirdJson(String);

impl Arbitrary for WeirdJson {
    fn arbitrary(g: &mut Gen) -> Self {
        let keys = [
            "max_attempts",
            "max_retries",
            "backoff",
            "initial_delay",
            "factor",
            "increment",
            "max_delay",
            "min_delay",
            "jitter",
            "resolution",
            "retry_after",
            "retry_after_min",
            "retry_after_max",
            "retry_after_cap",
            "respect_retry_after",
            "budget",
            "attempt_timeout",
            "cap_attempt_to_budget",
            "retry_timeouts",
            "other",
        ];
        let values = [
            "-1",
            "0",
            "1",
            "1.5",
            "1e308",
            "-1e308",
            "18446744073709551615",
            "4294967296",
            "\"nan\"",
            "\"x\"",
            "true",
            "null",
            "[]",
            "{}",
            "\"1m30\"",
            "\"none\"",
            "\"0s\"",
            "\"subtract:2\"",
            "\"spread:-0\"",
            "\"add:1e-400\"",
            "\"linear\"",
            "\"ignore\"",
            "\"at-least\"",
            "\"ns\"",
            "\"213503982334601d8h\"",
            "\"1d\"",
            "\"\"",
            "\"µs\"",
        ];
        let n = usize::from(u8::arbitrary(g) % 8);
        let fields: Vec<String> = (0..n)
            .map(|_| {
                let k = g.choose(&keys).unwrap();
                let v = g.choose(&values).unwrap();
                format!("\"{k}\": {v}")
            })
            .collect();
        WeirdJson(format!("{{{}}}", fields.join(", ")))
    }
}

#[test]
fn reading_never_panics() {
    fn prop(json: WeirdJson, base: SmallPolicy) -> bool {
        if let Ok(p) = serde_json::from_str::<RetryPolicy>(&json.0) {
            assert!(p.validate().is_ok());
        }
        if let Ok(o) = serde_json::from_str::<PolicyOverride>(&json.0) {
            if let Ok(p) = o.apply(&base.0) {
                assert!(p.validate().is_ok());
            }
        }
        true
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(WeirdJson, SmallPolicy) -> bool);
}

#[test]
fn unlimited_attempts_in_configs() {
    let p = toml_policy("max_attempts = \"unlimited\"\nbudget = \"2m\"");
    assert!(p.attempts_are_unlimited());
    let p = json_policy(r#"{ "max_retries": "unlimited" }"#);
    assert!(p.attempts_are_unlimited());
    let text = serde_json::to_string(&p).unwrap();
    assert!(text.contains(r#""max_attempts":"unlimited""#), "{text}");
    assert_eq!(json_policy(&text), p);
    let err = json_err(r#"{ "max_attempts": "many" }"#);
    assert!(
        err.starts_with("max_attempts: expected a whole number or \"unlimited\""),
        "{err}"
    );
    // An override can make a bounded policy unlimited.
    let over: PolicyOverride = toml::from_str("max_attempts = \"unlimited\"").unwrap();
    assert!(over
        .apply(&RetryPolicy::default())
        .unwrap()
        .attempts_are_unlimited());
}
