//! [`BreakerSnapshot`]: a circuit breaker's state as a versioned record, and the
//! checks that restore it.

use core::marker::PhantomData;
use core::time::Duration;

use super::window::{BucketRing, CountRing};
use super::{
    BreakerConfig, CircuitBreaker, HalfOpenTimeout, HalfOpenVerdict, Mode, Probing, Rate,
    WindowStats,
};
use crate::snapshot::{consistent, Bounded, CurveRecord, JitterRecord, SnapshotError};
use crate::{Instant, Window};

/// A [`CircuitBreaker`] as a plain, versioned record: its config, its state
/// with what that state holds (when an open period ends, the half-open probes),
/// its counters, and its window as the calls it holds from oldest to newest (a
/// count window) or its buckets (a time window). [`CircuitBreaker::snapshot`]
/// takes one; [`CircuitBreaker::restore`] checks one and rebuilds the breaker,
/// which then answers every later request, outcome and operator action exactly
/// as the original would. With the `serde` feature it serializes to any serde
/// format (JSON, postcard, …), without allocating.
///
/// `WORDS` and `BUCKETS` are the breaker type's capacities; a snapshot decodes
/// whatever it lists, and restoring refuses one that holds more than the type
/// can. `DURATIONS` is the breaker type's third capacity, the calls whose
/// durations it keeps: the record holds no count window's durations (a
/// breaker restored from it does not know them until those calls have left
/// its window), so the parameter only names the type it restores into, and
/// the record is the same for any `DURATIONS`. Instants are the breaker's own (time since the origin its driver
/// picked): a driver restoring in another process maps them to its clock as it
/// does every other instant it passes in.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use core::time::Duration;
/// use retry_core::{BasicRule, Admission, BreakerConfig, BreakerSnapshot, CallOutcome, CircuitBreaker, Instant};
///
/// let mut breaker = CircuitBreaker::<0, 0>::new(BreakerConfig::basic(BasicRule {
///     failure_threshold: 1,
///     open_duration: Duration::from_secs(30),
///     success_threshold: 1,
/// })?)?;
/// let t = Instant::from_secs(5);
/// let Admission::Admitted { permit, .. } = breaker.request(t) else { unreachable!() };
/// let _ = breaker.record(permit, CallOutcome::failure(Duration::from_millis(3)), t);
/// // A serverless function saves its open breaker and the next one starts from it.
/// let text = serde_json::to_string(&breaker.snapshot()).unwrap();
/// let snapshot: BreakerSnapshot<0, 0> = serde_json::from_str(&text).unwrap();
/// let restored = CircuitBreaker::restore(&snapshot)?;
/// assert_eq!(restored.open_until(), Some(Instant::from_secs(35)));
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BreakerSnapshot<
    const WORDS: usize = 2,
    const BUCKETS: usize = 0,
    const DURATIONS: usize = 0,
> {
    version: u32,
    config: ConfigRecord,
    state: StateRecord,
    epoch: u32,
    reopens: u32,
    consecutive_failures: u32,
    /// Calls rejected since the breaker was built or last reset (before
    /// version 2: since it was built).
    rejected: u64,
    window: WindowRecord<WORDS, BUCKETS>,
    // Version 2's fields come last, so that a version 1 snapshot in a format
    // that lists fields by position (postcard) still reads: it ends here.
    /// Calls rejected since the breaker entered its state (a version 1
    /// snapshot restores with none).
    rejected_in_state: u64,
    /// The durations of a time window's buckets, in the order of its
    /// buckets, added up in nanoseconds (`None`: not known). Empty for other
    /// windows, and in a version 1 snapshot (the buckets' durations are then
    /// not known until they leave the window).
    bucket_nanos: Bounded<Option<u64>, BUCKETS>,
    /// The breaker type it restores into (not part of the record).
    #[cfg_attr(feature = "serde", serde(skip))]
    restores_into: PhantomData<[(); DURATIONS]>,
}

/// Every field of a breaker config, plainly (rates in basis points).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct ConfigRecord {
    failure_threshold: Option<u32>,
    failure_rate: Option<u16>,
    slow_call_rate: Option<u16>,
    slow_call_duration: Duration,
    window: Option<ShapeRecord>,
    minimum_calls: u32,
    open_backoff: CurveRecord,
    max_open_duration: Duration,
    open_jitter: JitterRecord,
    seed: u64,
    half_open_permits: u32,
    success_threshold: u32,
    /// `None`: the consecutive verdict; `Some(n)`: rates over `n` probes.
    rates_over_probes: Option<u32>,
    max_half_open_wait: Option<Duration>,
    close_after_half_open_wait: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
enum ShapeRecord {
    Count { calls: u16 },
    Time { length: Duration, buckets: u16 },
}

/// Calls, failures, slow calls, slow failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct CountsRecord {
    calls: u32,
    failures: u32,
    slow: u32,
    slow_failures: u32,
}

impl From<WindowStats> for CountsRecord {
    fn from(w: WindowStats) -> Self {
        CountsRecord {
            calls: w.calls,
            failures: w.failures,
            slow: w.slow,
            slow_failures: w.slow_failures,
        }
    }
}

impl CountsRecord {
    fn stats(self, field: &'static str) -> Result<WindowStats, SnapshotError> {
        consistent(
            self.failures <= self.calls
                && self.slow <= self.calls
                && self.slow_failures <= self.failures.min(self.slow),
            field,
            "more failures or slow calls than calls, or more slow failures than either",
        )?;
        Ok(WindowStats {
            calls: self.calls,
            failures: self.failures,
            slow: self.slow,
            slow_failures: self.slow_failures,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
enum StateRecord {
    Closed,
    Open {
        until: Instant,
    },
    HalfOpen {
        in_flight: u32,
        admitted: u32,
        reported: CountsRecord,
        deadline: Option<Instant>,
    },
    ForcedOpen,
    Disabled,
    MetricsOnly,
}

/// One bucket of a time window: its number (time since the origin divided by
/// the bucket length) and its counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct BucketRecord {
    number: u64,
    counts: CountsRecord,
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
enum WindowRecord<const WORDS: usize, const BUCKETS: usize> {
    /// No window.
    None,
    /// The last `calls` calls, oldest first: bit `i` of the words (64 to a
    /// word, least significant first) is the `i`-th oldest call.
    Count {
        calls: u16,
        failed: Bounded<u64, WORDS>,
        slow: Bounded<u64, WORDS>,
    },
    /// The buckets that hold calls.
    Time {
        buckets: Bounded<BucketRecord, BUCKETS>,
    },
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    BreakerSnapshot<WORDS, BUCKETS, DURATIONS>
{
    /// The format version this build writes. It reads this one and version
    /// 1, which had no count of the calls rejected in the current state and no
    /// durations in a time window's buckets (both restore as unknown: the
    /// count at zero, the durations as not known until those buckets leave
    /// the window), and counted rejected calls since the breaker was built
    /// (version 2: since it was built or last reset).
    pub const VERSION: u32 = 2;
    /// The oldest format version this build reads.
    pub const OLDEST_VERSION: u32 = 1;

    /// The format version of this snapshot.
    #[must_use]
    pub const fn version(&self) -> u32 {
        self.version
    }
}

impl ConfigRecord {
    fn of(c: &BreakerConfig) -> ConfigRecord {
        ConfigRecord {
            failure_threshold: c.failure_threshold(),
            failure_rate: c.failure_rate().map(Rate::basis_points),
            slow_call_rate: c.slow_call_rate().map(Rate::basis_points),
            slow_call_duration: c.slow_call_duration(),
            window: c.window().map(|w| match w {
                Window::Count { calls } => ShapeRecord::Count { calls },
                Window::Time { length, buckets } => ShapeRecord::Time { length, buckets },
            }),
            minimum_calls: c.minimum_calls(),
            open_backoff: c.open_backoff().into(),
            max_open_duration: c.max_open_duration(),
            open_jitter: c.open_jitter().into(),
            seed: c.seed(),
            half_open_permits: c.half_open_permits(),
            success_threshold: c.success_threshold(),
            rates_over_probes: match c.half_open_verdict() {
                HalfOpenVerdict::Consecutive => None,
                HalfOpenVerdict::Rates { probes } => Some(probes),
            },
            max_half_open_wait: c.max_half_open_wait(),
            close_after_half_open_wait: c.half_open_timeout() == HalfOpenTimeout::Close,
        }
    }

    fn config(&self) -> Result<BreakerConfig, SnapshotError> {
        BreakerConfig::builder()
            .failure_threshold(self.failure_threshold)
            .failure_rate(self.failure_rate.map(Rate::from_basis_points))
            .slow_call_rate(self.slow_call_rate.map(Rate::from_basis_points))
            .slow_call_duration(self.slow_call_duration)
            .window(self.window.map(|w| match w {
                ShapeRecord::Count { calls } => Window::Count { calls },
                ShapeRecord::Time { length, buckets } => Window::Time { length, buckets },
            }))
            .minimum_calls(self.minimum_calls)
            .open_backoff(self.open_backoff.into())
            .max_open_duration(self.max_open_duration)
            .open_jitter(self.open_jitter.into())
            .seed(self.seed)
            .half_open_permits(self.half_open_permits)
            .success_threshold(self.success_threshold)
            .half_open_verdict(match self.rates_over_probes {
                None => HalfOpenVerdict::Consecutive,
                Some(probes) => HalfOpenVerdict::Rates { probes },
            })
            .max_half_open_wait(self.max_half_open_wait)
            .on_half_open_timeout(if self.close_after_half_open_wait {
                HalfOpenTimeout::Close
            } else {
                HalfOpenTimeout::Reopen
            })
            .build()
            .map_err(SnapshotError::Breaker)
    }
}

/// Bit `i` of `words`, least significant first.
fn word_bit(words: &[u64], i: u16) -> bool {
    words
        .get(usize::from(i / 64))
        .is_some_and(|w| w >> (i % 64) & 1 == 1)
}

impl<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>
    CircuitBreaker<WORDS, BUCKETS, DURATIONS>
{
    /// The breaker's state as a [`BreakerSnapshot`]: restored with
    /// [`CircuitBreaker::restore`], it answers every later input as this breaker
    /// would. Permits in flight are not part of it: a driver that restores a
    /// breaker hands back no permit issued before the snapshot (a half-open probe
    /// in flight then never reports, which the half-open maximum wait is for).
    #[must_use]
    pub fn snapshot(&self) -> BreakerSnapshot<WORDS, BUCKETS, DURATIONS> {
        let state = match self.mode {
            Mode::Closed => StateRecord::Closed,
            Mode::Open { until, .. } => StateRecord::Open { until },
            Mode::HalfOpen(p) => StateRecord::HalfOpen {
                in_flight: p.in_flight,
                admitted: p.admitted(),
                reported: p.results.into(),
                deadline: p.deadline(),
            },
            Mode::ForcedOpen => StateRecord::ForcedOpen,
            Mode::Disabled => StateRecord::Disabled,
            Mode::MetricsOnly => StateRecord::MetricsOnly,
        };
        let mut bucket_nanos = Bounded::<Option<u64>, BUCKETS>::new();
        let window = match self.config.window() {
            None => WindowRecord::None,
            Some(Window::Count { calls: size }) => {
                let len = self.calls.len();
                let mut failed = Bounded::<u64, WORDS>::new();
                let mut slow = Bounded::<u64, WORDS>::new();
                let words = usize::from(len).div_ceil(64);
                for w in 0..words {
                    let mut f = 0u64;
                    let mut s = 0u64;
                    for b in 0..64u16 {
                        let i = u16::try_from(w.saturating_mul(64))
                            .unwrap_or(u16::MAX)
                            .saturating_add(b);
                        if let Some((is_failed, is_slow)) = self.calls.get(size, i) {
                            f |= u64::from(is_failed) << b;
                            s |= u64::from(is_slow) << b;
                        }
                    }
                    failed.push(f);
                    slow.push(s);
                }
                WindowRecord::Count {
                    calls: len,
                    failed,
                    slow,
                }
            }
            Some(Window::Time { .. }) => {
                let mut buckets = Bounded::<BucketRecord, BUCKETS>::new();
                for (number, counts, nanos) in self.buckets.buckets() {
                    buckets.push(BucketRecord {
                        number,
                        counts: counts.into(),
                    });
                    bucket_nanos.push(nanos);
                }
                WindowRecord::Time { buckets }
            }
        };
        BreakerSnapshot {
            version: BreakerSnapshot::<WORDS, BUCKETS, DURATIONS>::VERSION,
            config: ConfigRecord::of(&self.config),
            state,
            epoch: self.epoch,
            reopens: self.reopens,
            consecutive_failures: self.consecutive_failures,
            rejected: self.rejected,
            window,
            rejected_in_state: self.rejected_calls_in_state(),
            bucket_nanos,
            restores_into: PhantomData,
        }
    }

    /// Rebuilds a breaker from `snapshot`, after checking it.
    ///
    /// # Errors
    /// A [`SnapshotError`] naming the field: a `version` this build does not
    /// read; a `config`
    /// that fails validation or does not fit this type
    /// ([`SnapshotError::Breaker`]); a window of another kind than the config's,
    /// more calls than the window holds, more words or buckets than this type
    /// holds, counts that do not add up; a state that cannot hold with its fields
    /// (probe counts that do not add up or exceed their limits, a failure streak
    /// that should have tripped the breaker, re-opens outside open and
    /// half-open, calls rejected in a state that admits every call or more
    /// of them in the state than in all); a field of a later version than the
    /// snapshot's (calls rejected in the state, or bucket durations, in a
    /// version 1 snapshot); bucket durations not listed for every bucket of a
    /// time window (version 2 lists one for each, `None` when not known).
    pub fn restore(
        snapshot: &BreakerSnapshot<WORDS, BUCKETS, DURATIONS>,
    ) -> Result<Self, SnapshotError> {
        let s = snapshot;
        let versions = BreakerSnapshot::<WORDS, BUCKETS, DURATIONS>::OLDEST_VERSION
            ..=BreakerSnapshot::<WORDS, BUCKETS, DURATIONS>::VERSION;
        if !versions.contains(&s.version) {
            return Err(SnapshotError::UnsupportedVersion {
                found: s.version,
                supported: BreakerSnapshot::<WORDS, BUCKETS, DURATIONS>::VERSION,
            });
        }
        if s.version < 2 {
            // Version 1 kept neither of version 2's fields: a version 1
            // record that lists one was not written by any breaker.
            consistent(
                s.rejected_in_state == 0,
                "rejected_in_state",
                "calls rejected in the state, which a version 1 snapshot does not count",
            )?;
            consistent(
                s.bucket_nanos.given == 0,
                "bucket_nanos",
                "bucket durations, which a version 1 snapshot does not keep",
            )?;
        }
        let config = s.config.config()?;
        let mut breaker = CircuitBreaker::new(config).map_err(SnapshotError::Breaker)?;
        let rejected = s.rejected_in_state;
        let rejected_before = s.rejected.saturating_sub(rejected);
        consistent(
            rejected <= s.rejected,
            "rejected_in_state",
            "more calls rejected in the state than in all",
        )?;
        let admits_every_call = matches!(
            s.state,
            StateRecord::Closed | StateRecord::Disabled | StateRecord::MetricsOnly
        );
        consistent(
            rejected == 0 || !admits_every_call,
            "rejected_in_state",
            "calls rejected in a state that admits every call",
        )?;
        breaker.mode = match s.state {
            StateRecord::Closed => Mode::Closed,
            StateRecord::Open { until } => Mode::Open { until },
            StateRecord::ForcedOpen => Mode::ForcedOpen,
            StateRecord::Disabled => Mode::Disabled,
            StateRecord::MetricsOnly => Mode::MetricsOnly,
            StateRecord::HalfOpen {
                in_flight,
                admitted,
                reported,
                deadline,
            } => {
                let results = reported.stats("state.reported")?;
                consistent(
                    u64::from(admitted)
                        == u64::from(in_flight).saturating_add(u64::from(results.calls)),
                    "state.admitted",
                    "the probes admitted are not those in flight plus those reported",
                )?;
                if in_flight > config.half_open_permits() {
                    return Err(SnapshotError::AboveMaximum {
                        field: "state.in_flight",
                        value: u64::from(in_flight),
                        maximum: u64::from(config.half_open_permits()),
                    });
                }
                match config.half_open_verdict() {
                    HalfOpenVerdict::Consecutive => {
                        consistent(
                            results.failures == 0
                                && (results.slow == 0 || config.slow_call_rate().is_none()),
                            "state.reported",
                            "a failed (or slow) probe ends the half-open period",
                        )?;
                        consistent(
                            results.calls < config.success_threshold(),
                            "state.reported",
                            "enough good probes to close the breaker",
                        )?;
                    }
                    HalfOpenVerdict::Rates { probes } => {
                        if admitted > probes {
                            return Err(SnapshotError::AboveMaximum {
                                field: "state.admitted",
                                value: u64::from(admitted),
                                maximum: u64::from(probes),
                            });
                        }
                        consistent(
                            results.calls < probes,
                            "state.reported",
                            "every probe reported: the verdict is due",
                        )?;
                    }
                }
                // A half-open period has a deadline exactly when the config
                // gives it a maximum wait: without one, a breaker whose
                // probes never report would stay half-open for good.
                consistent(
                    deadline.is_some() == config.max_half_open_wait().is_some(),
                    "state.deadline",
                    "a half-open deadline without a maximum wait in the config, or a \
                     maximum wait without its deadline",
                )?;
                Mode::HalfOpen(Probing::new(in_flight, results, deadline))
            }
        };
        let open_or_probing = matches!(breaker.mode, Mode::Open { .. } | Mode::HalfOpen(_));
        consistent(
            s.reopens == 0 || open_or_probing,
            "reopens",
            "re-opens counted outside open and half-open",
        )?;
        consistent(
            s.consecutive_failures == 0 || !open_or_probing,
            "consecutive_failures",
            "a failure streak while open or half-open",
        )?;
        if breaker.mode == Mode::Closed {
            if let Some(n) = config.failure_threshold() {
                consistent(
                    s.consecutive_failures < n,
                    "consecutive_failures",
                    "a streak that reaches the threshold would have tripped the breaker",
                )?;
            }
        }
        breaker.epoch = s.epoch;
        breaker.reopens = s.reopens;
        breaker.consecutive_failures = s.consecutive_failures;
        breaker.rejected = s.rejected;
        breaker.rejected_at_entry = rejected_before;
        s.bucket_nanos.fits("bucket_nanos")?;
        consistent(
            s.bucket_nanos.given == 0 || matches!(s.window, WindowRecord::Time { .. }),
            "bucket_nanos",
            "durations listed for a window without buckets",
        )?;
        match (config.window(), &s.window) {
            (None, WindowRecord::None) => {}
            (
                Some(Window::Count { calls: size }),
                WindowRecord::Count {
                    calls,
                    failed,
                    slow,
                },
            ) => {
                failed.fits("window.failed")?;
                slow.fits("window.slow")?;
                if *calls > size {
                    return Err(SnapshotError::AboveMaximum {
                        field: "window.calls",
                        value: u64::from(*calls),
                        maximum: u64::from(size),
                    });
                }
                let past = |words: &[u64]| {
                    (0..u16::try_from(words.len().saturating_mul(64)).unwrap_or(u16::MAX))
                        .any(|i| i >= *calls && word_bit(words, i))
                };
                consistent(
                    !past(failed.kept()) && !past(slow.kept()),
                    "window.failed",
                    "calls marked past the window's calls",
                )?;
                let mut ring = CountRing::<WORDS>::new();
                for i in 0..*calls {
                    ring.push(size, word_bit(failed.kept(), i), word_bit(slow.kept(), i));
                }
                breaker.calls = ring;
                // A snapshot keeps no call's duration: those of the calls
                // restored are not known until they leave the window.
                breaker.durations.forget(*calls);
            }
            (Some(Window::Time { buckets: size, .. }), WindowRecord::Time { buckets }) => {
                buckets.fits("window.buckets")?;
                if buckets.given > usize::from(size) {
                    return Err(SnapshotError::AboveMaximum {
                        field: "window.buckets",
                        value: u64::try_from(buckets.given).unwrap_or(u64::MAX),
                        maximum: u64::from(size),
                    });
                }
                let mut ring = BucketRing::<BUCKETS>::new();
                let mut slots_taken = [false; BUCKETS];
                // A version 1 snapshot lists no durations (not known); a
                // later one lists one for every bucket (`None`: not known).
                let nanos = s.bucket_nanos.kept();
                consistent(
                    s.version < 2 || nanos.len() == buckets.kept().len(),
                    "bucket_nanos",
                    "durations not listed for every bucket",
                )?;
                for (i, b) in buckets.kept().iter().enumerate() {
                    let counts = b.counts.stats("window.buckets")?;
                    consistent(
                        counts.calls > 0,
                        "window.buckets",
                        "a bucket listed with no calls",
                    )?;
                    let slot = b
                        .number
                        .checked_rem(u64::from(size))
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| slots_taken.get_mut(i));
                    match slot {
                        Some(taken) if !*taken => *taken = true,
                        _ => {
                            return Err(SnapshotError::Inconsistent {
                                field: "window.buckets",
                                reason: "two buckets in the same place of the ring",
                            })
                        }
                    }
                    consistent(
                        ring.put(b.number, size, counts, nanos.get(i).copied().flatten()),
                        "window.buckets",
                        "a bucket outside the ring",
                    )?;
                }
                breaker.buckets = ring;
            }
            _ => {
                return Err(SnapshotError::Inconsistent {
                    field: "window",
                    reason: "a window of another kind than the config's",
                })
            }
        }
        Ok(breaker)
    }
}

/// Reading a snapshot of either version: version 2 added two fields at the
/// end, which a version 1 snapshot lacks. In a format that lists fields by
/// position (postcard), the version, read first, says whether they follow; in
/// one that names them (JSON), the version says whether they must be there (a
/// version 1 record that lists them anyway is refused by `restore` unless
/// they hold what version 1 means: none).
#[cfg(feature = "serde")]
mod read {
    use core::fmt;
    use core::marker::PhantomData;

    use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    use super::{Bounded, BreakerSnapshot, ConfigRecord, StateRecord, WindowRecord};

    const FIELDS: &[&str] = &[
        "version",
        "config",
        "state",
        "epoch",
        "reopens",
        "consecutive_failures",
        "rejected",
        "window",
        "rejected_in_state",
        "bucket_nanos",
    ];

    #[derive(serde::Deserialize)]
    #[serde(field_identifier, rename_all = "snake_case")]
    enum Field {
        Version,
        Config,
        State,
        Epoch,
        Reopens,
        ConsecutiveFailures,
        Rejected,
        Window,
        RejectedInState,
        BucketNanos,
        #[serde(other)]
        Other,
    }

    struct Fields<const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize>(
        PhantomData<[(); WORDS]>,
    );

    impl<'de, const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> Visitor<'de>
        for Fields<WORDS, BUCKETS, DURATIONS>
    {
        type Value = BreakerSnapshot<WORDS, BUCKETS, DURATIONS>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a circuit breaker snapshot")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            macro_rules! field {
                ($i:expr) => {
                    seq.next_element()?
                        .ok_or_else(|| de::Error::invalid_length($i, &self))?
                };
            }
            let version: u32 = field!(0);
            let config: ConfigRecord = field!(1);
            let state: StateRecord = field!(2);
            let epoch: u32 = field!(3);
            let reopens: u32 = field!(4);
            let consecutive_failures: u32 = field!(5);
            let rejected: u64 = field!(6);
            let window: WindowRecord<WORDS, BUCKETS> = field!(7);
            // A version 1 snapshot ends here; a later one carries version
            // 2's fields (an unknown version is refused by `restore`).
            let (rejected_in_state, bucket_nanos) = if version >= 2 {
                (field!(8), field!(9))
            } else {
                (0, Bounded::new())
            };
            Ok(BreakerSnapshot {
                version,
                config,
                state,
                epoch,
                reopens,
                consecutive_failures,
                rejected,
                window,
                rejected_in_state,
                bucket_nanos,
                restores_into: PhantomData,
            })
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut version = None;
            let mut config = None;
            let mut state = None;
            let mut epoch = None;
            let mut reopens = None;
            let mut consecutive_failures = None;
            let mut rejected = None;
            let mut window = None;
            let mut rejected_in_state = None;
            let mut bucket_nanos = None;
            fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
                map: &mut A,
                slot: &mut Option<T>,
                name: &'static str,
            ) -> Result<(), A::Error> {
                if slot.is_some() {
                    return Err(de::Error::duplicate_field(name));
                }
                *slot = Some(map.next_value()?);
                Ok(())
            }
            while let Some(key) = map.next_key::<Field>()? {
                match key {
                    Field::Version => once(&mut map, &mut version, "version")?,
                    Field::Config => once(&mut map, &mut config, "config")?,
                    Field::State => once(&mut map, &mut state, "state")?,
                    Field::Epoch => once(&mut map, &mut epoch, "epoch")?,
                    Field::Reopens => once(&mut map, &mut reopens, "reopens")?,
                    Field::ConsecutiveFailures => {
                        once(&mut map, &mut consecutive_failures, "consecutive_failures")?;
                    }
                    Field::Rejected => once(&mut map, &mut rejected, "rejected")?,
                    Field::Window => once(&mut map, &mut window, "window")?,
                    Field::RejectedInState => {
                        once(&mut map, &mut rejected_in_state, "rejected_in_state")?;
                    }
                    Field::BucketNanos => once(&mut map, &mut bucket_nanos, "bucket_nanos")?,
                    Field::Other => {
                        let _ = map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            let version: u32 = version.ok_or_else(|| de::Error::missing_field("version"))?;
            // Version 2 always writes its two fields: a record without them
            // is refused here, as postcard refuses one that stops short. (A
            // version this build does not know is left to `restore`, which
            // refuses it as such.)
            if version == 2 {
                if rejected_in_state.is_none() {
                    return Err(de::Error::missing_field("rejected_in_state"));
                }
                if bucket_nanos.is_none() {
                    return Err(de::Error::missing_field("bucket_nanos"));
                }
            }
            Ok(BreakerSnapshot {
                version,
                config: config.ok_or_else(|| de::Error::missing_field("config"))?,
                state: state.ok_or_else(|| de::Error::missing_field("state"))?,
                epoch: epoch.ok_or_else(|| de::Error::missing_field("epoch"))?,
                reopens: reopens.ok_or_else(|| de::Error::missing_field("reopens"))?,
                consecutive_failures: consecutive_failures
                    .ok_or_else(|| de::Error::missing_field("consecutive_failures"))?,
                rejected: rejected.ok_or_else(|| de::Error::missing_field("rejected"))?,
                window: window.ok_or_else(|| de::Error::missing_field("window"))?,
                rejected_in_state: rejected_in_state.unwrap_or(0),
                bucket_nanos: bucket_nanos.unwrap_or_else(Bounded::new),
                restores_into: PhantomData,
            })
        }
    }

    impl<'de, const WORDS: usize, const BUCKETS: usize, const DURATIONS: usize> Deserialize<'de>
        for BreakerSnapshot<WORDS, BUCKETS, DURATIONS>
    {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_struct(
                "BreakerSnapshot",
                FIELDS,
                Fields::<WORDS, BUCKETS, DURATIONS>(PhantomData),
            )
        }
    }
}
