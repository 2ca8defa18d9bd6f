//! The driver: [`Retry`] (a configured retrier), [`retry`] (the one-line form),
//! and what the operation and the hooks are told.

use core::future::Future;
use core::marker::PhantomData;
use core::time::Duration;

use embassy_futures::select::{select, Either};
use embassy_sync::blocking_mutex::raw::RawMutex;
use embassy_time::{with_deadline, Instant as Tick, TimeoutError, Timer};
use retry_core::{
    attempt_timed_out, Action, Event, Failure, GiveUpReason, RetryError, RetryMachine, RetryPolicy,
    SleepReason, Step, Success,
};

use crate::cancel::{CancelSignal, Cancellation, Waiting};
use crate::shared::{Breaker, Budget, Gate, PermitGuard, SharedBreaker, SharedBudget};
use crate::time::{since, tick_at, ticks_duration};

/// Retries `op` under `policy`, its jitter keyed on `seed`, with every error
/// retryable and no hooks, breaker, budget or cancel signal.
///
/// `op` is called once per attempt with an [`AttemptContext`]; it may be an async
/// closure borrowing what it captures (a bus, a driver) mutably across its
/// awaits. The seed comes from the caller: a hardware RNG value, a device
/// serial number, anything that differs between devices so their retries do not
/// fall into step. See [`Retry::call`].
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Backoff, Jitter, RetryPolicy};
///
/// # embassy_futures::block_on(async {
/// let policy = RetryPolicy::builder()
///     .max_attempts(3)
///     .backoff(Backoff::constant(Duration::ZERO)) // retry at once: no clock needed here
///     .jitter(Jitter::None)
///     .build()?;
/// let mut reads = 0;
/// let done = retry_embassy::retry(policy, 0x5eed, async |ctx| {
///     reads += 1;
///     if ctx.attempt() < 3 { Err("nack") } else { Ok(21) }
/// })
/// .await
/// .map_err(|e| e.code())?;
/// assert_eq!((done.value, done.attempts, reads), (21, 3, 3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// # Errors
/// A [`RetryError`] when the call gives up, as [`Retry::call`] says.
pub async fn retry<T, E, F>(
    policy: RetryPolicy,
    seed: u64,
    op: F,
) -> Result<Success<T>, RetryError<E>>
where
    F: AsyncFnMut(AttemptContext) -> Result<T, E>,
{
    Retry::new(policy, seed).call(op).await
}

/// What an attempt is told about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptContext {
    attempt: u32,
    deadline: Option<Tick>,
    replays_non_idempotent: bool,
}

impl AttemptContext {
    /// The attempt's number; the first is 1.
    #[must_use]
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// How many retries came before this attempt (`attempt - 1`).
    #[must_use]
    pub const fn retries(&self) -> u32 {
        self.attempt.saturating_sub(1)
    }

    /// Whether this is the first attempt.
    #[must_use]
    pub const fn is_first(&self) -> bool {
        self.attempt == 1
    }

    /// When this attempt times out, if the policy gives attempts a deadline. The
    /// driver enforces it (`embassy_time::with_deadline`), and follows the core's
    /// rule for a tie ([`retry_core::attempt_timed_out`]): an outcome ready at
    /// the deadline is a timeout. An operation may also pass it on to a
    /// peripheral.
    #[must_use]
    pub const fn deadline(&self) -> Option<Tick> {
        self.deadline
    }

    /// The operation is marked non-idempotent and this attempt repeats it: it may
    /// take effect twice.
    #[must_use]
    pub const fn replays_non_idempotent(&self) -> bool {
        self.replays_non_idempotent
    }
}

/// What the [`Retry::on_retry`] hook is told before a retry.
#[derive(Debug)]
#[non_exhaustive]
pub struct RetryNotice<'a, E> {
    /// The attempt that failed.
    pub attempt: u32,
    /// The attempt that follows (`attempt + 1`).
    pub next_attempt: u32,
    /// The sleep before it (zero when it starts at once).
    pub delay: Duration,
    /// Where the delay came from (`None` when there is no sleep).
    pub reason: Option<SleepReason>,
    /// The error the failed attempt returned (`None` when it timed out).
    pub error: Option<&'a E>,
    /// How the classifier saw the error (`None` when the attempt timed out).
    pub failure: Option<Failure>,
}

impl<E> RetryNotice<'_, E> {
    /// Whether the failed attempt ran past its deadline.
    #[must_use]
    pub const fn timed_out(&self) -> bool {
        self.error.is_none()
    }
}

/// The default classifier: every error is retryable.
fn every_error_retryable<E>(_: &E) -> Failure {
    Failure::retryable()
}

/// The default hooks: nothing to tell.
fn no_retry_hook<E>(_: &RetryNotice<'_, E>) {}
fn no_give_up_hook<E>(_: &RetryError<E>) {}
fn no_step_hook(_: &Step) {}

/// A configured retrier: a policy and seed, how to classify errors, whom to
/// tell, what cancels a call, and the shared breaker and budget to consult.
///
/// The classifier and the hooks are type parameters: plain `fn` items or
/// closures, called directly (nothing is boxed; there is no heap). The breaker,
/// the budget and the cancel signal are borrowed for `'a`, usually `'static`.
/// Their mutex must be `Sync` (`CriticalSectionRawMutex` from any priority,
/// `ThreadModeRawMutex` from thread mode only), so a call's future is `Send`
/// when its operation and hooks are, and can run on an interrupt executor.
///
/// ```
/// use core::time::Duration;
/// use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
/// use retry_core::{Failure, RetryPolicy};
/// use retry_embassy::{CancelSignal, Retry, RetryNotice};
///
/// #[derive(Debug)]
/// enum SensorError { Nack, NotPresent }
///
/// fn classify(e: &SensorError) -> Failure {
///     match e {
///         SensorError::Nack => Failure::retryable(),
///         SensorError::NotPresent => Failure::permanent(),
///     }
/// }
///
/// fn log_retry(n: &RetryNotice<'_, SensorError>) {
///     // defmt::warn!(...) on a board
///     let _ = (n.attempt, n.delay);
/// }
///
/// static STOP: CancelSignal<CriticalSectionRawMutex> = CancelSignal::new();
///
/// let retry = Retry::new(RetryPolicy::builder().max_attempts(4).build()?, 42)
///     .classify(classify)
///     .on_retry(log_retry)
///     .cancel_on(&STOP);
/// # let _ = retry;
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
pub struct Retry<
    'a,
    E,
    C = fn(&E) -> Failure,
    R = fn(&RetryNotice<'_, E>),
    G = fn(&RetryError<E>),
    S = fn(&Step),
> {
    policy: RetryPolicy,
    seed: u64,
    classify: C,
    on_retry: R,
    on_give_up: G,
    on_step: S,
    cancel: Option<&'a (dyn Cancellation + Sync)>,
    breaker: Option<&'a (dyn Breaker + Sync)>,
    budget: Option<&'a (dyn Budget + Sync)>,
    error: PhantomData<fn() -> E>,
}

impl<'a, E> Retry<'a, E> {
    /// A retrier following `policy`, its jitter keyed on `seed`, with every error
    /// retryable and no hooks.
    #[must_use]
    pub fn new(policy: RetryPolicy, seed: u64) -> Self {
        Retry {
            policy,
            seed,
            classify: every_error_retryable::<E>,
            on_retry: no_retry_hook::<E>,
            on_give_up: no_give_up_hook::<E>,
            on_step: no_step_hook,
            cancel: None,
            breaker: None,
            budget: None,
            error: PhantomData,
        }
    }
}

impl<'a, E, C, R, G, S> Retry<'a, E, C, R, G, S> {
    /// The policy.
    #[must_use]
    pub const fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The jitter seed of [`Retry::call`].
    #[must_use]
    pub const fn seed_value(&self) -> u64 {
        self.seed
    }

    /// Replaces the jitter seed.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How each error is judged: retryable, permanent, or retryable with a
    /// hint (default: every error retryable).
    #[must_use]
    pub fn classify<C2>(self, classify: C2) -> Retry<'a, E, C2, R, G, S>
    where
        C2: Fn(&E) -> Failure,
    {
        Retry {
            policy: self.policy,
            seed: self.seed,
            classify,
            on_retry: self.on_retry,
            on_give_up: self.on_give_up,
            on_step: self.on_step,
            cancel: self.cancel,
            breaker: self.breaker,
            budget: self.budget,
            error: PhantomData,
        }
    }

    /// Called before every retry, with the failed attempt, its error and the
    /// delay.
    #[must_use]
    pub fn on_retry<R2>(self, on_retry: R2) -> Retry<'a, E, C, R2, G, S>
    where
        R2: Fn(&RetryNotice<'_, E>),
    {
        Retry {
            policy: self.policy,
            seed: self.seed,
            classify: self.classify,
            on_retry,
            on_give_up: self.on_give_up,
            on_step: self.on_step,
            cancel: self.cancel,
            breaker: self.breaker,
            budget: self.budget,
            error: PhantomData,
        }
    }

    /// Called once when a call gives up, with the error it is about to return.
    #[must_use]
    pub fn on_give_up<G2>(self, on_give_up: G2) -> Retry<'a, E, C, R, G2, S>
    where
        G2: Fn(&RetryError<E>),
    {
        Retry {
            policy: self.policy,
            seed: self.seed,
            classify: self.classify,
            on_retry: self.on_retry,
            on_give_up,
            on_step: self.on_step,
            cancel: self.cancel,
            breaker: self.breaker,
            budget: self.budget,
            error: PhantomData,
        }
    }

    /// Called with every step the retry machine takes: the event the driver
    /// sent, the action the machine answered, and when (time since the call
    /// began). The same rows as the core's simulator gives, for a log or a test.
    #[must_use]
    pub fn on_step<S2>(self, on_step: S2) -> Retry<'a, E, C, R, G, S2>
    where
        S2: Fn(&Step),
    {
        Retry {
            policy: self.policy,
            seed: self.seed,
            classify: self.classify,
            on_retry: self.on_retry,
            on_give_up: self.on_give_up,
            on_step,
            cancel: self.cancel,
            breaker: self.breaker,
            budget: self.budget,
            error: PhantomData,
        }
    }

    /// Cancels calls when `signal` is cancelled: a sleep ends at once, the
    /// attempt in flight is dropped, and no attempt starts afterwards.
    #[must_use]
    pub fn cancel_on<M, const WAITERS: usize>(
        mut self,
        signal: &'a CancelSignal<M, WAITERS>,
    ) -> Self
    where
        M: RawMutex + Sync,
    {
        self.cancel = Some(signal);
        self
    }

    /// Asks a shared circuit breaker before every attempt and tells it every
    /// outcome. A rejected attempt never runs; the policy's
    /// [`on_circuit_open`](retry_core::RetryPolicyBuilder::on_circuit_open) says
    /// whether the call gives up or waits.
    #[must_use]
    pub fn breaker<M, const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
        mut self,
        breaker: &'a SharedBreaker<M, WORDS, BUCKETS, DURATIONS>,
    ) -> Self
    where
        M: RawMutex + Sync,
    {
        self.breaker = Some(breaker);
        self
    }

    /// Tells a shared retry budget about every call and, when the policy says
    /// `use_retry_budget(true)`, asks it before every retry.
    #[must_use]
    pub fn budget<M>(mut self, budget: &'a SharedBudget<M>) -> Self
    where
        M: RawMutex + Sync,
    {
        self.budget = Some(budget);
        self
    }
}

impl<'a, E, C, R, G, S> Retry<'a, E, C, R, G, S>
where
    C: Fn(&E) -> Failure,
    R: Fn(&RetryNotice<'_, E>),
    G: Fn(&RetryError<E>),
    S: Fn(&Step),
{
    /// Runs `op` until it succeeds or the policy gives up, its jitter keyed on
    /// the retrier's seed.
    ///
    /// `op` is called once per attempt with the attempt's [`AttemptContext`] and
    /// its future is awaited, bounded by the attempt's deadline
    /// (`embassy_time::with_deadline`) and the cancel signal. Between attempts
    /// the call sleeps on `embassy_time::Timer::at`; a retry with no delay
    /// first hands the executor back (`embassy_futures::yield_now`), so a
    /// retry loop never keeps other tasks from running. Nothing is spawned and
    /// nothing allocated: the call is one future, and dropping it stops the call
    /// where it is, drops the attempt in flight and releases any breaker permit.
    ///
    /// # Errors
    /// A [`RetryError`] carrying the core's reason (exhausted, permanent, budget,
    /// timed out, cancelled, retry budget, circuit open), the number of attempts,
    /// the elapsed time and the last error.
    pub fn call<'s, T, F>(
        &'s self,
        op: F,
    ) -> impl Future<Output = Result<Success<T>, RetryError<E>>> + use<'s, 'a, E, C, R, G, S, T, F>
    where
        F: AsyncFnMut(AttemptContext) -> Result<T, E>,
    {
        self.call_seeded(self.seed, op)
    }

    /// Like [`Retry::call`], with this call's jitter keyed on `seed` (a fresh
    /// hardware RNG value per call, say).
    ///
    /// # Errors
    /// As [`Retry::call`].
    pub async fn call_seeded<T, F>(&self, seed: u64, mut op: F) -> Result<Success<T>, RetryError<E>>
    where
        F: AsyncFnMut(AttemptContext) -> Result<T, E>,
    {
        // The one async state machine of the crate: the waits below are embassy's
        // own futures (`select`, `with_deadline`, `Timer`) and this crate's
        // `Waiting`, all written by hand.
        let cancel = self.cancel;
        let mut driver = Driver::new(self, seed);
        let mut event = driver.first_event();
        // Whether the call has waited on a timer since the last attempt ended.
        let mut slept = false;
        loop {
            match driver.poll(event) {
                Next::Attempt(Pending {
                    number,
                    context,
                    permit,
                }) => {
                    if number > 1 && !slept {
                        // A retry with no delay (the core starts it at once):
                        // hand the executor back first, so that a retry loop
                        // whose operation fails without awaiting never keeps
                        // the other tasks from running.
                        embassy_futures::yield_now().await;
                    }
                    slept = false;
                    // The cancel signal is polled first, so it wins a tie.
                    let ran = match context.deadline {
                        Some(deadline) => {
                            match select(cancelled(cancel), with_deadline(deadline, op(context)))
                                .await
                            {
                                Either::First(()) => Ran::Cancelled,
                                Either::Second(Ok(result)) => Ran::Finished(result),
                                Either::Second(Err(TimeoutError)) => Ran::TimedOut,
                            }
                        }
                        None => match select(cancelled(cancel), op(context)).await {
                            Either::First(()) => Ran::Cancelled,
                            Either::Second(result) => Ran::Finished(result),
                        },
                    };
                    event = driver.ended(number, permit, ran);
                }
                Next::Sleep(wake) => {
                    // (embassy's timer returns to the executor at least once,
                    // even when already due.)
                    slept = true;
                    event = match select(cancelled(cancel), Timer::at(wake)).await {
                        Either::First(()) => Event::Cancelled,
                        Either::Second(()) => Event::Woke,
                    };
                }
                Next::Finished(result) => return result,
            }
        }
    }
}

impl<E, C, R, G, S> core::fmt::Debug for Retry<'_, E, C, R, G, S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Retry")
            .field("policy", &self.policy)
            .field("seed", &self.seed)
            .field("cancel", &self.cancel.is_some())
            .field("breaker", &self.breaker.is_some())
            .field("budget", &self.budget.is_some())
            .finish_non_exhaustive()
    }
}

/// One call's bookkeeping around its [`RetryMachine`]: everything but the two
/// awaits (the attempt and the sleep), which [`Retry::call_seeded`] does.
struct Driver<'r, 'a, T, E, C, R, G, S> {
    retry: &'r Retry<'a, E, C, R, G, S>,
    machine: RetryMachine,
    /// The call's origin: core instants are the time since then.
    start: Tick,
    value: Option<T>,
    last_error: Option<E>,
    /// The attempt that returned `last_error`.
    last_error_attempt: u32,
    /// The failed attempt whose retry has not been announced to the hook yet.
    unannounced: Option<(u32, Option<Failure>)>,
}

/// An attempt to run.
struct Pending<'a> {
    number: u32,
    context: AttemptContext,
    /// The breaker's permit for it, if a breaker guards the call.
    permit: Option<PermitGuard<'a>>,
}

/// What the call does next.
enum Next<'a, T, E> {
    Attempt(Pending<'a>),
    Sleep(Tick),
    Finished(Result<Success<T>, RetryError<E>>),
}

impl<'r, 'a, T, E, C, R, G, S> Driver<'r, 'a, T, E, C, R, G, S>
where
    C: Fn(&E) -> Failure,
    R: Fn(&RetryNotice<'_, E>),
    G: Fn(&RetryError<E>),
    S: Fn(&Step),
{
    fn new(retry: &'r Retry<'a, E, C, R, G, S>, seed: u64) -> Self {
        Driver {
            retry,
            machine: RetryMachine::new(&retry.policy, seed),
            start: Tick::now(),
            value: None,
            last_error: None,
            last_error_attempt: 0,
            unannounced: None,
        }
    }

    fn first_event(&self) -> Event {
        if is_cancelled(self.retry.cancel) {
            Event::Cancelled
        } else {
            Event::Start
        }
    }

    /// Tells the machine `event` and carries out its answers until one needs an
    /// await (an attempt or a sleep) or the call is over.
    fn poll(&mut self, mut event: Event) -> Next<'a, T, E> {
        let retry = self.retry;
        loop {
            // The call's start doubles as the moment of `Start`.
            let tick = if event == Event::Start {
                self.start
            } else {
                Tick::now()
            };
            let now = since(self.start, tick);
            let action = self.machine.poll(event, now);
            (retry.on_step)(&Step {
                at: now,
                event,
                action,
            });
            let answer = retry
                .budget
                .and_then(|budget| budget.feed(&self.machine, event, action));
            event = match action {
                Action::Attempt {
                    number,
                    deadline,
                    replays_non_idempotent,
                } => {
                    self.announce(Duration::ZERO, None);
                    if is_cancelled(retry.cancel) {
                        Event::Cancelled
                    } else {
                        let permit = match retry.breaker {
                            None => None,
                            Some(breaker) => match breaker.request() {
                                Gate::Admitted(permit, at) => {
                                    Some(PermitGuard::new(breaker, permit, at))
                                }
                                Gate::Rejected { until } => {
                                    event = Event::Rejected {
                                        until: until.map(|u| since(self.start, u)),
                                    };
                                    continue;
                                }
                            },
                        };
                        let start = self.start;
                        return Next::Attempt(Pending {
                            number,
                            context: AttemptContext {
                                attempt: number,
                                deadline: deadline.map(|d| tick_at(start, d)),
                                replays_non_idempotent,
                            },
                            permit,
                        });
                    }
                }
                Action::Sleep {
                    until,
                    delay,
                    reason,
                } => {
                    self.announce(delay, Some(reason));
                    return Next::Sleep(tick_at(self.start, until));
                }
                // Without a shared budget nobody can refuse: the retry goes on.
                Action::Withdraw { .. } => answer.unwrap_or(Event::Granted),
                Action::GiveUp(give_up) => {
                    let error = RetryError::new(
                        give_up.reason,
                        give_up.attempts,
                        self.elapsed(tick),
                        self.last_error.take(),
                    )
                    .with_last_failure(give_up.last_failure)
                    .with_last_error_attempt(Some(self.last_error_attempt));
                    (retry.on_give_up)(&error);
                    return Next::Finished(Err(error));
                }
                Action::Done { attempts } => {
                    let elapsed = self.elapsed(tick);
                    return Next::Finished(match self.value.take() {
                        // Embassy's tick counter is read at every step anyway.
                        Some(value) => Ok(Success {
                            value,
                            attempts,
                            elapsed: Some(elapsed),
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
                        .with_last_error_attempt(Some(self.last_error_attempt))),
                    });
                }
            };
        }
    }

    fn elapsed(&self, now: Tick) -> Duration {
        ticks_duration(now.as_ticks().saturating_sub(self.start.as_ticks()))
    }

    /// Attempt `number` ended as `ran`: the event to tell the machine. The breaker
    /// hears the outcome first.
    fn ended(&mut self, number: u32, permit: Option<PermitGuard<'_>>, ran: Ran<T, E>) -> Event {
        // The core's deadline rule: an outcome at or after the deadline is a
        // timeout (`with_deadline` hands back one that is ready at the deadline).
        let late = attempt_timed_out(self.machine.next_deadline(), since(self.start, Tick::now()));
        let event = match ran {
            Ran::Finished(Ok(value)) if !late => {
                self.value = Some(value);
                Event::Succeeded
            }
            Ran::Finished(Err(error)) if !late => {
                let failure = (self.retry.classify)(&error);
                self.last_error = Some(error);
                self.last_error_attempt = number;
                self.unannounced = Some((number, Some(failure)));
                Event::Failed(failure)
            }
            Ran::Finished(result) => {
                if let Err(error) = result {
                    self.last_error = Some(error);
                    self.last_error_attempt = number;
                }
                self.unannounced = Some((number, None));
                Event::TimedOut
            }
            Ran::TimedOut => {
                self.unannounced = Some((number, None));
                Event::TimedOut
            }
            Ran::Cancelled => Event::Cancelled,
        };
        if let Some(permit) = permit {
            permit.finish(event);
        }
        event
    }

    /// Tells the retry hook about the failed attempt before its retry.
    fn announce(&mut self, delay: Duration, reason: Option<SleepReason>) {
        let Some((attempt, failure)) = self.unannounced.take() else {
            return;
        };
        (self.retry.on_retry)(&RetryNotice {
            attempt,
            next_attempt: attempt.saturating_add(1),
            delay,
            reason,
            // A timed-out attempt has no error of its own.
            error: failure.and(self.last_error.as_ref()),
            failure,
        });
    }
}

/// How one attempt ended.
enum Ran<T, E> {
    Finished(Result<T, E>),
    TimedOut,
    Cancelled,
}

fn is_cancelled(cancel: Option<&(dyn Cancellation + Sync)>) -> bool {
    cancel.is_some_and(Cancellation::is_cancelled)
}

/// Completes when `cancel` is cancelled; never without a signal.
fn cancelled<'a>(
    cancel: Option<&'a (dyn Cancellation + Sync + 'a)>,
) -> Waiting<'a, dyn Cancellation + Sync + 'a> {
    Waiting::on(cancel)
}
