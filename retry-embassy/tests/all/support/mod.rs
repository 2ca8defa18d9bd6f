//! Virtual time for the host tests: embassy's mock time driver (a global clock
//! the test moves forward) and a small executor that polls woken tasks until
//! nothing more can run at the current instant.
//!
//! The mock driver is global to the process, so every test takes [`virtual_time`]
//! first: it serialises the tests of one binary and starts the clock at zero.

#![allow(dead_code)]

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::{Context, Waker};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Wake;

use embassy_time::{Duration, Instant, MockDriver};

static CLOCK: Mutex<()> = Mutex::new(());

/// Exclusive use of the mock clock, reset to tick zero with no timer pending.
pub(crate) fn virtual_time() -> MutexGuard<'static, ()> {
    let guard = CLOCK.lock().unwrap_or_else(PoisonError::into_inner);
    MockDriver::get().reset();
    guard
}

/// Sets the clock back to tick zero with no timer pending (the caller holds
/// [`virtual_time`]).
pub(crate) fn reset_clock() {
    MockDriver::get().reset();
}

/// Moves the clock forward by `by`, waking every timer that falls due.
pub(crate) fn advance(by: Duration) {
    MockDriver::get().advance(by);
}

/// The mock clock's reading, as time since tick zero.
pub(crate) fn now() -> core::time::Duration {
    core::time::Duration::from_micros(Instant::now().as_micros())
}

struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct Task<'a> {
    future: Pin<Box<dyn Future<Output = ()> + 'a>>,
    woken: Arc<Flag>,
    waker: Waker,
    done: bool,
}

/// Tasks polled on the test's thread, each with its own waker, as an embassy
/// executor would poll them: only when woken.
#[derive(Default)]
pub(crate) struct Tasks<'a> {
    tasks: Vec<Task<'a>>,
    /// How many times any task was polled.
    pub(crate) polls: u64,
}

impl<'a> Tasks<'a> {
    pub(crate) fn new() -> Self {
        Tasks::default()
    }

    /// Adds a task; it is first polled by the next [`Tasks::run_until_idle`].
    pub(crate) fn spawn(&mut self, future: impl Future<Output = ()> + 'a) {
        let woken = Arc::new(Flag(AtomicBool::new(true)));
        let waker = Waker::from(Arc::clone(&woken));
        self.tasks.push(Task {
            future: Box::pin(future),
            woken,
            waker,
            done: false,
        });
    }

    /// Polls woken tasks until none is woken: everything that can happen at the
    /// current instant has happened. Panics on a livelock (tasks that keep
    /// waking each other without time passing).
    pub(crate) fn run_until_idle(&mut self) {
        for _round in 0..100_000 {
            let mut any = false;
            for task in &mut self.tasks {
                if task.done || !task.woken.0.swap(false, Ordering::SeqCst) {
                    continue;
                }
                any = true;
                self.polls += 1;
                let mut cx = Context::from_waker(&task.waker);
                if task.future.as_mut().poll(&mut cx).is_ready() {
                    task.done = true;
                }
            }
            if !any {
                return;
            }
        }
        panic!("livelock: tasks kept waking without time passing");
    }

    /// Whether every task has finished.
    pub(crate) fn all_done(&self) -> bool {
        self.tasks.iter().all(|t| t.done)
    }

    /// Runs until every task is done, moving the clock forward `step` at a time
    /// whenever nothing can run; panics if that takes longer than `limit` of
    /// virtual time. The harness knows nothing of the tasks' timers: it only
    /// lets time pass, so every wake-up lands on the first step at or after its
    /// due time.
    pub(crate) fn run(&mut self, step: Duration, limit: Duration) {
        let end = Instant::now() + limit;
        self.run_until_idle();
        while !self.all_done() {
            assert!(
                Instant::now() < end,
                "tasks still running after {} ms of virtual time",
                limit.as_millis()
            );
            advance(step);
            self.run_until_idle();
        }
    }

    /// Moves the clock forward `step` at a time until it has moved `by`, running
    /// every task that falls due on the way.
    pub(crate) fn run_for(&mut self, step: Duration, by: Duration) {
        let end = Instant::now() + by;
        self.run_until_idle();
        while Instant::now() < end {
            advance(step);
            self.run_until_idle();
        }
    }
}
