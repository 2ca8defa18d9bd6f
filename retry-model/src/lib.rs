//! Test oracles for `retry-core`: reference models and invariant checks, one
//! module per fuzz target, kept out of the product crate.
//!
//! Each module exposes `check(data: &[u8]) -> Result<(), Violation>`: it reads an
//! arbitrary byte string (through `arbitrary::Unstructured` or as text), drives
//! a machine or a parser of `retry-core` with it through the crate's public API,
//! and holds every answer to the documented invariants and, where there is one,
//! to a small reference model written here, apart from the code it checks. A
//! model restates the rules (curves, jitter formulas, windows, token arithmetic,
//! set lists); it never calls the logic it verifies to compute its expectations.
//!
//! The cargo-fuzz targets in `fuzz/` call these checks and panic on a
//! [`Violation`]; `tests/all/fuzz_corpus.rs` replays every target's committed corpus
//! (`fuzz/corpus/<target>/`) and a few thousand pseudo-random inputs through
//! [`TARGETS`] on stable Rust.
//!
//! ```
//! // Any bytes at all are a valid input; a failure names the broken invariant.
//! assert_eq!(retry_model::sets::check(b"\x00 1, 5-9 ,75"), Ok(()));
//! assert_eq!(retry_model::retry_after::check(b"abcdefgh 120"), Ok(()));
//! assert_eq!(retry_model::policy_config::check(b"max_attempts = 3"), Ok(()));
//! ```
#![forbid(unsafe_code)]
// A model that panics would report a crash in the code it checks.
#![warn(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::float_cmp
)]

pub mod breaker;
pub mod budget;
pub mod hedge;
pub mod policy_config;
pub mod retry_after;
pub mod retry_machine;
pub mod sets;
mod shared;
pub mod snapshot;
pub mod snapshot_fields;

pub use shared::Violation;

/// A check: any bytes in, the first broken invariant out.
pub type Check = fn(&[u8]) -> Result<(), Violation>;

/// Every fuzz target by name (the name of its binary in `fuzz/` and of its
/// corpus directory `fuzz/corpus/<name>/`), with its check.
pub const TARGETS: [(&str, Check); 9] = [
    (retry_machine::TARGET, retry_machine::check),
    (breaker::TARGET, breaker::check),
    (budget::TARGET, budget::check),
    (retry_after::TARGET, retry_after::check),
    (sets::TARGET, sets::check),
    (policy_config::TARGET, policy_config::check),
    (hedge::TARGET, hedge::check),
    (snapshot::TARGET, snapshot::check),
    (snapshot_fields::TARGET, snapshot_fields::check),
];
