//! The optional `health` block of a GPU: power limits, thermal thresholds, fans, application
//! clocks, BAR1, ECC counters, retired pages and remapped rows, firmware versions and modes.
//!
//! Every sub-section is optional; an absent one makes its NVML queries NOT_SUPPORTED. A
//! `devices[]` entry's `health` overrides the defaults' sub-section by sub-section
//! ([`Health::overlay`]). Types only; validation is in `health/validate.rs`.

use borsh::{BorshDeserialize, BorshSerialize};
use serde::{Deserialize, Serialize};

pub(crate) mod validate;

/// The `health` block (every sub-section optional).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// Power management limits and the energy counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerLimits>,
    /// `nvmlPstates_t` now (0 = P0); also the power state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_state: Option<u32>,
    /// Clocks event (throttle) reasons, active and supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks_event_reasons: Option<ClocksEventReasons>,
    /// Application clocks, current and default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications_clocks: Option<ApplicationsClocks>,
    /// Auto boosted clocks; absent: NOT_SUPPORTED (data-centre parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_boost: Option<AutoBoost>,
    /// Temperature thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thermal: Option<Thermal>,
    /// Fans (`count: 0` on liquid-cooled and passively cooled parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fans: Option<Fans>,
    /// The BAR1 aperture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_memory: Option<Bar1Memory>,
    /// Memory bus width in bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus_width: Option<u32>,
    /// ECC default mode and error counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc_errors: Option<EccErrors>,
    /// Retired pages (page retirement, pre-Ampere; empty on later parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_pages: Option<RetiredPages>,
    /// Remapped rows (Ampere and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remapped_rows: Option<RemappedRows>,
    /// Board part number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_part_number: Option<String>,
    /// VBIOS version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vbios_version: Option<String>,
    /// InfoROM versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inforom: Option<Inforom>,
    /// GSP firmware.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gsp_firmware: Option<GspFirmware>,
    /// Display mode and whether a display is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<Display>,
    /// Whether the GPU is on a multi-GPU board.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_gpu_board: Option<bool>,
    /// GPU operation mode, current and pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_operation_mode: Option<GpuOperationModes>,
    /// Virtualization mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization_mode: Option<VirtualizationMode>,
    /// Process accounting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<Accounting>,
}

impl Health {
    /// `over`'s sub-sections where it has them, `self`'s elsewhere.
    pub fn overlay(&self, over: &Health) -> Health {
        macro_rules! pick {
            ($($field:ident),*) => {
                Health { $($field: over.$field.clone().or_else(|| self.$field.clone()),)* }
            };
        }
        pick!(
            power,
            performance_state,
            clocks_event_reasons,
            applications_clocks,
            auto_boost,
            thermal,
            fans,
            bar1_memory,
            memory_bus_width,
            ecc_errors,
            retired_pages,
            remapped_rows,
            board_part_number,
            vbios_version,
            inforom,
            gsp_firmware,
            display,
            multi_gpu_board,
            gpu_operation_mode,
            virtualization_mode,
            accounting
        )
    }
}

/// A device's `health`: its entry's sub-sections over the defaults'.
pub(crate) fn resolve(defaults: Option<&Health>, entry: Option<&Health>) -> Health {
    // An absent block is an empty one; one overlay, no clone of the whole block first.
    let none = Health::default();
    defaults.unwrap_or(&none).overlay(entry.unwrap_or(&none))
}

/// Power management: limits in milliwatts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct PowerLimits {
    /// Whether power management is enabled (`nvmlDeviceGetPowerManagementMode`).
    pub management: bool,
    /// The limit set now.
    pub limit_mw: u32,
    /// The limit at boot.
    pub default_limit_mw: u32,
    /// The limit the driver enforces (the lowest of all limiters).
    pub enforced_limit_mw: u32,
    /// The lowest settable limit.
    pub min_limit_mw: u32,
    /// The highest settable limit.
    pub max_limit_mw: u32,
    /// Energy consumed before the library was first initialised, in millijoules; the counter then
    /// grows by the power draw (`power_usage_mw`) times the time since.
    #[serde(default)]
    pub energy_at_start_mj: u64,
}

/// One clocks event (throttle) reason, `nvmlClocksEventReason*`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ClocksEventReason {
    /// 0x1.
    GpuIdle,
    /// 0x2.
    ApplicationsClocksSetting,
    /// 0x4.
    SwPowerCap,
    /// 0x8.
    HwSlowdown,
    /// 0x10.
    SyncBoost,
    /// 0x20.
    SwThermalSlowdown,
    /// 0x40.
    HwThermalSlowdown,
    /// 0x80.
    HwPowerBrakeSlowdown,
    /// 0x100.
    DisplayClockSetting,
}

impl ClocksEventReason {
    /// The reason's bit.
    pub fn bit(self) -> u64 {
        1 << self as u32
    }

    /// The mask of several reasons.
    pub fn mask(reasons: &[ClocksEventReason]) -> u64 {
        reasons.iter().fold(0, |mask, reason| mask | reason.bit())
    }
}

/// Clocks event reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct ClocksEventReasons {
    /// Holding the clocks back now.
    pub active: Vec<ClocksEventReason>,
    /// The reasons the GPU can report.
    pub supported: Vec<ClocksEventReason>,
}

/// Application clocks in MHz.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ApplicationsClocks {
    pub graphics: u32,
    pub mem: u32,
    pub default_graphics: u32,
    pub default_mem: u32,
}

/// Auto boosted clocks.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct AutoBoost {
    /// Enabled now.
    pub enabled: bool,
    /// Enabled by default.
    pub default_enabled: bool,
}

/// Temperature thresholds in °C.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Thermal {
    /// `NVML_TEMPERATURE_THRESHOLD_SHUTDOWN`.
    pub shutdown_c: u32,
    /// `NVML_TEMPERATURE_THRESHOLD_SLOWDOWN` (also the T.Limit the margin is measured to).
    pub slowdown_c: u32,
    /// `NVML_TEMPERATURE_THRESHOLD_GPU_MAX` (the sensor's default maximum).
    pub gpu_max_c: u32,
    /// `NVML_TEMPERATURE_THRESHOLD_MEM_MAX`; absent: NOT_SUPPORTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max_c: Option<u32>,
    /// The memory's temperature now (field `NVML_FI_DEV_MEMORY_TEMP`); absent: NOT_SUPPORTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_c: Option<u32>,
}

/// Fans.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Fans {
    /// How many; 0: speed queries are NOT_SUPPORTED.
    pub count: u32,
    /// Every fan's speed, percent of maximum.
    pub speed_percent: u32,
}

/// The BAR1 aperture in bytes; free is `total - used`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Bar1Memory {
    pub total: u64,
    pub used: u64,
}

/// ECC default mode and counters; answered only while `ecc.current` is true.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct EccErrors {
    /// `nvmlDeviceGetDefaultEccMode`.
    pub default_enabled: bool,
    /// Since the driver loaded (all zero when absent).
    #[serde(default)]
    pub volatile: EccCounts,
    /// Over the GPU's life (all zero when absent).
    #[serde(default)]
    pub aggregate: EccCounts,
    /// On-die SRAM (all zero when absent).
    #[serde(default)]
    pub sram: SramEcc,
}

/// Corrected and uncorrected counts by location.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    BorshSerialize,
    BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct EccCounts {
    #[serde(default)]
    pub corrected: EccLocations,
    #[serde(default)]
    pub uncorrected: EccLocations,
}

/// Error counts per memory location; the total is their sum.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    BorshSerialize,
    BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct EccLocations {
    #[serde(default)]
    pub l1_cache: u64,
    #[serde(default)]
    pub l2_cache: u64,
    #[serde(default)]
    pub device_memory: u64,
    #[serde(default)]
    pub register_file: u64,
    #[serde(default)]
    pub texture_memory: u64,
}

/// SRAM ECC counters (`nvmlEccSramErrorStatus_v1_t`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    BorshSerialize,
    BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct SramEcc {
    #[serde(default)]
    pub volatile: SramCounts,
    #[serde(default)]
    pub aggregate: SramCounts,
    #[serde(default)]
    pub uncorrectable_sources: SramSources,
    #[serde(default)]
    pub threshold_exceeded: bool,
}

/// SRAM counts of one kind.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    BorshSerialize,
    BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct SramCounts {
    #[serde(default)]
    pub correctable: u64,
    #[serde(default)]
    pub uncorrectable_parity: u64,
    #[serde(default)]
    pub uncorrectable_sec_ded: u64,
}

/// Aggregate uncorrectable SRAM errors by where they happened.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    BorshSerialize,
    BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct SramSources {
    #[serde(default)]
    pub l2: u64,
    #[serde(default)]
    pub sm: u64,
    #[serde(default)]
    pub pcie: u64,
    #[serde(default)]
    pub mcu: u64,
    #[serde(default)]
    pub other: u64,
}

/// Retired pages by cause, and whether a retirement waits for the next reboot.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct RetiredPages {
    /// `NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS`.
    #[serde(default)]
    pub multiple_single_bit: Vec<RetiredPage>,
    /// `NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR`.
    #[serde(default)]
    pub double_bit: Vec<RetiredPage>,
    /// `nvmlDeviceGetRetiredPagesPendingStatus`.
    #[serde(default)]
    pub pending: bool,
}

/// One retired page.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct RetiredPage {
    /// The page's address.
    pub address: u64,
    /// When it was retired (microseconds since the epoch).
    pub timestamp_us: u64,
}

/// Remapped rows.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RemappedRows {
    pub correctable: u32,
    pub uncorrectable: u32,
    pub pending: bool,
    pub failure_occurred: bool,
    /// Banks per remapping availability; absent: the histogram is NOT_SUPPORTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<RowRemapperHistogram>,
}

/// `nvmlRowRemapperHistogramValues_t`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RowRemapperHistogram {
    pub max: u32,
    pub high: u32,
    pub partial: u32,
    pub low: u32,
    pub none: u32,
}

/// InfoROM versions; an absent object is NOT_SUPPORTED.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Inforom {
    pub image_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oem: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<String>,
}

/// GSP firmware.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct GspFirmware {
    /// Running on the GSP now.
    pub enabled: bool,
    /// On by default.
    pub default_enabled: bool,
    /// Its version.
    pub version: String,
}

/// Display mode (a display can be attached) and active (one is initialised).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Display {
    pub mode: bool,
    pub active: bool,
}

/// `nvmlGpuOperationMode_t`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum GpuOperationMode {
    /// `NVML_GOM_ALL_ON` (0).
    AllOn,
    /// `NVML_GOM_COMPUTE` (1).
    Compute,
    /// `NVML_GOM_LOW_DP` (2).
    LowDp,
}

/// GPU operation mode, current and pending.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct GpuOperationModes {
    pub current: GpuOperationMode,
    pub pending: GpuOperationMode,
}

/// `nvmlGpuVirtualizationMode_t`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum VirtualizationMode {
    /// Bare metal (0).
    None,
    /// GPU passthrough (1).
    Passthrough,
    /// vGPU inside a VM (2).
    Vgpu,
    /// vGPU host (3).
    HostVgpu,
    /// vSGA host (4).
    HostVsga,
}

/// Process accounting.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Accounting {
    /// Accounting on.
    pub enabled: bool,
    /// How many processes the buffer holds.
    pub buffer_size: u32,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
