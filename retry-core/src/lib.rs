#![doc = include_str!("../README.md")]
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

mod backoff;
mod breaker;
mod budget;
mod call;
mod classify;
mod compose;
#[cfg(feature = "serde")]
pub mod config;
mod delay_list;
#[cfg(feature = "serde")]
pub mod duration_text;
mod error;
#[cfg(feature = "arbitrary")]
pub mod fuzzing;
mod goal;
mod hint_text;
mod http;
mod jitter;
mod machine;
mod nanos;
mod policy;
mod presets;
mod process;
mod retry_after;
mod sets;
mod sim;
mod time;

pub use backoff::Backoff;
pub use breaker::{
    Admission, BreakerConfig, BreakerConfigBuilder, BreakerError, BreakerInput, BreakerOutput,
    BreakerRow, BreakerSimulation, BreakerState, BreakerStep, BreakerTimeline, CallOutcome,
    CircuitBreaker, ManualState, Permit, Rate, RejectReason, Transition, TransitionCause, Window,
    WindowStats,
};
pub use budget::{
    AttemptKind, AwsQuotaBuilder, BudgetConfig, BudgetError, BudgetEvent, BudgetInput,
    BudgetOutput, BudgetStep, BudgetTimeline, FinagleBudgetBuilder, Requirement, RetryBudget,
    RetryKind, Tokens, Withdrawal,
};
pub use call::{RetryError, Success};
pub use classify::{Failure, FailureKind, Hint};
pub use compose::{attempt_outcome, breaker_outcome, feed_budget, rejection, AttemptOutcome};
#[cfg(feature = "serde")]
pub use config::{ConfigError, Curve, PolicyOverride, RetryAfter};
pub use delay_list::DelayList;
#[cfg(feature = "serde")]
pub use duration_text::{parse_duration, BareNumber, DurationParseError, DurationText};
pub use error::PolicyError;
pub use goal::{Goal, ProcessGoal};
pub use hint_text::{HintProblem, HintProblemKind, HintRead};
pub use http::{pushback_failure, HttpClassifier, RetryHeaders};
pub use jitter::{jitter_draw, Jitter};
pub use machine::{Action, Event, GiveUp, GiveUpReason, Misuse, Phase, RetryMachine, SleepReason};
pub use policy::{CircuitOpen, HintMode, Resolution, RetryPolicy, RetryPolicyBuilder};
pub use presets::{seed_from_name, Preset, PresetError};
pub use process::{ChildHint, OutcomeSet, ProcessClassifier, SignalSet, SIGINT, SIGPIPE};
pub use retry_after::{
    format_http_date, parse_grpc_pushback, parse_http_date, parse_retry_after,
    parse_retry_after_ms, retry_after_from_headers, Pushback,
};
pub use sets::{
    may_replay, may_retry_connection_error, ErrorCodeSet, ExitCodePolicy, ExitCodeSet, ExitCodes,
    ExitDecision, Idempotency, Method, SetParseError, SetParseErrorKind, StatusSet, Statuses,
};
pub use sim::{total_sleep, Outcome, Scripted, Simulation, Step, Timeline};
pub use time::{DisplayDuration, Instant};
