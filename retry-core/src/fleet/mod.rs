//! One breaker view for a fleet of processes: what each process publishes, the
//! two rules that open the whole fleet, and what a process does with the view it
//! reads back, as pure transitions on its local [`CircuitBreaker`].
//!
//! Every process keeps its own breaker and admits calls locally. Every sync
//! interval an adapter publishes the process's [`MemberReport`] to a shared
//! store, reads the fleet's [`FleetView`] back (the members' reports summed and
//! the published [`FleetDecision`]) and calls [`FleetMember::sync`]. The member
//! answers with what to write back (a [`Proposal`] to open or close the fleet,
//! accepted by the store only if no other decision was published since, and how
//! many half-open probes to claim), and applies the decision to the local
//! breaker with its operator states ([`ManualState::OpenUntil`],
//! [`ManualState::Closed`]).
//!
//! The store only stores: it publishes a proposal if its epoch is still the
//! one the proposer saw, and hands out at most [`FleetConfig::probes`] probe
//! claims at a time. Times are the member's own [`Instant`]s: the adapter
//! translates the store's clock.
//!
//! A member whose store is away decides alone, also while it follows an open
//! fleet: once it has missed [`FleetConfig::missed_syncs`] syncs in a row
//! (that many failed, or that many sync intervals passed without one
//! completing, as when the store hangs), the fleet's probe gate no longer
//! applies and its own breaker decides (see [`FleetMember::decides_alone`]).

use core::fmt;
use core::time::Duration;

use crate::breaker::{
    Admission, BreakerConfig, BreakerState, CircuitBreaker, ManualState, Rate, RejectReason,
    Transition, WindowStats,
};
use crate::Instant;

/// When the fleet opens every member's breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FleetRule {
    /// When at least this many members have opened their own breaker: one bad
    /// member cannot open the others.
    Quorum(u32),
    /// When at least this fraction of the members seen have opened their own
    /// breaker (and at least one has).
    Fraction(Rate),
    /// When the members' windows, summed, reach the breaker's failure-rate or
    /// slow-call-rate threshold (with at least `minimum_calls` calls in all).
    Aggregate,
}

impl fmt::Display for FleetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetRule::Quorum(n) => write!(f, "quorum of {n}"),
            FleetRule::Fraction(r) => write!(f, "quorum of {r} of the members"),
            FleetRule::Aggregate => f.write_str("aggregate window"),
        }
    }
}

/// Why a [`FleetConfig`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FleetError {
    /// A quorum of zero members would open the fleet with nobody failing.
    ZeroQuorum,
    /// A fraction that is zero or above 100 %.
    FractionOutOfRange {
        /// The fraction, in basis points.
        basis_points: u16,
    },
    /// The aggregate rule needs the breaker to have a failure-rate or
    /// slow-call-rate rule (and so a window).
    AggregateNeedsRate,
    /// The fleet must allow at least one half-open probe.
    ZeroProbes,
    /// The sync interval or the probe claim's lifetime is zero.
    ZeroDuration {
        /// The field's name.
        field: &'static str,
    },
    /// A member must be allowed to miss at least one sync before it decides
    /// alone.
    ZeroMissedSyncs,
}

impl FleetError {
    /// A stable dotted code for logs and metrics.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            FleetError::ZeroQuorum => "fleet.zero_quorum",
            FleetError::FractionOutOfRange { .. } => "fleet.fraction_out_of_range",
            FleetError::AggregateNeedsRate => "fleet.aggregate_needs_rate",
            FleetError::ZeroProbes => "fleet.zero_probes",
            FleetError::ZeroDuration { .. } => "fleet.zero_duration",
            FleetError::ZeroMissedSyncs => "fleet.zero_missed_syncs",
        }
    }
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetError::ZeroQuorum => f.write_str("quorum: must be at least 1 member"),
            FleetError::FractionOutOfRange { basis_points } => write!(
                f,
                "fraction: {} must be above 0% and at most 100%",
                Rate::from_basis_points(*basis_points)
            ),
            FleetError::AggregateNeedsRate => f.write_str(
                "rule: the aggregate rule needs a breaker with a failure-rate or slow-call-rate rule",
            ),
            FleetError::ZeroProbes => f.write_str("probes: must be at least 1"),
            FleetError::ZeroDuration { field } => write!(f, "{field}: must not be zero"),
            FleetError::ZeroMissedSyncs => f.write_str("missed_syncs: must be at least 1"),
        }
    }
}

impl core::error::Error for FleetError {}

/// How a fleet shares a breaker: the [`FleetRule`], the half-open probes
/// allowed fleet-wide, how often members sync, how long a probe claim lives
/// (so a member that crashed mid-probe frees its claim), and how many syncs a
/// member may miss before it decides alone.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BasicRule, BreakerConfig, FleetConfig, FleetRule};
///
/// let fleet = FleetConfig::new(FleetRule::Quorum(2)).probes(3).sync_interval(Duration::from_millis(100));
/// fleet.validate(&BreakerConfig::default())?;
/// assert_eq!(fleet.rule(), FleetRule::Quorum(2));
/// assert!(FleetConfig::new(FleetRule::Aggregate).validate(&BreakerConfig::default()).is_err());
/// # Ok::<(), retry_core::FleetError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FleetConfig {
    rule: FleetRule,
    probes: u32,
    sync_interval: Duration,
    claim_ttl: Duration,
    missed_syncs: u32,
}

impl FleetConfig {
    /// A fleet following `rule`, with one probe fleet-wide, a 250 ms sync
    /// interval, probe claims that last 10 s, and members that decide alone
    /// after missing 2 syncs in a row.
    #[must_use]
    pub const fn new(rule: FleetRule) -> FleetConfig {
        FleetConfig {
            rule,
            probes: 1,
            sync_interval: Duration::from_millis(250),
            claim_ttl: Duration::from_secs(10),
            missed_syncs: 2,
        }
    }

    /// The half-open probes allowed in flight across the whole fleet.
    #[must_use]
    pub const fn probes(mut self, n: u32) -> FleetConfig {
        self.probes = n;
        self
    }

    /// How often members publish and read the fleet's view.
    #[must_use]
    pub const fn sync_interval(mut self, interval: Duration) -> FleetConfig {
        self.sync_interval = interval;
        self
    }

    /// How long a probe claim lasts unless its member renews or frees it.
    #[must_use]
    pub const fn claim_ttl(mut self, ttl: Duration) -> FleetConfig {
        self.claim_ttl = ttl;
        self
    }

    /// How many syncs in a row a member may miss (fail, or not complete
    /// within as many sync intervals) before it decides alone, its own breaker
    /// answering without the fleet's probe gate. A member that follows an open
    /// fleet and loses its store admits calls again within this many sync
    /// intervals plus the rest of the fleet's open period.
    #[must_use]
    pub const fn missed_syncs(mut self, n: u32) -> FleetConfig {
        self.missed_syncs = n;
        self
    }

    /// The syncs a member may miss before it decides alone.
    #[must_use]
    pub const fn missed_sync_limit(&self) -> u32 {
        self.missed_syncs
    }

    /// The rule.
    #[must_use]
    pub const fn rule(&self) -> FleetRule {
        self.rule
    }

    /// The probes allowed fleet-wide.
    #[must_use]
    pub const fn probe_limit(&self) -> u32 {
        self.probes
    }

    /// The sync interval.
    #[must_use]
    pub const fn interval(&self) -> Duration {
        self.sync_interval
    }

    /// The probe claim's lifetime.
    #[must_use]
    pub const fn claim_lifetime(&self) -> Duration {
        self.claim_ttl
    }

    /// Checks the config against the breaker each member runs.
    ///
    /// # Errors
    /// The first field that is wrong, as a [`FleetError`].
    pub fn validate(&self, breaker: &BreakerConfig) -> Result<(), FleetError> {
        match self.rule {
            FleetRule::Quorum(0) => return Err(FleetError::ZeroQuorum),
            FleetRule::Fraction(r) if r.basis_points() == 0 || r > Rate::FULL => {
                return Err(FleetError::FractionOutOfRange {
                    basis_points: r.basis_points(),
                })
            }
            FleetRule::Aggregate
                if breaker.window().is_none()
                    || (breaker.failure_rate().is_none() && breaker.slow_call_rate().is_none()) =>
            {
                return Err(FleetError::AggregateNeedsRate)
            }
            _ => {}
        }
        if self.probes == 0 {
            return Err(FleetError::ZeroProbes);
        }
        if self.sync_interval.is_zero() {
            return Err(FleetError::ZeroDuration {
                field: "sync_interval",
            });
        }
        if self.claim_ttl.is_zero() {
            return Err(FleetError::ZeroDuration { field: "claim_ttl" });
        }
        if self.missed_syncs == 0 {
            return Err(FleetError::ZeroMissedSyncs);
        }
        Ok(())
    }

    /// Whether `view` opens the fleet under this config's rule, for members
    /// running `breaker`.
    ///
    /// ```
    /// use retry_core::{BasicRule, BreakerConfig, FleetConfig, FleetDecision, FleetRule, FleetView, WindowStats};
    ///
    /// let view = |open| FleetView { members: 3, open_members: open, window: WindowStats::default(), decision: FleetDecision::CLOSED };
    /// let fleet = FleetConfig::new(FleetRule::Quorum(2));
    /// assert!(!fleet.trips(&BreakerConfig::default(), &view(1)));
    /// assert!(fleet.trips(&BreakerConfig::default(), &view(2)));
    /// ```
    #[must_use]
    pub fn trips(&self, breaker: &BreakerConfig, view: &FleetView) -> bool {
        match self.rule {
            FleetRule::Quorum(n) => n > 0 && view.open_members >= n,
            FleetRule::Fraction(r) => {
                view.open_members > 0 && r.is_reached(view.open_members, view.members)
            }
            FleetRule::Aggregate => {
                let w = &view.window;
                if w.calls == 0 || w.calls < breaker.minimum_calls() {
                    return false;
                }
                breaker
                    .failure_rate()
                    .is_some_and(|r| r.is_reached(w.failures, w.calls))
                    || breaker
                        .slow_call_rate()
                        .is_some_and(|r| r.is_reached(w.slow, w.calls))
            }
        }
    }
}

/// What one member publishes every sync interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MemberReport {
    /// Whether the member's breaker opened on its own (open or half-open, and
    /// not because the fleet said so).
    pub open: bool,
    /// What the member's window holds.
    pub window: WindowStats,
    /// The epoch of the fleet decision the member had applied when it made the
    /// report: a report made under an earlier decision (before the fleet closed,
    /// say) is not counted under a later one.
    pub epoch: u64,
}

impl FleetView {
    /// The view of `reports` (one per member, the newest) under `decision`:
    /// every member counts towards [`FleetView::members`]; only the reports
    /// made under this decision count towards the open members and the summed
    /// window, so that a report from before the fleet last changed (still in
    /// the store for an interval or two) cannot trip it again.
    ///
    /// ```
    /// use retry_core::{FleetDecision, FleetView, MemberReport, WindowStats};
    ///
    /// let open = |epoch| MemberReport { open: true, window: WindowStats::default(), epoch };
    /// let view = FleetView::of([open(7), open(9)], FleetDecision::Closed { epoch: 9 });
    /// assert_eq!((view.members, view.open_members), (2, 1));
    /// ```
    #[must_use]
    pub fn of(
        reports: impl IntoIterator<Item = MemberReport>,
        decision: FleetDecision,
    ) -> FleetView {
        let mut view = FleetView {
            members: 0,
            open_members: 0,
            window: WindowStats::default(),
            decision,
        };
        for r in reports {
            view.members = view.members.saturating_add(1);
            if r.epoch != decision.epoch() {
                continue;
            }
            view.open_members = view.open_members.saturating_add(u32::from(r.open));
            let w = &mut view.window;
            w.calls = w.calls.saturating_add(r.window.calls);
            w.failures = w.failures.saturating_add(r.window.failures);
            w.slow = w.slow.saturating_add(r.window.slow);
            w.slow_failures = w.slow_failures.saturating_add(r.window.slow_failures);
        }
        view
    }
}

/// The decision published for the whole fleet. Every new decision has a
/// larger epoch; a store that has none reads as [`FleetDecision::CLOSED`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FleetDecision {
    /// The fleet is closed: members decide alone.
    Closed {
        /// The decision's epoch.
        epoch: u64,
    },
    /// The fleet is open until `until` (in the reading member's time); after
    /// that it is half-open and probes, claimed fleet-wide, decide.
    Open {
        /// When the open period ends.
        until: Instant,
        /// The decision's epoch.
        epoch: u64,
    },
}

impl FleetDecision {
    /// What a store with no decision holds.
    pub const CLOSED: FleetDecision = FleetDecision::Closed { epoch: 0 };

    /// The decision's epoch.
    #[must_use]
    pub const fn epoch(&self) -> u64 {
        match self {
            FleetDecision::Closed { epoch } | FleetDecision::Open { epoch, .. } => *epoch,
        }
    }
}

/// What a member reads back from the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FleetView {
    /// Members that published recently (the reader included).
    pub members: u32,
    /// Of those, members whose breaker opened on its own.
    pub open_members: u32,
    /// The members' windows, summed.
    pub window: WindowStats,
    /// The published decision.
    pub decision: FleetDecision,
}

/// A decision a member asks the store to publish, if the store's epoch is still
/// the one the member read (then the store publishes it with the next epoch,
/// and frees every probe claim).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proposal {
    /// Open the fleet until this instant.
    Open {
        /// The end of the open period.
        until: Instant,
    },
    /// Close the fleet: the probes passed.
    Close,
}

/// What a member asks of the store after [`FleetMember::sync`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[must_use = "the proposal and the claim must be sent to the store"]
pub struct FleetSync {
    /// Publish this decision if the store's epoch is still `seen_epoch`.
    pub proposal: Option<Proposal>,
    /// The epoch the proposal is based on.
    pub seen_epoch: u64,
    /// Probe slots to claim (after freeing this member's earlier claims).
    pub claim: u32,
    /// What the sync did to the local breaker, if anything (report it).
    pub transition: Option<Transition>,
}

/// One member's side of the fleet: the epoch of the decision it follows, whether
/// its breaker is open because of the fleet, the probe slots it claimed, and
/// when it last completed a sync. Small and `Copy`; the adapter keeps it beside
/// the breaker, under the same lock.
///
/// A sync completes when the member has read the fleet's view and, if it asked
/// for probe slots, the store's answer to the claim ([`FleetMember::sync`] with
/// no claim to make, or [`FleetMember::on_claimed`]). The adapter reports a
/// sync that failed (the store away or slow, bad data) with
/// [`FleetMember::sync_failed`].
///
/// ```
/// use core::time::Duration;
/// use retry_core::{BasicRule, BreakerConfig, BreakerState, CircuitBreaker, FleetConfig, FleetDecision, FleetMember, FleetRule, FleetView, Instant, Proposal, WindowStats};
///
/// let config = BreakerConfig::basic(BasicRule {
///     failure_threshold: 3,
///     open_duration: Duration::from_secs(30),
///     success_threshold: 1,
/// })?;
/// let mut breaker = CircuitBreaker::<0, 0>::new(config)?;
/// let mut member = FleetMember::new(FleetConfig::new(FleetRule::Quorum(2)));
/// let now = Instant::from_secs(1);
/// // Two members opened on their own: this one proposes to open the fleet.
/// let view = FleetView { members: 3, open_members: 2, window: WindowStats::default(), decision: FleetDecision::CLOSED };
/// let sync = member.sync(&mut breaker, &view, now);
/// assert_eq!(sync.proposal, Some(Proposal::Open { until: Instant::from_secs(31) }));
/// // The store published it (epoch 1): the member follows.
/// let decision = FleetDecision::Open { until: Instant::from_secs(31), epoch: 1 };
/// let _ = member.apply(&mut breaker, decision, now);
/// assert_eq!(breaker.state(), BreakerState::Open);
/// assert!(member.is_following());
/// # Ok::<(), retry_core::BreakerError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FleetMember {
    config: FleetConfig,
    epoch: u64,
    following: bool,
    tickets: u32,
    /// When the claimed slots lapse (the store frees them then).
    tickets_until: Instant,
    /// The end of the open period the fleet put the breaker in: a breaker open
    /// until another instant re-opened on its own (a probe failed).
    held_until: Instant,
    /// Syncs failed since the last one completed.
    failed_syncs: u32,
    /// When the last sync completed (or a newer decision was applied).
    synced_at: Instant,
}

impl FleetMember {
    /// A member that has seen no decision yet.
    #[must_use]
    pub const fn new(config: FleetConfig) -> FleetMember {
        FleetMember {
            config,
            epoch: 0,
            following: false,
            tickets: 0,
            tickets_until: Instant::ORIGIN,
            held_until: Instant::ORIGIN,
            failed_syncs: 0,
            synced_at: Instant::ORIGIN,
        }
    }

    /// The fleet config.
    #[must_use]
    pub const fn config(&self) -> &FleetConfig {
        &self.config
    }

    /// The epoch of the latest decision applied.
    #[must_use]
    pub const fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether the local breaker is open (or half-open) because the fleet is.
    #[must_use]
    pub const fn is_following(&self) -> bool {
        self.following
    }

    /// The probe slots claimed and not yet used.
    #[must_use]
    pub const fn tickets(&self) -> u32 {
        self.tickets
    }

    /// Syncs failed in a row since the last one completed.
    #[must_use]
    pub const fn failed_syncs(&self) -> u32 {
        self.failed_syncs
    }

    /// Whether this member, following the fleet, decides alone at `now`: it
    /// has missed [`FleetConfig::missed_sync_limit`] syncs in a row, either
    /// that many failed or that many sync intervals passed since the last one
    /// completed (a store that hangs fails no sync before its timeout). Its own
    /// breaker then answers without the fleet's probe gate: once the fleet's
    /// open period is over it probes on its own, and its verdict goes to the
    /// fleet at the next sync that completes. A member that follows nothing
    /// decides alone anyway; this says `false` for it.
    ///
    /// ```
    /// use core::time::Duration;
    /// use retry_core::{BreakerConfig, CircuitBreaker, FleetConfig, FleetDecision, FleetMember, FleetRule, Instant};
    ///
    /// let config = BreakerConfig::builder().failure_threshold(3).open_duration(Duration::from_secs(1)).build()?;
    /// let mut breaker = CircuitBreaker::<0, 0>::new(config)?;
    /// let mut member = FleetMember::new(FleetConfig::new(FleetRule::Quorum(1)));
    /// let now = Instant::from_secs(1);
    /// let open = FleetDecision::Open { until: Instant::from_secs(2), epoch: 1 };
    /// let _ = member.apply(&mut breaker, open, now);
    /// assert!(!member.decides_alone(now));
    /// // The store is away: two syncs fail.
    /// member.sync_failed();
    /// member.sync_failed();
    /// assert!(member.decides_alone(Instant::from_millis(1_500)));
    /// // After the fleet's open period the breaker probes on its own.
    /// assert!(member.request(&mut breaker, Instant::from_secs(2)).is_admitted());
    /// # Ok::<(), retry_core::BreakerError>(())
    /// ```
    #[must_use]
    pub fn decides_alone(&self, now: Instant) -> bool {
        let limit = self.config.missed_syncs;
        self.following
            && (self.failed_syncs >= limit
                || now
                    >= self
                        .synced_at
                        .saturating_add(self.config.sync_interval.saturating_mul(limit)))
    }

    /// A sync failed (the store away or slow, or bad data in it): counted
    /// towards [`FleetMember::decides_alone`] until a sync completes.
    pub fn sync_failed(&mut self) {
        self.failed_syncs = self.failed_syncs.saturating_add(1);
    }

    /// A sync completed at `now`.
    fn synced(&mut self, now: Instant) {
        self.failed_syncs = 0;
        self.synced_at = self.synced_at.max(now);
    }

    /// What this member publishes at `now`.
    #[must_use]
    pub fn report<const W: usize, const B: usize, const D: usize>(
        &self,
        breaker: &CircuitBreaker<W, B, D>,
        now: Instant,
    ) -> MemberReport {
        let state = breaker.state();
        MemberReport {
            open: !self.following && matches!(state, BreakerState::Open | BreakerState::HalfOpen),
            window: breaker.stats(now),
            epoch: self.epoch,
        }
    }

    /// Asks whether a call may run at `now`: the breaker's answer, except that
    /// while the fleet is half-open a member runs a probe only with a slot it
    /// claimed; without one the call is rejected (`ProbesBusy`, no `until`:
    /// the next sync may bring a slot or a decision). A member that
    /// [decides alone](FleetMember::decides_alone) gets its breaker's answer.
    pub fn request<const W: usize, const B: usize, const D: usize>(
        &mut self,
        breaker: &mut CircuitBreaker<W, B, D>,
        now: Instant,
    ) -> Admission {
        if now >= self.tickets_until {
            self.tickets = 0;
        }
        if self.following
            && self.tickets == 0
            && would_probe(breaker, now)
            && !self.decides_alone(now)
        {
            return Admission::Rejected {
                until: None,
                reason: RejectReason::ProbesBusy,
                transition: None,
            };
        }
        let admission = breaker.request(now);
        if let Admission::Admitted { permit, .. } = &admission {
            if permit.is_probe() && self.following {
                self.tickets = self.tickets.saturating_sub(1);
            }
        }
        admission
    }

    /// One sync at `now` with the `view` read from the store: applies the
    /// published decision to `breaker` (see [`FleetMember::apply`]), then says
    /// what to send back: a proposal to open the fleet when the rule trips
    /// while it is closed, the probes' verdict while it is half-open (close when
    /// the local breaker closed after its probes, re-open when a probe re-opened
    /// it), and the probe slots to claim. A sync that asks for no slots is
    /// complete; one that does completes with [`FleetMember::on_claimed`].
    pub fn sync<const W: usize, const B: usize, const D: usize>(
        &mut self,
        breaker: &mut CircuitBreaker<W, B, D>,
        view: &FleetView,
        now: Instant,
    ) -> FleetSync {
        let transition = self.apply(breaker, view.decision, now);
        let mut sync = FleetSync {
            seen_epoch: view.decision.epoch(),
            transition,
            ..FleetSync::default()
        };
        if breaker.state().is_manual() {
            self.synced(now);
            return sync;
        }
        match view.decision {
            FleetDecision::Closed { .. } => {
                if self.config.trips(breaker.config(), view) {
                    let open_for = breaker.config().open_duration(1);
                    sync.proposal = Some(Proposal::Open {
                        until: now.saturating_add(open_for),
                    });
                }
            }
            FleetDecision::Open { until, .. } if now >= until && self.following => {
                match breaker.state() {
                    BreakerState::Closed => sync.proposal = Some(Proposal::Close),
                    BreakerState::Open => match breaker.open_until() {
                        Some(own) if own != self.held_until && own > now => {
                            sync.proposal = Some(Proposal::Open { until: own });
                        }
                        _ => sync.claim = self.claim(breaker),
                    },
                    BreakerState::HalfOpen => sync.claim = self.claim(breaker),
                    _ => {}
                }
            }
            FleetDecision::Open { .. } => {}
        }
        if sync.claim == 0 {
            self.synced(now);
        }
        sync
    }

    /// Applies a published `decision` to `breaker` at `now`, unless an operator
    /// put the breaker in a manual state (which the fleet leaves alone). A newer
    /// open decision opens a closed (or half-open) breaker until its end and
    /// makes the member follow the fleet; a newer closed decision closes a
    /// breaker that follows the fleet. A decision older than the one the member
    /// follows means the store lost its state: the member stops following and
    /// decides alone, its breaker untouched. Returns the transition made, if
    /// any.
    pub fn apply<const W: usize, const B: usize, const D: usize>(
        &mut self,
        breaker: &mut CircuitBreaker<W, B, D>,
        decision: FleetDecision,
        now: Instant,
    ) -> Option<Transition> {
        let epoch = decision.epoch();
        if epoch < self.epoch {
            // The store lost the decisions this member followed (flushed, or
            // restarted without persistence): decide alone, the breaker as it
            // is, until the fleet decides again.
            self.epoch = epoch;
            self.following = false;
            self.tickets = 0;
            return None;
        }
        if breaker.state().is_manual() {
            return None;
        }
        let newer = epoch > self.epoch;
        if newer {
            // A decision the member had not seen: the store answers.
            self.epoch = epoch;
            self.tickets = 0;
            self.synced(now);
        }
        match decision {
            FleetDecision::Closed { .. } => {
                let follows = core::mem::replace(&mut self.following, false);
                if newer && follows && breaker.state() != BreakerState::Closed {
                    return breaker.ensure(ManualState::Closed, now).ok().flatten();
                }
                None
            }
            FleetDecision::Open { until, .. } => {
                self.following = true;
                let state = breaker.state();
                if until > now {
                    // Every member opens until the fleet's end, so that they all
                    // turn half-open together; a member closed meanwhile (by an
                    // operator) is opened again.
                    let same = state == BreakerState::Open && breaker.open_until() == Some(until);
                    if same {
                        self.held_until = until;
                        return None;
                    }
                    if !newer && state != BreakerState::Closed {
                        return None;
                    }
                    self.held_until = until;
                    return breaker.force(ManualState::OpenUntil(until), now).ok();
                }
                if newer && state == BreakerState::Closed {
                    // The fleet is probing already: stay out until the next sync
                    // claims a slot or brings the verdict.
                    let next = now.saturating_add(self.config.sync_interval);
                    self.held_until = next;
                    return breaker
                        .ensure(ManualState::OpenUntil(next), now)
                        .ok()
                        .flatten();
                }
                None
            }
        }
    }

    /// The store granted `granted` probe slots (of those asked for) at `now`;
    /// they lapse after the config's claim lifetime, as the store's claims do.
    /// The sync that asked is complete.
    pub fn on_claimed(&mut self, granted: u32, now: Instant) {
        self.tickets = granted;
        self.tickets_until = now.saturating_add(self.config.claim_ttl);
        self.synced(now);
    }

    fn claim<const W: usize, const B: usize, const D: usize>(
        &mut self,
        breaker: &CircuitBreaker<W, B, D>,
    ) -> u32 {
        if self.tickets > 0 || breaker.probes_in_flight() > 0 {
            return 0;
        }
        breaker
            .config()
            .half_open_permits()
            .min(self.config.probes)
            .max(1)
    }
}

/// Whether `breaker`'s next admission at `now` would be a probe.
fn would_probe<const W: usize, const B: usize, const D: usize>(
    breaker: &CircuitBreaker<W, B, D>,
    now: Instant,
) -> bool {
    match breaker.state() {
        BreakerState::HalfOpen => true,
        BreakerState::Open => breaker.open_until().is_none_or(|until| now >= until),
        _ => false,
    }
}
