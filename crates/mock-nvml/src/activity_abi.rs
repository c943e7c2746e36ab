//! The C types of the issue-22 "misc" exports (`crate::activity`, `ffi/activity.rs`) as plain
//! data, layouts pinned by tests against nvml.h.

/// `NVML_STRUCT_VERSION(data, ver)`: the struct's size with the version in the top byte.
const fn struct_version(size: usize, version: u32) -> u32 {
    size as u32 | (version << 24)
}

/// `nvmlPciInfo_t` as version 1 of `nvmlDeviceGetPciInfo` writes it (52 bytes: the 16-byte
/// `"%04X:%02X:%02X.0"` bus id first, four reserved words last). The unversioned
/// `nvmlDeviceGetPciInfo` and `nvmlDeviceGetNvLinkRemotePciInfo` symbols are version 1.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct PciInfoV1 {
    pub bus_id: [u8; 16],
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub pci_device_id: u32,
    pub pci_sub_system_id: u32,
    pub reserved: [u32; 4],
}

/// `nvmlPciInfoExt_v1_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct PciInfoExt {
    pub version: u32,
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub pci_device_id: u32,
    pub pci_sub_system_id: u32,
    pub base_class: u32,
    pub sub_class: u32,
    pub bus_id: [u8; 32],
}

/// `nvmlPciInfoExt_v1`.
pub const PCI_INFO_EXT_V1: u32 = struct_version(size_of::<PciInfoExt>(), 1);

/// `nvmlProcessInfo_t` (v2, which `_v3` of the running-process queries fills).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ProcessInfo {
    pub pid: u32,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// `nvmlProcessInfo_v1_t` (the unversioned running-process queries).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ProcessInfoV1 {
    pub pid: u32,
    pub used_gpu_memory: u64,
}

impl From<ProcessInfo> for ProcessInfoV1 {
    fn from(info: ProcessInfo) -> ProcessInfoV1 {
        ProcessInfoV1 {
            pid: info.pid,
            used_gpu_memory: info.used_gpu_memory,
        }
    }
}

/// `gpuInstanceId` / `computeInstanceId` when MIG is not enabled.
pub const NO_INSTANCE: u32 = 0xFFFF_FFFF;

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ProcessUtilizationSample {
    pub pid: u32,
    pub time_stamp: u64,
    pub sm_util: u32,
    pub mem_util: u32,
    pub enc_util: u32,
    pub dec_util: u32,
}

/// `nvmlFBCStats_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct FbcStats {
    pub sessions_count: u32,
    pub average_fps: u32,
    pub average_latency: u32,
}

/// `nvmlGpmSupport_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct GpmSupport {
    pub version: u32,
    pub is_supported_device: u32,
}

/// `NVML_GPM_SUPPORT_VERSION`.
pub const GPM_SUPPORT_VERSION: u32 = 1;

/// `nvmlGpmMetric_t`: the caller sets `metric_id`; `metric_info` is three C-string pointers
/// (short name, long name, unit), NULL when not defined.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub struct GpmMetric {
    pub metric_id: u32,
    pub nvml_return: u32,
    pub value: f64,
    pub metric_info: [*const std::ffi::c_char; 3],
}

/// `nvmlGpmMetricsGet_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(missing_docs)]
pub struct GpmMetricsGet {
    pub version: u32,
    pub num_metrics: u32,
    pub sample1: usize,
    pub sample2: usize,
    pub metrics: [GpmMetric; 210],
}

/// `NVML_GPM_METRICS_GET_VERSION`.
pub const GPM_METRICS_GET_VERSION: u32 = 1;

/// `nvmlC2cModeInfo_v1_t` (no version field, despite the `V` of its query).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct C2cModeInfo {
    pub is_c2c_enabled: u32,
}

/// `nvmlFieldValue_t`: the caller sets `field_id` and `scope_id`; `value` is the 8-byte
/// `nvmlValue_t` union, read according to `value_type`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct FieldValue {
    pub field_id: u32,
    pub scope_id: u32,
    pub timestamp: i64,
    pub latency_usec: i64,
    pub value_type: u32,
    pub nvml_return: u32,
    pub value: u64,
}

/// `nvmlPlatformInfo_v2_t` (v1 has the same layout: `rackGuid`, `chassisPhysicalSlotNumber`,
/// `computeSlotIndex`, `nodeIndex` where v2 has `chassisSerialNumber`, `slotNumber`,
/// `trayIndex`, `hostId`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct PlatformInfo {
    pub version: u32,
    pub ib_guid: [u8; 16],
    pub chassis_serial_number: [u8; 16],
    pub slot_number: u8,
    pub tray_index: u8,
    pub host_id: u8,
    pub peer_type: u8,
    pub module_id: u8,
}

/// `nvmlPlatformInfo_v1`.
pub const PLATFORM_INFO_V1: u32 = struct_version(size_of::<PlatformInfo>(), 1);
/// `nvmlPlatformInfo_v2`.
pub const PLATFORM_INFO_V2: u32 = struct_version(size_of::<PlatformInfo>(), 2);

/// `nvmlGpuP2PStatus_t` values the mock answers.
pub const P2P_STATUS_OK: u32 = 0;
/// `NVML_P2P_STATUS_NOT_SUPPORTED`.
pub const P2P_STATUS_NOT_SUPPORTED: u32 = 5;
/// `NVML_P2P_CAPS_INDEX_ATOMICS`.
pub const P2P_CAPS_INDEX_ATOMICS: u32 = 3;
/// `NVML_P2P_CAPS_INDEX_UNKNOWN`: indices from here on are invalid.
pub const P2P_CAPS_INDEX_UNKNOWN: u32 = 5;

#[cfg(test)]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use super::*;

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<PciInfoV1>(), 52);
        assert_eq!(offset_of!(PciInfoV1, domain), 16);
        assert_eq!(offset_of!(PciInfoV1, pci_sub_system_id), 32);
        assert_eq!(size_of::<PciInfoExt>(), 64);
        assert_eq!(offset_of!(PciInfoExt, base_class), 24);
        assert_eq!(offset_of!(PciInfoExt, bus_id), 32);
        assert_eq!(PCI_INFO_EXT_V1, 0x0100_0040);
        assert_eq!(size_of::<ProcessInfo>(), 24);
        assert_eq!(offset_of!(ProcessInfo, used_gpu_memory), 8);
        assert_eq!(offset_of!(ProcessInfo, gpu_instance_id), 16);
        assert_eq!(align_of::<ProcessInfo>(), 8);
        assert_eq!(size_of::<ProcessInfoV1>(), 16);
        assert_eq!(size_of::<ProcessUtilizationSample>(), 32);
        assert_eq!(offset_of!(ProcessUtilizationSample, time_stamp), 8);
        assert_eq!(offset_of!(ProcessUtilizationSample, dec_util), 28);
        assert_eq!(size_of::<FbcStats>(), 12);
        assert_eq!(size_of::<GpmSupport>(), 8);
        assert_eq!(size_of::<C2cModeInfo>(), 4);
        assert_eq!(size_of::<FieldValue>(), 40);
        assert_eq!(size_of::<GpmMetric>(), 40);
        assert_eq!(offset_of!(GpmMetric, value), 8);
        assert_eq!(offset_of!(GpmMetricsGet, sample1), 8);
        assert_eq!(offset_of!(GpmMetricsGet, metrics), 24);
        assert_eq!(size_of::<GpmMetricsGet>(), 24 + 210 * 40);
        assert_eq!(size_of::<PlatformInfo>(), 44);
        assert_eq!(offset_of!(PlatformInfo, slot_number), 36);
        assert_eq!(offset_of!(PlatformInfo, module_id), 40);
        assert_eq!(PLATFORM_INFO_V2, 0x0200_002C);
        assert_eq!(offset_of!(FieldValue, value_type), 24);
        assert_eq!(offset_of!(FieldValue, value), 32);
    }
}
