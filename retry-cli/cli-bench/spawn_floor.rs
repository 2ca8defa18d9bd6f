//! The floor for a Rust `retry`: a program that does nothing but start `true`
//! with `posix_spawnp(3)` and wait for it (no argument parsing, no runtime
//! start-up work: a C `main`). Built by `cli.sh` with plain `rustc -O`; not part
//! of the workspace.
#![no_main]

use std::ffi::CString;

extern "C" {
    static environ: *const *const core::ffi::c_char;
    fn posix_spawnp(
        pid: *mut i32,
        file: *const core::ffi::c_char,
        actions: *const u8,
        attributes: *const u8,
        argv: *const *const core::ffi::c_char,
        envp: *const *const core::ffi::c_char,
    ) -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
}

#[no_mangle]
extern "C" fn main(_argc: i32, _argv: *const *const core::ffi::c_char) -> i32 {
    let program = CString::new("true").unwrap_or_default();
    let argv = [program.as_ptr(), core::ptr::null()];
    let (mut pid, mut status) = (0, 0);
    // SAFETY: every pointer is to a live local or the process's environment.
    unsafe {
        if posix_spawnp(&mut pid, program.as_ptr(), core::ptr::null(), core::ptr::null(), argv.as_ptr(), environ) != 0 {
            return 127;
        }
        waitpid(pid, &mut status, 0);
    }
    (status >> 8) & 0xff
}
