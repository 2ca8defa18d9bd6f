//! Server delay hints, read from raw header bytes: `Retry-After` (delta-seconds
//! or any of the three HTTP-date forms), `retry-after-ms` and gRPC's
//! `grpc-retry-pushback-ms`.
//!
//! Nothing here allocates, reads a clock or panics: the caller passes the current
//! time as seconds since the Unix epoch, and every malformed value is simply
//! rejected (`None`, or [`Pushback::Stop`] for gRPC).

use core::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;
const NANOS_PER_MILLI: u128 = 1_000_000;
const SECS_PER_DAY: i64 = 86_400;
/// `9999-12-31T23:59:59Z`, the last second an HTTP-date can name.
const LAST_HTTP_DATE: u64 = 253_402_300_799;

const SHORT_DAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
const LONG_DAYS: [&[u8]; 7] = [
    b"Sunday",
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// What a gRPC server's `grpc-retry-pushback-ms` header asks for.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{parse_grpc_pushback, Pushback};
/// assert_eq!(parse_grpc_pushback(b"250"), Pushback::RetryAfter(Duration::from_millis(250)));
/// assert_eq!(parse_grpc_pushback(b"-1"), Pushback::Stop);
/// assert_eq!(parse_grpc_pushback(b"soon"), Pushback::Stop);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pushback {
    /// Retry after exactly this long.
    RetryAfter(Duration),
    /// The server asked the client not to retry at all (a negative or malformed
    /// pushback value means this in gRPC).
    Stop,
}

/// Reads a `retry-after-ms` header: a non-negative number of milliseconds,
/// whole (`"1500"`) or with a fractional part (`"1.5"`, `"0.25"`).
///
/// Surrounding ASCII whitespace is ignored. Both sides of a decimal point need at
/// least one digit (`".5"` and `"5."` are rejected). Fractional digits beyond the
/// nanosecond (the sixth) are checked but dropped. Signs, exponents, words such as
/// `NaN` or `inf`, and trailing bytes give `None`; a value too large for a
/// [`Duration`] saturates to [`Duration::MAX`].
///
/// ```
/// use core::time::Duration;
/// use retry_core::parse_retry_after_ms;
/// assert_eq!(parse_retry_after_ms(b"1500"), Some(Duration::from_millis(1500)));
/// assert_eq!(parse_retry_after_ms(b" 0.25 "), Some(Duration::from_micros(250)));
/// assert_eq!(parse_retry_after_ms(b"1e3"), None);
/// assert_eq!(parse_retry_after_ms(b"-5"), None);
/// ```
#[must_use]
pub fn parse_retry_after_ms(value: &[u8]) -> Option<Duration> {
    let value = value.trim_ascii();
    let (whole, fraction) = match value.iter().position(|&b| b == b'.') {
        Some(dot) => {
            let (whole, rest) = value.split_at_checked(dot)?;
            (whole, Some(rest.get(1..)?))
        }
        None => (value, None),
    };
    let millis = digits_saturating(whole)?;
    let mut nanos = millis.saturating_mul(NANOS_PER_MILLI);
    if let Some(fraction) = fraction {
        if fraction.is_empty() || !fraction.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // Six fractional digits of a millisecond reach the nanosecond.
        let mut scale = NANOS_PER_MILLI;
        for &b in fraction {
            scale = scale.checked_div(10).unwrap_or(0);
            if scale == 0 {
                break;
            }
            let digit = u128::from(b.wrapping_sub(b'0'));
            nanos = nanos.saturating_add(digit.saturating_mul(scale));
        }
    }
    Some(duration_from_nanos(nanos))
}

/// Reads a `Retry-After` header and turns it into a delay from `now_unix_secs`
/// (the current time in seconds since the Unix epoch).
///
/// The value is either delta-seconds (ASCII digits only; one too large for a
/// [`Duration`] saturates to [`Duration::MAX`]) or an HTTP-date in any of the
/// three forms HTTP allows (see [`parse_http_date`]). Surrounding ASCII
/// whitespace is ignored. A date at or before `now_unix_secs` (including any date
/// before 1970) gives [`Duration::ZERO`]; anything malformed gives `None`.
///
/// ```
/// use core::time::Duration;
/// use retry_core::parse_retry_after;
/// let now = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
/// assert_eq!(parse_retry_after(b"120", now), Some(Duration::from_secs(120)));
/// assert_eq!(
///     parse_retry_after(b"Sun, 06 Nov 1994 08:50:07 GMT", now),
///     Some(Duration::from_secs(30))
/// );
/// assert_eq!(parse_retry_after(b"Sunday, 06-Nov-94 08:49:37 GMT", now), Some(Duration::ZERO));
/// assert_eq!(parse_retry_after(b"Sun Nov  6 08:49:47 1994", now), Some(Duration::from_secs(10)));
/// assert_eq!(parse_retry_after(b"1.5", now), None);
/// assert_eq!(parse_retry_after(b"-1", now), None);
/// ```
///
/// `now_unix_secs` is whole seconds, so a date is read up to a second long (the
/// time since the last whole second is not subtracted);
/// [`parse_retry_after_at`] takes the time with its fraction.
#[must_use]
pub fn parse_retry_after(value: &[u8], now_unix_secs: u64) -> Option<Duration> {
    parse_retry_after_at(value, Duration::from_secs(now_unix_secs))
}

/// Like [`parse_retry_after`], with the wall clock's time since the Unix epoch
/// given to the nanosecond (`SystemTime::now().duration_since(UNIX_EPOCH)`), so
/// an HTTP-date is turned into a delay with sub-second precision: a date one
/// whole second after a `now` of `…:00.900` is a wait of 100 ms, not a second.
///
/// ```
/// use core::time::Duration;
/// use retry_core::parse_retry_after_at;
/// let now = Duration::from_millis(784_111_777_900); // Sun, 06 Nov 1994 08:49:37.900 GMT
/// assert_eq!(
///     parse_retry_after_at(b"Sun, 06 Nov 1994 08:49:38 GMT", now),
///     Some(Duration::from_millis(100))
/// );
/// assert_eq!(parse_retry_after_at(b"3", now), Some(Duration::from_secs(3)));
/// ```
#[must_use]
pub fn parse_retry_after_at(value: &[u8], now_since_epoch: Duration) -> Option<Duration> {
    let value = value.trim_ascii();
    if let Some(secs) = digits_saturating(value) {
        return Some(duration_from_nanos(secs.saturating_mul(NANOS_PER_SEC)));
    }
    let date = parse_http_date(value, now_since_epoch.as_secs())?;
    let date = u64::try_from(date).map_or(Duration::ZERO, Duration::from_secs);
    Some(date.saturating_sub(now_since_epoch))
}

/// Reads an HTTP-date and returns it as seconds since the Unix epoch (negative
/// before 1970).
///
/// All three forms are accepted, matched exactly (one space where the grammar
/// has one, case-sensitive names), after trimming surrounding ASCII whitespace:
///
/// * IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`
/// * obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
/// * asctime: `Sun Nov  6 08:49:37 1994` (the day may be space-padded or
///   zero-padded)
///
/// The weekday must be the date's real weekday, the day must exist in that month
/// (leap years included), and the time must be within `00:00:00`..=`23:59:60`. A
/// leap second (`:60`) is read as `:59` of the same minute, so a date never
/// spills into the next minute or day. Years are 4 digits, so nothing after 9999
/// parses; years before 1970 parse (as negative values).
///
/// RFC 850's two-digit year is read as RFC 9110 §5.6.7 says, relative to
/// `now_unix_secs`: the year with those last two digits that is not more than
/// 50 years in the future. (The other forms ignore `now_unix_secs`.)
///
/// ```
/// use retry_core::parse_http_date;
/// assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT", 0), Some(784_111_777));
/// assert_eq!(parse_http_date(b"Thu, 01 Jan 1970 00:00:00 GMT", 0), Some(0));
/// assert_eq!(parse_http_date(b"Wed, 31 Dec 1969 23:59:59 GMT", 0), Some(-1));
/// // Wrong weekday:
/// assert_eq!(parse_http_date(b"Mon, 06 Nov 1994 08:49:37 GMT", 0), None);
/// ```
#[must_use]
pub fn parse_http_date(value: &[u8], now_unix_secs: u64) -> Option<i64> {
    let value = value.trim_ascii();
    parse_imf_fixdate(value)
        .or_else(|| parse_rfc850(value, now_unix_secs))
        .or_else(|| parse_asctime(value))
}

/// Reads gRPC's `grpc-retry-pushback-ms` header.
///
/// A non-negative whole number of milliseconds (ASCII digits, surrounding ASCII
/// whitespace allowed) gives [`Pushback::RetryAfter`], saturating at
/// [`Duration::MAX`]. Anything else (a negative number, a sign, a fraction, an
/// empty value, garbage) gives [`Pushback::Stop`]: gRPC reads a negative or
/// malformed pushback as the server asking not to be retried.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{parse_grpc_pushback, Pushback};
/// assert_eq!(parse_grpc_pushback(b"0"), Pushback::RetryAfter(Duration::ZERO));
/// assert_eq!(parse_grpc_pushback(b""), Pushback::Stop);
/// ```
#[must_use]
pub fn parse_grpc_pushback(value: &[u8]) -> Pushback {
    match digits_saturating(value.trim_ascii()) {
        Some(millis) => {
            Pushback::RetryAfter(duration_from_nanos(millis.saturating_mul(NANOS_PER_MILLI)))
        }
        None => Pushback::Stop,
    }
}

/// The server's requested delay from an HTTP response's headers.
///
/// A `retry-after-ms` value that parses (see [`parse_retry_after_ms`]) wins;
/// otherwise `Retry-After` is read (see [`parse_retry_after`]); otherwise `None`.
/// An unparseable `retry-after-ms` does not hide a good `Retry-After`.
///
/// ```
/// use core::time::Duration;
/// use retry_core::retry_after_from_headers;
/// assert_eq!(
///     retry_after_from_headers(Some(b"250"), Some(b"10"), 0),
///     Some(Duration::from_millis(250))
/// );
/// assert_eq!(
///     retry_after_from_headers(Some(b"soon"), Some(b"10"), 0),
///     Some(Duration::from_secs(10))
/// );
/// assert_eq!(retry_after_from_headers(None, None, 0), None);
/// ```
#[must_use]
pub fn retry_after_from_headers(
    retry_after_ms: Option<&[u8]>,
    retry_after: Option<&[u8]>,
    now_unix_secs: u64,
) -> Option<Duration> {
    retry_after_from_headers_at(
        retry_after_ms,
        retry_after,
        Duration::from_secs(now_unix_secs),
    )
}

/// Like [`retry_after_from_headers`], with the wall clock to the nanosecond (see
/// [`parse_retry_after_at`]).
#[must_use]
pub fn retry_after_from_headers_at(
    retry_after_ms: Option<&[u8]>,
    retry_after: Option<&[u8]>,
    now_since_epoch: Duration,
) -> Option<Duration> {
    retry_after_ms
        .and_then(parse_retry_after_ms)
        .or_else(|| retry_after.and_then(|v| parse_retry_after_at(v, now_since_epoch)))
}

/// Writes `unix_secs` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the
/// form a `Retry-After` or `Date` header should be sent in.
///
/// Times after `9999-12-31T23:59:59Z` cannot be written in four year digits and
/// are clamped to that second.
///
/// ```
/// use retry_core::format_http_date;
/// let mut out = [0u8; 29];
/// format_http_date(784_111_777, &mut out);
/// assert_eq!(&out, b"Sun, 06 Nov 1994 08:49:37 GMT");
/// ```
pub fn format_http_date(unix_secs: u64, out: &mut [u8; 29]) {
    let secs = i64::try_from(unix_secs.min(LAST_HTTP_DATE)).unwrap_or(0);
    let civil = civil_from_unix(secs);
    let day_name = SHORT_DAYS
        .get(usize::try_from(civil.weekday).unwrap_or(0))
        .copied()
        .unwrap_or(b"Sun");
    let month = MONTHS
        .get(usize::try_from(civil.month.saturating_sub(1)).unwrap_or(0))
        .copied()
        .unwrap_or(b"Jan");
    let [w0, w1, w2] = *day_name;
    let [m0, m1, m2] = *month;
    let [d0, d1] = two_digits(civil.day);
    let year = u32::try_from(civil.year).unwrap_or(0);
    let [y0, y1] = two_digits(year.checked_div(100).unwrap_or(0));
    let [y2, y3] = two_digits(year.checked_rem(100).unwrap_or(0));
    let [h0, h1] = two_digits(civil.hour);
    let [n0, n1] = two_digits(civil.minute);
    let [s0, s1] = two_digits(civil.second);
    *out = [
        w0, w1, w2, b',', b' ', d0, d1, b' ', m0, m1, m2, b' ', y0, y1, y2, y3, b' ', h0, h1, b':',
        n0, n1, b':', s0, s1, b' ', b'G', b'M', b'T',
    ];
}

// ---------------------------------------------------------------------------
// Numbers

/// ASCII digits (at least one, nothing else) as a number, saturating.
fn digits_saturating(digits: &[u8]) -> Option<u128> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u128, |acc, &b| {
        let digit = digit(b)?;
        Some(acc.saturating_mul(10).saturating_add(u128::from(digit)))
    })
}

fn digit(b: u8) -> Option<u8> {
    b.is_ascii_digit().then(|| b.wrapping_sub(b'0'))
}

/// A short run of ASCII digits (at most four here) as a number.
fn number(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |acc, &b| {
        acc.checked_mul(10)?.checked_add(u32::from(digit(b)?))
    })
}

fn duration_from_nanos(nanos: u128) -> Duration {
    let secs = nanos.checked_div(NANOS_PER_SEC).unwrap_or(0);
    let sub = nanos.checked_rem(NANOS_PER_SEC).unwrap_or(0);
    match (u64::try_from(secs), u32::try_from(sub)) {
        (Ok(secs), Ok(sub)) => Duration::new(secs, sub),
        _ => Duration::MAX,
    }
}

fn two_digits(n: u32) -> [u8; 2] {
    let n = n.min(99);
    let tens = u8::try_from(n.checked_div(10).unwrap_or(0)).unwrap_or(0);
    let ones = u8::try_from(n.checked_rem(10).unwrap_or(0)).unwrap_or(0);
    [b'0'.saturating_add(tens), b'0'.saturating_add(ones)]
}

// ---------------------------------------------------------------------------
// Calendar (proleptic Gregorian, UTC)

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Civil {
    // Field order matters: the derived ordering is chronological.
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    /// 0 = Sunday.
    weekday: u32,
}

const fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

const fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days from 1970-01-01 to the given date. The year is shifted to start in
/// March, so the leap day is the last day of its year; the count then goes by
/// 400-year eras of 146 097 days.
fn days_from_civil(year: i64, month: u32, day: u32) -> Option<i64> {
    let year = if month <= 2 {
        year.checked_sub(1)?
    } else {
        year
    };
    let era = year.checked_div_euclid(400)?;
    let year_of_era = year.checked_rem_euclid(400)?;
    // Month counted from March = 0.
    let shifted_month = i64::from(if month > 2 {
        month.checked_sub(3)?
    } else {
        month.checked_add(9)?
    });
    let day_of_year = shifted_month
        .checked_mul(153)?
        .checked_add(2)?
        .checked_div(5)?
        .checked_add(i64::from(day))?
        .checked_sub(1)?;
    let day_of_era = year_of_era
        .checked_mul(365)?
        .checked_add(year_of_era.checked_div(4)?)?
        .checked_sub(year_of_era.checked_div(100)?)?
        .checked_add(day_of_year)?;
    // 719 468 days from 0000-03-01 to 1970-01-01.
    era.checked_mul(146_097)?
        .checked_add(day_of_era)?
        .checked_sub(719_468)
}

/// The inverse of [`days_from_civil`], plus the time of day; total for every
/// `i64` second count that fits the calendar (saturates otherwise).
fn civil_from_unix(secs: i64) -> Civil {
    let days = secs.div_euclid(SECS_PER_DAY);
    let in_day = secs.rem_euclid(SECS_PER_DAY);
    let (year, month, day) = civil_from_days(days).unwrap_or((i64::MAX, 12, 31));
    let in_day = u32::try_from(in_day).unwrap_or(0);
    let weekday = days
        .checked_add(4)
        .and_then(|d| d.checked_rem_euclid(7))
        .and_then(|d| u32::try_from(d).ok())
        .unwrap_or(0);
    Civil {
        year,
        month,
        day,
        hour: in_day.checked_div(3600).unwrap_or(0),
        minute: in_day
            .checked_rem(3600)
            .unwrap_or(0)
            .checked_div(60)
            .unwrap_or(0),
        second: in_day.checked_rem(60).unwrap_or(0),
        weekday,
    }
}

fn civil_from_days(days: i64) -> Option<(i64, u32, u32)> {
    let z = days.checked_add(719_468)?;
    let era = z.checked_div_euclid(146_097)?;
    let day_of_era = z.checked_rem_euclid(146_097)?;
    let year_of_era = day_of_era
        .checked_sub(day_of_era.checked_div(1460)?)?
        .checked_add(day_of_era.checked_div(36_524)?)?
        .checked_sub(day_of_era.checked_div(146_096)?)?
        .checked_div(365)?;
    let day_of_year = day_of_era.checked_sub(
        year_of_era
            .checked_mul(365)?
            .checked_add(year_of_era.checked_div(4)?)?
            .checked_sub(year_of_era.checked_div(100)?)?,
    )?;
    let shifted_month = day_of_year
        .checked_mul(5)?
        .checked_add(2)?
        .checked_div(153)?;
    let day = day_of_year
        .checked_sub(
            shifted_month
                .checked_mul(153)?
                .checked_add(2)?
                .checked_div(5)?,
        )?
        .checked_add(1)?;
    let month = if shifted_month < 10 {
        shifted_month.checked_add(3)?
    } else {
        shifted_month.checked_sub(9)?
    };
    let mut year = year_of_era.checked_add(era.checked_mul(400)?)?;
    if month <= 2 {
        year = year.checked_add(1)?;
    }
    Some((year, u32::try_from(month).ok()?, u32::try_from(day).ok()?))
}

// ---------------------------------------------------------------------------
// HTTP-date forms

fn month_number(name: [u8; 3]) -> Option<u32> {
    let index = MONTHS.iter().position(|m| **m == name)?;
    u32::try_from(index).ok()?.checked_add(1)
}

fn short_weekday(name: [u8; 3]) -> Option<u32> {
    let index = SHORT_DAYS.iter().position(|d| **d == name)?;
    u32::try_from(index).ok()
}

fn long_weekday(name: &[u8]) -> Option<u32> {
    let index = LONG_DAYS.iter().position(|d| *d == name)?;
    u32::try_from(index).ok()
}

/// `hh:mm:ss` as a validated (hour, minute, second); a leap second becomes `:59`.
fn time_of_day(time: [u8; 8]) -> Option<(u32, u32, u32)> {
    let [h0, h1, b':', m0, m1, b':', s0, s1] = time else {
        return None;
    };
    let hour = number(&[h0, h1])?;
    let minute = number(&[m0, m1])?;
    let second = number(&[s0, s1])?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some((hour, minute, second.min(59)))
}

/// Checks a parsed date and returns its Unix time.
fn unix_time(
    weekday: u32,
    year: i64,
    month: u32,
    day: u32,
    (hour, minute, second): (u32, u32, u32),
) -> Option<i64> {
    if !(0..=9999).contains(&year) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    let actual_weekday = days.checked_add(4)?.checked_rem_euclid(7)?;
    if actual_weekday != i64::from(weekday) {
        return None;
    }
    let in_day = hour
        .checked_mul(3600)?
        .checked_add(minute.checked_mul(60)?)?
        .checked_add(second)?;
    days.checked_mul(SECS_PER_DAY)?
        .checked_add(i64::from(in_day))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn parse_imf_fixdate(value: &[u8]) -> Option<i64> {
    let [w0, w1, w2, b',', b' ', d0, d1, b' ', m0, m1, m2, b' ', y0, y1, y2, y3, b' ', t @ .., b' ', b'G', b'M', b'T'] =
        value
    else {
        return None;
    };
    let time: [u8; 8] = t.try_into().ok()?;
    unix_time(
        short_weekday([*w0, *w1, *w2])?,
        i64::from(number(&[*y0, *y1, *y2, *y3])?),
        month_number([*m0, *m1, *m2])?,
        number(&[*d0, *d1])?,
        time_of_day(time)?,
    )
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn parse_rfc850(value: &[u8], now_unix_secs: u64) -> Option<i64> {
    let comma = value.iter().position(|&b| b == b',')?;
    let (name, rest) = value.split_at_checked(comma)?;
    let [b',', b' ', d0, d1, b'-', m0, m1, m2, b'-', y0, y1, b' ', t @ .., b' ', b'G', b'M', b'T'] =
        rest
    else {
        return None;
    };
    let time: [u8; 8] = t.try_into().ok()?;
    let weekday = long_weekday(name)?;
    let month = month_number([*m0, *m1, *m2])?;
    let day = number(&[*d0, *d1])?;
    let time = time_of_day(time)?;
    let year = full_year(number(&[*y0, *y1])?, month, day, time, now_unix_secs)?;
    unix_time(weekday, year, month, day, time)
}

/// The year ending in `two_digits` that is not more than 50 years after now
/// (RFC 9110 §5.6.7), to the second.
fn full_year(
    two_digits: u32,
    month: u32,
    day: u32,
    (hour, minute, second): (u32, u32, u32),
    now_unix_secs: u64,
) -> Option<i64> {
    let now = civil_from_unix(i64::try_from(now_unix_secs).unwrap_or(i64::MAX));
    let limit = Civil {
        year: now.year.checked_add(50)?,
        weekday: 0,
        ..now
    };
    let too_far = |year: i64| {
        let date = Civil {
            year,
            month,
            day,
            hour,
            minute,
            second,
            weekday: 0,
        };
        date > limit
    };
    let century = now.year.checked_div_euclid(100)?.checked_mul(100)?;
    let mut year = century.checked_add(i64::from(two_digits))?;
    if too_far(year) {
        year = year.checked_sub(100)?;
    } else if !too_far(year.checked_add(100)?) {
        year = year.checked_add(100)?;
    }
    Some(year)
}

/// `Sun Nov  6 08:49:37 1994`
fn parse_asctime(value: &[u8]) -> Option<i64> {
    let [w0, w1, w2, b' ', m0, m1, m2, b' ', d0, d1, b' ', t @ .., b' ', y0, y1, y2, y3] = value
    else {
        return None;
    };
    let time: [u8; 8] = t.try_into().ok()?;
    let day = if *d0 == b' ' {
        number(&[*d1])?
    } else {
        number(&[*d0, *d1])?
    };
    unix_time(
        short_weekday([*w0, *w1, *w2])?,
        i64::from(number(&[*y0, *y1, *y2, *y3])?),
        month_number([*m0, *m1, *m2])?,
        day,
        time_of_day(time)?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip_over_wide_range() {
        let mut days = -800_000i64;
        while days < 3_000_000 {
            let (y, m, d) = civil_from_days(days).unwrap();
            assert_eq!(days_from_civil(y, m, d), Some(days));
            assert!(d >= 1 && d <= days_in_month(y, m));
            days += 1;
        }
    }

    #[test]
    fn civil_extremes_do_not_panic() {
        for secs in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX] {
            let _ = civil_from_unix(secs);
        }
        for secs in [0, u64::MAX, u64::MAX / 2] {
            let _ = full_year(94, 11, 6, (8, 49, 37), secs);
            let _ = parse_rfc850(b"Sunday, 06-Nov-94 08:49:37 GMT", secs);
        }
    }
}
