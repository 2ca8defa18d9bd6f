//! p50 / p99 latency of 1,000 HTTP calls with and without hedging, in real time:
//! an axum server on 127.0.0.1 answers at once, except that one request in
//! twenty (picked by a hash of its number) stalls for 200 ms; reqwest sends the
//! requests one call after another through `retry_tokio::Hedge`.
//!
//! `cargo run --release -p retry-tokio --example hedge_http`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use retry_core::{HedgePolicy, HedgePolicyError};
use retry_tokio::Hedge;

const CALLS: usize = 1_000;
const STALL: Duration = Duration::from_millis(200);

/// SplitMix64's mixer: which request numbers stall, about one in twenty.
fn stalls(n: u64) -> bool {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % 20 == 0
}

async fn item(State(seen): State<Arc<AtomicU64>>) -> &'static str {
    let n = seen.fetch_add(1, Ordering::SeqCst);
    if stalls(n) {
        tokio::time::sleep(STALL).await;
    }
    "ok"
}

struct Report {
    name: &'static str,
    p50: Duration,
    p99: Duration,
    max: Duration,
    requests: u64,
}

async fn run(name: &'static str, policy: HedgePolicy) -> Report {
    let seen = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .route("/item", get(item))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/item", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let client = reqwest::Client::new();
    // Warm the connection pool so the first call does not pay for a handshake.
    client.get(&url).send().await.unwrap();
    seen.store(0, Ordering::SeqCst);

    let hedge = Hedge::<reqwest::Error>::new(policy).seed(7);
    let mut latencies = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        hedge
            .call(|_| {
                let request = client.get(&url).send();
                async move { request.await?.text().await }
            })
            .await
            .unwrap();
        latencies.push(started.elapsed());
    }
    server.abort();
    latencies.sort();
    Report {
        name,
        p50: latencies[CALLS / 2 - 1],
        p99: latencies[CALLS * 99 / 100 - 1],
        max: latencies[CALLS - 1],
        requests: seen.load(Ordering::SeqCst),
    }
}

#[tokio::main]
async fn main() -> Result<(), HedgePolicyError> {
    let ms = Duration::from_millis;
    let reports = [
        run(
            "no hedging (1 copy)",
            HedgePolicy::builder().max_attempts(1).build()?,
        )
        .await,
        run(
            "latency mode, 2 copies, fixed 10 ms",
            HedgePolicy::builder()
                .max_attempts(2)
                .fixed_delay(ms(10))
                .build()?,
        )
        .await,
        run(
            "latency mode, 2 copies, p95 of recent latencies",
            HedgePolicy::builder()
                .max_attempts(2)
                .adaptive_delay(95.0, 20, ms(10))
                .build()?,
        )
        .await,
    ];
    println!("{CALLS} sequential calls; one request in twenty stalls for 200 ms (real time)");
    println!("| policy | p50 | p99 | slowest | requests per call |");
    println!("|---|---|---|---|---|");
    for r in reports {
        println!(
            "| {} | {:.2} ms | {:.2} ms | {:.1} ms | {:.3} |",
            r.name,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.max.as_secs_f64() * 1e3,
            r.requests as f64 / CALLS as f64
        );
    }
    Ok(())
}
