//! [`FleetBudget`]: one retry budget for every process naming the same key.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use redis::Value;
use retry_core::{
    budget_steps, hedge_budget_steps, Action, Admission, AttemptKind, BasicRule, BreakerConfig,
    BudgetConfig, BudgetInput, BudgetParameters, BudgetSteps, CallOutcome, CircuitBreaker, Event,
    HedgeAction, HedgeEvent, Requirement, RetryBudget, RetryKind, RetryMachine, RetryPolicy,
    Tokens, Withdrawal,
};
use retry_shared::Budget;

use crate::error::{Fallback, LogOnce, SetupError, StoreError};
use crate::io::{Conn, Io};
use crate::{check_duration, check_name, observe, text, Fleet, FORMAT};

/// The most a number may be for Lua's doubles to keep it exact.
const EXACT: u64 = (1 << 53) - 1;

static SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("lua/budget.lua")));
/// Reads the server's clock on the node holding the budget's key (the key is
/// named for routing only; the script touches no key).
static CLOCK: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new("local t = redis.call('TIME') return {tonumber(t[1]), tonumber(t[2])}")
});

/// Builds a [`FleetBudget`]; start with [`Fleet::budget`].
#[derive(Debug)]
#[must_use]
pub struct FleetBudgetBuilder {
    fleet: Fleet,
    name: String,
    config: BudgetConfig,
    timeout: Duration,
    fallback: Fallback,
    ttl: Option<Duration>,
}

impl FleetBudgetBuilder {
    pub(crate) fn new(fleet: Fleet, name: &str, config: BudgetConfig) -> Self {
        FleetBudgetBuilder {
            fleet,
            name: name.to_owned(),
            config,
            timeout: Duration::from_millis(5),
            fallback: Fallback::Local,
            ttl: None,
        }
    }

    /// How long a withdrawal waits for Redis before falling back (default 5 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What a withdrawal answers when Redis gives no answer in time, or bad
    /// data (default [`Fallback::Local`]: fail open to this process's own budget).
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// How long the key lives after its last use (default: twice the window
    /// for Finagle, whose state is all gone by then anyway; one hour for the
    /// others, whose bucket then starts full again).
    pub fn key_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Checks the settings and returns the budget.
    ///
    /// # Errors
    /// A [`SetupError`]: a bad name, a timeout or lifetime out of range, or a
    /// configuration whose numbers Redis cannot keep exact.
    pub fn build(self) -> Result<FleetBudget, SetupError> {
        check_name("name", &self.name)?;
        check_duration("timeout", self.timeout)?;
        let (kind, params, default_ttl) = match self.config.parameters() {
            BudgetParameters::Grpc { max, ratio } => {
                ("grpc", [max, ratio, 0, 0, 0, 0], Duration::from_secs(3600))
            }
            BudgetParameters::Aws {
                capacity,
                retry_cost,
                timeout_cost,
                no_retry_increment,
            } => (
                "aws",
                [capacity, retry_cost, timeout_cost, no_retry_increment, 0, 0],
                Duration::from_secs(3600),
            ),
            BudgetParameters::Finagle {
                deposit,
                withdrawal,
                reserve,
                slice_cap,
                max,
                slice_nanos,
            } => {
                if slice_nanos % 1_000 != 0 {
                    return Err(SetupError::SliceNotMicros { nanos: slice_nanos });
                }
                let window = Duration::from_nanos(slice_nanos.saturating_mul(10));
                (
                    "finagle",
                    [
                        deposit,
                        withdrawal,
                        reserve,
                        slice_cap,
                        max,
                        slice_nanos / 1_000,
                    ],
                    window.saturating_mul(2),
                )
            }
            _ => ("unknown", [0; 6], Duration::from_secs(3600)),
        };
        let names = ["p1", "p2", "p3", "p4", "max", "p6"];
        for (value, field) in params.iter().zip(names) {
            if *value > EXACT {
                return Err(SetupError::TooLarge {
                    field,
                    value: *value,
                });
            }
        }
        let ttl = self.ttl.unwrap_or(default_ttl);
        check_duration("key_ttl", ttl.min(Duration::from_secs(3600)))?;
        let fingerprint = format!("{kind}:{}", params.map(|p| p.to_string()).join(":"));
        let key = format!("{}:budget:{{{}}}", self.fleet.namespace, self.name);
        let mut fixed = vec![FORMAT.to_string(), fingerprint.clone(), kind.to_owned()];
        fixed.extend(params.iter().map(u64::to_string));
        fixed.push(ttl.as_millis().to_string());
        let inner = Arc::new(Inner {
            io: self.fleet.io.clone(),
            key,
            fingerprint,
            fixed,
            params: self.config.parameters(),
            timeout: self.timeout,
            fallback: self.fallback,
            local: Mutex::new(Local {
                budget: RetryBudget::new(self.config),
                origin: None,
                guard: store_guard(),
            }),
            fallbacks: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            log: LogOnce::default(),
            clock: ServerClock::default(),
        });
        // Connect, load the script and read the server's clock now, so that
        // the first withdrawal pays for none of them.
        let ready = Arc::clone(&inner);
        self.fleet.io.spawn(|mut conn| async move {
            let _ = SCRIPT.load_async(&mut conn).await;
            let _ = tokio::time::timeout(
                ready.timeout.max(Duration::from_secs(1)),
                ready.read_clock(&mut conn),
            )
            .await;
        });
        Ok(FleetBudget { inner })
    }
}

/// A retry budget shared by every process that names the same key in the same
/// Redis: each step of a call goes to Redis as one script, which applies it
/// atomically with exactly the arithmetic of the core's [`RetryBudget`] (gRPC
/// throttle, AWS quota or Finagle percentage, in thousandths of a token).
///
/// A withdrawal is one round trip, waited for at most the budget's timeout
/// (default 5 ms; the caller's thread blocks that long at most, which is why it
/// is short). Without an answer in time, or on bad data in the key, the
/// withdrawal gets the [`Fallback`]'s answer: this process's own core budget
/// (fail open, the default; it hears every input, so it is warm) or a refusal
/// (fail closed). After three round trips in a row fail for want of Redis
/// (a timeout, a refused or broken connection), withdrawals are answered by
/// the fallback at once for 250 ms, then one tries Redis again: an outage
/// costs each caller one timeout, not one per retry (a core breaker guards
/// Redis itself). Each fallback is counted ([`FleetBudget::fallbacks`], and
/// the `retry_redis_fallbacks` metric with the `metrics` feature) and each kind
/// of error is logged once. The other inputs (first attempts, failures,
/// successes) are sent without waiting.
///
/// Only the inputs that can change the budget are sent (see
/// [`BudgetParameters::heeds`]): a call that succeeds at once costs Redis
/// nothing under the AWS and gRPC kinds' first attempt, and one script (its
/// success) at most; a retry is one script (failure and withdrawal together).
/// Every request carries its deadline on the server's clock (learnt from the
/// replies): a request Redis runs after its caller stopped waiting (Redis was
/// stopped, or slow) applies nothing, so a caller answered by its fallback is
/// not charged fleet-wide as well.
///
/// Time is the Redis server's clock (only Finagle's window uses time), so the
/// processes need not agree on theirs; a clock that steps back counts as no
/// time passing (the stored window moves back with it, and the step is
/// logged), never as a window frozen until the clock catches up. The key is
/// `<namespace>:budget:{<name>}` (braces included: the cluster hash tag), one
/// hash per budget, expiring after its lifetime without use.
///
/// Implements [`retry_shared::Budget`], so it plugs into `retry-tokio`'s
/// `Retry::budget`, the tower retry layer and `retry-std` like a
/// `SharedBudget`.
#[derive(Clone)]
pub struct FleetBudget {
    inner: Arc<Inner>,
}

struct Inner {
    io: Io,
    key: String,
    fingerprint: String,
    /// ARGV[1..=10] of the script.
    fixed: Vec<String>,
    params: BudgetParameters,
    timeout: Duration,
    fallback: Fallback,
    local: Mutex<Local>,
    fallbacks: AtomicU64,
    errors: AtomicU64,
    log: LogOnce,
    /// The server's clock, as the replies read it, for deadlines.
    clock: ServerClock,
}

/// The server's clock as this process reads it: the reply with the shortest
/// round trip gives the best reading (the server read its clock somewhere in
/// the round trip, so the reading is off by at most half of it). A reading's
/// error is taken to grow by 1 ms a second, so fresher readings replace it
/// and a server clock that stepped is followed within seconds.
#[derive(Debug, Default)]
struct ServerClock {
    best: Mutex<Option<ClockReading>>,
}

#[derive(Clone, Copy, Debug)]
struct ClockReading {
    /// The middle of the round trip, on this process's clock.
    at: Instant,
    /// The server's clock then, in microseconds.
    server_micros: u64,
    round_trip: Duration,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl ServerClock {
    /// A reply sent at `sent` and received at `received` read the server's
    /// clock as `server_micros`.
    fn read(&self, sent: Instant, received: Instant, server_micros: u64) {
        let round_trip = received.saturating_duration_since(sent);
        let reading = ClockReading {
            at: sent + round_trip / 2,
            server_micros,
            round_trip,
        };
        let mut best = self.best.lock().unwrap_or_else(PoisonError::into_inner);
        let better = best.is_none_or(|b| {
            let aged = b.round_trip + received.saturating_duration_since(b.at) / 1_000;
            round_trip <= aged
        });
        if better {
            *best = Some(reading);
        }
    }

    /// The server's time (µs) after which a request issued at `issued`
    /// with `timeout` must not be applied: the server's reading of
    /// `issued + timeout`, less one round trip (the reply's way back, and the
    /// reading's own error), or `None` before any reading.
    fn deadline(&self, issued: Instant, timeout: Duration) -> Option<u64> {
        let b = (*self.best.lock().unwrap_or_else(PoisonError::into_inner))?;
        let end = issued + timeout;
        let server = if end >= b.at {
            b.server_micros.saturating_add(micros(end - b.at))
        } else {
            b.server_micros.saturating_sub(micros(b.at - end))
        };
        Some(server.saturating_sub(micros(b.round_trip)))
    }
}

struct Local {
    budget: RetryBudget,
    origin: Option<Instant>,
    /// A core breaker guarding Redis itself: after three round trips in a row
    /// fail for want of Redis, withdrawals go straight to the fallback for
    /// 250 ms, then one tries Redis again.
    guard: Option<CircuitBreaker<0, 0>>,
}

/// The breaker that guards the round trips to Redis (see `Local::guard`); the
/// config is valid, so this is always `Some`.
fn store_guard() -> Option<CircuitBreaker<0, 0>> {
    BreakerConfig::basic(BasicRule {
        failure_threshold: 3,
        open_duration: Duration::from_millis(250),
        success_threshold: 1,
    })
    .and_then(CircuitBreaker::new)
    .ok()
}

/// What Redis answered to a batch of inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FleetAnswer {
    /// The answer to the withdrawal, if the inputs held one.
    pub withdrawal: Option<Withdrawal>,
    /// The tokens in the fleet's bucket after the inputs.
    pub tokens: Tokens,
}

impl FleetBudget {
    /// The Redis key holding this budget.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// Withdrawals answered by the fallback since the budget was built.
    #[must_use]
    pub fn fallbacks(&self) -> u64 {
        self.inner.fallbacks.load(Ordering::Relaxed)
    }

    /// Round trips that failed (withdrawals and the inputs sent without
    /// waiting), whatever the cause.
    #[must_use]
    pub fn errors(&self) -> u64 {
        self.inner.errors.load(Ordering::Relaxed)
    }

    /// How many errors were logged (each kind once).
    #[must_use]
    pub fn logged(&self) -> u32 {
        self.inner.log.count()
    }

    /// This process's own core budget, as the fallback would answer from it.
    #[must_use]
    pub fn local(&self) -> RetryBudget {
        self.lock().budget
    }

    /// Applies `inputs` in Redis, in order and atomically, and waits up to the
    /// budget's timeout for the answer. `at` is the time the inputs happen on
    /// the budget's clock (in microseconds from the clock's origin, as the
    /// core's [`retry_core::Instant`] reads it); `None` uses the Redis
    /// server's clock. No fallback: the error is returned (and counted).
    ///
    /// # Errors
    /// The [`StoreError`] that kept Redis from answering.
    pub fn apply_blocking(
        &self,
        inputs: &[BudgetInput],
        at: Option<retry_core::Instant>,
    ) -> Result<FleetAnswer, StoreError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(inputs, at, move |r| {
            let _ = tx.send(r);
        });
        let answer = rx
            .recv_timeout(self.inner.timeout)
            .unwrap_or_else(|e| Err(self.missing(e)));
        self.note(answer)
    }

    /// As [`FleetBudget::apply_blocking`], for async callers.
    ///
    /// # Errors
    /// As [`FleetBudget::apply_blocking`].
    pub async fn apply(
        &self,
        inputs: &[BudgetInput],
        at: Option<retry_core::Instant>,
    ) -> Result<FleetAnswer, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(inputs, at, move |r| {
            let _ = tx.send(r);
        });
        let answer = match tokio::time::timeout(self.inner.timeout, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(StoreError::Stopped),
            Err(_) => Err(self.timeout_error()),
        };
        self.note(answer)
    }

    /// One step of a call: the inputs go to the local budget and to Redis; a
    /// withdrawal waits for Redis (or falls back).
    fn step(&self, steps: BudgetSteps, now: Instant) -> Option<bool> {
        if steps.as_slice().is_empty() {
            return None;
        }
        // Only what can change the fleet's budget goes to Redis (a withdrawal
        // always does).
        let mut heeded = [BudgetInput::FirstAttempt; 2];
        let mut n = 0;
        for input in steps.as_slice() {
            if self.inner.params.heeds(*input) {
                if let Some(slot) = heeded.get_mut(n) {
                    *slot = *input;
                    n += 1;
                }
            }
        }
        let inputs = heeded.get(..n).unwrap_or_default();
        let (local, at, permit) = {
            let mut cell = self.lock();
            let origin = *cell.origin.get_or_insert(now);
            let at = retry_core::Instant::from_duration(now.saturating_duration_since(origin));
            let local = steps.apply(&mut cell.budget, at);
            if inputs.is_empty() {
                return None;
            }
            let permit = match cell.guard.as_mut().map(|g| g.request(at)) {
                Some(Admission::Admitted { permit, .. }) => Some(Some(permit)),
                Some(Admission::Rejected { .. }) => None,
                None => Some(None),
            };
            (local, at, permit)
        };
        let Some(permit) = permit else {
            // Redis failed just now: answer at once rather than wait again.
            return steps.withdraws().then(|| self.fall_back(local));
        };
        if !steps.withdraws() {
            if let (Some(permit), Some(g)) = (permit, self.lock().guard.as_mut()) {
                g.release(permit, at);
            }
            let inner = Arc::clone(&self.inner);
            self.send(inputs, None, move |r| {
                if let Err(e) = r {
                    inner.failed(&e);
                }
            });
            return None;
        }
        let started = Instant::now();
        let answer = self.apply_blocking(inputs, None);
        if let Some(permit) = permit {
            let outcome = match &answer {
                Err(e) if !e.is_bad_data() => CallOutcome::failure(started.elapsed()),
                _ => CallOutcome::success(started.elapsed()),
            };
            if let Some(g) = self.lock().guard.as_mut() {
                let _ = g.record(permit, outcome, at);
            }
        }
        match answer {
            Ok(FleetAnswer {
                withdrawal: Some(w),
                ..
            }) => Some(w.is_granted()),
            Ok(FleetAnswer {
                withdrawal: None, ..
            })
            | Err(_) => Some(self.fall_back(local)),
        }
    }

    /// The fallback's answer to a withdrawal, counted.
    fn fall_back(&self, local: Option<Withdrawal>) -> bool {
        self.inner.fallbacks.fetch_add(1, Ordering::Relaxed);
        observe::fallback();
        match self.inner.fallback {
            Fallback::Local => local.is_some_and(|w| w.is_granted()),
            Fallback::Refuse => false,
        }
    }

    fn send(
        &self,
        inputs: &[BudgetInput],
        at: Option<retry_core::Instant>,
        reply: impl FnOnce(Result<FleetAnswer, StoreError>) + Send + 'static,
    ) {
        let issued = Instant::now();
        let inner = Arc::clone(&self.inner);
        let ops: Vec<&'static str> = inputs.iter().map(|i| op(*i)).collect();
        let kind = inputs.iter().rev().find_map(|i| match i {
            BudgetInput::Withdraw(k) => Some(*k),
            _ => None,
        });
        let now = at.map_or_else(String::new, |t| (t.as_nanos() / 1_000).to_string());
        let sent = self.inner.io.spawn(move |mut conn| async move {
            let give_up = tokio::time::Instant::from_std(issued + inner.timeout);
            let round_trip = async {
                inner.read_clock_once(&mut conn).await?;
                let deadline = inner
                    .clock
                    .deadline(issued, inner.timeout)
                    .map_or_else(String::new, |d| d.to_string());
                let mut call = SCRIPT.key(&inner.key);
                for a in &inner.fixed {
                    call.arg(a);
                }
                call.arg(now).arg(deadline);
                for op in ops {
                    call.arg(op);
                }
                let sent = Instant::now();
                let value = call
                    .invoke_async::<Value>(&mut conn)
                    .await
                    .map_err(|e| StoreError::from_redis(&e))?;
                inner.parse(&value, kind, sent, Instant::now())
            };
            let answer = match tokio::time::timeout_at(give_up, round_trip).await {
                Ok(answer) => answer,
                Err(_) => Err(inner.timeout_error()),
            };
            reply(answer);
        });
        if !sent {
            self.inner.failed(&StoreError::Stopped);
        }
    }

    fn missing(&self, e: mpsc::RecvTimeoutError) -> StoreError {
        match e {
            mpsc::RecvTimeoutError::Timeout => self.timeout_error(),
            mpsc::RecvTimeoutError::Disconnected => StoreError::Stopped,
        }
    }

    fn timeout_error(&self) -> StoreError {
        self.inner.timeout_error()
    }

    fn note(&self, answer: Result<FleetAnswer, StoreError>) -> Result<FleetAnswer, StoreError> {
        if let Err(e) = &answer {
            self.inner.failed(e);
        }
        answer
    }

    fn lock(&self) -> MutexGuard<'_, Local> {
        self.inner
            .local
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn timeout_error(&self) -> StoreError {
        StoreError::Timeout {
            millis: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn failed(&self, e: &StoreError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        observe::store_error(e);
        self.log
            .log("the fleet budget answers withdrawals from its fallback", e);
    }

    /// Reads the server's clock (for the deadlines), if no reply has yet.
    async fn read_clock_once(&self, conn: &mut Conn) -> Result<(), StoreError> {
        let known = self
            .clock
            .best
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if known {
            return Ok(());
        }
        self.read_clock(conn).await
    }

    async fn read_clock(&self, conn: &mut Conn) -> Result<(), StoreError> {
        let sent = Instant::now();
        let (secs, micros): (u64, u64) = CLOCK
            .key(&self.key)
            .invoke_async(conn)
            .await
            .map_err(|e| StoreError::from_redis(&e))?;
        self.clock.read(
            sent,
            Instant::now(),
            secs.saturating_mul(1_000_000).saturating_add(micros),
        );
        Ok(())
    }

    /// Reads the script's `{0, answer, tokens, cost, server_us, behind_us}`,
    /// `{-2, server_us}` or `{-1, code, detail}`, for a request sent at `sent`
    /// and answered at `received`.
    fn parse(
        &self,
        value: &Value,
        kind: Option<RetryKind>,
        sent: Instant,
        received: Instant,
    ) -> Result<FleetAnswer, StoreError> {
        let garbage = || StoreError::Garbage {
            key: self.key.clone(),
            field: "script reply".to_owned(),
        };
        let Value::Array(items) = value else {
            return Err(garbage());
        };
        let number = |v: &Value| match v {
            Value::Int(n) => u64::try_from(*n).map_err(|_| garbage()),
            _ => Err(garbage()),
        };
        match items.as_slice() {
            [Value::Int(0), answer, tokens, cost, server, behind] => {
                self.clock.read(sent, received, number(server)?);
                let behind = number(behind)?;
                if behind > 0 {
                    let e = StoreError::ClockBehind {
                        key: self.key.clone(),
                        micros: behind,
                    };
                    observe::store_error(&e);
                    self.log
                        .log("the fleet budget goes on from the server's clock", &e);
                }
                let tokens = Tokens::from_millis(number(tokens)?);
                let cost = Tokens::from_millis(number(cost)?);
                let withdrawal = match number(answer)? {
                    0 => None,
                    1 => Some(Withdrawal::Granted { cost, left: tokens }),
                    2 => Some(Withdrawal::Refused {
                        left: tokens,
                        needs: self.needs(kind.unwrap_or_default()),
                    }),
                    _ => return Err(garbage()),
                };
                Ok(FleetAnswer { withdrawal, tokens })
            }
            [Value::Int(-2), server] => {
                self.clock.read(sent, received, number(server)?);
                Err(StoreError::Expired {
                    millis: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
                })
            }
            [Value::Int(-1), code, detail] => Err(StoreError::from_script(
                &self.key,
                &text(code),
                text(detail),
                "hash",
                &self.fingerprint,
            )),
            _ => Err(garbage()),
        }
    }

    /// What a retry of `kind` needs, as the core's budget says it.
    fn needs(&self, kind: RetryKind) -> Requirement {
        match self.params {
            BudgetParameters::Grpc { max, .. } => Requirement::Above(Tokens::from_millis(max / 2)),
            BudgetParameters::Aws {
                retry_cost,
                timeout_cost,
                ..
            } => Requirement::AtLeast(Tokens::from_millis(match kind {
                RetryKind::Failure => retry_cost,
                RetryKind::Timeout => timeout_cost,
            })),
            BudgetParameters::Finagle { withdrawal, .. } => {
                Requirement::AtLeast(Tokens::from_millis(withdrawal))
            }
            _ => Requirement::AtLeast(Tokens::ZERO),
        }
    }
}

/// The script's name for an input.
fn op(input: BudgetInput) -> &'static str {
    match input {
        BudgetInput::FirstAttempt => "F",
        BudgetInput::Failure => "X",
        BudgetInput::Success(AttemptKind::First) => "S",
        BudgetInput::Success(AttemptKind::Retry(RetryKind::Failure)) => "SR",
        BudgetInput::Success(AttemptKind::Retry(RetryKind::Timeout)) => "ST",
        BudgetInput::Withdraw(RetryKind::Failure) => "WR",
        BudgetInput::Withdraw(RetryKind::Timeout) => "WT",
    }
}

impl Budget for FleetBudget {
    fn feed(
        &self,
        machine: &RetryMachine<&RetryPolicy>,
        event: Event,
        action: Action,
        now: Instant,
    ) -> Option<Event> {
        self.step(budget_steps(machine, event, action), now)
            .map(|granted| {
                if granted {
                    Event::Granted
                } else {
                    Event::Refused
                }
            })
    }

    fn feed_hedge(
        &self,
        event: HedgeEvent,
        action: HedgeAction,
        now: Instant,
    ) -> Option<HedgeEvent> {
        self.step(hedge_budget_steps(event, action), now)
            .map(|granted| {
                if granted {
                    HedgeEvent::Granted
                } else {
                    HedgeEvent::Refused
                }
            })
    }
}

impl fmt::Debug for FleetBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBudget")
            .field("key", &self.inner.key)
            .field("fallback", &self.inner.fallback)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}
