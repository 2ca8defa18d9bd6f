//! Hedging: sending extra copies of a slow idempotent call and keeping the first
//! good answer. This folder owns the [`HedgeMachine`] that makes every hedging
//! decision (`machine.rs`), its [`HedgePolicy`] with the modes and delays and its
//! builder (`policy.rs`), the errors a bad policy is refused with (`error.rs`),
//! the [`LatencyHistogram`] an adaptive delay reads (`latency.rs`), the
//! [`Copies`] set the machine names copies with (`copies.rs`), the scripted
//! [`HedgeSimulation`] and its printable [`HedgeTimeline`] (`sim.rs`), and the
//! glue to the shared retry budget and circuit breaker (`compose.rs`).

mod compose;
mod copies;
mod error;
mod latency;
mod machine;
mod policy;
mod sim;

pub use compose::{feed_hedge_budget, hedge_breaker_outcome, hedge_budget_steps, hedge_rejection};
pub use copies::{Copies, CopiesIter, MAX_COPIES};
pub use error::HedgePolicyError;
pub use latency::LatencyHistogram;
pub use machine::{HedgeAction, HedgeEvent, HedgeMachine, HedgeMisuse, HedgePhase, WaitReason};
pub use policy::{HedgeDelay, HedgeMode, HedgePolicy, HedgePolicyBuilder};
pub use sim::{HedgeSimulation, HedgeStep, HedgeTimeline};
