//! Event sets through the `extern "C"` functions C sees: foreign and freed sets, supported and
//! unsupported types, Xid and ECC injections written to the control file while a wait blocks, a
//! lost GPU (also across shutdown and init), and MIG partition changes.

use std::{
    ffi::c_void,
    ptr::null_mut,
    time::{Duration, Instant},
};

use nvml_profile::{Profile, GB200};

use super::{handle, Session};
use crate::{
    abi::{self, NvmlReturn},
    ffi::*,
};

/// A session on a 4-GPU gb200 with `MOCK_NVML_XID_FILE` at a file in the returned directory.
fn session() -> (Session, tempfile::TempDir, std::path::PathBuf) {
    session_on(GB200)
}

/// As [`session`] on the profile `text`.
fn session_on(text: &str) -> (Session, tempfile::TempDir, std::path::PathBuf) {
    let profile = Profile::parse(text).unwrap().to_yaml().unwrap();
    let session = Session::new(&profile, None);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("xid-injections");
    std::env::set_var(node_layout::env::MOCK_NVML_XID_FILE, &file);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    (session, dir, file)
}

fn create() -> nvmlEventSet_t {
    let mut set = null_mut();
    // SAFETY: a valid handle slot.
    assert_eq!(unsafe { nvmlEventSetCreate(&mut set) }, abi::SUCCESS);
    assert!(!set.is_null());
    set
}

fn wait_v2(set: nvmlEventSet_t, timeout_ms: u32) -> (NvmlReturn, abi::EventData, Duration) {
    // SAFETY: zeroed plain-old-data C struct.
    let mut data: abi::EventData = unsafe { std::mem::zeroed() };
    let start = Instant::now();
    // SAFETY: a valid struct.
    let code = unsafe { nvmlEventSetWait_v2(set, &mut data, timeout_ms) };
    (code, data, start.elapsed())
}

#[test]
fn foreign_and_freed_sets_are_invalid_arguments() {
    let (_session, _dir, _file) = session();
    let freed = create();
    assert_eq!(nvmlEventSetFree(freed), abi::SUCCESS);
    let local = [0u64; 4];
    let foreign: [nvmlEventSet_t; 4] = [
        null_mut(),
        8 as nvmlEventSet_t,
        local.as_ptr().cast_mut().cast::<c_void>(),
        freed,
    ];
    for set in foreign {
        assert_eq!(
            nvmlEventSetFree(set),
            abi::ERROR_INVALID_ARGUMENT,
            "{set:?}"
        );
        assert_eq!(
            nvmlDeviceRegisterEvents(handle(0), abi::EVENT_TYPE_XID_CRITICAL_ERROR, set),
            abi::ERROR_INVALID_ARGUMENT
        );
        let (code, _, _) = wait_v2(set, 0);
        assert_eq!(code, abi::ERROR_INVALID_ARGUMENT);
        let mut v1 = [0u64; 3];
        // SAFETY: 24 writable bytes.
        let code = unsafe { nvmlEventSetWait(set, v1.as_mut_ptr().cast(), 0) };
        assert_eq!(code, abi::ERROR_INVALID_ARGUMENT);
    }
    let set = create();
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    assert_eq!(nvmlEventSetFree(set), abi::ERROR_UNINITIALIZED);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(
        nvmlEventSetFree(set),
        abi::ERROR_INVALID_ARGUMENT,
        "the last shutdown forgets every set"
    );
}

fn supported_types() -> u64 {
    let mut types = 0u64;
    // SAFETY: a valid u64.
    let code = unsafe { nvmlDeviceGetSupportedEventTypes(handle(0), &mut types) };
    assert_eq!(code, abi::SUCCESS);
    types
}

#[test]
fn ecc_off_and_no_mig_support_xid_only() {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(GB200).unwrap();
    doc["device_defaults"]["ecc"] =
        serde_yaml::from_str("{current: false, pending: false}").unwrap();
    let defaults = doc["device_defaults"].as_mapping_mut().unwrap();
    defaults.remove("mig_mode");
    let (_session, _dir, _file) = session_on(&serde_yaml::to_string(&doc).unwrap());
    assert_eq!(supported_types(), abi::EVENT_TYPE_XID_CRITICAL_ERROR);
    let set = create();
    for unsupported in [0x1, 0x2, 0x8 | 0x1, 0x100] {
        assert_eq!(
            nvmlDeviceRegisterEvents(handle(0), unsupported, set),
            abi::ERROR_NOT_SUPPORTED,
            "{unsupported:#x}"
        );
    }
    assert_eq!(nvmlEventSetFree(set), abi::SUCCESS);
}

#[test]
fn ecc_on_and_mig_capable_support_ecc_and_mig_events() {
    let (_session, _dir, _file) = session();
    assert_eq!(supported_types(), 0x1 | 0x2 | 0x8 | 0x100);
    let set = create();
    // NVIDIA's device plugin registers Xid | DBE | SBE masked by the supported types.
    assert_eq!(
        nvmlDeviceRegisterEvents(handle(0), 0x8 | 0x2 | 0x1, set),
        abi::SUCCESS
    );
    assert_eq!(
        nvmlDeviceRegisterEvents(handle(0), 0x100, set),
        abi::SUCCESS
    );
    for unsupported in [0x4, 0x10, abi::EVENT_TYPE_ALL] {
        assert_eq!(
            nvmlDeviceRegisterEvents(handle(0), unsupported, set),
            abi::ERROR_NOT_SUPPORTED,
            "{unsupported:#x}"
        );
    }
    assert_eq!(
        nvmlDeviceRegisterEvents(handle(0), 1 << 40, set),
        abi::ERROR_INVALID_ARGUMENT
    );
    assert_eq!(nvmlEventSetFree(set), abi::SUCCESS);
}

#[test]
fn an_injection_written_during_a_wait_is_delivered_once() {
    let (_session, _dir, file) = session();
    let set = create();
    assert_eq!(
        nvmlDeviceRegisterEvents(handle(1), abi::EVENT_TYPE_XID_CRITICAL_ERROR, set),
        abi::SUCCESS
    );
    let (code, _, elapsed) = wait_v2(set, 300);
    assert_eq!(code, abi::ERROR_TIMEOUT);
    assert!(
        // The upper bound only leaves room for a loaded machine's scheduling.
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_millis(1500),
        "{elapsed:?}"
    );

    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        std::fs::write(&file, "id=1 gpu=1 xid=79\nid=2 gpu=0 xid=48\n").unwrap();
    });
    let (code, data, elapsed) = wait_v2(set, 5_000);
    writer.join().unwrap();
    assert_eq!(code, abi::SUCCESS);
    assert!(
        elapsed < Duration::from_secs(3),
        "returns when the line arrives: {elapsed:?}"
    );
    assert_eq!(
        data,
        abi::EventData {
            device: handle(1) as usize,
            event_type: abi::EVENT_TYPE_XID_CRITICAL_ERROR,
            event_data: 79,
            gpu_instance_id: abi::INSTANCE_ID_NONE,
            compute_instance_id: abi::INSTANCE_ID_NONE,
        }
    );
    let (code, _, elapsed) = wait_v2(set, 1_000);
    assert_eq!(code, abi::ERROR_GPU_IS_LOST, "Xid 79: GPU 1 is lost");
    assert!(elapsed < Duration::from_millis(500), "at once: {elapsed:?}");
    let (code, _, _) = wait_v2(set, 100);
    assert_eq!(
        code,
        abi::ERROR_TIMEOUT,
        "once only; GPU 0 is not registered"
    );

    // A second set registered later still gets the standing fault once; v1 writes 24 bytes.
    let other = create();
    nvmlDeviceRegisterEvents(handle(1), abi::EVENT_TYPE_XID_CRITICAL_ERROR, other);
    let mut v1 = [0x55u8; 32];
    // SAFETY: 32 writable bytes, more than the v1 struct.
    let code = unsafe { nvmlEventSetWait(other, v1.as_mut_ptr().cast(), 0) };
    assert_eq!(code, abi::SUCCESS);
    assert_eq!(&v1[16..24], &79u64.to_ne_bytes());
    assert!(
        v1[24..].iter().all(|byte| *byte == 0x55),
        "v1: 24 bytes only"
    );
    assert_eq!(nvmlEventSetFree(other), abi::SUCCESS);
    assert_eq!(nvmlEventSetFree(set), abi::SUCCESS);
}

#[test]
fn an_ecc_error_is_delivered_once_and_counted() {
    let (_session, _dir, file) = session();
    let total = |error: u32, counter: u32| {
        let mut count = u64::MAX;
        // SAFETY: a valid u64.
        let code = unsafe { nvmlDeviceGetTotalEccErrors(handle(2), error, counter, &mut count) };
        assert_eq!(code, abi::SUCCESS);
        count
    };
    assert_eq!((total(0, 0), total(1, 0), total(1, 1)), (0, 0, 0));
    let set = create();
    assert_eq!(
        nvmlDeviceRegisterEvents(handle(2), 0x8 | 0x2 | 0x1, set),
        abi::SUCCESS
    );
    std::fs::write(
        &file,
        "id=1 gpu=2 ecc=double\nid=2 gpu=2 ecc=single\nid=3 gpu=2 ecc=double\n",
    )
    .unwrap();
    let delivered: Vec<(u64, u64, usize)> = (0..3)
        .map(|_| wait_v2(set, 0))
        .map(|(code, data, _)| {
            assert_eq!(code, abi::SUCCESS);
            (data.event_type, data.event_data, data.device)
        })
        .collect();
    let gpu2 = handle(2) as usize;
    assert_eq!(delivered, [(0x2, 0, gpu2), (0x1, 0, gpu2), (0x2, 0, gpu2)]);
    assert_eq!(wait_v2(set, 0).0, abi::ERROR_TIMEOUT, "each once");
    // Volatile and aggregate, corrected (single) and uncorrected (double), in device memory.
    assert_eq!(
        (total(0, 0), total(0, 1), total(1, 0), total(1, 1)),
        (1, 1, 2, 2)
    );
    let mut dram = 0u64;
    // SAFETY: a valid u64; location 2 is device memory.
    let code = unsafe { nvmlDeviceGetMemoryErrorCounter(handle(2), 1, 0, 2, &mut dram) };
    assert_eq!((code, dram), (abi::SUCCESS, 2));
    std::fs::write(&file, "").unwrap();
    assert_eq!(total(1, 0), 0, "a clear ends the injected errors");
    assert_eq!(nvmlEventSetFree(set), abi::SUCCESS);
}

#[test]
fn a_lost_gpu_survives_shutdown_and_init() {
    let (_session, _dir, file) = session();
    std::fs::write(&file, "id=9 gpu=3 xid=79\n").unwrap();
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    // A set registered only for ECC errors is told the GPU is lost at once.
    let ecc_only = create();
    assert_eq!(
        nvmlDeviceRegisterEvents(handle(3), 0x1, ecc_only),
        abi::SUCCESS
    );
    assert_eq!(wait_v2(ecc_only, 0).0, abi::ERROR_GPU_IS_LOST);
    assert_eq!(wait_v2(ecc_only, 0).0, abi::ERROR_TIMEOUT);
    // A set registered for Xid gets the Xid 79 event first, then GPU_IS_LOST.
    let set = create();
    assert_eq!(nvmlDeviceRegisterEvents(handle(3), 0x8, set), abi::SUCCESS);
    let (code, data, _) = wait_v2(set, 0);
    assert_eq!((code, data.event_data), (abi::SUCCESS, 79));
    assert_eq!(wait_v2(set, 0).0, abi::ERROR_GPU_IS_LOST);
    assert_eq!(nvmlEventSetFree(set), abi::SUCCESS);
    assert_eq!(nvmlEventSetFree(ecc_only), abi::SUCCESS);
}

#[test]
fn a_mig_partition_change_is_an_event() {
    let (_session, dir, _file) = session();
    let state = dir.path().join("mig-state");
    std::env::set_var(node_layout::env::MOCK_NVML_MIG_STATE, &state);
    let set = create();
    assert_eq!(
        nvmlDeviceRegisterEvents(handle(1), 0x100, set),
        abi::SUCCESS
    );
    assert_eq!(wait_v2(set, 0).0, abi::ERROR_TIMEOUT, "no change yet");
    let mut partition = node_layout::mig_state::MigState::default();
    let gpu = partition.gpu_mut(
        1,
        (
            node_layout::mig_state::Mode::Enabled,
            node_layout::mig_state::Mode::Enabled,
        ),
    );
    gpu.instances.push(node_layout::mig_state::GpuInstance {
        id: 1,
        profile_id: 0,
        placement: node_layout::mig_state::Placement { start: 0, size: 8 },
        compute: Vec::new(),
    });
    std::fs::write(&state, node_layout::mig_state::format(&partition)).unwrap();
    let (code, data, _) = wait_v2(set, 1_000);
    assert_eq!(code, abi::SUCCESS);
    assert_eq!(
        (data.event_type, data.event_data, data.device),
        (0x100, 0, handle(1) as usize)
    );
    assert_eq!(data.gpu_instance_id, abi::INSTANCE_ID_NONE);
    let again = wait_v2(set, 0).0;
    std::env::remove_var(node_layout::env::MOCK_NVML_MIG_STATE);
    assert_eq!(again, abi::ERROR_TIMEOUT, "once per change");
    assert_eq!(nvmlEventSetFree(set), abi::SUCCESS);
}
