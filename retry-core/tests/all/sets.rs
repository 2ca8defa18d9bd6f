//! Ready classifiers: exit-code sets and policies, status sets, named error
//! codes and replay rules.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use quickcheck::{Arbitrary, Gen, QuickCheck};
use retry_core::{
    may_replay, may_retry_connection_error, ErrorCodeSet, ExitCodePolicy, ExitCodeSet,
    ExitDecision, Idempotency, Method, SetParseErrorKind, StatusSet,
};

use ExitDecision::{Retry, Stop, Success};

#[test]
fn pipeline_policy_member_by_member() {
    let p = ExitCodePolicy::PIPELINE;
    assert_eq!(p.decide(0), Success);
    assert_eq!(p.decide(78), Stop);
    for code in 1..=255 {
        if code != 78 {
            assert_eq!(p.decide(code), Retry, "code {code}");
        }
    }
    // Codes outside 0..=255 are in neither set.
    assert_eq!(p.decide(-1), Retry);
    assert_eq!(p.decide(256), Retry);
    assert_eq!(p.decide(i32::MIN), Retry);
    assert_eq!(p.decide(i32::MAX), Retry);
    assert_eq!(ExitCodePolicy::default(), p);
}

#[test]
fn command_line_policy_member_by_member() {
    let p = ExitCodePolicy::COMMAND_LINE;
    let stops = [64, 65, 77, 78, 126, 127];
    assert_eq!(p.decide(0), Success);
    assert_eq!(p.decide(75), Retry);
    assert_eq!(p.decide(2), Retry);
    for code in stops {
        assert_eq!(p.decide(code), Stop, "code {code}");
    }
    for code in 1..=255 {
        if !stops.contains(&code) {
            assert_eq!(p.decide(code), Retry, "code {code}");
        }
    }
    assert_eq!(p.stop_set().len(), 6);
    assert!(p.retry_set().contains(75));
}

#[test]
fn explicit_retry_set_and_precedence() {
    let only = ExitCodePolicy::only(ExitCodeSet::empty().with(75).with_range(100, 101));
    assert_eq!(only.decide(0), Success);
    assert_eq!(only.decide(75), Retry);
    assert_eq!(only.decide(100), Retry);
    assert_eq!(only.decide(101), Retry);
    assert_eq!(only.decide(1), Stop);
    assert_eq!(only.decide(102), Stop);
    assert_eq!(only.decide(-75), Stop);
    assert_eq!(only.decide(300), Stop);

    // In both sets: stop wins, whichever was added first.
    let both = only.with_stop(75);
    assert_eq!(both.decide(75), Stop);
    let both = ExitCodePolicy::all_except(ExitCodeSet::empty().with(3)).with_retry(3);
    assert_eq!(both.decide(3), Stop);
    assert_eq!(both.decide(4), Retry);
    // 0 is success even if listed.
    let zero = ExitCodePolicy::new(
        ExitCodeSet::empty().with(0),
        ExitCodeSet::empty().with(0),
        false,
    );
    assert_eq!(zero.decide(0), Success);
}

#[test]
fn exit_code_set_basics() {
    let mut set = ExitCodeSet::empty();
    assert!(set.is_empty());
    assert_eq!(set.len(), 0);
    assert_eq!(set.iter().next(), None);
    set.insert(0);
    set.insert(63);
    set.insert(64);
    set.insert(255);
    assert_eq!(set.iter().collect::<Vec<_>>(), [0, 63, 64, 255]);
    assert_eq!(set.iter().rev().collect::<Vec<_>>(), [255, 64, 63, 0]);
    assert_eq!(set.iter().len(), 4);
    set.remove(63);
    set.remove(63);
    assert!(!set.contains(63));
    assert_eq!(set.len(), 3);
    assert_eq!(ExitCodeSet::all().len(), 256);
    assert_eq!(ExitCodeSet::empty().with_range(0, 255), ExitCodeSet::all());
    assert_eq!(ExitCodeSet::empty().with_range(9, 5), ExitCodeSet::empty());
    assert_eq!(ExitCodeSet::empty().with_range(255, 255).len(), 1);
    let a = ExitCodeSet::empty().with_range(1, 10);
    let b = ExitCodeSet::empty().with_range(5, 20);
    assert_eq!(a.union(b), ExitCodeSet::empty().with_range(1, 20));
    assert_eq!(a.intersection(b), ExitCodeSet::empty().with_range(5, 10));
    assert_eq!(a.difference(b), ExitCodeSet::empty().with_range(1, 4));
    assert_eq!(a.without_range(2, 10), ExitCodeSet::empty().with(1));
    assert_eq!(a.iter().collect::<ExitCodeSet>(), a);
    let mut seen = 0;
    for code in &a {
        assert!((1..=10).contains(&code));
        seen += 1;
    }
    assert_eq!(seen, 10);
}

#[test]
fn exit_code_set_parsing() {
    let set = ExitCodeSet::parse("1,2,5-9,75").unwrap();
    assert_eq!(set.iter().collect::<Vec<_>>(), [1, 2, 5, 6, 7, 8, 9, 75]);
    assert_eq!(ExitCodeSet::parse(" 1 , 5 - 6 ").unwrap().len(), 3);
    assert_eq!(ExitCodeSet::parse("").unwrap(), ExitCodeSet::empty());
    assert_eq!(ExitCodeSet::parse("  ").unwrap(), ExitCodeSet::empty());
    assert_eq!(ExitCodeSet::parse("0-255").unwrap(), ExitCodeSet::all());
    assert_eq!(
        ExitCodeSet::parse("7-7").unwrap(),
        ExitCodeSet::empty().with(7)
    );

    let cases: &[(&str, &str, usize, usize, SetParseErrorKind)] = &[
        ("1,,2", "", 1, 2, SetParseErrorKind::Empty),
        ("1,2,", "", 2, 4, SetParseErrorKind::Empty),
        ("1,2,5-x,75", "5-x", 2, 4, SetParseErrorKind::NotANumber),
        ("1, abc", "abc", 1, 3, SetParseErrorKind::NotANumber),
        ("-1", "-1", 0, 0, SetParseErrorKind::NotANumber),
        ("+1", "+1", 0, 0, SetParseErrorKind::NotANumber),
        ("1.5", "1.5", 0, 0, SetParseErrorKind::NotANumber),
        ("5-", "5-", 0, 0, SetParseErrorKind::NotANumber),
        ("1,  ,2", "", 1, 4, SetParseErrorKind::Empty),
        ("1-2-3", "1-2-3", 0, 0, SetParseErrorKind::NotANumber),
        ("１", "１", 0, 0, SetParseErrorKind::NotANumber),
        (
            "3,256",
            "256",
            1,
            2,
            SetParseErrorKind::OutOfRange { min: 0, max: 255 },
        ),
        (
            "99999999999999999999",
            "99999999999999999999",
            0,
            0,
            SetParseErrorKind::OutOfRange { min: 0, max: 255 },
        ),
        ("1, 9-5", "9-5", 1, 3, SetParseErrorKind::Reversed),
    ];
    for &(input, item, index, offset, kind) in cases {
        let err = ExitCodeSet::parse(input).unwrap_err();
        assert_eq!(err.item(), item, "{input:?}");
        assert_eq!(err.index(), index, "{input:?}");
        assert_eq!(err.offset(), offset, "{input:?}");
        assert_eq!(err.kind(), kind, "{input:?}");
        assert!(err.to_string().contains(&format!("{item:?}")), "{err}");
    }
    let err = ExitCodeSet::parse("1,300").unwrap_err();
    assert_eq!(
        err.to_string(),
        "item 1 (\"300\", byte 2): out of range (allowed 0-255)"
    );
    let as_error: &dyn core::error::Error = &err;
    assert!(as_error.source().is_none());
}

#[test]
fn status_default_set_member_by_member() {
    let set = StatusSet::DEFAULT_RETRYABLE;
    for (status, want) in [
        (0, false),
        (99, false),
        (100, false),
        (200, false),
        (404, false),
        (407, false),
        (408, true),
        (409, false),
        (428, false),
        (429, true),
        (430, false),
        (499, false),
        (500, true),
        (503, true),
        (599, true),
        (600, false),
        (1000, false),
        (u16::MAX, false),
    ] {
        assert_eq!(set.contains(status), want, "status {status}");
    }
    assert_eq!(set.len(), 102);
    const LEN: usize = StatusSet::DEFAULT_RETRYABLE.len();
    const PIPELINE_STOPS: usize = ExitCodePolicy::PIPELINE.stop_set().len();
    assert_eq!((LEN, PIPELINE_STOPS), (102, 1));
    let members: Vec<u16> = set.iter().collect();
    assert_eq!(members[..3], [408, 429, 500]);
    assert_eq!(members.last(), Some(&599));
}

#[test]
fn status_set_edits_and_parsing() {
    assert_eq!(
        StatusSet::parse("408,429,500-599").unwrap(),
        StatusSet::DEFAULT_RETRYABLE
    );
    let set = StatusSet::DEFAULT_RETRYABLE.without(501).with(425);
    assert!(!set.contains(501) && set.contains(425));
    let mut set = StatusSet::empty();
    set.insert(0);
    set.insert(99);
    set.insert(600);
    set.insert(u16::MAX);
    assert!(set.is_empty());
    set.insert(100);
    set.insert(599);
    assert_eq!(set.iter().collect::<Vec<_>>(), [100, 599]);
    set.remove(100);
    set.remove(600);
    assert_eq!(set.len(), 1);
    // Ranges are clipped to 100..=599.
    let all = StatusSet::empty().with_range(0, u16::MAX);
    assert_eq!(all.len(), 500);
    assert_eq!(all.without_range(0, 499).len(), 100);
    assert!(StatusSet::empty().with_range(600, 700).is_empty());
    assert!(StatusSet::empty().with_range(0, 50).is_empty());
    assert_eq!(
        StatusSet::empty()
            .with(408)
            .union(StatusSet::empty().with(429)),
        StatusSet::empty().with(408).with(429)
    );

    let err = StatusSet::parse("408,42,500-599").unwrap_err();
    assert_eq!((err.item(), err.index(), err.offset()), ("42", 1, 4));
    assert_eq!(
        err.kind(),
        SetParseErrorKind::OutOfRange { min: 100, max: 599 }
    );
    let err = StatusSet::parse("500-600").unwrap_err();
    assert_eq!(err.item(), "500-600");
    let err = StatusSet::parse("5xx").unwrap_err();
    assert_eq!(err.kind(), SetParseErrorKind::NotANumber);
}

#[test]
fn error_code_sets() {
    let set = ErrorCodeSet::STREAMING;
    for code in ["TRANSIENT", "TIMEOUT", "RATE_LIMIT"] {
        assert!(set.contains(code), "{code}");
    }
    for code in ["transient", "Timeout", "RATE_LIMIT ", "", "INVALID", "RATE"] {
        assert!(!set.contains(code), "{code}");
    }
    assert_eq!(set.codes().len(), 3);
    let empty = ErrorCodeSet::new(&[]);
    assert!(!empty.contains(""));
}

#[test]
fn methods_parse_case_sensitively() {
    let known = [
        (b"GET".as_slice(), Method::Get),
        (b"HEAD", Method::Head),
        (b"OPTIONS", Method::Options),
        (b"PUT", Method::Put),
        (b"DELETE", Method::Delete),
        (b"POST", Method::Post),
        (b"PATCH", Method::Patch),
        (b"TRACE", Method::Trace),
        (b"CONNECT", Method::Connect),
    ];
    for (name, method) in known {
        assert_eq!(Method::parse(name), method);
        assert_eq!(method.as_str().map(str::as_bytes), Some(name));
    }
    for name in [
        b"get".as_slice(),
        b"Get",
        b" GET",
        b"GET ",
        b"",
        b"PURGE",
        b"\xff",
    ] {
        assert_eq!(Method::parse(name), Method::Other);
    }
    assert_eq!(Method::Other.as_str(), None);
}

#[test]
fn replay_rules() {
    use Method::*;
    let all = [
        Get, Head, Options, Put, Delete, Post, Patch, Trace, Connect, Other,
    ];
    for method in all {
        let auto = matches!(method, Get | Head | Options);
        let auto_pd = auto || matches!(method, Put | Delete);
        assert_eq!(
            may_replay(Idempotency::Auto, method, false),
            auto,
            "{method:?}"
        );
        assert_eq!(
            may_replay(Idempotency::Auto, method, true),
            auto_pd,
            "{method:?}"
        );
        for flag in [false, true] {
            assert!(may_replay(Idempotency::Always, method, flag));
            assert!(!may_replay(Idempotency::Never, method, flag));
            for idem in [Idempotency::Auto, Idempotency::Always, Idempotency::Never] {
                // Nothing sent: always retryable.
                assert!(may_retry_connection_error(idem, method, flag, true));
                assert_eq!(
                    may_retry_connection_error(idem, method, flag, false),
                    may_replay(idem, method, flag)
                );
            }
        }
    }
    assert_eq!(Idempotency::default(), Idempotency::Auto);
}

/// One edit to an exit-code set.
#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    Remove(u8),
    Range(u8, u8),
    RemoveRange(u8, u8),
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        match u8::arbitrary(g) % 4 {
            0 => Op::Insert(u8::arbitrary(g)),
            1 => Op::Remove(u8::arbitrary(g)),
            2 => Op::Range(u8::arbitrary(g), u8::arbitrary(g)),
            _ => Op::RemoveRange(u8::arbitrary(g), u8::arbitrary(g)),
        }
    }
}

#[test]
fn exit_code_set_matches_bool_model() {
    fn prop(ops: Vec<Op>) -> bool {
        let mut set = ExitCodeSet::empty();
        let mut model = [false; 256];
        for op in ops {
            match op {
                Op::Insert(c) => {
                    set.insert(c);
                    model[usize::from(c)] = true;
                }
                Op::Remove(c) => {
                    set.remove(c);
                    model[usize::from(c)] = false;
                }
                Op::Range(lo, hi) => {
                    set = set.with_range(lo, hi);
                    for c in lo..=hi {
                        model[usize::from(c)] = true;
                    }
                }
                Op::RemoveRange(lo, hi) => {
                    set = set.without_range(lo, hi);
                    for c in lo..=hi {
                        model[usize::from(c)] = false;
                    }
                }
            }
        }
        let members: Vec<u8> = (0..=255u8).filter(|&c| model[usize::from(c)]).collect();
        (0..=255u8).all(|c| set.contains(c) == model[usize::from(c)])
            && set.len() == members.len()
            && set.iter().collect::<Vec<_>>() == members
            && set.iter().rev().eq(members.iter().rev().copied())
            && set.is_empty() == members.is_empty()
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(Vec<Op>) -> bool);
}

#[test]
fn parse_never_panics() {
    fn prop(text: String) -> bool {
        let _ = StatusSet::parse(&text);
        match ExitCodeSet::parse(&text) {
            Ok(_) => true,
            Err(e) => text
                .get(e.offset()..)
                .is_some_and(|rest| rest.starts_with(e.item())),
        }
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(String) -> bool);
}

#[test]
fn sets_display_as_lists_that_parse_back() {
    use retry_core::{ExitCodeSet, StatusSet};
    assert_eq!(StatusSet::DEFAULT_RETRYABLE.to_string(), "408,429,500-599");
    assert_eq!(
        ExitCodeSet::parse("75,1-5,7").unwrap().to_string(),
        "1-5,7,75"
    );
    assert_eq!(ExitCodeSet::empty().to_string(), "");
    assert_eq!(ExitCodeSet::all().to_string(), "0-255");
    fn prop(codes: Vec<u8>) -> bool {
        let mut set = retry_core::ExitCodeSet::empty();
        for c in codes {
            set.insert(c);
        }
        retry_core::ExitCodeSet::parse(&set.to_string()) == Ok(set)
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(Vec<u8>) -> bool);
}

#[cfg(feature = "serde")]
#[test]
fn sets_read_from_text_or_arrays_in_toml_and_json() {
    use retry_core::{ExitCodeSet, StatusSet};
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Lists {
        retry_on: ExitCodeSet,
        statuses: StatusSet,
    }
    let want = Lists {
        retry_on: ExitCodeSet::parse("1-5,75").unwrap(),
        statuses: StatusSet::DEFAULT_RETRYABLE,
    };
    let toml_text = "retry_on = [1, 2, \"3-5\", 75]\nstatuses = \"408,429,500-599\"\n";
    assert_eq!(toml::from_str::<Lists>(toml_text).unwrap(), want);
    let json_text = r#"{"retry_on": "1-5,75", "statuses": [408, 429, "500-599"]}"#;
    assert_eq!(serde_json::from_str::<Lists>(json_text).unwrap(), want);
    // Written as list text; both formats read it back.
    let written = toml::to_string(&want).unwrap();
    assert_eq!(
        written,
        "retry_on = \"1-5,75\"\nstatuses = \"408,429,500-599\"\n"
    );
    assert_eq!(toml::from_str::<Lists>(&written).unwrap(), want);
    let json = serde_json::to_string(&want).unwrap();
    assert_eq!(serde_json::from_str::<Lists>(&json).unwrap(), want);
    // Bad items are errors that say what was expected.
    for bad in [
        r#"{"retry_on": [256], "statuses": []}"#,
        r#"{"retry_on": "9-3", "statuses": []}"#,
        r#"{"retry_on": [-1], "statuses": []}"#,
        r#"{"retry_on": [], "statuses": [600]}"#,
        r#"{"retry_on": [], "statuses": "4xx"}"#,
    ] {
        let err = serde_json::from_str::<Lists>(bad).unwrap_err().to_string();
        assert!(
            err.contains("exit codes") || err.contains("HTTP statuses"),
            "{bad}: {err}"
        );
    }
}
