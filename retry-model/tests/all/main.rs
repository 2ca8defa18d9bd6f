//! Every integration test of `retry-model` in one test binary (one link instead of
//! one per file): each file under `tests/all/` is a module. Run one file's tests
//! with `cargo test -p retry-model --test all <module>::`.

// Helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod fuzz_corpus;
mod snapshot_corpus;
mod snapshot_fields;
