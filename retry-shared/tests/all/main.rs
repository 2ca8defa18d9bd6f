//! Every integration test of `retry-shared` in one test binary (one link instead of
//! one per file): each file under `tests/all/` is a module. Run one file's tests
//! with `cargo test -p retry-shared --test all <module>::`.

// Helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod alarm;
mod clock_reads;
mod closed_path_threads;
mod permit_guard;
mod quick_failure;
