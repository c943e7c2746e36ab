//! The NVML entry points nvidia-smi calls, through `dlopen("libnvidia-ml.so.1")` with the
//! normal loader search (an `LD_PRELOAD`ed copy is found by its soname). All `unsafe` is here.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

use libloading::Library;

/// The library's name, as every NVML consumer loads it.
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// `nvmlDevice_t`.
pub type Device = *mut c_void;

/// An `nvmlReturn_t` other than SUCCESS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Return(pub u32);

/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE` and `NVML_DEVICE_UUID_V2_BUFFER_SIZE` (the largest).
const BUFFER: usize = 96;

type VoidFn = unsafe extern "C" fn() -> u32;
type ErrorStringFn = unsafe extern "C" fn(u32) -> *const c_char;
type CountFn = unsafe extern "C" fn(*mut c_uint) -> u32;
type IntFn = unsafe extern "C" fn(*mut c_int) -> u32;
type HandleByIndexFn = unsafe extern "C" fn(c_uint, *mut Device) -> u32;
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

/// A loaded NVML library; the function pointers stay valid while `_library` lives.
pub struct Nvml {
    init: VoidFn,
    shutdown: VoidFn,
    error_string: ErrorStringFn,
    count: CountFn,
    handle_by_index: HandleByIndexFn,
    driver_version: SystemStringFn,
    nvml_version: SystemStringFn,
    cuda_version: IntFn,
    name: DeviceStringFn,
    uuid: DeviceStringFn,
    serial: DeviceStringFn,
    pci_info: PciInfoFn,
    _library: Library,
}

impl Nvml {
    /// Loads the library; the loader's message, or the missing symbol, on failure.
    pub fn load() -> Result<Nvml, String> {
        // SAFETY: loading a shared library runs its initialisers; NVML (real or mock) is a
        // plain C library whose initialisers are side-effect free.
        let library = unsafe { Library::new(LIBRARY) }.map_err(|err| err.to_string())?;
        Ok(Nvml {
            init: symbol(&library, "nvmlInit_v2")?,
            shutdown: symbol(&library, "nvmlShutdown")?,
            error_string: symbol(&library, "nvmlErrorString")?,
            count: symbol(&library, "nvmlDeviceGetCount_v2")?,
            handle_by_index: symbol(&library, "nvmlDeviceGetHandleByIndex_v2")?,
            driver_version: symbol(&library, "nvmlSystemGetDriverVersion")?,
            nvml_version: symbol(&library, "nvmlSystemGetNVMLVersion")?,
            cuda_version: symbol(&library, "nvmlSystemGetCudaDriverVersion")?,
            name: symbol(&library, "nvmlDeviceGetName")?,
            uuid: symbol(&library, "nvmlDeviceGetUUID")?,
            serial: symbol(&library, "nvmlDeviceGetSerial")?,
            pci_info: symbol(&library, "nvmlDeviceGetPciInfo_v3")?,
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

    /// `nvmlErrorString`.
    pub fn error_string(&self, code: Return) -> String {
        // SAFETY: takes any code and returns NULL or a static NUL-terminated string.
        let text = unsafe { (self.error_string)(code.0) };
        if text.is_null() {
            return format!("error {}", code.0);
        }
        // SAFETY: non-NULL, NUL-terminated and static, per nvml.h.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }

    /// `nvmlDeviceGetCount_v2`.
    pub fn count(&self) -> Result<u32, Return> {
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid out slot.
        check(unsafe { (self.count)(&mut count) })?;
        Ok(count)
    }

    /// `nvmlDeviceGetHandleByIndex_v2`.
    pub fn handle(&self, index: u32) -> Result<Device, Return> {
        let mut device: Device = std::ptr::null_mut();
        // SAFETY: `device` is a valid out slot.
        check(unsafe { (self.handle_by_index)(index, &mut device) })?;
        Ok(device)
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

fn symbol<T: Copy>(library: &Library, name: &'static str) -> Result<T, String> {
    // SAFETY: every `T` used with this helper is the C signature nvml.h declares for `name`.
    unsafe { library.get::<T>(name.as_bytes()) }
        .map(|symbol| *symbol)
        .map_err(|_| format!("{LIBRARY} has no {name}"))
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

fn check(code: u32) -> Result<(), Return> {
    match code {
        0 => Ok(()),
        code => Err(Return(code)),
    }
}

/// The text up to the first NUL (all of it if there is none).
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
    use super::*;

    #[test]
    fn pci_info_is_nvml_h_sized() {
        assert_eq!(size_of::<PciInfo>(), 68);
    }

    #[test]
    fn buffers_stop_at_the_first_nul() {
        let buffer = [b'a' as c_char, b'b' as c_char, 0, b'c' as c_char];
        assert_eq!(buffer_string(&buffer), "ab");
        assert_eq!(buffer_string(&[b'x' as c_char; 3]), "xxx");
    }
}
