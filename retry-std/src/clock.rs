//! Time for the blocking adapter: a [`Clock`] to read it and a [`Sleeper`] to wait
//! it out. The real pair ([`SystemClock`], [`ThreadSleeper`]) is the default; the
//! fake pair ([`ManualClock`], [`FakeSleeper`]) runs any schedule in no wall time.

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::cancel::{CancelToken, Waited};
pub use retry_shared::{Clock, Slept};

/// Waits out a delay the retry machine asked for.
///
/// A sleeper must return [`Slept::Cancelled`] promptly when `cancel` is tripped,
/// including when it already was on entry. Returning early without cancellation
/// is harmless: the driver reads the clock and the machine asks for the rest.
pub trait Sleeper: Send + Sync {
    /// Sleeps for `delay`, or until `cancel` is tripped.
    fn sleep(&self, delay: Duration, cancel: &CancelToken) -> Slept;
}

/// The real monotonic clock, [`std::time::Instant::now`]. The default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Sleeps the current thread on the cancel token's condition variable, so a
/// [`CancelToken::cancel`] from any thread wakes it at once. The default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ThreadSleeper;

impl Sleeper for ThreadSleeper {
    fn sleep(&self, delay: Duration, cancel: &CancelToken) -> Slept {
        match cancel.wait_timeout(delay) {
            Waited::TimedOut => Slept::Elapsed,
            Waited::Cancelled => Slept::Cancelled,
        }
    }
}

/// A clock that only moves when told to: for tests and simulations.
///
/// It starts at the real instant it was created and stays there until
/// [`ManualClock::advance`] moves it. Clones share the same time, so an operation
/// can advance it to pretend an attempt took a while, and a [`FakeSleeper`] made
/// from it advances it by every delay.
///
/// ```
/// use core::time::Duration;
/// use retry_std::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(Duration::from_secs(3));
/// assert_eq!(clock.now() - t0, Duration::from_secs(3));
/// assert_eq!(clock.elapsed(), Duration::from_secs(3));
/// ```
#[derive(Clone)]
pub struct ManualClock {
    origin: Instant,
    offset: Arc<Mutex<Duration>>,
}

impl ManualClock {
    /// A clock standing at the current real instant.
    #[must_use]
    pub fn new() -> ManualClock {
        ManualClock {
            origin: Instant::now(),
            offset: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    /// Moves the clock (and every clone) forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let mut offset = self.offset.lock().unwrap_or_else(PoisonError::into_inner);
        *offset = offset.saturating_add(by);
    }

    /// How far the clock has been advanced since it was created.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        *self.offset.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A [`FakeSleeper`] that advances this clock.
    #[must_use]
    pub fn sleeper(&self) -> FakeSleeper {
        FakeSleeper::new(self.clone())
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        let offset = self.elapsed();
        // Past the end of `std::time::Instant`, the clock stops.
        self.origin
            .checked_add(offset)
            .unwrap_or_else(|| far_future(self.origin, offset))
    }
}

/// The latest instant reachable from `origin` within `offset`, by halving.
fn far_future(origin: Instant, mut offset: Duration) -> Instant {
    let mut at = origin;
    while !offset.is_zero() {
        match at.checked_add(offset) {
            Some(later) => at = later,
            None => offset /= 2,
        }
    }
    at
}

/// A sleeper that never blocks: it records each delay and advances its
/// [`ManualClock`] by it. Clones share the record.
///
/// A tripped cancel token makes it return [`Slept::Cancelled`] without
/// advancing the clock.
///
/// ```
/// use core::time::Duration;
/// use retry_std::{CancelToken, ManualClock, Sleeper};
///
/// let clock = ManualClock::new();
/// let sleeper = clock.sleeper();
/// sleeper.sleep(Duration::from_secs(2), &CancelToken::new());
/// assert_eq!(sleeper.sleeps(), [Duration::from_secs(2)]);
/// assert_eq!(clock.elapsed(), Duration::from_secs(2));
/// ```
#[derive(Clone, Debug)]
pub struct FakeSleeper {
    clock: ManualClock,
    sleeps: Arc<Mutex<Vec<Duration>>>,
}

impl FakeSleeper {
    /// A sleeper advancing `clock`.
    #[must_use]
    pub fn new(clock: ManualClock) -> FakeSleeper {
        FakeSleeper {
            clock,
            sleeps: Arc::default(),
        }
    }

    /// Every delay slept so far, in order.
    #[must_use]
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The sum of every delay slept so far (saturating).
    #[must_use]
    pub fn total(&self) -> Duration {
        self.sleeps()
            .iter()
            .fold(Duration::ZERO, |sum, d| sum.saturating_add(*d))
    }
}

impl Sleeper for FakeSleeper {
    fn sleep(&self, delay: Duration, cancel: &CancelToken) -> Slept {
        if cancel.is_cancelled() {
            return Slept::Cancelled;
        }
        self.sleeps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(delay);
        self.clock.advance(delay);
        Slept::Elapsed
    }
}
