//! The system calls the program makes, through `rustix` (and `nix` for what
//! rustix has no safe form of: the signal mask). Each function here is safe to
//! call with any argument; the logic lives in the modules that call them.
//!
//! Five things have no safe form in either crate and stay `unsafe`, each with
//! the reason it is sound: installing a signal handler (`sigaction`), reading
//! the `siginfo_t` the kernel hands that handler, borrowing a descriptor the
//! caller passed by number (`--events fd:N`), reading the process's
//! environment (`environ`) without copying it, and starting a command with a
//! `vfork`-style `clone(2)` ([`spawn`]). The last one replaces
//! `posix_spawnp(3)`, which is safe to call but whose child in the GNU C
//! library asks about and resets every one of the 64 signal dispositions,
//! about 120 system calls, most of what starting a short command costs after
//! the loader; ours resets only the signals `retry` catches, and SIGPIPE.
#![allow(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::ffi::{CStr, CString, OsString};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use nix::sys::signal::{self as nix_signal, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, WaitOptions};

pub(super) use rustix::process::Pid as ProcessId;

/// Signals `retry` catches. INT, TERM, HUP and QUIT end the run (passed on to
/// the command when it did not get them itself); TSTP, TTIN and TTOU stop
/// `retry` (and the command, when it did not get them itself); CONT continues
/// the command; CHLD wakes the wait.
pub(super) const CAUGHT: [i32; 9] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGCONT,
    libc::SIGCHLD,
];

/// The signals received and not yet taken, one bit per signal number.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones the kernel sent on its own (`SI_KERNEL`): a terminal's
/// keys (Ctrl-C, Ctrl-\, Ctrl-Z), a background read or write, a hangup. A
/// terminal sends them to its whole foreground process group at once.
static FROM_KERNEL: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds `retry` spent stopped inside the handler (see [`remember`]),
/// not yet taken.
static STOPPED_IN_HANDLER: AtomicU64 = AtomicU64::new(0);
/// The signals `remember` is installed for (bit `n - 1` for signal `n`): a
/// child puts them back to their defaults before it runs a command.
static HANDLED: AtomicU64 = AtomicU64::new(0);
/// The self-pipe's write end, set once by [`install`].
static WAKE_WRITE: OnceLock<OwnedFd> = OnceLock::new();

/// `si_code` of a signal the kernel generated itself (linux/uapi siginfo.h).
const SI_KERNEL: i32 = 0x80;

/// The bit of `signal` in a pending set.
const fn bit(signal: i32) -> u64 {
    if signal >= 1 && signal <= 64 {
        1u64 << (signal - 1)
    } else {
        0
    }
}

extern "C" fn remember(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only atomics and one write(2) through rustix, which calls the kernel
    // directly and leaves errno alone: async-signal-safe, and the interrupted
    // code sees nothing change. `OnceLock::get` is an atomic load.
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: with SA_SIGINFO the kernel passes a pointer to a valid
        // siginfo_t that lives for the whole call of the handler; it is only
        // read, and only when not null.
        unsafe { (*info).si_code }
    };
    if code == SI_KERNEL {
        FROM_KERNEL.fetch_or(bit(signal), Ordering::SeqCst);
        if signal == libc::SIGTTIN || signal == libc::SIGTTOU {
            // A read or write of the terminal from the background (`retry`'s
            // own or, in the job's group, the command's). The kernel restarts
            // the interrupted call after the handler and sends the signal
            // again at once: stop here, as the default action would, until
            // continued (`fg`). kill(2) and clock_gettime(2) are
            // async-signal-safe; the time stopped is counted for the run.
            let since = monotonic_nanos();
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::STOP,
            );
            STOPPED_IN_HANDLER.fetch_add(monotonic_nanos().saturating_sub(since), Ordering::SeqCst);
        }
    }
    PENDING.fetch_or(bit(signal), Ordering::SeqCst);
    if let Some(fd) = WAKE_WRITE.get() {
        // A full pipe fails with EAGAIN, which is fine: a wake-up is pending.
        let _ = rustix::io::write(fd, &[0]);
    }
}

/// The monotonic clock in nanoseconds (async-signal-safe: the vDSO or the
/// system call).
fn monotonic_nanos() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(now.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(now.tv_nsec).unwrap_or(0))
}

/// The time `retry` spent stopped in its handler since the last call: a
/// SIGTTIN or SIGTTOU from the terminal stops it there, not in the main loop.
pub(super) fn take_stopped_in_handler() -> Duration {
    Duration::from_nanos(STOPPED_IN_HANDLER.swap(0, Ordering::SeqCst))
}

/// Whether `signal` in `pending` already stopped `retry` in its handler (a
/// SIGTTIN or SIGTTOU the terminal sent).
pub(super) const fn stopped_in_handler(pending: Pending, signal: i32) -> bool {
    (signal == libc::SIGTTIN || signal == libc::SIGTTOU) && pending.only_from_kernel(signal)
}

/// The read end of the self-pipe: readable whenever a caught signal arrived.
#[derive(Debug)]
pub(super) struct Wake(OwnedFd);

/// The named signal of `number`.
fn named(number: i32) -> Option<nix_signal::Signal> {
    nix_signal::Signal::try_from(number).ok()
}

/// Sets the disposition of `signal`; returns the one it had.
fn set_disposition(signal: i32, handler: SigHandler) -> io::Result<SigHandler> {
    let Some(signal) = named(signal) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    let flags = match handler {
        SigHandler::SigAction(_) => SaFlags::SA_SIGINFO | SaFlags::SA_RESTART,
        _ => SaFlags::SA_RESTART,
    };
    let action = SigAction::new(handler, flags, SigSet::empty());
    // SAFETY: the only handler ever installed is `remember`, which is
    // async-signal-safe (atomics and one write(2), no allocation, no lock);
    // the other dispositions are the default action and "ignore", which have
    // no preconditions.
    let old = unsafe { nix_signal::sigaction(signal, &action) }?;
    let bit = bit(signal as i32);
    match handler {
        SigHandler::SigAction(_) | SigHandler::Handler(_) => {
            HANDLED.fetch_or(bit, Ordering::SeqCst)
        }
        _ => HANDLED.fetch_and(!bit, Ordering::SeqCst),
    };
    Ok(old.handler())
}

/// Creates the self-pipe, ignores SIGPIPE, installs the catching handler for
/// [`CAUGHT`] and makes `retry` the subreaper of its descendants (a process
/// orphaned below it becomes its child, not init's, so that a timeout or a
/// signal can still find it). A child's `exec` resets caught signals to their
/// defaults, so commands are unaffected. Call once.
pub(super) fn install() -> io::Result<Wake> {
    use rustix::pipe::{pipe_with, PipeFlags};
    let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    // Writing into a pipe whose reader is gone (a command that stopped reading
    // its replayed stdin) must be an error to handle, not death.
    set_disposition(libc::SIGPIPE, SigHandler::SigIgn)?;
    // The write end lives as long as the process: the handler may use it any time.
    let _ = WAKE_WRITE.set(write);
    for signal in CAUGHT {
        // A signal `retry` was started with ignored (`nohup`'s HUP, INT and
        // QUIT for a script's background job) stays ignored, for `retry` and
        // for the command: the caller asked for it, as POSIX has shells do.
        if matches!(
            set_disposition(signal, SigHandler::SigAction(remember))?,
            SigHandler::SigIgn
        ) {
            set_disposition(signal, SigHandler::SigIgn)?;
        }
    }
    // Without it (a kernel before 3.4) orphans go to init as before, and only
    // the process group reaches them.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    Ok(Wake(read))
}

/// Signals received since the last take: all of them, and those of them the
/// kernel generated itself (bit `n - 1` for signal `n`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Pending {
    /// Every signal received.
    pub(super) all: u64,
    /// Those the kernel sent itself (a terminal's keys, a hangup).
    pub(super) from_kernel: u64,
}

impl Pending {
    /// Whether `signal` arrived.
    pub(super) const fn has(self, signal: i32) -> bool {
        self.all & bit(signal) != 0
    }

    /// Whether `signal` arrived from the kernel (a terminal) and from nobody
    /// else: a terminal sends its keys' signals to its whole foreground group.
    pub(super) const fn only_from_kernel(self, signal: i32) -> bool {
        self.has(signal) && self.from_kernel & bit(signal) != 0
    }
}

/// Takes the set of signals received since the last call.
pub(super) fn take_pending() -> Pending {
    let all = PENDING.swap(0, Ordering::SeqCst);
    let from_kernel = FROM_KERNEL.swap(0, Ordering::SeqCst);
    Pending { all, from_kernel }
}

/// Takes `signals` out of the pending set (they were handled another way).
pub(super) fn forget(signals: &[i32]) {
    let mask = signals.iter().fold(0, |m, &s| m | bit(s));
    PENDING.fetch_and(!mask, Ordering::SeqCst);
    FROM_KERNEL.fetch_and(!mask, Ordering::SeqCst);
}

/// What to watch a descriptor for in [`Wake::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Interest {
    /// Data to read (or end of file).
    Read,
    /// Room to write (or a reader gone).
    Write,
}

/// What [`Wake::wait`] found on a descriptor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Ready {
    /// Ready for what was asked.
    pub(super) ready: bool,
    /// Closed at the other end, or in error.
    pub(super) hung_up: bool,
}

impl Wake {
    /// Empties the pipe (the pending set says what arrived).
    fn drain(&self) {
        let mut buffer = [0u8; 64];
        while matches!(rustix::io::read(&self.0, &mut buffer), Ok(n) if n > 0) {}
    }

    /// Blocks until a signal arrives, one of `fds` is ready, or `timeout`
    /// passes (`None`: no timeout). Returns what each descriptor is ready for
    /// (in the order given). Returns early, harmlessly, when interrupted.
    pub(super) fn wait(
        &self,
        fds: &[(BorrowedFd<'_>, Interest)],
        timeout: Option<Duration>,
    ) -> Vec<Ready> {
        let mut polled: Vec<PollFd<'_>> = Vec::with_capacity(fds.len() + 1);
        polled.push(PollFd::new(&self.0, PollFlags::IN));
        for (fd, interest) in fds {
            let events = match interest {
                Interest::Read => PollFlags::IN,
                Interest::Write => PollFlags::OUT,
            };
            polled.push(PollFd::from_borrowed_fd(*fd, events));
        }
        let spec = timeout.map(|t| Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        let n = rustix::event::poll(&mut polled, spec.as_ref()).unwrap_or(0);
        if n > 0 && polled.first().is_some_and(|w| !w.revents().is_empty()) {
            self.drain();
        }
        polled
            .iter()
            .skip(1)
            .zip(fds)
            .map(|(p, (_, interest))| {
                let revents = if n > 0 {
                    p.revents()
                } else {
                    PollFlags::empty()
                };
                let wanted = match interest {
                    Interest::Read => PollFlags::IN,
                    Interest::Write => PollFlags::OUT,
                };
                Ready {
                    ready: revents.intersects(wanted),
                    hung_up: revents.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL),
                }
            })
            .collect()
    }
}

/// How a waited-for child changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChildState {
    /// Exited with this code.
    Exited(i32),
    /// Killed by this signal.
    Killed(i32),
    /// Stopped by this signal.
    Stopped(i32),
    /// Continued.
    Continued,
}

/// What [`reap`] collected.
#[derive(Debug, Default)]
pub(super) struct Reaped {
    /// The changes of the command, in order.
    pub(super) command: Vec<ChildState>,
    /// Every other child that ended (and is gone now).
    pub(super) others: Vec<i32>,
}

/// Collects the changes of `retry`'s children without blocking: the reports
/// of `command`, in order, and every other child that ended (an orphan `retry`
/// adopted as subreaper, a hook's leftover), reaped. With `command` `None`,
/// only reaps.
pub(super) fn reap(command: Option<ProcessId>) -> Reaped {
    let mut reaped = Reaped::default();
    let options = WaitOptions::NOHANG | WaitOptions::UNTRACED | WaitOptions::CONTINUED;
    // wait(2) (waitpid -1: any child, whatever its group). No child at all
    // (ECHILD) or none changed: done.
    while let Ok(Some((pid, status))) = rustix::process::wait(options) {
        let state = if let Some(code) = status.exit_status() {
            ChildState::Exited(code)
        } else if let Some(signal) = status.terminating_signal() {
            ChildState::Killed(signal)
        } else if let Some(signal) = status.stopping_signal() {
            ChildState::Stopped(signal)
        } else {
            ChildState::Continued
        };
        if Some(pid) == command {
            reaped.command.push(state);
        } else if matches!(state, ChildState::Exited(_) | ChildState::Killed(_)) {
            reaped.others.push(pid.as_raw_nonzero().get());
        }
    }
    reaped
}

/// Sends `signal` to process `pid`. A process that is gone is not an error.
pub(super) fn signal_process(pid: ProcessId, signal: i32) {
    if let Some(signal) = rustix_signal(signal) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Sends `signal` to every process of the group `group`. A group that is gone
/// already is not an error; `retry`'s own group is never signalled here.
pub(super) fn signal_group(group: ProcessId, signal: i32) {
    if group == own_group() || group.is_init() {
        return;
    }
    if let Some(signal) = rustix_signal(signal) {
        let _ = rustix::process::kill_process_group(group, signal);
    }
}

/// Sends `signal` to the process a pidfd refers to: never to another process
/// that reused its number. An exited process is not an error.
pub(super) fn signal_pidfd(pidfd: &OwnedFd, signal: i32) {
    if let Some(signal) = rustix_signal(signal) {
        let _ = rustix::process::pidfd_send_signal(pidfd, signal);
    }
}

/// A pidfd for `pid` (`None` when the process is gone or the kernel has no
/// pidfds, before 5.3).
pub(super) fn pidfd(pid: ProcessId) -> io::Result<OwnedFd> {
    Ok(rustix::process::pidfd_open(
        pid,
        rustix::process::PidfdFlags::empty(),
    )?)
}

fn rustix_signal(signal: i32) -> Option<rustix::process::Signal> {
    rustix::process::Signal::from_named_raw(signal)
}

/// This process's id.
pub(super) fn own_pid() -> ProcessId {
    rustix::process::getpid()
}

/// This process's group.
pub(super) fn own_group() -> ProcessId {
    rustix::process::getpgrp()
}

/// A process id from a number (`None` for 0 and negatives).
pub(super) fn process_id(raw: i32) -> Option<ProcessId> {
    Pid::from_raw(raw)
}

/// Stops this process with `signal` (its default action), as a shell's job
/// does, and returns once it is continued. The handler is restored afterwards.
/// In an orphaned process group the kernel discards the stop (nobody could
/// continue it): then this returns at once.
pub(super) fn stop_self(signal: i32) {
    if set_disposition(signal, SigHandler::SigDfl).is_err() {
        return;
    }
    signal_process(own_pid(), signal);
    let _ = set_disposition(signal, SigHandler::SigAction(remember));
}

/// Ends the program with `signal`: restores its default disposition, unblocks
/// it and raises it. Falls back to exit status 128 + `signal` if that returns.
pub(super) fn die_of(signal: i32) -> ! {
    let _ = set_disposition(signal, SigHandler::SigDfl);
    if let Some(named) = named(signal) {
        let mut set = SigSet::empty();
        set.add(named);
        let _ = nix_signal::pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&set), None);
    }
    signal_process(own_pid(), signal);
    std::process::exit(128_i32.saturating_add(signal))
}

/// Runs `action` with SIGTTOU blocked: a terminal call made from the
/// background (after a race with the shell) then fails or succeeds instead of
/// stopping the whole job.
fn with_ttou_blocked<T>(action: impl FnOnce() -> T) -> T {
    let mut block = SigSet::empty();
    block.add(nix_signal::Signal::SIGTTOU);
    let mut old = SigSet::empty();
    let blocked =
        nix_signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&block), Some(&mut old)).is_ok();
    let result = action();
    if blocked {
        let _ = nix_signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
    result
}

extern "C" {
    /// The process's environment: a null-terminated array of `KEY=value` C
    /// strings (POSIX).
    static environ: *const *const libc::c_char;
}

/// Everything a child needs, prepared before the spawn.
#[derive(Debug)]
pub(super) struct SpawnPlan {
    /// The program, looked up in PATH when it has no `/`.
    program: CString,
    /// The arguments, `argv[0]` included.
    args: Vec<CString>,
    /// The variables added to the environment, `KEY=value`.
    extra: Vec<CString>,
    /// The inherited variables the extra ones do not replace: pointers into the
    /// process's own environment, which `retry` never changes.
    inherited: Vec<&'static CStr>,
    /// Descriptors to put on 0 and 1 (`None`: inherited).
    pub(super) stdin: Option<RawFd>,
    pub(super) stdout: Option<RawFd>,
    /// Whether the child starts a process group of its own (else it stays in
    /// `retry`'s, the job's).
    pub(super) own_group: bool,
}

/// The process's environment, borrowed.
fn inherited_environment() -> Vec<&'static CStr> {
    let mut entries = Vec::with_capacity(64);
    // SAFETY: `environ` is the process's null-terminated array of
    // NUL-terminated strings. Nothing in `retry` changes it (it calls no
    // setenv or putenv, and is single-threaded), so the array and its strings
    // stay as they are, valid for the rest of the process's life: reading them
    // here and borrowing them as 'static is sound.
    unsafe {
        let mut at = environ;
        while !at.is_null() && !(*at).is_null() {
            entries.push(CStr::from_ptr(*at));
            at = at.add(1);
        }
    }
    entries
}

impl SpawnPlan {
    /// A plan to run `argv` with the process's environment plus `extra`.
    /// `None` if an argument or variable holds a NUL byte.
    pub(super) fn new(argv: &[OsString], extra: &[(&str, OsString)]) -> Option<SpawnPlan> {
        use std::os::unix::ffi::OsStrExt;
        let c = |bytes: &[u8]| CString::new(bytes).ok();
        let args: Vec<CString> = argv
            .iter()
            .map(|a| c(a.as_bytes()))
            .collect::<Option<_>>()?;
        let program = args.first()?.clone();
        let mut env: Vec<CString> = Vec::with_capacity(extra.len());
        for (key, value) in extra {
            let mut pair = Vec::with_capacity(key.len() + value.len() + 2);
            pair.extend_from_slice(key.as_bytes());
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            env.push(c(&pair)?);
        }
        // The extra variables are all RETRY_*: one byte tells most entries
        // apart.
        let replaced = |entry: &[u8]| {
            entry.first() == Some(&b'R')
                && extra.iter().any(|(k, _)| {
                    entry
                        .strip_prefix(k.as_bytes())
                        .is_some_and(|rest| rest.first() == Some(&b'='))
                })
        };
        let mut inherited = inherited_environment();
        inherited.retain(|entry| !replaced(entry.to_bytes()));
        Some(SpawnPlan {
            program,
            args,
            extra: env,
            inherited,
            stdin: None,
            stdout: None,
            own_group: true,
        })
    }
}

/// The largest file name `posix_spawnp(3)` looks up in PATH (NAME_MAX).
const NAME_MAX: usize = 255;

/// The child's stack until it runs the command: it makes a handful of system
/// calls and nothing else. Only the pages it touches are ever allocated.
const CHILD_STACK: usize = 32 * 1024;

/// Where `program` may be, in the order `posix_spawnp(3)` tries them: itself
/// when it names a path (has a `/`), else each directory of `retry`'s PATH
/// (`/bin:/usr/bin` without one; an empty entry is the current directory).
/// `Err` as `posix_spawnp` fails before it tries any.
fn candidates(program: &CStr) -> io::Result<Vec<CString>> {
    let name = program.to_bytes();
    if name.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    if name.contains(&b'/') {
        return Ok(vec![program.to_owned()]);
    }
    if name.len() > NAME_MAX {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    let path = std::env::var_os("PATH");
    let path = path.as_deref().map_or(
        &b"/bin:/usr/bin"[..],
        std::os::unix::ffi::OsStrExt::as_bytes,
    );
    Ok(path
        .split(|&b| b == b':')
        .filter_map(|dir| {
            let mut full = Vec::with_capacity(dir.len() + name.len() + 2);
            full.extend_from_slice(dir);
            if !dir.is_empty() {
                full.push(b'/');
            }
            full.extend_from_slice(name);
            // A directory with a NUL byte cannot be in an environment string.
            CString::new(full).ok()
        })
        .collect())
}

/// What the child of [`spawn`] needs, all made before it exists: until it runs
/// the command it shares this process's memory (the parent waits, suspended),
/// so it must not allocate, lock, or change anything of the parent's but
/// `error`.
struct ChildSetup {
    /// Null-terminated `argv` and `envp` for execve(2).
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    /// The files to try, in order (see [`candidates`]).
    paths: *const *const libc::c_char,
    path_count: usize,
    /// Signals to put back to their default action (bit `n - 1` for `n`).
    reset: u64,
    /// `setpgid(0, 0)` first.
    own_group: bool,
    /// `(from, to)` descriptor moves, in order.
    moves: [Option<(RawFd, RawFd)>; 2],
    /// The signal mask the command starts with (the parent's own).
    mask: libc::sigset_t,
    /// Set by the child when it cannot run the command: the errno.
    error: libc::c_int,
}

/// The errno of the last failed call.
fn errno() -> libc::c_int {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

impl ChildSetup {
    /// In the child: prepares it and runs the command. Returns only on
    /// failure, with the errno (`posix_spawnp(3)`'s rules: the PATH search
    /// goes on past a missing file or a denied one, and a denial is what is
    /// reported when nothing could run).
    fn run_command(&self) -> libc::c_int {
        // SAFETY (whole function): only async-signal-safe calls that take
        // pointers to this struct's fields or to data the parent keeps alive
        // until the child has run the command or exited (`spawn` waits in
        // clone(2) until then); nothing is allocated and no lock is taken.
        unsafe {
            // A handler of `retry`'s must not run in this process, which
            // shares `retry`'s memory: its signals go back to their default
            // before any is unblocked (the command gets the defaults anyway).
            let mut default: libc::sigaction = core::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            for signal in 1..=64 {
                if self.reset & bit(signal) != 0 {
                    libc::sigaction(signal, &default, core::ptr::null_mut());
                }
            }
            if self.own_group && libc::setpgid(0, 0) != 0 {
                return errno();
            }
            for (from, to) in self.moves.into_iter().flatten() {
                if from == to {
                    // Already in place: only keep it open across exec.
                    let flags = libc::fcntl(from, libc::F_GETFD);
                    if flags < 0 || libc::fcntl(from, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0
                    {
                        return errno();
                    }
                } else if libc::dup2(from, to) < 0 {
                    return errno();
                }
            }
            let failed =
                libc::pthread_sigmask(libc::SIG_SETMASK, &self.mask, core::ptr::null_mut());
            if failed != 0 {
                return failed;
            }
            let mut denied = false;
            let mut last = libc::ENOENT;
            for k in 0..self.path_count {
                libc::execve(*self.paths.add(k), self.argv, self.envp);
                last = errno();
                match last {
                    libc::EACCES => denied = true,
                    libc::ENOENT
                    | libc::ESTALE
                    | libc::ENOTDIR
                    | libc::ENODEV
                    | libc::ETIMEDOUT => {}
                    _ => return last,
                }
            }
            if denied {
                libc::EACCES
            } else {
                last
            }
        }
    }
}

/// The child's start (on its own stack, in `retry`'s memory): runs the
/// command, or records why it could not and exits with 127.
extern "C" fn start_child(setup: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `spawn` passes a pointer to a live `ChildSetup` that nothing
    // else touches until this child has run the command or exited; `_exit`
    // ends the child without running anything of the parent's.
    unsafe {
        let setup = setup.cast::<ChildSetup>();
        let error = (*setup).run_command();
        (*setup).error = error;
        libc::_exit(127)
    }
}

/// Starts `plan` as `posix_spawnp(3)` does (a `vfork`-style start: no page of
/// `retry` is copied, which is most of the cost of starting a short command on
/// a virtual machine), in a process group of its own or in `retry`'s. An
/// `exec` failure is the error returned.
///
/// Unlike the C library's `posix_spawnp`, the child puts back only the signals
/// `retry` catches (and SIGPIPE) instead of asking about all 64, twice as many
/// system calls as the rest of a start: the command sees the same
/// dispositions (caught ones default, ignored ones ignored, as `exec` leaves
/// them), at a tenth of the child's system calls.
pub(super) fn spawn(plan: &SpawnPlan) -> io::Result<ProcessId> {
    let paths = candidates(&plan.program)?;
    let mut path_pointers: Vec<*const libc::c_char> = paths.iter().map(|p| p.as_ptr()).collect();
    path_pointers.push(core::ptr::null());
    let argv: Vec<*const libc::c_char> = plan
        .args
        .iter()
        .map(|a| a.as_ptr())
        .chain(core::iter::once(core::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = plan
        .inherited
        .iter()
        .map(|e| e.as_ptr())
        .chain(plan.extra.iter().map(|e| e.as_ptr()))
        .chain(core::iter::once(core::ptr::null()))
        .collect();
    let mut stack = Box::<[u8]>::new_uninit_slice(CHILD_STACK);
    // Every signal is blocked from before the child exists until it has put
    // `retry`'s handlers back to their defaults, so none of them runs in it;
    // the command gets the mask `retry` had.
    let mut before = SigSet::empty();
    nix_signal::pthread_sigmask(
        SigmaskHow::SIG_SETMASK,
        Some(&SigSet::all()),
        Some(&mut before),
    )?;
    let mut setup = ChildSetup {
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        paths: path_pointers.as_ptr(),
        path_count: paths.len(),
        reset: HANDLED.load(Ordering::SeqCst) | bit(libc::SIGPIPE),
        own_group: plan.own_group,
        moves: [plan.stdin.map(|fd| (fd, 0)), plan.stdout.map(|fd| (fd, 1))],
        mask: *before.as_ref(),
        error: 0,
    };
    // SAFETY: the stack is a live allocation of CHILD_STACK bytes, its top
    // 16-byte aligned as clone(2) wants; the child writes only its stack and
    // `setup.error`, and with CLONE_VFORK this call returns only once the
    // child has run the command or exited, so every pointer in `setup` stays
    // valid as long as the child uses it. `argv`, `envp` and `paths` are
    // null-terminated arrays of NUL-terminated strings that live until this
    // function returns. The errno is read before anything else can set it.
    let (pid, clone_error) = unsafe {
        let base = stack.as_mut_ptr().cast::<u8>();
        let top = base.add(CHILD_STACK);
        let top = top.sub(top as usize % 16);
        let pid = libc::clone(
            start_child,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            core::ptr::addr_of_mut!(setup).cast(),
        );
        (pid, errno())
    };
    let _ = nix_signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&before), None);
    if pid < 0 {
        return Err(io::Error::from_raw_os_error(clone_error));
    }
    let error = setup.error;
    drop(stack);
    let pid = process_id(pid).ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
    if error != 0 {
        // It exited with 127 after failing: collect it (nothing else waits
        // for it).
        let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(pid)
}

/// A new anonymous file in memory (`memfd_create(2)`), close-on-exec: no
/// directory entry to create or remove.
pub(super) fn memory_file() -> io::Result<OwnedFd> {
    Ok(rustix::fs::memfd_create(
        c"retry-hint",
        rustix::fs::MemfdFlags::CLOEXEC,
    )?)
}

/// Whether `/proc` is the process file system, through which a command can
/// open a descriptor of `retry`'s (`/proc/<pid>/fd/<n>`). One `statfs(2)` of
/// a directory entry the kernel has at hand: cheaper than resolving the
/// descriptor's own path there.
pub(super) fn proc_is_mounted() -> bool {
    rustix::fs::statfs(c"/proc").is_ok_and(|info| info.f_type == rustix::fs::PROC_SUPER_MAGIC)
}

/// Reads a small file whole (`/proc` entries): `None` if it cannot be read.
/// Direct system calls, no buffering: a `/proc` file is generated per read.
pub(super) fn read_small(path: &CStr) -> Option<Vec<u8>> {
    use rustix::fs::{open, Mode, OFlags};
    let fd = open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let mut bytes = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    loop {
        match rustix::io::read(&fd, &mut chunk) {
            Ok(0) => return Some(bytes),
            Ok(n) => bytes.extend_from_slice(chunk.get(..n)?),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
}

/// The numeric entries of `/proc` (the processes), or `None` without `/proc`.
pub(super) fn proc_entries() -> Option<Vec<i32>> {
    use rustix::fs::{open, Dir, Mode, OFlags};
    let fd = open(
        c"/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut dir = Dir::new(fd).ok()?;
    let mut pids = Vec::with_capacity(256);
    while let Some(entry) = dir.read() {
        let Ok(entry) = entry else {
            break;
        };
        if let Some(pid) = entry
            .file_name()
            .to_str()
            .ok()
            .and_then(|n| n.parse::<i32>().ok())
        {
            pids.push(pid);
        }
    }
    Some(pids)
}

/// Waits `duration` (a poll of nothing: no signal handler is disturbed).
pub(super) fn pause_for(duration: Duration) {
    let spec = Timespec {
        tv_sec: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(duration.subsec_nanos()),
    };
    let _ = rustix::event::poll(&mut [], Some(&spec));
}

/// Eight random bytes from the kernel (`None` if it has none to give).
pub(super) fn random_u64() -> Option<u64> {
    let mut bytes = [0u8; 8];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::NONBLOCK).ok()?;
    Some(u64::from_ne_bytes(bytes))
}

/// Makes directory `path` with permission bits `mode`, whatever the umask.
pub(super) fn make_private_dir(path: &CStr, mode: u32) -> io::Result<()> {
    let mode = rustix::fs::Mode::from_raw_mode(mode);
    rustix::fs::mkdir(path, mode)?;
    if let Err(error) = rustix::fs::chmod(path, mode) {
        let _ = rustix::fs::rmdir(path);
        return Err(error.into());
    }
    Ok(())
}

/// Creates file `path` (it must not exist), open for reading and writing and
/// close-on-exec, with permission bits `mode` whatever the umask.
pub(super) fn create_file(path: &CStr, mode: u32) -> io::Result<OwnedFd> {
    use rustix::fs::{open, Mode, OFlags};
    let mode = Mode::from_raw_mode(mode);
    let fd = open(
        path,
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )?;
    if let Err(error) = rustix::fs::fchmod(&fd, mode) {
        let _ = rustix::fs::unlink(path);
        return Err(error.into());
    }
    Ok(fd)
}

/// Removes directory `path` (empty).
pub(super) fn remove_dir(path: &CStr) {
    let _ = rustix::fs::rmdir(path);
}

/// Removes file `path`.
pub(super) fn remove_file(path: &CStr) {
    let _ = rustix::fs::unlink(path);
}

/// Whether `retry` runs as root (effective user 0).
pub(super) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A pipe: (read end, write end), both close-on-exec.
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::pipe::{pipe_with, PipeFlags};
    Ok(pipe_with(PipeFlags::CLOEXEC)?)
}

/// Sets `O_NONBLOCK` on `fd`.
pub(super) fn set_nonblocking(fd: &impl AsFd) -> io::Result<()> {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    let flags = fcntl_getfl(fd)?;
    fcntl_setfl(fd, flags | OFlags::NONBLOCK)?;
    Ok(())
}

/// Takes a descriptor the caller passed by number (`--events fd:N`) for
/// `retry`'s own use: a close-on-exec duplicate, and `N` itself marked
/// close-on-exec too (unless it is 0, 1 or 2, which the command shares), so
/// that the command and its children never hold it (a reader then sees end of
/// file when `retry` exits, not when the last background grandchild does).
///
/// Call before `retry` opens any descriptor of its own: `N` then cannot be one
/// of them.
pub(super) fn take_inherited(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: `fd` is a number the caller handed to `retry` on its command
    // line; `retry` owns no descriptor yet (this runs before it opens any), so
    // no `OwnedFd` of this program refers to it. If it is not open, the calls
    // below fail with EBADF and nothing else happens. The borrow ends with
    // this function.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let duplicate = rustix::io::fcntl_dupfd_cloexec(borrowed, 3)?;
    if fd > 2 {
        let flags = rustix::io::fcntl_getfd(borrowed)?;
        rustix::io::fcntl_setfd(borrowed, flags | rustix::io::FdFlags::CLOEXEC)?;
    }
    Ok(duplicate)
}

/// The controlling terminal, if the process has one: `/dev/tty`, opened
/// close-on-exec without becoming anyone's controlling terminal.
pub(super) fn open_terminal() -> Option<OwnedFd> {
    use rustix::fs::{open, Mode, OFlags};
    open(
        c"/dev/tty",
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// The terminal's foreground process group.
pub(super) fn foreground_group(tty: &impl AsFd) -> Option<ProcessId> {
    rustix::termios::tcgetpgrp(tty).ok()
}

/// A terminal's modes.
#[derive(Clone)]
pub(super) struct Modes(rustix::termios::Termios);

impl core::fmt::Debug for Modes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Modes")
    }
}

/// Equal when the mode flags are (what a raw-mode program or a password
/// prompt changes); the special characters are not compared.
impl PartialEq for Modes {
    fn eq(&self, other: &Modes) -> bool {
        let (a, b) = (&self.0, &other.0);
        a.input_modes == b.input_modes
            && a.output_modes == b.output_modes
            && a.control_modes == b.control_modes
            && a.local_modes == b.local_modes
    }
}

/// The terminal's modes.
pub(super) fn modes(tty: &impl AsFd) -> Option<Modes> {
    rustix::termios::tcgetattr(tty).ok().map(Modes)
}

/// Sets the terminal's modes (after output drains), with SIGTTOU blocked.
pub(super) fn set_modes(tty: &impl AsFd, modes: &Modes) {
    use rustix::termios::{tcsetattr, OptionalActions};
    with_ttou_blocked(|| {
        let _ = tcsetattr(tty, OptionalActions::Drain, &modes.0);
    });
}
