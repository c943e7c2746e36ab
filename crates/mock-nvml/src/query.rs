//! The answers to NVML queries, computed from a resolved profile device: safe, pure functions
//! from [`Device`] to the values and `#[repr(C)]` structs the C ABI hands out.

use nvml_profile::{
    AddressingMode, Architecture, Brand, ComputeMode, Device, FabricState, GpuInstanceProfile,
    GpuInstanceProfiles, HealthSummary, PciBusId,
};

use crate::abi::{
    self, DeviceAddressingMode, GpuFabricInfo, GpuFabricInfoV2, GpuFabricInfoV3,
    GpuInstanceProfileInfo, Memory, MemoryV2, NvmlReturn, PciInfo,
};

/// `nvmlClockType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockType {
    /// `NVML_CLOCK_GRAPHICS` (0).
    Graphics,
    /// `NVML_CLOCK_SM` (1).
    Sm,
    /// `NVML_CLOCK_MEM` (2).
    Mem,
    /// `NVML_CLOCK_VIDEO` (3).
    Video,
}

impl ClockType {
    /// Decodes the C enum; INVALID_ARGUMENT for anything else.
    pub fn from_raw(raw: u32) -> Result<ClockType, NvmlReturn> {
        match raw {
            0 => Ok(ClockType::Graphics),
            1 => Ok(ClockType::Sm),
            2 => Ok(ClockType::Mem),
            3 => Ok(ClockType::Video),
            _ => Err(abi::ERROR_INVALID_ARGUMENT),
        }
    }
}

/// Current clock in MHz.
pub fn clock(device: &Device, kind: ClockType) -> u32 {
    let clocks = &device.clocks;
    match kind {
        ClockType::Graphics => clocks.graphics,
        ClockType::Sm => clocks.sm,
        ClockType::Mem => clocks.mem,
        ClockType::Video => clocks.video,
    }
}

/// Maximum clock in MHz.
pub fn max_clock(device: &Device, kind: ClockType) -> u32 {
    let clocks = &device.clocks;
    match kind {
        ClockType::Graphics => clocks.max_graphics,
        ClockType::Sm => clocks.max_sm,
        ClockType::Mem => clocks.max_mem,
        ClockType::Video => clocks.max_video,
    }
}

/// `nvmlBrandType_t` value.
pub fn brand(brand: Brand) -> u32 {
    match brand {
        Brand::Unknown => 0,
        Brand::Quadro => 1,
        Brand::Tesla => 2,
        Brand::Nvs => 3,
        Brand::Grid => 4,
        Brand::Geforce => 5,
        Brand::Titan => 6,
        Brand::NvidiaVapps => 7,
        Brand::NvidiaVpc => 8,
        Brand::NvidiaVcs => 9,
        Brand::NvidiaVws => 10,
        Brand::NvidiaCloudGaming => 11,
        Brand::QuadroRtx => 12,
        Brand::NvidiaRtx => 13,
        Brand::Nvidia => 14,
        Brand::GeforceRtx => 15,
        Brand::TitanRtx => 16,
    }
}

/// `nvmlDeviceArchitecture_t` value.
pub fn architecture(architecture: Architecture) -> u32 {
    match architecture {
        Architecture::Kepler => 2,
        Architecture::Maxwell => 3,
        Architecture::Pascal => 4,
        Architecture::Volta => 5,
        Architecture::Turing => 6,
        Architecture::Ampere => 7,
        Architecture::Ada => 8,
        Architecture::Hopper => 9,
        Architecture::Blackwell => 10,
        Architecture::Rubin => 13,
        Architecture::Unknown => 0xffff_ffff,
    }
}

/// `nvmlComputeMode_t` value.
pub fn compute_mode(mode: ComputeMode) -> u32 {
    match mode {
        ComputeMode::Default => 0,
        ComputeMode::Prohibited => 2,
        ComputeMode::ExclusiveProcess => 3,
    }
}

/// `nvmlGpuFabricState_t` value.
pub fn fabric_state(state: FabricState) -> u8 {
    match state {
        FabricState::NotSupported => 0,
        FabricState::NotStarted => 1,
        FabricState::InProgress => 2,
        FabricState::Completed => 3,
    }
}

/// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*` value.
pub fn health_summary(summary: HealthSummary) -> u8 {
    match summary {
        HealthSummary::NotSupported => 0,
        HealthSummary::Healthy => 1,
        HealthSummary::Unhealthy => 2,
        HealthSummary::LimitedCapacity => 3,
    }
}

/// The legacy bus id, `"%04X:%02X:%02X.%X"`.
pub fn bus_id_legacy(bus_id: &PciBusId) -> String {
    format!(
        "{:04X}:{:02X}:{:02X}.{:X}",
        bus_id.domain, bus_id.bus, bus_id.device, bus_id.function
    )
}

/// The bus id, `"%08X:%02X:%02X.%X"`.
pub fn bus_id(bus_id: &PciBusId) -> String {
    format!(
        "{:08X}:{:02X}:{:02X}.{:X}",
        bus_id.domain, bus_id.bus, bus_id.device, bus_id.function
    )
}

/// `nvmlPciInfo_t` of a GPU.
pub fn pci_info(device: &Device) -> PciInfo {
    pci_info_of(
        &device.pci_bus_id,
        device.pci.device_id,
        device.pci.subsystem_id,
    )
}

/// `nvmlPciInfo_t` of any PCI function (a GPU, or the NVSwitch at the far end of a link).
pub fn pci_info_of(address: &PciBusId, device_id: u32, subsystem_id: u32) -> PciInfo {
    let mut info = PciInfo {
        bus_id_legacy: [0; 16],
        domain: address.domain,
        bus: u32::from(address.bus),
        device: u32::from(address.device),
        pci_device_id: device_id,
        pci_sub_system_id: subsystem_id,
        bus_id: [0; 32],
    };
    copy_nul_terminated(&mut info.bus_id_legacy, &bus_id_legacy(address));
    copy_nul_terminated(&mut info.bus_id, &bus_id(address));
    info
}

/// `nvmlMemory_t`: v1 counts reserved memory as used.
pub fn memory_v1(device: &Device) -> Memory {
    let memory = device.memory;
    Memory {
        total: memory.total,
        free: memory.free(),
        used: memory.used + memory.reserved,
    }
}

/// `nvmlMemory_v2_t`.
pub fn memory_v2(device: &Device) -> MemoryV2 {
    let memory = device.memory;
    MemoryV2 {
        version: abi::MEMORY_V2,
        _pad: 0,
        total: memory.total,
        reserved: memory.reserved,
        free: memory.free(),
        used: memory.used,
    }
}

/// `nvmlGpuFabricInfo_t`; NOT_SUPPORTED without a fabric block.
pub fn fabric_v1(device: &Device) -> Result<GpuFabricInfo, NvmlReturn> {
    let fabric = device.fabric.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(GpuFabricInfo {
        cluster_uuid: *fabric.cluster_uuid.as_bytes(),
        status: abi::SUCCESS,
        clique_id: fabric.clique_id,
        state: fabric_state(fabric.effective_state()),
        _pad: [0; 3],
    })
}

/// `nvmlGpuFabricInfo_v3_t`; NOT_SUPPORTED without a fabric block.
pub fn fabric_v3(device: &Device) -> Result<GpuFabricInfoV3, NvmlReturn> {
    let fabric = device.fabric.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(GpuFabricInfoV3 {
        version: abi::GPU_FABRIC_INFO_V3,
        cluster_uuid: *fabric.cluster_uuid.as_bytes(),
        status: abi::SUCCESS,
        clique_id: fabric.clique_id,
        state: fabric_state(fabric.effective_state()),
        _pad: [0; 3],
        health_mask: fabric.effective_health_mask(),
        health_summary: health_summary(fabric.effective_health_summary()),
        _pad2: [0; 3],
    })
}

/// `nvmlGpuFabricInfo_v2_t`: the v3 answer without the trailing summary.
pub fn fabric_v2(device: &Device) -> Result<GpuFabricInfoV2, NvmlReturn> {
    let v3 = fabric_v3(device)?;
    Ok(GpuFabricInfoV2 {
        version: abi::GPU_FABRIC_INFO_V2,
        cluster_uuid: v3.cluster_uuid,
        status: v3.status,
        clique_id: v3.clique_id,
        state: v3.state,
        _pad: [0; 3],
        health_mask: v3.health_mask,
    })
}

/// The index of the device whose bus id matches `text` (any form NVML accepts).
pub fn find_by_bus_id(devices: &[Device], text: &str) -> Result<usize, NvmlReturn> {
    let wanted = PciBusId::parse(text.trim()).map_err(|_| abi::ERROR_INVALID_ARGUMENT)?;
    devices
        .iter()
        .position(|device| device.pci_bus_id == wanted)
        .ok_or(abi::ERROR_NOT_FOUND)
}

/// The index of the device with this uuid (case-insensitive).
pub fn find_by_uuid(devices: &[Device], text: &str) -> Result<usize, NvmlReturn> {
    devices
        .iter()
        .position(|device| device.uuid.eq_ignore_ascii_case(text.trim()))
        .ok_or(abi::ERROR_NOT_FOUND)
}

/// Copies `text` and a NUL into `buffer`, truncating (only used for fixed struct fields whose
/// contents are known to fit).
fn copy_nul_terminated(buffer: &mut [u8], text: &str) {
    let room = buffer.len().saturating_sub(1);
    let bytes = &text.as_bytes()[..text.len().min(room)];
    buffer[..bytes.len()].copy_from_slice(bytes);
    buffer[bytes.len()] = 0;
}

/// Whether `text` and its NUL fit a caller's buffer of `length` bytes: INSUFFICIENT_SIZE if not.
pub fn check_room(length: u32, text: &str) -> Result<(), NvmlReturn> {
    if (length as usize) < text.len() + 1 {
        return Err(abi::ERROR_INSUFFICIENT_SIZE);
    }
    Ok(())
}

/// `nvmlDeviceGetGpuInstanceProfileInfo`: INVALID_ARGUMENT past the last
/// `NVML_GPU_INSTANCE_PROFILE_*` (nvml.h's enumeration end), NOT_SUPPORTED when the GPU has no
/// MIG, its table is `unknown`, or the table lacks the profile; else the profile's row.
pub fn gpu_instance_profile(
    device: &Device,
    profile: u32,
) -> Result<GpuInstanceProfileInfo, NvmlReturn> {
    if profile >= abi::GPU_INSTANCE_PROFILE_COUNT {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    if device.mig_mode.is_none() {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    let Some(GpuInstanceProfiles::Known(rows)) = &device.gpu_instance_profiles else {
        return Err(abi::ERROR_NOT_SUPPORTED);
    };
    let row = rows
        .iter()
        .find(|row| row.profile == profile)
        .ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(GpuInstanceProfileInfo {
        id: row.id,
        is_p2p_supported: u32::from(row.p2p),
        counts: gpu_instance_profile_counts(row),
        memory_size_mb: row.memory_mib,
    })
}

/// A profile row's counts, as every `nvmlGpuInstanceProfileInfo` layout holds them.
pub fn gpu_instance_profile_counts(row: &GpuInstanceProfile) -> abi::GpuInstanceProfileCounts {
    abi::GpuInstanceProfileCounts {
        slice_count: row.slices,
        instance_count: row.instances,
        multiprocessor_count: row.multiprocessors,
        copy_engine_count: row.copy_engines,
        decoder_count: row.decoders,
        encoder_count: row.encoders,
        jpeg_count: row.jpegs,
        ofa_count: row.ofas,
    }
}

/// `nvmlDeviceGetAddressingMode`: NOT_SUPPORTED when the profile gives none.
pub fn addressing_mode(device: &Device) -> Result<DeviceAddressingMode, NvmlReturn> {
    let value = match device.addressing_mode.ok_or(abi::ERROR_NOT_SUPPORTED)? {
        AddressingMode::None => 0,
        AddressingMode::Hmm => 1,
        AddressingMode::Ats => 2,
    };
    Ok(DeviceAddressingMode {
        version: abi::DEVICE_ADDRESSING_MODE_V1,
        value,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use nvml_profile::{Profile, GB300, H100};

    use super::*;
    use test_support::gb200_devices as gb200;

    #[test]
    fn pci_info_follows_the_profile() {
        let devices = gb200();
        let info = pci_info(&devices[2]);
        assert_eq!(&info.bus_id_legacy[..13], b"0000:4A:00.0\0");
        assert_eq!(&info.bus_id[..17], b"00000000:4A:00.0\0");
        assert_eq!((info.domain, info.bus, info.device), (0, 0x4a, 0));
        assert_eq!(info.pci_device_id, devices[2].pci.device_id);
    }

    #[test]
    fn memory_v1_counts_reserved_as_used() {
        let device = &gb200()[0];
        let v1 = memory_v1(device);
        assert_eq!(v1.total, v1.free + v1.used);
        let v2 = memory_v2(device);
        assert_eq!(v2.total, v2.free + v2.used + v2.reserved);
        assert_eq!(v2.reserved, device.memory.reserved);
    }

    #[test]
    fn fabric_answers() {
        let device = &gb200()[0];
        let v1 = fabric_v1(device).unwrap();
        assert_eq!(v1.state, 3);
        assert_eq!(v1.cluster_uuid[15], 1);
        let v2 = fabric_v2(device).unwrap();
        let v3 = fabric_v3(device).unwrap();
        assert_eq!((v2.version, v3.version), (0x0200_0024, 0x0300_0028));
        assert_eq!(
            (v2.health_mask, v3.health_mask, v3.health_summary),
            (0x1AA, 0x1AA, 1)
        );
        let h100 = &Profile::parse(H100).unwrap().devices()[0];
        assert_eq!(fabric_v1(h100), Err(abi::ERROR_NOT_SUPPORTED));
        assert_eq!(fabric_v3(h100).map(|_| ()), Err(abi::ERROR_NOT_SUPPORTED));
    }

    #[test]
    fn lookups() {
        let devices = gb200();
        assert_eq!(find_by_bus_id(&devices, "00000000:4B:00.0"), Ok(3));
        assert_eq!(find_by_bus_id(&devices, "4b:00.0"), Ok(3));
        assert_eq!(
            find_by_bus_id(&devices, "0000:4c:00.0"),
            Err(abi::ERROR_NOT_FOUND)
        );
        assert_eq!(
            find_by_bus_id(&devices, "banana"),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
        let uuid = devices[1].uuid.to_uppercase();
        assert_eq!(find_by_uuid(&devices, &uuid), Ok(1));
        assert_eq!(
            find_by_uuid(&devices, "GPU-nope"),
            Err(abi::ERROR_NOT_FOUND)
        );
    }

    #[test]
    fn strings_need_room_for_the_nul() {
        assert_eq!(check_room(4, "abcd"), Err(abi::ERROR_INSUFFICIENT_SIZE));
        assert_eq!(check_room(0, ""), Err(abi::ERROR_INSUFFICIENT_SIZE));
        assert_eq!(check_room(4, "abc"), Ok(()));
        assert_eq!(check_room(1, ""), Ok(()));
    }

    #[test]
    fn clocks() {
        let device = &gb200()[0];
        assert_eq!(clock(device, ClockType::Mem), device.clocks.mem);
        assert_eq!(ClockType::from_raw(4), Err(abi::ERROR_INVALID_ARGUMENT));
    }

    #[test]
    fn mig_answers_for_a_capable_part_with_mig_disabled() {
        let devices = gb200();
        let device = &devices[0];
        assert_eq!(
            gpu_instance_profile(device, 0).map(|info| (info.id, info.memory_size_mb)),
            Ok((19, 22528)),
            "gb200's 1g.23gb, answered while MIG is disabled"
        );
        assert_eq!(
            gpu_instance_profile(device, 2),
            Err(abi::ERROR_NOT_SUPPORTED),
            "gb200's 3g row is left out: its values were not found"
        );
        let gb300 = Profile::parse(GB300).unwrap().devices().remove(0);
        assert_eq!(
            gpu_instance_profile(&gb300, 0),
            Err(abi::ERROR_NOT_SUPPORTED),
            "the gb300 table is unknown"
        );
        assert_eq!(
            gpu_instance_profile(device, abi::GPU_INSTANCE_PROFILE_COUNT),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
        assert_eq!(addressing_mode(device).map(|mode| mode.value), Ok(2));
    }

    #[test]
    fn mig_enabled_and_known_tables() {
        let row = "{profile: 4, id: 0, p2p: true, slices: 7, instances: 1, multiprocessors: 132, copy_engines: 8, decoders: 7, encoders: 0, jpegs: 7, ofas: 1, memory_mib: 80000}";
        let text = GB300
            .replace(
                "mig_mode: {current: false, pending: false, max_devices: 7}",
                "mig_mode: {current: true, pending: true, max_devices: 7}",
            )
            .replace(
                "gpu_instance_profiles: unknown",
                &format!("gpu_instance_profiles: [{row}]"),
            );
        let devices = Profile::parse(&text).unwrap().devices();
        let device = &devices[1];
        let info = gpu_instance_profile(device, 4).unwrap();
        assert_eq!(
            (
                info.id,
                info.is_p2p_supported,
                info.counts.slice_count,
                info.memory_size_mb
            ),
            (0, 1, 7, 80000)
        );
        assert_eq!(
            gpu_instance_profile(device, 0),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
    }

    #[test]
    fn no_mig_table_no_mig_support_no_addressing_mode() {
        // h100: MIG-capable, disabled, its real table, no addressing mode in the profile.
        let devices = Profile::parse(H100).unwrap().devices();
        let device = &devices[0];
        let info = gpu_instance_profile(device, 0).unwrap();
        assert_eq!(
            (info.id, info.counts.instance_count, info.memory_size_mb),
            (19, 7, 9984)
        );
        assert_eq!(
            gpu_instance_profile(device, 6),
            Err(abi::ERROR_NOT_SUPPORTED),
            "NVML_GPU_INSTANCE_PROFILE_6_SLICE is not an H100 profile"
        );
        assert_eq!(addressing_mode(device), Err(abi::ERROR_NOT_SUPPORTED));
        // Without mig_mode the part has no MIG at all.
        let text = H100.replace(
            "  mig_mode: {current: false, pending: false, max_devices: 7}\n",
            "",
        );
        let devices = Profile::parse(&text).unwrap().devices();
        assert_eq!(devices[0].mig_mode, None);
    }
}
