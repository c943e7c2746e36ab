//! Table-driven ABI tests: every export is called uninitialised, with NULL outputs, with foreign
//! handles, with short buffers and correctly, through the same `extern "C"` functions C sees.
//!
//! The library state is process-wide, so the tests take [`LOCK`] and set the environment while
//! holding it.

use std::{
    ffi::{c_char, c_int, c_uint, CStr},
    ptr::{null, null_mut},
    sync::MutexGuard,
};

use nvml_profile::{Profile, GB200, H100};
use test_support::staged::{profile_bytes, topology_bytes};

use super::*;

use crate::ENV_LOCK as LOCK;
use crate::{
    abi::{self, NvmlReturn},
    state,
};

/// Holds the lock, a profile on disk (staged from the YAML given) and the environment pointing
/// at it; shuts down on drop.
pub(super) struct Session {
    _lock: MutexGuard<'static, ()>,
    _dir: tempfile::TempDir,
}

impl Session {
    pub(super) fn new(profile: &str, topology: Option<(&str, &str)>) -> Session {
        let lock = LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while nvmlShutdown() == abi::SUCCESS {}
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("profile.bin");
        std::fs::write(&config, profile_bytes(profile)).unwrap();
        std::env::set_var("MOCK_NVML_CONFIG", &config);
        std::env::remove_var("MOCK_NVML_STRICT");
        std::env::remove_var(node_layout::env::MOCK_NVML_XID_FILE);
        std::env::remove_var(node_layout::env::MOCK_NVML_DEV_ROOT);
        // Each session's MIG partition starts empty (the store outlives shutdowns, as the
        // node's does).
        std::env::set_var(
            node_layout::env::MOCK_NVML_MIG_STATE,
            dir.path().join("mig-state"),
        );
        match topology {
            Some((text, node)) => {
                let path = dir.path().join("topology.bin");
                std::fs::write(&path, topology_bytes(text)).unwrap();
                std::env::set_var("MOCK_TOPOLOGY_CONFIG", &path);
                std::env::set_var("NODE_NAME", node);
            }
            None => {
                std::env::remove_var("MOCK_TOPOLOGY_CONFIG");
                std::env::remove_var("NODE_NAME");
            }
        }
        Session {
            _lock: lock,
            _dir: dir,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        while nvmlShutdown() == abi::SUCCESS {}
    }
}

pub(super) fn handle(index: c_uint) -> nvmlDevice_t {
    let mut device = null_mut();
    // SAFETY: `device` is a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByIndex_v2(index, &mut device) },
        abi::SUCCESS
    );
    device
}

/// The slot address of device 0, valid whether or not the library is initialised.
pub(super) fn slot0() -> nvmlDevice_t {
    state::handle(0).unwrap().cast_mut().cast()
}

/// Device handles the library never issued: NULL, a small integer, the address of `local`, a
/// misaligned slot address and slot `unissued` (in the slot array, but never handed out).
pub(super) fn foreign_handles(local: &[u64; 8], unissued: usize) -> [nvmlDevice_t; 5] {
    [
        null_mut(),
        8 as nvmlDevice_t,
        local.as_ptr().cast_mut().cast(),
        (slot0() as usize + 1) as nvmlDevice_t,
        state::handle(unissued).unwrap().cast_mut().cast(),
    ]
}

/// How a table entry is called.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Mode {
    /// Valid outputs and buffers.
    Valid,
    /// Every output pointer NULL.
    Null,
    /// String buffers one byte too short.
    Short,
}

struct Entry {
    name: &'static str,
    /// Whether the first argument is a device handle.
    takes_handle: bool,
    /// Whether the function writes a string (so has a short-buffer case).
    writes_string: bool,
    call: fn(nvmlDevice_t, Mode) -> NvmlReturn,
}

pub(super) fn out<T>(slot: &mut T, mode: Mode) -> *mut T {
    match mode {
        Mode::Null => null_mut(),
        _ => slot,
    }
}

/// Calls a string export with a buffer exactly as long as NVML's documented maximum, or with
/// `length = strlen` (one byte short) in [`Mode::Short`].
fn string_call(mode: Mode, call: impl Fn(*mut c_char, c_uint) -> NvmlReturn) -> NvmlReturn {
    let mut buffer = [0x55 as c_char; 96];
    match mode {
        Mode::Null => call(null_mut(), 96),
        Mode::Valid => call(buffer.as_mut_ptr(), 96),
        Mode::Short => {
            let code = call(buffer.as_mut_ptr(), 96);
            assert_eq!(code, abi::SUCCESS, "the full-size call must succeed first");
            // SAFETY: the successful call NUL-terminated the buffer.
            let len = unsafe { CStr::from_ptr(buffer.as_ptr()) }.to_bytes().len() as c_uint;
            let mut fresh = [0x55 as c_char; 96];
            let code = call(fresh.as_mut_ptr(), len);
            assert!(
                fresh.iter().all(|byte| *byte == 0x55),
                "a short buffer must be left untouched"
            );
            code
        }
    }
}

macro_rules! entry {
    ($name:ident, handle, string, |$device:ident, $mode:ident| $body:expr) => {
        Entry {
            name: stringify!($name),
            takes_handle: true,
            writes_string: true,
            call: |$device, $mode| $body,
        }
    };
    ($name:ident, handle, |$device:ident, $mode:ident| $body:expr) => {
        Entry {
            name: stringify!($name),
            takes_handle: true,
            writes_string: false,
            call: |$device, $mode| $body,
        }
    };
    ($name:ident, string, |$device:ident, $mode:ident| $body:expr) => {
        Entry {
            name: stringify!($name),
            takes_handle: false,
            writes_string: true,
            call: |$device, $mode| $body,
        }
    };
    ($name:ident, |$device:ident, $mode:ident| $body:expr) => {
        Entry {
            name: stringify!($name),
            takes_handle: false,
            writes_string: false,
            call: |$device, $mode| $body,
        }
    };
}

/// A one-output export `f(device, *mut T)`.
macro_rules! scalar {
    ($name:ident, $ty:ty) => {
        entry!($name, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct or integer.
            let mut value: $ty = unsafe { std::mem::zeroed() };
            // SAFETY: `out` is NULL or points at `value`.
            unsafe { $name(device, out(&mut value, mode)) }
        })
    };
}

/// A per-link export `f(device, link 3, *mut T)`.
macro_rules! link {
    ($name:ident, $ty:ty) => {
        entry!($name, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct or integer.
            let mut value: $ty = unsafe { std::mem::zeroed() };
            // SAFETY: `out` is NULL or points at `value`.
            unsafe { $name(device, 3, out(&mut value, mode)) }
        })
    };
}

/// A string export `f(device, char *, unsigned)`.
macro_rules! device_string {
    ($name:ident) => {
        // SAFETY: the buffer is valid for the length passed (see `string_call`).
        entry!($name, handle, string, |device, mode| string_call(
            mode,
            |buffer, length| unsafe { $name(device, buffer, length) }
        ))
    };
}

fn table() -> Vec<Entry> {
    let mut table = vec![
        entry!(nvmlInit, |_device, _mode| nvmlInit()),
        entry!(nvmlInit_v2, |_device, _mode| nvmlInit_v2()),
        entry!(nvmlInitWithFlags, |_device, _mode| nvmlInitWithFlags(1)),
        entry!(nvmlShutdown, |_device, _mode| nvmlShutdown()),
        entry!(nvmlErrorString, |_device, _mode| {
            assert!(!nvmlErrorString(abi::ERROR_NOT_SUPPORTED).is_null());
            abi::SUCCESS
        }),
        // SAFETY: the buffer is valid for the length passed (see `string_call`).
        entry!(nvmlSystemGetDriverVersion, string, |_device, mode| {
            string_call(mode, |buffer, length| unsafe {
                nvmlSystemGetDriverVersion(buffer, length)
            })
        }),
        // SAFETY: as above.
        entry!(nvmlSystemGetNVMLVersion, string, |_device, mode| {
            string_call(mode, |buffer, length| unsafe {
                nvmlSystemGetNVMLVersion(buffer, length)
            })
        }),
        entry!(nvmlSystemGetCudaDriverVersion, |_device, mode| {
            let mut value: c_int = 0;
            // SAFETY: NULL or a valid int.
            unsafe { nvmlSystemGetCudaDriverVersion(out(&mut value, mode)) }
        }),
        entry!(nvmlSystemGetCudaDriverVersion_v2, |_device, mode| {
            let mut value: c_int = 0;
            // SAFETY: NULL or a valid int.
            unsafe { nvmlSystemGetCudaDriverVersion_v2(out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetCount, |_device, mode| {
            let mut value: c_uint = 0;
            // SAFETY: NULL or a valid unsigned.
            unsafe { nvmlDeviceGetCount(out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetCount_v2, |_device, mode| {
            let mut value: c_uint = 0;
            // SAFETY: NULL or a valid unsigned.
            unsafe { nvmlDeviceGetCount_v2(out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetHandleByIndex, |_device, mode| {
            let mut value = null_mut();
            // SAFETY: NULL or a valid handle slot.
            unsafe { nvmlDeviceGetHandleByIndex(0, out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetHandleByIndex_v2, |_device, mode| {
            let mut value = null_mut();
            // SAFETY: NULL or a valid handle slot.
            unsafe { nvmlDeviceGetHandleByIndex_v2(0, out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetHandleByUUID, |_device, mode| {
            let mut value = null_mut();
            let uuid =
                std::ffi::CString::new(Profile::parse(GB200).unwrap().devices()[1].uuid.clone())
                    .unwrap();
            let uuid = if mode == Mode::Null {
                null()
            } else {
                uuid.as_ptr()
            };
            // SAFETY: NULL or a NUL-terminated string; NULL or a valid handle slot.
            unsafe { nvmlDeviceGetHandleByUUID(uuid, out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetHandleByPciBusId, |_device, mode| {
            let mut value = null_mut();
            let bus_id = if mode == Mode::Null {
                null()
            } else {
                c"0000:4a:00.0".as_ptr()
            };
            // SAFETY: NULL or a NUL-terminated string; NULL or a valid handle slot.
            unsafe { nvmlDeviceGetHandleByPciBusId(bus_id, out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetHandleByPciBusId_v2, |_device, mode| {
            let mut value = null_mut();
            let bus_id = if mode == Mode::Null {
                null()
            } else {
                c"00000000:4A:00.0".as_ptr()
            };
            // SAFETY: NULL or a NUL-terminated string; NULL or a valid handle slot.
            unsafe { nvmlDeviceGetHandleByPciBusId_v2(bus_id, out(&mut value, mode)) }
        }),
        scalar!(nvmlDeviceGetIndex, c_uint),
        scalar!(nvmlDeviceGetMinorNumber, c_uint),
        scalar!(nvmlDeviceGetBoardId, c_uint),
        scalar!(nvmlDeviceGetModuleId, c_uint),
        scalar!(nvmlDeviceGetBrand, c_uint),
        scalar!(nvmlDeviceGetArchitecture, c_uint),
        scalar!(nvmlDeviceGetPersistenceMode, c_uint),
        scalar!(nvmlDeviceGetComputeMode, c_uint),
        scalar!(nvmlDeviceGetPowerUsage, c_uint),
        scalar!(nvmlDeviceGetCurrPcieLinkGeneration, c_uint),
        scalar!(nvmlDeviceGetCurrPcieLinkWidth, c_uint),
        scalar!(nvmlDeviceGetMaxPcieLinkGeneration, c_uint),
        scalar!(nvmlDeviceGetMaxPcieLinkWidth, c_uint),
        device_string!(nvmlDeviceGetUUID),
        device_string!(nvmlDeviceGetName),
        device_string!(nvmlDeviceGetSerial),
        scalar!(nvmlDeviceGetPciInfo, crate::activity_abi::PciInfoV1),
        scalar!(nvmlDeviceGetPciInfo_v2, abi::PciInfo),
        scalar!(nvmlDeviceGetPciInfo_v3, abi::PciInfo),
        scalar!(nvmlDeviceGetMemoryInfo, abi::Memory),
        entry!(nvmlDeviceGetMemoryInfo_v2, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: abi::MemoryV2 = unsafe { std::mem::zeroed() };
            value.version = abi::MEMORY_V2;
            // SAFETY: NULL or a valid struct.
            unsafe { nvmlDeviceGetMemoryInfo_v2(device, out(&mut value, mode)) }
        }),
        entry!(
            nvmlDeviceGetCudaComputeCapability,
            handle,
            |device, mode| {
                let (mut major, mut minor): (c_int, c_int) = (0, 0);
                // SAFETY: NULL or valid ints.
                unsafe {
                    nvmlDeviceGetCudaComputeCapability(
                        device,
                        out(&mut major, mode),
                        out(&mut minor, mode),
                    )
                }
            }
        ),
        entry!(nvmlDeviceGetMigMode, handle, |device, mode| {
            let (mut current, mut pending): (c_uint, c_uint) = (9, 9);
            // SAFETY: NULL or valid unsigneds.
            unsafe {
                nvmlDeviceGetMigMode(device, out(&mut current, mode), out(&mut pending, mode))
            }
        }),
        entry!(nvmlDeviceGetEccMode, handle, |device, mode| {
            let (mut current, mut pending): (c_uint, c_uint) = (9, 9);
            // SAFETY: NULL or valid unsigneds.
            unsafe {
                nvmlDeviceGetEccMode(device, out(&mut current, mode), out(&mut pending, mode))
            }
        }),
        entry!(nvmlDeviceGetTemperature, handle, |device, mode| {
            let mut value: c_uint = 0;
            // SAFETY: NULL or a valid unsigned.
            unsafe { nvmlDeviceGetTemperature(device, 0, out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetClockInfo, handle, |device, mode| {
            let mut value: c_uint = 0;
            // SAFETY: NULL or a valid unsigned.
            unsafe { nvmlDeviceGetClockInfo(device, 1, out(&mut value, mode)) }
        }),
        entry!(nvmlDeviceGetMaxClockInfo, handle, |device, mode| {
            let mut value: c_uint = 0;
            // SAFETY: NULL or a valid unsigned.
            unsafe { nvmlDeviceGetMaxClockInfo(device, 2, out(&mut value, mode)) }
        }),
        scalar!(nvmlDeviceGetUtilizationRates, abi::Utilization),
        scalar!(nvmlDeviceGetGpuFabricInfo, abi::GpuFabricInfo),
        entry!(nvmlDeviceGetGpuFabricInfoV, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: abi::GpuFabricInfoV3 = unsafe { std::mem::zeroed() };
            value.version = abi::GPU_FABRIC_INFO_V3;
            // SAFETY: NULL or a valid v3 struct.
            unsafe { nvmlDeviceGetGpuFabricInfoV(device, out(&mut value, mode)) }
        }),
        scalar!(nvmlDeviceGetMaxMigDeviceCount, c_uint),
        // MIG is disabled on gb200, so the valid call is NOT_FOUND (see `mig_on_gb200`); the
        // table's Valid mode asks for what succeeds: the NULL and handle checks still run first.
        entry!(
            nvmlDeviceGetMigDeviceHandleByIndex,
            handle,
            |device, mode| {
                let mut value = null_mut();
                // SAFETY: NULL or a valid handle slot.
                let code = unsafe {
                    nvmlDeviceGetMigDeviceHandleByIndex(device, 0, out(&mut value, mode))
                };
                match (mode, code) {
                    (Mode::Valid, abi::ERROR_NOT_FOUND) if value.is_null() => abi::SUCCESS,
                    _ => code,
                }
            }
        ),
        scalar!(nvmlDeviceIsMigDeviceHandle, c_uint),
        entry!(
            nvmlDeviceGetGpuInstanceProfileInfo,
            handle,
            |device, mode| {
                // SAFETY: zeroed plain-old-data C struct.
                let mut value: abi::GpuInstanceProfileInfo = unsafe { std::mem::zeroed() };
                // SAFETY: NULL or a valid struct.
                let code = unsafe {
                    nvmlDeviceGetGpuInstanceProfileInfo(device, 0, out(&mut value, mode))
                };
                // gb200's 1g.23gb row (enum 0) answers; NOT_SUPPORTED with nothing written would too.
                match (mode, code) {
                    (Mode::Valid, abi::ERROR_NOT_SUPPORTED) if value.id == 0 => abi::SUCCESS,
                    _ => code,
                }
            }
        ),
        entry!(nvmlDeviceGetAddressingMode, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: abi::DeviceAddressingMode = unsafe { std::mem::zeroed() };
            value.version = abi::DEVICE_ADDRESSING_MODE_V1;
            // SAFETY: NULL or a valid struct.
            unsafe { nvmlDeviceGetAddressingMode(device, out(&mut value, mode)) }
        }),
        entry!(
            nvmlDeviceGetTopologyCommonAncestor,
            handle,
            |device, mode| {
                let mut value: c_uint = 99;
                // SAFETY: NULL or a valid unsigned.
                unsafe {
                    nvmlDeviceGetTopologyCommonAncestor(device, device, out(&mut value, mode))
                }
            }
        ),
        entry!(nvmlDeviceGetTopologyNearestGpus, handle, |device, mode| {
            let (mut count, mut array) = (8, [null_mut(); 8]);
            // SAFETY: NULL or a valid unsigned; an array of `count` handles.
            unsafe {
                nvmlDeviceGetTopologyNearestGpus(
                    device,
                    50,
                    out(&mut count, mode),
                    array.as_mut_ptr(),
                )
            }
        }),
        entry!(nvmlSystemGetTopologyGpuSet, |_device, mode| {
            let (mut count, mut array) = (8, [null_mut(); 8]);
            // SAFETY: NULL or a valid unsigned; an array of `count` handles.
            unsafe { nvmlSystemGetTopologyGpuSet(0, out(&mut count, mode), array.as_mut_ptr()) }
        }),
        link!(nvmlDeviceGetNvLinkState, c_uint),
        link!(nvmlDeviceGetNvLinkVersion, c_uint),
        link!(nvmlDeviceGetNvLinkRemotePciInfo_v2, abi::PciInfo),
        link!(
            nvmlDeviceGetNvLinkRemotePciInfo,
            crate::activity_abi::PciInfoV1
        ),
        link!(nvmlDeviceGetNvLinkRemoteDeviceType, c_uint),
        entry!(nvmlDeviceGetNvLinkCapability, handle, |device, mode| {
            let mut value: c_uint = 9;
            // SAFETY: NULL or a valid unsigned.
            unsafe { nvmlDeviceGetNvLinkCapability(device, 3, 0, out(&mut value, mode)) }
        }),
        entry!(nvmlEventSetCreate, |_device, mode| {
            let mut set = null_mut();
            // SAFETY: NULL or a valid handle slot.
            unsafe { nvmlEventSetCreate(out(&mut set, mode)) }
        }),
        entry!(nvmlEventSetFree, |_device, mode| nvmlEventSetFree(
            event_set(mode)
        )),
        entry!(nvmlDeviceRegisterEvents, handle, |device, mode| {
            nvmlDeviceRegisterEvents(device, abi::EVENT_TYPE_XID_CRITICAL_ERROR, event_set(mode))
        }),
        scalar!(nvmlDeviceGetSupportedEventTypes, u64),
        // Nothing is injected, so the valid call times out (at once: timeout 0).
        entry!(nvmlEventSetWait_v2, |_device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: abi::EventData = unsafe { std::mem::zeroed() };
            // SAFETY: NULL or a valid struct.
            let code = unsafe { nvmlEventSetWait_v2(xid_set(), out(&mut value, mode), 0) };
            timed_out_is_success(mode, code)
        }),
        entry!(nvmlEventSetWait, |_device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: abi::EventDataV1 = unsafe { std::mem::zeroed() };
            // SAFETY: NULL or a valid struct.
            let code = unsafe { nvmlEventSetWait(xid_set(), out(&mut value, mode), 0) };
            timed_out_is_success(mode, code)
        }),
        // MIG profiles by name and their placements (i22-profiles): the versioned info needs MIG
        // enabled, which it is not on gb200, so NOT_SUPPORTED with nothing written is valid there.
        entry!(
            nvmlDeviceGetGpuInstanceProfileInfoV,
            handle,
            |device, mode| {
                // SAFETY: zeroed plain-old-data C struct.
                let mut value: crate::mig::GpuInstanceProfileInfoV2 = unsafe { std::mem::zeroed() };
                value.version = crate::mig::GPU_INSTANCE_PROFILE_INFO_V2;
                // SAFETY: NULL or a valid struct.
                let code = unsafe {
                    nvmlDeviceGetGpuInstanceProfileInfoV(device, 0, out(&mut value, mode))
                };
                not_supported_is_success(mode, code, value.id == 0)
            }
        ),
        entry!(
            nvmlDeviceGetGpuInstancePossiblePlacements_v2,
            handle,
            |device, mode| {
                let mut count = 0;
                // SAFETY: NULL or a valid count; NULL placements.
                let code = unsafe {
                    nvmlDeviceGetGpuInstancePossiblePlacements_v2(
                        device,
                        19,
                        null_mut(),
                        out(&mut count, mode),
                    )
                };
                not_supported_is_success(mode, code, count == 0)
            }
        ),
        entry!(
            nvmlDeviceGetGpuInstancePossiblePlacements,
            handle,
            |device, mode| {
                let mut count = 0;
                // SAFETY: NULL or a valid count; NULL placements.
                let code = unsafe {
                    nvmlDeviceGetGpuInstancePossiblePlacements(
                        device,
                        19,
                        null_mut(),
                        out(&mut count, mode),
                    )
                };
                not_supported_is_success(mode, code, count == 0)
            }
        ),
    ];
    // health and telemetry (issue 22)
    table.extend(health_tests::table());
    table
}

/// NOT_SUPPORTED with nothing written (`untouched`) is the valid answer on a part whose MIG table
/// the profile does not know.
fn not_supported_is_success(mode: Mode, code: NvmlReturn, untouched: bool) -> NvmlReturn {
    match (mode, code) {
        (Mode::Valid, abi::ERROR_NOT_SUPPORTED) if untouched => abi::SUCCESS,
        _ => code,
    }
}

/// A new event set, or NULL in [`Mode::Null`] (and before init, when creation fails).
fn event_set(mode: Mode) -> nvmlEventSet_t {
    let mut set = null_mut();
    if mode != Mode::Null {
        // SAFETY: a valid handle slot.
        unsafe { nvmlEventSetCreate(&mut set) };
    }
    set
}

/// A new event set registered for Xid on GPU 0 (NULL before init).
fn xid_set() -> nvmlEventSet_t {
    let set = event_set(Mode::Valid);
    if let Some(device) = state::handle(0) {
        nvmlDeviceRegisterEvents(
            device.cast_mut().cast(),
            abi::EVENT_TYPE_XID_CRITICAL_ERROR,
            set,
        );
    }
    set
}

/// A wait with nothing injected answers TIMEOUT: the table's Valid mode asks for what
/// succeeds, so that is SUCCESS here (the checks before it still run).
fn timed_out_is_success(mode: Mode, code: NvmlReturn) -> NvmlReturn {
    match (mode, code) {
        (Mode::Valid, abi::ERROR_TIMEOUT) => abi::SUCCESS,
        _ => code,
    }
}

/// Functions that work (or fail in their own way) without init.
const LIFECYCLE: &[&str] = &[
    "nvmlInit",
    "nvmlInit_v2",
    "nvmlInitWithFlags",
    "nvmlShutdown",
    "nvmlErrorString",
];

#[test]
fn the_table_covers_every_export_once() {
    let mut names: Vec<&str> = table().iter().map(|entry| entry.name).collect();
    names.extend(super::activity_tests::names());
    names.extend(lifecycle_tests::names());
    assert_eq!(names, EXPORTS);
}

#[test]
fn every_export_succeeds_on_gb200() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    for entry in table() {
        let code = (entry.call)(device, Mode::Valid);
        assert_eq!(code, abi::SUCCESS, "{}", entry.name);
        if entry.name == "nvmlShutdown" {
            assert_eq!(nvmlInit_v2(), abi::SUCCESS);
        }
    }
}

#[test]
fn every_export_is_uninitialized_before_init_and_after_shutdown() {
    let _session = Session::new(GB200, None);
    // SAFETY: nvmlErrorString returns a static NUL-terminated string, before init too.
    let text = unsafe { CStr::from_ptr(nvmlErrorString(abi::ERROR_UNINITIALIZED)) };
    assert_eq!(text, c"Uninitialized");
    for round in ["before init", "after shutdown"] {
        for entry in table()
            .iter()
            .filter(|entry| !LIFECYCLE.contains(&entry.name))
        {
            let code = (entry.call)(slot0(), Mode::Valid);
            assert_eq!(code, abi::ERROR_UNINITIALIZED, "{} {round}", entry.name);
        }
        assert_eq!(nvmlInit_v2(), abi::SUCCESS);
        assert_eq!(nvmlShutdown(), abi::SUCCESS);
    }
    assert_eq!(
        nvmlShutdown(),
        abi::ERROR_UNINITIALIZED,
        "shutdown without init"
    );
}

#[test]
fn every_output_pointer_is_checked_for_null() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    for entry in table()
        .iter()
        .filter(|entry| !LIFECYCLE.contains(&entry.name))
    {
        let code = (entry.call)(device, Mode::Null);
        assert_eq!(code, abi::ERROR_INVALID_ARGUMENT, "{}", entry.name);
    }
}

#[test]
fn every_handle_is_validated_before_use() {
    let _session = Session::new(
        &Profile::parse(GB200)
            .unwrap()
            .with_num_devices(2)
            .unwrap()
            .to_yaml()
            .unwrap(),
        None,
    );
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let local = [0u64; 8];
    // Slot 2 exists in the array but only two GPUs are visible: it was never issued.
    let foreign = foreign_handles(&local, 2);
    for entry in table().iter().filter(|entry| entry.takes_handle) {
        for handle in foreign {
            let code = (entry.call)(handle, Mode::Valid);
            assert_eq!(
                code,
                abi::ERROR_INVALID_ARGUMENT,
                "{} with {handle:?}",
                entry.name
            );
        }
    }
}

#[test]
fn every_string_export_reports_a_short_buffer() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    let strings: Vec<Entry> = table()
        .into_iter()
        .filter(|entry| entry.writes_string)
        .collect();
    // five before issue 22, four health and telemetry strings since
    assert_eq!(strings.len(), 9);
    for entry in strings {
        assert_eq!(
            (entry.call)(device, Mode::Short),
            abi::ERROR_INSUFFICIENT_SIZE,
            "{}",
            entry.name
        );
    }
}

#[test]
fn init_is_reference_counted() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(nvmlInitWithFlags(0), abi::SUCCESS);
    let device = handle(3);
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    let mut index = 0;
    // SAFETY: valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetIndex(device, &mut index) },
        abi::SUCCESS,
        "still initialised once"
    );
    assert_eq!(index, 3);
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    // SAFETY: valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetIndex(device, &mut index) },
        abi::ERROR_UNINITIALIZED
    );
    assert_eq!(nvmlShutdown(), abi::ERROR_UNINITIALIZED);
    // The same handle is valid again after a new init.
    assert_eq!(nvmlInit(), abi::SUCCESS);
    assert_eq!(handle(3), device);
}

#[test]
fn missing_or_invalid_config_fails_init() {
    let session = Session::new(GB200, None);
    std::env::remove_var("MOCK_NVML_CONFIG");
    assert_eq!(nvmlInit_v2(), abi::ERROR_DRIVER_NOT_LOADED);
    std::env::set_var("MOCK_NVML_CONFIG", "/nonexistent/profile.bin");
    assert_eq!(nvmlInit_v2(), abi::ERROR_DRIVER_NOT_LOADED);
    // A YAML profile (not staged), then a staged one cut short: both UNKNOWN.
    let path = session._dir.path().join("bad.bin");
    std::fs::write(&path, GB200).unwrap();
    std::env::set_var("MOCK_NVML_CONFIG", &path);
    assert_eq!(nvmlInit_v2(), abi::ERROR_UNKNOWN);
    let staged = profile_bytes(GB200);
    std::fs::write(&path, &staged[..staged.len() / 2]).unwrap();
    assert_eq!(nvmlInit_v2(), abi::ERROR_UNKNOWN);
    assert_eq!(
        nvmlShutdown(),
        abi::ERROR_UNINITIALIZED,
        "a failed init leaves nothing to shut down"
    );
}

#[test]
fn a_device_or_oversized_file_fails_init_instead_of_hanging() {
    let session = Session::new(GB200, None);
    std::env::set_var("MOCK_NVML_CONFIG", "/dev/zero");
    assert_eq!(nvmlInit_v2(), abi::ERROR_DRIVER_NOT_LOADED);
    let big = session._dir.path().join("big.bin");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(crate::config::MAX_FILE_BYTES + 1)
        .unwrap();
    std::env::set_var("MOCK_NVML_CONFIG", &big);
    assert_eq!(nvmlInit_v2(), abi::ERROR_DRIVER_NOT_LOADED);
    assert_eq!(nvmlShutdown(), abi::ERROR_UNINITIALIZED);

    // A topology that is a device: a warning, the profile's identity kept; strict: init fails.
    std::env::set_var("MOCK_NVML_CONFIG", session._dir.path().join("profile.bin"));
    std::env::set_var("MOCK_TOPOLOGY_CONFIG", "/dev/zero");
    std::env::set_var("NODE_NAME", "me");
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    std::env::set_var("MOCK_NVML_STRICT", "1");
    assert_eq!(nvmlInit_v2(), abi::ERROR_UNKNOWN);
    assert_eq!(nvmlShutdown(), abi::ERROR_UNINITIALIZED);
    std::env::remove_var("MOCK_NVML_STRICT");
}

#[test]
fn fabric_versions() {
    let topology = "version: 1\ndomains:\n  - uuid: \"00000000-0000-0000-0000-0000000000ab\"\n    cliques:\n      - {id: 7, nodes: [me]}\n";
    let _session = Session::new(GB200, Some((topology, "me")));
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(1);

    // SAFETY (all calls below): the pointers point at live locals of the right type.
    let mut v1: abi::GpuFabricInfo = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { nvmlDeviceGetGpuFabricInfo(device, &mut v1) },
        abi::SUCCESS
    );
    assert_eq!(
        (v1.cluster_uuid[15], v1.clique_id, v1.state, v1.status),
        (0xab, 7, 3, 0)
    );

    // A v2 call writes exactly 36 bytes: the v3 tail stays as the caller left it.
    let mut buffer = [0xeeu8; 40];
    buffer[..4].copy_from_slice(&abi::GPU_FABRIC_INFO_V2.to_ne_bytes());
    let info = buffer.as_mut_ptr().cast::<abi::GpuFabricInfoV3>();
    assert_eq!(
        unsafe { nvmlDeviceGetGpuFabricInfoV(device, info) },
        abi::SUCCESS
    );
    assert_eq!(buffer[36..], [0xee; 4]);
    assert_eq!(buffer[29..32], [0, 0, 0], "state padding is zeroed");
    assert_eq!(buffer[24], 7);

    let mut v3: abi::GpuFabricInfoV3 = unsafe { std::mem::zeroed() };
    v3.version = abi::GPU_FABRIC_INFO_V3;
    assert_eq!(
        unsafe { nvmlDeviceGetGpuFabricInfoV(device, &mut v3) },
        abi::SUCCESS
    );
    assert_eq!(
        (v3.clique_id, v3.state, v3.health_mask, v3.health_summary),
        (7, 3, 0x1AA, 1)
    );

    for bad in [0, 1, 0x0100_001c, 0x0300_0024, 0x0200_0028, u32::MAX] {
        let mut buffer = [0x11u8; 40];
        buffer[..4].copy_from_slice(&u32::to_ne_bytes(bad));
        let before = buffer;
        let info = buffer.as_mut_ptr().cast::<abi::GpuFabricInfoV3>();
        assert_eq!(
            unsafe { nvmlDeviceGetGpuFabricInfoV(device, info) },
            abi::ERROR_ARGUMENT_VERSION_MISMATCH,
            "{bad:#x}"
        );
        assert_eq!(buffer, before, "nothing written for {bad:#x}");
    }
}

/// The clique id GPU 0 reports now.
fn clique_of_gpu0() -> u32 {
    let mut v3: abi::GpuFabricInfoV3 = unsafe { std::mem::zeroed() };
    v3.version = abi::GPU_FABRIC_INFO_V3;
    // SAFETY: a live local of the right type.
    assert_eq!(
        unsafe { nvmlDeviceGetGpuFabricInfoV(handle(0), &mut v3) },
        abi::SUCCESS
    );
    v3.clique_id
}

/// A topology of one domain whose clique `clique` holds only the node `me`.
fn one_clique(clique: u32) -> String {
    format!(
        "version: 1\ndomains:\n  - uuid: \"00000000-0000-0000-0000-0000000000ab\"\n    cliques:\n      - {{id: {clique}, nodes: [me]}}\n"
    )
}

#[test]
fn a_thread_that_queried_before_sees_another_threads_shutdown_and_new_init() {
    let session = Session::new(GB200, Some((&one_clique(3), "me")));
    let path = session._dir.path().join("topology.bin");
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let (ask, asked) = std::sync::mpsc::channel::<()>();
    let (tell, told) = std::sync::mpsc::channel();
    // The worker keeps the state it saw between its queries; the main thread changes it.
    let worker = std::thread::spawn(move || {
        while asked.recv().is_ok() {
            let mut index = 0;
            // SAFETY: valid out slot; slot 0 is a handle address whatever the state.
            let code = unsafe { nvmlDeviceGetIndex(slot0(), &mut index) };
            let clique = (code == abi::SUCCESS).then(clique_of_gpu0);
            tell.send((code, clique)).unwrap();
        }
    });
    let query = || {
        ask.send(()).unwrap();
        told.recv().unwrap()
    };
    assert_eq!(query(), (abi::SUCCESS, Some(3)));
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    assert_eq!(query(), (abi::ERROR_UNINITIALIZED, None));
    std::fs::write(&path, topology_bytes(&one_clique(4))).unwrap();
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(query(), (abi::SUCCESS, Some(4)));
    drop(ask);
    worker.join().unwrap();
}

#[test]
fn a_rewritten_topology_is_seen_at_the_next_init() {
    let session = Session::new(GB200, Some((&one_clique(7), "me")));
    let path = session._dir.path().join("topology.bin");
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(clique_of_gpu0(), 7);
    assert_eq!(nvmlShutdown(), abi::SUCCESS);

    // Rewritten in place, same size, at once: within the file system's timestamp granularity
    // every stat field but ctime can stay the same, so only the bytes tell.
    std::fs::write(&path, topology_bytes(&one_clique(8))).unwrap();
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(clique_of_gpu0(), 8);
    assert_eq!(nvmlShutdown(), abi::SUCCESS);

    // Replaced atomically, as the node stager does.
    let next = session._dir.path().join("topology.bin.new");
    std::fs::write(&next, topology_bytes(&one_clique(9))).unwrap();
    std::fs::rename(&next, &path).unwrap();
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(clique_of_gpu0(), 9);
    assert_eq!(nvmlShutdown(), abi::SUCCESS);

    // Unchanged: the same identity again; a node outside the topology: the profile's default.
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(clique_of_gpu0(), 9);
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    std::env::set_var("NODE_NAME", "someone-else");
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let default = Profile::parse(GB200).unwrap().devices()[0].fabric.unwrap();
    assert_eq!(clique_of_gpu0(), default.clique_id);
    assert_ne!(default.clique_id, 9);
}

#[test]
fn no_fabric_profile_is_not_supported() {
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(7);
    // SAFETY (all calls below): the pointers point at live locals of the right type.
    let mut v1: abi::GpuFabricInfo = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { nvmlDeviceGetGpuFabricInfo(device, &mut v1) },
        abi::ERROR_NOT_SUPPORTED
    );
    let mut v3: abi::GpuFabricInfoV3 = unsafe { std::mem::zeroed() };
    v3.version = abi::GPU_FABRIC_INFO_V3;
    assert_eq!(
        unsafe { nvmlDeviceGetGpuFabricInfoV(device, &mut v3) },
        abi::ERROR_NOT_SUPPORTED
    );
    let mut count = 0;
    assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut count) }, abi::SUCCESS);
    assert_eq!(count, 8);
}

#[test]
fn lookups_and_parameters() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut device = null_mut();
    // SAFETY (all calls below): the pointers point at live locals or NUL-terminated literals.
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByPciBusId_v2(c"4b:00.0".as_ptr(), &mut device) },
        abi::SUCCESS
    );
    assert_eq!(device, handle(3));
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByPciBusId_v2(c"0000:99:00.0".as_ptr(), &mut device) },
        abi::ERROR_NOT_FOUND
    );
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByPciBusId_v2(c"banana".as_ptr(), &mut device) },
        abi::ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe {
            nvmlDeviceGetHandleByUUID(
                c"GPU-00000000-0000-0000-0000-000000000000".as_ptr(),
                &mut device,
            )
        },
        abi::ERROR_NOT_FOUND
    );
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByIndex_v2(4, &mut device) },
        abi::ERROR_INVALID_ARGUMENT
    );
    let mut value = 0;
    let gpu = handle(0);
    assert_eq!(
        unsafe { nvmlDeviceGetTemperature(gpu, 1, &mut value) },
        abi::ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { nvmlDeviceGetClockInfo(gpu, 4, &mut value) },
        abi::ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { nvmlDeviceGetNvLinkState(gpu, 36, &mut value) },
        abi::ERROR_INVALID_ARGUMENT
    );
    let mut memory: abi::MemoryV2 = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { nvmlDeviceGetMemoryInfo_v2(gpu, &mut memory) },
        abi::ERROR_ARGUMENT_VERSION_MISMATCH
    );
    // SAFETY: nvmlErrorString returns a static NUL-terminated string.
    let text = unsafe { CStr::from_ptr(nvmlErrorString(abi::ERROR_ARGUMENT_VERSION_MISMATCH)) };
    assert_eq!(text, c"Argument version mismatch");
}

#[test]
fn mig_on_gb200_is_capable_and_disabled() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(2);
    // SAFETY (all calls below): the pointers point at live locals of the right type.
    let (mut current, mut pending) = (9, 9);
    assert_eq!(
        unsafe { nvmlDeviceGetMigMode(device, &mut current, &mut pending) },
        abi::SUCCESS
    );
    assert_eq!((current, pending), (0, 0));
    let mut count = 99;
    assert_eq!(
        unsafe { nvmlDeviceGetMaxMigDeviceCount(device, &mut count) },
        abi::SUCCESS
    );
    assert_eq!(count, 0, "nvml.h: zero while MIG is not enabled");
    let mut is_mig = 99;
    assert_eq!(
        unsafe { nvmlDeviceIsMigDeviceHandle(device, &mut is_mig) },
        abi::SUCCESS
    );
    assert_eq!(is_mig, 0);
    let mut mig = 0x1234 as nvmlDevice_t;
    assert_eq!(
        unsafe { nvmlDeviceGetMigDeviceHandleByIndex(device, 0, &mut mig) },
        abi::ERROR_NOT_FOUND
    );
    assert_eq!(mig, 0x1234 as nvmlDevice_t, "nothing written");
    let mut info: abi::GpuInstanceProfileInfo = unsafe { std::mem::zeroed() };
    info.id = 77;
    // Enums 0, 7, 9 and 1 are gb200's rows found in real output (ids 19, 20, 15, 14); the
    // others, the 3g, 4g and 7g rows included, are NOT_SUPPORTED.
    for profile in 0..abi::GPU_INSTANCE_PROFILE_COUNT {
        let code = unsafe { nvmlDeviceGetGpuInstanceProfileInfo(device, profile, &mut info) };
        let want = match profile {
            0 | 7 | 9 | 1 => abi::SUCCESS,
            _ => abi::ERROR_NOT_SUPPORTED,
        };
        assert_eq!(code, want, "profile {profile}");
    }
    assert_eq!(info.id, 15, "the last enum answered (9): 1g.47gb");
    info.id = 77;
    assert_eq!(
        unsafe {
            nvmlDeviceGetGpuInstanceProfileInfo(device, abi::GPU_INSTANCE_PROFILE_COUNT, &mut info)
        },
        abi::ERROR_INVALID_ARGUMENT,
        "the end of the enumeration"
    );
    assert_eq!(info.id, 77, "nothing written");

    let mut mode: abi::DeviceAddressingMode = unsafe { std::mem::zeroed() };
    mode.version = abi::DEVICE_ADDRESSING_MODE_V1;
    assert_eq!(
        unsafe { nvmlDeviceGetAddressingMode(device, &mut mode) },
        abi::SUCCESS
    );
    assert_eq!(mode.value, 2, "ATS");
    for bad in [0, 8, 0x0200_0008, u32::MAX] {
        let mut mode = abi::DeviceAddressingMode {
            version: bad,
            value: 9,
        };
        assert_eq!(
            unsafe { nvmlDeviceGetAddressingMode(device, &mut mode) },
            abi::ERROR_ARGUMENT_VERSION_MISMATCH,
            "{bad:#x}"
        );
        assert_eq!(mode.value, 9, "nothing written for {bad:#x}");
    }
}

#[test]
fn addressing_mode_and_mig_tables_follow_other_profiles() {
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    // SAFETY (all calls below): the pointers point at live locals of the right type.
    let mut mode = abi::DeviceAddressingMode {
        version: abi::DEVICE_ADDRESSING_MODE_V1,
        value: 9,
    };
    assert_eq!(
        unsafe { nvmlDeviceGetAddressingMode(device, &mut mode) },
        abi::ERROR_NOT_SUPPORTED
    );
    assert_eq!(mode.value, 9);
}

#[path = "stubs_tests.rs"]
mod stubs_tests;

#[path = "mig_tests.rs"]
mod mig_tests;

#[path = "lifecycle_tests.rs"]
mod lifecycle_tests;

#[test]
fn topology_levels_and_gpu_sets_through_the_c_functions() {
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let gpus: Vec<nvmlDevice_t> = (0..8).map(handle).collect();
    let level = |a: usize, b: usize| {
        let mut value: c_uint = 99;
        // SAFETY: a valid unsigned.
        let code = unsafe { nvmlDeviceGetTopologyCommonAncestor(gpus[a], gpus[b], &mut value) };
        (code, value)
    };
    assert_eq!(level(3, 3), (abi::SUCCESS, 0));
    assert_eq!(level(0, 1), (abi::SUCCESS, 10));
    assert_eq!(level(1, 2), (abi::SUCCESS, 40));
    assert_eq!(level(7, 0), (abi::SUCCESS, 50));
    let mut value: c_uint = 99;
    // SAFETY: a valid unsigned; the second handle is foreign.
    let code =
        unsafe { nvmlDeviceGetTopologyCommonAncestor(gpus[0], 8 as nvmlDevice_t, &mut value) };
    assert_eq!((code, value), (abi::ERROR_INVALID_ARGUMENT, 99));

    let mut count: c_uint = 0;
    // SAFETY: a valid unsigned; NULL array with count 0, as nvml.h allows.
    let code = unsafe { nvmlDeviceGetTopologyNearestGpus(gpus[0], 50, &mut count, null_mut()) };
    assert_eq!(
        (code, count),
        (abi::SUCCESS, 7),
        "count 0 asks for the size"
    );
    let mut array = [null_mut(); 8];
    count = 3;
    // SAFETY: an array of 8 >= count handles.
    let code =
        unsafe { nvmlDeviceGetTopologyNearestGpus(gpus[0], 50, &mut count, array.as_mut_ptr()) };
    assert_eq!((code, count), (abi::ERROR_INSUFFICIENT_SIZE, 7));
    assert!(array.iter().all(|slot| slot.is_null()), "untouched");
    count = 8;
    // SAFETY: as above.
    let code =
        unsafe { nvmlDeviceGetTopologyNearestGpus(gpus[0], 50, &mut count, array.as_mut_ptr()) };
    assert_eq!((code, count), (abi::SUCCESS, 7));
    assert_eq!(array[..7], gpus[1..]);
    assert!(array[7].is_null());
    count = 8;
    // SAFETY: as above.
    let code =
        unsafe { nvmlDeviceGetTopologyNearestGpus(gpus[5], 10, &mut count, array.as_mut_ptr()) };
    assert_eq!((code, count, array[0]), (abi::SUCCESS, 1, gpus[4]));
    for (level, array) in [(45, array.as_mut_ptr()), (50, null_mut())] {
        count = 8;
        // SAFETY: a valid unsigned; NULL or an array of 8 handles.
        let code = unsafe { nvmlDeviceGetTopologyNearestGpus(gpus[0], level, &mut count, array) };
        assert_eq!(
            (code, count),
            (abi::ERROR_INVALID_ARGUMENT, 8),
            "level {level}"
        );
    }

    let mut array = [null_mut(); 8];
    count = 4;
    // SAFETY: an array of 8 >= count handles.
    let code = unsafe { nvmlSystemGetTopologyGpuSet(170, &mut count, array.as_mut_ptr()) };
    assert_eq!((code, count), (abi::SUCCESS, 4));
    assert_eq!(array[..4], gpus[4..]);
    // SAFETY: as above.
    let code = unsafe { nvmlSystemGetTopologyGpuSet(224, &mut count, array.as_mut_ptr()) };
    assert_eq!(code, abi::ERROR_INVALID_ARGUMENT, "no such CPU");
}

#[test]
fn nvlinks_lead_to_nvswitches_through_the_c_functions() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let gpu = handle(2);
    // SAFETY: zeroed plain-old-data C struct.
    let mut pci: abi::PciInfo = unsafe { std::mem::zeroed() };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetNvLinkRemotePciInfo_v2(gpu, 3, &mut pci) },
        abi::SUCCESS
    );
    let bus_id = CStr::from_bytes_until_nul(&pci.bus_id).unwrap();
    assert_eq!(bus_id, c"00000100:03:00.0");
    let mut value: c_uint = 99;
    // SAFETY: a valid unsigned.
    assert_eq!(
        unsafe { nvmlDeviceGetNvLinkRemoteDeviceType(gpu, 3, &mut value) },
        abi::SUCCESS
    );
    assert_eq!(value, abi::NVLINK_DEVICE_TYPE_SWITCH);
    // SAFETY: a valid unsigned.
    assert_eq!(
        unsafe { nvmlDeviceGetNvLinkVersion(gpu, 17, &mut value) },
        abi::SUCCESS
    );
    assert_eq!(value, 7, "NVML_NVLINK_VERSION_5_0");
    // SAFETY: a valid unsigned.
    assert_eq!(
        unsafe { nvmlDeviceGetNvLinkCapability(gpu, 0, 0, &mut value) },
        abi::SUCCESS
    );
    assert_eq!(value, 1, "P2P supported");
    value = 99;
    for code in [
        // SAFETY: valid outputs throughout.
        unsafe { nvmlDeviceGetNvLinkRemotePciInfo_v2(gpu, 18, &mut pci) },
        unsafe { nvmlDeviceGetNvLinkRemoteDeviceType(gpu, 36, &mut value) },
        unsafe { nvmlDeviceGetNvLinkCapability(gpu, 0, 6, &mut value) },
        unsafe { nvmlDeviceGetNvLinkVersion(gpu, 18, &mut value) },
    ] {
        assert_eq!(code, abi::ERROR_INVALID_ARGUMENT);
    }
    assert_eq!(value, 99, "nothing written");
}

#[test]
fn a_profile_without_topology_or_nvlink_is_not_supported() {
    let text = GB200.split("\npcie_topology:").next().unwrap().replace(
        "    links: 18\n    active: 18\n",
        "    links: 0\n    active: 0\n",
    );
    let start = text.find("    version: \"5.0\"").unwrap();
    let end = text.find("  fabric:\n").unwrap();
    let text = format!("{}{}", &text[..start], &text[end..]);
    let _session = Session::new(&text, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let gpu = handle(0);
    let (mut value, mut count) = (99, 0);
    // SAFETY: valid outputs throughout.
    unsafe {
        assert_eq!(
            nvmlDeviceGetTopologyCommonAncestor(gpu, gpu, &mut value),
            abi::ERROR_NOT_SUPPORTED
        );
        assert_eq!(
            nvmlDeviceGetTopologyNearestGpus(gpu, 50, &mut count, null_mut()),
            abi::ERROR_NOT_SUPPORTED
        );
        assert_eq!(
            nvmlSystemGetTopologyGpuSet(0, &mut count, null_mut()),
            abi::ERROR_NOT_SUPPORTED
        );
        assert_eq!(
            nvmlDeviceGetNvLinkState(gpu, 0, &mut value),
            abi::ERROR_NOT_SUPPORTED
        );
        assert_eq!(
            nvmlDeviceGetNvLinkRemoteDeviceType(gpu, 0, &mut value),
            abi::ERROR_NOT_SUPPORTED
        );
    }
    assert_eq!((value, count), (99, 0));
}

#[path = "events_tests.rs"]
mod events_tests;

#[path = "visible_tests.rs"]
mod visible_tests;

#[path = "health_tests.rs"]
mod health_tests;
