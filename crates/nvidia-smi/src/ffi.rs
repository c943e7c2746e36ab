//! The NVML entry points nvidia-smi adds to the shared loader ([`nvml_dl`], `dlopen` of
//! `libnvidia-ml.so.1` with the normal loader search; an `LD_PRELOAD`ed copy is found by its
//! soname). All `unsafe` is here.

#![allow(unsafe_code)]

pub mod mig;

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
type DeviceU32Fn = unsafe extern "C" fn(Device, *mut c_uint) -> u32;
type MemoryFn = unsafe extern "C" fn(Device, *mut MemoryV1) -> u32;
type MemoryV2Fn = unsafe extern "C" fn(Device, *mut MemoryV2) -> u32;
type FabricV1Fn = unsafe extern "C" fn(Device, *mut FabricInfoV1) -> u32;
type FabricVFn = unsafe extern "C" fn(Device, *mut FabricInfoV3) -> u32;
type DeviceArgU32Fn = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> u32;
type PairFn = unsafe extern "C" fn(Device, *mut c_uint, *mut c_uint) -> u32;
type UtilizationFn = unsafe extern "C" fn(Device, *mut [c_uint; 2]) -> u32;
type AddressingFn = unsafe extern "C" fn(Device, *mut [c_uint; 2]) -> u32;

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

/// `NVML_STRUCT_VERSION(name, version)` for a struct of `size` bytes.
const fn struct_version(size: usize, version: u32) -> u32 {
    size as u32 | (version << 24)
}

/// `nvmlMemory_t`.
#[repr(C)]
#[derive(Default)]
struct MemoryV1 {
    total: u64,
    free: u64,
    used: u64,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
#[derive(Default)]
struct MemoryV2 {
    version: c_uint,
    total: u64,
    reserved: u64,
    free: u64,
    used: u64,
}

/// `nvmlGpuFabricInfo_t`.
#[repr(C)]
#[derive(Default)]
struct FabricInfoV1 {
    cluster_uuid: [u8; 16],
    status: u32,
    clique_id: c_uint,
    state: u8,
}

/// `nvmlGpuFabricInfo_v3_t`; `nvmlGpuFabricInfo_v2_t` is its first 36 bytes.
#[repr(C)]
#[derive(Default)]
struct FabricInfoV3 {
    version: c_uint,
    cluster_uuid: [u8; 16],
    status: u32,
    clique_id: c_uint,
    state: u8,
    health_mask: c_uint,
    health_summary: u8,
}

/// `nvmlMemory_v2`.
const MEMORY_V2: u32 = struct_version(size_of::<MemoryV2>(), 2);
/// `nvmlGpuFabricInfo_v3`.
const FABRIC_V3: u32 = struct_version(size_of::<FabricInfoV3>(), 3);
/// `nvmlGpuFabricInfo_v2`: the v3 layout without the trailing summary (and its padding).
const FABRIC_V2: u32 = struct_version(36, 2);

/// `nvmlPciInfo_t`'s numbers and bus id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciFields {
    /// Domain.
    pub domain: u32,
    /// Bus.
    pub bus: u32,
    /// Device.
    pub device: u32,
    /// Device and vendor id.
    pub pci_device_id: u32,
    /// Subsystem id.
    pub pci_sub_system_id: u32,
    /// `busId`.
    pub bus_id: String,
}

/// Framebuffer memory in bytes; `reserved` only from the v2 query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryFields {
    /// Total.
    pub total: u64,
    /// Reserved (v2 only).
    pub reserved: Option<u64>,
    /// Free.
    pub free: u64,
    /// Used.
    pub used: u64,
}

/// Fabric information from whichever version the library answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricFields {
    /// Cluster uuid.
    pub cluster_uuid: [u8; 16],
    /// Probe status (`nvmlReturn_t`).
    pub status: Return,
    /// Clique id.
    pub clique_id: u32,
    /// `nvmlGpuFabricState_t`.
    pub state: u8,
    /// Health mask (v2, v3).
    pub health_mask: Option<u32>,
    /// Health summary (v3).
    pub health_summary: Option<u8>,
}

/// The entry points `-q` adds, each optional: a library without one answers `N/A` for it.
struct Optional {
    brand: Option<DeviceU32Fn>,
    architecture: Option<DeviceU32Fn>,
    persistence_mode: Option<DeviceU32Fn>,
    minor_number: Option<DeviceU32Fn>,
    board_id: Option<DeviceU32Fn>,
    memory: Option<MemoryFn>,
    memory_v2: Option<MemoryV2Fn>,
    fabric: Option<FabricV1Fn>,
    fabric_v: Option<FabricVFn>,
    addressing_mode: Option<AddressingFn>,
    mig_mode: Option<PairFn>,
    ecc_mode: Option<PairFn>,
    compute_mode: Option<DeviceU32Fn>,
    utilization: Option<UtilizationFn>,
    temperature: Option<DeviceArgU32Fn>,
    power_usage: Option<DeviceU32Fn>,
    clock: Option<DeviceArgU32Fn>,
    max_clock: Option<DeviceArgU32Fn>,
    pcie: [Option<DeviceU32Fn>; 4],
}

/// `nvmlClockType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// `NVML_CLOCK_GRAPHICS`.
    Graphics = 0,
    /// `NVML_CLOCK_SM`.
    Sm = 1,
    /// `NVML_CLOCK_MEM`.
    Memory = 2,
    /// `NVML_CLOCK_VIDEO`.
    Video = 3,
}

/// A PCIe link figure, by its getter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// `nvmlDeviceGetMaxPcieLinkGeneration`.
    MaxGen = 0,
    /// `nvmlDeviceGetCurrPcieLinkGeneration`.
    CurrentGen = 1,
    /// `nvmlDeviceGetMaxPcieLinkWidth`.
    MaxWidth = 2,
    /// `nvmlDeviceGetCurrPcieLinkWidth`.
    CurrentWidth = 3,
}

/// `nvmlDeviceAddressingMode_v1`: `{version, value}`.
const ADDRESSING_MODE_V1: u32 = struct_version(8, 1);

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
    optional: Optional,
    mig: mig::MigApi,
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
                optional: Optional {
                    brand: core.optional("nvmlDeviceGetBrand"),
                    architecture: core.optional("nvmlDeviceGetArchitecture"),
                    persistence_mode: core.optional("nvmlDeviceGetPersistenceMode"),
                    minor_number: core.optional("nvmlDeviceGetMinorNumber"),
                    board_id: core.optional("nvmlDeviceGetBoardId"),
                    memory: core.optional("nvmlDeviceGetMemoryInfo"),
                    memory_v2: core.optional("nvmlDeviceGetMemoryInfo_v2"),
                    fabric: core.optional("nvmlDeviceGetGpuFabricInfo"),
                    fabric_v: core.optional("nvmlDeviceGetGpuFabricInfoV"),
                    addressing_mode: core.optional("nvmlDeviceGetAddressingMode"),
                    mig_mode: core.optional("nvmlDeviceGetMigMode"),
                    ecc_mode: core.optional("nvmlDeviceGetEccMode"),
                    compute_mode: core.optional("nvmlDeviceGetComputeMode"),
                    utilization: core.optional("nvmlDeviceGetUtilizationRates"),
                    temperature: core.optional("nvmlDeviceGetTemperature"),
                    power_usage: core.optional("nvmlDeviceGetPowerUsage"),
                    clock: core.optional("nvmlDeviceGetClockInfo"),
                    max_clock: core.optional("nvmlDeviceGetMaxClockInfo"),
                    pcie: [
                        core.optional("nvmlDeviceGetMaxPcieLinkGeneration"),
                        core.optional("nvmlDeviceGetCurrPcieLinkGeneration"),
                        core.optional("nvmlDeviceGetMaxPcieLinkWidth"),
                        core.optional("nvmlDeviceGetCurrPcieLinkWidth"),
                    ],
                },
                mig: mig::MigApi::load(&core),
                core,
            })
        }
    }

    /// The MIG entry points.
    pub fn mig(&self) -> &mig::MigApi {
        &self.mig
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
        Ok(self.pci(device)?.bus_id)
    }

    /// `nvmlDeviceGetPciInfo_v3`.
    pub fn pci(&self, device: Device) -> Result<PciFields, Return> {
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
        Ok(PciFields {
            domain: info.domain,
            bus: info.bus,
            device: info.device,
            pci_device_id: info.pci_device_id,
            pci_sub_system_id: info.pci_sub_system_id,
            bus_id: buffer_string(&info.bus_id),
        })
    }

    /// `nvmlDeviceGetBrand` (`nvmlBrandType_t`).
    pub fn brand(&self, device: Device) -> Result<u32, Return> {
        device_u32(self.optional.brand, device)
    }

    /// `nvmlDeviceGetArchitecture` (`nvmlDeviceArchitecture_t`).
    pub fn architecture(&self, device: Device) -> Result<u32, Return> {
        device_u32(self.optional.architecture, device)
    }

    /// `nvmlDeviceGetPersistenceMode` (`nvmlEnableState_t`: 1 enabled).
    pub fn persistence_mode(&self, device: Device) -> Result<bool, Return> {
        Ok(device_u32(self.optional.persistence_mode, device)? == 1)
    }

    /// `nvmlDeviceGetMinorNumber`.
    pub fn minor_number(&self, device: Device) -> Result<u32, Return> {
        device_u32(self.optional.minor_number, device)
    }

    /// `nvmlDeviceGetBoardId`.
    pub fn board_id(&self, device: Device) -> Result<u32, Return> {
        device_u32(self.optional.board_id, device)
    }

    /// `nvmlDeviceGetMemoryInfo_v2`; `nvmlDeviceGetMemoryInfo` when v2 is missing or refuses
    /// the version.
    pub fn memory(&self, device: Device) -> Result<MemoryFields, Return> {
        if let Some(function) = self.optional.memory_v2 {
            let mut memory = MemoryV2 {
                version: MEMORY_V2,
                ..MemoryV2::default()
            };
            // SAFETY: `memory` is a valid, writable `nvmlMemory_v2_t` with its version set.
            match check(unsafe { function(device, &mut memory) }) {
                Ok(()) => {
                    return Ok(MemoryFields {
                        total: memory.total,
                        reserved: Some(memory.reserved),
                        free: memory.free,
                        used: memory.used,
                    })
                }
                Err(Return::ARGUMENT_VERSION_MISMATCH) => {}
                Err(code) => return Err(code),
            }
        }
        let function = self.optional.memory.ok_or(Return::NOT_SUPPORTED)?;
        let mut memory = MemoryV1::default();
        // SAFETY: `memory` is a valid, writable `nvmlMemory_t`.
        check(unsafe { function(device, &mut memory) })?;
        Ok(MemoryFields {
            total: memory.total,
            reserved: None,
            free: memory.free,
            used: memory.used,
        })
    }

    /// `nvmlDeviceGetGpuFabricInfoV` with v3, then v2 on a version mismatch; without it,
    /// `nvmlDeviceGetGpuFabricInfo`.
    pub fn fabric(&self, device: Device) -> Result<FabricFields, Return> {
        let Some(function) = self.optional.fabric_v else {
            return self.fabric_v1(device);
        };
        for version in [FABRIC_V3, FABRIC_V2] {
            let mut info = FabricInfoV3 {
                version,
                ..FabricInfoV3::default()
            };
            // SAFETY: `info` is a valid, writable v3 struct; a v2 answer writes its prefix.
            match check(unsafe { function(device, &mut info) }) {
                Ok(()) => {
                    return Ok(FabricFields {
                        cluster_uuid: info.cluster_uuid,
                        status: Return(info.status),
                        clique_id: info.clique_id,
                        state: info.state,
                        health_mask: Some(info.health_mask),
                        health_summary: (version == FABRIC_V3).then_some(info.health_summary),
                    })
                }
                Err(Return::ARGUMENT_VERSION_MISMATCH) => continue,
                Err(code) => return Err(code),
            }
        }
        Err(Return::ARGUMENT_VERSION_MISMATCH)
    }

    /// `nvmlDeviceGetAddressingMode` (`NVML_DEVICE_ADDRESSING_MODE_*`).
    pub fn addressing_mode(&self, device: Device) -> Result<u32, Return> {
        let function = self.optional.addressing_mode.ok_or(Return::NOT_SUPPORTED)?;
        let mut mode = [ADDRESSING_MODE_V1, 0];
        // SAFETY: `mode` is a valid, writable `nvmlDeviceAddressingMode_t` with its version set.
        check(unsafe { function(device, &mut mode) })?;
        Ok(mode[1])
    }

    /// `nvmlDeviceGetMigMode`: (current, pending), 1 enabled.
    pub fn mig_mode(&self, device: Device) -> Result<(u32, u32), Return> {
        pair(self.optional.mig_mode, device)
    }

    /// `nvmlDeviceGetEccMode`: (current, pending), 1 enabled.
    pub fn ecc_mode(&self, device: Device) -> Result<(u32, u32), Return> {
        pair(self.optional.ecc_mode, device)
    }

    /// `nvmlDeviceGetComputeMode` (`nvmlComputeMode_t`).
    pub fn compute_mode(&self, device: Device) -> Result<u32, Return> {
        device_u32(self.optional.compute_mode, device)
    }

    /// `nvmlDeviceGetUtilizationRates`: (gpu %, memory %).
    pub fn utilization(&self, device: Device) -> Result<(u32, u32), Return> {
        let function = self.optional.utilization.ok_or(Return::NOT_SUPPORTED)?;
        let mut rates = [0; 2];
        // SAFETY: `rates` has `nvmlUtilization_t`'s layout (two unsigned ints) and is writable.
        check(unsafe { function(device, &mut rates) })?;
        Ok((rates[0], rates[1]))
    }

    /// `nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)`, °C.
    pub fn temperature(&self, device: Device) -> Result<u32, Return> {
        device_arg_u32(self.optional.temperature, device, 0)
    }

    /// `nvmlDeviceGetPowerUsage`, milliwatts.
    pub fn power_usage(&self, device: Device) -> Result<u32, Return> {
        device_u32(self.optional.power_usage, device)
    }

    /// `nvmlDeviceGetClockInfo`, MHz.
    pub fn clock(&self, device: Device, clock: Clock) -> Result<u32, Return> {
        device_arg_u32(self.optional.clock, device, clock as c_uint)
    }

    /// `nvmlDeviceGetMaxClockInfo`, MHz.
    pub fn max_clock(&self, device: Device, clock: Clock) -> Result<u32, Return> {
        device_arg_u32(self.optional.max_clock, device, clock as c_uint)
    }

    /// A PCIe link generation or width.
    pub fn link(&self, device: Device, link: Link) -> Result<u32, Return> {
        device_u32(self.optional.pcie[link as usize], device)
    }

    fn fabric_v1(&self, device: Device) -> Result<FabricFields, Return> {
        let function = self.optional.fabric.ok_or(Return::NOT_SUPPORTED)?;
        let mut info = FabricInfoV1::default();
        // SAFETY: `info` is a valid, writable `nvmlGpuFabricInfo_t`.
        check(unsafe { function(device, &mut info) })?;
        Ok(FabricFields {
            cluster_uuid: info.cluster_uuid,
            status: Return(info.status),
            clique_id: info.clique_id,
            state: info.state,
            health_mask: None,
            health_summary: None,
        })
    }
}

/// An optional `(device, unsigned int *)` getter; NOT_SUPPORTED when the library lacks it.
fn device_u32(function: Option<DeviceU32Fn>, device: Device) -> Result<u32, Return> {
    let function = function.ok_or(Return::NOT_SUPPORTED)?;
    let mut value: c_uint = 0;
    // SAFETY: `value` is a valid out slot; the library validates the handle.
    check(unsafe { function(device, &mut value) })?;
    Ok(value)
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

/// An optional `(device, unsigned int, unsigned int *)` getter.
fn device_arg_u32(
    function: Option<DeviceArgU32Fn>,
    device: Device,
    arg: c_uint,
) -> Result<u32, Return> {
    let function = function.ok_or(Return::NOT_SUPPORTED)?;
    let mut value: c_uint = 0;
    // SAFETY: `value` is a valid out slot; the library validates the handle and the argument.
    check(unsafe { function(device, arg, &mut value) })?;
    Ok(value)
}

/// An optional `(device, unsigned int *, unsigned int *)` getter (current and pending modes).
fn pair(function: Option<PairFn>, device: Device) -> Result<(u32, u32), Return> {
    let function = function.ok_or(Return::NOT_SUPPORTED)?;
    let (mut first, mut second): (c_uint, c_uint) = (0, 0);
    // SAFETY: both are valid out slots; the library validates the handle.
    check(unsafe { function(device, &mut first, &mut second) })?;
    Ok((first, second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_are_nvml_h_sized() {
        assert_eq!(size_of::<PciInfo>(), 68);
        assert_eq!(size_of::<MemoryV1>(), 24);
        assert_eq!(size_of::<MemoryV2>(), 40);
        assert_eq!(size_of::<FabricInfoV1>(), 28);
        assert_eq!(size_of::<FabricInfoV3>(), 40);
        assert_eq!(std::mem::offset_of!(FabricInfoV3, health_mask), 32);
        assert_eq!(std::mem::offset_of!(FabricInfoV3, health_summary), 36);
        assert_eq!(MEMORY_V2, 0x0200_0028);
        assert_eq!(FABRIC_V3, 0x0300_0028);
        assert_eq!(FABRIC_V2, 0x0200_0024);
    }
}
