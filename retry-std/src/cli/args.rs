//! Command-line arguments: parsed with clap, laid over the program's defaults
//! and an optional `--config` file, then turned into a core [`RetryPolicy`]
//! (every number validated by the core's builder), a [`Classifier`], a [`Goal`]
//! and an optional explicit delay list.

use core::time::Duration;
use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use retry_core::duration_text::{parse_duration_with, BareNumber};
use retry_core::{Backoff, DurationParseError, Goal, HintMode, Jitter, PolicyError, RetryPolicy};

use super::config::{self, ProgramKeys};
use super::outcome::{parse_list, signal_number, Classifier, OutcomeList};

/// The text after the flags in `--help`.
const AFTER_HELP: &str = "\
DURATIONS
  500ms, 1m30s, 2h, 1.5s (units d h m s ms us ns, largest first). A number needs a
  unit: `--delay 2` is an error that asks for 2s or 2ms, because habits from
  `sleep 2` differ from config files, where a bare number is milliseconds. A bare
  number is never read as seconds anywhere; 0 needs no unit.

EXIT STATUS
  0 on success; otherwise the last attempt's own status (128+N if it died of signal
  N); 124 when the last attempt timed out or --max-time ran out; 125 for retry's
  own errors (bad flags or config); 126 command not executable, 127 command (or its
  #! interpreter) not found, neither retried. With --until-fail: the failing
  attempt's status, or 0 if every attempt succeeded. When retry itself is ended by
  a signal (INT, TERM, HUP, QUIT) it passes the signal on, waits for the command,
  and dies of the same signal; so does Ctrl-C or Ctrl-\\ that ended a command
  holding the terminal.

WHAT IS RETRIED
  Every non-zero exit code and timeouts; always 75 (EX_TEMPFAIL); never 64, 65, 77,
  78 (usage, data, permission and config errors), 126, 127; never a command killed
  by SIGINT (Ctrl-C) or SIGPIPE (its reader went away, as in `retry -- yes | head
  -n1`, which exits 141 after one attempt). --retry-on / --stop-on take exit codes,
  ranges (1-5), signal names (SIGTERM, TERM) and `timeout`; either replaces the
  defaults, a value in both stops, and SIGINT and SIGPIPE keep stopping unless
  --retry-on names them.

THE COMMAND'S ENVIRONMENT
  RETRY_ATTEMPT (1, 2, ...), RETRY_MAX_ATTEMPTS (empty when unlimited),
  RETRY_LAST_EXIT (empty on the first attempt), RETRY_DEADLINE_MS (when the attempt
  has a deadline) and RETRY_HINT_FILE, a fresh empty file per attempt. Before it
  fails, the command may write there:
    retry-after=SECONDS        wait at least this long (a number or an HTTP-date)
    retry-after-ms=MS          the same in milliseconds
    stop                       do not retry
    raw HTTP response headers  as `curl -D FILE` writes them: the last response's
                               retry-after-ms, else Retry-After (seconds or date)
  Lines that cannot be read are reported on stderr (and as a `hint_unreadable`
  event), never silently dropped. The wait is honoured at least (the longer of it
  and the policy's delay), capped at 5m unless a config file sets retry_after.

CURL RECIPE
  Retry while the server answers 429/5xx or the connection fails, waiting at least
  as long as its Retry-After (or retry-after-ms) asks:
    retry -n 6 -d 1s --max-time 2m -- \\
      sh -c 'curl -fsS -D \"$RETRY_HINT_FILE\" -o out.json https://example.com/api'
  curl -f exits 22 for every HTTP error, 404 included. To retry only 408, 429 and
  5xx, let a script decide (exit 75 retries, 78 stops):
    retry -n 6 -d 1s -- sh -c 'code=$(curl -sS -D \"$RETRY_HINT_FILE\" \\
        -o out.json -w %{http_code} https://example.com/api) || exit 75
      case $code in 2??) exit 0;; 408|429|5??) exit 75;; *) exit 78;; esac'

TERMINALS, PIPES AND JOB CONTROL
  The command runs directly (no shell) in its own process group. When retry runs in
  the foreground of a terminal, each attempt gets the terminal (it can prompt, read
  passwords, run stty) and retry takes it back, with its modes, when the attempt
  ends, on every exit path. Ctrl-Z stops the command and retry together (the shell
  shows the job stopped; `fg` continues both); time spent stopped counts neither
  against --timeout nor --max-time. INT, TERM, HUP and QUIT sent to retry are passed
  on to the command's group. Without --replay-stdin every attempt inherits retry's
  stdin as is (so only the first attempt sees data from a pipe); with it, stdin is
  read once and every attempt gets the same bytes.

EVENTS (JSON LINES)
  --events FILE (appended) or --events fd:N writes one JSON object per line, each
  with \"schema\": 1, \"event\", \"time\" (RFC 3339 UTC) and \"elapsed_ms\" (monotonic,
  since start): start, attempt_start, attempt_end, sleep, hint, hint_unreadable,
  stopped, continued, hook_failed, error, done, give_up. Human lines stay on stderr
  unless -q. --json alone sends the events to stderr instead of the human lines
  (the command's own stderr is mixed in there: prefer --events to parse them).
  `retry plan --json` prints the plan as JSON Lines on stdout.

CONFIG FILE (--config FILE: TOML, or JSON for *.json)
  Keys set in the file replace the program's defaults; keys it leaves out keep
  them (an empty file changes nothing); flags override the file. Keys and flags:
    max_attempts, max_retries    -n/--attempts, --retries
    backoff, initial_delay       --backoff, -d/--delay
    factor                       --factor
    increment                    (file only: the linear curve's step)
    max_delay, min_delay         --max-delay, --min-delay
    jitter                       --jitter
    delays                       --delays
    budget                       --max-time (which also sets cap_attempt_to_budget)
    attempt_timeout              -t/--timeout
    retry_on, stop_on            --retry-on, --stop-on
    retry_timeouts               (`timeout` in --retry-on / --stop-on)
    kill_after                   --kill-after
    until_fail, success_count    --until-fail, --success-count
    on_retry, on_give_up         --on-retry, --on-give-up
    resolution, retry_after, retry_after_min, retry_after_max, retry_after_cap,
    respect_retry_after, cap_attempt_to_budget, use_retry_budget, idempotent,
    wait_on_open_circuit         (file only; see retry_core::config)
  Durations in the file are text (\"500ms\") or whole milliseconds (500).
  Example (retry.toml):
    max_attempts = 8
    backoff = \"exponential\"
    initial_delay = \"500ms\"
    max_delay = \"30s\"
    jitter = \"full\"
    budget = \"5m\"
    attempt_timeout = \"1m\"
    retry_on = \"1,22,75,timeout\"

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
    after_help = "Run `retry --help` for durations, exit statuses, what is retried, the hint \
                  file, a curl recipe, events and the config file's keys.",
    after_long_help = AFTER_HELP,
    args_override_self = true
)]
struct Flags {
    /// Most attempts, the first included; 0 means no limit [default: 5].
    #[arg(short = 'n', long, value_name = "N")]
    attempts: Option<u32>,
    /// Most retries after the first attempt (N+1 attempts).
    #[arg(long, value_name = "N", conflicts_with_all = ["attempts", "forever"])]
    retries: Option<u32>,
    /// No attempt limit (the same as --attempts 0); bound it with --max-time.
    #[arg(long, conflicts_with = "attempts")]
    forever: bool,
    /// Backoff curve [default: exponential].
    #[arg(long, value_enum, value_name = "CURVE")]
    backoff: Option<BackoffKind>,
    /// Initial delay [default: 1s].
    #[arg(short = 'd', long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    delay: Option<Duration>,
    /// Growth factor of the exponential curve [default: 2].
    #[arg(long, value_name = "F", allow_hyphen_values = true)]
    factor: Option<f64>,
    /// Cap on every delay [default: 60s].
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    max_delay: Option<Duration>,
    /// Floor on every delay [default: 0].
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    min_delay: Option<Duration>,
    /// none, full, equal, decorrelated, subtract:F, add:F or spread:F [default: full].
    #[arg(long, value_name = "KIND", value_parser = parse_jitter)]
    jitter: Option<Jitter>,
    /// Exact delays instead of a curve, e.g. 1s,2s,5s (the last one repeats; no jitter).
    #[arg(long, value_name = "LIST", value_parser = parse_delays,
          conflicts_with_all = ["backoff", "delay", "factor", "max_delay", "min_delay", "jitter"])]
    delays: Option<DelayList>,
    /// Jitter seed, for reproducible delays [default: random].
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Total time budget: no sleep runs past it, and each attempt is cut at it.
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    max_time: Option<Duration>,
    /// Timeout of each attempt.
    #[arg(short = 't', long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    timeout: Option<Duration>,
    /// Grace between SIGTERM and SIGKILL when an attempt is stopped [default: 10s].
    #[arg(long, value_name = "D", value_parser = duration, allow_hyphen_values = true)]
    kill_after: Option<Duration>,
    /// Retry only these outcomes (codes, ranges, signal names, `timeout`).
    #[arg(long, value_name = "LIST", value_parser = parse_list)]
    retry_on: Option<OutcomeList>,
    /// Never retry these outcomes (beats --retry-on).
    #[arg(long, value_name = "LIST", value_parser = parse_list)]
    stop_on: Option<OutcomeList>,
    /// Run while the command succeeds; stop at its first failure (catch a flaky test).
    #[arg(long, conflicts_with = "success_count")]
    until_fail: bool,
    /// Stop only after N successes in a row (a failure starts the count again).
    #[arg(long, value_name = "N")]
    success_count: Option<u32>,
    /// Read stdin once and give every attempt the same bytes.
    #[arg(long)]
    replay_stdin: bool,
    /// Release stdout of a successful attempt only; failed attempts' goes to stderr.
    #[arg(long)]
    hold_stdout: bool,
    /// Shell command run (sh -c) before each retry, with the RETRY_* environment.
    #[arg(long, value_name = "CMD")]
    on_retry: Option<String>,
    /// Shell command run (sh -c) once retry gives up, with RETRY_* and RETRY_REASON.
    #[arg(long, value_name = "CMD")]
    on_give_up: Option<String>,
    /// Policy file (TOML, or JSON by extension .json); flags override it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// JSON Lines events to FILE (appended) or to fd:N; human lines stay on stderr.
    #[arg(long, value_name = "FILE|fd:N", value_parser = parse_events)]
    events: Option<Events>,
    /// JSON Lines events on stderr instead of the human lines (plan: JSON Lines on stdout).
    #[arg(long)]
    json: bool,
    /// No human lines on stderr.
    #[arg(short, long, conflicts_with = "verbose")]
    quiet: bool,
    /// Also report attempt starts, successes and hints.
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

/// A duration typed on the command line: the core's grammar, a unit required.
fn duration(text: &str) -> Result<Duration, String> {
    parse_duration_with(text, BareNumber::Refused).map_err(|e| duration_error(text, e))
}

/// The message for a duration the command line refused, spelling out both
/// readings of a bare number.
pub(super) fn duration_error(text: &str, error: DurationParseError) -> String {
    let t = text.trim();
    match error {
        DurationParseError::BareNumber => {
            format!("`{t}` has no unit: write {t}s for seconds or {t}ms for milliseconds")
        }
        other => format!("`{t}`: {other}"),
    }
}

/// An explicit `--delays` list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayList(pub Vec<Duration>);

pub(super) fn parse_delays(text: &str) -> Result<DelayList, String> {
    let delays = text
        .split(',')
        .map(duration)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DelayList(delays))
}

/// Where `--events` go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Events {
    /// A file, appended to.
    File(PathBuf),
    /// A descriptor `retry` inherited.
    Fd(i32),
    /// Standard error (`--json`).
    Stderr,
}

fn parse_events(text: &str) -> Result<Events, String> {
    if let Some(fd) = text.strip_prefix("fd:") {
        let n: i32 = fd
            .parse()
            .map_err(|_| format!("`{text}`: fd:N needs a descriptor number"))?;
        if n < 0 {
            return Err(format!("`{text}`: a descriptor number is not negative"));
        }
        return Ok(match n {
            2 => Events::Stderr,
            n => Events::Fd(n),
        });
    }
    if text.is_empty() {
        return Err("an empty file name".to_owned());
    }
    Ok(Events::File(PathBuf::from(text)))
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

/// How events are written (`--json`, plan only: JSON Lines on stdout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One human line per event.
    Text,
    /// JSON Lines.
    Json,
}

/// How much is written on stderr (human lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Nothing but retry's own errors.
    Quiet,
    /// One line per failed attempt and the final outcome.
    Normal,
    /// Also attempt starts, successes, hints and hooks.
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
    /// The validated policy (with `delays`, the list's delays replace its curve
    /// at run time).
    pub policy: RetryPolicy,
    /// How finished attempts are classified.
    pub classifier: Classifier,
    /// The outcome the run stops at.
    pub goal: Goal,
    /// An explicit delay list, if given.
    pub delays: Option<Vec<Duration>>,
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
    /// Shell command run once retry gives up.
    pub on_give_up: Option<String>,
    /// Where JSON events go, if anywhere.
    pub events: Option<Events>,
    /// The plan's format (and, for a run, whether `--json` was given).
    pub format: Format,
    /// How much to say in human lines.
    pub verbosity: Verbosity,
}

impl Invocation {
    /// The attempt limit, `None` when unlimited.
    #[must_use]
    pub const fn attempt_limit(&self) -> Option<u32> {
        match self.policy.max_attempts() {
            UNLIMITED => None,
            n => Some(n),
        }
    }
}

/// The attempt count that stands for "no limit": the most the counter holds
/// (more than a century of attempts at one a second).
pub const UNLIMITED: u32 = u32::MAX;

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
    pub(super) fn usage(message: impl Into<String>) -> CliError {
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

/// The program's defaults, the base a config file and the flags are laid over:
/// the core's default policy, with a command's hint file honoured in the core's
/// at-least mode (the longer of the hint and the curve, the hint capped at 5 min).
#[must_use]
pub fn program_defaults() -> RetryPolicy {
    RetryPolicy::default()
        .to_builder()
        .hints(HintMode::AT_LEAST_DEFAULT)
        .build()
        .unwrap_or_default()
}

fn invocation(flags: Flags, plan: bool) -> Result<Invocation, CliError> {
    let (base, keys) = match &flags.config {
        Some(path) => config::load(path, &program_defaults())?,
        None => (program_defaults(), ProgramKeys::default()),
    };
    let retry_on = flags.retry_on.or(keys.retry_on);
    let stop_on = flags.stop_on.or(keys.stop_on);
    let lists_given = retry_on.is_some() || stop_on.is_some();
    let classifier = Classifier::from_lists(retry_on, stop_on);
    let mut builder = base.to_builder();
    if flags.forever {
        builder = builder.max_attempts(UNLIMITED);
    }
    if let Some(n) = flags.attempts {
        builder = builder.max_attempts(if n == 0 { UNLIMITED } else { n });
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
    if lists_given {
        // The lists say whether timeouts retry; a config's retry_timeouts without
        // lists stays as it is.
        builder = builder.retry_timeouts(classifier.retries_timeouts());
    }
    let policy = builder.build().map_err(policy_error)?;
    let delays = match flags.delays.map(|d| d.0).or(keys.delays) {
        Some(list) if list.is_empty() => {
            return Err(CliError::usage("retry: --delays: an empty list"))
        }
        other => other,
    };
    let goal =
        if flags.until_fail || (keys.until_fail == Some(true) && flags.success_count.is_none()) {
            Goal::Failure
        } else {
            match flags.success_count.or(keys.success_count) {
                Some(0) => {
                    return Err(CliError::usage(
                        "retry: --success-count: must be at least 1",
                    ))
                }
                Some(n) => Goal::Successes(n),
                None => Goal::Success,
            }
        };
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
    let events = match (flags.events, flags.json) {
        (Some(events), _) => Some(events),
        (None, true) => Some(Events::Stderr),
        (None, false) => None,
    };
    Ok(Invocation {
        mode,
        policy,
        classifier,
        goal,
        delays,
        seed: flags.seed,
        kill_after: flags
            .kill_after
            .or(keys.kill_after)
            .unwrap_or(Duration::from_secs(10)),
        replay_stdin: flags.replay_stdin,
        hold_stdout: flags.hold_stdout,
        on_retry: flags.on_retry.or(keys.on_retry),
        on_give_up: flags.on_give_up.or(keys.on_give_up),
        events,
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

    fn parsed(args: &[&str]) -> Invocation {
        let argv = core::iter::once("retry").chain(args.iter().copied());
        match parse_args(argv) {
            Ok(inv) => inv,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    #[test]
    fn defaults_follow_the_brief() {
        let inv = parsed(&["--", "true"]);
        assert_eq!(inv.policy.max_attempts(), 5);
        assert_eq!(
            inv.policy.backoff(),
            Backoff::exponential(Duration::from_secs(1), 2.0)
        );
        assert_eq!(inv.policy.max_delay(), Duration::from_secs(60));
        assert_eq!(inv.policy.jitter(), Jitter::Full);
        assert_eq!(inv.policy.hints(), HintMode::AT_LEAST_DEFAULT);
        assert_eq!(inv.goal, Goal::Success);
        assert_eq!(inv.kill_after, Duration::from_secs(10));
        assert_eq!(inv.events, None);
        assert_eq!(
            inv.mode,
            Mode::Run {
                command: vec!["true".into()]
            }
        );
    }

    #[test]
    fn short_flags_and_unlimited_attempts() {
        let inv = parsed(&["-n", "7", "-d", "250ms", "-t", "3s", "-q", "--", "x"]);
        assert_eq!(inv.policy.max_attempts(), 7);
        assert_eq!(inv.policy.backoff().initial(), Duration::from_millis(250));
        assert_eq!(inv.policy.attempt_timeout(), Some(Duration::from_secs(3)));
        assert_eq!(inv.verbosity, Verbosity::Quiet);
        assert_eq!(parsed(&["-n", "0", "--", "x"]).attempt_limit(), None);
        assert_eq!(parsed(&["--forever", "--", "x"]).attempt_limit(), None);
        assert_eq!(parsed(&["--", "x"]).attempt_limit(), Some(5));
    }

    #[test]
    fn goals_delays_and_events() {
        assert_eq!(parsed(&["--until-fail", "--", "x"]).goal, Goal::Failure);
        assert_eq!(
            parsed(&["--success-count", "3", "--", "x"]).goal,
            Goal::Successes(3)
        );
        let inv = parsed(&["--delays", "1s,2s,500ms", "--", "x"]);
        assert_eq!(
            inv.delays,
            Some(vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_millis(500)
            ])
        );
        assert_eq!(
            parsed(&["--events", "fd:3", "--", "x"]).events,
            Some(Events::Fd(3))
        );
        assert_eq!(
            parsed(&["--events", "/tmp/e", "--", "x"]).events,
            Some(Events::File("/tmp/e".into()))
        );
        assert_eq!(parsed(&["--json", "--", "x"]).events, Some(Events::Stderr));
    }

    #[test]
    fn a_bare_number_on_the_command_line_shows_both_spellings() {
        match parse_args(["retry", "--delay", "2", "--", "x"]) {
            Err(CliError::Usage(message)) => {
                assert!(message.contains("--delay"), "{message}");
                assert!(message.contains("2s for seconds"), "{message}");
                assert!(message.contains("2ms for milliseconds"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        for flag in [
            "--max-time",
            "--timeout",
            "--max-delay",
            "--kill-after",
            "--delays",
        ] {
            assert!(
                matches!(
                    parse_args(["retry", flag, "1.5", "--", "x"]),
                    Err(CliError::Usage(_))
                ),
                "{flag}"
            );
        }
        assert_eq!(
            parsed(&["--delay", "0", "--", "x"])
                .policy
                .backoff()
                .initial(),
            Duration::ZERO
        );
    }

    #[test]
    fn bad_flags_name_the_flag() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["--attempts", "2", "--retries", "1", "--", "x"],
                "--retries",
            ),
            (&["--forever", "--attempts", "2", "--", "x"], "--attempts"),
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
            (&["--delays", "1s,,2s", "--", "x"], "--delays"),
            (
                &["--delays", "1s", "--jitter", "full", "--", "x"],
                "--jitter",
            ),
            (&["--success-count", "0", "--", "x"], "--success-count"),
            (
                &["--until-fail", "--success-count", "2", "--", "x"],
                "--success-count",
            ),
            (&["--events", "fd:x", "--", "x"], "--events"),
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
        let inv = parsed(&["plan", "--simulate", "1,timeout,0"]);
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
            "-n",
            "--retries",
            "--forever",
            "--delay",
            "-d",
            "--delays",
            "--factor",
            "--jitter",
            "--max-time",
            "--timeout",
            "-t",
            "--retry-on",
            "--stop-on",
            "--simulate",
            "--config",
            "--dry-run",
            "--json",
            "--events",
            "--until-fail",
            "--success-count",
            "--on-give-up",
            "fd:3",
            "fd:-1",
            "-q",
            "-v",
            "0",
            "1",
            "-1",
            "1s,2s",
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
