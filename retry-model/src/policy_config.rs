//! Policy configs read from arbitrary text.
//!
//! Reads arbitrary bytes (as UTF-8) as a TOML and as a JSON [`RetryPolicy`]
//! config. Reading must never panic; a policy that reads must be valid, and must
//! write back, as JSON and as TOML, to text that reads as the same policy.

use retry_core::RetryPolicy;

use crate::shared::{ensure, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "policy_config";

/// A policy that was read: valid, and unchanged by a JSON and a TOML round trip.
/// `step` is 1 for a policy read from TOML, 2 for one read from JSON.
fn check_policy(policy: &RetryPolicy, step: usize) -> Result<(), Violation> {
    let check = |ok, invariant| ensure(ok, TARGET, step, invariant);
    check(
        policy.validate().is_ok(),
        "a policy read from config is invalid",
    )?;
    let json = serde_json::to_string(policy);
    check(json.is_ok(), "a policy does not write as JSON")?;
    if let Ok(json) = json {
        let back = serde_json::from_str::<RetryPolicy>(&json);
        check(back.is_ok(), "a policy's JSON does not read back")?;
        check(
            back.is_ok_and(|back| back == *policy),
            "a JSON round trip changed the policy",
        )?;
    }
    let toml_text = toml::to_string(policy);
    check(toml_text.is_ok(), "a policy does not write as TOML")?;
    if let Ok(toml_text) = toml_text {
        let back = toml::from_str::<RetryPolicy>(&toml_text);
        check(back.is_ok(), "a policy's TOML does not read back")?;
        check(
            back.is_ok_and(|back| back == *policy),
            "a TOML round trip changed the policy",
        )?;
    }
    Ok(())
}

/// Reads `data` as a TOML and as a JSON policy config. Checks: no panic; what is
/// read is valid and survives a write-and-read round trip in both formats.
/// Bytes that are not UTF-8 are not text and pass.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let Ok(text) = core::str::from_utf8(data) else {
        return Ok(());
    };
    if let Ok(policy) = toml::from_str::<RetryPolicy>(text) {
        check_policy(&policy, 1)?;
    }
    if let Ok(policy) = serde_json::from_str::<RetryPolicy>(text) {
        check_policy(&policy, 2)?;
    }
    Ok(())
}
