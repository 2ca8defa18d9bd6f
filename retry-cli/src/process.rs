//! Running one attempt: spawning the command (in the job's process group with a
//! terminal, in one of its own without), feeding its stdin, holding its stdout,
//! and waiting for it while watching its deadline and the signals sent to
//! `retry`; after a timeout or a signal, ending every process it left.
//!
//! Nothing here polls: the wait blocks in `ppoll(2)` on a self-pipe that the
//! signal handlers (SIGCHLD included) write to, on the command's pipes, and on
//! the next deadline. A command that runs for an hour costs `retry` a handful of
//! wake-ups.

use core::time::Duration;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant as WallInstant;

use retry_core::Instant;

use super::sys::{self, ChildState, Interest, ProcessId, SpawnPlan, Wake};
use super::terminal::Terminal;
use super::tree::{self, Tree};

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

    /// The run's time so far, wall and counted, from one reading.
    #[must_use]
    pub fn spent(&self) -> super::output::Spent {
        let elapsed = self.start.elapsed();
        super::output::Spent {
            elapsed,
            counted: elapsed.saturating_sub(self.paused),
        }
    }

    /// When the run started.
    #[must_use]
    pub const fn started(&self) -> WallInstant {
        self.start
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

/// Which process group an attempt runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grouping {
    /// `retry`'s own, the job's (with a controlling terminal): the terminal's
    /// signals reach the shell, `retry` and the command together, and the
    /// shell's job control works on the whole job.
    Job,
    /// A new group per attempt (without a terminal).
    Own,
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
}

/// What the wait needs from the run.
pub struct Context<'a> {
    /// The run's clock (stopped time is added to it).
    pub clock: &'a mut RunClock,
    /// The signal self-pipe.
    pub(super) wake: &'a Wake,
    /// The controlling terminal, if any.
    pub terminal: Option<&'a Terminal>,
    /// The process group attempts run in.
    pub grouping: Grouping,
    /// Whether `retry` started a process before (until then it has no child,
    /// and an attempt need not look for leftovers of earlier ones).
    pub spawned_before: bool,
    /// Told of job-control changes as they happen (before `retry` stops itself).
    pub notify: &'a dyn Fn(Notice),
}

impl core::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Context")
            .field("clock", &self.clock)
            .field("terminal", &self.terminal)
            .field("grouping", &self.grouping)
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
    /// The command was stopped by this signal.
    Stopped(i32),
    /// It was continued after being stopped for this long.
    Continued(Duration),
}

/// A finished process.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub ending: Ending,
    /// Its process id, once started.
    pub pid: Option<u32>,
    /// Its stdout, when held.
    pub stdout: Option<Vec<u8>>,
    /// Why it could not start, in words, when it could not.
    pub error: Option<String>,
    /// The signal `retry` received while it ran, if any.
    pub interrupted_by: Option<i32>,
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
    plan.own_group = cx.grouping == Grouping::Own;
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
    // What the terminal looked like before, to put back after an attempt
    // `retry` had to end.
    let modes = cx.terminal.and_then(Terminal::modes);
    // The processes already there are not this attempt's.
    let before = if cx.spawned_before {
        tree::children_of_self()
    } else {
        Vec::new()
    };
    cx.spawned_before = true;
    let pid = match sys::spawn(&plan) {
        Ok(pid) => pid,
        Err(error) => {
            let code = match error.kind() {
                io::ErrorKind::NotFound => 127,
                _ => 126,
            };
            return not_started(explain_spawn_error(program, &error), code);
        }
    };
    drop(child_ends);
    let mut watch = Watch {
        pid,
        tree: Tree::new(pid, before),
        grouping: cx.grouping,
        deadline: launch.deadline,
        kill_after: launch.kill_after,
        stdin,
        stdout,
        own_stop: false,
        notices: Vec::new(),
    };
    let (state, timed_out, interrupted) = watch.wait(cx);
    let ended_by_retry = timed_out || interrupted.is_some();
    if let (Some(tty), Some(modes)) = (cx.terminal, &modes) {
        if ended_by_retry || matches!(state, ChildState::Killed(_)) {
            tty.restore(modes);
        }
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
        pid: u32::try_from(pid.as_raw_nonzero().get()).ok(),
        stdout: watch.stdout.map(|c| c.bytes),
        error: None,
        interrupted_by: interrupted,
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
        let pipe = sys::set_nonblocking(&pipe).ok().map(|()| pipe);
        let mut feeder = Feeder {
            pipe,
            bytes,
            written: 0,
        };
        feeder.pump();
        feeder
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
        let pipe = sys::set_nonblocking(&pipe).ok().map(|()| pipe);
        Collector {
            pipe,
            bytes: Vec::new(),
        }
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
struct Watch {
    /// The command.
    pid: ProcessId,
    /// The command and everything below it.
    tree: Tree,
    grouping: Grouping,
    deadline: Option<Instant>,
    kill_after: Duration,
    stdin: Option<Feeder>,
    stdout: Option<Collector>,
    /// `retry` itself was stopped and stopped the command, then continued both:
    /// the command's stop and continue reports that follow are already counted.
    own_stop: bool,
    notices: Vec<Notice>,
}

const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];
const JOB_CONTROL: [i32; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

impl Watch {
    /// Sends `signal` to the attempt's processes that did not get it yet.
    /// `from_terminal`: a terminal sent it to `retry`'s whole group, which in
    /// job mode holds the command.
    fn pass_on(&self, signal: i32, from_terminal: bool) {
        match self.grouping {
            // The command's group at once (atomically: a fork meanwhile joins
            // the group and gets it too), then whoever left it. Once the
            // command is reaped its number (the group's) may be another's:
            // then the tree alone, which holds what is left of the group.
            Grouping::Own if self.tree.root().is_some() => {
                sys::signal_group(self.pid, signal);
                self.tree.signal(signal, Some(self.pid));
            }
            Grouping::Own => {
                self.tree.signal(signal, None);
            }
            Grouping::Job if from_terminal => {
                self.tree.signal(signal, Some(sys::own_group()));
            }
            Grouping::Job => {
                self.tree.signal(signal, None);
            }
        }
    }

    /// Ends every process of the attempt (SIGKILL): no orphans.
    fn kill_all(&self) {
        if self.grouping == Grouping::Own && self.tree.root().is_some() {
            sys::signal_group(self.pid, libc::SIGKILL);
        }
        self.tree.kill();
    }

    /// Waits for the command to end (and its held stdout to close). Returns how
    /// it ended, whether the deadline stopped it, and the first signal `retry`
    /// received meanwhile.
    fn wait(&mut self, cx: &mut Context<'_>) -> (ChildState, bool, Option<i32>) {
        let job = self.grouping == Grouping::Job;
        let mut ended: Option<ChildState> = None;
        let mut timed_out = false;
        let mut interrupted: Option<i32> = None;
        let mut kill_at: Option<WallInstant> = None;
        let mut stopped_since: Option<WallInstant> = None;
        let mut check_child = true;
        loop {
            let pending = sys::take_pending();
            for signal in FORWARDED {
                if pending.has(signal) {
                    self.pass_on(signal, job && pending.only_from_kernel(signal));
                    if stopped_since.is_some() {
                        // A stopped command could not act on it.
                        self.pass_on(libc::SIGCONT, false);
                    }
                }
                if pending.has(signal) && interrupted.is_none() {
                    interrupted = Some(signal);
                    kill_at = Some(later(WallInstant::now(), self.kill_after));
                }
            }
            if let Some(&signal) = JOB_CONTROL.iter().find(|&&s| pending.has(s)) {
                // Ctrl-Z (or someone's `kill -TSTP`) reached `retry`: the
                // command stops with it (a terminal's key reached it already
                // in job mode), then `retry` stops, so that its shell sees the
                // job stop. The command's reports of that stop are drained
                // below and not counted twice.
                let running = ended.is_none() && stopped_since.is_none();
                // A SIGTTIN or SIGTTOU from the terminal stopped `retry` in
                // its handler already (the whole job got it).
                let already = sys::stopped_in_handler(pending, signal);
                if running {
                    if !(job && pending.only_from_kernel(signal)) {
                        self.pass_on(signal, false);
                    }
                    self.own_stop = true;
                    (cx.notify)(Notice::Stopped(signal));
                }
                let since = WallInstant::now();
                if !already {
                    suspend(signal);
                }
                let stopped = since.elapsed() + sys::take_stopped_in_handler();
                if running {
                    self.pass_on(libc::SIGCONT, false);
                    cx.clock.pause(stopped);
                    (cx.notify)(Notice::Continued(stopped));
                }
                check_child = true;
            } else if pending.has(libc::SIGCONT) && ended.is_none() {
                // `retry` was continued (after a stop it could not see coming,
                // SIGSTOP): the command goes on with it.
                self.pass_on(
                    libc::SIGCONT,
                    job && pending.only_from_kernel(libc::SIGCONT),
                );
            }
            if check_child || pending.has(libc::SIGCHLD) {
                check_child = false;
                let reaped = sys::reap(Some(self.pid));
                self.tree.forget(&reaped.others);
                for state in reaped.command {
                    if ended.is_some() {
                        break;
                    }
                    match state {
                        ChildState::Stopped(_) | ChildState::Continued if self.own_stop => {}
                        ChildState::Stopped(signal) => {
                            stopped_since.get_or_insert_with(WallInstant::now);
                            self.notices.push(Notice::Stopped(signal));
                            (cx.notify)(Notice::Stopped(signal));
                            if job && JOB_CONTROL.contains(&signal) {
                                // The command stopped itself (a pager's own
                                // Ctrl-Z, a read from the background): the job
                                // stops with it, so that the shell sees it and
                                // `fg` continues it.
                                sys::forget(&JOB_CONTROL);
                                suspend(signal);
                                self.pass_on(libc::SIGCONT, false);
                                check_child = true;
                            }
                        }
                        ChildState::Continued => {
                            if let Some(since) = stopped_since.take() {
                                let stopped = since.elapsed();
                                cx.clock.pause(stopped);
                                self.notices.push(Notice::Continued(stopped));
                                (cx.notify)(Notice::Continued(stopped));
                            }
                        }
                        state => {
                            ended = Some(state);
                            self.tree.root_reaped();
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
                self.pass_on(libc::SIGTERM, false);
                kill_at = Some(later(now, self.kill_after));
            }
            if kill_at.is_some_and(|k| now >= k) {
                self.kill_all();
                kill_at = None;
            }
            if let Some(state) = ended {
                let stdout_open = self.stdout.as_ref().is_some_and(|c| c.pipe.is_some());
                if timed_out || interrupted.is_some() {
                    // Whatever the command left behind goes with it: no
                    // orphans (and a held stdout closes: what is left in it
                    // is read).
                    self.kill_all();
                    if let Some(collector) = &mut self.stdout {
                        collector.pump();
                    }
                    return (state, timed_out, interrupted);
                }
                if !stdout_open {
                    return (state, timed_out, interrupted);
                }
            }
            let mut timeout: Option<Duration> = None;
            let pending_deadline = wall_deadline.filter(|_| !timed_out && stopped_since.is_none());
            for wake in [pending_deadline, kill_at].into_iter().flatten() {
                let left = wake.saturating_duration_since(now);
                timeout = Some(timeout.map_or(left, |t| t.min(left)));
            }
            let stdin_fd = self.stdin.as_ref().and_then(|f| f.pipe.as_ref());
            let stdout_fd = self.stdout.as_ref().and_then(|c| c.pipe.as_ref());
            let mut fds: Vec<(BorrowedFd<'_>, Interest)> = Vec::with_capacity(2);
            if let Some(pipe) = stdin_fd {
                fds.push((pipe.as_fd(), Interest::Write));
            }
            if let Some(pipe) = stdout_fd {
                fds.push((pipe.as_fd(), Interest::Read));
            }
            let (has_stdin, has_stdout) = (stdin_fd.is_some(), stdout_fd.is_some());
            let ready = cx.wake.wait(&fds, timeout);
            let mut ready = ready.into_iter();
            if has_stdin {
                if let (Some(r), Some(feeder)) = (ready.next(), &mut self.stdin) {
                    if r.hung_up && !r.ready {
                        feeder.pipe = None;
                    } else if r.ready || r.hung_up {
                        feeder.pump();
                    }
                }
            }
            if has_stdout {
                if let (Some(r), Some(collector)) = (ready.next(), &mut self.stdout) {
                    if r.ready || r.hung_up {
                        collector.pump();
                    }
                }
            }
        }
    }
}

/// Stops `retry` with `signal`, as a shell's job stops, and returns once it is
/// continued.
fn suspend(signal: i32) {
    let _ = std::io::stderr().flush();
    sys::stop_self(signal);
}
