//! Snapshots of the machines: what the three snapshot formats share.
//!
//! [`RetrySnapshot`](crate::RetrySnapshot), [`BreakerSnapshot`](crate::BreakerSnapshot)
//! and [`BudgetSnapshot`](crate::BudgetSnapshot) are explicit, versioned records
//! of a machine's state, written for the format and not for the machine: their
//! fields say what the state means (the calls in a window from oldest to newest,
//! the phase of a retry and what it waits for), so a machine's insides can change
//! while a snapshot written today still restores. With the `serde` feature they
//! serialize to any serde format, self-describing (JSON, TOML) or not (postcard,
//! bincode), without allocating.
//!
//! Restoring checks everything a snapshot says against everything the machine
//! relies on: the version, the config or policy (validated as a builder would),
//! counts against their maxima and the machine's capacity, and the phase against
//! its fields. A snapshot that fails is a [`SnapshotError`] naming the field,
//! never a panic and never a machine that breaks its invariants. This file holds
//! that error and the curve and jitter records the retry policy and the breaker
//! config share.

use core::fmt;
use core::time::Duration;

use crate::{Backoff, BreakerError, BudgetError, Jitter, PolicyError};

/// Why a snapshot could not be restored. Every variant names the field it is
/// about ([`SnapshotError::field`]) and has a stable dotted code
/// ([`SnapshotError::code`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The snapshot's format version is not one this build reads.
    UnsupportedVersion {
        /// The version the snapshot says it has.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// A count is above the maximum its config allows (an attempt above
    /// `max_attempts`, more calls than the window holds).
    AboveMaximum {
        /// The field.
        field: &'static str,
        /// The value in the snapshot.
        value: u64,
        /// The most it may be.
        maximum: u64,
    },
    /// The snapshot holds more than the machine's storage can (more window words
    /// or buckets than the breaker type has).
    AboveCapacity {
        /// The field.
        field: &'static str,
        /// How many the snapshot holds.
        requested: u64,
        /// How many the machine holds.
        capacity: usize,
    },
    /// A field contradicts the phase or another field (an attempt in flight whose
    /// number is not the last one started, a sleep already over, probe counts
    /// that do not add up, a window of another kind than the config's).
    Inconsistent {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The retry policy in the snapshot is not valid.
    Policy(PolicyError),
    /// The breaker config in the snapshot is not valid, or does not fit the
    /// breaker type.
    Breaker(BreakerError),
    /// The budget config in the snapshot is not valid.
    Budget(BudgetError),
}

impl SnapshotError {
    /// The field the error is about, as written in the snapshot (`policy.…`,
    /// `config.…` for the config's own fields).
    #[must_use]
    pub fn field(&self) -> &'static str {
        match self {
            SnapshotError::UnsupportedVersion { .. } => "version",
            SnapshotError::AboveMaximum { field, .. }
            | SnapshotError::AboveCapacity { field, .. }
            | SnapshotError::Inconsistent { field, .. } => field,
            SnapshotError::Policy(e) => e.field(),
            SnapshotError::Breaker(e) => e.field(),
            SnapshotError::Budget(e) => e.field(),
        }
    }

    /// A stable dotted code for logs and programs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            SnapshotError::UnsupportedVersion { .. } => "snapshot.unsupported_version",
            SnapshotError::AboveMaximum { .. } => "snapshot.above_maximum",
            SnapshotError::AboveCapacity { .. } => "snapshot.above_capacity",
            SnapshotError::Inconsistent { .. } => "snapshot.inconsistent",
            SnapshotError::Policy(_) => "snapshot.policy",
            SnapshotError::Breaker(_) => "snapshot.breaker_config",
            SnapshotError::Budget(_) => "snapshot.budget_config",
        }
    }
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::UnsupportedVersion { found, supported } => write!(
                f,
                "version: snapshot format {found} is not one this build reads ({supported})"
            ),
            SnapshotError::AboveMaximum {
                field,
                value,
                maximum,
            } => write!(f, "{field}: {value} is above the maximum {maximum}"),
            SnapshotError::AboveCapacity {
                field,
                requested,
                capacity,
            } => write!(
                f,
                "{field}: {requested} held, but this machine holds at most {capacity}"
            ),
            SnapshotError::Inconsistent { field, reason } => write!(f, "{field}: {reason}"),
            SnapshotError::Policy(e) => write!(f, "policy: {e}"),
            SnapshotError::Breaker(e) => write!(f, "config: {e}"),
            SnapshotError::Budget(e) => write!(f, "config: {e}"),
        }
    }
}

impl core::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            SnapshotError::Policy(e) => Some(e),
            SnapshotError::Breaker(e) => Some(e),
            SnapshotError::Budget(e) => Some(e),
            _ => None,
        }
    }
}

/// Fails with [`SnapshotError::Inconsistent`] unless `ok`.
pub(crate) fn consistent(
    ok: bool,
    field: &'static str,
    reason: &'static str,
) -> Result<(), SnapshotError> {
    if ok {
        Ok(())
    } else {
        Err(SnapshotError::Inconsistent { field, reason })
    }
}

/// A backoff curve as a snapshot writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub(crate) enum CurveRecord {
    None,
    Constant {
        delay: Duration,
    },
    Linear {
        initial: Duration,
        increment: Duration,
    },
    Exponential {
        initial: Duration,
        factor: f64,
    },
    Fibonacci {
        initial: Duration,
    },
}

impl From<Backoff> for CurveRecord {
    fn from(b: Backoff) -> Self {
        match b {
            Backoff::None => CurveRecord::None,
            Backoff::Constant { delay } => CurveRecord::Constant { delay },
            Backoff::Linear { initial, increment } => CurveRecord::Linear { initial, increment },
            Backoff::Exponential { initial, factor } => {
                CurveRecord::Exponential { initial, factor }
            }
            Backoff::Fibonacci { initial } => CurveRecord::Fibonacci { initial },
        }
    }
}

impl From<CurveRecord> for Backoff {
    fn from(c: CurveRecord) -> Self {
        match c {
            CurveRecord::None => Backoff::None,
            CurveRecord::Constant { delay } => Backoff::Constant { delay },
            CurveRecord::Linear { initial, increment } => Backoff::Linear { initial, increment },
            CurveRecord::Exponential { initial, factor } => {
                Backoff::Exponential { initial, factor }
            }
            CurveRecord::Fibonacci { initial } => Backoff::Fibonacci { initial },
        }
    }
}

/// A jitter kind as a snapshot writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub(crate) enum JitterRecord {
    None,
    Full,
    Equal,
    Decorrelated,
    Subtract(f64),
    Add(f64),
    Spread(f64),
}

impl From<Jitter> for JitterRecord {
    fn from(j: Jitter) -> Self {
        match j {
            Jitter::None => JitterRecord::None,
            Jitter::Full => JitterRecord::Full,
            Jitter::Equal => JitterRecord::Equal,
            Jitter::Decorrelated => JitterRecord::Decorrelated,
            Jitter::Subtract(f) => JitterRecord::Subtract(f),
            Jitter::Add(f) => JitterRecord::Add(f),
            Jitter::Spread(f) => JitterRecord::Spread(f),
        }
    }
}

impl From<JitterRecord> for Jitter {
    fn from(j: JitterRecord) -> Self {
        match j {
            JitterRecord::None => Jitter::None,
            JitterRecord::Full => Jitter::Full,
            JitterRecord::Equal => Jitter::Equal,
            JitterRecord::Decorrelated => Jitter::Decorrelated,
            JitterRecord::Subtract(f) => Jitter::Subtract(f),
            JitterRecord::Add(f) => Jitter::Add(f),
            JitterRecord::Spread(f) => Jitter::Spread(f),
        }
    }
}

/// Up to `N` items of a sequence, with how many the sequence really held: a
/// snapshot listing more than the machine can hold still decodes, and restoring
/// it is then a [`SnapshotError::AboveCapacity`] naming the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounded<T, const N: usize> {
    pub(crate) items: [T; N],
    /// How many items the sequence held (only the first `N` are kept).
    pub(crate) given: usize,
}

impl<T: Copy + Default, const N: usize> Bounded<T, N> {
    pub(crate) fn new() -> Self {
        Bounded {
            items: [T::default(); N],
            given: 0,
        }
    }

    /// Appends `item` (kept only while there is room).
    pub(crate) fn push(&mut self, item: T) {
        if let Some(slot) = self.items.get_mut(self.given) {
            *slot = item;
        }
        self.given = self.given.saturating_add(1);
    }

    /// The items kept.
    pub(crate) fn kept(&self) -> &[T] {
        self.items.get(..self.given.min(N)).unwrap_or(&[])
    }

    /// An error unless every item given was kept.
    pub(crate) fn fits(&self, field: &'static str) -> Result<(), SnapshotError> {
        if self.given > N {
            return Err(SnapshotError::AboveCapacity {
                field,
                requested: u64::try_from(self.given).unwrap_or(u64::MAX),
                capacity: N,
            });
        }
        Ok(())
    }
}

#[cfg(feature = "serde")]
mod bounded_serde {
    use core::fmt;
    use core::marker::PhantomData;

    use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
    use serde::ser::{Serialize, Serializer};

    use super::Bounded;

    impl<T: Serialize, const N: usize> Serialize for Bounded<T, N> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.items.iter().take(self.given.min(N)))
        }
    }

    impl<'de, T: Deserialize<'de> + Copy + Default, const N: usize> Deserialize<'de> for Bounded<T, N> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Items<T, const N: usize>(PhantomData<T>);

            impl<'de, T: Deserialize<'de> + Copy + Default, const N: usize> Visitor<'de> for Items<T, N> {
                type Value = Bounded<T, N>;

                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a sequence")
                }

                fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                    let mut out = Bounded::<T, N>::new();
                    while let Some(item) = seq.next_element::<T>()? {
                        out.push(item);
                    }
                    Ok(out)
                }
            }

            d.deserialize_seq(Items::<T, N>(PhantomData))
        }
    }
}
