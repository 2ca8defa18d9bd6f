//! [`Copies`]: a small set of copy numbers, as a bit set.

use core::fmt;

/// The most copies a hedged call may send (the first one included).
pub const MAX_COPIES: u32 = 16;

/// A set of copy numbers (1 to [`MAX_COPIES`]), stored as bits: which copies are
/// in flight, or which ones [`HedgeAction::Cancel`](crate::HedgeAction::Cancel)
/// asks the driver to stop. Iterates in ascending order without allocating.
///
/// ```
/// use retry_core::Copies;
/// let copies = Copies::EMPTY.with(3).with(1).with(99); // 99 is out of range: ignored
/// assert_eq!(copies.len(), 2);
/// assert!(copies.contains(1) && copies.contains(3) && !copies.contains(2));
/// assert_eq!(copies.iter().collect::<Vec<_>>(), [1, 3]);
/// assert_eq!(copies.to_string(), "{1,3}");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct Copies {
    bits: u32,
}

impl Copies {
    /// No copies.
    pub const EMPTY: Copies = Copies { bits: 0 };

    /// The bit of copy `copy`, or `None` outside `1..=MAX_COPIES`.
    const fn bit(copy: u32) -> Option<u32> {
        if copy == 0 || copy > MAX_COPIES {
            None
        } else {
            // copy is in 1..=16: the shift is below 32.
            Some(1u32.wrapping_shl(copy.wrapping_sub(1)))
        }
    }

    /// The same set with `copy` added (a number outside `1..=MAX_COPIES` is
    /// ignored).
    #[must_use]
    pub const fn with(self, copy: u32) -> Copies {
        match Copies::bit(copy) {
            Some(bit) => Copies {
                bits: self.bits | bit,
            },
            None => self,
        }
    }

    /// The same set without `copy`.
    #[must_use]
    pub const fn without(self, copy: u32) -> Copies {
        match Copies::bit(copy) {
            Some(bit) => Copies {
                bits: self.bits & !bit,
            },
            None => self,
        }
    }

    /// Whether `copy` is in the set.
    #[must_use]
    pub const fn contains(self, copy: u32) -> bool {
        match Copies::bit(copy) {
            Some(bit) => self.bits & bit != 0,
            None => false,
        }
    }

    /// How many copies the set holds.
    #[must_use]
    pub const fn len(self) -> u32 {
        self.bits.count_ones()
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// The copies in ascending order.
    #[must_use]
    pub const fn iter(self) -> CopiesIter {
        CopiesIter { bits: self.bits }
    }
}

impl IntoIterator for Copies {
    type Item = u32;
    type IntoIter = CopiesIter;

    fn into_iter(self) -> CopiesIter {
        self.iter()
    }
}

/// The copies of a [`Copies`] set, in ascending order.
#[derive(Clone, Copy, Debug)]
pub struct CopiesIter {
    bits: u32,
}

impl Iterator for CopiesIter {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.bits == 0 {
            return None;
        }
        let low = self.bits.trailing_zeros();
        self.bits &= self.bits.wrapping_sub(1);
        Some(low.saturating_add(1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.bits.count_ones()).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for CopiesIter {}

impl fmt::Display for Copies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, copy) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{copy}")?;
        }
        f.write_str("}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_ignored() {
        let all = (0..=40).fold(Copies::EMPTY, Copies::with);
        assert_eq!(all.len(), MAX_COPIES);
        assert!(!all.contains(0) && !all.contains(MAX_COPIES + 1));
        assert_eq!(all.iter().last(), Some(MAX_COPIES));
        assert_eq!(all.without(0), all);
        assert_eq!(all.without(MAX_COPIES).len(), MAX_COPIES - 1);
        assert!(Copies::EMPTY.is_empty());
        assert_eq!(Copies::EMPTY.iter().len(), 0);
    }
}
