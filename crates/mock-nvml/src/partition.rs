//! The MIG lifecycle as pure functions over one GPU's partition (`node_layout::mig_state::Gpu`)
//! and its profile table: mode changes, GPU and compute instances made and destroyed, what is
//! left. The C exports (`ffi/lifecycle.rs`) load and store the partition (`mig_store.rs`).
//!
//! Geometry: a GPU instance occupies one of its profile's placements in memory slices (no two
//! instances overlap) and its profile's compute slices (their sum stays within
//! [`COMPUTE_SLICES`], 7 on every shipped part); a profile has at most `instances` instances.
//! Compute instances: every GPU instance offers one compute instance profile, the whole
//! instance (the `NVML_COMPUTE_INSTANCE_PROFILE_*` of its slice count, one instance, its SMs and
//! engines, its name); the smaller compute profiles' SM counts were not found in real output, so
//! they are NOT_SUPPORTED.
//! Ids: the lowest free, GPU instances from 1, compute instances from 0 (the real driver's
//! assignment was not found).

use node_layout::mig_state::{ComputeInstance, Gpu, GpuInstance, Mode, Placement};
use nvml_profile::GpuInstanceProfile;

use crate::abi::{self, NvmlReturn};

/// At most this many GPU instances per GPU (ids 1..=8): the handle slots per GPU.
pub const MAX_GPU_INSTANCES: u32 = 8;
/// At most this many compute instances per GPU instance (ids 0..8): the handle slots per one.
pub const MAX_COMPUTE_INSTANCES: u32 = 8;
/// Compute slices per GPU: 7 on every MIG part shipped (A100, H100, B200, GB200: their 7g
/// profile), also where a table leaves that row out because its values were not found.
pub const COMPUTE_SLICES: u32 = 7;
/// `NVML_COMPUTE_INSTANCE_PROFILE_COUNT`.
pub const COMPUTE_INSTANCE_PROFILE_COUNT: u32 = 9;
/// `NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT`.
pub const COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT: u32 = 1;

/// The compute instance profile a GPU instance offers (`nvmlComputeInstanceProfileInfo_v2_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComputeProfile {
    /// The profile id, which equals its `NVML_COMPUTE_INSTANCE_PROFILE_*`.
    pub id: u32,
    /// Compute slices.
    pub slices: u32,
    /// How many fit in the GPU instance.
    pub instances: u32,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// The GPU instance's row, whose engines it shares.
    pub row: GpuInstanceProfile,
}

/// `NVML_COMPUTE_INSTANCE_PROFILE_*` for a compute instance of `slices` slices.
fn compute_enum(slices: u32) -> Option<u32> {
    match slices {
        1 => Some(0),
        2 => Some(1),
        3 => Some(2),
        4 => Some(3),
        7 => Some(4),
        8 => Some(5),
        6 => Some(6),
        _ => None,
    }
}

/// The one compute instance profile of a GPU instance of profile `row`.
pub fn compute_profile(row: &GpuInstanceProfile) -> Result<ComputeProfile, NvmlReturn> {
    Ok(ComputeProfile {
        id: compute_enum(row.slices).ok_or(abi::ERROR_NOT_SUPPORTED)?,
        slices: row.slices,
        instances: 1,
        multiprocessors: row.multiprocessors,
        row: row.clone(),
    })
}

/// `nvmlGpuInstanceGetComputeInstanceProfileInfo(V)`: INVALID_ARGUMENT past the last profile or
/// engine profile (nvml.h's enumeration end), NOT_SUPPORTED for a profile the instance lacks.
pub fn compute_profile_info(
    row: &GpuInstanceProfile,
    profile: u32,
    engine_profile: u32,
) -> Result<ComputeProfile, NvmlReturn> {
    if profile >= COMPUTE_INSTANCE_PROFILE_COUNT
        || engine_profile >= COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT
    {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let offered = compute_profile(row)?;
    if offered.id != profile {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    Ok(offered)
}

/// `nvmlDeviceSetMigMode`'s effect: the pending mode becomes `mode`; it is activated at once
/// (the mock's GPU resets instantly) unless disabling with GPU instances left, which leaves
/// MIG enabled and reports IN_USE as the activation status ("the device isn't idle").
pub fn set_mode(gpu: &mut Gpu, mode: Mode) -> NvmlReturn {
    gpu.pending = mode;
    if mode == Mode::Disabled && !gpu.instances.is_empty() {
        return abi::ERROR_IN_USE;
    }
    gpu.current = mode;
    abi::SUCCESS
}

/// NOT_SUPPORTED unless MIG is enabled now.
pub fn enabled(gpu: &Gpu) -> Result<(), NvmlReturn> {
    match gpu.current {
        Mode::Enabled => Ok(()),
        Mode::Disabled => Err(abi::ERROR_NOT_SUPPORTED),
    }
}

/// The row with profile id `profile_id`.
pub fn row(table: &[GpuInstanceProfile], profile_id: u32) -> Option<&GpuInstanceProfile> {
    table.iter().find(|row| row.id == profile_id)
}

/// `nvmlDeviceCreateGpuInstance(WithPlacement)`: the new instance's id. NOT_SUPPORTED while
/// MIG is disabled or for a row without placements; INVALID_ARGUMENT for a profile id the table
/// lacks or a placement the profile does not offer; INSUFFICIENT_RESOURCES when the profile's
/// instances are all made or the slices are taken.
pub fn create_gpu_instance(
    gpu: &mut Gpu,
    table: &[GpuInstanceProfile],
    profile_id: u32,
    placement: Option<Placement>,
) -> Result<u32, NvmlReturn> {
    enabled(gpu)?;
    let row = row(table, profile_id).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    let offered = row.placements.as_ref().ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let candidates: Vec<Placement> = offered
        .pairs()
        .map(|(start, size)| Placement { start, size })
        .collect();
    let made = gpu
        .instances
        .iter()
        .filter(|gi| gi.profile_id == profile_id)
        .count();
    if placement.is_some_and(|wanted| !candidates.contains(&wanted)) {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let compute_total = COMPUTE_SLICES;
    let compute_used: u32 = gpu
        .instances
        .iter()
        .filter_map(|gi| self::row(table, gi.profile_id))
        .map(|row| row.slices)
        .sum();
    if made >= row.instances as usize || compute_used + row.slices > compute_total {
        return Err(abi::ERROR_INSUFFICIENT_RESOURCES);
    }
    let chosen = match placement {
        Some(wanted) => Some(wanted).filter(|wanted| is_free(gpu, *wanted)),
        None => best_placement(gpu, table, candidates),
    }
    .ok_or(abi::ERROR_INSUFFICIENT_RESOURCES)?;
    let id = (1..=MAX_GPU_INSTANCES)
        .find(|id| gpu.instance(*id).is_none())
        .ok_or(abi::ERROR_INSUFFICIENT_RESOURCES)?;
    gpu.instances.push(GpuInstance {
        id,
        profile_id,
        placement: chosen,
        compute: Vec::new(),
    });
    Ok(id)
}

/// Without a placement asked for: the free candidate that leaves the most placements of every
/// profile free (the lowest start among equals), so that a 3g made first sits where a 2g and two
/// 1g still fit beside it. The real driver's choice was not found; this is the mock's.
fn best_placement(
    gpu: &Gpu,
    table: &[GpuInstanceProfile],
    candidates: Vec<Placement>,
) -> Option<Placement> {
    let mut best: Option<(usize, Placement)> = None;
    for candidate in candidates.into_iter().filter(|offer| is_free(gpu, *offer)) {
        let mut trial = gpu.clone();
        trial.instances.push(GpuInstance {
            id: 0,
            profile_id: u32::MAX,
            placement: candidate,
            compute: Vec::new(),
        });
        let left: usize = table
            .iter()
            .filter_map(|row| row.placements.as_ref())
            .flat_map(|offered| offered.pairs())
            .filter(|(start, size)| {
                is_free(
                    &trial,
                    Placement {
                        start: *start,
                        size: *size,
                    },
                )
            })
            .count();
        if best.is_none_or(|(most, _)| left > most) {
            best = Some((left, candidate));
        }
    }
    best.map(|(_, placement)| placement)
}

/// Whether `placement` overlaps no GPU instance's memory slices.
fn is_free(gpu: &Gpu, placement: Placement) -> bool {
    let end = placement.start + placement.size;
    gpu.instances.iter().all(|gi| {
        let other_end = gi.placement.start + gi.placement.size;
        end <= gi.placement.start || other_end <= placement.start
    })
}

/// `nvmlGpuInstanceDestroy`: INVALID_ARGUMENT for an instance that does not exist (a stale
/// handle), IN_USE while it has compute instances (nvml.h).
pub fn destroy_gpu_instance(gpu: &mut Gpu, id: u32) -> Result<(), NvmlReturn> {
    let position = gpu
        .instances
        .iter()
        .position(|gi| gi.id == id)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    if !gpu.instances[position].compute.is_empty() {
        return Err(abi::ERROR_IN_USE);
    }
    gpu.instances.remove(position);
    Ok(())
}

/// `nvmlDeviceGetGpuInstanceRemainingCapacity`: how many more instances of the profile could be
/// made now. NOT_SUPPORTED while MIG is disabled or for a profile id the table lacks.
pub fn remaining_gpu_instances(
    gpu: &Gpu,
    table: &[GpuInstanceProfile],
    profile_id: u32,
) -> Result<u32, NvmlReturn> {
    enabled(gpu)?;
    row(table, profile_id).ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let mut trial = gpu.clone();
    let mut count = 0;
    while create_gpu_instance(&mut trial, table, profile_id, None).is_ok() {
        count += 1;
    }
    Ok(count)
}

/// The GPU instance `id`, or INVALID_ARGUMENT (a stale handle).
pub fn gpu_instance(gpu: &Gpu, id: u32) -> Result<&GpuInstance, NvmlReturn> {
    gpu.instance(id).ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// The compute profile GPU instance `gi` offers.
fn offered(gi: &GpuInstance, table: &[GpuInstanceProfile]) -> Result<ComputeProfile, NvmlReturn> {
    compute_profile(row(table, gi.profile_id).ok_or(abi::ERROR_UNKNOWN)?)
}

/// `nvmlGpuInstanceCreateComputeInstance(WithPlacement)`: the new compute instance's id.
/// NOT_SUPPORTED for a profile the GPU instance does not offer, INVALID_ARGUMENT for another
/// placement than the whole instance, INSUFFICIENT_RESOURCES when it is already made.
pub fn create_compute_instance(
    gpu: &mut Gpu,
    gi_id: u32,
    table: &[GpuInstanceProfile],
    profile_id: u32,
    placement: Option<Placement>,
) -> Result<u32, NvmlReturn> {
    let offered = offered(gpu_instance(gpu, gi_id)?, table)?;
    if offered.id != profile_id {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    let whole = Placement {
        start: 0,
        size: offered.slices,
    };
    if placement.is_some_and(|wanted| wanted != whole) {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let gi = gpu
        .instances
        .iter_mut()
        .find(|gi| gi.id == gi_id)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    if gi.compute.len() >= offered.instances as usize {
        return Err(abi::ERROR_INSUFFICIENT_RESOURCES);
    }
    let id = (0..MAX_COMPUTE_INSTANCES)
        .find(|id| gi.compute.iter().all(|ci| ci.id != *id))
        .ok_or(abi::ERROR_INSUFFICIENT_RESOURCES)?;
    gi.compute.push(ComputeInstance {
        id,
        profile_id,
        placement: whole,
    });
    Ok(id)
}

/// `nvmlComputeInstanceDestroy`: INVALID_ARGUMENT for one that does not exist (a stale handle).
pub fn destroy_compute_instance(gpu: &mut Gpu, gi_id: u32, ci_id: u32) -> Result<(), NvmlReturn> {
    let gi = gpu
        .instances
        .iter_mut()
        .find(|gi| gi.id == gi_id)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    let position = gi
        .compute
        .iter()
        .position(|ci| ci.id == ci_id)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    gi.compute.remove(position);
    Ok(())
}

/// `nvmlGpuInstanceGetComputeInstanceRemainingCapacity`: NOT_SUPPORTED for a profile the GPU
/// instance does not offer.
pub fn remaining_compute_instances(
    gpu: &Gpu,
    gi_id: u32,
    table: &[GpuInstanceProfile],
    profile_id: u32,
) -> Result<u32, NvmlReturn> {
    let gi = gpu_instance(gpu, gi_id)?;
    let offered = offered(gi, table)?;
    if offered.id != profile_id {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    Ok(offered.instances.saturating_sub(gi.compute.len() as u32))
}

/// The MIG devices (one per compute instance) as `(gpu instance id, compute instance id)`, in
/// the order `nvmlDeviceGetMigDeviceHandleByIndex` numbers them: by GPU instance id, then
/// compute instance id.
pub fn mig_devices(gpu: &Gpu) -> Vec<(u32, u32)> {
    let mut devices: Vec<(u32, u32)> = gpu
        .instances
        .iter()
        .flat_map(|gi| gi.compute.iter().map(move |ci| (gi.id, ci.id)))
        .collect();
    devices.sort_unstable();
    devices
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "partition_tests.rs"]
mod tests;
