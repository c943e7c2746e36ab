//! The MIG lifecycle calls' answers: a GPU's partition read from or changed in the node's store
//! ([`mig_store`]) through [`partition`]'s pure functions, and the C values built from it (info
//! structs, MIG device UUIDs, memory and attributes). The C exports are `ffi/lifecycle.rs`.
//!
//! A GPU without MIG (no `mig_mode` in the profile) is NOT_SUPPORTED everywhere; a GPU whose table
//! is `unknown` can change its mode but offers no profile. The store names GPUs by host index
//! (a container may see fewer GPUs, renumbered), handles by visible index.

use node_layout::mig_state::{self, Gpu, GpuInstance, MigState, Mode, Placement};
use nvml_profile::{Device, GpuInstanceProfile, GpuInstanceProfiles, MigMode};

use crate::{
    abi::{self, NvmlReturn},
    mig::{self, ProfileInfoV},
    mig_abi::{ComputeInstanceProfileInfo, DeviceAttributes},
    mig_store, partition,
    state::Loaded,
    visible,
};

/// One GPU as the lifecycle sees it: its profile device and host index.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The profile's device (its `index` is the visible one).
    pub device: &'a Device,
    /// Its index on the host, which the store uses.
    pub host: u32,
}

impl<'a> Target<'a> {
    /// The GPU at visible index `visible`.
    pub fn of(loaded: &'a Loaded, visible: usize) -> Result<Self, NvmlReturn> {
        Ok(Target {
            device: loaded
                .devices
                .get(visible)
                .ok_or(abi::ERROR_INVALID_ARGUMENT)?,
            host: loaded
                .host_index(visible)
                .ok_or(abi::ERROR_INVALID_ARGUMENT)?,
        })
    }

    /// The profile table; NOT_SUPPORTED without MIG, empty for an `unknown` table.
    pub fn table(&self) -> Result<&'a [GpuInstanceProfile], NvmlReturn> {
        self.device.mig_mode.ok_or(abi::ERROR_NOT_SUPPORTED)?;
        Ok(match &self.device.gpu_instance_profiles {
            Some(GpuInstanceProfiles::Known(rows)) => rows,
            _ => &[],
        })
    }

    fn defaults(&self) -> Result<(Mode, Mode), NvmlReturn> {
        let mode = self.device.mig_mode.ok_or(abi::ERROR_NOT_SUPPORTED)?;
        Ok((bool_mode(mode.current), bool_mode(mode.pending)))
    }

    /// This GPU's partition in `state` (the profile's modes and no instance if it has none).
    pub fn gpu_in(&self, state: &MigState) -> Result<Gpu, NvmlReturn> {
        let (current, pending) = self.defaults()?;
        Ok(state.gpu(self.host).cloned().unwrap_or(Gpu {
            gpu: self.host,
            current,
            pending,
            instances: Vec::new(),
        }))
    }

    /// This GPU's partition now.
    pub fn gpu(&self) -> Result<Gpu, NvmlReturn> {
        self.gpu_in(&mig_store::read()?)
    }

    /// Changes this GPU's partition under the store's lock; nothing is stored on failure.
    pub fn change<T>(
        &self,
        change: impl FnOnce(&mut Gpu, &[GpuInstanceProfile]) -> Result<T, NvmlReturn>,
    ) -> Result<T, NvmlReturn> {
        let table = self.table()?;
        let modes = self.defaults()?;
        mig_store::update(|state| change(state.gpu_mut(self.host, modes), table))
    }

    /// The MIG mode now: the profile's, with the store's current and pending.
    pub fn mig_mode(&self) -> Result<MigMode, NvmlReturn> {
        let profile = self.device.mig_mode.ok_or(abi::ERROR_NOT_SUPPORTED)?;
        let gpu = self.gpu()?;
        Ok(MigMode {
            current: gpu.current == Mode::Enabled,
            pending: gpu.pending == Mode::Enabled,
            ..profile
        })
    }
}

fn bool_mode(enabled: bool) -> Mode {
    if enabled {
        Mode::Enabled
    } else {
        Mode::Disabled
    }
}

/// `nvmlDeviceSetMigMode`: the activation status ([`partition::set_mode`]); INVALID_ARGUMENT for
/// a mode other than `NVML_DEVICE_MIG_DISABLE`/`ENABLE`.
pub fn set_mode(target: Target<'_>, mode: u32) -> Result<NvmlReturn, NvmlReturn> {
    let mode = match mode {
        0 => Mode::Disabled,
        1 => Mode::Enabled,
        _ => return Err(abi::ERROR_INVALID_ARGUMENT),
    };
    target.change(|gpu, _| Ok(partition::set_mode(gpu, mode)))
}

/// `nvmlDeviceGetGpuInstanceProfileInfoByIdV`: as `…InfoV` ([`mig::profile_info_v`]), the row
/// named by its profile id; INVALID_ARGUMENT for another version, NOT_SUPPORTED while MIG is
/// disabled or for an id the table lacks.
pub fn profile_info_by_id(
    target: Target<'_>,
    profile_id: u32,
    version: u32,
) -> Result<ProfileInfoV, NvmlReturn> {
    let table = target.table()?;
    let row = partition::row(table, profile_id).ok_or(abi::ERROR_NOT_SUPPORTED);
    let enabled = target.mig_mode()?.current;
    match row {
        Ok(row) => mig::profile_info_v(target.device, row.profile, version, enabled),
        Err(code) => mig::check_version(version).and(Err(code)),
    }
}

/// `nvmlDeviceGetGpuInstances`: the ids of the live GPU instances of `profile_id`, in id order.
/// NOT_SUPPORTED while MIG is disabled, INVALID_ARGUMENT for an id the table lacks.
pub fn gpu_instances(target: Target<'_>, profile_id: u32) -> Result<Vec<u32>, NvmlReturn> {
    let gpu = target.gpu()?;
    partition::enabled(&gpu)?;
    partition::row(target.table()?, profile_id).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    let mut ids: Vec<u32> = gpu
        .instances
        .iter()
        .filter(|gi| gi.profile_id == profile_id)
        .map(|gi| gi.id)
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// `nvmlDeviceGetGpuInstanceById`: NOT_SUPPORTED while MIG is disabled, NOT_FOUND for no such
/// instance.
pub fn gpu_instance_by_id(target: Target<'_>, id: u32) -> Result<(), NvmlReturn> {
    let gpu = target.gpu()?;
    partition::enabled(&gpu)?;
    gpu.instance(id).map(|_| ()).ok_or(abi::ERROR_NOT_FOUND)
}

/// The live GPU instance `id` (a handle's): INVALID_ARGUMENT when it is gone.
pub fn live_gpu_instance(target: Target<'_>, id: u32) -> Result<(Gpu, GpuInstance), NvmlReturn> {
    let gpu = target.gpu().map_err(|_| abi::ERROR_INVALID_ARGUMENT)?;
    let gi = partition::gpu_instance(&gpu, id)?.clone();
    Ok((gpu, gi))
}

/// The live compute instance `ci` of GPU instance `gi`: INVALID_ARGUMENT when either is gone.
pub fn live_compute_instance(
    target: Target<'_>,
    gi: u32,
    ci: u32,
) -> Result<(GpuInstance, Placement, u32), NvmlReturn> {
    let (_, instance) = live_gpu_instance(target, gi)?;
    let compute = instance
        .compute
        .iter()
        .find(|compute| compute.id == ci)
        .copied()
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    Ok((instance, compute.placement, compute.profile_id))
}

/// The GPU instance profile row of a live instance.
pub fn row_of<'a>(
    target: Target<'a>,
    gi: &GpuInstance,
) -> Result<&'a GpuInstanceProfile, NvmlReturn> {
    partition::row(target.table()?, gi.profile_id).ok_or(abi::ERROR_UNKNOWN)
}

/// `nvmlComputeInstanceProfileInfo_t` of the compute profile `profile` that GPU instance `gi`
/// offers ([`partition::compute_profile_info`]).
pub fn compute_profile_info(
    target: Target<'_>,
    gi: &GpuInstance,
    profile: u32,
    engine_profile: u32,
) -> Result<(ComputeInstanceProfileInfo, String), NvmlReturn> {
    let row = row_of(target, gi)?;
    let offered = partition::compute_profile_info(row, profile, engine_profile)?;
    let info = ComputeInstanceProfileInfo {
        id: offered.id,
        slice_count: offered.slices,
        instance_count: offered.instances,
        multiprocessor_count: offered.multiprocessors,
        shared_copy_engine_count: row.copy_engines,
        shared_decoder_count: row.decoders,
        shared_encoder_count: row.encoders,
        shared_jpeg_count: row.jpegs,
        shared_ofa_count: row.ofas,
    };
    Ok((info, row.name.clone().unwrap_or_default()))
}

/// The MIG devices of a GPU as `(gpu instance, compute instance)` ids in index order; none
/// while MIG is disabled.
pub fn mig_devices(gpu: &Gpu) -> Vec<(u32, u32)> {
    match gpu.current {
        Mode::Enabled => partition::mig_devices(gpu),
        Mode::Disabled => Vec::new(),
    }
}

/// The MIG devices of `gpu` this process sees ([`visible::select_mig`]: in a container, those
/// whose capability nodes it was given).
fn seen_mig_devices(target: Target<'_>, gpu: &Gpu) -> Vec<(u32, u32)> {
    let present = visible::present_caps(&visible::dev_root());
    visible::select_mig(target.device.minor_number, mig_devices(gpu), &present)
}

/// `nvmlDeviceGetMaxMigDeviceCount`: zero unless MIG is enabled, then the profile's
/// `max_devices` (UNKNOWN if it does not know it).
pub fn max_mig_devices(mode: Option<MigMode>) -> Result<u32, NvmlReturn> {
    match mode {
        Some(mode) if mode.current => mode.max_devices.ok_or(abi::ERROR_UNKNOWN),
        _ => Ok(0),
    }
}

/// `nvmlDeviceGetMigDeviceHandleByIndex`'s choice: the `(gi, ci)` at `index`. NOT_SUPPORTED
/// without MIG, INVALID_ARGUMENT at or past [`max_mig_devices`] while enabled, NOT_FOUND for no
/// device there (callers such as go-nvlib take it as the end of the list).
pub fn mig_device_at(target: Target<'_>, index: u32) -> Result<(u32, u32), NvmlReturn> {
    let mode = target.mig_mode()?;
    if mode.current && index >= max_mig_devices(Some(mode))? {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let devices = seen_mig_devices(target, &target.gpu()?);
    usize::try_from(index)
        .ok()
        .and_then(|index| devices.get(index).copied())
        .ok_or(abi::ERROR_NOT_FOUND)
}

/// A MIG device's UUID ([`mig_state::mig_uuid`], which the NRI plugin resolves too).
pub fn mig_uuid(parent: &Device, gi: &GpuInstance, ci: u32) -> String {
    mig_state::mig_uuid(&parent.uuid, gi, ci)
}

/// `nvmlDeviceGetAttributes(_v2)` of a MIG device: its compute instance's SMs and slices, its
/// GPU instance's shared engines, slices and memory.
pub fn attributes(row: &GpuInstanceProfile, ci_slices: u32) -> DeviceAttributes {
    DeviceAttributes {
        multiprocessor_count: row.multiprocessors,
        shared_copy_engine_count: row.copy_engines,
        shared_decoder_count: row.decoders,
        shared_encoder_count: row.encoders,
        shared_jpeg_count: row.jpegs,
        shared_ofa_count: row.ofas,
        gpu_instance_slice_count: row.slices,
        compute_instance_slice_count: ci_slices,
        memory_size_mb: row.memory_mib,
    }
}

/// The MIG device with UUID `uuid` among the visible GPUs: `(visible GPU, gi, ci)`.
pub fn find_mig_uuid(loaded: &Loaded, uuid: &str) -> Result<(usize, u32, u32), NvmlReturn> {
    if !uuid.starts_with("MIG-") {
        return Err(abi::ERROR_NOT_FOUND);
    }
    let state = mig_store::read()?;
    for visible in 0..loaded.devices.len() {
        let target = Target::of(loaded, visible)?;
        let Ok(gpu) = target.gpu_in(&state) else {
            continue;
        };
        for (gi, ci) in seen_mig_devices(target, &gpu) {
            let Some(instance) = gpu.instance(gi) else {
                continue;
            };
            if mig_uuid(target.device, instance, ci) == uuid {
                return Ok((visible, gi, ci));
            }
        }
    }
    Err(abi::ERROR_NOT_FOUND)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use node_layout::mig_state::{ComputeInstance, Placement};
    use nvml_profile::{Profile, GB200};

    use super::*;

    #[test]
    fn mig_uuids_are_uuids_distinct_per_device_and_stable() {
        let device = Profile::parse(GB200).unwrap().devices().remove(0);
        let gi = |id, start| GpuInstance {
            id,
            profile_id: 19,
            placement: Placement { start, size: 1 },
            compute: vec![ComputeInstance {
                id: 0,
                profile_id: 0,
                placement: Placement { start: 0, size: 1 },
            }],
        };
        let one = mig_uuid(&device, &gi(1, 0), 0);
        assert_eq!(one.len(), "MIG-".len() + 36, "{one}");
        assert!(
            one.starts_with("MIG-") && one.matches('-').count() == 5,
            "{one}"
        );
        assert_eq!(one, mig_uuid(&device, &gi(1, 0), 0));
        assert_ne!(one, mig_uuid(&device, &gi(2, 1), 0));
        assert_ne!(one, mig_uuid(&device, &gi(1, 0), 1));
    }

    #[test]
    fn max_devices_needs_mig_enabled() {
        let mode = |current| {
            Some(MigMode {
                current,
                pending: current,
                max_devices: Some(7),
            })
        };
        assert_eq!(max_mig_devices(mode(false)), Ok(0));
        assert_eq!(max_mig_devices(mode(true)), Ok(7));
        assert_eq!(max_mig_devices(None), Ok(0));
    }
}
