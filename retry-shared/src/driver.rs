//! The step driver: one call's bookkeeping around its [`RetryMachine`], between
//! the adapter's waits.

use core::fmt;
use core::time::Duration;
use std::time::Instant;

use retry_core::{
    Action, AttemptOutcome, Event, Failure, FailureKind, GiveUpReason, RetryError, RetryMachine,
    SleepReason, Success,
};

use crate::breaker::{Breaker, PermitGuard};
use crate::notice::RetryNotice;
use crate::observe;
use crate::seed::fresh_seed;
use crate::settings::Settings;
use crate::time::{since, Clock, Slept};

/// What the adapter does next, as the [`Driver`] says.
#[derive(Debug)]
pub enum Step<T, E> {
    /// Run the operation once, then tell the driver how it ended
    /// ([`Input::Ended`]).
    Attempt(Attempt),
    /// Wait until the sleep is over (or the call is cancelled), then tell the
    /// driver how it ended ([`Input::Slept`]).
    Sleep(Sleep),
    /// The call is over: return this.
    Finished(Result<Success<T>, RetryError<E>>),
}

/// An attempt to run, for [`Step::Attempt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The attempt's number; the first is 1.
    pub number: u32,
    /// When the attempt times out, if the policy gives attempts a deadline (`None`
    /// too if it lies past what `Instant` can represent).
    pub deadline: Option<Instant>,
    /// Whether this attempt repeats an operation the policy marks as
    /// non-idempotent.
    pub replays_non_idempotent: bool,
}

/// A sleep before the next attempt, for [`Step::Sleep`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sleep {
    /// When the sleep ends, by the driver's clock; `None` when that lies past what
    /// `Instant` can represent (sleep "forever", or for `delay`).
    pub until: Option<Instant>,
    /// How long the machine asked to sleep, from the moment it asked.
    pub delay: Duration,
    /// Where the delay came from.
    pub reason: SleepReason,
}

/// How an attempt ended, for [`Input::Ended`].
#[derive(Debug)]
pub enum Ran<T, E> {
    /// The operation returned.
    Returned(Result<T, E>),
    /// The adapter stopped the attempt at its deadline.
    TimedOut,
    /// The call was cancelled while the attempt ran; the adapter stopped it. The
    /// attempt is abandoned (see the crate's docs on abandoned attempts).
    Cancelled,
}

/// What happened since the driver's last step, for [`Driver::poll`].
#[derive(Debug)]
pub enum Input<T, E> {
    /// The call begins: the first input, once.
    Start,
    /// The attempt of the last [`Step::Attempt`] ended.
    Ended(Ran<T, E>),
    /// The sleep of the last [`Step::Sleep`] ended.
    Slept(Slept),
}

/// The failed attempt whose retry the hook has not been told about yet.
#[derive(Clone, Copy)]
struct Unannounced {
    attempt: u32,
    failure: Failure,
    /// The attempt's error is the driver's last error.
    with_error: bool,
    timed_out: bool,
}

/// One call's bookkeeping around its [`RetryMachine`]: the machine, the budget,
/// the breaker's permit, the hooks, the classifier and the outcome labels.
/// Everything but the adapter's own I/O (running the attempt, sleeping, the
/// clock and the cancellation it is given).
///
/// An adapter polls it with [`Input::Start`], then answers each [`Step`]: runs
/// the attempt and polls with [`Input::Ended`], or sleeps and polls with
/// [`Input::Slept`], until the step is [`Step::Finished`] (one way in, one way
/// out, like the core's machines):
///
/// ```
/// use core::time::Duration;
/// use std::time::Instant;
/// use retry_core::{Backoff, Jitter, RetryPolicy};
/// use retry_shared::{Clock, Driver, Input, Ran, Settings, Slept, Step};
///
/// #[derive(Clone)]
/// struct Wall;
/// impl Clock for Wall {
///     fn now(&self) -> Instant { Instant::now() }
/// }
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(3)
///     .backoff(Backoff::constant(Duration::from_millis(1)))
///     .jitter(Jitter::None)
///     .build()?;
/// let settings = Settings::<&str>::new(policy);
/// let mut driver = Driver::new(&settings, Wall, || false);
/// let mut input = Input::Start;
/// let done = loop {
///     input = match driver.poll(input) {
///         Step::Attempt(attempt) => {
///             let result = if attempt.number < 2 { Err("busy") } else { Ok(attempt.number) };
///             Input::Ended(Ran::Returned(result))
///         }
///         Step::Sleep(sleep) => {
///             std::thread::sleep(sleep.delay);
///             Input::Slept(Slept::Elapsed)
///         }
///         Step::Finished(result) => break result,
///     };
/// };
/// assert_eq!(done.map(|s| (s.value, s.attempts)), Ok((2, 2)));
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
///
/// Time is read from the clock only when a step needs it: once when the driver
/// is made (the call's start, which doubles as the time of the first step), and
/// once per later [`poll`](Driver::poll). A call whose first attempt succeeds
/// reads it twice, takes no lock unless a budget or a breaker is set, and
/// allocates nothing.
///
/// Dropping the driver while an attempt runs (the operation panicked, the call's
/// future was dropped) abandons the attempt: its breaker permit goes back as
/// [`retry_core::abandoned_outcome`] decides, and nothing leaks.
pub struct Driver<'r, T, E, C: Clock + Clone, K: Fn() -> bool> {
    settings: &'r Settings<E>,
    clock: C,
    cancelled: K,
    machine: RetryMachine,
    /// The call's origin: core instants are the time since then.
    start: Instant,
    late_errors_time_out: bool,
    value: Option<T>,
    last_error: Option<E>,
    unannounced: Option<Unannounced>,
    /// The attempt whose `outcome` label waits for the machine's answer.
    unlabelled: Option<(u32, Event)>,
    /// The breaker permit of the attempt in flight, if a breaker guards the
    /// call. Dropped with the driver (a panicking operation, a dropped future),
    /// it abandons the attempt.
    permit: Option<PermitGuard<&'r dyn Breaker, C>>,
}

impl<'r, T, E, C: Clock + Clone, K: Fn() -> bool> Driver<'r, T, E, C, K> {
    /// A driver for one call under `settings`, reading time from `clock` (once
    /// now: the call's start) and asking `cancelled` before every attempt whether
    /// the call has been cancelled. The jitter seed is the settings' seed, or a
    /// fresh one.
    pub fn new(settings: &'r Settings<E>, clock: C, cancelled: K) -> Self {
        let seed = settings.seed().unwrap_or_else(fresh_seed);
        let start = clock.now();
        Driver {
            settings,
            machine: RetryMachine::new(settings.policy(), seed),
            clock,
            cancelled,
            start,
            late_errors_time_out: false,
            value: None,
            last_error: None,
            unannounced: None,
            unlabelled: None,
            permit: None,
        }
    }

    /// Treats an error returned at or after its attempt's deadline as a timed-out
    /// attempt (the retry hook still sees the error). For an adapter that cannot
    /// interrupt an attempt at its deadline (a blocking one); an adapter that
    /// stops attempts at their deadline reports [`Ran::TimedOut`] instead. Set it
    /// before the first [`poll`](Driver::poll).
    pub fn late_errors_time_out(&mut self) {
        self.late_errors_time_out = true;
    }

    /// The call's start, by the driver's clock.
    #[must_use]
    pub const fn started(&self) -> Instant {
        self.start
    }

    /// Tells the driver what happened since the last step ([`Input::Start`] the
    /// first time); returns what to do next.
    ///
    /// Reads the clock once, except for [`Input::Start`] (the call's start
    /// doubles as the moment the call begins). The breaker hears an attempt's
    /// outcome before the machine.
    #[inline]
    #[must_use = "the step says what the adapter must do next"]
    pub fn poll(&mut self, input: Input<T, E>) -> Step<T, E> {
        let (event, now) = match input {
            Input::Start => {
                let event = if (self.cancelled)() {
                    Event::Cancelled
                } else {
                    Event::Start
                };
                (event, self.start)
            }
            Input::Ended(ran) => {
                let now = self.clock.now();
                (self.ended(ran, now), now)
            }
            Input::Slept(Slept::Elapsed) => (Event::Woke, self.clock.now()),
            Input::Slept(Slept::Cancelled) => (Event::Cancelled, self.clock.now()),
        };
        self.step(event, now)
    }

    /// The attempt in flight ended as `ran` at `now`: hands the breaker its
    /// permit back and returns the event for the machine.
    fn ended(&mut self, ran: Ran<T, E>, now: Instant) -> Event {
        // The attempt in flight is the machine's latest.
        let number = self.machine.attempts();
        let timeout = || Failure::retryable().with_kind(FailureKind::Timeout);
        let event = match ran {
            Ran::Returned(Ok(value)) => {
                self.value = Some(value);
                Event::Succeeded
            }
            Ran::Returned(Err(error)) => {
                let late = self.late_errors_time_out
                    && (self.machine.next_deadline())
                        .is_some_and(|deadline| since(self.start, now) >= deadline);
                let (event, failure) = if late {
                    (Event::TimedOut, timeout())
                } else {
                    let failure = self.settings.classify(&error);
                    (Event::Failed(failure), failure)
                };
                self.last_error = Some(error);
                self.unannounced = Some(Unannounced {
                    attempt: number,
                    failure,
                    with_error: true,
                    timed_out: late,
                });
                event
            }
            Ran::TimedOut => {
                self.unannounced = Some(Unannounced {
                    attempt: number,
                    failure: timeout(),
                    with_error: false,
                    timed_out: true,
                });
                Event::TimedOut
            }
            Ran::Cancelled => Event::Cancelled,
        };
        // Checked before taking: the path without a breaker moves nothing.
        if self.permit.is_some() {
            if let Some(permit) = self.permit.take() {
                permit.finish(event, now);
            }
        }
        if observe::ENABLED {
            self.unlabelled = Some((number, event));
        }
        event
    }

    /// Tells the machine `event` at `now` and carries out its answers until one
    /// needs the adapter (an attempt or a sleep) or the call is over.
    fn step(&mut self, mut event: Event, now: Instant) -> Step<T, E> {
        let settings = self.settings;
        loop {
            // One subtraction serves the machine and the call's elapsed time.
            let elapsed = now.saturating_duration_since(self.start);
            let at = retry_core::Instant::from_duration(elapsed);
            let action = self.machine.poll(event, at);
            let answer = settings
                .budget()
                .and_then(|budget| budget.feed(&self.machine, event, action, now));
            if observe::ENABLED && !matches!(action, Action::Withdraw { .. }) {
                self.label(&action);
            }
            event = match action {
                Action::Attempt {
                    number,
                    deadline,
                    replays_non_idempotent,
                } => {
                    self.announce(Duration::ZERO, None);
                    if (self.cancelled)() {
                        Event::Cancelled
                    } else {
                        let deadline =
                            deadline.and_then(|d| self.start.checked_add(d.as_duration()));
                        if let Some(breaker) = settings.breaker() {
                            let clock = self.clock.clone();
                            match PermitGuard::request(&**breaker, clock, now, deadline) {
                                Ok(permit) => self.permit = Some(permit),
                                Err(until) => {
                                    event = Event::Rejected {
                                        until: until.map(|u| since(self.start, u)),
                                    };
                                    continue;
                                }
                            }
                        }
                        observe::attempt_started(number, replays_non_idempotent);
                        return Step::Attempt(Attempt {
                            number,
                            deadline,
                            replays_non_idempotent,
                        });
                    }
                }
                Action::Sleep {
                    until,
                    delay,
                    reason,
                } => {
                    self.announce(delay, Some(reason));
                    observe::sleeping(delay, reason, settings.policy().backoff().name());
                    return Step::Sleep(Sleep {
                        until: self.start.checked_add(until.as_duration()),
                        delay,
                        reason,
                    });
                }
                // Without a budget nobody can refuse: the retry goes on.
                Action::Withdraw { .. } => answer.unwrap_or(Event::Granted),
                Action::GiveUp(give_up) => {
                    observe::gave_up(&give_up, elapsed);
                    let error = RetryError::new(
                        give_up.reason,
                        give_up.attempts,
                        elapsed,
                        self.last_error.take(),
                    )
                    .with_last_failure(give_up.last_failure);
                    if let Some(hook) = settings.on_give_up() {
                        hook(&error);
                    }
                    return Step::Finished(Err(error));
                }
                Action::Done { attempts } => {
                    return Step::Finished(match self.value.take() {
                        Some(value) => Ok(Success {
                            value,
                            attempts,
                            elapsed,
                        }),
                        // `Done` answers only `Succeeded`, which is sent only with a
                        // value in hand; should that ever break, fail the call
                        // rather than panic.
                        None => Err(RetryError::new(
                            GiveUpReason::NotStarted,
                            attempts,
                            elapsed,
                            self.last_error.take(),
                        )
                        .with_last_failure(self.machine.last_failure())),
                    });
                }
            };
        }
    }

    /// Labels the attempt that just ended with the machine's answer to it.
    fn label(&mut self, action: &Action) {
        if let Some((number, ended)) = self.unlabelled.take() {
            if let Some(outcome) =
                retry_core::attempt_outcome(ended, action).map(AttemptOutcome::label)
            {
                observe::attempt_ended(number, outcome);
            }
        }
    }

    /// Tells the retry hook about the failed attempt before its retry.
    fn announce(&mut self, delay: Duration, reason: Option<SleepReason>) {
        let Some(failed) = self.unannounced.take() else {
            return;
        };
        if let Some(hook) = self.settings.on_retry() {
            hook(&RetryNotice {
                attempt: failed.attempt,
                next_attempt: failed.attempt.saturating_add(1),
                delay,
                reason,
                error: if failed.with_error {
                    self.last_error.as_ref()
                } else {
                    None
                },
                failure: failed.failure,
                timed_out: failed.timed_out,
            });
        }
    }
}

impl<T, E, C: Clock + Clone, K: Fn() -> bool> fmt::Debug for Driver<'_, T, E, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("machine", &self.machine)
            .field("start", &self.start)
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}
