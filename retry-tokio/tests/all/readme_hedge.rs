//! The README's complete hedging example is `examples/hedge.rs`, word for word,
//! and it runs.

#![allow(clippy::expect_used, clippy::unwrap_used)]

// The example's `main` is `pub` so that this test can call it.
#[allow(unreachable_pub)]
#[path = "../../examples/hedge.rs"]
mod example;

#[test]
fn the_readme_quotes_the_example_whole() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../../examples/hedge.rs");
    let quoted = format!("```rs\n{example}```\n");
    assert!(
        readme.contains(&quoted),
        "README.md's hedging example differs from retry-tokio/examples/hedge.rs"
    );
}

#[test]
fn the_example_runs() {
    example::main().unwrap();
}
