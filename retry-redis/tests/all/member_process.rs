//! Fleet members as separate OS processes (this test binary re-executed as a
//! member), with Redis stopped (SIGSTOP) or killed while the fleet is open:
//! a member that follows the open fleet falls back to its own breaker and
//! admits calls again once the dependency is healthy, within two sync intervals
//! plus its own open period of Redis going away.
//!
//! A member process reads commands on stdin (`fail`: its dependency fails from
//! now; `heal`: it is healthy from now; `quit`) and calls the dependency every
//! 5 ms through its `FleetBreaker`, printing `member: <event>` lines when its
//! state changes (`synced`, `admitted`, `rejected`, `following`, `alone`).
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use core::time::Duration;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use retry_core::{BreakerConfig, CallOutcome, FleetConfig, FleetRule};
use retry_redis::FleetBreaker;
use retry_shared::{Breaker, Clock, Gate};

const MEMBER_URL: &str = "RETRY_REDIS_MEMBER_URL";
const MEMBER_NS: &str = "RETRY_REDIS_MEMBER_NAMESPACE";
const INTERVAL: Duration = Duration::from_millis(100);
const OPEN: Duration = Duration::from_millis(1_000);
/// Scheduling slack on a loaded machine (2 cores shared by several builds).
const MARGIN: Duration = Duration::from_millis(400);

struct Wall;

impl Clock for Wall {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

fn member_breaker(url: &str, namespace: &str) -> FleetBreaker {
    let config = BreakerConfig::builder()
        .failure_threshold(3)
        .open_duration(OPEN)
        .half_open_permits(1)
        .success_threshold(1)
        .build()
        .unwrap();
    common::Redis::connect(url)
        .namespace(namespace)
        .unwrap()
        .breaker(
            "dep",
            config,
            FleetConfig::new(FleetRule::Quorum(1)).sync_interval(INTERVAL),
        )
        .build()
        .unwrap()
}

/// The member's program: commands in, events out, until `quit` or the end of
/// the input.
fn member_loop(url: &str, namespace: &str, input: mpsc::Receiver<String>, out: &mut dyn Write) {
    let breaker = member_breaker(url, namespace);
    let mut healthy = true;
    let mut last: Option<&str> = None;
    let mut said_synced = false;
    let mut following = false;
    let mut alone = false;
    let say = |out: &mut dyn Write, event: &str| {
        writeln!(out, "member: {event}").unwrap();
        out.flush().unwrap();
    };
    loop {
        match input.try_recv() {
            Ok(command) => match command.trim() {
                "fail" => healthy = false,
                "heal" => healthy = true,
                "quit" => return,
                other => panic!("unknown command {other:?}"),
            },
            Err(mpsc::TryRecvError::Disconnected) => return,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        if !said_synced && breaker.syncs() > 0 {
            said_synced = true;
            say(out, "synced");
        }
        let event = match breaker.request(&Wall) {
            Gate::Admitted(permit) => {
                let outcome = if healthy {
                    CallOutcome::success(Duration::from_millis(1))
                } else {
                    CallOutcome::failure(Duration::from_millis(1))
                };
                breaker.record(permit, outcome, &Wall);
                "admitted"
            }
            Gate::Rejected { .. } => "rejected",
        };
        if last != Some(event) {
            last = Some(event);
            say(out, event);
        }
        if breaker.is_following() != following {
            following = !following;
            say(
                out,
                if following {
                    "following"
                } else {
                    "not following"
                },
            );
        }
        if breaker.decides_alone() != alone {
            alone = !alone;
            say(out, if alone { "alone" } else { "not alone" });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The member program when this binary runs as a member process; run by the
/// harness, it checks the program itself against its own Redis (its own
/// dependency failing opens its breaker).
#[test]
fn fleet_member_process() {
    if let Ok(url) = std::env::var(MEMBER_URL) {
        let namespace = std::env::var(MEMBER_NS).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        member_loop(&url, &namespace, rx, &mut std::io::stdout());
        return;
    }
    let Some(server) = common::start("fleet_member_process") else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    let url = server.url();
    let program = std::thread::spawn(move || {
        let mut out = Vec::new();
        member_loop(&url, "selfcheck", rx, &mut out);
        String::from_utf8(out).unwrap()
    });
    std::thread::sleep(INTERVAL * 3);
    tx.send("fail".into()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    tx.send("quit".into()).unwrap();
    let out = program.join().unwrap();
    let events: Vec<&str> = out.lines().collect();
    assert!(events.contains(&"member: synced"), "{out}");
    let calls: Vec<&&str> = events
        .iter()
        .filter(|e| ["member: admitted", "member: rejected"].contains(e))
        .collect();
    assert_eq!(
        calls,
        [&"member: admitted", &"member: rejected"],
        "admitted while healthy, rejected once its breaker opened: {out}"
    );
}

/// A member process and what it printed, each line stamped when read.
struct Member {
    child: Child,
    stdin: ChildStdin,
    events: mpsc::Receiver<(Instant, String)>,
    seen: Vec<(Instant, String)>,
}

impl Member {
    fn spawn(url: &str, namespace: &str) -> Member {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "member_process::fleet_member_process",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
                "-q",
            ])
            .env(MEMBER_URL, url)
            .env(MEMBER_NS, namespace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the test binary runs as a member");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(event) = line.strip_prefix("member: ") {
                    if tx.send((Instant::now(), event.to_owned())).is_err() {
                        return;
                    }
                }
            }
        });
        Member {
            child,
            stdin,
            events,
            seen: Vec::new(),
        }
    }

    fn tell(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits up to `limit` for `event` printed at or after `since`; when.
    fn wait_for(&mut self, event: &str, since: Instant, limit: Duration) -> Option<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some((at, _)) = self.seen.iter().find(|(at, e)| *at >= since && e == event) {
                return Some(*at);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.events.recv_timeout(left) {
                Ok(seen) => self.seen.push(seen),
                Err(_) => return None,
            }
        }
    }

    /// The newest of `events` printed so far (after draining what is queued).
    fn latest(&mut self, events: &[&str]) -> Option<String> {
        while let Ok(seen) = self.events.try_recv() {
            self.seen.push(seen);
        }
        self.seen
            .iter()
            .rev()
            .find(|(_, e)| events.contains(&e.as_str()))
            .map(|(_, e)| e.clone())
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Away {
    /// SIGSTOP: connections stay open, nothing is answered.
    Stopped,
    /// SIGKILL: connections are refused.
    Killed,
}

/// Three member processes; A's dependency fails and the fleet opens; Redis goes
/// away 600 ms later, the dependency recovers 400 ms after that. B and C, which
/// follow the open fleet, must admit calls again within two sync intervals
/// plus their own open period of Redis going away.
fn followers_admit_again_when_redis_goes_away(away: Away, cluster: bool) {
    let test = format!(
        "followers_admit_again_when_redis_is_{away:?}{}",
        if cluster { "_on_a_cluster" } else { "" }
    )
    .to_lowercase();
    // Timed: not beside a cluster's three servers (a cluster takes the turn
    // itself).
    let turn = (!cluster).then(common::heavy_turn);
    let redis = if cluster {
        common::Redis::cluster(&test)
    } else {
        common::Redis::single(&test)
    };
    let Some(mut server) = redis else {
        return;
    };
    let url = server.address();
    let mut members: Vec<Member> = (0..3).map(|_| Member::spawn(&url, "away")).collect();
    let start = Instant::now();
    for (i, m) in members.iter_mut().enumerate() {
        assert!(
            m.wait_for("synced", start, Duration::from_secs(20))
                .is_some(),
            "member {i} synced"
        );
    }
    let failing = Instant::now();
    members[0].tell("fail");
    let mut opened = failing;
    for (i, m) in members.iter_mut().enumerate().skip(1) {
        let at = m.wait_for("following", failing, 3 * INTERVAL + MARGIN);
        let at = at.unwrap_or_else(|| panic!("member {i} follows the open fleet"));
        opened = opened.max(at);
        assert_eq!(
            m.latest(&["admitted", "rejected"]).as_deref(),
            Some("rejected")
        );
    }
    std::thread::sleep(Duration::from_millis(600).saturating_sub(opened.elapsed()));
    let gone = Instant::now();
    match away {
        Away::Stopped => server.stop(),
        Away::Killed => server.kill(),
    }
    std::thread::sleep(Duration::from_millis(400));
    for m in &mut members {
        m.tell("heal");
    }
    let bound = 2 * INTERVAL + OPEN;
    for (i, m) in members.iter_mut().enumerate().skip(1) {
        let admitted = m.wait_for("admitted", gone, bound + MARGIN + Duration::from_secs(3));
        let took = admitted.map(|at| at - gone);
        eprintln!(
            "{test}: member {i} admitted a call {took:?} after redis went away (bound {bound:?})"
        );
        let took = took.unwrap_or_else(|| {
            panic!(
                "member {i} never admitted a call after redis went away: {:?}",
                m.seen
                    .iter()
                    .map(|(at, e)| (at.saturating_duration_since(start), e))
                    .collect::<Vec<_>>()
            )
        });
        assert!(
            took <= bound + MARGIN,
            "member {i}: {took:?} (bound {bound:?} plus {MARGIN:?})"
        );
    }
    // Redis back (every dependency healthy): the members sync again and the
    // fleet settles closed, every member admitting and following nothing.
    // (Member 0's own probe may have failed before its dependency healed,
    // re-opening it, and so the fleet, for one more open period.)
    let back = Instant::now();
    match away {
        Away::Stopped => server.resume(),
        Away::Killed => server.restart(),
    }
    let settled = loop {
        let all = members.iter_mut().all(|m| {
            m.latest(&["admitted", "rejected"]).as_deref() == Some("admitted")
                && m.latest(&["following", "not following"]).as_deref() != Some("following")
        });
        if all || back.elapsed() > 2 * OPEN + 10 * INTERVAL + MARGIN {
            break all;
        }
        std::thread::sleep(INTERVAL);
    };
    let decision: Option<String> = redis::cmd("GET")
        .arg("away:breaker:{dep}:decision")
        .query(&mut *server.conn())
        .unwrap();
    assert!(
        settled,
        "every member admits, none follows, once redis is back ({:?} later; decision {decision:?}): {:?}",
        back.elapsed(),
        members
            .iter()
            .map(|m| m.seen.iter().map(|(at, e)| (at.saturating_duration_since(start), e.clone())).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    for m in &mut members {
        m.tell("quit");
    }
    drop(turn);
}

#[test]
fn followers_admit_again_when_redis_is_stopped() {
    followers_admit_again_when_redis_goes_away(Away::Stopped, false);
}

#[test]
fn followers_admit_again_when_redis_is_killed() {
    followers_admit_again_when_redis_goes_away(Away::Killed, false);
}

#[test]
fn followers_admit_again_when_a_redis_cluster_is_stopped() {
    followers_admit_again_when_redis_goes_away(Away::Stopped, true);
}

#[test]
fn followers_admit_again_when_a_redis_cluster_is_killed() {
    followers_admit_again_when_redis_goes_away(Away::Killed, true);
}
