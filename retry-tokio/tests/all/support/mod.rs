//! A real HTTP server on 127.0.0.1 for the reqwest tests: axum on an ephemeral
//! port, counting every request each endpoint sees, plus a raw TCP endpoint that
//! reads a request and drops the connection without answering.

#![allow(dead_code, unreachable_pub)]

use core::net::SocketAddr;
use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, Response};
use axum::Router;
use tokio::io::AsyncReadExt as _;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The path.
    pub path: String,
    /// The query string, if any.
    pub query: Option<String>,
    /// The wall clock when the handler ran.
    pub at: SystemTime,
    /// The `x-retry-count` header, if the client sent one.
    pub retry_count: Option<String>,
}

/// The server's books.
#[derive(Default)]
pub struct Books {
    seen: Mutex<Vec<Seen>>,
    /// Requests per path, counted as they arrive.
    counts: Mutex<HashMap<String, u32>>,
    /// Requests the load endpoint saw.
    pub load: AtomicU32,
    /// Told when a `hang` request with this id arrives (the load test cancels or
    /// aborts a call only once the server has its request).
    pub arrivals: Mutex<HashMap<u32, oneshot::Sender<()>>>,
    /// The `Retry-After` date (whole seconds since the epoch) `/dated` sent.
    pub dated: Mutex<Option<u64>>,
    /// Connections the dropping endpoint read a request from.
    pub dropped: AtomicU32,
}

impl Books {
    /// Every request seen on `path`, in order.
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|s| s.path == path).cloned().collect()
    }

    /// How many requests `path` saw.
    pub fn count(&self, path: &str) -> u32 {
        self.counts.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// Registers a hang request id; the receiver fires when it arrives.
    pub fn expect_arrival(&self, id: u32) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.arrivals.lock().unwrap().insert(id, tx);
        rx
    }

    /// Records a request; returns how many `path` has seen, this one included.
    fn record(&self, request: &Request<Body>) -> u32 {
        let path = request.uri().path().to_owned();
        let n = {
            let mut counts = self.counts.lock().unwrap();
            let n = counts.entry(path.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let retry_count = request
            .headers()
            .get("x-retry-count")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        self.seen.lock().unwrap().push(Seen {
            path,
            query: request.uri().query().map(str::to_owned),
            at: SystemTime::now(),
            retry_count,
        });
        n
    }
}

/// A running server: its address and its books.
pub struct Server {
    /// Where axum listens.
    pub addr: SocketAddr,
    /// Where the connection-dropping endpoint listens.
    pub dropping: SocketAddr,
    /// What it saw.
    pub books: Arc<Books>,
}

impl Server {
    /// The URL of `path` on the axum server.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The URL of the endpoint that drops every connection.
    pub fn dropping_url(&self) -> String {
        format!("http://{}/drop", self.dropping)
    }
}

fn respond(status: u16, headers: &[(&str, String)], body: &'static str) -> Response<Body> {
    let mut response = Response::builder().status(status);
    for (name, value) in headers {
        response = response.header(*name, value.as_str());
    }
    response.body(Body::from(body)).unwrap()
}

/// Whether the load endpoint fails request `n`: a fixed pseudo-random fifth of
/// them (a hash of the count, so failures come in irregular runs).
pub fn load_fails(n: u32) -> bool {
    let mut x = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    x % 5 == 0
}

fn query_value<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find_map(|(k, v)| (k == key).then_some(v))
}

async fn handle(State(books): State<Arc<Books>>, request: Request<Body>) -> Response<Body> {
    let n = books.record(&request);
    let query = request.uri().query().map(str::to_owned);
    let query = query.as_deref();
    match request.uri().path() {
        // 503 twice, then 200.
        "/flaky" => {
            if n <= 2 {
                respond(503, &[], "busy")
            } else {
                respond(200, &[], "ok")
            }
        }
        // 429 with `Retry-After: 1`, then 200.
        "/limited" => {
            if n == 1 {
                respond(429, &[("retry-after", "1".to_owned())], "slow down")
            } else {
                respond(200, &[], "ok")
            }
        }
        // 503 with an HTTP-date `Retry-After` two whole seconds ahead, then 200.
        "/dated" => {
            if n == 1 {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
                let date = now.as_secs() + 2;
                *books.dated.lock().unwrap() = Some(date);
                let mut text = [0u8; 29];
                retry_core::format_http_date(date, &mut text);
                let text = String::from_utf8(text.to_vec()).unwrap();
                respond(503, &[("retry-after", text)], "later")
            } else {
                respond(200, &[], "ok")
            }
        }
        // 503 with `retry-after-ms: 250` (and a `Retry-After` it wins over), then 200.
        "/ms" => {
            if n == 1 {
                respond(
                    503,
                    &[
                        ("retry-after-ms", "250".to_owned()),
                        ("retry-after", "30".to_owned()),
                    ],
                    "later",
                )
            } else {
                respond(200, &[], "ok")
            }
        }
        "/bad" => respond(400, &[], "no such thing"),
        "/always-503" => respond(503, &[], "down"),
        // Hangs far past any attempt timeout.
        "/hang" => {
            tokio::time::sleep(Duration::from_secs(300)).await;
            respond(200, &[], "too late")
        }
        // 503 once, then hangs.
        "/then-hang" => {
            if n == 1 {
                respond(503, &[], "busy")
            } else {
                tokio::time::sleep(Duration::from_secs(300)).await;
                respond(200, &[], "too late")
            }
        }
        // The load test's endpoint: a fifth fail; `fail=1` always fails;
        // `hang=ID` tells the test it arrived, then never answers.
        "/load" => {
            let seen = books.load.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(id) = query_value(query, "hang").and_then(|v| v.parse().ok()) {
                let told = books.arrivals.lock().unwrap().remove(&id);
                if let Some(tell) = told {
                    let _ = tell.send(());
                }
                core::future::pending::<()>().await;
            }
            if query_value(query, "fail").is_some() || load_fails(seen) {
                respond(503, &[], "busy")
            } else {
                respond(200, &[], "ok")
            }
        }
        _ => respond(404, &[], "not found"),
    }
}

/// Starts the server on 127.0.0.1 (ephemeral ports) in the current runtime.
pub async fn start() -> Server {
    let books = Arc::new(Books::default());
    let app = Router::new()
        .fallback(handle)
        .with_state(Arc::clone(&books));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });

    let dropping_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dropping = dropping_listener.local_addr().unwrap();
    let counted = Arc::clone(&books);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = dropping_listener.accept().await else {
                return;
            };
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                // Read the request head, count it, and close without a word.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                counted.dropped.fetch_add(1, Ordering::SeqCst);
                drop(socket);
            });
        }
    });
    Server {
        addr,
        dropping,
        books,
    }
}

/// A reqwest client without TLS, proxies or connection reuse surprises.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}
