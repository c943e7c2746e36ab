//! GPU Performance Monitoring (issue 22, misc area; exports in `ffi/gpm.rs`): which parts
//! support it, the samples callers allocate and take, and the metrics between two samples.
//!
//! Support follows the architecture, as on NVIDIA's driver: Hopper and later. A sample records
//! which GPU it was taken on and when; a metric is answered from the profile's values over the
//! two samples (the profile's utilization and PCIe throughput are constant, so any interval
//! gives them). Metrics the profile does not model (tensor, FP pipes, occupancy, video engines,
//! per-link NVLink bandwidth) get NOT_SUPPORTED in their own entry.

use std::sync::{Mutex, MutexGuard};

use nvml_profile::{Architecture, Device};

use crate::abi::{self, NvmlReturn};

/// `NVML_GPM_METRIC_MAX`: metric ids run below it, and a request holds at most that many.
pub const METRIC_MAX: u32 = 210;

/// Whether the part supports GPM (Hopper and later).
pub fn supported(device: &Device) -> bool {
    matches!(
        device.architecture,
        Architecture::Hopper | Architecture::Blackwell | Architecture::Rubin
    )
}

/// One sample: the GPU it was taken on (by index), if taken yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// `Some(index)` once `nvmlGpmSampleGet` filled it.
    pub taken_on: Option<u32>,
}

/// The live samples by handle, and the next handle to issue.
#[derive(Debug, Default)]
struct Samples {
    /// A consumer holds a few samples per GPU at a time: a linear scan, which links less code
    /// into the library than a `HashMap`.
    live: Vec<(usize, Sample)>,
    issued: usize,
}

/// Handles are opaque, never dereferenced: distinct non-NULL values in a range no allocation
/// uses on 64-bit Linux (the top of the canonical user half).
const HANDLE_BASE: usize = 0x7fff_6770_0000_0000;

static SAMPLES: Mutex<Option<Samples>> = Mutex::new(None);

fn samples() -> MutexGuard<'static, Option<Samples>> {
    // A poisoned lock is recovered: the map is consistent between statements.
    SAMPLES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A new, empty sample's handle.
pub fn alloc() -> usize {
    let mut guard = samples();
    let samples = guard.get_or_insert_with(Samples::default);
    samples.issued += 1;
    let handle = HANDLE_BASE + samples.issued * 16;
    samples.live.push((handle, Sample::default()));
    handle
}

/// Frees a sample: INVALID_ARGUMENT for a handle that is not a live sample.
pub fn free(handle: usize) -> Result<(), NvmlReturn> {
    samples()
        .as_mut()
        .and_then(|samples| {
            let position = samples.live.iter().position(|(at, _)| *at == handle)?;
            Some(samples.live.swap_remove(position))
        })
        .map(drop)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// Takes a sample of `device` into `handle`: INVALID_ARGUMENT for a dead handle, NOT_SUPPORTED on
/// a part without GPM.
pub fn take(handle: usize, device: &Device) -> Result<(), NvmlReturn> {
    let mut guard = samples();
    let sample = guard
        .as_mut()
        .and_then(|samples| samples.live.iter_mut().find(|(at, _)| *at == handle))
        .map(|(_, sample)| sample)
        .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
    if !supported(device) {
        return Err(abi::ERROR_NOT_SUPPORTED);
    }
    sample.taken_on = Some(device.index);
    Ok(())
}

/// The GPU two taken samples of the same GPU were taken on; INVALID_ARGUMENT otherwise.
pub fn pair(first: usize, second: usize) -> Result<u32, NvmlReturn> {
    let guard = samples();
    let live = |handle| {
        guard
            .as_ref()
            .and_then(|samples| samples.live.iter().find(|(at, _)| *at == handle))
            .and_then(|(_, sample)| sample.taken_on)
    };
    match (live(first), live(second)) {
        (Some(a), Some(b)) if a == b => Ok(a),
        _ => Err(abi::ERROR_INVALID_ARGUMENT),
    }
}

/// One metric over two samples of `device`: the modelled ones from the profile, the others
/// NOT_SUPPORTED, ids past [`METRIC_MAX`] INVALID_ARGUMENT.
pub fn metric(device: &Device, id: u32) -> Result<f64, NvmlReturn> {
    let pcie_mib = |kbps: fn(&nvml_profile::PcieCounters) -> u32| {
        device
            .pcie_counters
            .as_ref()
            .map(|counters| f64::from(kbps(counters)) / 1024.0)
            .ok_or(abi::ERROR_NOT_SUPPORTED)
    };
    match id {
        // NVML_GPM_METRIC_GRAPHICS_UTIL, _SM_UTIL: busy time, percent.
        1 | 2 => Ok(f64::from(device.utilization.gpu)),
        // NVML_GPM_METRIC_DRAM_BW_UTIL.
        10 => Ok(f64::from(device.utilization.memory)),
        // NVML_GPM_METRIC_PCIE_TX_PER_SEC, _RX_PER_SEC: MiB/s.
        20 => pcie_mib(|counters| counters.tx_kbps),
        21 => pcie_mib(|counters| counters.rx_kbps),
        id if id >= METRIC_MAX => Err(abi::ERROR_INVALID_ARGUMENT),
        _ => Err(abi::ERROR_NOT_SUPPORTED),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use test_support::gb200_devices as gb200;

    #[test]
    fn support_follows_the_architecture() {
        let mut gpu = gb200().remove(0);
        assert!(supported(&gpu));
        gpu.architecture = Architecture::Ampere;
        assert!(!supported(&gpu));
    }

    #[test]
    fn samples_live_until_freed_and_pair_only_on_one_gpu() {
        let gpus = gb200();
        let (a, b, c) = (alloc(), alloc(), alloc());
        assert!(a != b && a != 0);
        assert_eq!(
            pair(a, b),
            Err(abi::ERROR_INVALID_ARGUMENT),
            "not taken yet"
        );
        take(a, &gpus[1]).unwrap();
        take(b, &gpus[1]).unwrap();
        take(c, &gpus[2]).unwrap();
        assert_eq!(pair(a, b), Ok(1));
        assert_eq!(pair(a, c), Err(abi::ERROR_INVALID_ARGUMENT), "two GPUs");
        let mut ampere = gpus[0].clone();
        ampere.architecture = Architecture::Ampere;
        assert_eq!(take(a, &ampere), Err(abi::ERROR_NOT_SUPPORTED));
        for handle in [a, b, c] {
            assert_eq!(free(handle), Ok(()));
        }
        assert_eq!(free(a), Err(abi::ERROR_INVALID_ARGUMENT));
        assert_eq!(take(a, &gpus[0]), Err(abi::ERROR_INVALID_ARGUMENT));
    }

    #[test]
    fn metrics_come_from_the_profile_or_are_not_supported() {
        let mut gpu = gb200().remove(0);
        gpu.utilization.gpu = 37;
        gpu.utilization.memory = 12;
        assert_eq!(metric(&gpu, 1), Ok(37.0));
        assert_eq!(metric(&gpu, 2), Ok(37.0));
        assert_eq!(metric(&gpu, 10), Ok(12.0));
        assert_eq!(metric(&gpu, 20), Ok(0.0));
        assert_eq!(
            metric(&gpu, 5),
            Err(abi::ERROR_NOT_SUPPORTED),
            "tensor: not modelled"
        );
        assert_eq!(metric(&gpu, 210), Err(abi::ERROR_INVALID_ARGUMENT));
        gpu.pcie_counters = None;
        assert_eq!(metric(&gpu, 21), Err(abi::ERROR_NOT_SUPPORTED));
    }
}
