//! The field-by-field snapshot check on many pseudo-random inputs: no
//! violation, and the changes reach the checks that matter (accepted records
//! that differ from the one taken, and records refused for each field the
//! issue names: an attempt's deadline, a sleep's delay and end, a half-open
//! deadline, budget tokens).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;

use retry_model::snapshot_fields::{run, Outcome};

/// splitmix64: a deterministic stream of input bytes.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut z = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut x = z;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(x ^ (x >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

#[test]
fn changed_records_are_refused_by_field_or_keep_every_invariant() {
    const CASES: u64 = 30_000;
    let mut refused: BTreeMap<&str, u32> = BTreeMap::new();
    let (mut accepted_changed, mut accepted_same, mut skipped) = (0u32, 0u32, 0u32);
    for case in 0..CASES {
        let input = bytes(case, 64 + (case % 7) as usize * 64);
        match run(&input) {
            Ok(Outcome::Refused(field)) => *refused.entry(field).or_default() += 1,
            Ok(Outcome::Accepted { changed: true }) => accepted_changed += 1,
            Ok(Outcome::Accepted { changed: false }) => accepted_same += 1,
            Ok(Outcome::Skipped) => skipped += 1,
            Err(violation) => panic!("case {case} (input {input:02x?}): {violation}"),
        }
    }
    println!("accepted changed {accepted_changed}, unchanged {accepted_same}, skipped {skipped}, refused {refused:?}");
    assert!(accepted_changed > 1_000, "{accepted_changed}");
    for field in [
        "phase.deadline",
        "phase.delay",
        "phase.until",
        "state.deadline",
        "state.millis",
    ] {
        assert!(
            refused.get(field).copied().unwrap_or(0) >= 5,
            "{field}: {refused:?}"
        );
    }
}

/// The committed seeds (`fuzz/corpus/snapshot_fields/`) mean what their names
/// say: `accepted-*` restores a changed record, `refused-<field>` is refused
/// naming that field (dots written as dashes). Every seed that does not is
/// listed at once: a change to a record's layout (a field added, which moves
/// every later field in the list an input picks from) can turn several.
#[test]
fn every_seed_means_what_its_name_says() {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/snapshot_fields");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    let mut wrong = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let outcome = run(&std::fs::read(path).unwrap()).unwrap();
        let means_it = match name.strip_prefix("refused-") {
            Some(field) => {
                matches!(outcome, Outcome::Refused(f) if f.replace('.', "-") == field)
            }
            None => outcome == Outcome::Accepted { changed: true },
        };
        if !means_it {
            wrong.push(format!("{name}: {outcome:?}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(paths.len() >= 10, "only {} seeds", paths.len());
}
