//! Command-line arguments: parsed with clap, then turned into a core
//! [`RetryPolicy`] (every number validated by the core's builder) and a
//! [`Classifier`].

use core::time::Duration;
use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use retry_core::{Backoff, HintMode, Jitter, PolicyError, RetryPolicy};

use super::duration::parse_duration;
use super::outcome::{parse_list, signal_number, Classifier, OutcomeList};

const AFTER_HELP: &str = "\
Durations: 500ms, 1m30s, 2h, 1.5s; a bare number is seconds (units ns us ms s m h d).

Exit status: 0 on success; otherwise the last attempt's own code (128+N if it died of
signal N); 124 when the last attempt timed out or --max-time ran out; 125 for retry's
own errors; 126 command not executable, 127 command not found (neither retried).

Default classification: retry every non-zero exit code and timeouts, always 75
(EX_TEMPFAIL), never 64, 65, 77, 78, 126, 127, never a child killed by SIGINT.
--retry-on / --stop-on take exit codes, ranges (1-5), signal names (SIGTERM, TERM)
and `timeout`; either replaces the defaults, and a value in both stops.

The command sees RETRY_ATTEMPT, RETRY_MAX_ATTEMPTS, RETRY_LAST_EXIT (empty on the
first attempt), RETRY_DEADLINE_MS (when the attempt has a deadline) and
RETRY_HINT_FILE: exit 75 after writing `retry-after=SECONDS` there to wait at least
that long, or write `stop` to end retrying.

Without --replay-stdin every attempt inherits retry's stdin as is (so only the
first attempt sees data from a pipe); with it, stdin is read once and every attempt
gets the same bytes. The command runs in its own process group: INT, TERM, HUP and
QUIT sent to retry are passed on to it, and retry then ends with the same signal.

`retry plan [OPTIONS]` (or --dry-run) prints the schedule without running anything.";

/// The curve names of `--backoff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackoffKind {
    /// No delay between attempts.
    None,
    /// The same delay every time.
    Constant,
    /// Grows by the initial delay each time.
    Linear,
    /// Multiplies by --factor each time.
    Exponential,
    /// Each delay the sum of the previous two.
    Fibonacci,
}

/// The flags, as clap reads them. Every policy flag is optional so that a
/// `--config` file's values stay unless a flag overrides them.
#[derive(Debug, Parser)]
#[command(
    name = "retry",
    version,
    about = "Run a command, retrying it under a backoff policy when it fails.",
    override_usage = "retry [OPTIONS] [--] COMMAND [ARGS]...\n       retry plan [OPTIONS]",
    after_help = AFTER_HELP,
    args_override_self = true
)]
struct Flags {
    /// Most attempts, the first included [default: 5].
    #[arg(long, value_name = "N")]
    attempts: Option<u32>,
    /// Most retries after the first attempt (N+1 attempts).
    #[arg(long, value_name = "N", conflicts_with = "attempts")]
    retries: Option<u32>,
    /// Backoff curve [default: exponential].
    #[arg(long, value_enum, value_name = "CURVE")]
    backoff: Option<BackoffKind>,
    /// Initial delay [default: 1s].
    #[arg(long, value_name = "D", value_parser = parse_duration, allow_hyphen_values = true)]
    delay: Option<Duration>,
    /// Growth factor of the exponential curve [default: 2].
    #[arg(long, value_name = "F", allow_hyphen_values = true)]
    factor: Option<f64>,
    /// Cap on every delay [default: 60s].
    #[arg(long, value_name = "D", value_parser = parse_duration, allow_hyphen_values = true)]
    max_delay: Option<Duration>,
    /// Floor on every delay [default: 0].
    #[arg(long, value_name = "D", value_parser = parse_duration, allow_hyphen_values = true)]
    min_delay: Option<Duration>,
    /// none, full, equal, decorrelated, subtract:F, add:F or spread:F [default: full].
    #[arg(long, value_name = "KIND", value_parser = parse_jitter)]
    jitter: Option<Jitter>,
    /// Jitter seed, for reproducible delays [default: random].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Total time budget: no sleep runs past it, and each attempt is cut at it.
    #[arg(long, value_name = "D", value_parser = parse_duration, allow_hyphen_values = true)]
    max_time: Option<Duration>,
    /// Timeout of each attempt.
    #[arg(long, value_name = "D", value_parser = parse_duration, allow_hyphen_values = true)]
    timeout: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL when an attempt is stopped.
    #[arg(long, value_name = "D", value_parser = parse_duration, default_value = "10s", allow_hyphen_values = true)]
    kill_after: Duration,
    /// Retry only these outcomes (codes, ranges, signal names, `timeout`).
    #[arg(long, value_name = "LIST", value_parser = parse_list)]
    retry_on: Option<OutcomeList>,
    /// Never retry these outcomes (beats --retry-on).
    #[arg(long, value_name = "LIST", value_parser = parse_list)]
    stop_on: Option<OutcomeList>,
    /// Read stdin once and give every attempt the same bytes.
    #[arg(long)]
    replay_stdin: bool,
    /// Release stdout of a successful attempt only; failed attempts' goes to stderr.
    #[arg(long)]
    hold_stdout: bool,
    /// Shell command run (sh -c) before each retry, with the RETRY_* environment.
    #[arg(long, value_name = "CMD")]
    on_retry: Option<String>,
    /// Policy file (TOML, or JSON by extension .json); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// JSON Lines events on stderr instead of text.
    #[arg(long)]
    json: bool,
    /// No text lines on stderr.
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
    /// Also report attempt starts and successes.
    #[arg(short, long)]
    verbose: bool,
    /// Print the schedule instead of running the command.
    #[arg(long)]
    dry_run: bool,
    /// Scripted outcomes for the plan, e.g. `1,1,75,0` or `timeout` (the last repeats).
    #[arg(long, value_name = "LIST", value_parser = parse_simulation)]
    simulate: Option<Simulated>,
    /// The command and its arguments.
    #[arg(value_name = "COMMAND", trailing_var_arg = true)]
    command: Vec<OsString>,
}

/// One scripted attempt of `--simulate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimulatedOutcome {
    /// Exits with this code (0 is success).
    Exit(i32),
    /// Dies of this signal.
    Signal(i32),
    /// Runs into its deadline.
    Timeout,
}

/// The `--simulate` list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Simulated(pub Vec<SimulatedOutcome>);

fn parse_simulation(text: &str) -> Result<Simulated, String> {
    text.split(',')
        .map(|item| {
            let word = item.trim();
            if word.eq_ignore_ascii_case("timeout") {
                Ok(SimulatedOutcome::Timeout)
            } else if let Ok(code) = word.parse::<u8>() {
                Ok(SimulatedOutcome::Exit(i32::from(code)))
            } else if let Some(signal) = signal_number(word) {
                Ok(SimulatedOutcome::Signal(signal))
            } else {
                Err(format!(
                    "`{word}` is not an exit code (0-255), a signal name or `timeout`"
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Simulated)
}

fn parse_jitter(text: &str) -> Result<Jitter, String> {
    let (kind, fraction) = match text.split_once(':') {
        Some((kind, f)) => (kind, Some(f)),
        None => (text, None),
    };
    let fraction_of = |name: &str| -> Result<f64, String> {
        let f = fraction.ok_or_else(|| format!("{name} needs a fraction, e.g. {name}:0.1"))?;
        let value: f64 = f
            .trim()
            .parse()
            .map_err(|_| format!("`{f}` is not a number"))?;
        if (0.0..=1.0).contains(&value) {
            Ok(value)
        } else {
            Err(format!("the fraction must lie in [0, 1], got {f}"))
        }
    };
    let plain = |jitter: Jitter| {
        if fraction.is_some() {
            Err(format!("{} takes no fraction", jitter.name()))
        } else {
            Ok(jitter)
        }
    };
    match kind.trim() {
        "none" => plain(Jitter::None),
        "full" => plain(Jitter::Full),
        "equal" => plain(Jitter::Equal),
        "decorrelated" => plain(Jitter::Decorrelated),
        "subtract" => fraction_of("subtract").map(Jitter::Subtract),
        "add" => fraction_of("add").map(Jitter::Add),
        "spread" => fraction_of("spread").map(Jitter::Spread),
        other => Err(format!(
            "unknown jitter `{other}` (none, full, equal, decorrelated, subtract:F, add:F, spread:F)"
        )),
    }
}

/// How events are written on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One human line per event.
    Text,
    /// JSON Lines, each with `"schema": 1`.
    Json,
}

/// How much is written on stderr (text format).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Nothing but retry's own errors.
    Quiet,
    /// One line per failed attempt and the final outcome.
    Normal,
    /// Also attempt starts, successes and hooks.
    Verbose,
}

/// What to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Run the command.
    Run {
        /// The program and its arguments.
        command: Vec<OsString>,
    },
    /// Print the schedule (`retry plan` or `--dry-run`).
    Plan {
        /// Scripted outcomes (empty: every attempt fails retryably).
        script: Vec<SimulatedOutcome>,
    },
}

/// A parsed command line.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    /// What to do.
    pub mode: Mode,
    /// The validated policy.
    pub policy: RetryPolicy,
    /// How finished attempts are classified.
    pub classifier: Classifier,
    /// The jitter seed, if fixed.
    pub seed: Option<u64>,
    /// Grace between SIGTERM and SIGKILL.
    pub kill_after: Duration,
    /// Buffer stdin once and replay it to every attempt.
    pub replay_stdin: bool,
    /// Hold each attempt's stdout until it succeeds.
    pub hold_stdout: bool,
    /// Shell command run before each retry.
    pub on_retry: Option<String>,
    /// Event format.
    pub format: Format,
    /// How much to say.
    pub verbosity: Verbosity,
}

/// Why the command line cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags or config: exit 125, the message on stderr.
    #[error("{0}")]
    Usage(String),
    /// `--help` or `--version`: exit 0, the text on stdout.
    #[error("{0}")]
    Info(String),
}

impl CliError {
    fn usage(message: impl Into<String>) -> CliError {
        CliError::Usage(message.into())
    }

    /// The exit code this error ends the program with.
    #[must_use]
    pub const fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 125,
            CliError::Info(_) => 0,
        }
    }
}

/// Parses a whole command line, `argv[0]` included. Never panics, whatever the
/// arguments.
///
/// # Errors
/// [`CliError::Usage`] naming the bad flag, or [`CliError::Info`] for help/version.
pub fn parse_args<I, T>(args: I) -> Result<Invocation, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if args.is_empty() {
        args.push("retry".into());
    }
    let plan = args.get(1).is_some_and(|a| a == "plan");
    if plan {
        args.remove(1);
        if let Some(first) = args.first_mut() {
            *first = "retry plan".into();
        }
    }
    let flags = Flags::try_parse_from(args).map_err(|e| {
        use clap::error::ErrorKind;
        let text = e.render().to_string();
        match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => CliError::Info(text),
            _ => CliError::Usage(text.trim_end().to_owned()),
        }
    })?;
    invocation(flags, plan)
}

fn invocation(flags: Flags, plan: bool) -> Result<Invocation, CliError> {
    let lists_given = flags.retry_on.is_some() || flags.stop_on.is_some();
    let classifier = Classifier::from_lists(flags.retry_on, flags.stop_on);
    let base = match &flags.config {
        Some(path) => super::config::load(path)?,
        None => RetryPolicy::default(),
    };
    // A child's hint file is honoured in the core's at-least mode, unless a config
    // file chose how hints work.
    let mut builder = match &flags.config {
        Some(_) => base.to_builder(),
        None => base.to_builder().hints(HintMode::AT_LEAST_DEFAULT),
    };
    if let Some(n) = flags.attempts {
        builder = builder.max_attempts(n);
    }
    if let Some(n) = flags.retries {
        builder = builder.max_retries(n);
    }
    if let Some(backoff) = backoff(&flags, base.backoff())? {
        builder = builder.backoff(backoff);
    }
    if let Some(d) = flags.max_delay {
        builder = builder.max_delay(d);
    }
    if let Some(d) = flags.min_delay {
        builder = builder.min_delay(d);
    }
    if let Some(j) = flags.jitter {
        builder = builder.jitter(j);
    }
    if let Some(d) = flags.max_time {
        builder = builder.budget(d).cap_attempt_to_budget(true);
    }
    if let Some(d) = flags.timeout {
        builder = builder.attempt_timeout(d);
    }
    if lists_given || flags.config.is_none() {
        builder = builder.retry_timeouts(classifier.retries_timeouts());
    }
    let policy = builder.build().map_err(policy_error)?;
    let mode = if plan || flags.dry_run {
        if plan && !flags.command.is_empty() {
            return Err(CliError::usage(
                "retry plan: takes no command (use --dry-run with a command)",
            ));
        }
        Mode::Plan {
            script: flags.simulate.unwrap_or_default().0,
        }
    } else {
        if flags.simulate.is_some() {
            return Err(CliError::usage(
                "--simulate: only applies to --dry-run or `retry plan`",
            ));
        }
        if flags.command.is_empty() {
            return Err(CliError::usage(
                "retry: no command given\nUsage: retry [OPTIONS] [--] COMMAND [ARGS]...\nFor more information, try '--help'.",
            ));
        }
        Mode::Run {
            command: flags.command,
        }
    };
    Ok(Invocation {
        mode,
        policy,
        classifier,
        seed: flags.seed,
        kill_after: flags.kill_after,
        replay_stdin: flags.replay_stdin,
        hold_stdout: flags.hold_stdout,
        on_retry: flags.on_retry,
        format: if flags.json {
            Format::Json
        } else {
            Format::Text
        },
        verbosity: if flags.quiet {
            Verbosity::Quiet
        } else if flags.verbose {
            Verbosity::Verbose
        } else {
            Verbosity::Normal
        },
    })
}

/// The curve the flags ask for, or `None` to keep the base policy's.
fn backoff(flags: &Flags, base: Backoff) -> Result<Option<Backoff>, CliError> {
    if flags.backoff.is_none() && flags.delay.is_none() && flags.factor.is_none() {
        return Ok(None);
    }
    let kind = flags.backoff.unwrap_or(match base {
        Backoff::None => BackoffKind::None,
        Backoff::Constant { .. } => BackoffKind::Constant,
        Backoff::Linear { .. } => BackoffKind::Linear,
        Backoff::Exponential { .. } => BackoffKind::Exponential,
        Backoff::Fibonacci { .. } => BackoffKind::Fibonacci,
    });
    let base_initial = match base.initial() {
        d if d.is_zero() => Duration::from_secs(1),
        d => d,
    };
    let initial = flags.delay.unwrap_or(base_initial);
    if flags.factor.is_some() && kind != BackoffKind::Exponential {
        return Err(CliError::usage(
            "retry: --factor only applies to --backoff exponential",
        ));
    }
    let factor = match (flags.factor, base) {
        (Some(f), _) => f,
        (None, Backoff::Exponential { factor, .. }) => factor,
        (None, _) => 2.0,
    };
    Ok(Some(match kind {
        BackoffKind::None => Backoff::None,
        BackoffKind::Constant => Backoff::constant(initial),
        BackoffKind::Linear => match base {
            Backoff::Linear { increment, .. } if flags.delay.is_none() => {
                Backoff::linear_by(initial, increment)
            }
            _ => Backoff::linear(initial),
        },
        BackoffKind::Exponential => Backoff::exponential(initial, factor),
        BackoffKind::Fibonacci => Backoff::fibonacci(initial),
    }))
}

/// A core validation error, told in terms of the flag that caused it.
fn policy_error(error: PolicyError) -> CliError {
    let flag = match error.field() {
        "max_attempts" => "--attempts",
        "max_retries" => "--retries",
        "factor" => "--factor",
        "jitter" => "--jitter",
        "min_delay" => "--min-delay",
        "budget" => "--max-time",
        "attempt_timeout" => "--timeout",
        _ => "--config",
    };
    CliError::usage(format!("retry: {flag}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_configuration_is_sound() {
        use clap::CommandFactory;
        Flags::command().debug_assert();
    }

    #[test]
    fn defaults_follow_the_brief() {
        let inv = parse_args(["retry", "--", "true"]);
        let Ok(inv) = inv else {
            panic!("{inv:?}");
        };
        assert_eq!(inv.policy.max_attempts(), 5);
        assert_eq!(
            inv.policy.backoff(),
            Backoff::exponential(Duration::from_secs(1), 2.0)
        );
        assert_eq!(inv.policy.max_delay(), Duration::from_secs(60));
        assert_eq!(inv.policy.jitter(), Jitter::Full);
        assert_eq!(inv.policy.hints(), HintMode::AT_LEAST_DEFAULT);
        assert_eq!(
            inv.mode,
            Mode::Run {
                command: vec!["true".into()]
            }
        );
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (&["--attempts", "0", "--", "x"], "--attempts"),
            (
                &["--attempts", "2", "--retries", "1", "--", "x"],
                "--retries",
            ),
            (&["--delay", "soon", "--", "x"], "--delay"),
            (&["--factor", "0.5", "--", "x"], "--factor"),
            (
                &["--backoff", "linear", "--factor", "3", "--", "x"],
                "--factor",
            ),
            (&["--jitter", "spread:2", "--", "x"], "--jitter"),
            (&["--timeout", "0", "--", "x"], "--timeout"),
            (&["--max-time", "0s", "--", "x"], "--max-time"),
            (
                &["--min-delay", "2m", "--max-delay", "1m", "--", "x"],
                "--min-delay",
            ),
            (&["--retry-on", "1,nope", "--", "x"], "--retry-on"),
            (&["--simulate", "1", "--", "x"], "--simulate"),
        ];
        for (args, flag) in cases {
            let argv = core::iter::once("retry").chain(args.iter().copied());
            match parse_args(argv) {
                Err(CliError::Usage(message)) => assert!(message.contains(flag), "{message}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn plan_mode() {
        let inv = parse_args(["retry", "plan", "--simulate", "1,timeout,0"]);
        let Ok(inv) = inv else {
            panic!("{inv:?}");
        };
        assert_eq!(
            inv.mode,
            Mode::Plan {
                script: vec![
                    SimulatedOutcome::Exit(1),
                    SimulatedOutcome::Timeout,
                    SimulatedOutcome::Exit(0)
                ]
            }
        );
    }

    #[test]
    fn no_argv_panics() {
        use std::os::unix::ffi::OsStringExt;
        let tokens: Vec<OsString> = [
            "plan",
            "--",
            "-",
            "--attempts",
            "--retries",
            "--delay",
            "--factor",
            "--jitter",
            "--max-time",
            "--timeout",
            "--retry-on",
            "--stop-on",
            "--simulate",
            "--config",
            "--dry-run",
            "--json",
            "-q",
            "-v",
            "0",
            "1",
            "-1",
            "4294967296",
            "1e999",
            "NaN",
            "inf",
            "add:",
            "spread:0.5",
            "subtract:-0",
            "1-",
            "-5",
            "SIG",
            "timeout,",
            "1m30",
            "99999999999h",
            "0.0000000001ns",
            "µs",
            "",
            " ",
            "=",
            "--delay=",
            "--help",
            "--version",
            "--backoff",
            "fibonacci",
            "none",
        ]
        .iter()
        .map(OsString::from)
        .chain([
            OsString::from_vec(vec![0xff, 0xfe]),
            OsString::from_vec(vec![b'-', b'-', 0x80]),
        ])
        .collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let mut argv = vec![OsString::from("retry")];
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let len = (state >> 60) as usize;
            for _ in 0..len {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                let pick = (state >> 33) as usize % tokens.len();
                argv.push(tokens[pick].clone());
            }
            let _ = parse_args(argv);
        }
    }
}
