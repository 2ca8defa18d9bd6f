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
}

/// Starts a server, or says why not: `None` means the test is skipped.
pub fn start(test: &str) -> Option<RedisServer> {
    if Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        let required = std::env::var("RETRY_REDIS_REQUIRED").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{test}: redis-server is not installed and RETRY_REDIS_REQUIRED=1 (apt-get install redis-server)"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: redis-server not found on PATH; install it (Debian/Ubuntu: \
             `apt-get install redis-server`, macOS: `brew install redis`) to run the Redis tests"
        );
        return None;
    }
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("retry-redis-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut server = RedisServer {
        child: None,
        port,
        dir,
    };
    server.spawn();
    Some(server)
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

impl RedisServer {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut conn) = self.client().get_connection() {
                if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                    return;
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
        self.spawn();
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
