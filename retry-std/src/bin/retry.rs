//! The `retry` program: runs a command under a retry policy. See `retry --help`
//! and the `retry_std::cli` module.

fn main() {
    retry_std::cli::main()
}
