//! Answers of the issue-22 "misc" exports (`ffi/activity.rs`, `ffi/processes.rs`): PCIe
//! extras, CPU and memory affinity, P2P status, processes, codecs, NVLink counters, C2C,
//! platform and the PCI info v1 layout. Values come from the profile's optional sections
//! (`nvml_profile::activity`) or are derived from what it already models; a missing section is
//! NOT_SUPPORTED. Every function is pure except the two the NVLink counters need: the clock
//! ([`uptime_s`], `/proc/uptime`) and the process's resets and freezes ([`with_controls`]).

use nvml_profile::{Device, PcieTopology, Process, ProcessKind};

use crate::{
    abi::{self, NvmlReturn},
    activity_abi::{
        self as cabi, C2cModeInfo, PciInfoExt, PciInfoV1, ProcessInfo, ProcessUtilizationSample,
    },
    query, topo,
};

// ---------------------------------------------------------------- PCI and PCIe

/// `nvmlPciInfo_t` version 1: the legacy bus id in the first 16 bytes, reserved words zero.
pub fn pci_info_v1(info: &abi::PciInfo) -> PciInfoV1 {
    PciInfoV1 {
        bus_id: info.bus_id_legacy,
        domain: info.domain,
        bus: info.bus,
        device: info.device,
        pci_device_id: info.pci_device_id,
        pci_sub_system_id: info.pci_sub_system_id,
        reserved: [0; 4],
    }
}

/// `nvmlDeviceGetPciInfoExt`: ARGUMENT_VERSION_MISMATCH unless `version` is v1; NOT_SUPPORTED
/// without `pci_class`.
pub fn pci_info_ext(device: &Device, version: u32) -> Result<PciInfoExt, NvmlReturn> {
    if version != cabi::PCI_INFO_EXT_V1 {
        return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    let class = device.pci_class.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let info = query::pci_info(device);
    Ok(PciInfoExt {
        version,
        domain: info.domain,
        bus: info.bus,
        device: info.device,
        pci_device_id: info.pci_device_id,
        pci_sub_system_id: info.pci_sub_system_id,
        base_class: class.base,
        sub_class: class.sub,
        bus_id: info.bus_id,
    })
}

/// `nvmlDeviceGetPcieThroughput`: `NVML_PCIE_UTIL_TX_BYTES` (0) or `RX_BYTES` (1), KB/s.
pub fn pcie_throughput(device: &Device, counter: u32) -> Result<u32, NvmlReturn> {
    let counters = device.pcie_counters.ok_or(abi::ERROR_NOT_SUPPORTED);
    match counter {
        0 => Ok(counters?.tx_kbps),
        1 => Ok(counters?.rx_kbps),
        _ => Err(abi::ERROR_INVALID_ARGUMENT),
    }
}

/// `nvmlDeviceGetPcieReplayCounter`.
pub fn pcie_replays(device: &Device) -> Result<u32, NvmlReturn> {
    Ok(device
        .pcie_counters
        .ok_or(abi::ERROR_NOT_SUPPORTED)?
        .replays)
}

// ---------------------------------------------------------------- affinity

/// `NVML_AFFINITY_SCOPE_NODE` (0) and `_SOCKET` (1) are the valid scopes; the profile models one
/// NUMA node per socket, so both answer the same.
pub fn check_scope(scope: u32) -> Result<(), NvmlReturn> {
    match scope {
        0 | 1 => Ok(()),
        _ => Err(abi::ERROR_INVALID_ARGUMENT),
    }
}

/// The bitmask of `bits` (inclusive ranges) in `words` 64-bit words, bit `n` at word `n / 64`;
/// bits past the last word are dropped (the caller asked for that many words).
pub fn mask(bits: &[(u32, u32)], words: usize) -> Vec<u64> {
    let mut mask = vec![0u64; words];
    for &(first, last) in bits {
        for bit in first..=last {
            if let Some(word) = mask.get_mut((bit / 64) as usize) {
                *word |= 1 << (bit % 64);
            }
        }
    }
    mask
}

/// The CPUs of a GPU's NUMA node as a mask of `words` words: INVALID_ARGUMENT for 0 words,
/// NOT_SUPPORTED without a PCIe topology.
pub fn cpu_affinity(
    pcie: Option<&PcieTopology>,
    gpu: usize,
    words: u32,
) -> Result<Vec<u64>, NvmlReturn> {
    let cpus = pcie
        .and_then(|pcie| pcie.cpus(gpu))
        .ok_or(abi::ERROR_NOT_SUPPORTED);
    mask_in_words(cpus, words)
}

/// A GPU's NUMA node as a node mask of `words` words (as [`cpu_affinity`]).
pub fn memory_affinity(
    pcie: Option<&PcieTopology>,
    gpu: usize,
    words: u32,
) -> Result<Vec<u64>, NvmlReturn> {
    let node = numa_node(pcie, gpu).map(|node| [(node, node)]);
    mask_in_words(
        node.as_ref().map(|node| &node[..]).map_err(|code| *code),
        words,
    )
}

/// The mask of `bits` in `words` words ([`mask`]): INVALID_ARGUMENT for 0 words before any
/// error of `bits`.
fn mask_in_words(
    bits: Result<&[(u32, u32)], NvmlReturn>,
    words: u32,
) -> Result<Vec<u64>, NvmlReturn> {
    if words == 0 {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(mask(bits?, words as usize))
}

/// `nvmlDeviceGetNumaNodeId`: NOT_SUPPORTED without a PCIe topology.
pub fn numa_node(pcie: Option<&PcieTopology>, gpu: usize) -> Result<u32, NvmlReturn> {
    pcie.and_then(|pcie| pcie.numa_node(gpu))
        .ok_or(abi::ERROR_NOT_SUPPORTED)
}

// ---------------------------------------------------------------- P2P

/// `nvmlDeviceGetP2PStatus`: two GPUs whose active NVLinks go to NVSwitches (the profile names
/// them) reach each other through that fabric, so every capability is OK, atomics only when the
/// links report `p2p_atomics`; a GPU with itself is OK; anything else NOT_SUPPORTED (links whose
/// far end the profile does not know connect nothing known, and the profile models no PCIe
/// peer-to-peer). INVALID_ARGUMENT for an unknown capability index.
pub fn p2p_status(first: &Device, second: &Device, index: u32) -> Result<u32, NvmlReturn> {
    if index >= cabi::P2P_CAPS_INDEX_UNKNOWN {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    if first.index == second.index {
        return Ok(cabi::P2P_STATUS_OK);
    }
    let linked = [first, second]
        .iter()
        .all(|device| device.nvlink.active > 0 && !device.nvlink.switches.is_empty());
    let atomics = || {
        [first, second].iter().all(|device| {
            device
                .nvlink
                .capabilities
                .as_ref()
                .is_some_and(|caps| caps.contains(&nvml_profile::NvLinkCapability::P2pAtomics))
        })
    };
    let ok = linked && (index != cabi::P2P_CAPS_INDEX_ATOMICS || atomics());
    Ok(if ok {
        cabi::P2P_STATUS_OK
    } else {
        cabi::P2P_STATUS_NOT_SUPPORTED
    })
}

// ---------------------------------------------------------------- processes

/// The GPU's processes of one kind, as `nvmlProcessInfo_t` (no MIG: no instance ids).
pub fn running(device: &Device, kind: ProcessKind) -> Vec<ProcessInfo> {
    device
        .processes
        .iter()
        .filter(|process| process.kind == kind)
        .map(|process| ProcessInfo {
            pid: process.pid,
            used_gpu_memory: process.used_memory,
            gpu_instance_id: cabi::NO_INSTANCE,
            compute_instance_id: cabi::NO_INSTANCE,
        })
        .collect()
}

/// `nvmlDeviceGetProcessUtilization`: one sample per process, stamped `now_us`, if that is newer
/// than `last_seen_us`; NOT_FOUND when there is no sample (nvml.h).
pub fn utilization_samples(
    device: &Device,
    now_us: u64,
    last_seen_us: u64,
) -> Result<Vec<ProcessUtilizationSample>, NvmlReturn> {
    let samples: Vec<ProcessUtilizationSample> = device
        .processes
        .iter()
        .filter(|_| now_us > last_seen_us)
        .map(|process| ProcessUtilizationSample {
            pid: process.pid,
            time_stamp: now_us,
            sm_util: process.sm_util,
            mem_util: process.memory_util,
            enc_util: process.encoder_util,
            dec_util: process.decoder_util,
        })
        .collect();
    if samples.is_empty() {
        return Err(abi::ERROR_NOT_FOUND);
    }
    Ok(samples)
}

/// `nvmlSystemGetProcessName`: the first GPU listing `pid` names it; NOT_FOUND otherwise.
pub fn process_name(devices: &[Device], pid: u32) -> Result<&str, NvmlReturn> {
    devices
        .iter()
        .flat_map(|device| device.processes.iter())
        .find(|process: &&Process| process.pid == pid)
        .map(|process| process.name.as_str())
        .ok_or(abi::ERROR_NOT_FOUND)
}

/// nvml.h's array protocol: `needed` entries fit in `asked`, or INSUFFICIENT_SIZE.
pub fn fits(needed: usize, asked: u32) -> Result<(), NvmlReturn> {
    if needed > asked as usize {
        return Err(abi::ERROR_INSUFFICIENT_SIZE);
    }
    Ok(())
}

// ---------------------------------------------------------------- codecs

/// Which video engine a utilization query asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// NVENC.
    Encoder,
    /// NVDEC.
    Decoder,
    /// NVJPG.
    Jpeg,
    /// Optical flow.
    Ofa,
}

/// (utilization percent, sampling period in µs) of one engine; NOT_SUPPORTED without `codecs`.
pub fn engine_utilization(device: &Device, engine: Engine) -> Result<(u32, u32), NvmlReturn> {
    let codecs = device.codecs.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let value = match engine {
        Engine::Encoder => codecs.encoder,
        Engine::Decoder => codecs.decoder,
        Engine::Jpeg => codecs.jpeg,
        Engine::Ofa => codecs.ofa,
    };
    Ok((value, codecs.sampling_period_us))
}

/// `nvmlDeviceGetEncoderCapacity` for `NVML_ENCODER_QUERY_H264` (0), `_HEVC` (1) or `_AV1` (2).
pub fn encoder_capacity(device: &Device, kind: u32) -> Result<u32, NvmlReturn> {
    if kind > 2 {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(device
        .codecs
        .ok_or(abi::ERROR_NOT_SUPPORTED)?
        .encoder_capacity)
}

/// The GPU's codec sessions (encoder or frame-buffer capture): none are modelled, so a GPU with
/// codecs has zero; NOT_SUPPORTED without codecs.
pub fn codec_sessions(device: &Device) -> Result<u32, NvmlReturn> {
    device.codecs.map(|_| 0).ok_or(abi::ERROR_NOT_SUPPORTED)
}

// ---------------------------------------------------------------- NVLink counters

/// `counter` of `nvmlDeviceGetNvLinkUtilizationCounter` and friends: 0 or 1.
fn check_counter(counter: u32) -> Result<(), NvmlReturn> {
    match counter {
        0 | 1 => Ok(()),
        _ => Err(abi::ERROR_INVALID_ARGUMENT),
    }
}

/// `rate` per second over `uptime_s` seconds, floored.
pub fn accrue(rate: u64, uptime_s: f64) -> u64 {
    if uptime_s <= 0.0 {
        return 0;
    }
    (rate as f64 * uptime_s).floor() as u64
}

/// The link checks, then NOT_SUPPORTED without `nvlink_counters`; a link that is down counts
/// nothing.
fn counting_link(
    device: &Device,
    link: u32,
) -> Result<Option<nvml_profile::NvLinkCounters>, NvmlReturn> {
    let active = topo::nvlink_active(device, link)?;
    let counters = device.nvlink_counters.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(active.then_some(counters))
}

/// `nvmlDeviceGetNvLinkUtilizationCounter`: (rx, tx), growing with uptime.
pub fn nvlink_traffic(
    device: &Device,
    link: u32,
    counter: u32,
    uptime_s: f64,
) -> Result<(u64, u64), NvmlReturn> {
    check_counter(counter)?;
    let value = counting_link(device, link)?
        .map_or(0, |counters| accrue(counters.traffic_per_second, uptime_s));
    Ok((value, value))
}

/// `nvmlDeviceGetNvLinkErrorCounter`: counters `NVML_NVLINK_ERROR_DL_REPLAY` (0) to
/// `_DL_ECC_DATA` (4) accrue the profile's error rate; the others are INVALID_ARGUMENT.
pub fn nvlink_errors(
    device: &Device,
    link: u32,
    counter: u32,
    uptime_s: f64,
) -> Result<u64, NvmlReturn> {
    if counter > 4 {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(counting_link(device, link)?
        .map_or(0, |counters| accrue(counters.errors_per_second, uptime_s)))
}

/// The checks of the freeze and reset calls (link, counter, NOT_SUPPORTED without counters).
pub fn nvlink_counter_control(
    device: &Device,
    link: u32,
    counter: Option<u32>,
) -> Result<(), NvmlReturn> {
    if let Some(counter) = counter {
        check_counter(counter)?;
    }
    counting_link(device, link).map(|_| ())
}

/// Which NVLink counter a reset or freeze applies to: a utilization counter set (0 or 1) or the
/// error counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterSet {
    /// `nvmlDeviceGetNvLinkUtilizationCounter`'s `counter`.
    Traffic(u32),
    /// Every `nvmlDeviceGetNvLinkErrorCounter` counter.
    Errors,
}

/// What resets and freezes did to one link's counter set: the raw value at the last reset, and
/// the raw value it froze at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Control {
    baseline: u64,
    frozen: Option<u64>,
}

/// Resets and freezes per (GPU, link, counter set): the raw counters are a function of uptime,
/// these record where a caller reset or froze them, for the life of the process (as the real
/// driver keeps them until reboot).
#[derive(Debug, Default)]
pub struct CounterControls {
    /// At most one entry per GPU, link and counter set ever touched (a few hundred): a linear
    /// scan, which links less code into the library than a `HashMap`.
    controls: Vec<((u32, u32, CounterSet), Control)>,
}

impl CounterControls {
    /// The value a caller sees for a raw counter value.
    pub fn seen(&self, key: (u32, u32, CounterSet), raw: u64) -> u64 {
        let control = self
            .controls
            .iter()
            .find(|(at, _)| *at == key)
            .map(|(_, control)| *control)
            .unwrap_or_default();
        control
            .frozen
            .unwrap_or(raw)
            .saturating_sub(control.baseline)
    }

    /// Counts from zero again (a frozen counter stays frozen, at zero).
    pub fn reset(&mut self, key: (u32, u32, CounterSet), raw: u64) {
        let control = self.entry(key);
        control.baseline = control.frozen.unwrap_or(raw);
    }

    /// The control of `key`, added as "never reset nor frozen" the first time.
    fn entry(&mut self, key: (u32, u32, CounterSet)) -> &mut Control {
        let position = match self.controls.iter().position(|(at, _)| *at == key) {
            Some(position) => position,
            None => {
                self.controls.push((key, Control::default()));
                self.controls.len() - 1
            }
        };
        &mut self.controls[position].1
    }

    /// Freezes the counter at its current value, or lets it run again.
    pub fn freeze(&mut self, key: (u32, u32, CounterSet), raw: u64, freeze: bool) {
        let control = self.entry(key);
        match (freeze, control.frozen) {
            (true, None) => control.frozen = Some(raw),
            // Thawed: what it missed while frozen is skipped, so it resumes where it stopped.
            (false, Some(at)) => {
                control.baseline += raw.saturating_sub(at);
                control.frozen = None;
            }
            _ => {}
        }
    }
}

/// The process's counter controls.
pub static COUNTER_CONTROLS: std::sync::Mutex<Option<CounterControls>> =
    std::sync::Mutex::new(None);

/// Runs `body` on the process's counter controls (a poisoned lock is recovered: the map is
/// always consistent between statements).
pub fn with_controls<T>(body: impl FnOnce(&mut CounterControls) -> T) -> T {
    let mut guard = COUNTER_CONTROLS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    body(guard.get_or_insert_with(CounterControls::default))
}

/// Seconds since boot (`/proc/uptime`), the counters' process-independent clock; 0 if unreadable.
pub fn uptime_s() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

// ---------------------------------------------------------------- C2C

/// `nvmlDeviceGetC2cModeInfoV`: NOT_SUPPORTED without `c2c`.
pub fn c2c(device: &Device) -> Result<C2cModeInfo, NvmlReturn> {
    let c2c = device.c2c.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(C2cModeInfo {
        is_c2c_enabled: u32::from(c2c.enabled),
    })
}

// ---------------------------------------------------------------- platform

/// `nvmlDeviceGetPlatformInfo`: v1 or v2 (the same layout), from the profile's `platform` and the
/// GPU's `module_id`; ARGUMENT_VERSION_MISMATCH for another version, NOT_SUPPORTED without
/// `platform`. The InfiniBand GUID is not modelled (zero, as NVML leaves unused bytes).
pub fn platform_info(device: &Device, version: u32) -> Result<cabi::PlatformInfo, NvmlReturn> {
    if version != cabi::PLATFORM_INFO_V1 && version != cabi::PLATFORM_INFO_V2 {
        return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    let platform = device.platform.as_ref().ok_or(abi::ERROR_NOT_SUPPORTED)?;
    let mut serial = [0u8; 16];
    let bytes = platform.chassis_serial.as_bytes();
    let length = bytes.len().min(serial.len() - 1);
    serial[..length].copy_from_slice(&bytes[..length]);
    Ok(cabi::PlatformInfo {
        version,
        ib_guid: [0; 16],
        chassis_serial_number: serial,
        slot_number: platform.slot_number,
        tray_index: platform.tray_index,
        host_id: platform.host_id,
        peer_type: match platform.peer_type {
            nvml_profile::PeerType::DirectConnected => 0,
            nvml_profile::PeerType::SwitchConnected => 1,
        },
        module_id: u8::try_from(device.module_id).map_err(|_| abi::ERROR_UNKNOWN)?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "activity_tests.rs"]
mod tests;
