//! Pure answers of the health and telemetry queries (issue 22): power, thermal, fans,
//! application clocks, BAR1, firmware versions and modes from a profile device's `health` block
//! ([`nvml_profile::Health`]); ECC, retired pages and remapped rows in [`ecc`]. An absent
//! sub-section answers NOT_SUPPORTED; arguments outside nvml.h's enums answer INVALID_ARGUMENT.

use std::time::Duration;

use nvml_profile::{Architecture, ClocksEventReason, Device, Health, Thermal};

use crate::{
    abi::{self, NvmlReturn},
    query::{self, ClockType},
};

pub mod ecc;
pub mod layout;

use layout as c;

type Answer<T> = Result<T, NvmlReturn>;

/// The sub-section `pick` selects, or NOT_SUPPORTED.
fn section<'a, T: 'a>(device: &'a Device, pick: impl FnOnce(&'a Health) -> Option<T>) -> Answer<T> {
    pick(&device.health).ok_or(abi::ERROR_NOT_SUPPORTED)
}

/// An `nvmlEnableState_t`.
fn enable(on: bool) -> u32 {
    u32::from(on)
}

// ---------------------------------------------------------------- power

/// `nvmlDeviceGetPowerManagementMode`.
pub fn power_management_mode(device: &Device) -> Answer<u32> {
    section(device, |health| health.power).map(|power| enable(power.management))
}

/// Which limit of the `power` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLimit {
    /// `nvmlDeviceGetPowerManagementLimit`.
    Current,
    /// `nvmlDeviceGetPowerManagementDefaultLimit`.
    Default,
    /// `nvmlDeviceGetEnforcedPowerLimit`.
    Enforced,
}

/// A power limit in milliwatts.
pub fn power_limit(device: &Device, which: PowerLimit) -> Answer<u32> {
    let power = section(device, |health| health.power)?;
    Ok(match which {
        PowerLimit::Current => power.limit_mw,
        PowerLimit::Default => power.default_limit_mw,
        PowerLimit::Enforced => power.enforced_limit_mw,
    })
}

/// `nvmlDeviceGetPowerManagementLimitConstraints`: (min, max) in milliwatts.
pub fn power_limit_constraints(device: &Device) -> Answer<(u32, u32)> {
    section(device, |health| health.power).map(|power| (power.min_limit_mw, power.max_limit_mw))
}

/// `nvmlDeviceGetTotalEnergyConsumption` in millijoules: the profile's energy at start plus the
/// power draw over `elapsed` (mW × ms = µJ).
pub fn total_energy(device: &Device, elapsed: Duration) -> Answer<u64> {
    let power = section(device, |health| health.power)?;
    let micro_joules = u128::from(device.power_usage_mw) * elapsed.as_millis();
    let grown = u64::try_from(micro_joules / 1000).unwrap_or(u64::MAX);
    Ok(power.energy_at_start_mj.saturating_add(grown))
}

/// `nvmlDeviceGetPerformanceState` and `nvmlDeviceGetPowerState`: `nvmlPstates_t`.
pub fn performance_state(device: &Device) -> Answer<u32> {
    section(device, |health| health.performance_state)
}

/// `nvmlDeviceGetCurrentClocksEventReasons` (and the throttle-reason alias): the active mask.
pub fn clocks_event_reasons(device: &Device) -> Answer<u64> {
    section(device, |health| health.clocks_event_reasons.as_ref())
        .map(|reasons| ClocksEventReason::mask(&reasons.active))
}

/// `nvmlDeviceGetSupportedClocksThrottleReasons`: the supported mask.
pub fn supported_clocks_event_reasons(device: &Device) -> Answer<u64> {
    section(device, |health| health.clocks_event_reasons.as_ref())
        .map(|reasons| ClocksEventReason::mask(&reasons.supported))
}

/// `nvmlDeviceGetViolationStatus`: a policy whose clocks event reason is active has been
/// violated since the library started (`elapsed`), any other for no time. `now_us` is the CPU
/// timestamp the answer carries. Policies 6..=9 and past `COUNT` are INVALID_ARGUMENT; the
/// deprecated `TOTAL_APP_CLOCKS` (10) is NOT_SUPPORTED.
pub fn violation_status(
    device: &Device,
    policy: u32,
    elapsed: Duration,
    now_us: u64,
) -> Answer<c::ViolationTime> {
    let reason = match policy {
        0 => Some(ClocksEventReason::SwPowerCap),
        1 => Some(ClocksEventReason::SwThermalSlowdown),
        2 => Some(ClocksEventReason::SyncBoost),
        3..=5 | 11 => None,
        10 => return Err(abi::ERROR_NOT_SUPPORTED),
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    let active = clocks_event_reasons(device)?;
    let violated = reason.is_some_and(|reason| active & reason.bit() != 0);
    let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    Ok(c::ViolationTime {
        reference_time: now_us,
        violation_time: if violated { nanos } else { 0 },
    })
}

// ---------------------------------------------------------------- thermal and fans

fn thermal(device: &Device) -> Answer<Thermal> {
    section(device, |health| health.thermal)
}

/// `nvmlDeviceGetTemperatureThreshold`: shutdown, slowdown, memory max and GPU max from the
/// profile; the acoustic and GPS thresholds (4..=7) are NOT_SUPPORTED (data-centre parts), past
/// `COUNT` INVALID_ARGUMENT.
pub fn temperature_threshold(device: &Device, kind: u32) -> Answer<u32> {
    if kind >= 8 {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let thermal = thermal(device)?;
    match kind {
        0 => Ok(thermal.shutdown_c),
        1 => Ok(thermal.slowdown_c),
        2 => thermal.memory_max_c.ok_or(abi::ERROR_NOT_SUPPORTED),
        3 => Ok(thermal.gpu_max_c),
        _ => Err(abi::ERROR_NOT_SUPPORTED),
    }
}

/// `nvmlDeviceGetTemperatureV`: only `NVML_TEMPERATURE_GPU` (0), as `nvmlDeviceGetTemperature`.
pub fn temperature(device: &Device, sensor: u32) -> Answer<i32> {
    match sensor {
        0 => Ok(i32::try_from(device.temperature_c).unwrap_or(i32::MAX)),
        _ => Err(abi::ERROR_INVALID_ARGUMENT),
    }
}

/// `nvmlDeviceGetMarginTemperature`: slowdown threshold minus the temperature (negative past it);
/// Ada and later only (earlier parts have no T.Limit).
pub fn margin_temperature(device: &Device) -> Answer<i32> {
    let arch = query::architecture(device.architecture);
    if device.architecture == Architecture::Unknown || arch < query::architecture(Architecture::Ada)
    {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    let thermal = thermal(device)?;
    Ok(i64::from(thermal.slowdown_c) as i32 - temperature(device, 0)?)
}

/// The memory's temperature now (field `NVML_FI_DEV_MEMORY_TEMP`), where the profile gives it.
pub fn memory_temperature(device: &Device) -> Answer<u32> {
    thermal(device)?.memory_c.ok_or(abi::ERROR_NOT_SUPPORTED)
}

/// `nvmlDeviceGetThermalSettings`: one internal GPU sensor with its temperature and the GPU
/// maximum, whatever sensor index (as upstream answers).
pub fn thermal_settings(device: &Device) -> Answer<c::ThermalSettings> {
    let thermal = thermal(device)?;
    let mut settings = c::ThermalSettings {
        count: 1,
        ..Default::default()
    };
    settings.sensor[0] = c::ThermalSensor {
        controller: c::THERMAL_CONTROLLER_GPU_INTERNAL,
        default_min_temp: 0,
        default_max_temp: i32::try_from(thermal.gpu_max_c).unwrap_or(i32::MAX),
        current_temp: temperature(device, 0)?,
        target: c::THERMAL_TARGET_GPU,
    };
    Ok(settings)
}

/// `nvmlDeviceGetNumFans`: 0 on fanless parts.
pub fn num_fans(device: &Device) -> Answer<u32> {
    section(device, |health| health.fans).map(|fans| fans.count)
}

/// `nvmlDeviceGetFanSpeed_v2` (`fan: None` for `nvmlDeviceGetFanSpeed`): NOT_SUPPORTED without
/// fans, INVALID_ARGUMENT past the last fan.
pub fn fan_speed(device: &Device, fan: Option<u32>) -> Answer<u32> {
    let fans = section(device, |health| health.fans)?;
    if fans.count == 0 {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    if fan.is_some_and(|fan| fan >= fans.count) {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(fans.speed_percent)
}

// ---------------------------------------------------------------- clocks and memory

/// `nvmlDeviceGetApplicationsClock` (`default: false`) and `…DefaultApplicationsClock`: graphics
/// and memory; SM and video have no application clock (NOT_SUPPORTED, as upstream).
pub fn applications_clock(device: &Device, kind: u32, default: bool) -> Answer<u32> {
    let kind = ClockType::from_raw(kind)?;
    let clocks = section(device, |health| health.applications_clocks)?;
    match (kind, default) {
        (ClockType::Graphics, false) => Ok(clocks.graphics),
        (ClockType::Mem, false) => Ok(clocks.mem),
        (ClockType::Graphics, true) => Ok(clocks.default_graphics),
        (ClockType::Mem, true) => Ok(clocks.default_mem),
        _ => Err(abi::ERROR_NOT_SUPPORTED),
    }
}

/// `nvmlDeviceGetAutoBoostedClocksEnabled`: (enabled, default enabled).
pub fn auto_boost(device: &Device) -> Answer<(u32, u32)> {
    section(device, |health| health.auto_boost)
        .map(|boost| (enable(boost.enabled), enable(boost.default_enabled)))
}

/// `nvmlDeviceGetBAR1MemoryInfo`: free is `total - used`.
pub fn bar1_memory(device: &Device) -> Answer<c::Bar1Memory> {
    section(device, |health| health.bar1_memory).map(|bar1| c::Bar1Memory {
        bar1_total: bar1.total,
        bar1_free: bar1.total.saturating_sub(bar1.used),
        bar1_used: bar1.used,
    })
}

/// `nvmlDeviceGetMemoryBusWidth` in bits.
pub fn memory_bus_width(device: &Device) -> Answer<u32> {
    section(device, |health| health.memory_bus_width)
}

// ---------------------------------------------------------------- identity, firmware, modes

/// `nvmlDeviceGetBoardPartNumber`.
pub fn board_part_number(device: &Device) -> Answer<&str> {
    section(device, |health| health.board_part_number.as_deref())
}

/// `nvmlDeviceGetVbiosVersion`.
pub fn vbios_version(device: &Device) -> Answer<&str> {
    section(device, |health| health.vbios_version.as_deref())
}

/// `nvmlDeviceGetInforomVersion`: OEM (0), ECC (1), power (2) objects; DEN (3) and an absent
/// object NOT_SUPPORTED; past `COUNT` INVALID_ARGUMENT.
pub fn inforom_version(device: &Device, object: u32) -> Answer<&str> {
    if object >= 4 {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let inforom = section(device, |health| health.inforom.as_ref())?;
    let version = match object {
        0 => &inforom.oem,
        1 => &inforom.ecc,
        2 => &inforom.power,
        _ => &None,
    };
    version.as_deref().ok_or(abi::ERROR_NOT_SUPPORTED)
}

/// `nvmlDeviceGetInforomImageVersion`.
pub fn inforom_image_version(device: &Device) -> Answer<&str> {
    section(device, |health| health.inforom.as_ref()).map(|inforom| inforom.image_version.as_str())
}

/// `nvmlDeviceGetGspFirmwareMode`: (enabled, default enabled).
pub fn gsp_firmware_mode(device: &Device) -> Answer<(u32, u32)> {
    section(device, |health| health.gsp_firmware.as_ref())
        .map(|gsp| (enable(gsp.enabled), enable(gsp.default_enabled)))
}

/// `nvmlDeviceGetGspFirmwareVersion`.
pub fn gsp_firmware_version(device: &Device) -> Answer<&str> {
    section(device, |health| health.gsp_firmware.as_ref()).map(|gsp| gsp.version.as_str())
}

/// `nvmlDeviceGetDisplayMode` (`active: false`) and `nvmlDeviceGetDisplayActive`.
pub fn display(device: &Device, active: bool) -> Answer<u32> {
    section(device, |health| health.display)
        .map(|display| enable(if active { display.active } else { display.mode }))
}

/// `nvmlDeviceGetMultiGpuBoard`.
pub fn multi_gpu_board(device: &Device) -> Answer<u32> {
    section(device, |health| health.multi_gpu_board).map(enable)
}

/// `nvmlDeviceGetGpuOperationMode`: (current, pending) `nvmlGpuOperationMode_t`.
pub fn gpu_operation_mode(device: &Device) -> Answer<(u32, u32)> {
    section(device, |health| health.gpu_operation_mode)
        .map(|modes| (modes.current as u32, modes.pending as u32))
}

/// `nvmlDeviceGetVirtualizationMode`: `nvmlGpuVirtualizationMode_t`.
pub fn virtualization_mode(device: &Device) -> Answer<u32> {
    section(device, |health| health.virtualization_mode).map(|mode| mode as u32)
}

/// `nvmlDeviceGetAccountingMode` (`buffer: false`) and `nvmlDeviceGetAccountingBufferSize`.
pub fn accounting(device: &Device, buffer: bool) -> Answer<u32> {
    section(device, |health| health.accounting).map(|accounting| {
        if buffer {
            accounting.buffer_size
        } else {
            enable(accounting.enabled)
        }
    })
}

/// `nvmlDeviceSetPersistenceMode`: the mode must be an `nvmlEnableState_t`; like the real
/// library, only root may change it (`euid` 0), anyone else gets NO_PERMISSION.
pub fn set_persistence_mode(mode: u32, euid: Option<u32>) -> Answer<bool> {
    let enabled = match mode {
        0 => false,
        1 => true,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    match euid {
        Some(0) => Ok(enabled),
        _ => Err(c::ERROR_NO_PERMISSION),
    }
}

/// The effective uid in a `/proc/self/status` text.
pub fn effective_uid(status: &str) -> Option<u32> {
    let line = status.lines().find_map(|line| line.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
