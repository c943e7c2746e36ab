//! The NVML C ABI as plain data: return codes, enum values and `#[repr(C)]` structs
//! laid out exactly as nvml.h 13.x on x86_64 (sizes and offsets pinned by the tests below).
//!
//! Padding NVML leaves implicit is spelled out as zeroed `_pad` fields, so that writing a struct
//! never copies uninitialised bytes to the caller (pynvml reads the fabric `state` as 4 bytes).

#![allow(non_camel_case_types)]

use std::ffi::CStr;

/// `nvmlReturn_t`.
pub type NvmlReturn = u32;

/// `NVML_SUCCESS`.
pub const SUCCESS: NvmlReturn = 0;
/// `NVML_ERROR_UNINITIALIZED`.
pub const ERROR_UNINITIALIZED: NvmlReturn = 1;
/// `NVML_ERROR_INVALID_ARGUMENT`.
pub const ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
/// `NVML_ERROR_NOT_SUPPORTED`.
pub const ERROR_NOT_SUPPORTED: NvmlReturn = 3;
/// `NVML_ERROR_NO_PERMISSION`.
pub const ERROR_NO_PERMISSION: NvmlReturn = 4;
/// `NVML_ERROR_NOT_FOUND`.
pub const ERROR_NOT_FOUND: NvmlReturn = 6;
/// `NVML_ERROR_INSUFFICIENT_SIZE`.
pub const ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
/// `NVML_ERROR_IN_USE`.
pub const ERROR_IN_USE: NvmlReturn = 19;
/// `NVML_ERROR_INSUFFICIENT_RESOURCES`.
pub const ERROR_INSUFFICIENT_RESOURCES: NvmlReturn = 23;
/// `NVML_ERROR_DRIVER_NOT_LOADED`.
pub const ERROR_DRIVER_NOT_LOADED: NvmlReturn = 9;
/// `NVML_ERROR_GPU_IS_LOST`.
pub const ERROR_GPU_IS_LOST: NvmlReturn = 15;
/// `NVML_ERROR_TIMEOUT`: `nvmlEventSetWait*` with no event within the timeout.
pub const ERROR_TIMEOUT: NvmlReturn = 10;
/// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`.
pub const ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
/// `NVML_ERROR_UNKNOWN`.
pub const ERROR_UNKNOWN: NvmlReturn = 999;

/// `NVML_STRUCT_VERSION(name, ver)`: the struct size with the version in the top byte.
pub const fn struct_version(size: usize, version: u32) -> u32 {
    size as u32 | (version << 24)
}

/// `nvmlGpuFabricInfo_v2`.
pub const GPU_FABRIC_INFO_V2: u32 = struct_version(size_of::<GpuFabricInfoV2>(), 2);
/// `nvmlGpuFabricInfo_v3`.
pub const GPU_FABRIC_INFO_V3: u32 = struct_version(size_of::<GpuFabricInfoV3>(), 3);
/// `nvmlMemory_v2`.
pub const MEMORY_V2: u32 = struct_version(size_of::<MemoryV2>(), 2);

/// `nvmlDeviceAddressingMode_v1`.
pub const DEVICE_ADDRESSING_MODE_V1: u32 = struct_version(size_of::<DeviceAddressingMode>(), 1);

/// `NVML_GPU_INSTANCE_PROFILE_COUNT`: `nvmlDeviceGetGpuInstanceProfileInfo` takes `0..COUNT`.
pub const GPU_INSTANCE_PROFILE_COUNT: u32 = 0x11;

/// `NVML_NVLINK_MAX_LINKS`.
pub const NVLINK_MAX_LINKS: u32 = 36;

/// `NVML_NVLINK_DEVICE_TYPE_SWITCH` (`nvmlIntNvLinkDeviceType_t`).
pub const NVLINK_DEVICE_TYPE_SWITCH: u32 = 2;

/// `nvmlPciInfo_t` (GetPciInfo v1/v2/v3 all fill this type).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciInfo {
    /// `"%04X:%02X:%02X.%X"`, NUL-terminated.
    pub bus_id_legacy: [u8; 16],
    /// PCI domain.
    pub domain: u32,
    /// Bus.
    pub bus: u32,
    /// Device.
    pub device: u32,
    /// `(device id << 16) | vendor id`.
    pub pci_device_id: u32,
    /// `(subsystem id << 16) | subsystem vendor id`.
    pub pci_sub_system_id: u32,
    /// `"%08X:%02X:%02X.%X"`, NUL-terminated.
    pub bus_id: [u8; 32],
}

/// `nvmlMemory_t` (v1): `used` includes reserved memory.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Memory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct MemoryV2 {
    pub version: u32,
    pub _pad: u32,
    pub total: u64,
    pub reserved: u64,
    pub free: u64,
    pub used: u64,
}

/// `nvmlUtilization_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Utilization {
    pub gpu: u32,
    pub memory: u32,
}

/// `nvmlGpuFabricInfo_t` (v1, no version field).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct GpuFabricInfo {
    pub cluster_uuid: [u8; 16],
    pub status: NvmlReturn,
    pub clique_id: u32,
    pub state: u8,
    pub _pad: [u8; 3],
}

/// `nvmlGpuFabricInfo_v2_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct GpuFabricInfoV2 {
    pub version: u32,
    pub cluster_uuid: [u8; 16],
    pub status: NvmlReturn,
    pub clique_id: u32,
    pub state: u8,
    pub _pad: [u8; 3],
    pub health_mask: u32,
}

/// `nvmlGpuFabricInfo_v3_t` (= `nvmlGpuFabricInfoV_t` since NVML 13.0).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct GpuFabricInfoV3 {
    pub version: u32,
    pub cluster_uuid: [u8; 16],
    pub status: NvmlReturn,
    pub clique_id: u32,
    pub state: u8,
    pub _pad: [u8; 3],
    pub health_mask: u32,
    pub health_summary: u8,
    pub _pad2: [u8; 3],
}

/// The eight counts every `nvmlGpuInstanceProfileInfo` layout holds in a row, after its `id`
/// (v1, v3) or its `isP2pSupported` (v2): one owner for the three layouts and for their filling
/// (`query::gpu_instance_profile_counts`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct GpuInstanceProfileCounts {
    pub slice_count: u32,
    pub instance_count: u32,
    pub multiprocessor_count: u32,
    pub copy_engine_count: u32,
    pub decoder_count: u32,
    pub encoder_count: u32,
    pub jpeg_count: u32,
    pub ofa_count: u32,
}

/// `nvmlGpuInstanceProfileInfo_t` (v1, no version field).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct GpuInstanceProfileInfo {
    pub id: u32,
    pub is_p2p_supported: u32,
    pub counts: GpuInstanceProfileCounts,
    pub memory_size_mb: u64,
}

/// `nvmlDeviceAddressingMode_v1_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceAddressingMode {
    /// `nvmlDeviceAddressingMode_v1`.
    pub version: u32,
    /// `nvmlDeviceAddressingModeType_t`: NONE 0, HMM 1, ATS 2.
    pub value: u32,
}

/// `nvmlEventTypeSingleBitEccError`.
pub const EVENT_TYPE_SINGLE_BIT_ECC_ERROR: u64 = 0x1;
/// `nvmlEventTypeDoubleBitEccError`.
pub const EVENT_TYPE_DOUBLE_BIT_ECC_ERROR: u64 = 0x2;
/// `nvmlEventTypeXidCriticalError`.
pub const EVENT_TYPE_XID_CRITICAL_ERROR: u64 = 0x8;
/// `nvmlEventMigConfigChange` (nvml.h spells it without `Type`).
pub const EVENT_TYPE_MIG_CONFIG_CHANGE: u64 = 0x100;

/// `nvmlEventTypeAll`: every event type nvml.h defines.
pub const EVENT_TYPE_ALL: u64 = 0x1
    | 0x2
    | 0x4
    | 0x8
    | 0x10
    | 0x80
    | 0x100
    | 0x200
    | 0x400
    | 0x800
    | 0x1000
    | 0x2000
    | 0x4000
    | 0x8000;

/// `gpuInstanceId` / `computeInstanceId` of an event that is not attributable to an instance.
pub const INSTANCE_ID_NONE: u32 = 0xFFFF_FFFF;

/// `nvmlEventData_t` as `nvmlEventSetWait_v2` fills it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventData {
    /// `nvmlDevice_t`: the handle `nvmlDeviceGetHandleByIndex` returns for the GPU.
    pub device: usize,
    /// `nvmlEventType*`.
    pub event_type: u64,
    /// The Xid for `nvmlEventTypeXidCriticalError`, else 0.
    pub event_data: u64,
    /// [`INSTANCE_ID_NONE`] unless attributable to a MIG GPU instance.
    pub gpu_instance_id: u32,
    /// [`INSTANCE_ID_NONE`] unless attributable to a MIG compute instance.
    pub compute_instance_id: u32,
}

/// The leading fields of [`EventData`]: all that the v1 symbol `nvmlEventSetWait` (from before
/// the instance ids were added) may write.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventDataV1 {
    /// As in [`EventData`].
    pub device: usize,
    /// As in [`EventData`].
    pub event_type: u64,
    /// As in [`EventData`].
    pub event_data: u64,
}

/// `nvmlErrorString` texts (DCGM's table, which mirrors the library's); unknown codes give "Unknown Error".
pub fn error_string(code: NvmlReturn) -> &'static CStr {
    match code {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt Request Issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires reset",
        17 => c"GPU access blocked by the operating system",
        18 => c"Driver/library version mismatch",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => c"The requested vgpu operation is not available on target device, because ECC is enabled",
        23 => c"Insufficient Resources",
        24 => c"Frequency not supported",
        25 => c"Argument version mismatch",
        26 => c"Deprecated",
        27 => c"Not Ready",
        28 => c"GPU not found",
        29 => c"Invalid state",
        30 => c"Reset type not supported",
        _ => c"Unknown Error",
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, offset_of, size_of};

    use super::*;

    /// Asserts a struct's size, optionally its alignment, and the offset of each named field:
    /// `assert_layout!(Type: size 24, align 8; field @ 0, other @ 8)`. With `same as Other`
    /// instead of offsets, each named field sits where it sits in `Other`.
    macro_rules! assert_layout {
        ($ty:ty: size $size:expr $(, align $align:expr)?; $($field:ident @ $offset:expr),+ $(,)?) => {{
            assert_eq!(size_of::<$ty>(), $size, "size of {}", stringify!($ty));
            $(assert_eq!(align_of::<$ty>(), $align, "align of {}", stringify!($ty));)?
            $(assert_eq!(offset_of!($ty, $field), $offset, "{}.{}", stringify!($ty), stringify!($field));)+
        }};
        ($ty:ty: same as $other:ty; $($field:ident),+ $(,)?) => {{
            $(assert_eq!(offset_of!($ty, $field), offset_of!($other, $field), "{}.{}", stringify!($ty), stringify!($field));)+
        }};
    }

    #[test]
    fn pci_info_layout() {
        assert_layout!(PciInfo: size 68, align 4;
            bus_id_legacy @ 0, domain @ 16, bus @ 20, device @ 24,
            pci_device_id @ 28, pci_sub_system_id @ 32, bus_id @ 36);
    }

    #[test]
    fn memory_layouts() {
        assert_layout!(Memory: size 24, align 8; total @ 0, free @ 8, used @ 16);
        assert_layout!(MemoryV2: size 40;
            version @ 0, total @ 8, reserved @ 16, free @ 24, used @ 32);
        assert_eq!(MEMORY_V2, 0x0200_0028);
        assert_eq!(size_of::<Utilization>(), 8);
    }

    #[test]
    fn fabric_layouts() {
        assert_layout!(GpuFabricInfo: size 28, align 4;
            cluster_uuid @ 0, status @ 16, clique_id @ 20, state @ 24);
        assert_layout!(GpuFabricInfoV2: size 36;
            version @ 0, cluster_uuid @ 4, status @ 20, clique_id @ 24, state @ 28,
            health_mask @ 32);

        assert_eq!(size_of::<GpuFabricInfoV3>(), 40);
        // v3 is v2 plus one trailing field: a v2 write never touches healthSummary.
        assert_layout!(GpuFabricInfoV3: same as GpuFabricInfoV2;
            version, cluster_uuid, status, clique_id, state, health_mask);
        assert_eq!(
            offset_of!(GpuFabricInfoV3, health_summary),
            size_of::<GpuFabricInfoV2>()
        );

        assert_eq!(GPU_FABRIC_INFO_V2, 0x0200_0024);
        assert_eq!(GPU_FABRIC_INFO_V3, 0x0300_0028);
        assert_ne!(GPU_FABRIC_INFO_V2, GPU_FABRIC_INFO_V3);
    }

    #[test]
    fn mig_and_addressing_layouts() {
        assert_layout!(GpuInstanceProfileInfo: size 48, align 8;
            id @ 0, is_p2p_supported @ 4, counts @ 8, memory_size_mb @ 40);
        assert_layout!(GpuInstanceProfileCounts: size 32, align 4;
            slice_count @ 0, instance_count @ 4, ofa_count @ 28);
        assert_layout!(DeviceAddressingMode: size 8; value @ 4);
        assert_eq!(DEVICE_ADDRESSING_MODE_V1, 0x0100_0008);
    }

    #[test]
    fn event_data_layouts() {
        assert_layout!(EventData: size 32, align 8;
            device @ 0, event_type @ 8, event_data @ 16, gpu_instance_id @ 24, compute_instance_id @ 28);
        assert_layout!(EventDataV1: size 24; device @ 0, event_type @ 8, event_data @ 16);
        assert_eq!(EVENT_TYPE_ALL, 0xFF9F);
        assert_eq!(error_string(ERROR_TIMEOUT), c"Timeout");
    }

    #[test]
    fn error_strings() {
        assert_eq!(error_string(SUCCESS), c"Success");
        assert_eq!(error_string(ERROR_NOT_SUPPORTED), c"Not Supported");
        assert_eq!(error_string(18), c"Driver/library version mismatch");
        assert_eq!(
            error_string(ERROR_ARGUMENT_VERSION_MISMATCH),
            c"Argument version mismatch"
        );
        assert_eq!(error_string(ERROR_UNKNOWN), c"Unknown Error");
        assert_eq!(error_string(31), c"Unknown Error");
        assert_eq!(error_string(u32::MAX), c"Unknown Error");
    }
}
