//! `--config FILE` as a user writes it: the file's keys against the flags they
//! stand for, layered files, and every error pointing at the line and column
//! at fault (issue 29, items 6 and 8).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use core::time::Duration;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Instant;

use common::retry;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn run(args: &[&str]) -> Output {
    common::command(retry())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `budget` in a file is `--max-time`: the budget cuts the attempt too and
/// the run ends with 124 once it is spent. Before, `budget = "1s"` with
/// `sleep 3` exited 0 after 3 s.
#[test]
fn budget_in_a_file_is_max_time() {
    let dir = tmp();
    for file in [
        write(dir.path(), "budget.toml", "budget = \"300ms\"\n"),
        write(dir.path(), "budget.json", r#"{"budget": "300ms"}"#),
    ] {
        let began = Instant::now();
        let out = run(&[
            "--config",
            &file,
            "--kill-after",
            "100ms",
            "--",
            "sleep",
            "3",
        ]);
        assert_eq!(out.status.code(), Some(124), "{file}: {}", stderr(&out));
        assert!(
            began.elapsed() < Duration::from_secs(2),
            "{file}: {:?}",
            began.elapsed()
        );
        // The same plan as the flag's.
        let from_file = run(&["plan", "--config", &file, "--seed", "1", "-t", "1s"]);
        let from_flag = run(&["plan", "--max-time", "300ms", "--seed", "1", "-t", "1s"]);
        assert_eq!(stdout(&from_file), stdout(&from_flag), "{file}");
        assert!(stdout(&from_file).contains("attempts capped at the budget"));
    }
    // Unless the file says otherwise.
    let file = write(
        dir.path(),
        "uncapped.toml",
        "budget = \"300ms\"\ncap_attempt_to_budget = false\n",
    );
    let plan = stdout(&run(&["plan", "--config", &file, "--seed", "1"]));
    assert!(!plan.contains("attempts capped"), "{plan}");
}

/// A quoted number without a unit is refused in a file, as `--delay 2` is on
/// the command line; a bare number stays milliseconds. Before, `"2"` silently
/// meant 2 ms.
#[test]
fn a_quoted_duration_without_a_unit_is_refused() {
    let dir = tmp();
    for (name, text, at) in [
        (
            "q.toml",
            "max_attempts = 2\ninitial_delay = \"2\"\n",
            ":2:17: initial_delay",
        ),
        (
            "q.json",
            "{\n  \"kill_after\": \"10\"\n}",
            ":2:17: kill_after",
        ),
        ("d.toml", "delays = [\"1s\", \"5\"]\n", ":1:10: delays"),
        ("b.toml", "budget = \"1.5\"\n", ":1:10: budget"),
    ] {
        let file = write(dir.path(), name, text);
        let out = run(&["--config", &file, "--", "true"]);
        assert_eq!(out.status.code(), Some(125), "{name}");
        let err = stderr(&out);
        assert!(err.contains(&format!("{file}{at}")), "{name}: {err}");
        assert!(err.contains("has no unit"), "{name}: {err}");
    }
    // Bare numbers are milliseconds, as documented; "none" still removes a budget.
    let file = write(
        dir.path(),
        "ms.toml",
        "initial_delay = 2\nbackoff = \"constant\"\njitter = \"none\"\nbudget = \"none\"\n",
    );
    let plan = stdout(&run(&["plan", "--config", &file, "--seed", "1", "-n", "2"]));
    assert!(plan.contains("sleep 0.002s"), "{plan}");
}

/// Every error names the file, the line and the column: syntax errors, unknown
/// keys (listing the program's own keys among the expected ones, with a
/// suggestion), bad values of the core's keys and of the program's, and
/// values that contradict each other.
#[test]
fn every_config_error_says_where() {
    let dir = tmp();
    for (name, text, at, words) in [
        (
            "syntax.toml",
            "max_attempts = 3\njitter = [\n",
            ":3:1:",
            &[][..],
        ),
        (
            "syntax.json",
            "{\n  \"max_attempts\": 3,\n  \"jitter\": }",
            ":3:13:",
            &[],
        ),
        (
            "unknown.toml",
            "max_attempts = 3\n  max_attempt = 4\n",
            ":2:3:",
            &[
                "unknown key `max_attempt`",
                "did you mean `max_attempts`?",
                "`retry_on`",
                "`on_give_up`",
                "`kill_after`",
            ],
        ),
        (
            "unknown.json",
            "{\n  \"max_attempts\": 3,\n    \"retry_onn\": \"1\"\n}",
            ":3:5:",
            &[
                "unknown key `retry_onn`",
                "did you mean `retry_on`?",
                "`budget`",
            ],
        ),
        (
            "value.toml",
            "jitter = \"wobbly\"\n",
            ":1:10:",
            &["jitter", "wobbly"],
        ),
        (
            "program.toml",
            "\n\nsuccess_count = 0\n",
            ":3:17:",
            &["success_count"],
        ),
        (
            "list.json",
            "{\"retry_on\": \"1,banana\"}",
            ":1:14:",
            &["retry_on", "banana"],
        ),
        (
            "clash.toml",
            "max_delay = \"1s\"\nmin_delay = \"2s\"\n",
            ":2:13:",
            &["min_delay"],
        ),
        (
            "both.toml",
            "max_attempts = 3\nmax_retries = 2\n",
            ":2:15:",
            &["max_attempts, max_retries: give one or the other"],
        ),
    ] {
        let file = write(dir.path(), name, text);
        let out = run(&["--config", &file, "--", "true"]);
        assert_eq!(out.status.code(), Some(125), "{name}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("retry: --config {file}{at}")),
            "{name}: {err}"
        );
        for word in words {
            assert!(err.contains(word), "{name} lacks {word}: {err}");
        }
    }
}

/// An empty file changes nothing, in TOML and in JSON (as `--help` says).
/// Before, an empty `.json` file was refused ("EOF while parsing").
#[test]
fn an_empty_file_of_either_kind_changes_nothing() {
    let dir = tmp();
    let bare = stdout(&run(&["plan", "--seed", "1", "--simulate", "75"]));
    for (name, text) in [
        ("empty.json", ""),
        ("blank.json", "\n  \n"),
        ("object.json", "{}"),
        ("empty.toml", ""),
    ] {
        let file = write(dir.path(), name, text);
        let out = run(&["plan", "--config", &file, "--seed", "1", "--simulate", "75"]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(stdout(&out), bare, "{name}");
    }
}

/// `--config` given twice layers the files in order, each over the ones
/// before (the program's keys too); flags still override both. Before, the
/// second file silently replaced the first.
#[test]
fn config_files_given_twice_are_layered_in_order() {
    let dir = tmp();
    let site = write(
        dir.path(),
        "site.toml",
        "max_attempts = 4\nbackoff = \"constant\"\ninitial_delay = \"5ms\"\njitter = \"none\"\nretry_on = \"3\"\n",
    );
    let local = write(
        dir.path(),
        "local.json",
        r#"{"initial_delay": "7ms", "kill_after": "1s"}"#,
    );
    let plan = stdout(&run(&[
        "plan",
        "--config",
        &site,
        "--config",
        &local,
        "--seed",
        "1",
        "--simulate",
        "3",
    ]));
    assert!(
        plan.starts_with("policy: 4 attempt(s), constant 0.007s"),
        "{plan}"
    );
    assert_eq!(plan.matches("sleep 0.007s (curve)").count(), 3, "{plan}");
    // retry_on from the first file still holds: 4 stops at once.
    let plan = stdout(&run(&[
        "plan",
        "--config",
        &site,
        "--config",
        &local,
        "--seed",
        "1",
        "--simulate",
        "4",
    ]));
    assert!(plan.contains("give up: permanent"), "{plan}");
    // The later file wins where both set a key; a flag wins over both.
    let plan = stdout(&run(&[
        "plan",
        "--config",
        &local,
        "--config",
        &site,
        "--seed",
        "1",
        "--simulate",
        "3",
        "-n",
        "2",
    ]));
    assert!(
        plan.starts_with("policy: 2 attempt(s), constant 0.005s"),
        "{plan}"
    );
    // An error names the file it is in.
    let bad = write(dir.path(), "bad.toml", "factor = 3\n");
    let out = run(&["--config", &site, "--config", &bad, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains(&format!("{bad}:1:10: factor")),
        "{}",
        stderr(&out)
    );
}
