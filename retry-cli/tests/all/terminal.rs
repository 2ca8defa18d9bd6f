//! The `retry` program under a real pseudo-terminal, driven as a user drives
//! it: an interactive bash with job control, keys typed (Ctrl-C, Ctrl-Z), `fg`.
//! Each test checks the exit status, what the terminal shows, who has the
//! terminal afterwards (bash), and that no process of the run is left behind.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use core::time::Duration;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use common::{assert_groups_gone, process_state, read_pid, retry, send_signal, Terminal, PROMPT};

const LONG: Duration = Duration::from_secs(15);

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// An interactive bash with `$RETRY` and `$DIR` set.
fn bash(dir: &Path) -> Terminal {
    Terminal::bash(&[("RETRY", &retry()), ("DIR", dir.to_str().unwrap())])
}

/// Waits up to 5 s for `check`.
fn eventually(what: &str, check: impl Fn() -> bool) {
    eventually_or(|| what.to_owned(), check);
}

/// Waits up to 5 s for `check`; `what` says what was awaited, and how things
/// stand, when it never comes.
fn eventually_or(what: impl Fn() -> String, check: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !check() {
        assert!(Instant::now() < until, "never: {}", what());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process's parent.
fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit(')').next().unwrap();
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_command_reading_the_terminal_gets_it() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    t.run("\"$RETRY\" --attempts 1 -- sh -c 'echo $$ > \"$DIR/pid\"; read x; echo \"got=$x\"'");
    let pid = read_pid(&dir.path().join("pid"));
    // The command's group is the terminal's foreground group while it runs.
    eventually("the command has the terminal", || {
        t.foreground_group() == pid
    });
    t.line("hello");
    t.expect("got=hello", LONG);
    assert_eq!(t.status(LONG), 0);
    assert_eq!(
        t.foreground_group(),
        shell,
        "bash did not get its terminal back"
    );
    assert_groups_gone(&[pid]);
}

#[test]
fn the_issue_reproduction_under_script_completes() {
    let mut child = Command::new("script")
        .arg("-qec")
        .arg(format!(
            "{} --attempts 1 -- sh -c 'read x; echo got=$x'",
            retry()
        ))
        .arg("/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"hello\n").unwrap();
    let until = Instant::now() + LONG;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("retry hung on a command that reads the terminal");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(status.code(), Some(0), "{shown}");
    assert!(shown.contains("got=hello"), "{shown}");
}

#[test]
fn stty_in_a_command_does_not_hang() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    t.run("\"$RETRY\" --attempts 1 -- sh -c 'echo $$ > \"$DIR/pid\"; stty -echo; stty echo; echo \"stty=ok$((1+1))\"'");
    t.expect("stty=ok2", LONG);
    assert_eq!(t.status(LONG), 0);
    assert_eq!(t.foreground_group(), shell);
    assert_groups_gone(&[read_pid(&dir.path().join("pid"))]);
}

#[test]
fn the_terminal_modes_come_back_after_a_killed_attempt() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    // A password prompt turns echo off and is killed by its timeout.
    let status = t.status_of(
        "\"$RETRY\" --attempts 1 --timeout 500ms --kill-after 100ms -- sh -c 'echo $$ > \"$DIR/pid\"; stty -echo; sleep 10'",
        LONG,
    );
    assert_eq!(status, 124);
    assert_eq!(t.foreground_group(), shell);
    t.line("echo \"mode=$(stty -a | tr ' ;' '\\n\\n' | grep -x -e echo -e -echo).\"");
    t.expect("mode=echo.", LONG);
    assert_groups_gone(&[read_pid(&dir.path().join("pid"))]);
}

#[test]
fn ctrl_z_stops_the_command_with_retry_and_fg_continues_both() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    // 2 s of work under a 4 s timeout; stopped for 3 s in between, which must
    // not count as a hang. (The work is started before the marker: a shell
    // stopped inside vfork(2), before its child's exec, cannot report the stop
    // to anyone, retry or bash.)
    t.line(
        "\"$RETRY\" --attempts 1 --timeout 4s -- sh -c 'echo $$ > \"$DIR/pid\"; sleep 2 & echo \"be\"\"gun\"; wait $!; echo \"fin\"\"ished\"'",
    );
    t.expect("begun", LONG);
    let pid = read_pid(&dir.path().join("pid"));
    let retry_pid = parent_of(pid);
    t.send("\x1a"); // Ctrl-Z
    let states = || {
        format!(
            "command {:?}, retry {:?}, foreground {} (command {pid}, retry {retry_pid})",
            process_state(pid),
            process_state(retry_pid),
            t.foreground_group()
        )
    };
    eventually_or(
        || format!("the command is stopped: {}", states()),
        || process_state(pid) == Some('T'),
    );
    eventually("retry is stopped", || process_state(retry_pid) == Some('T'));
    t.expect("Stopped", LONG);
    t.expect(PROMPT, LONG);
    assert_eq!(
        t.foreground_group(),
        shell,
        "bash has the terminal while the job is stopped"
    );
    t.expect_quiet("finished", Duration::from_secs(3));
    assert_eq!(process_state(pid), Some('T'));
    // fg: bash continues retry, retry continues the command and hands it the
    // terminal again; the command ends normally, within its timeout.
    t.run("fg");
    t.expect("finished", LONG);
    assert_eq!(t.status(LONG), 0);
    assert_eq!(t.foreground_group(), shell);
    assert_groups_gone(&[pid]);
}

#[test]
fn ctrl_z_while_retry_sleeps_stops_retry_and_fg_resumes_the_schedule() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    t.line("\"$RETRY\" --attempts 2 --delay 2s --jitter none -- sh -c 'echo $$ >> \"$DIR/pids\"; echo \"try\"\"-$RETRY_ATTEMPT\"; exit 3'");
    t.expect("try-1", LONG);
    std::thread::sleep(Duration::from_millis(200));
    t.send("\x1a");
    t.expect("Stopped", LONG);
    t.expect(PROMPT, LONG);
    t.expect_quiet("try-2", Duration::from_secs(3));
    t.run("fg");
    t.expect("try-2", LONG);
    assert_eq!(t.status(LONG), 3);
    assert_eq!(t.foreground_group(), shell);
    let pids: Vec<i32> = std::fs::read_to_string(dir.path().join("pids"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 2);
    assert_groups_gone(&pids);
}

#[test]
fn ctrl_c_ends_the_command_and_retry_without_a_retry() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    t.line("\"$RETRY\" --attempts 3 --delay 10ms -- sh -c 'echo $$ >> \"$DIR/pids\"; echo \"re\"\"ady\"; exec sleep 30'");
    t.expect("ready", LONG);
    let pid = read_pid(&dir.path().join("pids"));
    eventually("the command has the terminal", || {
        t.foreground_group() == pid
    });
    t.send("\x03"); // Ctrl-C
                    // retry dies of SIGINT as the command did: bash drops the rest of the line.
    assert_eq!(t.last_status(LONG), 130);
    assert_eq!(t.foreground_group(), shell);
    let pids = std::fs::read_to_string(dir.path().join("pids")).unwrap();
    assert_eq!(pids.lines().count(), 1, "Ctrl-C was retried");
    assert_groups_gone(&[pid]);
}

#[test]
fn signals_sent_to_retry_give_the_terminal_back() {
    for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
        let dir = tmp();
        let mut t = bash(dir.path());
        let shell = t.shell_pid();
        t.line("\"$RETRY\" --attempts 3 -- sh -c 'echo $$ > \"$DIR/pid\"; echo \"re\"\"ady\"; exec sleep 30'");
        t.expect("ready", LONG);
        let pid = read_pid(&dir.path().join("pid"));
        let retry_pid = parent_of(pid);
        eventually("the command has the terminal", || {
            t.foreground_group() == pid
        });
        send_signal(retry_pid, signal);
        assert_eq!(t.last_status(LONG), 128 + signal, "signal {signal}");
        assert_eq!(t.foreground_group(), shell, "signal {signal}");
        assert_groups_gone(&[pid]);
        // The terminal works as before.
        assert_eq!(t.status_of("true", LONG), 0);
    }
}
