//! Properties over random configs and random scripts, 10 000 cases each, checked
//! against a naive reference model that keeps the whole call history in a `Vec`.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;

use quickcheck::{Arbitrary, Gen, QuickCheck};
use retry_core::{
    Admission, Backoff, BreakerConfig, BreakerState, CallOutcome, CircuitBreaker, Instant, Jitter,
    ManualState, Permit, Rate, RejectReason, Transition, TransitionCause, Window, WindowStats,
};

const CASES: u64 = 10_000;

/// The breaker type every property drives: up to 128 calls or 8 buckets.
///
/// The configs and operator moves here are the original ones (consecutive
/// half-open verdict, no half-open maximum wait, the four manual states of the
/// first release); `retry-model`'s breaker model covers the later ones (rates
/// verdict, maximum wait, open for / until, half-open now, ensure, reset).
type Breaker = CircuitBreaker<2, 8>;

#[derive(Clone, Copy, Debug)]
enum Op {
    Advance(u64),
    Request,
    Record {
        index: usize,
        success: bool,
        took_ms: u64,
    },
    Release {
        index: usize,
    },
    Force(ManualState),
}

#[derive(Clone, Debug)]
struct Case {
    config: BreakerConfig,
    ops: Vec<Op>,
}

fn pick<T: Copy>(g: &mut Gen, items: &[T]) -> T {
    *g.choose(items).unwrap()
}

fn below(g: &mut Gen, n: u64) -> u64 {
    u64::arbitrary(g) % n
}

fn arbitrary_config(g: &mut Gen) -> BreakerConfig {
    let window = match below(g, 3) {
        0 => None,
        1 => Some(Window::Count {
            calls: 1 + below(g, 128) as u16,
        }),
        _ => Some(Window::Time {
            length: Duration::from_millis(100 + below(g, 5_000)),
            buckets: 1 + below(g, 8) as u16,
        }),
    };
    let rate = |g: &mut Gen| {
        let bp = pick(g, &[1, 2_500, 3_333, 5_000, 6_667, 10_000]);
        let bp = if bool::arbitrary(g) {
            bp
        } else {
            1 + below(g, 10_000) as u16
        };
        Rate::from_basis_points(bp)
    };
    let (failure_rate, slow_rate) = match window {
        Some(_) => (
            bool::arbitrary(g).then(|| rate(g)),
            bool::arbitrary(g).then(|| rate(g)),
        ),
        None => (None, None),
    };
    let mut threshold = bool::arbitrary(g).then(|| 1 + below(g, 5) as u32);
    if threshold.is_none() && failure_rate.is_none() && slow_rate.is_none() {
        threshold = Some(1 + below(g, 5) as u32);
    }
    let max_minimum = match window {
        Some(Window::Count { calls }) => u64::from(calls),
        _ => 20,
    };
    let initial = Duration::from_millis(10 + below(g, 1_000));
    let backoff = match below(g, 3) {
        0 => Backoff::constant(initial),
        1 => Backoff::exponential(initial, 2.0),
        _ => Backoff::linear(initial),
    };
    let jitter = pick(
        g,
        &[Jitter::None, Jitter::None, Jitter::Full, Jitter::Equal],
    );
    BreakerConfig::builder()
        .failure_threshold(threshold)
        .failure_rate(failure_rate)
        .slow_call_rate(slow_rate)
        .slow_call_duration(Duration::from_millis(1 + below(g, 500)))
        .window(window)
        .minimum_calls(1 + below(g, max_minimum.min(20)) as u32)
        .open_backoff(backoff)
        .max_open_duration(initial * (1 + below(g, 10) as u32))
        .open_jitter(jitter)
        .seed(u64::arbitrary(g))
        .half_open_permits(1 + below(g, 4) as u32)
        .success_threshold(1 + below(g, 4) as u32)
        .build()
        .expect("generated configs are valid")
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        let config = arbitrary_config(g);
        let len = below(g, 200) as usize;
        let ops = (0..len)
            .map(|_| match below(g, 100) {
                0..=19 => Op::Advance(pick(g, &[0, 1, 50, 250, 999, 2_000, 7_000])),
                20..=49 => Op::Request,
                50..=84 => Op::Record {
                    index: below(g, 8) as usize,
                    success: bool::arbitrary(g),
                    took_ms: pick(g, &[0, 1, 100, 300, 600]),
                },
                85..=95 => Op::Release {
                    index: below(g, 8) as usize,
                },
                _ => Op::Force(pick(
                    g,
                    &[
                        ManualState::Closed,
                        ManualState::ForcedOpen,
                        ManualState::Disabled,
                        ManualState::MetricsOnly,
                    ],
                )),
            })
            .collect();
        Case { config, ops }
    }
}

/// What one op produced, comparable between the breaker and the model.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    Nothing,
    Admitted {
        probe: bool,
        transition: Option<Transition>,
    },
    Rejected {
        until: Option<Instant>,
        reason: RejectReason,
    },
    Changed(Option<Transition>),
    Refused,
}

// ---------------------------------------------------------------------------
// The reference model: the rules restated naively, with the full history.

#[derive(Clone, Copy, Debug, PartialEq)]
struct ModelPermit {
    epoch: u32,
    probe: bool,
}

#[derive(Clone, Debug)]
struct Model {
    config: BreakerConfig,
    state: BreakerState,
    open_until: Instant,
    in_flight: u32,
    successes: u32,
    streak: u32,
    reopens: u32,
    epoch: u32,
    /// Every outcome recorded since the window was last cleared: (when, failed, slow).
    history: Vec<(Instant, bool, bool)>,
}

impl Model {
    fn new(config: BreakerConfig) -> Model {
        Model {
            config,
            state: BreakerState::Closed,
            open_until: Instant::ORIGIN,
            in_flight: 0,
            successes: 0,
            streak: 0,
            reopens: 0,
            epoch: 0,
            history: Vec::new(),
        }
    }

    fn window(&self, now: Instant) -> WindowStats {
        let in_window: Vec<&(Instant, bool, bool)> = match self.config.window() {
            None => Vec::new(),
            Some(Window::Count { calls }) => {
                let skip = self.history.len().saturating_sub(usize::from(calls));
                self.history.iter().skip(skip).collect()
            }
            Some(Window::Time { length, buckets }) => {
                let width = (length.as_nanos() / u128::from(buckets)).max(1);
                let current = u128::from(now.as_nanos()) / width;
                self.history
                    .iter()
                    .filter(|(t, _, _)| {
                        let bucket = u128::from(t.as_nanos()) / width;
                        bucket + u128::from(buckets) > current
                    })
                    .collect()
            }
        };
        WindowStats {
            calls: in_window.len() as u32,
            failures: in_window.iter().filter(|(_, f, _)| *f).count() as u32,
            slow: in_window.iter().filter(|(_, _, s)| *s).count() as u32,
            slow_failures: in_window.iter().filter(|(_, f, s)| *f && *s).count() as u32,
        }
    }

    fn reached(rate: Rate, count: u32, calls: u32) -> bool {
        // count / calls >= bp / 10 000, cross-multiplied in u128.
        calls > 0
            && u128::from(count) * 10_000 >= u128::from(rate.basis_points()) * u128::from(calls)
    }

    fn go(&mut self, to: BreakerState, at: Instant, cause: TransitionCause) -> Transition {
        let from = self.state;
        self.state = to;
        Transition {
            from,
            to,
            at,
            cause,
        }
    }

    fn open(&mut self, now: Instant, cause: TransitionCause) -> Transition {
        self.reopens += 1;
        self.epoch = self.epoch.wrapping_add(1);
        self.streak = 0;
        self.open_until = now + self.config.open_duration(self.reopens);
        self.go(BreakerState::Open, now, cause)
    }

    fn clean(&mut self) {
        self.history.clear();
        self.streak = 0;
        self.reopens = 0;
    }

    fn request(&mut self, now: Instant) -> (Seen, Option<ModelPermit>) {
        let permit = |epoch, probe| Some(ModelPermit { epoch, probe });
        match self.state {
            BreakerState::Closed | BreakerState::Disabled | BreakerState::MetricsOnly => (
                Seen::Admitted {
                    probe: false,
                    transition: None,
                },
                permit(self.epoch, false),
            ),
            BreakerState::ForcedOpen => (
                Seen::Rejected {
                    until: None,
                    reason: RejectReason::ForcedOpen,
                },
                None,
            ),
            BreakerState::Open if now < self.open_until => (
                Seen::Rejected {
                    until: Some(self.open_until),
                    reason: RejectReason::Open,
                },
                None,
            ),
            BreakerState::Open => {
                let t = self.go(BreakerState::HalfOpen, now, TransitionCause::OpenElapsed);
                self.in_flight = 1;
                self.successes = 0;
                (
                    Seen::Admitted {
                        probe: true,
                        transition: Some(t),
                    },
                    permit(self.epoch, true),
                )
            }
            BreakerState::HalfOpen if self.in_flight < self.config.half_open_permits() => {
                self.in_flight += 1;
                (
                    Seen::Admitted {
                        probe: true,
                        transition: None,
                    },
                    permit(self.epoch, true),
                )
            }
            BreakerState::HalfOpen => (
                Seen::Rejected {
                    until: None,
                    reason: RejectReason::ProbesBusy,
                },
                None,
            ),
        }
    }

    fn record(&mut self, p: ModelPermit, outcome: CallOutcome, now: Instant) -> Option<Transition> {
        let late = p.epoch != self.epoch;
        let failed = !outcome.success;
        let slow = outcome.duration > self.config.slow_call_duration();
        match self.state {
            BreakerState::Closed | BreakerState::MetricsOnly => {
                if self.config.window().is_some() {
                    self.history.push((now, failed, slow));
                }
                if !late {
                    self.streak = if failed { self.streak + 1 } else { 0 };
                }
                if late || self.state == BreakerState::MetricsOnly {
                    return None;
                }
                if self
                    .config
                    .failure_threshold()
                    .is_some_and(|n| self.streak >= n)
                {
                    return Some(self.open(now, TransitionCause::ConsecutiveFailures));
                }
                let w = self.window(now);
                if w.calls >= self.config.minimum_calls() {
                    if let Some(rate) = self.config.failure_rate() {
                        if Model::reached(rate, w.failures, w.calls) {
                            return Some(self.open(now, TransitionCause::FailureRate));
                        }
                    }
                    if let Some(rate) = self.config.slow_call_rate() {
                        if Model::reached(rate, w.slow, w.calls) {
                            return Some(self.open(now, TransitionCause::SlowCallRate));
                        }
                    }
                }
                None
            }
            BreakerState::HalfOpen if !late && p.probe => {
                if failed || (slow && self.config.slow_call_rate().is_some()) {
                    return Some(self.open(now, TransitionCause::ProbeFailed));
                }
                self.successes += 1;
                self.in_flight = self.in_flight.saturating_sub(1);
                if self.successes >= self.config.success_threshold() {
                    self.clean();
                    return Some(self.go(
                        BreakerState::Closed,
                        now,
                        TransitionCause::ProbesSucceeded,
                    ));
                }
                None
            }
            _ => None,
        }
    }

    fn release(&mut self, p: ModelPermit) {
        if self.state == BreakerState::HalfOpen && p.probe && p.epoch == self.epoch {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
    }

    /// An operator's move: always carried out for these targets, the state the
    /// breaker is in included (it is entered afresh).
    fn force(&mut self, target: ManualState, now: Instant) -> Option<Transition> {
        self.reopens = 0;
        match target {
            ManualState::Closed | ManualState::MetricsOnly => self.clean(),
            ManualState::ForcedOpen => self.epoch = self.epoch.wrapping_add(1),
            ManualState::Disabled => {}
            // Not generated here; retry-model's breaker model covers them.
            ManualState::OpenFor(_) | ManualState::OpenUntil(_) | ManualState::HalfOpen => {
                return None
            }
        }
        Some(self.go(target.state(), now, TransitionCause::Manual))
    }
}

// ---------------------------------------------------------------------------
// Driving both.

struct Run {
    breaker: Breaker,
    model: Model,
    now: Instant,
    permits: Vec<(Permit, ModelPermit)>,
}

impl Run {
    fn new(config: BreakerConfig) -> Run {
        Run {
            breaker: Breaker::new(config).unwrap(),
            model: Model::new(config),
            now: Instant::ORIGIN,
            permits: Vec::new(),
        }
    }

    /// Applies `op` to the breaker alone (the model is driven in `step_both`).
    fn step(&mut self, op: Op) -> Seen {
        let now = self.now;
        match op {
            Op::Advance(ms) => {
                self.now = now + Duration::from_millis(ms);
                Seen::Nothing
            }
            Op::Request => match self.breaker.request(now) {
                Admission::Admitted { permit, transition } => {
                    let probe = permit.is_probe();
                    let shadow = ModelPermit {
                        epoch: permit.epoch(),
                        probe,
                    };
                    self.permits.push((permit, shadow));
                    Seen::Admitted { probe, transition }
                }
                Admission::Rejected { until, reason, .. } => Seen::Rejected { until, reason },
            },
            Op::Record {
                index,
                success,
                took_ms,
            } => {
                if self.permits.is_empty() {
                    return Seen::Nothing;
                }
                let (permit, _) = self.permits.remove(index % self.permits.len());
                let outcome = CallOutcome {
                    success,
                    duration: Duration::from_millis(took_ms),
                };
                Seen::Changed(self.breaker.record(permit, outcome, now).transition)
            }
            Op::Release { index } => {
                if self.permits.is_empty() {
                    return Seen::Nothing;
                }
                let (permit, _) = self.permits.remove(index % self.permits.len());
                self.breaker.release(permit, now);
                Seen::Nothing
            }
            Op::Force(state) => match self.breaker.force(state, now) {
                Ok(t) => Seen::Changed(Some(t)),
                Err(_) => Seen::Refused,
            },
        }
    }

    /// Applies `op` to both, returning what each saw. The model's permits are
    /// its own (epoch and kind as the model decides them).
    fn step_both(&mut self, op: Op) -> (Seen, Seen) {
        let now = self.now;
        // Decide the model's answer first, with the same permit choice.
        let model_seen = match op {
            Op::Advance(_) => Seen::Nothing,
            Op::Request => {
                let (seen, _) = self.model.request(now);
                seen
            }
            Op::Record {
                index,
                success,
                took_ms,
            } => {
                if self.permits.is_empty() {
                    Seen::Nothing
                } else {
                    let (_, shadow) = self.permits[index % self.permits.len()];
                    let outcome = CallOutcome {
                        success,
                        duration: Duration::from_millis(took_ms),
                    };
                    Seen::Changed(self.model.record(shadow, outcome, now))
                }
            }
            Op::Release { index } => {
                if !self.permits.is_empty() {
                    let (_, shadow) = self.permits[index % self.permits.len()];
                    self.model.release(shadow);
                }
                Seen::Nothing
            }
            Op::Force(state) => match self.model.force(state, now) {
                Some(t) => Seen::Changed(Some(t)),
                None => Seen::Refused,
            },
        };
        let seen = self.step(op);
        // The permit the breaker issued must be the one the model would issue.
        if let (Op::Request, Seen::Admitted { probe, .. }) = (op, seen) {
            let (_, shadow) = self.permits.last().unwrap();
            assert_eq!(
                *shadow,
                ModelPermit {
                    epoch: self.model.epoch,
                    probe
                }
            );
        }
        (seen, model_seen)
    }
}

// ---------------------------------------------------------------------------
// Properties.

fn probes_never_exceed_permits(case: Case) -> bool {
    let mut run = Run::new(case.config);
    for op in case.ops {
        run.step(op);
        let b = &run.breaker;
        let permits = case.config.half_open_permits();
        let outstanding_probes = run
            .permits
            .iter()
            .filter(|(p, _)| p.is_probe() && p.epoch() == b.epoch())
            .count() as u32;
        if b.probes_in_flight() > permits {
            return false;
        }
        if b.state() == BreakerState::HalfOpen && outstanding_probes != b.probes_in_flight() {
            return false;
        }
    }
    true
}

fn rejections_are_not_calls(case: Case) -> bool {
    let mut run = Run::new(case.config);
    let mut recorded = 0u32;
    for op in case.ops {
        let before = (run.breaker.clone(), run.breaker.stats(run.now));
        let seen = run.step(op);
        match seen {
            Seen::Rejected { until, .. } => {
                // Nothing changed but the count of rejected calls, and "until"
                // is in the future.
                let b = &run.breaker;
                let same = b.state() == before.0.state()
                    && b.epoch() == before.0.epoch()
                    && b.open_until() == before.0.open_until()
                    && b.probes_in_flight() == before.0.probes_in_flight()
                    && b.probe_successes() == before.0.probe_successes()
                    && b.consecutive_failures() == before.0.consecutive_failures()
                    && b.rejected_calls() == before.0.rejected_calls() + 1;
                if !same || run.breaker.stats(run.now) != before.1 {
                    return false;
                }
                if until.is_some_and(|u| u <= run.now) {
                    return false;
                }
            }
            Seen::Changed(_) if matches!(op, Op::Record { .. }) => recorded += 1,
            _ => {}
        }
        if run.breaker.stats(run.now).calls > recorded {
            return false;
        }
    }
    true
}

fn same_inputs_same_transitions(case: Case) -> bool {
    let transcript =
        |ops: &[Op], run: &mut Run| -> Vec<Seen> { ops.iter().map(|op| run.step(*op)).collect() };
    let mut first = Run::new(case.config);
    let mut second = Run::new(case.config);
    let a = transcript(&case.ops, &mut first);
    let b = transcript(&case.ops, &mut second);
    if a != b || first.breaker != second.breaker {
        return false;
    }
    // A copy of the breaker taken mid-way, fed the rest, answers as the original.
    // Permits are not `Clone`, so the copy gets the permits of a third run driven
    // to the same point (equal, if the breaker is deterministic at all).
    let half = case.ops.len() / 2;
    let mut original = Run::new(case.config);
    let mut twin = Run::new(case.config);
    transcript(&case.ops[..half], &mut original);
    transcript(&case.ops[..half], &mut twin);
    let mut copy = Run {
        breaker: original.breaker.clone(),
        model: Model::new(case.config),
        now: original.now,
        permits: twin.permits,
    };
    let rest_a = transcript(&case.ops[half..], &mut original);
    let rest_b = transcript(&case.ops[half..], &mut copy);
    rest_a == rest_b && original.breaker == copy.breaker
}

fn matches_the_reference_model(case: Case) -> bool {
    let mut run = Run::new(case.config);
    for op in case.ops {
        let (seen, expected) = run.step_both(op);
        if seen != expected {
            eprintln!("op {op:?}: breaker {seen:?}, model {expected:?}");
            return false;
        }
        if run.breaker.state() != run.model.state {
            return false;
        }
        // The window, and so every rate, is exactly the model's.
        if run.breaker.stats(run.now) != run.model.window(run.now) {
            eprintln!(
                "window: breaker {:?}, model {:?}",
                run.breaker.stats(run.now),
                run.model.window(run.now)
            );
            return false;
        }
    }
    true
}

fn every_transition_is_in_the_table(case: Case) -> bool {
    let mut run = Run::new(case.config);
    for op in case.ops {
        let t = match run.step(op) {
            Seen::Admitted { transition, .. } | Seen::Changed(transition) => transition,
            _ => None,
        };
        if let Some(t) = t {
            let legal = if t.cause == TransitionCause::Manual {
                [
                    ManualState::Closed,
                    ManualState::ForcedOpen,
                    ManualState::Disabled,
                    ManualState::MetricsOnly,
                ]
                .into_iter()
                .any(|m| m.state() == t.to && t.from.may_be_forced_to(m))
            } else {
                t.from.changes_automatically_to(t.to)
            };
            if !legal || t.at != run.now {
                return false;
            }
        }
    }
    true
}

fn check(f: fn(Case) -> bool) {
    QuickCheck::new()
        .tests(CASES)
        .max_tests(CASES * 10)
        .quickcheck(f);
}

#[test]
fn prop_probes_never_exceed_permits() {
    check(probes_never_exceed_permits);
}

#[test]
fn prop_rejections_are_not_calls() {
    check(rejections_are_not_calls);
}

#[test]
fn prop_same_inputs_same_transitions() {
    check(same_inputs_same_transitions);
}

#[test]
fn prop_matches_the_reference_model() {
    check(matches_the_reference_model);
}

#[test]
fn prop_every_transition_is_in_the_table() {
    check(every_transition_is_in_the_table);
}
