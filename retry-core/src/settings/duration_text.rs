//! Human-readable durations, parsed and written without allocating.
//!
//! # Grammar
//!
//! A duration is one or more *components*, each a whole number followed by a
//! unit, with no spaces between them: `"1m30s"`, `"500ms"`, `"2h"`, `"1d"`.
//!
//! | unit | meaning |
//! |---|---|
//! | `d` | day (86 400 s) |
//! | `h` | hour |
//! | `m` | minute |
//! | `s` | second |
//! | `ms` | millisecond |
//! | `us`, `µs`, `μs` | microsecond |
//! | `ns` | nanosecond |
//!
//! - Units appear in descending order, each at most once (`"30s1m"` and `"1s2s"`
//!   are errors).
//! - The last component may carry a decimal fraction (`"1.5s"`, `"1m0.25s"`). It
//!   must come to a whole number of nanoseconds; `"0.1ns"` is an error, never
//!   silently rounded.
//! - A bare number (no unit) has one rule: **it is never seconds.** In configs
//!   (the serde forms and [`parse_duration`]) a bare whole number is
//!   milliseconds: `1500` and `"1500"` are 1.5 s. Where a person types a duration
//!   on a command line ([`parse_duration_with`] and [`BareNumber::Refused`]), a
//!   bare number other than `0` is an error whose message shows both spellings,
//!   `2s` and `2ms`: habits from `sleep 2` would read it as seconds there, and a
//!   value moved between a flag and a config file must never change 1000-fold
//!   without a word.
//! - No sign; surrounding whitespace is ignored, inner whitespace is an error.
//! - Anything past [`Duration::MAX`] is an [`DurationParseError::Overflow`] error:
//!   values never saturate.
//!
//! # Canonical form
//!
//! [`DurationText`] writes every non-zero component from days down to
//! nanoseconds, in whole numbers: 90 s is `"1m30s"`, 1.5 s is `"1s500ms"`,
//! zero is `"0s"`. Parsing the canonical form gives back the same duration, for
//! every [`Duration`].
//!
//! ```
//! use core::time::Duration;
//! use retry_core::duration_text::{parse_duration, DurationText};
//!
//! assert_eq!(parse_duration("1m30s")?, Duration::from_secs(90));
//! assert_eq!(parse_duration("1.5s")?, Duration::from_millis(1500));
//! assert_eq!(parse_duration("1500")?, Duration::from_millis(1500));
//! assert_eq!(DurationText(Duration::from_millis(1500)).to_string(), "1s500ms");
//! assert!(parse_duration("1m30").is_err());
//! # Ok::<(), retry_core::duration_text::DurationParseError>(())
//! ```

use core::fmt;
use core::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Why a duration string was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DurationParseError {
    /// The text was empty or only whitespace.
    Empty,
    /// The text began with `+` or `-`: durations have no sign.
    Signed,
    /// A component did not start with a digit, or a `.` had no digits after it.
    BadNumber,
    /// A number was not followed by a unit (only a lone whole number may omit it).
    MissingUnit,
    /// A unit other than `d`, `h`, `m`, `s`, `ms`, `us`/`µs`, `ns`.
    UnknownUnit,
    /// Whitespace between the components or inside one.
    InnerWhitespace,
    /// A unit repeated or out of descending order.
    OutOfOrder,
    /// A decimal fraction on a component other than the last.
    FractionNotLast,
    /// A fraction finer than one nanosecond.
    TooPrecise,
    /// The value is larger than [`Duration::MAX`].
    Overflow,
    /// A number without a unit where [`BareNumber::Refused`] asks for one.
    BareNumber,
}

/// How a number written without a unit is read (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BareNumber {
    /// A bare whole number is milliseconds (configs).
    #[default]
    Millis,
    /// A bare number other than `0` is [`DurationParseError::BareNumber`]
    /// (command lines).
    Refused,
}

impl fmt::Display for DurationParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DurationParseError::Empty => "empty duration",
            DurationParseError::Signed => "a duration has no sign",
            DurationParseError::BadNumber => "expected a number such as `90s` or `1.5s`",
            DurationParseError::MissingUnit => {
                "a number without a unit (units: d, h, m, s, ms, us, ns; only a lone whole number may omit it, meaning milliseconds)"
            }
            DurationParseError::UnknownUnit => {
                "unknown unit (expected one of d, h, m, s, ms, us, µs, ns)"
            }
            DurationParseError::InnerWhitespace => "whitespace inside a duration",
            DurationParseError::OutOfOrder => {
                "units must appear once each, largest first (as in `1h2m3s`)"
            }
            DurationParseError::FractionNotLast => {
                "only the last component may have a fraction"
            }
            DurationParseError::TooPrecise => "a fraction finer than one nanosecond",
            DurationParseError::Overflow => "larger than the longest duration (Duration::MAX)",
            DurationParseError::BareNumber => {
                "a number needs a unit here: `s` for seconds or `ms` for milliseconds (as in `2s` or `2ms`)"
            }
        })
    }
}

impl core::error::Error for DurationParseError {}

/// The units, largest first, with their length in nanoseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Unit {
    Nanos,
    Micros,
    Millis,
    Secs,
    Mins,
    Hours,
    Days,
}

impl Unit {
    fn from_text(text: &str) -> Option<Unit> {
        Some(match text {
            "d" => Unit::Days,
            "h" => Unit::Hours,
            "m" => Unit::Mins,
            "s" => Unit::Secs,
            "ms" => Unit::Millis,
            "us" | "\u{b5}s" | "\u{3bc}s" => Unit::Micros,
            "ns" => Unit::Nanos,
            _ => return None,
        })
    }

    const fn nanos(self) -> u128 {
        match self {
            Unit::Nanos => 1,
            Unit::Micros => 1_000,
            Unit::Millis => 1_000_000,
            Unit::Secs => NANOS_PER_SEC,
            Unit::Mins => 60 * NANOS_PER_SEC,
            Unit::Hours => 3_600 * NANOS_PER_SEC,
            Unit::Days => 86_400 * NANOS_PER_SEC,
        }
    }
}

/// Parses a human duration (see the [module docs](self) for the grammar); a bare
/// whole number is milliseconds.
///
/// # Errors
/// A [`DurationParseError`] saying what is wrong with the text.
pub fn parse_duration(text: &str) -> Result<Duration, DurationParseError> {
    parse_duration_with(text, BareNumber::Millis)
}

/// Parses a human duration, reading a bare number as `bare` says.
///
/// ```
/// use core::time::Duration;
/// use retry_core::duration_text::{parse_duration_with, BareNumber, DurationParseError};
///
/// assert_eq!(parse_duration_with("1500", BareNumber::Millis), Ok(Duration::from_millis(1500)));
/// assert_eq!(parse_duration_with("2", BareNumber::Refused), Err(DurationParseError::BareNumber));
/// assert_eq!(parse_duration_with("1.5", BareNumber::Refused), Err(DurationParseError::BareNumber));
/// assert_eq!(parse_duration_with("0", BareNumber::Refused), Ok(Duration::ZERO));
/// assert_eq!(parse_duration_with("2s", BareNumber::Refused), Ok(Duration::from_secs(2)));
/// ```
///
/// # Errors
/// A [`DurationParseError`] saying what is wrong with the text.
pub fn parse_duration_with(text: &str, bare: BareNumber) -> Result<Duration, DurationParseError> {
    let s = text.trim();
    if bare == BareNumber::Refused && is_bare_number(s) {
        // Zero is zero in every unit.
        return if s.bytes().all(|b| b == b'0' || b == b'.') {
            Ok(Duration::ZERO)
        } else {
            Err(DurationParseError::BareNumber)
        };
    }
    if s.is_empty() {
        return Err(DurationParseError::Empty);
    }
    if s.starts_with(['+', '-']) {
        return Err(DurationParseError::Signed);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        let ms = digits(s)?;
        return to_duration(ms.checked_mul(Unit::Millis.nanos()));
    }
    let mut rest = s;
    let mut total: u128 = 0;
    let mut previous: Option<Unit> = None;
    let mut had_fraction = false;
    while !rest.is_empty() {
        if had_fraction {
            return Err(DurationParseError::FractionNotLast);
        }
        let (whole, after) = split_digits(rest);
        if whole.is_empty() {
            return Err(if rest.starts_with(char::is_whitespace) {
                DurationParseError::InnerWhitespace
            } else {
                DurationParseError::BadNumber
            });
        }
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after_dot) => {
                let (fraction, after) = split_digits(after_dot);
                if fraction.is_empty() {
                    return Err(DurationParseError::BadNumber);
                }
                had_fraction = true;
                (fraction, after)
            }
            None => ("", after),
        };
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit_text, next) = after
            .split_at_checked(unit_len)
            .ok_or(DurationParseError::BadNumber)?;
        if unit_text.is_empty() {
            return Err(DurationParseError::MissingUnit);
        }
        if unit_text.contains(char::is_whitespace) {
            return Err(DurationParseError::InnerWhitespace);
        }
        let unit = Unit::from_text(unit_text).ok_or(DurationParseError::UnknownUnit)?;
        if previous.is_some_and(|p| unit >= p) {
            return Err(DurationParseError::OutOfOrder);
        }
        previous = Some(unit);
        let part = digits(whole)?
            .checked_mul(unit.nanos())
            .ok_or(DurationParseError::Overflow)?;
        let part = part
            .checked_add(fraction_nanos(fraction, unit)?)
            .ok_or(DurationParseError::Overflow)?;
        total = total
            .checked_add(part)
            .ok_or(DurationParseError::Overflow)?;
        rest = next;
    }
    to_duration(Some(total))
}

/// Digits with at most one `.` between digits: a number with no unit at all.
fn is_bare_number(s: &str) -> bool {
    let (whole, rest) = split_digits(s);
    if whole.is_empty() {
        return false;
    }
    match rest.strip_prefix('.') {
        None => rest.is_empty(),
        Some(fraction) => !fraction.is_empty() && fraction.bytes().all(|b| b.is_ascii_digit()),
    }
}

/// Splits off the leading ASCII digits.
fn split_digits(s: &str) -> (&str, &str) {
    let n = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s.split_at_checked(n).unwrap_or((s, ""))
}

/// A string of ASCII digits as a number (an overflow is an error).
fn digits(s: &str) -> Result<u128, DurationParseError> {
    s.chars().try_fold(0u128, |acc, c| {
        let d = c.to_digit(10).ok_or(DurationParseError::BadNumber)?;
        acc.checked_mul(10)
            .and_then(|a| a.checked_add(u128::from(d)))
            .ok_or(DurationParseError::Overflow)
    })
}

/// The nanoseconds in `0.<fraction>` of `unit`, which must be a whole number.
fn fraction_nanos(fraction: &str, unit: Unit) -> Result<u128, DurationParseError> {
    let significant = fraction.trim_end_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    // A day is 2^16 · 5^11 · 27 ns, so a fraction with more than 16 significant
    // decimals can never come to whole nanoseconds; stopping here also keeps the
    // arithmetic below inside u128.
    let places = u32::try_from(significant.len()).unwrap_or(u32::MAX);
    if places > 16 {
        return Err(DurationParseError::TooPrecise);
    }
    let scale = 10u128
        .checked_pow(places)
        .ok_or(DurationParseError::TooPrecise)?;
    let scaled = digits(significant)?
        .checked_mul(unit.nanos())
        .ok_or(DurationParseError::Overflow)?;
    match (scaled.checked_div(scale), scaled.checked_rem(scale)) {
        (Some(n), Some(0)) => Ok(n),
        _ => Err(DurationParseError::TooPrecise),
    }
}

/// Whole nanoseconds to a `Duration`; `None` or a value past the maximum is an
/// overflow.
fn to_duration(nanos: Option<u128>) -> Result<Duration, DurationParseError> {
    let n = nanos.ok_or(DurationParseError::Overflow)?;
    let secs = n.checked_div(NANOS_PER_SEC).unwrap_or(0);
    let sub = n.checked_rem(NANOS_PER_SEC).unwrap_or(0);
    match (u64::try_from(secs), u32::try_from(sub)) {
        (Ok(secs), Ok(sub)) => Ok(Duration::new(secs, sub)),
        _ => Err(DurationParseError::Overflow),
    }
}

/// Writes a [`Duration`] in the canonical form (see the [module docs](self)):
/// every non-zero unit from days to nanoseconds, or `"0s"`.
///
/// ```
/// use core::time::Duration;
/// use retry_core::duration_text::DurationText;
///
/// assert_eq!(DurationText(Duration::from_secs(90)).to_string(), "1m30s");
/// assert_eq!(DurationText(Duration::from_millis(500)).to_string(), "500ms");
/// assert_eq!(DurationText(Duration::ZERO).to_string(), "0s");
/// assert_eq!(DurationText(Duration::new(86_401, 2_000)).to_string(), "1d1s2us");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DurationText(pub Duration);

impl fmt::Display for DurationText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        let secs = d.as_secs();
        let sub = d.subsec_nanos();
        let split = |n: u64, by: u64| {
            (
                n.checked_div(by).unwrap_or(0),
                n.checked_rem(by).unwrap_or(0),
            )
        };
        let (days, secs) = split(secs, 86_400);
        let (hours, secs) = split(secs, 3_600);
        let (mins, secs) = split(secs, 60);
        let (ms, sub) = split(u64::from(sub), 1_000_000);
        let (us, ns) = split(sub, 1_000);
        let parts = [
            (days, "d"),
            (hours, "h"),
            (mins, "m"),
            (secs, "s"),
            (ms, "ms"),
            (us, "us"),
            (ns, "ns"),
        ];
        for (n, unit) in parts {
            if n != 0 {
                write!(f, "{n}{unit}")?;
            }
        }
        Ok(())
    }
}

/// Visits a duration written as text or as whole milliseconds.
struct DurationVisitor;

impl serde::de::Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"1m30s\" or \"500ms\", or whole milliseconds")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map_err(|e| E::custom(format_args!("invalid duration `{v}`: {e}")))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
        Ok(Duration::from_millis(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
        u64::try_from(v)
            .map(Duration::from_millis)
            .map_err(|_| E::custom(format_args!("a duration cannot be negative, got {v}")))
    }
}

/// Serde helpers for `#[serde(with = "...")]`: a [`Duration`] is written in the
/// canonical text form and read from text or whole milliseconds.
///
/// Reading calls `deserialize_any`, so it needs a self-describing format (JSON,
/// TOML, YAML and the like).
///
/// ```
/// use core::time::Duration;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, PartialEq, Debug)]
/// struct Settings {
///     #[serde(with = "retry_core::duration_text::human")]
///     poll: Duration,
///     #[serde(default, with = "retry_core::duration_text::human::option")]
///     grace: Option<Duration>,
/// }
///
/// let s: Settings = serde_json::from_str(r#"{ "poll": "1m30s", "grace": 250 }"#)?;
/// assert_eq!(s.poll, Duration::from_secs(90));
/// assert_eq!(s.grace, Some(Duration::from_millis(250)));
/// assert_eq!(serde_json::to_string(&s)?, r#"{"poll":"1m30s","grace":"250ms"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub mod human {
    use core::time::Duration;

    use serde::{Deserializer, Serializer};

    use super::{DurationText, DurationVisitor};

    /// Writes the duration as canonical text.
    ///
    /// # Errors
    /// Whatever the serializer reports.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&DurationText(*d))
    }

    /// Reads a duration from text or whole milliseconds.
    ///
    /// # Errors
    /// A malformed or negative duration, or a value of another type.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor)
    }

    /// The same for `Option<Duration>` (pair it with `#[serde(default)]` so that
    /// a missing field reads as `None`). `None` is written as the format's null.
    pub mod option {
        use core::fmt;
        use core::time::Duration;

        use serde::{Deserializer, Serializer};

        use super::super::{DurationText, DurationVisitor};

        /// Writes `Some` as canonical text and `None` as null.
        ///
        /// # Errors
        /// Whatever the serializer reports.
        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.collect_str(&DurationText(*d)),
                None => s.serialize_none(),
            }
        }

        /// Reads null as `None`, anything else as a duration.
        ///
        /// # Errors
        /// A malformed or negative duration, or a value of another type.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            d.deserialize_option(OptionVisitor)
        }

        struct OptionVisitor;

        impl<'de> serde::de::Visitor<'de> for OptionVisitor {
            type Value = Option<Duration>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an optional duration")
            }

            fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }

            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }

            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(DurationVisitor).map(Some)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        let ok = |s: &str| parse_duration(s).unwrap();
        assert_eq!(ok("250us"), Duration::from_micros(250));
        assert_eq!(ok("250µs"), Duration::from_micros(250));
        assert_eq!(ok(" 1d "), Duration::from_secs(86_400));
        assert_eq!(ok("1m0.25s"), Duration::from_millis(60_250));
        assert_eq!(
            ok("1.50000000000000000000000s"),
            Duration::from_millis(1500)
        );
        let err = |s: &str| parse_duration(s).unwrap_err();
        assert_eq!(err(""), DurationParseError::Empty);
        assert_eq!(err("-5s"), DurationParseError::Signed);
        assert_eq!(err("1m30"), DurationParseError::MissingUnit);
        assert_eq!(err("1.5"), DurationParseError::MissingUnit);
        assert_eq!(err("5 s"), DurationParseError::InnerWhitespace);
        assert_eq!(err("1m 30s"), DurationParseError::InnerWhitespace);
        assert_eq!(err("5x"), DurationParseError::UnknownUnit);
        assert_eq!(err("30s1m"), DurationParseError::OutOfOrder);
        assert_eq!(err("1s1s"), DurationParseError::OutOfOrder);
        assert_eq!(err("1.5m30s"), DurationParseError::FractionNotLast);
        assert_eq!(err("1.s"), DurationParseError::BadNumber);
        assert_eq!(err(".5s"), DurationParseError::BadNumber);
        assert_eq!(err("0.1ns"), DurationParseError::TooPrecise);
        assert_eq!(err("18446744073709551616s"), DurationParseError::Overflow);
        assert_eq!(
            err("99999999999999999999999999999999999999999d"),
            DurationParseError::Overflow
        );
    }

    #[test]
    fn a_bare_number_is_never_seconds() {
        // Configs: milliseconds.
        assert_eq!(parse_duration("2"), Ok(Duration::from_millis(2)));
        assert_eq!(
            parse_duration_with("1500", BareNumber::Millis),
            Ok(Duration::from_millis(1500))
        );
        // Command lines: an error, except for zero; units work as everywhere.
        let typed = |s: &str| parse_duration_with(s, BareNumber::Refused);
        for bare in [
            "2",
            " 2 ",
            "1500",
            "1.5",
            "0.5",
            "007",
            "18446744073709551616",
        ] {
            assert_eq!(typed(bare), Err(DurationParseError::BareNumber), "{bare}");
        }
        for zero in ["0", "00", "0.0", " 0 "] {
            assert_eq!(typed(zero), Ok(Duration::ZERO), "{zero}");
        }
        assert_eq!(typed("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(typed("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(typed("1m30s"), Ok(Duration::from_secs(90)));
        // Other errors keep their own names.
        assert_eq!(typed("1.s"), Err(DurationParseError::BadNumber));
        assert_eq!(typed("1m30"), Err(DurationParseError::MissingUnit));
        assert_eq!(typed("-2"), Err(DurationParseError::Signed));
        assert_eq!(typed(""), Err(DurationParseError::Empty));
    }

    #[test]
    fn extremes() {
        let max = DurationText(Duration::MAX);
        let mut buf = [0u8; 64];
        let mut w = Buf(&mut buf, 0);
        fmt::write(&mut w, format_args!("{max}")).unwrap();
        let n = w.1;
        let text = core::str::from_utf8(&buf[..n]).unwrap();
        assert_eq!(parse_duration(text).unwrap(), Duration::MAX);
        assert_eq!(
            parse_duration("18446744073709551615s999999999ns").unwrap(),
            Duration::MAX
        );
        assert_eq!(
            parse_duration("18446744073709551615s1000ms").unwrap_err(),
            DurationParseError::Overflow
        );
    }

    struct Buf<'a>(&'a mut [u8], usize);

    impl fmt::Write for Buf<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.1.saturating_add(s.len());
            self.0[self.1..end].copy_from_slice(s.as_bytes());
            self.1 = end;
            Ok(())
        }
    }
}
