//! p50 / p99 latency of 1,000 calls with and without hedging, in virtual time,
//! straight from the core simulator (`HedgeSimulation`): no clock, no sleeping,
//! the same figures on every run and every machine.
//!
//! The workload: each copy of a call answers after 10 to 20 ms, except that one
//! copy in twenty is slow and answers after 500 ms (a stalled backend, a GC pause,
//! a lost packet). Every copy draws its own latency, so a hedge sent while the
//! first copy is stuck is usually fast.
//!
//! `cargo run --release -p retry-core --example hedge_latency`

use core::time::Duration;

use retry_core::{
    HedgeAction, HedgeMode, HedgePolicy, HedgePolicyError, HedgeSimulation, LatencyHistogram,
    Scripted,
};

const CALLS: usize = 1_000;
/// Copies drawn per call: the most any policy below sends.
const COPIES_DRAWN: u32 = 3;

/// SplitMix64: a tiny seeded generator, so the workload is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// One copy's latency: 10-20 ms, or 500 ms one time in twenty.
    fn latency(&mut self) -> Duration {
        if self.next() % 20 == 0 {
            Duration::from_millis(500)
        } else {
            Duration::from_micros(10_000 + self.next() % 10_001)
        }
    }
}

struct Report {
    name: &'static str,
    p50: Duration,
    p99: Duration,
    max: Duration,
    copies: usize,
}

/// Runs the workload under `policy`; the adaptive delay, if any, learns from
/// each call's winning copy as a driver would.
fn run(name: &'static str, policy: &HedgePolicy) -> Report {
    let mut rng = Rng(2026);
    let mut latencies = LatencyHistogram::new();
    let mut totals = Vec::with_capacity(CALLS);
    let mut copies = 0;
    for call in 0..CALLS {
        // The same copies for every policy: three per call, however many it sends.
        let script: Vec<Scripted> = (0..COPIES_DRAWN)
            .map(|_| Scripted::succeed().after(rng.latency()))
            .collect();
        let seed = call as u64;
        let Some(last) = HedgeSimulation::with_latencies(policy, seed, &latencies, &script).last()
        else {
            panic!("call {call}: a simulation has at least one step");
        };
        match last.action {
            HedgeAction::Done {
                launched, latency, ..
            } => {
                copies += launched as usize;
                latencies.record(latency);
            }
            other => panic!("call {call} did not succeed: {other}"),
        }
        totals.push(last.at.as_duration());
    }
    totals.sort();
    Report {
        name,
        p50: totals[CALLS / 2 - 1],
        p99: totals[CALLS * 99 / 100 - 1],
        max: totals[CALLS - 1],
        copies,
    }
}

fn main() -> Result<(), HedgePolicyError> {
    let ms = Duration::from_millis;
    let none = HedgePolicy::builder().max_attempts(1).build()?;
    let fixed = HedgePolicy::builder()
        .max_attempts(2)
        .fixed_delay(ms(50))
        .build()?;
    let fixed3 = HedgePolicy::builder()
        .max_attempts(3)
        .fixed_delay(ms(50))
        .build()?;
    let adaptive = HedgePolicy::builder()
        .max_attempts(2)
        .adaptive_delay(95.0, 20, ms(50))
        .build()?;
    let parallel = HedgePolicy::builder()
        .max_attempts(2)
        .mode(HedgeMode::Parallel)
        .build()?;
    let reports = [
        run("no hedging (1 copy)", &none),
        run("latency mode, 2 copies, fixed 50 ms", &fixed),
        run("latency mode, 3 copies, fixed 50 ms", &fixed3),
        run("latency mode, 2 copies, p95 of recent latencies", &adaptive),
        run("parallel mode, 2 copies", &parallel),
    ];
    println!("{CALLS} calls; each copy 10-20 ms, one copy in twenty 500 ms (virtual time)");
    println!("| policy | p50 | p99 | slowest | copies sent per call |");
    println!("|---|---|---|---|---|");
    for r in reports {
        println!(
            "| {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.3} |",
            r.name,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.max.as_secs_f64() * 1e3,
            r.copies as f64 / CALLS as f64
        );
    }
    Ok(())
}
