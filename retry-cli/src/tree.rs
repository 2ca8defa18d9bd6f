//! The processes of one attempt: the command and everything descending from it,
//! found through `/proc`, so that a timeout or a signal reaches every one of
//! them, grandchildren and daemonized children included, whatever process
//! group they are in.
//!
//! `retry` is the subreaper of its descendants (see `sys::install`): a process
//! whose parent exits becomes `retry`'s child instead of init's. So the tree of
//! an attempt is the command, every process below it, and every child `retry`
//! adopted while the attempt ran (with everything below those). Children `retry`
//! already had when the attempt started (what earlier attempts or hooks left
//! running when they ended normally) are not part of it: a timeout of attempt 3
//! does not end a server that attempt 1 started and left behind.
//!
//! A process is signalled through a pidfd opened after checking that the
//! process with that number is still the one the walk found (same start time):
//! a number reused meanwhile by an unrelated process is never signalled.

use std::collections::BTreeMap;

use super::sys::{self, ProcessId};

/// One process as `/proc/<pid>/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    pid: i32,
    parent: i32,
    group: i32,
    /// Running, sleeping or stopped (not a zombie, not dead).
    alive: bool,
    /// Start time in clock ticks since boot: with `pid`, names one process.
    start: u64,
}

/// Reads `/proc/<pid>/stat`.
fn entry(pid: i32) -> Option<Entry> {
    let path = std::ffi::CString::new(format!("/proc/{pid}/stat")).ok()?;
    let stat = sys::read_small(&path)?;
    parse_stat(pid, &String::from_utf8_lossy(&stat))
}

/// Parses a `stat` line: `pid (comm) state ppid pgrp … starttime …`, the
/// command name possibly holding spaces and parentheses (it ends at the last
/// `)`).
fn parse_stat(pid: i32, stat: &str) -> Option<Entry> {
    let rest = stat.get(stat.rfind(')')?.checked_add(1)?..)?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let parent = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    // starttime is the 22nd field, the 20th after the name.
    let start = fields.nth(16)?.parse().ok()?;
    Some(Entry {
        pid,
        parent,
        group,
        alive: !matches!(state, "Z" | "X" | "x"),
        start,
    })
}

/// Every process `/proc` lists, or `None` without `/proc`.
fn scan() -> Option<Vec<Entry>> {
    Some(sys::proc_entries()?.into_iter().filter_map(entry).collect())
}

/// `retry`'s children now (with `/proc`): those are the ones an attempt
/// starting now does not own. One read of
/// `/proc/<pid>/task/<pid>/children` (`retry` has one thread), or a scan of
/// `/proc` where the kernel lacks that file.
pub(super) fn children_of_self() -> Vec<i32> {
    let me = sys::own_pid().as_raw_nonzero().get();
    let path = std::ffi::CString::new(format!("/proc/{me}/task/{me}/children")).ok();
    if let Some(text) = path.as_deref().and_then(sys::read_small) {
        return String::from_utf8_lossy(&text)
            .split_ascii_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
    }
    scan()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.parent == me)
        .map(|e| e.pid)
        .collect()
}

/// The processes of one attempt.
#[derive(Debug)]
pub(super) struct Tree {
    /// The command, `retry`'s child, until it is reaped: after that its number
    /// may name another process, and what it left below it is `retry`'s (the
    /// subreaper's) anyway.
    root: Option<ProcessId>,
    /// `retry`'s children before the command started, less those reaped since.
    before: Vec<i32>,
}

/// The members of the tree among `entries`: the root and every child of
/// `me` not in `before`, and everything below them.
fn members(entries: &[Entry], me: i32, root: i32, before: &[i32]) -> Vec<Entry> {
    let mut below: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (index, e) in entries.iter().enumerate() {
        below.entry(e.parent).or_default().push(index);
    }
    let mut found: Vec<Entry> = Vec::new();
    let mut queue: Vec<i32> = Vec::new();
    for e in entries {
        if e.pid == root || (e.parent == me && !before.contains(&e.pid)) {
            found.push(*e);
            queue.push(e.pid);
        }
    }
    while let Some(pid) = queue.pop() {
        for &index in below.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            let Some(e) = entries.get(index) else {
                continue;
            };
            // A cycle cannot happen in a process tree; guard anyway.
            if !found.iter().any(|f| f.pid == e.pid) {
                found.push(*e);
                queue.push(e.pid);
            }
        }
    }
    found
}

impl Tree {
    /// The tree of the command `root`, started when `retry`'s children were
    /// `before`.
    pub(super) fn new(root: ProcessId, before: Vec<i32>) -> Tree {
        Tree {
            root: Some(root),
            before,
        }
    }

    /// The command, until it is reaped.
    pub(super) const fn root(&self) -> Option<ProcessId> {
        self.root
    }

    /// Notes that the command was reaped (its number is free now).
    pub(super) fn root_reaped(&mut self) {
        self.root = None;
    }

    /// Notes that these children of `retry` were reaped: their numbers are
    /// free, and a process of this attempt may get one.
    pub(super) fn forget(&mut self, reaped: &[i32]) {
        self.before.retain(|pid| !reaped.contains(pid));
    }

    /// The live members now; `None` without `/proc`.
    fn live(&self) -> Option<Vec<Entry>> {
        let me = sys::own_pid().as_raw_nonzero().get();
        let root = self.root.map_or(0, |r| r.as_raw_nonzero().get());
        let entries = scan()?;
        let mut found = members(&entries, me, root, &self.before);
        found.retain(|e| e.alive);
        Some(found)
    }

    /// Sends `signal` to every live process of the tree, except the members of
    /// `except_group` (which already got it: a terminal's key, or a signal to
    /// the command's own group). Returns how many were signalled.
    pub(super) fn signal(&self, signal: i32, except_group: Option<ProcessId>) -> usize {
        let Some(live) = self.live() else {
            // No /proc: the command alone, while it is retry's unreaped child
            // (its number cannot have been reused).
            return match self.root {
                Some(root) if except_group.is_none() => {
                    sys::signal_process(root, signal);
                    1
                }
                _ => 0,
            };
        };
        let skip = except_group.map(|g| g.as_raw_nonzero().get());
        let mut sent = 0;
        for e in live {
            if Some(e.group) == skip {
                continue;
            }
            let Some(pid) = sys::process_id(e.pid) else {
                continue;
            };
            match sys::pidfd(pid) {
                // The same process as the walk found (a number reused since
                // would have another start time).
                Ok(fd) => {
                    if entry(e.pid).is_some_and(|now| now.start == e.start && now.alive) {
                        sys::signal_pidfd(&fd, signal);
                        sent += 1;
                    }
                }
                // A kernel without pidfds (before 5.3): signal by number.
                Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
                    sys::signal_process(pid, signal);
                    sent += 1;
                }
                Err(_) => {} // gone
            }
        }
        sent
    }

    /// Kills every process of the tree (SIGKILL), again until none is left
    /// alive: a process that forks while it is being killed leaves a child,
    /// which `retry` adopts and the next round finds. Gives up after two
    /// seconds (a process stuck in the kernel cannot be killed sooner).
    pub(super) fn kill(&self) {
        let until = std::time::Instant::now() + core::time::Duration::from_secs(2);
        loop {
            if self.signal(libc::SIGKILL, None) == 0 || std::time::Instant::now() >= until {
                return;
            }
            sys::pause_for(core::time::Duration::from_millis(1));
            if self.live().is_some_and(|l| l.is_empty()) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "4242 (we(i)rd) name) S 17 4242 4242 0 -1 4194304 90 0 0 0 0 0 0 0 20 0 1 0 987654 2000 0";
        assert_eq!(
            parse_stat(4242, line),
            Some(Entry {
                pid: 4242,
                parent: 17,
                group: 4242,
                alive: true,
                start: 987_654
            })
        );
        let zombie = "7 (sh) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert_eq!(parse_stat(7, zombie).map(|e| e.alive), Some(false));
        assert_eq!(parse_stat(7, "7 (sh"), None);
        assert_eq!(parse_stat(7, ""), None);
    }

    #[test]
    fn the_tree_holds_the_command_the_adopted_and_their_descendants_not_leftovers() {
        let e = |pid, parent| Entry {
            pid,
            parent,
            group: 1,
            alive: true,
            start: 0,
        };
        // retry is 10; 20 is the command, 21 its child, 22 a grandchild; 30 was
        // adopted during the attempt (its parent died), 31 below it; 40 is a
        // leftover of an earlier attempt, 41 below it; 50 is unrelated.
        let entries = [
            e(10, 1),
            e(20, 10),
            e(21, 20),
            e(22, 21),
            e(30, 10),
            e(31, 30),
            e(40, 10),
            e(41, 40),
            e(50, 1),
        ];
        let mut pids: Vec<i32> = members(&entries, 10, 20, &[40])
            .iter()
            .map(|e| e.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, [20, 21, 22, 30, 31]);
    }
}
