//! What the optional features add: serde for events, actions and steps; arbitrary
//! valid policies.

// Test helpers outside #[test] functions may unwrap: a failure is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[cfg(feature = "serde")]
#[test]
fn steps_round_trip_through_json() {
    use core::time::Duration;
    use retry_core::{Failure, Hint, RetryPolicy, Scripted, Simulation, Step};

    let policy = RetryPolicy::builder()
        .budget(Duration::from_secs(20))
        .build()
        .unwrap();
    let script = [
        Scripted::fail(Failure::retryable().with_hint(Hint::RetryAfter(Duration::from_secs(2)))),
        Scripted::time_out(),
        Scripted::fail(Failure::permanent()),
    ];
    let steps: Vec<Step> = Simulation::new(&policy, 3, &script).collect();
    let json = serde_json::to_string(&steps).unwrap();
    let back: Vec<Step> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, steps);
    assert!(json.contains(r#""event":"start""#), "{json}");
    assert!(json.contains(r#""reason":"permanent""#), "{json}");
}

#[cfg(feature = "arbitrary")]
#[test]
fn arbitrary_policies_are_always_valid() {
    use arbitrary::{Arbitrary, Unstructured};
    use retry_core::RetryPolicy;

    let mut seed = 0x1234_5678_9abc_def0_u64;
    let mut distinct = std::collections::HashSet::new();
    for _ in 0..2_000 {
        let bytes: Vec<u8> = (0..256)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed.to_le_bytes()[0]
            })
            .collect();
        let mut u = Unstructured::new(&bytes);
        let policy = RetryPolicy::arbitrary(&mut u).unwrap();
        assert_eq!(policy.validate(), Ok(()), "{policy:?}");
        distinct.insert(policy.to_string());
    }
    // The generator explores: nearly every input gives a different policy.
    assert!(
        distinct.len() > 1_900,
        "{} distinct policies",
        distinct.len()
    );
}
