//! The hedge machine and its latency histogram against reference models.
//!
//! The histogram model restates the documented bucket layout (one bucket below
//! 2^10 ns, four equal buckets per doubling up to 2^40 ns, one above), the
//! halving rule and the percentile rule (the upper edge of the bucket holding the
//! sample of rank ⌈p/100 × count⌉, no more than the longest latency), and keeps
//! its own counts. The machine model restates the hedging rules phase by phase:
//! when a copy is due in each mode, what a failure, a hint, a refusal, a
//! rejection, a win, a timeout and a cancellation do, and which events each
//! phase accepts. The one value it cannot restate exactly, a jittered hedge
//! delay, it bounds by the jitter kind's formula and then reads back through
//! the machine's public getter.

use core::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use retry_core::{
    Copies, Failure, FailureKind, GiveUpReason, HedgeAction, HedgeDelay, HedgeEvent, HedgeMachine,
    HedgeMode, HedgePhase, HedgePolicy, Hint, Instant, Jitter, LatencyHistogram, WaitReason,
    MAX_COPIES,
};

use crate::shared::{ensure, rarely, scaled, Violation};

/// The name of the fuzz target and of its corpus directory.
pub const TARGET: &str = "hedge";

/// Events per input.
const STEPS: usize = 256;

// ---------------------------------------------------------------------------
// The histogram model
// ---------------------------------------------------------------------------

/// Latencies as the documentation describes their counting.
#[derive(Clone, Debug)]
struct HistogramModel {
    counts: Vec<u32>,
    memory: u32,
    longest: Option<u64>,
}

impl HistogramModel {
    /// One bucket below 2^10 ns, 30 doublings of four, one from 2^40 ns up.
    const BUCKETS: usize = 1 + 30 * 4 + 1;

    fn new(memory: u16) -> Self {
        HistogramModel {
            counts: vec![0; Self::BUCKETS],
            memory: u32::from(memory.max(2)),
            longest: None,
        }
    }

    /// The bucket of a latency, found by walking the doublings.
    fn bucket(nanos: u64) -> usize {
        if nanos < 1024 {
            return 0;
        }
        let mut low: u64 = 1024;
        for doubling in 0..30usize {
            let high = low.saturating_mul(2);
            if nanos < high {
                let width = low / 4;
                let quarter = nanos.saturating_sub(low).checked_div(width).unwrap_or(3);
                let quarter = usize::try_from(quarter).unwrap_or(3).min(3);
                return doubling
                    .saturating_mul(4)
                    .saturating_add(quarter)
                    .saturating_add(1);
            }
            low = high;
        }
        Self::BUCKETS - 1
    }

    /// The first latency past bucket `index` (`None` for the last).
    fn upper_edge(index: usize) -> Option<u64> {
        if index == 0 {
            return Some(1024);
        }
        if index >= Self::BUCKETS - 1 {
            return None;
        }
        let doubling = u32::try_from(index.checked_sub(1)?.checked_div(4)?).ok()?;
        let quarter = u64::try_from(index.checked_sub(1)?.checked_rem(4)?).ok()?;
        let low = 1024u64.checked_shl(doubling)?;
        low.checked_add(quarter.checked_add(1)?.checked_mul(low.checked_div(4)?)?)
    }

    fn count(&self) -> u32 {
        self.counts.iter().sum()
    }

    fn record(&mut self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.longest = Some(self.longest.map_or(nanos, |l| l.max(nanos)));
        if let Some(c) = self.counts.get_mut(Self::bucket(nanos)) {
            *c = c.saturating_add(1);
        }
        if self.count() >= self.memory {
            for c in &mut self.counts {
                *c /= 2;
            }
        }
    }

    fn percentile(&self, p: f64) -> Option<Duration> {
        let count = self.count();
        if count == 0 || !(p > 0.0 && p <= 100.0) {
            return None;
        }
        let rank = (f64::from(count) * p / 100.0).ceil().max(1.0);
        let mut seen = 0u32;
        let longest = self.longest.unwrap_or(0);
        for (index, c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(*c);
            if f64::from(seen) >= rank {
                let edge = Self::upper_edge(index).unwrap_or(u64::MAX);
                return Some(Duration::from_nanos(edge.min(longest)));
            }
        }
        Some(Duration::from_nanos(longest))
    }

    /// The hedge delay `delay` resolves to with these latencies.
    fn resolve(&self, delay: HedgeDelay) -> Duration {
        match delay {
            HedgeDelay::Fixed(d) => d,
            HedgeDelay::Percentile {
                percentile,
                min_samples,
                fallback,
            } => {
                if self.count() == 0 || self.count() < min_samples {
                    fallback
                } else {
                    self.percentile(percentile).unwrap_or(fallback)
                }
            }
        }
    }
}

/// Records the same latencies into both histograms and compares every reading.
fn check_histogram(
    u: &mut Unstructured<'_>,
    policy: &HedgePolicy,
) -> Result<Option<(LatencyHistogram, HistogramModel)>, Violation> {
    let Ok(memory) = u.arbitrary::<u16>() else {
        return Ok(None);
    };
    let memory = if memory % 2 == 0 {
        LatencyHistogram::DEFAULT_MEMORY
    } else {
        memory % 64
    };
    let mut real = LatencyHistogram::with_memory(memory);
    let mut model = HistogramModel::new(memory);
    let samples = u.int_in_range(0..=80u8).unwrap_or(0);
    for step in 0..usize::from(samples) {
        let latency = match u.int_in_range(0..=7u8) {
            Ok(0) => u.arbitrary::<Duration>().unwrap_or(Duration::ZERO),
            Ok(1) => Duration::from_nanos(u.arbitrary::<u16>().unwrap_or(0).into()),
            Ok(_) => Duration::from_millis(u.int_in_range(0..=1_000u64).unwrap_or(0)),
            Err(_) => break,
        };
        real.record(latency);
        model.record(latency);
        ensure(
            real.count() == model.count(),
            TARGET,
            step,
            "histogram count differs from the model",
        )?;
        ensure(
            real.count() < u32::from(real.memory()),
            TARGET,
            step,
            "histogram holds its memory's worth of samples",
        )?;
        let counts_agree = real
            .bucket_counts()
            .iter()
            .zip(&model.counts)
            .all(|(a, b)| u32::from(*a) == *b);
        ensure(
            counts_agree && real.bucket_counts().len() == model.counts.len(),
            TARGET,
            step,
            "histogram buckets differ from the model",
        )?;
    }
    let mut ps = vec![
        0.1,
        50.0,
        90.0,
        95.0,
        99.0,
        99.9,
        100.0,
        0.0,
        100.5,
        f64::NAN,
    ];
    if let HedgeDelay::Percentile { percentile, .. } = policy.delay() {
        ps.push(percentile);
    }
    for p in ps {
        ensure(
            real.percentile(p) == model.percentile(p),
            TARGET,
            0,
            "histogram percentile differs from the model",
        )?;
    }
    ensure(
        real.max() == model.longest.map(Duration::from_nanos),
        TARGET,
        0,
        "histogram maximum differs from the model",
    )?;
    for index in 0..HistogramModel::BUCKETS + 2 {
        ensure(
            LatencyHistogram::bucket_upper_edge(index) == HistogramModel::upper_edge(index),
            TARGET,
            0,
            "bucket edge differs from the documented layout",
        )?;
    }
    Ok(Some((real, model)))
}

// ---------------------------------------------------------------------------
// The machine model
// ---------------------------------------------------------------------------

/// An answer as the model writes it: an action, with a give-up spelled out
/// field by field (outside retry-core a `GiveUp` can be read but not built).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Answer {
    Act(HedgeAction),
    GiveUp {
        reason: GiveUpReason,
        attempts: u32,
        last_failure: Option<FailureKind>,
    },
}

impl From<HedgeAction> for Answer {
    fn from(action: HedgeAction) -> Self {
        match action {
            HedgeAction::GiveUp(g) => Answer::GiveUp {
                reason: g.reason,
                attempts: g.attempts,
                last_failure: g.last_failure,
            },
            other => Answer::Act(other),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Stage {
    Idle,
    Launching(u32),
    Withdrawing(u32),
    Waiting {
        until: Option<Instant>,
        reason: WaitReason,
    },
    Cancelling {
        copies: Copies,
        then: Answer,
    },
    Finished(Answer),
}

/// The rules, restated.
#[derive(Clone, Debug)]
struct Model {
    policy: HedgePolicy,
    delay: Duration,
    stage: Stage,
    start: Instant,
    last_now: Instant,
    running: Vec<u32>,
    sent: u32,
    sent_at: Vec<Instant>,
    due: Option<Instant>,
    due_from_hint: bool,
    stopped_by: Option<GiveUpReason>,
    last_failure: Option<FailureKind>,
}

/// What the model expects of one event.
enum Expect {
    Refused(Answer),
    Accepted(Answer),
}

impl Model {
    fn new(policy: HedgePolicy, delay: Duration) -> Self {
        Model {
            policy,
            delay,
            stage: Stage::Idle,
            start: Instant::ORIGIN,
            last_now: Instant::ORIGIN,
            running: Vec::new(),
            sent: 0,
            sent_at: Vec::new(),
            due: None,
            due_from_hint: false,
            stopped_by: None,
            last_failure: None,
        }
    }

    /// Copies the call may send: one for a non-idempotent operation that the
    /// caller did not allow to be hedged.
    fn allowed(&self) -> u32 {
        if self.policy.is_idempotent() || self.policy.hedges_non_idempotent() {
            self.policy.max_attempts()
        } else {
            1
        }
    }

    fn in_flight_limit(&self) -> usize {
        let n = self.policy.max_in_flight().min(self.policy.max_attempts());
        usize::try_from(n).unwrap_or(usize::MAX)
    }

    fn deadline(&self) -> Option<Instant> {
        match self.stage {
            Stage::Idle => None,
            _ => self.start.checked_add(self.policy.timeout()?),
        }
    }

    fn running_set(&self) -> Copies {
        self.running.iter().fold(Copies::EMPTY, |s, c| s.with(*c))
    }

    fn pending(&self) -> Answer {
        match self.stage {
            Stage::Idle => Answer::GiveUp {
                reason: GiveUpReason::NotStarted,
                attempts: 0,
                last_failure: None,
            },
            Stage::Launching(copy) => Answer::Act(self.launch(copy)),
            Stage::Withdrawing(copy) => Answer::Act(HedgeAction::Withdraw { copy }),
            Stage::Waiting { until, reason } => Answer::Act(HedgeAction::Wait { until, reason }),
            Stage::Cancelling { copies, .. } => Answer::Act(HedgeAction::Cancel { copies }),
            Stage::Finished(answer) => answer,
        }
    }

    fn phase(&self) -> HedgePhase {
        match self.stage {
            Stage::Idle => HedgePhase::Idle,
            Stage::Launching(_) => HedgePhase::Launching,
            Stage::Withdrawing(_) => HedgePhase::Withdrawing,
            Stage::Waiting { .. } => HedgePhase::Waiting,
            Stage::Cancelling { .. } => HedgePhase::Cancelling,
            Stage::Finished(_) => HedgePhase::Finished,
        }
    }

    fn launch(&self, copy: u32) -> HedgeAction {
        HedgeAction::Launch {
            copy,
            replays_non_idempotent: copy > 1 && !self.policy.is_idempotent(),
        }
    }

    fn failed_call(&self, reason: GiveUpReason) -> Answer {
        Answer::GiveUp {
            reason,
            attempts: self.sent,
            last_failure: self.last_failure,
        }
    }

    /// The call ends with `then`; the copies still running are cancelled first.
    fn close(&mut self, then: Answer) -> Answer {
        if self.running.is_empty() {
            self.stage = Stage::Finished(then);
            then
        } else {
            let copies = self.running_set();
            self.stage = Stage::Cancelling { copies, then };
            Answer::Act(HedgeAction::Cancel { copies })
        }
    }

    /// What happens now that something changed.
    fn next_move(&mut self, now: Instant) -> Answer {
        if let Some(end) = self.deadline() {
            if now >= end {
                let timeout = self.policy.timeout().unwrap_or_default();
                return self.close(self.failed_call(GiveUpReason::TimedOut { timeout }));
            }
        }
        let more = self.stopped_by.is_none() && self.sent < self.allowed();
        let due_now = self.due.is_some_and(|d| d <= now);
        if more && due_now && self.running.len() < self.in_flight_limit() {
            let copy = self.sent.saturating_add(1);
            if copy >= 2 && self.policy.uses_retry_budget() {
                self.stage = Stage::Withdrawing(copy);
                return Answer::Act(HedgeAction::Withdraw { copy });
            }
            self.stage = Stage::Launching(copy);
            return Answer::Act(self.launch(copy));
        }
        let later = if more {
            self.due.filter(|d| *d > now)
        } else {
            None
        };
        if later.is_none() && self.running.is_empty() {
            let reason = self.stopped_by.unwrap_or(GiveUpReason::Exhausted);
            let answer = self.failed_call(reason);
            self.stage = Stage::Finished(answer);
            return answer;
        }
        let hedge_reason = if self.due_from_hint {
            WaitReason::Hint
        } else {
            WaitReason::Hedge
        };
        let (until, reason) = match (later, self.deadline()) {
            (None, None) => (None, WaitReason::Answer),
            (None, Some(end)) => (Some(end), WaitReason::Timeout),
            (Some(due), None) => (Some(due), hedge_reason),
            (Some(due), Some(end)) if end <= due => (Some(end), WaitReason::Timeout),
            (Some(due), Some(_)) => (Some(due), hedge_reason),
        };
        self.stage = Stage::Waiting { until, reason };
        Answer::Act(HedgeAction::Wait { until, reason })
    }

    /// Bounds on the jittered delay before the next copy.
    fn jitter_bounds(&self) -> (Duration, Duration) {
        let d = self.delay;
        if self.policy.jitter() == Jitter::None {
            return (d, d);
        }
        // Jitter computes in u64 nanoseconds: a longer delay counts as
        // u64::MAX ns (about 584.5 years), and so does every result.
        let d = d.min(Duration::from_nanos(u64::MAX));
        let (lo, hi) = match self.policy.jitter() {
            Jitter::None => return (d, d),
            Jitter::Full => (0.0, 1.0),
            Jitter::Equal => (0.5, 1.0),
            Jitter::Subtract(f) => (1.0 - f, 1.0),
            Jitter::Add(f) => (1.0, 1.0 + f),
            Jitter::Spread(f) => (1.0 - f, 1.0 + f),
            Jitter::Decorrelated => (0.0, f64::MAX),
        };
        // Relative slack for float products on huge delays, a microsecond on small.
        let micro = Duration::from_micros(1);
        let top = Duration::from_nanos(u64::MAX);
        (
            scaled(d, lo * (1.0 - 1e-9)).saturating_sub(micro).min(top),
            scaled(d, hi * (1.0 + 1e-9)).saturating_add(micro).min(top),
        )
    }

    /// Copy `copy` was sent at `now`; in the latency mode the machine's next due
    /// time (read back through its getter) must lie within the jitter's bounds.
    fn sent_copy(
        &mut self,
        copy: u32,
        now: Instant,
        observed_due: Option<Instant>,
    ) -> Result<Answer, &'static str> {
        self.running.push(copy);
        self.sent = copy;
        self.sent_at.push(now);
        self.due_from_hint = false;
        self.due = match self.policy.mode() {
            HedgeMode::Fallback => None,
            HedgeMode::Parallel => Some(now),
            HedgeMode::Latency => {
                let (lo, hi) = self.jitter_bounds();
                let timed_out = self.deadline().is_some_and(|end| now >= end);
                if self.sent < self.allowed() && self.stopped_by.is_none() && !timed_out {
                    let Some(due) = observed_due else {
                        return Err("no next copy due in the latency mode");
                    };
                    let ok = due >= now.saturating_add(lo) && due <= now.saturating_add(hi);
                    if !ok {
                        return Err("hedge delay outside the jitter's bounds");
                    }
                    Some(due)
                } else {
                    // Nothing more will be sent (or the call is over): any value will do.
                    Some(now.saturating_add(lo))
                }
            }
        };
        Ok(self.next_move(now))
    }

    fn take_running(&mut self, copy: u32) -> bool {
        match self.running.iter().position(|c| *c == copy) {
            Some(i) => {
                self.running.remove(i);
                true
            }
            None => false,
        }
    }

    /// Applies `event` at `now` (already clamped).
    fn apply(
        &mut self,
        event: HedgeEvent,
        now: Instant,
        observed_due: Option<Instant>,
    ) -> Result<Expect, &'static str> {
        let refused = Expect::Refused(self.pending());
        let answer = match (self.stage, event) {
            (Stage::Idle, HedgeEvent::Start) => {
                self.start = now;
                self.due = Some(now);
                self.stage = Stage::Waiting {
                    until: None,
                    reason: WaitReason::Answer,
                };
                self.next_move(now)
            }
            (Stage::Idle, HedgeEvent::Cancelled) => {
                let answer = Answer::GiveUp {
                    reason: GiveUpReason::Cancelled,
                    attempts: 0,
                    last_failure: None,
                };
                self.stage = Stage::Finished(answer);
                answer
            }
            (Stage::Launching(copy), HedgeEvent::Launched { copy: c }) if c == copy => {
                self.sent_copy(copy, now, observed_due)?
            }
            (Stage::Launching(copy), HedgeEvent::Rejected { copy: c, until }) if c == copy => {
                let wait = until.map(|u| u.saturating_duration_since(now));
                self.stopped_by = Some(GiveUpReason::CircuitOpen { wait });
                self.next_move(now)
            }
            (Stage::Withdrawing(copy), HedgeEvent::Granted) => {
                if self.deadline().is_some_and(|end| now >= end) {
                    self.next_move(now)
                } else {
                    self.stage = Stage::Launching(copy);
                    Answer::Act(self.launch(copy))
                }
            }
            (Stage::Withdrawing(_), HedgeEvent::Refused) => {
                self.stopped_by = Some(GiveUpReason::RetryBudget);
                self.next_move(now)
            }
            (Stage::Waiting { .. }, HedgeEvent::Succeeded { copy }) if self.take_running(copy) => {
                let index = usize::try_from(copy.saturating_sub(1)).unwrap_or(usize::MAX);
                let sent = self.sent_at.get(index).copied().unwrap_or(now);
                let done = Answer::Act(HedgeAction::Done {
                    copy,
                    launched: self.sent,
                    latency: now.saturating_duration_since(sent),
                });
                self.close(done)
            }
            (Stage::Waiting { .. }, HedgeEvent::Failed { copy, failure })
                if self.take_running(copy) =>
            {
                self.failed(failure, now)
            }
            (Stage::Waiting { .. }, HedgeEvent::Woke) => self.next_move(now),
            (
                Stage::Launching(_) | Stage::Withdrawing(_) | Stage::Waiting { .. },
                HedgeEvent::Cancelled,
            ) => self.close(self.failed_call(GiveUpReason::Cancelled)),
            (Stage::Cancelling { then, .. }, HedgeEvent::Stopped) => {
                self.running.clear();
                self.stage = Stage::Finished(then);
                then
            }
            _ => return Ok(refused),
        };
        self.last_now = now;
        Ok(Expect::Accepted(answer))
    }

    fn failed(&mut self, failure: Failure, now: Instant) -> Answer {
        self.last_failure = Some(failure.kind());
        if !failure.is_retryable() {
            return self.close(self.failed_call(GiveUpReason::Permanent));
        }
        let hint = match failure.hint() {
            Some(Hint::Pushback(d) | Hint::RetryAfter(d)) => Some(d),
            None => None,
        };
        self.due = Some(hint.map_or(now, |d| now.saturating_add(d)));
        self.due_from_hint = hint.is_some();
        self.next_move(now)
    }

    fn wait_until(&self) -> Option<Instant> {
        match self.stage {
            Stage::Waiting { until, .. } => until,
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------

/// Shrinks half of the arbitrary policies into ranges where copies race.
fn shape_policy(policy: HedgePolicy, u: &mut Unstructured<'_>) -> arbitrary::Result<HedgePolicy> {
    if !u.arbitrary::<bool>()? {
        return Ok(policy);
    }
    let ms = |u: &mut Unstructured<'_>, top: u64| -> arbitrary::Result<Duration> {
        Ok(Duration::from_millis(u.int_in_range(0..=top)?))
    };
    let delay = match policy.delay() {
        HedgeDelay::Fixed(_) => HedgeDelay::Fixed(ms(u, 500)?),
        HedgeDelay::Percentile { percentile, .. } => HedgeDelay::Percentile {
            percentile,
            min_samples: u.int_in_range(0..=40)?,
            fallback: ms(u, 500)?,
        },
    };
    let timeout = if u.arbitrary()? {
        Some(ms(u, 3_000)?.max(Duration::from_millis(1)))
    } else {
        None
    };
    let mut builder = policy
        .to_builder()
        .max_attempts(u.int_in_range(1..=5)?)
        .delay(delay)
        .timeout(timeout);
    if u.arbitrary()? {
        builder = builder.max_in_flight(u.int_in_range(1..=4)?);
    }
    Ok(builder.build().unwrap_or(policy))
}

fn some_failure(u: &mut Unstructured<'_>) -> arbitrary::Result<Failure> {
    let base = if rarely(u, 6)? {
        Failure::permanent()
    } else {
        Failure::retryable()
    };
    let base = base.with_kind(u.arbitrary()?);
    let delay = if rarely(u, 8)? {
        u.arbitrary::<Duration>()?
    } else {
        Duration::from_millis(u.int_in_range(0..=600)?)
    };
    Ok(match u.int_in_range(0..=3u8)? {
        0 => base.with_hint(Hint::Pushback(delay)),
        1 => base.with_hint(Hint::RetryAfter(delay)),
        _ => base,
    })
}

fn next_now(u: &mut Unstructured<'_>, now: Instant, model: &Model) -> arbitrary::Result<Instant> {
    let tick = Duration::from_nanos(1);
    Ok(match u.int_in_range(0..=9u8)? {
        0 | 1 => now,
        2 | 3 => now.saturating_add(Duration::from_millis(u.int_in_range(0..=300)?)),
        4 => model.wait_until().unwrap_or(now),
        5 => model.wait_until().unwrap_or(now).saturating_sub(tick),
        6 => model.deadline().unwrap_or(now),
        7 => now.saturating_sub(Duration::from_nanos(u.arbitrary()?)),
        8 => Instant::from_nanos(u.arbitrary()?),
        _ => now.saturating_add(Duration::from_micros(u.arbitrary::<u16>()?.into())),
    })
}

fn next_event(
    u: &mut Unstructured<'_>,
    model: &Model,
    now: Instant,
) -> arbitrary::Result<HedgeEvent> {
    if rarely(u, 8)? {
        return u.arbitrary();
    }
    let pick = u.int_in_range(0..=15u8)?;
    Ok(match model.stage {
        Stage::Idle => {
            if pick == 0 {
                HedgeEvent::Cancelled
            } else {
                HedgeEvent::Start
            }
        }
        Stage::Launching(copy) => match pick {
            0 => HedgeEvent::Cancelled,
            1 | 2 => HedgeEvent::Rejected {
                copy,
                until: if u.arbitrary()? {
                    Some(now.saturating_add(Duration::from_millis(u.int_in_range(0..=3_000)?)))
                } else {
                    None
                },
            },
            _ => HedgeEvent::Launched { copy },
        },
        Stage::Withdrawing(_) => match pick {
            0 => HedgeEvent::Cancelled,
            1..=3 => HedgeEvent::Refused,
            _ => HedgeEvent::Granted,
        },
        Stage::Waiting { .. } => {
            let copy = if model.running.is_empty() {
                u.int_in_range(0..=MAX_COPIES)?
            } else {
                let i = u.choose_index(model.running.len())?;
                model.running.get(i).copied().unwrap_or(0)
            };
            match pick {
                0 => HedgeEvent::Cancelled,
                1..=4 => HedgeEvent::Woke,
                5..=8 => HedgeEvent::Succeeded { copy },
                _ => HedgeEvent::Failed {
                    copy,
                    failure: some_failure(u)?,
                },
            }
        }
        Stage::Cancelling { .. } => {
            if pick < 13 {
                HedgeEvent::Stopped
            } else {
                u.arbitrary()?
            }
        }
        Stage::Finished(_) => u.arbitrary()?,
    })
}

/// Drives a [`LatencyHistogram`] and a [`HedgeMachine`] with an arbitrary valid
/// policy, seed, latency history, clock and event stream, against the reference
/// models. Checks: no panic; the histogram's counts, buckets, percentiles and
/// maximum match the model's; the resolved hedge delay matches; every answer
/// matches the model's; misuse is refused with the pending action and leaves the
/// machine unchanged; `poll` answers as `try_poll`; never more copies in flight
/// or in total than allowed; every wait due after `now`; the getters agree.
///
/// # Errors
/// The first [`Violation`].
pub fn check(data: &[u8]) -> Result<(), Violation> {
    let mut u = Unstructured::new(data);
    let Ok(policy) = HedgePolicy::arbitrary(&mut u) else {
        return Ok(());
    };
    let Ok(policy) = shape_policy(policy, &mut u) else {
        return Ok(());
    };
    ensure(
        policy.validate().is_ok(),
        TARGET,
        0,
        "an arbitrary policy is valid",
    )?;
    let seed: u64 = u.arbitrary().unwrap_or(0);
    let Some((latencies, history)) = check_histogram(&mut u, &policy)? else {
        return Ok(());
    };
    let mut machine = HedgeMachine::with_latencies(&policy, seed, &latencies);
    let delay = history.resolve(policy.delay());
    ensure(
        machine.hedge_delay() == delay,
        TARGET,
        0,
        "hedge delay differs from the model's reading of the histogram",
    )?;
    let mut model = Model::new(policy, delay);
    let mut now = Instant::ORIGIN;
    for step in 0..STEPS {
        if u.is_empty() {
            break;
        }
        let (Ok(at), Ok(event)) = (
            next_now(&mut u, now, &model),
            next_event(&mut u, &model, now),
        ) else {
            break;
        };
        now = at;
        let clamped = now.max(model.last_now);
        let before = machine;
        let mut twin = machine;
        let answer = machine.try_poll(event, now);
        let polled = twin.poll(event, now);
        ensure(
            twin == machine,
            TARGET,
            step,
            "poll and try_poll leave different machines",
        )?;
        let expect = model
            .apply(event, clamped, machine.next_launch_at())
            .map_err(|invariant| Violation {
                target: TARGET,
                step,
                invariant,
            })?;
        match (answer, expect) {
            (Err(misuse), Expect::Refused(pending)) => {
                ensure(
                    machine == before,
                    TARGET,
                    step,
                    "a refused event changed the machine",
                )?;
                ensure(
                    polled == misuse.answer,
                    TARGET,
                    step,
                    "poll answered misuse differently",
                )?;
                ensure(
                    misuse.event == event,
                    TARGET,
                    step,
                    "misuse names another event",
                )?;
                ensure(
                    misuse.phase == before.phase(),
                    TARGET,
                    step,
                    "misuse names another phase",
                )?;
                ensure(
                    Answer::from(misuse.answer) == pending,
                    TARGET,
                    step,
                    "misuse not answered with the pending action",
                )?;
            }
            (Err(_), Expect::Accepted(_)) => {
                return Err(Violation {
                    target: TARGET,
                    step,
                    invariant: "an event that fits the phase was refused",
                })
            }
            (Ok(_), Expect::Refused(_)) => {
                return Err(Violation {
                    target: TARGET,
                    step,
                    invariant: "an event that does not fit the phase was accepted",
                })
            }
            (Ok(action), Expect::Accepted(expected)) => {
                ensure(
                    polled == action,
                    TARGET,
                    step,
                    "poll answered differently from try_poll",
                )?;
                ensure(
                    Answer::from(action) == expected,
                    TARGET,
                    step,
                    "answer differs from the model",
                )?;
                if let HedgeAction::Wait { until: Some(u), .. } = action {
                    ensure(u > clamped, TARGET, step, "a wait not due after now")?;
                }
                if let HedgeAction::Cancel { copies } = action {
                    ensure(!copies.is_empty(), TARGET, step, "an empty cancel")?;
                }
                ensure(
                    machine.pending() == Some(action),
                    TARGET,
                    step,
                    "pending is not the last answer",
                )?;
            }
        }
        ensure(
            machine.phase() == model.phase(),
            TARGET,
            step,
            "phase differs from the model",
        )?;
        ensure(
            machine.in_flight() == model.running_set(),
            TARGET,
            step,
            "copies in flight differ from the model",
        )?;
        ensure(
            machine.in_flight().len() <= policy.max_in_flight(),
            TARGET,
            step,
            "more copies in flight than allowed",
        )?;
        ensure(
            machine.launched() == model.sent && model.sent <= model.allowed(),
            TARGET,
            step,
            "copies sent differ from the model or pass the maximum",
        )?;
        ensure(
            machine.last_failure() == model.last_failure,
            TARGET,
            step,
            "last failure differs from the model",
        )?;
        ensure(
            machine.next_deadline() == model.wait_until(),
            TARGET,
            step,
            "next deadline differs from the model",
        )?;
        ensure(
            machine.deadline() == model.deadline(),
            TARGET,
            step,
            "deadline differs from the model",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_layout_agrees_with_the_documented_example() {
        let mut model = HistogramModel::new(1_000);
        for ms in 1..=100 {
            model.record(Duration::from_millis(ms));
        }
        assert_eq!(model.count(), 100);
        assert_eq!(model.percentile(100.0), Some(Duration::from_millis(100)));
        let p95 = model.percentile(95.0).unwrap_or_default();
        assert!(p95 >= Duration::from_millis(95) && p95 <= Duration::from_millis(119));
    }
}
