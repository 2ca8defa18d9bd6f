//! [`StoreError`]: what went wrong between a process and Redis, and
//! [`SetupError`]: a fleet budget or breaker that cannot be built.

use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

/// Why a round trip to Redis gave no usable answer. Every such error makes the
/// caller fall back to its local answer; each kind is logged once per budget or
/// breaker ([`StoreError::code`] names the kind).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No answer within the configured timeout.
    #[error("redis did not answer within {millis} ms")]
    Timeout {
        /// The timeout, in milliseconds.
        millis: u64,
    },
    /// Redis received the request after its timeout (it was stopped, or slow)
    /// and refused it, so that nothing was applied: the caller had been
    /// answered by its fallback already, or was about to be.
    #[error("redis received the request after its {millis} ms timeout and did not apply it")]
    Expired {
        /// The timeout, in milliseconds.
        millis: u64,
    },
    /// The server's clock is behind the time stored in the key (a clock
    /// stepped back, or a failover to a replica whose clock is behind): the
    /// step counted as no time passing, and the stored time was rebased onto
    /// the server's clock. The answer is still Redis's; this is only logged.
    #[error("{key}: the stored time is {micros} us ahead of the server's clock; rebased onto it")]
    ClockBehind {
        /// The key.
        key: String,
        /// How far the stored time was ahead, in microseconds.
        micros: u64,
    },
    /// The connection failed or Redis answered with an error.
    #[error("redis: {message}")]
    Redis {
        /// What the client said.
        message: String,
    },
    /// The key holds another type than the one this crate writes.
    #[error("{key}: holds a {found}, not the {expected} this crate writes")]
    WrongType {
        /// The key.
        key: String,
        /// The type found.
        found: String,
        /// The type expected.
        expected: &'static str,
    },
    /// A field or value is not what this crate writes.
    #[error("{key}: {field} is not a value this crate writes")]
    Garbage {
        /// The key.
        key: String,
        /// The field (or `value` for a plain string).
        field: String,
    },
    /// The value was written by a newer format than this crate reads.
    #[error("{key}: written in format {found}, newer than the {supported} this version reads")]
    FutureFormat {
        /// The key.
        key: String,
        /// The version found.
        found: String,
        /// The version this crate writes.
        supported: u32,
    },
    /// The budget under this key was written with another configuration.
    #[error("{key}: holds a budget configured as {found}, not {expected}")]
    ConfigMismatch {
        /// The key.
        key: String,
        /// The fingerprint found.
        found: String,
        /// This process's fingerprint.
        expected: String,
    },
    /// The background task that talks to Redis is gone (the runtime shut down).
    #[error("the redis connection task has stopped")]
    Stopped,
}

impl StoreError {
    /// A stable dotted code for logs and metrics.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            StoreError::Timeout { .. } => "redis.timeout",
            StoreError::Expired { .. } => "redis.expired",
            StoreError::ClockBehind { .. } => "redis.clock_behind",
            StoreError::Redis { .. } => "redis.error",
            StoreError::WrongType { .. } => "redis.wrong_type",
            StoreError::Garbage { .. } => "redis.garbage",
            StoreError::FutureFormat { .. } => "redis.future_format",
            StoreError::ConfigMismatch { .. } => "redis.config_mismatch",
            StoreError::Stopped => "redis.stopped",
        }
    }

    const fn bit(&self) -> u32 {
        match self {
            StoreError::Timeout { .. } => 1,
            StoreError::Redis { .. } => 2,
            StoreError::WrongType { .. } => 4,
            StoreError::Garbage { .. } => 8,
            StoreError::FutureFormat { .. } => 16,
            StoreError::ConfigMismatch { .. } => 32,
            StoreError::Stopped => 64,
            StoreError::Expired { .. } => 128,
            StoreError::ClockBehind { .. } => 256,
        }
    }

    /// Whether the data in Redis is at fault (rather than the connection).
    #[must_use]
    pub const fn is_bad_data(&self) -> bool {
        matches!(
            self,
            StoreError::WrongType { .. }
                | StoreError::Garbage { .. }
                | StoreError::FutureFormat { .. }
                | StoreError::ConfigMismatch { .. }
        )
    }

    pub(crate) fn from_redis(e: &redis::RedisError) -> StoreError {
        StoreError::Redis {
            message: e.to_string(),
        }
    }

    /// The error a script reported as `{-1, code, detail}`: `expected` is the
    /// type the key should hold (for `wrong_type`), `fingerprint` this
    /// process's configuration (for `config_mismatch`).
    pub(crate) fn from_script(
        key: &str,
        code: &str,
        detail: String,
        expected: &'static str,
        fingerprint: &str,
    ) -> StoreError {
        let key = key.to_owned();
        match code {
            "wrong_type" => StoreError::WrongType {
                key,
                found: detail,
                expected,
            },
            "future_version" => StoreError::FutureFormat {
                key,
                found: detail,
                supported: crate::FORMAT,
            },
            "config_mismatch" => StoreError::ConfigMismatch {
                key,
                found: detail,
                expected: fingerprint.to_owned(),
            },
            _ => StoreError::Garbage { key, field: detail },
        }
    }
}

/// Logs each kind of [`StoreError`] once (per budget or breaker), and counts
/// the logs.
#[derive(Debug, Default)]
pub(crate) struct LogOnce {
    seen: AtomicU32,
    logged: AtomicU32,
}

impl LogOnce {
    pub(crate) fn log(&self, what: &str, error: &StoreError) {
        let bit = error.bit();
        if self.seen.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            return;
        }
        self.logged.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::warn!(code = error.code(), %error, "{what}");
        #[cfg(not(feature = "tracing"))]
        {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "retry-redis: {error} ({}); {what} (logged once)",
                error.code()
            );
        }
    }

    pub(crate) fn count(&self) -> u32 {
        self.logged.load(Ordering::Relaxed)
    }
}

/// Why a fleet budget or breaker could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The Redis URL does not parse.
    #[error("redis url: {message}")]
    Url {
        /// What the client said.
        message: String,
    },
    /// A name (namespace, budget or breaker name, member id) is empty, longer
    /// than 200 bytes, or holds a character keys must not: `{` or `}` (they
    /// would change the key's hash tag), `:` (it separates a key's parts),
    /// whitespace or a control character.
    #[error(
        "{field}: {value:?} must be 1 to 200 bytes, without braces, colons, whitespace or control characters"
    )]
    Name {
        /// Which name.
        field: &'static str,
        /// The name given.
        value: String,
    },
    /// A parameter is too large for exact arithmetic in the store (2^53).
    #[error("{field}: {value} is too large to keep exact in redis (at most 2^53 - 1)")]
    TooLarge {
        /// The parameter.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// A Finagle window whose slices are not whole microseconds.
    #[error("window: slices of {nanos} ns are not whole microseconds")]
    SliceNotMicros {
        /// The slice, in nanoseconds.
        nanos: u64,
    },
    /// A timeout, interval or lifetime that is zero or too long.
    #[error("{field}: {millis} ms is out of range (1 ms to 1 hour)")]
    Duration {
        /// The setting.
        field: &'static str,
        /// Its value, in milliseconds.
        millis: u128,
    },
    /// The breaker's config is refused by the core.
    #[error("breaker: {0}")]
    Breaker(retry_core::BreakerError),
    /// The fleet config is refused by the core.
    #[error("fleet: {0}")]
    Fleet(retry_core::FleetError),
    /// The background thread could not start.
    #[error("could not start the redis thread: {message}")]
    Thread {
        /// What the system said.
        message: String,
    },
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fallback::Local => "local budget",
            Fallback::Refuse => "refuse",
        })
    }
}

/// What a fleet budget answers a withdrawal when Redis gives no answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fallback {
    /// Fail open: the answer of this process's own core budget (fed every
    /// input, so it is warm).
    #[default]
    Local,
    /// Fail closed: refuse the retry.
    Refuse,
}
