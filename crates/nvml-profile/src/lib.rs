//! GPU profiles for the mock NVML library: schema, parsing and validation.
//!
//! A profile is a YAML document (`version: 1`) describing one node's GPUs: driver-wide facts
//! (`system`), values every GPU shares (`device_defaults`) and each GPU's identity plus any
//! override (`devices`). [`Profile::parse`] rejects unknown keys and inconsistent values with an
//! error naming the offending field; [`Profile::devices`] gives the resolved per-GPU view.
//!
//! Parsing YAML is the feature `yaml` (on by default); [`staged`] is the compact binary form
//! the mock NVML library reads instead (it turns `yaml` off and links no YAML parser).
//!
//! This crate is pure: no I/O, no environment, and it knows nothing of the C ABI or of the
//! cluster topology document (the fabric identity is applied through
//! [`Profile::with_fabric_identity`]); the fabric uuid is the topology crate's [`FabricUuid`].
//!
//! ```
//! let profile = nvml_profile::Profile::parse(nvml_profile::GB200).unwrap();
//! assert_eq!(profile.device_count(), 4);
//! let two = profile.with_num_devices(2).unwrap();
//! assert_eq!(two.devices().len(), 2);
//! ```

mod activity;
mod error;
mod health;
mod ids;
mod mig;
mod pcie;
mod profile;
mod schema;
mod seen;
pub mod staged;
mod validate;

pub use activity::{
    C2c, Codecs, NvLinkCounters, PciClass, PcieCounters, PeerType, Platform, Process, ProcessKind,
};
pub use error::{Error, Result};
pub use health::{
    Accounting, ApplicationsClocks, AutoBoost, Bar1Memory, ClocksEventReason, ClocksEventReasons,
    Display, EccCounts, EccErrors, EccLocations, Fans, GpuOperationMode, GpuOperationModes,
    GspFirmware, Health, Inforom, PowerLimits, RemappedRows, RetiredPage, RetiredPages,
    RowRemapperHistogram, SramCounts, SramEcc, SramSources, Thermal, VirtualizationMode,
};
pub use ids::{FabricUuid, PciBusId};
pub use mig::{GpuInstanceProfile, GpuInstanceProfiles, MigMode, Placements, Unknown};
pub use pcie::{PcieTopology, TopologyLevel};
pub use profile::{Device, Profile};
pub use schema::{
    AddressingMode, Architecture, Brand, Clocks, ComputeCapability, ComputeMode, Ecc, Fabric,
    FabricState, HealthSummary, Memory, NvLink, NvLinkCapability, NvLinkVersion, NvSwitch, Pci,
    Pcie, System, Utilization, HEALTHY_MASK,
};

/// The shipped GB200 profile (one NVL72 compute tray: 4 GPUs with fabric support).
pub const GB200: &str = include_str!("../../../manifests/helm/nvml-mock/profiles/gb200.yaml");
/// The shipped H100 profile (8 GPUs, no fabric support).
pub const H100: &str = include_str!("../../../manifests/helm/nvml-mock/profiles/h100.yaml");
/// The shipped GB300 profile (its MIG table is `unknown`).
pub const GB300: &str = include_str!("../../../manifests/helm/nvml-mock/profiles/gb300.yaml");

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
