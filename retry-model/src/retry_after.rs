//! The retry-header parsers against their documented grammar.
//!
//! Feeds arbitrary header bytes and an arbitrary wall-clock `now` to the
//! `Retry-After`, `retry-after-ms`, gRPC pushback and HTTP-date parsers. A
//! delta-seconds value is read here by its own small reader; every value parsed is
//! written back out and must parse to itself; an HTTP-date must lie in the
//! calendar's range, not depend on `now` unless its year has two digits, and
//! survive `format_http_date`, which must round-trip through all three date forms.

use core::fmt;
use core::time::Duration;

use arbitrary::Unstructured;
use retry_core::{
    format_http_date, parse_grpc_pushback, parse_http_date, parse_retry_after,
    parse_retry_after_ms, retry_after_from_headers, Pushback,
};

use crate::shared::{ensure, Text, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "retry_after";

/// `9999-12-31T23:59:59Z`: the last second an HTTP-date can name.
const LAST_HTTP_DATE: u64 = 253_402_300_799;
/// `0000-01-01T00:00:00Z`: the first.
const FIRST_HTTP_DATE: i64 = -62_167_219_200;
/// A little over fifty years, for the two-digit-year window.
const FIFTY_YEARS_AND_A_BIT: i64 = 51 * 366 * 86_400;

/// Digits-only (after trimming) as a number of seconds, saturating as the
/// parser documents.
fn delta_seconds(value: &[u8]) -> Option<Duration> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut secs: u128 = 0;
    for b in value {
        secs = secs
            .saturating_mul(10)
            .saturating_add(u128::from(b.wrapping_sub(b'0')));
    }
    Some(u64::try_from(secs).map_or(Duration::MAX, Duration::from_secs))
}

/// The IMF-fixdate of `secs` as text, if it can be written.
fn imf(secs: u64) -> [u8; 29] {
    let mut out = [0u8; 29];
    format_http_date(secs, &mut out);
    out
}

/// The parts of an IMF-fixdate: weekday, day, month, year, time.
fn imf_parts(d: &[u8; 29]) -> [&[u8]; 5] {
    let part = |r: core::ops::Range<usize>| d.get(r).unwrap_or(&[]);
    [
        part(0..3),
        part(5..7),
        part(8..11),
        part(12..16),
        part(17..25),
    ]
}

fn long_day(short: &[u8]) -> &'static [u8] {
    match short {
        b"Sun" => b"Sunday",
        b"Mon" => b"Monday",
        b"Tue" => b"Tuesday",
        b"Wed" => b"Wednesday",
        b"Thu" => b"Thursday",
        b"Fri" => b"Friday",
        _ => b"Saturday",
    }
}

fn check_format_round_trip(secs: u64, now: u64, step: usize) -> Result<(), Violation> {
    let check = |ok, invariant| ensure(ok, TARGET, step, invariant);
    let date = imf(secs);
    check(
        date.iter().all(|b| b.is_ascii_graphic() || *b == b' '),
        "format_http_date wrote a byte outside printable ASCII",
    )?;
    if secs > LAST_HTTP_DATE {
        return check(
            date == imf(LAST_HTTP_DATE),
            "a time past 9999 is not clamped",
        );
    }
    let expected = i64::try_from(secs).ok();
    check(
        parse_http_date(&date, now) == expected,
        "format_http_date then parse_http_date is not the identity",
    )?;
    let [day_name, day, month, year, time] = imf_parts(&date);
    // asctime, space-padded and zero-padded.
    let mut asctime = Text::<32>::new();
    let mut zero = Text::<32>::new();
    let day_padded: [u8; 2] = match day {
        [b'0', d] => [b' ', *d],
        [a, b] => [*a, *b],
        _ => [b' ', b' '],
    };
    for (text, day) in [(&mut asctime, &day_padded[..]), (&mut zero, day)] {
        for part in [day_name, b" ", month, b" ", day, b" ", time, b" ", year] {
            let _ = text.push(part);
        }
    }
    check(
        parse_http_date(asctime.as_bytes(), now) == expected,
        "asctime of a formatted date does not parse back",
    )?;
    check(
        parse_http_date(zero.as_bytes(), now) == expected,
        "zero-padded asctime does not parse back",
    )?;
    // RFC 850 with a two-digit year: exact when read relative to the date itself.
    let mut rfc850 = Text::<40>::new();
    for part in [
        long_day(day_name),
        b", ",
        day,
        b"-",
        month,
        b"-",
        year.get(2..4).unwrap_or(&[]),
        b" ",
        time,
        b" GMT",
    ] {
        let _ = rfc850.push(part);
    }
    check(
        parse_http_date(rfc850.as_bytes(), secs) == expected,
        "RFC 850 date read relative to itself is not the date",
    )?;
    if let Some(t) = parse_http_date(rfc850.as_bytes(), now) {
        let now_i = i64::try_from(now).unwrap_or(i64::MAX);
        check(
            t > now_i.saturating_sub(FIFTY_YEARS_AND_A_BIT)
                && t <= now_i.saturating_add(FIFTY_YEARS_AND_A_BIT),
            "RFC 850 year not within fifty years of now",
        )?;
        if let Ok(t) = u64::try_from(t) {
            let other = imf(t);
            let [n2, d2, m2, y2, t2] = imf_parts(&other);
            check(
                (n2, d2, m2, t2) == (day_name, day, month, time) && y2.get(2..4) == year.get(2..4),
                "RFC 850 date resolved to a different day or time",
            )?;
        }
    }
    Ok(())
}

/// Feeds arbitrary header bytes and an arbitrary wall-clock `now` to every
/// header parser. Checks: no panic; delta-seconds and `retry-after-ms` values
/// written back out parse to the same value; gRPC pushback agrees with
/// `retry-after-ms`; a parsed HTTP-date is in the calendar's range, does not
/// depend on `now` unless it has a two-digit year, and survives
/// `format_http_date`; `format_http_date` round-trips through all three date
/// forms for any in-range second.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    let now: u64 = match u.int_in_range(0..=3u8).unwrap_or(0) {
        0 => u.arbitrary().unwrap_or(0),
        _ => u.int_in_range(0..=LAST_HTTP_DATE).unwrap_or(0),
    };
    let secs: u64 = u.arbitrary().unwrap_or(0);
    let other_now: u64 = u.arbitrary().unwrap_or(0);
    let header = u.take_rest();
    let check = |ok, step, invariant| ensure(ok, TARGET, step, invariant);
    let trimmed = header.trim_ascii();

    // Retry-After: delta-seconds or a date.
    let parsed = parse_retry_after(header, now);
    match delta_seconds(trimmed) {
        Some(d) => {
            check(
                parsed == Some(d),
                1,
                "delta-seconds parsed to another value",
            )?;
            let mut text = Text::<24>::new();
            let _ = fmt::write(&mut text, format_args!("{}", d.as_secs()));
            check(
                parse_retry_after(text.as_bytes(), now) == Some(Duration::from_secs(d.as_secs())),
                1,
                "delta-seconds written back does not parse to the same value",
            )?;
        }
        None => {
            let from_date = parse_http_date(header, now).map(|t| {
                let ahead = u64::try_from(t)
                    .ok()
                    .and_then(|t| t.checked_sub(now))
                    .unwrap_or(0);
                Duration::from_secs(ahead)
            });
            check(
                parsed == from_date,
                1,
                "Retry-After date is not the date minus now",
            )?;
        }
    }

    // retry-after-ms: written back with six decimals, it parses to itself.
    let ms = parse_retry_after_ms(header);
    if let Some(d) = ms {
        check(
            !trimmed.is_empty() && trimmed.iter().all(|b| b.is_ascii_digit() || *b == b'.'),
            2,
            "retry-after-ms accepted a byte that is neither a digit nor a point",
        )?;
        let nanos = d.as_nanos();
        let whole = nanos.checked_div(1_000_000).unwrap_or(0);
        let part = nanos.checked_rem(1_000_000).unwrap_or(0);
        let mut text = Text::<48>::new();
        let _ = fmt::write(&mut text, format_args!("{whole}.{part:06}"));
        check(
            parse_retry_after_ms(text.as_bytes()) == Some(d),
            2,
            "retry-after-ms written back does not parse to the same value",
        )?;
    }
    if delta_seconds(trimmed).is_some() {
        check(ms.is_some(), 2, "retry-after-ms refused plain digits")?;
    }

    // grpc-retry-pushback-ms: digits are a delay, anything else is a stop.
    match parse_grpc_pushback(header) {
        Pushback::RetryAfter(d) => {
            check(
                delta_seconds(trimmed).is_some(),
                3,
                "pushback accepted something besides digits",
            )?;
            check(
                ms == Some(d),
                3,
                "pushback and retry-after-ms disagree on plain digits",
            )?;
        }
        Pushback::Stop => check(
            delta_seconds(trimmed).is_none(),
            3,
            "pushback refused plain digits",
        )?,
    }
    check(
        retry_after_from_headers(Some(header), Some(header), now) == ms.or(parsed),
        3,
        "retry_after_from_headers does not prefer retry-after-ms",
    )?;
    check(
        retry_after_from_headers(None, Some(header), now) == parsed,
        3,
        "retry_after_from_headers without retry-after-ms is not Retry-After",
    )?;

    // HTTP-date.
    if let Some(t) = parse_http_date(header, now) {
        check(
            (FIRST_HTTP_DATE..=253_402_300_799).contains(&t),
            4,
            "a parsed date outside years 0 to 9999",
        )?;
        if !trimmed.contains(&b'-') {
            check(
                parse_http_date(header, other_now) == Some(t),
                4,
                "a date without a two-digit year depends on now",
            )?;
        }
        if let Ok(t) = u64::try_from(t) {
            let again = imf(t);
            check(
                parse_http_date(&again, other_now) == i64::try_from(t).ok(),
                4,
                "a parsed date does not survive formatting",
            )?;
            if trimmed.len() == 29 {
                // Only an IMF-fixdate is 29 bytes long; it formats back as written,
                // but for a leap second, which reads as :59.
                let mut expected = [0u8; 29];
                expected.copy_from_slice(trimmed);
                if expected.get(23..25) == Some(b"60") {
                    if let Some(s) = expected.get_mut(23..25) {
                        s.copy_from_slice(b"59");
                    }
                }
                check(
                    again == expected,
                    4,
                    "an IMF-fixdate does not format back as written",
                )?;
            }
        }
    }

    // format_http_date for any second, and for one inside the calendar.
    check_format_round_trip(secs, now, 5)?;
    check_format_round_trip(
        secs.checked_rem(LAST_HTTP_DATE.saturating_add(1))
            .unwrap_or(0),
        now,
        6,
    )?;
    Ok(())
}
