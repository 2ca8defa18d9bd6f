//! Link options for the `retry` binary (and nothing else) that shorten its
//! start-up when it is dynamically linked, as `cargo install --path retry-cli`
//! builds it: a supervisor that starts a command and waits is mostly start-up,
//! most of it in the dynamic loader (see BENCHMARKS.md).
//!
//! On Linux with glibc, for a native build whose C toolchain supports them:
//!
//! - libgcc's unwinder linked in (`libgcc_eh.a`, what `gcc -static-libgcc`
//!   does for C++ programs) instead of loading `libgcc_s.so.1`: one shared
//!   library fewer to find, map and relocate;
//! - relative relocations packed (`-z pack-relative-relocs`, DT_RELR; glibc
//!   2.36 or later): the loader rewrites a few words instead of 1,400 pointers.
//!
//! Each is probed by linking a small C program with the same compiler; what
//! the toolchain cannot do is left out, so the build never fails for it.
//! `RETRY_PLAIN_LINK=1` leaves both out.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RETRY_PLAIN_LINK");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if !var("RETRY_PLAIN_LINK").is_empty()
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("TARGET") != var("HOST")
        || var("CARGO_CFG_TARGET_FEATURE")
            .split(',')
            .any(|f| f == "crt-static")
    {
        return;
    }
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let source = out.join("probe.c");
    if std::fs::write(&source, "int main(void) { return 0; }\n").is_err() {
        return;
    }
    let links = |args: &[&str]| -> bool {
        Command::new(&compiler)
            .arg(&source)
            .arg("-o")
            .arg(out.join("probe"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !links(&[]) {
        return;
    }
    // libgcc's unwinder, whole (the Rust standard library refers to it from
    // code the linker sees after this archive).
    if let Some(archive) = file_of(&compiler, "libgcc_eh.a") {
        let arg = format!(
            "-Wl,--push-state,--whole-archive,{},--pop-state",
            archive.display()
        );
        if links(&[&arg]) {
            println!("cargo:rustc-link-arg-bins={arg}");
        }
    }
    let relr = "-Wl,-z,pack-relative-relocs";
    // ld warns and goes on for a -z option it does not know: ask for errors.
    if links(&[relr, "-Wl,--fatal-warnings"]) && glibc_has_relr(&compiler) {
        println!("cargo:rustc-link-arg-bins={relr}");
    }
}

/// The full path of a file of the compiler's runtime, if it has one.
fn file_of(compiler: &str, name: &str) -> Option<PathBuf> {
    let out = Command::new(compiler)
        .arg(format!("-print-file-name={name}"))
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (path.is_absolute() && path.is_file()).then_some(path)
}

/// Whether the C library the program links against reads DT_RELR (glibc
/// 2.36 or later marks it with the GLIBC_ABI_DT_RELR version).
fn glibc_has_relr(compiler: &str) -> bool {
    let Some(libc) = file_of(compiler, "libc.so.6") else {
        return false;
    };
    contains(&libc, b"GLIBC_ABI_DT_RELR")
}

fn contains(path: &Path, needle: &[u8]) -> bool {
    std::fs::read(path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
}
