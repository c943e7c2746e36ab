//! The NVML C ABI, reached through `dlopen("libnvidia-ml.so.1")` with the
//! normal loader search. All of check-fabric's `unsafe` is here.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_uint, c_void, CStr};

use libloading::{Library, Symbol};

use crate::query::FabricSource;
use crate::report::{FabricInfo, Return};

/// The library's name, as every NVML consumer loads it.
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// `nvmlDevice_t`.
pub type Device = *mut c_void;

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

type VoidFn = unsafe extern "C" fn() -> u32;
type ErrorStringFn = unsafe extern "C" fn(u32) -> *const c_char;
type CountFn = unsafe extern "C" fn(*mut c_uint) -> u32;
type HandleByIndexFn = unsafe extern "C" fn(c_uint, *mut Device) -> u32;
type DeviceStringFn = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> u32;
type SystemStringFn = unsafe extern "C" fn(*mut c_char, c_uint) -> u32;
type FabricV1Fn = unsafe extern "C" fn(Device, *mut FabricInfoV1) -> u32;
type FabricVFn = unsafe extern "C" fn(Device, *mut FabricInfoV3) -> u32;

/// Why the library cannot be used at all.
#[derive(Debug)]
pub enum LoadError {
    /// `dlopen` failed (the loader's message).
    Open(String),
    /// A required entry point is missing.
    Symbol(&'static str),
}

/// A loaded NVML library and the entry points check-fabric calls.
///
/// The function pointers stay valid because `_library` is kept alive (and
/// never unloaded before them: it is dropped last).
pub struct Nvml {
    init: VoidFn,
    shutdown: VoidFn,
    error_string: ErrorStringFn,
    count: CountFn,
    handle_by_index: HandleByIndexFn,
    uuid: DeviceStringFn,
    driver_version: Option<SystemStringFn>,
    fabric_v1: Option<FabricV1Fn>,
    fabric_versioned: Option<FabricVFn>,
    _library: Library,
}

impl Nvml {
    /// Loads the library through the loader search and resolves its symbols.
    pub fn load() -> Result<Nvml, LoadError> {
        // SAFETY: loading a shared library runs its initialisers; NVML (real
        // or mock) is a plain C library whose initialisers are side-effect free.
        let library =
            unsafe { Library::new(LIBRARY) }.map_err(|err| LoadError::Open(err.to_string()))?;
        let init = required::<VoidFn>(&library, &["nvmlInit_v2", "nvmlInit"])?;
        let shutdown = required::<VoidFn>(&library, &["nvmlShutdown"])?;
        let error_string = required::<ErrorStringFn>(&library, &["nvmlErrorString"])?;
        let count =
            required::<CountFn>(&library, &["nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"])?;
        let handle_by_index = required::<HandleByIndexFn>(
            &library,
            &[
                "nvmlDeviceGetHandleByIndex_v2",
                "nvmlDeviceGetHandleByIndex",
            ],
        )?;
        let uuid = required::<DeviceStringFn>(&library, &["nvmlDeviceGetUUID"])?;
        let driver_version = optional::<SystemStringFn>(&library, "nvmlSystemGetDriverVersion");
        let fabric_v1 = optional::<FabricV1Fn>(&library, "nvmlDeviceGetGpuFabricInfo");
        let fabric_versioned = optional::<FabricVFn>(&library, "nvmlDeviceGetGpuFabricInfoV");
        Ok(Nvml {
            init,
            shutdown,
            error_string,
            count,
            handle_by_index,
            uuid,
            driver_version,
            fabric_v1,
            fabric_versioned,
            _library: library,
        })
    }

    /// `nvmlInit_v2`.
    pub fn init(&self) -> Result<(), Return> {
        // SAFETY: `nvmlInit_v2(void)` takes no arguments.
        check(unsafe { (self.init)() })
    }

    /// `nvmlShutdown`.
    pub fn shutdown(&self) -> Result<(), Return> {
        // SAFETY: `nvmlShutdown(void)` takes no arguments.
        check(unsafe { (self.shutdown)() })
    }

    /// `nvmlErrorString`, or a generic text when the library returns NULL.
    pub fn error_string(&self, code: Return) -> String {
        // SAFETY: any value is a valid argument; the result is NULL or a
        // static NUL-terminated string owned by the library.
        let text = unsafe { (self.error_string)(code.0) };
        if text.is_null() {
            return format!("NVML error {}", code.0);
        }
        // SAFETY: non-NULL, NUL-terminated, and alive while the library is loaded.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }

    /// `nvmlDeviceGetCount_v2`.
    pub fn device_count(&self) -> Result<u32, Return> {
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid, writable `unsigned int`.
        check(unsafe { (self.count)(&mut count) })?;
        Ok(count)
    }

    /// `nvmlDeviceGetHandleByIndex_v2`.
    pub fn handle(&self, index: u32) -> Result<Device, Return> {
        let mut device: Device = std::ptr::null_mut();
        // SAFETY: `device` is a valid, writable `nvmlDevice_t`.
        check(unsafe { (self.handle_by_index)(index, &mut device) })?;
        Ok(device)
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

fn required<T: Copy>(library: &Library, names: &[&'static str]) -> Result<T, LoadError> {
    for name in names {
        if let Some(symbol) = lookup::<T>(library, name) {
            return Ok(symbol);
        }
    }
    Err(LoadError::Symbol(names[0]))
}

fn optional<T: Copy>(library: &Library, name: &str) -> Option<T> {
    lookup(library, name)
}

fn lookup<T: Copy>(library: &Library, name: &str) -> Option<T> {
    // SAFETY: every `T` used here is the `extern "C"` signature nvml.h
    // declares for `name`.
    let symbol: Symbol<'_, T> = unsafe { library.get(name.as_bytes()) }.ok()?;
    Some(*symbol)
}

fn check(code: u32) -> Result<(), Return> {
    match Return(code) {
        Return::SUCCESS => Ok(()),
        err => Err(err),
    }
}

fn buffer_string(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer
        .iter()
        .take_while(|byte| **byte != 0)
        .map(|byte| *byte as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
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

    #[test]
    fn buffer_strings_stop_at_the_first_nul() {
        let mut buffer = [0 as c_char; 8];
        for (slot, byte) in buffer.iter_mut().zip(b"GPU-1\0xy") {
            *slot = *byte as c_char;
        }
        assert_eq!(buffer_string(&buffer), "GPU-1");
        assert_eq!(buffer_string(&[0 as c_char; 4]), "");
    }
}
