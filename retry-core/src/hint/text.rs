//! The text a child process leaves in its hint file, read into a [`ChildHint`]
//! by [`ChildHint::read`].

use core::fmt;
use core::time::Duration;

use super::retry_after::{parse_retry_after_at, parse_retry_after_ms};
use crate::classify::ChildHint;

/// What [`ChildHint::read`] found: the hint, and the first problem met, if any.
/// Both may be present: a good `Retry-After` next to a garbled line still counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HintRead {
    /// The hint the text asks for (`None`: no hint, the curve applies).
    pub hint: Option<ChildHint>,
    /// The first line that could not be read.
    pub problem: Option<HintProblem>,
}

/// A line of hint text that could not be read.
///
/// ```
/// use retry_core::{HintProblem, HintProblemKind};
/// let p = HintProblem { line: 2, kind: HintProblemKind::UnknownKey };
/// assert_eq!(p.to_string(), "line 2 has an unknown key (known: retry-after, retry-after-ms)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HintProblem {
    /// The line's number, counting from 1.
    pub line: usize,
    /// What was wrong with it.
    pub kind: HintProblemKind,
}

/// What was wrong with a line of hint text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HintProblemKind {
    /// Not `stop`, not `key=value`, not a status or header line.
    UnknownLine,
    /// A `key=value` line with a key other than `retry-after` and `retry-after-ms`.
    UnknownKey,
    /// A `retry-after` or `retry-after-ms` value that is not a delay (negative,
    /// not a number, not an HTTP-date, or empty).
    BadValue,
}

impl fmt::Display for HintProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            HintProblemKind::UnknownLine => {
                "is not `stop`, `retry-after=SECONDS`, `retry-after-ms=MS` or an HTTP header line"
            }
            HintProblemKind::UnknownKey => {
                "has an unknown key (known: retry-after, retry-after-ms)"
            }
            HintProblemKind::BadValue => {
                "is not a delay (seconds or an HTTP-date for Retry-After, milliseconds for retry-after-ms)"
            }
        };
        write!(f, "line {} {what}", self.line)
    }
}

/// Which delay a line named.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `retry-after-ms`: milliseconds.
    Millis,
    /// `Retry-After` / `retry-after=`: seconds or an HTTP-date.
    Seconds,
}

/// The last value seen for one source, with its line.
#[derive(Clone, Copy)]
struct Seen<'a> {
    value: &'a [u8],
    line: usize,
}

/// Reads `retry-after` seconds: delta-seconds or an HTTP-date as the core reads a
/// header (a date against `now`, to the nanosecond), or a decimal number of
/// seconds (`0.5`), for people writing the file.
fn seconds(value: &[u8], now: Duration) -> Option<Duration> {
    parse_retry_after_at(value, now).or_else(|| {
        // `1.5` seconds is `1.5` milliseconds scaled by a thousand: exact, no float.
        let per_milli = parse_retry_after_ms(value)?;
        Some(per_milli.saturating_mul(1000))
    })
}

/// Keeps the first problem met.
fn note(problem: &mut Option<HintProblem>, line: usize, kind: HintProblemKind) {
    if problem.is_none() {
        *problem = Some(HintProblem { line, kind });
    }
}

impl ChildHint {
    /// Reads a hint file's text with the core's precedence. HTTP-dates are turned
    /// into delays against `now_unix_secs` (a date in the past is a zero delay).
    ///
    /// A command run under a retry program may write what it learned about the
    /// next attempt into a file. Three forms are read, and may be mixed:
    ///
    /// - `stop`: do not retry (any case).
    /// - `key=value` lines: `retry-after=SECONDS` (a whole or decimal number, or
    ///   an HTTP-date) and `retry-after-ms=MILLISECONDS` (whole or decimal).
    /// - Raw HTTP header lines, exactly as `curl -D FILE` dumps them: status lines
    ///   (`HTTP/1.1 503 Service Unavailable`), then `Name: value` lines.
    ///   `Retry-After` (delta-seconds or an HTTP-date) and `retry-after-ms` are
    ///   read; every other header is ignored. When the dump holds several
    ///   responses (redirects followed, a `100 Continue`), only the last
    ///   response's headers count.
    ///
    /// Precedence is the core's, as for a response ([`retry_after_from_headers`]):
    /// `stop` wins; then a readable `retry-after-ms`; then `Retry-After`. When a
    /// value appears twice, the later line wins. A value that cannot be read is
    /// skipped (the next source in precedence applies) and reported as a
    /// [`HintProblem`], as is a line in none of the three forms, so that a driver
    /// can warn instead of dropping a hint without a word.
    ///
    /// [`retry_after_from_headers`]: crate::retry_after_from_headers
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{ChildHint, HintProblemKind};
    ///
    /// let dump = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nRetry-After: 2\r\n\r\n";
    /// let read = ChildHint::read(dump, 0);
    /// assert_eq!(read.hint, Some(ChildHint::RetryAfter(Duration::from_secs(2))));
    /// assert_eq!(read.problem, None);
    ///
    /// // retry-after-ms wins over Retry-After, whatever the order.
    /// let read = ChildHint::read(b"Retry-After: 9\nretry-after-ms: 250\n", 0);
    /// assert_eq!(read.hint, Some(ChildHint::RetryAfter(Duration::from_millis(250))));
    ///
    /// // An HTTP-date, read against the caller's wall clock.
    /// let now = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
    /// let read = ChildHint::read(b"Retry-After: Sun, 06 Nov 1994 08:50:07 GMT", now);
    /// assert_eq!(read.hint, Some(ChildHint::RetryAfter(Duration::from_secs(30))));
    ///
    /// // What cannot be read is said, not silently dropped.
    /// let read = ChildHint::read(b"retry-after=soon\n", 0);
    /// assert_eq!(read.hint, None);
    /// assert_eq!(read.problem.map(|p| (p.line, p.kind)), Some((1, HintProblemKind::BadValue)));
    /// ```
    ///
    /// `now_unix_secs` is whole seconds, so an HTTP-date is read up to a second
    /// long; [`ChildHint::read_at`] takes the time with its fraction.
    #[must_use]
    pub fn read(text: &[u8], now_unix_secs: u64) -> HintRead {
        ChildHint::read_at(text, Duration::from_secs(now_unix_secs))
    }

    /// Like [`ChildHint::read`], with the wall clock's time since the Unix epoch
    /// to the nanosecond (`SystemTime::now().duration_since(UNIX_EPOCH)`), so
    /// that an HTTP-date becomes a delay with sub-second precision, as
    /// [`parse_retry_after_at`](crate::parse_retry_after_at) reads a header: a
    /// date one whole second after a `now` of `…:37.900` is a wait of 100 ms.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::ChildHint;
    ///
    /// let now = Duration::from_millis(784_111_777_900); // Sun, 06 Nov 1994 08:49:37.900 GMT
    /// let read = ChildHint::read_at(b"Retry-After: Sun, 06 Nov 1994 08:49:38 GMT\r\n", now);
    /// assert_eq!(read.hint, Some(ChildHint::RetryAfter(Duration::from_millis(100))));
    /// // Delta-seconds do not depend on the clock.
    /// let read = ChildHint::read_at(b"retry-after=2", now);
    /// assert_eq!(read.hint, Some(ChildHint::RetryAfter(Duration::from_secs(2))));
    /// ```
    #[must_use]
    pub fn read_at(text: &[u8], now_since_epoch: Duration) -> HintRead {
        let mut stop = false;
        let mut millis: Option<Seen<'_>> = None;
        let mut secs: Option<Seen<'_>> = None;
        let mut problem: Option<HintProblem> = None;
        for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = index.saturating_add(1);
            let content = raw.trim_ascii();
            if content.is_empty() {
                continue;
            }
            if content.eq_ignore_ascii_case(b"stop") {
                stop = true;
                continue;
            }
            if content.starts_with(b"HTTP/") {
                // A new response begins: only the last one's headers count.
                millis = None;
                secs = None;
                continue;
            }
            let colon = content.iter().position(|&b| b == b':');
            let equals = content.iter().position(|&b| b == b'=');
            let (at, header) = match (colon, equals) {
                (Some(c), None) => (c, true),
                (Some(c), Some(e)) if c < e => (c, true),
                (_, Some(e)) => (e, false),
                (None, None) => {
                    note(&mut problem, line, HintProblemKind::UnknownLine);
                    continue;
                }
            };
            let (name, rest) = content.split_at_checked(at).unwrap_or((content, b""));
            let value = rest.get(1..).unwrap_or_default();
            // A header name is a token: no spaces, not empty.
            if name.is_empty() || name.iter().any(|b| b.is_ascii_whitespace()) {
                note(&mut problem, line, HintProblemKind::UnknownLine);
                continue;
            }
            let source = if name.eq_ignore_ascii_case(b"retry-after-ms") {
                Source::Millis
            } else if name.eq_ignore_ascii_case(b"retry-after") {
                Source::Seconds
            } else if header {
                continue; // any other header: not ours
            } else {
                note(&mut problem, line, HintProblemKind::UnknownKey);
                continue;
            };
            let seen = Some(Seen { value, line });
            match source {
                Source::Millis => millis = seen,
                Source::Seconds => secs = seen,
            }
        }
        if stop {
            return HintRead {
                hint: Some(ChildHint::Stop),
                problem,
            };
        }
        let mut hint = None;
        if let Some(seen) = millis {
            match parse_retry_after_ms(seen.value) {
                Some(d) => hint = Some(ChildHint::RetryAfter(d)),
                None => note(&mut problem, seen.line, HintProblemKind::BadValue),
            }
        }
        if let Some(seen) = secs {
            match seconds(seen.value, now_since_epoch) {
                Some(d) => {
                    hint = hint.or(Some(ChildHint::RetryAfter(d)));
                }
                None => note(&mut problem, seen.line, HintProblemKind::BadValue),
            }
        }
        HintRead { hint, problem }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(d: Duration) -> Option<ChildHint> {
        Some(ChildHint::RetryAfter(d))
    }

    fn problem(read: HintRead) -> Option<(usize, HintProblemKind)> {
        read.problem.map(|p| (p.line, p.kind))
    }

    #[test]
    fn curl_dumps_are_read_as_they_are_written() {
        let dump = b"HTTP/1.1 503 Service Unavailable\r\n\
            Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
            Retry-After: 3\r\n\
            Content-Length: 0\r\n\r\n";
        let read = ChildHint::read(dump, 0);
        assert_eq!(read.hint, after(Duration::from_secs(3)));
        assert_eq!(read.problem, None);
        // HTTP/2 status lines have no reason phrase; names are any case.
        let read = ChildHint::read(b"HTTP/2 429\r\nretry-after: 1\r\n\r\n", 0);
        assert_eq!(read.hint, after(Duration::from_secs(1)));
    }

    #[test]
    fn only_the_last_response_counts() {
        let dump = b"HTTP/1.1 301 Moved\r\nRetry-After: 100\r\nLocation: /x\r\n\r\n\
            HTTP/1.1 503 Busy\r\nRetry-After: 4\r\n\r\n";
        assert_eq!(ChildHint::read(dump, 0).hint, after(Duration::from_secs(4)));
        let dump = b"HTTP/1.1 503 Busy\r\nRetry-After: 4\r\n\r\nHTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(ChildHint::read(dump, 0).hint, None);
    }

    #[test]
    fn millis_win_over_seconds_in_any_form_and_order() {
        for text in [
            &b"retry-after=9\nretry-after-ms=250"[..],
            b"retry-after-ms=250\nretry-after=9",
            b"Retry-After: 9\r\nRetry-After-Ms: 250\r\n",
            b"retry-after-ms: 250\nretry-after=9",
        ] {
            let read = ChildHint::read(text, 0);
            assert_eq!(read.hint, after(Duration::from_millis(250)));
            assert_eq!(read.problem, None);
        }
        // A bad millisecond value does not hide good seconds, and is reported.
        let read = ChildHint::read(b"retry-after-ms: soon\nRetry-After: 2\n", 0);
        assert_eq!(read.hint, after(Duration::from_secs(2)));
        assert_eq!(problem(read), Some((1, HintProblemKind::BadValue)));
    }

    #[test]
    fn dates_and_fractions() {
        let now = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
        let read = ChildHint::read(b"retry-after=Sun, 06 Nov 1994 08:49:47 GMT", now);
        assert_eq!(read.hint, after(Duration::from_secs(10)));
        // A date in the past is no wait at all.
        let read = ChildHint::read(b"Retry-After: Sun, 06 Nov 1994 08:00:00 GMT", now);
        assert_eq!(read.hint, after(Duration::ZERO));
        assert_eq!(
            ChildHint::read(b"retry-after=0.05\n", 0).hint,
            after(Duration::from_millis(50))
        );
        assert_eq!(
            ChildHint::read(b"retry-after-ms=1.5", 0).hint,
            after(Duration::from_micros(1500))
        );
    }

    #[test]
    fn dates_are_read_to_the_nanosecond_against_a_fractional_now() {
        let date = b"Retry-After: Sun, 06 Nov 1994 08:49:47 GMT";
        let whole = Duration::from_secs(784_111_777); // 08:49:37
        for fraction_ms in [0, 1, 250, 999] {
            let now = whole + Duration::from_millis(fraction_ms);
            let expected = Duration::from_secs(10) - Duration::from_millis(fraction_ms);
            assert_eq!(
                ChildHint::read_at(date, now).hint,
                after(expected),
                "{fraction_ms}"
            );
            // The whole-second reader drops the fraction: a wait up to a second long.
            assert_eq!(
                ChildHint::read(date, now.as_secs()).hint,
                after(Duration::from_secs(10))
            );
        }
        // The key=value form reads dates the same way; a date just past is no wait.
        let now = Duration::from_nanos(784_111_787_000_000_001);
        assert_eq!(
            ChildHint::read_at(b"retry-after=Sun, 06 Nov 1994 08:49:47 GMT", now).hint,
            after(Duration::ZERO)
        );
        // Fractions of seconds typed by a person are not dates: the clock does not matter.
        assert_eq!(
            ChildHint::read_at(b"retry-after=0.25", now).hint,
            after(Duration::from_millis(250))
        );
    }

    #[test]
    fn stop_wins() {
        let read = ChildHint::read(b"retry-after=3\n STOP \n", 0);
        assert_eq!(read.hint, Some(ChildHint::Stop));
    }

    #[test]
    fn what_cannot_be_read_is_reported() {
        type Case = (
            &'static [u8],
            Option<ChildHint>,
            Option<(usize, HintProblemKind)>,
        );
        let cases: &[Case] = &[
            (b"", None, None),
            (b"\n\r\n  \n", None, None),
            (
                b"retry-after=-1",
                None,
                Some((1, HintProblemKind::BadValue)),
            ),
            (b"retry-after=", None, Some((1, HintProblemKind::BadValue))),
            (
                b"Retry-After: soon",
                None,
                Some((1, HintProblemKind::BadValue)),
            ),
            (
                b"retry-after=NaN",
                None,
                Some((1, HintProblemKind::BadValue)),
            ),
            (
                b"retry-after=inf",
                None,
                Some((1, HintProblemKind::BadValue)),
            ),
            (
                b"retry-after=1e3",
                None,
                Some((1, HintProblemKind::BadValue)),
            ),
            (
                b"\nplease wait",
                None,
                Some((2, HintProblemKind::UnknownLine)),
            ),
            (b"wait=3", None, Some((1, HintProblemKind::UnknownKey))),
            (
                b"retry after: 3",
                None,
                Some((1, HintProblemKind::UnknownLine)),
            ),
            (b": 3", None, Some((1, HintProblemKind::UnknownLine))),
            (
                b"junk\nretry-after=2",
                after(Duration::from_secs(2)),
                Some((1, HintProblemKind::UnknownLine)),
            ),
            // Other headers are not problems.
            (b"X-Request-Id: a=b", None, None),
            (b"\xff\xfe", None, Some((1, HintProblemKind::UnknownLine))),
        ];
        for (text, hint, expected) in cases {
            let read = ChildHint::read(text, 0);
            assert_eq!(read.hint, *hint, "{text:?}");
            assert_eq!(problem(read), *expected, "{text:?}");
        }
    }

    #[test]
    fn huge_values_saturate_and_never_panic() {
        let read = ChildHint::read(b"retry-after=99999999999999999999999999", 0);
        assert_eq!(read.hint, after(Duration::MAX));
        let read = ChildHint::read(b"retry-after=99999999999999999999.5", 0);
        assert_eq!(read.hint, after(Duration::MAX));
        let read = ChildHint::read(b"retry-after-ms=99999999999999999999999999999", 0);
        assert_eq!(read.hint, after(Duration::MAX));
    }

    #[test]
    fn the_old_form_reads_the_same() {
        for text in ["retry-after=0.05\n", " STOP ", "retry-after= 3 "] {
            assert_eq!(
                ChildHint::read(text.as_bytes(), 0).hint,
                ChildHint::parse(text),
                "{text}"
            );
        }
    }
}
