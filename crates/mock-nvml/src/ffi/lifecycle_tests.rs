//! The MIG lifecycle exports (issue 38) through the C functions: the misuse matrix (valid, before
//! init, NULL outputs, foreign handles of every kind) and the lifecycle on h100 and gb200.

use super::*;
use crate::{
    mig::{GpuInstancePlacement, GpuInstanceProfileInfoV2, GPU_INSTANCE_PROFILE_INFO_V2},
    mig_abi::{
        ComputeInstanceInfo, ComputeInstanceInfoV1, ComputeInstancePlacement,
        ComputeInstanceProfileInfo, ComputeInstanceProfileInfoV2, DeviceAttributes,
        GpuInstanceInfo, COMPUTE_INSTANCE_PROFILE_INFO_V2,
    },
};

/// The handles a matrix call may need: a GPU, a live GPU instance (1g, id 19) with a live compute
/// instance, and that compute instance's MIG device.
#[derive(Clone, Copy)]
struct Handles {
    device: nvmlDevice_t,
    gi: nvmlGpuInstance_t,
    ci: nvmlComputeInstance_t,
    mig: nvmlDevice_t,
}

struct Entry {
    name: &'static str,
    call: fn(Handles, Mode) -> NvmlReturn,
}

macro_rules! entry {
    ($name:ident, |$h:ident, $mode:ident| $body:expr) => {
        Entry {
            name: stringify!($name),
            call: |$h, $mode| {
                #[allow(unused_unsafe)]
                // SAFETY: every pointer is NULL (Mode::Null) or a live local of the right type.
                unsafe {
                    $body
                }
            },
        }
    };
}

/// A zeroed C struct with `version` set.
fn versioned<T>(version: u32) -> T {
    // SAFETY: the C structs here are plain old data; all-zero is valid.
    let mut value: T = unsafe { std::mem::zeroed() };
    // SAFETY: every versioned struct starts with its u32 version.
    unsafe { std::ptr::from_mut(&mut value).cast::<u32>().write(version) };
    value
}

fn table() -> Vec<Entry> {
    vec![
        entry!(nvmlDeviceSetMigMode, |h, mode| {
            let mut status = 99;
            nvmlDeviceSetMigMode(h.device, 1, out(&mut status, mode))
        }),
        entry!(nvmlDeviceGetGpuInstanceProfileInfoByIdV, |h, mode| {
            let mut info: GpuInstanceProfileInfoV2 = versioned(GPU_INSTANCE_PROFILE_INFO_V2);
            nvmlDeviceGetGpuInstanceProfileInfoByIdV(h.device, 19, out(&mut info, mode))
        }),
        entry!(nvmlDeviceGetGpuInstanceRemainingCapacity, |h, mode| {
            let mut count = 0;
            nvmlDeviceGetGpuInstanceRemainingCapacity(h.device, 19, out(&mut count, mode))
        }),
        entry!(nvmlDeviceCreateGpuInstance, |h, mode| {
            let mut gi = null_mut();
            let code = nvmlDeviceCreateGpuInstance(h.device, 19, out(&mut gi, mode));
            if code == abi::SUCCESS {
                assert_eq!(nvmlGpuInstanceDestroy(gi), abi::SUCCESS);
            }
            code
        }),
        entry!(nvmlDeviceCreateGpuInstanceWithPlacement, |h, mode| {
            let mut gi = null_mut();
            let placement = GpuInstancePlacement { start: 0, size: 1 };
            let code = nvmlDeviceCreateGpuInstanceWithPlacement(
                h.device,
                19,
                &placement,
                out(&mut gi, mode),
            );
            if code == abi::SUCCESS {
                assert_eq!(nvmlGpuInstanceDestroy(gi), abi::SUCCESS);
            }
            code
        }),
        entry!(nvmlGpuInstanceDestroy, |h, mode| {
            // A fresh instance to destroy, so that the shared one stays; its handle in Valid
            // mode, the shared one's parent GPU's handle otherwise (a foreign handle kind).
            let _ = mode;
            let mut gi = null_mut();
            let fresh = h.device == handle_of_gpu0()
                && nvmlDeviceCreateGpuInstance(h.device, 19, &mut gi) == abi::SUCCESS;
            nvmlGpuInstanceDestroy(if fresh { gi } else { h.gi })
        }),
        entry!(nvmlDeviceGetGpuInstances, |h, mode| {
            let mut gis = [null_mut(); 8];
            let mut count = 0;
            let list = if mode == Mode::Null {
                null_mut()
            } else {
                gis.as_mut_ptr()
            };
            nvmlDeviceGetGpuInstances(h.device, 19, list, out(&mut count, mode))
        }),
        entry!(nvmlDeviceGetGpuInstanceById, |h, mode| {
            let mut gi = null_mut();
            nvmlDeviceGetGpuInstanceById(h.device, 1, out(&mut gi, mode))
        }),
        entry!(nvmlGpuInstanceGetInfo, |h, mode| {
            let mut info: GpuInstanceInfo = std::mem::zeroed();
            nvmlGpuInstanceGetInfo(h.gi, out(&mut info, mode))
        }),
        entry!(nvmlGpuInstanceGetComputeInstanceProfileInfo, |h, mode| {
            let mut info = ComputeInstanceProfileInfo::default();
            nvmlGpuInstanceGetComputeInstanceProfileInfo(h.gi, 0, 0, out(&mut info, mode))
        }),
        entry!(nvmlGpuInstanceGetComputeInstanceProfileInfoV, |h, mode| {
            let mut info: ComputeInstanceProfileInfoV2 =
                versioned(COMPUTE_INSTANCE_PROFILE_INFO_V2);
            nvmlGpuInstanceGetComputeInstanceProfileInfoV(h.gi, 0, 0, out(&mut info, mode))
        }),
        entry!(
            nvmlGpuInstanceGetComputeInstanceRemainingCapacity,
            |h, mode| {
                let mut count = 0;
                nvmlGpuInstanceGetComputeInstanceRemainingCapacity(h.gi, 0, out(&mut count, mode))
            }
        ),
        entry!(
            nvmlGpuInstanceGetComputeInstancePossiblePlacements,
            |h, mode| {
                let mut count = 0;
                nvmlGpuInstanceGetComputeInstancePossiblePlacements(
                    h.gi,
                    0,
                    null_mut(),
                    out(&mut count, mode),
                )
            }
        ),
        entry!(nvmlGpuInstanceCreateComputeInstance, |h, mode| {
            // The shared instance's one compute instance is made: a second is refused, after
            // the handle and NULL checks this matrix is about.
            let mut ci = null_mut();
            let code = nvmlGpuInstanceCreateComputeInstance(h.gi, 0, out(&mut ci, mode));
            success_if(mode, code, abi::ERROR_INSUFFICIENT_RESOURCES)
        }),
        entry!(
            nvmlGpuInstanceCreateComputeInstanceWithPlacement,
            |h, mode| {
                let mut ci = null_mut();
                let whole = ComputeInstancePlacement { start: 0, size: 1 };
                let code = nvmlGpuInstanceCreateComputeInstanceWithPlacement(
                    h.gi,
                    0,
                    &whole,
                    out(&mut ci, mode),
                );
                success_if(mode, code, abi::ERROR_INSUFFICIENT_RESOURCES)
            }
        ),
        entry!(nvmlComputeInstanceDestroy, |h, mode| {
            let _ = mode;
            // Destroy the shared compute instance and make it again (same ids, same handle).
            let code = nvmlComputeInstanceDestroy(h.ci);
            if code == abi::SUCCESS {
                let mut ci = null_mut();
                assert_eq!(
                    nvmlGpuInstanceCreateComputeInstance(h.gi, 0, &mut ci),
                    abi::SUCCESS
                );
                assert_eq!(ci, h.ci, "the same instance ids, the same handle");
            }
            code
        }),
        entry!(nvmlGpuInstanceGetComputeInstances, |h, mode| {
            let mut cis = [null_mut(); 8];
            let mut count = 0;
            let list = if mode == Mode::Null {
                null_mut()
            } else {
                cis.as_mut_ptr()
            };
            nvmlGpuInstanceGetComputeInstances(h.gi, 0, list, out(&mut count, mode))
        }),
        entry!(nvmlGpuInstanceGetComputeInstanceById, |h, mode| {
            let mut ci = null_mut();
            nvmlGpuInstanceGetComputeInstanceById(h.gi, 0, out(&mut ci, mode))
        }),
        entry!(nvmlComputeInstanceGetInfo_v2, |h, mode| {
            let mut info: ComputeInstanceInfo = std::mem::zeroed();
            nvmlComputeInstanceGetInfo_v2(h.ci, out(&mut info, mode))
        }),
        entry!(nvmlComputeInstanceGetInfo, |h, mode| {
            let mut info: ComputeInstanceInfoV1 = std::mem::zeroed();
            nvmlComputeInstanceGetInfo(h.ci, out(&mut info, mode))
        }),
        entry!(nvmlDeviceGetGpuInstanceId, |h, mode| {
            let mut id = 99;
            nvmlDeviceGetGpuInstanceId(h.mig, out(&mut id, mode))
        }),
        entry!(nvmlDeviceGetComputeInstanceId, |h, mode| {
            let mut id = 99;
            nvmlDeviceGetComputeInstanceId(h.mig, out(&mut id, mode))
        }),
        entry!(nvmlDeviceGetAttributes_v2, |h, mode| {
            let mut value: DeviceAttributes = std::mem::zeroed();
            nvmlDeviceGetAttributes_v2(h.mig, out(&mut value, mode))
        }),
        entry!(nvmlDeviceGetAttributes, |h, mode| {
            let mut value: DeviceAttributes = std::mem::zeroed();
            nvmlDeviceGetAttributes(h.mig, out(&mut value, mode))
        }),
    ]
}

fn success_if(mode: Mode, code: NvmlReturn, expected: NvmlReturn) -> NvmlReturn {
    match (mode, code) {
        (Mode::Valid, code) if code == expected => abi::SUCCESS,
        _ => code,
    }
}

fn handle_of_gpu0() -> nvmlDevice_t {
    slot0()
}

pub(super) fn names() -> Vec<&'static str> {
    table().iter().map(|entry| entry.name).collect()
}

/// MIG enabled on GPU 0 with a 1g GPU instance and its compute instance.
fn partitioned() -> Handles {
    let device = handle(0);
    let mut status = 99;
    // SAFETY (all calls below): the pointers point at live locals of the right type.
    assert_eq!(
        unsafe { nvmlDeviceSetMigMode(device, 1, &mut status) },
        abi::SUCCESS
    );
    assert_eq!(status, abi::SUCCESS, "activated at once");
    let mut gi = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceCreateGpuInstance(device, 19, &mut gi) },
        abi::SUCCESS
    );
    let mut ci = null_mut();
    assert_eq!(
        unsafe { nvmlGpuInstanceCreateComputeInstance(gi, 0, &mut ci) },
        abi::SUCCESS
    );
    let mut mig = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceGetMigDeviceHandleByIndex(device, 0, &mut mig) },
        abi::SUCCESS
    );
    Handles {
        device,
        gi,
        ci,
        mig,
    }
}

#[test]
fn every_lifecycle_export_succeeds_on_gb200() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let handles = partitioned();
    for entry in table() {
        assert_eq!(
            (entry.call)(handles, Mode::Valid),
            abi::SUCCESS,
            "{}",
            entry.name
        );
    }
}

#[test]
fn every_lifecycle_export_is_uninitialized_before_init_and_after_shutdown() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let handles = partitioned();
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    for entry in table() {
        assert_eq!(
            (entry.call)(handles, Mode::Valid),
            abi::ERROR_UNINITIALIZED,
            "{}",
            entry.name
        );
    }
}

#[test]
fn every_lifecycle_output_pointer_is_checked_for_null() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let handles = partitioned();
    // The two destroys have no output pointer.
    for entry in table()
        .iter()
        .filter(|entry| !entry.name.ends_with("Destroy"))
    {
        assert_eq!(
            (entry.call)(handles, Mode::Null),
            abi::ERROR_INVALID_ARGUMENT,
            "{}",
            entry.name
        );
    }
}

#[test]
fn every_lifecycle_handle_is_validated_before_use() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let live = partitioned();
    let local = [0u64; 8];
    let local: nvmlDevice_t = local.as_ptr().cast_mut().cast();
    // Each kind of handle where another kind is expected, and addresses never issued.
    let swapped = Handles {
        device: live.gi,
        gi: live.ci,
        ci: live.mig,
        mig: live.device,
    };
    let foreign = Handles {
        device: local,
        gi: local,
        ci: local,
        mig: local,
    };
    let null = Handles {
        device: null_mut(),
        gi: null_mut(),
        ci: null_mut(),
        mig: null_mut(),
    };
    for (what, handles) in [("swapped", swapped), ("foreign", foreign), ("NULL", null)] {
        for entry in table() {
            let code = (entry.call)(handles, Mode::Valid);
            let want = match entry.name {
                // A GPU's handle is a valid device: these answer NOT_SUPPORTED for it.
                "nvmlDeviceGetGpuInstanceId"
                | "nvmlDeviceGetComputeInstanceId"
                | "nvmlDeviceGetAttributes_v2"
                | "nvmlDeviceGetAttributes"
                    if what == "swapped" =>
                {
                    abi::ERROR_NOT_SUPPORTED
                }
                _ => abi::ERROR_INVALID_ARGUMENT,
            };
            assert_eq!(code, want, "{} with {what} handles", entry.name);
        }
    }
}

pub(super) fn create_gi(
    device: nvmlDevice_t,
    profile_id: u32,
) -> Result<nvmlGpuInstance_t, NvmlReturn> {
    let mut gi = null_mut();
    // SAFETY: a live out slot.
    match unsafe { nvmlDeviceCreateGpuInstance(device, profile_id, &mut gi) } {
        abi::SUCCESS => Ok(gi),
        code => Err(code),
    }
}

fn remaining(device: nvmlDevice_t, profile_id: u32) -> Result<u32, NvmlReturn> {
    let mut count = 0;
    // SAFETY: a live out slot.
    match unsafe { nvmlDeviceGetGpuInstanceRemainingCapacity(device, profile_id, &mut count) } {
        abi::SUCCESS => Ok(count),
        code => Err(code),
    }
}

fn mig_count(device: nvmlDevice_t) -> u32 {
    (0..7)
        .take_while(|index| {
            let mut mig = null_mut();
            // SAFETY: a live out slot.
            unsafe { nvmlDeviceGetMigDeviceHandleByIndex(device, *index, &mut mig) == abi::SUCCESS }
        })
        .count() as u32
}

/// h100's all-balanced (2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb) made, seen, refused where the
/// real driver refuses, kept across shutdown and init, and taken down.
#[test]
fn a_balanced_h100_partition_lives_and_dies_with_nvml_semantics() {
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(1);
    assert_eq!(
        create_gi(device, 19),
        Err(abi::ERROR_NOT_SUPPORTED),
        "MIG off"
    );
    assert_eq!(
        remaining(device, 19),
        Err(abi::ERROR_NOT_SUPPORTED),
        "MIG off"
    );
    let mut status = 99;
    // SAFETY (all calls below): the pointers point at live locals of the right type.
    assert_eq!(
        unsafe { nvmlDeviceSetMigMode(device, 1, &mut status) },
        abi::SUCCESS
    );
    let (mut current, mut pending) = (9, 9);
    assert_eq!(
        unsafe { nvmlDeviceGetMigMode(device, &mut current, &mut pending) },
        abi::SUCCESS
    );
    assert_eq!((status, current, pending), (abi::SUCCESS, 1, 1));
    assert_eq!(remaining(device, 19), Ok(7));
    let three = create_gi(device, 9).unwrap();
    assert_eq!(
        remaining(device, 19),
        Ok(4),
        "the 3g sits at 4-7, leaving 1g starts 0-3"
    );
    let overlap = GpuInstancePlacement { start: 4, size: 4 };
    let mut gi = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceCreateGpuInstanceWithPlacement(device, 9, &overlap, &mut gi) },
        abi::ERROR_INSUFFICIENT_RESOURCES,
        "a placement that overlaps"
    );
    let two = create_gi(device, 14).unwrap();
    let ones = [
        create_gi(device, 19).unwrap(),
        create_gi(device, 19).unwrap(),
    ];
    assert_eq!(remaining(device, 19), Ok(0));
    assert_eq!(
        create_gi(device, 19),
        Err(abi::ERROR_INSUFFICIENT_RESOURCES)
    );
    let mut cis = Vec::new();
    for (gi, ci_profile) in [(three, 2), (two, 1), (ones[0], 0), (ones[1], 0)] {
        let mut ci = null_mut();
        assert_eq!(
            unsafe { nvmlGpuInstanceCreateComputeInstance(gi, ci_profile, &mut ci) },
            abi::SUCCESS
        );
        cis.push(ci);
    }
    assert_eq!(mig_count(device), 4);
    let mut mig = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceGetMigDeviceHandleByIndex(device, 0, &mut mig) },
        abi::SUCCESS
    );
    let mut uuid = [0 as c_char; 96];
    assert_eq!(
        unsafe { nvmlDeviceGetUUID(mig, uuid.as_mut_ptr(), 96) },
        abi::SUCCESS
    );
    let text = unsafe { CStr::from_ptr(uuid.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    assert!(text.starts_with("MIG-"), "{text}");
    let mut found = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceGetHandleByUUID(uuid.as_ptr(), &mut found) },
        abi::SUCCESS
    );
    assert_eq!(found, mig);
    let mut parent = null_mut();
    assert_eq!(
        unsafe { nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &mut parent) },
        abi::SUCCESS
    );
    assert_eq!(parent, device);
    let mut attributes: DeviceAttributes = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { nvmlDeviceGetAttributes_v2(mig, &mut attributes) },
        abi::SUCCESS
    );
    let mut memory: abi::Memory = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { nvmlDeviceGetMemoryInfo(mig, &mut memory) },
        abi::SUCCESS
    );
    // Index 0 is the lowest GPU instance id: the 3g.40gb made first.
    assert_eq!(
        (attributes.multiprocessor_count, attributes.memory_size_mb),
        (60, 40448)
    );
    assert_eq!(memory.total, 40448 << 20);
    let mut is_mig = 9;
    assert_eq!(
        unsafe { nvmlDeviceIsMigDeviceHandle(mig, &mut is_mig) },
        abi::SUCCESS
    );
    assert_eq!(is_mig, 1);

    // The partition outlives the process's NVML session.
    assert_eq!(nvmlShutdown(), abi::SUCCESS);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(mig_count(device), 4, "after shutdown and init");

    assert_eq!(
        nvmlGpuInstanceDestroy(three),
        abi::ERROR_IN_USE,
        "a live compute instance"
    );
    assert_eq!(
        unsafe { nvmlDeviceSetMigMode(device, 0, &mut status) },
        abi::SUCCESS
    );
    assert_eq!(status, abi::ERROR_IN_USE, "disabling with instances left");
    assert_eq!(
        unsafe { nvmlDeviceGetMigMode(device, &mut current, &mut pending) },
        abi::SUCCESS
    );
    assert_eq!((current, pending), (1, 0));
    for (ci, gi) in cis.into_iter().zip([three, two, ones[0], ones[1]]) {
        assert_eq!(nvmlComputeInstanceDestroy(ci), abi::SUCCESS);
        assert_eq!(nvmlGpuInstanceDestroy(gi), abi::SUCCESS);
        assert_eq!(
            nvmlGpuInstanceDestroy(gi),
            abi::ERROR_INVALID_ARGUMENT,
            "a stale handle"
        );
    }
    assert_eq!(
        unsafe { nvmlDeviceGetMigDeviceHandleByIndex(device, 0, &mut mig) },
        abi::ERROR_NOT_FOUND
    );
    assert_eq!(
        unsafe { nvmlDeviceSetMigMode(device, 0, &mut status) },
        abi::SUCCESS
    );
    assert_eq!(status, abi::SUCCESS);
    assert_eq!(
        unsafe { nvmlDeviceIsMigDeviceHandle(mig, &mut is_mig) },
        abi::ERROR_INVALID_ARGUMENT
    );
}
