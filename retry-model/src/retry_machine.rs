//! The retry machine against a reference model.
//!
//! Drives a [`RetryMachine`] with an arbitrary valid policy, seed, clock and event
//! stream, and restates the documented control flow phase by phase: which event
//! each phase accepts, the next attempt and its deadline, the give-up reasons, the
//! bounds a delay must fall in (curve, hints, jitter, time budget) and the
//! withdrawal a retry budget asks for. The model computes the curve's first delay
//! and the hint rules itself; it reads the policy only through its getters.

use core::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use retry_core::{
    Action, Backoff, CircuitOpen, Event, Failure, FailureKind, GiveUpReason, Hint, HintMode,
    Instant, Jitter, Phase, Resolution, RetryMachine, RetryPolicy, SleepReason,
};

use crate::shared::{ensure, rarely, scaled, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "retry_machine";

/// Events per input.
const MACHINE_STEPS: usize = 256;

/// Shrinks the arbitrary policy's numbers into ranges where retries, sleeps and
/// budgets interact, for half of the inputs; the rest keep the raw values.
pub(crate) fn shape_policy(
    policy: RetryPolicy,
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<RetryPolicy> {
    if !u.arbitrary::<bool>()? {
        return Ok(policy);
    }
    let ms = |u: &mut Unstructured<'_>, top: u64| -> arbitrary::Result<Duration> {
        Ok(Duration::from_millis(u.int_in_range(0..=top)?))
    };
    let attempts = u.int_in_range(1..=12u32)?;
    let (a, b) = (ms(u, 5_000)?, ms(u, 5_000)?);
    let initial = ms(u, 2_000)?;
    let backoff = match u.int_in_range(0..=4u8)? {
        0 => Backoff::None,
        1 => Backoff::constant(initial),
        2 => Backoff::linear(initial),
        3 => Backoff::exponential(initial, 2.0),
        _ => Backoff::fibonacci(initial),
    };
    let budget = if u.arbitrary()? {
        Some(ms(u, 20_000)?.max(Duration::from_millis(1)))
    } else {
        None
    };
    let timeout = if u.arbitrary()? {
        Some(ms(u, 5_000)?.max(Duration::from_nanos(1)))
    } else {
        None
    };
    let hints = match policy.hints() {
        HintMode::Override { .. } => {
            let (lo, hi) = (ms(u, 1_000)?, ms(u, 10_000)?);
            HintMode::Override {
                min: lo.min(hi),
                max: lo.max(hi),
            }
        }
        HintMode::AtLeast { .. } => HintMode::AtLeast {
            cap: ms(u, 10_000)?,
        },
        HintMode::Ignore => HintMode::Ignore,
    };
    Ok(policy
        .to_builder()
        .max_attempts(attempts)
        .backoff(backoff)
        .min_delay(a.min(b))
        // A valid cap is at least the curve's first delay.
        .max_delay(a.max(b).max(initial))
        .hints(hints)
        .budget(budget)
        .attempt_timeout(timeout)
        .build()
        .unwrap_or(policy))
}

/// A failure whose hint is usually of a humane size.
pub(crate) fn some_failure(u: &mut Unstructured<'_>) -> arbitrary::Result<Failure> {
    let base = if rarely(u, 6)? {
        Failure::permanent()
    } else {
        Failure::retryable()
    };
    let base = base.with_kind(u.arbitrary()?);
    let delay = if rarely(u, 8)? {
        u.arbitrary::<Duration>()?
    } else {
        Duration::from_millis(u.int_in_range(0..=3_000)?)
    };
    Ok(match u.int_in_range(0..=3u8)? {
        0 => base.with_hint(Hint::RetryAfter(delay)),
        1 => base.with_hint(Hint::Pushback(delay)),
        _ => base,
    })
}

/// An answer as the model writes it: an [`Action`], with a give-up spelled out
/// field by field (outside retry-core a `GiveUp` can be read but not built).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Answer {
    /// Any action but a give-up.
    Act(Action),
    /// A give-up with these fields.
    GiveUp {
        reason: GiveUpReason,
        attempts: u32,
        last_failure: Option<FailureKind>,
    },
}

impl From<Action> for Answer {
    fn from(action: Action) -> Self {
        match action {
            Action::GiveUp(g) => Answer::GiveUp {
                reason: g.reason,
                attempts: g.attempts,
                last_failure: g.last_failure,
            },
            other => Answer::Act(other),
        }
    }
}

/// The machine as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stage {
    Idle,
    Attempting {
        number: u32,
        started: Instant,
        deadline: Option<Instant>,
    },
    Sleeping {
        until: Instant,
        delay: Duration,
        reason: SleepReason,
    },
    /// Waiting for the budget's answer; the retry's delay lies in `[lo, hi]`.
    Withdrawing {
        retry: u32,
        after_timeout: bool,
        lo: Duration,
        hi: Duration,
        reasons: Reasons,
    },
    Finished(Answer),
}

/// Which sleep reasons a delay may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reasons {
    Curve,
    Hint,
    Either,
}

impl Reasons {
    fn allows(self, reason: SleepReason) -> bool {
        match self {
            Reasons::Curve => reason == SleepReason::Curve,
            Reasons::Hint => reason == SleepReason::Hint,
            Reasons::Either => reason != SleepReason::CircuitOpen,
        }
    }
}

/// What the model requires of the machine's answer to one event.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    /// The event makes no sense now: `try_poll` refuses it with this answer.
    Misuse(Answer),
    /// Exactly this answer.
    Exact(Answer),
    /// A retryable failure of attempt `number` with attempts to spare: a sleep of
    /// a delay in `[lo, hi]` (or an immediate attempt if it is zero), a withdrawal
    /// first if the policy uses a retry budget, or a budget give-up.
    Retry {
        number: u32,
        after_timeout: bool,
        lo: Duration,
        hi: Duration,
        reasons: Reasons,
        kind: FailureKind,
    },
    /// The budget granted the retry after `retry`: sleep, attempt, or give up on
    /// the time budget if the sleep no longer fits.
    Granted {
        retry: u32,
        lo: Duration,
        hi: Duration,
        reasons: Reasons,
    },
}

/// The reference model: the documented control flow, phase by phase.
#[derive(Clone, Copy, Debug)]
struct MachineModel {
    policy: RetryPolicy,
    stage: Stage,
    start: Instant,
    last_now: Instant,
    attempts: u32,
    last_failure: Option<FailureKind>,
}

impl MachineModel {
    fn new(policy: RetryPolicy) -> Self {
        MachineModel {
            policy,
            stage: Stage::Idle,
            start: Instant::ORIGIN,
            last_now: Instant::ORIGIN,
            attempts: 0,
            last_failure: None,
        }
    }

    fn budget_end(&self) -> Option<Instant> {
        match self.stage {
            Stage::Idle => None,
            _ => self.policy.budget().map(|b| self.start.saturating_add(b)),
        }
    }

    fn attempt(&self, number: u32, now: Instant) -> Action {
        let mut deadline = self
            .policy
            .attempt_timeout()
            .and_then(|t| now.checked_add(t));
        if self.policy.caps_attempt_to_budget() {
            if let Some(end) = self.policy.budget().map(|b| self.start.saturating_add(b)) {
                deadline = Some(match deadline {
                    Some(d) if d < end => d,
                    _ => end,
                });
            }
        }
        Action::Attempt {
            number,
            deadline,
            replays_non_idempotent: number > 1 && !self.policy.is_idempotent(),
        }
    }

    fn give_up(&self, reason: GiveUpReason, attempts: u32, last: Option<FailureKind>) -> Answer {
        Answer::GiveUp {
            reason,
            attempts,
            last_failure: last.or(self.last_failure),
        }
    }

    /// The pending action, as the machine must repeat it on misuse.
    fn pending(&self) -> Answer {
        let action = match self.stage {
            Stage::Idle => {
                return Answer::GiveUp {
                    reason: GiveUpReason::NotStarted,
                    attempts: 0,
                    last_failure: None,
                }
            }
            Stage::Attempting {
                number, deadline, ..
            } => Action::Attempt {
                number,
                deadline,
                replays_non_idempotent: number > 1 && !self.policy.is_idempotent(),
            },
            Stage::Sleeping {
                until,
                delay,
                reason,
            } => Action::Sleep {
                until,
                delay,
                reason,
            },
            Stage::Withdrawing {
                retry,
                after_timeout,
                ..
            } => Action::Withdraw {
                retry,
                after_timeout,
            },
            Stage::Finished(answer) => return answer,
        };
        Answer::Act(action)
    }

    /// The curve's delay before the first retry, floored and capped by the
    /// policy: every curve starts at its initial delay (no curve at zero).
    fn first_curve_delay(&self) -> Duration {
        let p = &self.policy;
        let first = match p.backoff() {
            Backoff::None => Duration::ZERO,
            Backoff::Constant { delay } => delay,
            Backoff::Linear { initial, .. }
            | Backoff::Exponential { initial, .. }
            | Backoff::Fibonacci { initial } => initial,
        };
        saturated(first.max(p.min_delay()).min(p.max_delay()))
    }

    /// Bounds on the delay after a retryable failure carrying `hint`. Curve
    /// delays (and the honoured hint under at-least) are computed in 64-bit
    /// nanoseconds: a floor above `u64::MAX` ns counts as `u64::MAX` ns.
    fn delay_bounds(&self, hint: Option<Hint>) -> (Duration, Duration, Reasons) {
        let p = &self.policy;
        let slack = match p.resolution() {
            Resolution::Millis => Duration::from_micros(500),
            Resolution::Nanos => Duration::ZERO,
        };
        let above = |ceiling: Duration| {
            let extra = match p.jitter() {
                Jitter::Add(f) => scaled(ceiling, f),
                _ => Duration::ZERO,
            };
            // A microsecond for the float product.
            ceiling
                .saturating_add(extra)
                .saturating_add(slack)
                .saturating_add(Duration::from_micros(1))
        };
        let hint = if p.hints() == HintMode::Ignore {
            None
        } else {
            hint
        };
        match (hint, p.hints()) {
            (Some(Hint::Pushback(d)), _) => (d, d, Reasons::Hint),
            (Some(Hint::RetryAfter(h)), HintMode::Override { min, max }) => {
                let d = h.max(min).min(max);
                (d, d, Reasons::Hint)
            }
            (Some(Hint::RetryAfter(h)), HintMode::AtLeast { cap }) => {
                let honoured = h.min(cap);
                let ceiling = p.max_delay().max(honoured);
                (
                    saturated(honoured.max(p.min_delay())),
                    above(ceiling),
                    Reasons::Either,
                )
            }
            _ => (
                saturated(p.min_delay()),
                above(p.max_delay()),
                Reasons::Curve,
            ),
        }
    }

    /// What the machine must answer to `event` at `now` (already clamped).
    fn expect(&self, event: Event, now: Instant) -> Expect {
        let end = self.budget_end();
        let retry_or_stop = |number: u32, failure: Failure, timeout: Option<Duration>| {
            let kind = failure.kind();
            let last = Some(kind);
            if !failure.is_retryable() {
                let reason = match timeout {
                    Some(timeout) => GiveUpReason::TimedOut { timeout },
                    None => GiveUpReason::Permanent,
                };
                return Expect::Exact(self.give_up(reason, number, last));
            }
            if number >= self.policy.max_attempts() {
                let reason = match timeout {
                    Some(timeout) => GiveUpReason::TimedOut { timeout },
                    None => GiveUpReason::Exhausted,
                };
                return Expect::Exact(self.give_up(reason, number, last));
            }
            let (lo, hi, reasons) = self.delay_bounds(failure.hint());
            Expect::Retry {
                number,
                after_timeout: timeout.is_some(),
                lo,
                hi,
                reasons,
                kind,
            }
        };
        match (self.stage, event) {
            (Stage::Idle, Event::Start) => Expect::Exact(Answer::Act(Action::Attempt {
                number: 1,
                deadline: None,
                replays_non_idempotent: false,
            })),
            (Stage::Idle, Event::Cancelled) => Expect::Exact(Answer::GiveUp {
                reason: GiveUpReason::Cancelled,
                attempts: 0,
                last_failure: None,
            }),
            (Stage::Attempting { number, .. }, Event::Succeeded) => {
                Expect::Exact(Answer::Act(Action::Done { attempts: number }))
            }
            (Stage::Attempting { number, .. }, Event::Failed(failure)) => {
                retry_or_stop(number, failure, None)
            }
            (
                Stage::Attempting {
                    number,
                    started,
                    deadline,
                },
                Event::TimedOut,
            ) => {
                let timeout = deadline.unwrap_or(now).saturating_duration_since(started);
                let failure = if self.policy.retries_timeouts() {
                    Failure::retryable()
                } else {
                    Failure::permanent()
                };
                retry_or_stop(
                    number,
                    failure.with_kind(FailureKind::Timeout),
                    Some(timeout),
                )
            }
            (Stage::Attempting { number, .. }, Event::Cancelled) => {
                Expect::Exact(self.give_up(GiveUpReason::Cancelled, number, None))
            }
            (Stage::Attempting { number, .. }, Event::Rejected { until }) => {
                // The rejected attempt never ran.
                let ran = number.saturating_sub(1);
                let wait = until.map(|u| u.saturating_duration_since(now));
                match self.policy.circuit_open() {
                    CircuitOpen::GiveUp => {
                        Expect::Exact(self.give_up(GiveUpReason::CircuitOpen { wait }, ran, None))
                    }
                    CircuitOpen::Wait => {
                        let delay = wait
                            .unwrap_or_else(|| self.first_curve_delay())
                            .max(Duration::from_millis(1));
                        // A wait past the budget gives up; one past the last
                        // instant ends there (and so never fits a budget).
                        let until = now.saturating_add(delay);
                        if end.is_none_or(|e| until < e) {
                            Expect::Exact(Answer::Act(Action::Sleep {
                                until,
                                delay,
                                reason: SleepReason::CircuitOpen,
                            }))
                        } else {
                            Expect::Exact(self.give_up(GiveUpReason::Budget, ran, None))
                        }
                    }
                }
            }
            (
                Stage::Sleeping {
                    until,
                    delay,
                    reason,
                },
                Event::Woke,
            ) => {
                if now < until {
                    Expect::Exact(Answer::Act(Action::Sleep {
                        until,
                        delay,
                        reason,
                    }))
                } else if end.is_some_and(|e| now >= e) {
                    Expect::Exact(self.give_up(GiveUpReason::Budget, self.attempts, None))
                } else {
                    Expect::Exact(Answer::Act(
                        self.attempt(self.attempts.saturating_add(1), now),
                    ))
                }
            }
            (Stage::Sleeping { .. }, Event::Cancelled) => {
                Expect::Exact(self.give_up(GiveUpReason::Cancelled, self.attempts, None))
            }
            (
                Stage::Withdrawing {
                    retry,
                    lo,
                    hi,
                    reasons,
                    ..
                },
                Event::Granted,
            ) => Expect::Granted {
                retry,
                lo,
                hi,
                reasons,
            },
            (Stage::Withdrawing { retry, .. }, Event::Refused) => {
                Expect::Exact(self.give_up(GiveUpReason::RetryBudget, retry, None))
            }
            (Stage::Withdrawing { retry, .. }, Event::Cancelled) => {
                Expect::Exact(self.give_up(GiveUpReason::Cancelled, retry, None))
            }
            _ => Expect::Misuse(self.pending()),
        }
    }

    /// Checks the machine's `action` against `expect`. On success, returns the
    /// stage the model moves to.
    fn judge(
        &self,
        expect: Expect,
        action: Action,
        now: Instant,
        step: usize,
    ) -> Result<Stage, Violation> {
        let fail = |invariant| Violation {
            target: TARGET,
            step,
            invariant,
        };
        let end = self.budget_end();
        // A sleep of `delay` from now, checked on its own terms: it ends
        // `delay` after now, or at the last instant when that lies past it
        // (the only end not after now, when now is that instant).
        let sleep_fits = |until: Instant, delay: Duration| {
            now.saturating_add(delay) == until
                && (until > now || until == Instant::MAX)
                && end.is_none_or(|e| until < e)
        };
        match expect {
            Expect::Misuse(_) => Err(fail("a misuse was accepted")),
            Expect::Exact(expected) => {
                let expected = match expected {
                    // The first attempt's deadline depends on `start`, set by it.
                    Answer::Act(Action::Attempt { number: 1, .. }) if self.stage == Stage::Idle => {
                        let mut with_start = *self;
                        with_start.start = now;
                        Answer::Act(with_start.attempt(1, now))
                    }
                    other => other,
                };
                if Answer::from(action) != expected {
                    return Err(fail("the answer differs from the reference model"));
                }
                Ok(Self::stage_after(action, now))
            }
            Expect::Retry {
                number,
                after_timeout,
                lo,
                hi,
                reasons,
                kind,
            } => {
                // Only a time budget makes a retry late (a sleep past the
                // last instant ends there, before no budget's end).
                let late = end.is_some_and(|e| now.saturating_add(lo) >= e);
                let may_be_late = end.is_some_and(|e| now.saturating_add(hi) >= e);
                match action {
                    Action::GiveUp(g) => {
                        ensure(
                            g.reason == GiveUpReason::Budget
                                && g.attempts == number
                                && g.last_failure == Some(kind),
                            TARGET,
                            step,
                            "a retryable failure with attempts left ended other than on the budget",
                        )?;
                        ensure(
                            may_be_late,
                            TARGET,
                            step,
                            "gave up on a budget the delay fits in",
                        )?;
                    }
                    _ if late => {
                        return Err(fail("a retry whose delay passes the budget went ahead"))
                    }
                    Action::Withdraw {
                        retry,
                        after_timeout: t,
                    } => {
                        ensure(
                            self.policy.uses_retry_budget(),
                            TARGET,
                            step,
                            "withdrawal without a retry budget",
                        )?;
                        ensure(
                            retry == number && t == after_timeout,
                            TARGET,
                            step,
                            "withdrawal for the wrong retry",
                        )?;
                        return Ok(Stage::Withdrawing {
                            retry,
                            after_timeout,
                            lo,
                            hi,
                            reasons,
                        });
                    }
                    _ if self.policy.uses_retry_budget() => {
                        return Err(fail("a retry skipped the retry budget"))
                    }
                    Action::Sleep {
                        until,
                        delay,
                        reason,
                    } => {
                        ensure(
                            delay >= lo && delay <= hi,
                            TARGET,
                            step,
                            "delay outside its bounds",
                        )?;
                        ensure(reasons.allows(reason), TARGET, step, "wrong sleep reason")?;
                        // Millisecond resolution: a curve delay is a whole
                        // millisecond, unless the policy's own bounds hold none
                        // (then it is one of them, counted at most u64::MAX ns).
                        let p = &self.policy;
                        ensure(
                            reason != SleepReason::Curve
                                || p.resolution() != Resolution::Millis
                                || matches!(p.hints(), HintMode::AtLeast { .. })
                                || delay.subsec_nanos() % 1_000_000 == 0
                                || delay == saturated(p.min_delay())
                                || delay == saturated(p.max_delay()),
                            TARGET,
                            step,
                            "a curve delay that is not a whole millisecond",
                        )?;
                        ensure(
                            sleep_fits(until, delay),
                            TARGET,
                            step,
                            "sleep not due after now, or past the budget",
                        )?;
                    }
                    Action::Attempt { .. } => {
                        ensure(
                            lo.is_zero(),
                            TARGET,
                            step,
                            "attempt at once though the delay is positive",
                        )?;
                        let expected = self.attempt(number.saturating_add(1), now);
                        ensure(action == expected, TARGET, step, "wrong immediate retry")?;
                    }
                    Action::Done { .. } => return Err(fail("a failure answered with done")),
                }
                Ok(Self::stage_after(action, now))
            }
            Expect::Granted {
                retry,
                lo,
                hi,
                reasons,
            } => {
                match action {
                    Action::GiveUp(g) => {
                        ensure(
                            g.reason == GiveUpReason::Budget && g.attempts == retry,
                            TARGET,
                            step,
                            "a granted retry ended other than on the budget",
                        )?;
                        let may_be_late = end.is_some_and(|e| now.saturating_add(hi) >= e);
                        ensure(
                            may_be_late,
                            TARGET,
                            step,
                            "gave up on a budget the granted delay fits in",
                        )?;
                    }
                    Action::Sleep {
                        until,
                        delay,
                        reason,
                    } => {
                        ensure(
                            delay >= lo && delay <= hi,
                            TARGET,
                            step,
                            "granted delay outside its bounds",
                        )?;
                        ensure(
                            reasons.allows(reason),
                            TARGET,
                            step,
                            "wrong sleep reason after a grant",
                        )?;
                        ensure(
                            sleep_fits(until, delay),
                            TARGET,
                            step,
                            "granted sleep not due after now, or past the budget",
                        )?;
                    }
                    Action::Attempt { .. } => {
                        ensure(
                            lo.is_zero(),
                            TARGET,
                            step,
                            "granted attempt at once though the delay is positive",
                        )?;
                        ensure(
                            end.is_none_or(|e| now < e),
                            TARGET,
                            step,
                            "a retry starts at or after the end of the time budget",
                        )?;
                        let expected = self.attempt(retry.saturating_add(1), now);
                        ensure(
                            action == expected,
                            TARGET,
                            step,
                            "wrong attempt after a grant",
                        )?;
                    }
                    Action::Withdraw { .. } | Action::Done { .. } => {
                        return Err(fail("a grant answered with a withdrawal or done"))
                    }
                }
                Ok(Self::stage_after(action, now))
            }
        }
    }

    fn stage_after(action: Action, now: Instant) -> Stage {
        match action {
            Action::Attempt {
                number, deadline, ..
            } => Stage::Attempting {
                number,
                started: now,
                deadline,
            },
            Action::Sleep {
                until,
                delay,
                reason,
            } => Stage::Sleeping {
                until,
                delay,
                reason,
            },
            // Only reached through `Expect::Retry`, which builds the stage itself.
            Action::Withdraw {
                retry,
                after_timeout,
            } => Stage::Withdrawing {
                retry,
                after_timeout,
                lo: Duration::ZERO,
                hi: Duration::MAX,
                reasons: Reasons::Either,
            },
            Action::GiveUp(_) | Action::Done { .. } => Stage::Finished(Answer::from(action)),
        }
    }

    /// Takes in an accepted event and the machine's (judged) answer.
    fn advance(&mut self, event: Event, now: Instant, stage: Stage) {
        match (self.stage, event) {
            (Stage::Idle, Event::Start) => self.start = now,
            (Stage::Attempting { .. }, Event::Failed(f)) => self.last_failure = Some(f.kind()),
            (Stage::Attempting { .. }, Event::TimedOut) => {
                self.last_failure = Some(FailureKind::Timeout);
            }
            (Stage::Attempting { number, .. }, Event::Rejected { .. }) => {
                self.attempts = number.saturating_sub(1);
            }
            _ => {}
        }
        if let Stage::Attempting { number, .. } = stage {
            self.attempts = number;
        }
        self.stage = stage;
        self.last_now = now;
    }

    fn phase(&self) -> Phase {
        match self.stage {
            Stage::Idle => Phase::Idle,
            Stage::Attempting { .. } => Phase::Attempting,
            Stage::Sleeping { .. } => Phase::Sleeping,
            Stage::Withdrawing { .. } => Phase::Withdrawing,
            Stage::Finished(_) => Phase::Finished,
        }
    }

    /// The next instant a driver would act at without an event.
    fn due(&self) -> Option<Instant> {
        match self.stage {
            Stage::Attempting { deadline, .. } => deadline,
            Stage::Sleeping { until, .. } => Some(until),
            _ => None,
        }
    }
}

/// The next `now`: mostly forward, sometimes exactly at a deadline or the budget's
/// end (or a nanosecond before), sometimes backwards.
fn next_now(
    u: &mut Unstructured<'_>,
    now: Instant,
    model: &MachineModel,
) -> arbitrary::Result<Instant> {
    let tick = Duration::from_nanos(1);
    Ok(match u.int_in_range(0..=9u8)? {
        0 | 1 => now,
        2 => now.saturating_add(Duration::from_millis(u.int_in_range(0..=2_000)?)),
        3 => model.due().unwrap_or(now),
        4 => model.due().unwrap_or(now).saturating_sub(tick),
        5 => model.budget_end().unwrap_or(now),
        6 => model.budget_end().unwrap_or(now).saturating_sub(tick),
        7 => now.saturating_sub(Duration::from_nanos(u.arbitrary()?)),
        8 => Instant::from_nanos(u.arbitrary()?),
        _ => now.saturating_add(Duration::from_micros(u.arbitrary::<u32>()?.into())),
    })
}

/// The next event: mostly one that fits the pending action, sometimes any.
fn next_event(
    u: &mut Unstructured<'_>,
    model: &MachineModel,
    now: Instant,
) -> arbitrary::Result<Event> {
    if rarely(u, 6)? {
        return u.arbitrary();
    }
    let pick = u.int_in_range(0..=15u8)?;
    Ok(match model.stage {
        Stage::Idle => {
            if pick == 0 {
                Event::Cancelled
            } else {
                Event::Start
            }
        }
        Stage::Attempting { .. } => match pick {
            0..=2 => Event::Succeeded,
            3..=9 => Event::Failed(some_failure(u)?),
            10..=11 => Event::TimedOut,
            12 => Event::Cancelled,
            _ => Event::Rejected {
                until: if u.arbitrary()? {
                    Some(now.saturating_add(Duration::from_millis(u.int_in_range(0..=3_000)?)))
                } else {
                    None
                },
            },
        },
        Stage::Sleeping { .. } => {
            if pick == 0 {
                Event::Cancelled
            } else {
                Event::Woke
            }
        }
        Stage::Withdrawing { .. } => match pick {
            0 => Event::Cancelled,
            1..=4 => Event::Refused,
            _ => Event::Granted,
        },
        Stage::Finished(_) => u.arbitrary()?,
    })
}

/// Drives a [`RetryMachine`] with an arbitrary valid policy, seed and event
/// stream, against the reference model. Checks: no panic; attempts never above
/// the maximum; every sleep due after `now`; nothing accepted after the end;
/// misuse refused with the pending action and the machine unchanged; `poll`
/// answers as `try_poll`; the getters agree with the model.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    let Ok(policy) = RetryPolicy::arbitrary(&mut u) else {
        return Ok(());
    };
    let Ok(policy) = shape_policy(policy, &mut u) else {
        return Ok(());
    };
    ensure(
        policy.validate().is_ok(),
        TARGET,
        0,
        "an arbitrary policy is valid",
    )?;
    let seed: u64 = u.arbitrary().unwrap_or(0);
    let mut machine = RetryMachine::new(&policy, seed);
    let mut model = MachineModel::new(policy);
    let mut now = Instant::ORIGIN;
    for step in 0..MACHINE_STEPS {
        if u.is_empty() {
            break;
        }
        let (Ok(at), Ok(event)) = (
            next_now(&mut u, now, &model),
            next_event(&mut u, &model, now),
        ) else {
            break;
        };
        now = at;
        let clamped = now.max(model.last_now);
        let expect = model.expect(event, clamped);
        let before = machine.clone();
        let mut twin = machine.clone();
        let answer = machine.try_poll(event, now);
        // `poll` answers exactly as `try_poll`, misuse included.
        let polled = twin.poll(event, now);
        ensure(
            twin == machine,
            TARGET,
            step,
            "poll and try_poll leave different machines",
        )?;
        match answer {
            Err(misuse) => {
                ensure(
                    machine == before,
                    TARGET,
                    step,
                    "a refused event changed the machine",
                )?;
                ensure(
                    polled == misuse.answer,
                    TARGET,
                    step,
                    "poll answered misuse differently",
                )?;
                ensure(
                    misuse.event == event,
                    TARGET,
                    step,
                    "misuse names another event",
                )?;
                ensure(
                    misuse.phase == before.phase(),
                    TARGET,
                    step,
                    "misuse names another phase",
                )?;
                match expect {
                    Expect::Misuse(pending) => ensure(
                        Answer::from(misuse.answer) == pending,
                        TARGET,
                        step,
                        "misuse not answered with the pending action",
                    )?,
                    _ => {
                        return Err(Violation {
                            target: TARGET,
                            step,
                            invariant: "an event that fits the phase was refused",
                        })
                    }
                }
            }
            Ok(action) => {
                ensure(
                    polled == action,
                    TARGET,
                    step,
                    "poll answered differently from try_poll",
                )?;
                ensure(
                    !matches!(model.stage, Stage::Finished(_)),
                    TARGET,
                    step,
                    "an event was accepted after the end",
                )?;
                if let Action::Attempt { number, .. } = action {
                    ensure(number >= 1, TARGET, step, "attempt number 0")?;
                    ensure(
                        number <= policy.max_attempts(),
                        TARGET,
                        step,
                        "attempt above the maximum",
                    )?;
                }
                if let Action::Sleep { until, .. } = action {
                    // After now, or at the last instant, where time ends.
                    ensure(
                        until > clamped || until == Instant::MAX,
                        TARGET,
                        step,
                        "a sleep not due after now",
                    )?;
                }
                let stage = model.judge(expect, action, clamped, step)?;
                model.advance(event, clamped, stage);
                ensure(
                    machine.pending() == Some(action),
                    TARGET,
                    step,
                    "pending is not the last answer",
                )?;
            }
        }
        ensure(
            machine.phase() == model.phase(),
            TARGET,
            step,
            "phase differs from the model",
        )?;
        ensure(
            machine.attempts() == model.attempts,
            TARGET,
            step,
            "attempt count differs from the model",
        )?;
        ensure(
            machine.last_failure() == model.last_failure,
            TARGET,
            step,
            "last failure differs from the model",
        )?;
        ensure(
            machine.next_deadline() == model.due(),
            TARGET,
            step,
            "next deadline differs from the model",
        )?;
        ensure(
            machine.budget_end() == model.budget_end(),
            TARGET,
            step,
            "budget end differs from the model",
        )?;
    }
    Ok(())
}

/// The delay arithmetic's saturation rule: a duration above `u64::MAX`
/// nanoseconds (about 584.5 years) counts as `u64::MAX` ns.
fn saturated(d: Duration) -> Duration {
    d.min(Duration::from_nanos(u64::MAX))
}
