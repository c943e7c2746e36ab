//! `nvmlDeviceGetFieldValues` (issue 22, misc area): each requested field id answered from the
//! same values as its dedicated getter, or, for an id the mock does not model, a per-entry
//! NOT_SUPPORTED inside the struct while the call itself succeeds (as NVIDIA's library does;
//! DCGM reads such entries as blank).

use nvml_profile::Device;

use crate::{
    abi::{self, NvmlReturn},
    activity, topo,
};

/// `nvmlValueType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// `NVML_VALUE_TYPE_UNSIGNED_INT` (1): `uiVal`.
    UnsignedInt,
    /// `NVML_VALUE_TYPE_UNSIGNED_LONG_LONG` (3): `ullVal`.
    UnsignedLongLong,
}

impl ValueType {
    /// The `nvmlValueType_t` code.
    pub fn code(self) -> u32 {
        match self {
            ValueType::UnsignedInt => 1,
            ValueType::UnsignedLongLong => 3,
        }
    }
}

/// The field ids answered (`NVML_FI_DEV_*`).
mod id {
    pub const ECC_CURRENT: u32 = 1;
    pub const ECC_PENDING: u32 = 2;
    pub const NVLINK_LINK_COUNT: u32 = 91;
    pub const PCIE_REPLAY_COUNTER: u32 = 94;
    pub const NVLINK_ERROR_DL_REPLAY: u32 = 161;
    pub const NVLINK_ERROR_DL_CRC: u32 = 163;
    pub const NVLINK_GET_STATE: u32 = 165;
    pub const NVLINK_GET_VERSION: u32 = 166;
    pub const POWER_INSTANT: u32 = 186;
}

/// One field's answer: its type and raw value, or the per-entry return code.
pub type Answer = Result<(ValueType, u64), NvmlReturn>;

/// Answers field `field` with scope `scope` (the link, for the per-link NVLink fields).
pub fn answer(device: &Device, field: u32, scope: u32, uptime_s: f64) -> Answer {
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

    #[test]
    fn modelled_fields_match_their_getters_and_the_rest_are_not_supported() {
        let gpu = Profile::parse(GB200).unwrap().devices().remove(0);
        let uint = |value| Ok((ValueType::UnsignedInt, value));
        assert_eq!(answer(&gpu, id::ECC_CURRENT, 0, 1.0), uint(1));
        assert_eq!(answer(&gpu, id::NVLINK_LINK_COUNT, 0, 1.0), uint(18));
        assert_eq!(answer(&gpu, id::PCIE_REPLAY_COUNTER, 0, 1.0), uint(0));
        assert_eq!(answer(&gpu, id::NVLINK_GET_STATE, 17, 1.0), uint(1));
        assert_eq!(
            answer(&gpu, id::NVLINK_GET_VERSION, 0, 1.0),
            uint(u64::from(topo::nvlink_version(&gpu, 0).unwrap()))
        );
        assert_eq!(answer(&gpu, id::POWER_INSTANT, 0, 1.0), uint(145_000));
        assert_eq!(
            answer(&gpu, id::POWER_INSTANT, 1, 1.0),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(
            answer(&gpu, id::NVLINK_ERROR_DL_CRC, 3, 9.0),
            Ok((ValueType::UnsignedLongLong, 0))
        );
        assert_eq!(
            answer(&gpu, id::NVLINK_GET_STATE, 18, 1.0),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
        assert_eq!(
            answer(&gpu, 83, 0, 1.0),
            Err(abi::ERROR_NOT_SUPPORTED),
            "energy: not modelled here"
        );
        let mut no_ecc = gpu.clone();
        no_ecc.ecc = None;
        no_ecc.nvlink.links = 0;
        assert_eq!(
            answer(&no_ecc, id::ECC_PENDING, 0, 1.0),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(
            answer(&no_ecc, id::NVLINK_LINK_COUNT, 0, 1.0),
            Err(abi::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(ValueType::UnsignedLongLong.code(), 3);
    }
}
