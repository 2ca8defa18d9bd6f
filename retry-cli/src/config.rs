//! `--config FILE`: a policy from a TOML or JSON file, laid over the program's
//! defaults, which flags then override. `--config` may be given more than
//! once: the files are layered in the order given, each over the ones before.
//!
//! The file uses retry-core's configuration schema (see `retry_core::config`),
//! plus the program's own keys ([`PROGRAM_KEYS`]). Every key is optional: a key
//! the file leaves out keeps the value below it, so an empty file (TOML or
//! JSON) changes nothing. A file whose name ends in `.json` (or whose text
//! starts with `{`) is read as JSON, anything else as TOML.
//!
//! Durations are text with a unit (`"500ms"`, `"1m30s"`) or bare numbers of
//! milliseconds (`500`); a quoted number without a unit (`"500"`) is refused,
//! as `--delay 500` is. `budget` is `--max-time`: it also caps each attempt at
//! the budget's end, unless the file sets `cap_attempt_to_budget` itself.
//!
//! Every error names the file, the line and column of the key or value at
//! fault, and the key.

use core::fmt;
use core::time::Duration;
use std::collections::BTreeMap;
use std::path::Path;

use retry_core::duration_text::{parse_duration_with, BareNumber};
use retry_core::{ConfigError, DurationParseError, PolicyOverride, RetryPolicy};
use serde_json::Value;

use super::args::CliError;
use super::outcome::{parse_list, OutcomeList};

/// The keys the program reads besides the core's policy schema.
pub const PROGRAM_KEYS: [&str; 8] = [
    "retry_on",
    "stop_on",
    "delays",
    "kill_after",
    "until_fail",
    "success_count",
    "on_retry",
    "on_give_up",
];

/// The core schema's keys whose values are durations (`budget` and
/// `attempt_timeout` also take `"none"`).
const DURATION_KEYS: [&str; 9] = [
    "initial_delay",
    "increment",
    "max_delay",
    "min_delay",
    "retry_after_min",
    "retry_after_max",
    "retry_after_cap",
    "budget",
    "attempt_timeout",
];

/// The program's own settings from the config files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProgramKeys {
    /// `retry_on`: as `--retry-on`.
    pub retry_on: Option<OutcomeList>,
    /// `stop_on`: as `--stop-on`.
    pub stop_on: Option<OutcomeList>,
    /// `delays`: as `--delays`.
    pub delays: Option<Vec<Duration>>,
    /// `kill_after`: as `--kill-after`.
    pub kill_after: Option<Duration>,
    /// `until_fail`: as `--until-fail`.
    pub until_fail: Option<bool>,
    /// `success_count`: as `--success-count`.
    pub success_count: Option<u32>,
    /// `on_retry`: as `--on-retry`.
    pub on_retry: Option<String>,
    /// `on_give_up`: as `--on-give-up`.
    pub on_give_up: Option<String>,
    /// Whether a file set `jitter` (else the program's default applies).
    pub sets_jitter: bool,
}

impl ProgramKeys {
    /// `later`'s keys over these.
    fn layer(&mut self, later: ProgramKeys) {
        let ProgramKeys {
            retry_on,
            stop_on,
            delays,
            kill_after,
            until_fail,
            success_count,
            on_retry,
            on_give_up,
            sets_jitter,
        } = later;
        self.retry_on = retry_on.or(self.retry_on);
        self.stop_on = stop_on.or(self.stop_on);
        self.delays = delays.or(self.delays.take());
        self.kill_after = kill_after.or(self.kill_after);
        self.until_fail = until_fail.or(self.until_fail);
        self.success_count = success_count.or(self.success_count);
        self.on_retry = on_retry.or(self.on_retry.take());
        self.on_give_up = on_give_up.or(self.on_give_up.take());
        self.sets_jitter |= sets_jitter;
    }
}

/// Where something is in a file: 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    line: usize,
    column: usize,
}

impl Position {
    /// The position of byte `offset` of `text`.
    fn of(text: &str, offset: usize) -> Position {
        let before = text.get(..offset.min(text.len())).unwrap_or(text);
        let line = before.matches('\n').count().saturating_add(1);
        let start = before.rfind('\n').map_or(0, |n| n.saturating_add(1));
        let column = before
            .get(start..)
            .map_or(0, |l| l.chars().count())
            .saturating_add(1);
        Position { line, column }
    }
}

/// One key of a file: its name, where the key and its value are, the value.
#[derive(Debug)]
struct Entry {
    key: String,
    key_at: Position,
    value_at: Position,
    value: Value,
}

/// A config error, told as `retry: --config FILE:LINE:COLUMN: what`.
fn located(path: &Path, at: Option<Position>, what: &dyn fmt::Display) -> CliError {
    match at {
        Some(p) => CliError::Usage(format!(
            "retry: --config {}:{}:{}: {what}",
            path.display(),
            p.line,
            p.column
        )),
        None => CliError::Usage(format!("retry: --config {}: {what}", path.display())),
    }
}

/// The keys of a TOML document, with positions.
fn toml_entries(path: &Path, text: &str) -> Result<Vec<Entry>, CliError> {
    use toml::Spanned;
    let doc: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
        toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| Position::of(text, s.start));
            let message = e.message().trim_end().replace('\n', "; ");
            located(path, at, &message)
        })?;
    let mut entries = Vec::with_capacity(doc.len());
    for (key, value) in doc {
        let key_at = Position::of(text, key.span().start);
        let value_at = Position::of(text, value.span().start);
        let value = serde_json::to_value(value.into_inner())
            .map_err(|e| located(path, Some(value_at), &e))?;
        entries.push(Entry {
            key: key.into_inner(),
            key_at,
            value_at,
            value,
        });
    }
    entries.sort_by_key(|e| (e.key_at.line, e.key_at.column));
    Ok(entries)
}

/// The keys of a JSON object, with positions.
fn json_entries(path: &Path, text: &str) -> Result<Vec<Entry>, CliError> {
    use serde_json::value::RawValue;
    let doc: BTreeMap<String, &RawValue> = serde_json::from_str(text).map_err(|e| {
        let at = Position {
            line: e.line(),
            column: e.column(),
        };
        located(path, Some(at), &bare_message(&e))
    })?;
    let mut entries = Vec::with_capacity(doc.len());
    for (key, raw) in doc {
        let offset = (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        let value_at = Position::of(text, offset);
        let key_at = Position::of(text, json_key_offset(text, offset).unwrap_or(offset));
        let value: Value =
            serde_json::from_str(raw.get()).map_err(|e| located(path, Some(value_at), &e))?;
        entries.push(Entry {
            key,
            key_at,
            value_at,
            value,
        });
    }
    entries.sort_by_key(|e| (e.key_at.line, e.key_at.column));
    Ok(entries)
}

/// The offset of the opening quote of the key whose value starts at `value`:
/// back over blanks, the colon, blanks, the key's closing quote, to its
/// opening quote.
fn json_key_offset(text: &str, value: usize) -> Option<usize> {
    let bytes = text.as_bytes().get(..value)?;
    let blanks_before = |mut at: usize| {
        while at > 0 && bytes.get(at - 1).is_some_and(u8::is_ascii_whitespace) {
            at -= 1;
        }
        at
    };
    let mut at = blanks_before(bytes.len());
    if at == 0 || bytes.get(at - 1) != Some(&b':') {
        return None;
    }
    at = blanks_before(at - 1);
    if at == 0 || bytes.get(at - 1) != Some(&b'"') {
        return None;
    }
    at -= 1;
    // The opening quote: a quote not escaped by a backslash.
    while at > 0 {
        at -= 1;
        if bytes.get(at) == Some(&b'"') && (at == 0 || bytes.get(at - 1) != Some(&b'\\')) {
            return Some(at);
        }
    }
    None
}

/// The core schema's keys, from the schema itself: the field names serde is
/// told to expect.
fn core_keys() -> &'static [&'static str] {
    use serde::de::{self, Deserialize, Visitor};
    struct Fields(Option<&'static [&'static str]>);
    #[derive(Debug)]
    struct Found;
    impl fmt::Display for Found {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("fields found")
        }
    }
    impl de::StdError for Found {}
    impl de::Error for Found {
        fn custom<T: fmt::Display>(_: T) -> Found {
            Found
        }
    }
    impl<'de> de::Deserializer<'de> for &mut Fields {
        type Error = Found;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Found> {
            Err(Found)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Found> {
            self.0 = Some(fields);
            Err(Found)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    static KEYS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut fields = Fields(None);
        let _ = PolicyOverride::deserialize(&mut fields);
        fields.0.unwrap_or(&[])
    })
}

/// The number of single-character edits between `a` and `b` (for "did you
/// mean").
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row.first().copied().unwrap_or(0);
        if let Some(first) = row.first_mut() {
            *first = i.saturating_add(1);
        }
        for (j, cb) in b.iter().enumerate() {
            let above = row.get(j.saturating_add(1)).copied().unwrap_or(0);
            let left = row.get(j).copied().unwrap_or(0);
            let cost = diagonal.saturating_add(usize::from(ca != *cb));
            let best = cost
                .min(above.saturating_add(1))
                .min(left.saturating_add(1));
            diagonal = above;
            if let Some(cell) = row.get_mut(j.saturating_add(1)) {
                *cell = best;
            }
        }
    }
    row.last().copied().unwrap_or(0)
}

/// The message for a key that is not in the schema.
fn unknown_key(key: &str) -> String {
    let keys: Vec<&str> = core_keys().iter().copied().chain(PROGRAM_KEYS).collect();
    let near = keys
        .iter()
        .map(|k| (edits(key, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min();
    let hint = near
        .map(|(_, k)| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default();
    format!(
        "unknown key `{key}`{hint}; the keys are {}",
        keys.iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A quoted duration must have a unit: refuses `"2"`, as `--delay 2` is.
fn check_unit(value: &Value) -> Result<(), String> {
    let Value::String(text) = value else {
        return Ok(());
    };
    if text.trim() == "none" {
        return Ok(());
    }
    match parse_duration_with(text, BareNumber::Refused) {
        Err(DurationParseError::BareNumber) => {
            let t = text.trim();
            Err(format!(
                "\"{t}\" has no unit: write \"{t}ms\" (or {t} without quotes) for milliseconds, or \"{t}s\" for seconds"
            ))
        }
        _ => Ok(()),
    }
}

/// A serde message without the position serde_json adds (the caller gives
/// its own).
fn bare_message(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) if error.line() > 0 => text.get(..at).unwrap_or(&text).to_owned(),
        _ => text,
    }
}

/// The keys a policy error may be about, the field first.
fn related(field: &str) -> &'static [&'static str] {
    match field {
        "min_delay" | "max_delay" => &["min_delay", "max_delay"],
        "max_attempts" | "max_retries" => &["max_attempts", "max_retries"],
        "retry_after_min" | "retry_after_max" => &["retry_after_min", "retry_after_max"],
        "factor" | "increment" | "initial_delay" | "backoff" => {
            &["backoff", "factor", "increment", "initial_delay"]
        }
        "respect_retry_after" | "retry_after" => &["respect_retry_after", "retry_after"],
        "budget" | "cap_attempt_to_budget" | "attempt_timeout" => {
            &["budget", "cap_attempt_to_budget", "attempt_timeout"]
        }
        _ => &[],
    }
}

/// Loads the files `paths`, in order, each laid over the ones before, the
/// first over `base` (the program's defaults).
///
/// # Errors
/// [`CliError::Usage`] naming `--config`, the file, the line and column, the
/// key and what was wrong.
pub fn load_all(
    paths: &[std::path::PathBuf],
    base: &RetryPolicy,
) -> Result<(RetryPolicy, ProgramKeys), CliError> {
    let mut policy = *base;
    let mut keys = ProgramKeys::default();
    for path in paths {
        let (next, file_keys) = load(path, &policy)?;
        policy = next;
        keys.layer(file_keys);
    }
    Ok((policy, keys))
}

/// Loads `path`, laid over `base`.
///
/// # Errors
/// [`CliError::Usage`] naming `--config`, the file, the line and column, the
/// key and what was wrong.
pub fn load(path: &Path, base: &RetryPolicy) -> Result<(RetryPolicy, ProgramKeys), CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| located(path, None, &e))?;
    if text.trim().is_empty() {
        // An empty file changes nothing, in either format.
        return Ok((*base, ProgramKeys::default()));
    }
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        || text.trim_start().starts_with('{');
    let entries = if json {
        json_entries(path, &text)?
    } else {
        toml_entries(path, &text)?
    };
    let mut keys = ProgramKeys::default();
    let mut layer = serde_json::Map::new();
    for entry in &entries {
        let key = entry.key.as_str();
        let bad =
            |why: &dyn fmt::Display| located(path, Some(entry.value_at), &format!("{key}: {why}"));
        if PROGRAM_KEYS.contains(&key) {
            program_key(&mut keys, key, &entry.value).map_err(|why| bad(&why))?;
        } else if core_keys().contains(&key) {
            if DURATION_KEYS.contains(&key) {
                check_unit(&entry.value).map_err(|why| bad(&why))?;
            }
            // Each key on its own first, so that an error points at it.
            let single = Value::Object(serde_json::Map::from_iter([(
                entry.key.clone(),
                entry.value.clone(),
            )]));
            if let Err(e) = serde_json::from_value::<PolicyOverride>(single) {
                let message = bare_message(&e);
                let message = message
                    .strip_prefix(&format!("{key}: "))
                    .unwrap_or(&message)
                    .to_owned();
                return Err(bad(&message));
            }
            layer.insert(entry.key.clone(), entry.value.clone());
        } else {
            return Err(located(path, Some(entry.key_at), &unknown_key(key)));
        }
    }
    let mut layer: PolicyOverride = serde_json::from_value(Value::Object(layer))
        .map_err(|e| located(path, None, &bare_message(&e)))?;
    keys.sets_jitter = layer.jitter.is_some();
    // `budget` is `--max-time`: attempts are cut at the budget's end too,
    // unless the file says otherwise.
    if matches!(layer.budget, Some(Some(_))) && layer.cap_attempt_to_budget.is_none() {
        layer.cap_attempt_to_budget = Some(true);
    }
    let policy = layer.apply(base).map_err(|e: ConfigError| {
        let field = e.field();
        let at = core::iter::once(field)
            .chain(related(field).iter().copied())
            .find_map(|k| entries.iter().find(|entry| entry.key == k))
            .map(|entry| entry.value_at);
        let message = e.to_string();
        let message = if message
            .split(':')
            .next()
            .is_some_and(|head| head.contains(field))
        {
            message
        } else {
            format!("{field}: {message}")
        };
        located(path, at, &message)
    })?;
    Ok((policy, keys))
}

/// Reads one of the program's own keys into `keys`.
fn program_key(keys: &mut ProgramKeys, key: &str, value: &Value) -> Result<(), String> {
    match key {
        "retry_on" | "stop_on" => {
            let list = list_text(value).ok_or("expected a list such as \"1,22,75,timeout\"")?;
            let set = parse_list(&list)?;
            if key == "retry_on" {
                keys.retry_on = Some(set);
            } else {
                keys.stop_on = Some(set);
            }
        }
        "delays" => {
            let items: Vec<Value> = match value {
                Value::Array(items) => items.clone(),
                Value::String(text) => text
                    .split(',')
                    .map(|item| Value::String(item.to_owned()))
                    .collect(),
                _ => return Err("expected a list such as [\"1s\", \"2s\", \"5s\"]".to_owned()),
            };
            let delays = items.iter().map(duration).collect::<Result<Vec<_>, _>>()?;
            keys.delays = Some(delays);
        }
        "kill_after" => keys.kill_after = Some(duration(value)?),
        "until_fail" => match value {
            Value::Bool(b) => keys.until_fail = Some(*b),
            _ => return Err("expected true or false".to_owned()),
        },
        "success_count" => match value.as_u64() {
            Some(n) if n >= 1 => {
                keys.success_count = Some(u32::try_from(n).map_err(|_| "too large")?);
            }
            _ => return Err("expected a whole number >= 1".to_owned()),
        },
        "on_retry" | "on_give_up" => match value {
            Value::String(t) if key == "on_retry" => keys.on_retry = Some(t.clone()),
            Value::String(t) => keys.on_give_up = Some(t.clone()),
            _ => return Err("expected a shell command as text".to_owned()),
        },
        _ => {}
    }
    Ok(())
}

/// A list given as text (`"1,2,5-9"`) or as an array of texts and numbers.
fn list_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|parts| parts.join(",")),
        _ => None,
    }
}

/// A duration of the program's keys: text with a unit, or a whole number of
/// milliseconds.
fn duration(value: &Value) -> Result<Duration, String> {
    match value {
        Value::String(text) => {
            check_unit(value)?;
            retry_core::parse_duration(text).map_err(|e| format!("`{}`: {e}", text.trim()))
        }
        Value::Number(n) => n.as_u64().map(Duration::from_millis).ok_or_else(|| {
            format!("`{n}`: a duration is a whole number of milliseconds, not negative")
        }),
        _ => Err("expected a duration such as \"10s\"".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "a\nbé = 2\n";
        assert_eq!(Position::of(text, 0), Position { line: 1, column: 1 });
        assert_eq!(Position::of(text, 2), Position { line: 2, column: 1 });
        assert_eq!(Position::of(text, 7), Position { line: 2, column: 5 });
        assert_eq!(Position::of(text, 999).line, 3);
    }

    #[test]
    fn json_keys_are_found_back_from_their_values() {
        let text = "{\n  \"a\\\"b\" :  1,\n \"c\":2}";
        let one = text.find('1').unwrap();
        assert_eq!(json_key_offset(text, one), text.find("\"a"));
        let two = text.find('2').unwrap();
        assert_eq!(json_key_offset(text, two), text.find("\"c"));
        assert_eq!(json_key_offset(text, 0), None);
    }

    #[test]
    fn the_core_keys_come_from_the_schema() {
        let keys = core_keys();
        for key in [
            "max_attempts",
            "budget",
            "jitter",
            "initial_delay",
            "idempotent",
        ] {
            assert!(keys.contains(&key), "{key}: {keys:?}");
        }
        for key in DURATION_KEYS {
            assert!(keys.contains(&key), "{key}");
        }
        assert!(unknown_key("max_attempt").contains("did you mean `max_attempts`?"));
        assert!(unknown_key("x").contains("`on_give_up`"));
        assert_eq!(edits("kitten", "sitting"), 3);
        assert_eq!(edits("", "ab"), 2);
    }
}
