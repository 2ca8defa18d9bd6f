//! Every integration test of `retry-redis` in one test binary (one link instead of
//! one per file): each file under `tests/all/` is a module. Run one file's tests
//! with `cargo test -p retry-redis --test all <module>::`.

// Helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod automatic;
mod breaker;
mod budget;
mod common;
mod member_process;
mod outage;
mod readme_fleet;
mod sync_sums;
