//! Ready-made classifiers: sets of exit codes, HTTP statuses and named error
//! codes, exit-code policies, and the rules for replaying HTTP requests.
//!
//! Everything is `Copy` or borrowed, built in `const` context where it can be,
//! and never allocates.

use core::fmt;
use core::iter::FusedIterator;

// ---------------------------------------------------------------------------
// Bit helpers shared by the sets. Words are reached through slice patterns, not
// indexing, so no access can go out of bounds.

const fn bit_mask(bit: usize) -> u64 {
    1u64 << (bit % 64)
}

const fn get_bit(words: &[u64], bit: usize) -> bool {
    let mut word = bit / 64;
    let mut rest = words;
    while let [first, tail @ ..] = rest {
        if word == 0 {
            return *first & bit_mask(bit) != 0;
        }
        word = word.wrapping_sub(1);
        rest = tail;
    }
    false
}

const fn set_bit(words: &mut [u64], bit: usize, on: bool) {
    let mut word = bit / 64;
    let mut rest = words;
    while let [first, tail @ ..] = rest {
        if word == 0 {
            if on {
                *first |= bit_mask(bit);
            } else {
                *first &= !bit_mask(bit);
            }
            return;
        }
        word = word.wrapping_sub(1);
        rest = tail;
    }
}

/// Sets bits `lo..=hi` (nothing when `lo > hi`).
const fn set_range(words: &mut [u64], lo: usize, hi: usize, on: bool) {
    let mut bit = lo;
    while bit <= hi {
        set_bit(words, bit, on);
        bit = match bit.checked_add(1) {
            Some(next) => next,
            None => return,
        };
    }
}

const fn count(words: &[u64]) -> usize {
    let mut total = 0usize;
    let mut rest = words;
    while let [first, tail @ ..] = rest {
        total = total.saturating_add(first.count_ones() as usize);
        rest = tail;
    }
    total
}

const fn or_words(into: &mut [u64], from: &[u64]) {
    let mut into = into;
    let mut from = from;
    while let ([a, a_tail @ ..], [b, b_tail @ ..]) = (into, from) {
        *a |= *b;
        into = a_tail;
        from = b_tail;
    }
}

/// Takes the lowest set bit out of `words` and returns its number.
fn pop_lowest(words: &mut [u64]) -> Option<usize> {
    let (index, word) = words.iter_mut().enumerate().find(|(_, w)| **w != 0)?;
    let bit = word.trailing_zeros() as usize;
    *word &= word.wrapping_sub(1);
    index.checked_mul(64)?.checked_add(bit)
}

/// Takes the highest set bit out of `words` and returns its number.
fn pop_highest(words: &mut [u64]) -> Option<usize> {
    let (index, word) = words.iter_mut().enumerate().rev().find(|(_, w)| **w != 0)?;
    let bit = 63usize.checked_sub(word.leading_zeros() as usize)?;
    *word &= !bit_mask(bit);
    index.checked_mul(64)?.checked_add(bit)
}

// ---------------------------------------------------------------------------
// Parsing "1,2,5-9,75"

/// What was wrong with one item of a set list; see [`SetParseError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SetParseErrorKind {
    /// The item was empty (`"1,,2"` or a trailing comma).
    Empty,
    /// The item (or one end of its range) was not a plain decimal number; this
    /// includes a missing end (`"5-"`) and a sign (`"-1"`, `"+1"`).
    NotANumber,
    /// A number was outside the values the set holds.
    OutOfRange {
        /// The smallest allowed value.
        min: u16,
        /// The largest allowed value.
        max: u16,
    },
    /// A range whose start is above its end (`"9-5"`).
    Reversed,
}

impl fmt::Display for SetParseErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetParseErrorKind::Empty => f.write_str("empty item"),
            SetParseErrorKind::NotANumber => f.write_str("not a number or a range lo-hi"),
            SetParseErrorKind::OutOfRange { min, max } => {
                write!(f, "out of range (allowed {min}-{max})")
            }
            SetParseErrorKind::Reversed => f.write_str("range start is above its end"),
        }
    }
}

/// A list of codes (`"1,2,5-9,75"`) that could not be read: names the bad item
/// (borrowed from the input), where it is, and what was wrong.
///
/// ```
/// use retry_core::{ExitCodeSet, SetParseErrorKind};
/// let err = ExitCodeSet::parse("1,2,5-x,75").unwrap_err();
/// assert_eq!(err.item(), "5-x");
/// assert_eq!(err.index(), 2);
/// assert_eq!(err.offset(), 4);
/// assert_eq!(err.kind(), SetParseErrorKind::NotANumber);
/// assert_eq!(
///     err.to_string(),
///     "item 2 (\"5-x\", byte 4): not a number or a range lo-hi"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SetParseError<'a> {
    item: &'a str,
    index: usize,
    offset: usize,
    kind: SetParseErrorKind,
}

impl<'a> SetParseError<'a> {
    /// The bad item, with surrounding whitespace trimmed.
    #[must_use]
    pub const fn item(&self) -> &'a str {
        self.item
    }

    /// The item's position in the list, counting from 0.
    #[must_use]
    pub const fn index(&self) -> usize {
        self.index
    }

    /// The byte offset of the (trimmed) item in the input.
    #[must_use]
    pub const fn offset(&self) -> usize {
        self.offset
    }

    /// What was wrong with it.
    #[must_use]
    pub const fn kind(&self) -> SetParseErrorKind {
        self.kind
    }
}

impl fmt::Display for SetParseError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "item {} ({:?}, byte {}): {}",
            self.index, self.item, self.offset, self.kind
        )
    }
}

impl core::error::Error for SetParseError<'_> {}

/// Reads a comma-separated list of numbers and inclusive ranges, each within
/// `min..=max`, calling `add(lo, hi)` for each item. Whitespace around items and
/// around the `-` of a range is allowed. A blank list is an empty set.
fn parse_list<'a>(
    input: &'a str,
    min: u16,
    max: u16,
    mut add: impl FnMut(u16, u16),
) -> Result<(), SetParseError<'a>> {
    if input.trim_ascii().is_empty() {
        return Ok(());
    }
    let mut offset = 0usize;
    for (index, piece) in input.split(',').enumerate() {
        let item = piece.trim_ascii();
        let leading = piece.len().saturating_sub(piece.trim_ascii_start().len());
        let error = |kind| SetParseError {
            item,
            index,
            offset: offset.saturating_add(leading),
            kind,
        };
        let (lo, hi) = match item.split_once('-') {
            Some((lo, hi)) => (lo.trim_ascii(), hi.trim_ascii()),
            None => (item, item),
        };
        if item.is_empty() {
            return Err(error(SetParseErrorKind::Empty));
        }
        let lo = parse_number(lo, min, max).map_err(error)?;
        let hi = parse_number(hi, min, max).map_err(error)?;
        if lo > hi {
            return Err(error(SetParseErrorKind::Reversed));
        }
        add(lo, hi);
        offset = offset.saturating_add(piece.len()).saturating_add(1);
    }
    Ok(())
}

fn parse_number(text: &str, min: u16, max: u16) -> Result<u16, SetParseErrorKind> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SetParseErrorKind::NotANumber);
    }
    let value = text.bytes().fold(0u32, |acc, b| {
        acc.saturating_mul(10)
            .saturating_add(u32::from(b.wrapping_sub(b'0')))
    });
    match u16::try_from(value) {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(SetParseErrorKind::OutOfRange { min, max }),
    }
}

// ---------------------------------------------------------------------------
// Exit codes

/// A set of process exit codes `0..=255`, as a 256-bit map.
///
/// ```
/// use retry_core::ExitCodeSet;
/// const TRANSIENT: ExitCodeSet = ExitCodeSet::empty().with(75).with_range(100, 102);
/// assert!(TRANSIENT.contains(75) && TRANSIENT.contains(101));
/// assert!(!TRANSIENT.contains(1));
/// assert_eq!(TRANSIENT.len(), 4);
/// assert_eq!(TRANSIENT.iter().collect::<Vec<u8>>(), [75, 100, 101, 102]);
/// assert_eq!(ExitCodeSet::parse("75, 100-102"), Ok(TRANSIENT));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ExitCodeSet {
    words: [u64; 4],
}

impl ExitCodeSet {
    /// No codes.
    #[must_use]
    pub const fn empty() -> ExitCodeSet {
        ExitCodeSet { words: [0; 4] }
    }

    /// Every code `0..=255`.
    #[must_use]
    pub const fn all() -> ExitCodeSet {
        ExitCodeSet {
            words: [u64::MAX; 4],
        }
    }

    /// The same set with `code` added.
    #[must_use]
    pub const fn with(mut self, code: u8) -> ExitCodeSet {
        self.insert(code);
        self
    }

    /// The same set without `code`.
    #[must_use]
    pub const fn without(mut self, code: u8) -> ExitCodeSet {
        self.remove(code);
        self
    }

    /// The same set with every code in `lo..=hi` added (none if `lo > hi`).
    #[must_use]
    pub const fn with_range(mut self, lo: u8, hi: u8) -> ExitCodeSet {
        set_range(&mut self.words, lo as usize, hi as usize, true);
        self
    }

    /// The same set without any code in `lo..=hi` (unchanged if `lo > hi`).
    #[must_use]
    pub const fn without_range(mut self, lo: u8, hi: u8) -> ExitCodeSet {
        set_range(&mut self.words, lo as usize, hi as usize, false);
        self
    }

    /// Whether `code` is in the set.
    #[must_use]
    pub const fn contains(&self, code: u8) -> bool {
        get_bit(&self.words, code as usize)
    }

    /// Adds `code`.
    pub const fn insert(&mut self, code: u8) {
        set_bit(&mut self.words, code as usize, true);
    }

    /// Removes `code`.
    pub const fn remove(&mut self, code: u8) {
        set_bit(&mut self.words, code as usize, false);
    }

    /// Codes in either set.
    #[must_use]
    pub const fn union(self, other: ExitCodeSet) -> ExitCodeSet {
        let [a0, a1, a2, a3] = self.words;
        let [b0, b1, b2, b3] = other.words;
        ExitCodeSet {
            words: [a0 | b0, a1 | b1, a2 | b2, a3 | b3],
        }
    }

    /// Codes in both sets.
    #[must_use]
    pub const fn intersection(self, other: ExitCodeSet) -> ExitCodeSet {
        let [a0, a1, a2, a3] = self.words;
        let [b0, b1, b2, b3] = other.words;
        ExitCodeSet {
            words: [a0 & b0, a1 & b1, a2 & b2, a3 & b3],
        }
    }

    /// Codes in this set but not in `other`.
    #[must_use]
    pub const fn difference(self, other: ExitCodeSet) -> ExitCodeSet {
        let [a0, a1, a2, a3] = self.words;
        let [b0, b1, b2, b3] = other.words;
        ExitCodeSet {
            words: [a0 & !b0, a1 & !b1, a2 & !b2, a3 & !b3],
        }
    }

    /// How many codes the set holds (0..=256).
    #[must_use]
    pub const fn len(&self) -> usize {
        count(&self.words)
    }

    /// Whether the set holds no code.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        let [a, b, c, d] = self.words;
        a | b | c | d == 0
    }

    /// The codes in ascending order.
    #[must_use]
    pub const fn iter(&self) -> ExitCodes {
        ExitCodes { words: self.words }
    }

    /// Reads a comma-separated list of codes and inclusive ranges, such as
    /// `"1,2,5-9,75"`. Whitespace around items is allowed; a blank string is the
    /// empty set.
    ///
    /// # Errors
    ///
    /// A [`SetParseError`] naming the first bad item: empty, not a number, above
    /// 255, or a reversed range.
    pub fn parse(list: &str) -> Result<ExitCodeSet, SetParseError<'_>> {
        let mut set = ExitCodeSet::empty();
        parse_list(list, 0, 255, |lo, hi| {
            let lo = u8::try_from(lo).unwrap_or(u8::MAX);
            let hi = u8::try_from(hi).unwrap_or(u8::MAX);
            set = set.with_range(lo, hi);
        })?;
        Ok(set)
    }
}

impl IntoIterator for ExitCodeSet {
    type Item = u8;
    type IntoIter = ExitCodes;

    fn into_iter(self) -> ExitCodes {
        self.iter()
    }
}

impl IntoIterator for &ExitCodeSet {
    type Item = u8;
    type IntoIter = ExitCodes;

    fn into_iter(self) -> ExitCodes {
        self.iter()
    }
}

impl FromIterator<u8> for ExitCodeSet {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> ExitCodeSet {
        let mut set = ExitCodeSet::empty();
        for code in iter {
            set.insert(code);
        }
        set
    }
}

/// The members of an [`ExitCodeSet`], ascending; from [`ExitCodeSet::iter`].
#[derive(Clone, Debug)]
pub struct ExitCodes {
    words: [u64; 4],
}

impl Iterator for ExitCodes {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        u8::try_from(pop_lowest(&mut self.words)?).ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = count(&self.words);
        (n, Some(n))
    }
}

impl DoubleEndedIterator for ExitCodes {
    fn next_back(&mut self) -> Option<u8> {
        u8::try_from(pop_highest(&mut self.words)?).ok()
    }
}

impl ExactSizeIterator for ExitCodes {}
impl FusedIterator for ExitCodes {}

/// What an exit code means for the retry loop; from [`ExitCodePolicy::decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExitDecision {
    /// Exit code 0: the command succeeded.
    Success,
    /// A failure a retry may fix.
    Retry,
    /// A failure no retry will fix.
    Stop,
}

/// Decides, from a process's exit code, whether to stop or retry.
///
/// Precedence, first match wins:
/// 1. `0` is always [`ExitDecision::Success`];
/// 2. a code in the *stop* set stops (even if it is also in the *retry* set);
/// 3. a code in the *retry* set retries;
/// 4. any other code (including codes outside `0..=255`, such as Windows
///    status codes or negative values) retries if `retry_others` is on, and
///    stops otherwise.
///
/// ```
/// use retry_core::{ExitCodePolicy, ExitCodeSet, ExitDecision};
/// assert_eq!(ExitCodePolicy::PIPELINE.decide(0), ExitDecision::Success);
/// assert_eq!(ExitCodePolicy::PIPELINE.decide(1), ExitDecision::Retry);
/// assert_eq!(ExitCodePolicy::PIPELINE.decide(78), ExitDecision::Stop);
/// assert_eq!(ExitCodePolicy::COMMAND_LINE.decide(127), ExitDecision::Stop);
///
/// // Only exit code 75 (EX_TEMPFAIL) is worth another go:
/// let only = ExitCodePolicy::only(ExitCodeSet::empty().with(75));
/// assert_eq!(only.decide(75), ExitDecision::Retry);
/// assert_eq!(only.decide(1), ExitDecision::Stop);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExitCodePolicy {
    retry: ExitCodeSet,
    stop: ExitCodeSet,
    retry_others: bool,
}

/// `EX_USAGE`: the command was called wrongly.
const EX_USAGE: u8 = 64;
/// `EX_DATAERR`: the input data was wrong.
const EX_DATAERR: u8 = 65;
/// `EX_TEMPFAIL`: a temporary failure; the caller is invited to retry.
const EX_TEMPFAIL: u8 = 75;
/// `EX_NOPERM`: permission denied.
const EX_NOPERM: u8 = 77;
/// `EX_CONFIG`: a configuration error.
const EX_CONFIG: u8 = 78;
/// The shell's "found but not executable".
const NOT_EXECUTABLE: u8 = 126;
/// The shell's "command not found".
const NOT_FOUND: u8 = 127;

impl ExitCodePolicy {
    /// For pipeline steps: retry every non-zero code except 78 (`EX_CONFIG`),
    /// which a retry cannot fix.
    pub const PIPELINE: ExitCodePolicy = ExitCodePolicy {
        retry: ExitCodeSet::empty(),
        stop: ExitCodeSet::empty().with(EX_CONFIG),
        retry_others: true,
    };

    /// For command-line use: retry every non-zero code, always 75
    /// (`EX_TEMPFAIL`), but never 64 (`EX_USAGE`), 65 (`EX_DATAERR`), 77
    /// (`EX_NOPERM`), 78 (`EX_CONFIG`), 126 (not executable) or 127 (not found).
    pub const COMMAND_LINE: ExitCodePolicy = ExitCodePolicy {
        retry: ExitCodeSet::empty().with(EX_TEMPFAIL),
        stop: ExitCodeSet::empty()
            .with(EX_USAGE)
            .with(EX_DATAERR)
            .with(EX_NOPERM)
            .with(EX_CONFIG)
            .with(NOT_EXECUTABLE)
            .with(NOT_FOUND),
        retry_others: true,
    };

    /// A policy from its parts (see the type's precedence rules).
    #[must_use]
    pub const fn new(retry: ExitCodeSet, stop: ExitCodeSet, retry_others: bool) -> ExitCodePolicy {
        ExitCodePolicy {
            retry,
            stop,
            retry_others,
        }
    }

    /// Retry only the codes in `retryable`; every other non-zero code stops.
    #[must_use]
    pub const fn only(retryable: ExitCodeSet) -> ExitCodePolicy {
        ExitCodePolicy::new(retryable, ExitCodeSet::empty(), false)
    }

    /// Retry every non-zero code except those in `stop`.
    #[must_use]
    pub const fn all_except(stop: ExitCodeSet) -> ExitCodePolicy {
        ExitCodePolicy::new(ExitCodeSet::empty(), stop, true)
    }

    /// The same policy with `code` also retried (unless it is in the stop set).
    #[must_use]
    pub const fn with_retry(mut self, code: u8) -> ExitCodePolicy {
        self.retry.insert(code);
        self
    }

    /// The same policy with `code` also stopping; this beats the retry set.
    #[must_use]
    pub const fn with_stop(mut self, code: u8) -> ExitCodePolicy {
        self.stop.insert(code);
        self
    }

    /// Codes always retried (unless also in the stop set).
    #[must_use]
    pub const fn retry_set(&self) -> ExitCodeSet {
        self.retry
    }

    /// Codes never retried.
    #[must_use]
    pub const fn stop_set(&self) -> ExitCodeSet {
        self.stop
    }

    /// Whether codes in neither set are retried.
    #[must_use]
    pub const fn retries_others(&self) -> bool {
        self.retry_others
    }

    /// What the exit code `code` means. Takes an `i32` so any platform's code
    /// fits; codes outside `0..=255` are in neither set.
    #[must_use]
    pub fn decide(&self, code: i32) -> ExitDecision {
        if code == 0 {
            return ExitDecision::Success;
        }
        if let Ok(byte) = u8::try_from(code) {
            if self.stop.contains(byte) {
                return ExitDecision::Stop;
            }
            if self.retry.contains(byte) {
                return ExitDecision::Retry;
            }
        }
        if self.retry_others {
            ExitDecision::Retry
        } else {
            ExitDecision::Stop
        }
    }
}

impl Default for ExitCodePolicy {
    /// [`ExitCodePolicy::PIPELINE`].
    fn default() -> Self {
        ExitCodePolicy::PIPELINE
    }
}

// ---------------------------------------------------------------------------
// HTTP statuses

const STATUS_MIN: u16 = 100;
const STATUS_MAX: u16 = 599;

/// A set of HTTP statuses `100..=599`. Anything outside that range is never a
/// member: inserting it does nothing and `contains` says no.
///
/// ```
/// use retry_core::StatusSet;
/// let set = StatusSet::DEFAULT_RETRYABLE;
/// assert!(set.contains(429) && set.contains(503));
/// assert!(!set.contains(404) && !set.contains(600));
/// let custom = StatusSet::parse("408,429,500-599").unwrap().without(501);
/// assert_eq!(custom, StatusSet::DEFAULT_RETRYABLE.without(501));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StatusSet {
    /// Bit `n` is status `100 + n`.
    words: [u64; 8],
}

const fn status_bit(status: u16) -> Option<usize> {
    if status >= STATUS_MIN && status <= STATUS_MAX {
        Some(status.wrapping_sub(STATUS_MIN) as usize)
    } else {
        None
    }
}

impl StatusSet {
    /// The statuses worth a retry by default: 408 (Request Timeout), 429 (Too
    /// Many Requests) and every 5xx.
    pub const DEFAULT_RETRYABLE: StatusSet =
        StatusSet::empty().with(408).with(429).with_range(500, 599);

    /// No statuses.
    #[must_use]
    pub const fn empty() -> StatusSet {
        StatusSet { words: [0; 8] }
    }

    /// The same set with `status` added (unchanged if outside `100..=599`).
    #[must_use]
    pub const fn with(mut self, status: u16) -> StatusSet {
        self.insert(status);
        self
    }

    /// The same set without `status`.
    #[must_use]
    pub const fn without(mut self, status: u16) -> StatusSet {
        self.remove(status);
        self
    }

    /// The same set with `lo..=hi` added, clipped to `100..=599`.
    #[must_use]
    pub const fn with_range(mut self, lo: u16, hi: u16) -> StatusSet {
        self.set_range(lo, hi, true);
        self
    }

    /// The same set without any status in `lo..=hi`.
    #[must_use]
    pub const fn without_range(mut self, lo: u16, hi: u16) -> StatusSet {
        self.set_range(lo, hi, false);
        self
    }

    const fn set_range(&mut self, lo: u16, hi: u16, on: bool) {
        let lo = if lo < STATUS_MIN { STATUS_MIN } else { lo };
        let hi = if hi > STATUS_MAX { STATUS_MAX } else { hi };
        if let (Some(lo), Some(hi)) = (status_bit(lo), status_bit(hi)) {
            set_range(&mut self.words, lo, hi, on);
        }
    }

    /// Whether `status` is in the set; always false outside `100..=599`.
    #[must_use]
    pub const fn contains(&self, status: u16) -> bool {
        match status_bit(status) {
            Some(bit) => get_bit(&self.words, bit),
            None => false,
        }
    }

    /// Adds `status` (ignored if outside `100..=599`).
    pub const fn insert(&mut self, status: u16) {
        if let Some(bit) = status_bit(status) {
            set_bit(&mut self.words, bit, true);
        }
    }

    /// Removes `status`.
    pub const fn remove(&mut self, status: u16) {
        if let Some(bit) = status_bit(status) {
            set_bit(&mut self.words, bit, false);
        }
    }

    /// Statuses in either set.
    #[must_use]
    pub const fn union(mut self, other: StatusSet) -> StatusSet {
        or_words(&mut self.words, &other.words);
        self
    }

    /// How many statuses the set holds.
    #[must_use]
    pub const fn len(&self) -> usize {
        count(&self.words)
    }

    /// Whether the set holds no status.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        count(&self.words) == 0
    }

    /// The statuses in ascending order.
    #[must_use]
    pub const fn iter(&self) -> Statuses {
        Statuses { words: self.words }
    }

    /// Reads a comma-separated list of statuses and inclusive ranges, such as
    /// `"408,429,500-599"`. A blank string is the empty set.
    ///
    /// # Errors
    ///
    /// A [`SetParseError`] naming the first bad item: empty, not a number,
    /// outside `100..=599`, or a reversed range.
    pub fn parse(list: &str) -> Result<StatusSet, SetParseError<'_>> {
        let mut set = StatusSet::empty();
        parse_list(list, STATUS_MIN, STATUS_MAX, |lo, hi| {
            set = set.with_range(lo, hi);
        })?;
        Ok(set)
    }
}

impl IntoIterator for &StatusSet {
    type Item = u16;
    type IntoIter = Statuses;

    fn into_iter(self) -> Statuses {
        self.iter()
    }
}

/// The members of a [`StatusSet`], ascending; from [`StatusSet::iter`].
#[derive(Clone, Debug)]
pub struct Statuses {
    words: [u64; 8],
}

impl Iterator for Statuses {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        let bit = u16::try_from(pop_lowest(&mut self.words)?).ok()?;
        bit.checked_add(STATUS_MIN)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = count(&self.words);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Statuses {}
impl FusedIterator for Statuses {}

// ---------------------------------------------------------------------------
// Named error codes

/// A set of named error codes (such as a streaming API's `"error.code"`
/// field), borrowed from a slice and matched exactly, case-sensitively.
///
/// ```
/// use retry_core::ErrorCodeSet;
/// assert!(ErrorCodeSet::STREAMING.contains("RATE_LIMIT"));
/// assert!(!ErrorCodeSet::STREAMING.contains("rate_limit"));
/// const MINE: ErrorCodeSet<'static> = ErrorCodeSet::new(&["BUSY", "TRY_AGAIN"]);
/// assert!(MINE.contains("BUSY"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCodeSet<'a> {
    codes: &'a [&'a str],
}

impl<'a> ErrorCodeSet<'a> {
    /// The codes a streaming API sends for failures worth a retry:
    /// `TRANSIENT`, `TIMEOUT` and `RATE_LIMIT`.
    pub const STREAMING: ErrorCodeSet<'static> =
        ErrorCodeSet::new(&["TRANSIENT", "TIMEOUT", "RATE_LIMIT"]);

    /// A set of the given codes.
    #[must_use]
    pub const fn new(codes: &'a [&'a str]) -> ErrorCodeSet<'a> {
        ErrorCodeSet { codes }
    }

    /// Whether `code` is one of the set's codes, byte for byte.
    #[must_use]
    pub fn contains(&self, code: &str) -> bool {
        self.codes.contains(&code)
    }

    /// The codes, as given.
    #[must_use]
    pub const fn codes(&self) -> &'a [&'a str] {
        self.codes
    }
}

// ---------------------------------------------------------------------------
// Idempotency

/// An HTTP request method.
///
/// ```
/// use retry_core::Method;
/// assert_eq!(Method::parse(b"GET"), Method::Get);
/// assert_eq!(Method::parse(b"get"), Method::Other); // methods are case-sensitive
/// assert_eq!(Method::Put.as_str(), Some("PUT"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `OPTIONS`
    Options,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `POST`
    Post,
    /// `PATCH`
    Patch,
    /// `TRACE`
    Trace,
    /// `CONNECT`
    Connect,
    /// Any other method (including a known name in the wrong case).
    Other,
}

impl Method {
    /// The method named by `name`, matched exactly (HTTP methods are
    /// case-sensitive, so `b"get"` is [`Method::Other`]).
    #[must_use]
    pub const fn parse(name: &[u8]) -> Method {
        match name {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"OPTIONS" => Method::Options,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"POST" => Method::Post,
            b"PATCH" => Method::Patch,
            b"TRACE" => Method::Trace,
            b"CONNECT" => Method::Connect,
            _ => Method::Other,
        }
    }

    /// The method's name; `None` for [`Method::Other`].
    #[must_use]
    pub const fn as_str(&self) -> Option<&'static str> {
        match self {
            Method::Get => Some("GET"),
            Method::Head => Some("HEAD"),
            Method::Options => Some("OPTIONS"),
            Method::Put => Some("PUT"),
            Method::Delete => Some("DELETE"),
            Method::Post => Some("POST"),
            Method::Patch => Some("PATCH"),
            Method::Trace => Some("TRACE"),
            Method::Connect => Some("CONNECT"),
            Method::Other => None,
        }
    }
}

/// Whether a request may be sent again after the server may have seen it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Idempotency {
    /// Decide from the method (see [`may_replay`]).
    #[default]
    Auto,
    /// The caller vouches that any request may be replayed (for example, it
    /// carries an idempotency key).
    Always,
    /// Never replay a request the server may have seen.
    Never,
}

/// Whether a request that may have reached the server can be sent again.
///
/// Under [`Idempotency::Auto`], `GET`, `HEAD` and `OPTIONS` are replayed, plus
/// `PUT` and `DELETE` when `replay_put_delete` is on. `POST`, `PATCH`,
/// `CONNECT`, unknown methods and `TRACE` are not: `TRACE` is safe in HTTP's
/// terms but is left out, as only the first three are the safe methods this crate promises to replay ([classification](crate::behaviour#classifying-failures)), and servers
/// commonly disable it. [`Idempotency::Always`] replays everything,
/// [`Idempotency::Never`] nothing.
///
/// ```
/// use retry_core::{may_replay, Idempotency, Method};
/// assert!(may_replay(Idempotency::Auto, Method::Get, false));
/// assert!(!may_replay(Idempotency::Auto, Method::Put, false));
/// assert!(may_replay(Idempotency::Auto, Method::Put, true));
/// assert!(!may_replay(Idempotency::Auto, Method::Post, true));
/// assert!(may_replay(Idempotency::Always, Method::Post, false));
/// ```
#[must_use]
pub const fn may_replay(idempotency: Idempotency, method: Method, replay_put_delete: bool) -> bool {
    match idempotency {
        Idempotency::Always => true,
        Idempotency::Never => false,
        Idempotency::Auto => match method {
            Method::Get | Method::Head | Method::Options => true,
            Method::Put | Method::Delete => replay_put_delete,
            Method::Post | Method::Patch | Method::Trace | Method::Connect | Method::Other => false,
        },
    }
}

/// Whether a connection error or a timeout may be retried.
///
/// If `nothing_sent` (no byte of the request left, e.g. the connection was
/// refused), the server cannot have acted on it, so the answer is always yes,
/// whatever the method and even under [`Idempotency::Never`]. Otherwise the
/// request may have been seen, and [`may_replay`] decides.
///
/// ```
/// use retry_core::{may_retry_connection_error, Idempotency, Method};
/// assert!(may_retry_connection_error(Idempotency::Auto, Method::Post, false, true));
/// assert!(!may_retry_connection_error(Idempotency::Auto, Method::Post, false, false));
/// assert!(may_retry_connection_error(Idempotency::Auto, Method::Get, false, false));
/// ```
#[must_use]
pub const fn may_retry_connection_error(
    idempotency: Idempotency,
    method: Method,
    replay_put_delete: bool,
    nothing_sent: bool,
) -> bool {
    nothing_sent || may_replay(idempotency, method, replay_put_delete)
}

/// Writes ascending `values` as a compact list: runs of consecutive values as
/// `lo-hi`, the rest comma-separated (`1-5,75`); empty writes nothing.
fn write_ranges(f: &mut fmt::Formatter<'_>, values: impl Iterator<Item = u16>) -> fmt::Result {
    let mut run: Option<(u16, u16)> = None;
    let mut first = true;
    let mut flush = |f: &mut fmt::Formatter<'_>, (lo, hi): (u16, u16)| -> fmt::Result {
        if !core::mem::replace(&mut first, false) {
            f.write_str(",")?;
        }
        if lo == hi {
            write!(f, "{lo}")
        } else {
            write!(f, "{lo}-{hi}")
        }
    };
    for v in values {
        run = match run {
            Some((lo, hi)) if hi.checked_add(1) == Some(v) => Some((lo, v)),
            Some(done) => {
                flush(f, done)?;
                Some((v, v))
            }
            None => Some((v, v)),
        };
    }
    match run {
        Some(done) => flush(f, done),
        None => Ok(()),
    }
}

impl fmt::Display for ExitCodeSet {
    /// The list form [`ExitCodeSet::parse`] reads back: `1-5,75`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_ranges(f, self.iter().map(u16::from))
    }
}

impl fmt::Display for StatusSet {
    /// The list form [`StatusSet::parse`] reads back: `408,429,500-599`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_ranges(f, self.iter())
    }
}

/// Serde for the sets (behind the `serde` feature): written as their list text
/// (`"408,429,500-599"`); read from that text, or from an array whose items are
/// numbers or range strings (`[408, 429, "500-599"]`). A set in a config is one
/// value: an override that sets it replaces the whole list.
#[cfg(feature = "serde")]
mod serde_impls {
    use core::fmt;

    use serde::de::{self, Deserializer, SeqAccess, Visitor};
    use serde::ser::Serializer;
    use serde::{Deserialize, Serialize};

    use super::{ExitCodeSet, StatusSet};

    /// What both sets need to be read.
    trait ListSet: Sized + Copy + fmt::Display {
        const WHAT: &'static str;
        fn empty() -> Self;
        fn parse_text(text: &str) -> Result<Self, ()>;
        fn union_with(self, other: Self) -> Self;
    }

    impl ListSet for ExitCodeSet {
        const WHAT: &'static str =
            "exit codes (0-255) and ranges, as \"1,2,5-9\" or [1, 2, \"5-9\"]";
        fn empty() -> Self {
            ExitCodeSet::empty()
        }
        fn parse_text(text: &str) -> Result<Self, ()> {
            ExitCodeSet::parse(text).map_err(|_| ())
        }
        fn union_with(self, other: Self) -> Self {
            self.union(other)
        }
    }

    impl ListSet for StatusSet {
        const WHAT: &'static str =
            "HTTP statuses (100-599) and ranges, as \"408,429,500-599\" or [408, 429, \"500-599\"]";
        fn empty() -> Self {
            StatusSet::empty()
        }
        fn parse_text(text: &str) -> Result<Self, ()> {
            StatusSet::parse(text).map_err(|_| ())
        }
        fn union_with(self, other: Self) -> Self {
            self.union(other)
        }
    }

    struct SetVisitor<S>(core::marker::PhantomData<S>);

    /// Reads one number as a one-item list, through the set's own parser (so
    /// ranges are checked the same way).
    fn one<S: ListSet, E: de::Error>(n: u64) -> Result<S, E> {
        let mut buf = [0u8; 20];
        let text = u64_text(n, &mut buf);
        S::parse_text(text).map_err(|()| E::invalid_value(de::Unexpected::Unsigned(n), &S::WHAT))
    }

    /// `n` in decimal, written into `buf`.
    fn u64_text(mut n: u64, buf: &mut [u8; 20]) -> &str {
        let mut start = buf.len();
        loop {
            start = start.saturating_sub(1);
            if let Some(slot) = buf.get_mut(start) {
                // `n % 10` is a single digit.
                #[allow(clippy::cast_possible_truncation)]
                let digit = (n % 10) as u8;
                *slot = b'0'.saturating_add(digit);
            }
            n /= 10;
            if n == 0 || start == 0 {
                break;
            }
        }
        buf.get(start..)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    impl<'de, S: ListSet> Visitor<'de> for SetVisitor<S> {
        type Value = S;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(S::WHAT)
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<S, E> {
            S::parse_text(text).map_err(|()| E::invalid_value(de::Unexpected::Str(text), &S::WHAT))
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> Result<S, E> {
            one(n)
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> Result<S, E> {
            match u64::try_from(n) {
                Ok(n) => one(n),
                Err(_) => Err(E::invalid_value(de::Unexpected::Signed(n), &S::WHAT)),
            }
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<S, A::Error> {
            let mut set = S::empty();
            while let Some(item) = seq.next_element::<Item<S>>()? {
                set = set.union_with(item.0);
            }
            Ok(set)
        }
    }

    /// One array item: a number or a range string.
    struct Item<S>(S);

    impl<'de, S: ListSet> Deserialize<'de> for Item<S> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(SetVisitor::<S>(core::marker::PhantomData))
                .map(Item)
        }
    }

    macro_rules! serde_for {
        ($set:ty) => {
            impl Serialize for $set {
                fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
                    s.collect_str(self)
                }
            }
            impl<'de> Deserialize<'de> for $set {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    d.deserialize_any(SetVisitor::<$set>(core::marker::PhantomData))
                }
            }
        };
    }

    serde_for!(ExitCodeSet);
    serde_for!(StatusSet);
}
