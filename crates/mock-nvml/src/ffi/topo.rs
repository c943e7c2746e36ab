//! PCIe topology and NVLink queries (answers in [`crate::topo`]).

use super::guard::*;
use crate::topo;
use crate::{
    abi::{self, NvmlReturn},
    state,
};
use std::ffi::{c_uint, c_void};

// ---------------------------------------------------------------- PCIe topology

/// `nvmlDeviceGetTopologyCommonAncestor`: the `nvmlGpuTopologyLevel_t` of the two GPUs;
/// NOT_SUPPORTED when the profile has no PCIe topology.
///
/// # Safety
/// `path_info` must be NULL or valid for writing an `nvmlGpuTopologyLevel_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTopologyCommonAncestor(
    device1: nvmlDevice_t,
    device2: nvmlDevice_t,
    path_info: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let level = with_device(device1, |loaded, first| {
            let second = loaded.device(device2 as usize)?;
            non_null([path_info.cast_const().cast()])?;
            topo::common_ancestor(loaded.pcie.as_ref(), first, second)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(path_info, level) }
    })
}

/// `nvmlDeviceGetTopologyNearestGpus`: the other GPUs at `level` or nearer, with nvml.h's count
/// protocol (`put_devices`).
///
/// # Safety
/// `count` must be NULL or valid for reading and writing an `unsigned int`; `device_array` NULL
/// or valid for writing `*count` handles.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTopologyNearestGpus(
    device: nvmlDevice_t,
    level: c_uint,
    count: *mut c_uint,
    device_array: *mut nvmlDevice_t,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |loaded, device| {
            // SAFETY: forwarded from this function's contract.
            let asked = unsafe { asked(count, device_array) }?;
            let gpus = topo::nearest(loaded.pcie.as_ref(), device, level)?;
            // SAFETY: forwarded from this function's contract.
            unsafe { put_devices(&gpus, asked, count, device_array) }
        })
    })
}

/// `nvmlSystemGetTopologyGpuSet`: the GPUs on the NUMA node of logical CPU `cpu_number`, with
/// nvml.h's count protocol (`put_devices`); INVALID_ARGUMENT for a CPU the profile does not list.
///
/// # Safety
/// As for [`nvmlDeviceGetTopologyNearestGpus`].
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetTopologyGpuSet(
    cpu_number: c_uint,
    count: *mut c_uint,
    device_array: *mut nvmlDevice_t,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        // SAFETY: forwarded from this function's contract.
        let asked = unsafe { asked(count, device_array) }?;
        let gpus = topo::gpu_set(loaded.pcie.as_ref(), cpu_number)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_devices(&gpus, asked, count, device_array) }
    })
}

/// Reads `*count`: INVALID_ARGUMENT when `count` is NULL, or `device_array` is NULL while
/// `*count` is not zero (nvml.h).
///
/// # Safety
/// `count` must be NULL or valid for reading an `unsigned int`.
unsafe fn asked(count: *mut c_uint, device_array: *mut nvmlDevice_t) -> Result<u32, NvmlReturn> {
    // SAFETY: forwarded from this function's contract.
    let asked = unsafe { get_u32(count.cast_const().cast()) }?;
    if asked != 0 && device_array.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(asked)
}

/// nvml.h's count protocol: `asked == 0` sets `*count` to the number of GPUs (SUCCESS, as nvml.h
/// and go-nvml's two-call wrappers expect); fewer slots than GPUs sets `*count` to the number
/// needed and is INSUFFICIENT_SIZE, with the array untouched; otherwise the handles are written
/// in index order and `*count` is their number.
///
/// # Safety
/// `count` must be valid for writing an `unsigned int`; `device_array` valid for writing `asked`
/// handles when `asked` is not zero.
unsafe fn put_devices(
    gpus: &[usize],
    asked: u32,
    count: *mut c_uint,
    device_array: *mut nvmlDevice_t,
) -> Result<(), NvmlReturn> {
    let needed = gpus.len() as c_uint;
    if asked == 0 {
        // SAFETY: forwarded from this function's contract.
        return unsafe { put(count, needed) };
    }
    if asked < needed {
        // SAFETY: forwarded from this function's contract.
        unsafe { put(count, needed) }?;
        return Err(abi::ERROR_INSUFFICIENT_SIZE);
    }
    for (slot, &gpu) in gpus.iter().enumerate() {
        let handle = state::handle(gpu).ok_or(abi::ERROR_UNKNOWN)?;
        // SAFETY: `slot < needed <= asked`, and the array holds `asked` handles (contract).
        unsafe { put(device_array.add(slot), handle.cast_mut().cast::<c_void>()) }?;
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { put(count, needed) }
}

// ---------------------------------------------------------------- NVLink

/// Defines `fn name(device, link, *mut T)` answering `value` for the device and link.
macro_rules! link_getter {
    ($name:ident, $ty:ty, |$device:ident, $link:ident| $value:expr) => {
        #[doc = concat!("`", stringify!($name), "`: see [`crate::topo`] (NOT_SUPPORTED without NVLink, INVALID_ARGUMENT past the link count).")]
        ///
        /// # Safety
        /// The output pointer must be NULL or valid for writing one value.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, link: c_uint, out: *mut $ty) -> NvmlReturn {
            guard(|| {
                let value: $ty = with_device(device, |_, $device| {
                    non_null([out.cast_const().cast()])?;
                    let $link = link;
                    $value
                })?;
                // SAFETY: forwarded from this function's contract.
                unsafe { put(out, value) }
            })
        }
    };
}

link_getter!(nvmlDeviceGetNvLinkState, c_uint, |device, link| {
    topo::nvlink_active(device, link).map(c_uint::from)
});
link_getter!(nvmlDeviceGetNvLinkVersion, c_uint, |device, link| {
    topo::nvlink_version(device, link)
});
link_getter!(
    nvmlDeviceGetNvLinkRemotePciInfo_v2,
    abi::PciInfo,
    |device, link| topo::remote_pci_info(device, link)
);
// The unversioned symbol is version 1: the 52-byte `nvmlPciInfo_t` of NVML before v2.
link_getter!(
    nvmlDeviceGetNvLinkRemotePciInfo,
    crate::activity_abi::PciInfoV1,
    |device, link| topo::remote_pci_info(device, link)
        .map(|info| crate::activity::pci_info_v1(&info))
);
link_getter!(
    nvmlDeviceGetNvLinkRemoteDeviceType,
    c_uint,
    |device, link| topo::remote_device_type(device, link)
);

/// `nvmlDeviceGetNvLinkCapability`: see [`topo::nvlink_capability`].
///
/// # Safety
/// `cap_result` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkCapability(
    device: nvmlDevice_t,
    link: c_uint,
    capability: c_uint,
    cap_result: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            non_null([cap_result.cast_const().cast()])?;
            topo::nvlink_capability(device, link, capability)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(cap_result, value) }
    })
}
