//! The README's tower example is `examples/tower_http.rs`, word for word, and
//! it runs: a reqwest client retried and hedged through the layers, with the
//! server's counts asserted inside it.
#![cfg(all(feature = "tower", feature = "reqwest"))]
#![allow(clippy::expect_used, clippy::unwrap_used)]

// The example's `main` is `pub` so that this test can call it.
#[allow(unreachable_pub)]
#[path = "../../examples/tower_http.rs"]
mod example;

#[test]
fn the_readme_quotes_the_tower_example_whole() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../../examples/tower_http.rs");
    let quoted = format!("```rs\n{example}```\n");
    assert!(
        readme.contains(&quoted),
        "README.md's tower example differs from retry-tokio/examples/tower_http.rs"
    );
}

#[test]
fn the_tower_example_runs() {
    example::main().unwrap();
}
