//! The async driver: [`Retry`] (a configured retrier that can be cloned and shared),
//! [`retry`] (the one-line form), and what the operation and the hooks are told.

use core::fmt;
use core::future::Future;
use core::hash::BuildHasher;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::hash::RandomState;
use std::sync::Arc;

use retry_core::{Action, Event, Failure, GiveUpReason, RetryMachine, RetryPolicy, SleepReason};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::observe;
use crate::shared::{Breaker, Gate, PermitGuard, SharedBreaker, SharedBudget};
use retry_core::{RetryError, Success};

/// Retries `op` under `policy` with the defaults: every error retryable, a seed
/// drawn from the OS, no hooks, no cancellation token.
///
/// `op` is called once per attempt with an [`AttemptContext`] and returns the
/// attempt's future. See [`Retry::call`], and [`Retry::call_borrowing`] for an
/// operation whose future borrows what the closure captures.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Jitter, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::builder()
///     .max_attempts(3)
///     .jitter(Jitter::None)
///     .backoff(retry_core::Backoff::constant(Duration::from_millis(1)))
///     .build()?;
/// let done = retry_tokio::retry(policy, |ctx| async move {
///     if ctx.attempt() < 3 { Err("not yet") } else { Ok(ctx.attempt()) }
/// })
/// .await
/// .map_err(|e| e.to_string())?;
/// assert_eq!((done.value, done.attempts), (3, 3));
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// A [`RetryError`] when the call gives up, as [`Retry::call`] says.
pub async fn retry<T, E, F, Fut>(policy: RetryPolicy, op: F) -> Result<Success<T>, RetryError<E>>
where
    F: FnMut(AttemptContext) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    Retry::new(policy).call(op).await
}

/// What an attempt is told about itself.
#[derive(Clone, Debug)]
pub struct AttemptContext {
    attempt: u32,
    deadline: Option<Instant>,
    replays_non_idempotent: bool,
    cancel: Option<CancellationToken>,
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
    /// driver enforces it; an operation may also pass it on (to a server, say).
    #[must_use]
    pub const fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The operation is marked non-idempotent and this attempt repeats it (SPEC 6):
    /// it may take effect twice.
    #[must_use]
    pub const fn replays_non_idempotent(&self) -> bool {
        self.replays_non_idempotent
    }

    /// The call's cancellation token, if it has one.
    #[must_use]
    pub const fn cancel_token(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
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

type Classifier<E> = dyn Fn(&E) -> Failure + Send + Sync;
type RetryHook<E> = dyn Fn(&RetryNotice<'_, E>) + Send + Sync;
type GiveUpHook<E> = dyn Fn(&RetryError<E>) + Send + Sync;

/// A configured retrier: a policy plus how to classify errors, whom to tell, how
/// to cancel, and the shared budget and breaker to consult. Cheap to clone (the
/// hooks are behind `Arc`s), so one can serve many tasks.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Failure, RetryPolicy};
/// use retry_tokio::Retry;
///
/// #[derive(Debug)]
/// enum Error { Busy, NotFound }
///
/// let retry = Retry::new(RetryPolicy::builder().max_attempts(4).build()?)
///     .seed(7)
///     .classify(|e: &Error| match e {
///         Error::Busy => Failure::retryable(),
///         Error::NotFound => Failure::permanent(),
///     })
///     .on_retry(|n| eprintln!("attempt {} failed, next in {:?}", n.attempt, n.delay));
/// # let _ = retry;
/// # Ok::<(), retry_core::PolicyError>(())
/// ```
pub struct Retry<E> {
    policy: RetryPolicy,
    seed: Option<u64>,
    classifier: Option<Arc<Classifier<E>>>,
    on_retry: Option<Arc<RetryHook<E>>>,
    on_give_up: Option<Arc<GiveUpHook<E>>>,
    cancel: Option<CancellationToken>,
    budget: Option<SharedBudget>,
    breaker: Option<Arc<dyn Breaker>>,
}

impl<E> Clone for Retry<E> {
    fn clone(&self) -> Self {
        Retry {
            policy: self.policy,
            seed: self.seed,
            classifier: self.classifier.clone(),
            on_retry: self.on_retry.clone(),
            on_give_up: self.on_give_up.clone(),
            cancel: self.cancel.clone(),
            budget: self.budget.clone(),
            breaker: self.breaker.clone(),
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
            .field("breaker", &self.breaker.is_some())
            .finish()
    }
}

impl<E> Retry<E> {
    /// A retrier following `policy`, with every error retryable and a fresh OS
    /// seed per call.
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Retry<E> {
        Retry {
            policy,
            seed: None,
            classifier: None,
            on_retry: None,
            on_give_up: None,
            cancel: None,
            budget: None,
            breaker: None,
        }
    }

    /// The policy.
    #[must_use]
    pub const fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Fixes the jitter seed, for reproducible delays (default: drawn from the OS
    /// for every call).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// How each error is judged: retryable, permanent, or retryable with a server
    /// hint (default: every error retryable).
    #[must_use]
    pub fn classify(mut self, classifier: impl Fn(&E) -> Failure + Send + Sync + 'static) -> Self {
        self.classifier = Some(Arc::new(classifier));
        self
    }

    /// Called before every retry, with the failed attempt, its error and the delay.
    #[must_use]
    pub fn on_retry(mut self, hook: impl Fn(&RetryNotice<'_, E>) + Send + Sync + 'static) -> Self {
        self.on_retry = Some(Arc::new(hook));
        self
    }

    /// Called once when a call gives up, with the error it is about to return.
    #[must_use]
    pub fn on_give_up(mut self, hook: impl Fn(&RetryError<E>) + Send + Sync + 'static) -> Self {
        self.on_give_up = Some(Arc::new(hook));
        self
    }

    /// Cancels calls when `token` is cancelled: a sleep ends at once, the attempt
    /// in flight is dropped, and no attempt starts afterwards (SPEC 7).
    #[must_use]
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Tells a shared retry budget about every call and, when the policy says
    /// `use_retry_budget(true)`, asks it before every retry.
    #[must_use]
    pub fn budget(mut self, budget: SharedBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Asks a shared circuit breaker before every attempt and tells it every
    /// outcome. A rejected attempt never runs; the policy's
    /// [`on_circuit_open`](retry_core::RetryPolicyBuilder::on_circuit_open) says
    /// whether the call gives up or waits.
    #[must_use]
    pub fn breaker<const WORDS: usize, const BUCKETS: usize>(
        mut self,
        breaker: SharedBreaker<WORDS, BUCKETS>,
    ) -> Self {
        self.breaker = Some(Arc::new(breaker));
        self
    }

    /// Runs `op` until it succeeds or the policy gives up.
    ///
    /// `op` is called once per attempt with the attempt's [`AttemptContext`] and
    /// returns that attempt's future. The closure may capture `&mut` state and
    /// update it between attempts (when it is called); for a future that itself
    /// borrows the closure's captures, use [`Retry::call_borrowing`].
    ///
    /// Nothing is spawned: dropping the returned future stops the call where it
    /// is, drops the attempt in flight and releases any breaker permit.
    ///
    /// # Errors
    /// A [`RetryError`] carrying the core's reason (exhausted, permanent, budget,
    /// timed out, cancelled, retry budget, circuit open), the number of attempts,
    /// the elapsed time and the last error.
    pub async fn call<T, F, Fut>(&self, mut op: F) -> Result<Success<T>, RetryError<E>>
    where
        F: FnMut(AttemptContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let cancel = self.cancel.as_ref();
        let call = async {
            let mut driver = Driver::new(self);
            let mut event = driver.first_event();
            loop {
                match driver.poll(event) {
                    Step::Attempt(Pending {
                        number,
                        context,
                        permit,
                    }) => {
                        let deadline = context.deadline;
                        let ran = run_attempt(op(context), deadline, cancel).await;
                        event = driver.ended(number, permit, ran);
                    }
                    Step::Sleep(wake) => event = sleep_until(wake, cancel).await,
                    Step::Finished(result) => return result,
                }
            }
        };
        self.instrument(call).await
    }

    /// Like [`Retry::call`], for an async closure whose future borrows the
    /// closure's captures, so state outside it, even a `&mut`, is read and
    /// updated inside every attempt:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use retry_core::RetryPolicy;
    /// use retry_tokio::Retry;
    ///
    /// let mut seen = Vec::new();
    /// let retry = Retry::new(RetryPolicy::builder().max_attempts(3).build().unwrap());
    /// let result = retry
    ///     .call_borrowing(async |ctx| {
    ///         seen.push(ctx.attempt());
    ///         tokio::task::yield_now().await; // the borrow lives across an await
    ///         if seen.len() < 3 { Err("again") } else { Ok(seen.len()) }
    ///     })
    ///     .await;
    /// assert_eq!(result.map(|s| s.value), Ok(3));
    /// assert_eq!(seen, [1, 2, 3]);
    /// # }
    /// ```
    ///
    /// Nothing is boxed. Whether the call's future is `Send` is up to the
    /// compiler's reasoning about async closures, which today often fails inside
    /// `tokio::spawn` ("implementation of `Send` is not general enough"): run it
    /// on the task that owns the state, or inside a spawned task use
    /// [`Retry::call`] with state the closure owns or locks.
    ///
    /// # Errors
    /// As [`Retry::call`].
    pub async fn call_borrowing<T, F>(&self, mut op: F) -> Result<Success<T>, RetryError<E>>
    where
        F: AsyncFnMut(AttemptContext) -> Result<T, E>,
    {
        let cancel = self.cancel.as_ref();
        let call = async {
            let mut driver = Driver::new(self);
            let mut event = driver.first_event();
            loop {
                match driver.poll(event) {
                    Step::Attempt(Pending {
                        number,
                        context,
                        permit,
                    }) => {
                        let deadline = context.deadline;
                        let ran = run_attempt(op(context), deadline, cancel).await;
                        event = driver.ended(number, permit, ran);
                    }
                    Step::Sleep(wake) => event = sleep_until(wake, cancel).await,
                    Step::Finished(result) => return result,
                }
            }
        };
        self.instrument(call).await
    }

    #[cfg(feature = "tracing")]
    fn instrument<X: Future>(&self, call: X) -> tracing::instrument::Instrumented<X> {
        use tracing::Instrument as _;
        call.instrument(tracing::info_span!(
            "retry",
            max_attempts = self.policy.max_attempts(),
            curve = self.policy.backoff().name()
        ))
    }

    #[cfg(not(feature = "tracing"))]
    fn instrument<X: Future>(&self, call: X) -> X {
        call
    }

    fn judge(&self, error: &E) -> Failure {
        match &self.classifier {
            Some(classify) => classify(error),
            None => Failure::retryable(),
        }
    }
}

/// One call's bookkeeping around its [`RetryMachine`]: everything but the two
/// awaits (the attempt and the sleep), which the `call` methods do.
struct Driver<'r, T, E> {
    retry: &'r Retry<E>,
    machine: RetryMachine,
    /// The call's origin: core instants are the time since then.
    start: Instant,
    value: Option<T>,
    last_error: Option<E>,
    /// The failed attempt whose retry has not been announced to the hook yet.
    unannounced: Option<(u32, Option<Failure>)>,
    /// The attempt whose `outcome` label waits for the machine's answer.
    unlabelled: Option<(u32, Event)>,
}

/// An attempt to run.
struct Pending {
    number: u32,
    context: AttemptContext,
    /// The breaker's permit for it, if a breaker guards the call.
    permit: Option<PermitGuard>,
}

/// What the `call` methods do next.
enum Step<T, E> {
    Attempt(Pending),
    Sleep(Instant),
    Finished(Result<Success<T>, RetryError<E>>),
}

impl<'r, T, E> Driver<'r, T, E> {
    fn new(retry: &'r Retry<E>) -> Self {
        let seed = retry.seed.unwrap_or_else(fresh_seed);
        Driver {
            retry,
            machine: RetryMachine::new(&retry.policy, seed),
            start: Instant::now(),
            value: None,
            last_error: None,
            unannounced: None,
            unlabelled: None,
        }
    }

    fn since_start(&self, t: Instant) -> retry_core::Instant {
        retry_core::Instant::from_duration(t.saturating_duration_since(self.start))
    }

    fn first_event(&self) -> Event {
        if is_cancelled(self.retry.cancel.as_ref()) {
            Event::Cancelled
        } else {
            Event::Start
        }
    }

    /// Tells the machine `event` and carries out its answers until one needs an
    /// await (an attempt or a sleep) or the call is over.
    fn poll(&mut self, mut event: Event) -> Step<T, E> {
        let retry = self.retry;
        loop {
            // The call's start doubles as the moment of `Start`: one clock read
            // fewer on every call (a clock read is most of a success path's cost).
            let now = if event == Event::Start {
                self.start
            } else {
                Instant::now()
            };
            let action = self.machine.poll(event, self.since_start(now));
            let answer = retry
                .budget
                .as_ref()
                .and_then(|budget| budget.feed(&self.machine, event, action, now));
            if !matches!(action, Action::Withdraw { .. }) {
                if let Some((number, ended)) = self.unlabelled.take() {
                    if let Some(outcome) = retry_core::attempt_outcome(ended, &action)
                        .map(retry_core::AttemptOutcome::label)
                    {
                        observe::attempt_ended(number, outcome);
                    }
                }
            }
            event = match action {
                Action::Attempt {
                    number,
                    deadline,
                    replays_non_idempotent,
                } => {
                    self.announce(Duration::ZERO, None);
                    if is_cancelled(retry.cancel.as_ref()) {
                        Event::Cancelled
                    } else {
                        let permit = match &retry.breaker {
                            None => None,
                            Some(breaker) => match breaker.request(now) {
                                Gate::Admitted(permit) => {
                                    Some(PermitGuard::new(Arc::clone(breaker), permit, now))
                                }
                                Gate::Rejected { until } => {
                                    event = Event::Rejected {
                                        until: until.map(|u| self.since_start(u)),
                                    };
                                    continue;
                                }
                            },
                        };
                        observe::attempt_started(number, replays_non_idempotent);
                        let start = self.start;
                        return Step::Attempt(Pending {
                            number,
                            context: AttemptContext {
                                attempt: number,
                                deadline: deadline.and_then(|d| start.checked_add(d.as_duration())),
                                replays_non_idempotent,
                                cancel: retry.cancel.clone(),
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
                    observe::sleeping(delay, reason, retry.policy.backoff().name());
                    let wake = self
                        .start
                        .checked_add(until.as_duration())
                        .unwrap_or_else(far_future);
                    return Step::Sleep(wake);
                }
                // Without a shared budget nobody can refuse: the retry goes on.
                Action::Withdraw { .. } => answer.unwrap_or(Event::Granted),
                Action::GiveUp(give_up) => {
                    let elapsed = now.saturating_duration_since(self.start);
                    observe::gave_up(&give_up, elapsed);
                    let error = RetryError::new(
                        give_up.reason,
                        give_up.attempts,
                        elapsed,
                        self.last_error.take(),
                    )
                    .with_last_failure(give_up.last_failure);
                    if let Some(hook) = &retry.on_give_up {
                        hook(&error);
                    }
                    return Step::Finished(Err(error));
                }
                Action::Done { attempts } => {
                    let elapsed = now.saturating_duration_since(self.start);
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
                        )),
                    });
                }
            };
        }
    }

    /// Attempt `number` ended as `ran`: the event to tell the machine. The breaker
    /// hears the outcome first.
    fn ended(&mut self, number: u32, permit: Option<PermitGuard>, ran: Ran<T, E>) -> Event {
        let event = match ran {
            Ran::Finished(Ok(value)) => {
                self.value = Some(value);
                Event::Succeeded
            }
            Ran::Finished(Err(error)) => {
                let failure = self.retry.judge(&error);
                self.last_error = Some(error);
                self.unannounced = Some((number, Some(failure)));
                Event::Failed(failure)
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
        self.unlabelled = Some((number, event));
        event
    }

    /// Tells the retry hook about the failed attempt before its retry.
    fn announce(&mut self, delay: Duration, reason: Option<SleepReason>) {
        let Some((attempt, failure)) = self.unannounced.take() else {
            return;
        };
        if let Some(hook) = &self.retry.on_retry {
            hook(&RetryNotice {
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
}

/// Sleeps until `wake`, or until `cancel` is cancelled if that comes first.
async fn sleep_until(wake: Instant, cancel: Option<&CancellationToken>) -> Event {
    tokio::select! {
        biased;
        () = cancelled(cancel) => Event::Cancelled,
        () = tokio::time::sleep_until(wake) => Event::Woke,
    }
}

/// How one attempt ended.
enum Ran<T, E> {
    Finished(Result<T, E>),
    TimedOut,
    Cancelled,
}

/// Runs one attempt, bounded by its deadline and the cancellation token.
async fn run_attempt<T, E>(
    attempt: impl Future<Output = Result<T, E>>,
    deadline: Option<Instant>,
    cancel: Option<&CancellationToken>,
) -> Ran<T, E> {
    let bounded = async {
        match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, attempt)
                .await
                .map_or(Ran::TimedOut, Ran::Finished),
            None => Ran::Finished(attempt.await),
        }
    };
    tokio::select! {
        biased;
        () = cancelled(cancel) => Ran::Cancelled,
        ran = bounded => ran,
    }
}

fn is_cancelled(cancel: Option<&CancellationToken>) -> bool {
    cancel.is_some_and(CancellationToken::is_cancelled)
}

/// Completes when `cancel` is cancelled; never without a token.
pub(crate) async fn cancelled(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(token) => token.cancelled().await,
        None => core::future::pending().await,
    }
}

/// A wake-up time for a sleep that ends past what tokio can represent.
fn far_future() -> Instant {
    let now = Instant::now();
    // About thirty years, as tokio itself uses for "never".
    now.checked_add(Duration::from_secs(86_400 * 365 * 30))
        .unwrap_or(now)
}

/// A seed from the OS's randomness (`RandomState` is keyed from it once per
/// thread), mixed with a counter so calls on one thread differ too.
pub(crate) fn fresh_seed() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed))
}
