//! Every integration test of `retry-core` in one test binary (one link instead of
//! one per file): each file under `tests/all/` is a module. Run one file's tests
//! with `cargo test -p retry-core --test all <module>::`.

// Helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod breaker;
mod breaker_metrics;
mod breaker_props;
mod breaker_timer;
mod budget;
mod call_durations;
mod closed_path;
mod compose;
mod config;
mod counting;
mod features;
mod fleet;
mod footprint;
mod hedge_misuse;
mod hedge_properties;
mod hedge_timelines;
mod misuse;
mod policy;
mod presets;
mod properties;
mod resume;
mod retry_after;
mod seams;
mod sets;
mod start_time;
mod timelines;
