//! The scripted driver: notifications as data ([`BudgetInput`]), replayed
//! against a budget by a [`BudgetTimeline`] as steps or as a table.

use core::fmt;

use super::{AttemptKind, RetryBudget, RetryKind, Tokens, Withdrawal};
use crate::Instant;

/// One notification, as data (see [`RetryBudget::apply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetInput {
    /// [`RetryBudget::on_first_attempt`].
    FirstAttempt,
    /// [`RetryBudget::on_failure`].
    Failure,
    /// [`RetryBudget::on_success`].
    Success(AttemptKind),
    /// [`RetryBudget::try_withdraw`].
    Withdraw(RetryKind),
}

impl fmt::Display for BudgetInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetInput::FirstAttempt => f.write_str("first attempt"),
            BudgetInput::Failure => f.write_str("failure"),
            BudgetInput::Success(AttemptKind::First) => f.write_str("success (first)"),
            BudgetInput::Success(AttemptKind::Retry(kind)) => write!(f, "success ({kind})"),
            BudgetInput::Withdraw(kind) => write!(f, "withdraw ({kind})"),
        }
    }
}

/// What [`RetryBudget::apply`] answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetOutput {
    /// A notification was taken in; there is no answer.
    Noted,
    /// The answer to a withdrawal.
    Withdrawal(Withdrawal),
}

impl fmt::Display for BudgetOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetOutput::Noted => f.write_str("-"),
            BudgetOutput::Withdrawal(w) => fmt::Display::fmt(w, f),
        }
    }
}

/// A scripted notification: `input` at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BudgetEvent {
    /// When.
    pub at: Instant,
    /// What.
    pub input: BudgetInput,
}

impl BudgetEvent {
    /// `input` at `at`.
    #[must_use]
    pub const fn new(at: Instant, input: BudgetInput) -> BudgetEvent {
        BudgetEvent { at, input }
    }
}

/// One row of a [`BudgetTimeline`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BudgetStep {
    /// When the input arrived.
    pub at: Instant,
    /// The input.
    pub input: BudgetInput,
    /// The budget's answer.
    pub output: BudgetOutput,
    /// The tokens afterwards.
    pub tokens: Tokens,
}

/// Replays a script of [`BudgetEvent`]s against a budget: an iterator of
/// [`BudgetStep`]s, and a table of them through [`fmt::Display`] (written without
/// allocating; displaying does not advance the iterator).
///
/// ```
/// use retry_core::*;
///
/// let t = Instant::from_millis(250);
/// let script = [
///     BudgetEvent::new(t, BudgetInput::FirstAttempt),
///     BudgetEvent::new(t, BudgetInput::Failure),
///     BudgetEvent::new(t, BudgetInput::Withdraw(RetryKind::Timeout)),
/// ];
/// let timeline = BudgetTimeline::new(RetryBudget::new(BudgetConfig::aws_standard()), &script);
/// let last = timeline.clone().last().unwrap();
/// assert_eq!(last.tokens, Tokens::from_whole(490));
/// assert!(timeline.to_string().contains("granted, cost 10.000"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetTimeline<'s> {
    budget: RetryBudget,
    script: &'s [BudgetEvent],
}

impl<'s> BudgetTimeline<'s> {
    /// A replay of `script` starting from `budget`.
    #[must_use]
    pub const fn new(budget: RetryBudget, script: &'s [BudgetEvent]) -> BudgetTimeline<'s> {
        BudgetTimeline { budget, script }
    }

    /// The budget as it stands.
    #[must_use]
    pub const fn budget(&self) -> &RetryBudget {
        &self.budget
    }
}

impl Iterator for BudgetTimeline<'_> {
    type Item = BudgetStep;

    fn next(&mut self) -> Option<BudgetStep> {
        let (event, rest) = self.script.split_first()?;
        self.script = rest;
        let output = self.budget.apply(event.input, event.at);
        Some(BudgetStep {
            at: event.at,
            input: event.input,
            output,
            tokens: self.budget.tokens(),
        })
    }
}

impl fmt::Display for BudgetTimeline<'_> {
    /// A header naming the configuration, then one aligned row per step:
    /// time, input, answer, tokens after.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.budget.config())?;
        writeln!(
            f,
            "{:>9}  {:<24}  {:<28}  {:>9}",
            "at", "input", "output", "tokens"
        )?;
        for step in self.clone() {
            let input = Cell::render(&step.input)?;
            let output = Cell::render(&step.output)?;
            writeln!(
                f,
                "{:>9}  {:<24}  {:<28}  {:>9}",
                step.at,
                input.as_str(),
                output.as_str(),
                Cell::render(&step.tokens)?.as_str()
            )?;
        }
        Ok(())
    }
}

/// A fixed-size text cell, so that padding applies to a whole rendered value.
struct Cell {
    bytes: [u8; 64],
    len: usize,
}

impl Cell {
    fn render(value: &dyn fmt::Display) -> Result<Cell, fmt::Error> {
        let mut cell = Cell {
            bytes: [0; 64],
            len: 0,
        };
        fmt::write(&mut cell, format_args!("{value}"))?;
        Ok(cell)
    }

    fn as_str(&self) -> &str {
        self.bytes
            .get(..self.len)
            .and_then(|b| core::str::from_utf8(b).ok())
            .unwrap_or("")
    }
}

impl fmt::Write for Cell {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let dst = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}
