//! Automatic transitions for blocking programs: one timer thread, shared by
//! every [`SharedBreaker`] that asks, wakes each at its next deadline.

use core::fmt;
use core::panic::AssertUnwindSafe;
use std::panic::catch_unwind;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use retry_shared::{Alarm, AlreadyTimed, BreakerAlarm, SharedBreaker};

/// The name of the timer thread.
const THREAD_NAME: &str = "retry-breaker-timer";

/// Why [`automatic_transitions`] could not turn them on.
#[derive(Debug)]
#[non_exhaustive]
pub enum TimerError {
    /// Automatic transitions are on already for this breaker (through any of
    /// its clones).
    AlreadyOn,
    /// The timer thread could not be started (the first breaker to ask starts
    /// it).
    Thread(std::io::Error),
}

impl TimerError {
    /// A stable dotted code for logs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            TimerError::AlreadyOn => "timer.already_on",
            TimerError::Thread(_) => "timer.thread",
        }
    }
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimerError::AlreadyOn => {
                f.write_str("automatic transitions are on already for this breaker")
            }
            TimerError::Thread(e) => write!(f, "the breaker timer thread could not start: {e}"),
        }
    }
}

impl core::error::Error for TimerError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            TimerError::Thread(e) => Some(e),
            TimerError::AlreadyOn => None,
        }
    }
}

impl From<AlreadyTimed> for TimerError {
    fn from(_: AlreadyTimed) -> Self {
        TimerError::AlreadyOn
    }
}

/// Turns on automatic transitions for `breaker` (and every clone of it): it
/// is woken at its next deadline (the end of its open period, or of its
/// half-open maximum wait) by the one timer thread every breaker that asks
/// shares (`retry-breaker-timer`, started by the first, never one thread per
/// breaker), so that an open breaker turns half-open when its open period ends
/// even if no call comes, and a half-open one decides when its maximum wait
/// ends. The move is reported as a call would report it: to the
/// [`on_transition`](SharedBreaker::on_transition) hook of the handle passed
/// here (set the hook first), and with the `tracing` and `metrics` features as
/// an event and `circuit_breaker.state_change.total`, as soon as the thread
/// wakes at the instant (a condition variable's timed wait: the operating
/// system's timer slack late, usually well under a millisecond).
///
/// Off by default, as Resilience4j's
/// `automaticTransitionFromOpenToHalfOpenEnabled`. The thread reads the system
/// clock (a breaker driven by a [`ManualClock`](crate::ManualClock) in a test
/// wakes on real time; call [`SharedBreaker::wake_at`] there instead). It costs
/// the calls nothing: it is told only of state changes and holds no strong
/// reference to a breaker; a dropped breaker leaves its list at the next
/// wake-up. Once started it stays, blocked on its condition variable while no
/// breaker has a deadline.
///
/// ```
/// use core::time::Duration;
/// use retry_std::{BreakerConfig, BreakerState, ManualState, SharedBreaker};
///
/// let breaker = SharedBreaker::new(
///     BreakerConfig::builder()
///         .failure_threshold(3)
///         .open_duration(Duration::from_millis(20))
///         .build()?,
/// )?;
/// retry_std::automatic_transitions(&breaker)?;
/// breaker.force(ManualState::OpenFor(Duration::from_millis(20)))?;
/// while breaker.state() == BreakerState::Open {
///     std::thread::sleep(Duration::from_millis(5));
/// }
/// // No call came: the timer thread moved it.
/// assert_eq!(breaker.state(), BreakerState::HalfOpen);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`TimerError::AlreadyOn`] when they are on already for this breaker;
/// [`TimerError::Thread`] if the timer thread cannot be started.
pub fn automatic_transitions<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
    breaker: &SharedBreaker<WORDS, BUCKETS, DURATIONS>,
) -> Result<(), TimerError> {
    let timer = Timer::shared().map_err(TimerError::Thread)?;
    let id = timer.lock().take_id();
    let rearm = Rearm {
        timer: Arc::clone(&timer),
        id,
    };
    let alarm = breaker.alarm(Instant::now(), move || rearm.mark())?;
    let mut queue = timer.lock();
    queue.entries.push(Entry {
        id,
        alarm,
        next: Alarm::Idle,
        stale: true,
        told: 0,
    });
    drop(queue);
    timer.changed.notify_one();
    Ok(())
}

/// The timer every breaker that asks shares: their alarms, and the condition
/// variable its thread waits on.
struct Timer {
    queue: Mutex<Queue>,
    changed: Condvar,
}

/// The breakers the thread wakes.
struct Queue {
    entries: Vec<Entry>,
    next_id: u64,
}

impl Queue {
    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        id
    }
}

/// One breaker: its alarm, what it waits for, and whether that must be read
/// again (a transition happened, or the breaker was dropped, since).
struct Entry {
    id: u64,
    alarm: BreakerAlarm,
    next: Alarm,
    stale: bool,
    /// How many times the breaker has said so: a reading taken while it says
    /// so again is stale already.
    told: u64,
}

/// The slot the shared timer lives in, started by the first breaker to ask.
static SHARED: Mutex<Option<Arc<Timer>>> = Mutex::new(None);

impl Timer {
    /// The shared timer, its thread started if this is the first use.
    fn shared() -> std::io::Result<Arc<Timer>> {
        let mut slot = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(timer) = &*slot {
            return Ok(Arc::clone(timer));
        }
        let timer = Arc::new(Timer {
            queue: Mutex::new(Queue {
                entries: Vec::new(),
                next_id: 0,
            }),
            changed: Condvar::new(),
        });
        let running = Arc::clone(&timer);
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || running.run())?;
        *slot = Some(Arc::clone(&timer));
        Ok(timer)
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue is only ever changed by whole assignments and pushes: a
        // panic elsewhere cannot leave it half-written.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The thread: wake the breakers whose deadline has passed, read again
    /// those that were told of a change, then sleep until the earliest
    /// deadline or the next change. The queue's lock is never held while a
    /// breaker is asked or woken (a wake tells its own change back).
    fn run(&self) {
        loop {
            let now = Instant::now();
            let work: Vec<(u64, u64, BreakerAlarm, bool)> = self
                .lock()
                .entries
                .iter()
                .filter_map(|e| {
                    let due = matches!(e.next, Alarm::At(at) if at <= now);
                    (due || e.stale).then(|| (e.id, e.told, e.alarm.clone(), due))
                })
                .collect();
            let read: Vec<(u64, u64, Alarm)> = work
                .into_iter()
                .map(|(id, told, alarm, due)| {
                    // A hook that panics must not stop the timer of every
                    // other breaker: the move it reports was made already,
                    // and the breaker is read again.
                    let rung = catch_unwind(AssertUnwindSafe(|| {
                        if due {
                            alarm.ring(now)
                        } else {
                            alarm.next()
                        }
                    }));
                    (id, told, rung.unwrap_or_else(|_| alarm.next()))
                })
                .collect();
            let mut queue = self.lock();
            for (id, told, next) in read {
                if let Some(entry) = queue.entries.iter_mut().find(|e| e.id == id) {
                    entry.next = next;
                    // Told again while this was read: read it again.
                    entry.stale = entry.told != told;
                }
            }
            queue.entries.retain(|e| e.stale || e.next != Alarm::Gone);
            if queue.entries.iter().any(|e| e.stale) {
                continue;
            }
            let earliest = queue
                .entries
                .iter()
                .filter_map(|e| match e.next {
                    Alarm::At(at) => Some(at),
                    Alarm::Idle | Alarm::Gone => None,
                })
                .min();
            let _woken = match earliest {
                None => self
                    .changed
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(at) => {
                    let wait = at.saturating_duration_since(Instant::now());
                    self.changed
                        .wait_timeout(queue, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }
}

/// A breaker's side of the timer: it marks the breaker's entry to be read
/// again after every transition, and once more when the breaker is dropped
/// (so that its entry leaves the list).
struct Rearm {
    timer: Arc<Timer>,
    id: u64,
}

impl Rearm {
    fn mark(&self) {
        let mut queue = self.timer.lock();
        if let Some(entry) = queue.entries.iter_mut().find(|e| e.id == self.id) {
            entry.stale = true;
            entry.told = entry.told.wrapping_add(1);
        }
        drop(queue);
        self.timer.changed.notify_one();
    }
}

impl Drop for Rearm {
    fn drop(&mut self) {
        self.mark();
    }
}

/// How many breakers the shared timer thread holds now: every breaker with
/// automatic transitions on (a dropped breaker leaves at the thread's next
/// wake-up, which its drop causes).
#[must_use]
pub fn timed_breakers() -> usize {
    SHARED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or(0, |timer| timer.lock().entries.len())
}
