//! The retry machine and what it is built from: the [`RetryPolicy`] (attempts,
//! delays, hint handling, time limits) and its builder, the [`Backoff`] curves,
//! [`Jitter`] and its seeded generator, the [`RetryMachine`] that makes every
//! decision, and the scripted [`Simulation`] that drives it in virtual time. Also
//! the results a driver hands back ([`Success`], [`RetryError`]), the error an
//! invalid policy is refused with ([`PolicyError`]), and the machine's versioned
//! [`RetrySnapshot`].

mod backoff;
mod binary64;
mod call;
mod deadline;
mod delay_list;
mod error;
mod jitter;
mod machine;
pub(crate) mod nanos;
mod policy;
mod sim;
mod snapshot;
mod timing;

pub use backoff::Backoff;
pub use call::{RetryError, Success};
pub use deadline::attempt_timed_out;
pub use delay_list::DelayList;
pub use error::PolicyError;
pub use jitter::{jitter_draw, Jitter};
pub(crate) use jitter::{jitter_draw_nanos, mix64};
pub use machine::{Action, Event, GiveUp, GiveUpReason, Misuse, Phase, RetryMachine, SleepReason};
pub use policy::{CircuitOpen, HintMode, Resolution, RetryPolicy, RetryPolicyBuilder};
pub use sim::{total_sleep, Outcome, Scripted, Simulation, Step, Timeline};
pub use snapshot::RetrySnapshot;
