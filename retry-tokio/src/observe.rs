//! Traces and metrics, each behind its feature. With neither feature on, every
//! function here is empty and compiles away.

#![cfg_attr(
    not(any(feature = "tracing", feature = "metrics")),
    allow(unused_variables)
)]

use core::time::Duration;

use retry_core::{Action, Event, GiveUp, GiveUpReason, SleepReason, Transition};

/// The `outcome` label of `retry.attempt.total` for an attempt that ended in
/// `event` and was answered with `action` (never a withdrawal: the driver waits for
/// the budget's answer first).
pub(crate) fn attempt_outcome(event: Event, action: &Action) -> Option<&'static str> {
    match (event, action) {
        (Event::Succeeded, _) => Some("success"),
        (Event::Cancelled, _) => Some("aborted"),
        (Event::Failed(_) | Event::TimedOut, Action::GiveUp(give_up)) => {
            Some(match give_up.reason {
                GiveUpReason::Permanent
                | GiveUpReason::Cancelled
                | GiveUpReason::CircuitOpen { .. }
                | GiveUpReason::NotStarted => "aborted",
                _ => "exhausted",
            })
        }
        (Event::Failed(_) | Event::TimedOut, _) => Some("failure"),
        _ => None,
    }
}

/// An attempt starts.
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
pub(crate) fn attempt_ended(number: u32, outcome: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(attempt = number, outcome, "attempt ended");
    #[cfg(feature = "metrics")]
    metrics::counter!("retry.attempt.total", "outcome" => outcome).increment(1);
}

/// The call sleeps `delay` before its next attempt.
pub(crate) fn sleeping(delay: Duration, reason: SleepReason, curve: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::info!(
        delay_ms = millis(delay),
        reason = %reason,
        curve,
        "sleeping before the next attempt"
    );
    #[cfg(feature = "metrics")]
    metrics::histogram!("retry.attempt.delay_ms", "curve" => curve).record(millis(delay));
}

/// The call gave up.
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
pub(crate) fn transition(transition: &Transition) {
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

/// A call the breaker admitted ran for `took`.
pub(crate) fn breaker_call(took: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("circuit_breaker.call.duration_ms").record(millis(took));
}

#[cfg(any(feature = "tracing", feature = "metrics"))]
fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
