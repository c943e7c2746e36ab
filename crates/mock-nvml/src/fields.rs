//! `nvmlDeviceGetFieldValues` (issue 22, misc area): each requested field id answered from the
//! same values as its dedicated getter, or, for an id the mock does not model, a per-entry
//! NOT_SUPPORTED inside the struct while the call itself succeeds (as NVIDIA's library does;
//! DCGM reads such entries as blank).

use std::time::Duration;

use nvml_profile::Device;

use crate::{
    abi::{self, NvmlReturn},
    activity,
    health::{self, ecc, PowerLimit},
    topo,
};

/// `nvmlValueType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// `NVML_VALUE_TYPE_UNSIGNED_INT` (1): `uiVal`.
    UnsignedInt,
    /// `NVML_VALUE_TYPE_UNSIGNED_LONG_LONG` (3): `ullVal`.
    UnsignedLongLong,
    /// `NVML_VALUE_TYPE_SIGNED_INT` (5): `siVal` (two's complement in the low 32 bits).
    SignedInt,
}

impl ValueType {
    /// The `nvmlValueType_t` code.
    pub fn code(self) -> u32 {
        match self {
            ValueType::UnsignedInt => 1,
            ValueType::UnsignedLongLong => 3,
            ValueType::SignedInt => 5,
        }
    }
}

/// The field ids answered (`NVML_FI_DEV_*`).
mod id {
    pub const ECC_CURRENT: u32 = 1;
    pub const ECC_PENDING: u32 = 2;
    /// 3..=6: corrected volatile, uncorrected volatile, corrected aggregate, uncorrected aggregate.
    pub const ECC_SBE_VOL_TOTAL: u32 = 3;
    pub const ECC_DBE_AGG_TOTAL: u32 = 6;
    /// 7..=28: the counts by location (see `ECC_BY_LOCATION`).
    pub const ECC_SBE_VOL_L1: u32 = 7;
    pub const ECC_DBE_AGG_CBU: u32 = 28;
    pub const RETIRED_SBE: u32 = 29;
    pub const RETIRED_DBE: u32 = 30;
    pub const RETIRED_PENDING: u32 = 31;
    pub const MEMORY_TEMP: u32 = 82;
    pub const TOTAL_ENERGY_CONSUMPTION: u32 = 83;
    pub const RETIRED_PENDING_SBE: u32 = 92;
    pub const RETIRED_PENDING_DBE: u32 = 93;
    pub const PCIE_REPLAY_ROLLOVER_COUNTER: u32 = 95;
    pub const REMAPPED_COR: u32 = 142;
    pub const REMAPPED_FAILURE: u32 = 145;
    pub const POWER_AVERAGE: u32 = 185;
    pub const POWER_MIN_LIMIT: u32 = 187;
    pub const POWER_MAX_LIMIT: u32 = 188;
    pub const POWER_DEFAULT_LIMIT: u32 = 189;
    pub const POWER_CURRENT_LIMIT: u32 = 190;
    pub const POWER_REQUESTED_LIMIT: u32 = 192;
    pub const TEMPERATURE_SHUTDOWN_TLIMIT: u32 = 193;
    pub const TEMPERATURE_GPU_MAX_TLIMIT: u32 = 196;
    pub const NVLINK_LINK_COUNT: u32 = 91;
    pub const PCIE_REPLAY_COUNTER: u32 = 94;
    pub const NVLINK_ERROR_DL_REPLAY: u32 = 161;
    pub const NVLINK_ERROR_DL_CRC: u32 = 163;
    pub const NVLINK_GET_STATE: u32 = 165;
    pub const NVLINK_GET_VERSION: u32 = 166;
    pub const POWER_INSTANT: u32 = 186;
}

/// `NVML_FI_DEV_ECC_*` 7..=28 in order: (uncorrected, aggregate, `nvmlMemoryLocation_t`); L1 0,
/// L2 1, device memory 2, register file 3, texture memory 4, CBU 6 (uncorrected only).
const ECC_BY_LOCATION: [(u32, u32, u32); 22] = [
    (0, 0, 0),
    (1, 0, 0),
    (0, 0, 1),
    (1, 0, 1),
    (0, 0, 2),
    (1, 0, 2),
    (0, 0, 3),
    (1, 0, 3),
    (0, 0, 4),
    (1, 0, 4),
    (1, 0, 6),
    (0, 1, 0),
    (1, 1, 0),
    (0, 1, 1),
    (1, 1, 1),
    (0, 1, 2),
    (1, 1, 2),
    (0, 1, 3),
    (1, 1, 3),
    (0, 1, 4),
    (1, 1, 4),
    (1, 1, 6),
];

/// One field's answer: its type and raw value, or the per-entry return code.
pub type Answer = Result<(ValueType, u64), NvmlReturn>;

/// The clocks the time-dependent fields read: seconds of uptime (the NVLink counters) and the time
/// since the energy counter's origin.
#[derive(Debug, Clone, Copy)]
pub struct Clocks {
    /// `/proc/uptime` seconds.
    pub uptime_s: f64,
    /// Since the energy counter's origin (`nvmlDeviceGetTotalEnergyConsumption`'s).
    pub energy: Duration,
}

/// Answers field `field` with scope `scope` (the link, for the per-link NVLink fields).
pub fn answer(device: &Device, field: u32, scope: u32, clocks: Clocks) -> Answer {
    match field {
        id::ECC_SBE_VOL_TOTAL..=id::TEMPERATURE_GPU_MAX_TLIMIT if is_health(field) => {
            health_field(device, field, scope, clocks.energy)
        }
        _ => activity_field(device, field, scope, clocks.uptime_s),
    }
}

/// The fields the profile's `health` block answers.
fn is_health(field: u32) -> bool {
    matches!(
        field,
        id::ECC_SBE_VOL_TOTAL..=id::RETIRED_PENDING
            | id::MEMORY_TEMP
            | id::TOTAL_ENERGY_CONSUMPTION
            | id::RETIRED_PENDING_SBE
            | id::RETIRED_PENDING_DBE
            | id::REMAPPED_COR..=id::REMAPPED_FAILURE
            | id::POWER_AVERAGE
            | id::POWER_MIN_LIMIT..=id::POWER_CURRENT_LIMIT
            | id::POWER_REQUESTED_LIMIT
            | id::TEMPERATURE_SHUTDOWN_TLIMIT..=id::TEMPERATURE_GPU_MAX_TLIMIT
    )
}

/// The ECC, retirement, energy, remapping, power and T.Limit fields, from the same answers as
/// their getters (`health.rs`, `health/ecc.rs`).
fn health_field(device: &Device, field: u32, scope: u32, energy: Duration) -> Answer {
    let uint = |value: u32| Ok((ValueType::UnsignedInt, u64::from(value)));
    let ull = |value: u64| Ok((ValueType::UnsignedLongLong, value));
    match field {
        id::ECC_SBE_VOL_TOTAL..=id::ECC_DBE_AGG_TOTAL => {
            let n = field - id::ECC_SBE_VOL_TOTAL;
            ull(ecc::total(device, n % 2, n / 2)?)
        }
        id::ECC_SBE_VOL_L1..=id::ECC_DBE_AGG_CBU => {
            let (error, counter, location) = ECC_BY_LOCATION[(field - id::ECC_SBE_VOL_L1) as usize];
            ull(ecc::memory_error_counter(device, error, counter, location)?)
        }
        id::RETIRED_SBE | id::RETIRED_DBE => {
            let cause = field - id::RETIRED_SBE;
            ull(ecc::retired_pages(device, cause)?.len() as u64)
        }
        id::RETIRED_PENDING | id::RETIRED_PENDING_SBE | id::RETIRED_PENDING_DBE => {
            uint(ecc::retired_pages_pending(device)?)
        }
        id::MEMORY_TEMP => uint(health::memory_temperature(device)?),
        id::TOTAL_ENERGY_CONSUMPTION => ull(health::total_energy(device, energy)?),
        id::REMAPPED_COR..=id::REMAPPED_FAILURE => {
            uint(ecc::remapped_rows(device)?[(field - id::REMAPPED_COR) as usize])
        }
        _ if scope != 0 => Err(abi::ERROR_NOT_SUPPORTED),
        id::POWER_AVERAGE => uint(device.power_usage_mw),
        id::POWER_MIN_LIMIT => uint(health::power_limit_constraints(device)?.0),
        id::POWER_MAX_LIMIT => uint(health::power_limit_constraints(device)?.1),
        id::POWER_DEFAULT_LIMIT => uint(health::power_limit(device, PowerLimit::Default)?),
        id::POWER_CURRENT_LIMIT | id::POWER_REQUESTED_LIMIT => {
            uint(health::power_limit(device, PowerLimit::Current)?)
        }
        _ => tlimit(device, field),
    }
}

/// NVML_FI_DEV_TEMPERATURE_*_TLIMIT (193 shutdown, 194 slowdown, 195 memory max, 196 GPU max): the
/// threshold in degrees below T.Limit, the slowdown threshold (so slowdown reads 0), as a signed
/// int; the memory maximum only where the profile gives one. Ada and later only, as the thermal
/// margin (`health::margin_temperature`).
fn tlimit(device: &Device, field: u32) -> Answer {
    health::margin_temperature(device)?;
    let kind = match field - id::TEMPERATURE_SHUTDOWN_TLIMIT {
        0 => 0,
        1 => 1,
        2 => 2,
        _ => 3,
    };
    let reference = i64::from(health::temperature_threshold(device, 1)?);
    let threshold = i64::from(health::temperature_threshold(device, kind)?);
    let offset = (reference - threshold) as i32;
    Ok((ValueType::SignedInt, u64::from(offset as u32)))
}

/// The PCIe, NVLink, ECC-mode and instant-power fields (`activity.rs`, `topo.rs`).
fn activity_field(device: &Device, field: u32, scope: u32, uptime_s: f64) -> Answer {
    let uint = |value: u32| Ok((ValueType::UnsignedInt, u64::from(value)));
    match field {
        id::ECC_CURRENT | id::ECC_PENDING => {
            let ecc = device.ecc.ok_or(abi::ERROR_NOT_SUPPORTED)?;
            let on = if field == id::ECC_CURRENT {
                ecc.current
            } else {
                ecc.pending
            };
            uint(u32::from(on))
        }
        id::NVLINK_LINK_COUNT if device.nvlink.links > 0 => uint(device.nvlink.links),
        id::PCIE_REPLAY_COUNTER => uint(activity::pcie_replays(device)?),
        id::PCIE_REPLAY_ROLLOVER_COUNTER => {
            activity::pcie_replays(device)?;
            uint(0)
        }
        // The DL error counters (replay 161, recovery 162, CRC flit 163) are counters 0, 1, 2 of
        // nvmlDeviceGetNvLinkErrorCounter.
        id::NVLINK_ERROR_DL_REPLAY..=id::NVLINK_ERROR_DL_CRC => {
            let counter = field - id::NVLINK_ERROR_DL_REPLAY;
            let value = activity::nvlink_errors(device, scope, counter, uptime_s)?;
            Ok((ValueType::UnsignedLongLong, value))
        }
        id::NVLINK_GET_STATE => uint(u32::from(topo::nvlink_active(device, scope)?)),
        id::NVLINK_GET_VERSION => uint(topo::nvlink_version(device, scope)?),
        id::POWER_INSTANT if scope == 0 => uint(device.power_usage_mw),
        _ => Err(abi::ERROR_NOT_SUPPORTED),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use nvml_profile::{Profile, GB200};

    use super::*;

    fn at(uptime_s: f64) -> Clocks {
        Clocks {
            uptime_s,
            energy: Duration::from_secs(2),
        }
    }

    #[test]
    fn modelled_fields_match_their_getters_and_the_rest_are_not_supported() {
        let gpu = Profile::parse(GB200).unwrap().devices().remove(0);
        let uint = |value| Ok((ValueType::UnsignedInt, value));
        assert_eq!(answer(&gpu, id::ECC_CURRENT, 0, at(1.0)), uint(1));
        assert_eq!(answer(&gpu, id::NVLINK_LINK_COUNT, 0, at(1.0)), uint(18));
        assert_eq!(answer(&gpu, id::PCIE_REPLAY_COUNTER, 0, at(1.0)), uint(0));
        assert_eq!(answer(&gpu, id::NVLINK_GET_STATE, 17, at(1.0)), uint(1));
        assert_eq!(
            answer(&gpu, id::NVLINK_GET_VERSION, 0, at(1.0)),
            uint(u64::from(topo::nvlink_version(&gpu, 0).unwrap()))
        );
        assert_eq!(answer(&gpu, id::POWER_INSTANT, 0, at(1.0)), uint(145_000));
        assert_eq!(
            answer(&gpu, id::POWER_INSTANT, 1, at(1.0)),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(
            answer(&gpu, id::NVLINK_ERROR_DL_CRC, 3, at(9.0)),
            Ok((ValueType::UnsignedLongLong, 0))
        );
        assert_eq!(
            answer(&gpu, id::NVLINK_GET_STATE, 18, at(1.0)),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
        assert_eq!(
            answer(&gpu, 83, 0, at(1.0)),
            Ok((
                ValueType::UnsignedLongLong,
                health::total_energy(&gpu, Duration::from_secs(2)).unwrap()
            )),
            "energy: the getter's answer at the same instant"
        );
        let mut no_ecc = gpu.clone();
        no_ecc.ecc = None;
        no_ecc.nvlink.links = 0;
        assert_eq!(
            answer(&no_ecc, id::ECC_PENDING, 0, at(1.0)),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(
            answer(&no_ecc, id::NVLINK_LINK_COUNT, 0, at(1.0)),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(ValueType::UnsignedLongLong.code(), 3);
    }

    #[test]
    fn health_fields_match_their_getters() {
        let gpu = Profile::parse(GB200).unwrap().devices().remove(0);
        let get = |field| answer(&gpu, field, 0, at(1.0));
        let ull = |value| Ok((ValueType::UnsignedLongLong, value));
        let uint = |value: u32| Ok((ValueType::UnsignedInt, u64::from(value)));
        for (n, field) in (id::ECC_SBE_VOL_TOTAL..=id::ECC_DBE_AGG_TOTAL).enumerate() {
            let n = n as u32;
            assert_eq!(
                get(field),
                ull(ecc::total(&gpu, n % 2, n / 2).unwrap()),
                "{field}"
            );
        }
        for (field, (error, counter, location)) in (7..=28).zip(ECC_BY_LOCATION) {
            let want = ecc::memory_error_counter(&gpu, error, counter, location).unwrap();
            assert_eq!(get(field), ull(want), "{field}");
        }
        assert_eq!(
            get(id::RETIRED_DBE),
            ull(ecc::retired_pages(&gpu, 1).unwrap().len() as u64)
        );
        assert_eq!(
            get(id::RETIRED_PENDING),
            uint(ecc::retired_pages_pending(&gpu).unwrap())
        );
        for (field, want) in
            (id::REMAPPED_COR..=id::REMAPPED_FAILURE).zip(ecc::remapped_rows(&gpu).unwrap())
        {
            assert_eq!(get(field), uint(want), "{field}");
        }
        let (min, max) = health::power_limit_constraints(&gpu).unwrap();
        assert_eq!(get(id::POWER_MIN_LIMIT), uint(min));
        assert_eq!(get(id::POWER_MAX_LIMIT), uint(max));
        let current = health::power_limit(&gpu, PowerLimit::Current).unwrap();
        assert_eq!(get(id::POWER_REQUESTED_LIMIT), uint(current));
        assert_eq!(
            answer(&gpu, id::POWER_CURRENT_LIMIT, 1, at(1.0)),
            Err(abi::ERROR_NOT_SUPPORTED),
            "power fields have device scope only"
        );
        let slowdown = health::temperature_threshold(&gpu, 1).unwrap();
        let shutdown = health::temperature_threshold(&gpu, 0).unwrap();
        let offset = (i64::from(slowdown) - i64::from(shutdown)) as i32;
        assert_eq!(
            get(id::TEMPERATURE_SHUTDOWN_TLIMIT),
            Ok((ValueType::SignedInt, u64::from(offset as u32)))
        );
        assert_eq!(
            get(194),
            Ok((ValueType::SignedInt, 0)),
            "slowdown is T.Limit itself"
        );
        let mut bare = gpu.clone();
        bare.health = Default::default();
        assert_eq!(
            answer(&bare, id::POWER_MIN_LIMIT, 0, at(1.0)),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
    }
}
