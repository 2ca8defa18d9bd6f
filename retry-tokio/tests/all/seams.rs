#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Safe defaults where a service meets the library (SPEC §14, §14a), each
//! against a real axum server (or a raw TCP listener that reads a request and
//! drops the connection) on 127.0.0.1, driven by reqwest: what the server saw
//! (request counts, methods) and what the caller got.
//!
//! 1. `HedgeLayer` hedges only requests that may be sent twice.
//! 2. `HedgeLayer` judges responses: a retryable 503 is a failed copy.
//! 3. The tower retry stack does not replay a POST whose request was sent.
//! 4. A zero delay gives the runtime a turn (no starved tasks or timeouts).
//! 5. A timeout inside `BreakerLayer` trips it; one outside follows the
//!    abandoned-attempt rule the caller sets.
//!
//! (Item 6, the metrics, is in `metrics.rs`, beside its recorder.)
#![cfg(all(feature = "reqwest", feature = "tower"))]

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, Response};
use axum::Router;
use retry_tokio::reqwest_call::{send, RequestError};
use retry_tokio::tower::{
    BreakerLayer, BreakerServiceError, ByMethod, HedgeLayer, HttpStatus, Recreate as _,
    ReqwestErrors, RetryLayer, TryClone,
};
use retry_tokio::{
    AbandonedRule, Backoff, BreakerConfig, BreakerState, FailureKind, Hedge, HedgePolicy,
    Idempotency, Jitter, Retry, RetryPolicy, RetryStreamExt as _, SharedBreaker,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tower::{service_fn, Layer as _, Service as _, ServiceBuilder, ServiceExt as _};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What a server saw: every request's method, by path, in order.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<String, Vec<String>>>>);

impl Seen {
    /// Records a request; returns how many `path` has seen, this one included.
    fn record(&self, method: &str, path: &str) -> usize {
        let mut seen = self.0.lock().unwrap();
        let methods = seen.entry(path.to_owned()).or_default();
        methods.push(method.to_owned());
        methods.len()
    }

    /// The methods of every request `path` saw.
    fn methods(&self, path: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .get(path)
            .cloned()
            .unwrap_or_default()
    }

    fn count(&self, path: &str) -> usize {
        self.methods(path).len()
    }
}

fn respond(status: u16, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Body::from(body))
        .unwrap()
}

async fn handle(State(seen): State<Seen>, request: Request<Body>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let n = seen.record(request.method().as_str(), &path);
    match path.as_str() {
        // Answers after 200 ms.
        "/slow" => {
            tokio::time::sleep(ms(200)).await;
            respond(200, "slow")
        }
        // The first request answers 200 after 300 ms; later ones 503 at once.
        "/race" => {
            if n == 1 {
                tokio::time::sleep(ms(300)).await;
                respond(200, "good")
            } else {
                respond(503, "busy")
            }
        }
        // The first request answers 200 after 300 ms; the second 400 at once.
        "/race-400" => {
            if n == 1 {
                tokio::time::sleep(ms(300)).await;
                respond(200, "good")
            } else {
                respond(400, "bad request")
            }
        }
        // 503 twice, then 200.
        "/flaky" => {
            if n <= 2 {
                respond(503, "busy")
            } else {
                respond(200, "ok")
            }
        }
        "/always-503" => respond(503, "down"),
        "/warm" => respond(200, "warm"),
        // Hangs far past any timeout here.
        "/hang" => {
            tokio::time::sleep(Duration::from_secs(300)).await;
            respond(200, "too late")
        }
        _ => respond(404, "not found"),
    }
}

/// An axum server on 127.0.0.1, and what it sees.
struct Server {
    base: String,
    seen: Seen,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

async fn axum_server() -> Server {
    let seen = Seen::default();
    let app = Router::new().fallback(handle).with_state(seen.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Server { base, seen }
}

/// A raw server on 127.0.0.1 that reads each request's head, records its
/// method, then answers with `reply` (nothing: the connection drops after the
/// request was sent) and closes.
async fn raw_server(reply: &'static [u8]) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/charge", listener.local_addr().unwrap());
    let methods: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&methods);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head).into_owned();
                let method = line.split(' ').next().unwrap_or_default().to_owned();
                log.lock().unwrap().push(method);
                let _ = socket.write_all(reply).await;
                let _ = socket.flush().await;
                drop(socket);
            });
        }
    });
    (url, methods)
}

/// A server whose connections drop after the request was sent.
async fn dropping_server() -> (String, Arc<Mutex<Vec<String>>>) {
    raw_server(b"").await
}

/// A client without proxies or pooled connections (so that no request is
/// re-sent by the HTTP stack on a connection the server closed).
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

fn methods(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    log.lock().unwrap().clone()
}

fn hedge_policy(copies: u32, delay: u64) -> HedgePolicy {
    HedgePolicy::builder()
        .max_attempts(copies)
        .fixed_delay(ms(delay))
        .build()
        .unwrap()
}

fn retry_policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::constant(ms(10)))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

// ----- 1. HedgeLayer hedges only requests that may be sent twice -----

#[tokio::test]
async fn the_hedge_layer_sends_a_post_once_and_hedges_a_get() {
    let server = axum_server().await;
    let client = client();
    let hedged = ServiceBuilder::new()
        .layer(
            HedgeLayer::new(Hedge::new(hedge_policy(3, 20)))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus),
        )
        .service(client.clone());

    // A slow POST: the hedge delay passes twice, and no copy goes out.
    let charge = client
        .post(server.url("/slow"))
        .body("charge 42")
        .build()
        .unwrap();
    let response = hedged.clone().oneshot(charge).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.seen.methods("/slow"), ["POST"]);

    // A slow GET: hedged at 20 and 40 ms.
    let read = client.get(server.url("/slow")).build().unwrap();
    let response = hedged.clone().oneshot(read).await.unwrap();
    assert_eq!(response.text().await.unwrap(), "slow");
    assert_eq!(server.seen.methods("/slow"), ["POST", "GET", "GET", "GET"]);
}

#[tokio::test]
async fn a_post_the_caller_marks_is_hedged() {
    let server = axum_server().await;
    let client = client();
    // reqwest::Request has no public extensions: the mark is a header here.
    let rule = ByMethod.or_when(|r: &reqwest::Request| r.headers().contains_key("idempotency-key"));
    let hedged = ServiceBuilder::new()
        .layer(
            HedgeLayer::new(Hedge::new(hedge_policy(2, 20)))
                .recreate_with(TryClone)
                .replay_rule(rule),
        )
        .service(client.clone());
    let unmarked = client.post(server.url("/slow")).build().unwrap();
    hedged.clone().oneshot(unmarked).await.unwrap();
    assert_eq!(server.seen.count("/slow"), 1);
    let marked = client
        .post(server.url("/slow"))
        .header("idempotency-key", "charge-42")
        .build()
        .unwrap();
    hedged.clone().oneshot(marked).await.unwrap();
    assert_eq!(server.seen.methods("/slow"), ["POST", "POST", "POST"]);

    // An http::Request carries the core's mark in its extensions.
    let converting = service_fn(move |request: http::Request<String>| {
        let client = client.clone();
        async move { client.execute(reqwest::Request::try_from(request)?).await }
    });
    let hedged = ServiceBuilder::new()
        .layer(HedgeLayer::new(Hedge::new(hedge_policy(2, 20))))
        .service(converting);
    let mut request = http::Request::post(server.url("/slow"))
        .body(String::from("charge 43"))
        .unwrap();
    request.extensions_mut().insert(Idempotency::Always);
    hedged.clone().oneshot(request).await.unwrap();
    assert_eq!(server.seen.count("/slow"), 5, "the marked POST was hedged");
    let mut request = http::Request::get(server.url("/slow"))
        .body(String::new())
        .unwrap();
    request.extensions_mut().insert(Idempotency::Never);
    hedged.oneshot(request).await.unwrap();
    assert_eq!(
        server.seen.count("/slow"),
        6,
        "a GET marked never is sent once"
    );
}

#[tokio::test]
async fn through_the_hedge_layer_a_post_whose_connection_drops_is_sent_once() {
    let (url, seen) = dropping_server().await;
    let client = client();
    let hedged = ServiceBuilder::new()
        .layer(HedgeLayer::new(Hedge::new(hedge_policy(3, 20))).recreate_with(TryClone))
        .service(client.clone());
    let err = hedged
        .clone()
        .oneshot(client.post(&url).body("charge 42").build().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.attempts(), 1);
    assert_eq!(methods(&seen), ["POST"], "the server saw the POST once");
    // A GET is sent again at once after each failed copy: three in all.
    let err = hedged
        .oneshot(client.get(&url).build().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.exhausted");
    assert_eq!(err.attempts(), 3);
    assert_eq!(methods(&seen), ["POST", "GET", "GET", "GET"]);
}

// ----- 2. HedgeLayer judges responses -----

#[tokio::test]
async fn a_retryable_503_never_wins_a_hedge_over_a_later_200() {
    let server = axum_server().await;
    let client = client();
    let hedged = ServiceBuilder::new()
        .layer(
            HedgeLayer::new(Hedge::new(hedge_policy(3, 20)))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus),
        )
        .service(client.clone());
    let started = std::time::Instant::now();
    let response = hedged
        .clone()
        .oneshot(client.get(server.url("/race")).build().unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "good");
    assert!(
        started.elapsed() >= ms(300),
        "the answer is the first copy's"
    );
    // Copy 2 answered 503 at 20 ms, copy 3 went out at once and did too.
    assert_eq!(server.seen.count("/race"), 3);

    // A permanent answer ends the call: the 400 is the answer, copy 1 is
    // cancelled, no third copy.
    let response = hedged
        .clone()
        .oneshot(client.get(server.url("/race-400")).build().unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(server.seen.count("/race-400"), 2);

    // Every copy failed: the last 503 is the answer, as a client's last
    // response is.
    let response = hedged
        .oneshot(client.get(server.url("/always-503")).build().unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(server.seen.count("/always-503"), 3);
}

// ----- 3. The tower retry stack does not replay a sent POST -----

#[tokio::test]
async fn through_the_retry_layer_a_post_whose_connection_drops_is_sent_once() {
    let (url, seen) = dropping_server().await;
    let client = client();
    // The retrier's own classifier (every error retryable) and the layer's
    // default rule: the POST is not replayed.
    let retrying = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(retry_policy(3)))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus),
        )
        .service(client.clone());
    let err = retrying
        .clone()
        .oneshot(client.post(&url).body("charge 42").build().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "retry.permanent");
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.last_failure(), Some(FailureKind::Connection));
    assert_eq!(methods(&seen), ["POST"]);
    // The same GET is replayed.
    let err = retrying
        .clone()
        .oneshot(client.get(&url).build().unwrap())
        .await
        .unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.exhausted", 3));
    assert_eq!(methods(&seen), ["POST", "GET", "GET", "GET"]);

    // The ready reqwest judgement, and a POST the caller marks.
    let rule = ByMethod.or_when(|r: &reqwest::Request| r.headers().contains_key("idempotency-key"));
    let judged = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(retry_policy(3)))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus)
                .classify_errors(ReqwestErrors)
                .replay_rule(rule),
        )
        .service(client.clone());
    let err = judged
        .clone()
        .oneshot(client.post(&url).body("charge 43").build().unwrap())
        .await
        .unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.permanent", 1));
    assert_eq!(methods(&seen).len(), 5);
    let marked = client
        .post(&url)
        .header("idempotency-key", "charge-44")
        .body("charge 44")
        .build()
        .unwrap();
    let err = judged.clone().oneshot(marked).await.unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.exhausted", 3));
    assert_eq!(methods(&seen)[5..], ["POST", "POST", "POST"]);

    // Nothing was sent (no one listens): a POST is retried all the same.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nowhere = format!("http://{}/charge", closed.local_addr().unwrap());
    drop(closed);
    let err = judged
        .oneshot(client.post(&nowhere).body("charge 45").build().unwrap())
        .await
        .unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.exhausted", 3));
    assert_eq!(err.last_failure(), Some(FailureKind::NotSent));
}

#[tokio::test]
async fn through_the_retry_layer_a_503_to_a_post_is_retried_as_the_server_asks() {
    let server = axum_server().await;
    let client = client();
    let retrying = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(retry_policy(3)))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus)
                .classify_errors(ReqwestErrors),
        )
        .service(client.clone());
    let response = retrying
        .oneshot(client.post(server.url("/flaky")).body("x").build().unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(server.seen.methods("/flaky"), ["POST", "POST", "POST"]);
}

#[tokio::test]
async fn a_request_whose_body_cannot_be_cloned_is_sent_once() {
    let server = axum_server().await;
    let (url, dropped) = dropping_server().await;
    let client = client();
    let retrying = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(retry_policy(3)))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus)
                .classify_errors(ReqwestErrors)
                // Even a request the caller marks: it cannot be sent twice.
                .idempotent_when(|_: &reqwest::Request| true),
        )
        .service(client.clone());
    let streamed = |url: &str| {
        let chunks = futures_util::stream::iter([Ok::<_, std::io::Error>(
            bytes::Bytes::from_static(b"charge 42"),
        )]);
        client
            .post(url)
            .body(reqwest::Body::wrap_stream(chunks))
            .build()
            .unwrap()
    };
    let original = streamed(&url);
    // `TryClone` refuses it with a typed error (a context as a layer makes one).
    let context = Retry::<()>::new(retry_policy(1))
        .call(|ctx| async move { Ok::<_, ()>(ctx) })
        .await
        .unwrap()
        .value;
    let Err(refused) = TryClone.recreate(&original, &context) else {
        panic!("a streaming body was cloned");
    };
    assert_eq!(refused.method(), "POST");
    assert_eq!(
        refused.to_string(),
        format!("the POST request to {url} has a streaming body, which cannot be sent twice")
    );
    // The connection drops: the error is final.
    let err = retrying.clone().oneshot(original).await.unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.permanent", 1));
    assert_eq!(methods(&dropped), ["POST"]);
    // A 503: the call ends on it, sent once.
    let response = retrying
        .oneshot(streamed(&server.url("/always-503")))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(server.seen.methods("/always-503"), ["POST"]);
}

// ----- reqwest_call: reading the body inside the retried operation -----

#[tokio::test]
async fn a_body_that_breaks_off_is_retried_for_a_get_and_not_for_a_post() {
    // Promises 100 bytes, sends 5, closes.
    let (url, seen) = raw_server(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhello").await;
    let client = client();
    let retry = Retry::new(retry_policy(3)).classify(RequestError::failure);
    let err = retry
        .call(|_| async { send(client.get(&url)).await?.text().await })
        .await
        .unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.exhausted", 3));
    assert_eq!(err.last_failure(), Some(FailureKind::Connection));
    assert_eq!(methods(&seen), ["GET", "GET", "GET"]);

    let err = retry
        .call(|_| async {
            send(client.post(&url).body("charge 42"))
                .await?
                .text()
                .await
        })
        .await
        .unwrap_err();
    assert_eq!((err.code(), err.attempts()), ("retry.permanent", 1));
    assert!(matches!(
        err.last_error(),
        Some(RequestError::Transport { .. })
    ));
    assert_eq!(methods(&seen)[3..], ["POST"]);
}

#[tokio::test]
async fn the_body_read_inside_the_operation_is_the_value() {
    let server = axum_server().await;
    let client = client();
    let retry = Retry::new(retry_policy(3)).classify(RequestError::failure);
    let done = retry
        .call(|_| async { send(client.get(server.url("/flaky"))).await?.text().await })
        .await
        .unwrap();
    assert_eq!((done.value.as_str(), done.attempts), ("ok", 3));
    assert_eq!(server.seen.methods("/flaky"), ["GET", "GET", "GET"]);
}

// ----- 4. A zero delay gives the runtime a turn -----

/// A policy of up to two million attempts with no delay: without a turn per
/// retry it runs for a good fraction of a second without a pause.
fn relentless() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(2_000_000)
        .backoff(Backoff::None)
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

/// How a call run under an outer 50 ms timeout beside a 1 ms ticker on the
/// same current-thread runtime went.
#[derive(Clone, Copy, Debug)]
struct Turns {
    /// How long until the outer timeout returned.
    took: Duration,
    /// The ticks the ticker ran meanwhile.
    ticked: u32,
    /// The ticks due in that time (one a millisecond).
    due: u32,
    /// Whether the outer timeout ended the call (not the call its attempts).
    timed_out: bool,
}

impl Turns {
    /// The targets: the outer timeout ends the call within 60 ms, and the
    /// ticker runs at least 80 % of its ticks.
    fn met(self) -> bool {
        self.timed_out && self.took < ms(60) && self.ticked * 100 >= self.due * 80
    }
}

/// Runs `call` under an outer 50 ms timeout beside a 1 ms ticker (tokio's
/// default interval: a tick that comes late is delivered as soon as the
/// ticker runs, so the count says how many of its ticks it got by the end; a
/// call that never gives the runtime a turn leaves it at zero until then,
/// and one turn after it at most 128).
fn beside_a_ticker<F: core::future::Future>(call: impl FnOnce() -> F) -> Turns {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ticks = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&ticks);
        let ticker = tokio::spawn(async move {
            let mut every = tokio::time::interval(ms(1));
            loop {
                every.tick().await;
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        // Let the ticker start.
        tokio::time::sleep(ms(5)).await;
        let before = ticks.load(Ordering::SeqCst);
        let started = std::time::Instant::now();
        let outcome = tokio::time::timeout(ms(50), call()).await;
        let took = started.elapsed();
        // The tick due with the timeout's own wake-up is run after it: one
        // turn for the ticker (at most 128 ticks of a backlog: tokio's
        // cooperative budget).
        tokio::task::yield_now().await;
        let ticked = ticks.load(Ordering::SeqCst) - before;
        ticker.abort();
        Turns {
            took,
            ticked,
            due: u32::try_from(took.as_millis()).unwrap(),
            timed_out: outcome.is_err(),
        }
    })
}

/// Runs the measurement up to five times (the machine is shared: a run the
/// operating system preempts for a few milliseconds says nothing of the
/// code) and asserts that one of them meets the targets; a loop that never
/// yields misses them in every run (its outer timeout returns only after the
/// whole loop, its ticker at zero).
fn assert_turns<F: core::future::Future>(what: &str, call: impl Fn() -> F) {
    // One measurement at a time: three busy threads on a two-core machine
    // would measure each other.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut runs = Vec::new();
    for _ in 0..5 {
        let turns = beside_a_ticker(&call);
        eprintln!(
            "{what}: outer timeout(50ms) returned after {:?} ({}); the 1 ms ticker ran {} of {} ticks",
            turns.took,
            if turns.timed_out { "timed out" } else { "the call ended first" },
            turns.ticked,
            turns.due
        );
        runs.push(turns);
        if turns.met() {
            return;
        }
    }
    panic!("{what}: no run met the targets: {runs:?}");
}

#[test]
fn a_zero_delay_retry_loop_leaves_turns_to_a_ticker_and_an_outer_timeout() {
    assert_turns("Retry::call", || async {
        Retry::<&str>::new(relentless())
            .call(|_| async { Err::<(), _>("cold") })
            .await
    });
}

#[test]
fn a_zero_delay_retry_layer_leaves_turns_to_a_ticker_and_an_outer_timeout() {
    assert_turns("RetryLayer", || {
        let failing = service_fn(|_: u32| async { Err::<u32, _>("cold") });
        let service = RetryLayer::new(Retry::new(relentless()))
            .idempotent_when(|_: &u32| true)
            .layer(failing);
        service.oneshot(1)
    });
}

#[test]
fn a_zero_delay_retried_stream_leaves_turns_to_a_ticker_and_an_outer_timeout() {
    use futures_util::StreamExt as _;
    assert_turns("RetryStreamExt", || {
        futures_util::stream::iter([1_u32, 2])
            .retry_map(Retry::new(relentless()), 2, |_, _| async {
                Err::<(), _>("cold")
            })
            .collect::<Vec<_>>()
    });
}

#[tokio::test]
async fn a_retry_waiting_for_another_task_to_warm_the_cache_lets_it() {
    let server = axum_server().await;
    let warm = Arc::new(AtomicBool::new(false));
    let warmer = {
        let (warm, url, client) = (Arc::clone(&warm), server.url("/warm"), client());
        tokio::spawn(async move {
            let body = client.get(url).send().await.unwrap().text().await.unwrap();
            warm.store(body == "warm", Ordering::SeqCst);
        })
    };
    let policy = RetryPolicy::builder()
        .max_attempts(10_000_000)
        .backoff(Backoff::None)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(10),
        Retry::<&str>::new(policy).call(|_| {
            let warm = warm.load(Ordering::SeqCst);
            async move {
                if warm {
                    Ok(())
                } else {
                    Err("cold")
                }
            }
        }),
    )
    .await
    .expect("the call ended")
    .expect("the cache warmed before the attempts ran out");
    warmer.await.unwrap();
    eprintln!("warmed after {} attempts", done.attempts);
    assert_eq!(server.seen.methods("/warm"), ["GET"]);
}

// ----- 5. Where the timeout goes -----

fn default_breaker() -> SharedBreaker {
    SharedBreaker::new(BreakerConfig::default()).unwrap()
}

#[tokio::test]
async fn a_timeout_inside_the_breaker_layer_trips_it_with_the_default_config() {
    let server = axum_server().await;
    let client = client();
    let breaker = default_breaker();
    let mut stack = ServiceBuilder::new()
        .layer(BreakerLayer::new(breaker.clone()))
        .layer(tower::timeout::TimeoutLayer::new(ms(100)))
        .service(client.clone());
    // The default rule: five failures in a row open it.
    for n in 1..=5 {
        assert_eq!(breaker.state(), BreakerState::Closed, "before call {n}");
        let request = client.get(server.url("/hang")).build().unwrap();
        let err = stack
            .ready()
            .await
            .unwrap()
            .call(request)
            .await
            .unwrap_err();
        assert!(matches!(err, BreakerServiceError::Inner(_)), "{err}");
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    let request = client.get(server.url("/hang")).build().unwrap();
    let err = stack
        .ready()
        .await
        .unwrap()
        .call(request)
        .await
        .unwrap_err();
    assert!(err.is_circuit_open());
    assert_eq!(server.seen.count("/hang"), 5, "the sixth never left");
}

#[tokio::test]
async fn a_timeout_outside_the_breaker_layer_counts_when_the_layer_says_so() {
    let server = axum_server().await;
    let client = client();
    for (rule, after) in [
        (AbandonedRule::FailureIfSlow, BreakerState::Closed),
        (AbandonedRule::Failure, BreakerState::Open),
    ] {
        let breaker = default_breaker();
        let mut stack = ServiceBuilder::new()
            .layer(tower::timeout::TimeoutLayer::new(ms(100)))
            .layer(BreakerLayer::new(breaker.clone()).abandoned(rule))
            .service(client.clone());
        for _ in 0..5 {
            let request = client.get(server.url("/hang")).build().unwrap();
            let err = stack
                .ready()
                .await
                .unwrap()
                .call(request)
                .await
                .unwrap_err();
            assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
        }
        assert_eq!(breaker.state(), after, "under {rule:?}");
    }
    assert_eq!(server.seen.count("/hang"), 10);
}

#[tokio::test]
async fn a_retry_behind_an_outer_timeout_counts_when_the_retry_says_so() {
    let server = axum_server().await;
    let client = client();
    let once = retry_policy(1);
    for (rule, after) in [
        (AbandonedRule::FailureIfSlow, BreakerState::Closed),
        (AbandonedRule::Failure, BreakerState::Open),
    ] {
        let breaker = default_breaker();
        let retry = Retry::new(once)
            .classify(RequestError::failure)
            .breaker(breaker.clone())
            .abandoned(rule);
        for _ in 0..5 {
            let call = retry.call(|_| send(client.get(server.url("/hang"))));
            assert!(tokio::time::timeout(ms(100), call).await.is_err());
        }
        assert_eq!(breaker.state(), after, "under {rule:?}");
    }
    // The policy's own attempt timeout is inside: a failure by default.
    let breaker = default_breaker();
    let timed = RetryPolicy::builder()
        .max_attempts(1)
        .attempt_timeout(ms(100))
        .build()
        .unwrap();
    let retry = Retry::new(timed)
        .classify(RequestError::failure)
        .breaker(breaker.clone());
    for _ in 0..5 {
        let err = retry
            .call(|_| send(client.get(server.url("/hang"))))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "retry.timeout");
    }
    assert_eq!(breaker.state(), BreakerState::Open);
    assert_eq!(server.seen.count("/hang"), 15);
}
