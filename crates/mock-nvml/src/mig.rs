//! MIG GPU instance profiles by name (`nvmlDeviceGetGpuInstanceProfileInfoV`) and their possible
//! placements (`nvmlDeviceGetGpuInstancePossiblePlacements_v2`): the C layouts and the pure
//! answers from a profile device. The table is the profile's `gpu_instance_profiles`.

use nvml_profile::{Device, GpuInstanceProfile, GpuInstanceProfiles};

use crate::abi::{self, struct_version, GpuInstanceProfileCounts, NvmlReturn};
use crate::query::gpu_instance_profile_counts;

/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE`: the profile name buffer.
pub const NAME_BUFFER: usize = 96;

/// `nvmlGpuInstancePlacement_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuInstancePlacement {
    /// First memory slice.
    pub start: u32,
    /// Memory slices occupied.
    pub size: u32,
}

/// `nvmlGpuInstanceProfileInfo_v2_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct GpuInstanceProfileInfoV2 {
    pub version: u32,
    pub id: u32,
    pub is_p2p_supported: u32,
    pub counts: GpuInstanceProfileCounts,
    pub _pad: u32,
    pub memory_size_mb: u64,
    pub name: [u8; NAME_BUFFER],
}

/// `nvmlGpuInstanceProfileInfo_v3_t`: v2 without `isP2pSupported`, plus `capabilities`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct GpuInstanceProfileInfoV3 {
    pub version: u32,
    pub id: u32,
    pub counts: GpuInstanceProfileCounts,
    pub memory_size_mb: u64,
    pub name: [u8; NAME_BUFFER],
    pub capabilities: u32,
    pub _pad: u32,
}

/// `nvmlGpuInstanceProfileInfo_v2`.
pub const GPU_INSTANCE_PROFILE_INFO_V2: u32 =
    struct_version(size_of::<GpuInstanceProfileInfoV2>(), 2);
/// `nvmlGpuInstanceProfileInfo_v3`.
pub const GPU_INSTANCE_PROFILE_INFO_V3: u32 =
    struct_version(size_of::<GpuInstanceProfileInfoV3>(), 3);
/// `NVML_GPU_INSTANCE_PROFILE_CAPS_P2P`.
pub const GPU_INSTANCE_PROFILE_CAPS_P2P: u32 = 0x1;

/// What `nvmlDeviceGetGpuInstanceProfileInfoV` writes: the layout the caller's version names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileInfoV {
    /// `nvmlGpuInstanceProfileInfo_v2_t`.
    V2(GpuInstanceProfileInfoV2),
    /// `nvmlGpuInstanceProfileInfo_v3_t`.
    V3(GpuInstanceProfileInfoV3),
}

/// The device's known table: NOT_SUPPORTED without MIG, without a table or with `unknown`.
fn table(device: &Device) -> Result<&[GpuInstanceProfile], NvmlReturn> {
    device.mig_mode.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    match &device.gpu_instance_profiles {
        Some(GpuInstanceProfiles::Known(rows)) => Ok(rows),
        _ => Err(abi::ERROR_NOT_SUPPORTED),
    }
}

/// `nvmlDeviceGetGpuInstanceProfileInfoV`, as nvml.h documents it: INVALID_ARGUMENT past the
/// last `NVML_GPU_INSTANCE_PROFILE_*` or for a version other than v2 and v3; NOT_SUPPORTED
/// without MIG, while MIG is not enabled (`enabled`: the mode now, from the MIG store), for a
/// profile the table lacks or one without a name.
pub fn profile_info_v(
    device: &Device,
    profile: u32,
    version: u32,
    enabled: bool,
) -> Result<ProfileInfoV, NvmlReturn> {
    if profile >= abi::GPU_INSTANCE_PROFILE_COUNT {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    check_version(version)?;
    let rows = table(device)?;
    if !enabled {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    let row = rows
        .iter()
        .find(|row| row.profile == profile)
        .ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let name = name_bytes(row.name.as_deref().ok_or(abi::ERROR_NOT_SUPPORTED)?)?;
    Ok(if version == GPU_INSTANCE_PROFILE_INFO_V2 {
        ProfileInfoV::V2(v2(row, name))
    } else {
        ProfileInfoV::V3(v3(row, name))
    })
}

/// INVALID_ARGUMENT unless `version` is `nvmlGpuInstanceProfileInfo_v2` or `_v3`.
pub fn check_version(version: u32) -> Result<(), NvmlReturn> {
    if version != GPU_INSTANCE_PROFILE_INFO_V2 && version != GPU_INSTANCE_PROFILE_INFO_V3 {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(())
}

/// A profile or compute profile name as NVML's NUL-terminated buffer.
pub fn name_bytes(name: &str) -> Result<[u8; NAME_BUFFER], NvmlReturn> {
    let mut bytes = [0; NAME_BUFFER];
    // Validation keeps names under the buffer; a longer one is refused rather than cut.
    let slot = bytes
        .get_mut(..name.len())
        .filter(|_| name.len() < NAME_BUFFER)
        .ok_or(abi::ERROR_UNKNOWN)?;
    slot.copy_from_slice(name.as_bytes());
    Ok(bytes)
}

fn v2(row: &GpuInstanceProfile, name: [u8; NAME_BUFFER]) -> GpuInstanceProfileInfoV2 {
    GpuInstanceProfileInfoV2 {
        version: GPU_INSTANCE_PROFILE_INFO_V2,
        id: row.id,
        is_p2p_supported: u32::from(row.p2p),
        counts: gpu_instance_profile_counts(row),
        _pad: 0,
        memory_size_mb: row.memory_mib,
        name,
    }
}

fn v3(row: &GpuInstanceProfile, name: [u8; NAME_BUFFER]) -> GpuInstanceProfileInfoV3 {
    GpuInstanceProfileInfoV3 {
        version: GPU_INSTANCE_PROFILE_INFO_V3,
        id: row.id,
        counts: gpu_instance_profile_counts(row),
        memory_size_mb: row.memory_mib,
        name,
        capabilities: if row.p2p {
            GPU_INSTANCE_PROFILE_CAPS_P2P
        } else {
            0
        },
        _pad: 0,
    }
}

/// `nvmlDeviceGetGpuInstancePossiblePlacements_v2`: the placements of the profile with driver id
/// `profile_id`, whether or not MIG is enabled (nvml.h); NOT_SUPPORTED without MIG, without a
/// known table, for an id the table lacks ("profileId isn't supported") or a row without placements.
pub fn placements(
    device: &Device,
    profile_id: u32,
) -> Result<Vec<GpuInstancePlacement>, NvmlReturn> {
    let row = table(device)?
        .iter()
        .find(|row| row.id == profile_id)
        .ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let placements = row.placements.as_ref().ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(placements
        .pairs()
        .map(|(start, size)| GpuInstancePlacement { start, size })
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::mem::offset_of;

    use nvml_profile::{Profile, GB300, H100};

    use super::*;

    fn h100() -> Device {
        Profile::parse(H100).unwrap().devices().remove(0)
    }

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<GpuInstancePlacement>(), 8);
        assert_eq!(size_of::<GpuInstanceProfileInfoV2>(), 152);
        assert_eq!(offset_of!(GpuInstanceProfileInfoV2, counts.ofa_count), 40);
        assert_eq!(offset_of!(GpuInstanceProfileInfoV2, memory_size_mb), 48);
        assert_eq!(offset_of!(GpuInstanceProfileInfoV2, name), 56);
        assert_eq!(size_of::<GpuInstanceProfileInfoV3>(), 152);
        assert_eq!(offset_of!(GpuInstanceProfileInfoV3, memory_size_mb), 40);
        assert_eq!(offset_of!(GpuInstanceProfileInfoV3, name), 48);
        assert_eq!(offset_of!(GpuInstanceProfileInfoV3, capabilities), 144);
        assert_eq!(GPU_INSTANCE_PROFILE_INFO_V2, 0x0200_0098);
        assert_eq!(GPU_INSTANCE_PROFILE_INFO_V3, 0x0300_0098);
    }

    #[test]
    fn h100_placements_follow_the_table() {
        let device = h100();
        let pairs = |id| {
            placements(&device, id)
                .unwrap()
                .iter()
                .map(|placement| (placement.start, placement.size))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            pairs(19),
            (0..7).map(|start| (start, 1)).collect::<Vec<_>>()
        );
        assert_eq!(pairs(15), vec![(0, 2), (2, 2), (4, 2), (6, 2)]);
        assert_eq!(pairs(14), vec![(0, 2), (2, 2), (4, 2)]);
        assert_eq!(pairs(9), vec![(0, 4), (4, 4)]);
        assert_eq!(pairs(5), vec![(0, 4)]);
        assert_eq!(pairs(0), vec![(0, 8)]);
        assert_eq!(
            placements(&device, 1),
            Err(abi::ERROR_NOT_SUPPORTED),
            "no such id"
        );
    }

    #[test]
    fn placements_need_a_known_table() {
        let gb300 = Profile::parse(GB300).unwrap().devices().remove(0);
        assert_eq!(
            placements(&gb300, 19),
            Err(abi::ERROR_NOT_SUPPORTED),
            "unknown"
        );
        let mut no_mig = h100();
        no_mig.mig_mode = None;
        assert_eq!(placements(&no_mig, 19), Err(abi::ERROR_NOT_SUPPORTED));
    }

    #[test]
    fn profile_info_v_needs_mig_enabled_and_a_version() {
        let device = h100();
        let v2 = GPU_INSTANCE_PROFILE_INFO_V2;
        assert_eq!(
            profile_info_v(&device, 0, v2, false),
            Err(abi::ERROR_NOT_SUPPORTED),
            "disabled"
        );
        let count = abi::GPU_INSTANCE_PROFILE_COUNT;
        assert_eq!(
            profile_info_v(&device, count, v2, true),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
        for bad in [0, 1, 0x0100_0030, u32::MAX] {
            assert_eq!(
                profile_info_v(&device, 0, bad, true),
                Err(abi::ERROR_INVALID_ARGUMENT)
            );
        }
        // NVML_GPU_INSTANCE_PROFILE_6_SLICE: not an H100 profile.
        assert_eq!(
            profile_info_v(&device, 6, v2, true),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
    }

    #[test]
    fn profile_info_v_answers_the_row_with_its_name() {
        let device = h100();
        let ProfileInfoV::V2(info) =
            profile_info_v(&device, 9, GPU_INSTANCE_PROFILE_INFO_V2, true).unwrap()
        else {
            panic!("a v2 request gets v2");
        };
        let counts = info.counts;
        assert_eq!(
            (info.id, counts.slice_count, counts.instance_count),
            (15, 1, 4)
        );
        assert_eq!(
            (counts.multiprocessor_count, info.memory_size_mb),
            (26, 20096)
        );
        assert_eq!(info.is_p2p_supported, 0);
        assert_eq!(&info.name[..8], b"1g.20gb\0");
        let ProfileInfoV::V3(info) =
            profile_info_v(&device, 4, GPU_INSTANCE_PROFILE_INFO_V3, true).unwrap()
        else {
            panic!("a v3 request gets v3");
        };
        assert_eq!(
            (info.id, info.counts.multiprocessor_count, info.capabilities),
            (0, 132, 0)
        );
        assert_eq!(&info.name[..8], b"7g.80gb\0");
    }
}
