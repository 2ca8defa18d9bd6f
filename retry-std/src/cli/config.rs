//! `--config FILE`: a policy from a TOML or JSON file, which flags then override.
//!
//! The file uses retry-core's configuration schema (see `retry_core::config`).
//! Every field is optional: what the file leaves out keeps the program's default.
//! A file whose name ends in `.json` (or whose text starts with `{`) is read as
//! JSON, anything else as TOML.

use std::path::Path;

use retry_core::{PolicyOverride, RetryPolicy};

use super::args::CliError;

/// Loads the policy in `path`, laid over the program's defaults.
///
/// # Errors
/// [`CliError::Usage`] naming `--config`, the file and what was wrong with it.
pub fn load(path: &Path) -> Result<RetryPolicy, CliError> {
    let fail = |why: &dyn core::fmt::Display| {
        CliError::Usage(format!("retry: --config {}: {why}", path.display()))
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(&e))?;
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        || text.trim_start().starts_with('{');
    let layer: PolicyOverride = if json {
        serde_json::from_str(&text).map_err(|e| fail(&e))?
    } else {
        toml::from_str(&text).map_err(|e| fail(&e))?
    };
    layer.apply(&RetryPolicy::default()).map_err(|e| fail(&e))
}
