//! The handles of GPU instances (`nvmlGpuInstance_t`), compute instances
//! (`nvmlComputeInstance_t`) and MIG devices (an `nvmlDevice_t`): addresses of slots in one static
//! array that is never freed, as device handles are (`state.rs`), so a handle is recognised by
//! address arithmetic alone, before anything is dereferenced. A slot stands for a visible GPU and
//! instance ids; whether that instance exists is asked of the partition at each call, so a
//! destroyed instance's handle is INVALID_ARGUMENT, and an instance made again with the same ids
//! gets the same handle (as NVML's handles, they name the instance, not one creation of it).

use crate::{
    config::MAX_DEVICES,
    partition::{MAX_COMPUTE_INSTANCES, MAX_GPU_INSTANCES},
};

const GI_PER_GPU: usize = MAX_GPU_INSTANCES as usize;
const CI_PER_GI: usize = MAX_COMPUTE_INSTANCES as usize;
const GI_SLOTS: usize = MAX_DEVICES * GI_PER_GPU;
const CI_SLOTS: usize = GI_SLOTS * CI_PER_GI;

/// GPU instance slots, then compute instance slots, then MIG device slots (one per compute
/// instance). One array, so the three ranges can never overlap or be merged.
static SLOTS: [u64; GI_SLOTS + 2 * CI_SLOTS] = [0; GI_SLOTS + 2 * CI_SLOTS];

/// A GPU instance: visible GPU index and GPU instance id (1..=8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GiRef {
    /// The visible GPU's index.
    pub gpu: usize,
    /// The GPU instance id.
    pub gi: u32,
}

/// A compute instance, or the MIG device it makes: its GPU instance and compute instance id
/// (0..8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CiRef {
    /// The GPU instance.
    pub parent: GiRef,
    /// The compute instance id.
    pub ci: u32,
}

/// Which range of [`SLOTS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Range {
    Gi,
    Ci,
    Mig,
}

impl Range {
    fn base(self) -> usize {
        match self {
            Range::Gi => 0,
            Range::Ci => GI_SLOTS,
            Range::Mig => GI_SLOTS + CI_SLOTS,
        }
    }

    fn len(self) -> usize {
        match self {
            Range::Gi => GI_SLOTS,
            Range::Ci | Range::Mig => CI_SLOTS,
        }
    }
}

fn address(range: Range, index: usize) -> Option<usize> {
    (index < range.len()).then(|| SLOTS[range.base() + index..].as_ptr() as usize)
}

fn index(range: Range, address: usize) -> Option<usize> {
    let offset = address.checked_sub(SLOTS.as_ptr() as usize)?;
    if offset % size_of::<u64>() != 0 {
        return None;
    }
    let slot = (offset / size_of::<u64>()).checked_sub(range.base())?;
    (slot < range.len()).then_some(slot)
}

fn gi_index(gi: GiRef) -> Option<usize> {
    let id = usize::try_from(gi.gi).ok()?.checked_sub(1)?;
    (gi.gpu < MAX_DEVICES && id < GI_PER_GPU).then_some(gi.gpu * GI_PER_GPU + id)
}

fn gi_at(slot: usize) -> GiRef {
    GiRef {
        gpu: slot / GI_PER_GPU,
        gi: (slot % GI_PER_GPU) as u32 + 1,
    }
}

fn ci_index(ci: CiRef) -> Option<usize> {
    let id = usize::try_from(ci.ci).ok()?;
    (id < CI_PER_GI).then_some(gi_index(ci.parent)? * CI_PER_GI + id)
}

fn ci_at(slot: usize) -> CiRef {
    CiRef {
        parent: gi_at(slot / CI_PER_GI),
        ci: (slot % CI_PER_GI) as u32,
    }
}

/// The handle of a GPU instance, if its ids fit the slots.
pub fn gi_handle(gi: GiRef) -> Option<usize> {
    address(Range::Gi, gi_index(gi)?)
}

/// The GPU instance a handle address stands for.
pub fn gi_of(address: usize) -> Option<GiRef> {
    index(Range::Gi, address).map(gi_at)
}

/// The handle of a compute instance.
pub fn ci_handle(ci: CiRef) -> Option<usize> {
    address(Range::Ci, ci_index(ci)?)
}

/// The compute instance a handle address stands for.
pub fn ci_of(address: usize) -> Option<CiRef> {
    index(Range::Ci, address).map(ci_at)
}

/// The device handle of the MIG device of a compute instance.
pub fn mig_handle(ci: CiRef) -> Option<usize> {
    address(Range::Mig, ci_index(ci)?)
}

/// The MIG device a device handle address stands for.
pub fn mig_of(address: usize) -> Option<CiRef> {
    index(Range::Mig, address).map(ci_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_handle_round_trips_and_is_told_apart() {
        let gi = GiRef { gpu: 3, gi: 2 };
        let ci = CiRef { parent: gi, ci: 5 };
        let gi_address = gi_handle(gi).unwrap_or_default();
        let ci_address = ci_handle(ci).unwrap_or_default();
        let mig_address = mig_handle(ci).unwrap_or_default();
        assert!(gi_address >= 4096 && ci_address >= 4096 && mig_address >= 4096);
        assert_eq!(gi_of(gi_address), Some(gi));
        assert_eq!(ci_of(ci_address), Some(ci));
        assert_eq!(mig_of(mig_address), Some(ci));
        assert_eq!((ci_of(gi_address), mig_of(ci_address)), (None, None));
        assert_eq!((gi_of(mig_address), gi_of(gi_address + 1)), (None, None));
        assert_eq!(gi_handle(GiRef { gpu: 0, gi: 0 }), None, "ids start at 1");
        assert_eq!(gi_handle(GiRef { gpu: 0, gi: 9 }), None);
        assert_eq!(ci_handle(CiRef { parent: gi, ci: 8 }), None);
        let last = CiRef {
            parent: GiRef {
                gpu: MAX_DEVICES - 1,
                gi: 8,
            },
            ci: 7,
        };
        assert_eq!(mig_of(mig_handle(last).unwrap_or_default()), Some(last));
        assert_eq!(mig_of(mig_handle(last).unwrap_or_default() + 8), None);
        let local = 0u64;
        assert_eq!(gi_of(&local as *const u64 as usize), None);
    }
}
