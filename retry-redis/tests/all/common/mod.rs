//! A real `redis-server` for the tests: started on a free loopback port in a
//! temporary directory, with no persistence, and killed when dropped.
//!
//! Without the binary a test prints (to the real stderr, past the test
//! harness's capture) that it was skipped and how to install Redis, and passes;
//! with `RETRY_REDIS_REQUIRED=1` (as `.ci/run` sets) it fails instead.

#![allow(dead_code, unreachable_pub)]

use core::time::Duration;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
    /// More arguments for redis-server (a cluster node's).
    extra: Vec<String>,
}

/// Whether `program` (redis-server, or redis-cli for a cluster) is installed;
/// if not, says so (or fails the test under `RETRY_REDIS_REQUIRED=1`).
fn installed_program(test: &str, program: &str) -> bool {
    if Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        let required = std::env::var("RETRY_REDIS_REQUIRED").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{test}: {program} is not installed and RETRY_REDIS_REQUIRED=1 (apt-get install redis-server)"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: {program} not found on PATH (redis-server not installed?); install it \
             (Debian/Ubuntu: `apt-get install redis-server`, macOS: `brew install redis`) to run \
             the Redis tests"
        );
        return false;
    }
    true
}

fn installed(test: &str) -> bool {
    installed_program(test, "redis-server")
}

/// Starts a server, or says why not: `None` means the test is skipped.
pub fn start(test: &str) -> Option<RedisServer> {
    if !installed(test) {
        return None;
    }
    Some(RedisServer::new(free_port, Vec::new()))
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

impl RedisServer {
    /// A server on a port `pick` gives. A port found free can be taken by
    /// another test's server before this one binds it (then redis-server
    /// exits at once): up to five ports are tried.
    fn new(pick: impl Fn() -> u16, extra: Vec<String>) -> RedisServer {
        for _ in 0..5 {
            let port = pick();
            let dir =
                std::env::temp_dir().join(format!("retry-redis-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            let mut server = RedisServer {
                child: None,
                port,
                dir,
                extra: extra.clone(),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not come up on any of five free ports");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts the server on its port and waits until it answers: false if
    /// it exited first (its port was taken).
    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        // Generous: the tests run beside builds on a loaded machine.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut conn) = self.client().get_connection() {
                if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                    return true;
                }
            }
            if let Some(child) = self.child.as_mut() {
                if child.try_wait().is_ok_and(|status| status.is_some()) {
                    self.child = None;
                    return false;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("a client")
    }

    pub fn conn(&self) -> redis::Connection {
        self.client().get_connection().expect("a connection")
    }

    /// Kills the server (SIGKILL) and waits for it to go.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the server where it stands (SIGSTOP): connections stay open and
    /// nothing is answered until [`RedisServer::resume`].
    pub fn stop(&self) {
        self.signal("-STOP");
    }

    /// Lets a stopped server run again (SIGCONT): it answers what it was sent
    /// meanwhile.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("the server runs").id();
        let status = Command::new("kill")
            .arg(signal)
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Starts it again on the same port (empty: nothing was saved).
    pub fn restart(&mut self) {
        self.kill();
        assert!(self.spawn(), "redis-server did not start again on its port");
    }

    /// The keys under `pattern`.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut self.conn())
            .expect("KEYS")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A call with one retry, 1 ms after the first attempt, that asks the retry
/// budget first.
pub fn one_retry() -> retry_core::RetryPolicy {
    retry_core::RetryPolicy::builder()
        .max_attempts(2)
        .backoff(retry_core::Backoff::constant(Duration::from_millis(1)))
        .jitter(retry_core::Jitter::None)
        .use_retry_budget(true)
        .build()
        .expect("a valid policy")
}

/// A free loopback port whose cluster bus port (10,000 above) is free too.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= 55_535 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// A Redis Cluster of three primaries (no replicas) on free loopback ports,
/// made with `redis-cli --cluster create`, its nodes killed when dropped.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    fn start() -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::new(
                    free_cluster_port,
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "5000",
                    ]
                    .map(String::from)
                    .to_vec(),
                )
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli runs");
        assert!(
            created.success(),
            "redis-cli --cluster create {addresses:?}"
        );
        let cluster = RedisCluster { nodes };
        cluster.wait_until_up();
        cluster
    }

    fn wait_until_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.nodes.iter().all(|n| {
            redis::cmd("CLUSTER")
                .arg("INFO")
                .query::<String>(&mut n.conn())
                .is_ok_and(|info| info.contains("cluster_state:ok"))
        }) {
            assert!(Instant::now() < deadline, "the cluster did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The Redis a fleet test runs against: one server, or a three-node cluster.
pub enum Redis {
    Single(RedisServer),
    /// A cluster, and the turn it holds (one cluster test at a time: each
    /// starts three servers, on a machine the tests share).
    Cluster(RedisCluster, std::sync::MutexGuard<'static, ()>),
}

static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A turn alone among the heavy tests (a cluster's three servers, or timings
/// a busy machine would blur): held until dropped.
pub fn heavy_turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Redis {
    /// One redis-server, or `None` (skipped) without one installed.
    pub fn single(test: &str) -> Option<Redis> {
        start(test).map(Redis::Single)
    }

    /// A three-node Redis Cluster, or `None` (skipped) without redis-server.
    pub fn cluster(test: &str) -> Option<Redis> {
        if !installed(test) || !installed_program(test, "redis-cli") {
            return None;
        }
        let turn = heavy_turn();
        Some(Redis::Cluster(RedisCluster::start(), turn))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Redis::Cluster(..))
    }

    /// A new connection for a fleet member (its own thread and runtime).
    pub fn fleet(&self) -> retry_redis::Fleet {
        match self {
            Redis::Single(server) => retry_redis::Fleet::connect(&server.url()),
            Redis::Cluster(cluster, _) => {
                let urls = cluster.urls();
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                retry_redis::Fleet::connect_cluster(&urls)
            }
        }
        .expect("a fleet connection")
    }

    /// A connection for the test's own commands (routed by key on a
    /// cluster).
    pub fn conn(&self) -> Box<dyn redis::ConnectionLike> {
        match self {
            Redis::Single(server) => Box::new(server.conn()),
            Redis::Cluster(cluster, _) => Box::new(
                redis::cluster::ClusterClient::new(cluster.urls())
                    .expect("a cluster client")
                    .get_connection()
                    .expect("a cluster connection"),
            ),
        }
    }

    /// The servers: one, or the cluster's nodes.
    pub fn servers(&self) -> Vec<&RedisServer> {
        match self {
            Redis::Single(server) => vec![server],
            Redis::Cluster(cluster, _) => cluster.nodes.iter().collect(),
        }
    }

    /// The keys under `pattern`, on every node.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .servers()
            .iter()
            .flat_map(|s| s.keys(pattern))
            .collect();
        keys.sort();
        keys
    }

    /// Empties every node.
    pub fn flushall(&self) {
        for server in self.servers() {
            let _: () = redis::cmd("FLUSHALL")
                .query(&mut server.conn())
                .expect("FLUSHALL");
        }
    }

    /// Stops every node (SIGSTOP).
    pub fn stop(&self) {
        for server in self.servers() {
            server.stop();
        }
    }

    /// Lets every node run again (SIGCONT).
    pub fn resume(&self) {
        for server in self.servers() {
            server.resume();
        }
    }

    /// Kills every node (SIGKILL).
    pub fn kill(&mut self) {
        match self {
            Redis::Single(server) => server.kill(),
            Redis::Cluster(cluster, _) => cluster.nodes.iter_mut().for_each(RedisServer::kill),
        }
    }

    /// Starts every node again on its port and in its directory, empty (a
    /// cluster's nodes find each other again from their saved configuration).
    pub fn restart(&mut self) {
        match self {
            Redis::Single(server) => server.restart(),
            Redis::Cluster(cluster, _) => {
                cluster.nodes.iter_mut().for_each(RedisServer::restart);
                cluster.wait_until_up();
            }
        }
    }

    /// Where a member process connects: a URL, or `cluster:` and the nodes'
    /// URLs, comma-separated.
    pub fn address(&self) -> String {
        match self {
            Redis::Single(server) => server.url(),
            Redis::Cluster(cluster, _) => format!("cluster:{}", cluster.urls().join(",")),
        }
    }

    /// A new connection to the Redis at `address` (see [`Redis::address`]).
    pub fn connect(address: &str) -> retry_redis::Fleet {
        match address.strip_prefix("cluster:") {
            Some(nodes) => {
                let nodes: Vec<&str> = nodes.split(',').collect();
                retry_redis::Fleet::connect_cluster(&nodes)
            }
            None => retry_redis::Fleet::connect(address),
        }
        .expect("a fleet connection")
    }
}

/// Runs each named test body (a `fn(&Redis)`) twice, as `<name>::single`
/// against one redis-server and as `<name>::cluster` against a three-node
/// Redis Cluster: the fleet keeps its promises on either.
#[macro_export]
macro_rules! on_single_and_cluster {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn single() {
                let test = concat!(module_path!(), "::single");
                if let Some(redis) = $crate::common::Redis::single(test) {
                    super::$name(&redis);
                }
            }

            #[test]
            fn cluster() {
                let test = concat!(module_path!(), "::cluster");
                if let Some(redis) = $crate::common::Redis::cluster(test) {
                    super::$name(&redis);
                }
            }
        }
    )*};
}
