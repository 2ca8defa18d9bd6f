//! The `retry` program: runs a command under a retry policy.

fn main() {}
