//! The profile document as it is written in YAML: plain data, no validation.
//!
//! Every struct denies unknown keys so that a typo is an error, not a silently ignored field.
//! Validation lives in [`crate::validate`]; the resolved per-GPU view in [`crate::Device`].

use borsh::{BorshDeserialize, BorshSerialize};
use serde::{Deserialize, Serialize};

use crate::{
    ids::FabricUuid,
    mig::{GpuInstanceProfiles, MigMode},
};

/// The whole profile document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Document {
    pub(crate) version: u32,
    pub(crate) name: String,
    pub(crate) system: System,
    pub(crate) device_defaults: DeviceDefaults,
    pub(crate) devices: Vec<DeviceEntry>,
    /// The node's PCIe topology; absent: topology queries are NOT_SUPPORTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pcie_topology: Option<crate::pcie::PcieTopologyDoc>,
}

/// Driver-wide facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct System {
    /// The driver version string, `X.Y` or `X.Y.Z` (e.g. `580.65.06`).
    pub driver_version: String,
    /// The NVML version string, `<cuda major>.<driver version>` (e.g. `13.580.65.06`).
    pub nvml_version: String,
    /// The CUDA driver version as NVML encodes it: `major * 1000 + minor * 10` (e.g. 13000).
    pub cuda_driver_version: i32,
    /// How many of `devices` are visible (the first `num_devices`); all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_devices: Option<u32>,
}

/// Values every GPU has unless its `devices[]` entry overrides them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeviceDefaults {
    pub(crate) name: String,
    pub(crate) brand: Brand,
    pub(crate) architecture: Architecture,
    pub(crate) compute_capability: ComputeCapability,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) serial: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) board_id: Option<u32>,
    pub(crate) memory: Memory,
    pub(crate) pci: Pci,
    pub(crate) pcie: Pcie,
    pub(crate) power_usage_mw: u32,
    pub(crate) temperature_c: u32,
    pub(crate) utilization: Utilization,
    pub(crate) clocks: Clocks,
    pub(crate) persistence_mode: bool,
    pub(crate) compute_mode: ComputeMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mig_mode: Option<MigMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gpu_instance_profiles: Option<GpuInstanceProfiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) addressing_mode: Option<AddressingMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ecc: Option<Ecc>,
    pub(crate) nvlink: NvLink,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fabric: Option<Fabric>,
    // ---- activity and extras (issue 22, misc area; types in `crate::activity`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pcie_counters: Option<crate::activity::PcieCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pci_class: Option<crate::activity::PciClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) codecs: Option<crate::activity::Codecs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) processes: Option<Vec<crate::activity::Process>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nvlink_counters: Option<crate::activity::NvLinkCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) c2c: Option<crate::activity::C2c>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) platform: Option<crate::activity::Platform>,
    // ---- health and telemetry (issue 22, `health.rs`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) health: Option<crate::health::Health>,
}

/// One GPU: its identity, and any default it overrides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeviceEntry {
    pub(crate) index: u32,
    pub(crate) uuid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) serial: Option<String>,
    pub(crate) pci_bus_id: String,
    pub(crate) minor_number: u32,
    pub(crate) module_id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) board_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) brand: Option<Brand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) architecture: Option<Architecture>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) compute_capability: Option<ComputeCapability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) memory: Option<Memory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pci: Option<Pci>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pcie: Option<Pcie>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) power_usage_mw: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) temperature_c: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) utilization: Option<Utilization>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clocks: Option<Clocks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) persistence_mode: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) compute_mode: Option<ComputeMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mig_mode: Option<MigMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gpu_instance_profiles: Option<GpuInstanceProfiles>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) addressing_mode: Option<AddressingMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ecc: Option<Ecc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nvlink: Option<NvLink>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fabric: Option<Fabric>,
    // ---- activity and extras (issue 22, misc area; types in `crate::activity`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pcie_counters: Option<crate::activity::PcieCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pci_class: Option<crate::activity::PciClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) codecs: Option<crate::activity::Codecs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) processes: Option<Vec<crate::activity::Process>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nvlink_counters: Option<crate::activity::NvLinkCounters>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) c2c: Option<crate::activity::C2c>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) platform: Option<crate::activity::Platform>,
    // ---- health and telemetry (issue 22, `health.rs`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) health: Option<crate::health::Health>,
}

/// The product brand NVML reports.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Brand {
    Unknown,
    Quadro,
    Tesla,
    Nvs,
    Grid,
    Geforce,
    Titan,
    NvidiaVapps,
    NvidiaVpc,
    NvidiaVcs,
    NvidiaVws,
    NvidiaCloudGaming,
    QuadroRtx,
    NvidiaRtx,
    Nvidia,
    GeforceRtx,
    TitanRtx,
}

/// The GPU architecture NVML reports.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum Architecture {
    Kepler,
    Maxwell,
    Pascal,
    Volta,
    Turing,
    Ampere,
    Ada,
    Hopper,
    Blackwell,
    Rubin,
    Unknown,
}

/// The compute mode NVML reports.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    /// Several contexts per device.
    Default,
    /// No contexts allowed.
    Prohibited,
    /// One process, several threads.
    ExclusiveProcess,
}

/// CUDA compute capability.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct ComputeCapability {
    /// Major version (10 for Blackwell, 9 for Hopper).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// Frame-buffer memory in bytes; free is derived as `total - reserved - used`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Memory {
    /// Installed memory.
    pub total: u64,
    /// Reserved by the driver and firmware.
    pub reserved: u64,
    /// Allocated by processes.
    pub used: u64,
}

impl Memory {
    /// Memory neither reserved nor used.
    pub fn free(&self) -> u64 {
        self.total
            .saturating_sub(self.reserved)
            .saturating_sub(self.used)
    }
}

/// PCI identifiers, as NVML packs them.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Pci {
    /// `(device id << 16) | vendor id`, e.g. `0x294110DE`.
    pub device_id: u32,
    /// `(subsystem id << 16) | subsystem vendor id`.
    pub subsystem_id: u32,
}

/// PCIe link generation and width, current and maximum.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Pcie {
    /// Current link generation.
    pub r#gen: u32,
    /// Current link width (lanes).
    pub width: u32,
    /// Maximum link generation.
    pub max_gen: u32,
    /// Maximum link width.
    pub max_width: u32,
}

/// Utilization percentages.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    /// GPU busy percent.
    pub gpu: u32,
    /// Memory controller busy percent.
    pub memory: u32,
}

/// Clocks in MHz.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Clocks {
    pub graphics: u32,
    pub sm: u32,
    pub mem: u32,
    pub video: u32,
    pub max_graphics: u32,
    pub max_sm: u32,
    pub max_mem: u32,
    pub max_video: u32,
}

/// `nvmlDeviceAddressingModeType_t`: how system memory is addressable from the GPU.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum AddressingMode {
    /// Neither HMM nor ATS (0).
    None,
    /// Heterogeneous Memory Management (1).
    Hmm,
    /// Address Translation Services (2): Grace-coupled parts such as GB200.
    Ats,
}

/// ECC mode, current and pending; absent means the GPU has no ECC.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Ecc {
    /// Whether ECC is enabled now.
    pub current: bool,
    /// Whether ECC will be enabled after the next reboot.
    pub pending: bool,
}

/// NVLink links: links `0..active` are up, `active..links` are down, the rest do not exist.
/// `links: 0` means the GPU has no NVLink (every NVLink query is NOT_SUPPORTED).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct NvLink {
    /// How many links the GPU has (at most 36).
    pub links: u32,
    /// How many of them are active.
    pub active: u32,
    /// The links' NVLink version; absent: `nvmlDeviceGetNvLinkVersion` is NOT_SUPPORTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<NvLinkVersion>,
    /// The capabilities every link reports true (`nvmlDeviceGetNvLinkCapability`); the others are
    /// false. Absent: the query is NOT_SUPPORTED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<NvLinkCapability>>,
    /// The NVSwitches the links go to, in link order: the first `switches[0].links` links go to
    /// `switches[0]`, and so on; the counts add up to `links`. Empty: the remote end is not known
    /// (remote queries are NOT_SUPPORTED).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<NvSwitch>,
}

impl NvLink {
    /// The switch link `link` goes to; `None` past the last switch's links or without switches.
    pub fn switch_of(&self, link: u32) -> Option<&NvSwitch> {
        let mut first = 0;
        self.switches.iter().find(|switch| {
            let found = (first..first + switch.links).contains(&link);
            first += switch.links;
            found
        })
    }
}

/// `nvmlNvlinkVersion_t`, written as the version number.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[allow(missing_docs)]
pub enum NvLinkVersion {
    #[serde(rename = "1.0")]
    V1_0,
    #[serde(rename = "2.0")]
    V2_0,
    #[serde(rename = "2.2")]
    V2_2,
    #[serde(rename = "3.0")]
    V3_0,
    #[serde(rename = "3.1")]
    V3_1,
    #[serde(rename = "4.0")]
    V4_0,
    #[serde(rename = "5.0")]
    V5_0,
}

/// `nvmlNvLinkCapability_t`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum NvLinkCapability {
    /// `NVML_NVLINK_CAP_P2P_SUPPORTED` (0).
    P2pSupported,
    /// `NVML_NVLINK_CAP_SYSMEM_ACCESS` (1).
    SysmemAccess,
    /// `NVML_NVLINK_CAP_P2P_ATOMICS` (2).
    P2pAtomics,
    /// `NVML_NVLINK_CAP_SYSMEM_ATOMICS` (3).
    SysmemAtomics,
    /// `NVML_NVLINK_CAP_SLI_BRIDGE` (4).
    SliBridge,
    /// `NVML_NVLINK_CAP_VALID` (5).
    Valid,
}

/// An NVSwitch at the far end of some NVLinks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct NvSwitch {
    /// Its PCI address (`nvmlDeviceGetNvLinkRemotePciInfo_v2`); never a GPU's.
    pub pci_bus_id: String,
    /// `(device id << 16) | vendor id`, as in [`Pci::device_id`].
    pub device_id: u32,
    /// How many of the GPU's links go to it (at least 1).
    pub links: u32,
}

/// The GPU's NVLink fabric registration; absent means no fabric support (NOT_SUPPORTED).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Fabric {
    /// The cluster (NVLink domain) uuid.
    #[serde(deserialize_with = "crate::ids::fabric_uuid")]
    pub cluster_uuid: FabricUuid,
    /// The clique within the domain.
    pub clique_id: u32,
    /// Registration state; absent means `completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<FabricState>,
    /// The raw NVML health mask; absent means all-clear (`0x1AA`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_mask: Option<u32>,
    /// The health summary; absent means derived from the mask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_summary: Option<HealthSummary>,
}

/// The all-clear health mask: every boolean slot FALSE, configuration NONE, partition not reported.
pub const HEALTHY_MASK: u32 = 0x1AA;

impl Fabric {
    /// The state a consumer sees: absent counts as `completed`.
    pub fn effective_state(&self) -> FabricState {
        self.state.unwrap_or(FabricState::Completed)
    }

    /// The health mask a consumer sees.
    pub fn effective_health_mask(&self) -> u32 {
        self.health_mask.unwrap_or(HEALTHY_MASK)
    }

    /// The health summary a consumer sees: explicit, or derived from the mask.
    pub fn effective_health_summary(&self) -> HealthSummary {
        if let Some(summary) = self.health_summary {
            return summary;
        }
        let mask = self.effective_health_mask();
        if mask == 0 {
            return HealthSummary::NotSupported;
        }
        let slot = |shift: u32, width: u32| (mask >> shift) & width;
        let is_true = |shift: u32| slot(shift, 0x3) == 1;
        if is_true(2) || is_true(4) || is_true(6) || slot(8, 0xF) > 1 {
            return HealthSummary::Unhealthy;
        }
        if is_true(0) {
            return HealthSummary::LimitedCapacity;
        }
        HealthSummary::Healthy
    }
}

/// Fabric registration state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum FabricState {
    /// The GPU does not take part in a fabric.
    NotSupported,
    /// Registration has not started.
    NotStarted,
    /// Registration is running.
    InProgress,
    /// Registered: uuid and clique are valid.
    Completed,
}

/// Fabric health summary.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum HealthSummary {
    /// No health reported.
    NotSupported,
    /// All clear.
    Healthy,
    /// A fault needs attention.
    Unhealthy,
    /// Working at reduced bandwidth.
    LimitedCapacity,
}
