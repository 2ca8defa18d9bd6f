//! Fuzz target: see `retry_core::fuzzing::breaker`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_core::fuzzing::breaker(data) {
        panic!("{violation}");
    }
});
