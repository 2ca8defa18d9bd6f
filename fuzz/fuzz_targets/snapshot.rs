//! Fuzz target: arbitrary bytes decoded as machine snapshots and restored; see `retry_model::snapshot`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::snapshot::check(data) {
        panic!("{violation}");
    }
});
