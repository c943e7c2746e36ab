//! The C layouts of the MIG lifecycle calls (go-nvml v0.13's `nvml.h`), pinned by tests.

use std::ffi::c_void;

use crate::{abi::struct_version, mig::NAME_BUFFER};

/// `nvmlGpuInstanceInfo_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuInstanceInfo {
    /// The parent GPU's handle.
    pub device: *mut c_void,
    /// The instance id, unique within the GPU.
    pub id: u32,
    /// Its profile id (`info.id`, not the enum).
    pub profile_id: u32,
    /// Its memory slices.
    pub placement: crate::mig::GpuInstancePlacement,
}

/// `nvmlComputeInstancePlacement_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeInstancePlacement {
    /// First compute slice within the GPU instance.
    pub start: u32,
    /// Compute slices occupied.
    pub size: u32,
}

/// `nvmlComputeInstanceInfo_t` as `nvmlComputeInstanceGetInfo_v2` writes it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeInstanceInfo {
    /// The parent GPU's handle.
    pub device: *mut c_void,
    /// The parent GPU instance's handle.
    pub gpu_instance: *mut c_void,
    /// The instance id, unique within the GPU instance.
    pub id: u32,
    /// Its compute instance profile id.
    pub profile_id: u32,
    /// Its compute slices.
    pub placement: ComputeInstancePlacement,
}

/// What `nvmlComputeInstanceGetInfo` (v1) writes: `nvmlComputeInstanceInfo_t` before the
/// placement was added, so a v1 caller's smaller buffer is never overrun.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ComputeInstanceInfoV1 {
    pub device: *mut c_void,
    pub gpu_instance: *mut c_void,
    pub id: u32,
    pub profile_id: u32,
}

/// `nvmlComputeInstanceProfileInfo_t` (v1, no version field).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct ComputeInstanceProfileInfo {
    pub id: u32,
    pub slice_count: u32,
    pub instance_count: u32,
    pub multiprocessor_count: u32,
    pub shared_copy_engine_count: u32,
    pub shared_decoder_count: u32,
    pub shared_encoder_count: u32,
    pub shared_jpeg_count: u32,
    pub shared_ofa_count: u32,
}

/// `nvmlComputeInstanceProfileInfo_v2_t`: a version, v1's fields, the name.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ComputeInstanceProfileInfoV2 {
    pub version: u32,
    pub info: ComputeInstanceProfileInfo,
    pub name: [u8; NAME_BUFFER],
}

/// `nvmlComputeInstanceProfileInfo_v3_t`: v2 plus `capabilities`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct ComputeInstanceProfileInfoV3 {
    pub version: u32,
    pub info: ComputeInstanceProfileInfo,
    pub name: [u8; NAME_BUFFER],
    pub capabilities: u32,
}

/// `nvmlComputeInstanceProfileInfo_v2`.
pub const COMPUTE_INSTANCE_PROFILE_INFO_V2: u32 =
    struct_version(size_of::<ComputeInstanceProfileInfoV2>(), 2);
/// `nvmlComputeInstanceProfileInfo_v3`.
pub const COMPUTE_INSTANCE_PROFILE_INFO_V3: u32 =
    struct_version(size_of::<ComputeInstanceProfileInfoV3>(), 3);

/// `nvmlDeviceAttributes_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct DeviceAttributes {
    pub multiprocessor_count: u32,
    pub shared_copy_engine_count: u32,
    pub shared_decoder_count: u32,
    pub shared_encoder_count: u32,
    pub shared_jpeg_count: u32,
    pub shared_ofa_count: u32,
    pub gpu_instance_slice_count: u32,
    pub compute_instance_slice_count: u32,
    pub memory_size_mb: u64,
}

#[cfg(test)]
mod tests {
    use std::mem::offset_of;

    use super::*;

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<GpuInstanceInfo>(), 24);
        assert_eq!(offset_of!(GpuInstanceInfo, placement), 16);
        assert_eq!(size_of::<ComputeInstanceInfo>(), 32);
        assert_eq!(offset_of!(ComputeInstanceInfo, placement), 24);
        assert_eq!(size_of::<ComputeInstanceInfoV1>(), 24);
        assert_eq!(size_of::<ComputeInstanceProfileInfo>(), 36);
        assert_eq!(size_of::<ComputeInstanceProfileInfoV2>(), 136);
        assert_eq!(offset_of!(ComputeInstanceProfileInfoV2, name), 40);
        assert_eq!(size_of::<ComputeInstanceProfileInfoV3>(), 140);
        assert_eq!(offset_of!(ComputeInstanceProfileInfoV3, capabilities), 136);
        assert_eq!(COMPUTE_INSTANCE_PROFILE_INFO_V2, 0x0200_0088);
        assert_eq!(COMPUTE_INSTANCE_PROFILE_INFO_V3, 0x0300_008C);
        assert_eq!(size_of::<DeviceAttributes>(), 40);
        assert_eq!(offset_of!(DeviceAttributes, memory_size_mb), 32);
    }
}
