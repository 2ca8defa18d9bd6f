//! tmp
mod cancel;
mod clock;
mod error;
mod shared;
pub use cancel::{CancelToken, Waited};
pub use clock::{Clock, FakeSleeper, ManualClock, Sleeper, Slept, SystemClock, ThreadSleeper};
pub use error::RetryError;
pub use shared::SharedBudget;
