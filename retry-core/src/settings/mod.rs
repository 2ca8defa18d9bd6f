//! Policies as data: the serde schema of a retry policy (public as
//! [`retry_core::config`](crate::config)), the duration text it is written in
//! (public as [`retry_core::duration_text`](crate::duration_text)), and the named
//! presets. The first two need the `serde` feature.

#[cfg(feature = "serde")]
pub mod config;
#[cfg(feature = "serde")]
pub mod duration_text;
mod presets;

pub use presets::{seed_from_name, Preset, PresetError};
