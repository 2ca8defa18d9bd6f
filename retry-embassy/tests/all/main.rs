//! Every integration test of `retry-embassy` in one test binary (one link instead of
//! one per file): each file under `tests/all/` is a module. Run one file's tests
//! with `cargo test -p retry-embassy --test all <module>::`.

// Helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod automatic;
mod cancel;
mod schedule;
mod shared;
mod support;
mod zero_delay;
