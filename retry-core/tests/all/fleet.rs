//! The fleet's transitions, driven through an in-memory store that does only
//! what a shared store does (publish a proposal if its epoch is still current,
//! hand out at most `probes` claims that lapse): three members, one clock.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck};
use retry_core::{
    Admission, BasicRule, BreakerConfig, BreakerState, CallOutcome, CircuitBreaker, FleetConfig,
    FleetDecision, FleetError, FleetMember, FleetRule, FleetView, Instant, ManualState,
    MemberReport, Proposal, Rate, RejectReason, WindowStats,
};

type Breaker = CircuitBreaker<2, 0>;

const OPEN: Duration = Duration::from_secs(10);

/// Three consecutive failures open a member; one good probe closes it.
fn basic() -> BreakerConfig {
    BreakerConfig::basic(BasicRule {
        failure_threshold: 3,
        open_duration: OPEN,
        success_threshold: 1,
    })
    .unwrap()
}

struct Store {
    decision: FleetDecision,
    reports: Vec<Option<MemberReport>>,
    /// (member, lapses at)
    claims: Vec<(usize, Instant)>,
    probes: u32,
    claim_ttl: Duration,
    /// The store does not answer: every sync fails.
    away: bool,
    /// The store hangs: no sync returns (nor fails).
    hung: bool,
    /// The probe claims fail (say, a key of the wrong type): a sync that asks
    /// for slots fails.
    claims_fail: bool,
}

struct Fleet {
    store: Store,
    members: Vec<(Breaker, FleetMember)>,
    now: Instant,
    /// Whether the last call admitted was a half-open probe.
    last_probe: bool,
}

impl Fleet {
    fn new(n: usize, breaker: BreakerConfig, fleet: FleetConfig) -> Fleet {
        fleet.validate(&breaker).unwrap();
        Fleet {
            store: Store {
                decision: FleetDecision::CLOSED,
                reports: vec![None; n],
                claims: Vec::new(),
                probes: fleet.probe_limit(),
                claim_ttl: fleet.claim_lifetime(),
                away: false,
                hung: false,
                claims_fail: false,
            },
            members: (0..n)
                .map(|_| (Breaker::new(breaker).unwrap(), FleetMember::new(fleet)))
                .collect(),
            now: Instant::from_secs(1),
            last_probe: false,
        }
    }

    fn view(&self) -> FleetView {
        FleetView::of(
            self.store.reports.iter().flatten().copied(),
            self.store.decision,
        )
    }

    /// One sync of member `i`, as an adapter does it.
    fn sync(&mut self, i: usize) {
        let now = self.now;
        if self.store.hung {
            return;
        }
        if self.store.away {
            self.members[i].1.sync_failed();
            return;
        }
        let report = {
            let (breaker, member) = &self.members[i];
            member.report(breaker, now)
        };
        self.store.reports[i] = Some(report);
        let view = self.view();
        let (breaker, member) = &mut self.members[i];
        let sync = member.sync(breaker, &view, now);
        if let Some(p) = sync.proposal {
            if self.store.decision.epoch() == sync.seen_epoch {
                let epoch = sync.seen_epoch + 1;
                self.store.decision = match p {
                    Proposal::Open { until } => FleetDecision::Open { until, epoch },
                    Proposal::Close => FleetDecision::Closed { epoch },
                };
                self.store.claims.clear();
            }
            let _ = member.apply(breaker, self.store.decision, now);
        }
        if sync.claim > 0 && self.store.claims_fail {
            member.sync_failed();
            return;
        }
        if sync.claim > 0 {
            self.store
                .claims
                .retain(|&(m, lapses)| m != i && lapses > now);
            let free = self
                .store
                .probes
                .saturating_sub(self.store.claims.len() as u32);
            let granted = sync.claim.min(free);
            for _ in 0..granted {
                self.store
                    .claims
                    .push((i, now.saturating_add(self.store.claim_ttl)));
            }
            member.on_claimed(granted, now);
        }
    }

    fn sync_all(&mut self) {
        for i in 0..self.members.len() {
            self.sync(i);
        }
    }

    /// One call at member `i` that succeeds or fails; whether it ran.
    fn call(&mut self, i: usize, success: bool) -> bool {
        let now = self.now;
        let (breaker, member) = &mut self.members[i];
        match member.request(breaker, now) {
            Admission::Admitted { permit, .. } => {
                self.last_probe = permit.is_probe();
                let outcome = if success {
                    CallOutcome::success(Duration::from_millis(1))
                } else {
                    CallOutcome::failure(Duration::from_millis(1))
                };
                let _ = breaker.record(permit, outcome, now);
                true
            }
            Admission::Rejected { .. } => false,
        }
    }

    fn state(&self, i: usize) -> BreakerState {
        self.members[i].0.state()
    }

    fn advance(&mut self, d: Duration) {
        self.now = self.now.saturating_add(d);
    }
}

#[test]
fn failures_at_one_member_open_the_others_within_one_sync_under_a_quorum_of_one() {
    let mut fleet = Fleet::new(3, basic(), FleetConfig::new(FleetRule::Quorum(1)));
    fleet.sync_all();
    for _ in 0..3 {
        assert!(fleet.call(0, false));
    }
    assert_eq!(fleet.state(0), BreakerState::Open);
    assert_eq!(fleet.state(1), BreakerState::Closed);
    // One sync round: A publishes and proposes, B and C adopt.
    fleet.sync_all();
    assert!(matches!(
        fleet.store.decision,
        FleetDecision::Open { epoch: 1, .. }
    ));
    for i in 1..3 {
        assert_eq!(fleet.state(i), BreakerState::Open, "member {i}");
        assert!(!fleet.call(i, true), "member {i} rejects");
        assert!(fleet.members[i].1.is_following());
    }
}

#[test]
fn one_failing_member_does_not_open_the_others_under_a_quorum_of_two() {
    let mut fleet = Fleet::new(3, basic(), FleetConfig::new(FleetRule::Quorum(2)));
    for round in 0..20 {
        for _ in 0..3 {
            let _ = fleet.call(0, false);
        }
        assert!(fleet.call(1, true) && fleet.call(2, true), "round {round}");
        fleet.sync_all();
        fleet.advance(Duration::from_millis(250));
    }
    assert_eq!(fleet.view().open_members, 1);
    assert_eq!(fleet.store.decision, FleetDecision::CLOSED);
    assert_eq!(fleet.state(1), BreakerState::Closed);
    assert_eq!(fleet.state(2), BreakerState::Closed);
    // A second failing member makes the quorum.
    for _ in 0..3 {
        assert!(fleet.call(1, false));
    }
    fleet.sync_all();
    assert!(matches!(fleet.store.decision, FleetDecision::Open { .. }));
    assert_eq!(fleet.state(2), BreakerState::Open);
}

#[test]
fn the_fraction_rule_counts_the_members_seen() {
    let rule = FleetRule::Fraction(Rate::from_percent(50));
    let mut fleet = Fleet::new(4, basic(), FleetConfig::new(rule));
    fleet.sync_all();
    for _ in 0..3 {
        assert!(fleet.call(0, false));
    }
    fleet.sync_all();
    assert_eq!(
        fleet.store.decision,
        FleetDecision::CLOSED,
        "1 of 4 is below half"
    );
    for _ in 0..3 {
        assert!(fleet.call(1, false));
    }
    fleet.sync_all();
    assert!(
        matches!(fleet.store.decision, FleetDecision::Open { .. }),
        "2 of 4"
    );
    assert_eq!(fleet.state(3), BreakerState::Open);
}

#[test]
fn the_aggregate_rule_sums_the_windows() {
    // 50 % of at least 10 calls, over each member's last 20.
    let breaker = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(20)
        .minimum_calls(10)
        .open_duration(OPEN)
        .build()
        .unwrap();
    let mut fleet = Fleet::new(3, breaker, FleetConfig::new(FleetRule::Aggregate));
    // Each member alone: 4 failures of 9 calls, below its own minimum.
    for i in 0..3 {
        for k in 0..9 {
            assert!(fleet.call(i, k >= 4));
        }
    }
    fleet.sync_all();
    assert_eq!(
        fleet.store.decision,
        FleetDecision::CLOSED,
        "12 of 27 is below 50 %"
    );
    for i in 0..3 {
        assert_eq!(fleet.state(i), BreakerState::Closed, "member {i}");
    }
}

#[test]
fn the_aggregate_rule_opens_members_whose_own_window_is_healthy() {
    let breaker = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(50))
        .count_window(20)
        .minimum_calls(10)
        .open_duration(OPEN)
        .build()
        .unwrap();
    let mut fleet = Fleet::new(3, breaker, FleetConfig::new(FleetRule::Aggregate));
    // A sees 10 failures (and opens); B and C see 2 successes each: 10 of 14.
    for _ in 0..10 {
        let _ = fleet.call(0, false);
    }
    for i in 1..3 {
        for _ in 0..2 {
            assert!(fleet.call(i, true));
        }
    }
    fleet.sync_all();
    assert!(matches!(fleet.store.decision, FleetDecision::Open { .. }));
    for i in 0..3 {
        assert_eq!(fleet.state(i), BreakerState::Open, "member {i}");
    }
}

/// Opens the fleet through member 0, then lets the open period pass.
fn half_open_fleet(probes: u32) -> Fleet {
    let breaker = BreakerConfig::builder()
        .failure_threshold(3)
        .open_duration(OPEN)
        .half_open_permits(2)
        .success_threshold(2)
        .build()
        .unwrap();
    let fleet_config = FleetConfig::new(FleetRule::Quorum(1)).probes(probes);
    let mut fleet = Fleet::new(3, breaker, fleet_config);
    for _ in 0..3 {
        assert!(fleet.call(0, false));
    }
    fleet.sync_all();
    fleet.sync_all();
    for i in 0..3 {
        assert!(fleet.members[i].1.is_following(), "member {i}");
    }
    // The members sync through the open period (the last sync a quarter of a
    // second before its end), so none has missed a sync when it ends.
    let last_sync = Duration::from_millis(250);
    fleet.advance(OPEN - last_sync);
    fleet.sync_all();
    fleet.advance(last_sync);
    fleet
}

#[test]
fn half_open_probes_are_limited_fleet_wide() {
    let mut fleet = half_open_fleet(1);
    // Before any claim no member probes.
    assert!(!fleet.call(0, true) && !fleet.call(1, true) && !fleet.call(2, true));
    fleet.sync_all();
    let tickets: u32 = fleet.members.iter().map(|m| m.1.tickets()).sum();
    assert_eq!(tickets, 1, "one slot in all");
    // Only the holder probes; the others keep rejecting.
    let ran: Vec<bool> = (0..3).map(|i| fleet.call(i, true)).collect();
    assert_eq!(ran.iter().filter(|r| **r).count(), 1, "{ran:?}");
    let prober = ran.iter().position(|r| *r).unwrap();
    assert!(!fleet.call(prober, true), "the slot is used");
}

#[test]
fn the_probes_verdict_closes_the_fleet() {
    let mut fleet = half_open_fleet(2);
    fleet.sync_all();
    let prober = (0..3).find(|&i| fleet.members[i].1.tickets() == 2).unwrap();
    assert!(fleet.call(prober, true) && fleet.call(prober, true));
    assert_eq!(fleet.state(prober), BreakerState::Closed);
    // The prober publishes the verdict; everyone closes.
    fleet.sync(prober);
    assert!(matches!(
        fleet.store.decision,
        FleetDecision::Closed { epoch: 2 }
    ));
    fleet.sync_all();
    for i in 0..3 {
        assert_eq!(fleet.state(i), BreakerState::Closed, "member {i}");
        assert!(!fleet.members[i].1.is_following());
        assert!(fleet.call(i, true));
    }
}

#[test]
fn a_failed_probe_reopens_the_fleet() {
    let mut fleet = half_open_fleet(1);
    fleet.sync_all();
    let prober = (0..3).find(|&i| fleet.members[i].1.tickets() == 1).unwrap();
    assert!(fleet.call(prober, false));
    assert_eq!(fleet.state(prober), BreakerState::Open);
    fleet.sync(prober);
    let FleetDecision::Open { until, epoch: 2 } = fleet.store.decision else {
        panic!("{:?}", fleet.store.decision)
    };
    assert!(until > fleet.now);
    fleet.sync_all();
    for i in 0..3 {
        assert_eq!(fleet.state(i), BreakerState::Open, "member {i}");
        assert_eq!(fleet.members[i].0.open_until(), Some(until), "member {i}");
    }
}

#[test]
fn a_crashed_probers_claim_lapses() {
    let mut fleet = half_open_fleet(1);
    fleet.sync_all();
    let prober = (0..3).find(|&i| fleet.members[i].1.tickets() == 1).unwrap();
    let other = (prober + 1) % 3;
    // The prober never calls nor syncs again; after the claim's lifetime another
    // member claims the slot.
    fleet.advance(FleetConfig::new(FleetRule::Quorum(1)).claim_lifetime());
    fleet.sync(other);
    assert_eq!(fleet.members[other].1.tickets(), 1);
    assert!(fleet.call(other, true));
}

#[test]
fn an_older_decision_means_the_store_lost_its_state_and_manual_states_are_left_alone() {
    let mut breaker = Breaker::new(basic()).unwrap();
    let mut member = FleetMember::new(FleetConfig::new(FleetRule::Quorum(1)));
    let now = Instant::from_secs(5);
    let open = FleetDecision::Open {
        until: Instant::from_secs(50),
        epoch: 3,
    };
    assert!(member.apply(&mut breaker, open, now).is_some());
    assert_eq!(member.epoch(), 3);
    // An older decision: the store lost its keys (restarted without
    // persistence). The member decides alone again; its breaker is untouched.
    assert_eq!(member.apply(&mut breaker, FleetDecision::CLOSED, now), None);
    assert_eq!(breaker.state(), BreakerState::Open);
    assert!(!member.is_following());
    assert_eq!(member.epoch(), 0);
    // The next decision, whatever its epoch, is followed again.
    let again = FleetDecision::Open {
        until: Instant::from_secs(60),
        epoch: 2,
    };
    assert!(member.apply(&mut breaker, again, now).is_some());
    assert!(member.is_following());
    // An operator's forced-open is left alone by a newer close.
    breaker.force(ManualState::ForcedOpen, now).unwrap();
    assert_eq!(
        member.apply(&mut breaker, FleetDecision::Closed { epoch: 4 }, now),
        None
    );
    assert_eq!(breaker.state(), BreakerState::ForcedOpen);
    let view = FleetView {
        members: 1,
        open_members: 1,
        window: WindowStats::default(),
        decision: FleetDecision::Closed { epoch: 4 },
    };
    assert_eq!(member.sync(&mut breaker, &view, now).proposal, None);
}

#[test]
fn configs_are_checked() {
    let b = basic();
    assert_eq!(
        FleetConfig::new(FleetRule::Quorum(0)).validate(&b),
        Err(FleetError::ZeroQuorum)
    );
    assert_eq!(
        FleetConfig::new(FleetRule::Fraction(Rate::from_basis_points(0))).validate(&b),
        Err(FleetError::FractionOutOfRange { basis_points: 0 })
    );
    assert_eq!(
        FleetConfig::new(FleetRule::Fraction(Rate::from_basis_points(10_001))).validate(&b),
        Err(FleetError::FractionOutOfRange {
            basis_points: 10_001
        })
    );
    assert_eq!(
        FleetConfig::new(FleetRule::Aggregate).validate(&b),
        Err(FleetError::AggregateNeedsRate)
    );
    assert_eq!(
        FleetConfig::new(FleetRule::Quorum(1))
            .probes(0)
            .validate(&b),
        Err(FleetError::ZeroProbes)
    );
    let err = FleetConfig::new(FleetRule::Quorum(1))
        .sync_interval(Duration::ZERO)
        .validate(&b)
        .unwrap_err();
    assert_eq!(err.code(), "fleet.zero_duration");
    assert_eq!(err.to_string(), "sync_interval: must not be zero");
}

// ---------------------------------------------------------------------------
// Properties over random scripts
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Op {
    Call { member: usize, success: bool },
    Sync { member: usize },
    FailSync { member: usize },
    Advance { ms: u64 },
    Force { member: usize, state: ManualState },
}

#[derive(Clone, Debug)]
struct Script {
    quorum: u32,
    probes: u32,
    ops: Vec<Op>,
}

impl Arbitrary for Script {
    fn arbitrary(g: &mut Gen) -> Script {
        let n = 50 + usize::arbitrary(g) % 150;
        let ops = (0..n)
            .map(|_| {
                let member = usize::arbitrary(g) % 3;
                match u8::arbitrary(g) % 11 {
                    0..=3 => Op::Call {
                        member,
                        success: bool::arbitrary(g),
                    },
                    4..=6 => Op::Sync { member },
                    7 | 8 => Op::Advance {
                        ms: *g.choose(&[1, 250, 3_000, 10_000]).unwrap(),
                    },
                    9 => Op::FailSync { member },
                    _ => Op::Force {
                        member,
                        state: *g
                            .choose(&[
                                ManualState::Closed,
                                ManualState::ForcedOpen,
                                ManualState::Closed,
                            ])
                            .unwrap(),
                    },
                }
            })
            .collect();
        Script {
            quorum: 1 + u32::arbitrary(g) % 3,
            probes: 1 + u32::arbitrary(g) % 3,
            ops,
        }
    }
}

#[test]
fn prop_the_fleet_keeps_its_invariants() {
    fn prop(script: Script) -> bool {
        let breaker = BreakerConfig::builder()
            .failure_threshold(2)
            .open_duration(OPEN)
            .half_open_permits(2)
            .success_threshold(2)
            .build()
            .unwrap();
        let config = FleetConfig::new(FleetRule::Quorum(script.quorum))
            .probes(script.probes)
            .claim_ttl(Duration::from_secs(3));
        let mut fleet = Fleet::new(3, breaker, config);
        let mut failed_at = [false; 3];
        for op in script.ops {
            let before = fleet.store.decision;
            match op {
                Op::Call { member, success } => {
                    let (_, m) = &fleet.members[member];
                    let (following, tickets) = (m.is_following(), m.tickets());
                    let alone = m.decides_alone(fleet.now);
                    let ran = fleet.call(member, success);
                    failed_at[member] |= ran && !success;
                    // A member following the fleet probes only with a slot it
                    // claimed, unless it missed its syncs and decides alone.
                    if ran && fleet.last_probe && following && tickets == 0 && !alone {
                        return false;
                    }
                }
                Op::FailSync { member } => fleet.members[member].1.sync_failed(),
                Op::Sync { member } => {
                    fleet.sync(member);
                    // The fleet opens from closed only on a quorum of members
                    // that opened on their own (this sync's report included).
                    if let (FleetDecision::Closed { .. }, FleetDecision::Open { .. }) =
                        (before, fleet.store.decision)
                    {
                        let seen =
                            FleetView::of(fleet.store.reports.iter().flatten().copied(), before);
                        if seen.open_members < script.quorum {
                            return false;
                        }
                        // ... and only members that saw failures can have opened on their own.
                        if (failed_at.iter().filter(|f| **f).count() as u32) < script.quorum {
                            return false;
                        }
                    }
                    match (before, fleet.store.decision) {
                        (FleetDecision::Closed { .. }, FleetDecision::Open { .. }) => {
                            OPENED.fetch_add(1, Ordering::Relaxed);
                        }
                        (FleetDecision::Open { .. }, FleetDecision::Closed { .. }) => {
                            CLOSED.fetch_add(1, Ordering::Relaxed);
                        }
                        (FleetDecision::Open { .. }, FleetDecision::Open { .. })
                            if before != fleet.store.decision =>
                        {
                            REOPENED.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                    // A member never follows a decision older than the store's.
                    if fleet.members[member].1.epoch() > fleet.store.decision.epoch() {
                        return false;
                    }
                }
                Op::Advance { ms } => fleet.advance(Duration::from_millis(ms)),
                Op::Force { member, state } => {
                    let now = fleet.now;
                    let _ = fleet.members[member].0.force(state, now);
                }
            }
            // Probe slots held (and not lapsed) never exceed the fleet's limit.
            let held: u32 = fleet
                .store
                .claims
                .iter()
                .filter(|c| c.1 > fleet.now)
                .count() as u32;
            if held > script.probes {
                return false;
            }
        }
        // After a full round of syncs, every automatic member agrees with an
        // open decision still running.
        // (Rounds until the decision settles: a report made under an earlier
        // decision counts only once its member has reported again.)
        for _ in 0..5 {
            let before = fleet.store.decision;
            fleet.sync_all();
            if fleet.store.decision == before {
                break;
            }
        }
        if let FleetDecision::Open { until, .. } = fleet.store.decision {
            if until > fleet.now {
                for (breaker, _) in &fleet.members {
                    if breaker.state() == BreakerState::Closed {
                        return false;
                    }
                }
            }
        }
        true
    }
    QuickCheck::new()
        .tests(2_000)
        .quickcheck(prop as fn(Script) -> bool);
    // The scripts reach every kind of decision, many times.
    let counts = [&OPENED, &CLOSED, &REOPENED].map(|c| c.load(Ordering::Relaxed));
    eprintln!("fleet opened, closed by probes, re-opened by probes: {counts:?}");
    assert!(counts.iter().all(|c| *c >= 100), "{counts:?}");
}

static OPENED: AtomicU32 = AtomicU32::new(0);
static CLOSED: AtomicU32 = AtomicU32::new(0);
static REOPENED: AtomicU32 = AtomicU32::new(0);

#[test]
fn a_member_without_a_claim_rejects_as_probes_busy() {
    let mut fleet = half_open_fleet(1);
    let now = fleet.now;
    let (breaker, member) = &mut fleet.members[1];
    let Admission::Rejected { reason, until, .. } = member.request(breaker, now) else {
        panic!("admitted without a claim")
    };
    assert_eq!((reason, until), (RejectReason::ProbesBusy, None));
}

// ---------------------------------------------------------------------------
// A store that goes away
// ---------------------------------------------------------------------------

const INTERVAL: Duration = Duration::from_millis(250);
const SHORT_OPEN: Duration = Duration::from_secs(1);

/// Three members syncing every 250 ms (a quorum of one, one probe), whose
/// breakers open for 1 s; member 0 fails and, at the next sync, the fleet
/// opens until 1 s later: every member follows it.
fn fleet_opened_by_member_0() -> Fleet {
    let breaker = BreakerConfig::builder()
        .failure_threshold(3)
        .open_duration(SHORT_OPEN)
        .half_open_permits(1)
        .success_threshold(1)
        .build()
        .unwrap();
    let mut fleet = Fleet::new(3, breaker, FleetConfig::new(FleetRule::Quorum(1)));
    fleet.sync_all();
    for _ in 0..3 {
        assert!(fleet.call(0, false));
    }
    fleet.sync_all();
    for i in 0..3 {
        assert!(fleet.members[i].1.is_following(), "member {i}");
        assert_eq!(fleet.state(i), BreakerState::Open, "member {i}");
    }
    fleet
}

/// Runs the fleet in 50 ms steps from the fleet opening, every member syncing
/// every 250 ms and offering a call that succeeds every step; `change` may
/// change the store before a step. The timeline of members 1 and 2 as a
/// table, and when each member first admitted a call.
fn run(
    fleet: &mut Fleet,
    steps: u32,
    mut change: impl FnMut(Duration, &mut Store),
) -> (String, [Option<Duration>; 3]) {
    use core::fmt::Write as _;
    let start = fleet.now;
    let mut table = String::from("  time  store  | member 1              | member 2\n");
    let mut first = [None; 3];
    for step in 0..steps {
        let at = fleet.now.saturating_duration_since(start);
        change(at, &mut fleet.store);
        if step % 5 == 0 && step > 0 {
            fleet.sync_all();
        }
        let store = if fleet.store.hung {
            "hung"
        } else if fleet.store.away {
            "away"
        } else if fleet.store.claims_fail {
            "claims"
        } else {
            "up"
        };
        let mut row = format!("{:>5}ms {store:<6} ", at.as_millis());
        for (i, first) in first.iter_mut().enumerate() {
            let alone = fleet.members[i].1.decides_alone(fleet.now);
            let ran = fleet.call(i, true);
            if ran && first.is_none() {
                *first = Some(at);
            }
            if i > 0 {
                let _ = write!(
                    row,
                    "| {:<9} {:<5} {:<5} ",
                    fleet.state(i).name(),
                    if alone { "alone" } else { "" },
                    if ran { "ran" } else { "-" }
                );
            }
        }
        table.push_str(row.trim_end());
        table.push('\n');
        fleet.advance(Duration::from_millis(50));
    }
    (table, first)
}

/// When members 1 and 2 first admitted a call, after `since`: within two sync
/// intervals plus their own open period.
fn admitted_in_time(first: [Option<Duration>; 3], since: Duration) {
    for (i, first) in first.iter().enumerate().skip(1) {
        let at = first.unwrap_or_else(|| panic!("member {i} never admitted a call"));
        let took = at.saturating_sub(since);
        assert!(took <= 2 * INTERVAL + SHORT_OPEN, "member {i}: {took:?}");
    }
}

#[test]
fn a_follower_whose_store_goes_away_decides_alone_after_two_failed_syncs() {
    let mut fleet = fleet_opened_by_member_0();
    // The fleet is half-open from 1 s: at the sync then, member 0 claims the
    // only probe slot and its probe passes; 100 ms later, before its verdict
    // reaches the store, the store goes away (killed: every sync fails at
    // once). The dependency is healthy.
    let away = Duration::from_millis(1_100);
    let (table, first) = run(&mut fleet, 40, |at, store| store.away = at >= away);
    insta::assert_snapshot!(table);
    admitted_in_time(first, away);
    assert_eq!(first[0], Some(Duration::from_secs(1)), "member 0 probed");
    for i in 1..3 {
        assert_eq!(fleet.state(i), BreakerState::Closed, "member {i}");
    }
    // The store is back: the members' verdict closes the fleet, nobody follows.
    fleet.store.away = false;
    fleet.sync_all();
    fleet.sync_all();
    assert!(matches!(fleet.store.decision, FleetDecision::Closed { .. }));
    for i in 0..3 {
        assert!(!fleet.members[i].1.is_following(), "member {i}");
    }
}

#[test]
fn a_follower_whose_store_hangs_decides_alone_after_two_sync_intervals() {
    let mut fleet = fleet_opened_by_member_0();
    // A store that hangs: no sync returns, none fails either (a stopped Redis,
    // before the timeout). The member counts the intervals.
    let hung = Duration::from_millis(600);
    let (table, first) = run(&mut fleet, 30, |at, store| store.hung = at >= hung);
    insta::assert_snapshot!(table);
    admitted_in_time(first, hung);
}

#[test]
fn claims_that_fail_while_half_open_leave_the_followers_to_decide_alone_and_their_verdict_closes_the_fleet(
) {
    let mut fleet = fleet_opened_by_member_0();
    let (table, first) = run(&mut fleet, 40, |_, store| store.claims_fail = true);
    insta::assert_snapshot!(table);
    admitted_in_time(first, Duration::ZERO);
    // The members' own probes passed and their verdict (a close, which needs
    // no claim) reached the store: the fleet is closed and nobody follows.
    assert!(matches!(fleet.store.decision, FleetDecision::Closed { .. }));
    for i in 0..3 {
        assert!(!fleet.members[i].1.is_following(), "member {i}");
        assert_eq!(fleet.state(i), BreakerState::Closed, "member {i}");
    }
}

#[test]
fn a_member_that_syncs_does_not_decide_alone_and_one_completed_sync_ends_it() {
    let mut fleet = fleet_opened_by_member_0();
    let limit = FleetConfig::new(FleetRule::Quorum(1)).missed_sync_limit();
    assert_eq!(limit, 2);
    // Syncing every interval, a follower never decides alone, however long
    // the fleet stays open.
    for _ in 0..3 {
        fleet.advance(INTERVAL);
        fleet.sync_all();
        assert!(!fleet.members[1].1.decides_alone(fleet.now));
    }
    // One failed sync is not enough; the second is.
    fleet.store.away = true;
    fleet.sync(1);
    assert_eq!(fleet.members[1].1.failed_syncs(), 1);
    assert!(!fleet.members[1].1.decides_alone(fleet.now));
    fleet.sync(1);
    assert!(fleet.members[1].1.decides_alone(fleet.now));
    // The store is back: the next completed sync ends it.
    fleet.store.away = false;
    fleet.sync(1);
    assert_eq!(fleet.members[1].1.failed_syncs(), 0);
    assert!(!fleet.members[1].1.decides_alone(fleet.now));
    assert!(fleet.members[1].1.is_following());
    // A member that follows nothing never "decides alone": it always does.
    let member = FleetMember::new(FleetConfig::new(FleetRule::Quorum(1)));
    assert!(!member.decides_alone(Instant::from_secs(1_000)));
    assert_eq!(
        FleetConfig::new(FleetRule::Quorum(1))
            .missed_syncs(0)
            .validate(&basic()),
        Err(FleetError::ZeroMissedSyncs)
    );
}
