//! The parsed, validated profile and its resolved per-GPU view ([`Device`]).

use crate::activity::{C2c, Codecs, NvLinkCounters, PciClass, PcieCounters, Platform, Process};
use crate::error::{Error, Result};
use crate::health::{self, Health};
use crate::ids::{FabricUuid, PciBusId};
use crate::mig::{GpuInstanceProfiles, MigMode};
use crate::pcie::{self, PcieTopology};
use crate::schema::{
    AddressingMode, Architecture, Brand, Clocks, ComputeCapability, ComputeMode, Document, Ecc,
    Fabric, FabricState, Memory, NvLink, Pci, Pcie, System, Utilization,
};

/// A parsed, validated profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub(crate) doc: Document,
}

/// One GPU with every default resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// NVML index.
    pub index: u32,
    /// `GPU-…` uuid.
    pub uuid: String,
    /// Board serial; `None` means NOT_SUPPORTED.
    pub serial: Option<String>,
    /// PCI address.
    pub pci_bus_id: PciBusId,
    /// `N` of `/dev/nvidiaN`.
    pub minor_number: u32,
    /// Module slot on the baseboard.
    pub module_id: u32,
    /// Board id.
    pub board_id: u32,
    /// Product name.
    pub name: String,
    /// Brand.
    pub brand: Brand,
    /// Architecture.
    pub architecture: Architecture,
    /// CUDA compute capability.
    pub compute_capability: ComputeCapability,
    /// Memory.
    pub memory: Memory,
    /// PCI ids.
    pub pci: Pci,
    /// PCIe link.
    pub pcie: Pcie,
    /// Power draw in milliwatts.
    pub power_usage_mw: u32,
    /// GPU temperature in °C.
    pub temperature_c: u32,
    /// Utilization.
    pub utilization: Utilization,
    /// Clocks.
    pub clocks: Clocks,
    /// Persistence mode.
    pub persistence_mode: bool,
    /// Compute mode.
    pub compute_mode: ComputeMode,
    /// MIG mode; `None` means NOT_SUPPORTED.
    pub mig_mode: Option<MigMode>,
    /// GPU instance profiles; `None` means the part has none (NOT_SUPPORTED).
    pub gpu_instance_profiles: Option<GpuInstanceProfiles>,
    /// Addressing mode; `None` means NOT_SUPPORTED.
    pub addressing_mode: Option<AddressingMode>,
    /// ECC mode; `None` means NOT_SUPPORTED.
    pub ecc: Option<Ecc>,
    /// NVLink links.
    pub nvlink: NvLink,
    /// Fabric registration; `None` means NOT_SUPPORTED.
    pub fabric: Option<Fabric>,
    // ---- activity and extras (issue 22, misc area)
    /// PCIe throughput and replays; `None` means NOT_SUPPORTED.
    pub pcie_counters: Option<PcieCounters>,
    /// PCI class codes; `None` means `nvmlDeviceGetPciInfoExt` is NOT_SUPPORTED.
    pub pci_class: Option<PciClass>,
    /// Video engines; `None` means NOT_SUPPORTED.
    pub codecs: Option<Codecs>,
    /// Running processes (none when the profile lists none).
    pub processes: Vec<Process>,
    /// NVLink counter rates; `None` means the counters are NOT_SUPPORTED.
    pub nvlink_counters: Option<NvLinkCounters>,
    /// NVLink-C2C; `None` means NOT_SUPPORTED.
    pub c2c: Option<C2c>,
    /// Rack placement; `None` means NOT_SUPPORTED.
    pub platform: Option<Platform>,
    // ---- health and telemetry (issue 22, `health.rs`)
    /// The `health` block, the entry's sub-sections over the defaults'.
    pub health: Health,
}

impl Profile {
    /// Parses and validates a profile document.
    ///
    /// The YAML is read into a `serde_yaml::Value` first and the schema taken from that: the
    /// schema's deserialisers are then instantiated for the value, not for the YAML event
    /// stream, which keeps the mock library 82 kB smaller (857 → 775 kB stripped; BENCHMARKS.md).
    /// They read the value by reference (serde_yaml's `&Value` deserializer, the same answers and
    /// messages as the owned one): no owned values to move and drop, 40 kB less again.
    /// YAML syntax errors keep their line and column; a schema error names the field.
    #[cfg(feature = "yaml")]
    pub fn parse(text: &str) -> Result<Profile> {
        let value: serde_yaml::Value = serde_yaml::from_str(text).map_err(Error::Syntax)?;
        let doc: Document = serde::Deserialize::deserialize(&value).map_err(Error::Syntax)?;
        crate::validate::document(&doc)?;
        Ok(Profile { doc })
    }

    /// The profile as YAML; parsing it again gives an equal profile.
    #[cfg(feature = "yaml")]
    pub fn to_yaml(&self) -> Result<String> {
        serde_yaml::to_string(&self.doc).map_err(Error::Serialize)
    }

    /// The profile's name (`gb200`).
    pub fn name(&self) -> &str {
        &self.doc.name
    }

    /// Driver-wide facts.
    pub fn system(&self) -> &System {
        &self.doc.system
    }

    /// The driver version string (`580.65.06`).
    pub fn driver_version(&self) -> &str {
        &self.doc.system.driver_version
    }

    /// How many GPUs are visible: `system.num_devices` when set, else every listed device.
    pub fn device_count(&self) -> usize {
        let listed = self.doc.devices.len();
        match self.doc.system.num_devices {
            Some(cap) => listed.min(cap as usize),
            None => listed,
        }
    }

    /// Whether the GPUs support the NVLink fabric (the defaults carry a `fabric` block).
    pub fn has_fabric(&self) -> bool {
        self.doc.device_defaults.fabric.is_some()
    }

    /// The same profile with `system.num_devices = n`; `n` must be in `1..=devices.len()`.
    pub fn with_num_devices(&self, n: u32) -> Result<Profile> {
        let available = self.doc.devices.len();
        if n == 0 || n as usize > available {
            return Err(Error::NumDevices {
                requested: n,
                available,
                profile: self.doc.name.clone(),
            });
        }
        let mut doc = self.doc.clone();
        doc.system.num_devices = Some(n);
        Ok(Profile { doc })
    }

    /// The same profile with this node's fabric identity applied.
    ///
    /// Rewrites `cluster_uuid` and `clique_id` in `device_defaults.fabric` and in every
    /// per-device `fabric` block, and sets an absent `state` to `completed`.
    /// A profile without a default fabric block is returned unchanged (its GPUs stay NOT_SUPPORTED).
    pub fn with_fabric_identity(&self, cluster_uuid: FabricUuid, clique_id: u32) -> Profile {
        self.clone().into_fabric_identity(cluster_uuid, clique_id)
    }

    /// [`Profile::with_fabric_identity`] on an owned profile, without cloning it (the mock
    /// library's path: it links no clone of the whole document).
    pub fn into_fabric_identity(self, cluster_uuid: FabricUuid, clique_id: u32) -> Profile {
        let mut doc = self.doc;
        let Some(defaults) = doc.device_defaults.fabric.as_mut() else {
            return Profile { doc };
        };
        let rewrite = |fabric: &mut Fabric| {
            fabric.cluster_uuid = cluster_uuid;
            fabric.clique_id = clique_id;
            fabric.state.get_or_insert(FabricState::Completed);
        };
        rewrite(defaults);
        for fabric in doc
            .devices
            .iter_mut()
            .filter_map(|entry| entry.fabric.as_mut())
        {
            rewrite(fabric);
        }
        Profile { doc }
    }

    /// The PCIe topology over the visible GPUs; `None` when the profile gives none.
    pub fn pcie_topology(&self) -> Option<PcieTopology> {
        let doc = self.doc.pcie_topology.as_ref()?;
        // Validation resolved this document already, so it cannot fail here.
        pcie::resolve(doc, self.doc.devices.len(), self.device_count()).ok()
    }

    /// The visible GPUs (the first [`Profile::device_count`]), defaults resolved.
    pub fn devices(&self) -> Vec<Device> {
        (0..self.device_count())
            .filter_map(|index| self.device(index))
            .collect()
    }

    /// One listed GPU by position, defaults resolved (ignores the `num_devices` cap).
    pub fn device(&self, position: usize) -> Option<Device> {
        let entry = self.doc.devices.get(position)?;
        let defaults = &self.doc.device_defaults;
        Some(Device {
            index: entry.index,
            uuid: entry.uuid.clone(),
            serial: entry.serial.clone().or_else(|| defaults.serial.clone()),
            // Validation guarantees these parse and that a board id resolves.
            pci_bus_id: PciBusId::parse(&entry.pci_bus_id).ok()?,
            minor_number: entry.minor_number,
            module_id: entry.module_id,
            board_id: entry.board_id.or(defaults.board_id)?,
            name: entry.name.clone().unwrap_or_else(|| defaults.name.clone()),
            brand: entry.brand.unwrap_or(defaults.brand),
            architecture: entry.architecture.unwrap_or(defaults.architecture),
            compute_capability: entry
                .compute_capability
                .unwrap_or(defaults.compute_capability),
            memory: entry.memory.unwrap_or(defaults.memory),
            pci: entry.pci.unwrap_or(defaults.pci),
            pcie: entry.pcie.unwrap_or(defaults.pcie),
            power_usage_mw: entry.power_usage_mw.unwrap_or(defaults.power_usage_mw),
            temperature_c: entry.temperature_c.unwrap_or(defaults.temperature_c),
            utilization: entry.utilization.unwrap_or(defaults.utilization),
            clocks: entry.clocks.unwrap_or(defaults.clocks),
            persistence_mode: entry.persistence_mode.unwrap_or(defaults.persistence_mode),
            compute_mode: entry.compute_mode.unwrap_or(defaults.compute_mode),
            mig_mode: entry.mig_mode.or(defaults.mig_mode),
            gpu_instance_profiles: entry
                .gpu_instance_profiles
                .clone()
                .or_else(|| defaults.gpu_instance_profiles.clone()),
            addressing_mode: entry.addressing_mode.or(defaults.addressing_mode),
            ecc: entry.ecc.or(defaults.ecc),
            nvlink: entry
                .nvlink
                .clone()
                .unwrap_or_else(|| defaults.nvlink.clone()),
            fabric: entry.fabric.or(defaults.fabric),
            pcie_counters: entry.pcie_counters.or(defaults.pcie_counters),
            pci_class: entry.pci_class.or(defaults.pci_class),
            codecs: entry.codecs.or(defaults.codecs),
            processes: entry
                .processes
                .clone()
                .or_else(|| defaults.processes.clone())
                .unwrap_or_default(),
            nvlink_counters: entry.nvlink_counters.or(defaults.nvlink_counters),
            c2c: entry.c2c.or(defaults.c2c),
            platform: entry.platform.clone().or_else(|| defaults.platform.clone()),
            health: health::resolve(defaults.health.as_ref(), entry.health.as_ref()),
        })
    }
}
