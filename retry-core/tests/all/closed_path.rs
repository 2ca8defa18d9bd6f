//! The lock-free closed path ([`ClosedPath`]) with its machine, driven one call
//! at a time as a thread-shared breaker drives them, decides exactly what the
//! sequential [`CircuitBreaker`] decides: same admissions, same permits, same
//! recorded outcomes, same trips at the same outcome, same state, window and
//! streak after every step. Random scripts of requests, outcomes (late ones
//! included), releases, time passing and operators' moves, over count windows,
//! no window, and (where the path steps aside) time windows and slow-call rules.
#![cfg(target_has_atomic = "64")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use core::time::Duration;

use retry_core::{
    Admission, BasicRule, BreakerConfig, BreakerState, CallOutcome, CircuitBreaker, ClosedPath,
    HalfOpenVerdict, Instant, ManualState, Permit, Rate, Recorded, Untimed,
};

/// A machine behind a (here: implied) lock, with its closed state handed out.
struct Split<const W: usize, const B: usize> {
    machine: CircuitBreaker<W, B>,
    path: ClosedPath<W>,
    untimed_steps: u32,
    /// The stripe quiet successes are counted on (a caller's thread).
    stripe: usize,
}

impl<const W: usize, const B: usize> Split<W, B> {
    fn new(machine: CircuitBreaker<W, B>) -> Self {
        let path = machine.closed_path();
        Split {
            machine,
            path,
            untimed_steps: 0,
            stripe: 0,
        }
    }

    fn locked<R>(&mut self, f: impl FnOnce(&mut CircuitBreaker<W, B>) -> R) -> R {
        self.machine.suspend(&self.path);
        let r = f(&mut self.machine);
        self.machine.resume(&self.path);
        r
    }

    fn request(&mut self, now: Instant) -> Admission {
        match self.path.request() {
            Some(permit) => {
                self.untimed_steps += 1;
                Admission::Admitted {
                    permit,
                    transition: None,
                }
            }
            None => self.locked(|m| m.request(now)),
        }
    }

    fn record(&mut self, permit: Permit, outcome: CallOutcome, now: Instant) -> Recorded {
        match self.path.record_on(self.stripe, permit, outcome) {
            Untimed::Recorded(exceeded) => {
                self.untimed_steps += 1;
                Recorded {
                    transition: None,
                    ignored: None,
                    exceeded,
                }
            }
            Untimed::Trip(trip) => self
                .machine
                .trip(&self.path, trip, now)
                .expect("one caller at a time: the trip applies"),
            Untimed::Locked(permit) => self.locked(|m| m.record(permit, outcome, now)),
        }
    }

    fn release(&mut self, permit: Permit, now: Instant) {
        if let Some(permit) = self.path.release(permit) {
            self.locked(|m| m.release(permit, now));
        }
    }
}

/// xorshift64*: a small deterministic generator for the scripts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn configs(rng: &mut Rng) -> BreakerConfig {
    loop {
        if let Some(config) = config(rng) {
            return config;
        }
    }
}

/// A random config, `None` when the builder refuses the combination drawn.
fn config(rng: &mut Rng) -> Option<BreakerConfig> {
    let mut b = BreakerConfig::builder()
        .open_duration(Duration::from_millis(1 + rng.below(50)))
        .slow_call_duration(Duration::from_millis(10))
        .half_open_permits(1 + rng.below(3) as u32)
        .success_threshold(1 + rng.below(3) as u32);
    let threshold = match rng.below(3) {
        0 => None,
        _ => Some(1 + rng.below(8) as u32),
    };
    b = b.failure_threshold(threshold);
    let window = 1 + rng.below(130) as u16;
    match rng.below(6) {
        // A count window with a failure-rate rule (the common case).
        0..=2 => {
            b = b
                .failure_rate(Rate::from_basis_points(1 + rng.below(10_000) as u16))
                .count_window(window)
                .minimum_calls(1 + rng.below(u64::from(window)) as u32);
        }
        // A count window kept for the dashboard only.
        3 => b = b.count_window(window),
        // No window: consecutive failures only.
        4 => {
            if threshold.is_none() {
                b = b.failure_threshold(3);
            }
        }
        // A slow-call rule: the closed path steps aside.
        _ => {
            b = b
                .slow_call_rate(Rate::from_percent(50))
                .count_window(window)
                .minimum_calls(1);
        }
    }
    if rng.chance(20) {
        if let Ok(c) = b
            .half_open_verdict(HalfOpenVerdict::Rates { probes: 2 })
            .build()
        {
            return Some(c);
        }
    }
    b.build().ok()
}

/// Runs one script; returns the trips and the steps the closed path decided alone.
fn check<const W: usize, const B: usize>(
    seed: u64,
    config: BreakerConfig,
    steps: usize,
) -> (u32, u32) {
    check_striped::<W, B>(seed, config, steps, false)
}

/// [`check`], and with `striped` each outcome recorded from a random stripe
/// (as from one of several threads taking turns) and the split breaker read
/// (its view compared) only every few steps, so that successes gather on the
/// stripes between two outcomes counted in.
fn check_striped<const W: usize, const B: usize>(
    seed: u64,
    config: BreakerConfig,
    steps: usize,
    striped: bool,
) -> (u32, u32) {
    let mut rng = Rng(seed | 1);
    let mut reference = CircuitBreaker::<W, B>::new(config).unwrap();
    let mut split = Split::new(reference.clone());
    let mut now = Instant::ORIGIN;
    // Outstanding permits: (the reference's, the split's).
    let mut out: Vec<(Permit, Permit)> = Vec::new();
    let mut trips = 0;
    for step in 0..steps {
        let roll = rng.below(100);
        if roll < 40 || out.is_empty() {
            let a = reference.request(now);
            let b = split.request(now);
            assert_eq!(a, b, "seed {seed} step {step}: request");
            if let (Admission::Admitted { permit: p, .. }, Admission::Admitted { permit: q, .. }) =
                (a, b)
            {
                out.push((p, q));
            }
        } else if roll < 85 {
            // Mostly the newest permit; sometimes an old one (late after a trip).
            let i = if rng.chance(70) {
                out.len() - 1
            } else {
                rng.below(out.len() as u64) as usize
            };
            let (p, q) = out.swap_remove(i);
            let duration = if rng.chance(10) {
                Duration::from_millis(20)
            } else {
                Duration::ZERO
            };
            let outcome = CallOutcome {
                success: !rng.chance(35),
                duration,
            };
            if striped {
                split.stripe = rng.below(40) as usize;
            }
            let a = reference.record(p, outcome, now);
            let b = split.record(q, outcome, now);
            assert_eq!(a, b, "seed {seed} step {step}: record {outcome:?}");
            if a.transition.is_some_and(|t| t.to == BreakerState::Open) {
                trips += 1;
            }
        } else if roll < 90 {
            let i = rng.below(out.len() as u64) as usize;
            let (p, q) = out.swap_remove(i);
            reference.release(p, now);
            split.release(q, now);
        } else if roll < 98 {
            now = now + Duration::from_millis(rng.below(30));
        } else {
            let target = match rng.below(5) {
                0 => ManualState::Closed,
                1 => ManualState::ForcedOpen,
                2 => ManualState::MetricsOnly,
                3 => ManualState::OpenFor(Duration::from_millis(5)),
                _ => ManualState::Disabled,
            };
            if rng.chance(30) {
                let a = reference.reset(now);
                let b = split.locked(|m| m.reset(now));
                assert_eq!(a, b, "seed {seed} step {step}: reset");
            } else {
                let a = reference.force(target, now);
                let b = split.locked(|m| m.force(target, now));
                assert_eq!(a, b, "seed {seed} step {step}: force {target}");
            }
        }
        if striped && !rng.chance(10) {
            continue;
        }
        let view = split.machine.view(&split.path);
        assert_eq!(view.state(), reference.state(), "seed {seed} step {step}");
        assert_eq!(view.epoch(), reference.epoch(), "seed {seed} step {step}");
        assert_eq!(
            view.consecutive_failures(),
            reference.consecutive_failures(),
            "seed {seed} step {step}"
        );
        assert_eq!(
            view.metrics(now),
            reference.metrics(now),
            "seed {seed} step {step}"
        );
        assert_eq!(
            view.snapshot(),
            reference.snapshot(),
            "seed {seed} step {step}"
        );
    }
    (trips, split.untimed_steps)
}

#[test]
fn the_split_breaker_decides_as_the_sequential_machine() {
    let mut rng = Rng(0x5EED);
    let (mut trips, mut untimed) = (0, 0);
    for _ in 0..400 {
        let config = configs(&mut rng);
        let seed = rng.next();
        let (t, u) = check::<3, 0>(seed, config, 600);
        trips += t;
        untimed += u;
    }
    // The scripts reach trips, and most steps went the lock-free way (the
    // comparison is neither of quiet runs only nor of the machine with itself).
    assert!(trips > 150, "only {trips} trips");
    assert!(
        untimed > 20_000,
        "only {untimed} steps decided without the machine"
    );
}

#[test]
fn successes_gathered_on_stripes_decide_as_the_sequential_machine() {
    let mut rng = Rng(0x57_21_9E);
    let (mut trips, mut untimed) = (0, 0);
    for _ in 0..400 {
        let config = configs(&mut rng);
        let seed = rng.next();
        let (t, u) = check_striped::<3, 0>(seed, config, 600, true);
        trips += t;
        untimed += u;
    }
    assert!(trips > 150, "only {trips} trips");
    assert!(
        untimed > 20_000,
        "only {untimed} steps decided without the machine"
    );
}

#[test]
fn a_time_window_goes_through_the_machine_and_still_agrees() {
    let mut rng = Rng(0xB0C4E7);
    for _ in 0..100 {
        let config = BreakerConfig::builder()
            .failure_rate(Rate::from_percent(40))
            .time_window(Duration::from_millis(100), 10)
            .minimum_calls(5)
            .build()
            .unwrap();
        let seed = rng.next();
        let (_, untimed) = check::<0, 10>(seed, config, 400);
        assert_eq!(untimed, 0);
        assert!(!CircuitBreaker::<0, 10>::new(config)
            .unwrap()
            .closed_path()
            .is_untimed());
    }
}

#[test]
fn a_count_window_without_a_slow_call_rule_needs_no_time_while_closed() {
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 100).unwrap();
    let mut split = Split::new(CircuitBreaker::<2, 0>::new(config).unwrap());
    assert!(split.path.is_untimed());
    for i in 0..1000u32 {
        let Admission::Admitted { permit, .. } = split.request(Instant::ORIGIN) else {
            panic!("closed: admitted");
        };
        let outcome = CallOutcome {
            success: i % 5 != 4,
            duration: Duration::ZERO,
        };
        let _ = split.record(permit, outcome, Instant::ORIGIN);
    }
    // Every request and every outcome was decided without the machine.
    assert_eq!(split.untimed_steps, 2000);
    assert_eq!(
        split
            .machine
            .view(&split.path)
            .stats(Instant::ORIGIN)
            .failures,
        20
    );
}

#[test]
fn the_trip_comes_on_the_same_outcome_as_in_the_machine() {
    // 50 % of the last 10 calls, judged from 10: the 10th call with 5 failures trips.
    let config = BreakerConfig::failure_rate_over(Rate::from_percent(50), 10).unwrap();
    let mut machine = CircuitBreaker::<1, 0>::new(config).unwrap();
    let path = machine.closed_path();
    for i in 0..10 {
        let permit = path.request().unwrap();
        let outcome = CallOutcome {
            success: i % 2 == 0,
            duration: Duration::ZERO,
        };
        match path.record(permit, outcome) {
            Untimed::Trip(trip) => {
                assert_eq!(i, 9, "tripped early");
                let recorded = machine.trip(&path, trip, Instant::from_secs(1)).unwrap();
                assert_eq!(recorded.exceeded.failure_rate, Some(Rate::from_percent(50)));
            }
            other => assert!(matches!(other, Untimed::Recorded(_)), "call {i}: {other:?}"),
        }
    }
    assert_eq!(machine.state(), BreakerState::Open);
    assert!(path.request().is_none());
    // The window the trip saw is the machine's now.
    assert_eq!(machine.stats(Instant::from_secs(1)).failures, 5);
}

#[test]
fn a_stale_trip_is_not_applied_twice() {
    let config = BreakerConfig::basic(BasicRule {
        failure_threshold: 1,
        open_duration: Duration::from_secs(5),
        success_threshold: 1,
    })
    .unwrap();
    let mut machine = CircuitBreaker::<0, 0>::new(config).unwrap();
    let path = machine.closed_path();
    let (a, b) = (path.request().unwrap(), path.request().unwrap());
    let first = path.record(a, CallOutcome::failure(Duration::ZERO));
    let second = path.record(b, CallOutcome::failure(Duration::ZERO));
    let (Untimed::Trip(first), Untimed::Trip(second)) = (first, second) else {
        panic!("both failures see the threshold");
    };
    assert!(machine.trip(&path, first, Instant::ORIGIN).is_some());
    assert_eq!(machine.trip(&path, second, Instant::ORIGIN), None);
    assert_eq!(machine.reopens(), 1);
}

/// Outcomes kept on stripes until a stripe runs full, with nothing reading
/// the breaker in between: a window of 1,000 calls (a quarter failing trips
/// it) full of successes, then calls from three stripes in turn (300 calls
/// each: a stripe's 62 entries run out within them), failing more and more
/// often. Every answer matches the sequential machine's; the view after
/// each stretch of 600 calls has the machine's window, and the trip comes
/// on the same call.
#[test]
fn stripes_that_run_full_still_decide_as_the_sequential_machine() {
    let config = BreakerConfig::builder()
        .failure_threshold(None)
        .failure_rate(Rate::from_percent(25))
        .count_window(1_000)
        .minimum_calls(1_000)
        .build()
        .unwrap();
    let mut reference = CircuitBreaker::<16, 0>::new(config).unwrap();
    let mut split = Split::new(reference.clone());
    let now = Instant::ORIGIN;
    let call = |split: &mut Split<16, 0>, reference: &mut CircuitBreaker<16, 0>, fail: bool| {
        let (Admission::Admitted { permit: p, .. }, Admission::Admitted { permit: q, .. }) =
            (reference.request(now), split.request(now))
        else {
            return None;
        };
        let outcome = CallOutcome {
            success: !fail,
            duration: Duration::ZERO,
        };
        let a = reference.record(p, outcome, now);
        let b = split.record(q, outcome, now);
        assert_eq!(a, b);
        Some(a)
    };
    for _ in 0..1_000 {
        call(&mut split, &mut reference, false);
    }
    let mut tripped_at = None;
    for i in 0..3_000u32 {
        split.stripe = (i / 300 % 3) as usize;
        // One call in 7, then in 5, then in 3 fails, then one in 2.
        let every = [7, 5, 3, 2][(i / 750) as usize];
        match call(&mut split, &mut reference, i % every == every - 1) {
            Some(r) if r.transition.is_some() => {
                tripped_at = Some(i);
                break;
            }
            Some(_) => {}
            None => panic!("call {i} refused while closed"),
        }
        if i % 600 == 599 {
            let view = split.machine.view(&split.path);
            assert_eq!(view.snapshot(), reference.snapshot(), "after call {i}");
        }
    }
    assert!(tripped_at.is_some(), "the rate never stood");
    assert_eq!(split.machine.state(), BreakerState::Open);
    assert_eq!(split.machine.snapshot(), reference.snapshot());
}

/// The streak rule with outcomes kept on a few stripes and read seldom: a
/// failure is kept only while the failures in a row it can end stay below
/// the rule's (bounded by its stripe's last success, or by the last fold's
/// streak), so the trip still comes on the sequential machine's failure.
/// Streak rules of 2 to 6, alone and beside a rate over a window, callers
/// taking turns on three stripes, the breaker read every 40 calls.
#[test]
fn a_streak_across_a_few_stripes_trips_on_the_same_failure() {
    let mut rng = Rng(0x57_4EA_u64);
    let mut trips = 0;
    for round in 0..600u64 {
        let threshold = 2 + (round % 5) as u32;
        let builder = BreakerConfig::builder()
            .failure_threshold(threshold)
            .open_duration(Duration::from_millis(1));
        let config = if round % 2 == 0 {
            builder.build()
        } else {
            builder
                .failure_rate(Rate::from_percent(90))
                .count_window(20)
                .minimum_calls(20)
                .build()
        }
        .unwrap();
        let mut reference = CircuitBreaker::<1, 0>::new(config).unwrap();
        let mut split = Split::new(reference.clone());
        let mut now = Instant::ORIGIN;
        let failing = 20 + rng.below(40);
        for step in 0..300 {
            if rng.chance(3) {
                now = now + Duration::from_millis(2);
            }
            split.stripe = rng.below(3) as usize;
            let a = reference.request(now);
            let b = split.request(now);
            assert_eq!(a, b, "round {round} step {step}: request");
            let (Admission::Admitted { permit: p, .. }, Admission::Admitted { permit: q, .. }) =
                (a, b)
            else {
                continue;
            };
            let outcome = CallOutcome {
                success: !rng.chance(failing),
                duration: Duration::ZERO,
            };
            let a = reference.record(p, outcome, now);
            let b = split.record(q, outcome, now);
            assert_eq!(a, b, "round {round} step {step}: record {outcome:?}");
            if a.transition.is_some_and(|t| t.to == BreakerState::Open) {
                trips += 1;
            }
            if step % 40 == 39 {
                let view = split.machine.view(&split.path);
                assert_eq!(
                    view.snapshot(),
                    reference.snapshot(),
                    "round {round} step {step}"
                );
            }
        }
    }
    assert!(trips > 1_000, "only {trips} trips");
}
