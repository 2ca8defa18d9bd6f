//! A counting global allocator for the allocation tests of this binary. It
//! counts only on the thread that armed it, in a thread-local count, so tests
//! running at the same time on other threads neither add to a count nor see
//! it; every other test pays one thread-local read per allocation.
#![allow(unsafe_code, dead_code)]

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use std::alloc::System;

struct Counting;

std::thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call forwards to the system allocator unchanged; counting only
// reads and writes two thread-locals that have no destructor (so they can be
// reached at any point of a thread's life, its teardown included).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            COUNT.with(|c| c.set(c.get() + 1));
        }
        // SAFETY: the caller upholds `alloc`'s contract, which is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn arm(on: bool) -> usize {
    ARMED.with(|a| a.set(on));
    COUNT.with(Cell::get)
}

/// Runs `f` and returns how many allocations it made on this thread.
pub(crate) fn allocations(f: impl FnOnce()) -> usize {
    let before = arm(true);
    f();
    arm(false) - before
}

/// Runs `f` to completion and returns how many allocations this thread made
/// meanwhile (on a current-thread runtime: all of the future's).
pub(crate) async fn allocations_async<F: core::future::Future>(f: F) -> usize {
    let before = arm(true);
    f.await;
    arm(false) - before
}
