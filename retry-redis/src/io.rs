//! The connection to Redis: a thread of its own running a small tokio runtime
//! with one auto-reconnecting multiplexed connection (to a single Redis, or to
//! a Redis Cluster through its nodes). Budgets and breakers hand it jobs; it
//! runs each as a task, so no caller's runtime (or lack of one) matters and a
//! caller waits at most its own timeout.

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::mpsc;

use crate::error::SetupError;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
pub(crate) type Job = Box<dyn FnOnce(Conn) -> BoxFuture + Send>;

/// Where the fleet's Redis is.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// One Redis (a primary), by URL.
    Single(String),
    /// A Redis Cluster, by the URLs of some of its nodes.
    Cluster(Vec<String>),
}

/// Counters shared by everything on one connection.
#[derive(Debug, Default)]
pub(crate) struct IoStats {
    pub(crate) jobs: AtomicU64,
}

/// A handle on the connection thread. Clones share it; the thread ends when the
/// last handle is dropped (and with it every breaker's sync task).
#[derive(Clone, Debug)]
pub(crate) struct Io {
    jobs: mpsc::UnboundedSender<Job>,
    pub(crate) stats: Arc<IoStats>,
}

/// A connection as the jobs use it: to one Redis or to a cluster. Cheap to
/// clone; clones share the connection.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    Cluster(Arc<Cluster>),
}

/// A cluster connection, made in the background (no caller waits for more than
/// its own timeout, and a caller giving up does not cancel the connecting) by
/// the cluster client, which follows the cluster's slots and repairs its
/// connections to the nodes. Should it still find no node to talk to after
/// the whole cluster went away and came back, the connection is made anew:
/// after three such failures in a row, at most once a second.
pub(crate) struct Cluster {
    client: ClusterClient,
    config: ClusterConfig,
    conn: Mutex<ClusterConnection>,
    /// Connection failures in a row, and when the connection was last made.
    failures: Mutex<(u32, Instant)>,
}

impl Cluster {
    fn current(&self) -> ClusterConnection {
        self.conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Notes how a request ended; makes the connection anew when it keeps
    /// failing for want of a node.
    fn note<T>(&self, result: &RedisResult<T>) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Err(e)
                if e.kind() == ErrorKind::ClusterConnectionNotFound
                    || e.is_io_error()
                    || e.is_connection_refusal()
                    || e.is_connection_dropped() =>
            {
                failures.0 = failures.0.saturating_add(1);
                if failures.0 >= 3 && failures.1.elapsed() >= Duration::from_secs(1) {
                    let fresh = self
                        .client
                        .get_pending_async_connection_with_config(self.config.clone());
                    *self.conn.lock().unwrap_or_else(PoisonError::into_inner) = fresh;
                    *failures = (0, Instant::now());
                }
            }
            Err(_) => {}
            Ok(_) => failures.0 = 0,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(cluster) => Box::pin(async move {
                let mut conn = cluster.current();
                let result = conn.req_packed_command(cmd).await;
                cluster.note(&result);
                result
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(cluster) => Box::pin(async move {
                let mut conn = cluster.current();
                let result = conn.req_packed_commands(pipeline, offset, count).await;
                cluster.note(&result);
                result
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(cluster) => cluster.current().get_db(),
        }
    }
}

impl Io {
    pub(crate) fn start(target: &Target, timeout: Duration) -> Result<Io, SetupError> {
        let url_error = |e: redis::RedisError| SetupError::Url {
            message: e.to_string(),
        };
        let connect: Box<dyn FnOnce() -> Option<Conn> + Send> = match target {
            Target::Single(url) => {
                let client = redis::Client::open(url.as_str()).map_err(url_error)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(2)
                    .set_min_delay(Duration::from_millis(10))
                    .set_max_delay(Duration::from_millis(200));
                Box::new(move || {
                    ConnectionManager::new_lazy_with_config(client, config)
                        .ok()
                        .map(Conn::Single)
                })
            }
            Target::Cluster(nodes) => {
                if nodes.is_empty() {
                    return Err(SetupError::Url {
                        message: "a cluster needs the url of at least one node".to_owned(),
                    });
                }
                let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(2)
                    .build()
                    .map_err(url_error)?;
                let config = ClusterConfig::new()
                    .set_connection_timeout(timeout)
                    .set_response_timeout(timeout);
                // Called on the connection thread, inside its runtime.
                Box::new(move || {
                    let conn = client.get_pending_async_connection_with_config(config.clone());
                    Some(Conn::Cluster(Arc::new(Cluster {
                        client,
                        config,
                        conn: Mutex::new(conn),
                        failures: Mutex::new((0, Instant::now())),
                    })))
                })
            }
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SetupError::Thread {
                message: e.to_string(),
            })?;
        std::thread::Builder::new()
            .name("retry-redis".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Some(conn) = connect() else {
                        return;
                    };
                    while let Some(job) = rx.recv().await {
                        tokio::spawn(job(conn.clone()));
                    }
                });
            })
            .map_err(|e| SetupError::Thread {
                message: e.to_string(),
            })?;
        Ok(Io {
            jobs: tx,
            stats: Arc::default(),
        })
    }

    /// Runs `job` on the connection thread; `false` if the thread is gone.
    pub(crate) fn spawn<F, Fut>(&self, job: F) -> bool
    where
        F: FnOnce(Conn) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.stats.jobs.fetch_add(1, Ordering::Relaxed);
        self.jobs
            .send(Box::new(move |conn| Box::pin(job(conn))))
            .is_ok()
    }
}
