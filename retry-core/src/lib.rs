#![doc = include_str!("../README.md")]
//!
//! # The rules, on one page
//!
//! The behaviour every machine in this crate keeps (curves, jitter, hints, time
//! limits, classification, results, configuration, the breaker, the budget,
//! snapshots, hedging), with the exact numbers, is stated in [`behaviour`].
#![no_std]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::cast_possible_truncation,
    clippy::float_cmp
)]

#[cfg(feature = "std")]
extern crate std;

// One folder per concept, each with a mod.rs saying what it owns: the retry
// machine (retry/), the circuit breaker (breaker/), the retry budget (budget/),
// server hints and the headers that carry them (hint/), classification
// (classify/), and policies as data (settings/). Beside them: the clock-free
// time every machine counts in (time.rs) and the glue between the retry machine
// and the shared breaker and budget (compose.rs), and the error a snapshot that
// cannot be restored is refused with (snapshot.rs). The hedge machine, with its
// policy, latency histogram, simulator and glue, has its own folder (hedge/), and
// so has what a member of a fleet sharing one breaker view decides (fleet/).
pub mod behaviour;
mod breaker;
mod budget;
mod classify;
mod compose;
mod fleet;
mod hedge;
mod hint;
mod retry;
mod settings;
mod snapshot;
mod time;

// The public modules `config` and `duration_text` live in settings/. The root
// re-exports of their items below are `doc(no_inline)` so that the docs list
// them as re-exports of those modules, as when the modules sat at the root.
#[cfg(feature = "serde")]
pub use settings::{config, duration_text};

pub use breaker::{
    Admission, BasicRule, BreakerConfig, BreakerConfigBuilder, BreakerError, BreakerInput,
    BreakerMetrics, BreakerOutput, BreakerRow, BreakerSimulation, BreakerSnapshot, BreakerState,
    BreakerStep, BreakerTimeline, CallOutcome, CircuitBreaker, Exceeded, HalfOpenTimeout,
    HalfOpenVerdict, Ignored, ManualState, Permit, Rate, RateReading, Recorded, RejectReason,
    Transition, TransitionCause, Window, WindowStats,
};
#[cfg(target_has_atomic = "64")]
pub use breaker::{ClosedPath, Trip, Untimed};
pub use budget::{
    AttemptKind, AwsQuotaBuilder, BudgetConfig, BudgetError, BudgetEvent, BudgetInput,
    BudgetOutput, BudgetParameters, BudgetSnapshot, BudgetStep, BudgetTimeline,
    FinagleBudgetBuilder, Requirement, RetryBudget, RetryKind, Tokens, Withdrawal,
};
pub use classify::{
    may_replay, may_retry_connection_error, pushback_failure, replay_verdict, ChildHint,
    ErrorCodeSet, ExitCodePolicy, ExitCodeSet, ExitCodes, ExitDecision, Failure, FailureKind, Goal,
    HttpClassifier, Idempotency, Method, OutcomeSet, ProcessClassifier, ProcessGoal, SetParseError,
    SetParseErrorKind, SignalSet, StatusSet, Statuses, SIGINT, SIGPIPE,
};
pub use compose::{
    abandoned_outcome, attempt_outcome, breaker_outcome, budget_steps, feed_budget, rejection,
    AbandonedRule, AttemptOutcome, BudgetSteps,
};
#[cfg(feature = "serde")]
#[doc(no_inline)]
pub use config::{ConfigError, Curve, PolicyOverride, RetryAfter};
#[cfg(feature = "serde")]
#[doc(no_inline)]
pub use duration_text::{parse_duration, BareNumber, DurationParseError, DurationText};
pub use fleet::{
    FleetConfig, FleetDecision, FleetError, FleetMember, FleetRule, FleetSync, FleetView,
    MemberReport, Proposal,
};
pub use hedge::{
    feed_hedge_budget, hedge_breaker_outcome, hedge_budget_steps, hedge_rejection, Copies,
    CopiesIter, HedgeAction, HedgeDelay, HedgeEvent, HedgeMachine, HedgeMisuse, HedgeMode,
    HedgePhase, HedgePolicy, HedgePolicyBuilder, HedgePolicyError, HedgeSimulation, HedgeStep,
    HedgeTimeline, LatencyHistogram, WaitReason, MAX_COPIES,
};
pub use hint::{
    format_http_date, parse_grpc_pushback, parse_http_date, parse_retry_after,
    parse_retry_after_at, parse_retry_after_ms, retry_after_from_headers,
    retry_after_from_headers_at, Hint, HintProblem, HintProblemKind, HintRead, Pushback,
    RetryHeaders,
};
pub use retry::{
    attempt_timed_out, jitter_draw, total_sleep, Action, Backoff, CircuitOpen, DelayList, Event,
    GiveUp, GiveUpReason, HintMode, Jitter, Misuse, Outcome, Phase, PolicyError, Resolution,
    RetryError, RetryMachine, RetryPolicy, RetryPolicyBuilder, RetrySnapshot, Scripted, Simulation,
    SleepReason, Step, Success, Timeline,
};
pub use settings::{seed_from_name, Preset, PresetError};
pub use snapshot::SnapshotError;
pub use time::{DisplayDuration, Instant};
