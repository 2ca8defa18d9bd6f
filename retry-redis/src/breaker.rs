//! [`FleetBreaker`]: a local circuit breaker that syncs with the fleet's view in
//! Redis every interval.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use redis::Value;
use retry_core::{
    Admission, BreakerConfig, BreakerMetrics, BreakerState, CallOutcome, CircuitBreaker,
    FleetConfig, FleetDecision, FleetMember, FleetView, MemberReport, Permit, Proposal, Transition,
    WindowStats,
};
use retry_shared::{Breaker, Clock as AdapterClock, Gate};

use crate::error::{LogOnce, SetupError, StoreError};
use crate::io::Conn;
use crate::timer::{self, Rearm};
use crate::{check_duration, check_name, observe, text, Fleet, FORMAT};

static SYNC: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("lua/sync.lua")));
static DECIDE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("lua/decide.lua")));
static CLAIM: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("lua/claim.lua")));

/// How long a closed decision (and an open one, past its period) stays in Redis.
const DECISION_TTL: Duration = Duration::from_secs(3600);

/// What the sync script read: the server's clock (ms), the raw decision, the
/// view's sums (members, open members, summed window) under the decision's
/// epoch, and whether an earlier report of this member's was garbage.
struct SyncReply {
    server_ms: u64,
    decision: String,
    members: u32,
    open_members: u32,
    window: WindowStats,
    garbage: bool,
}

/// A hook told about every state change of a fleet breaker.
type TransitionHook = dyn Fn(&Transition) + Send + Sync;

/// Builds a [`FleetBreaker`]; start with [`Fleet::breaker`].
#[must_use]
pub struct FleetBreakerBuilder {
    fleet: Fleet,
    name: String,
    config: BreakerConfig,
    fleet_config: FleetConfig,
    on_transition: Option<Arc<TransitionHook>>,
    automatic: bool,
}

impl fmt::Debug for FleetBreakerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBreakerBuilder")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("fleet_config", &self.fleet_config)
            .finish_non_exhaustive()
    }
}

impl FleetBreakerBuilder {
    pub(crate) fn new(
        fleet: Fleet,
        name: &str,
        config: BreakerConfig,
        fleet_config: FleetConfig,
    ) -> Self {
        FleetBreakerBuilder {
            fleet,
            name: name.to_owned(),
            config,
            fleet_config,
            on_transition: None,
            automatic: false,
        }
    }

    /// Turns on automatic transitions: a task on the connection's runtime
    /// wakes this member's breaker at its next deadline (the end of its open
    /// period, or of its half-open maximum wait), so that it turns half-open
    /// when its open period ends even if no call comes, and the move is
    /// reported (to the [`on_transition`](Self::on_transition) hook and, with
    /// the `tracing` feature, as an event) within one tick of tokio's timer
    /// (1 ms) of the instant. Off by default, as Resilience4j's
    /// `automaticTransitionFromOpenToHalfOpenEnabled`. The fleet's decisions
    /// still arrive with the syncs; the half-open probes are still claimed
    /// fleet-wide.
    pub fn automatic_transitions(mut self) -> Self {
        self.automatic = true;
        self
    }

    /// Calls `hook` with every state change of this member's breaker: those
    /// its own calls cause and those the fleet's decisions cause.
    pub fn on_transition(mut self, hook: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_transition = Some(Arc::new(hook));
        self
    }

    /// Checks the settings, starts syncing, and returns the breaker, with room
    /// for a count window of up to 1,024 calls.
    ///
    /// # Errors
    /// A [`SetupError`]: a bad name, a breaker or fleet config the core
    /// refuses, or a sync interval or claim lifetime out of range.
    pub fn build(self) -> Result<FleetBreaker, SetupError> {
        self.build_with_capacity()
    }

    /// As [`FleetBreakerBuilder::build`], with the capacity the type names
    /// (`WORDS × 64` calls of count window, `BUCKETS` buckets of time window,
    /// and the durations of `DURATIONS` calls, so that a count window of at
    /// most that many reports their total and mean duration in
    /// [`FleetBreaker::metrics`]).
    ///
    /// # Errors
    /// As [`FleetBreakerBuilder::build`].
    pub fn build_with_capacity<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
        self,
    ) -> Result<FleetBreaker<WORDS, BUCKETS, DURATIONS>, SetupError> {
        check_name("name", &self.name)?;
        self.fleet_config
            .validate(&self.config)
            .map_err(SetupError::Fleet)?;
        check_duration("sync_interval", self.fleet_config.interval())?;
        check_duration("claim_ttl", self.fleet_config.claim_lifetime())?;
        let breaker = CircuitBreaker::<WORDS, BUCKETS, DURATIONS>::new(self.config)
            .map_err(SetupError::Breaker)?;
        let prefix = format!("{}:breaker:{{{}}}", self.fleet.namespace, self.name);
        let (rearm, changed) = match self.automatic {
            true => {
                let (rearm, changed) = Rearm::new();
                (Some(rearm), Some(changed))
            }
            false => (None, None),
        };
        let inner = Arc::new(Inner {
            cell: Mutex::new(Cell {
                breaker,
                member: FleetMember::new(self.fleet_config),
            }),
            origin: Instant::now(),
            slow_call_duration: self.config.slow_call_duration(),
            decision_key: format!("{prefix}:decision"),
            claims_key: format!("{prefix}:probes"),
            bucket_prefix: format!("{prefix}:"),
            member_id: self.fleet.member.clone(),
            fleet_config: self.fleet_config,
            on_transition: self.on_transition,
            syncs: AtomicU64::new(0),
            sync_errors: AtomicU64::new(0),
            last: Mutex::new(None),
            clock: Mutex::new(None),
            log: LogOnce::default(),
            timer: rearm,
        });
        if let Some(changed) = changed {
            let weak = Arc::downgrade(&inner);
            self.fleet.io.spawn(move |_| timer::run(weak, changed));
        }
        let weak = Arc::downgrade(&inner);
        self.fleet
            .io
            .spawn(move |conn| sync_loop(weak, conn, self.fleet_config.interval()));
        Ok(FleetBreaker {
            inner,
            fleet: self.fleet,
        })
    }
}

/// A circuit breaker shared by a fleet of processes through Redis.
///
/// Each process keeps its own core [`CircuitBreaker`] and admits calls
/// locally, exactly as a `SharedBreaker` does (no round trip per call). Every
/// sync interval (default 250 ms) a background task adds this member's window
/// and whether its breaker opened on its own into the fleet's sums for the
/// interval (one script, whose cost does not grow with the number of
/// members), reads the sums back, and hands the view to
/// [`retry_core::FleetMember`], which decides:
///
/// - **quorum rule** ([`FleetRule::Quorum`](retry_core::FleetRule::Quorum),
///   [`FleetRule::Fraction`](retry_core::FleetRule::Fraction)): the fleet opens
///   when at least that many members opened on their own, so one bad member
///   cannot open the others;
/// - **aggregate rule** ([`FleetRule::Aggregate`](retry_core::FleetRule::Aggregate)):
///   the fleet opens when the members' windows, summed, cross the breaker's
///   rate thresholds.
///
/// An open decision is published with its end (compare-and-set on the
/// decision's epoch, so two members deciding at once publish one decision),
/// and every member opens until then at its next sync. After it, the fleet is
/// half-open: at most [`FleetConfig::probes`] probes run fleet-wide, claimed in
/// Redis with a lifetime (a member that crashed mid-probe frees its claim), and
/// their verdict, published the same way, closes or re-opens every member.
///
/// If Redis is down or holds bad data, syncs fail (counted, each kind of error
/// logged once) and the member decides alone until they succeed again; no call
/// ever waits on Redis. A member that follows an open fleet decides alone too
/// once it has missed [`FleetConfig::missed_syncs`] syncs (default 2): its own
/// breaker then answers, without the fleet's probe gate, so it admits calls
/// again within two sync intervals plus the rest of the fleet's open period.
/// A script that Redis runs after its timeout (Redis was stopped, say) applies
/// nothing.
///
/// Keys (the braces are part of them, the cluster hash tag):
/// `<namespace>:breaker:{<name>}:decision`, `…:probes`, and per sync interval
/// `…:sums:<bucket>` and `…:reports:<bucket>` (each member's own report, which
/// only that member reads back), expiring when the interval after next starts,
/// so a breaker has at most six keys however long it runs.
#[derive(Clone)]
pub struct FleetBreaker<
    const WORDS: usize = 16,
    const BUCKETS: usize = 0,
    const DURATIONS: usize = 0,
> {
    inner: Arc<Inner<WORDS, BUCKETS, DURATIONS>>,
    /// Keeps the connection open while the breaker lives.
    fleet: Fleet,
}

struct Inner<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> {
    cell: Mutex<Cell<WORDS, BUCKETS, DURATIONS>>,
    origin: Instant,
    slow_call_duration: Duration,
    decision_key: String,
    claims_key: String,
    bucket_prefix: String,
    member_id: String,
    fleet_config: FleetConfig,
    on_transition: Option<Arc<TransitionHook>>,
    syncs: AtomicU64,
    sync_errors: AtomicU64,
    last: Mutex<Option<SyncReport>>,
    /// The server's clock as the latest reply read it, for deadlines.
    clock: Mutex<Option<Clock>>,
    log: LogOnce,
    /// With automatic transitions on, tells the timer task of each transition.
    timer: Option<Rearm>,
}

struct Cell<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> {
    breaker: CircuitBreaker<WORDS, BUCKETS, DURATIONS>,
    member: FleetMember,
}

/// What the latest successful sync read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncReport {
    /// When the sync read the view.
    pub at: Instant,
    /// The view, in this member's time.
    pub view: FleetView,
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    FleetBreaker<WORDS, BUCKETS, DURATIONS>
{
    /// This member's breaker state.
    #[must_use]
    pub fn state(&self) -> BreakerState {
        self.lock().breaker.state()
    }

    /// This member's breaker as a dashboard shows it now, read from the system
    /// clock ([`FleetBreaker::metrics_at`] with `Instant::now()`).
    #[must_use]
    pub fn metrics(&self) -> BreakerMetrics {
        self.metrics_at(Instant::now())
    }

    /// This member's breaker as a dashboard shows it at `now`.
    #[must_use]
    pub fn metrics_at(&self, now: Instant) -> BreakerMetrics {
        let at = self.inner.at(now);
        self.lock().breaker.metrics(at)
    }

    /// Whether this member's breaker is open (or half-open) because the fleet
    /// is.
    #[must_use]
    pub fn is_following(&self) -> bool {
        self.lock().member.is_following()
    }

    /// Whether this member, following the fleet, decides alone now: it has
    /// missed its syncs (see [`retry_core::FleetMember::decides_alone`]).
    #[must_use]
    pub fn decides_alone(&self) -> bool {
        let at = self.inner.at(Instant::now());
        self.lock().member.decides_alone(at)
    }

    /// The epoch of the latest fleet decision this member applied.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.lock().member.epoch()
    }

    /// Syncs that completed.
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.inner.syncs.load(Ordering::Relaxed)
    }

    /// Syncs that failed (Redis down or slow, or bad data): the member decided
    /// alone meanwhile.
    #[must_use]
    pub fn sync_errors(&self) -> u64 {
        self.inner.sync_errors.load(Ordering::Relaxed)
    }

    /// How many errors were logged (each kind once).
    #[must_use]
    pub fn logged(&self) -> u32 {
        self.inner.log.count()
    }

    /// What the latest successful sync read.
    #[must_use]
    pub fn last_sync(&self) -> Option<SyncReport> {
        *self
            .inner
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// This member's id.
    #[must_use]
    pub fn member_id(&self) -> &str {
        self.fleet.member_id()
    }

    /// The next instant at which this member's breaker changes state on its
    /// own, with no call (the end of its open period, or of its half-open
    /// maximum wait), if it has one.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        timer::Timed::next_deadline(&*self.inner)
    }

    /// The Redis key holding the fleet's decision.
    #[must_use]
    pub fn decision_key(&self) -> &str {
        &self.inner.decision_key
    }

    /// The Redis key holding the fleet's half-open probe claims.
    #[must_use]
    pub fn probes_key(&self) -> &str {
        &self.inner.claims_key
    }

    fn lock(&self) -> MutexGuard<'_, Cell<WORDS, BUCKETS, DURATIONS>> {
        self.inner.lock()
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    Inner<WORDS, BUCKETS, DURATIONS>
{
    fn lock(&self) -> MutexGuard<'_, Cell<WORDS, BUCKETS, DURATIONS>> {
        // The breaker and member are plain values updated by whole assignments
        // in the core: a panic elsewhere cannot leave them half-written.
        self.cell.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn at(&self, now: Instant) -> retry_core::Instant {
        retry_core::Instant::from_duration(now.saturating_duration_since(self.origin))
    }

    fn instant(&self, at: retry_core::Instant) -> Option<Instant> {
        self.origin.checked_add(at.as_duration())
    }

    fn tell(&self, transition: Option<Transition>) {
        if let Some(t) = transition {
            #[cfg(feature = "tracing")]
            tracing::info!(
                from = t.from.name(),
                to = t.to.name(),
                cause = t.cause.code(),
                "fleet breaker changed state"
            );
            observe::transition(&t);
            if let Some(hook) = &self.on_transition {
                hook(&t);
            }
            if let Some(timer) = &self.timer {
                timer.notify();
            }
        }
    }

    fn failed(&self, e: &StoreError) {
        self.lock().member.sync_failed();
        self.sync_errors.fetch_add(1, Ordering::Relaxed);
        observe::sync(false);
        observe::store_error(e);
        self.log
            .log("the fleet breaker decides alone until a sync succeeds", e);
    }

    /// The server's time (ms) by which a script sent at `now` must run, or
    /// not at all: `timeout` later, on the clock the latest reply read (none
    /// before the first reply).
    fn deadline(&self, now: retry_core::Instant, timeout: Duration) -> String {
        let clock = *self.clock.lock().unwrap_or_else(PoisonError::into_inner);
        clock.map_or_else(String::new, |c| {
            c.server(now.saturating_add(timeout)).to_string()
        })
    }

    fn set_clock(&self, clock: Clock) {
        *self.clock.lock().unwrap_or_else(PoisonError::into_inner) = Some(clock);
    }

    /// One sync: publish and read, let the core decide, send what it asks.
    async fn sync(&self, conn: &mut Conn) -> Result<(), StoreError> {
        let timeout = self.fleet_config.interval();
        let now = Instant::now();
        let at = self.at(now);
        let report = {
            let cell = self.lock();
            cell.member.report(&cell.breaker, at)
        };
        let mut call = SYNC.key(&self.decision_key);
        call.arg(&self.member_id)
            .arg(encode_report(&report))
            .arg(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
            .arg(&self.bucket_prefix)
            .arg(self.deadline(at, timeout));
        let reply = bounded(timeout, call.invoke_async::<Value>(conn)).await?;
        let read = self.parse_sync(&reply)?;
        // The server's clock at the start of the sync, for the decision's times
        // (as every member maps them); for deadlines, at the reply, which errs
        // on the early side.
        let clock = Clock {
            server_ms: read.server_ms,
            local: at,
        };
        self.set_clock(Clock {
            server_ms: read.server_ms,
            local: self.at(Instant::now()),
        });
        if read.garbage {
            let e = StoreError::Garbage {
                key: self.bucket_prefix.clone(),
                field: "member report".to_owned(),
            };
            observe::store_error(&e);
            self.log.log("the fleet breaker leaves the report out", &e);
        }
        let decision = match read.decision.as_str() {
            "" => FleetDecision::CLOSED,
            raw => parse_decision(raw, &self.decision_key, &clock)?,
        };
        let view = FleetView {
            members: read.members,
            open_members: read.open_members,
            window: read.window,
            decision,
        };
        let sync = {
            let mut cell = self.lock();
            let Cell { breaker, member } = &mut *cell;
            member.sync(breaker, &view, at)
        };
        self.tell(sync.transition);
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(SyncReport { at: now, view });
        if let Some(proposal) = sync.proposal {
            let (kind, until_ms) = match proposal {
                Proposal::Open { until } => ("open", clock.server(until)),
                Proposal::Close => ("close", 0),
            };
            let mut call = DECIDE.key(&self.decision_key);
            call.key(&self.claims_key)
                .arg(sync.seen_epoch)
                .arg(kind)
                .arg(until_ms)
                .arg(u64::try_from(DECISION_TTL.as_millis()).unwrap_or(u64::MAX))
                .arg(self.deadline(at, timeout));
            let reply = bounded(timeout, call.invoke_async::<Value>(conn)).await?;
            let raw = match reply_items(&reply).as_deref() {
                Some([Value::Int(0 | 1), raw]) => text(raw),
                _ => return Err(self.script_error(&reply)),
            };
            let decision = match raw.as_str() {
                "" => FleetDecision::CLOSED,
                raw => parse_decision(raw, &self.decision_key, &clock)?,
            };
            let transition = {
                let mut cell = self.lock();
                let Cell { breaker, member } = &mut *cell;
                member.apply(breaker, decision, at)
            };
            self.tell(transition);
        }
        if sync.claim > 0 {
            let mut call = CLAIM.key(&self.claims_key);
            call.key(&self.decision_key)
                .arg(&self.member_id)
                .arg(sync.claim)
                .arg(self.fleet_config.probe_limit())
                .arg(
                    u64::try_from(self.fleet_config.claim_lifetime().as_millis())
                        .unwrap_or(u64::MAX),
                )
                .arg(sync.seen_epoch)
                .arg(self.deadline(at, timeout));
            let reply = bounded(timeout, call.invoke_async::<Value>(conn)).await?;
            let granted = match reply_items(&reply).as_deref() {
                Some([Value::Int(0), Value::Int(n)]) => u32::try_from(*n).unwrap_or(0),
                _ => return Err(self.script_error(&reply)),
            };
            self.lock().member.on_claimed(granted, at);
        }
        Ok(())
    }

    /// `{0, now_ms, decision, members, open, calls, failures, slow,
    /// slow_failures, garbage}`.
    fn parse_sync(&self, reply: &Value) -> Result<SyncReply, StoreError> {
        let Some(items) = reply_items(reply) else {
            return Err(self.script_error(reply));
        };
        let [Value::Int(0), Value::Int(now), decision, sums @ ..] = items.as_slice() else {
            return Err(self.script_error(reply));
        };
        // A sum as the hash holds it: digits (a missing one, '', is zero; a
        // negative one, left by bad data, counts as zero; the numbers saturate).
        let count = |v: &Value| -> Option<u32> {
            let n = match v {
                Value::Int(n) => *n,
                Value::BulkString(b) if b.is_empty() => 0,
                Value::BulkString(b) => core::str::from_utf8(b).ok()?.parse::<i64>().ok()?,
                _ => return None,
            };
            Some(u32::try_from(n.max(0)).unwrap_or(u32::MAX))
        };
        let sums: Option<Vec<u32>> = sums.iter().map(count).collect();
        let Some([members, open_members, calls, failures, slow, slow_failures, garbage]) =
            sums.as_deref()
        else {
            return Err(StoreError::Garbage {
                key: self.bucket_prefix.clone(),
                field: "sums".to_owned(),
            });
        };
        let window = WindowStats {
            calls: *calls,
            failures: *failures,
            slow: *slow,
            slow_failures: *slow_failures,
        };
        if window.failures > window.calls
            || window.slow > window.calls
            || window.slow_failures > window.slow.min(window.failures)
            || open_members > members
        {
            return Err(StoreError::Garbage {
                key: self.bucket_prefix.clone(),
                field: "sums".to_owned(),
            });
        }
        Ok(SyncReply {
            server_ms: u64::try_from(*now).unwrap_or(0),
            decision: text(decision),
            members: *members,
            open_members: *open_members,
            window,
            garbage: *garbage != 0,
        })
    }

    /// The typed error of a script's `{-1, code, type, key}` or `{-2, now}`
    /// (refused: it ran after its deadline), or of a reply this crate does not
    /// know.
    fn script_error(&self, reply: &Value) -> StoreError {
        match reply_items(reply).as_deref() {
            Some([Value::Int(-1), code, found, key]) if text(code) == "wrong_type" => {
                StoreError::WrongType {
                    key: text(key),
                    found: text(found),
                    expected: "hash, string or sorted set",
                }
            }
            Some([Value::Int(-1), _, field, key]) => StoreError::Garbage {
                key: text(key),
                field: text(field),
            },
            Some([Value::Int(-2), Value::Int(now)]) => {
                // The server's clock as it read it now (if this member's idea
                // of it was off, the next deadline is right).
                self.set_clock(Clock {
                    server_ms: u64::try_from(*now).unwrap_or(0),
                    local: self.at(Instant::now()),
                });
                StoreError::Expired {
                    millis: u64::try_from(self.fleet_config.interval().as_millis())
                        .unwrap_or(u64::MAX),
                }
            }
            _ => StoreError::Garbage {
                key: self.decision_key.clone(),
                field: "script reply".to_owned(),
            },
        }
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> timer::Timed
    for Inner<WORDS, BUCKETS, DURATIONS>
{
    fn next_deadline(&self) -> Option<Instant> {
        let deadline = self.lock().breaker.next_deadline();
        deadline.and_then(|at| self.instant(at))
    }

    fn wake_at(&self, now: Instant) -> Option<Transition> {
        let at = self.at(now);
        let transition = self.lock().breaker.wake(at);
        self.tell(transition);
        transition
    }
}

/// The background task: one sync per interval while the breaker lives.
async fn sync_loop<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
    weak: Weak<Inner<WORDS, BUCKETS, DURATIONS>>,
    mut conn: Conn,
    interval: Duration,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        match inner.sync(&mut conn).await {
            Ok(()) => {
                inner.syncs.fetch_add(1, Ordering::Relaxed);
                observe::sync(true);
            }
            Err(e) => inner.failed(&e),
        }
    }
}

async fn bounded<T>(
    timeout: Duration,
    call: impl core::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(StoreError::from_redis(&e)),
        Err(_) => Err(StoreError::Timeout {
            millis: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }),
    }
}

/// The server's clock at the moment this member's clock read `local`.
#[derive(Clone, Copy, Debug)]
struct Clock {
    server_ms: u64,
    local: retry_core::Instant,
}

impl Clock {
    /// A server time in this member's time.
    fn local(&self, server_ms: u64) -> retry_core::Instant {
        let ahead = server_ms.saturating_sub(self.server_ms);
        self.local.saturating_add(Duration::from_millis(ahead))
    }

    /// This member's time on the server's clock (rounded up to a millisecond).
    fn server(&self, at: retry_core::Instant) -> u64 {
        let ahead = at.saturating_duration_since(self.local);
        let ms = u64::try_from(ahead.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
        self.server_ms.saturating_add(ms)
    }
}

/// `1|open|epoch|calls|failures|slow|slow_failures`.
fn encode_report(r: &MemberReport) -> String {
    let w = &r.window;
    format!(
        "{FORMAT}|{}|{}|{}|{}|{}|{}",
        u8::from(r.open),
        r.epoch,
        w.calls,
        w.failures,
        w.slow,
        w.slow_failures
    )
}

/// `1|closed|epoch` or `1|open|until_ms|epoch`.
fn parse_decision(raw: &str, key: &str, clock: &Clock) -> Result<FleetDecision, StoreError> {
    let garbage = || StoreError::Garbage {
        key: key.to_owned(),
        field: "value".to_owned(),
    };
    let parts: Vec<&str> = raw.split('|').collect();
    check_version(parts.first().copied(), key, garbage)?;
    let num = |s: &str| s.parse::<u64>().map_err(|_| garbage());
    match parts.as_slice() {
        [_, "closed", epoch] => Ok(FleetDecision::Closed { epoch: num(epoch)? }),
        [_, "open", until, epoch] => Ok(FleetDecision::Open {
            until: clock.local(num(until)?),
            epoch: num(epoch)?,
        }),
        _ => Err(garbage()),
    }
}

/// The format version in front of every value: this crate's, or an error.
fn check_version(
    part: Option<&str>,
    key: &str,
    garbage: impl Fn() -> StoreError,
) -> Result<(), StoreError> {
    match part.map(str::parse::<u32>) {
        Some(Ok(v)) if v == FORMAT => Ok(()),
        Some(Ok(v)) if v > FORMAT => Err(StoreError::FutureFormat {
            key: key.to_owned(),
            found: v.to_string(),
            supported: FORMAT,
        }),
        _ => Err(garbage()),
    }
}

fn reply_items(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(items) => Some(items.clone()),
        _ => None,
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> Breaker
    for FleetBreaker<WORDS, BUCKETS, DURATIONS>
{
    fn request(&self, clock: &dyn AdapterClock) -> Gate {
        let at = self.inner.at(clock.now());
        let (gate, transition) = {
            let mut cell = self.lock();
            let Cell { breaker, member } = &mut *cell;
            match member.request(breaker, at) {
                Admission::Admitted { permit, transition } => (Gate::Admitted(permit), transition),
                Admission::Rejected {
                    until, transition, ..
                } => (
                    Gate::Rejected {
                        until: until.and_then(|u| self.inner.instant(u)),
                    },
                    transition,
                ),
            }
        };
        self.inner.tell(transition);
        gate
    }

    fn record(&self, permit: Permit, outcome: CallOutcome, clock: &dyn AdapterClock) {
        let at = self.inner.at(clock.now());
        let recorded = self.lock().breaker.record(permit, outcome, at);
        self.inner.tell(recorded.transition);
    }

    fn release(&self, permit: Permit, clock: &dyn AdapterClock) {
        let at = self.inner.at(clock.now());
        self.lock().breaker.release(permit, at);
    }

    fn slow_call_duration(&self) -> Duration {
        self.inner.slow_call_duration
    }

    /// Always: the fleet's breaker is judged on its members' clocks.
    fn times_calls(&self) -> bool {
        true
    }
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> fmt::Debug
    for FleetBreaker<WORDS, BUCKETS, DURATIONS>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetBreaker")
            .field("decision_key", &self.inner.decision_key)
            .field("member", &self.inner.member_id)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}
