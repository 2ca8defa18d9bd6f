//! A reqwest client as a tower service, retried and hedged with the layers'
//! defaults, against a local axum server that counts what it sees:
//! `cargo run -p retry-tokio --example tower_http --features tower,reqwest`.

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::Arc;

use axum::{extract::State, routing::get, Router};
use retry_tokio::tower::{
    BreakerLayer, ByMethod, HedgeLayer, HttpStatus, ReqwestErrors, RetryLayer, TryClone,
};
use retry_tokio::{BreakerConfig, Hedge, HedgePolicy, Preset, Retry, SharedBreaker};
use tower::{timeout::TimeoutLayer, ServiceBuilder, ServiceExt as _};

/// A charge through the retry stack, a read and a slow charge through the
/// hedged one; prints what the server saw.
#[tokio::main]
pub async fn main() -> Result<(), Box<dyn core::error::Error>> {
    let (url, seen) = start_server().await?;
    let client = reqwest::Client::new();

    // Retried: a 408, 429 or 5xx answer (the server asks for it again), and a
    // failed exchange only when the request may be sent twice (a GET, HEAD or
    // OPTIONS, or here a request with an idempotency key): a POST whose
    // connection drops after it went out is not sent again. The timeout sits
    // inside the breaker, so a backend that hangs trips it.
    let breaker = SharedBreaker::new(BreakerConfig::default())?;
    let charges = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Retry::new(Preset::http_client().policy()))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus)
                .classify_errors(ReqwestErrors)
                .replay_rule(ByMethod.or_when(|request: &reqwest::Request| {
                    request.headers().contains_key("idempotency-key")
                })),
        )
        .layer(BreakerLayer::new(breaker).classify_responses(HttpStatus))
        .layer(TimeoutLayer::new(Duration::from_secs(2)))
        .service(client.clone());
    // The server is busy for the first charge: its 503 is retried.
    let charge = client.post(format!("{url}/charge")).body("42").build()?;
    let answer = charges.oneshot(charge).await?;
    assert_eq!(answer.text().await?, "charged");

    // Hedged: only what may be sent twice. A retryable answer (a 503) is a
    // failed copy, never the answer while another copy may still succeed.
    let policy = HedgePolicy::builder()
        .max_attempts(2)
        .fixed_delay(Duration::from_millis(50))
        .build()?;
    let reads = ServiceBuilder::new()
        .layer(
            HedgeLayer::new(Hedge::new(policy))
                .recreate_with(TryClone)
                .classify_responses(HttpStatus),
        )
        .service(client.clone());
    // The first GET stalls; the copy sent after 50 ms answers.
    let read = client.get(format!("{url}/item")).build()?;
    assert_eq!(reads.clone().oneshot(read).await?.text().await?, "item");
    // A slow POST is sent once.
    let slow = client.post(format!("{url}/slow")).body("43").build()?;
    assert_eq!(reads.oneshot(slow).await?.text().await?, "charged");

    let [charges, items, slow] =
        [&seen.charges, &seen.items, &seen.slow].map(|n| n.load(Ordering::SeqCst));
    println!(
        "the server saw {charges} charges (503, then 200), {items} GETs (hedged), {slow} slow POST"
    );
    assert_eq!((charges, items, slow), (2, 2, 1));
    Ok(())
}

/// What the server saw.
#[derive(Default)]
struct Seen {
    charges: AtomicU32,
    items: AtomicU32,
    slow: AtomicU32,
}

/// A server on 127.0.0.1: `/charge` is busy once, then charges; the first
/// `/item` stalls for ten seconds; `/slow` charges after 200 ms.
async fn start_server() -> std::io::Result<(String, Arc<Seen>)> {
    async fn charge(State(seen): State<Arc<Seen>>) -> (axum::http::StatusCode, &'static str) {
        if seen.charges.fetch_add(1, Ordering::SeqCst) == 0 {
            (axum::http::StatusCode::SERVICE_UNAVAILABLE, "busy")
        } else {
            (axum::http::StatusCode::OK, "charged")
        }
    }
    async fn item(State(seen): State<Arc<Seen>>) -> &'static str {
        if seen.items.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        "item"
    }
    async fn slow(State(seen): State<Arc<Seen>>) -> &'static str {
        seen.slow.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(200)).await;
        "charged"
    }
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/charge", axum::routing::post(charge))
        .route("/item", get(item))
        .route("/slow", axum::routing::post(slow))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, seen))
}
