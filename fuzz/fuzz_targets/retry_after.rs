//! Fuzz target: the retry-header parsers; see `retry_model::retry_after`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::retry_after::check(data) {
        panic!("{violation}");
    }
});
