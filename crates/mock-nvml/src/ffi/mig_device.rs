//! Compute instances and MIG device handles (issue 38): compute instances' create, destroy, list and look up; the MIG devices a GPU's compute instances make
//! (`nvmlDeviceGetMigDeviceHandleByIndex` and the queries on their handles). The answers are
//! [`crate::lifecycle`]'s; GPU instances are `ffi/lifecycle.rs`.

use nvml_profile::Device;

use super::guard::*;
use super::lifecycle::{device_handle, gi_handle, nvmlGpuInstance_t, with_gi, with_target};
use crate::{
    abi::{self, NvmlReturn},
    state::{self, Loaded},
};
use crate::{
    lifecycle::{self, Target},
    mig_abi::{
        ComputeInstanceInfo, ComputeInstanceInfoV1, ComputeInstancePlacement, DeviceAttributes,
    },
    mig_handles::{self, CiRef, GiRef},
    partition,
};
use node_layout::mig_state::Placement;
use std::ffi::{c_uint, c_void};

/// `nvmlComputeInstance_t`.
pub type nvmlComputeInstance_t = *mut c_void;

/// A live compute instance: its GPU, ids, placement and profile id.
struct Ci<'a> {
    target: Target<'a>,
    at: CiRef,
    gi: node_layout::mig_state::GpuInstance,
    placement: Placement,
    profile_id: u32,
}

/// Checks init and a compute instance handle, or (`mig`) a MIG device handle: issued, its GPU
/// visible, the instance alive.
fn with_ci<T>(
    address: usize,
    mig: bool,
    body: impl FnOnce(&Loaded, Ci<'_>) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    let loaded = state::loaded()?;
    let at = if mig {
        mig_handles::mig_of(address)
    } else {
        mig_handles::ci_of(address)
    }
    .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    let target = Target::of(&loaded, at.parent.gpu)?;
    let (gi, placement, profile_id) =
        lifecycle::live_compute_instance(target, at.parent.gi, at.ci)?;
    let ci = Ci {
        target,
        at,
        gi,
        placement,
        profile_id,
    };
    body(&loaded, ci)
}

fn ci_handle(at: CiRef) -> Result<nvmlComputeInstance_t, NvmlReturn> {
    mig_handles::ci_handle(at)
        .map(|address| address as nvmlComputeInstance_t)
        .ok_or(abi::ERROR_UNKNOWN)
}

fn mig_handle(at: CiRef) -> Result<nvmlDevice_t, NvmlReturn> {
    mig_handles::mig_handle(at)
        .map(|address| address as nvmlDevice_t)
        .ok_or(abi::ERROR_UNKNOWN)
}

/// Checks init and a device handle that may be a MIG device's: `body` gets the GPU, or for a
/// MIG device a copy of its parent with the MIG device's UUID, name and memory (its GPU
/// instance's, none of it used).
pub(super) fn with_device_or_mig<T>(
    handle: nvmlDevice_t,
    body: impl FnOnce(&Device) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    if mig_handles::mig_of(handle as usize).is_none() {
        return with_device(handle, |_, device| body(device));
    }
    with_ci(handle as usize, true, |_, ci| {
        let row = lifecycle::row_of(ci.target, &ci.gi)?;
        let parent = ci.target.device;
        let mut device = parent.clone();
        device.uuid = lifecycle::mig_uuid(parent, &ci.gi, ci.at.ci);
        device.name = format!("{} MIG {}", parent.name, row.name.as_deref().unwrap_or(""));
        device.memory.total = row.memory_mib << 20;
        device.memory.reserved = 0;
        device.memory.used = 0;
        body(&device)
    })
}

// ---------------------------------------------------------------- compute instances

/// `nvmlGpuInstanceCreateComputeInstance`.
///
/// # Safety
/// `compute_instance` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceCreateComputeInstance(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    compute_instance: *mut nvmlComputeInstance_t,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { create_compute_instance(gpu_instance, profile_id, None, compute_instance) }
}

/// `nvmlGpuInstanceCreateComputeInstanceWithPlacement`: only the whole instance is offered.
///
/// # Safety
/// `placement` must be NULL or valid for reading an `nvmlComputeInstancePlacement_t`;
/// `compute_instance` NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    placement: *const ComputeInstancePlacement,
    compute_instance: *mut nvmlComputeInstance_t,
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
        let code = unsafe {
            create_compute_instance(gpu_instance, profile_id, Some(wanted), compute_instance)
        };
        match code {
            abi::SUCCESS => Ok(()),
            code => Err(code),
        }
    })
}

/// Creates a compute instance under the store's lock and writes its handle.
///
/// # Safety
/// `compute_instance` must be NULL or valid for writing a handle.
unsafe fn create_compute_instance(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    placement: Option<Placement>,
    compute_instance: *mut nvmlComputeInstance_t,
) -> NvmlReturn {
    guard(|| {
        let handle = with_gi(gpu_instance, |_, target, at, _| {
            non_null([compute_instance.cast_const().cast()])?;
            let id = target.change(|gpu, table| {
                partition::create_compute_instance(gpu, at.gi, table, profile_id, placement)
            })?;
            ci_handle(CiRef { parent: at, ci: id })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(compute_instance, handle) }
    })
}

/// `nvmlComputeInstanceDestroy`: INVALID_ARGUMENT for a handle whose instance is gone.
#[no_mangle]
pub extern "C" fn nvmlComputeInstanceDestroy(
    compute_instance: nvmlComputeInstance_t,
) -> NvmlReturn {
    guard(|| {
        with_ci(compute_instance as usize, false, |_, ci| {
            ci.target.change(|gpu, _| {
                partition::destroy_compute_instance(gpu, ci.at.parent.gi, ci.at.ci)
            })
        })
    })
}

/// `nvmlGpuInstanceGetComputeInstances`: the live compute instances of `profile_id`, written to
/// `compute_instances` (sized by the profile's instance count) with their number in `*count`.
///
/// # Safety
/// `count` must be NULL or valid for writing an `unsigned int`; `compute_instances` NULL or valid
/// for writing as many handles as the profile's instance count.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstances(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    compute_instances: *mut nvmlComputeInstance_t,
    count: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let handles = with_gi(gpu_instance, |_, target, at, gi| {
            non_null([
                compute_instances.cast_const().cast(),
                count.cast_const().cast(),
            ])?;
            let offered = partition::compute_profile(lifecycle::row_of(target, &gi)?)?;
            if offered.id != profile_id {
                return Err(abi::ERROR_NOT_SUPPORTED);
            }
            let mut ids: Vec<u32> = gi.compute.iter().map(|ci| ci.id).collect();
            ids.sort_unstable();
            ids.into_iter()
                .map(|ci| ci_handle(CiRef { parent: at, ci }))
                .collect::<Result<Vec<_>, _>>()
        })?;
        // SAFETY: the caller's array holds the profile's instance count, and a GPU instance
        // never has more compute instances of its profile (the partition's invariant); `count`
        // is forwarded from this function's contract.
        unsafe { put_list(compute_instances, count, &handles) }
    })
}

/// `nvmlGpuInstanceGetComputeInstanceById`: NOT_FOUND for no such compute instance.
///
/// # Safety
/// `compute_instance` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceById(
    gpu_instance: nvmlGpuInstance_t,
    id: c_uint,
    compute_instance: *mut nvmlComputeInstance_t,
) -> NvmlReturn {
    guard(|| {
        let handle = with_gi(gpu_instance, |_, _, at, gi| {
            non_null([compute_instance.cast_const().cast()])?;
            if gi.compute.iter().all(|ci| ci.id != id) {
                return Err(abi::ERROR_NOT_FOUND);
            }
            ci_handle(CiRef { parent: at, ci: id })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(compute_instance, handle) }
    })
}

fn ci_info(ci: &Ci<'_>) -> Result<ComputeInstanceInfo, NvmlReturn> {
    Ok(ComputeInstanceInfo {
        device: device_handle(ci.at.parent.gpu)?,
        gpu_instance: gi_handle(ci.at.parent)?,
        id: ci.at.ci,
        profile_id: ci.profile_id,
        placement: ComputeInstancePlacement {
            start: ci.placement.start,
            size: ci.placement.size,
        },
    })
}

/// `nvmlComputeInstanceGetInfo_v2`: parent GPU and GPU instance handles, id, profile id and
/// placement.
///
/// # Safety
/// `info` must be NULL or valid for writing an `nvmlComputeInstanceInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlComputeInstanceGetInfo_v2(
    compute_instance: nvmlComputeInstance_t,
    info: *mut ComputeInstanceInfo,
) -> NvmlReturn {
    guard(|| {
        let value = with_ci(compute_instance as usize, false, |_, ci| {
            non_null([info.cast_const().cast()])?;
            ci_info(&ci)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(info, value) }
    })
}

/// `nvmlComputeInstanceGetInfo` (v1): the v2 fields before the placement.
///
/// # Safety
/// `info` must be NULL or valid for writing the v1 `nvmlComputeInstanceInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlComputeInstanceGetInfo(
    compute_instance: nvmlComputeInstance_t,
    info: *mut ComputeInstanceInfoV1,
) -> NvmlReturn {
    guard(|| {
        let value = with_ci(compute_instance as usize, false, |_, ci| {
            non_null([info.cast_const().cast()])?;
            let full = ci_info(&ci)?;
            Ok(ComputeInstanceInfoV1 {
                device: full.device,
                gpu_instance: full.gpu_instance,
                id: full.id,
                profile_id: full.profile_id,
            })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(info, value) }
    })
}

// ---------------------------------------------------------------- MIG devices

getter!(nvmlDeviceGetMaxMigDeviceCount, c_uint, |device| {
    let loaded = state::loaded()?;
    let target = Target::of(&loaded, device.index as usize)?;
    lifecycle::max_mig_devices(target.mig_mode().ok())
});

/// `nvmlDeviceIsMigDeviceHandle`: 1 for a live MIG device's handle, 0 for a GPU's.
///
/// # Safety
/// `is_mig` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: nvmlDevice_t,
    is_mig: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = if mig_handles::mig_of(device as usize).is_some() {
            with_ci(device as usize, true, |_, _| Ok(1))
        } else {
            with_device(device, |_, _| Ok(0))
        }?;
        non_null([is_mig.cast_const().cast()])?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(is_mig, value) }
    })
}

/// `nvmlDeviceGetMigDeviceHandleByIndex`: the MIG device at `index` (by GPU instance id, then
/// compute instance id); see [`lifecycle::mig_device_at`] for the errors. Nothing is written on
/// failure.
///
/// # Safety
/// `mig_device` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
) -> NvmlReturn {
    guard(|| {
        let handle = with_target(device, |_, target| {
            non_null([mig_device.cast_const().cast()])?;
            let (gi, ci) = lifecycle::mig_device_at(target, index)?;
            let gpu = target.device.index as usize;
            mig_handle(CiRef {
                parent: GiRef { gpu, gi },
                ci,
            })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(mig_device, handle) }
    })
}

/// `nvmlDeviceGetDeviceHandleFromMigDeviceHandle`: the parent GPU's handle; INVALID_ARGUMENT for
/// a handle that is not a live MIG device's (nvml.h), a GPU's included.
///
/// # Safety
/// `device` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> NvmlReturn {
    guard(|| {
        let parent = with_ci(mig_device as usize, true, |_, ci| {
            device_handle(ci.at.parent.gpu)
        })?;
        non_null([device.cast_const().cast()])?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(device, parent) }
    })
}

/// The checks' order for a query whose answer (`value`) is already known: init and handle
/// errors first, then a NULL `out`, then NOT_SUPPORTED.
fn null_before_support<T>(
    value: Result<T, NvmlReturn>,
    out: *const c_void,
) -> Result<T, NvmlReturn> {
    match value {
        Err(code) if code != abi::ERROR_NOT_SUPPORTED => Err(code),
        value => {
            non_null([out])?;
            value
        }
    }
}

/// `nvmlDeviceGetGpuInstanceId` (`compute: false`) or `…ComputeInstanceId`: the MIG device's
/// instance id; NOT_SUPPORTED for a GPU's handle ("not supported by the device").
///
/// # Safety
/// `id` must be NULL or valid for writing an `unsigned int`.
unsafe fn instance_id(device: nvmlDevice_t, id: *mut c_uint, compute: bool) -> NvmlReturn {
    guard(|| {
        let value = if mig_handles::mig_of(device as usize).is_some() {
            with_ci(device as usize, true, |_, ci| {
                Ok(if compute { ci.at.ci } else { ci.at.parent.gi })
            })
        } else {
            with_device(device, |_, _| Err(abi::ERROR_NOT_SUPPORTED))
        };
        let value = null_before_support(value, id.cast_const().cast())?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(id, value) }
    })
}

/// `nvmlDeviceGetGpuInstanceId`; see [`instance_id`].
///
/// # Safety
/// `id` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { instance_id(device, id, false) }
}

/// `nvmlDeviceGetComputeInstanceId`; see [`instance_id`].
///
/// # Safety
/// `id` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: nvmlDevice_t,
    id: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { instance_id(device, id, true) }
}

/// `nvmlDeviceGetAttributes_v2`: a MIG device's engines, slices and memory; NOT_SUPPORTED for a
/// GPU's handle (nvml.h: "only supports MIG device handles").
///
/// # Safety
/// `attributes` must be NULL or valid for writing an `nvmlDeviceAttributes_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(
    device: nvmlDevice_t,
    attributes: *mut DeviceAttributes,
) -> NvmlReturn {
    guard(|| {
        let value = if mig_handles::mig_of(device as usize).is_some() {
            with_ci(device as usize, true, |_, ci| {
                let row = lifecycle::row_of(ci.target, &ci.gi)?;
                Ok(lifecycle::attributes(row, ci.placement.size))
            })
        } else {
            with_device(device, |_, _| Err(abi::ERROR_NOT_SUPPORTED))
        };
        let value = null_before_support(value, attributes.cast_const().cast())?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(attributes, value) }
    })
}

/// `nvmlDeviceGetAttributes` (v1): the same struct as `_v2`.
///
/// # Safety
/// As for [`nvmlDeviceGetAttributes_v2`].
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetAttributes(
    device: nvmlDevice_t,
    attributes: *mut DeviceAttributes,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { nvmlDeviceGetAttributes_v2(device, attributes) }
}

/// The handle of the live MIG device with UUID `uuid` (`MIG-…`); NOT_FOUND for none.
pub(super) fn mig_by_uuid(loaded: &Loaded, uuid: &str) -> Result<nvmlDevice_t, NvmlReturn> {
    let (gpu, gi, ci) = lifecycle::find_mig_uuid(loaded, uuid)?;
    mig_handle(CiRef {
        parent: GiRef { gpu, gi },
        ci,
    })
}
