//! The run loop: the core [`RetryMachine`] decides, this loop spawns, waits and
//! sleeps. Between the command's outcome and the machine sit two more core
//! deciders: the run's [`ProcessGoal`] (`--until-fail`, `--success-count`) and
//! an explicit [`DelayList`] (`--delays`).

use core::time::Duration;
use std::ffi::CString;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use retry_core::{
    Action, ChildHint, DelayList, Event, Failure, FailureKind, GiveUpReason, ProcessGoal,
    RetryMachine,
};

use super::args::Invocation;
use super::output::{describe, Reporter};
use super::process::{self, Context, Ending, Grouping, Input, Launch, Notice, Output, RunClock};
use super::sys::{self, Wake};
use super::terminal::Terminal;

/// How a run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exit with this status.
    Code(i32),
    /// Die of this signal (it was sent to `retry` and passed on, or a key sent it
    /// to a command holding the terminal).
    Signal(i32),
}

/// A fresh, empty hint file for one attempt, gone when dropped.
enum HintFile {
    /// A file in memory (a memfd), which the command opens by its path under
    /// `/proc/<retry's pid>/fd/`: nothing is created on or removed from a disk,
    /// which is most of the cost of an attempt of a short command.
    Memory {
        /// `retry`'s descriptor of the file.
        file: std::fs::File,
        /// The path the command is given.
        path: PathBuf,
    },
    /// A file in `retry`'s private directory ([`HintDirectory`]), removed when
    /// dropped.
    Disk {
        /// `retry`'s descriptor of the file.
        file: std::fs::File,
        /// The path the command is given.
        path: CString,
    },
}

/// The most of a hint file that is read (a header dump is far smaller).
const HINT_FILE_LIMIT: u64 = 64 * 1024;

/// Where the hint files of a run come from: memory files for a `retry` that is
/// not root, or a directory of its own for one that is root (or without
/// `/proc`).
///
/// A memory file is opened through `/proc/<retry's pid>/fd/<n>`, which the
/// kernel lets only processes of `retry`'s own user (or root) open. A root
/// `retry` commonly runs commands that drop privileges (`setpriv`, `runuser`,
/// `sudo -u`, `su`), which could then not write their hint: for root, each
/// attempt gets a file in a directory made for the run (in `/dev/shm`, else the
/// temporary directory) that only root can list (mode 0711) and that any user
/// can write but not read (0622), under a name no one can guess.
#[derive(Default)]
struct HintDirectory {
    /// The directory, once made.
    path: Option<CString>,
    /// Whether it could not be made (then no hint files).
    failed: bool,
}

impl HintDirectory {
    /// A fresh hint file for attempt `attempt`.
    fn create(&mut self, attempt: u32) -> Option<HintFile> {
        if !sys::is_root() {
            if let Some(file) = HintFile::in_memory() {
                return Some(file);
            }
        }
        let dir = self.directory()?;
        let mut path = dir.into_bytes();
        // The directory's own name shows in a listing of its parent (which
        // anyone may list); the file's name is drawn at random too, so that
        // no one but root can find the file to write it.
        path.extend_from_slice(format!("/hint-{attempt}-{:016x}", random_seed()).as_bytes());
        let path = CString::new(path).ok()?;
        // Any user may write it (a command that switched users); only retry
        // reads it.
        let fd = sys::create_file(&path, 0o622).ok()?;
        Some(HintFile::Disk {
            file: std::fs::File::from(fd),
            path,
        })
    }

    /// The run's directory, made on first use.
    fn directory(&mut self) -> Option<CString> {
        if self.failed {
            return None;
        }
        if let Some(path) = &self.path {
            return Some(path.clone());
        }
        let temporary = std::env::temp_dir();
        for parent in [std::path::Path::new("/dev/shm"), temporary.as_path()] {
            for _ in 0..4 {
                let name = format!(
                    "{}/retry-{}-{:016x}",
                    parent.display(),
                    sys::own_pid().as_raw_nonzero(),
                    random_seed()
                );
                let Ok(path) = CString::new(name) else {
                    break;
                };
                match sys::make_private_dir(&path, 0o711) {
                    Ok(()) => {
                        self.path = Some(path.clone());
                        return Some(path);
                    }
                    // Taken (a name seen before): draw another.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    // Not there, or not writable: the next parent.
                    Err(_) => break,
                }
            }
        }
        self.failed = true;
        None
    }
}

impl Drop for HintDirectory {
    fn drop(&mut self) {
        // Each hint file removed itself when its attempt ended.
        if let Some(path) = &self.path {
            sys::remove_dir(path);
        }
    }
}

impl HintFile {
    /// A memfd, when `/proc` is there for the command to open it by.
    fn in_memory() -> Option<HintFile> {
        use std::os::fd::AsRawFd;
        if !sys::proc_is_mounted() {
            return None;
        }
        let fd = sys::memory_file().ok()?;
        let path = PathBuf::from(format!(
            "/proc/{}/fd/{}",
            sys::own_pid().as_raw_nonzero(),
            fd.as_raw_fd()
        ));
        Some(HintFile::Memory {
            file: std::fs::File::from(fd),
            path,
        })
    }

    /// The path the command is given.
    fn path(&self) -> OsString {
        use std::os::unix::ffi::OsStrExt;
        match self {
            HintFile::Memory { path, .. } => path.as_os_str().to_owned(),
            HintFile::Disk { path, .. } => std::ffi::OsStr::from_bytes(path.as_bytes()).to_owned(),
        }
    }

    /// The file's bytes (none when empty or unreadable).
    fn bytes(&self) -> Vec<u8> {
        use std::io::{Seek, SeekFrom};
        let mut bytes = Vec::new();
        let (HintFile::Memory { file, .. } | HintFile::Disk { file, .. }) = self;
        let mut file = file;
        if file.seek(SeekFrom::Start(0)).is_ok() {
            let _ = file.take(HINT_FILE_LIMIT).read_to_end(&mut bytes);
        }
        bytes
    }
}

impl Drop for HintFile {
    fn drop(&mut self) {
        if let HintFile::Disk { path, .. } = self {
            sys::remove_file(path);
        }
    }
}

/// A seed from the kernel's randomness (or, without it, the time and the
/// process id).
fn random_seed() -> u64 {
    if let Some(seed) = sys::random_u64() {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let pid = u64::from(sys::own_pid().as_raw_nonzero().get().unsigned_abs());
    // splitmix64 of the two.
    let mut z = (nanos as u64 ^ (pid << 32)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Signals `retry` passes on and then dies of.
const FORWARDED: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];
/// Signals that stop `retry` (and the command's group, while one runs).
const JOB_CONTROL: [i32; 3] = [libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// Between attempts: reaps what earlier attempts left and what ended, stops
/// `retry` for a job-control signal (the time stopped is not counted), and
/// returns a forwarded signal that arrived, if any.
fn signals_between_attempts(clock: &mut RunClock) -> Option<i32> {
    let pending = sys::take_pending();
    if pending.has(libc::SIGCHLD) {
        let _ = sys::reap(None);
    }
    if let Some(&signal) = JOB_CONTROL.iter().find(|&&s| pending.has(s)) {
        let since = std::time::Instant::now();
        // A SIGTTIN or SIGTTOU from the terminal stopped retry in its handler
        // already.
        if !sys::stopped_in_handler(pending, signal) {
            let _ = std::io::stderr().flush();
            sys::stop_self(signal);
        }
        let stopped = since.elapsed() + sys::take_stopped_in_handler();
        clock.pause(stopped);
    }
    FORWARDED.into_iter().find(|&s| pending.has(s))
}

/// Everything a run carries from one attempt to the next.
struct Run<'a> {
    invocation: &'a Invocation,
    reporter: Reporter,
    wake: Wake,
    terminal: Option<Terminal>,
    /// The process group attempts run in.
    grouping: Grouping,
    /// Whether a process was started before.
    spawned_before: bool,
    hint_directory: HintDirectory,
    clock: RunClock,
    input: Input,
    /// The last attempt's exit status.
    last_status: Option<i32>,
    /// The last attempt's ending.
    last_ending: Option<Ending>,
    /// A signal sent to `retry`, which ends the run.
    received: Option<i32>,
    /// The last attempt's process id and how long it ran.
    attempt_pid: Option<u32>,
    attempt_took: Duration,
}

/// Runs `command` under the invocation's policy.
pub fn run(invocation: &Invocation, command: &[OsString]) -> Exit {
    // The run's time is measured from here, in every report: nothing of it is
    // left out (reading a replayed stdin included).
    let clock = RunClock::start();
    let policy = invocation.policy;
    let reporter = match Reporter::new(
        clock.started(),
        invocation.verbosity,
        invocation.events.as_ref(),
        invocation.attempt_limit(),
        policy.budget(),
        invocation.goal,
    ) {
        Ok(reporter) => reporter,
        Err(message) => {
            let _ = writeln!(std::io::stderr().lock(), "retry: {message}");
            return Exit::Code(125);
        }
    };
    let wake = match sys::install() {
        Ok(wake) => wake,
        Err(error) => {
            reporter.error(&format!("cannot catch signals: {error}"));
            return Exit::Code(125);
        }
    };
    let input = if invocation.replay_stdin {
        let mut bytes = Vec::new();
        if let Err(error) = std::io::stdin().lock().read_to_end(&mut bytes) {
            reporter.error(&format!("--replay-stdin: cannot read stdin: {error}"));
            return Exit::Code(125);
        }
        Input::Replay(Arc::new(bytes))
    } else {
        Input::Inherit
    };
    let list = invocation.delays.as_deref().and_then(DelayList::new);
    let machine_policy = match list.map(|l| l.policy(&policy)) {
        None => policy,
        Some(Ok(p)) => p,
        Some(Err(error)) => {
            reporter.error(&format!("--delays: {error}"));
            return Exit::Code(125);
        }
    };
    let seed = invocation.seed.unwrap_or_else(random_seed);
    let terminal = Terminal::open();
    let grouping = if terminal.is_some() {
        Grouping::Job
    } else {
        Grouping::Own
    };
    let mut run = Run {
        invocation,
        reporter,
        wake,
        terminal,
        grouping,
        spawned_before: false,
        hint_directory: HintDirectory::default(),
        clock,
        input,
        last_status: None,
        last_ending: None,
        received: None,
        attempt_pid: None,
        attempt_took: Duration::ZERO,
    };
    let described = || match &invocation.delays {
        Some(delays) => format!(
            "{policy}; delays {}",
            delays
                .iter()
                .map(|d| retry_core::DisplayDuration(*d).to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => policy.to_string(),
    };
    run.reporter.start(command, described, seed);
    let mut machine = RetryMachine::new(&machine_policy, seed);
    let mut goal = ProcessGoal::new(invocation.goal);
    let mut action = machine.poll(Event::Start, run.clock.now());
    loop {
        if run.received.is_none() {
            run.received = signals_between_attempts(&mut run.clock);
        }
        if run.received.is_some() && !action.is_terminal() {
            action = machine.poll(Event::Cancelled, run.clock.now());
        }
        match action {
            Action::Attempt {
                number, deadline, ..
            } => {
                if number > 1 {
                    if let Some(hook) = &invocation.on_retry {
                        let env = attempt_env(number, invocation, run.last_status, None);
                        if let Some(signal) = run.hook("--on-retry", hook, env) {
                            run.received = Some(signal);
                            continue;
                        }
                    }
                }
                let event = run.attempt(command, number, deadline);
                let event = match event {
                    Event::Cancelled => Event::Cancelled,
                    outcome => {
                        let judged = goal.judge(outcome);
                        match list {
                            Some(list) => list.event(&policy, number, judged),
                            None => judged,
                        }
                    }
                };
                // The interval a jittered curve delay is drawn from, for the
                // report (not with a hint, whose floor moves it, nor with a
                // delay list, which has no jitter).
                let hinted = matches!(event, Event::Failed(f) if f.hint().is_some());
                let range = (!hinted && list.is_none())
                    .then(|| machine_policy.delay_interval(number))
                    .flatten()
                    .filter(|(lo, hi)| lo < hi);
                action = machine.poll(event, run.clock.now());
                if let Action::Withdraw { .. } = action {
                    // The command line has no shared retry budget: every
                    // withdrawal is granted, and the sleep that follows is what
                    // the report shows.
                    action = machine.poll(Event::Granted, run.clock.now());
                }
                if let Some(ending) = run.last_ending {
                    run.reporter.attempt_end(
                        number,
                        ending,
                        run.attempt_pid,
                        run.attempt_took,
                        &action,
                        range.filter(|_| {
                            matches!(
                                action,
                                Action::Sleep {
                                    reason: retry_core::SleepReason::Curve,
                                    ..
                                }
                            )
                        }),
                        run.clock.spent(),
                    );
                }
            }
            Action::Sleep { until, .. } => {
                loop {
                    if let Some(signal) = signals_between_attempts(&mut run.clock) {
                        run.received = Some(signal);
                        break;
                    }
                    let left = run
                        .clock
                        .wall(until)
                        .saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    let _ = run.wake.wait(&[], Some(left));
                }
                if run.received.is_none() {
                    action = machine.poll(Event::Woke, run.clock.now());
                }
            }
            Action::Withdraw { .. } => {
                action = machine.poll(Event::Granted, run.clock.now());
            }
            Action::Done { attempts } => {
                let code = if goal.goal_is_success() {
                    0
                } else {
                    run.last_status.unwrap_or(1)
                };
                run.reporter.done(attempts, code, run.clock.spent());
                return Exit::Code(code);
            }
            Action::GiveUp(give_up) => {
                if let (GiveUpReason::Cancelled, Some(signal)) = (give_up.reason, run.received) {
                    run.reporter.give_up(
                        &give_up,
                        128_i32.saturating_add(signal),
                        run.clock.spent(),
                    );
                    return Exit::Signal(signal);
                }
                let code = match give_up.reason {
                    GiveUpReason::TimedOut { .. } | GiveUpReason::Budget => 124,
                    _ => run.last_status.unwrap_or(1),
                };
                run.reporter.give_up(&give_up, code, run.clock.spent());
                if let Some(hook) = &invocation.on_give_up {
                    let mut env = attempt_env(give_up.attempts, invocation, Some(code), None);
                    env.push((
                        "RETRY_REASON",
                        give_up.reason.code().trim_start_matches("retry.").into(),
                    ));
                    if let Some(signal) = run.hook("--on-give-up", hook, env) {
                        return Exit::Signal(signal);
                    }
                }
                return Exit::Code(code);
            }
        }
    }
}

impl Run<'_> {
    /// Runs attempt `number` and returns its outcome as the classifier sees it
    /// ([`Event::Cancelled`] when a signal sent to `retry` ended it).
    fn attempt(
        &mut self,
        command: &[OsString],
        number: u32,
        deadline: Option<retry_core::Instant>,
    ) -> Event {
        let invocation = self.invocation;
        let deadline_in = deadline.map(|d| d.saturating_duration_since(self.clock.now()));
        self.reporter.attempt_start(number, deadline_in);
        let hint_file = self.hint_directory.create(number);
        let mut env = attempt_env(number, invocation, self.last_status, deadline_in);
        if let Some(hint) = &hint_file {
            env.push(("RETRY_HINT_FILE", hint.path()));
        }
        let began = std::time::Instant::now();
        let finished = {
            let reporter = &self.reporter;
            let notify = |notice: Notice| match notice {
                Notice::Stopped(signal) => reporter.job_control(number, Some(signal), None),
                Notice::Continued(after) => reporter.job_control(number, None, Some(after)),
            };
            let mut cx = Context {
                clock: &mut self.clock,
                wake: &self.wake,
                terminal: self.terminal.as_ref(),
                grouping: self.grouping,
                spawned_before: self.spawned_before,
                notify: &notify,
            };
            let finished = process::run(
                Launch {
                    argv: command,
                    env,
                    input: self.input.clone(),
                    output: if invocation.hold_stdout {
                        Output::Hold
                    } else {
                        Output::Inherit
                    },
                    deadline,
                    kill_after: invocation.kill_after,
                },
                &mut cx,
            );
            self.spawned_before = cx.spawned_before;
            finished
        };
        self.attempt_took = began.elapsed();
        self.attempt_pid = finished.pid;
        let ending = finished.ending;
        self.last_status = Some(ending.status_code());
        self.last_ending = Some(ending);
        if let Some(error) = &finished.error {
            let program = command
                .first()
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            self.reporter
                .error(&format!("{program}: {} ({error})", describe(ending)));
        }
        if let Some(bytes) = &finished.stdout {
            let _ = if ending == Ending::Exited(0) {
                std::io::stdout().lock().write_all(bytes)
            } else {
                std::io::stderr().lock().write_all(bytes)
            };
        }
        if let Some(signal) = finished.interrupted_by {
            self.received = self.received.or(Some(signal));
        }
        let classifier = &invocation.classifier;
        match ending {
            Ending::Exited(0) => Event::Succeeded,
            Ending::Exited(code) => {
                let hint = hint_file.as_ref().and_then(|f| self.read_hint(number, f));
                match classifier.exit_failure(code, hint) {
                    Some(failure) => Event::Failed(failure),
                    None => Event::Succeeded,
                }
            }
            Ending::Signalled(signal) => Event::Failed(classifier.signal_failure(signal)),
            Ending::TimedOut => Event::TimedOut,
            Ending::Interrupted(signal) => {
                self.received = self.received.or(Some(signal));
                Event::Cancelled
            }
            Ending::NotStarted(code) => {
                Event::Failed(Failure::permanent().with_kind(FailureKind::Exit(code)))
            }
        }
    }

    /// Reads the attempt's hint file, reporting what it asks for and what
    /// cannot be read.
    fn read_hint(&self, number: u32, file: &HintFile) -> Option<ChildHint> {
        let bytes = file.bytes();
        if bytes.is_empty() {
            return None;
        }
        // The wall clock to the nanosecond: an HTTP-date is a whole second, and
        // the wait is from now, not from the start of the current second.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let read = ChildHint::read_at(&bytes, now);
        if let Some(problem) = read.problem {
            let line = bytes
                .split(|&b| b == b'\n')
                .nth(problem.line.saturating_sub(1))
                .unwrap_or_default();
            let text = String::from_utf8_lossy(line.trim_ascii());
            self.reporter.hint_unreadable(number, problem, &text);
        }
        if let Some(hint) = read.hint {
            self.reporter.hint(number, hint);
        }
        read.hint
    }

    /// Runs a hook (`sh -c`, no stdin, its stdout to stderr). Returns the signal
    /// sent to `retry` meanwhile, if any.
    fn hook(&mut self, name: &str, hook: &str, env: Vec<(&'static str, OsString)>) -> Option<i32> {
        let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), hook.into()];
        let mut cx = Context {
            clock: &mut self.clock,
            wake: &self.wake,
            terminal: self.terminal.as_ref(),
            grouping: self.grouping,
            spawned_before: self.spawned_before,
            notify: &|_| {},
        };
        let finished = process::run(
            Launch {
                argv: &argv,
                env,
                input: Input::Null,
                output: Output::Stderr,
                deadline: None,
                kill_after: Duration::from_secs(1),
            },
            &mut cx,
        );
        self.spawned_before = cx.spawned_before;
        match finished.ending {
            Ending::Exited(0) => {}
            Ending::Interrupted(signal) => return Some(signal),
            other => self.reporter.hook_failed(name, &describe(other)),
        }
        if let Some(error) = &finished.error {
            self.reporter
                .hook_failed(name, &format!("could not start: {error}"));
        }
        finished.interrupted_by
    }
}

/// The `RETRY_*` environment of an attempt or hook.
fn attempt_env(
    number: u32,
    invocation: &Invocation,
    last_status: Option<i32>,
    deadline_in: Option<Duration>,
) -> Vec<(&'static str, OsString)> {
    let max = invocation
        .attempt_limit()
        .map(|n| n.to_string())
        .unwrap_or_default();
    let mut env = vec![
        ("RETRY_ATTEMPT", number.to_string().into()),
        ("RETRY_MAX_ATTEMPTS", max.into()),
        (
            "RETRY_LAST_EXIT",
            last_status
                .map(|s| s.to_string())
                .unwrap_or_default()
                .into(),
        ),
    ];
    if let Some(left) = deadline_in {
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
        env.push(("RETRY_DEADLINE_MS", ms.to_string().into()));
    }
    env
}
