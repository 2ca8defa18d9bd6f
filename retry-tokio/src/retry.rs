//! The async driver: [`Retry`] (a configured retrier that can be cloned and shared),
//! [`retry`] (the one-line form), and what the operation and the hooks are told.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use retry_core::{Event, RetryError, RetryPolicy, Success};
use retry_shared::{
    Breaker, Clock, Driver, Input, PermitGuard, QuickFailure, QuickOpening, Ran, Settings, Slept,
    Step,
};
use tokio::task::coop::Unconstrained;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

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
    /// driver enforces it, and follows the core's rule for a tie
    /// ([`retry_core::attempt_timed_out`]): an outcome that arrives at the
    /// deadline is a timeout, like one that never arrives. An operation may also
    /// pass it on (to a server, say).
    #[must_use]
    pub const fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The operation is marked non-idempotent and this attempt repeats it:
    /// it may take effect twice.
    #[must_use]
    pub const fn replays_non_idempotent(&self) -> bool {
        self.replays_non_idempotent
    }

    /// The call's cancellation token, if it has one: the one given to
    /// [`Retry::call_with`], else the retrier's own
    /// ([`Retry::cancel_token`]).
    #[must_use]
    pub const fn cancel_token(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
    }
}

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
    settings: Settings<E>,
    cancel: Option<CancellationToken>,
}

impl<E> Clone for Retry<E> {
    fn clone(&self) -> Self {
        Retry {
            settings: self.settings.clone(),
            cancel: self.cancel.clone(),
        }
    }
}

impl<E> fmt::Debug for Retry<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("settings", &self.settings)
            .field("cancel", &self.cancel)
            .finish()
    }
}

/// One call's loop: the driver's steps, carried out with `op` under `cancel`.
/// Written once for every call method, inline in each (no inner future to
/// build and move on the success path).
///
/// The call's future is as large as the largest of its two halves, which
/// share their bytes: the quick opening (the first attempt's future and a
/// little bookkeeping), and the rest of the call in a future of its own (the
/// driver, one timer, the cancellation waits and a later attempt's future),
/// built only if the opening does not end the call.
macro_rules! drive {
    ($retry:ident, $cancel:expr, $op:ident) => {{
        let settings = &$retry.settings;
        // A call that needs nothing of the driver until its first attempt ends
        // runs that attempt itself (the core's opening); only a failure builds
        // the driver, which takes the call over from there.
        // (`$cancel`, the call's tokens, is worked out again where the
        // driver needs it rather than kept in the call's future while the
        // first attempt runs: 84 -> 81 instructions per successful call.)
        let quick = if $cancel.is_none() {
            settings.quick_opening()
        } else {
            None
        };
        let opening = 'opening: {
            let Some(quick) = quick else {
                break 'opening Opening::Fresh;
            };
            // Asked only when there is a breaker: without one, nothing is
            // moved (the permit stays `None` where it lies).
            let mut permit = None;
            if settings.breaker().is_some() {
                match quick.admit(settings, &TokioClock) {
                    Ok(admitted) => permit = admitted,
                    Err(until) => break 'opening Opening::Refused(until),
                }
            }
            // The clock is read only under a breaker, if the attempt waits
            // (its first pending poll becomes the permit's start) and,
            // then, when it ends. The call reads none at its start, so it
            // reports no elapsed time.
            let (result, waited) = QuickAttempt {
                attempt: $op(quick_context(&quick)),
                waited: None,
                permit: permit.as_mut(),
            }
            .await;
            match result {
                // An attempt that never waited, without a breaker, needs
                // nothing more; any other success is finished out of line.
                Ok(value) if waited.is_none() && permit.is_none() => {
                    return Ok(quick.success(value));
                }
                Ok(value) => return Ok(quick_success(quick, value, waited, permit)),
                // A failure the core gives up on at once ends the call here;
                // any other goes on to the driver, classified.
                Err(error) => match quick.failure(settings, &TokioClock, error, waited, permit) {
                    Ok(error) => return Err(error),
                    Err(failed) => Opening::Failed(failed),
                },
            }
        };
        // The rest of the call: the driver takes over, and carries the call
        // out in a future of its own, awaited once.
        let cancel = $cancel;
        let (mut driver, step) = opening.take_over(settings, cancel);
        let mut wait = match Wait::of(step) {
            Ok(wait) => wait,
            Err(result) => return result,
        };
        let op = &mut $op;
        async move {
            // Pinned once for the whole call: the timer (an attempt's deadline
            // or the sleep before a retry) and the cancellation tokens' waits.
            let mut waits = core::pin::pin!(Waits::new(cancel));
            // Whether the call has waited since the last attempt ended.
            let mut turned = false;
            loop {
                let input = match wait {
                    Wait::Attempt(attempt) => {
                        let go = turned || attempt.number == 1 || take_turn(cancel).await;
                        turned = false;
                        if go {
                            let attempt_future = op(context(attempt, cancel));
                            let ran = waits
                                .as_mut()
                                .attempt(attempt_future, attempt.deadline, || {
                                    driver.attempt_waiting();
                                })
                                .await;
                            Input::Ended(ran)
                        } else {
                            Input::Ended(Ran::Cancelled)
                        }
                    }
                    Wait::Sleep(sleep) => {
                        turned = true;
                        Input::Slept(waits.as_mut().sleep(sleep).await)
                    }
                };
                wait = match Wait::of(driver.poll(input)) {
                    Ok(wait) => wait,
                    Err(result) => break result,
                };
            }
        }
        .await
    }};
}

/// How a call's quick opening ended, when it did not end the call: what the
/// driver takes over from.
enum Opening<'r, E> {
    /// No quick opening: the driver starts the call.
    Fresh,
    /// The breaker refused the first attempt; it admits again at this time, if
    /// known.
    Refused(Option<std::time::Instant>),
    /// The first attempt failed, and the call goes on.
    Failed(QuickFailure<E, PermitGuard<&'r dyn Breaker, TokioClock>>),
}

pin_project_lite::pin_project! {
    /// The quick opening's attempt, run in place: under a breaker, the time
    /// of its first pending poll is noted and the permit told of it (the
    /// attempt's start, should it be abandoned).
    struct QuickAttempt<'p, 'r, F> {
        #[pin]
        attempt: F,
        waited: Option<std::time::Instant>,
        permit: Option<&'p mut PermitGuard<&'r dyn Breaker, TokioClock>>,
    }
}

impl<F: Future> Future for QuickAttempt<'_, '_, F> {
    type Output = (F::Output, Option<std::time::Instant>);

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        match this.attempt.poll(cx) {
            Poll::Ready(result) => Poll::Ready((result, *this.waited)),
            Poll::Pending => {
                if this.waited.is_none() {
                    if let Some(permit) = this.permit.as_mut() {
                        let now = TokioClock.now();
                        *this.waited = Some(now);
                        permit.waited(now);
                    }
                }
                Poll::Pending
            }
        }
    }
}

/// The result of a quick opening's attempt that succeeded under a breaker:
/// the clock is read for the end of an attempt that waited (first at
/// `waited`), and the permit goes back.
#[cold]
#[inline(never)]
fn quick_success<T>(
    quick: QuickOpening,
    value: T,
    waited: Option<std::time::Instant>,
    permit: Option<PermitGuard<&dyn Breaker, TokioClock>>,
) -> Success<T> {
    if let Some(permit) = permit {
        permit.finish(Event::Succeeded, waited.map(|_| TokioClock.now()));
    }
    quick.success(value)
}

/// What the quick opening's attempt is told: it is the first, with no
/// deadline and no token to cancel it.
const fn quick_context(quick: &QuickOpening) -> AttemptContext {
    AttemptContext {
        attempt: quick.attempt.number,
        deadline: None,
        replays_non_idempotent: quick.attempt.replays_non_idempotent,
        cancel: None,
    }
}

impl<'r, E> Opening<'r, E> {
    /// The driver that carries the call on from here, and its first step.
    /// (Taking the opening whole keeps it out of the call's future.)
    #[allow(clippy::type_complexity)]
    fn take_over<'c, T>(
        self,
        settings: &'r Settings<E>,
        cancel: Cancel<'c>,
    ) -> (
        Driver<'r, T, E, TokioClock, impl Fn() -> bool + 'c>,
        Step<T, E>,
    ) {
        let cancelled = move || cancel.is_cancelled();
        match self {
            Opening::Fresh => {
                let mut driver = Driver::new(settings, TokioClock, cancelled);
                let step = driver.poll(Input::Start);
                (driver, step)
            }
            Opening::Refused(until) => {
                Driver::after_quick_refusal(settings, TokioClock, cancelled, until)
            }
            Opening::Failed(failed) => {
                Driver::after_quick_failure(settings, TokioClock, cancelled, failed)
            }
        }
    }
}

/// What the adapter waits on next: a step of the driver that is neither over
/// nor larger than it needs to be (the finished step holds the call's result,
/// which no wait needs).
#[derive(Clone, Copy)]
enum Wait {
    Attempt(retry_shared::Attempt),
    Sleep(retry_shared::Sleep),
}

impl Wait {
    /// The wait `step` asks for, or the call's result.
    #[inline]
    fn of<T, E>(step: Step<T, E>) -> Result<Wait, Result<Success<T>, RetryError<E>>> {
        match step {
            Step::Attempt(attempt) => Ok(Wait::Attempt(attempt)),
            Step::Sleep(sleep) => Ok(Wait::Sleep(sleep)),
            Step::Finished(result) => Err(result),
        }
    }
}

impl<E> Retry<E> {
    /// A retrier following `policy`, with every error retryable, a fresh OS seed
    /// per call, no hooks, no cancellation token, no budget and no breaker.
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Retry<E> {
        Retry {
            settings: Settings::new(policy),
            cancel: None,
        }
    }

    retry_shared::retry_builder_methods!();

    /// Cancels calls when `token` is cancelled: a sleep ends at once, the attempt
    /// in flight is dropped, and no attempt starts afterwards. It is the default
    /// for every call (a shutdown signal, say); [`Retry::call_with`] gives one
    /// call a token of its own.
    #[must_use]
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Runs `op` until it succeeds or the policy gives up.
    ///
    /// `op` is called once per attempt with the attempt's [`AttemptContext`] and
    /// returns that attempt's future. The closure may capture `&mut` state and
    /// update it between attempts (when it is called); for a future that itself
    /// borrows the closure's captures, use [`Retry::call_borrowing`].
    ///
    /// Nothing is spawned: dropping the returned future (an outer timeout, a
    /// `select!`, a task abort) stops the call where it is and drops the attempt
    /// in flight, which is then abandoned: the breaker's permit goes back,
    /// recorded as a failure if the attempt ran longer than the breaker's
    /// slow-call duration or reached its deadline, released otherwise. A
    /// cancellation during an attempt abandons it the same way.
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
        #[cfg(feature = "tracing")]
        return self
            .instrument(async { drive!(self, self.cancel(None), op) })
            .await;
        #[cfg(not(feature = "tracing"))]
        drive!(self, self.cancel(None), op)
    }

    /// Like [`Retry::call`], cancelled by `token` (as well as by the retrier's
    /// own token, if it has one): per-request cancellation without cloning the
    /// retrier for every request.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// use retry_core::RetryPolicy;
    /// use retry_tokio::{CancellationToken, Retry};
    ///
    /// let retry = Retry::new(RetryPolicy::builder().max_attempts(5).build().unwrap());
    /// let token = CancellationToken::new();
    /// let request = token.clone();
    /// let err = retry
    ///     .call_with(&token, |ctx| {
    ///         if ctx.attempt() == 2 {
    ///             request.cancel(); // the caller went away
    ///         }
    ///         async { Err::<(), _>("busy") }
    ///     })
    ///     .await
    ///     .unwrap_err();
    /// assert!(err.is_cancelled());
    /// assert_eq!(err.attempts(), 2);
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`Retry::call`]; `retry.cancelled` once either token is cancelled.
    pub async fn call_with<T, F, Fut>(
        &self,
        token: &CancellationToken,
        mut op: F,
    ) -> Result<Success<T>, RetryError<E>>
    where
        F: FnMut(AttemptContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        #[cfg(feature = "tracing")]
        return self
            .instrument(async { drive!(self, self.cancel(Some(token)), op) })
            .await;
        #[cfg(not(feature = "tracing"))]
        drive!(self, self.cancel(Some(token)), op)
    }

    /// The tokens that cancel one call.
    fn cancel<'a>(&'a self, call: Option<&'a CancellationToken>) -> Cancel<'a> {
        Cancel {
            call,
            retry: self.cancel.as_ref(),
        }
    }

    /// The settings every call follows.
    #[cfg(feature = "tower")]
    pub(crate) const fn settings(&self) -> &Settings<E> {
        &self.settings
    }

    /// The retrier's own cancellation token.
    #[cfg(feature = "tower")]
    pub(crate) const fn cancel_token_ref(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
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
        #[cfg(feature = "tracing")]
        return self
            .instrument(async { drive!(self, self.cancel(None), op) })
            .await;
        #[cfg(not(feature = "tracing"))]
        drive!(self, self.cancel(None), op)
    }

    #[cfg(feature = "tracing")]
    pub(crate) fn instrument<X: Future>(&self, call: X) -> tracing::instrument::Instrumented<X> {
        use tracing::Instrument as _;
        call.instrument(tracing::info_span!(
            "retry",
            max_attempts = self.settings.policy().max_attempts(),
            curve = self.settings.policy().backoff().name()
        ))
    }

    #[cfg(all(feature = "tower", not(feature = "tracing")))]
    pub(crate) fn instrument<X: Future>(&self, call: X) -> X {
        call
    }
}

impl AttemptContext {
    /// What a recreated request is told about a hedged copy: its number as the
    /// attempt (the first copy is attempt 1), no deadline of its own.
    #[cfg(feature = "tower")]
    pub(crate) fn for_copy(copy: &crate::CopyContext) -> AttemptContext {
        AttemptContext {
            attempt: copy.copy(),
            deadline: None,
            replays_non_idempotent: copy.replays_non_idempotent(),
            cancel: copy.cancel_token().cloned(),
        }
    }
}

/// What attempt `attempt` is told about itself.
pub(crate) fn context(attempt: retry_shared::Attempt, cancel: Cancel<'_>) -> AttemptContext {
    AttemptContext {
        attempt: attempt.number,
        deadline: attempt.deadline.map(Instant::from_std),
        replays_non_idempotent: attempt.replays_non_idempotent,
        cancel: cancel.call.or(cancel.retry).cloned(),
    }
}

/// The tokens that cancel one call: its own, and the retrier's.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cancel<'a> {
    pub(crate) call: Option<&'a CancellationToken>,
    pub(crate) retry: Option<&'a CancellationToken>,
}

impl Cancel<'_> {
    /// Whether the call has no token at all: nothing can cancel it.
    pub(crate) const fn is_none(self) -> bool {
        self.call.is_none() && self.retry.is_none()
    }

    /// Whether either token is cancelled.
    pub(crate) fn is_cancelled(self) -> bool {
        self.call.is_some_and(CancellationToken::is_cancelled)
            || self.retry.is_some_and(CancellationToken::is_cancelled)
    }
}

/// tokio's clock (paused time included), as the `std::time::Instant` the shared
/// driver, breaker and budget take: `into_std` keeps paused time consistent.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }
}

pin_project_lite::pin_project! {
    /// What the rest of a call waits on besides its attempts, pinned once for
    /// all of it: one timer (the deadline of the attempt in flight, or the
    /// sleep before a retry) and the waits on the call's cancellation tokens
    /// (none without a token).
    pub(crate) struct Waits<'a> {
        #[pin]
        timer: Option<Unconstrained<tokio::time::Sleep>>,
        #[pin]
        on_call: Option<WaitForCancellationFuture<'a>>,
        #[pin]
        on_retry: Option<WaitForCancellationFuture<'a>>,
    }
}

impl<'a> Waits<'a> {
    pub(crate) fn new(cancel: Cancel<'a>) -> Self {
        Waits {
            timer: None,
            on_call: cancel.call.map(CancellationToken::cancelled),
            on_retry: cancel.retry.map(CancellationToken::cancelled),
        }
    }

    /// Whether either token is cancelled; if not, the task is woken when one is.
    fn poll_cancelled(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        let this = self.project();
        this.on_call
            .as_pin_mut()
            .is_some_and(|wait| wait.poll(cx).is_ready())
            || this
                .on_retry
                .as_pin_mut()
                .is_some_and(|wait| wait.poll(cx).is_ready())
    }

    /// Sets the timer to go off at `at`. It is polled outside tokio's
    /// cooperative budget, so an attempt that spends the budget cannot keep
    /// its deadline from being seen (as `tokio::time::Timeout` does).
    fn set_timer(self: Pin<&mut Self>, at: Instant) {
        self.project()
            .timer
            .set(Some(tokio::task::coop::unconstrained(
                tokio::time::sleep_until(at),
            )));
    }

    /// Whether the timer has gone off (`false` without one).
    fn poll_timer(self: Pin<&mut Self>, cx: &mut Context<'_>) -> bool {
        self.project()
            .timer
            .as_pin_mut()
            .is_some_and(|timer| timer.poll(cx).is_ready())
    }

    /// Runs one attempt until it returns, passes its deadline or the call is
    /// cancelled (checked first, then the attempt, then the deadline: an
    /// attempt that returns in the same instant as its deadline is reported
    /// as returned, and the driver applies the core's deadline rule to it).
    /// `on_wait` is called the first time the attempt returns pending (see
    /// [`Driver::attempt_waiting`]).
    pub(crate) fn attempt<'w, F: Future, W: FnMut()>(
        mut self: Pin<&'w mut Self>,
        attempt: F,
        deadline: Option<std::time::Instant>,
        on_wait: W,
    ) -> AttemptWait<'w, 'a, F, W> {
        if let Some(deadline) = deadline {
            self.as_mut().set_timer(Instant::from_std(deadline));
        }
        AttemptWait {
            waits: self,
            attempt,
            timed: deadline.is_some(),
            on_wait: Some(on_wait),
        }
    }

    /// Sleeps out `sleep`, or until the call is cancelled if that comes first.
    ///
    /// A sleep that is over at once (a zero delay, or one already past) still
    /// gives the runtime a turn ([`tokio::task::yield_now`]): the timer is
    /// polled outside tokio's cooperative budget and would otherwise return
    /// at once, so a retry loop with a zero delay and an operation that never
    /// awaits would keep the thread from every other task, an outer timeout's
    /// included. A sleep that waited has yielded already.
    pub(crate) async fn sleep(mut self: Pin<&mut Self>, sleep: retry_shared::Sleep) -> Slept {
        let wake = sleep.until.map_or_else(far_future, Instant::from_std);
        self.as_mut().set_timer(wake);
        let mut waited = false;
        let slept = core::future::poll_fn(|cx| {
            if self.as_mut().poll_cancelled(cx) {
                Poll::Ready(Slept::Cancelled)
            } else if self.as_mut().poll_timer(cx) {
                Poll::Ready(Slept::Elapsed)
            } else {
                waited = true;
                Poll::Pending
            }
        })
        .await;
        if !waited {
            tokio::task::yield_now().await;
        }
        slept
    }
}

pin_project_lite::pin_project! {
    /// One attempt raced against its deadline and the call's cancellation:
    /// [`Waits::attempt`]'s future.
    pub(crate) struct AttemptWait<'w, 'a, F, W> {
        waits: Pin<&'w mut Waits<'a>>,
        #[pin]
        attempt: F,
        // The timer holds the attempt's deadline.
        timed: bool,
        // Called at the attempt's first pending poll, then gone.
        on_wait: Option<W>,
    }

    impl<F, W> PinnedDrop for AttemptWait<'_, '_, F, W> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if *this.timed {
                // A deadline that did not go off leaves the timer wheel now.
                this.waits.as_mut().project().timer.set(None);
            }
        }
    }
}

impl<T, E, F, W> Future for AttemptWait<'_, '_, F, W>
where
    F: Future<Output = Result<T, E>>,
    W: FnMut(),
{
    type Output = Ran<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Ran<T, E>> {
        let this = self.project();
        if this.waits.as_mut().poll_cancelled(cx) {
            return Poll::Ready(Ran::Cancelled);
        }
        if let Poll::Ready(result) = this.attempt.poll(cx) {
            return Poll::Ready(Ran::Returned(result));
        }
        if let Some(mut on_wait) = this.on_wait.take() {
            on_wait();
        }
        if *this.timed && this.waits.as_mut().poll_timer(cx) {
            return Poll::Ready(Ran::TimedOut);
        }
        Poll::Pending
    }
}

/// Gives the runtime a turn before a retry that follows its failed attempt
/// with no delay (the core starts it at once): without it, an operation that
/// fails without awaiting would keep the thread from every other task, an
/// outer timeout's included. `false` when the call was cancelled meanwhile (the
/// attempt must not start).
pub(crate) async fn take_turn(cancel: Cancel<'_>) -> bool {
    tokio::task::yield_now().await;
    !cancel.is_cancelled()
}

/// A wake-up time for a sleep that ends past what tokio can represent.
fn far_future() -> Instant {
    let now = Instant::now();
    // About thirty years, as tokio itself uses for "never".
    now.checked_add(Duration::from_secs(86_400 * 365 * 30))
        .unwrap_or(now)
}
