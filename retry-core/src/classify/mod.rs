//! Classification: turning what happened into a [`Failure`] the retry machine
//! understands. The failure vocabulary itself ([`Failure`], [`FailureKind`]), the
//! ready-made sets (exit codes, HTTP statuses, error codes, exit-code policies,
//! the replay rules for HTTP methods), the process classifier (exit codes,
//! signals, timeouts, a child's hint file) and the HTTP classifier.

mod failure;
mod http;
mod process;
mod sets;

pub use failure::{Failure, FailureKind, Hint};
pub use http::{pushback_failure, HttpClassifier, RetryHeaders};
pub use process::{ChildHint, OutcomeSet, ProcessClassifier, SignalSet, SIGINT};
pub use sets::{
    may_replay, may_retry_connection_error, ErrorCodeSet, ExitCodePolicy, ExitCodeSet, ExitCodes,
    ExitDecision, Idempotency, Method, SetParseError, SetParseErrorKind, StatusSet, Statuses,
};
