//! Fuzz target: see `retry_core::fuzzing::retry_machine`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_core::fuzzing::retry_machine(data) {
        panic!("{violation}");
    }
});
