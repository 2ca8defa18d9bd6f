//! `Hedge::call` against a real HTTP server: axum on 127.0.0.1, driven by
//! reqwest. One request in five (by the order the server sees them) stalls for a
//! minute; the others answer at once. The test counts, and never times: how many
//! requests the server saw, which copy won each call, and how many losing copies
//! the client dropped.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use retry_core::{Failure, FailureKind, HedgePolicy};
use retry_tokio::Hedge;

/// What the server counts.
#[derive(Default)]
struct Seen {
    requests: AtomicU32,
    stalled: AtomicU32,
}

/// Every fifth request the server sees stalls.
const STALL_EVERY: u32 = 5;

async fn item(State(seen): State<Arc<Seen>>) -> String {
    let n = seen.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if n % STALL_EVERY == 0 {
        seen.stalled.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    n.to_string()
}

async fn serve() -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/item", get(item))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/item"), seen)
}

/// Drops are counted unless the copy finished.
struct Dropped(Arc<AtomicU32>, bool);

impl Drop for Dropped {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_request_is_hedged_and_the_hedge_wins() {
    const CALLS: u32 = 20;
    let (url, seen) = serve().await;
    let client = reqwest::Client::new();
    // A second copy after a full second: far beyond any answer that does not
    // stall on 127.0.0.1, so only the stalled requests are hedged.
    let policy = HedgePolicy::builder()
        .max_attempts(2)
        .fixed_delay(Duration::from_secs(1))
        .build()
        .unwrap();
    let hedge = Hedge::new(policy).classify(|e: &reqwest::Error| match e.status() {
        Some(s) => Failure::retryable().with_kind(FailureKind::Status(s.as_u16())),
        None => Failure::retryable().with_kind(FailureKind::Connection),
    });
    let dropped = Arc::new(AtomicU32::new(0));
    let mut hedge_wins = 0;
    for call in 1..=CALLS {
        let done = hedge
            .call(|_ctx| {
                let request = client.get(&url).send();
                let dropped = Arc::clone(&dropped);
                async move {
                    let mut guard = Dropped(dropped, true);
                    let body = request.await?.error_for_status()?.text().await?;
                    guard.1 = false;
                    Ok(body.parse::<u32>().unwrap())
                }
            })
            .await
            .unwrap_or_else(|e| panic!("call {call}: {e}"));
        // The request that answered; with a hedge, the stalled one came just
        // before it.
        let answered = done.value;
        assert_ne!(answered % STALL_EVERY, 0, "a stalled request answered");
        if done.copy == 2 {
            hedge_wins += 1;
            assert_eq!(
                (answered - 1) % STALL_EVERY,
                0,
                "call {call}: a hedge without a stall"
            );
            assert_eq!(done.launched, 2);
        } else {
            assert_eq!(done.copy, 1);
            assert_eq!(done.launched, 1, "call {call}: a fast request was hedged");
        }
    }
    // Request numbers 1, 2, 3, 4, 5 (stalls) + 6 (hedge), 7, ...: the server sees
    // one request per call plus one per stall.
    let mut expected_requests = 0;
    let mut expected_stalls = 0;
    for _ in 0..CALLS {
        expected_requests += 1;
        if expected_requests % STALL_EVERY == 0 {
            expected_stalls += 1;
            expected_requests += 1;
        }
    }
    assert_eq!(seen.requests.load(Ordering::SeqCst), expected_requests);
    assert_eq!(seen.stalled.load(Ordering::SeqCst), expected_stalls);
    assert_eq!(
        hedge_wins, expected_stalls,
        "every stall was won by its hedge"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        expected_stalls,
        "every stalled copy was dropped by the client"
    );
    assert_eq!((expected_requests, expected_stalls), (24, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_hedge_the_stalled_request_is_waited_for() {
    // The same server and client with one copy only: a stall is not hedged,
    // and the call's timeout ends it.
    let (url, seen) = serve().await;
    let client = reqwest::Client::new();
    let policy = HedgePolicy::builder()
        .max_attempts(1)
        .timeout(Duration::from_millis(1_500))
        .build()
        .unwrap();
    let hedge = Hedge::<reqwest::Error>::new(policy);
    let mut timed_out = 0;
    for _ in 0..STALL_EVERY {
        match hedge
            .call(|_| {
                let request = client.get(&url).send();
                async move { request.await?.text().await }
            })
            .await
        {
            Ok(done) => assert_eq!(done.launched, 1),
            Err(e) => {
                assert_eq!(e.code(), "retry.timeout");
                timed_out += 1;
            }
        }
    }
    assert_eq!(timed_out, 1);
    assert_eq!(seen.requests.load(Ordering::SeqCst), STALL_EVERY);
}
