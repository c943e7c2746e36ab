//! The NVML entry points check-fabric adds to the shared loader ([`nvml_dl`]): the UUID, the
//! driver version and both fabric queries. All of check-fabric's `unsafe` is here and in
//! `start.rs` (the process entry point).

#![allow(unsafe_code)]

use std::ffi::{c_char, c_uint};
use std::ops::Deref;

use nvml_dl::{buffer_string, check, Core, Names};
pub use nvml_dl::{Device, LoadError, LIBRARY};

use crate::query::FabricSource;
use crate::report::{FabricInfo, Return};

/// `NVML_DEVICE_UUID_V2_BUFFER_SIZE`.
const UUID_BUFFER: usize = 96;
/// `NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE`.
const DRIVER_VERSION_BUFFER: usize = 80;

/// `nvmlGpuFabricInfo_t` (v1, no version field), 28 bytes.
#[repr(C)]
#[derive(Default)]
struct FabricInfoV1 {
    cluster_uuid: [u8; 16],
    status: i32,
    clique_id: u32,
    state: u8,
}

/// `nvmlGpuFabricInfo_v3_t`, 40 bytes; its first 36 bytes are `nvmlGpuFabricInfo_v2_t`.
#[repr(C)]
#[derive(Default)]
struct FabricInfoV3 {
    version: u32,
    cluster_uuid: [u8; 16],
    status: i32,
    clique_id: u32,
    state: u8,
    health_mask: u32,
    health_summary: u8,
}

type DeviceStringFn = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> u32;
type SystemStringFn = unsafe extern "C" fn(*mut c_char, c_uint) -> u32;
type FabricV1Fn = unsafe extern "C" fn(Device, *mut FabricInfoV1) -> u32;
type FabricVFn = unsafe extern "C" fn(Device, *mut FabricInfoV3) -> u32;

/// A loaded NVML library and the entry points check-fabric calls (the common ones through
/// [`Core`], which it derefs to).
pub struct Nvml {
    core: Core,
    uuid: DeviceStringFn,
    driver_version: Option<SystemStringFn>,
    fabric_v1: Option<FabricV1Fn>,
    fabric_versioned: Option<FabricVFn>,
}

impl Deref for Nvml {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Nvml {
    /// Loads the library through the loader search and resolves its symbols (the `_v2` names,
    /// else the pre-v2 ones).
    pub fn load() -> Result<Nvml, LoadError> {
        let core = Core::load(Names::V2OrV1)?;
        // SAFETY: each type is the `extern "C"` signature nvml.h declares for the name.
        let uuid = unsafe { core.required::<DeviceStringFn>(&["nvmlDeviceGetUUID"]) }?;
        // SAFETY: as above.
        let driver_version =
            unsafe { core.optional::<SystemStringFn>("nvmlSystemGetDriverVersion") };
        // SAFETY: as above.
        let fabric_v1 = unsafe { core.optional::<FabricV1Fn>("nvmlDeviceGetGpuFabricInfo") };
        // SAFETY: as above.
        let fabric_versioned = unsafe { core.optional::<FabricVFn>("nvmlDeviceGetGpuFabricInfoV") };
        Ok(Nvml {
            core,
            uuid,
            driver_version,
            fabric_v1,
            fabric_versioned,
        })
    }

    /// `nvmlErrorString`, or a generic text when the library returns NULL.
    pub fn error_string(&self, code: Return) -> String {
        self.core
            .error_string(code)
            .unwrap_or_else(|| format!("NVML error {}", code.0))
    }

    /// `nvmlDeviceGetUUID` with a 96-byte buffer.
    pub fn uuid(&self, device: Device) -> Result<String, Return> {
        let mut buffer = [0 as c_char; UUID_BUFFER];
        // SAFETY: `device` came from the library; the buffer is writable for
        // the length passed.
        check(unsafe { (self.uuid)(device, buffer.as_mut_ptr(), UUID_BUFFER as c_uint) })?;
        Ok(buffer_string(&buffer))
    }

    /// `nvmlSystemGetDriverVersion` with an 80-byte buffer; `None` when absent.
    pub fn driver_version(&self) -> Option<Result<String, Return>> {
        let call = self.driver_version?;
        let mut buffer = [0 as c_char; DRIVER_VERSION_BUFFER];
        // SAFETY: the buffer is writable for the length passed.
        let code = unsafe { call(buffer.as_mut_ptr(), DRIVER_VERSION_BUFFER as c_uint) };
        Some(check(code).map(|()| buffer_string(&buffer)))
    }
}

impl FabricSource for Nvml {
    type Device = Device;

    fn fabric_versioned(&self, device: Device, version: u32) -> Option<Result<FabricInfo, Return>> {
        let call = self.fabric_versioned?;
        let mut info = FabricInfoV3 {
            version,
            ..FabricInfoV3::default()
        };
        // SAFETY: `device` came from the library; `info` is a writable
        // 40-byte v3 struct, large enough for the v2 tag too.
        let code = unsafe { call(device, &mut info) };
        Some(check(code).map(|()| FabricInfo {
            cluster_uuid: info.cluster_uuid,
            clique_id: info.clique_id,
            state: info.state,
        }))
    }

    fn fabric_v1(&self, device: Device) -> Option<Result<FabricInfo, Return>> {
        let call = self.fabric_v1?;
        let mut info = FabricInfoV1::default();
        // SAFETY: `device` came from the library; `info` is a writable 28-byte v1 struct.
        let code = unsafe { call(device, &mut info) };
        Some(check(code).map(|()| FabricInfo {
            cluster_uuid: info.cluster_uuid,
            clique_id: info.clique_id,
            state: info.state,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{offset_of, size_of};

    use super::*;
    use crate::query::{FABRIC_INFO_V2, FABRIC_INFO_V3};

    #[test]
    fn v1_layout_matches_nvml_h() {
        assert_eq!(size_of::<FabricInfoV1>(), 28);
        assert_eq!(offset_of!(FabricInfoV1, cluster_uuid), 0);
        assert_eq!(offset_of!(FabricInfoV1, status), 16);
        assert_eq!(offset_of!(FabricInfoV1, clique_id), 20);
        assert_eq!(offset_of!(FabricInfoV1, state), 24);
    }

    #[test]
    fn v3_layout_matches_nvml_h_and_extends_v2() {
        assert_eq!(size_of::<FabricInfoV3>(), 40);
        assert_eq!(offset_of!(FabricInfoV3, version), 0);
        assert_eq!(offset_of!(FabricInfoV3, cluster_uuid), 4);
        assert_eq!(offset_of!(FabricInfoV3, status), 20);
        assert_eq!(offset_of!(FabricInfoV3, clique_id), 24);
        assert_eq!(offset_of!(FabricInfoV3, state), 28);
        assert_eq!(offset_of!(FabricInfoV3, health_mask), 32);
        assert_eq!(offset_of!(FabricInfoV3, health_summary), 36);
        assert_eq!(FABRIC_INFO_V3, size_of::<FabricInfoV3>() as u32 | 3 << 24);
        assert_eq!(FABRIC_INFO_V2, 36 | 2 << 24);
    }
}
