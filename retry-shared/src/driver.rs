//! The step driver: one call's bookkeeping around its [`RetryMachine`], between
//! the adapter's waits.

use core::fmt;
use core::time::Duration;
use std::time::Instant;

use retry_core::{
    attempt_timed_out, Action, AttemptOutcome, Event, Failure, FailureKind, GiveUpReason,
    RetryError, RetryMachine, RetryPolicy, SleepReason, Success,
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
    /// The adapter stopped the attempt at its deadline. (An attempt that
    /// returned at or after its deadline may be reported as [`Ran::Returned`]:
    /// the driver applies the deadline rule itself.)
    TimedOut,
    /// The call was cancelled while the attempt ran; the adapter stopped it. The
    /// attempt is abandoned (see the crate's docs on abandoned attempts).
    Cancelled,
    /// The operation returned an error the adapter has judged already (a tower
    /// layer that knows the request the attempt sent: whether it may be
    /// replayed changes the verdict). The settings' classifier is not asked.
    Failed {
        /// What the operation returned.
        error: E,
        /// The adapter's verdict on it.
        failure: Failure,
    },
    /// The operation returned a value that the adapter judged a failure (an HTTP
    /// response with a failing status, read by a response classifier). It is
    /// retried like an error; if the call then gives up on it (retries, time or
    /// retry budget ran out, or the failure is permanent), the value is handed
    /// back by [`Driver::take_failed_value`].
    FailedValue {
        /// What the operation returned.
        value: T,
        /// The classifier's verdict on it.
        failure: Failure,
    },
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
/// # When the clock is read
/// A clock read costs more than the rest of a first-attempt success, so the
/// driver reads one only when a step needs time:
///
/// - At the call's start, when something will need the time since then: the
///   policy has a time budget or an attempt timeout
///   ([`RetryMachine::needs_start_time`]), a retry budget is set (it hears every
///   step with its time), a breaker that times calls is set
///   ([`Breaker::times_calls`]: it would read the clock around every attempt
///   anyway, so the driver reads it and hands the readings on), the settings ask for the elapsed time
///   ([`Settings::set_measure_elapsed`]), or an enabled trace does (with the
///   `tracing` feature, a subscriber listening at `WARN`). Such a call reads
///   the clock again at every later step, and reports the whole time it ran.
/// - Otherwise the call starts with no reading, and takes its first one (its
///   time origin) at the first of: the first attempt waits under a breaker (an
///   async adapter says so with [`attempt_waiting`](Driver::attempt_waiting)
///   when the attempt's future first returns pending; the permit learns its
///   start), the first attempt ends any way but a success (an error, a failing
///   value, a timeout, a cancellation), or a breaker turns it away (nothing
///   has run then: that reading counts as the call's start). Every later
///   step reads the clock as above. A first attempt that succeeds reads no
///   clock for the call. The machine needs no earlier time (no time budget, no
///   attempt timeout: its answers do not depend on how long the first attempt
///   ran), and the sleeps are measured from the origin; but a time counted from
///   it would leave out what ran before it (the first attempt's run, or its
///   first poll), so such a call reports its time as not measured:
///   [`Success::elapsed`] and [`RetryError::elapsed`] are `None`, and the
///   error's message names no time. Ask for the elapsed time to have it
///   whole. An adapter's quick opening ([`QuickOpening::failure`]) reads no
///   clock for a first attempt the core gives up on at once, but for its
///   breaker permit.
///
/// A breaker that does not time calls reads its own time through the
/// [`PermitGuard`] only when a decision needs it (given the driver's reading
/// when there is one). The jitter seed, when the settings fix none, is
/// drawn only before the first event that could draw a delay (an attempt
/// failed, timed out or was turned away), so a first-attempt success draws none;
/// a fixed seed gives the same delays either way. A call whose first attempt
/// succeeds takes no lock unless a budget or a breaker is set, and allocates
/// nothing.
///
/// Dropping the driver while an attempt runs (the operation panicked, the call's
/// future was dropped) abandons the attempt: its breaker permit goes back as
/// [`retry_core::abandoned_outcome`] decides, and nothing leaks.
pub struct Driver<'r, T, E, C: Clock + Clone, K: Fn() -> bool> {
    settings: &'r Settings<E>,
    clock: C,
    cancelled: K,
    /// The retry machine, borrowing the settings' policy (no copy of it per
    /// call); `None` while a call that needs no time has not needed it: before
    /// the first attempt ends any way but a success, the core's
    /// [`RetryMachine::opening`] answers for it.
    machine: Option<RetryMachine<&'r RetryPolicy>>,
    /// The opening's first attempt was handed out (by the opening or the
    /// machine).
    opened: bool,
    /// The call's origin: core instants are the time since then. Its start, or
    /// the first reading of a call that read no clock at its start (`None` until
    /// then).
    start: Option<Instant>,
    /// `start` is the call's start: the time since then is the call's time,
    /// and is reported. A later origin's is not (it leaves out part of the
    /// call).
    measured: bool,
    /// No seed was fixed and none has been drawn yet.
    unseeded: bool,
    keep_late_successes: bool,
    /// The last attempt's value, when a response classifier judged it a failure.
    failed_value: Option<T>,
    last_error: Option<E>,
    /// The attempt that returned `last_error`.
    last_error_attempt: u32,
    unannounced: Option<Unannounced>,
    /// The attempt whose `outcome` label waits for the machine's answer
    /// (kept only when traces or metrics are compiled in).
    unlabelled: Unlabelled,
    /// The breaker permit of the attempt in flight, if a breaker guards the
    /// call. Dropped with the driver (a panicking operation, a dropped future),
    /// it abandons the attempt.
    permit: Option<PermitGuard<&'r dyn Breaker, C>>,
}

/// The attempt whose `outcome` label waits for the machine's answer, and the
/// attempt in flight, for traces and metrics; without either feature it holds
/// nothing. An attempt still in flight when it is dropped (with the driver:
/// the call's future dropped, the operation panicked) was abandoned: it is
/// counted `aborted` then, so every attempt that started has its outcome.
#[derive(Default)]
struct Unlabelled {
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    attempt: Option<(u32, Event)>,
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    in_flight: Option<u32>,
}

#[cfg(any(feature = "tracing", feature = "metrics"))]
impl Drop for Unlabelled {
    fn drop(&mut self) {
        if let Some(number) = self.in_flight.take() {
            observe::attempt_abandoned(number);
        }
    }
}

impl Unlabelled {
    /// Attempt `number` starts.
    #[inline]
    #[cfg_attr(
        not(any(feature = "tracing", feature = "metrics")),
        allow(unused_variables, clippy::unused_self)
    )]
    fn started(&mut self, number: u32) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        {
            self.in_flight = Some(number);
        }
    }

    #[inline]
    #[cfg_attr(
        not(any(feature = "tracing", feature = "metrics")),
        allow(unused_variables, clippy::unused_self)
    )]
    fn set(&mut self, number: u32, ended: Event) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        {
            self.in_flight = None;
            self.attempt = Some((number, ended));
        }
    }

    #[inline]
    #[cfg_attr(
        not(any(feature = "tracing", feature = "metrics")),
        allow(clippy::unused_self)
    )]
    fn take(&mut self) -> Option<(u32, Event)> {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        {
            self.attempt.take()
        }
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        {
            None
        }
    }
}

/// The first attempt of a call that needs nothing of a [`Driver`] until that
/// attempt ends: no breaker that times calls, no retry budget, no time budget or attempt
/// timeout in the policy, elapsed time not asked for, and neither tracing nor
/// metrics compiled in. An adapter runs [`QuickOpening::attempt`] itself; if it
/// succeeds, [`QuickOpening::success`] is the call's result (the core's answer
/// to that success), with no driver built and no clock read unless the attempt
/// waited. If it returns an error, [`QuickOpening::failure`] ends the call
/// when the core gives up on that failure at once (a permanent failure, or a
/// policy of one attempt), again with no driver built; otherwise
/// [`Driver::after_quick_failure`] takes the call over from there (and
/// [`Driver::after_quick_opening`] after any other end), as if the driver had
/// run the attempt.
///
/// The answers are the core's ([`RetryMachine::opening`] and
/// [`RetryMachine::opening_failure`]); the adapter only skips the bookkeeping
/// a retry would need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuickOpening {
    /// The first attempt (number 1, no deadline).
    pub attempt: Attempt,
    /// How many attempts the call reports when this one succeeds.
    attempts: u32,
}

impl QuickOpening {
    /// The quick opening of a call under `settings`, if it may take one (see
    /// the type's docs). The adapter must also know the call cannot be
    /// cancelled before its first attempt (no cancellation token).
    #[inline]
    #[must_use]
    pub fn of<E>(settings: &Settings<E>) -> Option<QuickOpening> {
        if observe::ENABLED
            || settings
                .breaker()
                .is_some_and(|breaker| breaker.times_calls())
            || settings.budget().is_some()
            || settings.measures_elapsed()
        {
            return None;
        }
        match RetryMachine::opening(settings.policy()) {
            Some((
                Action::Attempt {
                    number,
                    deadline: None,
                    replays_non_idempotent,
                },
                Action::Done { attempts },
            )) => Some(QuickOpening {
                attempt: Attempt {
                    number,
                    deadline: None,
                    replays_non_idempotent,
                },
                attempts,
            }),
            _ => None,
        }
    }

    /// Asks the call's breaker, if it has one, for the first attempt's permit,
    /// without a time (a breaker in the quick opening does not time calls; the
    /// guard reads `clock` only if the breaker's answer depends on the time).
    /// `Ok(None)`: no breaker. `Err` carries when the breaker admits again, if
    /// it can tell: hand it to [`Driver::after_quick_refusal`].
    ///
    /// # Errors
    /// The breaker's refusal (the attempt must not run).
    #[inline]
    #[allow(clippy::type_complexity)]
    pub fn admit<'r, E, C: Clock + Clone>(
        &self,
        settings: &'r Settings<E>,
        clock: &C,
    ) -> Result<Option<PermitGuard<&'r dyn Breaker, C>>, Option<Instant>> {
        match settings.breaker() {
            None => Ok(None),
            Some(breaker) => PermitGuard::request(&**breaker, clock.clone(), None, None).map(Some),
        }
    }

    /// The end of the call whose first attempt returned `error`, when the core
    /// gives up on that failure at once ([`RetryMachine::opening_failure`]: a
    /// permanent failure, or any failure under a policy of one attempt); `Err`
    /// hands everything on to [`Driver::after_quick_failure`] otherwise.
    ///
    /// It does what a driver taking the call over would do, with the same
    /// results, and no more: the settings' classifier judges `error` (once:
    /// the verdict travels with the `Err`), the breaker gets its permit back
    /// with the same outcome, the give-up hook hears the same error, and the
    /// [`RetryError`] is the one the driver would return, its time not
    /// measured (the call read no clock at its start). `waited` is when the
    /// attempt first waited under a breaker, if it did (an async attempt that
    /// returned pending: the permit's start, as for
    /// [`Driver::after_quick_opening`]); the clock is then read once more, for
    /// the permit. An attempt without a breaker, or one that never waited,
    /// reads no clock: the breaker reads the time itself if it needs it.
    ///
    /// # Errors
    /// A [`QuickFailure`] when the call goes on: the core may retry, or
    /// decides on the time.
    #[inline]
    #[allow(clippy::type_complexity)]
    pub fn failure<E, B: Breaker, C: Clock>(
        self,
        settings: &Settings<E>,
        clock: &C,
        error: E,
        waited: Option<Instant>,
        permit: Option<PermitGuard<B, C>>,
    ) -> Result<RetryError<E>, QuickFailure<E, PermitGuard<B, C>>> {
        let failure = settings.classify(&error);
        let event = Event::Failed(failure);
        let Some(give_up) = RetryMachine::opening_failure(settings.policy(), event) else {
            return Err(QuickFailure {
                error,
                failure,
                waited,
                permit,
            });
        };
        // The end of an attempt that waited is read for its permit, as the
        // driver reads it; one that did not wait is the call's origin.
        if let Some(permit) = permit {
            permit.finish(event, waited.map(|_| clock.now()));
        }
        // No reading at the call's start: its time is not reported.
        let error = RetryError::new(give_up.reason, give_up.attempts, None, Some(error))
            .with_last_failure(give_up.last_failure)
            .with_last_error_attempt(Some(self.attempt.number));
        if let Some(hook) = settings.on_give_up() {
            hook(&error);
        }
        Ok(error)
    }

    /// The call's result when the first attempt returned `value`: its time
    /// not measured, as the call read no clock at its start (a breaker's
    /// permit, if any, goes back through [`PermitGuard::finish`]).
    #[inline]
    #[must_use]
    pub fn success<T>(self, value: T) -> Success<T> {
        Success {
            value,
            attempts: self.attempts,
            elapsed: None,
        }
    }
}

/// A [`QuickOpening`]'s first attempt that failed without ending the call
/// ([`QuickOpening::failure`]'s `Err`): its error, the classifier's verdict on
/// it, when the attempt first waited (if it did) and its breaker permit `G`
/// (a [`PermitGuard`]), for [`Driver::after_quick_failure`] to take over.
#[derive(Debug)]
pub struct QuickFailure<E, G> {
    error: E,
    failure: Failure,
    waited: Option<Instant>,
    permit: Option<G>,
}

impl<E, G> QuickFailure<E, G> {
    /// The same failure with its permit turned into another kind by `f` (a
    /// guard over a breaker of a known type into one over `&dyn Breaker`,
    /// as the driver keeps it: [`PermitGuard::into_dyn`]).
    #[inline]
    pub fn map_permit<H>(self, f: impl FnOnce(G) -> H) -> QuickFailure<E, H> {
        QuickFailure {
            error: self.error,
            failure: self.failure,
            waited: self.waited,
            permit: self.permit.map(f),
        }
    }

    /// The error the attempt returned.
    #[must_use]
    pub const fn error(&self) -> &E {
        &self.error
    }

    /// The classifier's verdict on it.
    #[must_use]
    pub const fn classified(&self) -> Failure {
        self.failure
    }
}

impl<'r, T, E, C: Clock + Clone, K: Fn() -> bool> Driver<'r, T, E, C, K> {
    /// A driver for one call under `settings`, reading time from `clock` (now,
    /// the call's start, if the call needs it: see the type's docs) and asking
    /// `cancelled` before every attempt whether the call has been cancelled. The
    /// jitter seed is the settings' seed, or a fresh one drawn when first needed.
    #[inline]
    pub fn new(settings: &'r Settings<E>, clock: C, cancelled: K) -> Self {
        let policy = settings.policy();
        let timed = RetryMachine::opening(policy).is_none()
            || settings.budget().is_some()
            || settings
                .breaker()
                .is_some_and(|breaker| breaker.times_calls())
            || settings.measures_elapsed()
            || observe::wants_elapsed();
        let (start, machine) = if timed {
            let machine = RetryMachine::with_policy(policy, settings.seed().unwrap_or(0));
            (Some(clock.now()), Some(machine))
        } else {
            (None, None)
        };
        let measured = start.is_some();
        Driver {
            settings,
            unseeded: settings.seed().is_none(),
            machine,
            opened: false,
            clock,
            cancelled,
            start,
            measured,
            keep_late_successes: false,
            failed_value: None,
            last_error: None,
            last_error_attempt: 0,
            unannounced: None,
            unlabelled: Unlabelled::default(),
            permit: None,
        }
    }

    /// A driver taking over a call whose [`QuickOpening`] attempt ended other
    /// than by success: poll it with [`Input::Ended`] carrying how the attempt
    /// ended (not [`Input::Start`]). `start` is when the attempt first waited,
    /// if it did (the call's time origin then); otherwise the call's clock
    /// starts at its first reading, as for any call that reads no clock at its
    /// start (see the type's docs).
    /// `permit` is the attempt's breaker permit from [`QuickOpening::admit`].
    #[inline]
    pub fn after_quick_opening(
        settings: &'r Settings<E>,
        clock: C,
        cancelled: K,
        start: Option<Instant>,
        permit: Option<PermitGuard<&'r dyn Breaker, C>>,
    ) -> Self {
        let mut driver = Driver::new(settings, clock, cancelled);
        driver.opened = true;
        if driver.start.is_none() {
            driver.start = start;
        }
        driver.permit = permit;
        driver
    }

    /// A driver taking over a call whose [`QuickOpening`] attempt returned an
    /// error that did not end the call ([`QuickOpening::failure`]'s `Err`), and
    /// the step that follows: what [`after_quick_opening`](Self::after_quick_opening)
    /// and a poll with that error give, without asking the classifier again.
    pub fn after_quick_failure(
        settings: &'r Settings<E>,
        clock: C,
        cancelled: K,
        failed: QuickFailure<E, PermitGuard<&'r dyn Breaker, C>>,
    ) -> (Self, Step<T, E>) {
        let QuickFailure {
            error,
            failure,
            waited,
            permit,
        } = failed;
        let mut driver = Driver::after_quick_opening(settings, clock, cancelled, waited, permit);
        // As a poll with the error: the attempt's end is read (no success).
        let now = Some(driver.read());
        let (event, value) = driver.ended(Ran::Returned(Err(error)), now, Some(failure));
        let step = driver.step(event, now, value);
        (driver, step)
    }

    /// A driver taking over a call whose breaker refused its [`QuickOpening`]
    /// attempt ([`QuickOpening::admit`]'s `Err`), and the step that follows, as
    /// the driver answers a refusal of its own first attempt: the call's clock
    /// starts here.
    pub fn after_quick_refusal(
        settings: &'r Settings<E>,
        clock: C,
        cancelled: K,
        until: Option<Instant>,
    ) -> (Self, Step<T, E>) {
        let mut driver = Driver::new(settings, clock, cancelled);
        driver.opened = true;
        let (event, origin) = driver.refused(1, until);
        let step = driver.step(event, Some(origin), None);
        (driver, step)
    }

    /// The breaker refused attempt `number` until `until`: the event for the
    /// machine, and the call's time origin it is placed on (read now if the
    /// call has read no clock yet: then nothing has run, as every attempt that
    /// ran read the clock when it ended, so the reading is the call's start
    /// and its time is measured from it).
    fn refused(&mut self, number: u32, until: Option<Instant>) -> (Event, Instant) {
        observe::rejected(number);
        let origin = match self.start {
            Some(start) => start,
            None => {
                self.measured = true;
                self.read()
            }
        };
        let event = Event::Rejected {
            until: until.map(|u| since(origin, u)),
        };
        (event, origin)
    }

    /// Keeps a success returned at or after its attempt's deadline. For an
    /// adapter that cannot stop an attempt at its deadline (a blocking one): the
    /// work has taken effect, and retrying would repeat it. Without it, every
    /// outcome follows the core's deadline rule
    /// ([`retry_core::attempt_timed_out`]): one that arrives at or after the
    /// deadline is a timed-out attempt (the retry hook still sees a returned
    /// error). Set it before the first attempt ends.
    pub fn keep_late_successes(&mut self) {
        self.keep_late_successes = true;
    }

    /// The value the call's last attempt returned, if a response classifier
    /// judged it a failure ([`Ran::FailedValue`]) and the call gave up on it
    /// without starting another attempt: retries, time or retry budget ran out,
    /// or the failure was permanent (not a cancellation, nor a breaker's
    /// refusal). A layer that retries responses returns it as the call's answer,
    /// as an HTTP client returns the last response. Ask after
    /// [`Step::Finished`]; or after a [`Step::Attempt`] that the adapter
    /// cannot run (a request that cannot be made again), for what the attempt
    /// before it returned.
    pub fn take_failed_value(&mut self) -> Option<T> {
        self.failed_value.take()
    }

    /// The call's time origin, by the driver's clock: its start, or, for a call
    /// that read no clock at its start, its first reading (`None` before it;
    /// the call then reports its time as not measured).
    #[must_use]
    pub const fn started(&self) -> Option<Instant> {
        self.start
    }

    /// Tells the driver that the attempt in flight is waiting (its future
    /// returned pending). Under a breaker, a call that has read no clock yet
    /// reads it now: the permit learns the attempt's start, so an attempt
    /// abandoned from here on is judged by how long it ran, and the reading is
    /// the call's origin (see the type's docs). Otherwise, and once the clock
    /// has been read, it costs nothing.
    #[inline]
    pub fn attempt_waiting(&mut self) {
        if self.start.is_none() {
            if let Some(permit) = self.permit.as_mut() {
                let now = self.clock.now();
                self.start = Some(now);
                permit.waited(now);
            }
        }
    }

    /// Reads the clock; the first reading of a call that read none at its start
    /// becomes its origin.
    fn read(&mut self) -> Instant {
        let now = self.clock.now();
        if self.start.is_none() {
            self.start = Some(now);
        }
        now
    }

    /// Tells the driver what happened since the last step ([`Input::Start`] the
    /// first time); returns what to do next.
    ///
    /// Reads the clock at most once, as the type's docs say: never for
    /// [`Input::Start`] (the call's start doubles as the moment the call
    /// begins), nor for a first attempt's success in a call that read no clock
    /// at its start. The breaker hears an attempt's outcome before the machine.
    #[inline]
    #[must_use = "the step says what the adapter must do next"]
    pub fn poll(&mut self, input: Input<T, E>) -> Step<T, E> {
        // The opening of a call that has needed no time and has no breaker to
        // ask: the core's opening answers, with none of the bookkeeping a
        // failure needs (the steps below would do the same, more slowly).
        let input = if self.machine.is_none() && self.settings.breaker().is_none() {
            match self.opening(input) {
                Ok(step) => return step,
                Err(input) => input,
            }
        } else {
            input
        };
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
                // Only a success ends a call that has not needed time yet.
                let now = match (&ran, self.start) {
                    (Ran::Returned(Ok(_)), None) => None,
                    _ => Some(self.read()),
                };
                let (event, value) = self.ended(ran, now, None);
                return self.step(event, now, value);
            }
            Input::Slept(Slept::Elapsed) => (Event::Woke, Some(self.read())),
            Input::Slept(Slept::Cancelled) => (Event::Cancelled, Some(self.read())),
        };
        self.step(event, now, None)
    }

    /// The step for `input` while the call has no machine and no breaker, when
    /// the core's opening answers it: the first attempt, or that attempt's
    /// success. `Err` gives back any other input.
    #[inline]
    fn opening(&mut self, input: Input<T, E>) -> Result<Step<T, E>, Input<T, E>> {
        let Some((first, done)) = RetryMachine::opening(self.settings.policy()) else {
            return Err(input);
        };
        match (input, first, done) {
            (
                Input::Start,
                Action::Attempt {
                    number,
                    deadline: None,
                    replays_non_idempotent,
                },
                _,
            ) if !self.opened && !(self.cancelled)() => {
                self.opened = true;
                observe::attempt_started(number, replays_non_idempotent);
                if observe::ENABLED {
                    self.unlabelled.started(number);
                }
                Ok(Step::Attempt(Attempt {
                    number,
                    deadline: None,
                    replays_non_idempotent,
                }))
            }
            // (A call whose clock started while its attempt waited measures.)
            (Input::Ended(Ran::Returned(Ok(value))), _, Action::Done { attempts })
                if self.opened && self.start.is_none() =>
            {
                if observe::ENABLED {
                    self.unlabelled.set(attempts, Event::Succeeded);
                    self.label(Event::Succeeded, &done);
                }
                Ok(Step::Finished(Ok(Success {
                    value,
                    attempts,
                    elapsed: None,
                })))
            }
            (input, _, _) => Err(input),
        }
    }

    /// The attempt in flight ended as `ran` at `now` (`None`: not read, the call
    /// needing no time): hands the breaker its permit back and returns the event
    /// for the machine, with the attempt's value if it succeeded. `classified`
    /// is the classifier's verdict on a returned error, if it was asked already.
    fn ended(
        &mut self,
        ran: Ran<T, E>,
        now: Option<Instant>,
        classified: Option<Failure>,
    ) -> (Event, Option<T>) {
        // A new attempt's end replaces what the last one left.
        self.failed_value = None;
        // An error the adapter judged is an error with its verdict.
        let classified = match &ran {
            Ran::Failed { failure, .. } => Some(*failure),
            _ => classified,
        };
        // The attempt in flight is the machine's latest.
        let number = self.attempts();
        // The core's deadline rule: an outcome at or after the deadline is a
        // timeout, whoever's clock reported it first. (A deadline makes the call
        // read the clock from its start; without one nothing is late.)
        let deadline = self.machine.as_ref().and_then(RetryMachine::next_deadline);
        let late = match (deadline, self.start, now) {
            (Some(deadline), Some(start), Some(now)) => {
                attempt_timed_out(Some(deadline), since(start, now))
            }
            _ => false,
        };
        let timed_out = match &ran {
            Ran::TimedOut => true,
            Ran::Returned(Ok(_)) => late && !self.keep_late_successes,
            Ran::Returned(Err(_)) | Ran::Failed { .. } | Ran::FailedValue { .. } => late,
            Ran::Cancelled => false,
        };
        let mut succeeded = None;
        let event = match ran {
            Ran::Returned(Err(error)) | Ran::Failed { error, .. } => {
                let (event, failure) = if timed_out {
                    (
                        Event::TimedOut,
                        Failure::retryable().with_kind(FailureKind::Timeout),
                    )
                } else {
                    let failure = match classified {
                        Some(failure) => failure,
                        None => self.settings.classify(&error),
                    };
                    (Event::Failed(failure), failure)
                };
                self.last_error = Some(error);
                self.last_error_attempt = number;
                self.unannounced = Some(Unannounced {
                    attempt: number,
                    failure,
                    with_error: true,
                    timed_out,
                });
                event
            }
            Ran::TimedOut => self.timed_out(number),
            // Arrived at or after the deadline: dropped, as if never arrived.
            Ran::Returned(Ok(_)) | Ran::FailedValue { .. } if timed_out => self.timed_out(number),
            Ran::Returned(Ok(value)) => {
                succeeded = Some(value);
                Event::Succeeded
            }
            Ran::FailedValue { value, failure } => {
                self.failed_value = Some(value);
                self.unannounced = Some(Unannounced {
                    attempt: number,
                    failure,
                    with_error: false,
                    timed_out: false,
                });
                Event::Failed(failure)
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
            self.unlabelled.set(number, event);
        }
        (event, succeeded)
    }

    /// Tells the machine `event` at `now` (`None`: the call has read no clock,
    /// and is still at its origin) and carries out its answers until one needs
    /// the adapter (an attempt or a sleep) or the call is over. `value` is what
    /// the attempt returned when `event` is its success.
    fn step(&mut self, mut event: Event, mut now: Option<Instant>, value: Option<T>) -> Step<T, E> {
        let settings = self.settings;
        loop {
            // One subtraction serves the machine and the call's elapsed time.
            let elapsed = match (now, self.start) {
                (Some(now), Some(start)) => Some(now.saturating_duration_since(start)),
                _ => None,
            };
            let at = elapsed.map_or(
                retry_core::Instant::ORIGIN,
                retry_core::Instant::from_duration,
            );
            let action = self.tell(event, at);
            let answer = match (settings.budget(), &self.machine) {
                (Some(budget), Some(machine)) => {
                    // A budget makes the call read the clock from its start
                    // and at every step: `now` is there.
                    let now = now.or(self.start).unwrap_or_else(|| self.clock.now());
                    budget.feed(machine, event, action, now)
                }
                // (A budget makes the call build its machine at once.)
                _ => None,
            };
            if observe::ENABLED && !matches!(action, Action::Withdraw { .. }) {
                self.label(event, &action);
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
                        // A deadline makes the call read the clock from its start.
                        let deadline = deadline
                            .zip(self.start)
                            .and_then(|(d, start)| start.checked_add(d.as_duration()));
                        if let Some(breaker) = settings.breaker() {
                            let clock = self.clock.clone();
                            match PermitGuard::request(&**breaker, clock, now, deadline) {
                                Ok(permit) => self.permit = Some(permit),
                                Err(until) => {
                                    let origin;
                                    (event, origin) = self.refused(number, until);
                                    // A call that had read no clock reads
                                    // it here: the rejection's time.
                                    now = now.or(Some(origin));
                                    continue;
                                }
                            }
                        }
                        observe::attempt_started(number, replays_non_idempotent);
                        if observe::ENABLED {
                            self.unlabelled.started(number);
                        }
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
                        // A sleep follows a failure, which read the clock.
                        until: self
                            .start
                            .and_then(|start| start.checked_add(until.as_duration())),
                        delay,
                        reason,
                    });
                }
                // Without a budget nobody can refuse: the retry goes on.
                Action::Withdraw { .. } => answer.unwrap_or(Event::Granted),
                Action::GiveUp(give_up) => {
                    // The call's time, when it was measured from its start.
                    let elapsed = elapsed.filter(|_| self.measured);
                    observe::gave_up(&give_up, elapsed);
                    if matches!(
                        give_up.reason,
                        GiveUpReason::Cancelled | GiveUpReason::CircuitOpen { .. }
                    ) {
                        self.failed_value = None;
                    }
                    let error = RetryError::new(
                        give_up.reason,
                        give_up.attempts,
                        elapsed,
                        self.last_error.take(),
                    )
                    .with_last_failure(give_up.last_failure)
                    .with_last_error_attempt(Some(self.last_error_attempt));
                    if let Some(hook) = settings.on_give_up() {
                        hook(&error);
                    }
                    return Step::Finished(Err(error));
                }
                Action::Done { attempts } => {
                    // The call's time, when it was measured from its start.
                    let elapsed = elapsed.filter(|_| self.measured);
                    return Step::Finished(match value {
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
                        .with_last_failure(
                            self.machine.as_ref().and_then(RetryMachine::last_failure),
                        )
                        .with_last_error_attempt(Some(self.last_error_attempt))),
                    });
                }
            };
        }
    }

    /// Tells the machine `event` at `at`; while the call has no machine, the
    /// core's opening answers the start and the first attempt's success, and
    /// anything else builds the machine (replaying the start: a call without
    /// one needs no time, so the answer is the same) and tells it.
    #[inline]
    fn tell(&mut self, event: Event, at: retry_core::Instant) -> Action {
        if self.machine.is_none() {
            if let Some((first, done)) = RetryMachine::opening(self.settings.policy()) {
                match event {
                    Event::Start if !self.opened => {
                        self.opened = true;
                        return first;
                    }
                    Event::Succeeded if self.opened => return done,
                    _ => {}
                }
            }
        }
        let (settings, opened) = (self.settings, self.opened);
        let machine = self.machine.get_or_insert_with(|| {
            let mut machine =
                RetryMachine::with_policy(settings.policy(), settings.seed().unwrap_or(0));
            if opened {
                let _ = machine.poll(Event::Start, retry_core::Instant::ORIGIN);
            }
            machine
        });
        if self.unseeded && !matches!(event, Event::Start | Event::Succeeded) {
            // The first event that may draw a delay: draw the seed now.
            machine.set_seed(fresh_seed());
            self.unseeded = false;
        }
        machine.poll(event, at)
    }

    /// How many attempts have started.
    fn attempts(&self) -> u32 {
        match &self.machine {
            Some(machine) => machine.attempts(),
            None => u32::from(self.opened),
        }
    }

    /// Attempt `number` timed out without an error of its own.
    fn timed_out(&mut self, number: u32) -> Event {
        self.unannounced = Some(Unannounced {
            attempt: number,
            failure: Failure::retryable().with_kind(FailureKind::Timeout),
            with_error: false,
            timed_out: true,
        });
        Event::TimedOut
    }

    /// Labels the attempt that just ended with its outcome, as the core's
    /// `attempt_outcome` reads its event; or, when no attempt was in flight, an
    /// attempt a breaker turned away (`rejected`, every time), or a call the
    /// machine ended on `event` before its next attempt (a cancellation before
    /// an attempt or during a sleep: `aborted`).
    fn label(&mut self, event: Event, action: &Action) {
        match self.unlabelled.take() {
            Some((number, ended)) => {
                if let Some(outcome) = retry_core::attempt_outcome(ended) {
                    let kind = match ended {
                        Event::Failed(failure) => Some(failure.kind()),
                        Event::TimedOut => Some(FailureKind::Timeout),
                        _ => None,
                    };
                    observe::attempt_ended(number, AttemptOutcome::label(outcome), kind);
                }
            }
            None if matches!(event, Event::Rejected { .. }) || action.is_terminal() => {
                if let Some(outcome) = retry_core::attempt_outcome(event) {
                    // A refused attempt is the machine's latest; a cancelled
                    // call stops before the next one.
                    let number = match event {
                        Event::Rejected { .. } => self.attempts(),
                        _ => self.attempts().saturating_add(1),
                    };
                    observe::stopped_before(number, AttemptOutcome::label(outcome), event);
                }
            }
            None => {}
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
