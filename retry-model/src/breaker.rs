//! The circuit breaker against a reference model.
//!
//! Drives a [`CircuitBreaker`] with an arbitrary config and an arbitrary list of
//! requests, outcomes, releases, operator actions (force, ensure, reset, open for
//! a duration or until an instant, half-open now) and clock moves. The model
//! restates the breaker's rules plainly: it keeps every recorded call and counts
//! its own count and time windows, applies the threshold and rate rules (and
//! reports the rates an outcome pushes over their thresholds), the half-open
//! probes under both verdicts (consecutive, and rates over a number of probes)
//! and the half-open maximum wait, the driver's timer (when the breaker moves
//! on its own, and the move a wake makes then), the operator's actions and the
//! counts of rejected calls (in all since the last reset, and in the state),
//! the dashboard's readings per state (half-open reads the probes) and the
//! window's call durations (a time window's, and a count window's in a breaker
//! that keeps them), computes each open duration from the curve and the
//! jitter formulas itself, and holds every transition to the transition table
//! written out here. It reads the config only through its getters; the
//! breaker's window, curve and table code is never called.

use core::time::Duration;

use arbitrary::Unstructured;
use retry_core::{
    jitter_draw, Admission, Backoff, BreakerConfig, BreakerState, CallOutcome, CircuitBreaker,
    Exceeded, HalfOpenTimeout, HalfOpenVerdict, Ignored, Instant, Jitter, ManualState, Permit,
    Rate, RateReading, Recorded, RejectReason, Transition, TransitionCause, Window, WindowStats,
};

use crate::shared::{ensure, rarely, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "breaker";

/// Operations per input; also the model's history capacity.
const BREAKER_STEPS: usize = 256;
/// Permits the driver can hold at once.
const PERMIT_SLOTS: usize = 16;
/// The breaker types under test: up to 128 calls or 8 buckets, keeping the
/// durations of `DURATIONS` calls. Every input runs against two: one that
/// keeps none (the default) and one that keeps 64, so that count windows up
/// to 64 calls report their durations and larger ones do not.
type Breaker<const DURATIONS: usize> = CircuitBreaker<2, 8, DURATIONS>;

/// The durations the second breaker type keeps.
const KEPT_DURATIONS: usize = 64;

pub(crate) fn breaker_config(
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<Result<BreakerConfig, ()>> {
    let small = |u: &mut Unstructured<'_>, top: u32| u.int_in_range(1..=top);
    let window = match u.int_in_range(0..=3u8)? {
        0 => None,
        1 => Some(Window::Count {
            calls: u.int_in_range(1..=128u16)?,
        }),
        2 => Some(Window::Time {
            length: Duration::from_millis(u.int_in_range(1..=5_000)?),
            buckets: u.int_in_range(1..=8u16)?,
        }),
        // Raw values: validation or `new` may refuse them.
        _ => Some(if u.arbitrary()? {
            Window::Count {
                calls: u.arbitrary()?,
            }
        } else {
            Window::Time {
                length: u.arbitrary()?,
                buckets: u.arbitrary()?,
            }
        }),
    };
    let rate = |u: &mut Unstructured<'_>| -> arbitrary::Result<Option<Rate>> {
        Ok(match u.int_in_range(0..=3u8)? {
            0 | 1 => None,
            2 => Some(Rate::from_basis_points(u.int_in_range(1..=10_000)?)),
            _ => Some(Rate::from_basis_points(u.arbitrary()?)),
        })
    };
    let failure_rate = rate(u)?;
    let slow_rate = rate(u)?;
    let threshold = match u.int_in_range(0..=3u8)? {
        0 => None,
        3 => Some(u.arbitrary()?),
        _ => Some(small(u, 6)?),
    };
    let minimum = match window {
        Some(Window::Count { calls }) if calls > 0 => small(u, u32::from(calls).min(20))?,
        _ => small(u, 20)?,
    };
    let initial = Duration::from_millis(u.int_in_range(1..=1_000)?);
    let backoff = match u.int_in_range(0..=3u8)? {
        0 => Backoff::constant(initial),
        1 => Backoff::exponential(initial, 2.0),
        2 => Backoff::linear(initial),
        _ => Backoff::fibonacci(initial),
    };
    let jitter = match u.int_in_range(0..=5u8)? {
        0 | 1 => Jitter::None,
        2 => Jitter::Full,
        3 => Jitter::Equal,
        4 => Jitter::Decorrelated,
        _ => Jitter::Spread(f64::from(u.int_in_range(0..=100u8)?) / 100.0),
    };
    let permits = if rarely(u, 8)? {
        u32::MAX
    } else {
        small(u, 4)?
    };
    let built = BreakerConfig::builder()
        .failure_threshold(threshold)
        .failure_rate(failure_rate)
        .slow_call_rate(slow_rate)
        .slow_call_duration(Duration::from_millis(u.int_in_range(0..=500)?))
        .window(window)
        .minimum_calls(minimum)
        .open_backoff(backoff)
        .max_open_duration(initial.saturating_mul(small(u, 10)?))
        .open_jitter(jitter)
        .seed(u.arbitrary()?)
        .half_open_permits(permits)
        .success_threshold(small(u, 4)?)
        .half_open_verdict(if rarely(u, 3)? {
            HalfOpenVerdict::Rates {
                probes: u.int_in_range(0..=6)?,
            }
        } else {
            HalfOpenVerdict::Consecutive
        })
        .max_half_open_wait(match u.int_in_range(0..=3u8)? {
            0 | 1 => None,
            2 => Some(Duration::from_millis(u.int_in_range(0..=3_000)?)),
            _ => Some(u.arbitrary()?),
        })
        .on_half_open_timeout(if u.arbitrary()? {
            HalfOpenTimeout::Close
        } else {
            HalfOpenTimeout::Reopen
        })
        .build();
    Ok(built.map_err(|_| ()))
}

/// A permit as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ticket {
    epoch: u32,
    probe: bool,
}

/// One recorded call.
#[derive(Clone, Copy, Debug, Default)]
struct Call {
    at: u64,
    failed: bool,
    slow: bool,
    /// How long it took, in nanoseconds.
    took: u128,
}

/// What one operation produced, comparable between breaker and model.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seen {
    Nothing,
    Admitted {
        ticket: Ticket,
        transition: Option<Transition>,
    },
    Rejected {
        until: Option<Instant>,
        reason: RejectReason,
        transition: Option<Transition>,
    },
    Recorded(Recorded),
    Changed(Option<Transition>),
    Woke(Option<Transition>),
    Refused,
}

/// A half-open period as the model keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Probes {
    in_flight: u32,
    admitted: u32,
    reported: WindowStats,
    deadline: Option<Instant>,
}

/// The breaker's rules restated plainly, with every recorded call kept in a
/// fixed array since the window was last cleared.
#[derive(Clone, Copy, Debug)]
struct BreakerModel {
    config: BreakerConfig,
    state: BreakerState,
    open_until: Instant,
    probes: Probes,
    streak: u32,
    reopens: u32,
    epoch: u32,
    rejected: u64,
    rejected_in_state: u64,
    history: [Call; BREAKER_STEPS],
    recorded: usize,
    /// The largest count window whose calls' durations the breaker keeps
    /// (its type's `DURATIONS`).
    durations: usize,
}

/// `count` of `calls` in basis points, rounded down.
fn basis_points(count: u32, calls: u32) -> u16 {
    let bp = u64::from(count)
        .saturating_mul(10_000)
        .checked_div(u64::from(calls))
        .unwrap_or(0);
    u16::try_from(bp.min(10_000)).unwrap_or(10_000)
}

impl BreakerModel {
    fn new(config: BreakerConfig, durations: usize) -> Self {
        BreakerModel {
            durations,
            config,
            state: BreakerState::Closed,
            open_until: Instant::ORIGIN,
            probes: Probes::default(),
            streak: 0,
            reopens: 0,
            epoch: 0,
            rejected: 0,
            rejected_in_state: 0,
            history: [Call::default(); BREAKER_STEPS],
            recorded: 0,
        }
    }

    fn calls(&self) -> &[Call] {
        self.history.get(..self.recorded).unwrap_or(&[])
    }

    /// The window's counts at `now`. Time going backwards reads as the newest
    /// bucket already written.
    fn window(&self, now: Instant) -> WindowStats {
        let mut stats = WindowStats::default();
        self.in_window(now, |c| {
            stats.calls = stats.calls.saturating_add(1);
            stats.failures = stats.failures.saturating_add(u32::from(c.failed));
            stats.slow = stats.slow.saturating_add(u32::from(c.slow));
            stats.slow_failures = stats
                .slow_failures
                .saturating_add(u32::from(c.slow && c.failed));
        });
        stats
    }

    /// How long the calls the window holds at `now` took, added up in
    /// nanoseconds: a time window's, a count window's of at most `durations`
    /// calls; `None` for any other window (they keep no durations), or past
    /// what 64 bits hold.
    fn window_nanos(&self, now: Instant) -> Option<u64> {
        let kept = match self.config.window() {
            Some(Window::Time { .. }) => true,
            Some(Window::Count { calls }) => usize::from(calls) <= self.durations,
            None => false,
        };
        if !kept {
            return None;
        }
        let mut total = 0u128;
        self.in_window(now, |c| total = total.saturating_add(c.took));
        u64::try_from(total).ok().filter(|n| *n != u64::MAX)
    }

    /// Calls `count` with each call the window holds at `now`.
    fn in_window(&self, now: Instant, mut count: impl FnMut(&Call)) {
        match self.config.window() {
            None => {}
            Some(Window::Count { calls }) => {
                let skip = self.recorded.saturating_sub(usize::from(calls));
                self.calls().iter().skip(skip).for_each(&mut count);
            }
            Some(Window::Time { length, buckets }) => {
                let width = length
                    .as_nanos()
                    .checked_div(u128::from(buckets))
                    .unwrap_or(0)
                    .max(1);
                let bucket = |t: u64| u128::from(t).checked_div(width).unwrap_or(0);
                let current = self
                    .calls()
                    .iter()
                    .map(|c| bucket(c.at))
                    .fold(bucket(now.as_nanos()), u128::max);
                self.calls()
                    .iter()
                    .filter(|c| bucket(c.at).saturating_add(u128::from(buckets)) > current)
                    .for_each(&mut count);
            }
        }
    }

    /// What the dashboard shows at `now`, for the state: half-open, the
    /// probes' counts, judged once the verdict has as many as it needs
    /// (`success_threshold`, or the rates verdict's probes); otherwise the
    /// window's. Returns the counts, the failure and slow-call readings, and
    /// the durations' total (where the window keeps them, outside half-open).
    fn readings(&self, now: Instant) -> (WindowStats, RateReading, RateReading, Option<u64>) {
        if self.state == BreakerState::HalfOpen {
            let needed = match self.config.half_open_verdict() {
                HalfOpenVerdict::Consecutive => self.config.success_threshold(),
                HalfOpenVerdict::Rates { probes } => probes,
            };
            let p = self.probes.reported;
            let read = |count: u32| {
                if p.calls == 0 || p.calls < needed {
                    RateReading::NotEnoughCalls {
                        calls: p.calls,
                        minimum: needed,
                    }
                } else {
                    RateReading::Measured(Rate::from_basis_points(basis_points(count, p.calls)))
                }
            };
            return (p, read(p.failures), read(p.slow), None);
        }
        let w = self.window(now);
        (
            w,
            self.reading(w.failures, &w),
            self.reading(w.slow, &w),
            self.window_nanos(now),
        )
    }

    fn reached(rate: Rate, count: u32, calls: u32) -> bool {
        calls > 0
            && u128::from(count).saturating_mul(10_000)
                >= u128::from(rate.basis_points()).saturating_mul(u128::from(calls))
    }

    /// Whether `rate` is judged and reached over `w`.
    fn judged(&self, rate: Option<Rate>, count: u32, w: &WindowStats) -> bool {
        rate.is_some_and(|r| {
            w.calls >= self.config.minimum_calls() && Self::reached(r, count, w.calls)
        })
    }

    /// What the dashboard should read at `now`.
    fn reading(&self, count: u32, w: &WindowStats) -> RateReading {
        if self.config.window().is_none() {
            RateReading::NoWindow
        } else if w.calls == 0 || w.calls < self.config.minimum_calls() {
            RateReading::NotEnoughCalls {
                calls: w.calls,
                minimum: self.config.minimum_calls(),
            }
        } else {
            RateReading::Measured(Rate::from_basis_points(basis_points(count, w.calls)))
        }
    }

    fn go(&mut self, to: BreakerState, at: Instant, cause: TransitionCause) -> Transition {
        let from = self.state;
        self.state = to;
        self.rejected_in_state = 0;
        Transition {
            from,
            to,
            at,
            cause,
        }
    }

    fn open(&mut self, now: Instant, cause: TransitionCause) -> Transition {
        self.reopens = self.reopens.saturating_add(1);
        self.epoch = self.epoch.wrapping_add(1);
        self.streak = 0;
        self.open_until = now.saturating_add(open_duration(&self.config, self.reopens));
        self.go(BreakerState::Open, now, cause)
    }

    fn half_open(&mut self, now: Instant, cause: TransitionCause) -> Transition {
        self.probes = Probes {
            deadline: self
                .config
                .max_half_open_wait()
                .map(|w| now.saturating_add(w)),
            ..Probes::default()
        };
        self.go(BreakerState::HalfOpen, now, cause)
    }

    fn clean(&mut self) {
        self.recorded = 0;
        self.streak = 0;
        self.reopens = 0;
    }

    fn reject(
        &mut self,
        until: Option<Instant>,
        reason: RejectReason,
        transition: Option<Transition>,
    ) -> Seen {
        self.rejected = self.rejected.saturating_add(1);
        self.rejected_in_state = self.rejected_in_state.saturating_add(1);
        Seen::Rejected {
            until,
            reason,
            transition,
        }
    }

    fn admit(&self, probe: bool, transition: Option<Transition>) -> Seen {
        Seen::Admitted {
            ticket: Ticket {
                epoch: self.epoch,
                probe,
            },
            transition,
        }
    }

    fn probe(&mut self, now: Instant, transition: Option<Transition>) -> Seen {
        let room = match self.config.half_open_verdict() {
            HalfOpenVerdict::Consecutive => true,
            HalfOpenVerdict::Rates { probes } => self.probes.admitted < probes,
        };
        if room && self.probes.in_flight < self.config.half_open_permits() {
            self.probes.in_flight = self.probes.in_flight.saturating_add(1);
            self.probes.admitted = self.probes.admitted.saturating_add(1);
            self.admit(true, transition)
        } else {
            let until = self.probes.deadline.filter(|d| *d > now);
            self.reject(until, RejectReason::ProbesBusy, transition)
        }
    }

    fn request(&mut self, now: Instant) -> Seen {
        match self.state {
            BreakerState::Closed | BreakerState::Disabled | BreakerState::MetricsOnly => {
                self.admit(false, None)
            }
            BreakerState::ForcedOpen => self.reject(None, RejectReason::ForcedOpen, None),
            BreakerState::Open if now < self.open_until => {
                self.reject(Some(self.open_until), RejectReason::Open, None)
            }
            BreakerState::Open => {
                let t = self.half_open(now, TransitionCause::OpenElapsed);
                self.probe(now, Some(t))
            }
            BreakerState::HalfOpen => match self.probes.deadline {
                Some(d) if now >= d => match self.config.half_open_timeout() {
                    HalfOpenTimeout::Reopen => {
                        let t = self.open(now, TransitionCause::HalfOpenTimeout);
                        // Re-opened at the last instant there is: no later time to name.
                        let until = Some(self.open_until).filter(|u| *u > now);
                        self.reject(until, RejectReason::Open, Some(t))
                    }
                    HalfOpenTimeout::Close => {
                        self.clean();
                        let t =
                            self.go(BreakerState::Closed, now, TransitionCause::HalfOpenTimeout);
                        self.admit(false, Some(t))
                    }
                },
                _ => self.probe(now, None),
            },
        }
    }

    /// When the breaker moves on its own: the end of the open period, or the
    /// half-open deadline.
    fn next_deadline(&self) -> Option<Instant> {
        match self.state {
            BreakerState::Open => Some(self.open_until),
            BreakerState::HalfOpen => self.probes.deadline,
            _ => None,
        }
    }

    /// The driver's timer at `now`: the move a request at `now` would make
    /// first, with nothing admitted or counted; nothing before its time.
    fn wake(&mut self, now: Instant) -> Option<Transition> {
        match self.state {
            BreakerState::Open if now >= self.open_until => {
                Some(self.half_open(now, TransitionCause::OpenElapsed))
            }
            BreakerState::HalfOpen => match self.probes.deadline {
                Some(d) if now >= d => Some(match self.config.half_open_timeout() {
                    HalfOpenTimeout::Reopen => self.open(now, TransitionCause::HalfOpenTimeout),
                    HalfOpenTimeout::Close => {
                        self.clean();
                        self.go(BreakerState::Closed, now, TransitionCause::HalfOpenTimeout)
                    }
                }),
                _ => None,
            },
            _ => None,
        }
    }

    fn record(&mut self, ticket: Ticket, outcome: CallOutcome, now: Instant) -> Recorded {
        let late = ticket.epoch != self.epoch;
        let failed = !outcome.success;
        let slow = outcome.duration > self.config.slow_call_duration();
        let ignored = |why| Recorded {
            transition: None,
            ignored: Some(why),
            exceeded: Exceeded::NONE,
        };
        let plain = |transition, exceeded| Recorded {
            transition,
            ignored: None,
            exceeded,
        };
        match self.state {
            BreakerState::Open => ignored(Ignored::Open),
            BreakerState::ForcedOpen => ignored(Ignored::ForcedOpen),
            BreakerState::Disabled => ignored(Ignored::Disabled),
            BreakerState::Closed | BreakerState::MetricsOnly => {
                let before = self.window(now);
                if self.config.window().is_some() {
                    // Time going backwards lands in the newest bucket written.
                    let newest = self.calls().iter().map(|c| c.at).max().unwrap_or(0);
                    if let Some(slot) = self.history.get_mut(self.recorded) {
                        *slot = Call {
                            at: now.as_nanos().max(newest),
                            failed,
                            slow,
                            took: outcome.duration.as_nanos(),
                        };
                        self.recorded = self.recorded.saturating_add(1);
                    }
                }
                if !late {
                    self.streak = if failed {
                        self.streak.saturating_add(1)
                    } else {
                        0
                    };
                }
                let after = self.window(now);
                let fr = self.config.failure_rate();
                let sr = self.config.slow_call_rate();
                let exceeded = Exceeded {
                    failure_rate: (self.judged(fr, after.failures, &after)
                        && !self.judged(fr, before.failures, &before))
                    .then(|| self.reading(after.failures, &after).rate())
                    .flatten(),
                    slow_call_rate: (self.judged(sr, after.slow, &after)
                        && !self.judged(sr, before.slow, &before))
                    .then(|| self.reading(after.slow, &after).rate())
                    .flatten(),
                };
                if late || self.state == BreakerState::MetricsOnly {
                    return plain(None, exceeded);
                }
                if self
                    .config
                    .failure_threshold()
                    .is_some_and(|n| self.streak >= n)
                {
                    return plain(
                        Some(self.open(now, TransitionCause::ConsecutiveFailures)),
                        exceeded,
                    );
                }
                if self.judged(fr, after.failures, &after) {
                    return plain(Some(self.open(now, TransitionCause::FailureRate)), exceeded);
                }
                if self.judged(sr, after.slow, &after) {
                    return plain(
                        Some(self.open(now, TransitionCause::SlowCallRate)),
                        exceeded,
                    );
                }
                plain(None, exceeded)
            }
            BreakerState::HalfOpen if late || !ticket.probe => ignored(Ignored::Late),
            BreakerState::HalfOpen => match self.config.half_open_verdict() {
                HalfOpenVerdict::Consecutive => {
                    if failed || (slow && self.config.slow_call_rate().is_some()) {
                        let t = self.open(now, TransitionCause::ProbeFailed);
                        return plain(Some(t), Exceeded::NONE);
                    }
                    self.probes.reported.calls = self.probes.reported.calls.saturating_add(1);
                    self.probes.reported.slow =
                        self.probes.reported.slow.saturating_add(u32::from(slow));
                    if self.probes.reported.calls >= self.config.success_threshold() {
                        self.clean();
                        let t =
                            self.go(BreakerState::Closed, now, TransitionCause::ProbesSucceeded);
                        return plain(Some(t), Exceeded::NONE);
                    }
                    self.probes.in_flight = self.probes.in_flight.saturating_sub(1);
                    plain(None, Exceeded::NONE)
                }
                HalfOpenVerdict::Rates { probes } => {
                    let r = &mut self.probes.reported;
                    r.calls = r.calls.saturating_add(1);
                    r.failures = r.failures.saturating_add(u32::from(failed));
                    r.slow = r.slow.saturating_add(u32::from(slow));
                    r.slow_failures = r.slow_failures.saturating_add(u32::from(slow && failed));
                    self.probes.in_flight = self.probes.in_flight.saturating_sub(1);
                    let r = self.probes.reported;
                    if r.calls < probes {
                        return plain(None, Exceeded::NONE);
                    }
                    let over = |rate: Option<Rate>, count: u32| {
                        rate.filter(|x| Self::reached(*x, count, r.calls))
                            .map(|_| Rate::from_basis_points(basis_points(count, r.calls)))
                    };
                    let exceeded = Exceeded {
                        failure_rate: over(self.config.failure_rate(), r.failures),
                        slow_call_rate: over(self.config.slow_call_rate(), r.slow),
                    };
                    let t = if exceeded.failure_rate.is_some() {
                        self.open(now, TransitionCause::FailureRate)
                    } else if exceeded.slow_call_rate.is_some() {
                        self.open(now, TransitionCause::SlowCallRate)
                    } else {
                        self.clean();
                        self.go(BreakerState::Closed, now, TransitionCause::ProbesSucceeded)
                    };
                    plain(Some(t), exceeded)
                }
            },
        }
    }

    fn release(&mut self, ticket: Ticket) {
        if self.state == BreakerState::HalfOpen && ticket.probe && ticket.epoch == self.epoch {
            self.probes.in_flight = self.probes.in_flight.saturating_sub(1);
            self.probes.admitted = self.probes.admitted.saturating_sub(1);
        }
    }

    /// Whether `target` is a request the breaker refuses whatever its state.
    fn invalid(target: ManualState, now: Instant) -> bool {
        match target {
            ManualState::OpenFor(d) => d.is_zero(),
            ManualState::OpenUntil(t) => t <= now,
            _ => false,
        }
    }

    fn force(&mut self, target: ManualState, now: Instant) -> Seen {
        if !may_force(self.state, target) || Self::invalid(target, now) {
            return Seen::Refused;
        }
        self.reopens = 0;
        let cause = TransitionCause::Manual;
        let t = match target {
            ManualState::Closed | ManualState::MetricsOnly => {
                self.clean();
                self.go(forced_state(target), now, cause)
            }
            ManualState::Disabled => self.go(forced_state(target), now, cause),
            ManualState::ForcedOpen => {
                self.epoch = self.epoch.wrapping_add(1);
                self.go(forced_state(target), now, cause)
            }
            ManualState::OpenFor(d) => {
                self.epoch = self.epoch.wrapping_add(1);
                self.streak = 0;
                self.open_until = now.saturating_add(d);
                self.go(BreakerState::Open, now, cause)
            }
            ManualState::OpenUntil(until) => {
                self.epoch = self.epoch.wrapping_add(1);
                self.streak = 0;
                self.open_until = until;
                self.go(BreakerState::Open, now, cause)
            }
            ManualState::HalfOpen => {
                self.epoch = self.epoch.wrapping_add(1);
                self.streak = 0;
                self.half_open(now, cause)
            }
        };
        Seen::Changed(Some(t))
    }

    fn ensure(&mut self, target: ManualState, now: Instant) -> Seen {
        if Self::invalid(target, now) {
            return Seen::Refused;
        }
        if self.state == forced_state(target) {
            return Seen::Changed(None);
        }
        self.force(target, now)
    }

    fn reset(&mut self, now: Instant) -> Seen {
        self.clean();
        self.rejected = 0;
        Seen::Changed(Some(self.go(
            BreakerState::Closed,
            now,
            TransitionCause::Reset,
        )))
    }
}

/// Every state, for walking the transition table.
const STATES: [BreakerState; 6] = [
    BreakerState::Closed,
    BreakerState::Open,
    BreakerState::HalfOpen,
    BreakerState::ForcedOpen,
    BreakerState::Disabled,
    BreakerState::MetricsOnly,
];

/// One of every kind of state an operator may ask for.
const MANUAL: [ManualState; 7] = [
    ManualState::Closed,
    ManualState::OpenFor(Duration::from_secs(1)),
    ManualState::OpenUntil(Instant::MAX),
    ManualState::HalfOpen,
    ManualState::ForcedOpen,
    ManualState::Disabled,
    ManualState::MetricsOnly,
];

/// The state an operator's request puts the breaker in.
fn forced_state(target: ManualState) -> BreakerState {
    match target {
        ManualState::Closed => BreakerState::Closed,
        ManualState::OpenFor(_) | ManualState::OpenUntil(_) => BreakerState::Open,
        ManualState::HalfOpen => BreakerState::HalfOpen,
        ManualState::ForcedOpen => BreakerState::ForcedOpen,
        ManualState::Disabled => BreakerState::Disabled,
        ManualState::MetricsOnly => BreakerState::MetricsOnly,
    }
}

/// The breaker's own moves: a closed breaker trips open, an open one lets a
/// probe through (half-open), and the probes (or the half-open maximum wait)
/// either close it or open it again.
fn moves_automatically(from: BreakerState, to: BreakerState) -> bool {
    matches!(
        (from, to),
        (BreakerState::Closed, BreakerState::Open)
            | (BreakerState::Open, BreakerState::HalfOpen)
            | (BreakerState::HalfOpen, BreakerState::Closed)
            | (BreakerState::HalfOpen, BreakerState::Open)
    )
}

/// An operator may ask for any state from anywhere, the state the breaker is in
/// included, except half-open from closed, and open or half-open from
/// metrics-only.
fn may_force(from: BreakerState, to: ManualState) -> bool {
    !matches!(
        (from, forced_state(to)),
        (BreakerState::Closed, BreakerState::HalfOpen)
            | (
                BreakerState::MetricsOnly,
                BreakerState::Open | BreakerState::HalfOpen
            )
    )
}

fn transition_is_legal(t: &Transition) -> bool {
    match t.cause {
        TransitionCause::Manual => MANUAL
            .into_iter()
            .any(|m| forced_state(m) == t.to && may_force(t.from, m)),
        TransitionCause::Reset => t.to == BreakerState::Closed,
        _ => moves_automatically(t.from, t.to),
    }
}

/// The breaker's published table ([`BreakerState::changes_automatically_to`],
/// [`BreakerState::may_be_forced_to`], [`ManualState::state`]) agrees with the
/// one written out here, cell by cell.
fn check_table() -> Result<(), Violation> {
    for from in STATES {
        for to in STATES {
            ensure(
                from.changes_automatically_to(to) == moves_automatically(from, to),
                TARGET,
                0,
                "the published table of automatic transitions differs from the model's",
            )?;
        }
        for m in MANUAL {
            ensure(
                from.may_be_forced_to(m) == may_force(from, m),
                TARGET,
                0,
                "the published table of manual transitions differs from the model's",
            )?;
        }
    }
    for m in MANUAL {
        ensure(
            m.state() == forced_state(m),
            TARGET,
            0,
            "a manual state maps to another breaker state than the model's",
        )?;
    }
    Ok(())
}

/// Nanoseconds back to a duration, saturating at [`Duration::MAX`].
fn duration_of(nanos: u128) -> Duration {
    const PER_SEC: u128 = 1_000_000_000;
    let secs = nanos.checked_div(PER_SEC).unwrap_or(0);
    let sub = nanos.checked_rem(PER_SEC).unwrap_or(0);
    match (u64::try_from(secs), u32::try_from(sub)) {
        (Ok(secs), Ok(sub)) => Duration::new(secs, sub),
        _ => Duration::MAX,
    }
}

/// The `n`-th Fibonacci number (1, 1, 2, 3, 5, …), saturating.
fn fibonacci(n: u32) -> u64 {
    let (mut previous, mut current) = (0u64, 1u64);
    for _ in 1..n {
        let next = previous.saturating_add(current);
        previous = current;
        current = next;
    }
    current
}

/// The curve's value for the `n`-th opening in a row (`n >= 1`), before any cap:
/// constant, `initial + (n − 1) × increment`, `initial × factorⁿ⁻¹`, or
/// `initial × fib(n)`, all saturating.
fn curve(backoff: Backoff, n: u32) -> Duration {
    let steps = n.saturating_sub(1);
    match backoff {
        Backoff::None => Duration::ZERO,
        Backoff::Constant { delay } => delay,
        Backoff::Linear { initial, increment } => {
            initial.saturating_add(increment.saturating_mul(steps))
        }
        Backoff::Exponential { initial, factor } => {
            if steps == 0 || initial.is_zero() {
                initial
            } else if factor.to_bits() == 2.0f64.to_bits() {
                // Doubling, the only factor the configs here use: exact integers.
                match 1u128.checked_shl(steps) {
                    Some(m) => duration_of(initial.as_nanos().saturating_mul(m)),
                    None => Duration::MAX,
                }
            } else {
                let mut scaled = initial.as_nanos() as f64;
                for _ in 0..steps {
                    scaled *= factor;
                }
                // `as` saturates; dropping the fraction rounds down.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let whole = scaled as u128;
                duration_of(whole)
            }
        }
        Backoff::Fibonacci { initial } => {
            duration_of(initial.as_nanos().saturating_mul(u128::from(fibonacci(n))))
        }
    }
}

/// A uniform pick in `[0, x]` from one 64-bit random word: the high half of
/// `word × (x + 1)`. A range wider than 64 bits picks its top 64 bits this way.
fn pick_up_to(x: u128, word: u64) -> u128 {
    if x == 0 {
        return 0;
    }
    match u64::try_from(x) {
        Ok(x) => (u128::from(word).saturating_mul(u128::from(x).saturating_add(1))) >> 64,
        Err(_) => {
            let shift = 128u32.saturating_sub(x.leading_zeros()).saturating_sub(64);
            (pick_up_to(x >> shift, word) << shift).min(x)
        }
    }
}

/// `f × n` rounded down, for a fraction `f` in `[0, 1]`.
fn fraction_of(n: u128, f: f64) -> u128 {
    let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
    // `as` saturates; dropping the fraction rounds down.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let part = (n as f64 * f) as u128;
    part
}

/// The open duration after the `reopen`-th opening in a row, restated from the
/// documentation: the curve's value capped at the maximum open duration, then
/// jittered by the configured kind with the random word for this opening
/// ([`jitter_draw`] of the seed, the opening and the capped value; the word is
/// the randomness, the formulas are the model's).
fn open_duration(config: &BreakerConfig, reopen: u32) -> Duration {
    let reopen = reopen.max(1);
    let cap = config.max_open_duration();
    let backoff = config.open_backoff();
    let base = curve(backoff, reopen).min(cap);
    let first = curve(backoff, 1);
    let previous = if reopen > 1 {
        curve(backoff, reopen.saturating_sub(1)).min(cap)
    } else {
        first
    };
    let word = jitter_draw(config.seed(), reopen, base);
    let n = base.as_nanos();
    let out = match config.open_jitter() {
        Jitter::None => n,
        // Uniform in [0, d].
        Jitter::Full => pick_up_to(n, word),
        // Half fixed, half uniform.
        Jitter::Equal => {
            let half = n.checked_div(2).unwrap_or(0);
            half.saturating_add(pick_up_to(n.saturating_sub(half), word))
        }
        // Uniform in [first, 3 × previous], capped.
        Jitter::Decorrelated => {
            let lo = first.as_nanos();
            let hi = previous.as_nanos().saturating_mul(3);
            let picked = if hi > lo {
                lo.saturating_add(pick_up_to(hi.saturating_sub(lo), word))
            } else {
                lo
            };
            picked.min(cap.as_nanos())
        }
        // d minus up to f·d.
        Jitter::Subtract(f) => n.saturating_sub(pick_up_to(fraction_of(n, f), word)),
        // d plus less than f·d (uncapped).
        Jitter::Add(f) => {
            let room = fraction_of(n, f);
            n.saturating_add(if room == 0 {
                0
            } else {
                pick_up_to(room.saturating_sub(1), word)
            })
        }
        // d scaled within ±f, capped.
        Jitter::Spread(f) => {
            let spread = fraction_of(n, f);
            n.saturating_add(pick_up_to(spread.saturating_mul(2), word))
                .saturating_sub(spread)
                .min(cap.as_nanos())
        }
    };
    duration_of(out)
}

/// An operator's target drawn from the input: every kind, with durations and
/// instants around `now` (zero and past ones included, which are refused).
fn manual_target(u: &mut Unstructured<'_>, now: Instant) -> ManualState {
    let ms = |u: &mut Unstructured<'_>| {
        Duration::from_millis(match u.int_in_range(0..=3u8).unwrap_or(0) {
            0 => 0,
            1 => 500,
            2 => 5_000,
            _ => u64::from(u.arbitrary::<u16>().unwrap_or(0)),
        })
    };
    match u.int_in_range(0..=6u8).unwrap_or(0) {
        0 => ManualState::Closed,
        1 => ManualState::ForcedOpen,
        2 => ManualState::Disabled,
        3 => ManualState::MetricsOnly,
        4 => ManualState::OpenFor(ms(u)),
        5 => {
            let d = ms(u);
            ManualState::OpenUntil(if u.arbitrary().unwrap_or(true) {
                now.saturating_add(d)
            } else {
                now.saturating_sub(d)
            })
        }
        _ => ManualState::HalfOpen,
    }
}

/// Drives a [`CircuitBreaker`] with an arbitrary config and an arbitrary list
/// of requests, outcomes, releases, operator actions, timer wakes (at the
/// breaker's next deadline, early or stale) and clock moves, against the
/// reference model. Checks: no panic; every answer (admissions, rejections
/// with their times and transitions, what each outcome did, operator answers,
/// the move a wake made), state, epoch, next deadline, window count, counts
/// of rejected calls (in all and in the state) and dashboard reading (per
/// state, durations included) equals the model's; never more probes in flight
/// than permits (nor, under the rates verdict, more probes admitted than it
/// judges); a rejection changes only the counts of rejected calls unless it
/// reports a transition, and names a future time; a refused operator request,
/// and a wake with nothing due, change nothing; every transition is in the
/// table and stamped with now.
///
/// Each input runs twice: against the default breaker type (a count
/// window keeps no durations) and against one that keeps 64 calls'
/// durations.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    check_table()?;
    check_with::<0>(data)?;
    check_with::<KEPT_DURATIONS>(data)
}

/// [`check`] against `Breaker<DURATIONS>`.
fn check_with<const DURATIONS: usize>(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    let Ok(Ok(config)) = breaker_config(&mut u) else {
        return Ok(());
    };
    let mut breaker = match Breaker::<DURATIONS>::new(config) {
        Ok(b) => b,
        Err(e) => {
            let too_big = match config.window() {
                Some(Window::Count { calls }) => {
                    usize::from(calls) > Breaker::<DURATIONS>::CALL_CAPACITY
                }
                Some(Window::Time { buckets, .. }) => {
                    usize::from(buckets) > Breaker::<DURATIONS>::BUCKET_CAPACITY
                }
                None => false,
            };
            return ensure(
                too_big && e.field().starts_with("window."),
                TARGET,
                0,
                "a valid config that fits was refused",
            );
        }
    };
    let mut model = BreakerModel::new(config, DURATIONS);
    let mut permits: [Option<(Permit, Ticket)>; PERMIT_SLOTS] = Default::default();
    let mut now = Instant::ORIGIN;
    for step in 0..BREAKER_STEPS {
        if u.is_empty() {
            break;
        }
        let Ok(op) = u.int_in_range(0..=109u8) else {
            break;
        };
        let slot: usize = u
            .int_in_range(0..=PERMIT_SLOTS.saturating_sub(1))
            .unwrap_or(0);
        let before = breaker.clone();
        let (seen, expected) = match op {
            0..=19 => {
                let ms = match u.int_in_range(0..=7u8).unwrap_or(0) {
                    0 => 0,
                    1 => 1,
                    2 => 50,
                    3 => 250,
                    4 => 999,
                    5 => 2_000,
                    6 => 7_000,
                    _ => u64::from(u.arbitrary::<u16>().unwrap_or(0)),
                };
                now = if rarely(&mut u, 16).unwrap_or(false) {
                    now.saturating_sub(Duration::from_millis(ms))
                } else {
                    now.saturating_add(Duration::from_millis(ms))
                };
                (Seen::Nothing, Seen::Nothing)
            }
            20..=49 => {
                let Some(free) = permits.get_mut(slot).filter(|p| p.is_none()) else {
                    continue;
                };
                let expected = model.request(now);
                let seen = match breaker.request(now) {
                    Admission::Admitted { permit, transition } => {
                        let ticket = Ticket {
                            epoch: permit.epoch(),
                            probe: permit.is_probe(),
                        };
                        *free = Some((permit, ticket));
                        Seen::Admitted { ticket, transition }
                    }
                    Admission::Rejected {
                        until,
                        reason,
                        transition,
                    } => {
                        if transition.is_none() {
                            ensure(
                                breaker.rejected_calls()
                                    == before.rejected_calls().saturating_add(1)
                                    && breaker.rejected_calls_in_state()
                                        == before.rejected_calls_in_state().saturating_add(1)
                                    && breaker.state() == before.state()
                                    && breaker.epoch() == before.epoch()
                                    && breaker.stats(now) == before.stats(now)
                                    && breaker.probes_in_flight() == before.probes_in_flight()
                                    && breaker.probes_admitted() == before.probes_admitted(),
                                TARGET,
                                step,
                                "a rejection changed the breaker beyond its count",
                            )?;
                        }
                        ensure(
                            until.is_none_or(|t| t > now),
                            TARGET,
                            step,
                            "a rejection's time is not after now",
                        )?;
                        Seen::Rejected {
                            until,
                            reason,
                            transition,
                        }
                    }
                };
                (seen, expected)
            }
            50..=84 => {
                let Some((permit, ticket)) = permits.get_mut(slot).and_then(Option::take) else {
                    continue;
                };
                let success = u.arbitrary().unwrap_or(true);
                let took = Duration::from_millis(match u.int_in_range(0..=4u8).unwrap_or(0) {
                    0 => 0,
                    1 => 1,
                    2 => 100,
                    3 => 300,
                    _ => 600,
                });
                let outcome = CallOutcome {
                    success,
                    duration: took,
                };
                let expected = Seen::Recorded(model.record(ticket, outcome, now));
                (
                    Seen::Recorded(breaker.record(permit, outcome, now)),
                    expected,
                )
            }
            85..=95 => {
                let Some((permit, ticket)) = permits.get_mut(slot).and_then(Option::take) else {
                    continue;
                };
                model.release(ticket);
                breaker.release(permit, now);
                (Seen::Nothing, Seen::Nothing)
            }
            105..=109 => {
                // The driver's timer: mostly at the deadline it was armed
                // for, sometimes early, late or stale.
                let at = match (
                    u.int_in_range(0..=3u8).unwrap_or(0),
                    breaker.next_deadline(),
                ) {
                    (0 | 1, Some(due)) => now.max(due),
                    _ => now,
                };
                now = at;
                let expected = Seen::Woke(model.wake(now));
                let seen = Seen::Woke(breaker.wake(now));
                if seen == Seen::Woke(None) {
                    ensure(
                        breaker == before,
                        TARGET,
                        step,
                        "a wake with nothing due changed the breaker",
                    )?;
                }
                (seen, expected)
            }
            _ => {
                let target = manual_target(&mut u, now);
                let (expected, result) = match op {
                    96..=98 => (
                        model.force(target, now),
                        breaker.force(target, now).map(Some),
                    ),
                    99..=102 => (model.ensure(target, now), breaker.ensure(target, now)),
                    _ => (model.reset(now), Ok(Some(breaker.reset(now)))),
                };
                let seen = match result {
                    Ok(t) => Seen::Changed(t),
                    Err(_) => {
                        ensure(
                            breaker == before,
                            TARGET,
                            step,
                            "a refused operator request changed the breaker",
                        )?;
                        Seen::Refused
                    }
                };
                if seen == Seen::Changed(None) {
                    ensure(
                        breaker == before,
                        TARGET,
                        step,
                        "an operator request for the current state changed the breaker",
                    )?;
                }
                (seen, expected)
            }
        };
        ensure(
            seen == expected,
            TARGET,
            step,
            "the answer differs from the reference model",
        )?;
        let transition = match seen {
            Seen::Admitted { transition, .. }
            | Seen::Rejected { transition, .. }
            | Seen::Changed(transition)
            | Seen::Woke(transition) => transition,
            Seen::Recorded(r) => r.transition,
            Seen::Nothing | Seen::Refused => None,
        };
        if let Some(t) = transition {
            ensure(
                transition_is_legal(&t),
                TARGET,
                step,
                "a transition not in the table",
            )?;
            ensure(
                t.at == now,
                TARGET,
                step,
                "a transition not stamped with now",
            )?;
        }
        ensure(
            breaker.state() == model.state,
            TARGET,
            step,
            "state differs from the model",
        )?;
        ensure(
            breaker.epoch() == model.epoch,
            TARGET,
            step,
            "epoch differs from the model",
        )?;
        ensure(
            breaker.reopens() == model.reopens,
            TARGET,
            step,
            "reopens differ from the model",
        )?;
        ensure(
            breaker.rejected_calls() == model.rejected
                && breaker.rejected_calls_in_state() == model.rejected_in_state,
            TARGET,
            step,
            "rejected calls differ from the model",
        )?;
        ensure(
            breaker.next_deadline() == model.next_deadline(),
            TARGET,
            step,
            "the next deadline differs from the model",
        )?;
        let window = model.window(now);
        ensure(
            breaker.stats(now) == window,
            TARGET,
            step,
            "window differs from the model",
        )?;
        let metrics = breaker.metrics(now);
        let (counts, failure_rate, slow_call_rate, nanos) = model.readings(now);
        let mean = nanos.and_then(|n| n.checked_div(u64::from(counts.calls)));
        ensure(
            metrics.window == counts
                && metrics.failure_rate == failure_rate
                && metrics.slow_call_rate == slow_call_rate
                && metrics.window.slow_successes()
                    == counts.slow.saturating_sub(counts.slow_failures)
                && metrics.rejected == model.rejected
                && metrics.rejected_in_state == model.rejected_in_state
                && metrics.call_duration_total.map(|d| d.as_nanos()) == nanos.map(u128::from)
                && metrics.call_duration_mean.map(|d| d.as_nanos()) == mean.map(u128::from)
                && metrics.state == model.state,
            TARGET,
            step,
            "the dashboard's readings differ from the model",
        )?;
        if model.state == BreakerState::Open {
            ensure(
                breaker.open_until() == Some(model.open_until),
                TARGET,
                step,
                "open until differs from the model",
            )?;
        }
        let in_flight = breaker.probes_in_flight();
        ensure(
            in_flight <= config.half_open_permits(),
            TARGET,
            step,
            "more probes in flight than permits",
        )?;
        if let HalfOpenVerdict::Rates { probes } = config.half_open_verdict() {
            ensure(
                breaker.probes_admitted() <= probes,
                TARGET,
                step,
                "more probes admitted than the rates verdict judges",
            )?;
        }
        let held = permits
            .iter()
            .flatten()
            .filter(|(p, _)| p.is_probe() && p.epoch() == breaker.epoch())
            .count();
        if breaker.state() == BreakerState::HalfOpen {
            ensure(
                u32::try_from(held).is_ok_and(|h| h == in_flight),
                TARGET,
                step,
                "probes in flight differ from the probe permits held",
            )?;
            ensure(
                breaker.probe_successes()
                    == model
                        .probes
                        .reported
                        .calls
                        .saturating_sub(model.probes.reported.failures)
                    && breaker.probes_admitted() == model.probes.admitted
                    && breaker.probe_results() == model.probes.reported
                    && breaker.half_open_until() == model.probes.deadline,
                TARGET,
                step,
                "half-open probes differ from the model",
            )?;
        }
    }
    // Hand every permit back; nothing may panic.
    for (permit, _) in permits.iter_mut().filter_map(Option::take) {
        breaker.release(permit, now);
    }
    Ok(())
}
