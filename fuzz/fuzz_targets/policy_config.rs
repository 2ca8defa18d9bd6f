//! Fuzz target: arbitrary bytes read as a TOML and as a JSON policy config.
//! Reading never panics; a policy that is read is valid and writes back (JSON
//! and TOML) to text that reads as the same policy.
#![no_main]

use retry_core::RetryPolicy;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(text) = core::str::from_utf8(data) else {
        return;
    };
    if let Ok(policy) = toml::from_str::<RetryPolicy>(text) {
        check(&policy);
    }
    if let Ok(policy) = serde_json::from_str::<RetryPolicy>(text) {
        check(&policy);
    }
});

fn check(policy: &RetryPolicy) {
    if let Err(e) = policy.validate() {
        panic!("a policy read from config is invalid: {e}");
    }
    let json = serde_json::to_string(policy).expect("a policy writes as JSON");
    let back: RetryPolicy = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("policy JSON {json} does not read back: {e}"));
    assert_eq!(&back, policy, "JSON round trip changed the policy: {json}");
    let toml_text = toml::to_string(policy).expect("a policy writes as TOML");
    let back: RetryPolicy = toml::from_str(&toml_text)
        .unwrap_or_else(|e| panic!("policy TOML {toml_text} does not read back: {e}"));
    assert_eq!(&back, policy, "TOML round trip changed the policy: {toml_text}");
}
