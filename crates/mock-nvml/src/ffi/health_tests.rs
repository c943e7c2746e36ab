//! The health and telemetry exports (`ffi/health.rs`): their rows of the misuse matrix
//! ([`table`], run by the parent's matrix tests) and their values through the C functions on
//! the shipped profiles.

use super::*;

/// A valid call that the profile answers NOT_SUPPORTED (GB200 has no fans, no auto boost, no
/// row remapper histogram, no bus width in its profile) counts as what succeeds; the checks
/// before it still run.
fn unsupported_is_success(mode: Mode, code: NvmlReturn) -> NvmlReturn {
    match (mode, code) {
        (Mode::Valid, abi::ERROR_NOT_SUPPORTED) => abi::SUCCESS,
        _ => code,
    }
}

/// A one-output export with up to three leading `unsigned int` arguments.
macro_rules! with_args {
    ($name:ident, $ty:ty $(, $arg:expr)*) => {
        entry!($name, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct or integer.
            let mut value: $ty = unsafe { std::mem::zeroed() };
            // SAFETY: `out` is NULL or points at `value`.
            unsafe { $name(device, $($arg,)* out(&mut value, mode)) }
        })
    };
}

/// A two-output `unsigned int` export.
macro_rules! pair {
    ($name:ident) => {
        entry!($name, handle, |device, mode| {
            let (mut first, mut second): (c_uint, c_uint) = (9, 9);
            // SAFETY: NULL or valid unsigneds.
            unsafe { $name(device, out(&mut first, mode), out(&mut second, mode)) }
        })
    };
}

/// A versioned one-struct export, the version tag set.
macro_rules! versioned {
    ($name:ident, $ty:ty, $version:expr) => {
        entry!($name, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: $ty = unsafe { std::mem::zeroed() };
            value.version = $version;
            // SAFETY: NULL or a valid struct.
            unsafe { $name(device, out(&mut value, mode)) }
        })
    };
}

/// An export that is NOT_SUPPORTED on GB200 by its profile.
macro_rules! unsupported {
    ($entry:expr) => {{
        let mut entry = $entry;
        entry.call = |device, mode| {
            let inner = $entry.call;
            unsupported_is_success(mode, inner(device, mode))
        };
        entry
    }};
}

/// The rows of the parent's table for `ffi/health.rs`, in `EXPORTS` order.
pub(super) fn table() -> Vec<Entry> {
    vec![
        scalar!(nvmlDeviceGetPowerManagementMode, c_uint),
        scalar!(nvmlDeviceGetPowerManagementLimit, c_uint),
        scalar!(nvmlDeviceGetPowerManagementDefaultLimit, c_uint),
        pair!(nvmlDeviceGetPowerManagementLimitConstraints),
        scalar!(nvmlDeviceGetEnforcedPowerLimit, c_uint),
        scalar!(nvmlDeviceGetPowerState, c_uint),
        scalar!(nvmlDeviceGetTotalEnergyConsumption, u64),
        scalar!(nvmlDeviceGetPerformanceState, c_uint),
        with_args!(
            nvmlDeviceGetViolationStatus,
            crate::health::layout::ViolationTime,
            0
        ),
        scalar!(nvmlDeviceGetCurrentClocksThrottleReasons, u64),
        scalar!(nvmlDeviceGetCurrentClocksEventReasons, u64),
        scalar!(nvmlDeviceGetSupportedClocksThrottleReasons, u64),
        with_args!(nvmlDeviceGetTemperatureThreshold, c_uint, 0),
        versioned!(
            nvmlDeviceGetTemperatureV,
            crate::health::layout::Temperature,
            crate::health::layout::TEMPERATURE_V1
        ),
        versioned!(
            nvmlDeviceGetMarginTemperature,
            crate::health::layout::MarginTemperature,
            crate::health::layout::MARGIN_TEMPERATURE_V1
        ),
        with_args!(
            nvmlDeviceGetThermalSettings,
            crate::health::layout::ThermalSettings,
            0
        ),
        scalar!(nvmlDeviceGetNumFans, c_uint),
        unsupported!(scalar!(nvmlDeviceGetFanSpeed, c_uint)),
        unsupported!(with_args!(nvmlDeviceGetFanSpeed_v2, c_uint, 0)),
        with_args!(nvmlDeviceGetApplicationsClock, c_uint, 0),
        with_args!(nvmlDeviceGetDefaultApplicationsClock, c_uint, 2),
        unsupported!(pair!(nvmlDeviceGetAutoBoostedClocksEnabled)),
        scalar!(
            nvmlDeviceGetBAR1MemoryInfo,
            crate::health::layout::Bar1Memory
        ),
        unsupported!(scalar!(nvmlDeviceGetMemoryBusWidth, c_uint)),
        scalar!(nvmlDeviceGetDefaultEccMode, c_uint),
        with_args!(nvmlDeviceGetTotalEccErrors, u64, 1, 1),
        with_args!(
            nvmlDeviceGetDetailedEccErrors,
            crate::health::layout::EccErrorCounts,
            0,
            0
        ),
        with_args!(nvmlDeviceGetMemoryErrorCounter, u64, 1, 1, 2),
        scalar!(nvmlDeviceGetRetiredPagesPendingStatus, c_uint),
        unsupported!(scalar!(
            nvmlDeviceGetRowRemapperHistogram,
            crate::health::layout::RowRemapperHistogramValues
        )),
        versioned!(
            nvmlDeviceGetSramEccErrorStatus,
            crate::health::layout::EccSramErrorStatus,
            crate::health::layout::ECC_SRAM_ERROR_STATUS_V1
        ),
        entry!(nvmlDeviceGetRemappedRows, handle, |device, mode| {
            let mut rows: [c_uint; 4] = [9; 4];
            let [a, b, c, d] = &mut rows;
            // SAFETY: NULL or valid unsigneds.
            unsafe {
                nvmlDeviceGetRemappedRows(
                    device,
                    out(a, mode),
                    out(b, mode),
                    out(c, mode),
                    out(d, mode),
                )
            }
        }),
        entry!(nvmlDeviceGetRetiredPages, handle, |device, mode| {
            let mut count: c_uint = 0;
            // SAFETY: NULL or a valid count; no addresses are asked for.
            unsafe { nvmlDeviceGetRetiredPages(device, 1, out(&mut count, mode), null_mut()) }
        }),
        entry!(nvmlDeviceGetRetiredPages_v2, handle, |device, mode| {
            let mut count: c_uint = 0;
            // SAFETY: NULL or a valid count; no pages are asked for.
            unsafe {
                nvmlDeviceGetRetiredPages_v2(
                    device,
                    0,
                    out(&mut count, mode),
                    null_mut(),
                    null_mut(),
                )
            }
        }),
        // No pointer: the Null mode passes a mode that is not an nvmlEnableState_t. A non-root
        // caller is refused (NO_PERMISSION), which is this export's success for non-root.
        entry!(nvmlDeviceSetPersistenceMode, handle, |device, mode| {
            let code = nvmlDeviceSetPersistenceMode(device, if mode == Mode::Null { 7 } else { 1 });
            match (mode, code) {
                (Mode::Valid, crate::health::layout::ERROR_NO_PERMISSION) => abi::SUCCESS,
                _ => code,
            }
        }),
        device_string!(nvmlDeviceGetBoardPartNumber),
        device_string!(nvmlDeviceGetVbiosVersion),
        device_string!(nvmlDeviceGetInforomImageVersion),
        // SAFETY: the buffer is valid for the length passed (see `string_call`).
        entry!(
            nvmlDeviceGetInforomVersion,
            handle,
            string,
            |device, mode| {
                string_call(mode, |buffer, length| unsafe {
                    nvmlDeviceGetInforomVersion(device, 1, buffer, length)
                })
            }
        ),
        entry!(nvmlDeviceGetGspFirmwareVersion, handle, |device, mode| {
            let mut buffer = [0 as c_char; 64];
            let buffer = if mode == Mode::Null {
                null_mut()
            } else {
                buffer.as_mut_ptr()
            };
            // SAFETY: NULL or a 64-byte buffer (NVML_GSP_FIRMWARE_VERSION_BUF_SIZE).
            unsafe { nvmlDeviceGetGspFirmwareVersion(device, buffer) }
        }),
        pair!(nvmlDeviceGetGspFirmwareMode),
        scalar!(nvmlDeviceGetDisplayMode, c_uint),
        scalar!(nvmlDeviceGetDisplayActive, c_uint),
        scalar!(nvmlDeviceGetMultiGpuBoard, c_uint),
        pair!(nvmlDeviceGetGpuOperationMode),
        scalar!(nvmlDeviceGetVirtualizationMode, c_uint),
        scalar!(nvmlDeviceGetAccountingMode, c_uint),
        scalar!(nvmlDeviceGetAccountingBufferSize, c_uint),
    ]
}
