//! The blocking driver: [`Retry`] (a reusable, configured retrier), [`retry`] (the
//! one-line form), and what the operation and the hooks are told.

use core::fmt;
use core::hash::BuildHasher;
use core::time::Duration;
use std::hash::RandomState;
use std::sync::Arc;
use std::time::Instant;

use retry_core::{
    Action, Event, Failure, FailureKind, GiveUpReason, RetryMachine, RetryPolicy, SleepReason,
};

use crate::cancel::CancelToken;
use crate::clock::{Clock, Sleeper, Slept, SystemClock, ThreadSleeper};
use crate::shared::SharedBreaker;
use crate::shared::SharedBudget;
use retry_core::{RetryError, Success};

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

/// What the retry hook is told before a retry's delay starts.
#[derive(Debug)]
#[non_exhaustive]
pub struct RetryNotice<'a, E> {
    /// The number of the attempt that failed.
    pub attempt: u32,
    /// The number of the attempt that follows the delay (`attempt + 1`).
    pub next_attempt: u32,
    /// How long the driver will sleep before it; zero when the machine retries at
    /// once.
    pub delay: Duration,
    /// Where the delay came from; `None` when the machine retried at once
    /// without a sleep (the core does not say why a retry has no delay).
    pub reason: Option<SleepReason>,
    /// The error the failed attempt returned.
    pub error: &'a E,
    /// How the failure was reported to the machine: the classifier's verdict, or
    /// a retryable failure of kind [`FailureKind::Timeout`] when the attempt
    /// returned after its deadline.
    pub failure: Failure,
}

type Classifier<E> = dyn Fn(&E) -> Failure + Send + Sync;
type RetryHook<E> = dyn Fn(&RetryNotice<'_, E>) + Send + Sync;
type GiveUpHook<E> = dyn Fn(&RetryError<E>) + Send + Sync;

/// A configured retrier for operations failing with `E`: build it once, then
/// [`call`](Retry::call) it as often as needed, from any thread (it is
/// `Send + Sync`; wrap it in an `Arc` to share it).
///
/// Every decision (whether to retry, how long to wait, when to stop) is made by
/// [`retry_core::RetryMachine`]; `Retry` only runs the operation, reads the clock,
/// sleeps, watches the cancel token and passes shared-budget answers through.
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
///     .on_retry(|n| eprintln!("attempt {} failed ({}), retrying in {:?}", n.attempt, n.error, n.delay))
///     .clock(clock.clone())
///     .sleeper(sleeper.clone())
///     .call(|_| Err::<(), u16>(503))
///     .unwrap_err();
/// assert_eq!(err.code(), "retry.exhausted");
/// assert_eq!(sleeper.sleeps(), [1, 2, 4].map(Duration::from_secs));
/// assert_eq!(err.elapsed(), Duration::from_secs(7));
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
pub struct Retry<E> {
    policy: RetryPolicy,
    seed: Option<u64>,
    classifier: Option<Box<Classifier<E>>>,
    on_retry: Option<Box<RetryHook<E>>>,
    on_give_up: Option<Box<GiveUpHook<E>>>,
    cancel: Option<CancelToken>,
    /// `None`: the system clock (no allocation for the default).
    clock: Option<Arc<dyn Clock>>,
    /// `None`: the thread sleeper.
    sleeper: Option<Arc<dyn Sleeper>>,
    budget: Option<SharedBudget>,
    breaker: Option<SharedBreaker>,
}

impl<E> Retry<E> {
    /// A retrier following `policy`, with the defaults: every error retryable,
    /// [`SystemClock`] and [`ThreadSleeper`], a fresh OS-seeded jitter seed for
    /// every call, no hooks, no cancel token, no shared budget.
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Retry<E> {
        Retry {
            policy,
            seed: None,
            classifier: None,
            on_retry: None,
            on_give_up: None,
            cancel: None,
            clock: None,
            sleeper: None,
            budget: None,
            breaker: None,
        }
    }

    /// The policy every call follows.
    #[must_use]
    pub const fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Uses `seed` for the jitter of every call, making the delays reproducible.
    /// By default each call draws a fresh seed from OS-seeded randomness, so that
    /// many clients do not retry in lockstep.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Says, for each error, whether a retry may fix it, of what kind it is and
    /// whether the server asked for a delay (see [`Failure`] and the ready sets
    /// in `retry_core`). By default every error is [`Failure::retryable`].
    #[must_use]
    pub fn classify(mut self, classifier: impl Fn(&E) -> Failure + Send + Sync + 'static) -> Self {
        self.classifier = Some(Box::new(classifier));
        self
    }

    /// Calls `hook` after a failed attempt, when a retry has been decided and
    /// before its delay starts.
    #[must_use]
    pub fn on_retry(mut self, hook: impl Fn(&RetryNotice<'_, E>) + Send + Sync + 'static) -> Self {
        self.on_retry = Some(Box::new(hook));
        self
    }

    /// Calls `hook` with the error just before a call returns it.
    #[must_use]
    pub fn on_give_up(mut self, hook: impl Fn(&RetryError<E>) + Send + Sync + 'static) -> Self {
        self.on_give_up = Some(Box::new(hook));
        self
    }

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

    /// Shares `budget` with every other call holding a clone of it: each step of
    /// the call is reported to it, and each retry is withdrawn from it when the
    /// policy has `use_retry_budget(true)`. Without a budget, withdrawals are
    /// granted.
    #[must_use]
    pub fn budget(mut self, budget: SharedBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Asks `breaker` (shared with every clone) before every attempt and tells it
    /// every outcome. A rejected attempt does not run: the call gives up with
    /// `retry.circuit_open`, or waits for the breaker if the policy says
    /// `on_circuit_open(CircuitOpen::Wait)`.
    #[must_use]
    pub fn breaker(mut self, breaker: SharedBreaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// Runs `op` until it succeeds or the machine gives up.
    ///
    /// `op` is called once per attempt with an [`AttemptContext`]. The call's
    /// time origin is the moment `call` starts; the machine sees the time since
    /// then.
    ///
    /// # Errors
    /// [`RetryError`] with the machine's reason, the attempts, the elapsed time
    /// and the last error the operation returned.
    pub fn call<T, F>(&self, mut op: F) -> Result<Success<T>, RetryError<E>>
    where
        F: FnMut(&AttemptContext) -> Result<T, E>,
    {
        let seed = self.seed.unwrap_or_else(fresh_seed);
        let cancel = self.cancel.clone().unwrap_or(CancelToken::never());
        let mut machine = RetryMachine::new(&self.policy, seed);
        let start = self.now();
        let mut value: Option<T> = None;
        let mut last_error: Option<E> = None;
        // Set when an attempt failed, until the machine says what follows it.
        let mut failed: Option<(u32, Failure)> = None;

        let mut event = if cancel.is_cancelled() {
            Event::Cancelled
        } else {
            Event::Start
        };
        loop {
            // The call's start doubles as the moment of `Start`: one clock read
            // fewer on every call.
            let now = if event == Event::Start {
                start
            } else {
                self.now()
            };
            let elapsed = now.saturating_duration_since(start);
            let action = machine.poll(event, retry_core::Instant::from_duration(elapsed));
            let answer = match &self.budget {
                Some(budget) => budget.feed(&machine, event, action, now),
                None => None,
            };
            event = match action {
                Action::Attempt {
                    number,
                    deadline,
                    replays_non_idempotent,
                } => {
                    if let (Some((attempt, failure)), Some(error)) = (failed.take(), &last_error) {
                        self.notify_retry(attempt, Duration::ZERO, None, error, failure);
                    }
                    if cancel.is_cancelled() {
                        Event::Cancelled
                    } else {
                        let permit = match &self.breaker {
                            Some(breaker) => match breaker.admit(self.now(), start) {
                                Ok(permit) => Some(permit),
                                Err(rejected) => {
                                    event = rejected;
                                    continue;
                                }
                            },
                            None => None,
                        };
                        let context = AttemptContext {
                            attempt: number,
                            deadline: deadline.and_then(|d| start.checked_add(d.as_duration())),
                            replays_non_idempotent,
                            cancel: cancel.clone(),
                        };
                        let ran = match op(&context) {
                            Ok(done) => {
                                value = Some(done);
                                Event::Succeeded
                            }
                            Err(error) => {
                                let (event, failure) = self.report(&error, context.deadline);
                                last_error = Some(error);
                                failed = Some((number, failure));
                                event
                            }
                        };
                        if let (Some(breaker), Some(permit)) = (&self.breaker, permit) {
                            breaker.finish(permit, ran, self.now());
                        }
                        ran
                    }
                }
                Action::Sleep {
                    until,
                    delay,
                    reason,
                } => {
                    if let (Some((attempt, failure)), Some(error)) = (failed.take(), &last_error) {
                        self.notify_retry(attempt, delay, Some(reason), error, failure);
                    }
                    self.sleep_until(start, until, delay, &cancel)
                }
                Action::Withdraw { .. } => answer.unwrap_or(Event::Granted),
                Action::GiveUp(give_up) => {
                    let error =
                        RetryError::new(give_up.reason, give_up.attempts, elapsed, last_error)
                            .with_last_failure(give_up.last_failure);
                    if let Some(hook) = &self.on_give_up {
                        hook(&error);
                    }
                    return Err(error);
                }
                Action::Done { attempts } => match value.take() {
                    Some(value) => {
                        return Ok(Success {
                            value,
                            attempts,
                            elapsed,
                        })
                    }
                    // `Done` only ever answers `Succeeded`, which is only sent with a
                    // value in hand; were the core to break that, report a failed
                    // call rather than panic.
                    None => {
                        return Err(RetryError::new(
                            GiveUpReason::NotStarted,
                            attempts,
                            elapsed,
                            last_error,
                        )
                        .with_last_failure(machine.last_failure()))
                    }
                },
            };
        }
    }

    /// The event that reports a failed attempt, and the failure for the retry
    /// hook. An error at or after the attempt's deadline is a timeout.
    /// The call's clock.
    fn now(&self) -> Instant {
        match &self.clock {
            Some(clock) => clock.now(),
            None => SystemClock.now(),
        }
    }

    fn report(&self, error: &E, deadline: Option<Instant>) -> (Event, Failure) {
        if deadline.is_some_and(|deadline| self.now() >= deadline) {
            let failure = Failure::retryable().with_kind(FailureKind::Timeout);
            return (Event::TimedOut, failure);
        }
        let failure = match &self.classifier {
            Some(classify) => classify(error),
            None => Failure::retryable(),
        };
        (Event::Failed(failure), failure)
    }

    /// Sleeps until `until` (core time since `start`), unless cancelled; returns
    /// the event to send. Cancellation is checked before the sleep and right after
    /// it, so no attempt follows a cancel that arrived during the delay.
    fn sleep_until(
        &self,
        start: Instant,
        until: retry_core::Instant,
        delay: Duration,
        cancel: &CancelToken,
    ) -> Event {
        if cancel.is_cancelled() {
            return Event::Cancelled;
        }
        let left = start
            .checked_add(until.as_duration())
            .map_or(delay, |end| end.saturating_duration_since(self.now()));
        let slept = match &self.sleeper {
            Some(sleeper) => sleeper.sleep(left, cancel),
            None => ThreadSleeper.sleep(left, cancel),
        };
        match slept {
            Slept::Elapsed if !cancel.is_cancelled() => Event::Woke,
            Slept::Elapsed | Slept::Cancelled => Event::Cancelled,
        }
    }

    fn notify_retry(
        &self,
        attempt: u32,
        delay: Duration,
        reason: Option<SleepReason>,
        error: &E,
        failure: Failure,
    ) {
        if let Some(hook) = &self.on_retry {
            hook(&RetryNotice {
                attempt,
                next_attempt: attempt.saturating_add(1),
                delay,
                reason,
                error,
                failure,
            });
        }
    }
}

impl<E> fmt::Debug for Retry<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("policy", &self.policy)
            .field("seed", &self.seed)
            .field("classifier", &self.classifier.is_some())
            .field("on_retry", &self.on_retry.is_some())
            .field("on_give_up", &self.on_give_up.is_some())
            .field("cancel", &self.cancel)
            .field("budget", &self.budget)
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

/// A jitter seed from the OS-seeded keys of [`RandomState`], mixed with a
/// per-process counter so that two calls in a row never share one.
fn fresh_seed() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed))
}
