//! The MIG name and placement exports through the C functions, on the h100 profile's real table.

use super::*;
use crate::mig::{GpuInstancePlacement, GpuInstanceProfileInfoV2, GpuInstanceProfileInfoV3};

fn h100_with_mig(current: bool) -> String {
    let text = Profile::parse(H100).unwrap().to_yaml().unwrap();
    let from = "mig_mode:\n    current: false";
    assert!(text.contains(from), "the h100 profile's mig_mode moved");
    text.replace(from, &format!("mig_mode:\n    current: {current}"))
}

/// `nvmlDeviceGetGpuInstancePossiblePlacements_v2`.
fn placements_v2(
    device: nvmlDevice_t,
    profile_id: c_uint,
    slots: *mut GpuInstancePlacement,
    count: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: the callers pass NULL or pointers at live locals of the right type and size.
    unsafe { nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profile_id, slots, count) }
}

#[test]
fn placements_use_the_count_protocol() {
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(1);
    let mut count = 0;
    // SAFETY (all calls below): the pointers point at live locals of the right type and size.
    assert_eq!(
        placements_v2(device, 15, null_mut(), &mut count),
        abi::SUCCESS
    );
    assert_eq!(count, 4, "1g.20gb: four places, MIG disabled or not");
    let blank = GpuInstancePlacement {
        start: 99,
        size: 99,
    };
    let mut slots = [blank; 8];
    count = 3;
    assert_eq!(
        placements_v2(device, 15, slots.as_mut_ptr(), &mut count),
        abi::ERROR_INSUFFICIENT_SIZE
    );
    assert_eq!(count, 4, "the number needed");
    assert_eq!(slots, [blank; 8], "nothing written");
    count = 8;
    assert_eq!(
        unsafe {
            nvmlDeviceGetGpuInstancePossiblePlacements(device, 15, slots.as_mut_ptr(), &mut count)
        },
        abi::SUCCESS
    );
    assert_eq!(count, 4);
    let written: Vec<(u32, u32)> = slots[..4].iter().map(|p| (p.start, p.size)).collect();
    assert_eq!(written, vec![(0, 2), (2, 2), (4, 2), (6, 2)]);
    assert_eq!(slots[4], blank, "nothing past the placements");
    count = 5;
    assert_eq!(
        placements_v2(device, 7, slots.as_mut_ptr(), &mut count),
        abi::ERROR_NOT_SUPPORTED,
        "no profile has id 7"
    );
    assert_eq!(count, 5, "nothing written");
    assert_eq!(
        placements_v2(device, 15, slots.as_mut_ptr(), null_mut()),
        abi::ERROR_INVALID_ARGUMENT
    );
}

#[test]
fn profile_info_v_is_not_supported_while_mig_is_disabled() {
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    // SAFETY: zeroed plain-old-data C struct.
    let mut info: GpuInstanceProfileInfoV2 = unsafe { std::mem::zeroed() };
    info.version = crate::mig::GPU_INSTANCE_PROFILE_INFO_V2;
    // SAFETY: a valid struct of the version it names.
    let code = unsafe { nvmlDeviceGetGpuInstanceProfileInfoV(handle(0), 0, &mut info) };
    assert_eq!(code, abi::ERROR_NOT_SUPPORTED);
    assert_eq!(info.id, 0, "nothing written");
}

#[test]
fn profile_info_v_writes_the_layout_its_version_names() {
    let _session = Session::new(&h100_with_mig(true), None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    // SAFETY (all calls below): zeroed plain-old-data C structs of the version they name.
    let mut v2: GpuInstanceProfileInfoV2 = unsafe { std::mem::zeroed() };
    v2.version = crate::mig::GPU_INSTANCE_PROFILE_INFO_V2;
    assert_eq!(
        unsafe { nvmlDeviceGetGpuInstanceProfileInfoV(device, 7, &mut v2) },
        abi::SUCCESS
    );
    assert_eq!(
        (v2.id, v2.counts.instance_count, v2.counts.ofa_count),
        (20, 1, 1)
    );
    assert_eq!(&v2.name[..11], b"1g.10gb+me\0");
    let mut v3: GpuInstanceProfileInfoV3 = unsafe { std::mem::zeroed() };
    v3.version = crate::mig::GPU_INSTANCE_PROFILE_INFO_V3;
    assert_eq!(
        unsafe { nvmlDeviceGetGpuInstanceProfileInfoV(device, 2, (&raw mut v3).cast()) },
        abi::SUCCESS
    );
    assert_eq!(
        (v3.id, v3.counts.multiprocessor_count, v3.memory_size_mb),
        (9, 60, 40448)
    );
    assert_eq!(&v3.name[..8], b"3g.40gb\0");
    let mut bad = v2;
    bad.version = 0x0100_0030;
    bad.id = 77;
    assert_eq!(
        unsafe { nvmlDeviceGetGpuInstanceProfileInfoV(device, 0, &mut bad) },
        abi::ERROR_INVALID_ARGUMENT,
        "nvml.h: an invalid version is INVALID_ARGUMENT"
    );
    assert_eq!(bad.id, 77, "nothing written");
    assert_eq!(
        unsafe {
            nvmlDeviceGetGpuInstanceProfileInfoV(device, abi::GPU_INSTANCE_PROFILE_COUNT, &mut v2)
        },
        abi::ERROR_INVALID_ARGUMENT
    );
}
