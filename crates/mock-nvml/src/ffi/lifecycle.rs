//! The MIG lifecycle exports (issue 38): the mode, GPU instances and their profiles by id, the
//! compute instance profiles a GPU instance offers; the
//! answers are [`crate::lifecycle`]'s over the node's shared partition ([`crate::mig_store`]).
//! Compute instances and MIG device handles are `ffi/mig_device.rs`.
//!
//! A GPU instance handle (`nvmlGpuInstance_t`) is a slot address ([`crate::mig_handles`]): a
//! foreign or stale one (its instance destroyed, by this process or another) is
//! INVALID_ARGUMENT before anything is dereferenced.

use node_layout::mig_state::{GpuInstance, Placement};

use super::guard::*;
use crate::{
    abi::{self, NvmlReturn},
    state::{self, Loaded},
};
use crate::{
    lifecycle::{self, Target},
    mig::{self, GpuInstancePlacement, ProfileInfoV},
    mig_abi::{
        ComputeInstancePlacement, ComputeInstanceProfileInfo, ComputeInstanceProfileInfoV2,
        ComputeInstanceProfileInfoV3, GpuInstanceInfo, COMPUTE_INSTANCE_PROFILE_INFO_V2,
        COMPUTE_INSTANCE_PROFILE_INFO_V3,
    },
    mig_handles::{self, GiRef},
    partition,
};
use std::ffi::{c_uint, c_void};

/// `nvmlGpuInstance_t`.
pub type nvmlGpuInstance_t = *mut c_void;

/// Checks init and the GPU handle; `body` gets the GPU as the lifecycle sees it.
pub(super) fn with_target<T>(
    handle: nvmlDevice_t,
    body: impl FnOnce(&Loaded, Target<'_>) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    let loaded = state::loaded()?;
    loaded.device(handle as usize)?;
    let visible = state::slot_index(handle as usize).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    let target = Target::of(&loaded, visible)?;
    body(&loaded, target)
}

/// Checks init and the GPU instance handle (issued, its GPU visible, the instance alive).
pub(super) fn with_gi<T>(
    handle: nvmlGpuInstance_t,
    body: impl FnOnce(&Loaded, Target<'_>, GiRef, GpuInstance) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    let loaded = state::loaded()?;
    let at = mig_handles::gi_of(handle as usize).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    let target = Target::of(&loaded, at.gpu)?;
    let (_, gi) = lifecycle::live_gpu_instance(target, at.gi)?;
    body(&loaded, target, at, gi)
}

/// The handle of a GPU instance.
pub(super) fn gi_handle(at: GiRef) -> Result<nvmlGpuInstance_t, NvmlReturn> {
    mig_handles::gi_handle(at)
        .map(|address| address as nvmlGpuInstance_t)
        .ok_or(abi::ERROR_UNKNOWN)
}

/// The handle of visible GPU `index`.
pub(super) fn device_handle(index: usize) -> Result<nvmlDevice_t, NvmlReturn> {
    state::handle(index)
        .map(|slot| slot.cast_mut().cast())
        .ok_or(abi::ERROR_UNKNOWN)
}

/// `nvmlDeviceGetMigMode`: the mode now (the node's MIG state over the profile's);
/// NOT_SUPPORTED when the profile gives no MIG mode.
///
/// # Safety
/// `current` and `pending` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let mode = with_target(device, |_, target| {
            non_null([current.cast_const().cast(), pending.cast_const().cast()])?;
            target.mig_mode()
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put(current, c_uint::from(mode.current))?;
            put(pending, c_uint::from(mode.pending))
        }
    })
}

/// `nvmlDeviceSetMigMode`: SUCCESS with the activation status in `*activation_status`
/// ([`lifecycle::set_mode`]: SUCCESS when the mode is in effect at once, IN_USE when disabling
/// with GPU instances left, which keeps MIG enabled and the new mode pending).
///
/// # Safety
/// `activation_status` must be NULL or valid for writing an `nvmlReturn_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceSetMigMode(
    device: nvmlDevice_t,
    mode: c_uint,
    activation_status: *mut NvmlReturn,
) -> NvmlReturn {
    guard(|| {
        let status = with_target(device, |_, target| {
            non_null([activation_status.cast_const().cast()])?;
            target.table()?;
            lifecycle::set_mode(target, mode)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(activation_status, status) }
    })
}

/// `nvmlDeviceGetGpuInstanceProfileInfoByIdV`; see [`lifecycle::profile_info_by_id`].
///
/// # Safety
/// `info` must be NULL or valid for reading 4 bytes and writing the layout its version names.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoByIdV(
    device: nvmlDevice_t,
    profile_id: c_uint,
    info: *mut mig::GpuInstanceProfileInfoV2,
) -> NvmlReturn {
    guard(|| {
        let value = with_target(device, |_, target| {
            // SAFETY: forwarded from this function's contract.
            let version = unsafe { get_u32(info.cast_const().cast()) }?;
            lifecycle::profile_info_by_id(target, profile_id, version)
        })?;
        // SAFETY: forwarded from this function's contract (the caller's tag names the layout).
        unsafe { put_profile_info_v(info, value) }
    })
}

/// Writes a versioned profile info as the layout its version names.
///
/// # Safety
/// `info` must be NULL or valid for writing that layout (v2 and v3 have the same size).
pub(super) unsafe fn put_profile_info_v(
    info: *mut mig::GpuInstanceProfileInfoV2,
    value: ProfileInfoV,
) -> Result<(), NvmlReturn> {
    match value {
        // SAFETY: the caller's version tag says the buffer holds a v2 struct.
        ProfileInfoV::V2(value) => unsafe { put(info, value) },
        // SAFETY: the caller's version tag says the buffer holds a v3 struct (the same size).
        ProfileInfoV::V3(value) => unsafe {
            put(info.cast::<mig::GpuInstanceProfileInfoV3>(), value)
        },
    }
}

/// `nvmlDeviceGetGpuInstanceRemainingCapacity`: how many more instances of `profile_id` fit now
/// ([`partition::remaining_gpu_instances`]).
///
/// # Safety
/// `count` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceRemainingCapacity(
    device: nvmlDevice_t,
    profile_id: c_uint,
    count: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_target(device, |_, target| {
            non_null([count.cast_const().cast()])?;
            partition::remaining_gpu_instances(&target.gpu()?, target.table()?, profile_id)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(count, value) }
    })
}

/// `nvmlDeviceCreateGpuInstance`: the first free placement of the profile.
///
/// # Safety
/// `gpu_instance` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceCreateGpuInstance(
    device: nvmlDevice_t,
    profile_id: c_uint,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { create_gpu_instance(device, profile_id, None, gpu_instance) }
}

/// `nvmlDeviceCreateGpuInstanceWithPlacement`: exactly `*placement`, one the profile offers
/// (else INVALID_ARGUMENT); INSUFFICIENT_RESOURCES when it overlaps an instance.
///
/// # Safety
/// `placement` must be NULL or valid for reading an `nvmlGpuInstancePlacement_t`;
/// `gpu_instance` NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceCreateGpuInstanceWithPlacement(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placement: *const GpuInstancePlacement,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> NvmlReturn {
    guard(|| {
        state::loaded()?;
        non_null([placement.cast()])?;
        // SAFETY: non-NULL (checked) and readable, per this function's contract.
        let wanted = unsafe { placement.read_unaligned() };
        let wanted = Placement {
            start: wanted.start,
            size: wanted.size,
        };
        // SAFETY: forwarded from this function's contract.
        match unsafe { create_gpu_instance(device, profile_id, Some(wanted), gpu_instance) } {
            abi::SUCCESS => Ok(()),
            code => Err(code),
        }
    })
}

/// Creates a GPU instance under the store's lock and writes its handle.
///
/// # Safety
/// `gpu_instance` must be NULL or valid for writing a handle.
unsafe fn create_gpu_instance(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placement: Option<Placement>,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        put_gi(device, gpu_instance, |target| {
            target.change(|gpu, table| {
                partition::create_gpu_instance(gpu, table, profile_id, placement)
            })
        })
    }
}

/// Checks init, the handle and `gpu_instance`, then writes the handle of the GPU instance `find`
/// names on the device.
///
/// # Safety
/// `gpu_instance` must be NULL or valid for writing a handle.
unsafe fn put_gi(
    device: nvmlDevice_t,
    gpu_instance: *mut nvmlGpuInstance_t,
    find: impl FnOnce(Target<'_>) -> Result<u32, NvmlReturn>,
) -> NvmlReturn {
    guard(|| {
        let handle = with_target(device, |_, target| {
            non_null([gpu_instance.cast_const().cast()])?;
            let gi = find(target)?;
            gi_handle(GiRef {
                gpu: target.device.index as usize,
                gi,
            })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(gpu_instance, handle) }
    })
}

/// `nvmlGpuInstanceDestroy`: IN_USE while it has compute instances; INVALID_ARGUMENT for a
/// handle whose instance is gone.
#[no_mangle]
pub extern "C" fn nvmlGpuInstanceDestroy(gpu_instance: nvmlGpuInstance_t) -> NvmlReturn {
    guard(|| {
        with_gi(gpu_instance, |_, target, at, _| {
            target.change(|gpu, _| partition::destroy_gpu_instance(gpu, at.gi))
        })
    })
}

/// `nvmlDeviceGetGpuInstances`: the live instances of `profile_id`, written to `gpu_instances`
/// (which nvml.h sizes by the profile's instance count) with their number in `*count`.
///
/// # Safety
/// `count` must be NULL or valid for writing an `unsigned int`; `gpu_instances` NULL or valid
/// for writing as many handles as the profile's instance count.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstances(
    device: nvmlDevice_t,
    profile_id: c_uint,
    gpu_instances: *mut nvmlGpuInstance_t,
    count: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let handles = with_target(device, |_, target| {
            non_null([gpu_instances.cast_const().cast(), count.cast_const().cast()])?;
            let gpu = target.device.index as usize;
            lifecycle::gpu_instances(target, profile_id)?
                .into_iter()
                .map(|gi| gi_handle(GiRef { gpu, gi }))
                .collect::<Result<Vec<_>, _>>()
        })?;
        // SAFETY: the caller's array holds the profile's instance count, and there are never
        // more live instances of a profile than that (the partition's invariant); `count` is
        // forwarded from this function's contract.
        unsafe { put_list(gpu_instances, count, &handles) }
    })
}

/// `nvmlDeviceGetGpuInstanceById`: NOT_SUPPORTED while MIG is disabled, NOT_FOUND for no such
/// instance.
///
/// # Safety
/// `gpu_instance` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: nvmlDevice_t,
    id: c_uint,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        put_gi(device, gpu_instance, |target| {
            lifecycle::gpu_instance_by_id(target, id)?;
            Ok(id)
        })
    }
}

/// `nvmlGpuInstanceGetInfo`: the parent's handle, the instance's id, profile id and placement.
///
/// # Safety
/// `info` must be NULL or valid for writing an `nvmlGpuInstanceInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetInfo(
    gpu_instance: nvmlGpuInstance_t,
    info: *mut GpuInstanceInfo,
) -> NvmlReturn {
    guard(|| {
        let value = with_gi(gpu_instance, |_, _, at, gi| {
            non_null([info.cast_const().cast()])?;
            Ok(GpuInstanceInfo {
                device: device_handle(at.gpu)?,
                id: gi.id,
                profile_id: gi.profile_id,
                placement: GpuInstancePlacement {
                    start: gi.placement.start,
                    size: gi.placement.size,
                },
            })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(info, value) }
    })
}

// ---------------------------------------------------------------- compute instance profiles

/// `nvmlGpuInstanceGetComputeInstanceProfileInfo` (v1 struct); see
/// [`lifecycle::compute_profile_info`].
///
/// # Safety
/// `info` must be NULL or valid for writing an `nvmlComputeInstanceProfileInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceProfileInfo(
    gpu_instance: nvmlGpuInstance_t,
    profile: c_uint,
    engine_profile: c_uint,
    info: *mut ComputeInstanceProfileInfo,
) -> NvmlReturn {
    guard(|| {
        let (value, _) = with_gi(gpu_instance, |_, target, _, gi| {
            non_null([info.cast_const().cast()])?;
            lifecycle::compute_profile_info(target, &gi, profile, engine_profile)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(info, value) }
    })
}

/// `nvmlGpuInstanceGetComputeInstanceProfileInfoV`: the caller sets `version` to
/// `nvmlComputeInstanceProfileInfo_v2` or `_v3` (else INVALID_ARGUMENT); that layout is written.
///
/// # Safety
/// `info` must be NULL or valid for reading 4 bytes and writing the layout its version names.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    gpu_instance: nvmlGpuInstance_t,
    profile: c_uint,
    engine_profile: c_uint,
    info: *mut ComputeInstanceProfileInfoV2,
) -> NvmlReturn {
    guard(|| {
        let (version, value, name) = with_gi(gpu_instance, |_, target, _, gi| {
            // SAFETY: forwarded from this function's contract.
            let version = unsafe { get_u32(info.cast_const().cast()) }?;
            if version != COMPUTE_INSTANCE_PROFILE_INFO_V2
                && version != COMPUTE_INSTANCE_PROFILE_INFO_V3
            {
                return Err(abi::ERROR_INVALID_ARGUMENT);
            }
            let (value, name) =
                lifecycle::compute_profile_info(target, &gi, profile, engine_profile)?;
            Ok((version, value, mig::name_bytes(&name)?))
        })?;
        if version == COMPUTE_INSTANCE_PROFILE_INFO_V2 {
            let value = ComputeInstanceProfileInfoV2 {
                version,
                info: value,
                name,
            };
            // SAFETY: the caller's version tag says the buffer holds a v2 struct.
            unsafe { put(info, value) }
        } else {
            let value = ComputeInstanceProfileInfoV3 {
                version,
                info: value,
                name,
                capabilities: 0,
            };
            // SAFETY: the caller's version tag says the buffer holds a v3 struct.
            unsafe { put(info.cast::<ComputeInstanceProfileInfoV3>(), value) }
        }
    })
}

/// `nvmlGpuInstanceGetComputeInstanceRemainingCapacity`.
///
/// # Safety
/// `count` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    count: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_gi(gpu_instance, |_, target, at, _| {
            non_null([count.cast_const().cast()])?;
            let gpu = target.gpu()?;
            partition::remaining_compute_instances(&gpu, at.gi, target.table()?, profile_id)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(count, value) }
    })
}

/// `nvmlGpuInstanceGetComputeInstancePossiblePlacements`: the one placement of the profile a GPU
/// instance offers, the whole instance; by the count protocol of the GPU instance placements.
///
/// # Safety
/// `count` must be NULL or valid for reading and writing an `unsigned int`; `placements` NULL or
/// valid for writing `*count` placements.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    placements: *mut ComputeInstancePlacement,
    count: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let offered = with_gi(gpu_instance, |_, target, _, gi| {
            non_null([count.cast_const().cast()])?;
            let offered = partition::compute_profile(lifecycle::row_of(target, &gi)?)?;
            if offered.id != profile_id {
                return Err(abi::ERROR_NOT_SUPPORTED);
            }
            Ok(ComputeInstancePlacement {
                start: 0,
                size: offered.slices,
            })
        })?;
        if !placements.is_null() {
            // SAFETY: `count` is non-NULL (checked) and readable, per this function's contract.
            if unsafe { get_u32(count.cast_const().cast()) }? < 1 {
                // SAFETY: as above, and writable.
                unsafe { put(count, 1) }?;
                return Err(abi::ERROR_INSUFFICIENT_SIZE);
            }
            // SAFETY: valid for `*count >= 1` placements, per this function's contract.
            unsafe { put(placements, offered) }?;
        }
        // SAFETY: `count` is non-NULL and writable, per this function's contract.
        unsafe { put(count, 1) }
    })
}
