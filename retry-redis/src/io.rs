//! The connection to Redis: a thread of its own running a small tokio runtime
//! with one auto-reconnecting multiplexed connection. Budgets and breakers hand
//! it jobs; it runs each as a task, so no caller's runtime (or lack of one)
//! matters and a caller waits at most its own timeout.

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::sync::Arc;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::mpsc;

use crate::error::SetupError;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
pub(crate) type Job = Box<dyn FnOnce(ConnectionManager) -> BoxFuture + Send>;

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

impl Io {
    pub(crate) fn start(url: &str, timeout: Duration) -> Result<Io, SetupError> {
        let client = redis::Client::open(url).map_err(|e| SetupError::Url {
            message: e.to_string(),
        })?;
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SetupError::Thread {
                message: e.to_string(),
            })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(200));
        std::thread::Builder::new()
            .name("retry-redis".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(conn) = ConnectionManager::new_lazy_with_config(client, config) else {
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
        F: FnOnce(ConnectionManager) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.stats.jobs.fetch_add(1, Ordering::Relaxed);
        self.jobs
            .send(Box::new(move |conn| Box::pin(job(conn))))
            .is_ok()
    }
}
