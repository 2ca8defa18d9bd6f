//! The controlling terminal, handed to each attempt's process group as a shell
//! hands it to a foreground job.
//!
//! When `retry` runs in the foreground of a terminal, every attempt's group
//! becomes the terminal's foreground group for as long as it runs, so that a
//! command can read the terminal, change its modes (`stty`, password prompts,
//! `ssh`, `git` credential prompts) and receive the keys' signals (Ctrl-C,
//! Ctrl-Z, Ctrl-\\) directly. `retry` takes the terminal back when the attempt
//! ends or stops, on every path: exits, timeouts, signals, panics.
//!
//! When `retry` runs in the background, or without a terminal, nothing changes
//! hands.

use core::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt as _;

use super::sys::{self, Modes};

/// The controlling terminal, opened through `/dev/tty`.
#[derive(Debug)]
pub struct Terminal {
    tty: OwnedFd,
    /// `retry`'s own process group.
    own_group: i32,
    /// The modes the terminal had when the run began.
    modes: Option<Modes>,
    /// The group `retry` handed the terminal to, while it has it.
    handed_to: Cell<Option<i32>>,
}

impl Terminal {
    /// The process's controlling terminal, if it has one.
    #[must_use]
    pub fn open() -> Option<Terminal> {
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open("/dev/tty")
            .ok()?;
        let tty = OwnedFd::from(tty);
        let modes = sys::modes(tty.as_raw_fd());
        Some(Terminal {
            tty,
            own_group: sys::own_group(),
            modes,
            handed_to: Cell::new(None),
        })
    }

    /// The descriptor, for the child's pre-exec step.
    pub(super) fn raw(&self) -> RawFd {
        self.tty.as_raw_fd()
    }

    /// Whether `retry`'s group is the terminal's foreground group (a job in the
    /// foreground of its shell).
    #[must_use]
    pub fn in_foreground(&self) -> bool {
        sys::foreground_group(self.raw()) == Some(self.own_group)
    }

    /// Hands the terminal to `group`.
    ///
    /// # Errors
    /// The system's refusal (the terminal is gone, or `group` is not in its session).
    pub fn give(&self, group: i32) -> io::Result<()> {
        sys::set_foreground_group(self.raw(), group)?;
        self.given(group);
        Ok(())
    }

    /// Notes that `group` took the terminal itself (before its `exec`).
    pub(super) fn given(&self, group: i32) {
        self.handed_to.set(Some(group));
        sys::note_handed(Some(self.raw()));
    }

    /// Whether an attempt's group has the terminal from `retry`.
    #[must_use]
    pub fn is_handed(&self) -> bool {
        self.handed_to.get().is_some()
    }

    /// Takes the terminal back for `retry`'s own group, if `retry` handed it to
    /// a group that still has it (never from a shell that took it meanwhile).
    pub fn take_back(&self) {
        if let Some(group) = self.handed_to.take() {
            sys::note_handed(None);
            let now = sys::foreground_group(self.raw());
            // A group that is gone leaves the terminal with no live foreground
            // group: take it back then too.
            if now == Some(group) || now.is_none() || !sys::group_exists(group) {
                let _ = sys::set_foreground_group(self.raw(), self.own_group);
            }
        }
    }

    /// The terminal's current modes.
    pub(super) fn modes(&self) -> Option<Modes> {
        sys::modes(self.raw())
    }

    /// Puts back `modes`.
    pub(super) fn set_modes(&self, modes: &Modes) {
        sys::set_modes(self.raw(), modes);
    }

    /// Puts back the modes the terminal had when the run began: after a command
    /// was killed in raw or no-echo mode (a password prompt) it cannot do it
    /// itself.
    pub fn restore_modes(&self) {
        if let Some(modes) = &self.modes {
            self.set_modes(modes);
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // Whatever happened, the terminal goes back to `retry`'s group, which
        // its shell handed it to.
        self.take_back();
    }
}
