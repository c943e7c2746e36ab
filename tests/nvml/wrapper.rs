//! The nvml-wrapper client: loads the mock by path with `Nvml::builder().lib_path(..)`, queries
//! it through the crate's safe API, and builds the same JSON report the pynvml and go-nvml
//! programs print. What nvml-wrapper does not wrap (module id, memory v1, the legacy bus id, the
//! fabric queries) goes through its raw bindings in [`ffi`].

use std::path::Path;

use nvml_wrapper::{
    enum_wrappers::device::{Clock, TemperatureSensor},
    error::NvmlError,
    Device, Nvml,
};
use serde_json::{json, Value};

/// Initialises the library at `library`, reports every GPU, and shuts it down (on drop).
pub fn report(library: &Path) -> Value {
    let nvml = Nvml::builder()
        .lib_path(library.as_os_str())
        .init()
        .unwrap_or_else(|err| panic!("nvml-wrapper cannot init {}: {err}", library.display()));
    let count = nvml.device_count().expect("device_count");
    let devices: Vec<Value> = (0..count)
        .map(|index| {
            let device = nvml.device_by_index(index).expect("device_by_index");
            device_report(&nvml, &device).unwrap_or_else(|err| panic!("GPU {index}: {err}"))
        })
        .collect();
    json!({
        "client": "nvml-wrapper",
        "driver_version": nvml.sys_driver_version().expect("sys_driver_version"),
        "nvml_version": nvml.sys_nvml_version().expect("sys_nvml_version"),
        "cuda_driver_version": nvml.sys_cuda_driver_version().expect("sys_cuda_driver_version"),
        "count": count,
        "devices": devices,
    })
}

fn device_report(nvml: &Nvml, device: &Device<'_>) -> Result<Value, NvmlError> {
    let uuid = device.uuid()?;
    let pci = device.pci_info()?;
    let memory = device.memory_info()?;
    let capability = device.cuda_compute_capability()?;
    let raw = ffi::Raw::new(nvml, device);
    let legacy = raw.pci_info().expect("nvmlDeviceGetPciInfo_v3");
    let v1 = raw.memory_v1().expect("nvmlDeviceGetMemoryInfo");
    Ok(json!({
        "index": device.index()?,
        "uuid": uuid,
        "name": device.name()?,
        "serial": device.serial()?,
        "minor_number": device.minor_number()?,
        "board_id": device.board_id()?,
        "module_id": raw.module_id().expect("nvmlDeviceGetModuleId"),
        "architecture": device.architecture()?.as_c(),
        "brand": device.brand()?.as_c(),
        "compute_capability": [capability.major, capability.minor],
        "by_uuid_index": nvml.device_by_uuid(uuid.as_str())?.index()?,
        "by_pci_index": nvml.device_by_pci_bus_id(pci.bus_id.as_str())?.index()?,
        "pci": {
            "bus_id": pci.bus_id,
            "bus_id_legacy": legacy,
            "domain": pci.domain,
            "bus": pci.bus,
            "device": pci.device,
            "pci_device_id": pci.pci_device_id,
            "pci_subsystem_id": pci.pci_sub_system_id,
        },
        "memory": {"total": v1.0, "free": v1.1, "used": v1.2},
        "memory_v2": {"total": memory.total, "reserved": memory.reserved, "free": memory.free, "used": memory.used},
        "fabric_v1": raw.fabric_v1(),
        "fabric_v2": raw.fabric_v(2),
        "fabric_v3": raw.fabric_v(3),
        "fabric_bad_version": raw.fabric_bad_version(),
        "temperature_c": device.temperature(TemperatureSensor::Gpu)?,
        "power_usage_mw": device.power_usage()?,
        "max_sm_clock": device.max_clock_info(Clock::SM)?,
        "nvlink0_active": match device.link_wrapper_for(0).is_active() {
            Ok(active) => i64::from(active),
            Err(NvmlError::NotSupported) => -3,
            Err(err) => return Err(err),
        },
        "pcie": [device.current_pcie_link_gen()?, device.current_pcie_link_width()?],
    }))
}

/// Raw calls through nvml-wrapper's bindings: the only `unsafe` in the integration tests.
#[allow(unsafe_code)]
mod ffi {
    use std::ffi::CStr;

    use nvml_wrapper::{Device, Nvml};
    use nvml_wrapper_sys::bindings::{
        nvmlDevice_t, nvmlGpuFabricInfoV_t, nvmlGpuFabricInfo_t, nvmlMemory_t, nvmlPciInfo_t,
        NvmlLib,
    };
    use serde_json::{json, Value};

    pub struct Raw<'a> {
        lib: &'a NvmlLib,
        handle: nvmlDevice_t,
    }

    /// The cluster uuid in its dashed form (topology's one printer).
    fn uuid_text(raw: &[u8; 16]) -> String {
        topology::ClusterUuid::from_bytes(*raw).to_string()
    }

    impl<'a> Raw<'a> {
        pub fn new(nvml: &'a Nvml, device: &Device<'a>) -> Raw<'a> {
            // SAFETY: the handle is only passed back to the library that issued it, while
            // `nvml` (and so the library's init) is alive.
            let handle = unsafe { device.handle() };
            Raw {
                lib: nvml.lib(),
                handle,
            }
        }

        pub fn module_id(&self) -> Result<u32, u32> {
            let mut id = 0;
            // SAFETY: valid handle (see `new`) and a live out slot; the mock exports the symbol.
            match unsafe { self.lib.nvmlDeviceGetModuleId(self.handle, &mut id) } {
                0 => Ok(id),
                code => Err(code),
            }
        }

        pub fn memory_v1(&self) -> Result<(u64, u64, u64), u32> {
            let mut memory = nvmlMemory_t {
                total: 0,
                free: 0,
                used: 0,
            };
            // SAFETY: valid handle and a live struct of the binding's type.
            match unsafe { self.lib.nvmlDeviceGetMemoryInfo(self.handle, &mut memory) } {
                0 => Ok((memory.total, memory.free, memory.used)),
                code => Err(code),
            }
        }

        pub fn pci_info(&self) -> Result<String, u32> {
            // SAFETY: an all-zero nvmlPciInfo_t is valid (integers and char arrays).
            let mut info: nvmlPciInfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid handle and a live struct of the binding's type.
            match unsafe { self.lib.nvmlDeviceGetPciInfo_v3(self.handle, &mut info) } {
                // SAFETY: on success the library NUL-terminated busIdLegacy within its 16 bytes.
                0 => Ok(unsafe { CStr::from_ptr(info.busIdLegacy.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()),
                code => Err(code),
            }
        }

        pub fn fabric_v1(&self) -> Value {
            // SAFETY: an all-zero fabric struct is valid (integers and byte arrays).
            let mut info: nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid handle and a live struct of the binding's (v1) type.
            match unsafe { self.lib.nvmlDeviceGetGpuFabricInfo(self.handle, &mut info) } {
                0 => json!({
                    "ret": 0,
                    "cluster_uuid": uuid_text(&info.clusterUuid),
                    "clique_id": info.cliqueId,
                    "state": info.state,
                    "status": info.status,
                }),
                code => json!({"ret": code}),
            }
        }

        /// `nvmlDeviceGetGpuFabricInfoV` with the v2 (36-byte) or v3 (40-byte) tag; the binding's
        /// struct is v3, so either fits.
        pub fn fabric_v(&self, version: u32) -> Value {
            // SAFETY: an all-zero fabric struct is valid (integers and byte arrays).
            let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
            info.version = match version {
                2 => 0x0200_0024,
                _ => 0x0300_0028,
            };
            // SAFETY: valid handle and a live v3-sized struct.
            match unsafe { self.lib.nvmlDeviceGetGpuFabricInfoV(self.handle, &mut info) } {
                0 => {
                    let mut out = json!({
                        "ret": 0,
                        "cluster_uuid": uuid_text(&info.clusterUuid),
                        "clique_id": info.cliqueId,
                        "state": info.state,
                        "status": info.status,
                        "health_mask": info.healthMask,
                    });
                    if version == 3 {
                        out["health_summary"] = json!(info.healthSummary);
                    }
                    out
                }
                code => json!({"ret": code}),
            }
        }

        pub fn fabric_bad_version(&self) -> Value {
            // SAFETY: an all-zero fabric struct is valid (integers and byte arrays).
            let mut info: nvmlGpuFabricInfoV_t = unsafe { std::mem::zeroed() };
            info.version = 0x0100_0028;
            info.cliqueId = 0x5a5a_5a5a;
            let before = (
                info.version,
                info.cliqueId,
                info.clusterUuid,
                info.healthMask,
            );
            // SAFETY: valid handle and a live v3-sized struct.
            let code = unsafe { self.lib.nvmlDeviceGetGpuFabricInfoV(self.handle, &mut info) };
            let after = (
                info.version,
                info.cliqueId,
                info.clusterUuid,
                info.healthMask,
            );
            json!({"ret": code, "untouched": before == after})
        }
    }
}
