//! Command-line arguments: read by a small hand-written parser (a table of
//! flags, [`FLAGS`], from which `--help` is written too), laid over the
//! program's defaults and an optional `--config` file, then turned into a core
//! [`RetryPolicy`] (every number validated by the core's builder), a
//! [`Classifier`], a [`Goal`] and an optional explicit delay list.
//!
//! The parser does only what the given flags ask for: `retry -- true` reads two
//! words, allocates next to nothing and touches no configuration file, which
//! keeps the program's start-up close to that of a C program.

use core::time::Duration;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use retry_core::{
    Backoff, DurationParseError, Goal, HintMode, Jitter, PolicyError, RetryPolicy,
    RetryPolicyBuilder,
};

use super::config::{self, ProgramKeys};
use super::duration::parse_duration;
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
  attempt's status, or 0 if every attempt succeeded. When retry itself gets INT,
  TERM, HUP or QUIT (a key at its terminal, or a kill), it stops retrying, passes
  the signal on to the command if the command did not get it too, waits for it
  (at most --kill-after), and dies of the same signal, so that a calling script
  stops too.

WHAT IS RETRIED
  Every non-zero exit code and timeouts; always 75 (EX_TEMPFAIL); never 64, 65, 77,
  78 (usage, data, permission and config errors), 126, 127; never a command killed
  by SIGINT (Ctrl-C) or SIGPIPE (its reader went away, as in `retry -- yes | head
  -n1`, which exits 141 after one attempt); never anything once retry itself got
  SIGINT, whatever the command's status (a command that traps Ctrl-C and exits 130
  is not retried). --retry-on / --stop-on take exit codes, ranges (1-5), signal
  names (SIGTERM, TERM) and `timeout`; either replaces the defaults, a value in
  both stops, and SIGINT and SIGPIPE keep stopping unless --retry-on names them.

JITTER
  By default a delay is jittered equally: between half of it and all of it (`-d
  5s` waits 2.5s to 5s), never shorter, so that many clients retrying together
  spread out without any retrying at once. The status line, the `sleep` event
  and `retry plan` show the interval each delay was drawn from. --jitter none
  keeps delays exact; full (0 to the delay) is the libraries' default.

THE COMMAND'S ENVIRONMENT
  RETRY_ATTEMPT (1, 2, ...), RETRY_MAX_ATTEMPTS (empty when unlimited),
  RETRY_LAST_EXIT (empty on the first attempt), RETRY_DEADLINE_MS (when the attempt
  has a deadline) and RETRY_HINT_FILE, a fresh empty file per attempt: write to it.
  A retry that is not root keeps it in memory, named under /proc/<retry's
  pid>/fd/ (nothing on disk; it cannot be removed or replaced by renaming), which
  only the same user (or root) can open: a command that switches to another user
  (sudo -u, su, setpriv, runuser) cannot write it there (Permission denied), so
  run retry inside the switch. A retry that is root, which commands often leave
  for another user, gives each attempt a file in a directory of its own instead
  (/dev/shm/retry-<pid>-<random>, or under TMPDIR; mode 0711, the file 0622 under
  a random name: only root can list the directory or read the file, so only a
  process given the name can write it), removed when retry ends
  (not if it is killed with SIGKILL); sudo passes the variable on with
  --preserve-env=RETRY_HINT_FILE. The command sees no other descriptor of
  retry's: only 0, 1, 2 and those its caller passed (--events fd:N excepted).
  Before it fails, the command may write in the hint file:
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
  The command runs directly (no shell). With a controlling terminal, every attempt
  runs in retry's own process group, the job's, as with `timeout --foreground`:
  a pager (`retry ... | less`) or a reader (`cat | retry ...`) in the same
  pipeline keeps the terminal; the terminal's keys reach the shell, retry and the
  command together, so Ctrl-C in a script's loop of retry calls ends the loop
  (retry dies of SIGINT, or QUIT for Ctrl-\\), and Ctrl-Z stops the whole job,
  which `fg` continues. The trade-offs: a Ctrl-C at retry's terminal always ends
  the run, even for a command that handles it and carries on (a REPL); and with no
  process group of its own to signal, retry finds the attempt's processes in
  /proc (without /proc it reaches only the command itself). Without a terminal
  (cron, CI, a service), each attempt gets a process group of its own.
  Either way retry is the subreaper of what it runs: a process whose parent exits
  (a grandchild, a daemon that double-forked or called setsid) becomes retry's
  child. After a timeout, and when retry gets INT, TERM, HUP or QUIT, every
  process of the attempt gets the signal (SIGTERM for a timeout), what is left
  after --kill-after gets SIGKILL, and none is left when retry exits; what an
  earlier attempt left running when it ended normally is not touched. Time spent
  stopped counts neither against --timeout nor --max-time. After an attempt retry
  ended (a timeout, a signal), it puts back the terminal's modes if the attempt
  left them changed (a password prompt killed with echo off). Without
  --replay-stdin every attempt inherits retry's stdin as is (so only the first
  attempt sees data from a pipe); with it, stdin is read once and every attempt
  gets the same bytes.

SIGNALS STARTED IGNORED
  A signal retry was started with ignored stays ignored, for retry and for the
  command: SIGHUP under nohup, and SIGINT and SIGQUIT for a background job of a
  script (POSIX has a shell without job control start those with INT and QUIT
  ignored, so that a Ctrl-C meant for the foreground does not reach them).
  retry neither reacts to such a signal nor passes it on. To have it end the run,
  start retry with the signal at its default: `env --default-signal=INT,QUIT
  retry ... &` (coreutils 8.31 or later), or in bash `(trap - INT QUIT; exec
  retry ...) &`.

EVENTS (JSON LINES)
  --events FILE (appended) or --events fd:N writes one JSON object per line, each
  with \"schema\": 2, \"event\", \"time\" (RFC 3339 UTC) and \"elapsed_ms\" (monotonic,
  since retry started): start, attempt_start, attempt_end, sleep, hint,
  hint_unreadable, stopped, continued, hook_failed, error, done, give_up. The
  start event's \"seed\" is a string of digits (a JSON number above 2^53 would be
  rounded): `--seed \"$(jq -r .seed events.jsonl | head -n1)\"`, or jq's quoted
  output as is, replays the same delays. A jittered `sleep` carries delay_min_ms
  and delay_max_ms. Human lines stay on stderr unless -q. --json alone sends the
  events to stderr instead of the human lines (the command's own stderr is mixed
  in there: prefer --events to parse them). `retry plan --json` prints the plan as
  JSON Lines on stdout (\"schema\": 3).

CONFIG FILE (--config FILE: TOML, or JSON for *.json)
  Keys set in the file replace the program's defaults; keys it leaves out keep
  them (an empty file, TOML or JSON, changes nothing); flags override the file.
  --config may be given more than once: the files are layered in the order given,
  each over the ones before. Keys and flags:
    max_attempts, max_retries    -n/--attempts, --retries
    backoff, initial_delay       --backoff, -d/--delay
    factor                       --factor
    increment                    (file only: the linear curve's step)
    max_delay, min_delay         --max-delay, --min-delay
    jitter                       --jitter
    delays                       --delays
    budget                       --max-time (attempts are cut at the budget too,
                                 unless the file sets cap_attempt_to_budget)
    attempt_timeout              -t/--timeout
    retry_on, stop_on            --retry-on, --stop-on
    retry_timeouts               (`timeout` in --retry-on / --stop-on)
    kill_after                   --kill-after
    until_fail, success_count    --until-fail, --success-count
    on_retry, on_give_up         --on-retry, --on-give-up
    resolution, retry_after, retry_after_min, retry_after_max, retry_after_cap,
    respect_retry_after, cap_attempt_to_budget, use_retry_budget, idempotent,
    wait_on_open_circuit         (file only; see retry_core::config)
  Durations in the file are text with a unit (\"500ms\") or bare numbers of
  milliseconds (500); a quoted number without a unit (\"500\") is an error, as
  `--delay 500` is. Every error names the file, the line and the column.
  Example (retry.toml):
    max_attempts = 8
    backoff = \"exponential\"
    initial_delay = \"500ms\"
    max_delay = \"30s\"
    jitter = \"equal\"
    budget = \"5m\"
    attempt_timeout = \"1m\"
    retry_on = \"1,22,75,timeout\"

`retry plan [OPTIONS]` (or --dry-run) prints the schedule without running anything.";

/// The curve names of `--backoff`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

impl BackoffKind {
    /// The curve named `name` (as `--backoff` spells it).
    fn named(name: &str) -> Option<BackoffKind> {
        Some(match name {
            "none" => BackoffKind::None,
            "constant" => BackoffKind::Constant,
            "linear" => BackoffKind::Linear,
            "exponential" => BackoffKind::Exponential,
            "fibonacci" => BackoffKind::Fibonacci,
            _ => return None,
        })
    }
}

/// One flag of the command line: its names, the name of its value (`None`: a
/// switch) and its line in `--help`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlagSpec {
    /// The one-letter form (`-n`), if any.
    pub short: Option<char>,
    /// The long form, without the dashes (`attempts` for `--attempts`).
    pub long: &'static str,
    /// The value's name in `--help` (`N`, `D`, `LIST`), or `None` for a switch.
    pub value: Option<&'static str>,
    /// The flag's line in `--help`.
    pub help: &'static str,
}

const fn flag(
    short: Option<char>,
    long: &'static str,
    value: Option<&'static str>,
    help: &'static str,
) -> FlagSpec {
    FlagSpec {
        short,
        long,
        value,
        help,
    }
}

/// Every flag, in the order `--help` lists them.
pub const FLAGS: &[FlagSpec] = &[
    flag(Some('n'), "attempts", Some("N"), "Most attempts, the first included; 0 means no limit [default: 5]"),
    flag(None, "retries", Some("N"), "Most retries after the first attempt (N+1 attempts)"),
    flag(None, "forever", None, "No attempt limit (the same as --attempts 0); bound it with --max-time"),
    flag(None, "backoff", Some("CURVE"), "Backoff curve: none, constant, linear (grows by the initial delay), exponential (times --factor) or fibonacci [default: exponential]"),
    flag(Some('d'), "delay", Some("D"), "Initial delay [default: 1s]"),
    flag(None, "factor", Some("F"), "Growth factor of the exponential curve [default: 2]"),
    flag(None, "max-delay", Some("D"), "Cap on every delay [default: 60s]"),
    flag(None, "min-delay", Some("D"), "Floor on every delay [default: 0]"),
    flag(None, "jitter", Some("KIND"), "none, full, equal, decorrelated, subtract:F, add:F or spread:F [default: equal: half the delay to all of it]"),
    flag(None, "delays", Some("LIST"), "Exact delays instead of a curve, e.g. 1s,2s,5s (the last one repeats; no jitter)"),
    flag(None, "seed", Some("N"), "Jitter seed, for reproducible delays: decimal, 0x hex, or the start event's quoted string [default: random]"),
    flag(None, "max-time", Some("D"), "Total time budget: no sleep runs past it, and each attempt is cut at it"),
    flag(Some('t'), "timeout", Some("D"), "Timeout of each attempt"),
    flag(None, "kill-after", Some("D"), "Grace between SIGTERM and SIGKILL when an attempt is stopped [default: 10s]"),
    flag(None, "retry-on", Some("LIST"), "Retry only these outcomes (codes, ranges, signal names, `timeout`)"),
    flag(None, "stop-on", Some("LIST"), "Never retry these outcomes (beats --retry-on)"),
    flag(None, "until-fail", None, "Run while the command succeeds; stop at its first failure (catch a flaky test)"),
    flag(None, "success-count", Some("N"), "Stop only after N successes in a row (a failure starts the count again)"),
    flag(None, "replay-stdin", None, "Read stdin once and give every attempt the same bytes"),
    flag(None, "hold-stdout", None, "Release stdout of a successful attempt only; failed attempts' goes to stderr"),
    flag(None, "on-retry", Some("CMD"), "Shell command run (sh -c) before each retry, with the RETRY_* environment"),
    flag(None, "on-give-up", Some("CMD"), "Shell command run (sh -c) once retry gives up, with RETRY_* and RETRY_REASON"),
    flag(None, "config", Some("FILE"), "Policy file (TOML, or JSON by extension .json); given twice, layered in order; flags override it"),
    flag(None, "events", Some("FILE|fd:N"), "JSON Lines events to FILE (appended) or to fd:N; human lines stay on stderr"),
    flag(None, "json", None, "JSON Lines events on stderr instead of the human lines (plan: JSON Lines on stdout)"),
    flag(Some('q'), "quiet", None, "No human lines on stderr"),
    flag(Some('v'), "verbose", None, "Also report attempt starts, successes and hints"),
    flag(None, "dry-run", None, "Print the schedule instead of running the command"),
    flag(None, "simulate", Some("LIST"), "Scripted outcomes for the plan, e.g. `1,1,75,0` or `timeout` (the last repeats)"),
    flag(Some('h'), "help", None, "Print help (--help adds durations, exit statuses, the hint file, events and config keys)"),
    flag(Some('V'), "version", None, "Print version"),
];

/// Pairs of flags that cannot be given together.
const CONFLICTS: &[(&str, &str)] = &[
    ("attempts", "retries"),
    ("forever", "retries"),
    ("forever", "attempts"),
    ("delays", "backoff"),
    ("delays", "delay"),
    ("delays", "factor"),
    ("delays", "max-delay"),
    ("delays", "min-delay"),
    ("delays", "jitter"),
    ("until-fail", "success-count"),
    ("quiet", "verbose"),
];

/// The usage lines.
const USAGE: &str = "Usage: retry [OPTIONS] [--] COMMAND [ARGS]...\n       retry plan [OPTIONS]";

/// `-h` (`long == false`) or `--help`: the flags from [`FLAGS`], then the long
/// text or a pointer to it.
#[must_use]
pub fn help(long: bool) -> String {
    let left = |f: &FlagSpec| {
        let short = f
            .short
            .map(|c| format!("-{c}, "))
            .unwrap_or_else(|| "    ".to_owned());
        let value = f.value.map(|v| format!(" <{v}>")).unwrap_or_default();
        format!("  {short}--{}{value}", f.long)
    };
    let width = FLAGS.iter().map(|f| left(f).len()).max().unwrap_or(0) + 2;
    let mut text = format!(
        "Run a command, retrying it under a backoff policy when it fails.\n\n{USAGE}\n\n\
         Arguments:\n{:width$}The command and its arguments\n\nOptions:\n",
        "  [COMMAND]..."
    );
    for f in FLAGS {
        text.push_str(&format!("{:width$}{}\n", left(f), f.help));
    }
    text.push('\n');
    if long {
        text.push_str(AFTER_HELP);
    } else {
        text.push_str(
            "Run `retry --help` for durations, exit statuses, what is retried, the hint \
             file, a curl recipe, events and the config file's keys.",
        );
    }
    text.push('\n');
    text
}

/// The flags as given. Every policy flag is optional so that a `--config`
/// file's values stay unless a flag overrides them; a flag given twice keeps its
/// last value.
#[derive(Debug, Default)]
struct Flags {
    attempts: Option<u32>,
    retries: Option<u32>,
    forever: bool,
    backoff: Option<BackoffKind>,
    delay: Option<Duration>,
    factor: Option<f64>,
    max_delay: Option<Duration>,
    min_delay: Option<Duration>,
    jitter: Option<Jitter>,
    delays: Option<DelayList>,
    seed: Option<u64>,
    max_time: Option<Duration>,
    timeout: Option<Duration>,
    kill_after: Option<Duration>,
    retry_on: Option<OutcomeList>,
    stop_on: Option<OutcomeList>,
    until_fail: bool,
    success_count: Option<u32>,
    replay_stdin: bool,
    hold_stdout: bool,
    on_retry: Option<String>,
    on_give_up: Option<String>,
    /// Every `--config`, in order (layered).
    config: Vec<PathBuf>,
    events: Option<Events>,
    json: bool,
    quiet: bool,
    verbose: bool,
    dry_run: bool,
    simulate: Option<Simulated>,
    command: Vec<OsString>,
    /// Which flags were given (bit `i` for `FLAGS[i]`), for [`CONFLICTS`].
    given: u64,
}

/// A whole number for `--attempts`, `--retries`, `--success-count`.
fn whole<N: core::str::FromStr>(text: &str) -> Result<N, String> {
    text.trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number (or is too large)"))
}

/// A `--seed`: a whole number from 0 to 2^64 - 1, in decimal or in hex with
/// `0x`, bare or in double quotes (as `jq .seed` prints the `seed` of a
/// `start` event, which is a string so that no JSON reader rounds it).
pub(super) fn parse_seed(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(t)
        .trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    };
    parsed.ok_or_else(|| {
        format!("`{text}` is not a seed (a whole number below 2^64, decimal or 0x hex)")
    })
}

impl Flags {
    /// Sets the flag `spec` from its value (`None` for a switch).
    fn set(&mut self, spec: &FlagSpec, value: Option<&OsStr>) -> Result<(), String> {
        if spec.long == "config" {
            self.config.extend(value.map(PathBuf::from));
            return Ok(());
        }
        let text = match value {
            None => "",
            Some(v) => v
                .to_str()
                .ok_or_else(|| "the value is not valid UTF-8".to_owned())?,
        };
        match spec.long {
            "attempts" => self.attempts = Some(whole(text)?),
            "retries" => self.retries = Some(whole(text)?),
            "forever" => self.forever = true,
            "backoff" => {
                self.backoff = Some(BackoffKind::named(text.trim()).ok_or_else(|| {
                    format!(
                        "unknown curve `{text}` (none, constant, linear, exponential, fibonacci)"
                    )
                })?);
            }
            "delay" => self.delay = Some(parse_duration(text)?),
            "factor" => {
                self.factor = Some(
                    text.trim()
                        .parse()
                        .map_err(|_| format!("`{text}` is not a number"))?,
                );
            }
            "max-delay" => self.max_delay = Some(parse_duration(text)?),
            "min-delay" => self.min_delay = Some(parse_duration(text)?),
            "jitter" => self.jitter = Some(parse_jitter(text)?),
            "delays" => self.delays = Some(parse_delays(text)?),
            "seed" => self.seed = Some(parse_seed(text)?),
            "max-time" => self.max_time = Some(parse_duration(text)?),
            "timeout" => self.timeout = Some(parse_duration(text)?),
            "kill-after" => self.kill_after = Some(parse_duration(text)?),
            "retry-on" => self.retry_on = Some(parse_list(text)?),
            "stop-on" => self.stop_on = Some(parse_list(text)?),
            "until-fail" => self.until_fail = true,
            "success-count" => self.success_count = Some(whole(text)?),
            "replay-stdin" => self.replay_stdin = true,
            "hold-stdout" => self.hold_stdout = true,
            "on-retry" => self.on_retry = Some(text.to_owned()),
            "on-give-up" => self.on_give_up = Some(text.to_owned()),
            "events" => self.events = Some(parse_events(text)?),
            "json" => self.json = true,
            "quiet" => self.quiet = true,
            "verbose" => self.verbose = true,
            "dry-run" => self.dry_run = true,
            "simulate" => self.simulate = Some(parse_simulation(text)?),
            _ => {}
        }
        Ok(())
    }

    /// Whether the flag named `long` was given.
    fn was_given(&self, long: &str) -> bool {
        FLAGS
            .iter()
            .position(|f| f.long == long)
            .is_some_and(|i| self.given & (1u64 << i) != 0)
    }
}

/// A usage error naming the flag and what was wrong with its value.
fn bad_value(spec: &FlagSpec, why: &str) -> CliError {
    CliError::Usage(format!("retry: --{}: {why}", spec.long))
}

/// A usage error for something that is not a flag of `retry`, with a pointer
/// to the help.
fn unknown(what: &str) -> CliError {
    CliError::Usage(format!(
        "retry: unknown flag `{what}` (to run a command of that name, put `--` before it)\n\
         {USAGE}\nFor more information, try '--help'."
    ))
}

/// Reads the flags and the command from `args` (`argv[0]` and `plan` taken off).
fn read_flags(mut args: impl Iterator<Item = OsString>) -> Result<Flags, CliError> {
    let mut flags = Flags::default();
    while let Some(arg) = args.next() {
        let bytes = arg.as_encoded_bytes();
        if bytes == b"--" {
            flags.command.extend(args);
            break;
        }
        // The flags in this word (by index in FLAGS), each with its value when
        // the word holds it (`--delay=2s`, `-n3`).
        let mut word: Vec<(usize, Option<OsString>)> = Vec::new();
        if let Some(rest) = bytes.strip_prefix(b"--") {
            let (name, inline) = match rest.iter().position(|&b| b == b'=') {
                Some(at) => (
                    rest.get(..at).unwrap_or_default(),
                    Some(rest.get(at.saturating_add(1)..).unwrap_or_default()),
                ),
                None => (rest, None),
            };
            let index = FLAGS
                .iter()
                .position(|f| f.long.as_bytes() == name)
                .ok_or_else(|| unknown(&arg.to_string_lossy()))?;
            word.push((index, inline.map(os_from)));
        } else if bytes.len() > 1 && bytes.first() == Some(&b'-') {
            // `-qv`, `-n3`, `-n 3`: letters until one that takes a value.
            let mut at = 1;
            while let Some(&letter) = bytes.get(at) {
                let index = FLAGS
                    .iter()
                    .position(|f| f.short.is_some_and(|c| c as u32 == u32::from(letter)))
                    .ok_or_else(|| unknown(&arg.to_string_lossy()))?;
                at += 1;
                let takes_value = FLAGS.get(index).is_some_and(|f| f.value.is_some());
                if takes_value && at < bytes.len() {
                    let value = bytes.get(at..).unwrap_or_default();
                    word.push((index, Some(os_from(value))));
                    break;
                }
                word.push((index, None));
            }
        } else {
            // The command: this word and every one after it.
            flags.command.push(arg);
            flags.command.extend(args);
            break;
        }
        for (index, inline) in word {
            let Some(spec) = FLAGS.get(index) else {
                continue;
            };
            match spec.long {
                "help" => return Err(CliError::Info(help(bytes == b"--help"))),
                "version" => {
                    let version = format!("retry {}\n", env!("CARGO_PKG_VERSION"));
                    return Err(CliError::Info(version));
                }
                _ => {}
            }
            let value = match (spec.value, inline) {
                (None, None) => None,
                (None, Some(_)) => return Err(bad_value(spec, "takes no value")),
                (Some(_), Some(v)) => Some(v),
                (Some(name), None) => Some(
                    args.next()
                        .ok_or_else(|| bad_value(spec, &format!("needs a value <{name}>")))?,
                ),
            };
            flags
                .set(spec, value.as_deref())
                .map_err(|why| bad_value(spec, &why))?;
            flags.given |= 1u64 << index;
        }
    }
    for (a, b) in CONFLICTS {
        if flags.was_given(a) && flags.was_given(b) {
            return Err(CliError::Usage(format!(
                "retry: --{b} cannot be used with --{a}"
            )));
        }
    }
    Ok(flags)
}

/// A tail of an argument's bytes (after its `=` or its flag letter) as an
/// argument of its own (on Unix every byte string is one).
fn os_from(tail: &[u8]) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(tail).to_owned()
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
        .map(parse_duration)
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
        if self.policy.attempts_are_unlimited() {
            None
        } else {
            Some(self.policy.max_attempts())
        }
    }
}

/// The attempt count that stands for "no limit" (the core's
/// [`RetryPolicy::UNLIMITED_ATTEMPTS`]).
pub const UNLIMITED: u32 = RetryPolicy::UNLIMITED_ATTEMPTS;

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
    let mut args = args.into_iter().map(Into::into).skip(1).peekable();
    let plan = args.next_if(|a| a == "plan").is_some();
    let flags = read_flags(args)?;
    invocation(flags, plan)
}

/// The program's defaults, the base a config file and the flags are laid over:
/// the core's default policy, with a command's hint file honoured in the core's
/// at-least mode (the longer of the hint and the curve, the hint capped at 5 min),
/// and equal jitter: a stated delay is never shortened by more than half
/// (`-d 5s` waits 2.5 s to 5 s), where the libraries' full jitter may retry at
/// once.
#[must_use]
pub fn program_defaults() -> RetryPolicy {
    program_defaults_builder().build().unwrap_or_default()
}

/// [`program_defaults`], not built yet (a policy is validated and planned
/// when built: once per run is enough).
fn program_defaults_builder() -> RetryPolicyBuilder {
    RetryPolicy::default()
        .to_builder()
        .hints(HintMode::AT_LEAST_DEFAULT)
        .jitter(Jitter::Equal)
}

fn invocation(flags: Flags, plan: bool) -> Result<Invocation, CliError> {
    // Without a config file the defaults need not be built first: the flags
    // go onto their builder.
    let (mut builder, base_backoff, keys) = if flags.config.is_empty() {
        (
            program_defaults_builder(),
            RetryPolicy::default().backoff(),
            ProgramKeys::default(),
        )
    } else {
        let (base, keys) = config::load_all(&flags.config, &program_defaults())?;
        (base.to_builder(), base.backoff(), keys)
    };
    let retry_on = flags.retry_on.or(keys.retry_on);
    let stop_on = flags.stop_on.or(keys.stop_on);
    let lists_given = retry_on.is_some() || stop_on.is_some();
    let classifier = Classifier::from_lists(retry_on, stop_on);
    match flags.attempts {
        Some(0) => builder = builder.unlimited_attempts(),
        Some(n) => builder = builder.max_attempts(n),
        None if flags.forever => builder = builder.unlimited_attempts(),
        None => {}
    }
    if let Some(n) = flags.retries {
        builder = builder.max_retries(n);
    }
    let curve = backoff(&flags, base_backoff)?;
    if let Some(backoff) = curve {
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
    } else if !keys.sets_jitter && curve.unwrap_or(base_backoff) == Backoff::None {
        // The program's default jitter is for a curve that waits: without
        // one there is nothing to jitter, and the plan says so.
        builder = builder.jitter(Jitter::None);
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
    fn the_flag_table_is_sound_and_help_lists_every_flag() {
        for (i, f) in FLAGS.iter().enumerate() {
            assert!(
                FLAGS
                    .iter()
                    .skip(i + 1)
                    .all(|g| g.long != f.long && (f.short.is_none() || g.short != f.short)),
                "--{} is in the table twice",
                f.long
            );
        }
        assert!(FLAGS.len() <= 64, "`given` holds one bit per flag");
        for (a, b) in CONFLICTS {
            assert!(FLAGS.iter().any(|f| f.long == *a), "{a}");
            assert!(FLAGS.iter().any(|f| f.long == *b), "{b}");
        }
        for long in [false, true] {
            let text = help(long);
            for f in FLAGS {
                assert!(text.contains(&format!("--{}", f.long)), "{}", f.long);
                if let Some(c) = f.short {
                    assert!(text.contains(&format!("-{c}, --{}", f.long)), "{c}");
                }
            }
            assert_eq!(text.contains("CONFIG FILE"), long);
        }
        // Every flag the table lists is one the parser reads.
        for f in FLAGS {
            let mut argv = vec![OsString::from("retry"), format!("--{}", f.long).into()];
            if f.value.is_some() {
                argv.push("x".into());
            }
            argv.push("--".into());
            argv.push("true".into());
            if let Err(CliError::Usage(message)) = parse_args(argv) {
                assert!(!message.contains("unknown flag"), "{message}");
            }
        }
    }

    #[test]
    fn the_forms_of_a_flag_and_its_value() {
        let inv = parsed(&["--attempts=3", "-qn4", "-d", "2s", "--", "x"]);
        assert_eq!(inv.policy.max_attempts(), 4);
        assert_eq!(inv.verbosity, Verbosity::Quiet);
        assert_eq!(inv.policy.backoff().initial(), Duration::from_secs(2));
        assert_eq!(
            parsed(&["-t3s", "x"]).policy.attempt_timeout(),
            Some(Duration::from_secs(3))
        );
        // The first word that is not a flag starts the command; what follows is
        // the command's, flags included.
        assert_eq!(
            parsed(&["-n", "2", "sh", "-c", "--delay", "-"]).mode,
            Mode::Run {
                command: ["sh", "-c", "--delay", "-"].map(OsString::from).to_vec()
            }
        );
        assert_eq!(
            parsed(&["-", "x"]).mode,
            Mode::Run {
                command: ["-", "x"].map(OsString::from).to_vec()
            }
        );
        // A value may start with a dash.
        assert!(matches!(
            parse_args(["retry", "--max-delay", "-1s", "--", "x"]),
            Err(CliError::Usage(m)) if m.contains("--max-delay")
        ));
        // The last of a repeated flag counts.
        assert_eq!(
            parsed(&["-n", "2", "-n", "6", "x"]).policy.max_attempts(),
            6
        );
        for (args, text) in [
            (&["--bogus", "x"][..], "unknown flag `--bogus`"),
            (&["-x", "y"], "unknown flag `-x`"),
            (&["--quiet=yes", "x"], "--quiet: takes no value"),
            (&["--delay"], "--delay: needs a value"),
            (
                &["--backoff", "cubic", "x"],
                "--backoff: unknown curve `cubic`",
            ),
            (
                &["--attempts", "-1", "x"],
                "--attempts: `-1` is not a whole number",
            ),
            (&["-q", "-v", "x"], "--verbose cannot be used with --quiet"),
        ] {
            let argv = core::iter::once("retry").chain(args.iter().copied());
            match parse_args(argv) {
                Err(CliError::Usage(message)) => assert!(message.contains(text), "{message}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        for (flag, long) in [("-h", false), ("--help", true)] {
            match parse_args(["retry", "-n", "2", flag, "--bogus"]) {
                Err(CliError::Info(text)) => assert_eq!(text, help(long)),
                other => panic!("{other:?}"),
            }
        }
        match parse_args(["retry", "plan", "-V"]) {
            Err(CliError::Info(text)) => assert!(text.starts_with("retry 0."), "{text}"),
            other => panic!("{other:?}"),
        }
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
        // Equal jitter: a stated delay is never shortened by more than half.
        assert_eq!(inv.policy.jitter(), Jitter::Equal);
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
