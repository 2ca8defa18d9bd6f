//! [`RetrySnapshot`]: a retry machine's state as a versioned record, and the
//! checks that restore it.

use core::borrow::Borrow;
use core::time::Duration;

use super::machine::{sleep_end, State};
use super::nanos::{from_nanos, sat_nanos};
use super::{
    Action, GiveUp, GiveUpReason, HintMode, Resolution, RetryMachine, RetryPolicy, SleepReason,
};
use crate::snapshot::{consistent, CurveRecord, JitterRecord, SnapshotError};
use crate::{CircuitOpen, FailureKind, Instant};

/// A [`RetryMachine`] as a plain, versioned record: its policy, its seed, the
/// phase it is in with what that phase waits for, and the few counters its
/// future depends on. [`RetryMachine::snapshot`] takes one;
/// [`RetryMachine::restore`] checks one and rebuilds the machine, which then
/// answers every later event exactly as the original would, in this process or
/// another, on any platform. With the `serde` feature it serializes to any serde
/// format (JSON, postcard, …), without allocating.
///
/// The record is written for the format, not the machine: its fields keep
/// their meaning when the machine's insides change, and [`RetrySnapshot::VERSION`]
/// says which format it is.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use retry_core::{Action, Event, Failure, Instant, RetryMachine, RetryPolicy, RetrySnapshot};
///
/// let policy = RetryPolicy::default();
/// let mut m = RetryMachine::new(&policy, 7);
/// let _ = m.poll(Event::Start, Instant::ORIGIN);
/// let Action::Sleep { until, .. } = m.poll(Event::Failed(Failure::retryable()), Instant::ORIGIN) else {
///     unreachable!()
/// };
/// // Saved while it sleeps, restored after a restart, it goes on where it was.
/// let text = serde_json::to_string(&m.snapshot()).unwrap();
/// let snapshot: RetrySnapshot = serde_json::from_str(&text).unwrap();
/// let mut restored = RetryMachine::restore(&snapshot)?;
/// assert_eq!(restored.poll(Event::Woke, until), m.poll(Event::Woke, until));
/// # }
/// # Ok::<(), retry_core::SnapshotError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RetrySnapshot {
    version: u32,
    policy: PolicyRecord,
    seed: u64,
    phase: PhaseRecord,
    started_at: Instant,
    latest_now: Instant,
    attempts: u32,
    curve_restarted_at: u32,
    previous_delay: Duration,
    last_failure: Option<FailureKind>,
}

/// Every field of a policy, plainly.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct PolicyRecord {
    max_attempts: u32,
    backoff: CurveRecord,
    max_delay: Duration,
    min_delay: Duration,
    jitter: JitterRecord,
    nanosecond_resolution: bool,
    hints: HintsRecord,
    budget: Option<Duration>,
    attempt_timeout: Option<Duration>,
    cap_attempt_to_budget: bool,
    retry_timeouts: bool,
    use_retry_budget: bool,
    wait_on_open_circuit: bool,
    idempotent: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
enum HintsRecord {
    Override { min: Duration, max: Duration },
    AtLeast { cap: Duration },
    Ignore,
}

/// The phase and what it waits for.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
enum PhaseRecord {
    /// Waiting for `Start`.
    Idle,
    /// Attempt `number` runs since `started`.
    Attempting {
        number: u32,
        started: Instant,
        deadline: Option<Instant>,
    },
    /// Sleeping until `until`.
    Sleeping {
        until: Instant,
        delay: Duration,
        reason: SleepReason,
    },
    /// Waiting for the retry budget's answer for retry `retry`.
    Withdrawing {
        retry: u32,
        after_timeout: bool,
        delay: Duration,
        reason: SleepReason,
    },
    /// Finished with a success.
    Done { attempts: u32 },
    /// Finished with a failure.
    GaveUp {
        reason: GiveUpReason,
        attempts: u32,
        last_failure: Option<FailureKind>,
    },
}

impl RetrySnapshot {
    /// The format version this build writes and reads.
    pub const VERSION: u32 = 1;

    /// The format version of this snapshot.
    #[must_use]
    pub const fn version(&self) -> u32 {
        self.version
    }
}

impl PolicyRecord {
    fn of(p: &RetryPolicy) -> PolicyRecord {
        PolicyRecord {
            max_attempts: p.max_attempts(),
            backoff: p.backoff().into(),
            max_delay: p.max_delay(),
            min_delay: p.min_delay(),
            jitter: p.jitter().into(),
            nanosecond_resolution: p.resolution() == Resolution::Nanos,
            hints: match p.hints() {
                HintMode::Override { min, max } => HintsRecord::Override { min, max },
                HintMode::AtLeast { cap } => HintsRecord::AtLeast { cap },
                HintMode::Ignore => HintsRecord::Ignore,
            },
            budget: p.budget(),
            attempt_timeout: p.attempt_timeout(),
            cap_attempt_to_budget: p.caps_attempt_to_budget(),
            retry_timeouts: p.retries_timeouts(),
            use_retry_budget: p.uses_retry_budget(),
            wait_on_open_circuit: p.circuit_open() == CircuitOpen::Wait,
            idempotent: p.is_idempotent(),
        }
    }

    fn policy(&self) -> Result<RetryPolicy, SnapshotError> {
        RetryPolicy::builder()
            .max_attempts(self.max_attempts)
            .backoff(self.backoff.into())
            .max_delay(self.max_delay)
            .min_delay(self.min_delay)
            .jitter(self.jitter.into())
            .resolution(if self.nanosecond_resolution {
                Resolution::Nanos
            } else {
                Resolution::Millis
            })
            .hints(match self.hints {
                HintsRecord::Override { min, max } => HintMode::Override { min, max },
                HintsRecord::AtLeast { cap } => HintMode::AtLeast { cap },
                HintsRecord::Ignore => HintMode::Ignore,
            })
            .budget(self.budget)
            .attempt_timeout(self.attempt_timeout)
            .cap_attempt_to_budget(self.cap_attempt_to_budget)
            .retry_timeouts(self.retry_timeouts)
            .use_retry_budget(self.use_retry_budget)
            .on_circuit_open(if self.wait_on_open_circuit {
                CircuitOpen::Wait
            } else {
                CircuitOpen::GiveUp
            })
            .idempotent(self.idempotent)
            .build()
            .map_err(SnapshotError::Policy)
    }
}

impl<P: Borrow<RetryPolicy>> RetryMachine<P> {
    /// The machine's state as a [`RetrySnapshot`]: restored with
    /// [`RetryMachine::restore`], it answers every later event as this machine
    /// would.
    #[must_use]
    pub fn snapshot(&self) -> RetrySnapshot {
        let phase = match self.state {
            State::Idle => PhaseRecord::Idle,
            State::Attempting {
                number,
                started,
                deadline,
            } => PhaseRecord::Attempting {
                number,
                started,
                deadline,
            },
            State::Sleeping {
                until,
                delay,
                reason,
            } => PhaseRecord::Sleeping {
                until,
                delay,
                reason,
            },
            State::Withdrawing {
                retry,
                after_timeout,
                delay,
                reason,
            } => PhaseRecord::Withdrawing {
                retry,
                after_timeout,
                delay,
                reason,
            },
            State::Finished(Action::GiveUp(g)) => PhaseRecord::GaveUp {
                reason: g.reason,
                attempts: g.attempts,
                last_failure: g.last_failure,
            },
            State::Finished(Action::Done { attempts }) => PhaseRecord::Done { attempts },
            // Only `GiveUp` and `Done` ever finish a machine; recorded as
            // finished with what it ran, should that ever change.
            State::Finished(_) => PhaseRecord::Done {
                attempts: self.last_attempt,
            },
        };
        RetrySnapshot {
            version: RetrySnapshot::VERSION,
            policy: PolicyRecord::of(&self.policy),
            seed: self.seed,
            phase,
            started_at: self.start,
            latest_now: self.last_now,
            attempts: self.last_attempt,
            curve_restarted_at: self.curve_origin,
            previous_delay: self.previous_delay,
            last_failure: self.last_failure,
        }
    }
}

impl RetryMachine {
    /// Rebuilds a machine from `snapshot`, after checking it.
    ///
    /// The snapshot is checked against the policy it carries, as a record of
    /// a machine following that policy: what the machine waits for must be
    /// something that policy could have asked for. A record whose policy was
    /// replaced is judged the same way (see
    /// [the rule](crate::behaviour#snapshots)).
    ///
    /// # Errors
    /// A [`SnapshotError`] naming the field: an unknown `version`; a `policy`
    /// that fails validation; `attempts` above the policy's maximum; a phase that
    /// cannot hold with its fields or the counters (an attempt in flight that is
    /// not the last one started, or whose deadline is not the one the policy
    /// gives an attempt started then; a sleep not after the latest time seen,
    /// asked before the call started or after the latest time seen, past the
    /// time budget, or longer or shorter than its reason allows; a withdrawal
    /// without a retry budget, or whose retry no longer fits the time budget;
    /// a finished call that ran a different number of attempts, or ended for a
    /// reason the policy cannot give; times before the call started).
    pub fn restore(snapshot: &RetrySnapshot) -> Result<RetryMachine, SnapshotError> {
        let s = snapshot;
        if s.version != RetrySnapshot::VERSION {
            return Err(SnapshotError::UnsupportedVersion {
                found: s.version,
                supported: RetrySnapshot::VERSION,
            });
        }
        let policy = s.policy.policy()?;
        let max = policy.max_attempts();
        if s.attempts > max {
            return Err(SnapshotError::AboveMaximum {
                field: "attempts",
                value: u64::from(s.attempts),
                maximum: u64::from(max),
            });
        }
        consistent(
            s.curve_restarted_at <= s.attempts,
            "curve_restarted_at",
            "the curve restarted after the last attempt started",
        )?;
        let fresh = RetryMachine::new(&policy, s.seed);
        // The machine as restored, but for its phase: its answers to the
        // checks below (budget, deadlines) are the ones it will give.
        let machine = RetryMachine {
            start: s.started_at,
            last_now: s.latest_now,
            curve_origin: s.curve_restarted_at,
            previous_delay: s.previous_delay,
            last_attempt: s.attempts,
            last_failure: s.last_failure,
            ..fresh
        };
        let state = match s.phase {
            PhaseRecord::Idle => {
                consistent(
                    s.attempts == 0
                        && s.curve_restarted_at == 0
                        && s.last_failure.is_none()
                        && s.started_at == Instant::ORIGIN
                        && s.latest_now == Instant::ORIGIN
                        && s.previous_delay == fresh.previous_delay,
                    "phase",
                    "an idle machine has not started: no attempts, failures or times",
                )?;
                State::Idle
            }
            _ if s.started_at > s.latest_now => {
                return Err(SnapshotError::Inconsistent {
                    field: "started_at",
                    reason: "the call started after the latest time seen",
                })
            }
            PhaseRecord::Attempting {
                number,
                started,
                deadline,
            } => {
                consistent(
                    number >= 1 && number == s.attempts,
                    "phase.number",
                    "the attempt in flight is not the last one started",
                )?;
                // Nothing moves the latest time while an attempt runs: every
                // event that fits ends it. Only the call's first attempt
                // starts without asking the time budget.
                consistent(
                    started == s.latest_now
                        && (started == s.started_at || machine.within_budget(started)),
                    "phase.started",
                    "the attempt in flight did not start at the latest time seen, \
                     or started at or after the end of the time budget",
                )?;
                consistent(
                    deadline == machine.attempt_deadline(started),
                    "phase.deadline",
                    "not the deadline the policy gives an attempt started then",
                )?;
                State::Attempting {
                    number,
                    started,
                    deadline,
                }
            }
            PhaseRecord::Sleeping {
                until,
                delay,
                reason,
            } => {
                consistent(
                    !policy.is_last_attempt(s.attempts),
                    "phase",
                    "a sleep after the last attempt the policy allows",
                )?;
                // After the latest time seen; only a sleep asked at the last
                // instant ends there too.
                consistent(
                    !delay.is_zero() && (until > s.latest_now || until == Instant::MAX),
                    "phase.until",
                    "a sleep that is over, or of no length, is not pending",
                )?;
                // Asked at `until - delay` (or, ending at the last instant,
                // at any time from which `delay` reaches it): after the call
                // started, and no later than the latest time seen (waking
                // early is the only event a sleep takes without ending).
                consistent(
                    until == Instant::MAX || until.saturating_duration_since(s.started_at) >= delay,
                    "phase.delay",
                    "the sleep began before the call started",
                )?;
                consistent(
                    until <= sleep_end(s.latest_now, delay),
                    "phase.until",
                    "the sleep ends later than its delay after the latest time seen",
                )?;
                consistent(
                    machine.within_budget(until),
                    "phase.until",
                    "the sleep reaches the end of the time budget",
                )?;
                consistent(
                    reason == SleepReason::CircuitOpen || s.attempts >= 1,
                    "phase.reason",
                    "a curve or hint sleep before any attempt",
                )?;
                pending_delay(&machine, delay, reason)?;
                State::Sleeping {
                    until,
                    delay,
                    reason,
                }
            }
            PhaseRecord::Withdrawing {
                retry,
                after_timeout,
                delay,
                reason,
            } => {
                consistent(
                    policy.uses_retry_budget(),
                    "phase",
                    "waiting for a retry budget the policy does not use",
                )?;
                consistent(
                    retry >= 1 && retry == s.attempts && !policy.is_last_attempt(retry),
                    "phase.retry",
                    "the retry asked for does not follow the last attempt",
                )?;
                consistent(
                    reason != SleepReason::CircuitOpen,
                    "phase.reason",
                    "a circuit-open wait is never paid for from the retry budget",
                )?;
                consistent(
                    !after_timeout || s.last_failure == Some(FailureKind::Timeout),
                    "phase.after_timeout",
                    "a retry after a timeout whose last failure is no timeout",
                )?;
                // Nothing moves the latest time while the budget is asked:
                // the retry was asked for then, and only if it fitted.
                consistent(
                    machine.within_budget(sleep_end(s.latest_now, delay)),
                    "phase.delay",
                    "the retry does not fit the time budget",
                )?;
                pending_delay(&machine, delay, reason)?;
                State::Withdrawing {
                    retry,
                    after_timeout,
                    delay,
                    reason,
                }
            }
            PhaseRecord::Done { attempts } => {
                consistent(
                    attempts >= 1 && attempts == s.attempts,
                    "phase.attempts",
                    "a success after a different number of attempts than were started",
                )?;
                State::Finished(Action::Done { attempts })
            }
            PhaseRecord::GaveUp {
                reason,
                attempts,
                last_failure,
            } => {
                consistent(
                    attempts == s.attempts,
                    "phase.attempts",
                    "gave up after a different number of attempts than were started",
                )?;
                let possible = match reason {
                    GiveUpReason::NotStarted => false,
                    GiveUpReason::RetryBudget => policy.uses_retry_budget(),
                    GiveUpReason::CircuitOpen { .. } => {
                        policy.circuit_open() == CircuitOpen::GiveUp
                    }
                    _ => true,
                };
                consistent(
                    possible,
                    "phase.reason",
                    "an end the policy cannot give (`not started` answers misuse and \
                     ends no call; a retry budget or an open circuit the policy does \
                     not stop for)",
                )?;
                State::Finished(Action::GiveUp(GiveUp {
                    reason,
                    attempts,
                    last_failure,
                }))
            }
        };
        Ok(RetryMachine { state, ..machine })
    }
}

/// Checks a pending sleep's `delay` (or a withdrawal's, which may be zero)
/// against what its reason allows under the machine's
/// policy: a curve delay within `[min_delay, longest_curve_delay]` and
/// recorded as the previous delay; a hint within the hint mode's clamp or
/// cap, unless it was an exact pushback (the curve restarted at the last
/// attempt, its previous delay the initial one); a circuit-open wait of at
/// least a millisecond, under a policy that waits for open circuits.
fn pending_delay(
    machine: &RetryMachine,
    delay: Duration,
    reason: SleepReason,
) -> Result<(), SnapshotError> {
    let policy = machine.policy();
    let floor = from_nanos(sat_nanos(policy.min_delay()));
    let recorded = machine.previous_delay == delay;
    let (ok, why) = match (reason, policy.hints()) {
        (SleepReason::CircuitOpen, _) => (
            policy.circuit_open() == CircuitOpen::Wait && delay >= Duration::from_millis(1),
            "a circuit-open wait under a policy that gives up on open circuits, or \
             shorter than a millisecond",
        ),
        (SleepReason::Curve, _) => (
            recorded && delay >= floor && delay <= policy.longest_curve_delay(),
            "a curve delay outside [min_delay, max_delay] and its jitter's interval, \
             or not the previous delay recorded",
        ),
        (SleepReason::Hint, HintMode::Ignore) => {
            (false, "a hinted delay under a policy that ignores hints")
        }
        // An exact pushback: the curve restarted at the attempt it followed.
        (SleepReason::Hint, _)
            if machine.curve_origin == machine.last_attempt
                && machine.previous_delay == policy.backoff().initial() =>
        {
            (true, "")
        }
        (SleepReason::Hint, HintMode::Override { min, max }) => (
            delay >= min && delay <= max,
            "a hinted delay outside the hint clamp [retry_after_min, retry_after_max]",
        ),
        (SleepReason::Hint, HintMode::AtLeast { cap }) => (
            recorded && delay >= floor && delay <= policy.longest_hinted_delay(cap),
            "a hinted delay above the hint cap, max_delay and their jitter, or not the \
             previous delay recorded",
        ),
    };
    consistent(ok, "phase.delay", why)
}
