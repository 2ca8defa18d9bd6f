//! Running one attempt: spawning the command in its own process group, feeding
//! its stdin, holding its stdout, and waiting for it while watching its
//! deadline and the signals sent to `retry`.

use core::time::Duration;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant as WallInstant;

use super::signals;

/// How often a running child, the clock and the signal flag are looked at.
const TICK: Duration = Duration::from_millis(5);

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
    /// When the attempt is stopped, if ever.
    pub deadline: Option<WallInstant>,
    /// Grace between SIGTERM and SIGKILL.
    pub kill_after: Duration,
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

/// A finished process.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub ending: Ending,
    /// Its stdout, when held.
    pub stdout: Option<Vec<u8>>,
    /// Why it could not start, when it could not.
    pub error: Option<std::io::Error>,
    /// The signal `retry` received while it ran, if any.
    pub interrupted_by: Option<i32>,
}

/// Runs `launch` to the end.
pub fn run(launch: Launch<'_>) -> Finished {
    let Some((program, args)) = launch.argv.split_first() else {
        return not_started(std::io::Error::from(std::io::ErrorKind::NotFound), 127);
    };
    let mut command = Command::new(program);
    command.args(args).process_group(0);
    for (key, value) in &launch.env {
        command.env(key, value);
    }
    command.stdin(match launch.input {
        Input::Inherit => Stdio::inherit(),
        Input::Replay(_) => Stdio::piped(),
        Input::Null => Stdio::null(),
    });
    match launch.output {
        Output::Inherit => {}
        Output::Hold => {
            command.stdout(Stdio::piped());
        }
        Output::Stderr => {
            if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
                command.stdout(Stdio::from(fd));
            }
        }
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            let code = match error.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            };
            return not_started(error, code);
        }
    };
    if let (Input::Replay(bytes), Some(mut stdin)) = (&launch.input, child.stdin.take()) {
        let bytes = Arc::clone(bytes);
        // Not joined: a command that never reads keeps the writer blocked until it
        // dies, which must not hold up `retry`. A closed pipe ends it (EPIPE).
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let reader: Option<JoinHandle<Vec<u8>>> = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut buffer = Vec::new();
            let _ = out.read_to_end(&mut buffer);
            buffer
        })
    });
    let (status, stopped, interrupted_by) = wait(&mut child, launch.deadline, launch.kill_after);
    let stdout = reader.and_then(|r| r.join().ok());
    let ending = match (interrupted_by, stopped) {
        (Some(signal), _) => Ending::Interrupted(signal),
        (None, true) => Ending::TimedOut,
        (None, false) => match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signalled(signal),
            (None, None) => Ending::Exited(1),
        },
    };
    Finished {
        ending,
        stdout,
        error: None,
        interrupted_by,
    }
}

fn not_started(error: std::io::Error, code: i32) -> Finished {
    Finished {
        ending: Ending::NotStarted(code),
        stdout: None,
        error: Some(error),
        interrupted_by: signals::take(),
    }
}

/// Waits for `child`, stopping its group at `deadline` (SIGTERM, then SIGKILL
/// after `kill_after`) and passing on any signal `retry` receives. Returns the
/// status, whether the deadline stopped it, and the first signal received.
fn wait(
    child: &mut Child,
    deadline: Option<WallInstant>,
    kill_after: Duration,
) -> (ExitStatus, bool, Option<i32>) {
    let group = child.id();
    let mut timed_out = false;
    let mut interrupted: Option<i32> = None;
    let mut kill_at: Option<WallInstant> = None;
    let status = loop {
        if let Some(signal) = signals::take() {
            signals::signal_group(group, signal);
            if interrupted.is_none() {
                interrupted = Some(signal);
                kill_at = kill_at.or(Some(WallInstant::now() + kill_after));
            }
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(_) => {
                // Cannot happen for a child we own; make sure it is gone.
                signals::signal_group(group, libc::SIGKILL);
                match child.wait() {
                    Ok(status) => break status,
                    Err(_) => break ExitStatus::from_raw(libc::SIGKILL),
                }
            }
        }
        let now = WallInstant::now();
        if !timed_out && interrupted.is_none() && deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            signals::signal_group(group, libc::SIGTERM);
            kill_at = Some(now + kill_after);
        }
        if kill_at.is_some_and(|k| now >= k) {
            signals::signal_group(group, libc::SIGKILL);
            kill_at = None;
        }
        let mut nap = TICK;
        for wake in [deadline.filter(|_| !timed_out), kill_at]
            .into_iter()
            .flatten()
        {
            nap = nap.min(wake.saturating_duration_since(now));
        }
        std::thread::sleep(nap.max(Duration::from_micros(200)));
    };
    if timed_out || interrupted.is_some() {
        // Whatever the command left behind in its group goes with it: no orphans.
        signals::signal_group(group, libc::SIGKILL);
    }
    (status, timed_out, interrupted)
}
