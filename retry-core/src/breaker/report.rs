//! What a breaker reports beside its transitions: how an outcome was used
//! ([`Recorded`], [`Ignored`], [`Exceeded`]) and the readings a dashboard shows
//! ([`BreakerMetrics`], [`RateReading`]).

use core::fmt;
use core::time::Duration;

use super::{BreakerState, Rate, Transition, WindowStats};

/// What [`CircuitBreaker::record`](super::CircuitBreaker::record) made of an
/// outcome: the state change it caused, whether the outcome was ignored, and
/// which rate thresholds it pushed a rate to. An adapter turns each part into an
/// event (a transition, "outcome ignored", "failure rate exceeded", "slow-call
/// rate exceeded").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use = "a transition must be reported"]
pub struct Recorded {
    /// The state change the outcome caused, if any.
    pub transition: Option<Transition>,
    /// Why the outcome counted for nothing, if it did.
    pub ignored: Option<Ignored>,
    /// The rates this outcome brought to or above their thresholds.
    pub exceeded: Exceeded,
}

impl Recorded {
    /// Nothing to report.
    #[cfg_attr(not(target_pointer_width = "64"), allow(dead_code))]
    pub(crate) const NOTHING: Recorded = Recorded {
        transition: None,
        ignored: None,
        exceeded: Exceeded::NONE,
    };

    /// [`Recorded::NOTHING`]. On 64-bit targets the constant itself (a few
    /// wide moves); on 32-bit ones built field by field: there a constant of
    /// this size is copied out of read-only memory by a `memcpy` call, where
    /// these fields are a few stores.
    #[cfg(target_pointer_width = "64")]
    #[inline(always)]
    pub(crate) const fn nothing() -> Recorded {
        Recorded::NOTHING
    }

    /// [`Recorded::NOTHING`], built field by field (see above).
    #[cfg(not(target_pointer_width = "64"))]
    #[inline(always)]
    pub(crate) const fn nothing() -> Recorded {
        Recorded::by_fields()
    }

    /// [`Recorded::NOTHING`] as 32-bit targets build it (tested equal).
    #[cfg_attr(target_pointer_width = "64", allow(dead_code))]
    const fn by_fields() -> Recorded {
        Recorded {
            transition: None,
            ignored: None,
            exceeded: Exceeded {
                failure_rate: None,
                slow_call_rate: None,
            },
        }
    }

    pub(crate) const fn ignored(reason: Ignored) -> Recorded {
        Recorded {
            transition: None,
            ignored: Some(reason),
            exceeded: Exceeded::NONE,
        }
    }
}

impl fmt::Display for Recorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ignored {
            Some(reason) => write!(f, "ignored ({reason})")?,
            None => f.write_str("recorded")?,
        }
        if let Some(rate) = self.exceeded.failure_rate {
            write!(f, "; failure rate {rate} exceeded")?;
        }
        if let Some(rate) = self.exceeded.slow_call_rate {
            write!(f, "; slow-call rate {rate} exceeded")?;
        }
        if let Some(t) = self.transition {
            write!(f, "; {t}")?;
        }
        Ok(())
    }
}

/// Why an outcome handed back to a breaker counted for nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ignored {
    /// The permit was issued before the breaker last opened (or was sent to
    /// half-open): its outcome says nothing about the dependency now.
    Late,
    /// The breaker is open: it records nothing until it probes again.
    Open,
    /// An operator forced the breaker open.
    ForcedOpen,
    /// An operator disabled the breaker: it records nothing.
    Disabled,
}

impl Ignored {
    /// A stable dotted code for logs and metric labels.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Ignored::Late => "breaker.ignored.late",
            Ignored::Open => "breaker.ignored.open",
            Ignored::ForcedOpen => "breaker.ignored.forced_open",
            Ignored::Disabled => "breaker.ignored.disabled",
        }
    }
}

impl fmt::Display for Ignored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ignored::Late => "late",
            Ignored::Open => "open",
            Ignored::ForcedOpen => "forced open",
            Ignored::Disabled => "disabled",
        })
    }
}

/// The rates an outcome brought to or above their thresholds, each with the rate
/// measured then. A rate is reported by the outcome that crosses its threshold
/// (it was below, or not yet judged, before that outcome), so a metrics-only
/// breaker whose failure rate stays high reports it once, not for every call.
/// In half-open under [`HalfOpenVerdict::Rates`](crate::HalfOpenVerdict::Rates)
/// the probes' rates are reported by the verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Exceeded {
    /// The failure rate, if it reached the `failure_rate` threshold.
    pub failure_rate: Option<Rate>,
    /// The slow-call rate, if it reached the `slow_call_rate` threshold.
    pub slow_call_rate: Option<Rate>,
}

impl Exceeded {
    /// Nothing exceeded.
    pub const NONE: Exceeded = Exceeded {
        failure_rate: None,
        slow_call_rate: None,
    };

    /// Whether either rate was exceeded.
    #[must_use]
    pub const fn any(&self) -> bool {
        self.failure_rate.is_some() || self.slow_call_rate.is_some()
    }
}

/// A rate as a dashboard shows it: measured, or not measurable yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateReading {
    /// The breaker has no window to measure rates over.
    NoWindow,
    /// The window holds fewer calls than `minimum_calls`: no rate is judged yet
    /// (which is not the same as 0 %).
    NotEnoughCalls {
        /// Calls in the window.
        calls: u32,
        /// Calls needed before rates are judged.
        minimum: u32,
    },
    /// The rate over the window's calls, rounded down to a basis point.
    Measured(Rate),
}

impl RateReading {
    /// `count` out of `calls`, judged from `minimum` calls on.
    pub(crate) fn of(count: u32, calls: u32, minimum: u32) -> RateReading {
        if calls < minimum || calls == 0 {
            return RateReading::NotEnoughCalls { calls, minimum };
        }
        RateReading::Measured(Rate::from_basis_points(basis_points(count, calls)))
    }

    /// The measured rate, if there is one.
    #[must_use]
    pub const fn rate(self) -> Option<Rate> {
        match self {
            RateReading::Measured(rate) => Some(rate),
            _ => None,
        }
    }
}

/// `count × 10 000 / calls` rounded down, at most 10 000, for `calls > 0`: the
/// quotient found bit by bit from the top (14 bits hold 10 000), with
/// multiplications and comparisons only, so no 64-bit division is needed on
/// 32-bit targets.
fn basis_points(count: u32, calls: u32) -> u16 {
    // Both products are of 32-bit numbers in 64 bits: neither wraps.
    let target = u64::from(count.min(calls)).wrapping_mul(10_000);
    let mut q = 0u16;
    for bit in (0..14).rev() {
        let t = q | 1 << bit;
        if u64::from(t).wrapping_mul(u64::from(calls)) <= target {
            q = t;
        }
    }
    q
}

impl fmt::Display for RateReading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateReading::NoWindow => f.write_str("no window"),
            RateReading::NotEnoughCalls { calls, minimum } => {
                write!(f, "not enough calls ({calls} of {minimum})")
            }
            RateReading::Measured(rate) => fmt::Display::fmt(rate, f),
        }
    }
}

/// What a dashboard shows for a breaker at one moment, for the state it is in
/// ([`CircuitBreaker::metrics`](super::CircuitBreaker::metrics)): half-open,
/// `window` and the rates are the probes'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct BreakerMetrics {
    /// The state.
    pub state: BreakerState,
    /// What the window holds (calls, failures, slow calls and slow failures;
    /// slow successes are [`WindowStats::slow_successes`]); half-open, what
    /// the probes reported.
    pub window: WindowStats,
    /// The failure rate of `window`.
    pub failure_rate: RateReading,
    /// The slow-call rate of `window`.
    pub slow_call_rate: RateReading,
    /// Calls rejected (forced-open, open, or every half-open probe place
    /// taken) since the breaker was built or last reset.
    pub rejected: u64,
    /// Of those, the calls rejected since the breaker entered the state it is
    /// in (zero in the states that admit every call): in half-open, the calls
    /// the probes kept out.
    pub rejected_in_state: u64,
    /// The current streak of failures.
    pub consecutive_failures: u32,
    /// Probes in flight (zero unless half-open).
    pub probes_in_flight: u32,
    /// The probes that have reported in this half-open period (all zero unless
    /// half-open).
    pub probes: WindowStats,
    /// How long the calls `window` counts took, added up, where the window
    /// keeps their durations: a time window, or a count window of a breaker
    /// that keeps its calls' durations (`DURATIONS` on
    /// [`CircuitBreaker`](super::CircuitBreaker) at least the window's size);
    /// `None` otherwise, half-open, and while a duration is not known (see
    /// [`CircuitBreaker::metrics`](super::CircuitBreaker::metrics)).
    pub call_duration_total: Option<Duration>,
    /// Their mean (the total over the calls, rounded down to a nanosecond);
    /// `None` with no total or no calls.
    pub call_duration_mean: Option<Duration>,
}

impl fmt::Display for BreakerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "failure rate {}, slow-call rate {} ({} slow ok, {} slow failed), rejected {}",
            self.failure_rate,
            self.slow_call_rate,
            self.window.slow_successes(),
            self.window.slow_failures,
            self.rejected
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field-by-field form 32-bit targets use is the constant.
    #[test]
    fn nothing_by_fields_is_the_constant() {
        assert_eq!(Recorded::by_fields(), Recorded::NOTHING);
        assert_eq!(Recorded::nothing(), Recorded::NOTHING);
        assert_eq!(Recorded::by_fields().transition, None);
        assert_eq!(Recorded::by_fields().ignored, None);
        assert!(!Recorded::by_fields().exceeded.any());
    }

    #[test]
    fn basis_points_are_the_rounded_down_quotient() {
        let exact = |count: u32, calls: u32| {
            let bp = (u64::from(count) * 10_000 / u64::from(calls)).min(10_000);
            u16::try_from(bp).unwrap()
        };
        let check = |count: u32, calls: u32| {
            assert_eq!(
                basis_points(count, calls),
                exact(count, calls),
                "{count} of {calls}"
            );
        };
        for (count, calls) in [
            (0, 1),
            (1, 1),
            (1, 3),
            (2, 3),
            (5, 7),
            (7, 5),
            (u32::MAX, u32::MAX),
            (u32::MAX - 1, u32::MAX),
            (1, u32::MAX),
            (429_497, 429_497 * 3 + 1),
        ] {
            check(count, calls);
        }
        for calls in 1..=300u32 {
            for count in 0..=calls + 2 {
                check(count, calls);
            }
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let calls = u32::try_from(x >> 32).unwrap().max(1);
            let count = u32::try_from(x & 0xffff_ffff).unwrap() % calls.saturating_add(1);
            check(count, calls);
        }
    }
}
