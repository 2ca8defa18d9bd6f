//! Retry policies as configuration (see [the rules](crate::behaviour#configuration)): a flat, readable schema for serde.
//!
//! [`RetryPolicy`] implements `Serialize` and `Deserialize`;
//! [`PolicyOverride`] is the partial form of the same schema, for layering.
//!
//! # Schema
//!
//! | field | value | default |
//! |---|---|---|
//! | `max_attempts` | whole number >= 1, or `"unlimited"` | 5 |
//! | `max_retries` | whole number (`max_attempts - 1`), or `"unlimited"`; never with `max_attempts` | |
//! | `backoff` | `none`, `constant`, `linear`, `exponential`, `fibonacci` | `exponential` |
//! | `initial_delay` | the curve's first delay (constant: the delay); not with `none` | `1s` |
//! | `factor` | number >= 1; exponential only | 2 |
//! | `increment` | duration; linear only | `initial_delay` |
//! | `max_delay`, `min_delay` | durations, `min_delay <= max_delay`, `initial_delay <= max_delay` | `60s`, `0s` |
//! | `jitter` | `none`, `full`, `equal`, `decorrelated`, `subtract:F`, `add:F`, `spread:F` (F in [0, 1]) | `full` |
//! | `resolution` | `ms`, `ns` | `ms` |
//! | `retry_after` | `override`, `at-least`, `ignore` | `override` |
//! | `retry_after_min`, `retry_after_max` | durations; override mode only | `100ms`, `60s` |
//! | `retry_after_cap` | duration; at-least mode only | `5m` |
//! | `respect_retry_after` | `false` is the same as `retry_after = "ignore"` | |
//! | `budget`, `attempt_timeout` | positive duration, or `"none"` | `"none"` |
//! | `cap_attempt_to_budget`, `retry_timeouts` | booleans | `false`, `true` |
//! | `use_retry_budget`, `wait_on_open_circuit`, `idempotent` | booleans | `false`, `false`, `true` |
//!
//! Durations are text in the [`duration_text`](crate::duration_text) grammar
//! (`"1m30s"`, `"1.5s"`) or whole milliseconds (`1500`, or the string `"1500"`).
//! Unknown fields are errors, and every error names its field.
//!
//! Reading needs a self-describing format (TOML, JSON, YAML, …): values are read
//! with `deserialize_any`, so that a duration may be text or a number.
//!
//! # Rules where fields interact
//!
//! - A field that the chosen curve or hint mode does not use (`factor` with a
//!   linear curve, `retry_after_cap` in override mode, …) is an error, never
//!   silently ignored; this holds for overrides too: an override setting only
//!   `factor` over a linear base fails with [`ConfigError::NotApplicable`].
//! - Naming a curve (`backoff = …`) restates it: `factor` and `increment` take
//!   their defaults (2, and the initial delay) unless given, even when the base
//!   has the same curve; the initial delay carries over from the base (1 s when
//!   the base curve is `none`). Without `backoff`, the base's curve keeps its
//!   parameters and only the given ones change.
//! - Naming a hint mode restates it the same way: the clamp fields take their
//!   defaults unless given. `respect_retry_after = false` names `ignore`; `true`
//!   over a base that ignores hints names `override`, and otherwise keeps the
//!   base's mode. `false` with another mode, or `true` with `ignore`, is a
//!   contradiction and an error.
//! - `max_attempts = "unlimited"` (or `max_retries = "unlimited"`) puts no limit
//!   on attempts; a `budget`, when set, is then what ends a failing call.
//! - Zero is never "unset": presence is explicit, so `budget = "0s"` is an error
//!   in a policy and in an override alike. `"none"` removes a budget or timeout.
//!
//! # Writing
//!
//! A policy is written in full, durations in canonical text, the attempt count as
//! `max_attempts`, a missing budget or timeout as `"none"`, so that applying the
//! written form as an override to *any* base gives the policy back.
//!
//! ```
//! use core::time::Duration;
//! use retry_core::{Backoff, RetryPolicy};
//!
//! let policy: RetryPolicy = serde_json::from_str(r#"{
//!     "max_retries": 2,
//!     "backoff": "exponential",
//!     "initial_delay": "500ms",
//!     "max_delay": "5s",
//!     "jitter": "subtract:0.25",
//!     "budget": "30s"
//! }"#)?;
//! assert_eq!(policy.max_attempts(), 3);
//! assert_eq!(policy.backoff(), Backoff::exponential(Duration::from_millis(500), 2.0));
//! assert_eq!(policy.budget(), Some(Duration::from_secs(30)));
//!
//! let err = serde_json::from_str::<RetryPolicy>(r#"{ "backoff": "cubic" }"#).unwrap_err();
//! assert!(err.to_string().starts_with("backoff: unknown curve `cubic`"));
//!
//! let text = serde_json::to_string(&policy)?;
//! assert_eq!(serde_json::from_str::<RetryPolicy>(&text)?, policy);
//! # Ok::<(), serde_json::Error>(())
//! ```

use core::fmt;
use core::time::Duration;

use serde::de::{Deserializer, Error as _};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::{Backoff, HintMode, Jitter, PolicyError, Resolution, RetryPolicy};

/// The factor a newly chosen exponential curve starts with (see [the rules](crate::behaviour#backoff-curves)).
const DEFAULT_FACTOR: f64 = 2.0;

/// A backoff curve's name, as written in the `backoff` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Curve {
    /// `none`: no delay.
    None,
    /// `constant`.
    Constant,
    /// `linear`.
    Linear,
    /// `exponential`.
    Exponential,
    /// `fibonacci`.
    Fibonacci,
}

impl Curve {
    /// The name used in configs.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Curve::None => "none",
            Curve::Constant => "constant",
            Curve::Linear => "linear",
            Curve::Exponential => "exponential",
            Curve::Fibonacci => "fibonacci",
        }
    }

    /// The curve with this config name (exact, lower case).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Curve> {
        Some(match name {
            "none" => Curve::None,
            "constant" => Curve::Constant,
            "linear" => Curve::Linear,
            "exponential" => Curve::Exponential,
            "fibonacci" => Curve::Fibonacci,
            _ => return None,
        })
    }

    /// The kind of `backoff`.
    #[must_use]
    pub const fn of(backoff: &Backoff) -> Curve {
        match backoff {
            Backoff::None => Curve::None,
            Backoff::Constant { .. } => Curve::Constant,
            Backoff::Linear { .. } => Curve::Linear,
            Backoff::Exponential { .. } => Curve::Exponential,
            Backoff::Fibonacci { .. } => Curve::Fibonacci,
        }
    }

    /// The setting as written, for error messages.
    const fn setting(self) -> &'static str {
        match self {
            Curve::None => "backoff = \"none\"",
            Curve::Constant => "backoff = \"constant\"",
            Curve::Linear => "backoff = \"linear\"",
            Curve::Exponential => "backoff = \"exponential\"",
            Curve::Fibonacci => "backoff = \"fibonacci\"",
        }
    }
}

/// How server hints are treated, as written in the `retry_after` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryAfter {
    /// `override`: see [`HintMode::Override`].
    Override,
    /// `at-least`: see [`HintMode::AtLeast`].
    AtLeast,
    /// `ignore`: see [`HintMode::Ignore`].
    Ignore,
}

impl RetryAfter {
    /// The name used in configs.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            RetryAfter::Override => "override",
            RetryAfter::AtLeast => "at-least",
            RetryAfter::Ignore => "ignore",
        }
    }

    /// The mode with this config name (exact, lower case).
    #[must_use]
    pub fn from_name(name: &str) -> Option<RetryAfter> {
        Some(match name {
            "override" => RetryAfter::Override,
            "at-least" => RetryAfter::AtLeast,
            "ignore" => RetryAfter::Ignore,
            _ => return None,
        })
    }

    /// The kind of `hints`.
    #[must_use]
    pub const fn of(hints: &HintMode) -> RetryAfter {
        match hints {
            HintMode::Override { .. } => RetryAfter::Override,
            HintMode::AtLeast { .. } => RetryAfter::AtLeast,
            HintMode::Ignore => RetryAfter::Ignore,
        }
    }

    /// The setting as written, for error messages.
    const fn setting(self) -> &'static str {
        match self {
            RetryAfter::Override => "retry_after = \"override\"",
            RetryAfter::AtLeast => "retry_after = \"at-least\"",
            RetryAfter::Ignore => "retry_after = \"ignore\"",
        }
    }
}

/// Why a configuration could not become a policy. Like [`PolicyError`], every
/// variant names its field ([`ConfigError::field`]) and has a stable code
/// ([`ConfigError::code`]).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The resulting policy is invalid.
    Policy(PolicyError),
    /// A field that the chosen curve or hint mode does not use.
    NotApplicable {
        /// The field that was set.
        field: &'static str,
        /// The setting it needs, as written.
        requires: &'static str,
        /// The setting in force, as written.
        actual: &'static str,
    },
    /// `respect_retry_after` contradicts `retry_after`.
    RetryAfterConflict {
        /// The `respect_retry_after` value.
        respect: bool,
        /// The `retry_after` mode.
        mode: RetryAfter,
    },
}

impl ConfigError {
    /// The name of the field the error is about.
    #[must_use]
    pub const fn field(&self) -> &'static str {
        match self {
            ConfigError::Policy(e) => e.field(),
            ConfigError::NotApplicable { field, .. } => field,
            ConfigError::RetryAfterConflict { .. } => "respect_retry_after",
        }
    }

    /// A stable dotted code for logs and programs.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            ConfigError::Policy(e) => e.code(),
            ConfigError::NotApplicable { .. } => "config.not_applicable",
            ConfigError::RetryAfterConflict { .. } => "config.retry_after_conflict",
        }
    }
}

impl From<PolicyError> for ConfigError {
    fn from(e: PolicyError) -> Self {
        ConfigError::Policy(e)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Policy(e) => fmt::Display::fmt(e, f),
            ConfigError::NotApplicable {
                field,
                requires,
                actual,
            } => write!(
                f,
                "{field}: only applies with {requires}, not with {actual}"
            ),
            ConfigError::RetryAfterConflict { respect, mode } => write!(
                f,
                "respect_retry_after: {respect} contradicts {}",
                mode.setting()
            ),
        }
    }
}

impl core::error::Error for ConfigError {}

/// A partial policy: the same schema and field names as a complete
/// [`RetryPolicy`], every field optional (see the [module docs](self)).
///
/// [`apply`](PolicyOverride::apply) changes only the fields that are set;
/// [`merge`](PolicyOverride::merge) layers overrides, the later one winning.
/// A `budget` or `attempt_timeout` of `Some(None)` (`"none"` in a file) removes
/// the base's limit.
///
/// ```
/// use core::time::Duration;
/// use retry_core::{PolicyOverride, RetryPolicy};
///
/// let base = RetryPolicy::default();
/// let site: PolicyOverride = serde_json::from_str(r#"{ "max_retries": 9, "budget": "2m" }"#)?;
/// let local: PolicyOverride = serde_json::from_str(r#"{ "budget": "none" }"#)?;
///
/// let policy = site.merge(local).apply(&base).unwrap();
/// assert_eq!(policy.max_attempts(), 10);
/// assert_eq!(policy.budget(), None);
/// assert_eq!(policy.max_delay(), base.max_delay());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct PolicyOverride {
    /// The most attempts, the first included ([`RetryPolicy::UNLIMITED_ATTEMPTS`]
    /// for no limit, written `"unlimited"`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::count",
        deserialize_with = "fields::max_attempts"
    )]
    pub max_attempts: Option<u32>,
    /// The most retries after the first attempt (`u32::MAX` for no limit, written
    /// `"unlimited"`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::count",
        deserialize_with = "fields::max_retries"
    )]
    pub max_retries: Option<u32>,
    /// The backoff curve.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::curve",
        deserialize_with = "fields::backoff"
    )]
    pub backoff: Option<Curve>,
    /// The curve's first delay (a constant curve's only delay).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::duration",
        deserialize_with = "fields::initial_delay"
    )]
    pub initial_delay: Option<Duration>,
    /// The exponential curve's factor.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fields::factor"
    )]
    pub factor: Option<f64>,
    /// The linear curve's increment.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::duration",
        deserialize_with = "fields::increment"
    )]
    pub increment: Option<Duration>,
    /// The cap on every curve delay.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::duration",
        deserialize_with = "fields::max_delay"
    )]
    pub max_delay: Option<Duration>,
    /// The floor on every curve delay.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::duration",
        deserialize_with = "fields::min_delay"
    )]
    pub min_delay: Option<Duration>,
    /// The jitter kind.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::jitter",
        deserialize_with = "fields::jitter"
    )]
    pub jitter: Option<Jitter>,
    /// How delays are rounded.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::resolution",
        deserialize_with = "fields::resolution"
    )]
    pub resolution: Option<Resolution>,
    /// How server hints are treated.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::retry_after",
        deserialize_with = "fields::retry_after"
    )]
    pub retry_after: Option<RetryAfter>,
    /// The shortest honoured hint (override mode).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::duration",
        deserialize_with = "fields::retry_after_min"
    )]
    pub retry_after_min: Option<Duration>,
    /// The longest honoured hint (override mode).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::duration",
        deserialize_with = "fields::retry_after_max"
    )]
    pub retry_after_max: Option<Duration>,
    /// The longest hint honoured (at-least mode).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::duration",
        deserialize_with = "fields::retry_after_cap"
    )]
    pub retry_after_cap: Option<Duration>,
    /// `false` ignores hints entirely (the same as `retry_after = "ignore"`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fields::respect_retry_after"
    )]
    pub respect_retry_after: Option<bool>,
    /// The total time budget; `Some(None)` removes it.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::limit",
        deserialize_with = "fields::budget"
    )]
    pub budget: Option<Option<Duration>>,
    /// The per-attempt timeout; `Some(None)` removes it.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser::limit",
        deserialize_with = "fields::attempt_timeout"
    )]
    pub attempt_timeout: Option<Option<Duration>>,
    /// Whether each attempt's deadline is capped at the budget's end.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fields::cap_attempt_to_budget"
    )]
    pub cap_attempt_to_budget: Option<bool>,
    /// Whether a timed-out attempt is retried.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fields::retry_timeouts"
    )]
    pub retry_timeouts: Option<bool>,
    /// Whether every retry asks a shared retry budget first.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fields::use_retry_budget"
    )]
    pub use_retry_budget: Option<bool>,
    /// Whether a retry sleeps until an open circuit admits again (`true`) or gives
    /// up at once (`false`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fields::wait_on_open_circuit"
    )]
    pub wait_on_open_circuit: Option<bool>,
    /// Whether the operation is safe to repeat.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fields::idempotent"
    )]
    pub idempotent: Option<bool>,
}

impl PolicyOverride {
    /// The override that sets every field of `policy`: applied to any base it
    /// gives `policy` back. This is what serializing a policy writes.
    #[must_use]
    pub fn from_policy(policy: &RetryPolicy) -> PolicyOverride {
        let backoff = policy.backoff();
        let hints = policy.hints();
        let (retry_after_min, retry_after_max) = match hints {
            HintMode::Override { min, max } => (Some(min), Some(max)),
            _ => (None, None),
        };
        PolicyOverride {
            max_attempts: Some(policy.max_attempts()),
            max_retries: None,
            backoff: Some(Curve::of(&backoff)),
            initial_delay: match backoff {
                Backoff::None => None,
                other => Some(other.initial()),
            },
            factor: match backoff {
                Backoff::Exponential { factor, .. } => Some(factor),
                _ => None,
            },
            increment: match backoff {
                Backoff::Linear { increment, .. } => Some(increment),
                _ => None,
            },
            max_delay: Some(policy.max_delay()),
            min_delay: Some(policy.min_delay()),
            jitter: Some(policy.jitter()),
            resolution: Some(policy.resolution()),
            retry_after: Some(RetryAfter::of(&hints)),
            retry_after_min,
            retry_after_max,
            retry_after_cap: match hints {
                HintMode::AtLeast { cap } => Some(cap),
                _ => None,
            },
            respect_retry_after: None,
            budget: Some(policy.budget()),
            attempt_timeout: Some(policy.attempt_timeout()),
            cap_attempt_to_budget: Some(policy.caps_attempt_to_budget()),
            retry_timeouts: Some(policy.retries_timeouts()),
            use_retry_budget: Some(policy.uses_retry_budget()),
            wait_on_open_circuit: Some(policy.circuit_open() == crate::CircuitOpen::Wait),
            idempotent: Some(policy.is_idempotent()),
        }
    }

    /// A new policy: `base` with the fields this override sets changed, validated.
    /// `base` itself is never changed. Setting either attempt count replaces the
    /// base's count; setting both is an error.
    ///
    /// # Errors
    /// [`ConfigError::NotApplicable`] for a field the resulting curve or hint mode
    /// does not use, [`ConfigError::RetryAfterConflict`] for contradictory hint
    /// settings, [`ConfigError::Policy`] when the result is not a valid policy.
    pub fn apply(&self, base: &RetryPolicy) -> Result<RetryPolicy, ConfigError> {
        let backoff = self.backoff_over(base.backoff())?;
        let hints = self.hints_over(base.hints())?;
        let mut b = base.to_builder().backoff(backoff).hints(hints);
        if let Some(n) = self.max_attempts {
            b = b.max_attempts(n);
        }
        if let Some(n) = self.max_retries {
            b = b.max_retries(n);
        }
        if let Some(d) = self.max_delay {
            b = b.max_delay(d);
        }
        if let Some(d) = self.min_delay {
            b = b.min_delay(d);
        }
        if let Some(j) = self.jitter {
            b = b.jitter(j);
        }
        if let Some(r) = self.resolution {
            b = b.resolution(r);
        }
        if let Some(limit) = self.budget {
            b = b.budget(limit);
        }
        if let Some(limit) = self.attempt_timeout {
            b = b.attempt_timeout(limit);
        }
        if let Some(cap) = self.cap_attempt_to_budget {
            b = b.cap_attempt_to_budget(cap);
        }
        if let Some(retry) = self.retry_timeouts {
            b = b.retry_timeouts(retry);
        }
        if let Some(use_it) = self.use_retry_budget {
            b = b.use_retry_budget(use_it);
        }
        if let Some(wait) = self.wait_on_open_circuit {
            b = b.on_circuit_open(if wait {
                crate::CircuitOpen::Wait
            } else {
                crate::CircuitOpen::GiveUp
            });
        }
        if let Some(idempotent) = self.idempotent {
            b = b.idempotent(idempotent);
        }
        Ok(b.build()?)
    }

    /// Layers `later` over `self`: each field `later` sets wins. Choices that come
    /// as a group follow the later layer as a whole:
    /// - an attempt count in `later` (either spelling) replaces both of `self`'s;
    /// - a curve named in `later` drops `self`'s `factor` and `increment` (and its
    ///   `initial_delay` when the curve is `none`);
    /// - a hint mode named in `later` (see the [module docs](self)) drops `self`'s
    ///   mode and clamp fields.
    ///
    /// `a.merge(b).apply(base)` then equals `b.apply(&a.apply(base)?)` whenever
    /// the latter succeeds, with one exception: when neither layer sets a linear
    /// curve's `increment`, it defaults to the merged initial delay, where applying
    /// one after the other would have fixed it at the first layer's.
    #[must_use]
    pub fn merge(self, later: PolicyOverride) -> PolicyOverride {
        let mut earlier = self;
        if later.max_attempts.is_some() || later.max_retries.is_some() {
            earlier.max_attempts = None;
            earlier.max_retries = None;
        }
        if let Some(curve) = later.backoff {
            earlier.factor = None;
            earlier.increment = None;
            if curve == Curve::None {
                earlier.initial_delay = None;
            } else if earlier.backoff == Some(Curve::None) && earlier.initial_delay.is_none() {
                // Applied one after the other, the new curve would start from the
                // default initial delay (the `none` curve has none to keep).
                earlier.initial_delay = Some(RetryPolicy::default().backoff().initial());
            }
        }
        let earlier_ignores = earlier.retry_after == Some(RetryAfter::Ignore)
            || earlier.respect_retry_after == Some(false);
        if later.retry_after.is_some() || later.respect_retry_after.is_some() {
            earlier.respect_retry_after = None;
        }
        if later.retry_after.is_some()
            || later.respect_retry_after == Some(false)
            || (later.respect_retry_after == Some(true) && earlier_ignores)
        {
            // The later layer restates the mode: the earlier clamp is dropped.
            // Hints turned back on after an earlier layer ignored them restart in
            // override mode, as they would applied one after the other.
            let back_on = later.retry_after.is_none() && later.respect_retry_after == Some(true);
            earlier.retry_after = back_on.then_some(RetryAfter::Override);
            earlier.retry_after_min = None;
            earlier.retry_after_max = None;
            earlier.retry_after_cap = None;
        }
        PolicyOverride {
            max_attempts: later.max_attempts.or(earlier.max_attempts),
            max_retries: later.max_retries.or(earlier.max_retries),
            backoff: later.backoff.or(earlier.backoff),
            initial_delay: later.initial_delay.or(earlier.initial_delay),
            factor: later.factor.or(earlier.factor),
            increment: later.increment.or(earlier.increment),
            max_delay: later.max_delay.or(earlier.max_delay),
            min_delay: later.min_delay.or(earlier.min_delay),
            jitter: later.jitter.or(earlier.jitter),
            resolution: later.resolution.or(earlier.resolution),
            retry_after: later.retry_after.or(earlier.retry_after),
            retry_after_min: later.retry_after_min.or(earlier.retry_after_min),
            retry_after_max: later.retry_after_max.or(earlier.retry_after_max),
            retry_after_cap: later.retry_after_cap.or(earlier.retry_after_cap),
            respect_retry_after: later.respect_retry_after.or(earlier.respect_retry_after),
            budget: later.budget.or(earlier.budget),
            attempt_timeout: later.attempt_timeout.or(earlier.attempt_timeout),
            cap_attempt_to_budget: later
                .cap_attempt_to_budget
                .or(earlier.cap_attempt_to_budget),
            retry_timeouts: later.retry_timeouts.or(earlier.retry_timeouts),
            use_retry_budget: later.use_retry_budget.or(earlier.use_retry_budget),
            wait_on_open_circuit: later.wait_on_open_circuit.or(earlier.wait_on_open_circuit),
            idempotent: later.idempotent.or(earlier.idempotent),
        }
    }

    /// The curve after this override, over the base's curve.
    fn backoff_over(&self, base: Backoff) -> Result<Backoff, ConfigError> {
        // Naming the curve restates it: its own parameters start from their
        // defaults rather than the base's.
        let (curve, restated) = match self.backoff {
            Some(curve) => (curve, true),
            None => (Curve::of(&base), false),
        };
        let not_applicable = |field, requires| ConfigError::NotApplicable {
            field,
            requires,
            actual: curve.setting(),
        };
        if self.factor.is_some() && curve != Curve::Exponential {
            return Err(not_applicable("factor", Curve::Exponential.setting()));
        }
        if self.increment.is_some() && curve != Curve::Linear {
            return Err(not_applicable("increment", Curve::Linear.setting()));
        }
        if self.initial_delay.is_some() && curve == Curve::None {
            return Err(not_applicable(
                "initial_delay",
                "a backoff other than \"none\"",
            ));
        }
        let initial = self.initial_delay.unwrap_or(match base {
            Backoff::None => RetryPolicy::default().backoff().initial(),
            other => other.initial(),
        });
        Ok(match curve {
            Curve::None => Backoff::None,
            Curve::Constant => Backoff::constant(initial),
            Curve::Linear => {
                let increment = match (self.increment, base) {
                    (Some(step), _) => step,
                    (None, Backoff::Linear { increment, .. }) if !restated => increment,
                    (None, _) => initial,
                };
                Backoff::linear_by(initial, increment)
            }
            Curve::Exponential => {
                let factor = match (self.factor, base) {
                    (Some(f), _) => f,
                    (None, Backoff::Exponential { factor, .. }) if !restated => factor,
                    (None, _) => DEFAULT_FACTOR,
                };
                Backoff::exponential(initial, factor)
            }
            Curve::Fibonacci => Backoff::fibonacci(initial),
        })
    }

    /// The hint mode after this override, over the base's mode.
    fn hints_over(&self, base: HintMode) -> Result<HintMode, ConfigError> {
        let base_mode = RetryAfter::of(&base);
        // Naming a mode (or switching hints off, or back on) restates it: its
        // clamp starts from the defaults rather than the base's.
        let (mode, restated) = match (self.retry_after, self.respect_retry_after) {
            (Some(RetryAfter::Ignore), Some(true)) => {
                return Err(ConfigError::RetryAfterConflict {
                    respect: true,
                    mode: RetryAfter::Ignore,
                })
            }
            (Some(mode), Some(false)) if mode != RetryAfter::Ignore => {
                return Err(ConfigError::RetryAfterConflict {
                    respect: false,
                    mode,
                })
            }
            (Some(mode), _) => (mode, true),
            (None, Some(false)) => (RetryAfter::Ignore, true),
            (None, Some(true)) if base_mode == RetryAfter::Ignore => (RetryAfter::Override, true),
            (None, _) => (base_mode, false),
        };
        let base = if restated { HintMode::Ignore } else { base };
        let not_applicable = |field, requires: RetryAfter| ConfigError::NotApplicable {
            field,
            requires: requires.setting(),
            actual: mode.setting(),
        };
        if mode != RetryAfter::Override {
            if self.retry_after_min.is_some() {
                return Err(not_applicable("retry_after_min", RetryAfter::Override));
            }
            if self.retry_after_max.is_some() {
                return Err(not_applicable("retry_after_max", RetryAfter::Override));
            }
        }
        if mode != RetryAfter::AtLeast && self.retry_after_cap.is_some() {
            return Err(not_applicable("retry_after_cap", RetryAfter::AtLeast));
        }
        Ok(match mode {
            RetryAfter::Override => {
                let (min, max) = match (base, HintMode::OVERRIDE_DEFAULT) {
                    (HintMode::Override { min, max }, _) | (_, HintMode::Override { min, max }) => {
                        (min, max)
                    }
                    _ => (Duration::ZERO, Duration::MAX),
                };
                HintMode::Override {
                    min: self.retry_after_min.unwrap_or(min),
                    max: self.retry_after_max.unwrap_or(max),
                }
            }
            RetryAfter::AtLeast => {
                let cap = match (base, HintMode::AT_LEAST_DEFAULT) {
                    (HintMode::AtLeast { cap }, _) | (_, HintMode::AtLeast { cap }) => cap,
                    _ => Duration::MAX,
                };
                HintMode::AtLeast {
                    cap: self.retry_after_cap.unwrap_or(cap),
                }
            }
            RetryAfter::Ignore => HintMode::Ignore,
        })
    }
}

impl Serialize for RetryPolicy {
    /// Writes the complete policy (see [`PolicyOverride::from_policy`]).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PolicyOverride::from_policy(self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for RetryPolicy {
    /// Reads a complete policy: absent fields take [`RetryPolicy::default`]'s
    /// values; the result is validated and any error names its field.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        PolicyOverride::deserialize(d)?
            .apply(&RetryPolicy::default())
            .map_err(D::Error::custom)
    }
}

/// Writes a jitter kind as configured: `full`, `subtract:0.25`, …
struct JitterText(Jitter);

impl fmt::Display for JitterText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.fraction() {
            // f64's Debug is the shortest text that reads back to the same value,
            // switching to an exponent for very large or small ones (`1e-300`).
            Some(x) => write!(f, "{}:{x:?}", self.0.name()),
            None => f.write_str(self.0.name()),
        }
    }
}

/// `serialize_with` helpers; `None` never reaches them (the fields are skipped).
mod ser {
    use core::time::Duration;

    use serde::Serializer;

    use super::{Curve, JitterText, RetryAfter};
    use crate::duration_text::DurationText;
    use crate::{Jitter, Resolution};

    pub(super) fn count<S: Serializer>(n: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
        match n {
            Some(u32::MAX) => s.serialize_str("unlimited"),
            Some(n) => s.serialize_u32(*n),
            None => s.serialize_none(),
        }
    }

    pub(super) fn duration<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.collect_str(&DurationText(*d)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn limit<S: Serializer>(
        d: &Option<Option<Duration>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(Some(d)) => s.collect_str(&DurationText(*d)),
            Some(None) => s.serialize_str("none"),
            None => s.serialize_none(),
        }
    }

    pub(super) fn curve<S: Serializer>(c: &Option<Curve>, s: S) -> Result<S::Ok, S::Error> {
        match c {
            Some(c) => s.serialize_str(c.name()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn jitter<S: Serializer>(j: &Option<Jitter>, s: S) -> Result<S::Ok, S::Error> {
        match j {
            Some(j) => s.collect_str(&JitterText(*j)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn resolution<S: Serializer>(
        r: &Option<Resolution>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match r {
            Some(Resolution::Millis) => s.serialize_str("ms"),
            Some(Resolution::Nanos) => s.serialize_str("ns"),
            None => s.serialize_none(),
        }
    }

    pub(super) fn retry_after<S: Serializer>(
        m: &Option<RetryAfter>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match m {
            Some(m) => s.serialize_str(m.name()),
            None => s.serialize_none(),
        }
    }
}

/// `deserialize_with` helpers, one per field, so that every message names it.
mod fields {
    use core::time::Duration;

    use serde::Deserializer;

    use super::visit::{
        BoolField, CountField, CurveField, DurationField, FactorField, JitterField, LimitField,
        ModeField, ResolutionField,
    };
    use super::{Curve, RetryAfter};
    use crate::{Jitter, Resolution};

    macro_rules! field_fns {
        ($($name:ident -> $ty:ty = $visitor:expr;)*) => {$(
            pub(super) fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
                d.deserialize_any($visitor).map(Some)
            }
        )*};
    }

    field_fns! {
        max_attempts -> u32 = CountField { name: "max_attempts", nonzero: true };
        max_retries -> u32 = CountField { name: "max_retries", nonzero: false };
        backoff -> Curve = CurveField;
        initial_delay -> Duration = DurationField("initial_delay");
        factor -> f64 = FactorField("factor");
        increment -> Duration = DurationField("increment");
        max_delay -> Duration = DurationField("max_delay");
        min_delay -> Duration = DurationField("min_delay");
        jitter -> Jitter = JitterField;
        resolution -> Resolution = ResolutionField;
        retry_after -> RetryAfter = ModeField;
        retry_after_min -> Duration = DurationField("retry_after_min");
        retry_after_max -> Duration = DurationField("retry_after_max");
        retry_after_cap -> Duration = DurationField("retry_after_cap");
        respect_retry_after -> bool = BoolField("respect_retry_after");
        budget -> Option<Duration> = LimitField("budget");
        attempt_timeout -> Option<Duration> = LimitField("attempt_timeout");
        cap_attempt_to_budget -> bool = BoolField("cap_attempt_to_budget");
        retry_timeouts -> bool = BoolField("retry_timeouts");
        use_retry_budget -> bool = BoolField("use_retry_budget");
        wait_on_open_circuit -> bool = BoolField("wait_on_open_circuit");
        idempotent -> bool = BoolField("idempotent");
    }
}

/// The visitors behind [`fields`]. Each reads one value without allocating and
/// reports errors as `field: reason`.
mod visit {
    use core::fmt;
    use core::time::Duration;

    use serde::de::{Error, Visitor};

    use super::{Curve, RetryAfter};
    use crate::duration_text::parse_duration;
    use crate::{Backoff, Jitter, PolicyError, Resolution, RetryPolicy};

    /// A whole number for an attempt count.
    pub(super) struct CountField {
        pub(super) name: &'static str,
        pub(super) nonzero: bool,
    }

    impl Visitor<'_> for CountField {
        type Value = u32;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a whole number or \"unlimited\" for `{}`", self.name)
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<u32, E> {
            let n = u32::try_from(v).map_err(|_| {
                E::custom(format_args!(
                    "{}: {v} is too large (at most {})",
                    self.name,
                    u32::MAX
                ))
            })?;
            if self.nonzero && n == 0 {
                return Err(E::custom(PolicyError::ZeroAttempts));
            }
            Ok(n)
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<u32, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format_args!(
                    "{}: must not be negative, got {v}",
                    self.name
                ))),
            }
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<u32, E> {
            Err(E::custom(format_args!(
                "{}: expected a whole number, got {v}",
                self.name
            )))
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<u32, E> {
            if v.trim() == "unlimited" {
                return Ok(RetryPolicy::UNLIMITED_ATTEMPTS);
            }
            Err(E::custom(format_args!(
                "{}: expected a whole number or \"unlimited\", got the string {v:?}",
                self.name
            )))
        }
    }

    /// The exponential factor: a finite number >= 1.
    pub(super) struct FactorField(pub(super) &'static str);

    impl Visitor<'_> for FactorField {
        type Value = f64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a number >= 1 for `{}`", self.0)
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<f64, E> {
            Backoff::exponential(Duration::ZERO, v)
                .validate()
                .map_err(E::custom)?;
            Ok(v)
        }

        // Integers are read as the nearest f64, which is what a float literal
        // with the same digits would give.
        #[allow(clippy::cast_precision_loss)]
        fn visit_i64<E: Error>(self, v: i64) -> Result<f64, E> {
            self.visit_f64(v as f64)
        }

        #[allow(clippy::cast_precision_loss)]
        fn visit_u64<E: Error>(self, v: u64) -> Result<f64, E> {
            self.visit_f64(v as f64)
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<f64, E> {
            Err(E::custom(format_args!(
                "{}: expected a number, got the string {v:?}",
                self.0
            )))
        }
    }

    /// A duration: text or whole milliseconds.
    pub(super) struct DurationField(pub(super) &'static str);

    impl Visitor<'_> for DurationField {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "a duration for `{}` (text such as \"1m30s\", or whole milliseconds)",
                self.0
            )
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Duration, E> {
            parse_duration(v)
                .map_err(|e| E::custom(format_args!("{}: invalid duration {v:?}: {e}", self.0)))
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<Duration, E> {
            Ok(Duration::from_millis(v))
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<Duration, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format_args!(
                    "{}: a duration cannot be negative, got {v}",
                    self.0
                ))),
            }
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<Duration, E> {
            Err(E::custom(format_args!(
                "{}: expected text such as \"1.5s\" or whole milliseconds, got {v}",
                self.0
            )))
        }
    }

    /// A budget or timeout: a positive duration, or `"none"`.
    pub(super) struct LimitField(pub(super) &'static str);

    impl LimitField {
        fn positive<E: Error>(&self, d: Duration) -> Result<Option<Duration>, E> {
            if d.is_zero() {
                Err(E::custom(PolicyError::ZeroDuration { field: self.0 }))
            } else {
                Ok(Some(d))
            }
        }
    }

    impl Visitor<'_> for LimitField {
        type Value = Option<Duration>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "a duration for `{}` (text such as \"30s\", whole milliseconds, or \"none\")",
                self.0
            )
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Option<Duration>, E> {
            if v.trim() == "none" {
                return Ok(None);
            }
            let d = DurationField(self.0).visit_str(v)?;
            self.positive(d)
        }

        fn visit_u64<E: Error>(self, v: u64) -> Result<Option<Duration>, E> {
            let d = DurationField(self.0).visit_u64(v)?;
            self.positive(d)
        }

        fn visit_i64<E: Error>(self, v: i64) -> Result<Option<Duration>, E> {
            let d = DurationField(self.0).visit_i64(v)?;
            self.positive(d)
        }

        fn visit_f64<E: Error>(self, v: f64) -> Result<Option<Duration>, E> {
            DurationField(self.0).visit_f64(v).map(Some)
        }
    }

    /// `true` or `false`.
    pub(super) struct BoolField(pub(super) &'static str);

    impl Visitor<'_> for BoolField {
        type Value = bool;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "true or false for `{}`", self.0)
        }

        fn visit_bool<E: Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<bool, E> {
            Err(E::custom(format_args!(
                "{}: expected true or false, got the string {v:?}",
                self.0
            )))
        }
    }

    /// A curve name.
    pub(super) struct CurveField;

    impl Visitor<'_> for CurveField {
        type Value = Curve;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a curve name for `backoff`")
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Curve, E> {
            Curve::from_name(v).ok_or_else(|| {
                E::custom(format_args!(
                    "backoff: unknown curve `{v}` (expected one of none, constant, linear, exponential, fibonacci)"
                ))
            })
        }
    }

    /// A hint mode name.
    pub(super) struct ModeField;

    impl Visitor<'_> for ModeField {
        type Value = RetryAfter;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a mode name for `retry_after`")
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<RetryAfter, E> {
            RetryAfter::from_name(v).ok_or_else(|| {
                E::custom(format_args!(
                    "retry_after: unknown mode `{v}` (expected one of override, at-least, ignore)"
                ))
            })
        }
    }

    /// `ms` or `ns`.
    pub(super) struct ResolutionField;

    impl Visitor<'_> for ResolutionField {
        type Value = Resolution;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("\"ms\" or \"ns\" for `resolution`")
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Resolution, E> {
            match v {
                "ms" => Ok(Resolution::Millis),
                "ns" => Ok(Resolution::Nanos),
                _ => Err(E::custom(format_args!(
                    "resolution: unknown resolution `{v}` (expected ms or ns)"
                ))),
            }
        }
    }

    /// A jitter kind, with its fraction after a colon where it takes one.
    pub(super) struct JitterField;

    impl Visitor<'_> for JitterField {
        type Value = Jitter;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a jitter kind for `jitter`")
        }

        fn visit_str<E: Error>(self, v: &str) -> Result<Jitter, E> {
            let (kind, fraction) = match v.split_once(':') {
                Some((kind, fraction)) => (kind, Some(fraction)),
                None => (v, None),
            };
            let make: fn(f64) -> Jitter = match (kind, fraction) {
                ("none", None) => return Ok(Jitter::None),
                ("full", None) => return Ok(Jitter::Full),
                ("equal", None) => return Ok(Jitter::Equal),
                ("decorrelated", None) => return Ok(Jitter::Decorrelated),
                ("none" | "full" | "equal" | "decorrelated", Some(_)) => {
                    return Err(E::custom(format_args!(
                        "jitter: `{kind}` takes no fraction, got {v:?}"
                    )))
                }
                ("subtract", _) => Jitter::Subtract,
                ("add", _) => Jitter::Add,
                ("spread", _) => Jitter::Spread,
                _ => {
                    return Err(E::custom(format_args!(
                        "jitter: unknown kind `{kind}` (expected one of none, full, equal, decorrelated, subtract:F, add:F, spread:F)"
                    )))
                }
            };
            let Some(text) = fraction else {
                return Err(E::custom(format_args!(
                    "jitter: `{kind}` needs a fraction in [0, 1], as in \"{kind}:0.25\""
                )));
            };
            let value: f64 = text.trim().parse().map_err(|_| {
                E::custom(format_args!(
                    "jitter: bad fraction `{text}` in {v:?} (expected a number in [0, 1])"
                ))
            })?;
            let jitter = make(value);
            jitter.validate().map_err(E::custom)?;
            Ok(jitter)
        }
    }
}
