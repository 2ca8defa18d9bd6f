//! The snapshot target's committed seeds mean what their names say: each valid
//! one decodes and restores, each corrupt one decodes and is refused with an
//! error naming the field it corrupts. (The replay in `fuzz_corpus.rs` runs them
//! through the target's check; this keeps that check from passing because
//! nothing decoded.)

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::PathBuf;

use retry_core::{
    BreakerSnapshot, BudgetSnapshot, CircuitBreaker, RetryBudget, RetryMachine, RetrySnapshot,
    SnapshotError,
};
use retry_model::snapshot::{header, Kind};
use serde::de::DeserializeOwned;

fn seeds() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/snapshot")
}

/// The snapshot in a seed file (its header byte says the machine and format).
fn decode<T: DeserializeOwned>(data: &[u8]) -> T {
    let (first, rest) = data.split_first().unwrap();
    if first % 2 == 0 {
        let body = rest.split(|b| *b == 0).next().unwrap();
        serde_json::from_slice(body).unwrap()
    } else {
        postcard::from_bytes(rest).unwrap()
    }
}

fn restore(data: &[u8]) -> Result<(), SnapshotError> {
    let first = data[0];
    if first == header(Kind::Retry, true) || first == header(Kind::Retry, false) {
        RetryMachine::restore(&decode::<RetrySnapshot>(data)).map(|_| ())
    } else if first == header(Kind::Breaker, true) || first == header(Kind::Breaker, false) {
        CircuitBreaker::<2, 8>::restore(&decode::<BreakerSnapshot<2, 8>>(data)).map(|_| ())
    } else {
        RetryBudget::restore(&decode::<BudgetSnapshot>(data)).map(|_| ())
    }
}

#[test]
fn every_seed_means_what_its_name_says() {
    let refused = [
        ("retry-bad-version.json", "version"),
        ("retry-attempts-above-max.json", "attempts"),
        ("retry-idle-with-attempts.json", "phase"),
        ("retry-bad-policy.json", "max_attempts"),
        ("breaker-calls-above-window.json", "window.calls"),
        ("breaker-words-above-capacity.json", "window.failed"),
        ("breaker-window-kind.json", "window"),
        (
            "breaker-streak-should-have-tripped.json",
            "consecutive_failures",
        ),
        // Version 2's fields in a version 1 record; a version 2 record
        // without a duration for each of its buckets.
        ("breaker-v1-with-v2-count.json", "rejected_in_state"),
        ("breaker-v2-durations-missing.json", "bucket_nanos"),
        ("budget-tokens-above-max.json", "state.millis"),
        ("budget-slice-out-of-place.json", "state.slices"),
    ];
    let mut valid = 0;
    for entry in std::fs::read_dir(seeds()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let data = std::fs::read(&path).unwrap();
        match refused.iter().find(|(n, _)| *n == name) {
            Some((_, field)) => {
                let e = restore(&data).expect_err(&name);
                assert_eq!(e.field(), *field, "{name}: {e}");
            }
            None => {
                restore(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
                valid += 1;
            }
        }
    }
    assert!(valid >= 20, "only {valid} valid seeds");
}
