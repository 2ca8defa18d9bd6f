//! Fuzz target: the retry machine against its reference model; see `retry_model::retry_machine`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::retry_machine::check(data) {
        panic!("{violation}");
    }
});
