//! Metrics, with the `metrics` feature: fallbacks, store errors by code,
//! breaker syncs and the fleet breaker's changes of state. Without the
//! feature every function here is empty.

use retry_core::Transition;

use crate::error::StoreError;

/// A withdrawal answered by the fallback.
pub(crate) fn fallback() {
    #[cfg(feature = "metrics")]
    metrics::counter!("retry_redis_fallbacks").increment(1);
}

/// A round trip that failed.
pub(crate) fn store_error(error: &StoreError) {
    #[cfg(feature = "metrics")]
    metrics::counter!("retry_redis_errors", "code" => error.code()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = error;
}

/// A breaker sync that completed (`ok`) or failed.
pub(crate) fn sync(ok: bool) {
    #[cfg(feature = "metrics")]
    metrics::counter!("retry_redis_syncs", "result" => if ok { "ok" } else { "failed" })
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = ok;
}

/// The fleet breaker changed state (on a call, or on its own with automatic
/// transitions on).
pub(crate) fn transition(transition: &Transition) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "retry_redis_breaker_transitions",
        "from" => transition.from.name(),
        "to" => transition.to.name()
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = transition;
}

/// Describes the crate's metrics to the installed recorder.
pub fn describe_metrics() {
    #[cfg(feature = "metrics")]
    {
        metrics::describe_counter!(
            "retry_redis_fallbacks",
            metrics::Unit::Count,
            "Fleet budget withdrawals answered by the fallback (Redis gave no answer in time, or bad data)"
        );
        metrics::describe_counter!(
            "retry_redis_errors",
            metrics::Unit::Count,
            "Round trips to Redis that failed, by error code"
        );
        metrics::describe_counter!(
            "retry_redis_syncs",
            metrics::Unit::Count,
            "Fleet breaker syncs, by result"
        );
        metrics::describe_counter!(
            "retry_redis_breaker_transitions",
            metrics::Unit::Count,
            "Fleet breaker changes of state, by the state left and the state entered"
        );
    }
}
