//! Jitter seeds for calls that were not given one.

use core::hash::BuildHasher;
use core::sync::atomic::{AtomicU64, Ordering};
use std::hash::RandomState;

/// A jitter seed from the OS-seeded keys of [`RandomState`] (drawn once per
/// thread), mixed with a per-process counter so that two calls in a row never
/// share one and many clients do not retry in lockstep.
#[must_use]
pub fn fresh_seed() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed))
}
