//! The C layouts and enum values of the health and telemetry queries, as nvml.h 13.x declares
//! them (sizes and offsets pinned by the tests below).

use crate::abi::{struct_version, NvmlReturn};

/// `NVML_ERROR_NO_PERMISSION`.
pub const ERROR_NO_PERMISSION: NvmlReturn = 4;

/// `nvmlTemperature_v1`.
pub const TEMPERATURE_V1: u32 = struct_version(size_of::<Temperature>(), 1);
/// `nvmlMarginTemperature_v1`.
pub const MARGIN_TEMPERATURE_V1: u32 = struct_version(size_of::<MarginTemperature>(), 1);
/// `nvmlEccSramErrorStatus_v1`.
pub const ECC_SRAM_ERROR_STATUS_V1: u32 = struct_version(size_of::<EccSramErrorStatus>(), 1);

/// `NVML_MAX_THERMAL_SENSORS_PER_GPU`.
pub const MAX_THERMAL_SENSORS: usize = 3;
/// `NVML_THERMAL_CONTROLLER_GPU_INTERNAL`.
pub const THERMAL_CONTROLLER_GPU_INTERNAL: i32 = 1;
/// `NVML_THERMAL_TARGET_GPU`.
pub const THERMAL_TARGET_GPU: i32 = 1;

/// `nvmlTemperature_v1_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Temperature {
    pub version: u32,
    pub sensor_type: u32,
    pub temperature: i32,
}

/// `nvmlMarginTemperature_v1_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct MarginTemperature {
    pub version: u32,
    pub margin_temperature: i32,
}

/// One sensor of `nvmlGpuThermalSettings_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ThermalSensor {
    pub controller: i32,
    pub default_min_temp: i32,
    pub default_max_temp: i32,
    pub current_temp: i32,
    pub target: i32,
}

/// `nvmlGpuThermalSettings_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ThermalSettings {
    pub count: u32,
    pub sensor: [ThermalSensor; MAX_THERMAL_SENSORS],
}

/// `nvmlViolationTime_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViolationTime {
    /// CPU timestamp in microseconds.
    pub reference_time: u64,
    /// Time held back, in nanoseconds.
    pub violation_time: u64,
}

/// `nvmlBAR1Memory_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Bar1Memory {
    pub bar1_total: u64,
    pub bar1_free: u64,
    pub bar1_used: u64,
}

/// `nvmlEccErrorCounts_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct EccErrorCounts {
    pub l1_cache: u64,
    pub l2_cache: u64,
    pub device_memory: u64,
    pub register_file: u64,
}

/// `nvmlRowRemapperHistogramValues_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct RowRemapperHistogramValues {
    pub max: u32,
    pub high: u32,
    pub partial: u32,
    pub low: u32,
    pub none: u32,
}

/// `nvmlEccSramErrorStatus_v1_t` (the tail padding spelled out, zeroed).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct EccSramErrorStatus {
    pub version: u32,
    pub _pad0: u32,
    pub aggregate_unc_parity: u64,
    pub aggregate_unc_sec_ded: u64,
    pub aggregate_cor: u64,
    pub volatile_unc_parity: u64,
    pub volatile_unc_sec_ded: u64,
    pub volatile_cor: u64,
    pub aggregate_unc_bucket_l2: u64,
    pub aggregate_unc_bucket_sm: u64,
    pub aggregate_unc_bucket_pcie: u64,
    pub aggregate_unc_bucket_mcu: u64,
    pub aggregate_unc_bucket_other: u64,
    pub b_threshold_exceeded: u32,
    pub _pad1: u32,
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<Temperature>(), 12);
        assert_eq!(offset_of!(Temperature, temperature), 8);
        assert_eq!(TEMPERATURE_V1, 0x0100_000C);
        assert_eq!(size_of::<MarginTemperature>(), 8);
        assert_eq!(MARGIN_TEMPERATURE_V1, 0x0100_0008);
        assert_eq!(size_of::<ThermalSensor>(), 20);
        assert_eq!(size_of::<ThermalSettings>(), 4 + 3 * 20);
        assert_eq!(offset_of!(ThermalSettings, sensor), 4);
        assert_eq!(size_of::<ViolationTime>(), 16);
        assert_eq!(size_of::<Bar1Memory>(), 24);
        assert_eq!(size_of::<EccErrorCounts>(), 32);
        assert_eq!(size_of::<RowRemapperHistogramValues>(), 20);
        assert_eq!(offset_of!(EccSramErrorStatus, aggregate_unc_parity), 8);
        assert_eq!(offset_of!(EccSramErrorStatus, b_threshold_exceeded), 96);
        assert_eq!(size_of::<EccSramErrorStatus>(), 104);
        assert_eq!(ECC_SRAM_ERROR_STATUS_V1, 0x0100_0068);
    }
}
