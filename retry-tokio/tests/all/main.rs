//! Every integration test of `retry-tokio` in one test binary (one link instead of
//! one per file): each file under `tests/all/` is a module. Run one file's tests
//! with `cargo test -p retry-tokio --test all <module>::`.

// Helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod abandoned;
mod allocations;
mod attempt_events;
mod automatic;
mod borrow;
mod conformance;
mod counting;
mod events;
mod footprint;
mod hedge;
mod hedge_allocations;
mod hedge_http;
mod http;
mod load;
mod metrics;
mod mixed;
mod quick_failure;
mod readme_hedge;
mod readme_tower;
mod resume;
mod retry;
mod seams;
mod server;
mod shared;
mod stream;
mod support;
mod tower;
