//! Automatic transitions: a tokio task that wakes a [`SharedBreaker`] at its
//! next deadline, so that its state follows the time with no call.

use core::fmt;
use core::panic::AssertUnwindSafe;
use std::panic::catch_unwind;
use std::sync::Arc;

use retry_shared::{Alarm, AlreadyTimed, BreakerAlarm, SharedBreaker};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Why [`automatic_transitions`] could not turn them on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimerError {
    /// Called outside a tokio runtime: there is no runtime to run the timer on.
    NoRuntime,
    /// Automatic transitions are on already for this breaker (through any of
    /// its clones).
    AlreadyOn,
}

impl TimerError {
    /// A stable dotted code for logs.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            TimerError::NoRuntime => "timer.no_runtime",
            TimerError::AlreadyOn => "timer.already_on",
        }
    }
}

impl fmt::Display for TimerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimerError::NoRuntime => {
                "automatic transitions need a tokio runtime: call from inside one"
            }
            TimerError::AlreadyOn => "automatic transitions are on already for this breaker",
        })
    }
}

impl core::error::Error for TimerError {}

impl From<AlreadyTimed> for TimerError {
    fn from(_: AlreadyTimed) -> Self {
        TimerError::AlreadyOn
    }
}

/// Turns on automatic transitions for `breaker` (and every clone of it): a
/// task on the current tokio runtime sleeps until the breaker's next deadline
/// (the end of its open period, or of its half-open maximum wait) and wakes it
/// then, so that an open breaker turns half-open when its open period ends
/// even if no call comes, and a half-open one decides when its maximum wait
/// ends. The move is reported as a call would report it: to the
/// [`on_transition`](SharedBreaker::on_transition) hook of the handle passed
/// here (set the hook first), and with the `tracing` and `metrics` features as
/// an event and `circuit_breaker.state_change.total`, within one tick of
/// tokio's timer (1 ms) of the instant, under paused time
/// (`tokio::time::pause`) at the instant itself.
///
/// Off by default, as Resilience4j's
/// `automaticTransitionFromOpenToHalfOpenEnabled`: without it a breaker moves
/// on its own only when a call finds the time passed, and a quiet service's
/// dashboard reads "open" until its next call. The task costs nothing on the
/// calls' path: it is told only of state changes, holds no strong reference to
/// the breaker, and ends once every clone of the breaker is dropped (or with
/// the runtime).
///
/// ```
/// use core::time::Duration;
/// use retry_tokio::{BreakerConfig, BreakerState, ManualState, SharedBreaker};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let breaker = SharedBreaker::new(
///     BreakerConfig::builder()
///         .failure_threshold(3)
///         .open_duration(Duration::from_secs(30))
///         .build()?,
/// )?;
/// retry_tokio::automatic_transitions(&breaker)?;
/// breaker.force_at(ManualState::OpenFor(Duration::from_secs(30)), tokio::time::Instant::now().into_std())?;
/// tokio::time::sleep(Duration::from_secs(30) + Duration::from_millis(1)).await;
/// // No call came: the timer moved it at 30 s.
/// assert_eq!(breaker.state(), BreakerState::HalfOpen);
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`TimerError::NoRuntime`] outside a tokio runtime;
/// [`TimerError::AlreadyOn`] when they are on already for this breaker.
pub fn automatic_transitions<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
    breaker: &SharedBreaker<WORDS, BUCKETS, DURATIONS>,
) -> Result<(), TimerError> {
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| TimerError::NoRuntime)?;
    let notify = Arc::new(Notify::new());
    let rearm = Rearm(Arc::clone(&notify));
    let alarm = breaker.alarm(Instant::now().into_std(), move || rearm.notify())?;
    drop(runtime.spawn(run(alarm, notify)));
    Ok(())
}

/// The breaker's side of the task's `Notify`: told after every transition,
/// and once more when the breaker is dropped (so that a task waiting with
/// nothing due learns it is gone and ends).
struct Rearm(Arc<Notify>);

impl Rearm {
    fn notify(&self) {
        self.0.notify_one();
    }
}

impl Drop for Rearm {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

/// The timer task: sleep until the next deadline, or until a transition
/// moves it; wake the breaker then; end when it is gone.
async fn run(alarm: BreakerAlarm, notify: Arc<Notify>) {
    let mut next = alarm.next();
    loop {
        next = match next {
            Alarm::Gone => return,
            Alarm::Idle => {
                notify.notified().await;
                alarm.next()
            }
            Alarm::At(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(Instant::from_std(at)) => {
                        // A hook that panics must not end the timer: the move
                        // it reports was made already; read the breaker again.
                        let now = Instant::now().into_std();
                        catch_unwind(AssertUnwindSafe(|| alarm.ring(now)))
                            .unwrap_or_else(|_| alarm.next())
                    }
                    () = notify.notified() => alarm.next(),
                }
            }
        };
    }
}
