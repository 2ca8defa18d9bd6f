//! Every integration test of `retry-std` in one test binary (one link instead of
//! one per file): each file under `tests/all/` is a module. Run one file's tests
//! with `cargo test -p retry-std --test all <module>::`.

// Helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod adapter;
mod allocations;
mod automatic;
mod breaker;
mod counting;
mod panic;
mod quick_failure;
