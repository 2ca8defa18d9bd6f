//! embassy-time's clock on the Cortex-M SysTick timer: one interrupt per
//! millisecond counts the ticks and wakes the timers that fall due. Every chip
//! has a SysTick, so the example runs on any Cortex-M4F (a HAL's driver, on an
//! RTC or a general-purpose timer, would let the core sleep between wake-ups).

use core::cell::{Cell, RefCell};
use core::task::Waker;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::exception;
use critical_section::Mutex;
use embassy_time_driver::{Driver, TICK_HZ};
use embassy_time_queue_utils::Queue;

struct SysTickDriver {
    /// Ticks since `start`.
    ticks: Mutex<Cell<u64>>,
    /// The timers waiting, kept in the executor's tasks (embassy's integrated
    /// queue).
    queue: Mutex<RefCell<Queue>>,
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver {
    ticks: Mutex::new(Cell::new(0)),
    queue: Mutex::new(RefCell::new(Queue::new())),
});

impl Driver for SysTickDriver {
    fn now(&self) -> u64 {
        critical_section::with(|cs| self.ticks.borrow(cs).get())
    }

    fn schedule_wake(&self, at: u64, waker: &Waker) {
        critical_section::with(|cs| {
            let now = self.ticks.borrow(cs).get();
            match self.queue.borrow(cs).try_borrow_mut() {
                Ok(mut queue) => {
                    queue.schedule_wake(at, waker);
                    // Already due: wake it now rather than at the next tick.
                    queue.next_expiration(now);
                }
                // Only the tick interrupt also borrows the queue, and it cannot
                // run inside this critical section; should it ever, poll again.
                Err(_) => waker.wake_by_ref(),
            }
        });
    }
}

/// Starts the clock: SysTick on the core clock of `core_hz`, interrupting
/// `TICK_HZ` times a second.
pub fn start(mut syst: SYST, core_hz: u32) {
    let per_tick = u64::from(core_hz) / TICK_HZ;
    let reload = u32::try_from(per_tick.saturating_sub(1)).unwrap_or(0x00ff_ffff);
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(reload.min(0x00ff_ffff));
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

#[exception]
fn SysTick() {
    critical_section::with(|cs| {
        let ticks = DRIVER.ticks.borrow(cs);
        let now = ticks.get().saturating_add(1);
        ticks.set(now);
        if let Ok(mut queue) = DRIVER.queue.borrow(cs).try_borrow_mut() {
            queue.next_expiration(now);
        }
    });
}
