//! MIG exports by profile name and placement (i22-profiles): `nvmlDeviceGetGpuInstanceProfileInfoV`
//! and `nvmlDeviceGetGpuInstancePossiblePlacements` (v1 and `_v2`); the answers are [`crate::mig`]'s.

use super::guard::*;
use super::lifecycle;
use crate::abi::{self, NvmlReturn};
use crate::mig::{self, GpuInstancePlacement};
use std::ffi::c_uint;

/// `nvmlDeviceGetGpuInstanceProfileInfoV`: the caller sets `version` to
/// `nvmlGpuInstanceProfileInfo_v2` or `_v3`; exactly that layout's bytes are written. Any other
/// tag is INVALID_ARGUMENT, as nvml.h documents for this function; see [`mig::profile_info_v`].
///
/// # Safety
/// `info` must be NULL or valid for reading 4 bytes and writing the layout its version names.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoV(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut mig::GpuInstanceProfileInfoV2,
) -> NvmlReturn {
    guard(|| {
        let value = lifecycle::with_target(device, |_, target| {
            // SAFETY: forwarded from this function's contract.
            let version = unsafe { get_u32(info.cast_const().cast()) }?;
            let enabled = target.mig_mode().is_ok_and(|mode| mode.current);
            mig::profile_info_v(target.device, profile, version, enabled)
        })?;
        // SAFETY: forwarded from this function's contract (the caller's tag names the layout).
        unsafe { lifecycle::put_profile_info_v(info, value) }
    })
}

/// `nvmlDeviceGetGpuInstancePossiblePlacements_v2`: the placements of profile `profile_id`
/// ([`mig::placements`]) by the count protocol: NULL `count` is INVALID_ARGUMENT; NULL
/// `placements` sets `*count` to the number of placements; otherwise `*count` is read as the
/// array's capacity: too small sets it to the number needed and is INSUFFICIENT_SIZE with the
/// array untouched, else the placements are written and `*count` is their number.
///
/// # Safety
/// `count` must be NULL or valid for reading and writing an `unsigned int`; `placements` NULL or
/// valid for writing `*count` placements.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placements: *mut GpuInstancePlacement,
    count: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let list = with_device(device, |_, device| {
            non_null([count.cast_const().cast()])?;
            mig::placements(device, profile_id)
        })?;
        let needed = c_uint::try_from(list.len()).map_err(|_| abi::ERROR_UNKNOWN)?;
        if placements.is_null() {
            // SAFETY: `count` is non-NULL and writable, per this function's contract.
            return unsafe { put(count, needed) };
        }
        // SAFETY: `count` is non-NULL (checked) and readable, per this function's contract.
        let capacity = unsafe { get_u32(count.cast_const().cast()) }?;
        if capacity < needed {
            // SAFETY: as above, and writable.
            unsafe { put(count, needed) }?;
            return Err(abi::ERROR_INSUFFICIENT_SIZE);
        }
        // SAFETY: `placements` is valid for `capacity >= list.len()` entries (contract and the
        // check above); `count` is non-NULL and writable, per this function's contract.
        unsafe { put_list(placements, count, &list) }
    })
}

/// `nvmlDeviceGetGpuInstancePossiblePlacements` (v1): nvml.h declares it without a description
/// of its own, so it answers as `_v2`.
///
/// # Safety
/// As for [`nvmlDeviceGetGpuInstancePossiblePlacements_v2`].
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstancePossiblePlacements(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placements: *mut GpuInstancePlacement,
    count: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profile_id, placements, count) }
}
