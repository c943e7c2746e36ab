//! Per-process visibility through the `extern "C"` functions C sees: a dev root holding some of
//! the GPUs' nodes hides the others from every lookup, the count, the topology queries and the
//! events, and renumbers the rest from 0; all or none present filters nothing.

use std::{
    ffi::{c_char, c_uint, CStr, CString},
    ptr::null_mut,
};

use nvml_profile::{Profile, GB200, H100};

use super::{handle, Session};
use crate::{
    abi::{self, NvmlReturn},
    ffi::*,
};

/// A session on `profile` whose dev root (`MOCK_NVML_DEV_ROOT`) holds `nvidia<minor>` for
/// `minors`, and whose Xid control file is `xid-injections` in the same directory.
fn session(profile: &str, minors: &[u32]) -> (Session, tempfile::TempDir) {
    let session = Session::new(profile, None);
    let dir = tempfile::tempdir().unwrap();
    for minor in minors {
        std::fs::write(dir.path().join(format!("nvidia{minor}")), "").unwrap();
    }
    std::fs::write(dir.path().join("nvidiactl"), "").unwrap();
    std::env::set_var(node_layout::env::MOCK_NVML_DEV_ROOT, dir.path());
    std::env::set_var(
        node_layout::env::MOCK_NVML_XID_FILE,
        dir.path().join("xid-injections"),
    );
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    (session, dir)
}

fn count() -> c_uint {
    let mut count = 0;
    // SAFETY: a valid out slot.
    assert_eq!(unsafe { nvmlDeviceGetCount_v2(&mut count) }, abi::SUCCESS);
    count
}

fn text(
    getter: unsafe extern "C" fn(nvmlDevice_t, *mut c_char, c_uint) -> NvmlReturn,
    device: nvmlDevice_t,
) -> String {
    let mut buffer = [0 as c_char; 96];
    // SAFETY: a buffer of the length passed.
    assert_eq!(
        unsafe { getter(device, buffer.as_mut_ptr(), 96) },
        abi::SUCCESS
    );
    // SAFETY: the library wrote a NUL-terminated string.
    unsafe { CStr::from_ptr(buffer.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned()
}

fn scalar(
    getter: unsafe extern "C" fn(nvmlDevice_t, *mut c_uint) -> NvmlReturn,
    device: nvmlDevice_t,
) -> c_uint {
    let mut value = c_uint::MAX;
    // SAFETY: a valid out slot.
    assert_eq!(unsafe { getter(device, &mut value) }, abi::SUCCESS);
    value
}

/// (index, minor, uuid, bus id) of every handle by index.
fn listing() -> Vec<(c_uint, c_uint, String, String)> {
    (0..count())
        .map(|index| {
            let device = handle(index);
            (
                scalar(nvmlDeviceGetIndex, device),
                scalar(nvmlDeviceGetMinorNumber, device),
                text(nvmlDeviceGetUUID, device),
                bus_id(device),
            )
        })
        .collect()
}

/// The bus id from `nvmlDeviceGetPciInfo_v3`.
fn bus_id(device: nvmlDevice_t) -> String {
    // SAFETY: zeroed plain-old-data C struct.
    let mut info: abi::PciInfo = unsafe { std::mem::zeroed() };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetPciInfo_v3(device, &mut info) },
        abi::SUCCESS
    );
    CStr::from_bytes_until_nul(&info.bus_id)
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned()
}

fn by_uuid(uuid: &str) -> Result<nvmlDevice_t, NvmlReturn> {
    let uuid = CString::new(uuid).unwrap();
    let mut device = null_mut();
    // SAFETY: a NUL-terminated string and a valid out slot.
    match unsafe { nvmlDeviceGetHandleByUUID(uuid.as_ptr(), &mut device) } {
        abi::SUCCESS => Ok(device),
        code => Err(code),
    }
}

fn by_bus_id(bus_id: &str) -> Result<nvmlDevice_t, NvmlReturn> {
    let bus_id = CString::new(bus_id).unwrap();
    let mut device = null_mut();
    // SAFETY: a NUL-terminated string and a valid out slot.
    match unsafe { nvmlDeviceGetHandleByPciBusId_v2(bus_id.as_ptr(), &mut device) } {
        abi::SUCCESS => Ok(device),
        code => Err(code),
    }
}

fn gb200() -> String {
    Profile::parse(GB200).unwrap().to_yaml().unwrap()
}

#[test]
fn all_or_none_of_the_nodes_present_filters_nothing() {
    let all = {
        let (_session, _dir) = session(&gb200(), &[0, 1, 2, 3]);
        listing()
    };
    let none = {
        let (_session, _dir) = session(&gb200(), &[]);
        listing()
    };
    assert_eq!(all.len(), 4);
    assert_eq!(all, none);
    assert_eq!(
        all.iter().map(|gpu| (gpu.0, gpu.1)).collect::<Vec<_>>(),
        [(0, 0), (1, 1), (2, 2), (3, 3)]
    );
}

#[test]
fn a_subset_is_renumbered_and_keeps_its_identity() {
    let host = {
        let (_session, _dir) = session(&gb200(), &[]);
        listing()
    };
    let (_session, _dir) = session(&gb200(), &[1, 3]);
    let visible = listing();
    assert_eq!(
        visible,
        [
            (0, 1, host[1].2.clone(), host[1].3.clone()),
            (1, 3, host[3].2.clone(), host[3].3.clone()),
        ]
    );
    // By UUID and bus id: the visible ones give their renumbered handles, hidden ones NOT_FOUND.
    assert_eq!(by_uuid(&host[3].2), Ok(handle(1)));
    assert_eq!(by_bus_id(&host[1].3), Ok(handle(0)));
    assert_eq!(by_uuid(&host[0].2), Err(abi::ERROR_NOT_FOUND));
    assert_eq!(by_bus_id(&host[2].3), Err(abi::ERROR_NOT_FOUND));
    let mut device = null_mut();
    // SAFETY: a valid out slot.
    let code = unsafe { nvmlDeviceGetHandleByIndex_v2(2, &mut device) };
    assert_eq!(code, abi::ERROR_INVALID_ARGUMENT, "past the visible count");
    // The fabric identity stays each GPU's own.
    // SAFETY: zeroed plain-old-data C struct.
    let mut fabric: abi::GpuFabricInfo = unsafe { std::mem::zeroed() };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetGpuFabricInfo(handle(1), &mut fabric) },
        abi::SUCCESS
    );
    let profile = Profile::parse(GB200).unwrap();
    let expected = profile.devices()[3].fabric.unwrap();
    assert_eq!(fabric.clique_id, expected.clique_id);
    assert_eq!(fabric.cluster_uuid, *expected.cluster_uuid.as_bytes());
}

#[test]
fn topology_queries_answer_over_the_visible_gpus() {
    // h100: GPUs 0-1 share a switch, 0-3 one NUMA node, 4-7 the other.
    let profile = Profile::parse(H100).unwrap().to_yaml().unwrap();
    let (_session, _dir) = session(&profile, &[1, 4, 5]);
    assert_eq!(count(), 3);
    let mut level = 0;
    // SAFETY: a valid out slot.
    let code = unsafe { nvmlDeviceGetTopologyCommonAncestor(handle(1), handle(2), &mut level) };
    assert_eq!(
        (code, level),
        (abi::SUCCESS, 10),
        "host 4 and 5 share a switch: SINGLE"
    );
    // SAFETY: a valid out slot.
    let code = unsafe { nvmlDeviceGetTopologyCommonAncestor(handle(0), handle(1), &mut level) };
    assert_eq!((code, level), (abi::SUCCESS, 50), "host 1 and 4: SYSTEM");
    let mut array = [null_mut(); 4];
    let mut count = 4;
    // SAFETY: an array of `count` handles.
    let code =
        unsafe { nvmlDeviceGetTopologyNearestGpus(handle(0), 50, &mut count, array.as_mut_ptr()) };
    assert_eq!((code, count), (abi::SUCCESS, 2));
    assert_eq!(array[..2], [handle(1), handle(2)]);
    let mut count = 4;
    // SAFETY: as above; CPU 60 is on the second NUMA node.
    let code = unsafe { nvmlSystemGetTopologyGpuSet(60, &mut count, array.as_mut_ptr()) };
    assert_eq!((code, count), (abi::SUCCESS, 2));
    assert_eq!(array[..2], [handle(1), handle(2)]);
}

#[test]
fn an_xid_names_the_host_index_and_reaches_the_visible_handle() {
    let (_session, dir) = session(&gb200(), &[1, 3]);
    let mut set = null_mut();
    // SAFETY: a valid out slot.
    assert_eq!(unsafe { nvmlEventSetCreate(&mut set) }, abi::SUCCESS);
    for index in 0..2 {
        assert_eq!(
            nvmlDeviceRegisterEvents(handle(index), abi::EVENT_TYPE_XID_CRITICAL_ERROR, set),
            abi::SUCCESS
        );
    }
    // Host GPU 0 is hidden: its fault reaches no set; host GPU 3 is visible GPU 1.
    std::fs::write(
        dir.path().join("xid-injections"),
        "id=1 gpu=0 xid=48\nid=2 gpu=3 xid=79\n",
    )
    .unwrap();
    // SAFETY: zeroed plain-old-data C struct.
    let mut data: abi::EventData = unsafe { std::mem::zeroed() };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlEventSetWait_v2(set, &mut data, 1000) },
        abi::SUCCESS
    );
    assert_eq!((data.device, data.event_data), (handle(1) as usize, 79));
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlEventSetWait_v2(set, &mut data, 100) },
        abi::ERROR_GPU_IS_LOST,
        "Xid 79: the visible GPU is lost"
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlEventSetWait_v2(set, &mut data, 100) },
        abi::ERROR_TIMEOUT
    );
    assert_eq!(nvmlEventSetFree(set), abi::SUCCESS);
}

/// The MIG devices of `device` by index, as their UUIDs.
fn mig_uuids(device: nvmlDevice_t) -> Vec<String> {
    (0..7)
        .map_while(|index| {
            let mut mig = null_mut();
            // SAFETY: a live out slot.
            let code = unsafe { nvmlDeviceGetMigDeviceHandleByIndex(device, index, &mut mig) };
            (code == abi::SUCCESS).then(|| text(nvmlDeviceGetUUID, mig))
        })
        .collect()
}

/// A container given one MIG device (its parent's node and the two capability nodes of its
/// GPU and compute instance) sees that parent alone and, of its MIG devices, that one; the
/// hardware's maximum count stays.
#[test]
fn a_mig_device_container_sees_its_parent_and_that_device_only() {
    let (_session, dir) = session(H100, &[1]);
    assert_eq!(count(), 1);
    let device = handle(0);
    let minor = scalar(nvmlDeviceGetMinorNumber, device);
    let mut status = 0;
    // SAFETY (all calls below): live handles and out slots.
    assert_eq!(
        unsafe { nvmlDeviceSetMigMode(device, 1, &mut status) },
        abi::SUCCESS
    );
    for _ in 0..2 {
        let gi = super::lifecycle_tests::create_gi(device, 19).unwrap();
        let mut ci = null_mut();
        assert_eq!(
            unsafe { nvmlGpuInstanceCreateComputeInstance(gi, 0, &mut ci) },
            abi::SUCCESS
        );
    }
    let all = mig_uuids(device);
    assert_eq!(all.len(), 2, "no capability node: nothing filtered");
    let mut second = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceGetMigDeviceHandleByIndex(device, 1, &mut second) },
        abi::SUCCESS
    );
    let gi = scalar(nvmlDeviceGetGpuInstanceId, second);
    let ci = scalar(nvmlDeviceGetComputeInstanceId, second);
    let caps = dir.path().join("nvidia-caps");
    std::fs::create_dir(&caps).unwrap();
    for cap in node_layout::mig_minors::device_minors(minor, gi, ci).unwrap() {
        std::fs::write(caps.join(format!("nvidia-cap{cap}")), "").unwrap();
    }
    assert_eq!(mig_uuids(device), [all[1].clone()]);
    let hidden = CString::new(all[0].clone()).unwrap();
    let mut found = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByUUID(hidden.as_ptr(), &mut found) },
        abi::ERROR_NOT_FOUND
    );
    assert_eq!(scalar(nvmlDeviceGetMaxMigDeviceCount, device), 7);
}
