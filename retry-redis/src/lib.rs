//! One retry budget and one circuit-breaker view for a whole fleet of
//! processes, kept in Redis.
//!
//! A service running as many replicas has two blind spots with per-process
//! state: each replica's breaker must see its own failures before it opens, so a
//! dead dependency takes many doomed calls per replica; and each replica's retry
//! budget caps only its own retries, so the fleet together can still multiply
//! the load on a struggling dependency. This crate shares both through the Redis
//! the fleet already runs, without moving any decision out of `retry-core`:
//!
//! - [`FleetBudget`]: every withdrawal and deposit runs atomically in Redis as
//!   one script, with the core budget's arithmetic. A withdrawal waits for at
//!   most its timeout (default 5 ms), then falls back to the process's own
//!   budget (or refuses, as configured).
//! - [`FleetBreaker`]: admission stays local (no round trip per call). Each
//!   process syncs with Redis every interval (default 250 ms): it publishes its
//!   window and whether its breaker opened, reads the fleet's, and lets
//!   [`retry_core::FleetMember`] decide: open every member when a quorum of
//!   members opened (or when the summed window crosses the thresholds), let a
//!   limited number of half-open probes run fleet-wide, and close or re-open
//!   the fleet on their verdict.
//!
//! Both implement the traits `retry-tokio`, `retry-std` and the tower layers
//! take ([`retry_shared::Budget`], [`retry_shared::Breaker`]).
//!
//! When Redis is down, nothing waits on it longer than the configured timeout:
//! withdrawals get the fallback's answer, breakers keep deciding alone, and
//! both count it. Bad data in a key (garbage, a wrong type, a newer format) is
//! a typed [`StoreError`], logged once per kind, with the same fallback.
//!
//! The crate talks to Redis from a thread of its own (a small tokio runtime
//! with one auto-reconnecting connection), so it works from blocking code and
//! from any tokio runtime alike. It needs Redis 5 or later: one Redis
//! ([`Fleet::connect`]) or a Redis Cluster ([`Fleet::connect_cluster`]). Every
//! key of one budget or breaker carries its name as a hash tag
//! (`<namespace>:breaker:{<name>}:…`, braces included), so all of them live in
//! one cluster slot and its scripts run on one node, while different budgets
//! and breakers spread over the cluster's shards.
//!
//! A sync costs Redis the same whatever the number of members (members add
//! their reports into per-interval sums; a sync reads the sums), about 50 µs of
//! Redis CPU per sync with its network I/O: 1,000 members syncing every 250 ms
//! (the default) took 17 to 19 % of a core (see the README's fleet section and
//! BENCHMARKS.md).
//!
//! ```no_run
//! use core::time::Duration;
//! use retry_core::{BasicRule, BreakerConfig, BudgetConfig, FleetConfig, FleetRule};
//! use retry_redis::Fleet;
//!
//! let fleet = Fleet::connect("redis://127.0.0.1:6379/")?.namespace("checkout")?;
//! let budget = fleet.budget("payments", BudgetConfig::aws_standard()).build()?;
//! let breaker = fleet
//!     .breaker(
//!         "payments",
//!         BreakerConfig::basic(BasicRule {
//!             failure_threshold: 5,
//!             open_duration: Duration::from_secs(30),
//!             success_threshold: 1,
//!         })?,
//!         FleetConfig::new(FleetRule::Quorum(2)),
//!     )
//!     .build()?;
//! // Give them to a retrier: `Retry::new(policy).budget(budget).breaker(breaker)`.
//! # let _ = (budget, breaker);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

use core::time::Duration;

mod breaker;
mod budget;
mod error;
mod io;
mod observe;
mod timer;

pub use breaker::{FleetBreaker, FleetBreakerBuilder, SyncReport};
pub use budget::{FleetAnswer, FleetBudget, FleetBudgetBuilder};
pub use error::{Fallback, SetupError, StoreError};
pub use observe::describe_metrics;

/// The format version of everything this crate writes to Redis. A value
/// written by a newer format is refused with [`StoreError::FutureFormat`].
pub const FORMAT: u32 = 1;

/// A connection to the Redis a fleet shares, with the namespace its keys live
/// under and this process's member id. Clones share the connection; it closes
/// when the last clone, budget and breaker are dropped.
#[derive(Clone, Debug)]
pub struct Fleet {
    io: io::Io,
    namespace: String,
    member: String,
}

/// How long connecting to Redis, or an answer from it, may take before the
/// connection counts as failed (each call also has its own, shorter, timeout).
const CONNECTION_TIMEOUT: Duration = Duration::from_millis(500);

impl Fleet {
    /// Connects to the Redis at `url` (`redis://host:port/db`). The connection
    /// is made lazily and re-made after failures, so a Redis that is down now
    /// is not an error: budgets fall back and breakers decide alone until it
    /// is back. The namespace is `retry`.
    ///
    /// # Errors
    /// [`SetupError::Url`] for a URL that does not parse;
    /// [`SetupError::Thread`] if the connection thread cannot start.
    pub fn connect(url: &str) -> Result<Fleet, SetupError> {
        Fleet::start(&io::Target::Single(url.to_owned()))
    }

    /// Connects to a Redis Cluster through the nodes at `nodes` (one or more
    /// `redis://host:port/` URLs; the others are found from them). As with
    /// [`Fleet::connect`], the connection is made on first use and re-made
    /// after failures. Each budget's and breaker's keys share one hash slot
    /// (its name is their hash tag), so its scripts run on the one node that
    /// holds it; different names spread over the shards.
    ///
    /// # Errors
    /// [`SetupError::Url`] for no node or a URL that does not parse;
    /// [`SetupError::Thread`] if the connection thread cannot start.
    pub fn connect_cluster(nodes: &[&str]) -> Result<Fleet, SetupError> {
        let nodes = nodes.iter().map(|n| (*n).to_owned()).collect();
        Fleet::start(&io::Target::Cluster(nodes))
    }

    fn start(target: &io::Target) -> Result<Fleet, SetupError> {
        let io = io::Io::start(target, CONNECTION_TIMEOUT)?;
        let member = format!(
            "{:x}-{:x}",
            std::process::id(),
            retry_shared::fresh_seed() & 0xffff_ffff
        );
        Ok(Fleet {
            io,
            namespace: "retry".to_owned(),
            member,
        })
    }

    /// Puts every key under `namespace`: a budget named `payments` in the
    /// namespace `checkout` is the key `checkout:budget:{payments}`, a breaker
    /// of that name the keys `checkout:breaker:{payments}:…` (the braces are
    /// part of the key: Redis Cluster hashes only what is between them).
    ///
    /// Namespaces, names and member ids are 1 to 200 bytes of UTF-8 without
    /// braces (they would change the hash tag), colons (they separate the
    /// parts of a key), whitespace or control characters.
    ///
    /// # Errors
    /// [`SetupError::Name`] for a name that breaks these rules.
    pub fn namespace(mut self, namespace: &str) -> Result<Fleet, SetupError> {
        check_name("namespace", namespace)?;
        namespace.clone_into(&mut self.namespace);
        Ok(self)
    }

    /// The namespace.
    #[must_use]
    pub fn namespace_name(&self) -> &str {
        &self.namespace
    }

    /// This process's id among the fleet's members (its process id and a
    /// random part, unless set with [`Fleet::member`]).
    #[must_use]
    pub fn member_id(&self) -> &str {
        &self.member
    }

    /// Names this process among the fleet's members (a pod's or host's name,
    /// say), instead of its process id and a random part. Two processes must
    /// not share a member id: the fleet would count them as one. Budgets and
    /// breakers built from this `Fleet` afterwards use it; clones made before
    /// keep theirs.
    ///
    /// # Errors
    /// [`SetupError::Name`] for an id that breaks the rules of
    /// [`Fleet::namespace`].
    pub fn member(mut self, id: &str) -> Result<Fleet, SetupError> {
        check_name("member", id)?;
        id.clone_into(&mut self.member);
        Ok(self)
    }

    /// A fleet budget named `name` following `config`; see [`FleetBudget`].
    pub fn budget(&self, name: &str, config: retry_core::BudgetConfig) -> FleetBudgetBuilder {
        FleetBudgetBuilder::new(self.clone(), name, config)
    }

    /// A fleet breaker named `name`: every member runs a breaker following
    /// `config`, shared by `fleet`'s rule; see [`FleetBreaker`].
    pub fn breaker(
        &self,
        name: &str,
        config: retry_core::BreakerConfig,
        fleet: retry_core::FleetConfig,
    ) -> FleetBreakerBuilder {
        FleetBreakerBuilder::new(self.clone(), name, config, fleet)
    }
}

fn check_name(field: &'static str, value: &str) -> Result<(), SetupError> {
    let bad = |c: char| c == '{' || c == '}' || c == ':' || c.is_whitespace() || c.is_control();
    if value.is_empty() || value.len() > 200 || value.chars().any(bad) {
        return Err(SetupError::Name {
            field,
            value: value.to_owned(),
        });
    }
    Ok(())
}

fn check_duration(field: &'static str, d: Duration) -> Result<(), SetupError> {
    if d < Duration::from_millis(1) || d > Duration::from_secs(3600) {
        return Err(SetupError::Duration {
            field,
            millis: d.as_millis(),
        });
    }
    Ok(())
}

/// A Redis reply as text (lossy; nil is empty), or a description of what else
/// it was.
fn text(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(i) => i.to_string(),
        redis::Value::Nil => String::new(),
        other => format!("{other:?}"),
    }
}
