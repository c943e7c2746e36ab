//! The process entry point: the crate is `no_main` (see the crate docs), so
//! the C runtime calls [`main`] here, which does what Rust's start-up would
//! have done for check-fabric and then runs [`crate::run`]. Apart from the
//! NVML calls (`ffi.rs`), the only `unsafe` of check-fabric; its own module,
//! above the program it starts, so the program's use of `ffi` makes no cycle.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int};

/// `SIGPIPE` (13 on Linux).
const SIGPIPE: c_int = 13;
/// `SIG_IGN`, as a `sighandler_t`.
const SIG_IGN: usize = 1;

extern "C" {
    /// libc's `signal(2)`; the handler is a `sighandler_t`, pointer-sized.
    fn signal(signum: c_int, handler: usize) -> usize;
}

/// The C entry point (the crate is `no_main`; see the crate docs): SIGPIPE ignored, as Rust's
/// start-up would, then [`crate::run`], a panic becoming exit code 101 as it would there.
#[cfg_attr(not(test), no_mangle)]
#[cfg_attr(test, allow(dead_code))]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    // SAFETY: setting a signal's disposition to SIG_IGN is always sound.
    unsafe { signal(SIGPIPE, SIG_IGN) };
    std::panic::catch_unwind(crate::run).map_or(101, c_int::from)
}
