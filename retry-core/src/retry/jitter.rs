//! Jitter kinds and the small seeded generator behind them.
//!
//! Randomness never comes from the OS: every draw is a pure function of a seed the
//! caller supplies, the retry number and the delay being jittered, so the same
//! inputs give the same delays to the nanosecond on every platform.

use core::fmt;
use core::time::Duration;

use super::binary64;
use super::error::PolicyError;
use super::nanos::{from_nanos, sat_nanos};

/// How a delay is randomised (see [the rules](crate::behaviour#jitter)). `f` is a fraction in `[0, 1]`.
///
/// | kind | result for a capped delay `d` |
/// |---|---|
/// | `None` | `d` |
/// | `Full` | uniform in `[0, d]` |
/// | `Equal` | `d/2 +` uniform in `[0, d/2]` |
/// | `Decorrelated` | `min(cap, uniform in [initial, 3 × previous delay])` |
/// | `Subtract(f)` | `d −` uniform in `[0, f·d]` |
/// | `Add(f)` | `d +` uniform in `[0, f·d)`: the only kind that may exceed the cap |
/// | `Spread(f)` | `d × (1 +` uniform in `[−f, +f])`, then capped |
///
/// A policy then raises the result to its `min_delay` and rounds it to its
/// [`Resolution`](crate::Resolution) *inside* the kind's interval (both ends
/// raised to `min_delay`): under millisecond resolution the delay is the whole
/// millisecond nearest the drawn value among those in the interval, so `add(0.1)`
/// on 1 s gives at most 1.099 s, and a cap never undoes the rounding. Only an
/// interval holding no whole millisecond at all (an unjittered 1.5 ms, say) gives
/// the nearest whole millisecond outside it, still within `min_delay` and the cap.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Jitter {
    /// No randomness.
    #[default]
    None,
    /// Uniform in `[0, d]` ("full jitter").
    Full,
    /// Half the delay fixed, the other half random.
    Equal,
    /// Each delay drawn from `[initial, 3 × previous]`, capped; stateful.
    Decorrelated,
    /// Subtract up to the fraction `f` of the delay.
    Subtract(f64),
    /// Add up to (but not including) the fraction `f` of the delay.
    Add(f64),
    /// Scale by a factor drawn from `[1 − f, 1 + f]`.
    Spread(f64),
}

impl Jitter {
    /// The kind's name, as used in configs and command-line flags.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::Decorrelated => "decorrelated",
            Jitter::Subtract(_) => "subtract",
            Jitter::Add(_) => "add",
            Jitter::Spread(_) => "spread",
        }
    }

    /// The fraction of the `Subtract`, `Add` and `Spread` kinds.
    #[must_use]
    pub const fn fraction(&self) -> Option<f64> {
        match *self {
            Jitter::Subtract(f) | Jitter::Add(f) | Jitter::Spread(f) => Some(f),
            _ => None,
        }
    }

    /// Whether the result may exceed the cap (only [`Jitter::Add`]).
    #[must_use]
    pub const fn may_exceed_cap(&self) -> bool {
        matches!(self, Jitter::Add(_))
    }

    /// Checks the fraction.
    ///
    /// # Errors
    /// [`PolicyError::InvalidJitterFraction`] when the fraction is NaN, negative or
    /// above 1.
    pub fn validate(&self) -> Result<(), PolicyError> {
        match self.fraction() {
            Some(f) if !binary64::is_fraction(f.to_bits()) => {
                Err(PolicyError::InvalidJitterFraction {
                    kind: self.name(),
                    value: f,
                })
            }
            _ => Ok(()),
        }
    }

    /// Applies the jitter to `d`, a delay already capped at `cap`.
    ///
    /// `draw` is the random word for this retry (see [`jitter_draw`]);
    /// `initial` and `previous` are used by [`Jitter::Decorrelated`] only. The result
    /// is not capped again except where the table above says so. Durations above
    /// `u64::MAX` nanoseconds (about 584.5 years) count as `u64::MAX` ns, and
    /// the result saturates there (see
    /// [the rule](crate::behaviour#delays-in-64-bit-nanoseconds)).
    #[must_use]
    pub fn apply(
        &self,
        d: Duration,
        draw: u64,
        initial: Duration,
        previous: Duration,
        cap: Duration,
    ) -> Duration {
        let (value, _, _) = self.draw_within_nanos(
            sat_nanos(d),
            draw,
            sat_nanos(initial),
            sat_nanos(previous),
            sat_nanos(cap),
        );
        from_nanos(value)
    }

    /// The jittered value in nanoseconds, with the closed interval it was drawn
    /// from (the table's interval made exact on the nanosecond grid: the open
    /// top of [`Jitter::Add`] becomes one nanosecond below it; the cap applied
    /// where the kind applies it): `(value, lo, hi)` with `lo <= value <= hi`,
    /// for the delay `n`, the curve's initial delay, the previous delay and
    /// the cap, all in nanoseconds.
    ///
    /// Every step saturates at `u64::MAX`: an interval's top, its width
    /// (spread's twice the span, decorrelated's three times the previous delay
    /// less the initial one) and the value. The pick is uniform in
    /// `[0, width]`, by multiply-high.
    #[inline]
    pub(crate) fn draw_within_nanos(
        &self,
        n: u64,
        draw: u64,
        initial: u64,
        previous: u64,
        cap: u64,
    ) -> (u64, u64, u64) {
        // Two forms of the same arithmetic: kind by kind on 64-bit targets
        // (the fastest there), one shared interval and pick elsewhere (the
        // smallest code on a 32-bit core). A test holds them equal.
        if cfg!(target_pointer_width = "64") {
            self.per_kind(n, draw, initial, previous, cap)
        } else {
            self.one_pick(n, draw, initial, previous, cap)
        }
    }

    /// [`Jitter::draw_within_nanos`] kind by kind.
    #[inline(always)]
    fn per_kind(
        &self,
        n: u64,
        draw: u64,
        initial: u64,
        previous: u64,
        cap: u64,
    ) -> (u64, u64, u64) {
        let pick = |width: u64| uniform_inclusive(width, draw);
        match *self {
            Jitter::None => (n, n, n),
            Jitter::Full => (pick(n), 0, n),
            Jitter::Equal => {
                let lo = n / 2;
                // lo + a pick in [0, n - lo] is at most n.
                (lo.wrapping_add(pick(n.wrapping_sub(lo))), lo, n)
            }
            Jitter::Decorrelated => {
                // [initial, 3 × previous] (just `initial` when that is
                // below it), capped.
                let top = previous.saturating_add(previous).saturating_add(previous);
                let width = top.saturating_sub(initial);
                // initial + a pick in [0, width] is at most max(top, initial).
                let value = initial.wrapping_add(pick(width));
                let hi = initial.wrapping_add(width);
                (value.min(cap), initial.min(cap), hi.min(cap))
            }
            Jitter::Subtract(f) => {
                // d minus up to f·d: the pick counts down from the top, d.
                let s = span(n, f);
                (n.saturating_sub(pick(s)), n.saturating_sub(s), n)
            }
            Jitter::Add(f) => {
                // `[n, n + span)`: the top nanosecond below `n + span` (none
                // when the span is zero).
                let s = span(n, f);
                let width = s.wrapping_sub(u64::from(s != 0));
                (n.saturating_add(pick(width)), n, n.saturating_add(width))
            }
            Jitter::Spread(f) => {
                // n - s + a pick in [0, 2s], capped.
                let s = span(n, f);
                let v = pick(s.saturating_add(s));
                let value = if v >= s {
                    n.saturating_add(v.wrapping_sub(s))
                } else {
                    n.saturating_sub(s.wrapping_sub(v))
                };
                (
                    value.min(cap),
                    n.saturating_sub(s).min(cap),
                    n.saturating_add(s).min(cap),
                )
            }
        }
    }

    /// [`Jitter::draw_within_nanos`] as one interval and one pick for every
    /// kind.
    #[cfg_attr(target_pointer_width = "64", inline)]
    fn one_pick(
        &self,
        n: u64,
        draw: u64,
        initial: u64,
        previous: u64,
        cap: u64,
    ) -> (u64, u64, u64) {
        let s = match *self {
            Jitter::Subtract(f) | Jitter::Add(f) | Jitter::Spread(f) => span(n, f),
            _ => 0,
        };
        // Every kind is one interval and one pick: the pick `v`, uniform in
        // `[0, width]`, is added to `start` (taken from it for `Subtract`,
        // which counts down from the top), and `Spread`'s span `sub` is then
        // taken off again (its pick is over `[0, 2·span]`); differences
        // saturate at zero, sums at `u64::MAX`.
        let (start, width, sub, down) = match *self {
            Jitter::None => (n, 0, 0, false),
            Jitter::Full => (0, n, 0, false),
            Jitter::Equal => (n / 2, n.wrapping_sub(n / 2), 0, false),
            // [initial, 3 × previous] (just `initial` when that is below it).
            Jitter::Decorrelated => (
                initial,
                previous
                    .saturating_add(previous)
                    .saturating_add(previous)
                    .saturating_sub(initial),
                0,
                false,
            ),
            // d minus up to f·d: the pick counts down from the top, d.
            Jitter::Subtract(_) => (n, s, 0, true),
            // `[n, n + span)`: the top nanosecond below `n + span` (none when
            // the span is zero).
            Jitter::Add(_) => (n, s.wrapping_sub(u64::from(s != 0)), 0, false),
            Jitter::Spread(_) => (n, s.saturating_add(s), s, false),
        };
        // How far the interval reaches below and above `start`: `width`
        // below for `Subtract`; `sub` below and `width − sub` above it
        // otherwise (`n + s` at the top for spread, whose `sub` is its span,
        // the only one not zero).
        let (below, above) = if down {
            (width, 0)
        } else if sub == 0 {
            (0, width)
        } else {
            (sub, sub)
        };
        let pick = uniform_inclusive(width, draw);
        // `Subtract` takes its pick off `start`; the others add it and take
        // `sub` off again.
        let (v, sub) = if down { (0, pick) } else { (pick, sub) };
        let value = if v >= sub {
            start.saturating_add(v.wrapping_sub(sub))
        } else {
            start.saturating_sub(sub.wrapping_sub(v))
        };
        let (lo, hi) = (start.saturating_sub(below), start.saturating_add(above));
        // The kinds that cap cap all three.
        let cap = match *self {
            Jitter::Decorrelated | Jitter::Spread(_) => cap,
            _ => u64::MAX,
        };
        (value.min(cap), lo.min(cap), hi.min(cap))
    }
}

impl Jitter {
    /// For a delay `n` that no longer changes from retry to retry: the kinds
    /// whose value is `base +` a pick in `[0, width]`, as `(base, width,
    /// exact)`: the interval [`Jitter::draw_within_nanos`] draws from, before
    /// the cap of the kinds that cap (capping the result afterwards gives the
    /// same value). Only where `exact` holds is that the kind's arithmetic:
    /// nothing saturates on the way (the ends and the width are computed
    /// wrapping) and the width is below `u64::MAX` (its pick has a 64-bit
    /// multiplier). The other kinds (`None`, `Decorrelated` and `Subtract`,
    /// which counts down) are never exact.
    #[inline(always)]
    pub(crate) fn affine_interval(&self, n: u64) -> (u64, u64, bool) {
        let (base, width, fits) = match *self {
            Jitter::Full => (0, n, true),
            Jitter::Equal => (n / 2, n.wrapping_sub(n / 2), true),
            Jitter::Add(f) => {
                let s = span(n, f);
                (n, s.wrapping_sub(u64::from(s != 0)), true)
            }
            // n − s + a pick in [0, 2s], both ends within the range.
            Jitter::Spread(f) => {
                let s = span(n, f);
                let fits = n >= s && n.checked_add(s).is_some() && s.checked_add(s).is_some();
                (n.wrapping_sub(s), s.wrapping_add(s), fits)
            }
            _ => (n, 0, false),
        };
        let exact = fits && base.checked_add(width).is_some() && width < u64::MAX;
        (base, width, exact)
    }
}

/// The pick [`uniform_inclusive`] makes in `[0, x]`, given `x + 1` (so `x`
/// below `u64::MAX`): the high word of `draw · (x + 1)`.
#[inline(always)]
pub(crate) fn scaled_pick(draw: u64, x_plus_one: u64) -> u64 {
    // The high word; the truncation is the point.
    #[allow(clippy::cast_possible_truncation)]
    let high = (u128::from(draw).wrapping_mul(u128::from(x_plus_one)) >> 64) as u64;
    high
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fraction() {
            Some(x) => write!(f, "{}:{x}", self.name()),
            None => f.write_str(self.name()),
        }
    }
}

/// `f · n`, rounded down, as the `f64` product `((n as f64) * f) as u64`
/// gives it: in hardware on 64-bit targets, in integers elsewhere
/// ([`binary64::fraction_of`], the same result); a fraction outside `[0, 1]` is
/// clamped (the builder rejects it earlier).
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
fn span(n: u64, f: f64) -> u64 {
    if cfg!(target_pointer_width = "64") {
        // A whole fraction of a delay below 2^53 ns: the product is exact.
        if f.to_bits() == 1.0f64.to_bits() && n < 1 << 53 {
            return n;
        }
        let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
        // `as` drops the fraction and saturates at u64::MAX (reached only by
        // a product rounded up to 2^64).
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let s = (n as f64 * f) as u64;
        s
    } else {
        binary64::fraction_of(n, f.to_bits())
    }
}

/// Uniform in `[0, x]` from one 64-bit draw, by multiply-high (Lemire), with no
/// division and no loop: the high word of `draw · (x + 1)`.
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
fn uniform_inclusive(x: u64, draw: u64) -> u64 {
    // draw · x + draw < 2^128: nothing wraps. The high word; the truncation
    // is the point.
    #[allow(clippy::cast_possible_truncation)]
    let high = (u128::from(draw)
        .wrapping_mul(u128::from(x))
        .wrapping_add(u128::from(draw))
        >> 64) as u64;
    high
}

/// SplitMix64's output function: a bijective 64-bit mixer with good avalanche
/// (kept for deriving seeds and for tests; the jitter draw uses [`mum`]).
pub(crate) const fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The full 128-bit product of two words, folded to one word by XOR of its
/// halves: the "multiply and fold" step of the draw.
#[inline]
const fn mum(a: u64, b: u64) -> u64 {
    let m = (a as u128).wrapping_mul(b as u128);
    // The two halves of the product; the truncation is the point.
    #[allow(clippy::cast_possible_truncation)]
    let (lo, hi) = (m as u64, (m >> 64) as u64);
    lo ^ hi
}

/// Keys for the draw: fractional bits of square roots of small primes (the
/// first three) and of the golden ratio (the step between retries, odd).
const KEY_SEED: u64 = 0x6A09_E667_F3BC_C908;
const KEY_BASE: u64 = 0x3C6E_F372_FE94_F82B;
const KEY_OUT: u64 = 0xBB67_AE85_84CA_A73B;
const STEP: u64 = 0x9E37_79B9_7F4A_7C15;

/// The draw from its three words: `seed`, `retry` (the retry number in the low
/// 32 bits, the base delay's nanoseconds above 2^64 in the high ones) and
/// `base` (the base delay's low 64 bits of nanoseconds).
///
/// One keyed multiply binds the seed to the base delay; the retry then steps
/// that key along an odd constant (a Weyl sequence, so consecutive retries
/// never repeat a state) and one more multiply-and-fold turns the state into
/// the output word.
#[inline]
const fn draw_words(seed: u64, retry: u64, base: u64) -> u64 {
    let key = mum(seed ^ KEY_SEED, base ^ KEY_BASE);
    let state = key.wrapping_add(retry.wrapping_mul(STEP));
    mum(state, state ^ KEY_OUT)
}

/// The random word for retry `retry` with base delay `base` under `seed`: a pure
/// function of the three, so any retry's jitter can be recomputed on its own.
///
/// ```
/// use core::time::Duration;
/// use retry_core::jitter_draw;
/// let a = jitter_draw(42, 3, Duration::from_secs(4));
/// assert_eq!(a, jitter_draw(42, 3, Duration::from_secs(4)));
/// assert_ne!(a, jitter_draw(42, 4, Duration::from_secs(4)));
/// assert_ne!(a, jitter_draw(43, 3, Duration::from_secs(4)));
/// ```
#[must_use]
pub const fn jitter_draw(seed: u64, retry: u32, base: Duration) -> u64 {
    let n = base.as_nanos();
    // Split into the low and high 64-bit words; the truncation is the point.
    // `Duration::MAX` is below 2^94 ns, so the high word is below 2^30 and
    // shares a word with the 32-bit retry number without losing a bit.
    #[allow(clippy::cast_possible_truncation)]
    let (lo, hi) = (n as u64, (n >> 64) as u64);
    draw_words(seed, (retry as u64) | (hi << 32), lo)
}

/// [`jitter_draw`] for a base delay below 2^64 nanoseconds, given in
/// nanoseconds (its high word is then zero): the same word, without widening.
#[inline]
pub(crate) const fn jitter_draw_nanos(seed: u64, retry: u32, base: u64) -> u64 {
    draw_words(seed, retry as u64, base)
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn the_narrow_draw_is_the_draw() {
        for base in [0, 1, 999_999, 1_000_000_000, u64::MAX] {
            for retry in [0, 1, 7, u32::MAX] {
                assert_eq!(
                    jitter_draw_nanos(0x5eed, retry, base),
                    jitter_draw(0x5eed, retry, Duration::from_nanos(base)),
                    "{retry} {base}"
                );
            }
        }
    }

    /// Pearson's chi-square statistic of `counts` against equal expectation.
    #[allow(clippy::cast_precision_loss)]
    fn chi_square(counts: &[u64]) -> f64 {
        let total: u64 = counts.iter().sum();
        let expected = total as f64 / counts.len() as f64;
        counts
            .iter()
            .map(|&c| (c as f64 - expected) * (c as f64 - expected) / expected)
            .sum()
    }

    /// 0.1 % critical values of the chi-square distribution: 15 and 63
    /// degrees of freedom (16 and 64 buckets).
    const CHI_15: f64 = 37.70;
    const CHI_63: f64 = 103.4;

    /// Counts of the top four bits of `words` (what the multiply-high of the
    /// uniform draw reads first) and of four middle bits.
    fn buckets(words: impl Iterator<Item = u64>) -> ([u64; 16], [u64; 16]) {
        let (mut top, mut mid) = ([0u64; 16], [0u64; 16]);
        for w in words {
            top[usize::try_from(w >> 60).unwrap()] += 1;
            mid[usize::try_from((w >> 30) & 15).unwrap()] += 1;
        }
        (top, mid)
    }

    /// The draw is evenly spread along each of its inputs with the others held:
    /// successive retries, successive seeds, base delays a millisecond apart
    /// (64,000 draws each; a fixed input set, so the test is deterministic).
    #[test]
    fn the_draw_is_evenly_spread_along_each_input() {
        const N: u32 = 64_000;
        let base = 1_000_000_000u64;
        let sequences: [(&str, [u64; 16], [u64; 16]); 3] = [
            {
                let (t, m) = buckets((1..=N).map(|r| jitter_draw_nanos(0x5eed, r, base)));
                ("retries", t, m)
            },
            {
                let (t, m) = buckets((0..u64::from(N)).map(|s| jitter_draw_nanos(s, 3, base)));
                ("seeds", t, m)
            },
            {
                let (t, m) =
                    buckets((0..u64::from(N)).map(|b| jitter_draw_nanos(7, 2, b * 1_000_000)));
                ("bases", t, m)
            },
        ];
        for (name, top, mid) in sequences {
            assert!(chi_square(&top) < CHI_15, "{name}: top bits {top:?}");
            assert!(chi_square(&mid) < CHI_15, "{name}: middle bits {mid:?}");
        }
    }

    /// Consecutive retries under one seed are not correlated: the pairs of
    /// their top three bits fill 64 cells evenly.
    #[test]
    fn consecutive_draws_are_independent() {
        let mut cells = [0u64; 64];
        for seed in [1u64, 0x5eed, u64::MAX] {
            let mut previous = jitter_draw_nanos(seed, 0, 10_000_000) >> 61;
            for r in 1..=40_000u32 {
                let word = jitter_draw_nanos(seed, r, 10_000_000) >> 61;
                cells[usize::try_from(previous * 8 + word).unwrap()] += 1;
                previous = word;
            }
        }
        assert!(chi_square(&cells) < CHI_63, "{cells:?}");
    }

    /// Full jitter over one second lands evenly in ten 100 ms buckets.
    #[test]
    fn full_jitter_is_uniform_over_the_delay() {
        let d = Duration::from_secs(1);
        let z = Duration::ZERO;
        let mut counts = [0u64; 10];
        for r in 1..=50_000u32 {
            let v = Jitter::Full.apply(d, jitter_draw(99, r, d), z, z, d);
            let i = usize::try_from(v.as_millis() / 100).unwrap().min(9);
            counts[i] += 1;
        }
        // 9 degrees of freedom: 27.88 at 0.1 %.
        assert!(chi_square(&counts) < 27.88, "{counts:?}");
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn extremes_of_the_draw() {
        let d = MS(1000);
        let cap = MS(1000);
        let z = Duration::ZERO;
        assert_eq!(Jitter::Full.apply(d, 0, z, z, cap), z);
        assert_eq!(
            Jitter::Full.apply(d, u64::MAX, z, z, cap),
            MS(1000) - Duration::from_nanos(0)
        );
        assert_eq!(Jitter::Equal.apply(d, 0, z, z, cap), MS(500));
        assert_eq!(
            Jitter::Subtract(0.25).apply(d, u64::MAX, z, z, cap),
            MS(750)
        );
        assert_eq!(Jitter::Subtract(0.25).apply(d, 0, z, z, cap), MS(1000));
        assert!(Jitter::Add(0.1).apply(d, u64::MAX, z, z, cap) < MS(1100));
        assert_eq!(Jitter::Add(0.1).apply(d, 0, z, z, cap), MS(1000));
        assert_eq!(Jitter::Spread(0.1).apply(d, 0, z, z, MS(5000)), MS(900));
        assert_eq!(
            Jitter::Spread(0.1).apply(d, u64::MAX, z, z, MS(5000)),
            MS(1100)
        );
        assert_eq!(Jitter::Spread(0.1).apply(d, u64::MAX, z, z, cap), MS(1000));
        assert_eq!(
            Jitter::Decorrelated.apply(d, 0, MS(100), MS(200), cap),
            MS(100)
        );
        assert_eq!(
            Jitter::Decorrelated.apply(d, u64::MAX, MS(100), MS(200), cap),
            MS(600)
        );
        assert_eq!(
            Jitter::Decorrelated.apply(d, u64::MAX, MS(100), MS(900), cap),
            MS(1000)
        );
    }

    /// Every kind on 64-bit nanoseconds is the per-kind arithmetic of the
    /// 128-bit reference (exact sums and products, the hardware's `f64`
    /// span, the wide pick), with the saturation rule applied on top: an
    /// interval's width and every end and value cut at `u64::MAX`. Delays,
    /// previous delays and caps of every width up to `u64::MAX` ns, fractions
    /// with inexact products, draws at both ends. Where nothing reaches
    /// `u64::MAX` the rule changes nothing: the results are the 128-bit ones.
    #[test]
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    fn each_kind_is_the_wide_arithmetic_saturated() {
        const TOP: u128 = u64::MAX as u128;
        fn pick(x: u128, draw: u64) -> u128 {
            if x == 0 {
                return 0;
            }
            if let Ok(x64) = u64::try_from(x) {
                return u128::from(draw).saturating_mul(u128::from(x64).saturating_add(1)) >> 64;
            }
            let shift = 64u32.saturating_sub(x.leading_zeros());
            (pick(x >> shift, draw) << shift).min(x)
        }
        fn span(n: u128, f: f64) -> u128 {
            let f = if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) };
            ((n as f64 * f) as u128).min(TOP)
        }
        fn reference(
            j: Jitter,
            n: u128,
            draw: u64,
            initial: u128,
            previous: u128,
            cap: u128,
        ) -> (u128, u128, u128) {
            let between = |lo: u128, hi: u128| {
                let width = hi.saturating_sub(lo).min(TOP);
                (lo + pick(width, draw), lo, lo + width)
            };
            let (v, lo, hi) = match j {
                Jitter::None => (n, n, n),
                Jitter::Full => between(0, n),
                Jitter::Equal => between(n / 2, n),
                Jitter::Decorrelated => {
                    let (v, lo, hi) = between(initial, (previous * 3).min(TOP).max(initial));
                    (v.min(cap), lo.min(cap), hi.min(cap))
                }
                Jitter::Subtract(f) => {
                    let s = span(n, f);
                    (n.saturating_sub(pick(s, draw)), n.saturating_sub(s), n)
                }
                Jitter::Add(f) => between(n, n + span(n, f).saturating_sub(1)),
                Jitter::Spread(f) => {
                    let s = span(n, f);
                    let v = pick((2 * s).min(TOP), draw);
                    let v = (n + v).saturating_sub(s);
                    (v.min(cap), n.saturating_sub(s).min(cap), (n + s).min(cap))
                }
            };
            (v.min(TOP), lo.min(TOP), hi.min(TOP))
        }
        let mut z = 0x0dd_u64;
        let mut next = || {
            z = mix64(z);
            z
        };
        let mut unsaturated = 0u32;
        for i in 0..300_000u32 {
            let mut wide = |shift: u32| match shift % 70 {
                0 => u64::MAX,
                1 => u64::MAX - 1,
                2 => u64::MAX / 3,
                3 => u64::MAX / 2 + 1,
                k => next() >> ((k - 4) % 64),
            };
            let (n, initial, previous, cap) = (wide(i), wide(i / 3), wide(i / 7), wide(i / 11));
            let f = [0.0, 1.0, 0.1, 1.0 / 3.0, 0.999_999_999, 5e-324][(i % 6) as usize];
            let draw = [0, u64::MAX, next()][(i % 3) as usize];
            for j in [
                Jitter::None,
                Jitter::Full,
                Jitter::Equal,
                Jitter::Decorrelated,
                Jitter::Subtract(f),
                Jitter::Add(f),
                Jitter::Spread(f),
            ] {
                let (v, lo, hi) = j.draw_within_nanos(n, draw, initial, previous, cap);
                let wide = |x: u64| u128::from(x);
                assert_eq!(
                    (wide(v), wide(lo), wide(hi)),
                    reference(j, wide(n), draw, wide(initial), wide(previous), wide(cap)),
                    "{j} {n} {draw} {initial} {previous} {cap}"
                );
                assert!(
                    lo <= v && v <= hi,
                    "{j} {n} {draw} {initial} {previous} {cap}"
                );
                if n < u64::MAX / 4 && previous < u64::MAX / 4 {
                    unsaturated += 1;
                }
            }
        }
        assert!(unsaturated > 1_000_000, "{unsaturated}");
        for x in [0, 1, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
            for draw in [0, 1, u64::MAX / 2, u64::MAX] {
                assert_eq!(
                    u128::from(uniform_inclusive(x, draw)),
                    pick(u128::from(x), draw),
                    "{x} {draw}"
                );
            }
        }
    }

    /// The two forms of the arithmetic (kind by kind on 64-bit targets, one
    /// pick on 32-bit ones) agree on every input, saturation included.
    #[test]
    fn both_forms_agree() {
        let mut z = 0xf0_u64;
        let mut next = || {
            z = mix64(z);
            z
        };
        for i in 0..300_000u32 {
            let mut wide = |k: u32| match k % 8 {
                0 => u64::MAX,
                1 => u64::MAX / 3 + 1,
                2 => (1 << 53) + 1,
                _ => next() >> (k % 64),
            };
            let (n, initial, previous, cap) = (wide(i), wide(i / 5), wide(i / 9), wide(i / 13));
            let f = [0.0, 1.0, 0.1, 1.0 / 3.0, 0.999_999_999, 5e-324, 0.5][(i % 7) as usize];
            let draw = [0, u64::MAX, next()][(i % 3) as usize];
            for j in [
                Jitter::None,
                Jitter::Full,
                Jitter::Equal,
                Jitter::Decorrelated,
                Jitter::Subtract(f),
                Jitter::Add(f),
                Jitter::Spread(f),
            ] {
                assert_eq!(
                    j.per_kind(n, draw, initial, previous, cap),
                    j.one_pick(n, draw, initial, previous, cap),
                    "{j} {n} {draw} {initial} {previous} {cap}"
                );
            }
        }
    }

    /// Each kind at the saturation point: a delay, cap and previous delay of
    /// `u64::MAX` ns (and `Duration::MAX`, read as that) give results within
    /// `u64::MAX` ns, at the ends the draw selects.
    #[test]
    fn each_kind_at_the_saturation_point() {
        let top = Duration::from_nanos(u64::MAX);
        let z = Duration::ZERO;
        for d in [top, top + Duration::from_nanos(1), Duration::MAX] {
            for cap in [top, Duration::MAX] {
                let apply =
                    |j: Jitter, draw: u64, previous: Duration| j.apply(d, draw, z, previous, cap);
                assert_eq!(apply(Jitter::None, 0, z), top);
                assert_eq!(apply(Jitter::Full, u64::MAX, z), top);
                assert_eq!(apply(Jitter::Full, 0, z), z);
                assert_eq!(
                    apply(Jitter::Equal, 0, z),
                    Duration::from_nanos(u64::MAX / 2)
                );
                assert_eq!(apply(Jitter::Equal, u64::MAX, z), top);
                assert_eq!(apply(Jitter::Subtract(1.0), u64::MAX, z), z);
                assert_eq!(apply(Jitter::Subtract(0.5), 0, z), top);
                // Additive jitter's top is cut at u64::MAX ns.
                assert_eq!(apply(Jitter::Add(1.0), u64::MAX, z), top);
                assert_eq!(apply(Jitter::Add(0.5), 0, z), top);
                assert_eq!(apply(Jitter::Spread(1.0), 0, z), z);
                assert_eq!(apply(Jitter::Spread(0.5), u64::MAX, z), top);
                // Three times a previous delay past a third of the range:
                // the interval's top is u64::MAX ns.
                let third = Duration::from_nanos(u64::MAX / 3 + 1);
                for previous in [third, top, Duration::MAX] {
                    assert_eq!(apply(Jitter::Decorrelated, u64::MAX, previous), top);
                    assert_eq!(apply(Jitter::Decorrelated, 0, previous), z);
                }
            }
        }
    }

    #[test]
    fn uniform_covers_wide_ranges() {
        assert_eq!(uniform_inclusive(u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(uniform_inclusive(u64::MAX, 0), 0);
        assert!(uniform_inclusive(u64::MAX, u64::MAX / 2 + 1) > u64::MAX / 2);
    }

    #[test]
    fn the_draw_depends_on_every_bit_of_the_base_delay() {
        // Two bases equal in their low 64 bits of nanoseconds, apart in the high.
        let low = Duration::from_nanos(12_345);
        let high = low + Duration::from_nanos(u64::MAX) + Duration::from_nanos(1);
        assert_ne!(jitter_draw(9, 3, low), jitter_draw(9, 3, high));
        assert_ne!(
            jitter_draw(9, 3, Duration::MAX),
            jitter_draw(9, 3, Duration::MAX - Duration::from_secs(1 << 40))
        );
    }

    #[test]
    fn only_additive_jitter_may_exceed_the_cap() {
        let kinds = [
            Jitter::None,
            Jitter::Full,
            Jitter::Equal,
            Jitter::Decorrelated,
            Jitter::Subtract(0.5),
            Jitter::Spread(0.5),
        ];
        for kind in kinds {
            assert!(!kind.may_exceed_cap(), "{kind}");
        }
        assert!(Jitter::Add(0.5).may_exceed_cap());
    }

    #[test]
    fn fractions_are_checked() {
        for bad in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
            for j in [Jitter::Add(bad), Jitter::Subtract(bad), Jitter::Spread(bad)] {
                let e = j.validate().unwrap_err();
                assert_eq!(e.field(), "jitter");
            }
        }
        assert!(Jitter::Spread(0.0).validate().is_ok());
        assert!(Jitter::Spread(1.0).validate().is_ok());
    }
}
