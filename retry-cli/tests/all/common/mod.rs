//! Shared by the `retry` program's black-box tests: the binary, how every
//! program is started (signal dispositions reset), a real pseudo-terminal
//! running an interactive shell, and the check that a run left no process
//! behind.
#![allow(dead_code, unsafe_code, clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// The `retry` binary under test. `RETRY_BINARY` names another build instead
/// (used to check that a test fails on the build before a fix).
pub(crate) fn retry() -> String {
    std::env::var("RETRY_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_retry").to_owned())
}

/// Puts every signal's disposition back to its default and unblocks them all,
/// in a child between fork and exec. A test binary started from a script's
/// background job or under `nohup` has SIGINT and SIGQUIT (or SIGHUP) ignored,
/// and a child inherits that: the programs the tests start must see the
/// defaults a user's terminal gives them, however the tests were started.
fn reset_signals(command: &mut Command) {
    // SAFETY: between fork and exec the closure only calls signal(2) and
    // sigprocmask(2), both async-signal-safe, on locals; it allocates nothing.
    unsafe {
        command.pre_exec(|| {
            for signal in 1..32 {
                if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
            let mut none: libc::sigset_t = core::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, core::ptr::null_mut());
            Ok(())
        });
    }
}

/// `program`, to be started with default signal dispositions, in a session of
/// its own and so without a controlling terminal, as under cron or CI: the
/// same for every run of the tests, whether `cargo test` was started from a
/// terminal or not. (The tests of a terminal use [`Terminal`].)
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    reset_signals(&mut command);
    // SAFETY: setsid(2) is async-signal-safe; it fails only for a group
    // leader, which a freshly forked child is not.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    command
}

/// `program`, to be started with default signal dispositions in a process
/// group of its own within the tests' session (as a shell with job control
/// starts a job): its group is not orphaned, so a stop signal stops it.
pub(crate) fn command_in_group(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    reset_signals(&mut command);
    command.process_group(0);
    command
}

/// Whether the tests run as root.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether any process of group `group` is alive.
pub(crate) fn group_alive(group: i32) -> bool {
    // SAFETY: kill with signal 0 only checks; a negative pid names a group.
    group > 1 && unsafe { libc::kill(-group, 0) } == 0
}

/// Whether process `pid` is alive (a zombie is not).
pub(crate) fn process_alive(pid: i32) -> bool {
    pid > 1 && !matches!(process_state(pid), None | Some('Z' | 'X'))
}

/// Asserts that the processes are gone, and the process groups they lead
/// (waiting up to 2 s for the kernel to finish).
pub(crate) fn assert_groups_gone(pids: &[i32]) {
    let until = Instant::now() + Duration::from_secs(2);
    for &pid in pids {
        while (group_alive(pid) || process_alive(pid)) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!process_alive(pid), "process {pid} was left behind");
        assert!(!group_alive(pid), "process group {pid} was left behind");
    }
}

/// Asserts that the processes are gone (waiting up to 2 s).
pub(crate) fn assert_gone(pids: &[i32]) {
    let until = Instant::now() + Duration::from_secs(2);
    for &pid in pids {
        while process_alive(pid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !process_alive(pid),
            "process {pid} ({:?}) was left behind",
            std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap_or_default()
        );
    }
}

/// The process ids written one per line to `path` (none if it is missing).
pub(crate) fn pids_in(path: &Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The JSON events in `path` (one object per line; every line must parse).
pub(crate) fn events(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
        })
        .collect()
}

/// The command process ids named by `attempt_end` events (each is its group's id).
pub(crate) fn attempt_groups(events: &[serde_json::Value]) -> Vec<i32> {
    events
        .iter()
        .filter(|e| e["event"] == "attempt_end")
        .filter_map(|e| e["pid"].as_i64())
        .map(|pid| i32::try_from(pid).unwrap())
        .collect()
}

/// The state letter of a process (`R`, `S`, `T`, `Z`), if it exists.
pub(crate) fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) STATE ...: the state follows the last ')'.
    stat.rsplit(')').next()?.trim_start().chars().next()
}

/// Reads a pid a command wrote to `path`, waiting up to 10 s for it.
pub(crate) fn read_pid(path: &Path) -> i32 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(Instant::now() < until, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An interactive shell on a real pseudo-terminal, as a user's terminal
/// emulator runs it: its own session, the terminal as its controlling terminal,
/// job control on.
pub(crate) struct Terminal {
    master: File,
    bash: Child,
    /// dash's start-up file (it takes its prompt from there, not from PS1).
    _rc: Option<tempfile::NamedTempFile>,
    seen: Vec<u8>,
    /// Bytes of `seen` already matched by `expect`.
    consumed: usize,
}

/// The prompt the test's bash prints.
pub(crate) const PROMPT: &str = "PROMPT> ";

impl Terminal {
    /// Starts `bash --norc -i` on a fresh pseudo-terminal, with `env` added.
    pub(crate) fn bash(env: &[(&str, &str)]) -> Terminal {
        Terminal::shell(&["bash", "--norc", "--noprofile", "-i"], env)
    }

    /// Starts `dash -i` on a fresh pseudo-terminal, with `env` added.
    pub(crate) fn dash(env: &[(&str, &str)]) -> Terminal {
        let mut rc = tempfile::NamedTempFile::new().unwrap();
        writeln!(rc, "PS1='{PROMPT}'").unwrap();
        let path = rc.path().to_str().unwrap().to_owned();
        let mut env = env.to_vec();
        env.push(("ENV", &path));
        let mut terminal = Terminal::shell(&["dash", "-i"], &env);
        terminal._rc = Some(rc);
        terminal
    }

    /// Starts the interactive shell named `name` (`bash` or `dash`).
    pub(crate) fn named(name: &str, env: &[(&str, &str)]) -> Terminal {
        match name {
            "dash" => Terminal::dash(env),
            _ => Terminal::bash(env),
        }
    }

    /// Starts the interactive shell `argv` on a fresh pseudo-terminal, with
    /// `env` added (`TERM` is `dumb` unless `env` says otherwise).
    pub(crate) fn shell(argv: &[&str], env: &[(&str, &str)]) -> Terminal {
        let (mut master, mut slave) = (-1, -1);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty fills two ints; a null name and termios are allowed.
        let ok = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                core::ptr::null_mut(),
                core::ptr::null(),
                &size,
            )
        };
        assert_eq!(ok, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: openpty succeeded; both descriptors are ours.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut command = Command::new(argv[0]);
        reset_signals(&mut command);
        command
            .args(&argv[1..])
            .env("PS1", PROMPT)
            .env("TERM", "dumb")
            .env_remove("PROMPT_COMMAND")
            .envs(env.iter().copied())
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe; the closure allocates
        // nothing. The new session takes the pseudo-terminal (now stdin) as its
        // controlling terminal, as a terminal emulator's shell does.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let bash = command.spawn().expect("the shell runs");
        let master = File::from(master);
        let mut terminal = Terminal {
            master,
            bash,
            _rc: None,
            seen: Vec::new(),
            consumed: 0,
        };
        terminal.expect(PROMPT, Duration::from_secs(10));
        terminal
    }

    /// The shell's process id (its group's and session's id too).
    pub(crate) fn shell_pid(&self) -> i32 {
        i32::try_from(self.bash.id()).unwrap()
    }

    /// The terminal's foreground process group.
    pub(crate) fn foreground_group(&self) -> i32 {
        // SAFETY: tcgetpgrp on the master reports the slave's foreground group.
        unsafe { libc::tcgetpgrp(self.master.as_raw_fd()) }
    }

    /// Everything the terminal showed so far.
    pub(crate) fn seen(&self) -> &[u8] {
        &self.seen
    }

    /// Types `text`.
    pub(crate) fn send(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
    }

    /// Types a line.
    pub(crate) fn line(&mut self, text: &str) {
        self.send(text);
        self.send("\n");
    }

    /// Reads what the terminal shows for up to `wait`.
    fn pump(&mut self, wait: Duration) {
        let mut fds = [libc::pollfd {
            fd: self.master.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one initialised pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
        if n > 0 {
            let mut chunk = [0u8; 4096];
            if let Ok(got) = self.master.read(&mut chunk) {
                self.seen.extend_from_slice(&chunk[..got]);
            }
        }
    }

    /// Waits until the terminal shows `needle` (after what earlier calls
    /// matched) and returns the text up to it. Panics with the transcript when
    /// it does not come within `timeout`.
    pub(crate) fn expect(&mut self, needle: &str, timeout: Duration) -> String {
        let until = Instant::now() + timeout;
        loop {
            let fresh = String::from_utf8_lossy(&self.seen[self.consumed..]).into_owned();
            if let Some(at) = fresh.find(needle) {
                let upto = fresh[..at + needle.len()].to_owned();
                self.consumed += upto.len();
                return upto;
            }
            let now = Instant::now();
            assert!(
                now < until,
                "the terminal did not show {needle:?} within {timeout:?}; it shows:\n{}",
                String::from_utf8_lossy(&self.seen)
            );
            self.pump(until - now);
        }
    }

    /// Waits for `needle` not to appear for `wait`; panics if it does.
    pub(crate) fn expect_quiet(&mut self, needle: &str, wait: Duration) {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            self.pump(until - Instant::now());
            let fresh = String::from_utf8_lossy(&self.seen[self.consumed..]);
            assert!(
                !fresh.contains(needle),
                "the terminal showed {needle:?}:\n{}",
                String::from_utf8_lossy(&self.seen)
            );
        }
    }

    /// Runs `command` in bash and returns its exit status, read from an
    /// `echo` after it (waits up to `timeout`).
    pub(crate) fn status_of(&mut self, command: &str, timeout: Duration) -> i32 {
        self.run(command);
        self.status(timeout)
    }

    /// Types `command` followed by an `echo` of its status; read it with
    /// [`Terminal::status`].
    pub(crate) fn run(&mut self, command: &str) {
        // The echoed command line shows `st""atus`, the output `status`: only
        // the output matches.
        self.line(&format!("{command}; echo \"st\"\"atus=$?.\""));
    }

    /// The status of the last command, asked on a line of its own (after a job
    /// killed by SIGINT bash drops the rest of its line).
    pub(crate) fn last_status(&mut self, timeout: Duration) -> i32 {
        let _ = self.expect(PROMPT, timeout);
        self.line("echo \"st\"\"atus=$?.\"");
        self.status(timeout)
    }

    /// The status printed by the `echo` of [`Terminal::run`].
    pub(crate) fn status(&mut self, timeout: Duration) -> i32 {
        let _ = self.expect("status=", timeout);
        let digits = self.expect(".", Duration::from_secs(5));
        let _ = self.expect(PROMPT, Duration::from_secs(5));
        digits
            .trim_end_matches('.')
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no status in {digits:?}"))
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.bash.kill();
        let _ = self.bash.wait();
    }
}

/// Sends `signal` to process `pid`.
pub(crate) fn send_signal(pid: i32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    let sent = unsafe { libc::kill(pid, signal) };
    assert_eq!(sent, 0, "kill {pid}: {}", std::io::Error::last_os_error());
}
