//! [`Saved`]: a shared machine's snapshot with the point of its clock it was
//! taken at, so that another process (or a later run) can resume it.

/// A shared breaker's or budget's snapshot ([`retry_core::BreakerSnapshot`],
/// [`retry_core::BudgetSnapshot`]) and the point of the machine's own clock it
/// was taken at. A shared machine counts time from its first use; restored with
/// [`SharedBreaker::restore`](crate::SharedBreaker::restore) or
/// [`SharedBudget::restore`](crate::SharedBudget::restore) at some `now`, that
/// point becomes `now`: the time between saving and restoring counts as none (an
/// open breaker stays open for what was left of its open period when it was
/// saved). With the `serde` feature it serializes, the snapshot in its own
/// versioned format.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Saved<S> {
    /// The machine's snapshot.
    pub snapshot: S,
    /// When it was taken, on the machine's clock.
    pub at: retry_core::Instant,
}
