//! The differential check of our NVML mock against upstream's: one call script (`calls.txt`),
//! run by `nvml-conformance run` against a library, compared by `cargo xtask conformance`.
//!
//! - [`script`]: the call script's grammar.
//! - [`expand`]: the script made into the ordered cases of one run (pure).
//! - [`render`]: output buffers before a call and their text after it (pure).
//! - [`ffi`]: the library opened by path and each case called (the only unsafe code).
//! - [`record`]: the runner's line format, read back (the runner/xtask contract).
//! - [`diff`]: two runs compared and the allow-list applied (pure).

pub mod diff;
pub mod expand;
pub mod ffi;
pub mod record;
pub mod render;
pub mod script;
