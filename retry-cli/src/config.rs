//! `--config FILE`: a policy from a TOML or JSON file, laid over the program's
//! defaults, which flags then override.
//!
//! The file uses retry-core's configuration schema (see `retry_core::config`),
//! plus the program's own keys ([`PROGRAM_KEYS`]). Every key is optional: a key
//! the file leaves out keeps the program's default, so an empty file changes
//! nothing. A file whose name ends in `.json` (or whose text starts with `{`) is
//! read as JSON, anything else as TOML.

use core::time::Duration;
use std::path::Path;

use retry_core::{PolicyOverride, RetryPolicy};

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

/// The program's own settings from a config file.
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
}

/// One program key's value, whatever the file format.
enum Value {
    Text(String),
    Number(i64),
    Bool(bool),
    List(Vec<Value>),
    Other,
}

impl Value {
    fn from_toml(value: toml::Value) -> Value {
        match value {
            toml::Value::String(s) => Value::Text(s),
            toml::Value::Integer(n) => Value::Number(n),
            toml::Value::Boolean(b) => Value::Bool(b),
            toml::Value::Array(items) => {
                Value::List(items.into_iter().map(Value::from_toml).collect())
            }
            _ => Value::Other,
        }
    }

    fn from_json(value: serde_json::Value) -> Value {
        match value {
            serde_json::Value::String(s) => Value::Text(s),
            serde_json::Value::Number(n) => n.as_i64().map_or(Value::Other, Value::Number),
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Array(items) => {
                Value::List(items.into_iter().map(Value::from_json).collect())
            }
            _ => Value::Other,
        }
    }

    /// A list given as text (`"1,2,5-9"`) or as an array of texts and numbers.
    fn list_text(&self) -> Option<String> {
        match self {
            Value::Text(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::List(items) => items
                .iter()
                .map(|item| match item {
                    Value::Text(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(|parts| parts.join(",")),
            _ => None,
        }
    }
}

/// Loads `path`, laid over `base` (the program's defaults).
///
/// # Errors
/// [`CliError::Usage`] naming `--config`, the file, the key and what was wrong.
pub fn load(path: &Path, base: &RetryPolicy) -> Result<(RetryPolicy, ProgramKeys), CliError> {
    let fail = |why: &dyn core::fmt::Display| {
        CliError::Usage(format!("retry: --config {}: {why}", path.display()))
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(&e))?;
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        || text.trim_start().starts_with('{');
    let mut program: Vec<(&'static str, Value)> = Vec::new();
    let layer: PolicyOverride = if json {
        let mut doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&text).map_err(|e| fail(&e))?;
        for key in PROGRAM_KEYS {
            if let Some(value) = doc.remove(key) {
                program.push((key, Value::from_json(value)));
            }
        }
        serde_json::from_value(serde_json::Value::Object(doc)).map_err(|e| fail(&e))?
    } else {
        let mut doc: toml::Table = toml::from_str(&text).map_err(|e| fail(&e))?;
        for key in PROGRAM_KEYS {
            if let Some(value) = doc.remove(key) {
                program.push((key, Value::from_toml(value)));
            }
        }
        toml::Value::Table(doc)
            .try_into()
            .map_err(|e: toml::de::Error| fail(&e.message().trim_end()))?
    };
    let policy = layer.apply(base).map_err(|e| fail(&e))?;
    let mut keys = ProgramKeys::default();
    for (key, value) in program {
        let bad = |why: &str| fail(&format!("{key}: {why}"));
        match key {
            "retry_on" | "stop_on" => {
                let list = value
                    .list_text()
                    .ok_or_else(|| bad("expected a list such as \"1,22,75,timeout\""))?;
                let set = parse_list(&list).map_err(|e| bad(&e))?;
                if key == "retry_on" {
                    keys.retry_on = Some(set);
                } else {
                    keys.stop_on = Some(set);
                }
            }
            "delays" => {
                let list = value
                    .list_text()
                    .ok_or_else(|| bad("expected a list such as \"1s,2s,5s\""))?;
                keys.delays = Some(delays(&list).map_err(|e| bad(&e))?);
            }
            "kill_after" => match value {
                Value::Text(t) => {
                    keys.kill_after =
                        Some(retry_core::parse_duration(&t).map_err(|e| bad(&e.to_string()))?);
                }
                Value::Number(ms) => {
                    let ms = u64::try_from(ms).map_err(|_| bad("a duration is not negative"))?;
                    keys.kill_after = Some(Duration::from_millis(ms));
                }
                _ => return Err(bad("expected a duration such as \"10s\"")),
            },
            "until_fail" => match value {
                Value::Bool(b) => keys.until_fail = Some(b),
                _ => return Err(bad("expected true or false")),
            },
            "success_count" => match value {
                Value::Number(n) if n >= 1 => {
                    keys.success_count = Some(u32::try_from(n).map_err(|_| bad("too large"))?);
                }
                _ => return Err(bad("expected a whole number >= 1")),
            },
            "on_retry" | "on_give_up" => match value {
                Value::Text(t) if key == "on_retry" => keys.on_retry = Some(t),
                Value::Text(t) => keys.on_give_up = Some(t),
                _ => return Err(bad("expected a shell command as text")),
            },
            _ => {}
        }
    }
    Ok((policy, keys))
}

/// A config file's `delays`: durations as the config schema reads them (a bare
/// number is milliseconds there).
fn delays(list: &str) -> Result<Vec<Duration>, String> {
    list.split(',')
        .map(|item| retry_core::parse_duration(item).map_err(|e| format!("`{}`: {e}", item.trim())))
        .collect()
}
