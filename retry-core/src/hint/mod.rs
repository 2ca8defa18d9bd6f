//! Delays the other side asks for: the [`Hint`] a failure may carry, the parsers
//! for the header values that carry one (`Retry-After` in seconds or as an HTTP
//! date, `retry-after-ms`, gRPC's `grpc-retry-pushback-ms`), straight from raw
//! bytes, and [`RetryHeaders`], which reads a response's headers into a hint.

use core::time::Duration;

mod headers;
mod retry_after;
mod text;

pub use headers::RetryHeaders;
pub use retry_after::{
    format_http_date, parse_grpc_pushback, parse_http_date, parse_retry_after,
    parse_retry_after_at, parse_retry_after_ms, retry_after_from_headers,
    retry_after_from_headers_at, Pushback,
};
pub use text::{HintProblem, HintProblemKind, HintRead};

/// A delay asked for by the other side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
// A one-byte tag (the size is the same 24 bytes): left to itself the
// compiler widens it to the 8 bytes before the `Duration`, and `Failure` and
// `Event` keep their own tags in its spare values, so every match on an event
// would compare 64-bit numbers, in two halves on 32-bit targets.
#[repr(u8)]
pub enum Hint {
    /// A Retry-After style delay, combined with the curve as the policy's
    /// [`HintMode`](crate::HintMode) says.
    RetryAfter(Duration),
    /// A gRPC-style pushback: retry after exactly this long (no clamp, no jitter,
    /// no rounding), then restart the curve from its initial delay. Ignored only
    /// under [`HintMode::Ignore`](crate::HintMode::Ignore).
    Pushback(Duration),
}
