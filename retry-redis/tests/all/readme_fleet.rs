//! The README's fleet example is `examples/fleet.rs`, word for word, and it
//! runs against a real redis-server: replica B opens with the fleet.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

// The example's functions are `pub` so that this test can call them.
#[allow(unreachable_pub, dead_code)]
#[path = "../../examples/fleet.rs"]
mod example;

#[test]
fn the_readme_quotes_the_example_whole() {
    let readme = include_str!("../../../README.md");
    let example = include_str!("../../examples/fleet.rs");
    let quoted = format!("```rs\n{example}```\n");
    assert!(
        readme.contains(&quoted),
        "README.md's fleet example differs from retry-redis/examples/fleet.rs"
    );
}

#[test]
fn the_example_runs_and_b_follows_the_fleet() {
    let Some(server) = common::start("the_example_runs_and_b_follows_the_fleet") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let followed = runtime.block_on(example::run(&server.url())).unwrap();
    assert!(followed, "B's breaker followed the fleet");
}
