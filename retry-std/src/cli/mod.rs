//! The `retry` command-line program: `retry [OPTIONS] -- COMMAND [ARGS...]` runs a
//! command under a retry policy; `retry plan [OPTIONS]` prints the schedule.
//!
//! Every decision (whether to retry an exit code, how long to wait, when the
//! budget is spent) is made by `retry-core`; this module spawns, waits, sleeps,
//! passes signals on and reports. [`parse_args`] is a plain function so the
//! argument parser can be fuzzed; it never panics.

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
    sys::give_terminal_back_on_panic();
    let code = main_with(std::env::args_os());
    let _ = std::io::stdout().lock().flush();
    std::process::exit(code)
}
