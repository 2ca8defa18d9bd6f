//! Policies as data: the serde schema of a retry policy (`config.rs`, public as
//! `retry_core::config`), the duration text it is written in (`duration_text.rs`,
//! public as `retry_core::duration_text`), both behind the `serde` feature, and
//! the named presets (`presets.rs`): well-known systems' defaults and one of our
//! own, each a policy with the classifiers and seed that go with it.

#[cfg(feature = "serde")]
pub mod config;
#[cfg(feature = "serde")]
pub mod duration_text;
mod presets;

pub use presets::{seed_from_name, Preset, PresetError};
