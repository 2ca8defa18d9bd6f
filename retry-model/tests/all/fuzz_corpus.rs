//! Replays every fuzz target's committed corpus (`fuzz/corpus/<target>/`)
//! through the same checks the cargo-fuzz targets run, on stable Rust, and runs
//! every check on a few thousand deterministic pseudo-random inputs.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use retry_model::TARGETS;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn corpus_dir(target: &str) -> PathBuf {
    fuzz_dir().join("corpus").join(target)
}

#[test]
fn every_committed_corpus_input_passes() {
    for (target, check) in TARGETS {
        let dir = corpus_dir(target);
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: no corpus inputs", dir.display());
        for path in files {
            let input = fs::read(&path).unwrap();
            if let Err(violation) = check(&input) {
                panic!("{}: {violation}", path.display());
            }
        }
    }
}

/// The replay covers every corpus directory and every fuzz target binary: a
/// target added to `fuzz/` without a check here (or the other way round) fails.
#[test]
fn every_target_and_corpus_is_replayed() {
    let names: BTreeSet<&str> = TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(names.len(), TARGETS.len(), "a target is listed twice");
    let corpora: BTreeSet<String> = fs::read_dir(fuzz_dir().join("corpus"))
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().into_string().unwrap())
        .collect();
    let binaries: BTreeSet<String> = fs::read_dir(fuzz_dir().join("fuzz_targets"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_stem().unwrap().to_str().unwrap().to_owned())
        .collect();
    let names: BTreeSet<String> = names.into_iter().map(str::to_owned).collect();
    assert_eq!(corpora, names, "corpus directories vs replayed targets");
    assert_eq!(binaries, names, "fuzz target binaries vs replayed targets");
}

/// xorshift64*: small, deterministic, good enough to spray bytes.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, out: &mut Vec<u8>) {
        out.clear();
        let len = (self.next() % 512) as usize;
        while out.len() < len {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(len);
        // Sometimes text-like, so the parsers see digits, commas and dates.
        if self.next() % 3 == 0 {
            const ALPHABET: &[u8] = b"0123456789 ,-.:GMTSunMonNovJan\t";
            for b in out.iter_mut() {
                *b = ALPHABET[usize::from(*b) % ALPHABET.len()];
            }
        }
    }
}

#[test]
fn smoke_every_check_on_pseudo_random_inputs() {
    const CASES: usize = 3_000;
    let mut input = Vec::new();
    for (i, (target, check)) in TARGETS.into_iter().enumerate() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
        for case in 0..CASES {
            rng.bytes(&mut input);
            if let Err(violation) = check(&input) {
                panic!("{target} case {case} (input {input:02x?}): {violation}");
            }
        }
    }
}
