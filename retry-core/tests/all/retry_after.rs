//! Server delay hints: a table of header values, precedence, and property
//! checks of the HTTP-date parser against the `httpdate` crate.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

use quickcheck::QuickCheck;
use retry_core::{
    format_http_date, parse_grpc_pushback, parse_http_date, parse_retry_after,
    parse_retry_after_ms, retry_after_from_headers, Pushback,
};

/// Sun, 06 Nov 1994 08:49:37 GMT.
const NOW_1994: u64 = 784_111_777;
/// Sun, 29 Nov 2026 21:00:00 GMT.
const NOW_2026: u64 = 1_795_986_000;
/// Thu, 31 Dec 2099 00:00:00 GMT.
const NOW_2099: u64 = 4_102_358_400;
/// 9999-12-31T23:59:59Z.
const LAST_DATE: u64 = 253_402_300_799;

#[derive(Clone, Copy, Debug)]
enum Header {
    /// `Retry-After`, read with `parse_retry_after(value, now)`.
    RetryAfter(u64),
    /// `retry-after-ms`.
    Ms,
    /// `grpc-retry-pushback-ms`; `None` below stands for `Pushback::Stop`.
    Pushback,
}
use Header::{Ms, Pushback as Grpc, RetryAfter as Ra};

const fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}
const fn millis(ms: u64) -> Option<Duration> {
    Some(Duration::from_millis(ms))
}
const fn nanos(ns: u64) -> Option<Duration> {
    Some(Duration::from_nanos(ns))
}
const ZERO: Option<Duration> = Some(Duration::ZERO);
const MAX: Option<Duration> = Some(Duration::MAX);

#[rustfmt::skip]
const CASES: &[(Header, &[u8], Option<Duration>)] = &[
    // ---- Retry-After: delta-seconds
    (Ra(0), b"0", ZERO),
    (Ra(0), b"120", secs(120)),
    (Ra(NOW_1994), b"120", secs(120)),
    (Ra(0), b"007", secs(7)),
    (Ra(0), b"  42\t", secs(42)),
    (Ra(0), b"\r\n5 ", secs(5)),
    (Ra(0), b"", None),
    (Ra(0), b" ", None),
    (Ra(0), b"\t \r\n", None),
    (Ra(0), b"-1", None),
    (Ra(0), b"+1", None),
    (Ra(0), b"+5", None),
    (Ra(0), b"1.5", None),
    (Ra(0), b"1e309", None),
    (Ra(0), b"1e3", None),
    (Ra(0), b"NaN", None),
    (Ra(0), b"inf", None),
    (Ra(0), b"0x10", None),
    (Ra(0), b"1 2", None),
    (Ra(0), b"12abc", None),
    (Ra(0), b"\xff\xfe", None),
    (Ra(0), "１２".as_bytes(), None),
    (Ra(0), "12\u{a0}".as_bytes(), None),
    (Ra(0), b"18446744073709551615", secs(u64::MAX)),
    (Ra(0), b"18446744073709551616", MAX),
    (Ra(0), b"1234567890123456789012345678901234567890", MAX),
    // ---- Retry-After: IMF-fixdate
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37 GMT", secs(NOW_1994)),
    (Ra(NOW_1994), b"Sun, 06 Nov 1994 08:49:37 GMT", ZERO),
    (Ra(NOW_1994), b"Sun, 06 Nov 1994 08:50:37 GMT", secs(60)),
    (Ra(NOW_1994 + 1000), b"Sun, 06 Nov 1994 08:49:37 GMT", ZERO),
    (Ra(NOW_1994), b"  Sun, 06 Nov 1994 08:50:37 GMT \t", secs(60)),
    (Ra(0), b"Thu, 01 Jan 1970 00:00:00 GMT", ZERO),
    (Ra(0), b"Wed, 31 Dec 1969 23:59:59 GMT", ZERO),
    (Ra(NOW_1994), b"Mon, 01 Jan 1900 00:00:00 GMT", ZERO),
    (Ra(0), b"Fri, 31 Dec 9999 23:59:59 GMT", secs(LAST_DATE)),
    (Ra(0), b"Sat, 01 Jan 10000 00:00:00 GMT", None),
    (Ra(0), b"Thu, 29 Feb 2024 12:00:00 GMT", secs(1_709_208_000)),
    (Ra(0), b"Thu, 29 Feb 2023 12:00:00 GMT", None),
    (Ra(0), b"Tue, 29 Feb 2000 00:00:00 GMT", secs(951_782_400)),
    (Ra(0), b"Mon, 29 Feb 2100 00:00:00 GMT", None),
    (Ra(0), b"Mon, 06 Nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 06 Foo 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 06 nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 06 NOV 1994 08:49:37 GMT", None),
    (Ra(0), b"sun, 06 Nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 32 Nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 31 Nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 00 Nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 06 Nov 1994 24:00:00 GMT", None),
    (Ra(0), b"Sun, 06 Nov 1994 08:60:00 GMT", None),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:61 GMT", None),
    // A leap second reads as :59 of the same minute.
    (Ra(0), b"Sun, 06 Nov 1994 08:49:60 GMT", secs(784_111_799)),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37 GMT x", None),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37 GMTx", None),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37", None),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37 UTC", None),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37 gmt", None),
    (Ra(0), b"Sun, 06 Nov 1994  08:49:37 GMT", None),
    (Ra(0), b"Sun,  6 Nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 6 Nov 1994 08:49:37 GMT", None),
    (Ra(0), b"Sun, 06 Nov 94 08:49:37 GMT", None),
    (Ra(0), b"Sun, 06 Nov 1994 8:49:37 GMT", None),
    (Ra(0), b"Sun, 06 Nov 1994 08-49-37 GMT", None),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37 GMT\xff", None),
    (Ra(0), "Sun, 06 Nov 1994 08:49:37 GMT\u{3000}".as_bytes(), None),
    (Ra(0), b"Sun, 06 Nov 1994 08:49:37 +0000", None),
    (Ra(0), b"1994-11-06T08:49:37Z", None),
    // ---- Retry-After: RFC 850 (two-digit year, RFC 9110 section 5.6.7)
    (Ra(0), b"Sunday, 06-Nov-94 08:49:37 GMT", secs(NOW_1994)),
    (Ra(NOW_1994), b"Sunday, 06-Nov-94 08:49:37 GMT", ZERO),
    (Ra(NOW_2026), b"Sunday, 06-Nov-94 08:49:37 GMT", ZERO),
    (Ra(NOW_1994), b"Sun, 06-Nov-94 08:49:37 GMT", None),
    (Ra(NOW_1994), b"Monday, 06-Nov-94 08:49:37 GMT", None),
    (Ra(NOW_1994), b"sunday, 06-Nov-94 08:49:37 GMT", None),
    (Ra(NOW_1994), b"Sunday, 06-Nov-1994 08:49:37 GMT", None),
    (Ra(NOW_1994), b"Sunday, 06-Nov-94 08:49:37", None),
    (Ra(NOW_1994), b"Sunday, 06 Nov 94 08:49:37 GMT", None),
    // Exactly 50 years ahead is not "more than 50 years": 2076.
    (Ra(NOW_2026), b"Sunday, 29-Nov-76 21:00:00 GMT", secs(3_373_909_200 - NOW_2026)),
    // One second more is: 1976 (a Monday), in the past.
    (Ra(NOW_2026), b"Monday, 29-Nov-76 21:00:01 GMT", ZERO),
    (Ra(NOW_2026), b"Sunday, 29-Nov-76 21:00:01 GMT", None),
    (Ra(NOW_2026), b"Saturday, 01-Jan-77 00:00:00 GMT", ZERO),
    (Ra(NOW_2026), b"Friday, 01-Jan-77 00:00:00 GMT", None),
    (Ra(NOW_2026), b"Saturday, 01-Jan-00 00:00:00 GMT", ZERO),
    // Near the end of a century "01" is two years ahead, not 98 years back.
    (Ra(NOW_2099), b"Saturday, 01-Jan-01 00:00:00 GMT", secs(4_133_980_800 - NOW_2099)),
    (Ra(NOW_2099), b"Monday, 01-Jan-01 00:00:00 GMT", None),
    (Ra(u64::MAX), b"Sunday, 06-Nov-94 08:49:37 GMT", None),
    // ---- Retry-After: asctime
    (Ra(0), b"Sun Nov  6 08:49:37 1994", secs(NOW_1994)),
    (Ra(0), b"Sun Nov 06 08:49:37 1994", secs(NOW_1994)),
    (Ra(NOW_1994), b"Sun Nov  6 08:49:47 1994", secs(10)),
    (Ra(0), b"Sun Nov 6 08:49:37 1994", None),
    (Ra(0), b"Sun Nov  0 08:49:37 1994", None),
    (Ra(0), b"Mon Nov  6 08:49:37 1994", None),
    (Ra(0), b"Sun Nov  6 08:49:37 1994 GMT", None),
    (Ra(0), b"Sun Nov  6 08:49:37 94", None),
    (Ra(0), b"Wed Dec 31 23:59:59 1969", ZERO),
    (Ra(0), b"Fri Dec 31 23:59:59 9999", secs(LAST_DATE)),
    // ---- retry-after-ms
    (Ms, b"1500", millis(1500)),
    (Ms, b"0", ZERO),
    (Ms, b"1.5", nanos(1_500_000)),
    (Ms, b"0.25", nanos(250_000)),
    (Ms, b" 2.000001 ", nanos(2_000_001)),
    (Ms, b"0.0000019", nanos(1)),
    (Ms, b"0.123456789", nanos(123_456)),
    (Ms, b"1.5x", None),
    (Ms, b".5", None),
    (Ms, b"5.", None),
    (Ms, b"1.2.3", None),
    (Ms, b"", None),
    (Ms, b" ", None),
    (Ms, b"-1", None),
    (Ms, b"-0.5", None),
    (Ms, b"+1", None),
    (Ms, b"1e3", None),
    (Ms, b"NaN", None),
    (Ms, b"inf", None),
    (Ms, b"Infinity", None),
    (Ms, b"\xff\xfe", None),
    (Ms, "１２".as_bytes(), None),
    (Ms, b"1234567890123456789012345678901234567890", MAX),
    (Ms, b"1234567890123456789012345678901234567890.5", MAX),
    (Ms, b"18446744073709551616", Some(Duration::new(18_446_744_073_709_551, 616_000_000))),
    // ---- grpc-retry-pushback-ms
    (Grpc, b"0", ZERO),
    (Grpc, b"250", millis(250)),
    (Grpc, b" 1000 ", millis(1000)),
    (Grpc, b"-1", None),
    (Grpc, b"-0", None),
    (Grpc, b"+5", None),
    (Grpc, b"1.5", None),
    (Grpc, b"", None),
    (Grpc, b"abc", None),
    (Grpc, b"\xff", None),
    (Grpc, b"1234567890123456789012345678901234567890", MAX),
];

#[test]
fn header_table() {
    assert!(CASES.len() >= 60, "only {} cases", CASES.len());
    let mut failures = Vec::new();
    for (header, value, want) in CASES {
        let got = match header {
            Ra(now) => parse_retry_after(value, *now),
            Ms => parse_retry_after_ms(value),
            Grpc => match parse_grpc_pushback(value) {
                Pushback::RetryAfter(d) => Some(d),
                Pushback::Stop => None,
            },
        };
        if got != *want {
            failures.push(format!(
                "{header:?} {:?}: got {got:?}, want {want:?}",
                String::from_utf8_lossy(value)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn pushback_stop_is_distinct_from_zero() {
    assert_eq!(parse_grpc_pushback(b"-5"), Pushback::Stop);
    assert_eq!(
        parse_grpc_pushback(b"0"),
        Pushback::RetryAfter(Duration::ZERO)
    );
}

#[test]
fn retry_after_ms_takes_precedence() {
    let ms: Option<&[u8]> = Some(b"1.5");
    let ra: Option<&[u8]> = Some(b"30");
    let date: Option<&[u8]> = Some(b"Sun, 06 Nov 1994 08:50:37 GMT");
    let bad: Option<&[u8]> = Some(b"soon");
    let d = Duration::from_micros(1500);
    assert_eq!(retry_after_from_headers(ms, ra, 0), Some(d));
    assert_eq!(retry_after_from_headers(ms, bad, 0), Some(d));
    assert_eq!(retry_after_from_headers(ms, None, 0), Some(d));
    assert_eq!(
        retry_after_from_headers(bad, ra, 0),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        retry_after_from_headers(Some(b"-1"), ra, 0),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        retry_after_from_headers(None, date, NOW_1994),
        Some(Duration::from_secs(60))
    );
    assert_eq!(
        retry_after_from_headers(Some(b"0"), ra, 0),
        Some(Duration::ZERO)
    );
    assert_eq!(retry_after_from_headers(bad, bad, 0), None);
    assert_eq!(retry_after_from_headers(None, None, 0), None);
}

#[test]
fn format_round_trips_and_clamps() {
    let mut out = [0u8; 29];
    for secs in [0, 1, NOW_1994, 951_782_400, 1_709_208_000, LAST_DATE] {
        format_http_date(secs, &mut out);
        assert_eq!(parse_http_date(&out, 0), Some(secs as i64));
        let expected = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(&out[..], expected.as_bytes());
    }
    format_http_date(u64::MAX, &mut out);
    assert_eq!(&out, b"Fri, 31 Dec 9999 23:59:59 GMT");
}

fn system_time(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

#[test]
fn imf_fixdate_agrees_with_httpdate() {
    fn prop(raw: u64) -> bool {
        let secs = raw % (LAST_DATE + 1);
        let text = httpdate::fmt_http_date(system_time(secs));
        parse_http_date(text.as_bytes(), 0) == Some(secs as i64)
            && parse_retry_after(text.as_bytes(), 0) == Some(Duration::from_secs(secs))
            && parse_retry_after(text.as_bytes(), secs) == Some(Duration::ZERO)
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(u64) -> bool);
}

/// Whether `httpdate` accepts `bytes` (it reads `&str`, so non-UTF-8 is a no).
fn httpdate_parse(bytes: &[u8]) -> Option<i64> {
    let text = core::str::from_utf8(bytes).ok()?;
    let time = httpdate::parse_http_date(text).ok()?;
    Some(time.duration_since(UNIX_EPOCH).ok()?.as_secs() as i64)
}

/// Compares acceptance and value. Where only this crate accepts, the reason
/// must be one of its documented, deliberate differences from `httpdate`:
///
/// * years before 1970 parse here (a past date, so `Retry-After` gives zero);
///   `httpdate` rejects them because it returns a `SystemTime` after the epoch;
/// * a leap second `:60` is read as `:59` here; `httpdate` rejects it.
///
/// Differences that these generators do not reach, noted for completeness:
/// `httpdate` trims Unicode whitespace after checking the input is ASCII, so it
/// also strips a vertical tab (0x0B), which `u8::is_ascii_whitespace` does not;
/// and `httpdate` maps RFC 850 years 00-69 to 20xx and 70-99 to 19xx, while this
/// crate applies RFC 9110's 50-year rule relative to `now`.
fn agrees(bytes: &[u8]) -> bool {
    let ours = parse_http_date(bytes, 0);
    match (ours, httpdate_parse(bytes)) {
        (Some(a), Some(b)) => a == b,
        (None, None) => true,
        (None, Some(_)) => false,
        (Some(a), None) => a < 0 || bytes.windows(4).any(|w| w == b":60 "),
    }
}

#[test]
fn random_bytes_never_panic_and_agree_with_httpdate() {
    fn prop(bytes: Vec<u8>) -> bool {
        let _ = parse_retry_after(&bytes, 0);
        let _ = parse_retry_after(&bytes, u64::MAX);
        let _ = parse_retry_after_ms(&bytes);
        let _ = parse_grpc_pushback(&bytes);
        agrees(&bytes)
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(Vec<u8>) -> bool);
}

#[test]
fn mutated_dates_agree_with_httpdate() {
    const ALPHABET: &[u8] = b"0123456789 ,:-GMTSunMonTueWedThuFriSatJanFebNovDec\t\xff";
    fn prop(raw: u64, edits: Vec<(u8, u8)>) -> bool {
        let secs = raw % (LAST_DATE + 1);
        let mut bytes = httpdate::fmt_http_date(system_time(secs)).into_bytes();
        for (at, with) in edits.into_iter().take(3) {
            let at = usize::from(at) % bytes.len();
            bytes[at] = ALPHABET[usize::from(with) % ALPHABET.len()];
        }
        let _ = parse_retry_after(&bytes, secs);
        agrees(&bytes)
    }
    QuickCheck::new()
        .tests(10_000)
        .quickcheck(prop as fn(u64, Vec<(u8, u8)>) -> bool);
}

#[test]
fn the_three_forms_agree() {
    let forms: [&[u8]; 3] = [
        b"Sun, 06 Nov 1994 08:49:37 GMT",
        b"Sunday, 06-Nov-94 08:49:37 GMT",
        b"Sun Nov  6 08:49:37 1994",
    ];
    for form in forms {
        assert_eq!(parse_http_date(form, NOW_1994), Some(NOW_1994 as i64));
        assert_eq!(httpdate_parse(form), Some(NOW_1994 as i64));
    }
}

#[test]
fn documented_differences_from_httpdate() {
    let pre_epoch: &[u8] = b"Wed, 31 Dec 1969 23:59:59 GMT";
    let leap: &[u8] = b"Sun, 06 Nov 1994 08:49:60 GMT";
    for value in [pre_epoch, leap] {
        assert_eq!(httpdate_parse(value), None);
        assert!(parse_http_date(value, 0).is_some());
        assert!(agrees(value));
    }
    // RFC 850 "69": httpdate says 2069; with now in 1994 the 50-year rule says 1969.
    let rfc850: &[u8] = b"Monday, 01-Jan-69 00:00:00 GMT";
    assert_eq!(parse_http_date(rfc850, NOW_1994), None); // 1969-01-01 was a Wednesday
    let rfc850: &[u8] = b"Wednesday, 01-Jan-69 00:00:00 GMT";
    assert_eq!(parse_http_date(rfc850, NOW_1994), Some(-31_536_000));
    assert_eq!(httpdate_parse(rfc850), None);
}
