//! The blocking driver: [`Retry`] (a reusable, configured retrier), [`retry`] (the
//! one-line form), and what the operation and the hooks are told.

use core::fmt;
use std::sync::Arc;
use std::time::Instant;

use retry_core::{Event, RetryError, RetryPolicy, Success};
use retry_shared::{
    Breaker, Driver, Input, PermitGuard, QuickFailure, QuickOpening, Ran, Settings, Sleep, Step,
};

use crate::cancel::CancelToken;
use crate::clock::{Clock, Sleeper, Slept, SystemClock, ThreadSleeper};

/// Runs `op` under `policy` with the defaults: every error is retryable, real
/// time, a fresh random jitter seed, no hooks, no cancellation.
///
/// A shorthand for `Retry::new(policy).call(op)`; see [`Retry`] to configure more.
///
/// # Errors
/// [`RetryError`] when the call gives up; it carries the operation's last error.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Backoff, RetryPolicy};
///
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::constant(Duration::from_millis(1)))
///     .build()?;
/// let done = retry_std::retry(policy, |ctx| {
///     if ctx.attempt() < 2 { Err(std::io::Error::other("not yet")) } else { Ok(ctx.attempt()) }
/// })?;
/// assert_eq!((done.value, done.attempts), (2, 2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn retry<T, E, F>(policy: RetryPolicy, op: F) -> Result<Success<T>, RetryError<E>>
where
    F: FnMut(&AttemptContext) -> Result<T, E>,
{
    Retry::new(policy).call(op)
}

/// What the operation is told about the attempt it is running.
#[derive(Clone, Debug)]
pub struct AttemptContext {
    attempt: u32,
    deadline: Option<Instant>,
    replays_non_idempotent: bool,
    cancel: CancelToken,
}

impl AttemptContext {
    /// This attempt's number; the first is 1.
    #[must_use]
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// How many retries came before this attempt (`attempt - 1`): the value for a
    /// retry-count header such as `x-retry-attempt`.
    #[must_use]
    pub const fn retries(&self) -> u32 {
        self.attempt.saturating_sub(1)
    }

    /// When this attempt times out, if the policy has a per-attempt timeout (or
    /// caps attempts at the total budget's end), by the call's clock.
    ///
    /// The deadline is advisory: a blocking operation cannot be interrupted, so
    /// it should pass the deadline on (as a socket or request timeout). If the
    /// operation returns an error at or after the deadline, the attempt is
    /// reported to the machine as timed out; a success is accepted whenever it
    /// arrives.
    #[must_use]
    pub const fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether this attempt repeats an operation the policy marks as
    /// non-idempotent (a replayed POST may charge twice): the operation should
    /// warn, or refuse, before sending anything.
    #[must_use]
    pub const fn replays_non_idempotent(&self) -> bool {
        self.replays_non_idempotent
    }

    /// The call's cancel token, so a long operation can stop early on its own.
    #[must_use]
    pub const fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }
}

/// A configured retrier for operations failing with `E`: build it once, then
/// [`call`](Retry::call) it as often as needed, from any thread (it is
/// `Send + Sync`; wrap it in an `Arc` to share it).
///
/// Every decision (whether to retry, how long to wait, when to stop) is made by
/// [`retry_core::RetryMachine`]; `Retry` only runs the operation, reads the clock,
/// sleeps and watches the cancel token, and leaves the rest (budget, breaker,
/// hooks, classifier) to the [`retry_shared::Driver`] it shares with the async
/// adapter. Clones share their hooks, budget and breaker.
///
/// # A panicking operation
/// A panic in the operation unwinds out of [`call`](Retry::call) (catch it with
/// `std::panic::catch_unwind` if need be) and abandons the attempt; nothing is
/// leaked. The breaker's permit goes back: recorded as a failure if the attempt
/// ran longer than the breaker's slow-call duration or reached its deadline,
/// released otherwise (a half-open probe frees its slot for the next call). The
/// retry budget hears nothing more of the call: a withdrawal made for the
/// attempt stands.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Backoff, Failure, Jitter, RetryPolicy};
/// use retry_std::{ManualClock, Retry};
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(4)
///     .backoff(Backoff::exponential(Duration::from_secs(1), 2.0))
///     .jitter(Jitter::None)
///     .build()?;
/// let clock = ManualClock::new(); // virtual time: the test below takes no time
/// let sleeper = clock.sleeper();
/// let err = Retry::new(policy)
///     .classify(|e: &u16| if *e == 503 { Failure::retryable() } else { Failure::permanent() })
///     .on_retry(|n| eprintln!("attempt {} failed ({:?}), retrying in {:?}", n.attempt, n.error, n.delay))
///     .clock(clock.clone())
///     .sleeper(sleeper.clone())
///     .measure_elapsed() // the whole call's time, read from its start
///     .call(|_| Err::<(), u16>(503))
///     .unwrap_err();
/// assert_eq!(err.code(), "retry.exhausted");
/// assert_eq!(sleeper.sleeps(), [1, 2, 4].map(Duration::from_secs));
/// assert_eq!(err.elapsed(), Some(Duration::from_secs(7)));
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
pub struct Retry<E> {
    settings: Settings<E>,
    cancel: Option<CancelToken>,
    /// `None`: the system clock (no allocation for the default).
    clock: Option<Arc<dyn Clock>>,
    /// `None`: the thread sleeper.
    sleeper: Option<Arc<dyn Sleeper>>,
}

impl<E> Retry<E> {
    /// A retrier following `policy`, with the defaults: every error retryable,
    /// [`SystemClock`] and [`ThreadSleeper`], a fresh OS-seeded jitter seed for
    /// every call, no hooks, no cancel token, no shared budget, no breaker.
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Retry<E> {
        Retry {
            settings: Settings::new(policy),
            cancel: None,
            clock: None,
            sleeper: None,
        }
    }

    retry_shared::retry_builder_methods!();

    /// Lets `token` cancel calls: it is checked before every attempt and every
    /// delay, and wakes a delay in progress at once. A cancelled call ends with
    /// `retry.cancelled`; no attempt starts after the token is tripped. Every
    /// call made with this retrier watches the same token.
    #[must_use]
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Reads time from `clock` instead of [`SystemClock`].
    #[must_use]
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Sleeps with `sleeper` instead of [`ThreadSleeper`].
    #[must_use]
    pub fn sleeper(mut self, sleeper: impl Sleeper + 'static) -> Self {
        self.sleeper = Some(Arc::new(sleeper));
        self
    }

    /// Runs `op` until it succeeds or the machine gives up.
    ///
    /// `op` is called once per attempt with an [`AttemptContext`]. The call's
    /// time origin is the moment `call` starts; the machine sees the time since
    /// then. An error returned at or after the attempt's deadline counts as a
    /// timed-out attempt.
    ///
    /// A retry with no delay (a zero backoff: the core starts it at once)
    /// first gives up the rest of the thread's time slice
    /// ([`std::thread::yield_now`]), so a tight retry loop does not hold a
    /// core that other threads want; a delay sleeps the thread (through the
    /// [`Sleeper`]).
    ///
    /// # Errors
    /// [`RetryError`] with the machine's reason, the attempts, the elapsed time
    /// and the last error the operation returned.
    pub fn call<T, F>(&self, mut op: F) -> Result<Success<T>, RetryError<E>>
    where
        F: FnMut(&AttemptContext) -> Result<T, E>,
    {
        // A call that needs nothing of the driver until its first attempt ends
        // runs that attempt itself (the core's opening), and ends there unless
        // the breaker refuses it or it fails in a way the call goes on after:
        // only then is a driver built, which takes the call over.
        let clock = CallClock(self.clock.as_deref());
        if let (None, Some(quick)) = (&self.cancel, self.settings.quick_opening()) {
            // A shared breaker of the default shape is called directly
            // (its closed path inlined); any other through `dyn Breaker`.
            let end = match self.settings.shared_breaker() {
                Some(shared) => quick_attempt(
                    quick,
                    &self.settings,
                    clock,
                    PermitGuard::request(shared, clock, None, None).map(Some),
                    PermitGuard::into_dyn,
                    &mut op,
                ),
                None => quick_attempt(
                    quick,
                    &self.settings,
                    clock,
                    quick.admit(&self.settings, &clock),
                    |guard| guard,
                    &mut op,
                ),
            };
            return match end {
                QuickEnd::Done(success) => Ok(success),
                QuickEnd::GaveUp(error) => Err(error),
                QuickEnd::Refused(until) => self.take_over(clock, Err(until), op),
                QuickEnd::Failed(failed) => self.take_over(clock, Ok(failed), op),
            };
        }
        let cancel = self.cancel.clone().unwrap_or(CancelToken::never());
        let cancelled = || cancel.is_cancelled();
        let mut driver = Driver::new(&self.settings, clock, cancelled);
        let step = driver.poll(Input::Start);
        self.drive(driver, step, clock, &cancel, op)
    }

    /// The rest of a call whose quick opening did not end it: its first
    /// attempt `failed` (or the breaker refused it until `Err`'s time, if
    /// known). Out of line: the quick opening is the path most calls take. A
    /// call with a quick opening has no cancel token.
    #[inline(never)]
    #[allow(clippy::type_complexity)]
    fn take_over<'s, T, F>(
        &'s self,
        clock: CallClock<'s>,
        failed: Result<
            QuickFailure<E, PermitGuard<&'s dyn Breaker, CallClock<'s>>>,
            Option<Instant>,
        >,
        op: F,
    ) -> Result<Success<T>, RetryError<E>>
    where
        F: FnMut(&AttemptContext) -> Result<T, E>,
    {
        let never = || false;
        let (driver, step) = match failed {
            Ok(failed) => Driver::after_quick_failure(&self.settings, clock, never, failed),
            Err(until) => Driver::after_quick_refusal(&self.settings, clock, never, until),
        };
        self.drive(driver, step, clock, &CancelToken::never(), op)
    }

    /// Carries a call out from `step` with `driver`: runs the attempts and
    /// sleeps it asks for, until it finishes.
    fn drive<T, F, K>(
        &self,
        mut driver: Driver<'_, T, E, CallClock<'_>, K>,
        mut step: Step<T, E>,
        clock: CallClock<'_>,
        cancel: &CancelToken,
        mut op: F,
    ) -> Result<Success<T>, RetryError<E>>
    where
        F: FnMut(&AttemptContext) -> Result<T, E>,
        K: Fn() -> bool,
    {
        // (Read when a later attempt ends; neither a start, a refusal nor a
        // failed first attempt reads it.)
        driver.keep_late_successes();
        // Whether the thread has waited since the last attempt ended.
        let mut slept = false;
        loop {
            let input = match step {
                Step::Attempt(attempt) => {
                    if attempt.number > 1 && !slept {
                        // A retry with no delay (the core starts it at once):
                        // the thread gives up the rest of its time slice
                        // first, so a tight retry loop does not hold a core
                        // that other threads want.
                        std::thread::yield_now();
                    }
                    slept = false;
                    let context = AttemptContext {
                        attempt: attempt.number,
                        deadline: attempt.deadline,
                        replays_non_idempotent: attempt.replays_non_idempotent,
                        cancel: cancel.clone(),
                    };
                    // A panic unwinds through the driver, whose permit guard
                    // hands the breaker's permit back as an abandoned attempt.
                    Input::Ended(Ran::Returned(op(&context)))
                }
                Step::Sleep(sleep) => {
                    slept = true;
                    Input::Slept(self.sleep(clock, sleep, cancel))
                }
                Step::Finished(result) => return result,
            };
            step = driver.poll(input);
        }
    }

    /// Sleeps out `sleep`, unless cancelled. Cancellation is checked before the
    /// sleep and right after it, so no attempt follows a cancel that arrived
    /// during the delay.
    fn sleep(&self, clock: CallClock<'_>, sleep: Sleep, cancel: &CancelToken) -> Slept {
        if cancel.is_cancelled() {
            return Slept::Cancelled;
        }
        let left = sleep.until.map_or(sleep.delay, |end| {
            end.saturating_duration_since(clock.now())
        });
        let slept = match &self.sleeper {
            Some(sleeper) => sleeper.sleep(left, cancel),
            None => ThreadSleeper.sleep(left, cancel),
        };
        match slept {
            Slept::Elapsed if !cancel.is_cancelled() => Slept::Elapsed,
            Slept::Elapsed | Slept::Cancelled => Slept::Cancelled,
        }
    }
}

/// How the quick opening's first attempt ended.
enum QuickEnd<'s, T, E> {
    /// It succeeded: the call's result.
    Done(Success<T>),
    /// It failed and the core gave up at once: the call's error.
    GaveUp(RetryError<E>),
    /// The breaker refused it (with when it admits again, if it can tell).
    Refused(Option<Instant>),
    /// It returned an error the call goes on after; the driver takes the call
    /// over, with the permit.
    Failed(QuickFailure<E, PermitGuard<&'s dyn Breaker, CallClock<'s>>>),
}

/// Runs the quick opening's first attempt, `admitted` by the call's breaker (or
/// with none), and settles a failure the core gives up on at once; `erase`
/// turns its permit guard into the driver's kind.
fn quick_attempt<'s, B, T, E, F>(
    quick: QuickOpening,
    settings: &Settings<E>,
    clock: CallClock<'s>,
    admitted: Result<Option<PermitGuard<B, CallClock<'s>>>, Option<Instant>>,
    erase: impl FnOnce(PermitGuard<B, CallClock<'s>>) -> PermitGuard<&'s dyn Breaker, CallClock<'s>>,
    op: &mut F,
) -> QuickEnd<'s, T, E>
where
    B: Breaker,
    F: FnMut(&AttemptContext) -> Result<T, E>,
{
    let permit = match admitted {
        Ok(permit) => permit,
        Err(until) => return QuickEnd::Refused(until),
    };
    let context = AttemptContext {
        attempt: quick.attempt.number,
        deadline: None,
        replays_non_idempotent: quick.attempt.replays_non_idempotent,
        cancel: CancelToken::never(),
    };
    // A panic unwinds through the permit guard, which hands the breaker's
    // permit back as an abandoned attempt.
    match op(&context) {
        Ok(value) => {
            // A blocking attempt never waits: the call has read no clock, and
            // needs none to hand the permit back (the breaker reads the time
            // itself if it needs it).
            if let Some(permit) = permit {
                permit.finish(Event::Succeeded, None);
            }
            QuickEnd::Done(quick.success(value))
        }
        // The permit goes back through `dyn Breaker` (the failure's path stays
        // apart from the success's).
        Err(error) => match quick.failure(settings, &clock, error, None, permit.map(erase)) {
            Ok(error) => QuickEnd::GaveUp(error),
            Err(failed) => QuickEnd::Failed(failed),
        },
    }
}

/// The call's clock: the retrier's own, or the system clock (read directly, with
/// no allocation and no dynamic call, for the default).
#[derive(Clone, Copy)]
struct CallClock<'r>(Option<&'r dyn Clock>);

impl Clock for CallClock<'_> {
    fn now(&self) -> Instant {
        match self.0 {
            Some(clock) => clock.now(),
            None => SystemClock.now(),
        }
    }
}

impl<E> Clone for Retry<E> {
    fn clone(&self) -> Self {
        Retry {
            settings: self.settings.clone(),
            cancel: self.cancel.clone(),
            clock: self.clock.clone(),
            sleeper: self.sleeper.clone(),
        }
    }
}

impl<E> fmt::Debug for Retry<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("settings", &self.settings)
            .field("cancel", &self.cancel)
            .field("clock", &self.clock.is_some())
            .field("sleeper", &self.sleeper.is_some())
            .finish()
    }
}
