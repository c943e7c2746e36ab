//! Health and telemetry exports (issue 22): power, thermal and fans, application clocks, BAR1,
//! ECC, retired pages, remapped rows, firmware and modes. The answers are
//! [`crate::health`]'s; this module only checks arguments and writes them.

use std::{
    sync::OnceLock,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use super::guard::*;
use crate::abi::{self, NvmlReturn};
use crate::health::{self, ecc, layout, PowerLimit};
use crate::state;
use std::ffi::{c_char, c_uint};

/// Time since the first query that depends on it (the energy counter's and violation times'
/// origin).
pub(crate) fn since_start() -> Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Microseconds since the epoch (the violation status' reference time).
fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------- power

getter!(nvmlDeviceGetPowerManagementMode, c_uint, |device| {
    health::power_management_mode(device)
});
getter!(nvmlDeviceGetPowerManagementLimit, c_uint, |device| {
    health::power_limit(device, PowerLimit::Current)
});
getter!(nvmlDeviceGetPowerManagementDefaultLimit, c_uint, |device| {
    health::power_limit(device, PowerLimit::Default)
});
pair_getter!(nvmlDeviceGetPowerManagementLimitConstraints, |device| {
    health::power_limit_constraints(device)
});
getter!(nvmlDeviceGetEnforcedPowerLimit, c_uint, |device| {
    health::power_limit(device, PowerLimit::Enforced)
});
getter!(nvmlDeviceGetPowerState, c_uint, |device| {
    health::performance_state(device)
});
getter!(nvmlDeviceGetTotalEnergyConsumption, u64, |device| {
    health::total_energy(device, since_start())
});
getter!(nvmlDeviceGetPerformanceState, c_uint, |device| {
    health::performance_state(device)
});
getter!(
    nvmlDeviceGetViolationStatus,
    layout::ViolationTime,
    |device, policy| health::violation_status(device, policy, since_start(), now_us())
);
getter!(nvmlDeviceGetCurrentClocksThrottleReasons, u64, |device| {
    health::clocks_event_reasons(device)
});
getter!(nvmlDeviceGetCurrentClocksEventReasons, u64, |device| {
    health::clocks_event_reasons(device)
});
getter!(nvmlDeviceGetSupportedClocksThrottleReasons, u64, |device| {
    health::supported_clocks_event_reasons(device)
});

// ---------------------------------------------------------------- thermal and fans

getter!(nvmlDeviceGetTemperatureThreshold, c_uint, |device, kind| {
    health::temperature_threshold(device, kind)
});

/// `nvmlDeviceGetTemperatureV`: the caller sets `version = nvmlTemperature_v1` and `sensorType`.
///
/// # Safety
/// `temperature` must be NULL or valid for reading and writing an `nvmlTemperature_v1_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureV(
    device: nvmlDevice_t,
    temperature: *mut layout::Temperature,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            if unsafe { get_u32(temperature.cast_const().cast()) }? != layout::TEMPERATURE_V1 {
                return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
            }
            // SAFETY: non-NULL (checked by `get_u32`) and readable as the struct (contract).
            let mut value = unsafe { temperature.read_unaligned() };
            value.temperature = health::temperature(device, value.sensor_type)?;
            Ok(value)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(temperature, value) }
    })
}

/// `nvmlDeviceGetMarginTemperature`: the caller sets `version = nvmlMarginTemperature_v1`.
///
/// # Safety
/// `margin` must be NULL or valid for reading and writing an `nvmlMarginTemperature_v1_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMarginTemperature(
    device: nvmlDevice_t,
    margin: *mut layout::MarginTemperature,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            if unsafe { get_u32(margin.cast_const().cast()) }? != layout::MARGIN_TEMPERATURE_V1 {
                return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
            }
            Ok(layout::MarginTemperature {
                version: layout::MARGIN_TEMPERATURE_V1,
                margin_temperature: health::margin_temperature(device)?,
            })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(margin, value) }
    })
}

getter!(
    nvmlDeviceGetThermalSettings,
    layout::ThermalSettings,
    |device, _sensor_index| health::thermal_settings(device)
);
getter!(nvmlDeviceGetNumFans, c_uint, |device| health::num_fans(
    device
));
getter!(nvmlDeviceGetFanSpeed, c_uint, |device| health::fan_speed(
    device, None
));
getter!(nvmlDeviceGetFanSpeed_v2, c_uint, |device, fan| {
    health::fan_speed(device, Some(fan))
});

// ---------------------------------------------------------------- clocks and memory

getter!(nvmlDeviceGetApplicationsClock, c_uint, |device, kind| {
    health::applications_clock(device, kind, false)
});
getter!(
    nvmlDeviceGetDefaultApplicationsClock,
    c_uint,
    |device, kind| health::applications_clock(device, kind, true)
);
pair_getter!(nvmlDeviceGetAutoBoostedClocksEnabled, |device| {
    health::auto_boost(device)
});
getter!(nvmlDeviceGetBAR1MemoryInfo, layout::Bar1Memory, |device| {
    health::bar1_memory(device)
});
getter!(nvmlDeviceGetMemoryBusWidth, c_uint, |device| {
    health::memory_bus_width(device)
});

// ---------------------------------------------------------------- ECC, retired pages, rows

getter!(nvmlDeviceGetDefaultEccMode, c_uint, |device| {
    ecc::default_mode(device)
});
getter!(
    nvmlDeviceGetTotalEccErrors,
    u64,
    |device, error, counter| ecc::total(&injected(device), error, counter)
);
getter!(
    nvmlDeviceGetDetailedEccErrors,
    layout::EccErrorCounts,
    |device, error, counter| ecc::detailed(&injected(device), error, counter)
);
getter!(
    nvmlDeviceGetMemoryErrorCounter,
    u64,
    |device, error, counter, location| {
        ecc::memory_error_counter(&injected(device), error, counter, location)
    }
);

/// `device` with the ECC errors injected on it counted ([`crate::events::injected_ecc`]).
fn injected(device: &nvml_profile::Device) -> nvml_profile::Device {
    let host = state::loaded()
        .ok()
        .and_then(|loaded| loaded.host_index(device.index as usize));
    ecc::with_injected(device, host.map_or((0, 0), crate::events::injected_ecc))
}
getter!(nvmlDeviceGetRetiredPagesPendingStatus, c_uint, |device| {
    ecc::retired_pages_pending(device)
});
getter!(
    nvmlDeviceGetRowRemapperHistogram,
    layout::RowRemapperHistogramValues,
    |device| ecc::row_remapper_histogram(device)
);

/// `nvmlDeviceGetSramEccErrorStatus`: the caller sets `version = nvmlEccSramErrorStatus_v1`.
///
/// # Safety
/// `status` must be NULL or valid for reading and writing an `nvmlEccSramErrorStatus_v1_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSramEccErrorStatus(
    device: nvmlDevice_t,
    status: *mut layout::EccSramErrorStatus,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            if unsafe { get_u32(status.cast_const().cast()) }? != layout::ECC_SRAM_ERROR_STATUS_V1 {
                return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
            }
            ecc::sram_status(device)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(status, value) }
    })
}

/// `nvmlDeviceGetRemappedRows`.
///
/// # Safety
/// Every pointer must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: nvmlDevice_t,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let outs = [corr_rows, unc_rows, is_pending, failure_occurred];
        let values = with_device(device, |_, device| {
            non_null(outs.map(|out| out.cast_const().cast()))?;
            ecc::remapped_rows(device)
        })?;
        for (out, value) in outs.into_iter().zip(values) {
            // SAFETY: forwarded from this function's contract.
            unsafe { put(out, value) }?;
        }
        Ok(())
    })
}

mod pages;
pub use pages::*;

// ---------------------------------------------------------------- identity, firmware, modes

string_getter!(nvmlDeviceGetBoardPartNumber, |device| {
    health::board_part_number(device)
});
string_getter!(nvmlDeviceGetVbiosVersion, |device| health::vbios_version(
    device
));
string_getter!(nvmlDeviceGetInforomImageVersion, |device| {
    health::inforom_image_version(device)
});

/// `nvmlDeviceGetInforomVersion`: INSUFFICIENT_SIZE when the text and its NUL do not fit.
///
/// # Safety
/// `version` must be NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetInforomVersion(
    device: nvmlDevice_t,
    object: c_uint,
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            non_null([version.cast_const().cast()])?;
            let text = health::inforom_version(device, object)?;
            // SAFETY: forwarded from this function's contract.
            unsafe { put_str(version, length, text) }
        })
    })
}

/// `NVML_GSP_FIRMWARE_VERSION_BUF_SIZE`: the caller's buffer, which the call does not size.
const GSP_FIRMWARE_VERSION_BUF_SIZE: c_uint = 0x40;

/// `nvmlDeviceGetGspFirmwareVersion`.
///
/// # Safety
/// `version` must be NULL or valid for writing `NVML_GSP_FIRMWARE_VERSION_BUF_SIZE` (64) bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGspFirmwareVersion(
    device: nvmlDevice_t,
    version: *mut c_char,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            non_null([version.cast_const().cast()])?;
            let text = health::gsp_firmware_version(device)?;
            // SAFETY: forwarded from this function's contract.
            unsafe { put_str(version, GSP_FIRMWARE_VERSION_BUF_SIZE, text) }
        })
    })
}

pair_getter!(nvmlDeviceGetGspFirmwareMode, |device| {
    health::gsp_firmware_mode(device)
});
getter!(nvmlDeviceGetDisplayMode, c_uint, |device| health::display(
    device, false
));
getter!(
    nvmlDeviceGetDisplayActive,
    c_uint,
    |device| health::display(device, true)
);
getter!(nvmlDeviceGetMultiGpuBoard, c_uint, |device| {
    health::multi_gpu_board(device)
});
pair_getter!(nvmlDeviceGetGpuOperationMode, |device| {
    health::gpu_operation_mode(device)
});
getter!(nvmlDeviceGetVirtualizationMode, c_uint, |device| {
    health::virtualization_mode(device)
});
getter!(nvmlDeviceGetAccountingMode, c_uint, |device| {
    health::accounting(device, false)
});
getter!(nvmlDeviceGetAccountingBufferSize, c_uint, |device| {
    health::accounting(device, true)
});
