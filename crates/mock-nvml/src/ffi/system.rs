//! Init, shutdown, error strings and the system queries.

use super::guard::*;
use crate::{
    abi::{self, NvmlReturn},
    state,
};
use std::ffi::{c_char, c_int, c_uint};
use std::panic::catch_unwind;

// ---------------------------------------------------------------- init, shutdown, errors

/// `nvmlInit_v2`.
#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    guard(|| match state::init() {
        abi::SUCCESS => Ok(()),
        code => Err(code),
    })
}

/// `nvmlInit` (the pre-v2 symbol): same as v2.
#[no_mangle]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    nvmlInit_v2()
}

/// `nvmlInitWithFlags`: the flags change nothing here.
#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    nvmlInit_v2()
}

/// `nvmlShutdown`: UNINITIALIZED when not initialised.
#[no_mangle]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    guard(|| match state::shutdown() {
        abi::SUCCESS => Ok(()),
        code => Err(code),
    })
}

/// `nvmlErrorString`: a static string; valid before init and for unknown codes.
#[no_mangle]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    catch_unwind(|| abi::error_string(result))
        .unwrap_or(c"Unknown Error")
        .as_ptr()
}

// ---------------------------------------------------------------- system

/// `nvmlSystemGetDriverVersion`.
///
/// # Safety
/// `version` must be NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_str(version, length, &loaded.system.driver_version) }
    })
}

/// `nvmlSystemGetNVMLVersion` (needs init here: the version comes from the profile).
///
/// # Safety
/// `version` must be NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_str(version, length, &loaded.system.nvml_version) }
    })
}

/// `nvmlSystemGetCudaDriverVersion`.
///
/// # Safety
/// `cuda_driver_version` must be NULL or valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(
    cuda_driver_version: *mut c_int,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(cuda_driver_version, loaded.system.cuda_driver_version) }
    })
}

/// `nvmlSystemGetCudaDriverVersion_v2`: the same number (there is no libcuda to ask).
///
/// # Safety
/// `cuda_driver_version` must be NULL or valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(
    cuda_driver_version: *mut c_int,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlSystemGetCudaDriverVersion(cuda_driver_version) }
}
