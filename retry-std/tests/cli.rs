//! The `retry` program, run for real on small `sh` scripts with tiny delays.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::time::Duration;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

const RETRY: &str = env!("CARGO_BIN_EXE_retry");

/// `retry ARGS -- sh -c SCRIPT`, in `dir` (exported as `$DIR`), with tiny delays.
fn retry_sh(dir: &Path, args: &[&str], script: &str) -> Output {
    Command::new(RETRY)
        .args(["--delay", "5ms", "--jitter", "none"])
        .args(args)
        .args(["--", "sh", "-c", script])
        .env("DIR", dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("retry runs")
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
    let out = Command::new(RETRY)
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
    let out = Command::new(RETRY)
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
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn sigterm_is_forwarded_and_leaves_no_orphan() {
    let dir = tmp();
    let began = Instant::now();
    let child = Command::new(RETRY)
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
    let child = Command::new(RETRY)
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
    let mut child = Command::new(RETRY)
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
        let out = Command::new(RETRY)
            .args(*args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
    let out = Command::new(RETRY).output().unwrap();
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
    assert!(events.iter().all(|e| e["schema"] == 1));
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
    let out = Command::new(RETRY).arg("plan").args(args).output().unwrap();
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
        let out = Command::new(RETRY)
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
    let out = Command::new(RETRY)
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
    let out = Command::new(RETRY)
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
    let out = Command::new(RETRY)
        .arg("--config")
        .arg(&unknown)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("max_attempt"), "{}", stderr(&out));
}
