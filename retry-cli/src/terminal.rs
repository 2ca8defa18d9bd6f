//! The controlling terminal, when `retry` has one.
//!
//! With a terminal, `retry` runs each attempt in `retry`'s own process group,
//! the job's, as `timeout --foreground`, `env` and `nice` do: the terminal's keys
//! reach the shell, `retry` and the command together, a pager or `cat` in the
//! same pipeline keeps the terminal, and the shell's job control (Ctrl-Z, `fg`,
//! `bg`) works on the whole job as on any other. `retry` never hands the
//! terminal to anyone; it only puts back the terminal's modes after an attempt
//! it ended (a timeout, a signal) left them changed, as a password prompt
//! killed with echo off would.
//!
//! Without a terminal, each attempt gets a process group of its own.

use std::os::fd::OwnedFd;

use super::sys::{self, Modes, ProcessId};

/// The controlling terminal, opened through `/dev/tty`.
#[derive(Debug)]
pub struct Terminal {
    tty: OwnedFd,
    /// `retry`'s own process group.
    own_group: ProcessId,
}

impl Terminal {
    /// The process's controlling terminal, if it has one.
    #[must_use]
    pub fn open() -> Option<Terminal> {
        let tty = sys::open_terminal()?;
        Some(Terminal {
            tty,
            own_group: sys::own_group(),
        })
    }

    /// Whether `retry`'s group is the terminal's foreground group (a job in the
    /// foreground of its shell).
    #[must_use]
    pub fn in_foreground(&self) -> bool {
        sys::foreground_group(&self.tty) == Some(self.own_group)
    }

    /// The terminal's current modes, when `retry` is in the foreground (a
    /// background job leaves the terminal to the foreground one).
    pub(super) fn modes(&self) -> Option<Modes> {
        self.in_foreground()
            .then(|| sys::modes(&self.tty))
            .flatten()
    }

    /// Puts back `modes` if the terminal's differ now and `retry` is in the
    /// foreground: after an attempt `retry` ended (a timeout or a signal) in
    /// raw or no-echo mode, which it cannot restore itself.
    pub(super) fn restore(&self, modes: &Modes) {
        if self.modes().is_some_and(|now| now != *modes) {
            sys::set_modes(&self.tty, modes);
        }
    }
}
