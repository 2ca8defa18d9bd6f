//! Durations on the command line: the core's grammar (`500ms`, `1m30s`, `2h`,
//! `1.5s`; see `retry_core::duration_text`), with one rule for a bare number: it
//! needs a unit here (`2s` or `2ms`), because the same text in a config file
//! means milliseconds and habits from `sleep 2` mean seconds. `0` needs none.

use core::time::Duration;

use retry_core::duration_text::{parse_duration_with, BareNumber};

/// Reads a duration typed on the command line (a bare number other than `0` is
/// refused, with a message spelling out `Ns` and `Nms`).
///
/// # Errors
/// A message saying what is wrong with the text.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_with(text, BareNumber::Refused).map_err(|e| super::args::duration_error(text, e))
}

/// Writes a duration briefly for humans: `150ms`, `2.3s`, `60s`, `1h2m`.
#[must_use]
pub fn humane(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        if d > Duration::ZERO && ms == 0 {
            return format!("{}µs", d.as_micros());
        }
        return format!("{ms}ms");
    }
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        let text = format!("{secs:.1}");
        let text = text.strip_suffix(".0").unwrap_or(&text);
        return format!("{text}s");
    }
    let whole = d.as_secs();
    let (h, m, s) = (whole / 3600, (whole % 3600) / 60, whole % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_durations_with_units() {
        let ok = |t: &str| parse_duration(t).unwrap_or(Duration::MAX);
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("10us"), Duration::from_micros(10));
        assert_eq!(ok("0"), Duration::ZERO);
        for bad in [
            "",
            "-1s",
            "abc",
            "1x",
            "1m30",
            "NaN",
            "1e3",
            "99999999999999999999999h",
            ".",
            "1..2s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bare_number_is_refused_with_both_spellings() {
        for (bare, secs, ms) in [("2", "2s", "2ms"), ("0.05", "0.05s", "0.05ms")] {
            let message = parse_duration(bare).unwrap_err();
            assert!(
                message.contains(&format!("write {secs} for seconds")),
                "{message}"
            );
            assert!(
                message.contains(&format!("{ms} for milliseconds")),
                "{message}"
            );
        }
    }

    #[test]
    fn writes_humane_durations() {
        assert_eq!(humane(Duration::from_millis(150)), "150ms");
        assert_eq!(humane(Duration::from_millis(2300)), "2.3s");
        assert_eq!(humane(Duration::from_secs(60)), "1m");
        assert_eq!(humane(Duration::from_secs(3720)), "1h2m");
        assert_eq!(humane(Duration::from_secs(3)), "3s");
    }
}
