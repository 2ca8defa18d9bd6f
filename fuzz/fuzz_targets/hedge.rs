//! Fuzz target: the hedge machine and its latency histogram against their reference models; see `retry_model::hedge`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::hedge::check(data) {
        panic!("{violation}");
    }
});
