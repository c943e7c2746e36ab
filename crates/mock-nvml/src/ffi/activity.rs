//! Issue 22, "misc" area: PCIe extras, affinity, P2P, NVLink counters, codecs, field values,
//! platform, C2C and the MIG parent lookup (answers in [`crate::activity`]; processes in
//! `ffi/processes.rs`, GPM in `ffi/gpm.rs`).

use std::ffi::{c_ulong, c_ulonglong};

use super::guard::*;
use crate::abi::{self, NvmlReturn};
use crate::{
    activity::{self, CounterSet, Engine},
    activity_abi::{self as cabi, C2cModeInfo, FbcStats, FieldValue, PciInfoExt},
};
use std::ffi::{c_int, c_uint, c_void};

/// Writes `values` to the caller's array of `length` elements, zeroing the rest.
///
/// # Safety
/// `out` must be valid for writing `length` elements of `T`, and `values.len() <= length`.
unsafe fn put_array<T: Copy + Default>(out: *mut T, length: usize, values: &[T]) {
    for slot in 0..length {
        let value = values.get(slot).copied().unwrap_or_default();
        // SAFETY: `slot < length`, and `out` holds `length` elements (contract).
        unsafe { out.add(slot).write_unaligned(value) };
    }
}

// ---------------------------------------------------------------- PCI and PCIe

/// `nvmlDeviceGetPciInfoExt`: the caller sets `version` to `nvmlPciInfoExt_v1`; the class codes
/// come from the profile's `pci_class` (NOT_SUPPORTED without it).
///
/// # Safety
/// `pci` must be NULL or valid for reading and writing an `nvmlPciInfoExt_v1_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfoExt(
    device: nvmlDevice_t,
    pci: *mut PciInfoExt,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let version = unsafe { get_u32(pci.cast_const().cast()) }?;
            activity::pci_info_ext(device, version)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(pci, value) }
    })
}

/// `nvmlDeviceGetPcieThroughput`: `NVML_PCIE_UTIL_TX_BYTES` or `_RX_BYTES` in KB/s.
///
/// # Safety
/// `value` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: nvmlDevice_t,
    counter: c_uint,
    value: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let answer = with_device(device, |_, device| {
            non_null([value.cast_const().cast()])?;
            activity::pcie_throughput(device, counter)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(value, answer) }
    })
}

getter!(nvmlDeviceGetPcieReplayCounter, c_uint, |device| {
    activity::pcie_replays(device)
});
// The GPU's own maximum: the profile's `pcie.max_gen` (no slower host side is modelled).
getter!(nvmlDeviceGetGpuMaxPcieLinkGeneration, c_uint, |device| Ok(
    device.pcie.max_gen
));

// ---------------------------------------------------------------- affinity

/// An affinity mask of a GPU position in so many words ([`activity::cpu_affinity`]).
type MaskOf = fn(Option<&nvml_profile::PcieTopology>, usize, u32) -> Result<Vec<u64>, NvmlReturn>;

/// Shared body of the affinity exports: `mask` computes the words for the device's position.
///
/// # Safety
/// `set` must be NULL or valid for writing `size` `unsigned long`s.
unsafe fn affinity(
    device: nvmlDevice_t,
    size: c_uint,
    set: *mut c_ulong,
    scope: c_uint,
    mask: MaskOf,
) -> NvmlReturn {
    guard(|| {
        let words = with_device(device, |loaded, device| {
            non_null([set.cast_const().cast()])?;
            activity::check_scope(scope)?;
            let position = device.index as usize;
            mask(loaded.pcie.as_ref(), position, size)
        })?;
        let words: Vec<c_ulong> = words.into_iter().map(|word| word as c_ulong).collect();
        // SAFETY: `set` is valid for `size` words (contract) and `words.len() == size`.
        unsafe { put_array(set, size as usize, &words) };
        Ok(())
    })
}

/// `nvmlDeviceGetCpuAffinity`: the CPUs of the GPU's NUMA node (`pcie_topology`), bit `n` of
/// word `n / 64`; CPUs past `cpu_set_size` words are left out.
///
/// # Safety
/// `cpu_set` must be NULL or valid for writing `cpu_set_size` `unsigned long`s.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCpuAffinity(
    device: nvmlDevice_t,
    cpu_set_size: c_uint,
    cpu_set: *mut c_ulong,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { affinity(device, cpu_set_size, cpu_set, 0, activity::cpu_affinity) }
}

/// `nvmlDeviceGetCpuAffinityWithinScope`: as [`nvmlDeviceGetCpuAffinity`] for either scope.
///
/// # Safety
/// As for [`nvmlDeviceGetCpuAffinity`].
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCpuAffinityWithinScope(
    device: nvmlDevice_t,
    cpu_set_size: c_uint,
    cpu_set: *mut c_ulong,
    scope: c_uint,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { affinity(device, cpu_set_size, cpu_set, scope, activity::cpu_affinity) }
}

/// `nvmlDeviceGetMemoryAffinity`: the GPU's NUMA node as a node mask.
///
/// # Safety
/// `node_set` must be NULL or valid for writing `node_set_size` `unsigned long`s.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryAffinity(
    device: nvmlDevice_t,
    node_set_size: c_uint,
    node_set: *mut c_ulong,
    scope: c_uint,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        affinity(
            device,
            node_set_size,
            node_set,
            scope,
            activity::memory_affinity,
        )
    }
}

/// `nvmlDeviceGetNumaNodeId`.
///
/// # Safety
/// `node` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNumaNodeId(
    device: nvmlDevice_t,
    node: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |loaded, device| {
            non_null([node.cast_const().cast()])?;
            activity::numa_node(loaded.pcie.as_ref(), device.index as usize)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(node, value) }
    })
}

/// `nvmlDeviceGetP2PStatus`: see [`activity::p2p_status`].
///
/// # Safety
/// `status` must be NULL or valid for writing an `nvmlGpuP2PStatus_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetP2PStatus(
    device1: nvmlDevice_t,
    device2: nvmlDevice_t,
    index: c_uint,
    status: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device1, |loaded, first| {
            let second = loaded.device(device2 as usize)?;
            non_null([status.cast_const().cast()])?;
            activity::p2p_status(first, second, index)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(status, value) }
    })
}

// ---------------------------------------------------------------- NVLink counters

/// `nvmlDeviceGetNvLinkErrorCounter`: accrues `nvlink_counters.errors_per_second` over uptime,
/// from the last reset.
///
/// # Safety
/// `value` must be NULL or valid for writing an `unsigned long long`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: c_uint,
    value: *mut c_ulonglong,
) -> NvmlReturn {
    guard(|| {
        let seen = with_device(device, |_, device| {
            non_null([value.cast_const().cast()])?;
            let raw = activity::nvlink_errors(device, link, counter, activity::uptime_s())?;
            let key = (device.index, link, CounterSet::Errors);
            Ok(activity::with_controls(|controls| controls.seen(key, raw)))
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(value, seen) }
    })
}

/// `nvmlDeviceGetNvLinkUtilizationCounter`: rx and tx accrue
/// `nvlink_counters.traffic_per_second` over uptime, from the last reset, unless frozen.
///
/// # Safety
/// `rx` and `tx` must be NULL or valid for writing an `unsigned long long`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkUtilizationCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: c_uint,
    rx: *mut c_ulonglong,
    tx: *mut c_ulonglong,
) -> NvmlReturn {
    guard(|| {
        let (rx_seen, tx_seen) = with_device(device, |_, device| {
            non_null([rx.cast_const().cast(), tx.cast_const().cast()])?;
            let (raw_rx, raw_tx) =
                activity::nvlink_traffic(device, link, counter, activity::uptime_s())?;
            let key = (device.index, link, CounterSet::Traffic(counter));
            Ok(activity::with_controls(|controls| {
                (controls.seen(key, raw_rx), controls.seen(key, raw_tx))
            }))
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put(rx, rx_seen)?;
            put(tx, tx_seen)
        }
    })
}

/// Runs a reset or freeze on one counter set after the checks.
fn control(
    device: nvmlDevice_t,
    link: c_uint,
    set: CounterSet,
    action: impl FnOnce(&mut activity::CounterControls, (u32, u32, CounterSet), u64),
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            let counter = match set {
                CounterSet::Traffic(counter) => Some(counter),
                CounterSet::Errors => None,
            };
            activity::nvlink_counter_control(device, link, counter)?;
            let uptime = activity::uptime_s();
            let raw = match set {
                CounterSet::Traffic(counter) => {
                    activity::nvlink_traffic(device, link, counter, uptime)?.0
                }
                CounterSet::Errors => activity::nvlink_errors(device, link, 0, uptime)?,
            };
            let key = (device.index, link, set);
            activity::with_controls(|controls| action(controls, key, raw));
            Ok(())
        })
    })
}

/// `nvmlDeviceFreezeNvLinkUtilizationCounter`: `freeze` 1 holds the counter, 0 lets it run on.
#[no_mangle]
pub extern "C" fn nvmlDeviceFreezeNvLinkUtilizationCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: c_uint,
    freeze: c_uint,
) -> NvmlReturn {
    if freeze > 1 {
        return guard(|| with_device(device, |_, _| Err(abi::ERROR_INVALID_ARGUMENT)));
    }
    control(
        device,
        link,
        CounterSet::Traffic(counter),
        |controls, key, raw| controls.freeze(key, raw, freeze == 1),
    )
}

/// `nvmlDeviceResetNvLinkUtilizationCounter`: the counter counts from zero again.
#[no_mangle]
pub extern "C" fn nvmlDeviceResetNvLinkUtilizationCounter(
    device: nvmlDevice_t,
    link: c_uint,
    counter: c_uint,
) -> NvmlReturn {
    control(
        device,
        link,
        CounterSet::Traffic(counter),
        |controls, key, raw| controls.reset(key, raw),
    )
}

/// `nvmlDeviceResetNvLinkErrorCounters`: every error counter of the link counts from zero again.
#[no_mangle]
pub extern "C" fn nvmlDeviceResetNvLinkErrorCounters(
    device: nvmlDevice_t,
    link: c_uint,
) -> NvmlReturn {
    control(device, link, CounterSet::Errors, |controls, key, raw| {
        controls.reset(key, raw)
    })
}

// ---------------------------------------------------------------- codecs

/// Defines `fn name(device, *utilization, *sampling_period_us)` for one video engine.
macro_rules! engine_utilization {
    ($name:ident, $engine:expr) => {
        #[doc = concat!("`", stringify!($name), "`: the profile's `codecs` (NOT_SUPPORTED without them).")]
        ///
        /// # Safety
        /// Both pointers must be NULL or valid for writing an `unsigned int`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, utilization: *mut c_uint, period_us: *mut c_uint) -> NvmlReturn {
            guard(|| {
                let (value, period) = with_device(device, |_, device| {
                    non_null([utilization.cast_const().cast(), period_us.cast_const().cast()])?;
                    activity::engine_utilization(device, $engine)
                })?;
                // SAFETY: forwarded from this function's contract.
                unsafe {
                    put(utilization, value)?;
                    put(period_us, period)
                }
            })
        }
    };
}

engine_utilization!(nvmlDeviceGetEncoderUtilization, Engine::Encoder);
engine_utilization!(nvmlDeviceGetDecoderUtilization, Engine::Decoder);
engine_utilization!(nvmlDeviceGetJpgUtilization, Engine::Jpeg);
engine_utilization!(nvmlDeviceGetOfaUtilization, Engine::Ofa);

/// `nvmlDeviceGetEncoderCapacity`: INVALID_ARGUMENT past `NVML_ENCODER_QUERY_AV1`.
///
/// # Safety
/// `capacity` must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderCapacity(
    device: nvmlDevice_t,
    kind: c_uint,
    capacity: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            non_null([capacity.cast_const().cast()])?;
            activity::encoder_capacity(device, kind)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(capacity, value) }
    })
}

/// `nvmlDeviceGetEncoderStats`: no sessions, so zero sessions, frames per second and latency.
///
/// # Safety
/// Each pointer must be NULL or valid for writing an `unsigned int`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEncoderStats(
    device: nvmlDevice_t,
    sessions: *mut c_uint,
    average_fps: *mut c_uint,
    average_latency: *mut c_uint,
) -> NvmlReturn {
    guard(|| {
        let count = with_device(device, |_, device| {
            non_null([sessions, average_fps, average_latency].map(|p| p.cast_const().cast()))?;
            activity::codec_sessions(device)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put(sessions, count)?;
            put(average_fps, 0)?;
            put(average_latency, 0)
        }
    })
}

/// `nvmlDeviceGetFBCStats`: no capture sessions, so all zero.
///
/// # Safety
/// `stats` must be NULL or valid for writing an `nvmlFBCStats_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFBCStats(
    device: nvmlDevice_t,
    stats: *mut FbcStats,
) -> NvmlReturn {
    guard(|| {
        let count = with_device(device, |_, device| {
            non_null([stats.cast_const().cast()])?;
            activity::codec_sessions(device)
        })?;
        let value = FbcStats {
            sessions_count: count,
            ..FbcStats::default()
        };
        // SAFETY: forwarded from this function's contract.
        unsafe { put(stats, value) }
    })
}

/// Defines a session-list export `fn name(device, *count, *infos)`: no session is modelled, so
/// `*count` becomes 0 whatever was asked (the array is untouched).
macro_rules! no_sessions {
    ($name:ident) => {
        #[doc = concat!("`", stringify!($name), "`: zero sessions (INVALID_ARGUMENT for a NULL count).")]
        ///
        /// # Safety
        /// `count` must be NULL or valid for writing an `unsigned int`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, count: *mut c_uint, _infos: *mut c_void) -> NvmlReturn {
            guard(|| {
                let sessions = with_device(device, |_, device| {
                    non_null([count.cast_const().cast()])?;
                    activity::codec_sessions(device)
                })?;
                // SAFETY: forwarded from this function's contract.
                unsafe { put(count, sessions) }
            })
        }
    };
}

no_sessions!(nvmlDeviceGetEncoderSessions);
no_sessions!(nvmlDeviceGetFBCSessions);

// ---------------------------------------------------------------- field values

/// `nvmlDeviceGetFieldValues`: each entry's `fieldId` and `scopeId` answered by
/// [`crate::fields::answer`], stamped now; an id the mock does not model gets NOT_SUPPORTED in
/// its own `nvmlReturn` while the call succeeds. INVALID_ARGUMENT for a NULL array or a count that is not
/// positive (as upstream's).
///
/// # Safety
/// `values` must be NULL or valid for reading and writing `values_count` `nvmlFieldValue_t`s.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: nvmlDevice_t,
    values_count: c_int,
    values: *mut FieldValue,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            non_null([values.cast_const().cast()])?;
            let count = usize::try_from(values_count)
                .ok()
                .filter(|count| *count > 0)
                .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
            let uptime = activity::uptime_s();
            let now_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_micros() as i64);
            for slot in 0..count {
                // SAFETY: `slot < values_count`, and the array holds that many (contract).
                let entry = unsafe { values.add(slot) };
                // SAFETY: as above.
                let mut value = unsafe { entry.read_unaligned() };
                let clocks = crate::fields::Clocks {
                    uptime_s: uptime,
                    energy: super::health::since_start(),
                };
                let answer = crate::fields::answer(device, value.field_id, value.scope_id, clocks);
                value.timestamp = now_us;
                value.latency_usec = 0;
                (value.value_type, value.nvml_return, value.value) = match answer {
                    Ok((kind, raw)) => (kind.code(), abi::SUCCESS, raw),
                    Err(code) => (value.value_type, code, value.value),
                };
                // SAFETY: as above.
                unsafe { entry.write_unaligned(value) };
            }
            Ok(())
        })
    })
}

// ---------------------------------------------------------------- platform, C2C, MIG

/// `nvmlDeviceGetPlatformInfo`: see [`activity::platform_info`]; the caller sets `version`.
///
/// # Safety
/// `info` must be NULL or valid for reading and writing an `nvmlPlatformInfo_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPlatformInfo(
    device: nvmlDevice_t,
    info: *mut cabi::PlatformInfo,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let version = unsafe { get_u32(info.cast_const().cast()) }?;
            activity::platform_info(device, version)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(info, value) }
    })
}

/// `nvmlDeviceGetC2cModeInfoV`: the profile's `c2c` (NOT_SUPPORTED without it).
///
/// # Safety
/// `info` must be NULL or valid for writing an `nvmlC2cModeInfo_v1_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetC2cModeInfoV(
    device: nvmlDevice_t,
    info: *mut C2cModeInfo,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            non_null([info.cast_const().cast()])?;
            activity::c2c(device)
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(info, value) }
    })
}
