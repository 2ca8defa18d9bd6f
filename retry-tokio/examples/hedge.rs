//! Hedged HTTP GETs with reqwest against a local axum server whose requests
//! stall now and then: `cargo run -p retry-tokio --example hedge`.

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;
use std::sync::Arc;

use axum::{extract::State, routing::get, Router};
use retry_core::{BasicRule, BreakerConfig, BudgetConfig, Failure, FailureKind, HedgePolicy};
use retry_tokio::{Hedge, SharedBreaker, SharedBudget};

/// Fifty hedged GETs; prints how many of them a hedge won.
#[tokio::main]
pub async fn main() -> Result<(), Box<dyn core::error::Error>> {
    let url = start_server().await?;

    // Up to 2 copies; the second goes out when the first has not answered within
    // the 95th percentile of recent latencies (100 ms until 20 calls are known),
    // and only while the shared retry budget allows it.
    let policy = HedgePolicy::builder()
        .max_attempts(2)
        .adaptive_delay(95.0, 20, Duration::from_millis(100))
        .timeout(Duration::from_secs(5))
        .use_retry_budget(true)
        .build()?;
    let hedge = Hedge::new(policy)
        .budget(SharedBudget::new(BudgetConfig::grpc(100, 0.1)?))
        .breaker(SharedBreaker::new(BreakerConfig::basic(BasicRule {
            failure_threshold: 5,
            open_duration: Duration::from_secs(10),
            success_threshold: 1,
        })?)?)
        .classify(|e: &reqwest::Error| match e.status() {
            // 4xx: the request is wrong; another copy will not fix it.
            Some(s) if s.is_client_error() => Failure::permanent(),
            Some(s) => Failure::retryable().with_kind(FailureKind::Status(s.as_u16())),
            None => Failure::retryable().with_kind(FailureKind::Connection),
        });

    let client = reqwest::Client::new();
    let mut hedged = 0;
    for _ in 0..50 {
        let done = hedge
            .call(|_copy| {
                let request = client.get(&url).send();
                async move { request.await?.error_for_status()?.text().await }
            })
            .await?;
        if done.copy > 1 {
            hedged += 1;
        }
    }
    println!(
        "50 calls, {hedged} won by a hedge; p95 now {:?}",
        hedge.latency_history().percentile(95.0)
    );
    Ok(())
}

/// A server on 127.0.0.1 where one request in ten stalls for ten seconds.
async fn start_server() -> std::io::Result<String> {
    async fn item(State(seen): State<Arc<AtomicU32>>) -> &'static str {
        if seen.fetch_add(1, Ordering::SeqCst) % 10 == 9 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        "hello"
    }
    let app = Router::new()
        .route("/", get(item))
        .with_state(Arc::new(AtomicU32::new(0)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}
