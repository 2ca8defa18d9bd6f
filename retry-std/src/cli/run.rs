//! The run loop: the core [`RetryMachine`] decides, this loop spawns, waits and
//! sleeps.

use core::time::Duration;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant as WallInstant;

use retry_core::{Action, Event, GiveUpReason, Instant, RetryMachine};

use super::args::Invocation;
use super::output::{describe, Reporter};
use super::process::{self, Ending, Input, Launch, Output};
use super::signals;
use retry_core::ChildHint;

/// How a run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Exit with this status.
    Code(i32),
    /// Die of this signal (it was sent to `retry` and passed on).
    Signal(i32),
}

/// A fresh, empty hint file for one attempt, removed when dropped.
struct HintFile(PathBuf);

impl HintFile {
    fn create(attempt: u32) -> Option<HintFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::env::temp_dir();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for salt in 0..16u32 {
            let name = format!(
                "retry-hint-{}-{attempt}-{stamp:x}-{salt}",
                std::process::id()
            );
            let path = dir.join(name);
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            if created.is_ok() {
                return Some(HintFile(path));
            }
        }
        None
    }

    fn read(&self) -> Option<ChildHint> {
        let mut text = String::new();
        let file = std::fs::File::open(&self.0).ok()?;
        file.take(4096).read_to_string(&mut text).ok()?;
        ChildHint::parse(&text)
    }
}

impl Drop for HintFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A seed from the OS's hash randomness, the time and the process id.
fn random_seed() -> u64 {
    use core::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// Runs `command` under the invocation's policy.
pub fn run(invocation: &Invocation, command: &[OsString]) -> Exit {
    let policy = invocation.policy;
    let reporter = Reporter {
        format: invocation.format,
        verbosity: invocation.verbosity,
        max_attempts: policy.max_attempts(),
        budget: policy.budget(),
    };
    if let Err(error) = signals::install() {
        reporter.error(&format!("cannot catch signals: {error}"));
        return Exit::Code(125);
    }
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
    let seed = invocation.seed.unwrap_or_else(random_seed);
    let start = WallInstant::now();
    let now = || Instant::from_duration(start.elapsed());
    let mut machine = RetryMachine::new(&policy, seed);
    let mut action = machine.poll(Event::Start, now());
    let mut last_status: Option<i32> = None;
    let mut received: Option<i32> = None;
    loop {
        if received.is_none() {
            received = signals::take();
        }
        if received.is_some() && !action.is_terminal() {
            action = machine.poll(Event::Cancelled, now());
        }
        match action {
            Action::Attempt {
                number, deadline, ..
            } => {
                if number > 1 {
                    if let Some(hook) = &invocation.on_retry {
                        let hook_signal = run_hook(hook, number, &policy, last_status, &reporter);
                        if hook_signal.is_some() {
                            received = hook_signal;
                            continue;
                        }
                    }
                }
                let wall_deadline = deadline.map(|d| start + d.as_duration());
                let deadline_in = deadline.map(|d| d.saturating_duration_since(now()));
                reporter.attempt_start(number, deadline_in);
                let hint_file = HintFile::create(number);
                let mut env = attempt_env(number, policy.max_attempts(), last_status, deadline_in);
                if let Some(hint) = &hint_file {
                    env.push(("RETRY_HINT_FILE", hint.0.clone().into_os_string()));
                }
                let began = WallInstant::now();
                let finished = process::run(Launch {
                    argv: command,
                    env,
                    input: input.clone(),
                    output: if invocation.hold_stdout {
                        Output::Hold
                    } else {
                        Output::Inherit
                    },
                    deadline: wall_deadline,
                    kill_after: invocation.kill_after,
                });
                let took = began.elapsed();
                let ending = finished.ending;
                last_status = Some(ending.status_code());
                if let Some(error) = &finished.error {
                    reporter.error(&format!(
                        "{}: {} ({error})",
                        command
                            .first()
                            .map(|c| c.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                        describe(ending),
                    ));
                }
                if let Some(bytes) = &finished.stdout {
                    let _ = if ending == Ending::Exited(0) {
                        std::io::stdout().lock().write_all(bytes)
                    } else {
                        std::io::stderr().lock().write_all(bytes)
                    };
                }
                let event = match ending {
                    Ending::Exited(code) => match invocation
                        .classifier
                        .exit_failure(code, hint_file.as_ref().and_then(HintFile::read))
                    {
                        Some(failure) => Event::Failed(failure),
                        None => Event::Succeeded,
                    },
                    Ending::Signalled(signal) => {
                        Event::Failed(invocation.classifier.signal_failure(signal))
                    }
                    Ending::TimedOut => Event::TimedOut,
                    Ending::Interrupted(signal) => {
                        received = received.or(Some(signal));
                        Event::Cancelled
                    }
                    Ending::NotStarted(code) => Event::Failed(
                        retry_core::Failure::permanent()
                            .with_kind(retry_core::FailureKind::Exit(code)),
                    ),
                };
                if let Some(signal) = finished.interrupted_by {
                    received = received.or(Some(signal));
                }
                drop(hint_file);
                action = machine.poll(event, now());
                reporter.attempt_end(number, ending, took, &action, elapsed(start));
            }
            Action::Sleep { until, .. } => {
                let wake = start + until.as_duration();
                loop {
                    if let Some(signal) = signals::take() {
                        received = Some(signal);
                        break;
                    }
                    let left = wake.saturating_duration_since(WallInstant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(10)));
                }
                if received.is_none() {
                    action = machine.poll(Event::Woke, now());
                }
            }
            Action::Withdraw { .. } => {
                // The command line has no shared retry budget.
                action = machine.poll(Event::Granted, now());
            }
            Action::Done { attempts } => {
                reporter.done(attempts, elapsed(start));
                return Exit::Code(0);
            }
            Action::GiveUp(give_up) => {
                if let (GiveUpReason::Cancelled, Some(signal)) = (give_up.reason, received) {
                    reporter.give_up(&give_up, 128_i32.saturating_add(signal), elapsed(start));
                    return Exit::Signal(signal);
                }
                let code = match give_up.reason {
                    GiveUpReason::TimedOut { .. } | GiveUpReason::Budget => 124,
                    _ => last_status.unwrap_or(1),
                };
                reporter.give_up(&give_up, code, elapsed(start));
                return Exit::Code(code);
            }
        }
    }
}

fn elapsed(start: WallInstant) -> Duration {
    start.elapsed()
}

/// The `RETRY_*` environment of an attempt or hook.
fn attempt_env(
    number: u32,
    max_attempts: u32,
    last_status: Option<i32>,
    deadline_in: Option<Duration>,
) -> Vec<(&'static str, OsString)> {
    let mut env = vec![
        ("RETRY_ATTEMPT", number.to_string().into()),
        ("RETRY_MAX_ATTEMPTS", max_attempts.to_string().into()),
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

/// Runs the `--on-retry` hook before attempt `number`. Returns the signal sent to
/// `retry` meanwhile, if any.
fn run_hook(
    hook: &str,
    number: u32,
    policy: &retry_core::RetryPolicy,
    last_status: Option<i32>,
    reporter: &Reporter,
) -> Option<i32> {
    let argv: Vec<OsString> = vec!["sh".into(), "-c".into(), hook.into()];
    let finished = process::run(Launch {
        argv: &argv,
        env: attempt_env(number, policy.max_attempts(), last_status, None),
        input: Input::Null,
        output: Output::Stderr,
        deadline: None,
        kill_after: Duration::from_secs(1),
    });
    match finished.ending {
        Ending::Exited(0) => {}
        Ending::Interrupted(signal) => return Some(signal),
        other => reporter.hook_failed(&describe(other)),
    }
    if let Some(error) = &finished.error {
        reporter.hook_failed(&format!("could not start: {error}"));
    }
    finished.interrupted_by
}
