//! The generated exports: a stub for every NVML function the header declares (and every name
//! upstream's mock exports) that no hand-written export answers, and the `_v1` aliases.
//!
//! `build.rs` writes them from `nvml-functions.txt` (the data file `cargo xtask nvml-functions`
//! regenerates) minus [`EXPORTS`](super::EXPORTS): each stub is one call of [`stub`] with its
//! arguments as the checks see them; each alias forwards to its target. A function that gains
//! behaviour is written by hand and listed in EXPORTS, and its stub disappears.

use std::ffi::c_void;

use super::guard::{guard, nvmlDevice_t};
use crate::{
    abi::{self, NvmlReturn},
    state,
};

/// One argument of a stub, as the checks see it.
pub enum Arg {
    /// An `nvmlDevice_t`: must be a handle this library issued.
    Device(nvmlDevice_t),
    /// Any other handle type (GPU instance, unit, event set, ...): this library issues none.
    Handle,
    /// A pointer: must not be NULL.
    Ptr(*mut c_void),
    /// An integer, enum or floating-point value: not checked.
    Value,
}

/// The body of every generated stub, in the project's check order: initialised (UNINITIALIZED),
/// each device issued and no other handle (INVALID_ARGUMENT), no NULL pointer
/// (INVALID_ARGUMENT), then NOT_SUPPORTED. Nothing is read through or written to a pointer.
pub fn stub(args: &[Arg]) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        for arg in args {
            match arg {
                Arg::Device(device) => {
                    loaded.device(*device as usize)?;
                }
                Arg::Handle => return Err(abi::ERROR_INVALID_ARGUMENT),
                Arg::Ptr(_) | Arg::Value => {}
            }
        }
        if args
            .iter()
            .any(|arg| matches!(arg, Arg::Ptr(pointer) if pointer.is_null()))
        {
            return Err(abi::ERROR_INVALID_ARGUMENT);
        }
        Err(abi::ERROR_NOT_SUPPORTED)
    })
}

include!(concat!(env!("OUT_DIR"), "/stub_names.rs"));
include!(concat!(env!("OUT_DIR"), "/stubs.rs"));
