//! Device enumeration, handles and the per-device value, string and parameterised getters.

use super::guard::*;
use super::{health, mig_device};
use crate::{
    abi::{self, NvmlReturn},
    query::{self, ClockType},
    state::{self, Loaded},
};
use nvml_profile::Device;
use std::ffi::{c_char, c_int, c_uint, c_void};

// ---------------------------------------------------------------- enumeration

/// `nvmlDeviceGetCount_v2`.
///
/// # Safety
/// `device_count` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(device_count: *mut c_uint) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(device_count, loaded.devices.len() as c_uint) }
    })
}

/// `nvmlDeviceGetCount` (v1 symbol): same as v2.
///
/// # Safety
/// `device_count` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount(device_count: *mut c_uint) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetCount_v2(device_count) }
}

/// Writes the handle of device `index` of the loaded state.
///
/// # Safety
/// `device` must be NULL or valid for writing a handle.
unsafe fn put_handle(
    loaded: &Loaded,
    index: usize,
    device: *mut nvmlDevice_t,
) -> Result<(), NvmlReturn> {
    if index >= loaded.devices.len() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let handle = state::handle(index).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    // SAFETY: forwarded from this function's contract.
    unsafe { put(device, handle.cast_mut().cast::<c_void>()) }
}

/// `nvmlDeviceGetHandleByIndex_v2`.
///
/// # Safety
/// `device` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        non_null([device.cast_const().cast()])?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_handle(&loaded, index as usize, device) }
    })
}

/// `nvmlDeviceGetHandleByIndex` (v1 symbol): same as v2.
///
/// # Safety
/// `device` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetHandleByIndex_v2(index, device) }
}

/// `nvmlDeviceGetHandleByUUID`: a GPU's or (`MIG-…`) a MIG device's handle; NOT_FOUND for an
/// unknown uuid.
///
/// # Safety
/// `uuid` must be NULL or NUL-terminated; `device` NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut nvmlDevice_t,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        non_null([device.cast_const().cast()])?;
        // SAFETY: forwarded from this function's contract.
        let key = unsafe { get_str(uuid) }?;
        if key.starts_with("MIG-") {
            let handle = mig_device::mig_by_uuid(&loaded, key)?;
            // SAFETY: forwarded from this function's contract.
            return unsafe { put(device, handle) };
        }
        let index = query::find_by_uuid(&loaded.devices, key)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_handle(&loaded, index, device) }
    })
}

/// A handle looked up by the text `key` with `find` over the devices.
///
/// # Safety
/// `key` must be NULL or NUL-terminated; `device` NULL or valid for writing a handle.
unsafe fn handle_by(
    key: *const c_char,
    device: *mut nvmlDevice_t,
    find: fn(&[Device], &str) -> Result<usize, NvmlReturn>,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        non_null([device.cast_const().cast()])?;
        // SAFETY: forwarded from this function's contract.
        let key = unsafe { get_str(key) }?;
        let index = find(&loaded.devices, key)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_handle(&loaded, index, device) }
    })
}

/// `nvmlDeviceGetHandleByPciBusId_v2`: accepts every bus id form NVML does; NOT_FOUND if absent.
///
/// # Safety
/// `pci_bus_id` must be NULL or NUL-terminated; `device` NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    pci_bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { handle_by(pci_bus_id, device, query::find_by_bus_id) }
}

/// `nvmlDeviceGetHandleByPciBusId` (v1 symbol): same as v2.
///
/// # Safety
/// As for [`nvmlDeviceGetHandleByPciBusId_v2`].
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId(
    pci_bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id, device) }
}

// ---------------------------------------------------------------- one-value getters

getter!(nvmlDeviceGetIndex, c_uint, |device| Ok(device.index));
getter!(nvmlDeviceGetMinorNumber, c_uint, |device| Ok(
    device.minor_number
));
getter!(nvmlDeviceGetBoardId, c_uint, |device| Ok(device.board_id));
getter!(nvmlDeviceGetModuleId, c_uint, |device| Ok(device.module_id));
getter!(nvmlDeviceGetBrand, c_uint, |device| Ok(query::brand(
    device.brand
)));
getter!(nvmlDeviceGetArchitecture, c_uint, |device| Ok(
    query::architecture(device.architecture)
));
// The mode `nvmlDeviceSetPersistenceMode` set, else the profile's (`ffi/health/pages.rs`).
getter!(nvmlDeviceGetPersistenceMode, c_uint, |device| Ok(
    c_uint::from(health::persistence_mode(device))
));
getter!(nvmlDeviceGetComputeMode, c_uint, |device| Ok(
    query::compute_mode(device.compute_mode)
));
getter!(nvmlDeviceGetPowerUsage, c_uint, |device| Ok(
    device.power_usage_mw
));
getter!(nvmlDeviceGetCurrPcieLinkGeneration, c_uint, |device| Ok(
    device.pcie.r#gen
));
getter!(nvmlDeviceGetCurrPcieLinkWidth, c_uint, |device| Ok(device
    .pcie
    .width));
getter!(nvmlDeviceGetMaxPcieLinkGeneration, c_uint, |device| Ok(
    device.pcie.max_gen
));
getter!(nvmlDeviceGetMaxPcieLinkWidth, c_uint, |device| Ok(device
    .pcie
    .max_width));
getter!(
    nvmlDeviceGetUtilizationRates,
    abi::Utilization,
    |device| Ok(abi::Utilization {
        gpu: device.utilization.gpu,
        memory: device.utilization.memory,
    })
);
// `_v2` fills today's 68-byte struct too: headers since NVML 11 map the unversioned name to
// `_v3`. The unversioned symbol is version 1 (and `_v1` forwards to it): the 52-byte struct
// NVML had before, which a caller of it passes.
getter!(nvmlDeviceGetPciInfo_v3, abi::PciInfo, |device| Ok(
    query::pci_info(device)
));
getter!(nvmlDeviceGetPciInfo_v2, abi::PciInfo, |device| Ok(
    query::pci_info(device)
));
getter!(
    nvmlDeviceGetPciInfo,
    crate::activity_abi::PciInfoV1,
    |device| Ok(crate::activity::pci_info_v1(&query::pci_info(device)))
);
/// `nvmlDeviceGetMemoryInfo`; a MIG device's is its GPU instance's memory.
///
/// # Safety
/// `memory` must be NULL or valid for writing an `nvmlMemory_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: nvmlDevice_t,
    memory: *mut abi::Memory,
) -> NvmlReturn {
    guard(|| {
        let value = mig_device::with_device_or_mig(device, |device| {
            non_null([memory.cast_const().cast()])?;
            Ok(query::memory_v1(device))
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(memory, value) }
    })
}
getter!(nvmlDeviceGetGpuFabricInfo, abi::GpuFabricInfo, |device| {
    query::fabric_v1(device)
});

// ---------------------------------------------------------------- strings

/// Writes the text `text` gives for a GPU or MIG device into the caller's buffer (INSUFFICIENT_SIZE
/// when the text and its NUL do not fit).
///
/// # Safety
/// The buffer must be NULL or valid for writing `length` bytes.
unsafe fn put_device_or_mig_str(
    device: nvmlDevice_t,
    buffer: *mut c_char,
    length: c_uint,
    text: fn(&Device) -> &str,
) -> NvmlReturn {
    guard(|| {
        mig_device::with_device_or_mig(device, |device| {
            non_null([buffer.cast_const().cast()])?;
            // SAFETY: forwarded from this function's contract.
            unsafe { put_str(buffer, length, text(device)) }
        })
    })
}

/// `nvmlDeviceGetUUID` (a MIG device's is `MIG-<uuid>`); INSUFFICIENT_SIZE when the text and
/// its NUL do not fit.
///
/// # Safety
/// The buffer must be NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    buffer: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { put_device_or_mig_str(device, buffer, length, |device| &device.uuid) }
}

/// `nvmlDeviceGetName` (a MIG device's is its GPU's name, `MIG` and its profile name).
///
/// # Safety
/// The buffer must be NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    buffer: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { put_device_or_mig_str(device, buffer, length, |device| &device.name) }
}
string_getter!(nvmlDeviceGetSerial, |device| device
    .serial
    .as_deref()
    .ok_or(abi::ERROR_NOT_SUPPORTED));

// ---------------------------------------------------------------- two-value and parameterised getters

/// `nvmlDeviceGetCudaComputeCapability`.
///
/// # Safety
/// `major` and `minor` must be NULL or valid for writing an `int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> NvmlReturn {
    guard(|| {
        let capability = with_device(device, |_, device| Ok(device.compute_capability))?;
        non_null([major.cast_const().cast(), minor.cast_const().cast()])?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put(major, capability.major as c_int)?;
            put(minor, capability.minor as c_int)
        }
    })
}

// `nvmlDeviceGetEccMode`: NOT_SUPPORTED when the profile gives no ECC mode.
pair_getter!(nvmlDeviceGetEccMode, |device| {
    let mode = device.ecc.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok((c_uint::from(mode.current), c_uint::from(mode.pending)))
});

// `nvmlDeviceGetTemperature`: only `NVML_TEMPERATURE_GPU` (0).
getter!(nvmlDeviceGetTemperature, c_uint, |device, sensor| {
    match sensor {
        0 => Ok(device.temperature_c),
        _ => Err(abi::ERROR_INVALID_ARGUMENT),
    }
});

// `nvmlDeviceGetClockInfo`.
getter!(nvmlDeviceGetClockInfo, c_uint, |device, kind| Ok(
    query::clock(device, ClockType::from_raw(kind)?)
));

// `nvmlDeviceGetMaxClockInfo`.
getter!(nvmlDeviceGetMaxClockInfo, c_uint, |device, kind| Ok(
    query::max_clock(device, ClockType::from_raw(kind)?)
));
