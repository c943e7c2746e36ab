//! The topology and NVLink answers: pure functions from the profile's PCIe topology and a
//! device's NVLink block to NVML values.
//!
//! [`link`] is the one owner of the link index checks every per-link query makes: a GPU without
//! NVLink (`links: 0`) is NOT_SUPPORTED, an index at or past its link count INVALID_ARGUMENT.

use nvml_profile::{
    Device, NvLinkCapability, NvLinkVersion, PciBusId, PcieTopology, TopologyLevel,
};

use crate::{
    abi::{self, NvmlReturn, PciInfo},
    query,
};

/// Decodes `nvmlGpuTopologyLevel_t`; INVALID_ARGUMENT for any other number.
pub fn level_from_raw(raw: u32) -> Result<TopologyLevel, NvmlReturn> {
    TopologyLevel::from_code(raw).ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// `nvmlDeviceGetTopologyCommonAncestor`: NOT_SUPPORTED without a PCIe topology; a GPU with
/// itself is INTERNAL, as NVIDIA's driver answers.
pub fn common_ancestor(
    pcie: Option<&PcieTopology>,
    first: &Device,
    second: &Device,
) -> Result<u32, NvmlReturn> {
    let pcie = pcie.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    pcie.level(first.index as usize, second.index as usize)
        .map(TopologyLevel::code)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// `nvmlDeviceGetTopologyNearestGpus`: the other GPUs at `level` or nearer, in index order.
pub fn nearest(
    pcie: Option<&PcieTopology>,
    device: &Device,
    level: u32,
) -> Result<Vec<usize>, NvmlReturn> {
    let level = level_from_raw(level)?;
    let pcie = pcie.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    pcie.nearest(device.index as usize, level)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// `nvmlSystemGetTopologyGpuSet`: the GPUs on the NUMA node of CPU `cpu`; INVALID_ARGUMENT for
/// a CPU no NUMA node lists.
pub fn gpu_set(pcie: Option<&PcieTopology>, cpu: u32) -> Result<Vec<usize>, NvmlReturn> {
    let pcie = pcie.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    pcie.gpus_of_cpu(cpu).ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// The checks of every per-link query: NOT_SUPPORTED without NVLink, INVALID_ARGUMENT for a link
/// the GPU does not have (`NVML_NVLINK_MAX_LINKS` or more, or at least its link count).
pub fn link(device: &Device, link: u32) -> Result<u32, NvmlReturn> {
    if device.nvlink.links == 0 {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    if link >= abi::NVLINK_MAX_LINKS || link >= device.nvlink.links {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(link)
}

/// `nvmlDeviceGetNvLinkState`: links `0..active` are up.
pub fn nvlink_active(device: &Device, index: u32) -> Result<bool, NvmlReturn> {
    Ok(link(device, index)? < device.nvlink.active)
}

/// `nvmlDeviceGetNvLinkVersion`: the `nvmlNvlinkVersion_t` value; NOT_SUPPORTED when the profile
/// gives no version.
pub fn nvlink_version(device: &Device, index: u32) -> Result<u32, NvmlReturn> {
    link(device, index)?;
    let version = device.nvlink.version.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(match version {
        NvLinkVersion::V1_0 => 1,
        NvLinkVersion::V2_0 => 2,
        NvLinkVersion::V2_2 => 3,
        NvLinkVersion::V3_0 => 4,
        NvLinkVersion::V3_1 => 5,
        NvLinkVersion::V4_0 => 6,
        NvLinkVersion::V5_0 => 7,
    })
}

/// `nvmlDeviceGetNvLinkCapability`: 1 when the profile lists the capability, else 0;
/// INVALID_ARGUMENT past `NVML_NVLINK_CAP_VALID` (5); NOT_SUPPORTED when the profile lists none.
pub fn nvlink_capability(device: &Device, index: u32, capability: u32) -> Result<u32, NvmlReturn> {
    link(device, index)?;
    let wanted = match capability {
        0 => NvLinkCapability::P2pSupported,
        1 => NvLinkCapability::SysmemAccess,
        2 => NvLinkCapability::P2pAtomics,
        3 => NvLinkCapability::SysmemAtomics,
        4 => NvLinkCapability::SliBridge,
        5 => NvLinkCapability::Valid,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    let listed = device
        .nvlink
        .capabilities
        .as_ref()
        .ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(u32::from(listed.contains(&wanted)))
}

/// `nvmlDeviceGetNvLinkRemotePciInfo_v2`: the switch at the far end of the link (its bus id and
/// device id; `pciSubSystemId`, which nvml.h leaves indeterminate, is 0). NOT_SUPPORTED when the
/// profile does not say where the links go. The wiring is physical: a link that is down still
/// names its switch.
pub fn remote_pci_info(device: &Device, index: u32) -> Result<PciInfo, NvmlReturn> {
    link(device, index)?;
    let switch = device
        .nvlink
        .switch_of(index)
        .ok_or(abi::ERROR_NOT_SUPPORTED)?;
    // Validation parsed every switch bus id.
    let bus_id = PciBusId::parse(&switch.pci_bus_id).map_err(|_| abi::ERROR_UNKNOWN)?;
    Ok(query::pci_info_of(&bus_id, switch.device_id, 0))
}

/// `nvmlDeviceGetNvLinkRemoteDeviceType`: `NVML_NVLINK_DEVICE_TYPE_SWITCH` for a link whose
/// switch the profile names; NOT_SUPPORTED otherwise.
pub fn remote_device_type(device: &Device, index: u32) -> Result<u32, NvmlReturn> {
    link(device, index)?;
    device
        .nvlink
        .switch_of(index)
        .map(|_| abi::NVLINK_DEVICE_TYPE_SWITCH)
        .ok_or(abi::ERROR_NOT_SUPPORTED)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use nvml_profile::{Profile, GB200, H100};

    use super::*;

    fn devices(text: &str) -> Vec<Device> {
        Profile::parse(text).unwrap().devices()
    }

    /// The shipped h100 profile with its NVLink block and topology removed.
    fn bare_h100() -> Profile {
        let text = H100.split("\npcie_topology:").next().unwrap().replace(
            "  nvlink:\n    links: 18\n    active: 18\n",
            "  nvlink:\n    links: 0\n    active: 0\n",
        );
        let start = text.find("    version: \"4.0\"").unwrap();
        let end = text.find("devices:\n").unwrap();
        let text = format!("{}{}", &text[..start], &text[end..]);
        Profile::parse(&text).unwrap()
    }

    #[test]
    fn levels_round_trip() {
        for raw in [0, 10, 20, 30, 40, 50] {
            assert_eq!(level_from_raw(raw).unwrap().code(), raw);
        }
        for raw in [1, 5, 45, 60, u32::MAX] {
            assert_eq!(level_from_raw(raw), Err(abi::ERROR_INVALID_ARGUMENT));
        }
    }

    #[test]
    fn topology_answers_on_gb200() {
        let profile = Profile::parse(GB200).unwrap();
        let pcie = profile.pcie_topology();
        let gpus = profile.devices();
        assert_eq!(common_ancestor(pcie.as_ref(), &gpus[1], &gpus[1]), Ok(0));
        assert_eq!(common_ancestor(pcie.as_ref(), &gpus[0], &gpus[1]), Ok(40));
        assert_eq!(common_ancestor(pcie.as_ref(), &gpus[3], &gpus[0]), Ok(50));
        assert_eq!(nearest(pcie.as_ref(), &gpus[2], 40), Ok(vec![3]));
        assert_eq!(nearest(pcie.as_ref(), &gpus[2], 50), Ok(vec![0, 1, 3]));
        assert_eq!(
            nearest(pcie.as_ref(), &gpus[2], 41),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
        assert_eq!(gpu_set(pcie.as_ref(), 72), Ok(vec![2, 3]));
        assert_eq!(
            gpu_set(pcie.as_ref(), 1000),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
    }

    #[test]
    fn no_topology_is_not_supported() {
        let profile = bare_h100();
        let gpus = profile.devices();
        assert_eq!(profile.pcie_topology(), None);
        assert_eq!(
            common_ancestor(None, &gpus[0], &gpus[0]),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(nearest(None, &gpus[0], 50), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(nearest(None, &gpus[0], 7), Err(abi::ERROR_INVALID_ARGUMENT));
        assert_eq!(gpu_set(None, 0), Err(abi::ERROR_NOT_SUPPORTED));
    }

    #[test]
    fn link_indexes_are_checked_once_for_all_queries() {
        let gpu = &devices(GB200)[0];
        assert_eq!(nvlink_active(gpu, 0), Ok(true));
        assert_eq!(nvlink_active(gpu, 17), Ok(true));
        for bad in [18, 35, 36, u32::MAX] {
            assert_eq!(nvlink_active(gpu, bad), Err(abi::ERROR_INVALID_ARGUMENT));
            assert_eq!(nvlink_version(gpu, bad), Err(abi::ERROR_INVALID_ARGUMENT));
            assert_eq!(
                nvlink_capability(gpu, bad, 0),
                Err(abi::ERROR_INVALID_ARGUMENT)
            );
            assert_eq!(remote_pci_info(gpu, bad), Err(abi::ERROR_INVALID_ARGUMENT));
            assert_eq!(
                remote_device_type(gpu, bad),
                Err(abi::ERROR_INVALID_ARGUMENT)
            );
        }
        let mut down = gpu.clone();
        down.nvlink.active = 2;
        assert_eq!(nvlink_active(&down, 1), Ok(true));
        assert_eq!(nvlink_active(&down, 2), Ok(false));
    }

    #[test]
    fn gpus_without_nvlink_are_not_supported() {
        let gpu = &bare_h100().devices()[0];
        assert_eq!(gpu.nvlink.links, 0);
        assert_eq!(nvlink_active(gpu, 0), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(nvlink_version(gpu, 0), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(nvlink_capability(gpu, 0, 0), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(remote_pci_info(gpu, 0), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(remote_device_type(gpu, 40), Err(abi::ERROR_NOT_SUPPORTED));
    }

    #[test]
    fn links_lead_to_nvswitches() {
        let gb200 = &devices(GB200)[3];
        assert_eq!(nvlink_version(gb200, 0), Ok(7));
        assert_eq!(
            remote_device_type(gb200, 5),
            Ok(abi::NVLINK_DEVICE_TYPE_SWITCH)
        );
        let info = remote_pci_info(gb200, 17).unwrap();
        assert_eq!((info.domain, info.bus, info.device), (0x100, 0x11, 0));
        assert_eq!(&info.bus_id[..17], b"00000100:11:00.0\0");
        assert_eq!(info.pci_device_id, 0x22A3_10DE);
        assert_eq!(info.pci_sub_system_id, 0);
        let gpus: Vec<String> = devices(GB200)
            .iter()
            .map(|d| query::bus_id(&d.pci_bus_id))
            .collect();
        assert!(!gpus.contains(&query::bus_id(&PciBusId::parse("0100:11:00.0").unwrap())));

        let h100 = &devices(H100)[2];
        assert_eq!(nvlink_version(h100, 17), Ok(6));
        assert_eq!(remote_pci_info(h100, 4).unwrap().bus, 5);
        assert_eq!(remote_pci_info(h100, 5).unwrap().bus, 6);
        assert_eq!(remote_pci_info(h100, 17).unwrap().bus, 8);
    }

    #[test]
    fn capabilities_follow_the_profile() {
        let gpu = &devices(H100)[0];
        let answers: Vec<u32> = (0..6)
            .map(|cap| nvlink_capability(gpu, 0, cap).unwrap())
            .collect();
        assert_eq!(answers, [1, 1, 1, 1, 1, 1], "h100 lists all six");
        assert_eq!(
            nvlink_capability(gpu, 0, 6),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
        let mut none = gpu.clone();
        none.nvlink.capabilities = Some(Vec::new());
        let answers: Vec<u32> = (0..6)
            .map(|cap| nvlink_capability(&none, 0, cap).unwrap())
            .collect();
        assert_eq!(answers, [0; 6], "an empty list: every capability false");
        let mut unknown = gpu.clone();
        unknown.nvlink.capabilities = None;
        assert_eq!(
            nvlink_capability(&unknown, 0, 0),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        unknown.nvlink.version = None;
        unknown.nvlink.switches.clear();
        assert_eq!(nvlink_version(&unknown, 0), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(remote_pci_info(&unknown, 0), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(
            remote_device_type(&unknown, 0),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
    }
}
