//! Versioned-struct queries (memory v2, fabric v2/v3), MIG and addressing mode.

use super::guard::*;
use super::mig_device;
use crate::{
    abi::{self, NvmlReturn},
    query,
};
use std::ffi::c_uint;

// ---------------------------------------------------------------- versioned structs

/// `nvmlDeviceGetMemoryInfo_v2`: the caller sets `version = nvmlMemory_v2`.
///
/// # Safety
/// `memory` must be NULL or valid for reading and writing an `nvmlMemory_v2_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut abi::MemoryV2,
) -> NvmlReturn {
    guard(|| {
        let value = mig_device::with_device_or_mig(device, |device| Ok(query::memory_v2(device)))?;
        // SAFETY: forwarded from this function's contract.
        if unsafe { get_u32(memory.cast_const().cast()) }? != abi::MEMORY_V2 {
            return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        // SAFETY: forwarded from this function's contract.
        unsafe { put(memory, value) }
    })
}

/// `nvmlDeviceGetGpuFabricInfoV`: the caller sets `version` to `nvmlGpuFabricInfo_v2` or `_v3`;
/// exactly that layout's bytes are written. Any other tag is ARGUMENT_VERSION_MISMATCH (checked
/// before fabric support) and nothing is written.
///
/// # Safety
/// `info` must be NULL or valid for reading 4 bytes and writing the layout its version names.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: nvmlDevice_t,
    info: *mut abi::GpuFabricInfoV3,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let version = unsafe { get_u32(info.cast_const().cast()) }?;
            match version {
                abi::GPU_FABRIC_INFO_V2 => {
                    let value = query::fabric_v2(device)?;
                    // SAFETY: the caller's version tag says the buffer holds a v2 struct (36 bytes),
                    // and exactly those bytes are written.
                    unsafe { put(info.cast::<abi::GpuFabricInfoV2>(), value) }
                }
                abi::GPU_FABRIC_INFO_V3 => {
                    let value = query::fabric_v3(device)?;
                    // SAFETY: the version tag says v3, the type `info` points to.
                    unsafe { put(info, value) }
                }
                _ => Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH),
            }
        })
    })
}

// ---------------------------------------------------------------- MIG and addressing mode

/// `nvmlDeviceGetGpuInstanceProfileInfo` (v1 struct); see [`query::gpu_instance_profile`].
///
/// # Safety
/// `info` must be NULL or valid for writing an `nvmlGpuInstanceProfileInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut abi::GpuInstanceProfileInfo,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            non_null([info.cast_const().cast()])?;
            query::gpu_instance_profile(device, profile)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(info, value) }
    })
}

/// `nvmlDeviceGetAddressingMode`: the caller sets `version = nvmlDeviceAddressingMode_v1`
/// (else ARGUMENT_VERSION_MISMATCH, checked before support); NOT_SUPPORTED without a profile value.
///
/// # Safety
/// `mode` must be NULL or valid for reading and writing an `nvmlDeviceAddressingMode_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAddressingMode(
    device: nvmlDevice_t,
    mode: *mut abi::DeviceAddressingMode,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            if unsafe { get_u32(mode.cast_const().cast()) }? != abi::DEVICE_ADDRESSING_MODE_V1 {
                return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
            }
            query::addressing_mode(device)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(mode, value) }
    })
}
