//! Event sets through the `extern "C"` functions C sees: foreign and freed sets, unsupported
//! types, and Xid injections written to the control file while a wait blocks.

use std::{
    ffi::c_void,
    ptr::null_mut,
    time::{Duration, Instant},
};

use nvml_profile::{Profile, GB200};

use super::{handle, Session};
use crate::{abi, ffi::*};

/// A session on a 4-GPU gb200 with `MOCK_NVML_XID_FILE` at a file in the returned directory.
fn session() -> (Session, tempfile::TempDir, std::path::PathBuf) {
    let profile = Profile::parse(GB200).unwrap().to_yaml().unwrap();
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

#[test]
fn only_xid_is_supported() {
    let (_session, _dir, _file) = session();
    let mut types = 0u64;
    // SAFETY: a valid u64.
    let code = unsafe { nvmlDeviceGetSupportedEventTypes(handle(0), &mut types) };
    assert_eq!(
        (code, types),
        (abi::SUCCESS, abi::EVENT_TYPE_XID_CRITICAL_ERROR)
    );
    let set = create();
    for unsupported in [0x1, 0x2, 0x4, 0x10, abi::EVENT_TYPE_ALL] {
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
