//! The NVML entry points nvidia-smi adds to the shared loader ([`nvml_dl`], `dlopen` of
//! `libnvidia-ml.so.1` with the normal loader search; an `LD_PRELOAD`ed copy is found by its
//! soname). All `unsafe` is here.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint};
use std::ops::Deref;

use nvml_dl::{buffer_string, check, Core, LoadError, Names};
pub use nvml_dl::{Device, Return, LIBRARY};

/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE` and `NVML_DEVICE_UUID_V2_BUFFER_SIZE` (the largest).
const BUFFER: usize = 96;

type IntFn = unsafe extern "C" fn(*mut c_int) -> u32;
type DeviceStringFn = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> u32;
type SystemStringFn = unsafe extern "C" fn(*mut c_char, c_uint) -> u32;
type PciInfoFn = unsafe extern "C" fn(Device, *mut PciInfo) -> u32;

/// `nvmlPciInfo_t`, 68 bytes.
#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

/// A loaded NVML library (the common entry points through [`Core`], which it derefs to).
pub struct Nvml {
    core: Core,
    driver_version: SystemStringFn,
    nvml_version: SystemStringFn,
    cuda_version: IntFn,
    name: DeviceStringFn,
    uuid: DeviceStringFn,
    serial: DeviceStringFn,
    pci_info: PciInfoFn,
}

impl Deref for Nvml {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Nvml {
    /// Loads the library (the `_v2` names only); the loader's message, or the missing symbol,
    /// on failure.
    pub fn load() -> Result<Nvml, String> {
        let core = Core::load(Names::V2).map_err(message)?;
        // SAFETY: each field's type is the C signature nvml.h declares for the name.
        unsafe {
            Ok(Nvml {
                driver_version: symbol(&core, "nvmlSystemGetDriverVersion")?,
                nvml_version: symbol(&core, "nvmlSystemGetNVMLVersion")?,
                cuda_version: symbol(&core, "nvmlSystemGetCudaDriverVersion")?,
                name: symbol(&core, "nvmlDeviceGetName")?,
                uuid: symbol(&core, "nvmlDeviceGetUUID")?,
                serial: symbol(&core, "nvmlDeviceGetSerial")?,
                pci_info: symbol(&core, "nvmlDeviceGetPciInfo_v3")?,
                core,
            })
        }
    }

    /// `nvmlErrorString`.
    pub fn error_string(&self, code: Return) -> String {
        self.core
            .error_string(code)
            .unwrap_or_else(|| format!("error {}", code.0))
    }

    /// `nvmlSystemGetDriverVersion`.
    pub fn driver_version(&self) -> Result<String, Return> {
        system_string(self.driver_version)
    }

    /// `nvmlSystemGetNVMLVersion`.
    pub fn nvml_version(&self) -> Result<String, Return> {
        system_string(self.nvml_version)
    }

    /// `nvmlSystemGetCudaDriverVersion` (`major * 1000 + minor * 10`).
    pub fn cuda_version(&self) -> Result<i32, Return> {
        let mut version: c_int = 0;
        // SAFETY: `version` is a valid out slot.
        check(unsafe { (self.cuda_version)(&mut version) })?;
        Ok(version)
    }

    /// `nvmlDeviceGetName`.
    pub fn name(&self, device: Device) -> Result<String, Return> {
        device_string(self.name, device)
    }

    /// `nvmlDeviceGetUUID`.
    pub fn uuid(&self, device: Device) -> Result<String, Return> {
        device_string(self.uuid, device)
    }

    /// `nvmlDeviceGetSerial`.
    pub fn serial(&self, device: Device) -> Result<String, Return> {
        device_string(self.serial, device)
    }

    /// `nvmlDeviceGetPciInfo_v3`: the bus id (`00000000:01:00.0`).
    pub fn pci_bus_id(&self, device: Device) -> Result<String, Return> {
        let mut info = PciInfo {
            bus_id_legacy: [0; 16],
            domain: 0,
            bus: 0,
            device: 0,
            pci_device_id: 0,
            pci_sub_system_id: 0,
            bus_id: [0; 32],
        };
        // SAFETY: `info` is a valid, writable `nvmlPciInfo_t`.
        check(unsafe { (self.pci_info)(device, &mut info) })?;
        Ok(buffer_string(&info.bus_id))
    }
}

/// `name` from the library, or the message naming it.
///
/// # Safety
/// `T` must be the C signature nvml.h declares for `name`.
unsafe fn symbol<T: Copy>(core: &Core, name: &'static str) -> Result<T, String> {
    // SAFETY: forwarded from this function's contract.
    unsafe { core.required(&[name]) }.map_err(message)
}

/// The text nvidia-smi prints when the library cannot be used.
fn message(error: LoadError) -> String {
    match error {
        LoadError::Open(text) => text,
        LoadError::Symbol(name) => format!("{LIBRARY} has no {name}"),
    }
}

fn system_string(function: SystemStringFn) -> Result<String, Return> {
    let mut buffer = [0 as c_char; BUFFER];
    // SAFETY: the buffer is valid for `BUFFER` bytes.
    check(unsafe { function(buffer.as_mut_ptr(), BUFFER as c_uint) })?;
    Ok(buffer_string(&buffer))
}

fn device_string(function: DeviceStringFn, device: Device) -> Result<String, Return> {
    let mut buffer = [0 as c_char; BUFFER];
    // SAFETY: the buffer is valid for `BUFFER` bytes; the library validates the handle.
    check(unsafe { function(device, buffer.as_mut_ptr(), BUFFER as c_uint) })?;
    Ok(buffer_string(&buffer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_info_is_nvml_h_sized() {
        assert_eq!(size_of::<PciInfo>(), 68);
    }
}
