//! The only unsafe code of the program: catching INT, TERM, HUP and QUIT,
//! signalling a process group, and ending the program with a signal.
#![allow(unsafe_code)]

use core::sync::atomic::{AtomicI32, Ordering};

/// The signals `retry` passes on to the command and then dies of.
pub(super) const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// The last forwarded signal received and not yet taken (0 for none).
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn remember(signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    PENDING.store(signal, Ordering::SeqCst);
}

/// Installs the catching handler for [`FORWARDED`]. A child's `exec` resets
/// caught signals to their defaults, so commands are unaffected.
pub(super) fn install() -> std::io::Result<()> {
    for signal in FORWARDED {
        // SAFETY: `action` is fully initialised (zeroed, then the handler, an empty
        // mask and SA_RESTART set) before `sigaction` reads it; the handler only
        // performs an atomic store, which is async-signal-safe; a null old-action
        // pointer is allowed.
        let result = unsafe {
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction = remember as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, core::ptr::null_mut())
        };
        if result != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Takes the signal received since the last call, if any.
pub(super) fn take() -> Option<i32> {
    match PENDING.swap(0, Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Sends `signal` to every process of the group `group`. A group that is gone
/// already is not an error.
pub(super) fn signal_group(group: u32, signal: i32) {
    let Ok(group) = libc::pid_t::try_from(group) else {
        return;
    };
    if group <= 1 {
        return; // never the caller's own group or every process
    }
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names the
    // process group `group` (> 1, checked above), never "all processes".
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Ends the program with `signal`: restores its default disposition, unblocks
/// it and raises it. Falls back to exit status 128 + `signal` if that returns.
pub(super) fn die_of(signal: i32) -> ! {
    // SAFETY: restoring SIG_DFL, editing a local signal set and raising a signal
    // have no memory-safety preconditions; every pointer passed is to a local
    // that lives across the call.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut());
        libc::raise(signal);
    }
    std::process::exit(128_i32.saturating_add(signal))
}
