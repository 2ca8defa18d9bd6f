//! The core's notion of time: a monotonic [`Instant`] measured from an origin the
//! driver picks.
//!
//! The core never reads a clock. A driver passes "now" with every event; adapters
//! usually take the moment the call began as the origin and pass the time elapsed
//! since then. All arithmetic saturates: time never wraps and never panics.

use core::fmt;
use core::time::Duration;

/// A point in monotonic time, in nanoseconds since an origin chosen by the driver.
///
/// `Instant` is a plain value: it can be stored, copied, compared and serialized.
/// It spans about 584 years from its origin; arithmetic past either end saturates
/// at [`Instant::ORIGIN`] or [`Instant::MAX`].
///
/// ```
/// use core::time::Duration;
/// use retry_core::Instant;
///
/// let start = Instant::ORIGIN;
/// let later = start.saturating_add(Duration::from_millis(1500));
/// assert_eq!(later.as_nanos(), 1_500_000_000);
/// assert_eq!(later.saturating_duration_since(start), Duration::from_millis(1500));
/// // Time going backwards counts as no time.
/// assert_eq!(start.saturating_duration_since(later), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Instant {
    nanos: u64,
}

impl Instant {
    /// The origin: zero nanoseconds.
    pub const ORIGIN: Instant = Instant { nanos: 0 };
    /// The last representable instant (about 584 years after the origin).
    pub const MAX: Instant = Instant { nanos: u64::MAX };

    /// An instant `nanos` nanoseconds after the origin.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant { nanos }
    }

    /// An instant `micros` microseconds after the origin (saturating).
    #[must_use]
    pub const fn from_micros(micros: u64) -> Instant {
        Instant {
            nanos: micros.saturating_mul(1_000),
        }
    }

    /// An instant `millis` milliseconds after the origin (saturating).
    #[must_use]
    pub const fn from_millis(millis: u64) -> Instant {
        Instant {
            nanos: millis.saturating_mul(1_000_000),
        }
    }

    /// An instant `secs` seconds after the origin (saturating).
    #[must_use]
    pub const fn from_secs(secs: u64) -> Instant {
        Instant {
            nanos: secs.saturating_mul(1_000_000_000),
        }
    }

    /// The instant `since_origin` after the origin (saturating at [`Instant::MAX`]).
    #[must_use]
    pub fn from_duration(since_origin: Duration) -> Instant {
        Instant::ORIGIN.saturating_add(since_origin)
    }

    /// Nanoseconds since the origin.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.nanos
    }

    /// Time since the origin.
    #[must_use]
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.nanos)
    }

    /// `self + d`, saturating at [`Instant::MAX`].
    #[must_use]
    pub fn saturating_add(self, d: Duration) -> Instant {
        let add = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant {
            nanos: self.nanos.saturating_add(add),
        }
    }

    /// `self + d`, or `None` if the result is past [`Instant::MAX`].
    #[must_use]
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let add = u64::try_from(d.as_nanos()).ok()?;
        self.nanos.checked_add(add).map(Instant::from_nanos)
    }

    /// `self - d`, saturating at [`Instant::ORIGIN`].
    #[must_use]
    pub fn saturating_sub(self, d: Duration) -> Instant {
        let sub = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant {
            nanos: self.nanos.saturating_sub(sub),
        }
    }

    /// The time from `earlier` to `self`; zero if `earlier` is later (time going
    /// backwards counts as no time).
    #[must_use]
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.nanos.saturating_sub(earlier.nanos))
    }
}

impl core::ops::Add<Duration> for Instant {
    type Output = Instant;

    /// Saturating addition (see [`Instant::saturating_add`]).
    fn add(self, rhs: Duration) -> Instant {
        self.saturating_add(rhs)
    }
}

impl fmt::Display for Instant {
    /// Seconds since the origin with millisecond precision, e.g. `12.345s`; the
    /// alternate form (`{:#}`) prints every nanosecond.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DisplayDuration(self.as_duration()).fmt(f)
    }
}

/// Writes a [`Duration`] as seconds with three decimals (`1.500s`), or with nine in
/// the alternate form (`{:#}`). Used by timelines; writes through `core::fmt`
/// without allocating.
///
/// ```
/// use core::time::Duration;
/// use retry_core::DisplayDuration;
/// assert_eq!(DisplayDuration(Duration::from_millis(1500)).to_string(), "1.500s");
/// assert_eq!(format!("{:#}", DisplayDuration(Duration::from_nanos(1))), "0.000000001s");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DisplayDuration(pub Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.as_secs();
        let nanos = self.0.subsec_nanos();
        // Render into a small stack buffer so width/alignment flags apply to the whole.
        let mut buf = StackText::<48>::new();
        if f.alternate() {
            fmt::write(&mut buf, format_args!("{secs}.{nanos:09}s"))?;
        } else {
            fmt::write(&mut buf, format_args!("{secs}.{:03}s", nanos / 1_000_000))?;
        }
        f.pad(buf.as_str())
    }
}

/// A fixed-capacity text buffer for formatting without allocation.
pub(crate) struct StackText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    pub(crate) const fn new() -> Self {
        StackText {
            bytes: [0; N],
            len: 0,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only whole `&str`s are ever appended, so the prefix is valid UTF-8.
        self.bytes
            .get(..self.len)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or("")
    }
}

impl<const N: usize> fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_at_both_ends() {
        assert_eq!(Instant::MAX.saturating_add(Duration::MAX), Instant::MAX);
        assert_eq!(Instant::MAX + Duration::from_nanos(1), Instant::MAX);
        assert_eq!(Instant::MAX.checked_add(Duration::from_nanos(1)), None);
        assert_eq!(
            Instant::ORIGIN.saturating_sub(Duration::from_secs(1)),
            Instant::ORIGIN
        );
        assert_eq!(Instant::from_secs(u64::MAX), Instant::MAX);
        assert_eq!(Instant::from_millis(u64::MAX), Instant::MAX);
        assert_eq!(Instant::from_duration(Duration::MAX), Instant::MAX);
    }

    #[test]
    fn backwards_is_zero() {
        let a = Instant::from_millis(10);
        let b = Instant::from_millis(4);
        assert_eq!(b.saturating_duration_since(a), Duration::ZERO);
        assert_eq!(a.saturating_duration_since(b), Duration::from_millis(6));
    }

    #[test]
    fn display_pads_as_a_whole() {
        let mut out = StackText::<32>::new();
        fmt::write(
            &mut out,
            format_args!("[{:>8}]", Instant::from_millis(1500)),
        )
        .unwrap();
        assert_eq!(out.as_str(), "[  1.500s]");
    }
}
