//! The rules behind the adapters' safe defaults at the seams (SPEC §14, §14a),
//! each as a table recorded whole: which requests an HTTP layer hedges, which
//! failures of a request it may send again, how an abandoned attempt counts,
//! what a breaker records, and the one outcome every attempt is counted with.

use core::fmt::Write as _;
use core::time::Duration;

use retry_core::{
    attempt_outcome, breaker_outcome, replay_verdict, AbandonedRule, Event, Failure, FailureKind,
    HedgeEvent, HedgePolicy, HedgeTimeline, Hint, Idempotency, Instant, Method, Scripted,
};

const METHODS: [Method; 8] = [
    Method::Get,
    Method::Head,
    Method::Options,
    Method::Put,
    Method::Delete,
    Method::Post,
    Method::Patch,
    Method::Other,
];

const MARKS: [Idempotency; 3] = [Idempotency::Auto, Idempotency::Always, Idempotency::Never];

fn name(method: Method) -> &'static str {
    method.as_str().unwrap_or("(other)")
}

#[test]
fn which_requests_a_layer_hedges() {
    let plain = HedgePolicy::builder().max_attempts(3).build().unwrap();
    let allowed = HedgePolicy::builder()
        .max_attempts(3)
        .hedge_non_idempotent(true)
        .build()
        .unwrap();
    let mut table =
        String::from("method   mark    copies  copies(hedge_non_idempotent)  copy 2 flagged\n");
    for method in METHODS {
        for mark in MARKS {
            let policy = plain.for_request(method, mark);
            let lenient = allowed.for_request(method, mark);
            writeln!(
                table,
                "{:<8} {:<7} {:>6}  {:>28}  {}",
                name(method),
                format!("{mark:?}"),
                policy.allowed_attempts(),
                lenient.allowed_attempts(),
                !lenient.is_idempotent(),
            )
            .unwrap();
        }
    }
    // The contract in numbers: a POST without a mark is sent once, a GET is
    // hedged, a mark decides either way.
    assert_eq!(
        plain
            .for_request(Method::Post, Idempotency::Auto)
            .allowed_attempts(),
        1
    );
    assert_eq!(
        plain
            .for_request(Method::Get, Idempotency::Auto)
            .allowed_attempts(),
        3
    );
    assert_eq!(
        plain
            .for_request(Method::Post, Idempotency::Always)
            .allowed_attempts(),
        3
    );
    assert_eq!(
        plain
            .for_request(Method::Get, Idempotency::Never)
            .allowed_attempts(),
        1
    );
    insta::assert_snapshot!(table);
}

#[test]
fn a_post_is_sent_once_even_when_the_first_copy_is_slow_or_fails() {
    let policy = HedgePolicy::builder()
        .max_attempts(3)
        .fixed_delay(Duration::from_millis(50))
        .build()
        .unwrap()
        .for_request(Method::Post, Idempotency::Auto);
    // Slow: the hedge delay passes, no second copy goes out.
    let slow = [Scripted::succeed().after(Duration::from_millis(300))];
    let text = HedgeTimeline::new(&policy, 7, &slow).to_string();
    assert!(!text.contains("launched #2"), "{text}");
    insta::assert_snapshot!("post_slow", text);
    // Failed: the call ends on the first copy's failure.
    let failed = [Scripted::fail(Failure::retryable()).after(Duration::from_millis(20))];
    let text = HedgeTimeline::new(&policy, 7, &failed).to_string();
    assert!(!text.contains("launched #2"), "{text}");
    insta::assert_snapshot!("post_failed", text);
    // The same policy for a GET hedges at 50 ms.
    let get = policy.for_request(Method::Get, Idempotency::Always);
    let text = HedgeTimeline::new(&get, 7, &slow).to_string();
    assert!(text.contains("launched #2"), "{text}");
}

#[test]
fn which_failures_of_a_request_may_be_sent_again() {
    let failures = [
        (
            "connection",
            Failure::retryable().with_kind(FailureKind::Connection),
        ),
        (
            "timeout",
            Failure::retryable().with_kind(FailureKind::Timeout),
        ),
        (
            "not sent",
            Failure::retryable().with_kind(FailureKind::NotSent),
        ),
        (
            "status 503",
            Failure::retryable().with_kind(FailureKind::Status(503)),
        ),
        (
            "status 400 (permanent)",
            Failure::permanent().with_kind(FailureKind::Status(400)),
        ),
        ("error (unknown kind)", Failure::retryable()),
        (
            "error with a retry hint",
            Failure::retryable().with_hint(Hint::RetryAfter(Duration::from_secs(1))),
        ),
        ("permanent error", Failure::permanent()),
    ];
    let mut table =
        String::from("failure                   replayable request       other request\n");
    for (label, failure) in failures {
        let show = |f: Failure| {
            format!(
                "{} ({})",
                if f.is_retryable() { "retry" } else { "stop" },
                f.kind()
            )
        };
        writeln!(
            table,
            "{label:<25} {:<23} {}",
            show(replay_verdict(failure, true)),
            show(replay_verdict(failure, false)),
        )
        .unwrap();
    }
    let dropped = Failure::retryable().with_kind(FailureKind::Connection);
    assert!(!replay_verdict(dropped, false).is_retryable());
    assert!(replay_verdict(dropped, true).is_retryable());
    insta::assert_snapshot!(table);
}

#[test]
fn how_an_abandoned_attempt_counts() {
    let slow = Duration::from_secs(60);
    let t0 = Instant::ORIGIN;
    let cases = [
        (
            "dropped after 100 ms, no deadline",
            Instant::from_millis(100),
            None,
        ),
        (
            "dropped after 61 s, no deadline",
            Instant::from_secs(61),
            None,
        ),
        (
            "dropped at its 100 ms deadline",
            Instant::from_millis(100),
            Some(Instant::from_millis(100)),
        ),
        (
            "dropped before its 5 s deadline",
            Instant::from_millis(100),
            Some(Instant::from_secs(5)),
        ),
    ];
    let rules = [
        AbandonedRule::FailureIfSlow,
        AbandonedRule::Failure,
        AbandonedRule::Release,
    ];
    let mut table = String::new();
    for (label, at, deadline) in cases {
        write!(table, "{label:<36}").unwrap();
        for rule in rules {
            let outcome = match rule.outcome(t0, at, deadline, slow) {
                Some(o) if !o.success => format!("failure {:?}", o.duration),
                Some(o) => format!("success {:?}", o.duration),
                None => "released".to_owned(),
            };
            write!(table, " | {}: {outcome:<15}", rule.name()).unwrap();
        }
        table.push('\n');
    }
    writeln!(table, "start unknown, no deadline:").unwrap();
    for rule in rules {
        writeln!(
            table,
            "  {}: {:?}",
            rule.name(),
            rule.unmeasured(Instant::from_secs(1), None)
        )
        .unwrap();
    }
    // The default keeps the old rule; `Failure` counts an outer 100 ms timeout.
    assert_eq!(AbandonedRule::default(), AbandonedRule::FailureIfSlow);
    assert_eq!(
        AbandonedRule::FailureIfSlow.outcome(t0, Instant::from_millis(100), None, slow),
        None
    );
    assert!(AbandonedRule::Failure
        .outcome(t0, Instant::from_millis(100), None, slow)
        .is_some_and(|o| !o.success));
    insta::assert_snapshot!(table);
}

#[test]
fn what_a_breaker_records_and_what_every_attempt_is_counted_as() {
    let took = Duration::from_millis(30);
    let events = [
        ("succeeded", Event::Succeeded),
        ("failed, retryable", Event::Failed(Failure::retryable())),
        (
            "failed, permanent (a 400)",
            Event::Failed(Failure::permanent().with_kind(FailureKind::Status(400))),
        ),
        (
            "failed, permanent connection",
            Event::Failed(Failure::permanent().with_kind(FailureKind::Connection)),
        ),
        (
            "failed, permanent timeout",
            Event::Failed(Failure::permanent().with_kind(FailureKind::Timeout)),
        ),
        ("timed out", Event::TimedOut),
        ("cancelled", Event::Cancelled),
        ("rejected", Event::Rejected { until: None }),
        ("woke", Event::Woke),
    ];
    let mut table = String::from("event                          breaker      attempt outcome\n");
    for (label, event) in events {
        let breaker = match breaker_outcome(event, took) {
            Some(o) if o.success => "success",
            Some(_) => "failure",
            None => "-",
        };
        let outcome = attempt_outcome(event).map_or("-", |o| o.label());
        writeln!(table, "{label:<30} {breaker:<12} {outcome}").unwrap();
    }
    let dropped = Failure::permanent().with_kind(FailureKind::Connection);
    assert!(
        !breaker_outcome(Event::Failed(dropped), took)
            .unwrap()
            .success
    );
    let hedged = retry_core::hedge_breaker_outcome(
        HedgeEvent::Failed {
            copy: 1,
            failure: dropped,
        },
        took,
    );
    assert!(!hedged.unwrap().success);
    insta::assert_snapshot!(table);
}
