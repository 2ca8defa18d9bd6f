//! Classification: turning what happened into a [`Failure`] the retry machine
//! understands. The failure itself ([`Failure`], [`FailureKind`]; `failure.rs`),
//! the ready-made sets (exit codes, HTTP statuses, error codes, exit-code
//! policies, the replay rules for HTTP methods; `sets.rs`), the process
//! classifier (exit codes, signals, timeouts, a child's hint file; `process.rs`)
//! and the HTTP classifier (`http.rs`).

mod failure;
mod goal;
mod http;
mod process;
mod sets;

pub use failure::{Failure, FailureKind};
pub use goal::{Goal, ProcessGoal};
pub use http::{pushback_failure, replay_verdict, HttpClassifier};
pub use process::{ChildHint, OutcomeSet, ProcessClassifier, SignalSet, SIGINT, SIGPIPE};
pub use sets::{
    may_replay, may_retry_connection_error, ErrorCodeSet, ExitCodePolicy, ExitCodeSet, ExitCodes,
    ExitDecision, Idempotency, Method, SetParseError, SetParseErrorKind, StatusSet, Statuses,
};
