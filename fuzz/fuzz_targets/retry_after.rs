//! Fuzz target: see `retry_core::fuzzing::retry_after`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_core::fuzzing::retry_after(data) {
        panic!("{violation}");
    }
});
