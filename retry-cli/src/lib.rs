//! The `retry` command-line program: `retry [OPTIONS] -- COMMAND [ARGS...]` runs a
//! command under a retry policy; `retry plan [OPTIONS]` prints the schedule.
//!
//! Every decision (whether to retry an exit code or a signal, how long to wait,
//! what a hint file asks for, when the budget is spent, whether a run toward
//! `--until-fail` or `--success-count` is over, which delay of a `--delays` list
//! comes next) is made by `retry-core`; this module spawns, waits, sleeps,
//! passes signals on, ends what a timed-out command left, and reports. [`parse_args`] is a plain
//! function so the argument parser can be fuzzed; it never panics.
//!
//! Nothing polls: [`process`] blocks in `ppoll(2)` on a self-pipe that the signal
//! handlers write to (SIGCHLD included), the command's pipes and the next
//! deadline. The only `unsafe` code is in the system-call layer, `sys`, where
//! neither rustix nor nix has a safe form.

pub mod args;
pub mod config;
pub mod duration;
pub mod outcome;
pub mod output;
pub mod plan;
pub mod process;
pub mod run;
mod sys;
pub mod terminal;
mod tree;

use std::ffi::OsString;
use std::io::Write;

pub use args::{parse_args, CliError, Invocation, Mode};
pub use duration::parse_duration;

/// Runs the program on `args` (`argv[0]` included) and returns its exit status.
/// When the run ends because `retry` was sent a signal, this does not return:
/// the process dies of that signal.
pub fn main_with<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let invocation = match parse_args(args) {
        Ok(invocation) => invocation,
        Err(CliError::Info(text)) => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            return 0;
        }
        Err(error) => {
            let _ = writeln!(std::io::stderr().lock(), "{error}");
            return error.exit_code();
        }
    };
    match &invocation.mode {
        Mode::Plan { script } => {
            let seed = invocation.seed.unwrap_or(0);
            let plan = plan::Plan::with(
                &invocation.policy,
                seed,
                &invocation.classifier,
                script,
                invocation.goal,
                invocation.delays.as_deref(),
            );
            let text = match invocation.format {
                args::Format::Json => plan.json_lines(),
                args::Format::Text => plan.table(),
            };
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            0
        }
        Mode::Run { command } => match run::run(&invocation, command) {
            run::Exit::Code(code) => code,
            run::Exit::Signal(signal) => {
                let _ = std::io::stdout().lock().flush();
                sys::die_of(signal)
            }
        },
    }
}

/// The program's entry point: [`main_with`] on the process's arguments, then exit.
pub fn main() -> ! {
    let code = main_with(std::env::args_os());
    // `exit` flushes stdout itself (and sets up no buffer when nothing was
    // written to it, as for a plain run).
    std::process::exit(code)
}
