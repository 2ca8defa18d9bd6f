//! Time as the shared types see it: a [`Clock`] the adapter supplies, how a sleep
//! ended ([`Slept`]), and the time origin a shared machine keeps.

use std::time::Instant;

/// A monotonic clock. A driver reads it when a step needs time; the machines see
/// the time since an origin (the call's start for the retry machine, the first
/// use for a shared breaker or budget).
///
/// The blocking adapter's default is the system clock, and its tests use a manual
/// one; the async adapter reads tokio's clock (so paused time works) and converts
/// it with `tokio::time::Instant::into_std`, which keeps paused time consistent.
pub trait Clock: Send + Sync {
    /// The current instant. Must never go backwards (if it does, the machines read
    /// it as no time passing).
    fn now(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// How a sleep between attempts ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slept {
    /// The delay passed (or the sleeper woke early: the driver then asks the
    /// machine again, which asks for the rest of the sleep).
    Elapsed,
    /// The call was cancelled before or during the sleep.
    Cancelled,
}

/// The time base of a shared machine: the moment it was first used, and the
/// point of the machine's clock that moment is (zero for a new machine; the point
/// a snapshot was taken at for a restored one, so that the time between saving
/// and restoring counts as none). Calls that start at different moments, on any
/// thread or task, agree on its clock.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Origin {
    start: Option<Instant>,
    offset: retry_core::Instant,
}

impl Origin {
    /// The clock of a machine restored at `now` from a snapshot taken at `at` on
    /// its own clock: `now` is `at`.
    pub(crate) fn resumed(at: retry_core::Instant, now: Instant) -> Origin {
        Origin {
            start: Some(now),
            offset: at,
        }
    }

    /// `now` on the shared clock (fixing the origin at the first use).
    pub(crate) fn at(&mut self, now: Instant) -> retry_core::Instant {
        let origin = *self.start.get_or_insert(now);
        self.offset
            .saturating_add(now.saturating_duration_since(origin))
    }

    /// The instant of a point on the shared clock (`None` before the first use,
    /// or past what `Instant` can represent).
    pub(crate) fn instant(self, at: retry_core::Instant) -> Option<Instant> {
        let start = self.start?;
        if at >= self.offset {
            start.checked_add(at.saturating_duration_since(self.offset))
        } else {
            start.checked_sub(self.offset.saturating_duration_since(at))
        }
    }
}

/// `now` as a core instant since `origin` (time before it counts as none).
#[inline]
pub(crate) fn since(origin: Instant, now: Instant) -> retry_core::Instant {
    retry_core::Instant::from_duration(now.saturating_duration_since(origin))
}
