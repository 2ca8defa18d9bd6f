//! The `retry` program under a real pseudo-terminal, driven as a user drives
//! it: an interactive bash or dash with job control, keys typed (Ctrl-C,
//! Ctrl-Z, Ctrl-D), `fg`, pagers and scripts. With a terminal, `retry` runs each
//! attempt in the job's own process group (as `timeout --foreground` does):
//! each test checks the exit status, what the terminal shows, that the shell
//! has its terminal afterwards, and that no process of the run is left behind.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use core::time::Duration;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use common::{
    assert_gone, assert_groups_gone, pids_in, process_state, read_pid, retry, send_signal,
    Terminal, PROMPT,
};

const LONG: Duration = Duration::from_secs(15);

/// The interactive shells the tests run under: bash, and dash where it is
/// installed (Debian's and Ubuntu's /bin/sh; a machine without it says so).
fn shells() -> Vec<&'static str> {
    let dash = common::command("dash")
        .args(["-c", "exit 0"])
        .status()
        .is_ok_and(|s| s.success());
    if dash {
        vec!["bash", "dash"]
    } else {
        println!("SKIPPED the dash half: dash is not installed");
        vec!["bash"]
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// An interactive bash with `$RETRY` and `$DIR` set.
fn bash(dir: &Path) -> Terminal {
    shell("bash", dir, &[])
}

/// The interactive shell `name` with `$RETRY` and `$DIR` set, and `extra`.
fn shell(name: &str, dir: &Path, extra: &[(&str, &str)]) -> Terminal {
    let retry = retry();
    let mut env = vec![("RETRY", retry.as_str()), ("DIR", dir.to_str().unwrap())];
    env.extend_from_slice(extra);
    Terminal::named(name, &env)
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
    stat_field(pid, 1)
}

/// A process's group.
fn group_of(pid: i32) -> i32 {
    stat_field(pid, 2)
}

/// Field `n` (0: the state) after the name in `/proc/<pid>/stat`.
fn stat_field(pid: i32, n: usize) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit(')').next().unwrap();
    rest.split_whitespace().nth(n).unwrap().parse().unwrap()
}

/// Waits until `pid` is blocked waiting for a child (`wait4`). A shell that
/// gets SIGINT before it reaches its wait for the foreground command (it just
/// forked it, and the command ran first on a busy machine) dies of it at
/// once, by design of bash; a key typed after that point shows what the test
/// is about.
fn wait_until_waiting(pid: i32) {
    let wchan = || std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
    if !wchan().chars().any(|c| c.is_ascii_alphabetic()) {
        // A kernel that does not name where a process sleeps: give the
        // shell time to get there.
        std::thread::sleep(Duration::from_millis(300));
        return;
    }
    eventually_or(
        || {
            format!(
                "{pid} waits for its child; its wchan is {:?}",
                std::fs::read_to_string(format!("/proc/{pid}/wchan"))
            )
        },
        || std::fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w == "do_wait"),
    );
}

/// Writes `text` to `dir/name` and returns its path.
fn script(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_command_reading_the_terminal_gets_it_in_the_jobs_group() {
    for name in shells() {
        let dir = tmp();
        let mut t = shell(name, dir.path(), &[]);
        let shell_pid = t.shell_pid();
        t.run("\"$RETRY\" --attempts 1 -- sh -c 'echo $$ > \"$DIR/pid\"; read x; echo \"got=$x\"'");
        let pid = read_pid(&dir.path().join("pid"));
        let retry_pid = parent_of(pid);
        // The command stays in retry's group, the job the shell put in the
        // foreground: nobody hands the terminal around.
        assert_eq!(group_of(pid), group_of(retry_pid), "{name}");
        eventually("the job has the terminal", || {
            t.foreground_group() == group_of(retry_pid)
        });
        t.line("hello");
        t.expect("got=hello", LONG);
        assert_eq!(t.status(LONG), 0, "{name}");
        assert_eq!(
            t.foreground_group(),
            shell_pid,
            "{name} did not get its terminal back"
        );
        assert_gone(&[pid, retry_pid]);
    }
}

#[test]
fn the_issue_reproduction_under_script_completes() {
    let mut child = common::command("script")
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
    assert_gone(&[read_pid(&dir.path().join("pid"))]);
}

#[test]
fn the_terminal_modes_come_back_after_a_killed_attempt() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    // A password prompt turns echo off and is killed by its timeout.
    let status = t.status_of(
        "\"$RETRY\" --attempts 1 --timeout 300ms --kill-after 100ms -- sh -c 'echo $$ > \"$DIR/pid\"; stty -echo; sleep 10'",
        LONG,
    );
    assert_eq!(status, 124);
    assert_eq!(t.foreground_group(), shell);
    t.line("echo \"mode=$(stty -a | tr ' ;' '\\n\\n' | grep -x -e echo -e -echo).\"");
    t.expect("mode=echo.", LONG);
    assert_gone(&[read_pid(&dir.path().join("pid"))]);
}

/// `retry … | less`: the pager in the same pipeline keeps the terminal while
/// the command runs (issue 29, defect 1). Before, the attempt took the
/// terminal for a group of its own, `less` got SIGTTOU and the job stopped.
#[test]
fn a_pager_in_the_pipeline_keeps_the_terminal_and_the_job_runs_to_the_end() {
    let pager = if common::command("less")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        "less"
    } else {
        // No `less` on this machine: a pager's terminal calls, by hand
        // (cbreak mode, then a key read from the terminal).
        "sh -c 'stty -icanon min 1; cat; dd bs=1 count=1 </dev/tty 2>/dev/null; stty icanon'"
    };
    for name in shells() {
        let dir = tmp();
        let mut t = shell(name, dir.path(), &[("TERM", "vt100"), ("LESS", "")]);
        let shell_pid = t.shell_pid();
        t.line(&format!(
            "\"$RETRY\" -n 1 -- sh -c 'echo $$ > \"$DIR/pid\"; seq 1 1000; sleep 0.5; echo $$ > \"$DIR/finished\"' | {pager}; echo \"st\"\"atus=$?.\""
        ));
        let pid = read_pid(&dir.path().join("pid"));
        let retry_pid = parent_of(pid);
        // The command runs to its end while the pager shows its output; the
        // job never stops.
        let finished = dir.path().join("finished");
        let until = Instant::now() + LONG;
        while !finished.exists() {
            assert!(Instant::now() < until, "{name}: the command never finished");
            t.expect_quiet("Stopped", Duration::from_millis(100));
        }
        t.expect_quiet("Stopped", Duration::from_millis(300));
        assert_gone(&[pid, retry_pid]);
        t.send("q");
        assert_eq!(t.status(LONG), 0, "{name}");
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
    }
}

/// `cat | retry …`: a producer reading the terminal in the same pipeline
/// keeps reading it; the typed lines reach the command.
#[test]
fn cat_piped_into_retry_reads_the_terminal() {
    for name in shells() {
        let dir = tmp();
        let mut t = shell(name, dir.path(), &[]);
        let shell_pid = t.shell_pid();
        t.line("cat | \"$RETRY\" -n 1 -- sh -c 'echo $$ > \"$DIR/pid\"; echo \"lines=$(wc -l)\"'; echo \"st\"\"atus=$?.\"");
        let pid = read_pid(&dir.path().join("pid"));
        t.line("one");
        t.line("two");
        t.line("three");
        t.send("\x04"); // Ctrl-D: end of input for cat
        t.expect("lines=3", LONG);
        assert_eq!(t.status(LONG), 0, "{name}");
        assert!(
            !String::from_utf8_lossy(t.seen()).contains("Stopped"),
            "{name}: the job stopped"
        );
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
        assert_gone(&[pid]);
    }
}

/// Ctrl-C in a script's loop of `retry` calls ends the loop (issue 29,
/// defect 2): the script's shell, `retry` and the command all get the
/// terminal's SIGINT; `retry` dies of it, and so does the script.
#[test]
fn ctrl_c_in_a_scripts_loop_of_retry_calls_ends_the_loop() {
    for name in shells() {
        let dir = tmp();
        let path = script(
            dir.path(),
            "loop.sh",
            "for i in 1 2 3; do\n\
             \x20 \"$RETRY\" -n 2 -d 10ms -- sh -c 'echo $$ >> \"$DIR/pids\"; echo \"ready-$0\"; read x' \"$i\"\n\
             \x20 echo \"after-$i\"\n\
             done\n\
             echo loop-done\n",
        );
        let mut t = shell(name, dir.path(), &[]);
        let shell_pid = t.shell_pid();
        t.line(&format!("{name} {path}"));
        t.expect("ready-1", LONG);
        let pid = read_pid(&dir.path().join("pids"));
        let retry_pid = parent_of(pid);
        let script_pid = parent_of(retry_pid);
        wait_until_waiting(script_pid);
        t.send("\x03"); // Ctrl-C
        assert_eq!(t.last_status(LONG), 130, "{name}");
        let shown = String::from_utf8_lossy(t.seen()).into_owned();
        for never in ["after-1", "ready-2", "loop-done"] {
            assert!(!shown.contains(never), "{name} showed {never}:\n{shown}");
        }
        assert_eq!(pids_in(&dir.path().join("pids")), [pid], "{name}");
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
        assert_gone(&[pid, retry_pid, script_pid]);
    }
}

/// A command that exits 130 on Ctrl-C (it traps SIGINT) is not retried
/// (issue 29, defect 3): the key was typed at `retry`'s terminal, which
/// means stop, whatever the command's status.
#[test]
fn a_command_exiting_130_on_ctrl_c_is_not_retried() {
    for name in shells() {
        let dir = tmp();
        let path = script(
            dir.path(),
            "trap.sh",
            "\"$RETRY\" -n 3 -d 300ms -- sh -c 'echo $$ >> \"$DIR/pids\"; trap \"exit 130\" INT; echo ready; read x'\n\
             echo \"after=$?\"\n",
        );
        let mut t = shell(name, dir.path(), &[]);
        t.line(&format!("{name} {path}"));
        t.expect("ready", LONG);
        let pid = read_pid(&dir.path().join("pids"));
        let retry_pid = parent_of(pid);
        wait_until_waiting(parent_of(retry_pid));
        t.send("\x03");
        assert_eq!(t.last_status(LONG), 130, "{name}");
        let shown = String::from_utf8_lossy(t.seen()).into_owned();
        assert!(!shown.contains("next in"), "{name} retried:\n{shown}");
        assert!(
            !shown.contains("after="),
            "{name}: the script went on:\n{shown}"
        );
        // Past the delay (300 ms at most): a retry would have started.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(pids_in(&dir.path().join("pids")), [pid], "{name}");
        assert_gone(&[pid, retry_pid]);
    }
}

#[test]
fn ctrl_z_stops_the_command_with_retry_and_fg_continues_both() {
    for name in shells() {
        let dir = tmp();
        let mut t = shell(name, dir.path(), &[]);
        let shell_pid = t.shell_pid();
        // Half a second of work under a 1.3 s timeout; stopped for a second in
        // between, which must not count as a hang. (The work is started before the marker: a
        // shell stopped inside vfork(2), before its child's exec, cannot report
        // the stop to anyone.)
        t.line(
            "\"$RETRY\" --attempts 1 --timeout 1300ms -- sh -c 'echo $$ > \"$DIR/pid\"; sleep 0.5 & echo \"be\"\"gun\"; wait $!; echo \"fin\"\"ished\"'",
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
            || format!("{name}: the command is stopped: {}", states()),
            || process_state(pid) == Some('T'),
        );
        eventually("retry is stopped", || process_state(retry_pid) == Some('T'));
        t.expect("Stopped", LONG);
        t.expect(PROMPT, LONG);
        assert_eq!(
            t.foreground_group(),
            shell_pid,
            "{name} has the terminal while the job is stopped"
        );
        t.expect_quiet("finished", Duration::from_secs(1));
        assert_eq!(process_state(pid), Some('T'));
        // fg: the shell continues the job, retry and the command together; the
        // command ends normally, within its timeout.
        t.run("fg");
        t.expect("finished", LONG);
        assert_eq!(t.status(LONG), 0, "{name}");
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
        assert_gone(&[pid, retry_pid]);
    }
}

#[test]
fn ctrl_z_while_retry_sleeps_stops_retry_and_fg_resumes_the_schedule() {
    let dir = tmp();
    let mut t = bash(dir.path());
    let shell = t.shell_pid();
    t.line("\"$RETRY\" --attempts 2 --delay 600ms --jitter none -- sh -c 'echo $$ >> \"$DIR/pids\"; echo \"try\"\"-$RETRY_ATTEMPT\"; exit 3'");
    t.expect("try-1", LONG);
    std::thread::sleep(Duration::from_millis(100));
    t.send("\x1a");
    t.expect("Stopped", LONG);
    t.expect(PROMPT, LONG);
    // Longer than the delay: a retry that went on sleeping would show it.
    t.expect_quiet("try-2", Duration::from_secs(1));
    t.run("fg");
    t.expect("try-2", LONG);
    assert_eq!(t.status(LONG), 3);
    assert_eq!(t.foreground_group(), shell);
    let pids = pids_in(&dir.path().join("pids"));
    assert_eq!(pids.len(), 2);
    assert_gone(&pids);
}

#[test]
fn ctrl_c_ends_the_command_and_retry_without_a_retry() {
    for name in shells() {
        let dir = tmp();
        let mut t = shell(name, dir.path(), &[]);
        let shell_pid = t.shell_pid();
        t.line("\"$RETRY\" --attempts 3 --delay 10ms -- sh -c 'echo $$ >> \"$DIR/pids\"; echo \"re\"\"ady\"; exec sleep 30'");
        t.expect("ready", LONG);
        let pid = read_pid(&dir.path().join("pids"));
        let retry_pid = parent_of(pid);
        t.send("\x03"); // Ctrl-C
                        // retry dies of SIGINT: the shell drops the rest of the line.
        assert_eq!(t.last_status(LONG), 130, "{name}");
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
        assert_eq!(
            pids_in(&dir.path().join("pids")),
            [pid],
            "{name}: Ctrl-C was retried"
        );
        assert_gone(&[pid, retry_pid]);
    }
}

#[test]
fn signals_sent_to_retry_end_the_job_and_leave_the_terminal_to_the_shell() {
    for signal in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT] {
        let dir = tmp();
        let mut t = bash(dir.path());
        let shell = t.shell_pid();
        t.line("\"$RETRY\" --attempts 3 -- sh -c 'echo $$ > \"$DIR/pid\"; echo \"re\"\"ady\"; exec sleep 30'");
        t.expect("ready", LONG);
        let pid = read_pid(&dir.path().join("pid"));
        let retry_pid = parent_of(pid);
        send_signal(retry_pid, signal);
        assert_eq!(t.last_status(LONG), 128 + signal, "signal {signal}");
        assert_eq!(t.foreground_group(), shell, "signal {signal}");
        assert_gone(&[pid, retry_pid]);
        // The terminal works as before.
        assert_eq!(t.status_of("true", LONG), 0);
    }
}

/// The command's tree, grandchildren and a child that left for a session of
/// its own included, ends with a timeout, and with a TERM sent to `retry`,
/// although with a terminal no process group holds it.
#[test]
fn no_process_of_the_tree_is_left_after_a_timeout_or_a_term() {
    // The command, a child with a child of its own, a child in a session of
    // its own, and a child that ignores SIGTERM.
    let tree = "echo $$ >> \"$DIR/pids\"\n\
                sh -c 'sleep 30 & echo $! >> \"$DIR/pids\"; sleep 30' & echo $! >> \"$DIR/pids\"\n\
                setsid sleep 30 & echo $! >> \"$DIR/pids\"\n\
                (trap '' TERM; sleep 30) & echo $! >> \"$DIR/pids\"\n\
                echo \"started\"\n\
                wait\n";
    for name in shells() {
        // A timeout.
        let dir = tmp();
        script(dir.path(), "tree.sh", tree);
        let mut t = shell(name, dir.path(), &[]);
        let status = t.status_of(
            "\"$RETRY\" -n 1 --timeout 500ms --kill-after 200ms -- sh \"$DIR/tree.sh\"",
            LONG,
        );
        assert_eq!(status, 124, "{name}");
        let pids = pids_in(&dir.path().join("pids"));
        assert_eq!(pids.len(), 5, "{name}: {pids:?}");
        assert_gone(&pids);
        // A TERM sent to retry.
        let dir = tmp();
        script(dir.path(), "tree.sh", tree);
        let mut t = shell(name, dir.path(), &[]);
        t.line("\"$RETRY\" -n 3 -- sh \"$DIR/tree.sh\"");
        t.expect("started", LONG);
        eventually("every process of the tree started", || {
            pids_in(&dir.path().join("pids")).len() == 5
        });
        let pid = pids_in(&dir.path().join("pids"))[0];
        let retry_pid = parent_of(pid);
        send_signal(retry_pid, libc::SIGTERM);
        assert_eq!(t.last_status(LONG), 128 + libc::SIGTERM, "{name}");
        let mut pids = pids_in(&dir.path().join("pids"));
        pids.push(retry_pid);
        assert_gone(&pids);
        assert_groups_gone(&[pid]);
    }
}

/// With a terminal too (retry holds `/dev/tty` open), the command gets only
/// the descriptors its shell passed: not retry's terminal, not its events.
#[test]
fn the_command_gets_only_the_descriptors_its_shell_passed() {
    let dir = tmp();
    let mut t = bash(dir.path());
    assert_eq!(
        t.status_of(
            "sh -c 'ls /proc/$$/fd > \"$DIR/caller\"' 3>\"$DIR/other\"",
            LONG
        ),
        0
    );
    assert_eq!(
        t.status_of(
            "\"$RETRY\" -n 1 --events fd:3 -- sh -c 'ls /proc/$$/fd > \"$DIR/command\"' 3>\"$DIR/events\"",
            LONG
        ),
        0
    );
    let fds = |name: &str| -> Vec<i32> {
        let mut fds: Vec<i32> = std::fs::read_to_string(dir.path().join(name))
            .unwrap()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        fds.sort_unstable();
        fds
    };
    let mut expected = fds("caller");
    assert!(expected.contains(&3), "{expected:?}");
    expected.retain(|&fd| fd != 3);
    assert_eq!(fds("command"), expected);
    assert!(!std::fs::read_to_string(dir.path().join("events"))
        .unwrap()
        .is_empty());
}

/// `retry … &` and then `fg`: a command that reads the terminal in the
/// background stops with its job (the shell says so), and `fg` gives the
/// whole job the terminal, as for any job. retry hands nothing around.
#[test]
fn a_background_job_that_reads_the_terminal_stops_and_fg_brings_it_back() {
    for name in shells() {
        let dir = tmp();
        let mut t = shell(name, dir.path(), &[]);
        let shell_pid = t.shell_pid();
        t.line("\"$RETRY\" -n 1 -- sh -c 'echo $$ > \"$DIR/pid\"; read x; echo \"got=$x\"' &");
        let pid = read_pid(&dir.path().join("pid"));
        let retry_pid = parent_of(pid);
        eventually("the job stops for its read", || {
            process_state(pid) == Some('T') && process_state(retry_pid) == Some('T')
        });
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
        t.expect(PROMPT, LONG);
        t.line("fg");
        eventually("the job has the terminal", || {
            t.foreground_group() == group_of(retry_pid)
        });
        t.line("hello");
        t.expect("got=hello", LONG);
        assert_eq!(t.last_status(LONG), 0, "{name}");
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
        assert_gone(&[pid, retry_pid]);
    }
}

/// `retry --replay-stdin … &` reads the terminal from the background: the
/// kernel stops it (SIGTTIN) until `fg`, as it stops `cat &`. Before, retry
/// caught SIGTTIN and the kernel restarted its read at once: it spun on the
/// CPU in the background instead of stopping.
#[test]
fn retry_reading_the_terminal_in_the_background_stops_instead_of_spinning() {
    for name in shells() {
        let dir = tmp();
        let mut t = shell(name, dir.path(), &[]);
        let shell_pid = t.shell_pid();
        t.line("\"$RETRY\" --replay-stdin -n 1 -- sh -c 'echo $PPID > \"$DIR/retry\"; cat' & echo \"jo\"\"b=$!.\"");
        t.expect("job=", LONG);
        let retry_pid: i32 = t
            .expect(".", LONG)
            .trim_end_matches('.')
            .trim()
            .parse()
            .unwrap();
        eventually_or(
            || {
                format!(
                    "{name}: retry is stopped, not {:?}",
                    process_state(retry_pid)
                )
            },
            || process_state(retry_pid) == Some('T'),
        );
        t.expect(PROMPT, LONG);
        t.line("fg");
        eventually("the job has the terminal", || {
            t.foreground_group() == group_of(retry_pid)
        });
        t.line("replayed");
        t.send("\x04");
        t.expect("replayed\r\nreplayed", LONG);
        assert_eq!(t.last_status(LONG), 0, "{name}");
        assert_eq!(read_pid(&dir.path().join("retry")), retry_pid);
        assert_eq!(t.foreground_group(), shell_pid, "{name}");
        assert_gone(&[retry_pid]);
    }
}
