//! Fuzz target: policy configs read from arbitrary TOML and JSON; see `retry_model::policy_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::policy_config::check(data) {
        panic!("{violation}");
    }
});
