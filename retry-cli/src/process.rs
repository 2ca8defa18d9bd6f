//! Running one attempt: spawning the command in its own process group, handing
//! it the terminal, feeding its stdin, holding its stdout, and waiting for it
//! while watching its deadline and the signals sent to `retry`.
//!
//! Nothing here polls: the wait blocks in `ppoll(2)` on a self-pipe that the
//! signal handlers (SIGCHLD included) write to, on the command's pipes, and on
//! the next deadline. A command that runs for an hour costs `retry` a handful of
//! wake-ups.

use core::time::Duration;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant as WallInstant;

use retry_core::Instant;

use super::sys::{self, ChildState, SpawnPlan, Wake};
use super::terminal::Terminal;

/// The run's clock: machine time is wall time since the start, minus the time
/// the command spent stopped (Ctrl-Z), which counts neither against an attempt's
/// timeout nor against `--max-time`.
#[derive(Clone, Copy, Debug)]
pub struct RunClock {
    start: WallInstant,
    paused: Duration,
}

impl RunClock {
    /// A clock starting now.
    #[must_use]
    pub fn start() -> RunClock {
        RunClock {
            start: WallInstant::now(),
            paused: Duration::ZERO,
        }
    }

    /// The machine's time now.
    #[must_use]
    pub fn now(&self) -> Instant {
        Instant::from_duration(self.start.elapsed().saturating_sub(self.paused))
    }

    /// The wall-clock moment of machine time `at`.
    #[must_use]
    pub fn wall(&self, at: Instant) -> WallInstant {
        later(self.start, at.as_duration().saturating_add(self.paused))
    }

    /// Wall time since the start, stopped time included.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Time spent stopped so far.
    #[must_use]
    pub const fn paused(&self) -> Duration {
        self.paused
    }

    pub(super) fn pause(&mut self, stopped: Duration) {
        self.paused = self.paused.saturating_add(stopped);
    }
}

/// `at + after`, or a century later when that is past what an `Instant` holds
/// (`--kill-after 5000000000000000h` must not end `retry` in a panic).
fn later(at: WallInstant, after: Duration) -> WallInstant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    at.checked_add(after.min(CENTURY))
        .or_else(|| at.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(at)
}

/// Where an attempt's stdin comes from.
#[derive(Clone, Debug)]
pub enum Input {
    /// Inherited from `retry`.
    Inherit,
    /// These bytes, the same for every attempt.
    Replay(Arc<Vec<u8>>),
    /// Nothing (hooks).
    Null,
}

/// Where an attempt's stdout goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Inherited from `retry`.
    Inherit,
    /// Collected, to be released by the caller.
    Hold,
    /// To `retry`'s stderr (hooks: nothing but the command's output on stdout).
    Stderr,
}

/// What to run.
#[derive(Debug)]
pub struct Launch<'a> {
    /// Program and arguments.
    pub argv: &'a [OsString],
    /// Extra environment.
    pub env: Vec<(&'static str, OsString)>,
    /// Stdin.
    pub input: Input,
    /// Stdout.
    pub output: Output,
    /// When the attempt is stopped, in the run's machine time, if ever.
    pub deadline: Option<Instant>,
    /// Grace between SIGTERM and SIGKILL.
    pub kill_after: Duration,
    /// Whether the command gets the terminal (when `retry` has it).
    pub terminal: bool,
}

/// What the wait needs from the run.
pub struct Context<'a> {
    /// The run's clock (stopped time is added to it).
    pub clock: &'a mut RunClock,
    /// The signal self-pipe.
    pub(super) wake: &'a Wake,
    /// The controlling terminal, if any.
    pub terminal: Option<&'a Terminal>,
    /// Told of job-control changes as they happen (before `retry` stops itself).
    pub notify: &'a dyn Fn(Notice),
}

impl core::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Context")
            .field("clock", &self.clock)
            .field("terminal", &self.terminal)
            .finish_non_exhaustive()
    }
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// It died of this signal (not sent by `retry`).
    Signalled(i32),
    /// It ran into its deadline and was stopped.
    TimedOut,
    /// A signal sent to `retry` was passed on and the process ended.
    Interrupted(i32),
    /// It could not be started: 126 (not executable) or 127 (not found).
    NotStarted(i32),
}

impl Ending {
    /// The exit status a shell would report for it.
    #[must_use]
    pub fn status_code(self) -> i32 {
        match self {
            Ending::Exited(code) | Ending::NotStarted(code) => code,
            Ending::Signalled(signal) | Ending::Interrupted(signal) => {
                128_i32.saturating_add(signal)
            }
            Ending::TimedOut => 124,
        }
    }
}

/// Something that happened while an attempt ran, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// The command's group was stopped by this signal.
    Stopped(i32),
    /// It was continued after being stopped for this long.
    Continued(Duration),
}

/// A finished process.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub ending: Ending,
    /// Its process id (its group's id too), once started.
    pub pid: Option<u32>,
    /// Its stdout, when held.
    pub stdout: Option<Vec<u8>>,
    /// Why it could not start, in words, when it could not.
    pub error: Option<String>,
    /// The signal `retry` received while it ran, if any.
    pub interrupted_by: Option<i32>,
    /// Whether it had the terminal (so a key's signal reached it, not `retry`).
    pub had_terminal: bool,
    /// Job-control changes while it ran.
    pub notices: Vec<Notice>,
}

/// Runs `launch` to the end.
pub fn run(launch: Launch<'_>, cx: &mut Context<'_>) -> Finished {
    let Some(program) = launch.argv.first() else {
        return not_started("no command".to_owned(), 127);
    };
    let Some(mut plan) = SpawnPlan::new(launch.argv, &launch.env) else {
        return not_started(
            "an argument or environment variable holds a NUL byte".to_owned(),
            126,
        );
    };
    // The child's ends of its pipes, closed here once it has them.
    let mut child_ends: Vec<OwnedFd> = Vec::new();
    let mut stdin = None;
    match &launch.input {
        Input::Inherit => {}
        Input::Replay(bytes) => match sys::pipe() {
            Ok((read, write)) => {
                plan.stdin = Some(read.as_raw_fd());
                child_ends.push(read);
                stdin = Some(Feeder::new(File::from(write), Arc::clone(bytes)));
            }
            Err(e) => return not_started(format!("cannot make a pipe: {e}"), 126),
        },
        Input::Null => match File::open("/dev/null") {
            Ok(null) => {
                let null = OwnedFd::from(null);
                plan.stdin = Some(null.as_raw_fd());
                child_ends.push(null);
            }
            Err(e) => return not_started(format!("cannot open /dev/null: {e}"), 126),
        },
    }
    let mut stdout = None;
    match launch.output {
        Output::Inherit => {}
        Output::Hold => match sys::pipe() {
            Ok((read, write)) => {
                plan.stdout = Some(write.as_raw_fd());
                child_ends.push(write);
                stdout = Some(Collector::new(File::from(read)));
            }
            Err(e) => return not_started(format!("cannot make a pipe: {e}"), 126),
        },
        Output::Stderr => plan.stdout = Some(2),
    }
    // The terminal the command may have (now, or after `fg`), and whether it
    // takes it at once: the child takes it itself, before its exec, so it has it
    // before its first read.
    let eligible = cx.terminal.filter(|_| launch.terminal);
    let terminal = eligible.filter(|t| t.in_foreground());
    plan.tty = terminal.map(Terminal::raw);
    let spawned = match sys::spawn(&plan) {
        Ok(spawned) => spawned,
        Err(error) => {
            let code = match error.kind() {
                io::ErrorKind::NotFound => 127,
                _ => 126,
            };
            return not_started(explain_spawn_error(program, &error), code);
        }
    };
    drop(child_ends);
    let pid = spawned.pid;
    if let Some(tty) = terminal {
        tty.given(pid);
    }
    let mut watch = Watch {
        group: pid,
        deadline: launch.deadline,
        kill_after: launch.kill_after,
        terminal: eligible,
        had_terminal: terminal.is_some(),
        exec_report: spawned.exec_report,
        exec_error: None,
        stdin,
        stdout,
        child_modes: None,
        own_stop: false,
        notices: Vec::new(),
    };
    let (state, timed_out, interrupted) = watch.wait(cx);
    if let Some(report) = watch.exec_report.take() {
        watch.exec_error = sys::exec_result(&report);
    }
    if let Some(tty) = eligible.filter(|_| watch.had_terminal) {
        tty.take_back();
        // A command killed in raw or no-echo mode cannot restore the terminal.
        if !matches!(state, ChildState::Exited(_)) || timed_out || interrupted.is_some() {
            tty.restore_modes();
        }
    }
    let pid = u32::try_from(pid).ok();
    if let Some(error) = watch.exec_error.take() {
        let code = match error.kind() {
            io::ErrorKind::NotFound => 127,
            _ => 126,
        };
        let mut finished = not_started(explain_spawn_error(program, &error), code);
        finished.pid = pid;
        finished.interrupted_by = interrupted;
        return finished;
    }
    let ending = match (interrupted, timed_out, state) {
        (Some(signal), _, _) => Ending::Interrupted(signal),
        (None, true, _) => Ending::TimedOut,
        (None, false, ChildState::Exited(code)) => Ending::Exited(code),
        (None, false, ChildState::Killed(signal)) => Ending::Signalled(signal),
        (None, false, _) => Ending::Exited(1),
    };
    Finished {
        ending,
        pid,
        stdout: watch.stdout.map(|c| c.bytes),
        error: None,
        interrupted_by: interrupted,
        had_terminal: watch.had_terminal,
        notices: watch.notices,
    }
}

fn not_started(error: String, code: i32) -> Finished {
    Finished {
        ending: Ending::NotStarted(code),
        pid: None,
        stdout: None,
        error: Some(error),
        interrupted_by: None,
        had_terminal: false,
        notices: Vec::new(),
    }
}

/// Says why `program` could not start, naming the missing file: the program
/// itself, or the interpreter its `#!` line names, or the loader it needs.
fn explain_spawn_error(program: &OsString, error: &io::Error) -> String {
    if error.kind() != io::ErrorKind::NotFound {
        return error.to_string();
    }
    let Some(path) = locate(Path::new(program)) else {
        return "no such file in the directories of PATH".to_owned();
    };
    let mut head = [0u8; 256];
    let read = std::fs::File::open(&path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let head = head.get(..read).unwrap_or_default();
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
        let interpreter = line
            .trim_ascii()
            .split(|b| b.is_ascii_whitespace())
            .next()
            .unwrap_or_default();
        let interpreter = String::from_utf8_lossy(interpreter);
        return format!(
            "{} exists, but its interpreter {interpreter} (named on its #! line) was not found",
            path.display()
        );
    }
    format!(
        "{} exists, but a program it needs to start (its dynamic loader) was not found",
        path.display()
    )
}

/// Where `program` is: itself when it names a path, else the first match in PATH.
fn locate(program: &Path) -> Option<PathBuf> {
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Writes the replayed stdin without blocking.
#[derive(Debug)]
struct Feeder {
    pipe: Option<File>,
    bytes: Arc<Vec<u8>>,
    written: usize,
}

impl Feeder {
    fn new(pipe: File, bytes: Arc<Vec<u8>>) -> Feeder {
        let pipe = sys::set_nonblocking(pipe.as_raw_fd()).ok().map(|()| pipe);
        let mut feeder = Feeder {
            pipe,
            bytes,
            written: 0,
        };
        feeder.pump();
        feeder
    }

    fn fd(&self) -> Option<RawFd> {
        self.pipe.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Writes what the pipe takes; closes it when all is written or the reader
    /// is gone.
    fn pump(&mut self) {
        while let Some(pipe) = &mut self.pipe {
            let rest = self.bytes.get(self.written..).unwrap_or_default();
            if rest.is_empty() {
                self.pipe = None;
                break;
            }
            match pipe.write(rest) {
                Ok(0) => self.pipe = None,
                Ok(n) => self.written = self.written.saturating_add(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.pipe = None, // EPIPE: the command stopped reading
            }
        }
    }
}

/// Reads a held stdout without blocking.
#[derive(Debug)]
struct Collector {
    pipe: Option<File>,
    bytes: Vec<u8>,
}

impl Collector {
    fn new(pipe: File) -> Collector {
        let pipe = sys::set_nonblocking(pipe.as_raw_fd()).ok().map(|()| pipe);
        Collector {
            pipe,
            bytes: Vec::new(),
        }
    }

    fn fd(&self) -> Option<RawFd> {
        self.pipe.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what is there; closes the pipe at end of file.
    fn pump(&mut self) {
        let mut chunk = [0u8; 16 * 1024];
        while let Some(pipe) = &mut self.pipe {
            match pipe.read(&mut chunk) {
                Ok(0) => self.pipe = None,
                Ok(n) => self
                    .bytes
                    .extend_from_slice(chunk.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.pipe = None,
            }
        }
    }
}

/// The state of one wait.
#[derive(Debug)]
struct Watch<'t> {
    group: i32,
    deadline: Option<Instant>,
    kill_after: Duration,
    /// The terminal, when the command may have it (whenever `retry` is in the
    /// foreground).
    terminal: Option<&'t Terminal>,
    /// Whether the command had the terminal at some point.
    had_terminal: bool,
    /// The child's exec report, until read.
    exec_report: Option<OwnedFd>,
    /// Why its exec failed, if it did.
    exec_error: Option<io::Error>,
    stdin: Option<Feeder>,
    stdout: Option<Collector>,
    /// The command's terminal modes while it is stopped.
    child_modes: Option<sys::Modes>,
    /// `retry` itself was stopped and stopped the group, then continued both:
    /// the group's stop and continue reports that follow are already accounted.
    own_stop: bool,
    notices: Vec<Notice>,
}

const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];
const JOB_CONTROL: [i32; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

impl Watch<'_> {
    /// Waits for the command to end (and its held stdout to close). Returns how
    /// it ended, whether the deadline stopped it, and the first signal `retry`
    /// received meanwhile.
    fn wait(&mut self, cx: &mut Context<'_>) -> (ChildState, bool, Option<i32>) {
        let pid = self.group;
        let mut ended: Option<ChildState> = None;
        let mut timed_out = false;
        let mut interrupted: Option<i32> = None;
        let mut kill_at: Option<WallInstant> = None;
        let mut stopped_since: Option<WallInstant> = None;
        let mut check_child = true;
        loop {
            let pending = sys::take_pending();
            for signal in FORWARDED {
                if sys::has(pending, signal) {
                    sys::signal_group(self.group, signal);
                    if stopped_since.is_some() {
                        sys::signal_group(self.group, libc::SIGCONT);
                    }
                    if interrupted.is_none() {
                        interrupted = Some(signal);
                        kill_at = Some(later(WallInstant::now(), self.kill_after));
                    }
                }
            }
            if let Some(&signal) = JOB_CONTROL.iter().find(|&&s| sys::has(pending, s)) {
                // Ctrl-Z reached `retry` (or someone sent it the signal): the
                // command's group stops with it, then `retry` stops. The reports
                // of that stop are drained below and not counted twice.
                let running = ended.is_none() && stopped_since.is_none();
                if running {
                    sys::signal_group(self.group, signal);
                    self.own_stop = true;
                    (cx.notify)(Notice::Stopped(signal));
                }
                let since = WallInstant::now();
                self.suspend(signal);
                if running {
                    sys::signal_group(self.group, libc::SIGCONT);
                    let stopped = since.elapsed();
                    cx.clock.pause(stopped);
                    (cx.notify)(Notice::Continued(stopped));
                }
                check_child = true;
            } else if sys::has(pending, libc::SIGCONT) && ended.is_none() {
                // `retry` was continued (after a stop it could not see coming):
                // the command's group goes on with it.
                self.regain_terminal();
                sys::signal_group(self.group, libc::SIGCONT);
            }
            if check_child || sys::has(pending, libc::SIGCHLD) {
                check_child = false;
                while ended.is_none() {
                    match sys::try_wait(pid) {
                        Ok(None) => break,
                        Ok(Some(ChildState::Stopped(_) | ChildState::Continued))
                            if self.own_stop => {}
                        Ok(Some(ChildState::Stopped(signal))) => {
                            stopped_since.get_or_insert_with(WallInstant::now);
                            self.notices.push(Notice::Stopped(signal));
                            (cx.notify)(Notice::Stopped(signal));
                            self.child_stopped(signal);
                        }
                        Ok(Some(ChildState::Continued)) => {
                            if let Some(since) = stopped_since.take() {
                                let stopped = since.elapsed();
                                cx.clock.pause(stopped);
                                self.notices.push(Notice::Continued(stopped));
                                (cx.notify)(Notice::Continued(stopped));
                            }
                        }
                        Ok(Some(state)) => ended = Some(state),
                        // Cannot happen for a child of ours; make sure it is gone.
                        Err(_) => {
                            sys::signal_group(self.group, libc::SIGKILL);
                            ended = Some(ChildState::Killed(libc::SIGKILL));
                        }
                    }
                }
                // The reports of `retry`'s own stop came with this round.
                self.own_stop = false;
            }
            let now = WallInstant::now();
            let wall_deadline = self.deadline.map(|d| cx.clock.wall(d));
            if !timed_out
                && interrupted.is_none()
                && stopped_since.is_none()
                && wall_deadline.is_some_and(|d| now >= d)
            {
                timed_out = true;
                sys::signal_group(self.group, libc::SIGTERM);
                kill_at = Some(later(now, self.kill_after));
            }
            if kill_at.is_some_and(|k| now >= k) {
                sys::signal_group(self.group, libc::SIGKILL);
                kill_at = None;
            }
            if let Some(state) = ended {
                let stdout_open = self.stdout.as_ref().is_some_and(|c| c.pipe.is_some());
                if !stdout_open {
                    if timed_out || interrupted.is_some() {
                        // Whatever the command left behind in its group goes with
                        // it: no orphans.
                        sys::signal_group(self.group, libc::SIGKILL);
                    }
                    return (state, timed_out, interrupted);
                }
            }
            let mut timeout: Option<Duration> = None;
            let pending_deadline = wall_deadline.filter(|_| !timed_out && stopped_since.is_none());
            for wake in [pending_deadline, kill_at].into_iter().flatten() {
                let left = wake.saturating_duration_since(now);
                timeout = Some(timeout.map_or(left, |t| t.min(left)));
            }
            let mut fds: Vec<libc::pollfd> = Vec::with_capacity(2);
            let stdin_fd = self.stdin.as_ref().and_then(Feeder::fd);
            let stdout_fd = self.stdout.as_ref().and_then(Collector::fd);
            let report_fd = self.exec_report.as_ref().map(AsRawFd::as_raw_fd);
            if let Some(fd) = report_fd {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            if let Some(fd) = stdin_fd {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                });
            }
            if let Some(fd) = stdout_fd {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            cx.wake.wait(&mut fds, timeout);
            for polled in &fds {
                if polled.revents == 0 {
                    continue;
                }
                if Some(polled.fd) == stdin_fd {
                    if let Some(feeder) = &mut self.stdin {
                        if polled.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                            feeder.pipe = None;
                        } else {
                            feeder.pump();
                        }
                    }
                } else if Some(polled.fd) == stdout_fd {
                    if let Some(collector) = &mut self.stdout {
                        collector.pump();
                    }
                } else if Some(polled.fd) == report_fd {
                    if let Some(report) = self.exec_report.take() {
                        self.exec_error = sys::exec_result(&report);
                    }
                }
            }
        }
    }

    /// The command's group was stopped by `signal`.
    fn child_stopped(&mut self, signal: i32) {
        let job_control = JOB_CONTROL.contains(&signal);
        let handed = self.terminal.is_some_and(Terminal::is_handed);
        if !handed && !job_control {
            // Stopped by someone else (SIGSTOP): wait for them to continue it;
            // the deadline waits too.
            return;
        }
        // A key (Ctrl-Z) or the terminal stopped the command: `retry` stops the
        // same way, so that its shell sees the job stop and gets the terminal
        // back; `fg` continues `retry`, which continues the command.
        self.suspend(signal);
        sys::signal_group(self.group, libc::SIGCONT);
    }

    /// Takes the terminal back (keeping the command's modes), stops `retry` with
    /// `signal`, and once continued hands the terminal on again if `retry` is in
    /// the foreground.
    fn suspend(&mut self, signal: i32) {
        if let Some(tty) = self.terminal.filter(|t| t.is_handed()) {
            self.child_modes = tty.modes();
            tty.take_back();
            tty.restore_modes();
        }
        let _ = std::io::stderr().flush();
        sys::stop_self(signal);
        self.regain_terminal();
    }

    /// After `retry` was continued: if it is in the foreground and the command
    /// had the terminal, the command gets it back, with its modes.
    fn regain_terminal(&mut self) {
        let Some(tty) = self.terminal else {
            return;
        };
        if tty.in_foreground() {
            if let Some(modes) = self.child_modes.take() {
                tty.set_modes(&modes);
            }
            if tty.give(self.group).is_ok() {
                self.had_terminal = true;
            }
        }
    }
}
