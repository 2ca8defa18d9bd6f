//! [`RetryHeaders`]: the hint-carrying headers of one response, read in order of
//! precedence into a [`Hint`].

use core::time::Duration;

use super::retry_after::{parse_grpc_pushback, retry_after_from_headers_at, Pushback};
use super::Hint;

/// The retry-related headers of a response, as raw bytes (no allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryHeaders<'a> {
    /// `retry-after-ms`, if present (wins over `Retry-After`).
    pub retry_after_ms: Option<&'a [u8]>,
    /// `Retry-After`, if present.
    pub retry_after: Option<&'a [u8]>,
    /// `grpc-retry-pushback-ms`, if present (wins over both).
    pub grpc_pushback_ms: Option<&'a [u8]>,
}

impl RetryHeaders<'_> {
    /// The server's hint, if the headers carry a usable one: a gRPC pushback first
    /// (`Err(())` when it says "do not retry"), then `retry-after-ms`, then
    /// `Retry-After` (dates resolved against `now_unix_secs`).
    ///
    /// # Errors
    /// `Err(())` when a pushback header tells the client to stop.
    #[allow(clippy::result_unit_err)]
    pub fn hint(&self, now_unix_secs: u64) -> Result<Option<Hint>, ()> {
        self.hint_at(Duration::from_secs(now_unix_secs))
    }

    /// Like [`RetryHeaders::hint`], with the wall clock's time since the Unix
    /// epoch to the nanosecond, so an HTTP-date is read with sub-second
    /// precision (see [`parse_retry_after_at`](crate::parse_retry_after_at)).
    ///
    /// # Errors
    /// `Err(())` when a pushback header tells the client to stop.
    #[allow(clippy::result_unit_err)]
    pub fn hint_at(&self, now_since_epoch: Duration) -> Result<Option<Hint>, ()> {
        if let Some(value) = self.grpc_pushback_ms {
            return match parse_grpc_pushback(value) {
                Pushback::RetryAfter(d) => Ok(Some(Hint::Pushback(d))),
                Pushback::Stop => Err(()),
            };
        }
        Ok(
            retry_after_from_headers_at(self.retry_after_ms, self.retry_after, now_since_epoch)
                .map(Hint::RetryAfter),
        )
    }
}
