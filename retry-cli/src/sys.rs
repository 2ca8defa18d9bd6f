//! The only unsafe code of the program: thin wrappers over the system calls it
//! needs (signals, a self-pipe, waiting, process groups, the terminal). Each
//! wrapper is safe to call with any argument; the logic lives in the modules that
//! call them.
#![allow(unsafe_code)]

use core::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use core::time::Duration;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Signals `retry` catches. INT, TERM, HUP and QUIT are passed on to the command
/// and then end `retry`; TSTP, TTIN and TTOU stop the command's group and then
/// `retry`; CONT continues the command's group; CHLD wakes the wait.
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
/// The self-pipe's write end (-1 before [`install`]).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn remember(signal: libc::c_int) {
    // Only atomics and write(2): async-signal-safe. errno is saved and restored
    // so that the interrupted code never sees it change.
    if (1..=64).contains(&signal) {
        PENDING.fetch_or(1u64 << (signal - 1), Ordering::SeqCst);
    }
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: errno_location returns this thread's errno; writing one byte from
        // a local to a file descriptor has no memory-safety preconditions (a full
        // pipe fails with EAGAIN, which is fine: a wake-up is already pending).
        unsafe {
            let errno = *libc::__errno_location();
            let byte = 0u8;
            libc::write(fd, (&raw const byte).cast(), 1);
            *libc::__errno_location() = errno;
        }
    }
}

fn last_error<T>() -> io::Result<T> {
    Err(io::Error::last_os_error())
}

/// The read end of the self-pipe: readable whenever a caught signal arrived.
#[derive(Debug)]
pub(super) struct Wake(OwnedFd);

/// Creates the self-pipe and installs the catching handler for [`CAUGHT`].
/// A child's `exec` resets caught signals to their defaults, so commands are
/// unaffected. Call once.
pub(super) fn install() -> io::Result<Wake> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return last_error();
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Writing into a pipe whose reader is gone (a command that stopped reading
    // its replayed stdin) must be an error to handle, not death.
    // SAFETY: setting a disposition has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    // The write end lives as long as the process: the handler may use it any time.
    WAKE_FD.store(write.as_raw_fd(), Ordering::SeqCst);
    core::mem::forget(write);
    for signal in CAUGHT {
        // A signal `retry` was started with ignored (`nohup`, a background job
        // of a script) stays ignored, for `retry` and for the command.
        if set_handler(signal, true)? == libc::SIG_IGN {
            restore_ignore(signal);
        }
    }
    Ok(Wake(read))
}

/// Puts back "ignore" for `signal`.
fn restore_ignore(signal: i32) {
    // SAFETY: setting a disposition has no memory-safety preconditions.
    unsafe {
        libc::signal(signal, libc::SIG_IGN);
    }
}

/// Catches `signal` (`catch`) or restores its default action; returns the
/// disposition it had.
fn set_handler(signal: i32, catch: bool) -> io::Result<libc::sighandler_t> {
    // SAFETY: `action` is fully initialised (zeroed, then the handler, an empty
    // mask and the flags) before `sigaction` reads it; the handler only touches
    // atomics and calls write(2); `old` is a local for the previous action.
    let mut old: libc::sigaction = unsafe { core::mem::zeroed() };
    let result = unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = if catch {
            remember as extern "C" fn(libc::c_int) as usize
        } else {
            libc::SIG_DFL
        };
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, &mut old)
    };
    if result == 0 {
        Ok(old.sa_sigaction)
    } else {
        last_error()
    }
}

/// Takes the set of signals received since the last call (bit `n - 1` for
/// signal `n`).
pub(super) fn take_pending() -> u64 {
    PENDING.swap(0, Ordering::SeqCst)
}

/// Whether `signal` is in a set from [`take_pending`].
pub(super) const fn has(set: u64, signal: i32) -> bool {
    signal >= 1 && signal <= 64 && set & (1u64 << (signal - 1)) != 0
}

impl Wake {
    /// Empties the pipe (the pending set says what arrived).
    fn drain(&self) {
        let mut buffer = [0u8; 64];
        loop {
            // SAFETY: reading into a local buffer of the length given.
            let n =
                unsafe { libc::read(self.0.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
            if n <= 0 {
                break;
            }
        }
    }

    /// Blocks until a signal arrives, one of `fds` is ready for its `events`
    /// (`revents` are filled in), or `timeout` passes (`None`: no timeout).
    /// Returns early, harmlessly, when interrupted.
    pub(super) fn wait(&self, fds: &mut [libc::pollfd], timeout: Option<Duration>) {
        let mut all: Vec<libc::pollfd> = Vec::with_capacity(fds.len() + 1);
        all.push(libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        all.extend_from_slice(fds);
        let spec = timeout.map(|t| libc::timespec {
            tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(t.subsec_nanos()),
        });
        let spec_ptr = spec
            .as_ref()
            .map_or(core::ptr::null(), |s| s as *const libc::timespec);
        let count = libc::nfds_t::try_from(all.len()).unwrap_or(0);
        // SAFETY: `all` holds `count` initialised pollfd entries; `spec_ptr` is
        // null or points at a local timespec living across the call; a null
        // signal mask keeps the current one.
        let n = unsafe { libc::ppoll(all.as_mut_ptr(), count, spec_ptr, core::ptr::null()) };
        if n > 0 && all.first().is_some_and(|wake| wake.revents != 0) {
            self.drain();
        }
        for (out, polled) in fds.iter_mut().zip(all.iter().skip(1)) {
            out.revents = if n > 0 { polled.revents } else { 0 };
        }
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

/// Reports a change of `pid` without blocking: `None` if nothing changed.
pub(super) fn try_wait(pid: i32) -> io::Result<Option<ChildState>> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a local the call fills in.
    let got = unsafe {
        libc::waitpid(
            pid,
            &mut status,
            libc::WNOHANG | libc::WUNTRACED | libc::WCONTINUED,
        )
    };
    if got < 0 {
        return last_error();
    }
    if got == 0 {
        return Ok(None);
    }
    Ok(Some(if libc::WIFEXITED(status) {
        ChildState::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        ChildState::Killed(libc::WTERMSIG(status))
    } else if libc::WIFSTOPPED(status) {
        ChildState::Stopped(libc::WSTOPSIG(status))
    } else {
        ChildState::Continued
    }))
}

/// Sends `signal` to every process of the group `group`. A group that is gone
/// already is not an error.
pub(super) fn signal_group(group: i32, signal: i32) {
    if group <= 1 {
        return; // never the caller's own group or every process
    }
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names the
    // process group `group` (> 1, checked above), never "all processes".
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Whether any process of group `group` is still alive (zombies included).
pub(super) fn group_exists(group: i32) -> bool {
    if group <= 1 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(-group, 0) == 0 }
}

/// This process's group.
pub(super) fn own_group() -> i32 {
    // SAFETY: getpgrp has no preconditions and cannot fail.
    unsafe { libc::getpgrp() }
}

/// Stops this process with `signal` (its default action), as a shell's job does,
/// and returns once it is continued. The handler is restored afterwards.
pub(super) fn stop_self(signal: i32) {
    if set_handler(signal, false).is_err() {
        return;
    }
    // SAFETY: raise has no memory-safety preconditions.
    unsafe {
        libc::raise(signal);
    }
    let _ = set_handler(signal, true);
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

extern "C" {
    /// The process's environment: a null-terminated array of `KEY=value` C
    /// strings (POSIX).
    static environ: *const *const libc::c_char;
}

/// Everything a child needs between `fork` and `exec`, prepared beforehand so
/// that the child only makes system calls.
#[derive(Debug)]
pub(super) struct SpawnPlan {
    /// The program, looked up in PATH when it has no `/`.
    program: std::ffi::CString,
    /// The arguments, `argv[0]` included; kept alive for `argv`.
    _args: Vec<std::ffi::CString>,
    /// The variables added to the environment, `KEY=value`; kept alive for
    /// `envp`, which points at them and, for the rest, into the process's own
    /// environment.
    _env: Vec<std::ffi::CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// Descriptors to put on 0 and 1 (`None`: inherited).
    pub(super) stdin: Option<RawFd>,
    pub(super) stdout: Option<RawFd>,
    /// The terminal to take for the child's group before `exec`.
    pub(super) tty: Option<RawFd>,
}

impl SpawnPlan {
    /// A plan to run `argv` with the process's environment plus `extra`.
    /// `None` if an argument or variable holds a NUL byte.
    ///
    /// The inherited variables are not copied: the plan points at the
    /// process's environment, which `retry` never changes (it calls no
    /// `setenv`), so those strings outlive the plan.
    pub(super) fn new(
        argv: &[std::ffi::OsString],
        extra: &[(&str, std::ffi::OsString)],
    ) -> Option<SpawnPlan> {
        use std::os::unix::ffi::OsStrExt;
        let c = |bytes: &[u8]| std::ffi::CString::new(bytes).ok();
        let args: Vec<std::ffi::CString> = argv
            .iter()
            .map(|a| c(a.as_bytes()))
            .collect::<Option<_>>()?;
        let program = args.first()?.clone();
        let mut env: Vec<std::ffi::CString> = Vec::with_capacity(extra.len());
        for (key, value) in extra {
            let mut pair = Vec::with_capacity(key.len() + value.len() + 2);
            pair.extend_from_slice(key.as_bytes());
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            env.push(c(&pair)?);
        }
        let mut envp: Vec<*const libc::c_char> = Vec::with_capacity(64);
        let replaced = |entry: &[u8]| {
            extra.iter().any(|(k, _)| {
                entry
                    .strip_prefix(k.as_bytes())
                    .is_some_and(|rest| rest.first() == Some(&b'='))
            })
        };
        // SAFETY: `environ` is the process's null-terminated array of
        // NUL-terminated strings; nothing in `retry` changes it (no setenv), so
        // it is read here while no other code writes it, and its strings stay
        // valid for as long as the plan points at them.
        unsafe {
            let mut at = environ;
            while !at.is_null() && !(*at).is_null() {
                let entry = *at;
                if !replaced(std::ffi::CStr::from_ptr(entry).to_bytes()) {
                    envp.push(entry);
                }
                at = at.add(1);
            }
        }
        envp.extend(env.iter().map(|s| s.as_ptr()));
        envp.push(core::ptr::null());
        let argv = args
            .iter()
            .map(|s| s.as_ptr())
            .chain(core::iter::once(core::ptr::null()))
            .collect::<Vec<_>>();
        Some(SpawnPlan {
            program,
            argv,
            envp,
            _args: args,
            _env: env,
            stdin: None,
            stdout: None,
            tty: None,
        })
    }
}

/// A started child: its pid, and (when it was forked) a pipe that reports its
/// `exec`: end of file when the program started, or the `errno` of the failed
/// `exec`.
#[derive(Debug)]
pub(super) struct Spawned {
    pub(super) pid: i32,
    pub(super) exec_report: Option<OwnedFd>,
}

/// Starts `plan` in a new process group. Without a terminal to hand over, this
/// is `posix_spawnp(3)` (a `vfork`-style start: no page of `retry` is copied,
/// which is most of the cost of starting a short command on a virtual
/// machine); an `exec` failure is the error returned. With one, the child is
/// forked so that it can take the terminal before its `exec`
/// (`posix_spawn_file_actions_addtcsetpgrp_np` would need glibc 2.35).
pub(super) fn spawn(plan: &SpawnPlan) -> io::Result<Spawned> {
    if plan.tty.is_some() {
        return spawn_forked(plan);
    }
    // SAFETY: the attribute and file-action objects are initialised before use
    // and destroyed after; every pointer passed (program, argv, envp, pid) comes
    // from the plan or a local and outlives the call.
    unsafe {
        let mut attr: libc::posix_spawnattr_t = core::mem::zeroed();
        let mut actions: libc::posix_spawn_file_actions_t = core::mem::zeroed();
        if libc::posix_spawnattr_init(&mut attr) != 0 {
            return last_error();
        }
        libc::posix_spawn_file_actions_init(&mut actions);
        let mut defaults: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut defaults);
        // Rust ignores SIGPIPE; the command gets the default back (caught
        // signals return to their defaults by themselves).
        libc::sigaddset(&mut defaults, libc::SIGPIPE);
        libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
        libc::posix_spawnattr_setpgroup(&mut attr, 0);
        let flags = libc::POSIX_SPAWN_SETPGROUP | libc::POSIX_SPAWN_SETSIGDEF;
        libc::posix_spawnattr_setflags(&mut attr, libc::c_short::try_from(flags).unwrap_or(0));
        for (from, to) in [(plan.stdin, 0), (plan.stdout, 1)] {
            if let Some(fd) = from {
                libc::posix_spawn_file_actions_adddup2(&mut actions, fd, to);
            }
        }
        let mut pid: libc::pid_t = 0;
        let result = libc::posix_spawnp(
            &mut pid,
            plan.program.as_ptr(),
            &actions,
            &attr,
            plan.argv.as_ptr().cast(),
            plan.envp.as_ptr().cast(),
        );
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        if result != 0 {
            return Err(io::Error::from_raw_os_error(result));
        }
        Ok(Spawned {
            pid,
            exec_report: None,
        })
    }
}

/// Forks a child that takes the terminal, then execs, without waiting for its
/// `exec`. Call only while `retry` has one thread: the child then runs nothing
/// but system calls and `execvpe`.
fn spawn_forked(plan: &SpawnPlan) -> io::Result<Spawned> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return last_error();
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours.
    let (report, report_write) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fork has no memory-safety preconditions; the child branch below
    // only makes async-signal-safe calls on memory prepared before the fork
    // (the plan's strings and pointer arrays, which outlive the call), and ends
    // in exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return last_error();
    }
    if pid == 0 {
        // SAFETY: see above; every pointer comes from the plan.
        unsafe { child(plan, report_write.as_raw_fd()) }
    }
    drop(report_write);
    Ok(Spawned {
        pid,
        exec_report: Some(report),
    })
}

/// The child's side of [`spawn`]: never returns.
unsafe fn child(plan: &SpawnPlan, report: RawFd) -> ! {
    // SAFETY (whole body): system calls on descriptors and on memory the plan
    // owns; the caller guarantees we are the freshly forked child.
    unsafe {
        let fail = |report: RawFd| -> ! {
            let errno = *libc::__errno_location();
            let bytes = errno.to_ne_bytes();
            libc::write(report, bytes.as_ptr().cast(), bytes.len());
            libc::_exit(127)
        };
        if libc::setpgid(0, 0) != 0 {
            fail(report);
        }
        if let Some(tty) = plan.tty {
            let mut block: libc::sigset_t = core::mem::zeroed();
            let mut old: libc::sigset_t = core::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGTTOU);
            libc::sigprocmask(libc::SIG_BLOCK, &block, &mut old);
            libc::tcsetpgrp(tty, libc::getpid());
            libc::sigprocmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
        }
        for (from, to) in [(plan.stdin, 0), (plan.stdout, 1)] {
            if let Some(fd) = from {
                if libc::dup2(fd, to) < 0 {
                    fail(report);
                }
            }
        }
        // Rust ignores SIGPIPE; the command gets the default back (caught
        // signals return to their defaults by themselves at exec).
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::execvpe(
            plan.program.as_ptr(),
            plan.argv.as_ptr(),
            plan.envp.as_ptr(),
        );
        fail(report)
    }
}

/// Reads a child's exec report: `None` when it started, the exec error if not.
/// Blocks until the child has exec'd or failed (the caller polls first).
pub(super) fn exec_result(report: &OwnedFd) -> Option<io::Error> {
    let mut bytes = [0u8; 4];
    let mut got = 0usize;
    while got < bytes.len() {
        let rest = bytes.get_mut(got..).unwrap_or_default();
        // SAFETY: reading into a local buffer of the length given.
        let n = unsafe { libc::read(report.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len()) };
        match n {
            0 => break,
            n if n > 0 => got = got.saturating_add(usize::try_from(n).unwrap_or(0)),
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => break,
        }
    }
    (got == bytes.len()).then(|| io::Error::from_raw_os_error(i32::from_ne_bytes(bytes)))
}

/// A new anonymous file in memory (`memfd_create(2)`), close-on-exec: no
/// directory entry to create or remove.
pub(super) fn memory_file() -> io::Result<OwnedFd> {
    // SAFETY: the name is a C string literal; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"retry-hint".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return last_error();
    }
    // SAFETY: memfd_create succeeded, so `fd` is open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `/proc` is the process file system, through which a command can
/// open a descriptor of `retry`'s (`/proc/<pid>/fd/<n>`). One `statfs(2)` of
/// a directory entry the kernel has at hand: cheaper than resolving the
/// descriptor's own path there.
pub(super) fn proc_is_mounted() -> bool {
    // SAFETY: `info` is a local statfs for the call to fill in; the path is a
    // C string literal.
    unsafe {
        let mut info: libc::statfs = core::mem::zeroed();
        libc::statfs(c"/proc".as_ptr(), &mut info) == 0 && info.f_type == libc::PROC_SUPER_MAGIC
    }
}

/// A pipe: (read end, write end), both close-on-exec.
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return last_error();
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets `O_NONBLOCK` on `fd`.
pub(super) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on any descriptor number is memory-safe; an invalid one fails.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return last_error();
        }
    }
    Ok(())
}

/// Duplicates a descriptor this process inherited (`fd:N`), close-on-exec.
pub(super) fn dup_inherited(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on any number is memory-safe; the new descriptor is
    // ours alone.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return last_error();
    }
    // SAFETY: `new` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// The terminal's foreground process group.
pub(super) fn foreground_group(tty: RawFd) -> Option<i32> {
    // SAFETY: tcgetpgrp on any descriptor is memory-safe.
    let group = unsafe { libc::tcgetpgrp(tty) };
    (group > 0).then_some(group)
}

/// The terminal `retry` handed to a command's group, while it has it (-1: none).
static HANDED_TTY: AtomicI32 = AtomicI32::new(-1);

/// Records that the terminal `tty` is handed over (`Some`) or back (`None`), for
/// [`give_terminal_back_on_panic`].
pub(super) fn note_handed(tty: Option<RawFd>) {
    HANDED_TTY.store(tty.unwrap_or(-1), Ordering::SeqCst);
}

/// Makes a panic, should one ever happen, give the terminal back to `retry`'s
/// group before the process ends: a panic in `retry` cannot unwind out of its
/// C `main`, so no destructor would.
pub(super) fn give_terminal_back_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let tty = HANDED_TTY.swap(-1, Ordering::SeqCst);
        if tty >= 0 {
            let _ = set_foreground_group(tty, own_group());
        }
        previous(info);
    }));
}

/// Makes `group` the terminal's foreground group. SIGTTOU is blocked meanwhile,
/// so that a caller in the background is not stopped for asking.
pub(super) fn set_foreground_group(tty: RawFd, group: i32) -> io::Result<()> {
    // SAFETY: the signal sets are locals; tcsetpgrp on any descriptor is
    // memory-safe; the old mask is restored before returning.
    unsafe {
        let mut block: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        let result = libc::tcsetpgrp(tty, group);
        let error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
        if result == 0 {
            Ok(())
        } else {
            Err(error)
        }
    }
}

/// A terminal's modes.
#[derive(Clone, Copy)]
pub(super) struct Modes(libc::termios);

impl core::fmt::Debug for Modes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Modes")
    }
}

/// The terminal's modes.
pub(super) fn modes(tty: RawFd) -> Option<Modes> {
    // SAFETY: `modes` is a local termios for tcgetattr to fill in.
    unsafe {
        let mut modes: libc::termios = core::mem::zeroed();
        (libc::tcgetattr(tty, &mut modes) == 0).then_some(Modes(modes))
    }
}

/// Sets the terminal's modes (after output drains), with SIGTTOU blocked.
pub(super) fn set_modes(tty: RawFd, modes: &Modes) {
    // SAFETY: as for set_foreground_group; `modes.0` is a valid termios.
    unsafe {
        let mut block: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        libc::tcsetattr(tty, libc::TCSADRAIN, &modes.0);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
    }
}
