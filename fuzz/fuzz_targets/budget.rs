//! Fuzz target: the retry budgets against their reference model; see `retry_model::budget`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(violation) = retry_model::budget::check(data) {
        panic!("{violation}");
    }
});
