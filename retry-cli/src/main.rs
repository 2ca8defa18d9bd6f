//! The `retry` program: runs a command under a retry policy. See `retry --help`
//! and the `retry_cli` library.
#![no_main]
#![allow(unsafe_code)]

/// The C entry point. The program starts here rather than in Rust's `main`:
/// it skips the runtime's start-up work that a short-lived supervisor does not
/// need (finding the main thread's stack guard by reading `/proc/self/maps`, an
/// alternate signal stack), which is a measurable share of `retry -- true`.
/// `retry_cli::main` installs what the program does need itself.
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: core::ffi::c_int,
    _argv: *const *const core::ffi::c_char,
) -> core::ffi::c_int {
    retry_cli::main()
}
