//! Three replicas of a service share one retry budget and one breaker view
//! through Redis. Only replica A's calls fail; B and C open as soon as the fleet
//! decides, without a single failed call of their own.
//!
//! Run: `cargo run -p retry-redis --example fleet` (with a Redis on
//! 127.0.0.1:6379, or set `REDIS_URL`). Without a Redis it still runs: the
//! budget falls back to each replica's own, and each breaker decides alone.

use core::error::Error;
use core::time::Duration;

use retry_core::{
    Backoff, BasicRule, BreakerConfig, BudgetConfig, FleetConfig, FleetRule, RetryPolicy,
};
use retry_redis::{Fleet, FleetBreaker, FleetBudget};
use retry_tokio::Retry;

/// One replica: its own connection, the shared budget and breaker, a retrier.
fn replica(url: &str) -> Result<(FleetBudget, FleetBreaker, Retry<String>), Box<dyn Error>> {
    let fleet = Fleet::connect(url)?.namespace("example")?;
    // The AWS SDKs' quota, for the whole fleet: 500 tokens, 5 a retry.
    let budget = fleet
        .budget("inventory", BudgetConfig::aws_standard())
        .build()?;
    // Each replica opens after 3 failures in a row; the fleet opens every
    // replica as soon as one has (a quorum of 1; use 2 or more so that one
    // bad replica cannot open the others), for 5 s, then lets one probe through.
    let breaker = fleet
        .breaker(
            "inventory",
            BreakerConfig::basic(BasicRule {
                failure_threshold: 3,
                open_duration: Duration::from_secs(5),
                success_threshold: 1,
            })?,
            FleetConfig::new(FleetRule::Quorum(1)).sync_interval(Duration::from_millis(100)),
        )
        .build()?;
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::constant(Duration::from_millis(10)))
        .use_retry_budget(true)
        .build()?;
    let retry = Retry::new(policy)
        .budget(budget.clone())
        .breaker(breaker.clone());
    Ok((budget, breaker, retry))
}

/// Runs the example against `REDIS_URL` (or a local Redis).
#[tokio::main(flavor = "current_thread")]
pub async fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let followed = run(&url).await?;
    if !followed {
        println!("(the fleet did not open B: is Redis running at {url}?)");
    }
    Ok(())
}

/// Replica A fails, replica B follows; whether B's breaker opened with the fleet.
pub async fn run(url: &str) -> Result<bool, Box<dyn Error>> {
    let (_, breaker_a, a) = replica(url)?;
    let (budget_b, breaker_b, b) = replica(url)?;

    // A's dependency is down: its calls fail, and its breaker opens.
    for _ in 0..2 {
        let failed = a
            .call(|_| async { Err::<(), _>("connection refused".to_string()) })
            .await;
        println!(
            "A: {}",
            failed.map_or_else(|e| e.to_string(), |_| "ok".into())
        );
    }
    println!("A's breaker: {}", breaker_a.state());

    // Within a sync interval or two, B follows: it rejects without trying.
    tokio::time::sleep(Duration::from_millis(300)).await;
    match b.call(|_| async { Ok::<_, String>("in stock") }).await {
        Ok(s) => println!("B: {}", s.value),
        Err(e) => println!("B: {e}"),
    }
    println!(
        "B's breaker: {} (following the fleet: {}); B's budget: {} fallbacks",
        breaker_b.state(),
        breaker_b.is_following(),
        budget_b.fallbacks(),
    );
    Ok(breaker_b.is_following())
}
