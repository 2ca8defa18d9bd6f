#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Runs examples/borrow.rs as a test.

#[allow(dead_code)]
#[path = "../../examples/borrow.rs"]
mod example;

#[tokio::test(start_paused = true)]
async fn the_borrowing_example_updates_outside_state() {
    let (value, calls, log) = example::run().await;
    assert_eq!(value, "value of answer");
    assert_eq!(calls, 3);
    assert_eq!(log.len(), 3);
    assert!(log[0].starts_with("attempt 1: Err"));
    assert_eq!(log[2], "attempt 3: Ok(\"value of answer\")");
}
