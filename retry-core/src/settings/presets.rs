//! Named presets: the defaults of the five systems this workspace's contract was
//! drawn from (see [the rules](crate::behaviour#configuration)), and one recommended default of our own.

use core::time::Duration;

use crate::classify::{ErrorCodeSet, ExitCodePolicy, HttpClassifier, Idempotency};
use crate::retry::{
    mix64, Backoff, HintMode, Jitter, PolicyError, RetryPolicy, RetryPolicyBuilder,
};

/// A policy together with the classifiers and seed that go with it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Preset {
    name: &'static str,
    policy: RetryPolicy,
    exit_codes: ExitCodePolicy,
    http: Option<HttpClassifier>,
    error_codes: Option<ErrorCodeSet<'static>>,
    seed: Option<u64>,
}

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stable 64-bit seed from a name (FNV-1a, then mixed): the same name gives the
/// same jitter on every machine and every run.
///
/// ```
/// use retry_core::seed_from_name;
/// assert_eq!(seed_from_name("build"), seed_from_name("build"));
/// assert_ne!(seed_from_name("build"), seed_from_name("test"));
/// ```
#[must_use]
pub const fn seed_from_name(name: &str) -> u64 {
    let bytes = name.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        // `i < len` makes the index valid; const fns cannot use iterators.
        #[allow(clippy::indexing_slicing)]
        let byte = bytes[i];
        hash = (hash ^ byte as u64).wrapping_mul(0x0000_0100_0000_01B3);
        i = i.saturating_add(1);
    }
    mix64(hash)
}

/// The error for [`Preset::ts_package`] with a jitter kind that package does not
/// offer, or an invalid policy value.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PresetError {
    /// The jitter kind is not one of none, full, equal, decorrelated.
    #[error("jitter: the TS package offers none, full, equal or decorrelated, not {0}")]
    Jitter(&'static str),
    /// A policy value was invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

impl Preset {
    /// The preset's name.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The retry policy.
    #[must_use]
    pub const fn policy(&self) -> RetryPolicy {
        self.policy
    }

    /// How process exit codes are classified.
    #[must_use]
    pub const fn exit_codes(&self) -> ExitCodePolicy {
        self.exit_codes
    }

    /// How HTTP outcomes are classified, for the HTTP presets.
    #[must_use]
    pub const fn http(&self) -> Option<HttpClassifier> {
        self.http
    }

    /// Which named error codes retry, for the presets that use them.
    #[must_use]
    pub const fn error_codes(&self) -> Option<ErrorCodeSet<'static>> {
        self.error_codes
    }

    /// A fixed jitter seed, for the presets that key jitter on a name.
    #[must_use]
    pub const fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// The pipeline engine: 8 attempts, exponential from 1 s doubling to a 60 s
    /// cap, every non-zero exit code retried except 78 (EX_CONFIG), server hints
    /// honoured at least (capped at 5 min), additive jitter of up to 10 % keyed on
    /// a seed that names the step.
    #[must_use]
    pub fn pipeline(step: &str) -> Preset {
        Preset {
            name: "pipeline",
            policy: built(
                RetryPolicy::builder()
                    .max_attempts(8)
                    .backoff(Backoff::exponential(secs(1), 2.0))
                    .max_delay(secs(60))
                    .jitter(Jitter::Add(0.1))
                    .hints(HintMode::AtLeast { cap: secs(300) }),
            ),
            exit_codes: ExitCodePolicy::PIPELINE,
            http: None,
            error_codes: None,
            seed: Some(seed_from_name(step)),
        }
    }

    /// The HTTP SDK: 2 retries (3 attempts), 500 ms doubling to 5 s, jitter that
    /// subtracts up to 25 %, statuses 408, 429 and 5xx, the server's delay used as
    /// is (no floor, no ceiling), a 30 s budget, connection errors and timeouts
    /// retried whatever the method.
    #[must_use]
    pub fn http_sdk() -> Preset {
        Preset {
            name: "http-sdk",
            policy: built(
                RetryPolicy::builder()
                    .max_retries(2)
                    .backoff(Backoff::exponential(ms(500), 2.0))
                    .max_delay(secs(5))
                    .jitter(Jitter::Subtract(0.25))
                    .hints(HintMode::Override {
                        min: Duration::ZERO,
                        max: Duration::MAX,
                    })
                    .budget(secs(30)),
            ),
            exit_codes: ExitCodePolicy::PIPELINE,
            http: Some(HttpClassifier::DEFAULT.with_idempotency(Idempotency::Always)),
            error_codes: None,
            seed: None,
        }
    }

    /// The HTTP client with a method guard: the SDK's preset, with hints clamped to
    /// `[100 ms, 60 s]` and connection errors and timeouts retried only for methods
    /// safe to replay (GET, HEAD, OPTIONS).
    #[must_use]
    pub fn http_client() -> Preset {
        let sdk = Preset::http_sdk();
        Preset {
            name: "http-client",
            policy: built(sdk.policy.to_builder().hints(HintMode::OVERRIDE_DEFAULT)),
            http: Some(HttpClassifier::DEFAULT),
            ..sdk
        }
    }

    /// The TS package: a constant, linear or exponential curve with none, full,
    /// equal or decorrelated jitter, clamped into `[min, max]`. That source fixes
    /// the shape and leaves the numbers to its caller, so they are parameters here.
    ///
    /// # Errors
    /// [`PresetError::Jitter`] for another jitter kind; [`PresetError::Policy`] for
    /// an invalid value (zero attempts, `min > max`, a `max` below the
    /// curve's first delay, a bad factor).
    pub fn ts_package(
        max_attempts: u32,
        backoff: Backoff,
        jitter: Jitter,
        min: Duration,
        max: Duration,
    ) -> Result<Preset, PresetError> {
        if !matches!(
            jitter,
            Jitter::None | Jitter::Full | Jitter::Equal | Jitter::Decorrelated
        ) {
            return Err(PresetError::Jitter(jitter.name()));
        }
        let policy = RetryPolicy::builder()
            .max_attempts(max_attempts)
            .backoff(backoff)
            .jitter(jitter)
            .min_delay(min)
            .max_delay(max)
            .build()?;
        Ok(Preset {
            name: "ts-package",
            policy,
            exit_codes: ExitCodePolicy::PIPELINE,
            http: None,
            error_codes: None,
            seed: None,
        })
    }

    /// The streaming pipeline: no retry unless asked (`max_attempts` 1), base
    /// 100 ms doubling to a 10 s cap, ±10 % spread jitter, retryable codes
    /// TRANSIENT, TIMEOUT and RATE_LIMIT, operations idempotent.
    #[must_use]
    pub fn streaming() -> Preset {
        Preset::streaming_with_attempts(1)
    }

    /// The streaming pipeline with retries turned on (`max_attempts` set; 0 reads
    /// as 1).
    #[must_use]
    pub fn streaming_with_attempts(max_attempts: u32) -> Preset {
        Preset {
            name: "streaming",
            policy: built(
                RetryPolicy::builder()
                    .max_attempts(max_attempts.max(1))
                    .backoff(Backoff::exponential(ms(100), 2.0))
                    .max_delay(secs(10))
                    .jitter(Jitter::Spread(0.1))
                    .idempotent(true),
            ),
            exit_codes: ExitCodePolicy::PIPELINE,
            http: None,
            error_codes: Some(ErrorCodeSet::STREAMING),
            seed: None,
        }
    }

    /// Our recommended default for a service calling a dependency:
    ///
    /// - 4 attempts: three retries ride out a blip; more mostly multiply load on a
    ///   dependency that is down.
    /// - exponential from 200 ms doubling, capped at 10 s, with full jitter: full
    ///   jitter spreads synchronized callers best and keeps the total work lowest
    ///   under contention.
    /// - a 20 s total budget, and each attempt's deadline capped at it, so a call
    ///   has a bounded worst case.
    /// - Retry-After honoured in override mode within `[100 ms, 60 s]`, so "0" and
    ///   past dates cannot make a tight loop.
    /// - HTTP statuses 408, 429, 5xx; connection errors and timeouts replayed only
    ///   for GET, HEAD, OPTIONS; the command-line exit-code set for processes.
    ///
    /// Pair it with a shared retry budget (the gRPC throttle) in services.
    #[must_use]
    pub fn recommended() -> Preset {
        Preset {
            name: "recommended",
            policy: built(
                RetryPolicy::builder()
                    .max_attempts(4)
                    .backoff(Backoff::exponential(ms(200), 2.0))
                    .max_delay(secs(10))
                    .jitter(Jitter::Full)
                    .hints(HintMode::OVERRIDE_DEFAULT)
                    .budget(secs(20))
                    .cap_attempt_to_budget(true),
            ),
            exit_codes: ExitCodePolicy::COMMAND_LINE,
            http: Some(HttpClassifier::DEFAULT),
            error_codes: None,
            seed: None,
        }
    }

    /// Every fixed preset, for listing (`ts_package` takes parameters and is left
    /// out; the pipeline is keyed on the step name "step").
    #[must_use]
    pub fn all() -> [Preset; 5] {
        [
            Preset::pipeline("step"),
            Preset::http_sdk(),
            Preset::http_client(),
            Preset::streaming(),
            Preset::recommended(),
        ]
    }
}

/// Builds a preset's policy. Preset values are constants checked by the tests
/// (`presets_are_valid`); should one ever be invalid, the default policy stands in
/// rather than a panic.
fn built(builder: RetryPolicyBuilder) -> RetryPolicy {
    builder.build().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        // `built` falls back to the default on an error: prove none does.
        let checks = [
            RetryPolicy::builder()
                .max_attempts(8)
                .backoff(Backoff::exponential(secs(1), 2.0))
                .max_delay(secs(60))
                .jitter(Jitter::Add(0.1))
                .hints(HintMode::AtLeast { cap: secs(300) })
                .build(),
            Preset::http_sdk().policy.to_builder().build(),
        ];
        for c in checks {
            assert!(c.is_ok());
        }
        for p in Preset::all() {
            assert_ne!(p.policy, RetryPolicy::default(), "{}", p.name);
        }
        assert_eq!(Preset::pipeline("x").policy.max_attempts(), 8);
    }
}
