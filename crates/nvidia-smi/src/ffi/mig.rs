//! The MIG entry points `-mig`, `mig …` and `-L` call (issue 38), each an optional lookup: a
//! library without one answers NOT_SUPPORTED for it, as `-q`'s optional getters do. The C
//! structs are declared as nvml.h orders their fields (runs of `unsigned int` as arrays, indexed
//! by the constants beside them); what callers get back is plain data.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_uint, c_void};

use nvml_dl::{buffer_string, check, Core, Device, Return};

/// `NVML_GPU_INSTANCE_PROFILE_COUNT` of the newest nvml.h (`3_SLICE_GFX` = 0x11 is the last);
/// a library that knows fewer answers INVALID_ARGUMENT past its last.
pub const GPU_INSTANCE_PROFILE_COUNT: u32 = 0x12;
/// `NVML_COMPUTE_INSTANCE_PROFILE_COUNT`.
pub const COMPUTE_INSTANCE_PROFILE_COUNT: u32 = 9;
/// `NVML_ERROR_INVALID_ARGUMENT`.
pub const INVALID_ARGUMENT: Return = Return(2);
/// `NVML_ERROR_NOT_FOUND`.
pub const NOT_FOUND: Return = Return(6);
/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE`: a profile name's buffer.
const NAME: usize = 96;

/// `nvmlGpuInstance_t` or `nvmlComputeInstance_t`: an opaque handle the library issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance(*mut c_void);

/// A GPU instance profile, from `nvmlGpuInstanceProfileInfo_v2_t`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiProfile {
    /// The profile id (what `-cgi` takes), not the enum it was asked by.
    pub id: u32,
    /// `isP2pSupported`.
    pub p2p: bool,
    /// GPU slices.
    pub slices: u32,
    /// How many instances of it the GPU holds at most.
    pub instances: u32,
    /// Streaming multiprocessors, copy engines, decoders, encoders, JPEG and OFA engines.
    pub engines: Engines,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// The library's name for it (`1g.10gb`).
    pub name: String,
}

/// The engine counts a profile gives (`-lgip`'s SM, CE, DEC, ENC, JPEG and OFA columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Engines {
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Copy engines.
    pub copy: u32,
    /// Decoders.
    pub decoders: u32,
    /// Encoders.
    pub encoders: u32,
    /// JPEG engines.
    pub jpegs: u32,
    /// Optical flow accelerators.
    pub ofas: u32,
}

/// A compute instance profile, from `nvmlComputeInstanceProfileInfo_v2_t`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiProfile {
    /// The profile id.
    pub id: u32,
    /// Compute slices.
    pub slices: u32,
    /// How many fit in the GPU instance.
    pub instances: u32,
    /// The library's name for it.
    pub name: String,
}

/// A GPU or compute instance's id, profile id and placement (`start:size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceInfo {
    /// The instance id.
    pub id: u32,
    /// Its profile id.
    pub profile_id: u32,
    /// First slice.
    pub start: u32,
    /// Slices occupied.
    pub size: u32,
}

/// `nvmlGpuInstanceProfileInfo_v2_t`: `version`, the ten `unsigned int`s from `id` to
/// `ofaCount` (see the `GI_*` indices) and padding, `memorySizeMB`, `name`.
#[repr(C)]
struct GiProfileInfoV2 {
    words: [c_uint; 12],
    memory_size_mb: u64,
    name: [c_char; NAME],
}
const GI_ID: usize = 1;
const GI_P2P: usize = 2;
const GI_SLICES: usize = 3;
const GI_INSTANCES: usize = 4;
/// `multiprocessorCount`, then copy engines, decoders, encoders, JPEG and OFA.
const GI_ENGINES: usize = 5;

/// `nvmlComputeInstanceProfileInfo_v2_t`: `version`, `id`, `sliceCount`, `instanceCount`,
/// `multiprocessorCount` and the five shared engine counts, `name`.
#[repr(C)]
struct CiProfileInfoV2 {
    words: [c_uint; 10],
    name: [c_char; NAME],
}

/// `nvmlGpuInstanceInfo_t` (`device`, then `id`, `profileId`, `placement.start`, `.size`) and
/// `nvmlComputeInstanceInfo_t` (`device`, `gpuInstance`, then the same four).
#[repr(C)]
struct InfoStruct<const HANDLES: usize> {
    handles: [*mut c_void; HANDLES],
    words: [c_uint; 4],
}

/// `NVML_STRUCT_VERSION(name, 2)` for a struct of `size` bytes.
const fn version_2(size: usize) -> c_uint {
    size as c_uint | (2 << 24)
}
/// `nvmlGpuInstanceProfileInfo_v2`.
const GI_PROFILE_V2: c_uint = version_2(size_of::<GiProfileInfoV2>());
/// `nvmlComputeInstanceProfileInfo_v2`.
const CI_PROFILE_V2: c_uint = version_2(size_of::<CiProfileInfoV2>());

type HandleArgU32Fn = unsafe extern "C" fn(*mut c_void, c_uint, *mut c_uint) -> u32;
type HandleArgHandleFn = unsafe extern "C" fn(*mut c_void, c_uint, *mut *mut c_void) -> u32;
type ListFn = unsafe extern "C" fn(*mut c_void, c_uint, *mut *mut c_void, *mut c_uint) -> u32;
type GiProfileFn = unsafe extern "C" fn(Device, c_uint, *mut GiProfileInfoV2) -> u32;
type CiProfileFn = unsafe extern "C" fn(*mut c_void, c_uint, c_uint, *mut CiProfileInfoV2) -> u32;
type PlacementsFn = unsafe extern "C" fn(Device, c_uint, *mut [c_uint; 2], *mut c_uint) -> u32;
type InfoFn<const HANDLES: usize> =
    unsafe extern "C" fn(*mut c_void, *mut InfoStruct<HANDLES>) -> u32;
type DestroyFn = unsafe extern "C" fn(*mut c_void) -> u32;
type DeviceU32Fn = unsafe extern "C" fn(Device, *mut c_uint) -> u32;

/// The MIG entry points, each `None` when the library lacks it.
pub struct MigApi {
    set_mode: Option<HandleArgU32Fn>,
    gi_profile: Option<GiProfileFn>,
    placements: Option<PlacementsFn>,
    gi_remaining: Option<HandleArgU32Fn>,
    create_gi: Option<HandleArgHandleFn>,
    gi_by_id: Option<HandleArgHandleFn>,
    gpu_instances: Option<ListFn>,
    gi_info: Option<InfoFn<1>>,
    destroy_gi: Option<DestroyFn>,
    ci_profile: Option<CiProfileFn>,
    create_ci: Option<HandleArgHandleFn>,
    compute_instances: Option<ListFn>,
    ci_info: Option<InfoFn<2>>,
    destroy_ci: Option<DestroyFn>,
    max_mig_devices: Option<DeviceU32Fn>,
    mig_device: Option<HandleArgHandleFn>,
}

impl MigApi {
    /// Looks every entry point up.
    pub fn load(core: &Core) -> MigApi {
        // SAFETY: each field's type is the C signature nvml.h declares for the name (handles
        // are pointers, `nvmlReturn_t *` an `unsigned int *`, the placement struct two
        // `unsigned int`s).
        unsafe {
            MigApi {
                set_mode: core.optional("nvmlDeviceSetMigMode"),
                gi_profile: core.optional("nvmlDeviceGetGpuInstanceProfileInfoV"),
                placements: core.optional("nvmlDeviceGetGpuInstancePossiblePlacements_v2"),
                gi_remaining: core.optional("nvmlDeviceGetGpuInstanceRemainingCapacity"),
                create_gi: core.optional("nvmlDeviceCreateGpuInstance"),
                gi_by_id: core.optional("nvmlDeviceGetGpuInstanceById"),
                gpu_instances: core.optional("nvmlDeviceGetGpuInstances"),
                gi_info: core.optional("nvmlGpuInstanceGetInfo"),
                destroy_gi: core.optional("nvmlGpuInstanceDestroy"),
                ci_profile: core.optional("nvmlGpuInstanceGetComputeInstanceProfileInfoV"),
                create_ci: core.optional("nvmlGpuInstanceCreateComputeInstance"),
                compute_instances: core.optional("nvmlGpuInstanceGetComputeInstances"),
                ci_info: core.optional("nvmlComputeInstanceGetInfo_v2"),
                destroy_ci: core.optional("nvmlComputeInstanceDestroy"),
                max_mig_devices: core.optional("nvmlDeviceGetMaxMigDeviceCount"),
                mig_device: core.optional("nvmlDeviceGetMigDeviceHandleByIndex"),
            }
        }
    }

    /// `nvmlDeviceSetMigMode`: the activation status (`Return::SUCCESS` when in effect now).
    pub fn set_mig_mode(&self, device: Device, enable: bool) -> Result<Return, Return> {
        let function = self.set_mode.ok_or(Return::NOT_SUPPORTED)?;
        let mut status: c_uint = 0;
        // SAFETY: `status` is a valid out slot (`nvmlReturn_t` is an unsigned int).
        check(unsafe { function(device, c_uint::from(enable), &mut status) })?;
        Ok(Return(status))
    }

    /// `nvmlDeviceGetGpuInstanceProfileInfoV` (v2) of `NVML_GPU_INSTANCE_PROFILE_*` `profile`.
    pub fn gi_profile(&self, device: Device, profile: u32) -> Result<GiProfile, Return> {
        let function = self.gi_profile.ok_or(Return::NOT_SUPPORTED)?;
        let mut info = GiProfileInfoV2 {
            words: [0; 12],
            memory_size_mb: 0,
            name: [0; NAME],
        };
        info.words[0] = GI_PROFILE_V2;
        // SAFETY: `info` is a writable v2 struct with its version set.
        check(unsafe { function(device, profile, &mut info) })?;
        let word = |index: usize| info.words[index];
        Ok(GiProfile {
            id: word(GI_ID),
            p2p: word(GI_P2P) != 0,
            slices: word(GI_SLICES),
            instances: word(GI_INSTANCES),
            engines: Engines::from_words(&info.words[GI_ENGINES..GI_ENGINES + 6]),
            memory_mib: info.memory_size_mb,
            name: buffer_string(&info.name),
        })
    }

    /// `nvmlDeviceGetGpuInstancePossiblePlacements_v2`: `(start, size)` pairs.
    pub fn placements(&self, device: Device, profile_id: u32) -> Result<Vec<(u32, u32)>, Return> {
        let function = self.placements.ok_or(Return::NOT_SUPPORTED)?;
        let mut count: c_uint = 0;
        // SAFETY: a NULL array asks for the count only; `count` is a valid out slot.
        check(unsafe { function(device, profile_id, std::ptr::null_mut(), &mut count) })?;
        let mut pairs = vec![[0; 2]; count as usize];
        // SAFETY: `pairs` holds `count` placements, the capacity `count` says (another process
        // changing the partition between the two calls makes it INSUFFICIENT_SIZE).
        check(unsafe { function(device, profile_id, pairs.as_mut_ptr(), &mut count) })?;
        pairs.truncate(count as usize);
        Ok(pairs
            .into_iter()
            .map(|[start, size]| (start, size))
            .collect())
    }

    /// `nvmlDeviceGetGpuInstanceRemainingCapacity`.
    pub fn gi_remaining(&self, device: Device, profile_id: u32) -> Result<u32, Return> {
        let function = self.gi_remaining.ok_or(Return::NOT_SUPPORTED)?;
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid out slot.
        check(unsafe { function(device, profile_id, &mut count) })?;
        Ok(count)
    }

    /// `nvmlDeviceCreateGpuInstance`.
    pub fn create_gi(&self, device: Device, profile_id: u32) -> Result<Instance, Return> {
        handle_arg_handle(self.create_gi, device, profile_id)
    }

    /// `nvmlDeviceGetGpuInstanceById`.
    pub fn gi_by_id(&self, device: Device, id: u32) -> Result<Instance, Return> {
        handle_arg_handle(self.gi_by_id, device, id)
    }

    /// `nvmlDeviceGetGpuInstances` of a profile that has at most `capacity` instances.
    pub fn gpu_instances(
        &self,
        device: Device,
        profile_id: u32,
        capacity: u32,
    ) -> Result<Vec<Instance>, Return> {
        list(self.gpu_instances, device, profile_id, capacity)
    }

    /// `nvmlGpuInstanceGetInfo`.
    pub fn gi_info(&self, gi: Instance) -> Result<InstanceInfo, Return> {
        info(self.gi_info, gi)
    }

    /// `nvmlGpuInstanceDestroy`.
    pub fn destroy_gi(&self, gi: Instance) -> Result<(), Return> {
        destroy(self.destroy_gi, gi)
    }

    /// `nvmlGpuInstanceGetComputeInstanceProfileInfoV` (v2) of `NVML_COMPUTE_INSTANCE_PROFILE_*`
    /// `profile` with the shared engine profile.
    pub fn ci_profile(&self, gi: Instance, profile: u32) -> Result<CiProfile, Return> {
        let function = self.ci_profile.ok_or(Return::NOT_SUPPORTED)?;
        let mut info = CiProfileInfoV2 {
            words: [0; 10],
            name: [0; NAME],
        };
        info.words[0] = CI_PROFILE_V2;
        // SAFETY: `info` is a writable v2 struct with its version set.
        check(unsafe { function(gi.0, profile, 0, &mut info) })?;
        Ok(CiProfile {
            id: info.words[1],
            slices: info.words[2],
            instances: info.words[3],
            name: buffer_string(&info.name),
        })
    }

    /// `nvmlGpuInstanceCreateComputeInstance`.
    pub fn create_ci(&self, gi: Instance, profile_id: u32) -> Result<Instance, Return> {
        handle_arg_handle(self.create_ci, gi.0, profile_id)
    }

    /// `nvmlGpuInstanceGetComputeInstances` of a profile with at most `capacity` instances.
    pub fn compute_instances(
        &self,
        gi: Instance,
        profile_id: u32,
        capacity: u32,
    ) -> Result<Vec<Instance>, Return> {
        list(self.compute_instances, gi.0, profile_id, capacity)
    }

    /// `nvmlComputeInstanceGetInfo_v2`.
    pub fn ci_info(&self, ci: Instance) -> Result<InstanceInfo, Return> {
        info(self.ci_info, ci)
    }

    /// `nvmlComputeInstanceDestroy`.
    pub fn destroy_ci(&self, ci: Instance) -> Result<(), Return> {
        destroy(self.destroy_ci, ci)
    }

    /// `nvmlDeviceGetMaxMigDeviceCount`.
    pub fn max_mig_devices(&self, device: Device) -> Result<u32, Return> {
        let function = self.max_mig_devices.ok_or(Return::NOT_SUPPORTED)?;
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid out slot.
        check(unsafe { function(device, &mut count) })?;
        Ok(count)
    }

    /// `nvmlDeviceGetMigDeviceHandleByIndex`: a device handle nvml.h's getters accept.
    pub fn mig_device(&self, device: Device, index: u32) -> Result<Device, Return> {
        Ok(handle_arg_handle(self.mig_device, device, index)?.0)
    }
}

impl Engines {
    /// The six counts in nvml.h's order: SMs, copy engines, decoders, encoders, JPEG, OFA.
    pub fn from_words(words: &[c_uint]) -> Engines {
        let word = |index: usize| words.get(index).copied().unwrap_or(0);
        Engines {
            multiprocessors: word(0),
            copy: word(1),
            decoders: word(2),
            encoders: word(3),
            jpegs: word(4),
            ofas: word(5),
        }
    }
}

impl From<[c_uint; 4]> for InstanceInfo {
    /// `id`, `profileId`, `placement.start`, `placement.size`, as nvml.h orders them.
    fn from([id, profile_id, start, size]: [c_uint; 4]) -> InstanceInfo {
        InstanceInfo {
            id,
            profile_id,
            start,
            size,
        }
    }
}

/// An optional `nvmlGpuInstanceGetInfo` / `nvmlComputeInstanceGetInfo_v2`.
fn info<const HANDLES: usize>(
    function: Option<InfoFn<HANDLES>>,
    instance: Instance,
) -> Result<InstanceInfo, Return> {
    let function = function.ok_or(Return::NOT_SUPPORTED)?;
    let mut info = InfoStruct {
        handles: [std::ptr::null_mut(); HANDLES],
        words: [0; 4],
    };
    // SAFETY: `info` is a writable struct of the layout the function writes; the library
    // checks the handle.
    check(unsafe { function(instance.0, &mut info) })?;
    Ok(InstanceInfo::from(info.words))
}

/// An optional `(handle, unsigned int, handle *)` call.
fn handle_arg_handle(
    function: Option<HandleArgHandleFn>,
    handle: *mut c_void,
    arg: u32,
) -> Result<Instance, Return> {
    let function = function.ok_or(Return::NOT_SUPPORTED)?;
    let mut out: *mut c_void = std::ptr::null_mut();
    // SAFETY: `out` is a valid out slot; the library checks the handle and the argument.
    check(unsafe { function(handle, arg, &mut out) })?;
    Ok(Instance(out))
}

/// An optional `(handle, profile id, handle array, unsigned int *count)` listing into an array
/// of `capacity` handles (nvml.h sizes it by the profile's instance count).
fn list(
    function: Option<ListFn>,
    handle: *mut c_void,
    profile_id: u32,
    capacity: u32,
) -> Result<Vec<Instance>, Return> {
    let function = function.ok_or(Return::NOT_SUPPORTED)?;
    let mut handles = vec![std::ptr::null_mut::<c_void>(); capacity.max(1) as usize];
    let mut count: c_uint = 0;
    // SAFETY: `handles` has room for the profile's instance count, which nvml.h says bounds the
    // answer; `count` is a valid out slot.
    check(unsafe { function(handle, profile_id, handles.as_mut_ptr(), &mut count) })?;
    handles.truncate((count as usize).min(capacity as usize));
    Ok(handles.into_iter().map(Instance).collect())
}

fn destroy(function: Option<DestroyFn>, instance: Instance) -> Result<(), Return> {
    let function = function.ok_or(Return::NOT_SUPPORTED)?;
    // SAFETY: the library checks the handle (a stale one is INVALID_ARGUMENT).
    check(unsafe { function(instance.0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structs_are_nvml_h_sized() {
        assert_eq!(size_of::<GiProfileInfoV2>(), 152);
        assert_eq!(std::mem::offset_of!(GiProfileInfoV2, memory_size_mb), 48);
        assert_eq!(std::mem::offset_of!(GiProfileInfoV2, name), 56);
        assert_eq!(size_of::<CiProfileInfoV2>(), 136);
        assert_eq!(size_of::<InfoStruct<1>>(), 24);
        assert_eq!(size_of::<InfoStruct<2>>(), 32);
        assert_eq!(GI_PROFILE_V2, 0x0200_0098);
        assert_eq!(CI_PROFILE_V2, 0x0200_0088);
    }
}
