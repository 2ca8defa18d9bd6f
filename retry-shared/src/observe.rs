//! Traces and metrics, each behind its feature. With neither feature on, every
//! function here is empty and compiles away.

#![cfg_attr(
    not(any(feature = "tracing", feature = "metrics")),
    allow(unused_variables)
)]

use core::time::Duration;

use retry_core::{GiveUp, Recorded, RejectReason, SleepReason, Transition};

/// Whether anything is observed: without either feature, the driver skips the
/// bookkeeping that only feeds traces and metrics.
pub(crate) const ENABLED: bool = cfg!(any(feature = "tracing", feature = "metrics"));

/// An attempt starts.
#[inline]
pub(crate) fn attempt_started(number: u32, replays_non_idempotent: bool) {
    #[cfg(feature = "tracing")]
    {
        if replays_non_idempotent {
            tracing::warn!(
                attempt = number,
                "retrying an operation marked non-idempotent: it may take effect twice"
            );
        }
        tracing::debug!(attempt = number, "attempt starts");
    }
}

/// An attempt ended with the `outcome` label.
#[inline]
pub(crate) fn attempt_ended(number: u32, outcome: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(attempt = number, outcome, "attempt ended");
    #[cfg(feature = "metrics")]
    if let Some(key) = keys::attempt(outcome) {
        metrics::with_recorder(|r| r.register_counter(key, &keys::METADATA).increment(1));
    }
}

/// The call sleeps `delay` before its next attempt.
#[inline]
pub(crate) fn sleeping(delay: Duration, reason: SleepReason, curve: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::info!(
        delay_ms = millis(delay),
        reason = %reason,
        curve,
        "sleeping before the next attempt"
    );
    #[cfg(feature = "metrics")]
    if let Some(key) = keys::delay(curve) {
        metrics::with_recorder(|r| {
            r.register_histogram(key, &keys::METADATA)
                .record(millis(delay));
        });
    }
}

/// The call gave up.
#[inline]
pub(crate) fn gave_up(give_up: &GiveUp, elapsed: Duration) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        code = give_up.code(),
        reason = %give_up.reason,
        attempts = give_up.attempts,
        elapsed_ms = millis(elapsed),
        "giving up"
    );
}

/// A circuit breaker changed state.
#[inline]
pub(crate) fn transition(transition: &Transition) {
    #[cfg(feature = "tracing")]
    if transition.cause == retry_core::TransitionCause::Reset {
        tracing::info!(from = transition.from.name(), "circuit breaker reset");
    }
    #[cfg(feature = "tracing")]
    tracing::info!(
        from = transition.from.name(),
        to = transition.to.name(),
        cause = transition.cause.code(),
        "circuit breaker changed state"
    );
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "circuit_breaker.state_change.total",
        "from" => transition.from.name(),
        "to" => transition.to.name()
    )
    .increment(1);
}

/// The breaker did not permit a call (`circuit_breaker.call.rejected.total`, by
/// reason).
#[inline]
pub(crate) fn call_rejected(reason: RejectReason) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        reason = reason.code(),
        "circuit breaker: call not permitted"
    );
    #[cfg(feature = "metrics")]
    metrics::with_recorder(|r| {
        r.register_counter(keys::rejected(reason), &keys::METADATA)
            .increment(1);
    });
}

/// What the breaker made of an outcome: ignored, or a rate over its threshold.
#[inline]
pub(crate) fn recorded(recorded: &Recorded) {
    #[cfg(not(feature = "tracing"))]
    let _ = recorded;
    #[cfg(feature = "tracing")]
    {
        if let Some(why) = recorded.ignored {
            tracing::debug!(reason = why.code(), "circuit breaker: outcome ignored");
        }
        if let Some(rate) = recorded.exceeded.failure_rate {
            tracing::warn!(
                rate_basis_points = rate.basis_points(),
                "circuit breaker: failure rate exceeded"
            );
        }
        if let Some(rate) = recorded.exceeded.slow_call_rate {
            tracing::warn!(
                rate_basis_points = rate.basis_points(),
                "circuit breaker: slow-call rate exceeded"
            );
        }
    }
}

/// A call the breaker admitted ran for `took`.
#[inline]
pub(crate) fn breaker_call(took: Duration) {
    #[cfg(feature = "metrics")]
    metrics::with_recorder(|r| {
        r.register_histogram(&keys::CALL_DURATION, &keys::METADATA)
            .record(millis(took));
    });
}

/// Metric keys built at compile time: with no recorder installed, recording a
/// metric is one call into the no-op recorder, and it never allocates (the
/// `metrics` macros build each key, labels and all, on every use). State changes
/// are rare, so their `from`/`to` labels use the macro.
#[cfg(feature = "metrics")]
mod keys {
    use metrics::{Key, Label, Level, Metadata};

    pub(super) static METADATA: Metadata<'static> =
        Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

    macro_rules! labelled {
        ($name:literal, $label:literal: $($value:literal => $key:ident),+ $(,)?) => {
            $(
                pub(super) static $key: Key = Key::from_static_parts($name, {
                    const LABELS: &[Label] = &[Label::from_static_parts($label, $value)];
                    LABELS
                });
            )+
        };
    }

    labelled!("retry.attempt.total", "outcome":
        "success" => ATTEMPT_SUCCESS,
        "failure" => ATTEMPT_FAILURE,
        "exhausted" => ATTEMPT_EXHAUSTED,
        "aborted" => ATTEMPT_ABORTED,
    );
    labelled!("retry.attempt.delay_ms", "curve":
        "none" => DELAY_NONE,
        "constant" => DELAY_CONSTANT,
        "linear" => DELAY_LINEAR,
        "exponential" => DELAY_EXPONENTIAL,
        "fibonacci" => DELAY_FIBONACCI,
    );

    pub(super) static CALL_DURATION: Key =
        Key::from_static_name("circuit_breaker.call.duration_ms");

    labelled!("circuit_breaker.call.rejected.total", "reason":
        "breaker.open" => REJECTED_OPEN,
        "breaker.probes_busy" => REJECTED_PROBES_BUSY,
        "breaker.forced_open" => REJECTED_FORCED_OPEN,
    );

    pub(super) fn rejected(reason: retry_core::RejectReason) -> &'static Key {
        match reason {
            retry_core::RejectReason::Open => &REJECTED_OPEN,
            retry_core::RejectReason::ProbesBusy => &REJECTED_PROBES_BUSY,
            retry_core::RejectReason::ForcedOpen => &REJECTED_FORCED_OPEN,
        }
    }

    pub(super) fn attempt(outcome: &str) -> Option<&'static Key> {
        Some(match outcome {
            "success" => &ATTEMPT_SUCCESS,
            "failure" => &ATTEMPT_FAILURE,
            "exhausted" => &ATTEMPT_EXHAUSTED,
            "aborted" => &ATTEMPT_ABORTED,
            _ => return None,
        })
    }

    pub(super) fn delay(curve: &str) -> Option<&'static Key> {
        Some(match curve {
            "none" => &DELAY_NONE,
            "constant" => &DELAY_CONSTANT,
            "linear" => &DELAY_LINEAR,
            "exponential" => &DELAY_EXPONENTIAL,
            "fibonacci" => &DELAY_FIBONACCI,
            _ => return None,
        })
    }
}

#[cfg(any(feature = "tracing", feature = "metrics"))]
fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
