//! The issue-22 "misc" exports (`ffi/activity.rs`, `ffi/processes.rs`) through their C
//! functions: the misuse matrix (uninitialised, NULL outputs, foreign handles, short buffers)
//! and the values on gb200 and h100.

use std::{
    ffi::{c_char, c_uint, c_ulong, c_ulonglong, CStr},
    ptr::null_mut,
};

use nvml_profile::{GB200, H100};

use super::tests::{foreign_handles, handle, out, slot0, Mode, Session};
use super::*;
use crate::abi::{self, NvmlReturn};
use crate::activity_abi::{
    self as cabi, C2cModeInfo, FbcStats, FieldValue, GpmMetric, GpmMetricsGet, GpmSupport,
    PciInfoExt, ProcessInfo, ProcessUtilizationSample,
};

/// GB200 with two processes on GPU 0 (pid 41 compute, pid 42 graphics) and a platform.
fn gb200_with_processes() -> String {
    super::test_profiles::with_processes(
        &with_platform(GB200),
        0,
        super::test_profiles::TWO_PROCESSES,
    )
}

/// `text` with a `platform` section in its device defaults.
fn with_platform(text: &str) -> String {
    text.replacen(
        "\ndevices:\n",
        "\n  platform: {chassis_serial: \"1823224001234\", slot_number: 9, tray_index: 5, host_id: 1, peer_type: switch_connected}\ndevices:\n",
        1,
    )
}

#[test]
fn platform_info_comes_from_the_platform_section() {
    let _session = Session::new(&with_platform(GB200), None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    // SAFETY: zeroed plain-old-data C struct.
    let mut info: cabi::PlatformInfo = unsafe { std::mem::zeroed() };
    for version in [cabi::PLATFORM_INFO_V1, cabi::PLATFORM_INFO_V2] {
        info.version = version;
        // SAFETY: a valid struct.
        assert_eq!(
            unsafe { nvmlDeviceGetPlatformInfo(handle(1), &mut info) },
            abi::SUCCESS
        );
        assert_eq!(&info.chassis_serial_number[..14], b"1823224001234\0");
        assert_eq!((info.slot_number, info.tray_index, info.host_id), (9, 5, 1));
        assert_eq!(
            (info.peer_type, info.module_id, info.version),
            (1, 2, version)
        );
    }
    info.version = 3;
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetPlatformInfo(handle(1), &mut info) },
        abi::ERROR_ARGUMENT_VERSION_MISMATCH
    );
    nvmlShutdown();
    drop(_session);
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    info.version = cabi::PLATFORM_INFO_V2;
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetPlatformInfo(handle(1), &mut info) },
        abi::ERROR_NOT_SUPPORTED,
        "as upstream's shipped gb200"
    );
}

struct Entry {
    name: &'static str,
    takes_handle: bool,
    /// Whether it has an output pointer (so a NULL case).
    has_output: bool,
    /// What a valid call answers on [`gb200_with_processes`].
    valid: NvmlReturn,
    call: fn(nvmlDevice_t, Mode) -> NvmlReturn,
}

impl Entry {
    /// A query of one GPU with an output pointer, answering SUCCESS on a valid call.
    fn query(name: &'static str, call: fn(nvmlDevice_t, Mode) -> NvmlReturn) -> Entry {
        Entry {
            name,
            takes_handle: true,
            has_output: true,
            valid: abi::SUCCESS,
            call,
        }
    }
}

/// `f(device, *mut T)`.
macro_rules! one {
    ($name:ident, $ty:ty) => {
        Entry::query(stringify!($name), |device, mode| {
            // SAFETY: zeroed plain-old-data C struct or integer.
            let mut value: $ty = unsafe { std::mem::zeroed() };
            // SAFETY: `out` is NULL or points at `value`.
            unsafe { $name(device, out(&mut value, mode)) }
        })
    };
}

/// `f(device, *mut u32, *mut u32)`.
macro_rules! two {
    ($name:ident) => {
        Entry::query(stringify!($name), |device, mode| {
            let (mut a, mut b) = (0, 0);
            // SAFETY: NULL or valid slots.
            unsafe { $name(device, out(&mut a, mode), out(&mut b, mode)) }
        })
    };
}

/// `f(device, *mut count, *mut T)` with room for 4.
macro_rules! list {
    ($name:ident, $ty:ty) => {
        Entry::query(stringify!($name), |device, mode| {
            // SAFETY: zeroed plain-old-data C structs.
            let mut items: [$ty; 4] = unsafe { std::mem::zeroed() };
            let mut count: c_uint = 4;
            // SAFETY: NULL or a count of 4 with an array of 4.
            unsafe { $name(device, out(&mut count, mode), items.as_mut_ptr().cast()) }
        })
    };
}

/// `f(device, words, *mut c_ulong, scope)`.
macro_rules! affinity {
    ($name:ident) => {
        Entry::query(stringify!($name), |device, mode| {
            let mut words: [c_ulong; 4] = [0; 4];
            let set = match mode {
                Mode::Null => null_mut(),
                _ => words.as_mut_ptr(),
            };
            // SAFETY: NULL or 4 words.
            unsafe { $name(device, 4, set, 0) }
        })
    };
}

fn table() -> Vec<Entry> {
    vec![
        Entry::query("nvmlDeviceGetPciInfoExt", |device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: PciInfoExt = unsafe { std::mem::zeroed() };
            value.version = cabi::PCI_INFO_EXT_V1;
            // SAFETY: NULL or a valid struct.
            unsafe { nvmlDeviceGetPciInfoExt(device, out(&mut value, mode)) }
        }),
        Entry::query("nvmlDeviceGetPcieThroughput", |device, mode| {
            let mut value = 0;
            // SAFETY: NULL or a valid slot.
            unsafe { nvmlDeviceGetPcieThroughput(device, 1, out(&mut value, mode)) }
        }),
        one!(nvmlDeviceGetPcieReplayCounter, c_uint),
        one!(nvmlDeviceGetGpuMaxPcieLinkGeneration, c_uint),
        Entry::query("nvmlDeviceGetCpuAffinity", |device, mode| {
            let mut words: [c_ulong; 4] = [0; 4];
            let set = if mode == Mode::Null {
                null_mut()
            } else {
                words.as_mut_ptr()
            };
            // SAFETY: NULL or 4 words.
            unsafe { nvmlDeviceGetCpuAffinity(device, 4, set) }
        }),
        affinity!(nvmlDeviceGetCpuAffinityWithinScope),
        affinity!(nvmlDeviceGetMemoryAffinity),
        one!(nvmlDeviceGetNumaNodeId, c_uint),
        Entry::query("nvmlDeviceGetP2PStatus", |device, mode| {
            let mut value = 0;
            // SAFETY: NULL or a valid slot.
            unsafe { nvmlDeviceGetP2PStatus(device, device, 2, out(&mut value, mode)) }
        }),
        Entry::query("nvmlDeviceGetNvLinkErrorCounter", |device, mode| {
            let mut value: c_ulonglong = 0;
            // SAFETY: NULL or a valid slot.
            unsafe { nvmlDeviceGetNvLinkErrorCounter(device, 3, 0, out(&mut value, mode)) }
        }),
        Entry::query("nvmlDeviceGetNvLinkUtilizationCounter", |device, mode| {
            let (mut rx, mut tx): (c_ulonglong, c_ulonglong) = (0, 0);
            // SAFETY: NULL or valid slots.
            unsafe {
                nvmlDeviceGetNvLinkUtilizationCounter(
                    device,
                    3,
                    0,
                    out(&mut rx, mode),
                    out(&mut tx, mode),
                )
            }
        }),
        Entry {
            name: "nvmlDeviceFreezeNvLinkUtilizationCounter",
            takes_handle: true,
            has_output: false,
            valid: abi::SUCCESS,
            call: |device, _| nvmlDeviceFreezeNvLinkUtilizationCounter(device, 5, 1, 0),
        },
        Entry {
            name: "nvmlDeviceResetNvLinkUtilizationCounter",
            takes_handle: true,
            has_output: false,
            valid: abi::SUCCESS,
            call: |device, _| nvmlDeviceResetNvLinkUtilizationCounter(device, 5, 1),
        },
        Entry {
            name: "nvmlDeviceResetNvLinkErrorCounters",
            takes_handle: true,
            has_output: false,
            valid: abi::SUCCESS,
            call: |device, _| nvmlDeviceResetNvLinkErrorCounters(device, 5),
        },
        two!(nvmlDeviceGetEncoderUtilization),
        two!(nvmlDeviceGetDecoderUtilization),
        two!(nvmlDeviceGetJpgUtilization),
        two!(nvmlDeviceGetOfaUtilization),
        Entry::query("nvmlDeviceGetEncoderCapacity", |device, mode| {
            let mut value = 0;
            // SAFETY: NULL or a valid slot.
            unsafe { nvmlDeviceGetEncoderCapacity(device, 1, out(&mut value, mode)) }
        }),
        Entry::query("nvmlDeviceGetEncoderStats", |device, mode| {
            let (mut a, mut b, mut c) = (9, 9, 9);
            // SAFETY: NULL or valid slots.
            unsafe {
                nvmlDeviceGetEncoderStats(
                    device,
                    out(&mut a, mode),
                    out(&mut b, mode),
                    out(&mut c, mode),
                )
            }
        }),
        one!(nvmlDeviceGetFBCStats, FbcStats),
        list!(nvmlDeviceGetEncoderSessions, [u32; 9]),
        list!(nvmlDeviceGetFBCSessions, [u32; 12]),
        Entry::query("nvmlDeviceGetFieldValues", |device, mode| {
            let mut values = [field(91, 0), field(83, 0)];
            let array = if mode == Mode::Null {
                null_mut()
            } else {
                values.as_mut_ptr()
            };
            // SAFETY: NULL or two entries.
            unsafe { nvmlDeviceGetFieldValues(device, 2, array) }
        }),
        Entry::query("nvmlGpmQueryDeviceSupport", |device, mode| {
            let mut value = GpmSupport {
                version: cabi::GPM_SUPPORT_VERSION,
                is_supported_device: 7,
            };
            // SAFETY: NULL or a valid struct.
            unsafe { nvmlGpmQueryDeviceSupport(device, out(&mut value, mode)) }
        }),
        Entry {
            name: "nvmlGpmSampleAlloc",
            takes_handle: false,
            has_output: true,
            valid: abi::SUCCESS,
            call: |_, mode| {
                let mut sample = null_mut();
                // SAFETY: NULL or a valid slot.
                unsafe { nvmlGpmSampleAlloc(out(&mut sample, mode)) }
            },
        },
        Entry {
            name: "nvmlGpmSampleFree",
            takes_handle: false,
            has_output: true,
            valid: abi::SUCCESS,
            call: |_, mode| nvmlGpmSampleFree(sample(mode)),
        },
        Entry::query("nvmlGpmSampleGet", |device, mode| {
            nvmlGpmSampleGet(device, sample(mode))
        }),
        Entry::query("nvmlGpmMetricsGet", |device, mode| {
            let mut request = metrics_request(device, &[1, 5]);
            let pointer = if mode == Mode::Null {
                null_mut()
            } else {
                &mut *request as *mut GpmMetricsGet
            };
            // SAFETY: NULL or a valid request.
            unsafe { nvmlGpmMetricsGet(pointer) }
        }),
        Entry::query("nvmlDeviceGetPlatformInfo", |device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: cabi::PlatformInfo = unsafe { std::mem::zeroed() };
            value.version = cabi::PLATFORM_INFO_V2;
            // SAFETY: NULL or a valid struct.
            unsafe { nvmlDeviceGetPlatformInfo(device, out(&mut value, mode)) }
        }),
        one!(nvmlDeviceGetC2cModeInfoV, C2cModeInfo),
        Entry {
            name: "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
            takes_handle: true,
            has_output: true,
            valid: abi::ERROR_INVALID_ARGUMENT,
            call: |device, mode| {
                let mut parent = null_mut();
                // SAFETY: NULL or a valid handle slot.
                unsafe {
                    nvmlDeviceGetDeviceHandleFromMigDeviceHandle(device, out(&mut parent, mode))
                }
            },
        },
        list!(nvmlDeviceGetComputeRunningProcesses_v3, ProcessInfo),
        list!(nvmlDeviceGetGraphicsRunningProcesses_v3, ProcessInfo),
        list!(nvmlDeviceGetComputeRunningProcesses_v2, ProcessInfo),
        list!(nvmlDeviceGetGraphicsRunningProcesses_v2, ProcessInfo),
        list!(nvmlDeviceGetComputeRunningProcesses, cabi::ProcessInfoV1),
        list!(nvmlDeviceGetGraphicsRunningProcesses, cabi::ProcessInfoV1),
        Entry::query("nvmlDeviceGetProcessUtilization", |device, mode| {
            // SAFETY: zeroed plain-old-data C structs.
            let mut items: [ProcessUtilizationSample; 4] = unsafe { std::mem::zeroed() };
            let mut count: c_uint = 4;
            // SAFETY: NULL or a count of 4 with an array of 4.
            unsafe {
                nvmlDeviceGetProcessUtilization(
                    device,
                    items.as_mut_ptr(),
                    out(&mut count, mode),
                    0,
                )
            }
        }),
        Entry {
            name: "nvmlSystemGetProcessName",
            takes_handle: false,
            has_output: true,
            valid: abi::SUCCESS,
            call: |_, mode| {
                let mut name = [0 as c_char; 64];
                let buffer = if mode == Mode::Null {
                    null_mut()
                } else {
                    name.as_mut_ptr()
                };
                // SAFETY: NULL or 64 bytes.
                unsafe { nvmlSystemGetProcessName(41, buffer, 64) }
            },
        },
    ]
}

/// A field-value request for `field_id` at `scope_id`, the rest poisoned.
fn field(field_id: u32, scope_id: u32) -> FieldValue {
    FieldValue {
        field_id,
        scope_id,
        timestamp: -1,
        latency_usec: -1,
        value_type: 99,
        nvml_return: 99,
        value: 0xDEAD,
    }
}

#[test]
fn field_values_answer_each_entry() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut values = [
        field(1, 0),
        field(91, 0),
        field(165, 4),
        field(186, 0),
        field(7777, 0),
        field(165, 40),
    ];
    // SAFETY: six entries.
    assert_eq!(
        unsafe { nvmlDeviceGetFieldValues(handle(1), 6, values.as_mut_ptr()) },
        abi::SUCCESS
    );
    let answers: Vec<(u32, u32, u64)> = values
        .iter()
        .map(|v| (v.nvml_return, v.value_type, v.value))
        .collect();
    assert_eq!(
        answers,
        vec![
            (abi::SUCCESS, 1, 1),
            (abi::SUCCESS, 1, 18),
            (abi::SUCCESS, 1, 1),
            (abi::SUCCESS, 1, 145_000),
            (abi::ERROR_NOT_SUPPORTED, 99, 0xDEAD),
            (abi::ERROR_INVALID_ARGUMENT, 99, 0xDEAD),
        ]
    );
    assert!(values
        .iter()
        .all(|v| v.timestamp > 1_700_000_000_000_000 && v.latency_usec == 0));
    // SAFETY: a zero count is refused before the array is touched.
    assert_eq!(
        unsafe { nvmlDeviceGetFieldValues(handle(1), 0, values.as_mut_ptr()) },
        abi::ERROR_INVALID_ARGUMENT
    );
    // SAFETY: a negative count is refused before the array is touched.
    assert_eq!(
        unsafe { nvmlDeviceGetFieldValues(handle(1), -1, values.as_mut_ptr()) },
        abi::ERROR_INVALID_ARGUMENT
    );
}

/// A new GPM sample, or NULL in [`Mode::Null`] (and before init, when allocation fails).
fn sample(mode: Mode) -> nvmlGpmSample_t {
    let mut sample = null_mut();
    if mode != Mode::Null {
        // SAFETY: a valid slot.
        unsafe { nvmlGpmSampleAlloc(&mut sample) };
    }
    sample
}

/// A metrics request for `ids` over two samples taken on `device` (failures leave them untaken).
fn metrics_request(device: nvmlDevice_t, ids: &[u32]) -> Box<GpmMetricsGet> {
    let (first, second) = (sample(Mode::Valid), sample(Mode::Valid));
    nvmlGpmSampleGet(device, first);
    nvmlGpmSampleGet(device, second);
    let blank = GpmMetric {
        metric_id: 0,
        nvml_return: 99,
        value: -1.0,
        metric_info: [std::ptr::null(); 3],
    };
    let mut request = Box::new(GpmMetricsGet {
        version: cabi::GPM_METRICS_GET_VERSION,
        num_metrics: ids.len() as u32,
        sample1: first as usize,
        sample2: second as usize,
        metrics: [blank; 210],
    });
    for (entry, id) in request.metrics.iter_mut().zip(ids) {
        entry.metric_id = *id;
    }
    request
}

#[test]
fn gpm_samples_and_metrics_follow_the_architecture_and_profile() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut request = metrics_request(handle(2), &[2, 10, 20, 13, 300]);
    // SAFETY: a valid request.
    assert_eq!(unsafe { nvmlGpmMetricsGet(&mut *request) }, abi::SUCCESS);
    let answers: Vec<(u32, f64)> = request.metrics[..5]
        .iter()
        .map(|m| (m.nvml_return, m.value))
        .collect();
    assert_eq!(
        answers,
        vec![
            (abi::SUCCESS, 0.0),
            (abi::SUCCESS, 0.0),
            (abi::SUCCESS, 0.0),
            (abi::ERROR_NOT_SUPPORTED, 0.0),
            (abi::ERROR_INVALID_ARGUMENT, 0.0),
        ]
    );
    assert_eq!(
        request.metrics[5].nvml_return, 99,
        "past numMetrics: untouched"
    );
    let mut mixed = metrics_request(handle(2), &[1]);
    let other = sample(Mode::Valid);
    assert_eq!(nvmlGpmSampleGet(handle(3), other), abi::SUCCESS);
    mixed.sample2 = other as usize;
    // SAFETY: a valid request over two GPUs' samples.
    assert_eq!(
        unsafe { nvmlGpmMetricsGet(&mut *mixed) },
        abi::ERROR_INVALID_ARGUMENT
    );
    mixed.version = 2;
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlGpmMetricsGet(&mut *mixed) },
        abi::ERROR_ARGUMENT_VERSION_MISMATCH
    );
    mixed.version = 1;
    mixed.num_metrics = 211;
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlGpmMetricsGet(&mut *mixed) },
        abi::ERROR_INVALID_ARGUMENT
    );
    assert_eq!(nvmlGpmSampleFree(other), abi::SUCCESS);
    assert_eq!(
        nvmlGpmSampleFree(other),
        abi::ERROR_INVALID_ARGUMENT,
        "freed twice"
    );
    drop(_session);
    let _session = Session::new(
        &GB200.replace("architecture: blackwell", "architecture: ampere"),
        None,
    );
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut support = GpmSupport {
        version: 1,
        is_supported_device: 9,
    };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlGpmQueryDeviceSupport(handle(0), &mut support) },
        abi::SUCCESS
    );
    assert_eq!(support.is_supported_device, 0, "pre-Hopper");
    assert_eq!(
        nvmlGpmSampleGet(handle(0), sample(Mode::Valid)),
        abi::ERROR_NOT_SUPPORTED
    );
}

/// The names this file's table covers, in `EXPORTS` order (pinned by `tests.rs`).
pub(super) fn names() -> Vec<&'static str> {
    table().iter().map(|entry| entry.name).collect()
}

#[test]
fn every_entry_answers_its_valid_code_on_gb200() {
    let _session = Session::new(&gb200_with_processes(), None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    for entry in table() {
        assert_eq!(
            (entry.call)(handle(0), Mode::Valid),
            entry.valid,
            "{}",
            entry.name
        );
    }
}

#[test]
fn every_entry_is_uninitialized_before_init_and_after_shutdown() {
    let _session = Session::new(&gb200_with_processes(), None);
    for round in ["before init", "after shutdown"] {
        for entry in table() {
            let code = (entry.call)(slot0(), Mode::Valid);
            // GPM samples are host memory: allocating and freeing one needs no init.
            let expected = match entry.name {
                "nvmlGpmSampleAlloc" | "nvmlGpmSampleFree" => abi::SUCCESS,
                _ => abi::ERROR_UNINITIALIZED,
            };
            assert_eq!(code, expected, "{} {round}", entry.name);
        }
        assert_eq!(nvmlInit_v2(), abi::SUCCESS);
        assert_eq!(nvmlShutdown(), abi::SUCCESS);
    }
}

#[test]
fn every_output_pointer_is_checked_for_null_and_every_handle_validated() {
    let _session = Session::new(&gb200_with_processes(), None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    for entry in table().iter().filter(|entry| entry.has_output) {
        let code = (entry.call)(handle(0), Mode::Null);
        assert_eq!(code, abi::ERROR_INVALID_ARGUMENT, "{} NULL", entry.name);
    }
    let local = [0u64; 8];
    let foreign = foreign_handles(&local, 4);
    for entry in table().iter().filter(|entry| entry.takes_handle) {
        for bad in foreign {
            let code = (entry.call)(bad, Mode::Valid);
            assert_eq!(
                code,
                abi::ERROR_INVALID_ARGUMENT,
                "{} with {bad:?}",
                entry.name
            );
        }
    }
    let mut status = 0;
    // SAFETY: a valid slot.
    let code = unsafe { nvmlDeviceGetP2PStatus(handle(0), foreign[2], 0, &mut status) };
    assert_eq!(code, abi::ERROR_INVALID_ARGUMENT, "a foreign second GPU");
}

#[test]
fn short_buffers_report_the_size_needed_and_stay_untouched() {
    let _session = Session::new(&gb200_with_processes(), None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut name = [0x55 as c_char; 64];
    // SAFETY: 64 bytes; "trainer" needs 8.
    let code = unsafe { nvmlSystemGetProcessName(41, name.as_mut_ptr(), 7) };
    assert_eq!(code, abi::ERROR_INSUFFICIENT_SIZE);
    assert!(name.iter().all(|byte| *byte == 0x55));
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlSystemGetProcessName(41, name.as_mut_ptr(), 0) },
        abi::ERROR_INVALID_ARGUMENT
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlSystemGetProcessName(43, name.as_mut_ptr(), 64) },
        abi::ERROR_NOT_FOUND
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlSystemGetProcessName(42, name.as_mut_ptr(), 64) },
        abi::SUCCESS
    );
    // SAFETY: NUL-terminated by the successful call.
    assert_eq!(unsafe { CStr::from_ptr(name.as_ptr()) }, c"Xorg");
    // Count protocol: size 0 with a NULL array asks how many; too few slots is INSUFFICIENT_SIZE.
    let mut count: c_uint = 0;
    // SAFETY: a valid count, NULL array with count 0.
    let code = unsafe { nvmlDeviceGetProcessUtilization(handle(0), null_mut(), &mut count, 0) };
    assert_eq!((code, count), (abi::ERROR_INSUFFICIENT_SIZE, 2));
    let mut samples = [ProcessUtilizationSample {
        pid: 7,
        time_stamp: 0,
        sm_util: 0,
        mem_util: 0,
        enc_util: 0,
        dec_util: 0,
    }; 2];
    count = 1;
    // SAFETY: room for 2, asking with 1.
    let code =
        unsafe { nvmlDeviceGetProcessUtilization(handle(0), samples.as_mut_ptr(), &mut count, 0) };
    assert_eq!(
        (code, count, samples[0].pid),
        (abi::ERROR_INSUFFICIENT_SIZE, 2, 7)
    );
    count = 2;
    // SAFETY: room for 2.
    let code =
        unsafe { nvmlDeviceGetProcessUtilization(handle(0), samples.as_mut_ptr(), &mut count, 0) };
    assert_eq!((code, count), (abi::SUCCESS, 2));
    assert_eq!(
        (samples[0].pid, samples[0].sm_util, samples[1].dec_util),
        (41, 90, 5)
    );
    // SAFETY: as above; nothing newer than the samples just read.
    let code = unsafe {
        nvmlDeviceGetProcessUtilization(handle(0), samples.as_mut_ptr(), &mut count, u64::MAX)
    };
    assert_eq!(code, abi::ERROR_NOT_FOUND);
    let mut none: c_uint = 0;
    // SAFETY: a valid count, NULL array with count 0.
    let code = unsafe { nvmlDeviceGetComputeRunningProcesses_v3(handle(1), &mut none, null_mut()) };
    assert_eq!(
        (code, none),
        (abi::SUCCESS, 0),
        "no process: count 0, SUCCESS"
    );
    none = 0;
    // SAFETY: as above.
    let code = unsafe { nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &mut none, null_mut()) };
    assert_eq!((code, none), (abi::ERROR_INSUFFICIENT_SIZE, 1));
    let mut infos = [ProcessInfo {
        pid: 0,
        used_gpu_memory: 0,
        gpu_instance_id: 0,
        compute_instance_id: 0,
    }; 2];
    count = 2;
    // SAFETY: room for 2.
    let code = unsafe {
        nvmlDeviceGetGraphicsRunningProcesses_v3(handle(0), &mut count, infos.as_mut_ptr())
    };
    assert_eq!(
        (code, count, infos[0].pid, infos[0].used_gpu_memory),
        (abi::SUCCESS, 1, 42, 4096)
    );
    assert_eq!(infos[0].compute_instance_id, cabi::NO_INSTANCE);
}

#[test]
fn pci_affinity_and_p2p_values_on_gb200() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let gpu3 = handle(3);
    let gpu = nvml_profile::Profile::parse(GB200)
        .unwrap()
        .device(3)
        .unwrap();
    let mut ext: PciInfoExt = {
        // SAFETY: zeroed plain-old-data C struct.
        unsafe { std::mem::zeroed() }
    };
    // SAFETY: a valid struct, version 0.
    assert_eq!(
        unsafe { nvmlDeviceGetPciInfoExt(gpu3, &mut ext) },
        abi::ERROR_ARGUMENT_VERSION_MISMATCH
    );
    ext.version = cabi::PCI_INFO_EXT_V1;
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlDeviceGetPciInfoExt(gpu3, &mut ext) },
        abi::SUCCESS
    );
    assert_eq!(
        (ext.bus, ext.base_class, ext.sub_class, ext.pci_device_id),
        (u32::from(gpu.pci_bus_id.bus), 3, 2, gpu.pci.device_id)
    );
    let bus_id = crate::query::bus_id(&gpu.pci_bus_id);
    assert_eq!(
        &ext.bus_id[..=bus_id.len()],
        format!("{bus_id}\0").as_bytes()
    );
    let mut v1: crate::activity_abi::PciInfoV1 = {
        // SAFETY: zeroed plain-old-data C struct.
        unsafe { std::mem::zeroed() }
    };
    // SAFETY: a valid 52-byte struct.
    assert_eq!(unsafe { nvmlDeviceGetPciInfo(gpu3, &mut v1) }, abi::SUCCESS);
    let legacy = crate::query::bus_id_legacy(&gpu.pci_bus_id);
    assert_eq!(
        &v1.bus_id[..=legacy.len()],
        format!("{legacy}\0").as_bytes()
    );
    let mut words: [c_ulong; 3] = [7; 3];
    // SAFETY: 3 words.
    assert_eq!(
        unsafe { nvmlDeviceGetCpuAffinity(gpu3, 3, words.as_mut_ptr()) },
        abi::SUCCESS
    );
    assert_eq!(words, [0, 0xFFFF_FFFF_FFFF_FF00, 0xFFFF], "CPUs 72-143");
    // SAFETY: 3 words.
    assert_eq!(
        unsafe { nvmlDeviceGetMemoryAffinity(gpu3, 3, words.as_mut_ptr(), 1) },
        abi::SUCCESS
    );
    assert_eq!(words, [2, 0, 0], "NUMA node 1");
    // SAFETY: 3 words; scope 2 is not a scope; size 0 is refused.
    assert_eq!(
        unsafe { nvmlDeviceGetMemoryAffinity(gpu3, 3, words.as_mut_ptr(), 2) },
        abi::ERROR_INVALID_ARGUMENT
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlDeviceGetCpuAffinity(gpu3, 0, words.as_mut_ptr()) },
        abi::ERROR_INVALID_ARGUMENT
    );
    let mut value = 9;
    // SAFETY: a valid slot.
    assert_eq!(
        unsafe { nvmlDeviceGetNumaNodeId(gpu3, &mut value) },
        abi::SUCCESS
    );
    assert_eq!(value, 1);
    // SAFETY: a valid slot.
    assert_eq!(
        unsafe { nvmlDeviceGetP2PStatus(handle(0), gpu3, 3, &mut value) },
        abi::SUCCESS
    );
    assert_eq!(value, cabi::P2P_STATUS_OK);
    // SAFETY: a valid slot.
    assert_eq!(
        unsafe { nvmlDeviceGetP2PStatus(handle(0), gpu3, 5, &mut value) },
        abi::ERROR_INVALID_ARGUMENT
    );
    // SAFETY: a valid slot.
    assert_eq!(
        unsafe { nvmlDeviceGetGpuMaxPcieLinkGeneration(gpu3, &mut value) },
        abi::SUCCESS
    );
    assert_eq!(value, 6);
}

#[test]
fn counters_codecs_gpm_and_c2c_values() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let gpu = handle(2);
    let (mut rx, mut tx): (c_ulonglong, c_ulonglong) = (0, 0);
    let read = |rx: &mut c_ulonglong, tx: &mut c_ulonglong| {
        // SAFETY: valid slots.
        unsafe { nvmlDeviceGetNvLinkUtilizationCounter(gpu, 7, 1, rx, tx) }
    };
    assert_eq!(read(&mut rx, &mut tx), abi::SUCCESS);
    let uptime = crate::activity::uptime_s();
    assert!(
        uptime > 0.0 && rx == tx && rx > 0,
        "accrues over {uptime} s of uptime: {rx}"
    );
    assert_eq!(
        nvmlDeviceResetNvLinkUtilizationCounter(gpu, 7, 1),
        abi::SUCCESS
    );
    assert_eq!(
        nvmlDeviceFreezeNvLinkUtilizationCounter(gpu, 7, 1, 1),
        abi::SUCCESS
    );
    assert_eq!(read(&mut rx, &mut tx), abi::SUCCESS);
    // /proc/uptime ticks every 10 ms: at most a few ticks pass between the reset and the freeze.
    let rate = nvml_profile::Profile::parse(GB200)
        .unwrap()
        .device(2)
        .unwrap();
    let rate = rate.nvlink_counters.unwrap().traffic_per_second;
    assert!(rx <= rate / 10, "reset to zero, then frozen: {rx}");
    let frozen = rx;
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(read(&mut rx, &mut tx), abi::SUCCESS);
    assert_eq!(rx, frozen, "frozen");
    assert_eq!(
        nvmlDeviceFreezeNvLinkUtilizationCounter(gpu, 7, 1, 2),
        abi::ERROR_INVALID_ARGUMENT
    );
    assert_eq!(
        nvmlDeviceFreezeNvLinkUtilizationCounter(gpu, 7, 1, 0),
        abi::SUCCESS
    );
    assert_eq!(
        nvmlDeviceResetNvLinkUtilizationCounter(gpu, 18, 0),
        abi::ERROR_INVALID_ARGUMENT
    );
    let mut errors: c_ulonglong = 9;
    // SAFETY: a valid slot.
    assert_eq!(
        unsafe { nvmlDeviceGetNvLinkErrorCounter(gpu, 0, 4, &mut errors) },
        abi::SUCCESS
    );
    assert_eq!(errors, 0, "healthy links");
    let (mut util, mut period) = (9, 9);
    // SAFETY: valid slots.
    assert_eq!(
        unsafe { nvmlDeviceGetJpgUtilization(gpu, &mut util, &mut period) },
        abi::SUCCESS
    );
    assert_eq!((util, period), (0, 0));
    let mut capacity = 0;
    // SAFETY: a valid slot.
    assert_eq!(
        unsafe { nvmlDeviceGetEncoderCapacity(gpu, 0, &mut capacity) },
        abi::SUCCESS
    );
    assert_eq!(capacity, 100);
    // SAFETY: a valid slot; NVML_ENCODER_QUERY 3 does not exist.
    assert_eq!(
        unsafe { nvmlDeviceGetEncoderCapacity(gpu, 3, &mut capacity) },
        abi::ERROR_INVALID_ARGUMENT
    );
    let mut sessions: c_uint = 4;
    // SAFETY: a valid count; no array is written.
    assert_eq!(
        unsafe { nvmlDeviceGetEncoderSessions(gpu, &mut sessions, null_mut()) },
        abi::SUCCESS
    );
    assert_eq!(sessions, 0);
    let mut gpm = GpmSupport {
        version: 2,
        is_supported_device: 7,
    };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlGpmQueryDeviceSupport(gpu, &mut gpm) },
        abi::ERROR_ARGUMENT_VERSION_MISMATCH
    );
    gpm.version = 1;
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlGpmQueryDeviceSupport(gpu, &mut gpm) },
        abi::SUCCESS
    );
    assert_eq!(gpm.is_supported_device, 1, "Blackwell");
    let mut c2c = C2cModeInfo { is_c2c_enabled: 9 };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetC2cModeInfoV(gpu, &mut c2c) },
        abi::SUCCESS
    );
    assert_eq!(c2c.is_c2c_enabled, 1);
}

#[test]
fn missing_sections_are_not_supported() {
    let text = H100
        .lines()
        .filter(|line| {
            ![
                "pcie_counters:",
                "pci_class:",
                "codecs:",
                "nvlink_counters:",
            ]
            .iter()
            .any(|key| line.trim_start().starts_with(key))
        })
        .collect::<Vec<_>>()
        .join("\n");
    let _session = Session::new(&text, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let gpu = handle(0);
    let not_supported = [
        "nvmlDeviceGetPciInfoExt",
        "nvmlDeviceGetPcieThroughput",
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlDeviceGetNvLinkErrorCounter",
        "nvmlDeviceGetNvLinkUtilizationCounter",
        "nvmlDeviceFreezeNvLinkUtilizationCounter",
        "nvmlDeviceResetNvLinkUtilizationCounter",
        "nvmlDeviceResetNvLinkErrorCounters",
        "nvmlDeviceGetEncoderUtilization",
        "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetJpgUtilization",
        "nvmlDeviceGetOfaUtilization",
        "nvmlDeviceGetEncoderCapacity",
        "nvmlDeviceGetEncoderStats",
        "nvmlDeviceGetFBCStats",
        "nvmlDeviceGetEncoderSessions",
        "nvmlDeviceGetFBCSessions",
        "nvmlDeviceGetPlatformInfo",
        "nvmlDeviceGetC2cModeInfoV",
    ];
    for entry in table() {
        let code = (entry.call)(gpu, Mode::Valid);
        if not_supported.contains(&entry.name) {
            assert_eq!(code, abi::ERROR_NOT_SUPPORTED, "{}", entry.name);
        }
    }
    let mut count: c_uint = 0;
    // SAFETY: a valid count, NULL array with count 0.
    let code = unsafe { nvmlDeviceGetProcessUtilization(gpu, null_mut(), &mut count, 0) };
    assert_eq!(code, abi::ERROR_NOT_FOUND, "no process, no sample");
}

#[test]
fn v1_symbols_write_the_v1_pci_struct_only() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut count: c_uint = 0;
    // SAFETY: a valid slot (the generated `_v1` aliases forward to the v1 implementations).
    assert_eq!(
        unsafe { nvmlDeviceGetCount_v1(std::ptr::addr_of_mut!(count).cast()) },
        abi::SUCCESS
    );
    assert_eq!(count, 4);
    let mut device: nvmlDevice_t = null_mut();
    // SAFETY: a valid slot.
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByIndex_v1(1, std::ptr::addr_of_mut!(device).cast()) },
        abi::SUCCESS
    );
    assert_eq!(device, handle(1));
    for call in [
        // SAFETY (both): a 68-byte buffer, larger than the 52-byte v1 struct.
        |buffer: *mut u8| unsafe { nvmlDeviceGetPciInfo_v1(handle(1), buffer.cast()) },
        |buffer: *mut u8| unsafe {
            nvmlDeviceGetNvLinkRemotePciInfo_v1(handle(1), 2, buffer.cast())
        },
    ] {
        let mut buffer = [0x55u8; 68];
        assert_eq!(call(buffer.as_mut_ptr()), abi::SUCCESS);
        assert!(
            buffer[52..].iter().all(|byte| *byte == 0x55),
            "nothing past 52 bytes"
        );
        assert_eq!(buffer[48..52], [0; 4], "reserved words zero");
        assert_eq!(
            buffer[12], 0,
            "a 12-character bus id and its NUL in 16 bytes"
        );
    }
}

#[test]
fn v1_process_lists_write_pid_and_memory_only() {
    let _session = Session::new(&gb200_with_processes(), None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut infos = [cabi::ProcessInfoV1 {
        pid: 0,
        used_gpu_memory: 0,
    }; 2];
    let mut count: c_uint = 2;
    // SAFETY: room for 2 (`_v1` forwards to the unversioned symbol).
    let code = unsafe {
        nvmlDeviceGetComputeRunningProcesses_v1(
            handle(0),
            std::ptr::addr_of_mut!(count).cast(),
            infos.as_mut_ptr().cast(),
        )
    };
    assert_eq!((code, count), (abi::SUCCESS, 1));
    assert_eq!(
        infos[0],
        cabi::ProcessInfoV1 {
            pid: 41,
            used_gpu_memory: 1 << 30
        }
    );
    assert_eq!(infos[1].pid, 0, "one entry written");
}
