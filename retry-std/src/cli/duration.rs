//! Humane durations for the command line: `500ms`, `1m30s`, `2h`, `1.5s`.
//!
//! A number without a unit is **seconds** on the command line (`--delay 2` is two
//! seconds), as in `sleep` and `timeout`. Units: `ns`, `us` (or `µs`), `ms`, `s`,
//! `m`, `h`, `d`. Several parts add up (`1h30m`); fractions are allowed in every
//! part (`0.25s`, `1.5h`). Negative, NaN and overflowing values are rejected.

use core::time::Duration;

const SECOND: u64 = 1_000_000_000;

/// Reads a duration as described in the module docs.
///
/// # Errors
/// A message saying what is wrong with the text.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    let mut rest = text;
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() {
            return Err(format!(
                "`{text}` is not a duration (e.g. 500ms, 1m30s, 2h, or 1.5 for seconds)"
            ));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let nanos_per_unit: u64 = match unit.trim() {
            "" if number_len == rest.len() && total.is_zero() => SECOND,
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" | "sec" | "secs" => SECOND,
            "m" | "min" | "mins" => 60 * SECOND,
            "h" => 3600 * SECOND,
            "d" => 86_400 * SECOND,
            "" => return Err(format!("`{text}`: every part after the first needs a unit")),
            other => {
                return Err(format!(
                    "`{text}`: unknown unit `{other}` (use ns, us, ms, s, m, h, d)"
                ))
            }
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}`: `{number}` is not a number"))?;
        let part = exact_part(number, nanos_per_unit)
            .or_else(|| Duration::try_from_secs_f64(value * nanos_per_unit as f64 / 1e9).ok())
            .ok_or_else(|| format!("`{text}` is too long"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("`{text}` is too long"))?;
        rest = next;
    }
    Ok(total)
}

/// Whole numbers are converted without floating point, so `3ms` is exactly 3 ms.
fn exact_part(number: &str, nanos_per_unit: u64) -> Option<Duration> {
    let n: u64 = number.parse().ok()?;
    let nanos = u128::from(n).checked_mul(u128::from(nanos_per_unit))?;
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    let sub = u32::try_from(nanos % 1_000_000_000).ok()?;
    Some(Duration::new(secs, sub))
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
    fn reads_humane_durations() {
        let ok = |t: &str| parse_duration(t).unwrap_or(Duration::MAX);
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("2"), Duration::from_secs(2));
        assert_eq!(ok("0.05"), Duration::from_millis(50));
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
    fn writes_humane_durations() {
        assert_eq!(humane(Duration::from_millis(150)), "150ms");
        assert_eq!(humane(Duration::from_millis(2300)), "2.3s");
        assert_eq!(humane(Duration::from_secs(60)), "1m");
        assert_eq!(humane(Duration::from_secs(3720)), "1h2m");
        assert_eq!(humane(Duration::from_secs(3)), "3s");
    }
}
