//! The hedging driver: [`Hedge`] sends extra copies of a slow call and keeps the
//! first good answer, as [`retry_core::HedgeMachine`] decides. The copies run
//! concurrently inside the calling task (nothing is spawned); the losers are
//! dropped.

use core::fmt;
use core::future::Future;
use core::time::Duration;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use retry_core::{
    Copies, Event, Failure, GiveUpReason, HedgeAction, HedgeDelay, HedgeEvent, HedgeMachine,
    HedgePolicy, LatencyHistogram, RetryError,
};
use retry_shared::{
    fresh_seed, hedge_copy_ended, hedge_gave_up, hedge_launched, Breaker, Budget, Classifier,
    Clock as _, CopyOutcome, PermitGuard,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::retry::TokioClock;

/// What one copy of a hedged call is told about itself.
#[derive(Clone, Debug)]
pub struct CopyContext {
    copy: u32,
    replays_non_idempotent: bool,
    cancel: Option<CancellationToken>,
}

impl CopyContext {
    /// The copy's number: 1 for the first, then in the order they are sent.
    #[must_use]
    pub const fn copy(&self) -> u32 {
        self.copy
    }

    /// Whether this is the first copy (not a hedge).
    #[must_use]
    pub const fn is_first(&self) -> bool {
        self.copy == 1
    }

    /// The operation is marked non-idempotent and the caller allowed it to be
    /// hedged anyway: this copy repeats it and may take effect twice.
    #[must_use]
    pub const fn replays_non_idempotent(&self) -> bool {
        self.replays_non_idempotent
    }

    /// The call's cancellation token, if it has one.
    #[must_use]
    pub const fn cancel_token(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
    }

    /// What the first copy of a call cancelled by `cancel` is told.
    #[cfg(feature = "tower")]
    pub(crate) const fn first(cancel: Option<CancellationToken>) -> CopyContext {
        CopyContext {
            copy: 1,
            replays_non_idempotent: false,
            cancel,
        }
    }
}

/// A hedged call's good answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hedged<T> {
    /// The winning copy's value.
    pub value: T,
    /// Which copy won (1 is the first).
    pub copy: u32,
    /// How many copies were sent in all.
    pub launched: u32,
    /// How long the call took.
    pub elapsed: Duration,
}

/// A configured hedger: a [`HedgePolicy`] plus how to classify errors, how to
/// cancel, the shared retry budget and breaker to consult, and the latency
/// history an adaptive delay reads. Cheap to clone; clones share the budget,
/// the breaker and the latency history.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{Failure, HedgePolicy};
/// use retry_tokio::Hedge;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), retry_core::HedgePolicyError> {
/// let hedge = Hedge::new(
///     HedgePolicy::builder()
///         .max_attempts(2)
///         .fixed_delay(Duration::from_millis(50))
///         .build()?,
/// )
/// .classify(|_: &&str| Failure::retryable());
/// // The first copy is stuck; the hedge sent after 50 ms answers in 10 ms.
/// let done = hedge
///     .call(|ctx| async move {
///         let takes = if ctx.is_first() { 10_000 } else { 10 };
///         tokio::time::sleep(Duration::from_millis(takes)).await;
///         Ok::<_, &str>(ctx.copy())
///     })
///     .await
///     .unwrap();
/// assert_eq!((done.value, done.copy, done.launched), (2, 2, 2));
/// assert_eq!(done.elapsed, Duration::from_millis(60)); // virtual time
/// # Ok(())
/// # }
/// ```
pub struct Hedge<E> {
    policy: HedgePolicy,
    seed: Option<u64>,
    classifier: Option<Arc<Classifier<E>>>,
    cancel: Option<CancellationToken>,
    budget: Option<Arc<dyn Budget>>,
    breaker: Option<Arc<dyn Breaker>>,
    latencies: Arc<Mutex<LatencyHistogram>>,
}

impl<E> Clone for Hedge<E> {
    fn clone(&self) -> Self {
        Hedge {
            policy: self.policy,
            seed: self.seed,
            classifier: self.classifier.clone(),
            cancel: self.cancel.clone(),
            budget: self.budget.clone(),
            breaker: self.breaker.clone(),
            latencies: Arc::clone(&self.latencies),
        }
    }
}

impl<E> fmt::Debug for Hedge<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("policy", &self.policy)
            .field("seed", &self.seed)
            .field("classifier", &self.classifier.is_some())
            .field("cancel", &self.cancel)
            .field("budget", &self.budget)
            .field("breaker", &self.breaker)
            .field("latencies", &self.latency_history())
            .finish()
    }
}

impl<E> Hedge<E> {
    /// A hedger following `policy`, with every error non-fatal, a fresh OS seed
    /// per call, no cancellation token, no budget, no breaker and an empty
    /// latency history.
    #[must_use]
    pub fn new(policy: HedgePolicy) -> Hedge<E> {
        Hedge {
            policy,
            seed: None,
            classifier: None,
            cancel: None,
            budget: None,
            breaker: None,
            latencies: Arc::new(Mutex::new(LatencyHistogram::new())),
        }
    }

    /// The policy every call follows.
    #[must_use]
    pub const fn policy(&self) -> &HedgePolicy {
        &self.policy
    }

    /// Uses `seed` for the jitter of every call's hedge delays (by default each
    /// call draws a fresh seed from OS-seeded randomness).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Says, for each error, whether another copy may fix it: a non-fatal
    /// failure sends the next copy at once (or after the server's hint), a
    /// permanent one ends the call and cancels the other copies. By default
    /// every error is non-fatal.
    #[must_use]
    pub fn classify(mut self, classifier: impl Fn(&E) -> Failure + Send + Sync + 'static) -> Self {
        self.classifier = Some(Arc::new(classifier));
        self
    }

    /// Cancels calls when `token` is cancelled: every copy in flight is dropped
    /// and no copy starts afterwards.
    #[must_use]
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Tells a shared retry budget about every call and, when the policy says
    /// `use_retry_budget(true)`, withdraws from it before every copy after the
    /// first. A refusal stops further copies; those in flight run on.
    #[must_use]
    pub fn budget(mut self, budget: impl Budget + 'static) -> Self {
        self.budget = Some(Arc::new(budget));
        self
    }

    /// Asks a shared circuit breaker before every copy and tells it every
    /// copy's outcome. A rejected copy never runs and stops further copies; if
    /// it was the first, the call gives up with `retry.circuit_open`. A copy
    /// that loses is abandoned: its permit is released, or recorded as a slow
    /// failure if it ran past the breaker's slow-call duration.
    #[must_use]
    pub fn breaker(mut self, breaker: impl Breaker + 'static) -> Self {
        self.breaker = Some(Arc::new(breaker));
        self
    }

    /// Starts the latency history (which an adaptive delay reads) from
    /// `latencies` instead of an empty one. Clones made afterwards share it.
    #[must_use]
    pub fn latencies(mut self, latencies: LatencyHistogram) -> Self {
        self.latencies = Arc::new(Mutex::new(latencies));
        self
    }

    /// A copy of the latency history: every winning copy's latency, recorded
    /// when the policy's delay is adaptive.
    #[must_use]
    pub fn latency_history(&self) -> LatencyHistogram {
        *self
            .latencies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn adaptive(&self) -> bool {
        matches!(self.policy.delay(), HedgeDelay::Percentile { .. })
    }

    /// The hedger's own cancellation token.
    #[cfg(feature = "tower")]
    pub(crate) const fn cancel_token_ref(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
    }

    pub(crate) fn judge(&self, error: &E) -> Failure {
        match &self.classifier {
            Some(classify) => classify(error),
            None => Failure::retryable(),
        }
    }

    /// Runs `op` as the policy says: the first copy at once, more copies when
    /// the hedge delay passes without an answer (or a copy fails), each from a
    /// fresh call of `op` with its [`CopyContext`]; the first success wins.
    ///
    /// The copies run concurrently inside the task that awaits this future:
    /// nothing is spawned. When a copy wins (or the call ends otherwise), the
    /// other copies' futures are dropped at once, which cancels whatever they
    /// were doing (an HTTP client aborts the request), and their breaker
    /// permits go back. Dropping the returned future drops every copy the same
    /// way. Every copy after the first gives the runtime a turn before it is
    /// sent (a copy that follows a failure at once, with no wait, does not keep
    /// the thread from other tasks). Allocations: two for the set of copies in
    /// flight, made when the first copy starts, and one per copy sent.
    ///
    /// With the `tracing` and `metrics` features every copy is reported: sent
    /// (`hedge.copy.launched.total`), and how it ended (`hedge.copy.total`:
    /// won, failure, permanent, cancelled, or rejected by the breaker), a
    /// give-up as a warning.
    ///
    /// # Errors
    /// A [`RetryError`] with the core's reason: `retry.exhausted` when every
    /// copy allowed failed, `retry.permanent` for a permanent failure,
    /// `retry.timeout` when the policy's timeout passed, `retry.cancelled`,
    /// `retry.retry_budget` or `retry.circuit_open` when nothing was left
    /// running after the budget or the breaker refused a copy; with the number
    /// of copies sent, the elapsed time and the last error.
    pub async fn call<T, F, Fut>(&self, op: F) -> Result<Hedged<T>, RetryError<E>>
    where
        F: FnMut(CopyContext) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let call = self.run(
            &self.policy,
            op,
            |_: &T| None,
            |error: &E| self.judge(error),
        );
        instrument(&self.policy, call)
            .await
            .map_err(|(error, _)| error)
    }

    /// [`Hedge::call`] under `policy` (the hedger's own, or the one it gives a
    /// request: [`HedgePolicy::for_request`]), judging each copy's value with
    /// `judge_value` (a value it calls a failure is a failed copy: an HTTP
    /// layer's 503) and each error with `judge_error`. When the call gives up
    /// on a failed value (the last copy to end returned one, and the call ran
    /// out of copies or the failure was permanent), that value comes back with
    /// the error, for a layer to answer with.
    ///
    /// The copies' error `X` need not be the hedger's: a layer wraps it.
    pub(crate) async fn run<T, X, F, Fut, V, J>(
        &self,
        policy: &HedgePolicy,
        mut op: F,
        judge_value: V,
        judge_error: J,
    ) -> Result<Hedged<T>, (RetryError<X>, Option<T>)>
    where
        F: FnMut(CopyContext) -> Fut,
        Fut: Future<Output = Result<T, X>>,
        V: Fn(&T) -> Option<Failure>,
        J: Fn(&X) -> Failure,
    {
        let cancel = self.cancel.as_ref();
        let start = Instant::now();
        let std_start = start.into_std();
        let seed = self.seed.unwrap_or_else(fresh_seed);
        let mut machine = if self.adaptive() {
            HedgeMachine::with_latencies(policy, seed, &self.latency_history())
        } else {
            HedgeMachine::new(policy, seed)
        };
        let breaker: Option<&dyn Breaker> = self.breaker.as_deref();
        // The copies in flight; made at the first launch, dropped whole at a cancel.
        let mut copies = None;
        // Reports the copies still in flight as cancelled if this future is
        // dropped (declared after the set: dropped before it).
        let mut in_flight = InFlight(Copies::EMPTY);
        let mut ended = Ended {
            value: None,
            failed_value: None,
            last_error: None,
        };
        let mut now = start;
        let mut event = if is_cancelled(cancel) {
            HedgeEvent::Cancelled
        } else {
            HedgeEvent::Start
        };
        loop {
            let at = since(start, now);
            let action = machine.poll(event, at);
            in_flight.0 = machine.in_flight();
            let answer = self
                .budget
                .as_ref()
                .and_then(|budget| budget.feed_hedge(event, action, now.into_std()));
            event = match action {
                HedgeAction::Launch {
                    copy,
                    replays_non_idempotent,
                } => {
                    if copy > 1 {
                        // A copy may follow a failure at once: give the
                        // runtime a turn first.
                        tokio::task::yield_now().await;
                        now = Instant::now();
                    }
                    if is_cancelled(cancel) {
                        HedgeEvent::Cancelled
                    } else {
                        let permit = match breaker {
                            None => Ok(None),
                            Some(b) => {
                                PermitGuard::request(b, TokioClock, Some(now.into_std()), None)
                                    .map(Some)
                            }
                        };
                        match permit {
                            Err(until) => {
                                hedge_copy_ended(copy, CopyOutcome::Rejected);
                                HedgeEvent::Rejected {
                                    copy,
                                    until: until.map(|u| {
                                        retry_core::Instant::from_duration(
                                            u.saturating_duration_since(std_start),
                                        )
                                    }),
                                }
                            }
                            Ok(permit) => {
                                let context = CopyContext {
                                    copy,
                                    replays_non_idempotent,
                                    cancel: self.cancel.clone(),
                                };
                                hedge_launched(copy, replays_non_idempotent);
                                copies
                                    .get_or_insert_with(FuturesUnordered::new)
                                    .push(run_copy(copy, op(context), permit));
                                HedgeEvent::Launched { copy }
                            }
                        }
                    }
                }
                // Without a shared budget nobody can refuse: the copy goes out.
                HedgeAction::Withdraw { .. } => answer.unwrap_or(HedgeEvent::Granted),
                HedgeAction::Wait { until, .. } => {
                    let wake = until.map(|u| start.checked_add(u.as_duration()));
                    let done = tokio::select! {
                        biased;
                        () = cancelled(cancel) => None,
                        Some(done) = next_copy(&mut copies) => Some(done),
                        () = sleep_until(wake) => None,
                    };
                    now = Instant::now();
                    match done {
                        Some(done) => ended.copy(done, now, &judge_value, &judge_error),
                        None if is_cancelled(cancel) => HedgeEvent::Cancelled,
                        None => HedgeEvent::Woke,
                    }
                }
                HedgeAction::Cancel { copies: named } => {
                    // Every copy still in the set is one the machine named: drop
                    // them all (their permits go back as abandoned attempts).
                    copies = None;
                    for copy in named {
                        hedge_copy_ended(copy, CopyOutcome::Cancelled);
                    }
                    HedgeEvent::Stopped
                }
                HedgeAction::Done {
                    copy,
                    launched,
                    latency,
                } => {
                    let elapsed = now.saturating_duration_since(start);
                    let Some(value) = ended.value.take() else {
                        // `Done` answers only a success, which stores its value;
                        // should that ever break, fail the call rather than panic.
                        return Err((
                            RetryError::new(
                                GiveUpReason::NotStarted,
                                launched,
                                elapsed,
                                ended.last_error,
                            ),
                            None,
                        ));
                    };
                    hedge_copy_ended(copy, CopyOutcome::Won);
                    if self.adaptive() {
                        self.latencies
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .record(latency);
                    }
                    return Ok(Hedged {
                        value,
                        copy,
                        launched,
                        elapsed,
                    });
                }
                HedgeAction::GiveUp(give_up) => {
                    let elapsed = now.saturating_duration_since(start);
                    hedge_gave_up(&give_up, elapsed);
                    // The last failed value is the answer only when the call
                    // gave up on the failures (not a cancellation, a refusal or
                    // its time limit).
                    let failed_value = match give_up.reason {
                        GiveUpReason::Exhausted
                        | GiveUpReason::Permanent
                        | GiveUpReason::RetryBudget
                        | GiveUpReason::Budget => ended.failed_value,
                        _ => None,
                    };
                    return Err((
                        RetryError::new(
                            give_up.reason,
                            give_up.attempts,
                            elapsed,
                            ended.last_error,
                        )
                        .with_last_failure(give_up.last_failure),
                        failed_value,
                    ));
                }
            };
        }
    }
}

/// `call` in a span named `hedge` (with the `tracing` feature), as the retry
/// driver's calls are in one named `retry`.
pub(crate) fn instrument<X: Future>(
    policy: &HedgePolicy,
    call: X,
) -> impl Future<Output = X::Output> {
    #[cfg(feature = "tracing")]
    {
        use tracing::Instrument as _;
        call.instrument(tracing::info_span!(
            "hedge",
            copies = policy.allowed_attempts(),
            mode = policy.mode().name()
        ))
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = policy;
        call
    }
}

/// What the copies that ended left behind: the winner's value, the last
/// failed copy's value (when its failure was a value) and the last error.
struct Ended<T, E> {
    value: Option<T>,
    failed_value: Option<T>,
    last_error: Option<E>,
}

impl<T, E> Ended<T, E> {
    /// A copy ended: the breaker hears its outcome, then the machine.
    fn copy<B: Breaker>(
        &mut self,
        (copy, result, permit): CopyEnd<T, E, B>,
        now: Instant,
        judge_value: impl Fn(&T) -> Option<Failure>,
        judge_error: impl Fn(&E) -> Failure,
    ) -> HedgeEvent {
        let failure = match result {
            Ok(value) => match judge_value(&value) {
                None => {
                    self.value = Some(value);
                    None
                }
                Some(failure) => {
                    self.failed_value = Some(value);
                    Some(failure)
                }
            },
            Err(error) => {
                let failure = judge_error(&error);
                self.failed_value = None;
                self.last_error = Some(error);
                Some(failure)
            }
        };
        let (event, core_event) = match failure {
            None => (HedgeEvent::Succeeded { copy }, Event::Succeeded),
            Some(failure) => {
                let outcome = if failure.is_retryable() {
                    CopyOutcome::Failure
                } else {
                    CopyOutcome::Permanent
                };
                hedge_copy_ended(copy, outcome);
                (HedgeEvent::Failed { copy, failure }, Event::Failed(failure))
            }
        };
        if let Some(permit) = permit {
            permit.finish(core_event, Some(now.into_std()));
        }
        event
    }
}

/// The copies in flight, reported as cancelled when the call's future is
/// dropped with them still running.
struct InFlight(Copies);

impl Drop for InFlight {
    fn drop(&mut self) {
        for copy in self.0 {
            hedge_copy_ended(copy, CopyOutcome::Cancelled);
        }
    }
}

/// What a finished copy hands back: its number, its result and its permit.
type CopyEnd<T, E, B> = (u32, Result<T, E>, Option<PermitGuard<B, TokioClock>>);

/// Runs one copy, keeping its breaker permit alive until it ends (or is
/// dropped with it).
async fn run_copy<T, E, B: Breaker>(
    copy: u32,
    attempt: impl Future<Output = Result<T, E>>,
    permit: Option<PermitGuard<B, TokioClock>>,
) -> CopyEnd<T, E, B> {
    let result = attempt.await;
    (copy, result, permit)
}

/// The next copy to end, if any runs.
async fn next_copy<F: Future>(copies: &mut Option<FuturesUnordered<F>>) -> Option<F::Output> {
    match copies {
        Some(set) => set.next().await,
        None => None,
    }
}

/// `now` as the machine's time since the call's start.
fn since(start: Instant, now: Instant) -> retry_core::Instant {
    retry_core::Instant::from_duration(now.saturating_duration_since(start))
}

/// Sleeps until `wake` (never when there is none; far away when it lies past
/// what tokio can represent).
async fn sleep_until(wake: Option<Option<Instant>>) {
    match wake {
        None => core::future::pending().await,
        Some(Some(at)) => tokio::time::sleep_until(at).await,
        Some(None) => {
            let far = TokioClock.now();
            let far = Instant::from_std(far)
                .checked_add(Duration::from_secs(86_400 * 365 * 30))
                .unwrap_or_else(Instant::now);
            tokio::time::sleep_until(far).await;
        }
    }
}

fn is_cancelled(cancel: Option<&CancellationToken>) -> bool {
    cancel.is_some_and(CancellationToken::is_cancelled)
}

/// Completes when `cancel` is cancelled; never without a token.
async fn cancelled(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(token) => token.cancelled().await,
        None => core::future::pending().await,
    }
}
