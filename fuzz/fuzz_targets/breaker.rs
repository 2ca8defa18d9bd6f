//! Fuzz target: the circuit breaker against its reference model; see `retry_model::breaker`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::breaker::check(data) {
        panic!("{violation}");
    }
});
