//! Fuzz target: the exit-code, status and method parsers; see `retry_model::sets`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::sets::check(data) {
        panic!("{violation}");
    }
});
