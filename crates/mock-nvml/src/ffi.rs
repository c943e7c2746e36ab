//! The exported NVML entry points: the only module tree with `unsafe` (the helpers and macros of
//! [`guard`], below every export module; the exports themselves in `system`, `device`, `events`, `health`, `structs`, `topo`, `activity`, `processes`, `gpm`, `mig`, `lifecycle` and `mig_device`, and the generated stubs
//! and aliases in [`stubs`], for every other function of `nvml-functions.txt`).
//!
//! Every export runs its body inside [`guard::guard`] (`catch_unwind`), so no panic unwinds into C;
//! a panic becomes `NVML_ERROR_UNKNOWN`. Checks run in one order everywhere: library initialised
//! (UNINITIALIZED), handle issued (INVALID_ARGUMENT, decided by address arithmetic before anything
//! is dereferenced), output pointers non-NULL (INVALID_ARGUMENT), then version tags
//! (ARGUMENT_VERSION_MISMATCH), then capability (NOT_SUPPORTED) and buffer size
//! (INSUFFICIENT_SIZE). Nothing is written to the caller unless the call succeeds, except the
//! needed count of a device list that does not fit (nvml.h's count protocol, `ffi/topo.rs`).
//!
//! Pointer access goes through four helpers ([`guard::put`], [`guard::put_str`], [`guard::get_str`],
//! [`guard::get_u32`]);
//! each call site states why the pointer satisfies the helper's contract.

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_snake_case, non_camel_case_types)]

#[macro_use]
mod guard;
mod exports;

pub use exports::EXPORTS;
pub use guard::nvmlDevice_t;

mod activity;
mod device;
mod events;
mod gpm;
mod health;
mod lifecycle;
mod mig;
mod mig_device;
mod processes;
mod structs;
pub mod stubs;
mod system;
mod topo;

pub use activity::*;
pub use device::*;
pub use events::*;
pub use gpm::*;
pub use health::*;
pub use lifecycle::*;
pub use mig::*;
pub use mig_device::*;
pub use processes::*;
pub use structs::*;
pub use stubs::*;
pub use system::*;
pub use topo::*;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod activity_tests;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod test_profiles;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
