//! Traces and metrics, each behind its feature. With neither feature on, every
//! function here is empty and compiles away.

// Each argument feeds the traces, the metrics or both: with either feature
// off, some go unread.
#![cfg_attr(
    not(all(feature = "tracing", feature = "metrics")),
    allow(unused_variables)
)]

use core::time::Duration;

use retry_core::{Event, FailureKind, GiveUp, Recorded, RejectReason, SleepReason, Transition};

/// Whether anything is observed: without either feature, the driver skips the
/// bookkeeping that only feeds traces and metrics.
pub(crate) const ENABLED: bool = cfg!(any(feature = "tracing", feature = "metrics"));

/// Every metric the adapters record, with its unit and what it counts, as
/// [`describe_metrics`] registers them: (name, unit, description).
pub const METRICS: [(&str, &str, &str); 7] = [
    (
        "retry.attempt.total",
        "count",
        "Attempts, one count per attempt by how it ended (outcome = success; failure: a failure \
         a retry may fix, retried or not; permanent: a failure no retry fixes; timeout: past its \
         deadline; aborted: cancelled or abandoned, its future dropped, or the call cancelled \
         before it ran; rejected: turned away by a circuit breaker)",
    ),
    (
        "retry.attempt.delay_ms",
        "milliseconds",
        "Delays slept before a retry, by backoff curve and by reason (curve, hint, circuit_open)",
    ),
    (
        "circuit_breaker.state_change.total",
        "count",
        "Circuit breaker state changes, by from and to state",
    ),
    (
        "circuit_breaker.call.duration_ms",
        "milliseconds",
        "How long the calls a circuit breaker admitted ran",
    ),
    (
        "circuit_breaker.call.rejected.total",
        "count",
        "Calls a circuit breaker did not permit, by reason (open, probes busy, forced open)",
    ),
    (
        "hedge.copy.launched.total",
        "count",
        "Copies a hedged call sent, the first included",
    ),
    (
        "hedge.copy.total",
        "count",
        "Copies of hedged calls, one count per copy by how it ended (outcome = won; failure: a \
         failure another copy may fix; permanent: a failure that ended the call; cancelled: it \
         lost, or the call ended or was dropped first; rejected: a circuit breaker turned it away \
         before it was sent)",
    ),
];

/// How one copy of a hedged call ended, as the `outcome` label of
/// `hedge.copy.total` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyOutcome {
    /// Its answer was the call's.
    Won,
    /// It failed with a failure another copy may fix.
    Failure,
    /// It failed with a failure no copy can fix: the call ended on it.
    Permanent,
    /// It was still running when the call ended (another copy won, the call
    /// gave up, timed out or was cancelled, or its future was dropped).
    Cancelled,
    /// A circuit breaker turned it away: it was never sent.
    Rejected,
}

impl CopyOutcome {
    /// The metric label: `won`, `failure`, `permanent`, `cancelled` or
    /// `rejected`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            CopyOutcome::Won => "won",
            CopyOutcome::Failure => "failure",
            CopyOutcome::Permanent => "permanent",
            CopyOutcome::Cancelled => "cancelled",
            CopyOutcome::Rejected => "rejected",
        }
    }
}

/// Registers the description and unit of every metric the adapters record (see
/// [`METRICS`]) with the installed `metrics` recorder. Call it once after
/// installing the recorder (an exporter then shows help text and units from the
/// first scrape). Without the `metrics` feature it does nothing.
pub fn describe_metrics() {
    #[cfg(feature = "metrics")]
    {
        use metrics::Unit;
        let [attempts, delays, changes, durations, rejected, launched, copies] = METRICS;
        metrics::describe_counter!(attempts.0, Unit::Count, attempts.2);
        metrics::describe_histogram!(delays.0, Unit::Milliseconds, delays.2);
        metrics::describe_counter!(changes.0, Unit::Count, changes.2);
        metrics::describe_histogram!(durations.0, Unit::Milliseconds, durations.2);
        metrics::describe_counter!(rejected.0, Unit::Count, rejected.2);
        metrics::describe_counter!(launched.0, Unit::Count, launched.2);
        metrics::describe_counter!(copies.0, Unit::Count, copies.2);
    }
}

/// Whether an enabled trace asks for a call's elapsed time (the give-up
/// warning carries it): the driver then reads the clock at the call's start.
#[inline]
pub(crate) fn wants_elapsed() -> bool {
    #[cfg(feature = "tracing")]
    {
        tracing::enabled!(tracing::Level::WARN)
    }
    #[cfg(not(feature = "tracing"))]
    {
        false
    }
}

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

/// An attempt ended with the `outcome` label; `kind` is its failure's kind when
/// it failed (a status, a timeout, a connection error…).
#[inline]
pub(crate) fn attempt_ended(number: u32, outcome: &'static str, kind: Option<FailureKind>) {
    #[cfg(feature = "tracing")]
    match kind {
        Some(kind) => tracing::debug!(attempt = number, outcome, failure = %kind, "attempt ended"),
        None => tracing::debug!(attempt = number, outcome, "attempt ended"),
    }
    count_attempt(outcome);
}

/// The call ended on `event` (a cancellation, a breaker's rejection) with no
/// attempt in flight, before attempt `next` ran: counted with `outcome`.
#[inline]
pub(crate) fn stopped_before(next: u32, outcome: &'static str, event: Event) {
    #[cfg(feature = "tracing")]
    tracing::debug!(next_attempt = next, outcome, %event, "call stopped between attempts");
    count_attempt(outcome);
}

/// Attempt `number` was abandoned while in flight (its driver dropped: the
/// call's future was dropped, the operation panicked): counted `aborted`.
#[cfg(any(feature = "tracing", feature = "metrics"))]
#[inline]
pub(crate) fn attempt_abandoned(number: u32) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        attempt = number,
        outcome = "aborted",
        "attempt abandoned: the call was dropped while it ran"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = number;
    count_attempt("aborted");
}

/// A hedged call sends copy `copy` (with the `tracing` feature, an event; a
/// warning too when it repeats an operation marked non-idempotent; with
/// `metrics`, `hedge.copy.launched.total`).
#[inline]
pub fn hedge_launched(copy: u32, replays_non_idempotent: bool) {
    #[cfg(feature = "tracing")]
    {
        if replays_non_idempotent {
            tracing::warn!(
                copy,
                "hedging an operation marked non-idempotent: it may take effect twice"
            );
        }
        tracing::debug!(copy, "hedge: copy sent");
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (copy, replays_non_idempotent);
    #[cfg(feature = "metrics")]
    metrics::with_recorder(|r| {
        r.register_counter(&keys::COPY_LAUNCHED, &keys::METADATA)
            .increment(1);
    });
}

/// Copy `copy` of a hedged call ended with `outcome` (with the `tracing`
/// feature, an event; with `metrics`, `hedge.copy.total`).
#[inline]
pub fn hedge_copy_ended(copy: u32, outcome: CopyOutcome) {
    #[cfg(feature = "tracing")]
    tracing::debug!(copy, outcome = outcome.label(), "hedge: copy ended");
    #[cfg(not(feature = "tracing"))]
    let _ = copy;
    #[cfg(feature = "metrics")]
    metrics::with_recorder(|r| {
        r.register_counter(keys::copy(outcome), &keys::METADATA)
            .increment(1);
    });
    #[cfg(not(feature = "metrics"))]
    let _ = outcome;
}

/// A hedged call gave up (with the `tracing` feature, a warning, as the retry
/// driver's).
#[inline]
pub fn hedge_gave_up(give_up: &GiveUp, elapsed: Duration) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        code = give_up.code(),
        reason = %give_up.reason,
        copies = give_up.attempts,
        elapsed_ms = millis(elapsed),
        "hedge: giving up"
    );
    #[cfg(not(feature = "tracing"))]
    let _ = (give_up, elapsed);
}

/// A circuit breaker turned attempt `number` away before it ran.
#[inline]
pub(crate) fn rejected(number: u32) {
    #[cfg(feature = "tracing")]
    tracing::debug!(attempt = number, "the circuit breaker refused the attempt");
}

#[inline]
fn count_attempt(outcome: &'static str) {
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
        reason = reason.label(),
        curve,
        "sleeping before the next attempt"
    );
    #[cfg(feature = "metrics")]
    if let Some(key) = keys::delay(curve, reason) {
        metrics::with_recorder(|r| {
            r.register_histogram(key, &keys::METADATA)
                .record(millis(delay));
        });
    }
}

/// The call gave up, after `elapsed` when that was measured from its start
/// (the event then carries `elapsed_ms`).
#[inline]
pub(crate) fn gave_up(give_up: &GiveUp, elapsed: Option<Duration>) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        code = give_up.code(),
        reason = %give_up.reason,
        attempts = give_up.attempts,
        elapsed_ms = elapsed.map(millis),
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
    use retry_core::SleepReason;

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
        "permanent" => ATTEMPT_PERMANENT,
        "timeout" => ATTEMPT_TIMEOUT,
        "aborted" => ATTEMPT_ABORTED,
        "rejected" => ATTEMPT_REJECTED,
    );

    labelled!("hedge.copy.total", "outcome":
        "won" => COPY_WON,
        "failure" => COPY_FAILURE,
        "permanent" => COPY_PERMANENT,
        "cancelled" => COPY_CANCELLED,
        "rejected" => COPY_REJECTED,
    );

    pub(super) static COPY_LAUNCHED: Key = Key::from_static_name("hedge.copy.launched.total");

    pub(super) fn copy(outcome: super::CopyOutcome) -> &'static Key {
        match outcome {
            super::CopyOutcome::Won => &COPY_WON,
            super::CopyOutcome::Failure => &COPY_FAILURE,
            super::CopyOutcome::Permanent => &COPY_PERMANENT,
            super::CopyOutcome::Cancelled => &COPY_CANCELLED,
            super::CopyOutcome::Rejected => &COPY_REJECTED,
        }
    }

    /// One `retry.attempt.delay_ms` key per curve, each with the three reasons
    /// in the order curve, hint, circuit_open.
    macro_rules! delays {
        ($($curve:literal => $key:ident),+ $(,)?) => {
            $(
                pub(super) static $key: [Key; 3] = [
                    delays!(@key $curve, "curve"),
                    delays!(@key $curve, "hint"),
                    delays!(@key $curve, "circuit_open"),
                ];
            )+
        };
        (@key $curve:literal, $reason:literal) => {
            Key::from_static_parts("retry.attempt.delay_ms", {
                const LABELS: &[Label] = &[
                    Label::from_static_parts("curve", $curve),
                    Label::from_static_parts("reason", $reason),
                ];
                LABELS
            })
        };
    }

    delays!(
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
            "permanent" => &ATTEMPT_PERMANENT,
            "timeout" => &ATTEMPT_TIMEOUT,
            "aborted" => &ATTEMPT_ABORTED,
            "rejected" => &ATTEMPT_REJECTED,
            _ => return None,
        })
    }

    pub(super) fn delay(curve: &str, reason: SleepReason) -> Option<&'static Key> {
        let keys = match curve {
            "none" => &DELAY_NONE,
            "constant" => &DELAY_CONSTANT,
            "linear" => &DELAY_LINEAR,
            "exponential" => &DELAY_EXPONENTIAL,
            "fibonacci" => &DELAY_FIBONACCI,
            _ => return None,
        };
        let [curve, hint, circuit_open] = keys;
        Some(match reason {
            SleepReason::Curve => curve,
            SleepReason::Hint => hint,
            SleepReason::CircuitOpen => circuit_open,
        })
    }
}

/// A duration in milliseconds with at most three decimals (whole
/// microseconds), so events read `0.334`, never `0.33363499999999996`.
#[cfg(any(feature = "tracing", feature = "metrics"))]
#[allow(clippy::cast_precision_loss)]
fn millis(d: Duration) -> f64 {
    // Exact below 2^53 µs (285 years); the division rounds once, to the double
    // nearest the three-decimal value, which prints as that value.
    d.as_micros() as f64 / 1000.0
}
