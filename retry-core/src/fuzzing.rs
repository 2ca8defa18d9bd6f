//! Fuzz checks: one function per target, each reading an arbitrary byte string
//! through [`arbitrary::Unstructured`], driving a machine or a parser with it,
//! and holding the result to its invariants and to a small reference model
//! written here, apart from the code it checks.
//!
//! The cargo-fuzz targets in `fuzz/` call these functions and panic on a
//! [`Violation`]; `tests/fuzz_corpus.rs` replays the committed corpus through
//! them on stable Rust. Nothing here allocates.
//!
//! ```
//! // Any bytes at all are a valid input; a failure names the broken invariant.
//! assert_eq!(retry_core::fuzzing::sets(b"\x00 1, 5-9 ,75"), Ok(()));
//! assert_eq!(retry_core::fuzzing::retry_after(b"abcdefgh 120"), Ok(()));
//! ```

use core::fmt;
use core::time::Duration;

use arbitrary::{Arbitrary, Unstructured};

use crate::{
    format_http_date, parse_grpc_pushback, parse_http_date, parse_retry_after,
    parse_retry_after_ms, retry_after_from_headers, Action, Admission, AttemptKind, Backoff,
    BreakerConfig, BreakerState, BudgetConfig, BudgetInput, BudgetOutput, CallOutcome,
    CircuitBreaker, CircuitOpen, Event, ExitCodeSet, Failure, FailureKind, GiveUp, GiveUpReason,
    Hint, HintMode, Instant, Jitter, ManualState, Method, Permit, Phase, Pushback, Rate,
    RejectReason, Requirement, Resolution, RetryBudget, RetryKind, RetryMachine, RetryPolicy,
    SetParseErrorKind, SleepReason, StatusSet, Tokens, Transition, TransitionCause, Window,
    WindowStats, Withdrawal,
};

/// A broken invariant: which target, which step of the input (0 for checks made
/// before or outside the step loop), and a short statement of the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The fuzz target that found it.
    pub target: &'static str,
    /// The step (event, operation or sub-check) at which it was seen.
    pub step: usize,
    /// The rule that was broken.
    pub invariant: &'static str,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: step {}: invariant broken: {}",
            self.target, self.step, self.invariant
        )
    }
}

impl core::error::Error for Violation {}

/// Fails with `invariant` unless `ok`.
fn ensure(
    ok: bool,
    target: &'static str,
    step: usize,
    invariant: &'static str,
) -> Result<(), Violation> {
    if ok {
        Ok(())
    } else {
        Err(Violation {
            target,
            step,
            invariant,
        })
    }
}

/// True about once in `n` draws; false when the input has run out, so that
/// zero bytes take the common path.
fn rarely(u: &mut Unstructured<'_>, n: u8) -> arbitrary::Result<bool> {
    Ok(u.int_in_range(1..=n.max(1))? == n)
}

/// `d × f` for a fraction `f`, saturating instead of panicking.
fn scaled(d: Duration, f: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * f).unwrap_or(Duration::MAX)
}

// ===========================================================================
// The retry machine
// ===========================================================================

const MACHINE: &str = "retry_machine";
/// Events per input.
const MACHINE_STEPS: usize = 256;

/// Shrinks the arbitrary policy's numbers into ranges where retries, sleeps and
/// budgets interact, for half of the inputs; the rest keep the raw values.
fn shape_policy(policy: RetryPolicy, u: &mut Unstructured<'_>) -> arbitrary::Result<RetryPolicy> {
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
        .max_delay(a.max(b))
        .hints(hints)
        .budget(budget)
        .attempt_timeout(timeout)
        .build()
        .unwrap_or(policy))
}

/// A failure whose hint is usually of a humane size.
fn some_failure(u: &mut Unstructured<'_>) -> arbitrary::Result<Failure> {
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
    Finished(Action),
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
    Misuse(Action),
    /// Exactly this action.
    Exact(Action),
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

    fn give_up(&self, reason: GiveUpReason, attempts: u32, last: Option<FailureKind>) -> Action {
        Action::GiveUp(GiveUp {
            reason,
            attempts,
            last_failure: last.or(self.last_failure),
        })
    }

    /// The pending action, as the machine must repeat it on misuse.
    fn pending(&self) -> Action {
        match self.stage {
            Stage::Idle => Action::GiveUp(GiveUp {
                reason: GiveUpReason::NotStarted,
                attempts: 0,
                last_failure: None,
            }),
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
            Stage::Finished(action) => action,
        }
    }

    /// Bounds on the delay after a retryable failure carrying `hint`.
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
                (honoured.max(p.min_delay()), above(ceiling), Reasons::Either)
            }
            _ => (p.min_delay(), above(p.max_delay()), Reasons::Curve),
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
            (Stage::Idle, Event::Start) => Expect::Exact(Action::Attempt {
                number: 1,
                deadline: None,
                replays_non_idempotent: false,
            }),
            (Stage::Idle, Event::Cancelled) => Expect::Exact(Action::GiveUp(GiveUp {
                reason: GiveUpReason::Cancelled,
                attempts: 0,
                last_failure: None,
            })),
            (Stage::Attempting { number, .. }, Event::Succeeded) => {
                Expect::Exact(Action::Done { attempts: number })
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
                            .unwrap_or_else(|| self.policy.capped_delay(1))
                            .max(Duration::from_millis(1));
                        // A wait past the last instant, or past the budget, gives up.
                        match now.checked_add(delay) {
                            Some(until) if end.is_none_or(|e| until < e) => {
                                Expect::Exact(Action::Sleep {
                                    until,
                                    delay,
                                    reason: SleepReason::CircuitOpen,
                                })
                            }
                            _ => Expect::Exact(self.give_up(GiveUpReason::Budget, ran, None)),
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
                    Expect::Exact(Action::Sleep {
                        until,
                        delay,
                        reason,
                    })
                } else if end.is_some_and(|e| now >= e) {
                    Expect::Exact(self.give_up(GiveUpReason::Budget, self.attempts, None))
                } else {
                    Expect::Exact(self.attempt(self.attempts.saturating_add(1), now))
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
            target: MACHINE,
            step,
            invariant,
        };
        let end = self.budget_end();
        // A sleep of `delay` from now, checked on its own terms.
        let sleep_fits = |until: Instant, delay: Duration| {
            now.checked_add(delay) == Some(until) && until > now && end.is_none_or(|e| until < e)
        };
        match expect {
            Expect::Misuse(_) => Err(fail("a misuse was accepted")),
            Expect::Exact(expected) => {
                let expected = match expected {
                    // The first attempt's deadline depends on `start`, set by it.
                    Action::Attempt { number: 1, .. } if self.stage == Stage::Idle => {
                        let mut with_start = *self;
                        with_start.start = now;
                        with_start.attempt(1, now)
                    }
                    other => other,
                };
                if action != expected {
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
                let late = now
                    .checked_add(lo)
                    .is_none_or(|u| end.is_some_and(|e| u >= e));
                let may_be_late = now
                    .checked_add(hi)
                    .is_none_or(|u| end.is_some_and(|e| u >= e));
                match action {
                    Action::GiveUp(g) => {
                        ensure(
                            g.reason == GiveUpReason::Budget
                                && g.attempts == number
                                && g.last_failure == Some(kind),
                            MACHINE,
                            step,
                            "a retryable failure with attempts left ended other than on the budget",
                        )?;
                        ensure(
                            may_be_late,
                            MACHINE,
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
                            MACHINE,
                            step,
                            "withdrawal without a retry budget",
                        )?;
                        ensure(
                            retry == number && t == after_timeout,
                            MACHINE,
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
                            MACHINE,
                            step,
                            "delay outside its bounds",
                        )?;
                        ensure(reasons.allows(reason), MACHINE, step, "wrong sleep reason")?;
                        ensure(
                            sleep_fits(until, delay),
                            MACHINE,
                            step,
                            "sleep not due after now, or past the budget",
                        )?;
                    }
                    Action::Attempt { .. } => {
                        ensure(
                            lo.is_zero(),
                            MACHINE,
                            step,
                            "attempt at once though the delay is positive",
                        )?;
                        let expected = self.attempt(number.saturating_add(1), now);
                        ensure(action == expected, MACHINE, step, "wrong immediate retry")?;
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
                            MACHINE,
                            step,
                            "a granted retry ended other than on the budget",
                        )?;
                        let may_be_late = now
                            .checked_add(hi)
                            .is_none_or(|u| end.is_some_and(|e| u >= e));
                        ensure(
                            may_be_late,
                            MACHINE,
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
                            MACHINE,
                            step,
                            "granted delay outside its bounds",
                        )?;
                        ensure(
                            reasons.allows(reason),
                            MACHINE,
                            step,
                            "wrong sleep reason after a grant",
                        )?;
                        ensure(
                            sleep_fits(until, delay),
                            MACHINE,
                            step,
                            "granted sleep not due after now, or past the budget",
                        )?;
                    }
                    Action::Attempt { .. } => {
                        ensure(
                            lo.is_zero(),
                            MACHINE,
                            step,
                            "granted attempt at once though the delay is positive",
                        )?;
                        ensure(
                            end.is_none_or(|e| now < e),
                            MACHINE,
                            step,
                            "a retry starts at or after the end of the time budget",
                        )?;
                        let expected = self.attempt(retry.saturating_add(1), now);
                        ensure(
                            action == expected,
                            MACHINE,
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
            Action::GiveUp(_) | Action::Done { .. } => Stage::Finished(action),
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
pub fn retry_machine(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    let Ok(policy) = RetryPolicy::arbitrary(&mut u) else {
        return Ok(());
    };
    let Ok(policy) = shape_policy(policy, &mut u) else {
        return Ok(());
    };
    ensure(
        policy.validate().is_ok(),
        MACHINE,
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
            MACHINE,
            step,
            "poll and try_poll leave different machines",
        )?;
        match answer {
            Err(misuse) => {
                ensure(
                    machine == before,
                    MACHINE,
                    step,
                    "a refused event changed the machine",
                )?;
                ensure(
                    polled == misuse.answer,
                    MACHINE,
                    step,
                    "poll answered misuse differently",
                )?;
                ensure(
                    misuse.event == event,
                    MACHINE,
                    step,
                    "misuse names another event",
                )?;
                ensure(
                    misuse.phase == before.phase(),
                    MACHINE,
                    step,
                    "misuse names another phase",
                )?;
                match expect {
                    Expect::Misuse(pending) => ensure(
                        misuse.answer == pending,
                        MACHINE,
                        step,
                        "misuse not answered with the pending action",
                    )?,
                    _ => {
                        return Err(Violation {
                            target: MACHINE,
                            step,
                            invariant: "an event that fits the phase was refused",
                        })
                    }
                }
            }
            Ok(action) => {
                ensure(
                    polled == action,
                    MACHINE,
                    step,
                    "poll answered differently from try_poll",
                )?;
                ensure(
                    !matches!(model.stage, Stage::Finished(_)),
                    MACHINE,
                    step,
                    "an event was accepted after the end",
                )?;
                if let Action::Attempt { number, .. } = action {
                    ensure(number >= 1, MACHINE, step, "attempt number 0")?;
                    ensure(
                        number <= policy.max_attempts(),
                        MACHINE,
                        step,
                        "attempt above the maximum",
                    )?;
                }
                if let Action::Sleep { until, .. } = action {
                    ensure(until > clamped, MACHINE, step, "a sleep not due after now")?;
                }
                let stage = model.judge(expect, action, clamped, step)?;
                model.advance(event, clamped, stage);
                ensure(
                    machine.pending() == Some(action),
                    MACHINE,
                    step,
                    "pending is not the last answer",
                )?;
            }
        }
        ensure(
            machine.phase() == model.phase(),
            MACHINE,
            step,
            "phase differs from the model",
        )?;
        ensure(
            machine.attempts() == model.attempts,
            MACHINE,
            step,
            "attempt count differs from the model",
        )?;
        ensure(
            machine.last_failure() == model.last_failure,
            MACHINE,
            step,
            "last failure differs from the model",
        )?;
        ensure(
            machine.next_deadline() == model.due(),
            MACHINE,
            step,
            "next deadline differs from the model",
        )?;
        ensure(
            machine.budget_end() == model.budget_end(),
            MACHINE,
            step,
            "budget end differs from the model",
        )?;
    }
    Ok(())
}

// ===========================================================================
// The circuit breaker
// ===========================================================================

const BREAKER: &str = "breaker";
/// Operations per input; also the model's history capacity.
const BREAKER_STEPS: usize = 256;
/// Permits the driver can hold at once.
const PERMIT_SLOTS: usize = 16;
/// The breaker type under test: up to 128 calls or 8 buckets.
type Breaker = CircuitBreaker<2, 8>;

fn breaker_config(u: &mut Unstructured<'_>) -> arbitrary::Result<Result<BreakerConfig, ()>> {
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
    },
    Changed(Option<Transition>),
    Refused,
}

/// The breaker's rules restated plainly, with every recorded call kept in a
/// fixed array since the window was last cleared.
#[derive(Clone, Copy, Debug)]
struct BreakerModel {
    config: BreakerConfig,
    state: BreakerState,
    open_until: Instant,
    in_flight: u32,
    successes: u32,
    streak: u32,
    reopens: u32,
    epoch: u32,
    history: [Call; BREAKER_STEPS],
    recorded: usize,
}

impl BreakerModel {
    fn new(config: BreakerConfig) -> Self {
        BreakerModel {
            config,
            state: BreakerState::Closed,
            open_until: Instant::ORIGIN,
            in_flight: 0,
            successes: 0,
            streak: 0,
            reopens: 0,
            epoch: 0,
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
        let mut count = |c: &Call| {
            stats.calls = stats.calls.saturating_add(1);
            stats.failures = stats.failures.saturating_add(u32::from(c.failed));
            stats.slow = stats.slow.saturating_add(u32::from(c.slow));
        };
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
        stats
    }

    fn reached(rate: Rate, count: u32, calls: u32) -> bool {
        calls > 0
            && u128::from(count).saturating_mul(10_000)
                >= u128::from(rate.basis_points()).saturating_mul(u128::from(calls))
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
        self.reopens = self.reopens.saturating_add(1);
        self.epoch = self.epoch.wrapping_add(1);
        self.streak = 0;
        self.open_until = now.saturating_add(self.config.open_duration(self.reopens));
        self.go(BreakerState::Open, now, cause)
    }

    fn clean(&mut self) {
        self.recorded = 0;
        self.streak = 0;
        self.reopens = 0;
    }

    fn request(&mut self, now: Instant) -> Seen {
        let admit = |epoch, probe, transition| Seen::Admitted {
            ticket: Ticket { epoch, probe },
            transition,
        };
        match self.state {
            BreakerState::Closed | BreakerState::Disabled | BreakerState::MetricsOnly => {
                admit(self.epoch, false, None)
            }
            BreakerState::ForcedOpen => Seen::Rejected {
                until: None,
                reason: RejectReason::ForcedOpen,
            },
            BreakerState::Open if now < self.open_until => Seen::Rejected {
                until: Some(self.open_until),
                reason: RejectReason::Open,
            },
            BreakerState::Open => {
                let t = self.go(BreakerState::HalfOpen, now, TransitionCause::OpenElapsed);
                self.in_flight = 1;
                self.successes = 0;
                admit(self.epoch, true, Some(t))
            }
            BreakerState::HalfOpen if self.in_flight < self.config.half_open_permits() => {
                self.in_flight = self.in_flight.saturating_add(1);
                admit(self.epoch, true, None)
            }
            BreakerState::HalfOpen => Seen::Rejected {
                until: None,
                reason: RejectReason::ProbesBusy,
            },
        }
    }

    fn record(&mut self, ticket: Ticket, outcome: CallOutcome, now: Instant) -> Option<Transition> {
        let late = ticket.epoch != self.epoch;
        let failed = !outcome.success;
        let slow = outcome.duration > self.config.slow_call_duration();
        match self.state {
            BreakerState::Closed | BreakerState::MetricsOnly => {
                if self.config.window().is_some() {
                    // Time going backwards lands in the newest bucket written.
                    let newest = self.calls().iter().map(|c| c.at).max().unwrap_or(0);
                    if let Some(slot) = self.history.get_mut(self.recorded) {
                        *slot = Call {
                            at: now.as_nanos().max(newest),
                            failed,
                            slow,
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
                if w.calls < self.config.minimum_calls() {
                    return None;
                }
                if self
                    .config
                    .failure_rate()
                    .is_some_and(|r| Self::reached(r, w.failures, w.calls))
                {
                    return Some(self.open(now, TransitionCause::FailureRate));
                }
                if self
                    .config
                    .slow_call_rate()
                    .is_some_and(|r| Self::reached(r, w.slow, w.calls))
                {
                    return Some(self.open(now, TransitionCause::SlowCallRate));
                }
                None
            }
            BreakerState::HalfOpen if !late && ticket.probe => {
                if failed || (slow && self.config.slow_call_rate().is_some()) {
                    return Some(self.open(now, TransitionCause::ProbeFailed));
                }
                self.successes = self.successes.saturating_add(1);
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

    fn release(&mut self, ticket: Ticket) {
        if self.state == BreakerState::HalfOpen && ticket.probe && ticket.epoch == self.epoch {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
    }

    fn force(&mut self, target: ManualState, now: Instant) -> Seen {
        if self.state == target.state() {
            return Seen::Refused;
        }
        self.reopens = 0;
        match target {
            ManualState::Closed | ManualState::MetricsOnly => self.clean(),
            ManualState::ForcedOpen => self.epoch = self.epoch.wrapping_add(1),
            ManualState::Disabled => {}
        }
        Seen::Changed(Some(self.go(target.state(), now, TransitionCause::Manual)))
    }
}

fn transition_is_legal(t: &Transition) -> bool {
    if t.cause == TransitionCause::Manual {
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
    }
}

/// Drives a [`CircuitBreaker`] with an arbitrary config and an arbitrary list
/// of requests, outcomes, releases, operator changes and clock moves, against
/// the reference model. Checks: no panic; every answer, state and window count
/// equals the model's; never more probes in flight than permits; rejections
/// change nothing and name a future time; every transition is in the table.
///
/// # Errors
/// The first [`Violation`].
pub fn breaker(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    let Ok(Ok(config)) = breaker_config(&mut u) else {
        return Ok(());
    };
    let mut breaker = match Breaker::new(config) {
        Ok(b) => b,
        Err(e) => {
            let too_big = match config.window() {
                Some(Window::Count { calls }) => usize::from(calls) > Breaker::CALL_CAPACITY,
                Some(Window::Time { buckets, .. }) => {
                    usize::from(buckets) > Breaker::BUCKET_CAPACITY
                }
                None => false,
            };
            return ensure(
                too_big && e.field().starts_with("window."),
                BREAKER,
                0,
                "a valid config that fits was refused",
            );
        }
    };
    let mut model = BreakerModel::new(config);
    let mut permits: [Option<(Permit, Ticket)>; PERMIT_SLOTS] = Default::default();
    let mut now = Instant::ORIGIN;
    for step in 0..BREAKER_STEPS {
        if u.is_empty() {
            break;
        }
        let Ok(op) = u.int_in_range(0..=99u8) else {
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
                    Admission::Rejected { until, reason } => {
                        ensure(
                            breaker == before,
                            BREAKER,
                            step,
                            "a rejection changed the breaker",
                        )?;
                        ensure(
                            until.is_none_or(|t| t > now),
                            BREAKER,
                            step,
                            "a rejection's time is not after now",
                        )?;
                        Seen::Rejected { until, reason }
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
                let expected = Seen::Changed(model.record(ticket, outcome, now));
                (
                    Seen::Changed(breaker.record(permit, outcome, now)),
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
            _ => {
                let target = match u.int_in_range(0..=3u8).unwrap_or(0) {
                    0 => ManualState::Closed,
                    1 => ManualState::ForcedOpen,
                    2 => ManualState::Disabled,
                    _ => ManualState::MetricsOnly,
                };
                let expected = model.force(target, now);
                let seen = match breaker.force(target, now) {
                    Ok(t) => Seen::Changed(Some(t)),
                    Err(_) => {
                        ensure(
                            breaker == before,
                            BREAKER,
                            step,
                            "a refused force changed the breaker",
                        )?;
                        Seen::Refused
                    }
                };
                (seen, expected)
            }
        };
        ensure(
            seen == expected,
            BREAKER,
            step,
            "the answer differs from the reference model",
        )?;
        if let Seen::Admitted {
            transition: Some(t),
            ..
        }
        | Seen::Changed(Some(t)) = seen
        {
            ensure(
                transition_is_legal(&t),
                BREAKER,
                step,
                "a transition not in the table",
            )?;
            ensure(
                t.at == now,
                BREAKER,
                step,
                "a transition not stamped with now",
            )?;
        }
        ensure(
            breaker.state() == model.state,
            BREAKER,
            step,
            "state differs from the model",
        )?;
        ensure(
            breaker.epoch() == model.epoch,
            BREAKER,
            step,
            "epoch differs from the model",
        )?;
        ensure(
            breaker.reopens() == model.reopens,
            BREAKER,
            step,
            "reopens differ from the model",
        )?;
        ensure(
            breaker.stats(now) == model.window(now),
            BREAKER,
            step,
            "window differs from the model",
        )?;
        let in_flight = breaker.probes_in_flight();
        ensure(
            in_flight <= config.half_open_permits(),
            BREAKER,
            step,
            "more probes in flight than permits",
        )?;
        let held = permits
            .iter()
            .flatten()
            .filter(|(p, _)| p.is_probe() && p.epoch() == breaker.epoch())
            .count();
        if breaker.state() == BreakerState::HalfOpen {
            ensure(
                u32::try_from(held).is_ok_and(|h| h == in_flight),
                BREAKER,
                step,
                "probes in flight differ from the probe permits held",
            )?;
            ensure(
                breaker.probe_successes() == model.successes,
                BREAKER,
                step,
                "probe successes differ from the model",
            )?;
        }
    }
    // Hand every permit back; nothing may panic.
    for (permit, _) in permits.iter_mut().filter_map(Option::take) {
        breaker.release(permit, now);
    }
    Ok(())
}

// ===========================================================================
// The retry budget
// ===========================================================================

const BUDGET: &str = "budget";
/// Notifications per input; also the Finagle model's history capacity.
const BUDGET_STEPS: usize = 256;
/// Thousandths in a token.
const MILLI: u64 = 1_000;
/// The most one Finagle slice can hold, in thousandths.
const FINAGLE_SLICE_CAP: u64 = 4_294_967_295_000;

/// A budget restated: plain integers, and Finagle's window as a list of dated
/// deposits and withdrawals.
// The Finagle variant carries its whole history; the model is built once per input.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum BudgetModel {
    Grpc {
        max: u64,
        ratio: u64,
        tokens: u64,
    },
    Aws {
        capacity: u64,
        retry: u64,
        timeout: u64,
        increment: u64,
        tokens: u64,
    },
    Finagle {
        deposit: u64,
        cost: u64,
        reserve: u64,
        slice: u64,
        entries: [(u64, i64); BUDGET_STEPS],
        len: usize,
    },
}

impl BudgetModel {
    fn finagle_max(reserve: u64) -> u64 {
        reserve.saturating_add(FINAGLE_SLICE_CAP.saturating_mul(10))
    }

    /// Finagle's balance at slot `now`: the reserve plus what the last ten
    /// slices hold, read as zero when negative.
    fn finagle_balance(reserve: u64, entries: &[(u64, i64)], now: u64) -> u64 {
        let net = entries
            .iter()
            .filter(|(slot, _)| *slot <= now && now.saturating_sub(*slot) < 10)
            .fold(0i128, |acc, (_, amount)| {
                acc.saturating_add(i128::from(*amount))
            });
        let total = i128::from(reserve).saturating_add(net).max(0);
        u64::try_from(total)
            .unwrap_or(u64::MAX)
            .min(Self::finagle_max(reserve))
    }

    fn tokens(&self, now: Instant) -> u64 {
        match self {
            BudgetModel::Grpc { tokens, .. } | BudgetModel::Aws { tokens, .. } => *tokens,
            BudgetModel::Finagle {
                reserve,
                slice,
                entries,
                len,
                ..
            } => Self::finagle_balance(
                *reserve,
                entries.get(..*len).unwrap_or(&[]),
                now.as_nanos().checked_div(*slice).unwrap_or(0),
            ),
        }
    }

    fn max(&self) -> u64 {
        match self {
            BudgetModel::Grpc { max, .. } => *max,
            BudgetModel::Aws { capacity, .. } => *capacity,
            BudgetModel::Finagle { reserve, .. } => Self::finagle_max(*reserve),
        }
    }

    fn apply(&mut self, input: BudgetInput, now: Instant) -> BudgetOutput {
        let left = Tokens::from_millis(self.tokens(now));
        match self {
            BudgetModel::Grpc { max, ratio, tokens } => match input {
                BudgetInput::Failure => *tokens = tokens.saturating_sub(MILLI),
                BudgetInput::Success(_) => *tokens = tokens.saturating_add(*ratio).min(*max),
                BudgetInput::Withdraw(_) => {
                    let needs = Requirement::Above(Tokens::from_millis(*max / 2));
                    return BudgetOutput::Withdrawal(if *tokens > *max / 2 {
                        Withdrawal::Granted {
                            cost: Tokens::ZERO,
                            left,
                        }
                    } else {
                        Withdrawal::Refused { left, needs }
                    });
                }
                BudgetInput::FirstAttempt => {}
            },
            BudgetModel::Aws {
                capacity,
                retry,
                timeout,
                increment,
                tokens,
            } => {
                let cost_of = |kind| match kind {
                    RetryKind::Failure => *retry,
                    RetryKind::Timeout => *timeout,
                };
                match input {
                    BudgetInput::Success(AttemptKind::First) => {
                        *tokens = tokens.saturating_add(*increment).min(*capacity);
                    }
                    BudgetInput::Success(AttemptKind::Retry(kind)) => {
                        *tokens = tokens.saturating_add(cost_of(kind)).min(*capacity);
                    }
                    BudgetInput::Withdraw(kind) => {
                        let cost = cost_of(kind);
                        return BudgetOutput::Withdrawal(if *tokens >= cost {
                            *tokens = tokens.saturating_sub(cost);
                            Withdrawal::Granted {
                                cost: Tokens::from_millis(cost),
                                left: Tokens::from_millis(*tokens),
                            }
                        } else {
                            Withdrawal::Refused {
                                left,
                                needs: Requirement::AtLeast(Tokens::from_millis(cost)),
                            }
                        });
                    }
                    BudgetInput::FirstAttempt | BudgetInput::Failure => {}
                }
            }
            BudgetModel::Finagle {
                deposit,
                cost,
                reserve,
                slice,
                entries,
                len,
            } => {
                let slot = now.as_nanos().checked_div(*slice).unwrap_or(0);
                let mut push = |amount: u64, negative: bool| {
                    let amount = i64::try_from(amount).unwrap_or(i64::MAX);
                    let amount = if negative {
                        amount.saturating_neg()
                    } else {
                        amount
                    };
                    if let Some(entry) = entries.get_mut(*len) {
                        *entry = (slot, amount);
                        *len = len.saturating_add(1);
                    }
                };
                match input {
                    BudgetInput::FirstAttempt => push(*deposit, false),
                    BudgetInput::Withdraw(_) => {
                        let needs = Requirement::AtLeast(Tokens::from_millis(*cost));
                        if left.as_millis() < *cost {
                            return BudgetOutput::Withdrawal(Withdrawal::Refused { left, needs });
                        }
                        push(*cost, true);
                        let after = Self::finagle_balance(
                            *reserve,
                            entries.get(..*len).unwrap_or(&[]),
                            slot,
                        );
                        return BudgetOutput::Withdrawal(Withdrawal::Granted {
                            cost: Tokens::from_millis(*cost),
                            left: Tokens::from_millis(after),
                        });
                    }
                    BudgetInput::Failure | BudgetInput::Success(_) => {}
                }
            }
        }
        BudgetOutput::Noted
    }
}

fn budget_setup(
    u: &mut Unstructured<'_>,
) -> arbitrary::Result<Result<Option<(BudgetConfig, BudgetModel)>, ()>> {
    // Ok(None): refused as documented; Err(()): accepted or refused against the docs.
    let some = |config: Result<BudgetConfig, _>, model| config.ok().map(|c| (c, model));
    Ok(Ok(match u.int_in_range(0..=2u8)? {
        0 => {
            let max_tokens = if rarely(u, 8)? {
                u.arbitrary()?
            } else {
                u.int_in_range(1..=1_000u32)?
            };
            let ratio = if rarely(u, 8)? {
                u.arbitrary()?
            } else {
                u.int_in_range(1..=2_000u32)?
            };
            let config = BudgetConfig::grpc_millis(max_tokens, ratio);
            let valid = (1..=1_000).contains(&max_tokens) && (1..=1_000_000).contains(&ratio);
            if config.is_ok() != valid {
                return Ok(Err(()));
            }
            let max = u64::from(max_tokens).saturating_mul(MILLI);
            some(
                config,
                BudgetModel::Grpc {
                    max,
                    ratio: u64::from(ratio),
                    tokens: max,
                },
            )
        }
        1 => {
            let mut pick = || -> arbitrary::Result<u32> {
                Ok(if rarely(u, 8)? {
                    u.arbitrary()?
                } else {
                    u.int_in_range(0..=20u32)?
                })
            };
            let (capacity, retry, timeout, increment) = (pick()?.max(1), pick()?, pick()?, pick()?);
            let capacity = if capacity <= 20 {
                capacity.saturating_mul(10)
            } else {
                capacity
            };
            let m = |t: u32| u64::from(t).saturating_mul(MILLI);
            let config = BudgetConfig::aws()
                .capacity(capacity)
                .retry_cost(retry)
                .timeout_cost(timeout)
                .no_retry_increment(increment)
                .build();
            some(
                config,
                BudgetModel::Aws {
                    capacity: m(capacity),
                    retry: m(retry),
                    timeout: m(timeout),
                    increment: m(increment),
                    tokens: m(capacity),
                },
            )
        }
        _ => {
            let window = if rarely(u, 8)? {
                u.arbitrary::<Duration>()?
            } else {
                Duration::from_millis(u.int_in_range(1_000..=60_000)?)
            };
            let per_sec = if rarely(u, 4)? {
                u.arbitrary()?
            } else {
                u.int_in_range(0..=20u32)?
            };
            let permille = if rarely(u, 8)? {
                u.arbitrary()?
            } else {
                u.int_in_range(0..=1_000u32)?
            };
            let config = BudgetConfig::finagle()
                .window(window)
                .min_retries_per_sec(per_sec)
                .percent_can_retry_permille(permille)
                .build();
            let in_range = window >= Duration::from_secs(1)
                && window <= Duration::from_secs(60)
                && permille <= 1_000;
            if config.is_ok() != in_range {
                return Ok(Err(()));
            }
            // As documented: a request deposits a token and a retry costs
            // 1 / percent tokens; with no percentage, nothing and one thousandth.
            let (deposit, cost) = match 1_000_000u64.checked_div(u64::from(permille)) {
                Some(cost) => (MILLI, cost),
                None => (0, 1),
            };
            let reserve = u64::from(per_sec)
                .saturating_mul(window.as_secs())
                .saturating_mul(cost);
            let slice = u64::try_from(window.as_nanos().checked_div(10).unwrap_or(0))
                .unwrap_or(u64::MAX)
                .max(1);
            some(
                config,
                BudgetModel::Finagle {
                    deposit,
                    cost,
                    reserve,
                    slice,
                    entries: [(0, 0); BUDGET_STEPS],
                    len: 0,
                },
            )
        }
    }))
}

/// Checks the float entry points against the thousandths ones: a value of
/// `m / 1000` must give the same config as `m` thousandths.
fn budget_floats(u: &mut Unstructured<'_>) -> Result<(), Violation> {
    let m = u.int_in_range(1..=1_000_000u32).unwrap_or(1);
    let exact = BudgetConfig::grpc(10, f64::from(m) / 1000.0);
    ensure(
        exact.ok() == BudgetConfig::grpc_millis(10, m).ok(),
        BUDGET,
        0,
        "grpc ratio m/1000 differs from m thousandths",
    )?;
    let p = m % 1_001;
    ensure(
        BudgetConfig::finagle()
            .percent_can_retry(f64::from(p) / 1000.0)
            .build()
            .ok()
            == BudgetConfig::finagle()
                .percent_can_retry_permille(p)
                .build()
                .ok(),
        BUDGET,
        0,
        "finagle percent p/1000 differs from p permille",
    )?;
    // Any float at all: refused or accepted, never a panic.
    let raw = f64::from_bits(u.arbitrary().unwrap_or(0));
    let _ = BudgetConfig::grpc(u.arbitrary().unwrap_or(1), raw);
    let _ = BudgetConfig::finagle().percent_can_retry(raw).build();
    Ok(())
}

/// Drives a [`RetryBudget`] (gRPC, AWS or Finagle, arbitrary parameters) with an
/// arbitrary list of notifications and clock moves, against the reference
/// model. Checks: no panic; tokens always in `[0, max]`; every answer and token
/// count equals the model's; first attempts never cost; refusals change nothing.
///
/// # Errors
/// The first [`Violation`].
pub fn budget(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    budget_floats(&mut u)?;
    let setup = match budget_setup(&mut u) {
        Ok(Ok(Some(setup))) => setup,
        Ok(Ok(None)) | Err(_) => return Ok(()),
        Ok(Err(())) => {
            return Err(Violation {
                target: BUDGET,
                step: 0,
                invariant: "a config was accepted or refused against its documented ranges",
            })
        }
    };
    let (config, mut model) = setup;
    let mut budget = RetryBudget::new(config);
    ensure(
        budget.max_tokens().as_millis() == model.max(),
        BUDGET,
        0,
        "max tokens differ from the model",
    )?;
    ensure(
        budget.tokens() == config.initial_tokens(),
        BUDGET,
        0,
        "a new budget does not hold its initial tokens",
    )?;
    let mut now = Instant::ORIGIN;
    let mut last = Instant::ORIGIN;
    for step in 1..=BUDGET_STEPS {
        if u.is_empty() {
            break;
        }
        let Ok(pick) = u.int_in_range(0..=9u8) else {
            break;
        };
        let kind = if u.arbitrary().unwrap_or(false) {
            RetryKind::Timeout
        } else {
            RetryKind::Failure
        };
        let input = match pick {
            0 | 1 => BudgetInput::FirstAttempt,
            2 | 3 => BudgetInput::Failure,
            4 => BudgetInput::Success(AttemptKind::First),
            5 => BudgetInput::Success(AttemptKind::Retry(kind)),
            6 | 7 => BudgetInput::Withdraw(kind),
            8 => {
                now = now.saturating_add(Duration::from_millis(
                    u.int_in_range(0..=3_000).unwrap_or(0),
                ));
                continue;
            }
            _ => {
                now = match u.int_in_range(0..=2u8).unwrap_or(0) {
                    0 => now.saturating_sub(Duration::from_millis(
                        u.int_in_range(0..=5_000).unwrap_or(0),
                    )),
                    1 => Instant::from_nanos(u.arbitrary().unwrap_or(0)),
                    _ => now
                        .saturating_add(Duration::from_secs(u.int_in_range(0..=120).unwrap_or(0))),
                };
                continue;
            }
        };
        // Time going backwards counts as no time passing.
        last = last.max(now);
        let before = budget;
        let expected = model.apply(input, last);
        let output = budget.apply(input, now);
        ensure(
            output == expected,
            BUDGET,
            step,
            "the answer differs from the reference model",
        )?;
        if let BudgetOutput::Withdrawal(Withdrawal::Refused { .. }) = output {
            ensure(
                budget.tokens_at(last) == before.tokens_at(last),
                BUDGET,
                step,
                "a refusal changed the tokens",
            )?;
        }
        if input == BudgetInput::FirstAttempt {
            ensure(
                budget.tokens() >= before.tokens_at(last),
                BUDGET,
                step,
                "a first attempt cost tokens",
            )?;
        }
        let tokens = budget.tokens().as_millis();
        ensure(
            tokens == model.tokens(last),
            BUDGET,
            step,
            "tokens differ from the model",
        )?;
        ensure(
            tokens <= budget.max_tokens().as_millis(),
            BUDGET,
            step,
            "tokens above the maximum",
        )?;
        let ahead = last.saturating_add(Duration::from_secs(u.int_in_range(0..=30).unwrap_or(0)));
        ensure(
            budget.tokens_at(ahead).as_millis() == model.tokens(ahead),
            BUDGET,
            step,
            "tokens ahead in time differ from the model",
        )?;
    }
    Ok(())
}

// ===========================================================================
// Header parsers
// ===========================================================================

const RETRY_AFTER: &str = "retry_after";
/// `9999-12-31T23:59:59Z`: the last second an HTTP-date can name.
const LAST_HTTP_DATE: u64 = 253_402_300_799;
/// `0000-01-01T00:00:00Z`: the first.
const FIRST_HTTP_DATE: i64 = -62_167_219_200;
/// A little over fifty years, for the two-digit-year window.
const FIFTY_YEARS_AND_A_BIT: i64 = 51 * 366 * 86_400;

/// A fixed buffer written through `fmt::Write`.
struct Text<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    const fn new() -> Self {
        Text {
            bytes: [0; N],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }

    fn as_str(&self) -> &str {
        core::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    fn push(&mut self, bytes: &[u8]) -> fmt::Result {
        let end = self.len.checked_add(bytes.len()).ok_or(fmt::Error)?;
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }
}

impl<const N: usize> fmt::Write for Text<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push(s.as_bytes())
    }
}

/// Digits-only (after trimming) as a number of seconds, saturating as the
/// parser documents.
fn delta_seconds(value: &[u8]) -> Option<Duration> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut secs: u128 = 0;
    for b in value {
        secs = secs
            .saturating_mul(10)
            .saturating_add(u128::from(b.wrapping_sub(b'0')));
    }
    Some(u64::try_from(secs).map_or(Duration::MAX, Duration::from_secs))
}

/// The IMF-fixdate of `secs` as text, if it can be written.
fn imf(secs: u64) -> [u8; 29] {
    let mut out = [0u8; 29];
    format_http_date(secs, &mut out);
    out
}

/// The parts of an IMF-fixdate: weekday, day, month, year, time.
fn imf_parts(d: &[u8; 29]) -> [&[u8]; 5] {
    let part = |r: core::ops::Range<usize>| d.get(r).unwrap_or(&[]);
    [
        part(0..3),
        part(5..7),
        part(8..11),
        part(12..16),
        part(17..25),
    ]
}

fn long_day(short: &[u8]) -> &'static [u8] {
    match short {
        b"Sun" => b"Sunday",
        b"Mon" => b"Monday",
        b"Tue" => b"Tuesday",
        b"Wed" => b"Wednesday",
        b"Thu" => b"Thursday",
        b"Fri" => b"Friday",
        _ => b"Saturday",
    }
}

fn check_format_round_trip(secs: u64, now: u64, step: usize) -> Result<(), Violation> {
    let check = |ok, invariant| ensure(ok, RETRY_AFTER, step, invariant);
    let date = imf(secs);
    check(
        date.iter().all(|b| b.is_ascii_graphic() || *b == b' '),
        "format_http_date wrote a byte outside printable ASCII",
    )?;
    if secs > LAST_HTTP_DATE {
        return check(
            date == imf(LAST_HTTP_DATE),
            "a time past 9999 is not clamped",
        );
    }
    let expected = i64::try_from(secs).ok();
    check(
        parse_http_date(&date, now) == expected,
        "format_http_date then parse_http_date is not the identity",
    )?;
    let [day_name, day, month, year, time] = imf_parts(&date);
    // asctime, space-padded and zero-padded.
    let mut asctime = Text::<32>::new();
    let mut zero = Text::<32>::new();
    let day_padded: [u8; 2] = match day {
        [b'0', d] => [b' ', *d],
        [a, b] => [*a, *b],
        _ => [b' ', b' '],
    };
    for (text, day) in [(&mut asctime, &day_padded[..]), (&mut zero, day)] {
        for part in [day_name, b" ", month, b" ", day, b" ", time, b" ", year] {
            let _ = text.push(part);
        }
    }
    check(
        parse_http_date(asctime.as_bytes(), now) == expected,
        "asctime of a formatted date does not parse back",
    )?;
    check(
        parse_http_date(zero.as_bytes(), now) == expected,
        "zero-padded asctime does not parse back",
    )?;
    // RFC 850 with a two-digit year: exact when read relative to the date itself.
    let mut rfc850 = Text::<40>::new();
    for part in [
        long_day(day_name),
        b", ",
        day,
        b"-",
        month,
        b"-",
        year.get(2..4).unwrap_or(&[]),
        b" ",
        time,
        b" GMT",
    ] {
        let _ = rfc850.push(part);
    }
    check(
        parse_http_date(rfc850.as_bytes(), secs) == expected,
        "RFC 850 date read relative to itself is not the date",
    )?;
    if let Some(t) = parse_http_date(rfc850.as_bytes(), now) {
        let now_i = i64::try_from(now).unwrap_or(i64::MAX);
        check(
            t > now_i.saturating_sub(FIFTY_YEARS_AND_A_BIT)
                && t <= now_i.saturating_add(FIFTY_YEARS_AND_A_BIT),
            "RFC 850 year not within fifty years of now",
        )?;
        if let Ok(t) = u64::try_from(t) {
            let other = imf(t);
            let [n2, d2, m2, y2, t2] = imf_parts(&other);
            check(
                (n2, d2, m2, t2) == (day_name, day, month, time) && y2.get(2..4) == year.get(2..4),
                "RFC 850 date resolved to a different day or time",
            )?;
        }
    }
    Ok(())
}

/// Feeds arbitrary header bytes and an arbitrary wall-clock `now` to every
/// header parser. Checks: no panic; delta-seconds and `retry-after-ms` values
/// written back out parse to the same value; gRPC pushback agrees with
/// `retry-after-ms`; a parsed HTTP-date is in the calendar's range, does not
/// depend on `now` unless it has a two-digit year, and survives
/// `format_http_date`; `format_http_date` round-trips through all three date
/// forms for any in-range second.
///
/// # Errors
/// The first [`Violation`].
pub fn retry_after(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    let now: u64 = match u.int_in_range(0..=3u8).unwrap_or(0) {
        0 => u.arbitrary().unwrap_or(0),
        _ => u.int_in_range(0..=LAST_HTTP_DATE).unwrap_or(0),
    };
    let secs: u64 = u.arbitrary().unwrap_or(0);
    let other_now: u64 = u.arbitrary().unwrap_or(0);
    let header = u.take_rest();
    let check = |ok, step, invariant| ensure(ok, RETRY_AFTER, step, invariant);
    let trimmed = header.trim_ascii();

    // Retry-After: delta-seconds or a date.
    let parsed = parse_retry_after(header, now);
    match delta_seconds(trimmed) {
        Some(d) => {
            check(
                parsed == Some(d),
                1,
                "delta-seconds parsed to another value",
            )?;
            let mut text = Text::<24>::new();
            let _ = fmt::write(&mut text, format_args!("{}", d.as_secs()));
            check(
                parse_retry_after(text.as_bytes(), now) == Some(Duration::from_secs(d.as_secs())),
                1,
                "delta-seconds written back does not parse to the same value",
            )?;
        }
        None => {
            let from_date = parse_http_date(header, now).map(|t| {
                let ahead = u64::try_from(t)
                    .ok()
                    .and_then(|t| t.checked_sub(now))
                    .unwrap_or(0);
                Duration::from_secs(ahead)
            });
            check(
                parsed == from_date,
                1,
                "Retry-After date is not the date minus now",
            )?;
        }
    }

    // retry-after-ms: written back with six decimals, it parses to itself.
    let ms = parse_retry_after_ms(header);
    if let Some(d) = ms {
        check(
            !trimmed.is_empty() && trimmed.iter().all(|b| b.is_ascii_digit() || *b == b'.'),
            2,
            "retry-after-ms accepted a byte that is neither a digit nor a point",
        )?;
        let nanos = d.as_nanos();
        let whole = nanos.checked_div(1_000_000).unwrap_or(0);
        let part = nanos.checked_rem(1_000_000).unwrap_or(0);
        let mut text = Text::<48>::new();
        let _ = fmt::write(&mut text, format_args!("{whole}.{part:06}"));
        check(
            parse_retry_after_ms(text.as_bytes()) == Some(d),
            2,
            "retry-after-ms written back does not parse to the same value",
        )?;
    }
    if delta_seconds(trimmed).is_some() {
        check(ms.is_some(), 2, "retry-after-ms refused plain digits")?;
    }

    // grpc-retry-pushback-ms: digits are a delay, anything else is a stop.
    match parse_grpc_pushback(header) {
        Pushback::RetryAfter(d) => {
            check(
                delta_seconds(trimmed).is_some(),
                3,
                "pushback accepted something besides digits",
            )?;
            check(
                ms == Some(d),
                3,
                "pushback and retry-after-ms disagree on plain digits",
            )?;
        }
        Pushback::Stop => check(
            delta_seconds(trimmed).is_none(),
            3,
            "pushback refused plain digits",
        )?,
    }
    check(
        retry_after_from_headers(Some(header), Some(header), now) == ms.or(parsed),
        3,
        "retry_after_from_headers does not prefer retry-after-ms",
    )?;
    check(
        retry_after_from_headers(None, Some(header), now) == parsed,
        3,
        "retry_after_from_headers without retry-after-ms is not Retry-After",
    )?;

    // HTTP-date.
    if let Some(t) = parse_http_date(header, now) {
        check(
            (FIRST_HTTP_DATE..=253_402_300_799).contains(&t),
            4,
            "a parsed date outside years 0 to 9999",
        )?;
        if !trimmed.contains(&b'-') {
            check(
                parse_http_date(header, other_now) == Some(t),
                4,
                "a date without a two-digit year depends on now",
            )?;
        }
        if let Ok(t) = u64::try_from(t) {
            let again = imf(t);
            check(
                parse_http_date(&again, other_now) == i64::try_from(t).ok(),
                4,
                "a parsed date does not survive formatting",
            )?;
            if trimmed.len() == 29 {
                // Only an IMF-fixdate is 29 bytes long; it formats back as written,
                // but for a leap second, which reads as :59.
                let mut expected = [0u8; 29];
                expected.copy_from_slice(trimmed);
                if expected.get(23..25) == Some(b"60") {
                    if let Some(s) = expected.get_mut(23..25) {
                        s.copy_from_slice(b"59");
                    }
                }
                check(
                    again == expected,
                    4,
                    "an IMF-fixdate does not format back as written",
                )?;
            }
        }
    }

    // format_http_date for any second, and for one inside the calendar.
    check_format_round_trip(secs, now, 5)?;
    check_format_round_trip(
        secs.checked_rem(LAST_HTTP_DATE.saturating_add(1))
            .unwrap_or(0),
        now,
        6,
    )?;
    Ok(())
}

// ===========================================================================
// Set lists
// ===========================================================================

const SETS: &str = "sets";

/// Reads a list such as `"1,2,5-9"` item by item into `members` (index
/// `value - min`), or returns the failing item's index and what was wrong.
fn reference_list(
    input: &str,
    min: u16,
    max: u16,
    members: &mut [bool],
) -> Result<(), (usize, SetParseErrorKind)> {
    if input.bytes().all(|b| b.is_ascii_whitespace()) {
        return Ok(());
    }
    let number = |text: &str| -> Result<u16, SetParseErrorKind> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SetParseErrorKind::NotANumber);
        }
        let mut value: u32 = 0;
        for b in text.bytes() {
            value = value
                .saturating_mul(10)
                .saturating_add(u32::from(b.wrapping_sub(b'0')));
        }
        match u16::try_from(value) {
            Ok(v) if v >= min && v <= max => Ok(v),
            _ => Err(SetParseErrorKind::OutOfRange { min, max }),
        }
    };
    for (index, piece) in input.split(',').enumerate() {
        let item = piece.trim_ascii();
        if item.is_empty() {
            return Err((index, SetParseErrorKind::Empty));
        }
        let (lo, hi) = match item.find('-') {
            Some(dash) => (
                item.get(..dash).unwrap_or("").trim_ascii(),
                item.get(dash.saturating_add(1)..)
                    .unwrap_or("")
                    .trim_ascii(),
            ),
            None => (item, item),
        };
        let lo = number(lo).map_err(|k| (index, k))?;
        let hi = number(hi).map_err(|k| (index, k))?;
        if lo > hi {
            return Err((index, SetParseErrorKind::Reversed));
        }
        for value in lo..=hi {
            if let Some(m) = members.get_mut(usize::from(value.saturating_sub(min))) {
                *m = true;
            }
        }
    }
    Ok(())
}

/// Writes the members (index `value - min`) as a list of ranges.
fn write_ranges<const N: usize>(members: &[bool], min: u16, out: &mut Text<N>) -> fmt::Result {
    let mut run: Option<(usize, usize)> = None;
    let mut first = true;
    let mut flush = |lo: usize, hi: usize, out: &mut Text<N>| -> fmt::Result {
        let at = |i: usize| usize::from(min).saturating_add(i);
        if !first {
            out.push(b", ")?;
        }
        first = false;
        if lo == hi {
            fmt::write(out, format_args!("{}", at(lo)))
        } else {
            fmt::write(out, format_args!("{} - {}", at(lo), at(hi)))
        }
    };
    for (i, on) in members.iter().enumerate() {
        run = match (run, *on) {
            (None, true) => Some((i, i)),
            (Some((lo, _)), true) => Some((lo, i)),
            (Some((lo, hi)), false) => {
                flush(lo, hi, out)?;
                None
            }
            (None, false) => None,
        };
    }
    if let Some((lo, hi)) = run {
        flush(lo, hi, out)?;
    }
    Ok(())
}

/// Holds one parse result (as membership, count and members in order, or the
/// error's position and kind) against the reference reading of `input`.
/// A parsed set as [`check_set`] sees it: its size, its members in order, and
/// its membership test.
type ParsedSet<'a, I> = (usize, I, &'a dyn Fn(u16) -> bool);

fn check_set<I: Iterator<Item = u16>>(
    input: &str,
    result: Result<ParsedSet<'_, I>, crate::SetParseError<'_>>,
    min: u16,
    max: u16,
    members: &mut [bool],
    step: usize,
) -> Result<(), Violation> {
    let check = |ok, invariant| ensure(ok, SETS, step, invariant);
    let reference = reference_list(input, min, max, members);
    match (result, reference) {
        (Ok((len, iter, contains)), Ok(())) => {
            let expected_len = members.iter().filter(|m| **m).count();
            check(len == expected_len, "set size differs from the reference")?;
            let mut expected = members
                .iter()
                .enumerate()
                .filter(|(_, m)| **m)
                .map(|(i, _)| u16::try_from(i).unwrap_or(u16::MAX).saturating_add(min));
            for got in iter {
                check(
                    Some(got) == expected.next(),
                    "members differ from the reference or are out of order",
                )?;
            }
            check(expected.next().is_none(), "a reference member is missing")?;
            for value in 0..=max.saturating_add(1) {
                let inside = value >= min
                    && members
                        .get(usize::from(value.saturating_sub(min)))
                        .copied()
                        .unwrap_or(false);
                check(
                    contains(value) == inside,
                    "contains differs from the reference",
                )?;
            }
        }
        (Err(e), Err((index, kind))) => {
            check(
                e.index() == index && e.kind() == kind,
                "the error names another item or kind",
            )?;
            let offset = e.offset();
            check(
                input.get(offset..offset.saturating_add(e.item().len())) == Some(e.item()),
                "the error's offset does not point at its item",
            )?;
            check(
                e.item() == e.item().trim_ascii(),
                "the error's item is not trimmed",
            )?;
        }
        _ => {
            return Err(Violation {
                target: SETS,
                step,
                invariant: "parse and the reference disagree on whether the list is valid",
            })
        }
    }
    Ok(())
}

/// Parses arbitrary text as an [`ExitCodeSet`] and a [`StatusSet`] list, and
/// arbitrary bytes as a [`Method`]. Checks: no panic; the sets agree with a
/// bitmap built item by item (membership, size, order), errors name the same
/// item and kind as the reference and point at it; a parsed set written back as
/// a list of ranges parses to itself; a known method's name reads back as it.
///
/// # Errors
/// The first [`Violation`].
pub fn sets(data: &[u8]) -> Result<(), Violation> {
    let text = match core::str::from_utf8(data) {
        Ok(text) => text,
        Err(e) => core::str::from_utf8(data.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or(""),
    };

    let mut codes = [false; 256];
    let exit = ExitCodeSet::parse(text);
    let contains_exit = |v: u16| exit.is_ok_and(|s| u8::try_from(v).is_ok_and(|b| s.contains(b)));
    check_set(
        text,
        exit.map(|s| {
            (
                s.len(),
                s.iter().map(u16::from),
                &contains_exit as &dyn Fn(u16) -> bool,
            )
        }),
        0,
        255,
        &mut codes,
        1,
    )?;
    if let Ok(set) = exit {
        let mut list = Text::<2048>::new();
        let _ = write_ranges(&codes, 0, &mut list);
        ensure(
            ExitCodeSet::parse(list.as_str()) == Ok(set),
            SETS,
            2,
            "an exit-code set written back does not parse to itself",
        )?;
        ensure(
            set.iter().collect::<ExitCodeSet>() == set,
            SETS,
            2,
            "an exit-code set rebuilt from its members differs",
        )?;
        ensure(
            set.iter()
                .rev()
                .zip(set.iter().rev().skip(1))
                .all(|(a, b)| a > b),
            SETS,
            2,
            "reverse iteration is not descending",
        )?;
    }

    let mut statuses = [false; 500];
    let status = StatusSet::parse(text);
    let contains_status = |v: u16| status.is_ok_and(|s| s.contains(v));
    check_set(
        text,
        status.map(|s| (s.len(), s.iter(), &contains_status as &dyn Fn(u16) -> bool)),
        100,
        599,
        &mut statuses,
        3,
    )?;
    if let Ok(set) = status {
        let mut list = Text::<4096>::new();
        let _ = write_ranges(&statuses, 100, &mut list);
        ensure(
            StatusSet::parse(list.as_str()) == Ok(set),
            SETS,
            4,
            "a status set written back does not parse to itself",
        )?;
    }

    let method = Method::parse(data);
    match method.as_str() {
        Some(name) => ensure(
            name.as_bytes() == data,
            SETS,
            5,
            "a method's name differs from the bytes it was read from",
        )?,
        None => ensure(
            method == Method::Other,
            SETS,
            5,
            "a named method has no name",
        )?,
    }
    Ok(())
}
