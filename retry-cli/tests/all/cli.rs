//! The `retry` program, run for real on small `sh` scripts with tiny delays,
//! with pipes, a local HTTP server and curl, and JSON consumers. Every run made
//! through `retry_sh` also checks that no process of the run is left behind.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use common::{assert_groups_gone, attempt_groups, events, retry};

use core::time::Duration;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Instant;

/// `retry ARGS -- sh -c SCRIPT`, in `dir` (exported as `$DIR`), with tiny delays.
/// Unless the test asks for events itself, they go to `dir/events.jsonl`, every
/// line must parse, and every attempt's process group must be gone afterwards.
fn retry_sh(dir: &Path, args: &[&str], script: &str) -> Output {
    let own_events = args
        .iter()
        .any(|a| matches!(*a, "--json" | "--events" | "--dry-run"));
    let log = dir.join("events.jsonl");
    let mut command = common::command(retry());
    if !args.contains(&"--delays") {
        command.args(["--delay", "5ms", "--jitter", "none"]);
    }
    if !own_events {
        command.arg("--events").arg(&log);
    }
    let out = command
        .args(args)
        .args(["--", "sh", "-c", script])
        .env("DIR", dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("retry runs");
    if !own_events {
        let events = events(&log);
        assert!(
            events.first().is_some_and(|e| e["event"] == "start"),
            "{events:?}"
        );
        assert_groups_gone(&attempt_groups(&events));
    }
    out
}

fn attempts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("count"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Appends a line to `count`, then runs the rest.
fn counted(rest: &str) -> String {
    format!("echo x >> \"$DIR/count\"; {rest}")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn success_passes_stdout_through_and_says_nothing() {
    let dir = tmp();
    let out = retry_sh(dir.path(), &[], &counted("echo hello"));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"hello\n");
    assert_eq!(stderr(&out), "");
    assert_eq!(attempts(dir.path()), 1);
}

#[test]
fn a_failure_is_retried_until_success() {
    let dir = tmp();
    let script = counted("[ $(wc -l < \"$DIR/count\") -ge 3 ] || exit 1; echo done");
    let out = retry_sh(dir.path(), &[], &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"done\n");
    assert_eq!(attempts(dir.path()), 3);
    let err = stderr(&out);
    assert!(err.contains("retry: attempt 1/5 exited 1 after"), "{err}");
    assert!(err.contains("next in 5ms"), "{err}");
    assert!(err.contains("succeeded on attempt 3/5"), "{err}");
}

#[test]
fn exhaustion_returns_the_last_attempts_code() {
    let dir = tmp();
    let out = retry_sh(dir.path(), &["--attempts", "3"], &counted("exit 3"));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(attempts(dir.path()), 3);
    let dir = tmp();
    let out = retry_sh(dir.path(), &["--retries", "1"], &counted("exit 9"));
    assert_eq!(out.status.code(), Some(9));
    assert_eq!(attempts(dir.path()), 2);
}

#[test]
fn exit_75_is_always_retried() {
    let dir = tmp();
    let out = retry_sh(dir.path(), &["--attempts", "3"], &counted("exit 75"));
    assert_eq!(out.status.code(), Some(75));
    assert_eq!(attempts(dir.path()), 3);
}

#[test]
fn usage_data_permission_config_and_shell_codes_are_not_retried() {
    for code in [64, 65, 77, 78, 126, 127] {
        let dir = tmp();
        let out = retry_sh(dir.path(), &[], &counted(&format!("exit {code}")));
        assert_eq!(out.status.code(), Some(code));
        assert_eq!(attempts(dir.path()), 1, "exit {code} was retried");
    }
}

#[test]
fn retry_on_replaces_the_defaults() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--retry-on", "3,10-12", "--attempts", "3"],
        &counted("exit 11"),
    );
    assert_eq!(out.status.code(), Some(11));
    assert_eq!(attempts(dir.path()), 3);
    let dir = tmp();
    let out = retry_sh(dir.path(), &["--retry-on", "3"], &counted("exit 1"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(attempts(dir.path()), 1);
}

#[test]
fn stop_on_replaces_the_defaults() {
    let dir = tmp();
    let out = retry_sh(dir.path(), &["--stop-on", "1"], &counted("exit 1"));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(attempts(dir.path()), 1);
    // 78 is no longer special once --stop-on is given.
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--stop-on", "1", "--attempts", "2"],
        &counted("exit 78"),
    );
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(attempts(dir.path()), 2);
}

#[test]
fn stop_wins_over_retry() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--retry-on", "5", "--stop-on", "5"],
        &counted("exit 5"),
    );
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(attempts(dir.path()), 1);
}

#[test]
fn a_missing_command_is_127_and_not_retried() {
    let dir = tmp();
    let out = common::command(retry())
        .args(["--delay", "5ms", "--", "/nonexistent/definitely-not-here"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    let err = stderr(&out);
    assert!(err.contains("was not found"), "{err}");
    assert_eq!(err.matches("attempt 1/5").count(), 1, "{err}");
    assert!(!err.contains("attempt 2/"), "{err}");
    let _ = dir;
}

#[test]
fn a_non_executable_command_is_126_and_not_retried() {
    let dir = tmp();
    let path = dir.path().join("script");
    std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
    let out = common::command(retry())
        .args(["--delay", "5ms", "--"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(!stderr(&out).contains("attempt 2/"), "{}", stderr(&out));
}

#[test]
fn death_by_signal_is_128_plus_n_and_retried() {
    let dir = tmp();
    let out = retry_sh(dir.path(), &["--attempts", "2"], &counted("kill -USR1 $$"));
    assert_eq!(out.status.code(), Some(128 + 10));
    assert_eq!(attempts(dir.path()), 2);
    assert!(stderr(&out).contains("died of SIGUSR1"), "{}", stderr(&out));
}

#[test]
fn a_child_killed_by_sigint_is_not_retried() {
    let dir = tmp();
    let out = retry_sh(dir.path(), &[], &counted("kill -INT $$"));
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(attempts(dir.path()), 1);
    // Named in --retry-on, it is.
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--retry-on", "SIGINT", "--attempts", "2"],
        &counted("kill -INT $$"),
    );
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(attempts(dir.path()), 2);
}

#[test]
fn a_timeout_kills_a_child_that_ignores_sigterm() {
    let dir = tmp();
    let began = Instant::now();
    let out = retry_sh(
        dir.path(),
        &[
            "--timeout",
            "150ms",
            "--kill-after",
            "100ms",
            "--attempts",
            "2",
        ],
        &counted("trap '' TERM; sleep 5; sleep 5"),
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert_eq!(attempts(dir.path()), 2);
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    assert!(stderr(&out).contains("timed out"), "{}", stderr(&out));
}

#[test]
fn timeouts_can_be_stopped() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--timeout", "100ms", "--stop-on", "timeout"],
        &counted("sleep 5"),
    );
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(attempts(dir.path()), 1);
}

/// Whether `pid` is still a live (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

fn wait_for_file(path: &Path) -> String {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text;
            }
        }
        assert!(Instant::now() < until, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn send(pid: u32, signal: &str) {
    let status = common::command("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A command's tree: a child with a child of its own, a child in a session
/// of its own (out of the command's process group), a child that ignores
/// SIGTERM, and a daemon (double fork: its parent exits at once, so it is
/// adopted). Each appends its pid to `$DIR/pids`; prints `started`.
const TREE: &str = "echo $$ >> \"$DIR/pids\"\n\
    sh -c 'sleep 30 & echo $! >> \"$DIR/pids\"; sleep 30' & echo $! >> \"$DIR/pids\"\n\
    setsid sleep 30 & echo $! >> \"$DIR/pids\"\n\
    (trap '' TERM; sleep 30) & echo $! >> \"$DIR/pids\"\n\
    sh -c 'sleep 30 & echo $! >> \"$DIR/pids\"' \n\
    echo started\n\
    wait\n";

/// Without a terminal too, a timeout ends the whole tree of the attempt, not
/// only its process group.
#[test]
fn a_timeout_ends_every_process_of_the_tree() {
    let dir = tmp();
    std::fs::write(dir.path().join("tree.sh"), TREE).unwrap();
    let began = Instant::now();
    let out = common::command(retry())
        .args(["-n", "1", "--timeout", "500ms", "--kill-after", "200ms"])
        .args(["--", "sh", "tree.sh"])
        .env("DIR", dir.path())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(began.elapsed() < Duration::from_secs(5));
    let pids = pids(dir.path());
    assert_eq!(pids.len(), 6, "{pids:?}");
    common::assert_gone(&pids);
}

/// A TERM sent to retry ends the whole tree of the attempt.
#[test]
fn a_term_to_retry_ends_every_process_of_the_tree() {
    let dir = tmp();
    std::fs::write(dir.path().join("tree.sh"), TREE).unwrap();
    let mut child = common::command(retry())
        .args(["-n", "3", "--kill-after", "200ms", "--", "sh", "tree.sh"])
        .env("DIR", dir.path())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "started\n");
    let until = Instant::now() + Duration::from_secs(5);
    while pids(dir.path()).len() < 6 {
        assert!(Instant::now() < until, "{:?}", pids(dir.path()));
        std::thread::sleep(Duration::from_millis(10));
    }
    send(child.id(), "TERM");
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    common::assert_gone(&pids(dir.path()));
}

/// What an attempt leaves running when it ends normally (a server it
/// started) is not part of a later attempt's tree: a later timeout does not
/// end it. (retry adopts it, and lets it go when it exits.)
#[test]
fn what_an_earlier_attempt_left_running_survives_a_later_timeout() {
    let dir = tmp();
    let out = common::command(retry())
        .args([
            "-n",
            "2",
            "-d",
            "0",
            "--timeout",
            "300ms",
            "--kill-after",
            "100ms",
        ])
        .args(["--", "sh", "-c"])
        .arg(
            "if [ \"$RETRY_ATTEMPT\" = 1 ]; then \
               sh -c 'sleep 30 >/dev/null 2>&1 & echo $! > \"$DIR/server\"'; exit 1; \
             fi; echo $$ > \"$DIR/second\"; sleep 10",
        )
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    let server = common::read_pid(&dir.path().join("server"));
    assert!(
        common::process_alive(server),
        "the first attempt's server was ended"
    );
    common::assert_gone(&[common::read_pid(&dir.path().join("second"))]);
    common::send_signal(server, libc::SIGKILL);
}

#[test]
fn sigterm_is_forwarded_and_leaves_no_orphan() {
    let dir = tmp();
    let began = Instant::now();
    let child = common::command(retry())
        .args([
            "--delay",
            "5ms",
            "--",
            "sh",
            "-c",
            "sleep 30 & echo $! > \"$DIR/pid\"; wait",
        ])
        .env("DIR", dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let grandchild: u32 = wait_for_file(&dir.path().join("pid"))
        .trim()
        .parse()
        .unwrap();
    assert!(alive(grandchild));
    send(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGTERM),
        "{:?} {}",
        out.status,
        stderr(&out)
    );
    assert!(began.elapsed() < Duration::from_secs(5));
    let until = Instant::now() + Duration::from_secs(2);
    while alive(grandchild) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(grandchild), "the command's child outlived retry");
}

#[test]
fn a_signal_during_the_sleep_ends_retry_at_once() {
    let dir = tmp();
    let child = common::command(retry())
        .args(["--delay", "30s", "--jitter", "none", "--", "sh", "-c"])
        .arg(counted("echo >> \"$DIR/pid\"; exit 1"))
        .env("DIR", dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&dir.path().join("pid"));
    std::thread::sleep(Duration::from_millis(100));
    let began = Instant::now();
    send(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "{}", stderr(&out));
    assert!(began.elapsed() < Duration::from_secs(2));
    assert_eq!(attempts(dir.path()), 1);
}

#[test]
fn replayed_stdin_is_byte_identical_for_every_attempt() {
    let dir = tmp();
    let mut input: Vec<u8> = (0..=255u8).collect();
    input.extend_from_slice(b"\0\xff\xfe not utf-8 \xc3\x28\n");
    input.extend(core::iter::repeat_n(b'z', 100_000));
    let mut child = common::command(retry())
        .args([
            "--delay",
            "5ms",
            "--attempts",
            "3",
            "--replay-stdin",
            "--",
            "sh",
            "-c",
        ])
        .arg("cat > \"$DIR/in.$RETRY_ATTEMPT\"; exit 1")
        .env("DIR", dir.path())
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    for n in 1..=3 {
        let got = std::fs::read(dir.path().join(format!("in.{n}"))).unwrap();
        assert!(got == input, "attempt {n} saw {} bytes", got.len());
    }
}

#[test]
fn the_hint_file_sets_a_minimum_delay() {
    let dir = tmp();
    let began = Instant::now();
    let out = retry_sh(
        dir.path(),
        &["--delay", "1ms", "--attempts", "2"],
        &counted("echo retry-after=0.3 > \"$RETRY_HINT_FILE\"; exit 75"),
    );
    assert_eq!(out.status.code(), Some(75));
    assert_eq!(attempts(dir.path()), 2);
    assert!(began.elapsed() >= Duration::from_millis(300));
    assert!(
        stderr(&out).contains("next in 300ms as the command asked"),
        "{}",
        stderr(&out)
    );
}

/// A `Retry-After` HTTP-date names a whole second; the wait is measured from
/// the wall clock to the nanosecond, not from the start of the current second.
#[test]
fn an_http_date_in_the_hint_file_is_read_against_the_clock_to_the_nanosecond() {
    let dir = tmp();
    // The command waits until its clock is between .2 and .8 of a second, then
    // asks to wait until the next whole second: between 200 and 800 ms away.
    // Read in whole seconds, that date would be a full second away.
    let script = counted(
        "while :; do t=$(date +%s.%N); case ${t#*.} in [2-7]*) break;; esac; sleep 0.05; done; \
         LC_ALL=C date -u -d @$(( ${t%.*} + 1 )) '+Retry-After: %a, %d %b %Y %H:%M:%S GMT' \
           > \"$RETRY_HINT_FILE\"; \
         [ $(wc -l < \"$DIR/count\") -ge 2 ] || exit 75",
    );
    let (out, events) = retry_events(dir.path(), &["-n", "2", "--delay", "0"], &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let hint = named(&events, "hint");
    let asked = hint[0]["retry_after_ms"].as_u64().unwrap();
    assert!(
        (150..=800).contains(&asked),
        "a wait of {asked} ms: {hint:?}"
    );
    // The sleep is that wait (rounded up to the policy's resolution).
    let slept = named(&events, "sleep")[0]["delay_ms"].as_u64().unwrap();
    assert!(slept.abs_diff(asked) <= 1, "slept {slept} ms for {asked}");
}

#[test]
fn the_hint_file_can_stop_retrying() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &[],
        &counted("echo stop > \"$RETRY_HINT_FILE\"; exit 75"),
    );
    assert_eq!(out.status.code(), Some(75));
    assert_eq!(attempts(dir.path()), 1);
}

#[test]
fn max_time_cuts_a_long_sleep() {
    let dir = tmp();
    let began = Instant::now();
    let out = retry_sh(
        dir.path(),
        &["--delay", "30s", "--max-time", "1s"],
        &counted("exit 1"),
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(attempts(dir.path()), 1);
    assert!(stderr(&out).contains("budget"), "{}", stderr(&out));
}

#[test]
fn max_time_caps_the_first_attempt_too() {
    let dir = tmp();
    let began = Instant::now();
    let out = retry_sh(
        dir.path(),
        &["--max-time", "300ms", "--kill-after", "100ms"],
        &counted("sleep 10"),
    );
    assert_eq!(out.status.code(), Some(124), "{}", stderr(&out));
    assert!(
        began.elapsed() < Duration::from_secs(3),
        "{:?}",
        began.elapsed()
    );
}

#[test]
fn bad_flags_are_125_and_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--delay", "2"], "--delay"),
        (&["--attempts", "x"], "--attempts"),
        (&["--attempts", "2", "--retries", "3"], "--retries"),
        (&["--delay", "5 parsecs"], "--delay"),
        (&["--backoff", "cubic"], "--backoff"),
        (&["--factor", "0.5"], "--factor"),
        (&["--jitter", "add:7"], "--jitter"),
        (&["--max-delay", "-1s"], "--max-delay"),
        (&["--timeout", "0"], "--timeout"),
        (&["--retry-on", "1,banana"], "--retry-on"),
        (&["--stop-on", "9-3"], "--stop-on"),
        (&["--no-such-flag"], "--no-such-flag"),
        (&["--config", "/nonexistent.toml"], "--config"),
    ];
    for (args, flag) in cases {
        let out = common::command(retry())
            .args(*args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
    let out = common::command(retry()).output().unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("no command"), "{}", stderr(&out));
}

#[test]
fn the_command_sees_its_attempt_in_the_environment() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--attempts", "2", "--timeout", "5s"],
        "echo \"$RETRY_ATTEMPT/$RETRY_MAX_ATTEMPTS last=$RETRY_LAST_EXIT dl=${RETRY_DEADLINE_MS:-none}\" >> \"$DIR/env\"; exit 4",
    );
    assert_eq!(out.status.code(), Some(4));
    let env = std::fs::read_to_string(dir.path().join("env")).unwrap();
    let lines: Vec<&str> = env.lines().collect();
    assert!(lines[0].starts_with("1/2 last= dl="), "{env}");
    assert!(lines[1].starts_with("2/2 last=4 dl="), "{env}");
    let ms: u64 = lines[1].rsplit('=').next().unwrap().parse().unwrap();
    assert!(ms > 4000 && ms <= 5000, "{env}");
}

#[test]
fn the_command_inherits_the_environment_with_the_retry_variables_replaced() {
    let dir = tmp();
    let out = common::command(retry())
        .args(["-n", "1", "--", "sh", "-c", "env > \"$DIR/env\""])
        .env("DIR", dir.path())
        .env("RETRY_ATTEMPT", "99")
        .env("RETRY_ATTEMPTX", "kept")
        .env("SOME_VALUE", "a=b c")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let env = std::fs::read_to_string(dir.path().join("env")).unwrap();
    let attempt: Vec<&str> = env
        .lines()
        .filter(|l| l.starts_with("RETRY_ATTEMPT="))
        .collect();
    assert_eq!(attempt, ["RETRY_ATTEMPT=1"], "{env}");
    assert!(env.lines().any(|l| l == "RETRY_ATTEMPTX=kept"), "{env}");
    assert!(env.lines().any(|l| l == "SOME_VALUE=a=b c"), "{env}");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
}

#[test]
fn the_on_retry_hook_runs_before_each_retry_off_stdout() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &[
            "--attempts",
            "3",
            "--on-retry",
            "echo hook $RETRY_ATTEMPT $RETRY_LAST_EXIT; echo $RETRY_ATTEMPT >> \"$DIR/hooks\"",
        ],
        &counted("exit 2"),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hooks")).unwrap(),
        "2\n3\n"
    );
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("hook 3 2"), "{}", stderr(&out));
}

#[test]
fn hold_stdout_releases_only_the_successful_attempt() {
    let dir = tmp();
    let script = counted("n=$(wc -l < \"$DIR/count\"); echo \"out $n\"; [ $n -ge 2 ]");
    let out = retry_sh(dir.path(), &["--hold-stdout"], &script);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"out 2\n");
    assert!(stderr(&out).contains("out 1"), "{}", stderr(&out));
}

#[test]
fn json_events_are_json_lines_with_a_schema() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--json", "--attempts", "2"],
        &counted("exit 3"),
    );
    assert_eq!(out.status.code(), Some(3));
    let events: Vec<serde_json::Value> = stderr(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "start",
            "attempt_start",
            "attempt_end",
            "sleep",
            "attempt_start",
            "attempt_end",
            "give_up"
        ]
    );
    assert!(events.iter().all(|e| e["schema"] == 2));
    assert_eq!(events[2]["code"], 3);
    assert_eq!(events[2]["timed_out"], false);
    assert_eq!(events[3]["delay_ms"], 5);
    assert_eq!(events[3]["reason"], "curve");
    assert_eq!(events[6]["reason"], "exhausted");
    assert_eq!(events[6]["code"], 3);
}

#[test]
fn quiet_says_nothing() {
    let dir = tmp();
    let out = retry_sh(dir.path(), &["-q", "--attempts", "2"], &counted("exit 3"));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr(&out), "");
}

#[test]
fn dry_run_runs_nothing() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--dry-run", "--seed", "1"],
        &counted("exit 0"),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(attempts(dir.path()), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("give up: exhausted"));
}

// --- Plans (insta snapshots) ------------------------------------------------

fn plan(args: &[&str]) -> String {
    let out = common::command(retry())
        .arg("plan")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn plan_defaults() {
    insta::assert_snapshot!(plan(&["--seed", "42"]));
}

#[test]
fn plan_exponential_no_jitter_eight_attempts() {
    insta::assert_snapshot!(plan(&[
        "--attempts",
        "8",
        "--jitter",
        "none",
        "--seed",
        "1"
    ]));
}

#[test]
fn plan_budget_cuts_the_schedule() {
    insta::assert_snapshot!(plan(&[
        "--max-time",
        "10s",
        "--jitter",
        "none",
        "--attempts",
        "10",
        "--seed",
        "1"
    ]));
}

#[test]
fn plan_scripted_outcomes() {
    insta::assert_snapshot!(plan(&[
        "--simulate",
        "1,75,0",
        "--delay",
        "500ms",
        "--jitter",
        "equal",
        "--seed",
        "7"
    ]));
}

#[test]
fn plan_stops_on_a_permanent_code() {
    insta::assert_snapshot!(plan(&[
        "--simulate",
        "1,78",
        "--backoff",
        "constant",
        "--delay",
        "2s",
        "--seed",
        "3"
    ]));
}

#[test]
fn plan_timeouts_linear() {
    insta::assert_snapshot!(plan(&[
        "--simulate",
        "timeout",
        "--timeout",
        "3s",
        "--backoff",
        "linear",
        "--delay",
        "1s",
        "--jitter",
        "spread:0.2",
        "--retries",
        "3",
        "--seed",
        "9",
    ]));
}

#[test]
fn plan_fibonacci_decorrelated_json() {
    insta::assert_snapshot!(plan(&[
        "--json",
        "--backoff",
        "fibonacci",
        "--delay",
        "100ms",
        "--max-delay",
        "1s",
        "--jitter",
        "decorrelated",
        "--attempts",
        "6",
        "--seed",
        "11",
    ]));
}

#[test]
fn plan_budget_json() {
    insta::assert_snapshot!(plan(&[
        "--json",
        "--max-time",
        "5s",
        "--timeout",
        "2s",
        "--simulate",
        "timeout,1",
        "--seed",
        "5",
    ]));
}

#[test]
fn plan_signals_json() {
    insta::assert_snapshot!(plan(&[
        "--json",
        "--simulate",
        "SIGTERM,SIGINT",
        "--seed",
        "2",
        "--delay",
        "10ms"
    ]));
}

#[test]
fn a_config_file_sets_the_policy_and_flags_override_it() {
    let dir = tmp();
    let toml = dir.path().join("policy.toml");
    std::fs::write(
        &toml,
        "max_attempts = 2\nbackoff = \"constant\"\ninitial_delay = \"5ms\"\njitter = \"none\"\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let _ = std::fs::remove_file(dir.path().join("count"));
        let out = common::command(retry())
            .arg("--config")
            .arg(&toml)
            .args(extra)
            .args(["--", "sh", "-c", &counted("exit 3")])
            .env("DIR", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), attempts(dir.path()), stderr(&out))
    };
    let (code, n, err) = run(&[]);
    assert_eq!((code, n), (Some(3), 2), "{err}");
    let (code, n, err) = run(&["--attempts", "3"]);
    assert_eq!((code, n), (Some(3), 3), "{err}");

    let json = dir.path().join("policy.json");
    std::fs::write(&json, r#"{"max_retries": 0}"#).unwrap();
    let out = common::command(retry())
        .arg("--config")
        .arg(&json)
        .args(["--", "sh", "-c", "exit 3"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));

    // A bad value is exit 125 naming the flag and the field.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "jitter = \"wobbly\"\n").unwrap();
    let out = common::command(retry())
        .arg("--config")
        .arg(&bad)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert!(err.contains("--config") && err.contains("jitter"), "{err}");
    let unknown = dir.path().join("unknown.toml");
    std::fs::write(&unknown, "max_attempt = 3\n").unwrap();
    let out = common::command(retry())
        .arg("--config")
        .arg(&unknown)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("max_attempt"), "{}", stderr(&out));
}

// --- Defects of issue 12 and the features users expect ----------------------

/// `retry ARGS -- sh -c SCRIPT` as a user types it, with long flags only and no
/// events (so that the same test runs against a build from before a fix, with
/// `RETRY_BINARY`). The script should append `$$` to `$DIR/pids`; the groups
/// named there must be gone afterwards.
fn retry_plain(dir: &Path, args: &[&str], script: &str) -> Output {
    let out = common::command(retry())
        .args(args)
        .args(["--", "sh", "-c", script])
        .env("DIR", dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("retry runs");
    assert_groups_gone(&pids(dir));
    out
}

/// The process ids the commands appended to `dir/pids`.
fn pids(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("pids"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

/// `retry ARGS -- sh -c SCRIPT` with events in `dir/events.jsonl` (returned too).
fn retry_events(dir: &Path, args: &[&str], script: &str) -> (Output, Vec<serde_json::Value>) {
    let out = retry_sh(dir, args, script);
    (out, events(&dir.join("events.jsonl")))
}

fn named<'a>(events: &'a [serde_json::Value], name: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

#[test]
fn a_command_killed_by_sigpipe_is_not_retried_and_exits_141() {
    let dir = tmp();
    // `yes` dies of SIGPIPE once `head` has its line: its reader went away.
    let out = common::command("bash")
        .arg("-c")
        .arg("\"$RETRY\" --delay 5ms -- sh -c 'echo $$ >> \"$DIR/pids\"; exec yes' | head -n1; echo \"${PIPESTATUS[0]}\"")
        .env("RETRY", retry())
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "y\n141\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(pids(dir.path()).len(), 1, "retried: {}", stderr(&out));
    assert!(stderr(&out).contains("died of SIGPIPE"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("attempt 2/"), "{}", stderr(&out));
    assert_groups_gone(&pids(dir.path()));
    // Named in --retry-on, it is retried.
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--retry-on", "SIGPIPE", "--attempts", "2"],
        &counted("kill -PIPE $$"),
    );
    assert_eq!(out.status.code(), Some(141));
    assert_eq!(attempts(dir.path()), 2);
}

#[test]
fn an_empty_config_file_changes_nothing() {
    let dir = tmp();
    let empty_toml = dir.path().join("empty.toml");
    std::fs::write(&empty_toml, "").unwrap();
    let empty_json = dir.path().join("empty.json");
    std::fs::write(&empty_json, "{}").unwrap();
    let bare = plan(&["--seed", "1", "--simulate", "75"]);
    assert!(bare.contains("hints at-least"), "{bare}");
    for file in [&empty_toml, &empty_json] {
        let with = plan(&[
            "--config",
            file.to_str().unwrap(),
            "--seed",
            "1",
            "--simulate",
            "75",
        ]);
        assert_eq!(with, bare, "{}", file.display());
    }
    // A run honours a command's hint at least, capped at 5 minutes, with or
    // without the empty file: 300 ms asked, 5 ms curve.
    for config in [None, Some(&empty_toml)] {
        let dir = tmp();
        let mut args = vec!["--attempts", "2"];
        if let Some(file) = config {
            args.extend(["--config", file.to_str().unwrap()]);
        }
        let (out, events) = retry_events(
            dir.path(),
            &args,
            "echo retry-after=0.3 > \"$RETRY_HINT_FILE\"; exit 75",
        );
        assert_eq!(out.status.code(), Some(75));
        let sleep = named(&events, "sleep")[0];
        assert_eq!(
            (sleep["delay_ms"].as_u64(), sleep["reason"].as_str()),
            (Some(300), Some("hint"))
        );
    }
}

#[test]
fn a_config_file_sets_the_programs_own_keys() {
    let dir = tmp();
    let file = dir.path().join("retry.toml");
    std::fs::write(
        &file,
        "max_attempts = 4\nretry_on = \"3\"\ndelays = [\"5ms\", \"10ms\"]\nkill_after = \"1s\"\n\
         on_give_up = 'echo gave-up $RETRY_REASON >&2'\n",
    )
    .unwrap();
    let (out, events) = retry_events(
        dir.path(),
        &["--config", file.to_str().unwrap()],
        &counted("exit 3"),
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(attempts(dir.path()), 4);
    let delays: Vec<u64> = named(&events, "sleep")
        .iter()
        .map(|e| e["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, [5, 10, 10]);
    assert!(
        stderr(&out).contains("gave-up exhausted"),
        "{}",
        stderr(&out)
    );
    // retry_on = "3" means exit 4 stops at once.
    let dir = tmp();
    let (out, _) = retry_events(
        dir.path(),
        &["--config", file.to_str().unwrap()],
        &counted("exit 4"),
    );
    assert_eq!((out.status.code(), attempts(dir.path())), (Some(4), 1));
    // A bad program key is named.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "success_count = 0\n").unwrap();
    let out = common::command(retry())
        .arg("--config")
        .arg(&bad)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("success_count"), "{}", stderr(&out));
}

#[test]
fn events_have_their_own_channel_and_parse_while_the_command_floods_stderr() {
    // The command writes 200 KiB to stderr in pieces that do not end lines,
    // then fails; the events go to fd 3, a pipe read line by line.
    let flood =
        "i=0; while [ $i -lt 2000 ]; do printf 'noise %0100d' $i >&2; i=$((i+1)); done; exit 3";
    let mut child = common::command("bash")
        .arg("-c")
        .arg("exec 3>&1 1>/dev/null; exec \"$RETRY\" -n 3 -d 5ms --jitter none --events fd:3 -- sh -c \"$FLOOD\"")
        .env("RETRY", retry())
        .env("FLOOD", flood)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr_pipe = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = std::io::Read::read_to_end(&mut { stderr_pipe }, &mut all);
        all
    });
    let mut lines = Vec::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line.unwrap();
        let event: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        lines.push(event);
    }
    let status = child.wait().unwrap();
    let noise = drain.join().unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(noise.len() > 3 * 200_000, "{}", noise.len());
    let names: Vec<&str> = lines.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "start",
            "attempt_start",
            "attempt_end",
            "sleep",
            "attempt_start",
            "attempt_end",
            "sleep",
            "attempt_start",
            "attempt_end",
            "give_up"
        ]
    );
    // Every event has a schema, an RFC 3339 UTC time and a monotonic elapsed time.
    let mut last_elapsed = 0;
    for event in &lines {
        assert_eq!(event["schema"], 2);
        let time = event["time"].as_str().unwrap();
        assert_eq!(time.len(), "2024-05-01T12:34:56.789Z".len(), "{time}");
        assert!(time.ends_with('Z') && &time[10..11] == "T", "{time}");
        let elapsed = event["elapsed_ms"].as_u64().unwrap();
        assert!(elapsed >= last_elapsed, "{lines:?}");
        last_elapsed = elapsed;
    }
    assert_groups_gone(&attempt_groups(&lines));
    // The human lines stayed on stderr, among the noise.
    let noise = String::from_utf8_lossy(&noise);
    assert!(
        noise.contains("retry: attempt 1/3 exited 3"),
        "no human line"
    );
}

#[test]
fn json_on_stderr_keeps_every_event_on_a_line_of_its_own() {
    let dir = tmp();
    // The command's background child keeps writing complete lines to the same
    // stderr while retry reports; every line is either its noise or one event.
    let out = retry_sh(
        dir.path(),
        &["--json", "--attempts", "3"],
        "(i=0; while [ $i -lt 300 ]; do echo noise >&2; i=$((i+1)); done) & exit 3",
    );
    assert_eq!(out.status.code(), Some(3));
    let mut names = Vec::new();
    for line in stderr(&out).lines() {
        if line == "noise" {
            continue;
        }
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        names.push(event["event"].as_str().unwrap().to_owned());
    }
    assert_eq!(names.first().map(String::as_str), Some("start"));
    assert_eq!(names.last().map(String::as_str), Some("give_up"));
}

#[test]
fn plan_json_is_one_object_per_line() {
    for args in [
        &[
            "--json",
            "--seed",
            "3",
            "--simulate",
            "1,timeout,0",
            "--timeout",
            "1s",
        ][..],
        &[
            "--json",
            "--attempts",
            "0",
            "--max-time",
            "5s",
            "--seed",
            "1",
        ][..],
    ] {
        let text = plan(args);
        let records: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect();
        assert!(records.len() >= 3, "{text}");
        assert_eq!(records[0]["record"], "policy");
        assert_eq!(records.last().unwrap()["record"], "result");
        assert!(records.iter().all(|r| r["schema"] == 3));
        assert!(records[1..records.len() - 1]
            .iter()
            .all(|r| r["record"] == "attempt"));
    }
    // --dry-run --json is the same plan.
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--dry-run", "--json", "--seed", "3"],
        &counted("exit 1"),
    );
    assert_eq!(attempts(dir.path()), 0);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let _: serde_json::Value = serde_json::from_str(line).unwrap();
    }
}

#[test]
fn a_missing_interpreter_is_named() {
    let dir = tmp();
    let script = dir.path().join("script.sh");
    std::fs::write(&script, "#!/nonexistent/interpreter -x\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = common::command(retry())
        .args(["--delay", "5ms", "--"])
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    let err = stderr(&out);
    assert!(err.contains("/nonexistent/interpreter"), "{err}");
    assert!(err.contains("script.sh"), "{err}");
    assert!(!err.contains("attempt 2/"), "{err}");
}

#[test]
fn a_retry_budget_policy_reports_the_sleep_after_the_grant() {
    let dir = tmp();
    let file = dir.path().join("budget.toml");
    std::fs::write(&file, "use_retry_budget = true\n").unwrap();
    let out = retry_plain(
        dir.path(),
        &[
            "--config",
            file.to_str().unwrap(),
            "--attempts",
            "2",
            "--delay",
            "5ms",
            "--jitter",
            "none",
        ],
        "echo $$ >> \"$DIR/pids\"; exit 1",
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("attempt 1/2 exited 1 after"), "{err}");
    assert!(err.contains("; next in 5ms ("), "{err}");
    // And the sleep is an event.
    let dir = tmp();
    let (_, events) = retry_events(
        dir.path(),
        &["--config", file.to_str().unwrap(), "--attempts", "2"],
        "exit 1",
    );
    let sleeps = named(&events, "sleep");
    assert_eq!(sleeps.len(), 1, "{events:?}");
    assert_eq!(sleeps[0]["delay_ms"], 5);
}

/// A local HTTP server answering each connection with the next response (the
/// last repeats); returns its port and the time each request arrived.
fn serve(responses: Vec<String>) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Instant>>>) {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&hits);
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte) {
                    Ok(1) => request.push(byte[0]),
                    _ => break,
                }
            }
            seen.lock().unwrap().push(Instant::now());
            let response = responses.get(n).or(responses.last()).unwrap();
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (port, hits)
}

fn http(status: &str, headers: &[&str], body: &str) -> String {
    let mut text = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}

fn require_curl() {
    let found = common::command("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "these tests run curl; install it (.ci/run does: apt-get install -y curl)"
    );
}

fn curl(port: u16) -> String {
    format!("curl -fsS -D \"$RETRY_HINT_FILE\" http://127.0.0.1:{port}/")
}

fn curl_plain(port: u16) -> String {
    format!(
        "echo $$ >> \"$DIR/pids\"; exec curl -fsS -D \"$RETRY_HINT_FILE\" http://127.0.0.1:{port}/"
    )
}

#[test]
fn curl_header_dumps_in_the_hint_file_set_the_delay() {
    require_curl();
    let (port, hits) = serve(vec![
        http("503 Service Unavailable", &["Retry-After: 1"], "busy\n"),
        http("200 OK", &[], "ok\n"),
    ]);
    let dir = tmp();
    let (out, events) = retry_events(
        dir.path(),
        &["--attempts", "3", "--delay", "10ms", "--jitter", "none"],
        &curl(port),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"ok\n");
    let hits = hits.lock().unwrap().clone();
    assert_eq!(hits.len(), 2);
    assert!(
        hits[1] - hits[0] >= Duration::from_secs(1),
        "{:?}",
        hits[1] - hits[0]
    );
    let err = stderr(&out);
    assert!(
        err.contains("attempt 1/3 exited 22"),
        "curl -f exits 22 on a 503: {err}"
    );
    assert!(err.contains("next in 1s as the command asked"), "{err}");
    // The same run's events.
    let sleep = named(&events, "sleep")[0];
    assert_eq!(sleep["reason"], "hint");
    assert_eq!(sleep["delay_ms"], 1000);
    assert_eq!(named(&events, "hint")[0]["retry_after_ms"], 1000);
}

#[test]
fn retry_after_ms_wins_and_http_dates_are_read() {
    require_curl();
    // retry-after-ms beats a 30-second Retry-After.
    let (port, hits) = serve(vec![
        http(
            "429 Too Many Requests",
            &["Retry-After: 30", "retry-after-ms: 400"],
            "",
        ),
        http("200 OK", &[], "ok\n"),
    ]);
    let dir = tmp();
    let out = retry_plain(
        dir.path(),
        &["--attempts", "2", "--delay", "10ms", "--jitter", "none"],
        &curl_plain(port),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let gap = {
        let hits = hits.lock().unwrap();
        hits[1] - hits[0]
    };
    assert!(
        gap >= Duration::from_millis(400) && gap < Duration::from_secs(10),
        "{gap:?}"
    );
    assert!(
        stderr(&out).contains("next in 400ms as the command asked"),
        "{}",
        stderr(&out)
    );
    // An HTTP-date two seconds ahead. The wait is measured from the moment
    // retry reads the hint, which its `hint` event stamps (to the millisecond,
    // a moment later): under any load, the delay is the date less that time.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut date = [0u8; 29];
    retry_core::format_http_date(now + 2, &mut date);
    let header = format!("Retry-After: {}", String::from_utf8_lossy(&date));
    let (port, _) = serve(vec![
        http("503 Service Unavailable", &[&header], ""),
        http("200 OK", &[], "ok\n"),
    ]);
    let dir = tmp();
    let (out, events) = retry_events(dir.path(), &["-n", "2", "-d", "10ms"], &curl(port));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let delay = named(&events, "sleep")[0]["delay_ms"].as_u64().unwrap();
    assert_eq!(unix_ms("1994-11-06T08:49:37.042Z"), 784_111_777_042);
    let read_at = unix_ms(named(&events, "hint")[0]["time"].as_str().unwrap());
    let left = (now + 2) * 1000 - read_at;
    assert!(
        left <= delay + 1 && delay <= left + 50,
        "waited {delay} ms for a date {left} ms after the hint was read"
    );
    assert!(delay <= 2000, "{delay}");
}

/// An event's RFC 3339 UTC `time` (`2024-05-01T12:34:56.789Z`) in milliseconds
/// since 1970.
fn unix_ms(time: &str) -> u64 {
    let number = |range: core::ops::Range<usize>| -> i64 { time[range].parse().unwrap() };
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    // Days from civil (the era-based conversion).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + number(11..13) * 3600 + number(14..16) * 60 + number(17..19);
    u64::try_from(secs * 1000 + number(20..23)).unwrap()
}

#[test]
fn an_unreadable_hint_is_reported_not_dropped() {
    require_curl();
    let (port, _) = serve(vec![http(
        "503 Service Unavailable",
        &["Retry-After: soon"],
        "",
    )]);
    let dir = tmp();
    let out = retry_plain(
        dir.path(),
        &["--attempts", "2", "--delay", "10ms"],
        &curl_plain(port),
    );
    assert_eq!(out.status.code(), Some(22), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("hint file line") && err.contains("Retry-After: soon"),
        "{err}"
    );
    let dir = tmp();
    let (out, events) = retry_events(dir.path(), &["-n", "2", "-d", "10ms"], &curl(port));
    assert_eq!(out.status.code(), Some(22), "{}", stderr(&out));
    let bad = named(&events, "hint_unreadable");
    assert_eq!(bad.len(), 2, "{events:?}");
    assert_eq!(bad[0]["text"], "Retry-After: soon");
    assert_eq!(named(&events, "sleep")[0]["reason"], "curve");
    // The key=value form too, and a plain header line.
    let dir = tmp();
    let (out, events) = retry_events(
        dir.path(),
        &["-n", "2"],
        "echo 'wait=3' > \"$RETRY_HINT_FILE\"; exit 1",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unknown key"), "{}", stderr(&out));
    assert_eq!(named(&events, "hint_unreadable").len(), 2);
    let dir = tmp();
    let (_, events) = retry_events(
        dir.path(),
        &["-n", "2"],
        "echo 'Retry-After: 0' > \"$RETRY_HINT_FILE\"; echo 'retry-after-ms=150' >> \"$RETRY_HINT_FILE\"; exit 1",
    );
    assert_eq!(named(&events, "sleep")[0]["delay_ms"], 150);
}

#[test]
fn forever_and_attempts_zero_have_no_limit() {
    for flag in [&["--forever"][..], &["--attempts", "0"], &["-n", "0"]] {
        let dir = tmp();
        let script = counted("[ $(wc -l < \"$DIR/count\") -ge 8 ]");
        // A constant 5 ms: the count is what matters, not the curve.
        let args = [flag, &["--backoff", "constant"]].concat();
        let (out, events) = retry_events(dir.path(), &args, &script);
        assert_eq!(out.status.code(), Some(0), "{flag:?}: {}", stderr(&out));
        assert_eq!(attempts(dir.path()), 8);
        assert!(named(&events, "start")[0]["max_attempts"].is_null());
        assert!(
            stderr(&out).contains("attempt 7 exited 1"),
            "{}",
            stderr(&out)
        );
    }
    // Bounded by --max-time.
    let dir = tmp();
    let (out, _) = retry_events(
        dir.path(),
        &["--forever", "--max-time", "300ms"],
        &counted("exit 1"),
    );
    assert_eq!(out.status.code(), Some(124));
    assert!(attempts(dir.path()) > 5, "{}", attempts(dir.path()));
    // The command sees no maximum.
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--forever"],
        "echo \"max=[$RETRY_MAX_ATTEMPTS]\" > \"$DIR/max\"",
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("max")).unwrap(),
        "max=[]\n"
    );
}

#[test]
fn a_config_file_can_ask_for_unlimited_attempts() {
    for (key, file) in [
        ("max_attempts", "retry.toml"),
        ("max_retries", "retry.toml"),
        ("max_attempts", "retry.json"),
    ] {
        let dir = tmp();
        let path = dir.path().join(file);
        let text = if file.ends_with(".json") {
            format!("{{\"{key}\": \"unlimited\"}}")
        } else {
            format!("{key} = \"unlimited\"\n")
        };
        std::fs::write(&path, text).unwrap();
        let config = path.to_str().unwrap();
        let script = counted(
            "echo \"max=[$RETRY_MAX_ATTEMPTS]\" > \"$DIR/max\"; [ $(wc -l < \"$DIR/count\") -ge 8 ]",
        );
        let (out, events) = retry_events(
            dir.path(),
            &["--config", config, "--backoff", "constant"],
            &script,
        );
        assert_eq!(out.status.code(), Some(0), "{key}: {}", stderr(&out));
        assert_eq!(attempts(dir.path()), 8, "{key}");
        assert!(named(&events, "start")[0]["max_attempts"].is_null());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("max")).unwrap(),
            "max=[]\n"
        );
    }
    // A flag still overrides the file.
    let dir = tmp();
    let path = dir.path().join("retry.toml");
    std::fs::write(&path, "max_attempts = \"unlimited\"\n").unwrap();
    let (out, _) = retry_events(
        dir.path(),
        &["--config", path.to_str().unwrap(), "-n", "3"],
        &counted("exit 1"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(attempts(dir.path()), 3);
}

#[test]
fn until_fail_stops_at_the_first_failure() {
    let dir = tmp();
    let script = counted("[ $(wc -l < \"$DIR/count\") -lt 4 ] || exit 7");
    let (out, events) = retry_events(dir.path(), &["--until-fail", "-n", "10"], &script);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    assert_eq!(attempts(dir.path()), 4);
    assert_eq!(named(&events, "done")[0]["code"], 7);
    assert!(
        stderr(&out).contains("as --until-fail waits for"),
        "{}",
        stderr(&out)
    );
    // Every attempt succeeded: exit 0 once attempts run out.
    let dir = tmp();
    let (out, _) = retry_events(dir.path(), &["--until-fail", "-n", "3"], &counted("true"));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(attempts(dir.path()), 3);
    assert!(
        stderr(&out).contains("every attempt succeeded"),
        "{}",
        stderr(&out)
    );
    // A timeout is a failure too.
    let dir = tmp();
    let (out, _) = retry_events(
        dir.path(),
        &["--until-fail", "-t", "100ms", "--kill-after", "100ms"],
        &counted("[ $(wc -l < \"$DIR/count\") -lt 2 ] || sleep 5"),
    );
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(attempts(dir.path()), 2);
}

#[test]
fn success_count_needs_successes_in_a_row() {
    let dir = tmp();
    // ok, fail, ok, ok, ok: the failure starts the count again.
    let script = counted("[ $(wc -l < \"$DIR/count\") -ne 2 ]");
    let (out, events) = retry_events(dir.path(), &["--success-count", "3", "-n", "9"], &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(attempts(dir.path()), 5);
    assert_eq!(named(&events, "attempt_end").len(), 5);
    // Not enough attempts left: the last attempt's status (a success, 0) after exhaustion.
    let dir = tmp();
    let (out, _) = retry_events(dir.path(), &["--success-count", "3", "-n", "4"], &script);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(attempts(dir.path()), 4);
    assert!(
        stderr(&out).contains("before 3 successes in a row"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn delays_are_followed_exactly() {
    let dir = tmp();
    let (out, events) = retry_events(
        dir.path(),
        &["--delays", "50ms,150ms", "-n", "4"],
        &counted("exit 1"),
    );
    assert_eq!(out.status.code(), Some(1));
    let delays: Vec<u64> = named(&events, "sleep")
        .iter()
        .map(|e| e["delay_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(delays, [50, 150, 150]);
    // And in the plan.
    let text = plan(&["--delays", "1s,2s,5s", "-n", "5", "--seed", "1"]);
    assert!(text.contains("delays: 1.000s,2.000s,5.000s"), "{text}");
    for d in ["sleep 1.000s", "sleep 2.000s", "sleep 5.000s"] {
        assert!(text.contains(d), "{text}");
    }
    assert_eq!(text.matches("sleep 5.000s").count(), 2, "{text}");
}

#[test]
fn the_on_give_up_hook_runs_once_with_the_reason() {
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &[
            "-n",
            "2",
            "--on-give-up",
            "echo \"$RETRY_REASON $RETRY_ATTEMPT $RETRY_LAST_EXIT\" >> \"$DIR/gave-up\"",
        ],
        &counted("exit 4"),
    );
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("gave-up")).unwrap(),
        "exhausted 2 4\n"
    );
    // Not on success.
    let dir = tmp();
    let out = retry_sh(
        dir.path(),
        &["--on-give-up", "touch \"$DIR/gave-up\""],
        "true",
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(!dir.path().join("gave-up").exists());
}

#[test]
fn short_flags_work() {
    let dir = tmp();
    let began = Instant::now();
    let (out, events) = retry_events(
        dir.path(),
        &[
            "-n",
            "2",
            "-d",
            "20ms",
            "-t",
            "200ms",
            "--kill-after",
            "50ms",
            "-q",
        ],
        &counted("sleep 5"),
    );
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(attempts(dir.path()), 2);
    assert_eq!(stderr(&out), "");
    assert_eq!(named(&events, "sleep")[0]["delay_ms"], 20);
    assert!(began.elapsed() < Duration::from_secs(4));
}

#[test]
fn a_bare_number_duration_is_refused_with_both_spellings() {
    let out = common::command(retry())
        .args(["--delay", "2", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert!(
        err.contains("--delay")
            && err.contains("2s for seconds")
            && err.contains("2ms for milliseconds"),
        "{err}"
    );
    // The same number in a config file is milliseconds, as the core reads configs.
    let dir = tmp();
    let file = dir.path().join("ms.toml");
    std::fs::write(
        &file,
        "initial_delay = 2\nbackoff = \"constant\"\njitter = \"none\"\n",
    )
    .unwrap();
    let text = plan(&["--config", file.to_str().unwrap(), "--seed", "1", "-n", "2"]);
    assert!(text.contains("sleep 0.002s"), "{text}");
    // Zero needs no unit.
    let dir = tmp();
    let (out, events) = retry_events(dir.path(), &["-d", "0", "-n", "2"], "exit 1");
    assert_eq!(out.status.code(), Some(1));
    assert!(named(&events, "sleep").is_empty());
}

#[test]
fn help_documents_every_flag_the_config_keys_and_curl() {
    let out = common::command(retry()).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--attempts",
        "-n,",
        "--retries",
        "--forever",
        "--backoff",
        "--delay",
        "-d,",
        "--delays",
        "--factor",
        "--max-delay",
        "--min-delay",
        "--jitter",
        "--seed",
        "--max-time",
        "--timeout",
        "-t,",
        "--kill-after",
        "--retry-on",
        "--stop-on",
        "--until-fail",
        "--success-count",
        "--replay-stdin",
        "--hold-stdout",
        "--on-retry",
        "--on-give-up",
        "--config",
        "--events",
        "--json",
        "--quiet",
        "-q,",
        "--verbose",
        "--dry-run",
        "--simulate",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    for key in [
        "max_attempts",
        "max_retries",
        "backoff",
        "initial_delay",
        "factor",
        "increment",
        "max_delay",
        "min_delay",
        "jitter",
        "resolution",
        "retry_after",
        "retry_after_min",
        "retry_after_max",
        "retry_after_cap",
        "respect_retry_after",
        "budget",
        "attempt_timeout",
        "cap_attempt_to_budget",
        "retry_timeouts",
        "use_retry_budget",
        "wait_on_open_circuit",
        "idempotent",
        "retry_on",
        "stop_on",
        "delays",
        "kill_after",
        "until_fail",
        "success_count",
        "on_retry",
        "on_give_up",
    ] {
        assert!(help.contains(key), "--help lacks the config key {key}");
    }
    assert!(
        help.contains("curl -fsS -D \"$RETRY_HINT_FILE\""),
        "no curl recipe"
    );
    // What it does with the terminal, and the trade-offs; signals started
    // ignored; the hint file and other users; layered configs.
    for words in [
        "runs in retry's own process group, the job's",
        "The trade-offs:",
        "Without a terminal",
        "subreaper",
        "SIGNALS STARTED IGNORED",
        "stays ignored, for retry and for the",
        "env --default-signal=INT,QUIT",
        "Permission denied",
        "layered in the order given",
        "a quoted number without a unit",
        "between half of it and all of it",
    ] {
        assert!(help.contains(words), "--help does not say: {words}");
    }
}

/// A script's background job starts with SIGINT and SIGQUIT ignored (POSIX):
/// retry keeps them ignored, for itself and for the command, as --help says.
#[test]
fn int_and_quit_started_ignored_stay_ignored_for_the_command() {
    let dir = tmp();
    let out = common::command("sh")
        .arg("-c")
        .arg("\"$RETRY\" -n 2 -d 10ms -- sh -c 'echo $$ >> \"$DIR/pids\"; kill -INT $$; kill -QUIT $$; echo alive' & wait $!")
        .env("RETRY", retry())
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"alive\n");
    assert_eq!(pids(dir.path()).len(), 1);
}

/// Voluntary context switches of a process, from /proc.
fn voluntary_switches(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[test]
fn retry_does_not_wake_while_it_waits() {
    // While the command runs for half a second, and while retry sleeps half a
    // second before the next attempt, retry itself blocks: a handful of
    // context switches, not one per tick (a 5 ms tick is 100 of them). The
    // command reads its parent's (retry's) counters at its end.
    let dir = tmp();
    let out = retry_plain(
        dir.path(),
        &["--attempts", "2", "--delay", "500ms", "--jitter", "none"],
        "echo $$ >> \"$DIR/pids\"; sleep 0.5; cat /proc/$PPID/status > \"$DIR/status.$RETRY_ATTEMPT\"; exit 1",
    );
    assert_eq!(out.status.code(), Some(1));
    let first = voluntary_switches(&std::fs::read_to_string(dir.path().join("status.1")).unwrap());
    let second = voluntary_switches(&std::fs::read_to_string(dir.path().join("status.2")).unwrap());
    assert!(
        first <= 10,
        "{first} voluntary switches during a 0.5 s attempt"
    );
    assert!(
        second <= 20,
        "{second} voluntary switches after 2 attempts and a 0.5 s sleep"
    );
}

#[test]
fn a_signal_ignored_at_start_stays_ignored_for_the_command() {
    // `nohup retry ...`: SIGHUP is ignored; retry keeps it so, and so does the
    // command, which survives a hangup.
    let dir = tmp();
    let out = common::command("nohup")
        .arg(retry())
        .args(["--attempts", "1", "--", "sh", "-c"])
        .arg("echo $$ >> \"$DIR/pids\"; kill -HUP $$; echo alive")
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"alive\n");
    assert_groups_gone(&pids(dir.path()));
}

#[test]
fn sigtstp_to_retry_stops_the_command_too_and_stopped_time_is_not_a_hang() {
    // `kill -TSTP` on retry stops the command and retry; `kill -CONT`
    // continues both. A command under a 1.2 s timeout, stopped for 1.5 s in
    // between, finishes (the stopped time is not counted: the call spans more
    // than the timeout).
    // The command cannot finish before the test lets it: it blocks opening a
    // FIFO the test writes to once it has continued it, so a loaded machine
    // delivering the stop late still finds it waiting (and never inside a
    // fork: a shell stopped in vfork(2) waits for its child's exec, not 'T');
    // once let go it runs about half a second.
    // retry runs in a process group of its own, as a shell runs a job: were it
    // in an orphaned group (a session of its own), the kernel would discard
    // retry's own stop.
    let dir = tmp();
    let fifo = dir.path().join("go");
    let made = common::command("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let log = dir.path().join("events.jsonl");
    let child = common::command_in_group(retry())
        .args(["--attempts", "1", "--timeout", "1200ms", "--events"])
        .arg(&log)
        .args(["--", "sh", "-c"])
        .arg("echo $$ > \"$DIR/pid\"; read x < \"$DIR/go\"; sleep 0.5; echo finished")
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = common::read_pid(&dir.path().join("pid"));
    let retry_pid = i32::try_from(child.id()).unwrap();
    common::send_signal(retry_pid, libc::SIGTSTP);
    let until = Instant::now() + Duration::from_secs(20);
    while !(common::process_state(pid) == Some('T')
        && common::process_state(retry_pid) == Some('T'))
    {
        assert!(
            Instant::now() < until,
            "command {:?}, retry {:?}",
            common::process_state(pid),
            common::process_state(retry_pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        common::process_state(pid),
        Some('T'),
        "the command ran on while retry was stopped"
    );
    common::send_signal(retry_pid, libc::SIGCONT);
    std::fs::write(&fifo, b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, b"finished\n");
    let events = events(&log);
    let stopped = named(&events, "stopped");
    assert_eq!(stopped.len(), 1, "{events:?}");
    assert_eq!(stopped[0]["signal"], "SIGTSTP");
    let continued = named(&events, "continued");
    assert_eq!(continued.len(), 1, "{events:?}");
    assert!(
        continued[0]["stopped_ms"].as_u64().unwrap() >= 1500,
        "{events:?}"
    );
    assert_groups_gone(&[pid]);
}

#[test]
fn plans_follow_the_goal() {
    let text = plan(&[
        "--until-fail",
        "--simulate",
        "0,0,1",
        "--seed",
        "1",
        "-d",
        "1s",
        "--jitter",
        "none",
    ]);
    assert!(text.contains("goal: until failure"), "{text}");
    assert!(
        text.contains("result: failed, as waited for, after 3 attempt(s)"),
        "{text}"
    );
    assert!(text.contains("exit status 1"), "{text}");
    let lines = plan(&[
        "--json",
        "--success-count",
        "2",
        "--simulate",
        "0,1,0,0",
        "--seed",
        "1",
        "-n",
        "6",
    ]);
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["attempts"].as_u64(), last["exit_code"].as_i64()),
        (Some(4), Some(0))
    );
    let lines = plan(&["--json", "--until-fail", "--simulate", "0,7", "--seed", "1"]);
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["reason"].as_str(), last["exit_code"].as_i64()),
        (Some("failed"), Some(7))
    );
}

#[test]
fn huge_durations_never_panic() {
    let huge = "5000000000000000h";
    let cases: &[(&[&str], i32)] = &[
        (&["--kill-after", huge, "-t", "10ms", "-n", "1"], 124),
        (&["--max-time", huge, "-n", "1"], 1),
        (&["-t", huge, "-n", "1"], 1),
        (&["--delays", huge, "-n", "2", "--max-time", "300ms"], 124),
        (
            &[
                "-d",
                huge,
                "--max-delay",
                huge,
                "-n",
                "2",
                "--max-time",
                "300ms",
            ],
            124,
        ),
    ];
    for (args, code) in cases {
        let dir = tmp();
        let out = retry_plain(
            dir.path(),
            args,
            "echo $$ >> \"$DIR/pids\"; trap '' TERM; sleep 0.2; exit 1",
        );
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

// --- Issue 29, items 4 to 9; issue 28, items 6, 8 and 10 --------------------

/// `--events fd:3`: retry keeps fd 3 for itself (close-on-exec, the caller's
/// own number included); the command gets exactly the descriptors the caller
/// passed, but 3: 0, 1, 2 and the caller's fd 4 here (the same command run by
/// the caller directly lists what it passes). Before, fd 3 leaked to
/// the command and kept a reader of the events from seeing end of file while a
/// background grandchild lived.
#[test]
fn the_events_descriptor_and_retrys_own_never_reach_the_command() {
    let dir = tmp();
    let out = common::command("bash")
        .arg("-c")
        .arg(
            "exec 3>\"$DIR/events\" 4>\"$DIR/other\"; \
             sh -c 'ls /proc/$$/fd > \"$DIR/caller\"'; \
             exec \"$RETRY\" -n 1 --events fd:3 -- sh -c 'ls /proc/$$/fd > \"$DIR/command\"'",
        )
        .env("RETRY", retry())
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
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
    assert!(
        expected.contains(&3) && expected.contains(&4),
        "{expected:?}"
    );
    expected.retain(|&fd| fd != 3);
    assert_eq!(fds("command"), expected);
    // The events went to fd 3.
    assert!(!events(&dir.path().join("events")).is_empty());
    // A background grandchild no longer holds the events open: the reader
    // sees end of file when retry exits.
    let began = Instant::now();
    let out = common::command("bash")
        .arg("-c")
        .arg("\"$RETRY\" -n 1 --events fd:3 -- sh -c 'sleep 5 >/dev/null 2>&1 &' 3>&1 >/dev/null | wc -l")
        .env("RETRY", retry())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(4),
        "{:?}",
        began.elapsed()
    );
    // start, attempt_start, attempt_end, done.
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "4");
}

/// The `start` event's seed is a string (a number above 2^53 is rounded by jq
/// and JavaScript), and `--seed` takes it back: as jq prints it (in quotes),
/// bare, or in hex. The run with it draws the same delays.
#[test]
fn the_seed_of_an_event_is_a_string_that_seed_takes_back() {
    let seed = "18446744073709551557"; // above 2^53: a JSON number would round it
    let dir = tmp();
    let (_, first) = retry_events(
        dir.path(),
        &["-n", "4", "-d", "20ms", "--jitter", "full", "--seed", seed],
        "exit 1",
    );
    let start = named(&first, "start")[0];
    assert_eq!(start["seed"], seed, "{start}");
    let delays = |events: &[serde_json::Value]| -> Vec<u64> {
        named(events, "sleep")
            .iter()
            .map(|e| e["delay_ms"].as_u64().unwrap())
            .collect()
    };
    // Random seeds round-trip too.
    let dir = tmp();
    let (_, random) = retry_events(
        dir.path(),
        &["-n", "4", "-d", "20ms", "--jitter", "full"],
        "exit 1",
    );
    let drawn = named(&random, "start")[0]["seed"]
        .as_str()
        .unwrap()
        .to_owned();
    for (events, given) in [
        (&first, format!("\"{seed}\"")),
        (&first, format!("0x{:x}", seed.parse::<u64>().unwrap())),
        (&random, drawn.clone()),
        (&random, format!("\"{drawn}\"")),
    ] {
        let dir = tmp();
        let (out, again) = retry_events(
            dir.path(),
            &[
                "-n", "4", "-d", "20ms", "--jitter", "full", "--seed", &given,
            ],
            "exit 1",
        );
        assert_eq!(out.status.code(), Some(1), "{given}: {}", stderr(&out));
        assert_eq!(delays(&again), delays(events), "--seed {given}");
    }
    // The plan's seed is a string too.
    let first_line = plan(&["--json", "--seed", seed]);
    let policy: serde_json::Value =
        serde_json::from_str(first_line.lines().next().unwrap()).unwrap();
    assert_eq!(policy["seed"], seed);
    let out = common::command(retry())
        .args(["plan", "--seed", "\"12x\""])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("--seed"), "{}", stderr(&out));
}

/// A root retry running a command that drops privileges (setpriv, runuser,
/// sudo -u) gives it a hint file it can still write; the directory holding it
/// is gone after the run. Before, the command's write failed with Permission
/// denied on /proc/<pid>/fd/N and the hint was lost.
#[test]
fn a_command_that_dropped_privileges_can_write_its_hint_file() {
    let dir = tmp();
    let root = common::is_root();
    let setpriv = common::command("setpriv")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let (out, events) = if root && setpriv {
        retry_events(
            dir.path(),
            &["-n", "2", "-d", "0"],
            "exec setpriv --reuid=65534 --regid=65534 --clear-groups \
             sh -c 'echo retry-after=0.2 > \"$RETRY_HINT_FILE\" && echo $RETRY_HINT_FILE; exit 75'",
        )
    } else {
        println!(
            "SKIPPED the privilege drop: needs root and setpriv; the same user's write is checked"
        );
        retry_events(
            dir.path(),
            &["-n", "2", "-d", "0"],
            "echo retry-after=0.2 > \"$RETRY_HINT_FILE\" && echo $RETRY_HINT_FILE; exit 75",
        )
    };
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("ermission denied"),
        "{}",
        stderr(&out)
    );
    let sleep = named(&events, "sleep")[0];
    assert_eq!(
        (sleep["delay_ms"].as_u64(), sleep["reason"].as_str()),
        (Some(200), Some("hint")),
        "{events:?}"
    );
    // Nothing of the hint files is left behind.
    for path in String::from_utf8_lossy(&out.stdout).lines() {
        let path = Path::new(path);
        assert!(!path.exists(), "{} is left", path.display());
        if !path.starts_with("/proc") {
            assert!(
                !path.parent().unwrap().exists(),
                "{} is left",
                path.display()
            );
        }
    }
}

/// A root retry's hint file can be found by no other user: its directory's
/// name shows in `/dev/shm` (anyone may list that), but the directory itself
/// cannot be listed by another user and the file's own name is drawn at
/// random, not `hint-<attempt>`, which anyone who saw the directory could have
/// opened and written.
#[test]
fn a_root_retrys_hint_file_cannot_be_found_by_another_user() {
    if !common::is_root() {
        println!("SKIPPED: the hint directory is made only by a root retry");
        return;
    }
    let setpriv = common::command("setpriv")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let dir = tmp();
    let (out, _) = retry_events(
        dir.path(),
        &["-n", "1"],
        "echo \"$RETRY_HINT_FILE\"; command -v setpriv >/dev/null && \
         setpriv --reuid=65534 --regid=65534 --clear-groups \
         ls \"$(dirname \"$RETRY_HINT_FILE\")\" >/dev/null 2>&1 && echo LISTED; true",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = Path::new(stdout.lines().next().unwrap());
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let random = name.strip_prefix("hint-1-").unwrap_or("");
    assert!(
        random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit()),
        "the file's name is not drawn at random: {name}"
    );
    if setpriv {
        assert!(!stdout.contains("LISTED"), "another user listed {stdout}");
    } else {
        println!("SKIPPED the listing as another user: needs setpriv");
    }
}

/// The program's default jitter never shortens a stated delay by more than
/// half (equal jitter: `-d 5s` waits 2.5 s to 5 s), and the status line and
/// the plan show the range. Before, full jitter could retry at once.
#[test]
fn the_default_jitter_keeps_at_least_half_of_a_stated_delay_and_shows_its_range() {
    for seed in 0..200u64 {
        let text = plan(&["-d", "5s", "-n", "2", "--seed", &seed.to_string(), "--json"]);
        let row: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        let then = &row["then"];
        let delay = then["delay_ms"].as_u64().unwrap();
        assert!((2500..=5000).contains(&delay), "seed {seed}: {delay} ms");
        assert_eq!(
            (then["delay_min_ms"].as_u64(), then["delay_max_ms"].as_u64()),
            (Some(2500), Some(5000))
        );
    }
    let text = plan(&["-d", "5s", "-n", "2", "--seed", "1"]);
    assert!(text.contains("jitter equal"), "{text}");
    assert!(
        text.contains("(curve, jittered within 2.500s to 5.000s)"),
        "{text}"
    );
    // A run says it too.
    let dir = tmp();
    let out = common::command(retry())
        .args(["-n", "2", "-d", "40ms", "--", "false"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(", jittered within 20ms to 40ms ("),
        "{}",
        stderr(&out)
    );
    // Unjittered delays show no range.
    let text = plan(&["-d", "5s", "-n", "2", "--seed", "1", "--jitter", "none"]);
    assert!(text.contains("sleep 5.000s (curve)\n"), "{text}");
}

/// `retry plan` with a retry budget: a grant of the budget is followed by the
/// retry, as in the real run (issue 28, item 8). Before, the plan printed
/// `"then": null` where a retry followed.
#[test]
fn a_plan_with_a_retry_budget_shows_the_retries_the_run_makes() {
    let dir = tmp();
    let config = dir.path().join("budget.json");
    std::fs::write(
        &config,
        r#"{"max_attempts":3,"backoff":"none","use_retry_budget":true}"#,
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let text = plan(&["--config", config, "--simulate", "1,1,0", "--json"]);
    let thens: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["record"] == "attempt")
        .map(|r| r["then"].clone())
        .collect();
    assert_eq!(thens.len(), 3, "{text}");
    assert_eq!(thens[0]["action"], "retry", "{text}");
    assert_eq!(thens[1]["action"], "retry", "{text}");
    assert_eq!(thens[2]["action"], "done", "{text}");
    let table = plan(&["--config", config, "--simulate", "1,1,0"]);
    assert_eq!(table.matches("retry at once").count(), 2, "{table}");
    assert!(!table.contains('…'), "{table}");
    // The real run: three attempts, each failure retried at once.
    let script = counted("[ $(wc -l < \"$DIR/count\") -ge 3 ]");
    let dir = tmp();
    let (out, events) = retry_events(dir.path(), &["--config", config], &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(attempts(dir.path()), 3);
    assert!(named(&events, "sleep").is_empty());
    assert_eq!(
        stderr(&out).matches("retrying now").count(),
        2,
        "{}",
        stderr(&out)
    );
}

/// Without a curve there is nothing to jitter: `backoff: none` shows no
/// jitter (issue 28, item 10), unless one is asked for.
#[test]
fn a_plan_without_a_curve_shows_no_jitter() {
    let dir = tmp();
    let config = dir.path().join("none.json");
    std::fs::write(&config, r#"{"backoff":"none"}"#).unwrap();
    let text = plan(&["--config", config.to_str().unwrap(), "--seed", "1"]);
    assert!(text.contains("none, delays in"), "{text}");
    assert!(text.contains("jitter none"), "{text}");
    let text = plan(&["--backoff", "none", "--seed", "1"]);
    assert!(text.contains("jitter none"), "{text}");
    let text = plan(&[
        "--backoff",
        "none",
        "--jitter",
        "add:0.1",
        "--min-delay",
        "1s",
    ]);
    assert!(text.contains("jitter add"), "{text}");
}

/// Every time the program reports is measured from the run's start (issue 28,
/// item 6): reading a replayed stdin that takes a second is part of the run.
/// Before, the clock started after it, and "giving up … (25ms elapsed)"
/// left that second out.
#[test]
fn reported_times_count_the_whole_run() {
    let dir = tmp();
    let log = dir.path().join("events.jsonl");
    let out = common::command("bash")
        .arg("-c")
        .arg("(sleep 1; echo input) | \"$RETRY\" --replay-stdin -n 2 -d 10ms --events \"$LOG\" -- sh -c 'cat >/dev/null; exit 3'")
        .env("RETRY", retry())
        .env("LOG", &log)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    let line = err.lines().find(|l| l.contains("giving up")).unwrap();
    let took = line.rsplit('(').next().unwrap();
    assert!(
        took.starts_with('1') && took.contains("s elapsed"),
        "the report leaves out the time stdin took: {line}"
    );
    let events = events(&log);
    let give_up = named(&events, "give_up")[0];
    assert!(give_up["elapsed_ms"].as_u64().unwrap() >= 1000, "{give_up}");
}
