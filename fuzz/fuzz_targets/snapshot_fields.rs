//! Fuzz target: snapshots of real machines changed field by field, then restored; see `retry_model::snapshot_fields`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::snapshot_fields::check(data) {
        panic!("{violation}");
    }
});
