//! The exported NVML entry points: the only module with `unsafe`.
//!
//! Every export runs its body inside [`guard`] (`catch_unwind`), so no panic unwinds into C;
//! a panic becomes `NVML_ERROR_UNKNOWN`. Checks run in one order everywhere: library initialised
//! (UNINITIALIZED), handle issued (INVALID_ARGUMENT, decided by address arithmetic before anything
//! is dereferenced), output pointers non-NULL (INVALID_ARGUMENT), then version tags
//! (ARGUMENT_VERSION_MISMATCH), then capability (NOT_SUPPORTED) and buffer size
//! (INSUFFICIENT_SIZE). Nothing is written to the caller unless the call succeeds.
//!
//! Pointer access goes through four helpers ([`put`], [`put_str`], [`get_str`], [`get_u32`]);
//! each call site states why the pointer satisfies the helper's contract.

#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_snake_case, non_camel_case_types)]

use std::{
    ffi::{c_char, c_int, c_uint, c_void, CStr},
    panic::{catch_unwind, AssertUnwindSafe},
};

use nvml_profile::Device;

use crate::{
    abi::{self, NvmlReturn},
    query::{self, ClockType},
    state::{self, Loaded},
};

/// `nvmlDevice_t`.
pub type nvmlDevice_t = *mut c_void;

/// Every symbol this library exports, in source order (pinned against the built `.so`).
pub const EXPORTS: &[&str] = &[
    "nvmlInit",
    "nvmlInit_v2",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetHandleByPciBusId_v2",
    "nvmlDeviceGetIndex",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetBoardId",
    "nvmlDeviceGetModuleId",
    "nvmlDeviceGetBrand",
    "nvmlDeviceGetArchitecture",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetName",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPciInfo_v2",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceIsMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetAddressingMode",
];

/// Runs an export's body: a panic becomes UNKNOWN instead of unwinding into C.
fn guard(body: impl FnOnce() -> Result<(), NvmlReturn>) -> NvmlReturn {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => abi::SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => abi::ERROR_UNKNOWN,
    }
}

/// Checks init, then the handle, and runs `body` on the device.
fn with_device<T>(
    handle: nvmlDevice_t,
    body: impl FnOnce(&Loaded, &Device) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    let loaded = state::loaded()?;
    let device = loaded.device(handle as usize)?;
    body(&loaded, device)
}

/// INVALID_ARGUMENT if any of the pointers is NULL.
fn non_null<const N: usize>(pointers: [*const c_void; N]) -> Result<(), NvmlReturn> {
    if pointers.iter().any(|pointer| pointer.is_null()) {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(())
}

/// Writes `value` through `out`; INVALID_ARGUMENT if `out` is NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing a `T` (alignment is not required).
unsafe fn put<T>(out: *mut T, value: T) -> Result<(), NvmlReturn> {
    if out.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-NULL and valid for writes of `T`, per this function's contract.
    unsafe { out.write_unaligned(value) };
    Ok(())
}

/// Copies `text` and a NUL into the caller's buffer.
///
/// # Safety
/// `buffer` must be NULL or valid for writing `length` bytes.
unsafe fn put_str(buffer: *mut c_char, length: c_uint, text: &str) -> Result<(), NvmlReturn> {
    if buffer.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    query::check_room(length, text)?;
    let buffer = buffer.cast::<u8>();
    // SAFETY: `buffer` is valid for `length` bytes (contract) and `length >= text.len() + 1`
    // (checked above); `text` is a Rust string, so the ranges cannot overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buffer, text.len());
        buffer.add(text.len()).write(0);
    }
    Ok(())
}

/// Reads a NUL-terminated string from the caller; INVALID_ARGUMENT for NULL or non-UTF-8.
///
/// # Safety
/// `text` must be NULL or point to a NUL-terminated string that outlives the call.
unsafe fn get_str<'a>(text: *const c_char) -> Result<&'a str, NvmlReturn> {
    if text.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-NULL and NUL-terminated, per this function's contract.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str().map_err(|_| abi::ERROR_INVALID_ARGUMENT)
}

/// Reads the leading `version` field of a versioned struct; INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `versioned` must be NULL or valid for reading 4 bytes.
unsafe fn get_u32(versioned: *const c_void) -> Result<u32, NvmlReturn> {
    if versioned.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-NULL and readable for 4 bytes, per this function's contract.
    Ok(unsafe { versioned.cast::<u32>().read_unaligned() })
}

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

/// `nvmlDeviceGetHandleByUUID`: NOT_FOUND for an unknown uuid.
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
        let uuid = unsafe { get_str(uuid) }?;
        let index = query::find_by_uuid(&loaded.devices, uuid)?;
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
    guard(|| {
        let loaded = state::loaded()?;
        non_null([device.cast_const().cast()])?;
        // SAFETY: forwarded from this function's contract.
        let text = unsafe { get_str(pci_bus_id) }?;
        let index = query::find_by_bus_id(&loaded.devices, text)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_handle(&loaded, index, device) }
    })
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

/// Defines `fn name(device, *mut T)` answering `value` for the device.
macro_rules! getter {
    ($name:ident, $ty:ty, |$device:ident| $value:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        /// The output pointer must be NULL or valid for writing one value.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, out: *mut $ty) -> NvmlReturn {
            guard(|| {
                let value: $ty = with_device(device, |_, $device| {
                    non_null([out.cast_const().cast()])?;
                    $value
                })?;
                // SAFETY: forwarded from this function's contract.
                unsafe { put(out, value) }
            })
        }
    };
}

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
getter!(nvmlDeviceGetPersistenceMode, c_uint, |device| Ok(
    c_uint::from(device.persistence_mode)
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
// The pre-v3 symbols fill today's 68-byte struct too: headers since NVML 11 map the unversioned
// name to `_v3`, so only `dlsym` users reach them, and those pass the current struct.
getter!(nvmlDeviceGetPciInfo_v3, abi::PciInfo, |device| Ok(
    query::pci_info(device)
));
getter!(nvmlDeviceGetPciInfo_v2, abi::PciInfo, |device| Ok(
    query::pci_info(device)
));
getter!(nvmlDeviceGetPciInfo, abi::PciInfo, |device| Ok(
    query::pci_info(device)
));
getter!(nvmlDeviceGetMemoryInfo, abi::Memory, |device| Ok(
    query::memory_v1(device)
));
getter!(nvmlDeviceGetGpuFabricInfo, abi::GpuFabricInfo, |device| {
    query::fabric_v1(device)
});

// ---------------------------------------------------------------- strings

/// Defines `fn name(device, char *buffer, unsigned length)` answering `text`.
macro_rules! string_getter {
    ($name:ident, |$device:ident| $text:expr) => {
        #[doc = concat!("`", stringify!($name), "`: INSUFFICIENT_SIZE when the text and its NUL do not fit.")]
        ///
        /// # Safety
        /// The buffer must be NULL or valid for writing `length` bytes.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, buffer: *mut c_char, length: c_uint) -> NvmlReturn {
            guard(|| {
                with_device(device, |_, $device| {
                    non_null([buffer.cast_const().cast()])?;
                    let text: Result<&str, NvmlReturn> = $text;
                    // SAFETY: forwarded from this function's contract.
                    unsafe { put_str(buffer, length, text?) }
                })
            })
        }
    };
}

string_getter!(nvmlDeviceGetUUID, |device| Ok(&device.uuid));
string_getter!(nvmlDeviceGetName, |device| Ok(&device.name));
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

/// `nvmlDeviceGetMigMode`: NOT_SUPPORTED when the profile gives no MIG mode.
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
        let mode = with_device(device, |_, device| {
            non_null([current.cast_const().cast(), pending.cast_const().cast()])?;
            device.mig_mode.ok_or(abi::ERROR_NOT_SUPPORTED)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put(current, c_uint::from(mode.current))?;
            put(pending, c_uint::from(mode.pending))
        }
    })
}

/// `nvmlDeviceGetEccMode`: NOT_SUPPORTED when the profile gives no ECC mode.
///
/// # Safety
/// `current` and `pending` must be NULL or valid for writing an `nvmlEnableState_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEccMode(
    device: nvmlDevice_t,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let mode = with_device(device, |_, device| {
            non_null([current.cast_const().cast(), pending.cast_const().cast()])?;
            device.ecc.ok_or(abi::ERROR_NOT_SUPPORTED)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put(current, c_uint::from(mode.current))?;
            put(pending, c_uint::from(mode.pending))
        }
    })
}

/// `nvmlDeviceGetTemperature`: only `NVML_TEMPERATURE_GPU` (0).
///
/// # Safety
/// `temp` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: nvmlDevice_t,
    sensor: c_uint,
    temp: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            non_null([temp.cast_const().cast()])?;
            match sensor {
                0 => Ok(device.temperature_c),
                _ => Err(abi::ERROR_INVALID_ARGUMENT),
            }
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(temp, value) }
    })
}

/// `nvmlDeviceGetClockInfo`.
///
/// # Safety
/// `clock` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: nvmlDevice_t,
    kind: c_uint,
    clock: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            non_null([clock.cast_const().cast()])?;
            Ok(query::clock(device, ClockType::from_raw(kind)?))
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(clock, value) }
    })
}

/// `nvmlDeviceGetMaxClockInfo`.
///
/// # Safety
/// `clock` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    device: nvmlDevice_t,
    kind: c_uint,
    clock: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            non_null([clock.cast_const().cast()])?;
            Ok(query::max_clock(device, ClockType::from_raw(kind)?))
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(clock, value) }
    })
}

/// `nvmlDeviceGetNvLinkState`: INVALID_ARGUMENT for a link the GPU does not have.
///
/// # Safety
/// `is_active` must be NULL or valid for writing an `nvmlEnableState_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: nvmlDevice_t,
    link: c_uint,
    is_active: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let active = with_device(device, |_, device| {
            non_null([is_active.cast_const().cast()])?;
            query::nvlink_active(device, link)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(is_active, c_uint::from(active)) }
    })
}

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
        let value = with_device(device, |_, device| Ok(query::memory_v2(device)))?;
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

getter!(nvmlDeviceGetMaxMigDeviceCount, c_uint, |device| {
    query::max_mig_devices(device)
});
// Every handle this library issues is a whole GPU: the mock creates no MIG devices.
getter!(nvmlDeviceIsMigDeviceHandle, c_uint, |_device| Ok(0));

/// `nvmlDeviceGetMigDeviceHandleByIndex`: never succeeds (no MIG devices exist); see
/// [`query::mig_device_at`] for which error. Nothing is written.
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
        with_device(device, |_, device| {
            non_null([mig_device.cast_const().cast()])?;
            query::mig_device_at(device, index)
        })
    })
}

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
