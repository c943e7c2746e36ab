//! The NVML mode enums `-q` prints beyond the identity: addressing mode and compute mode, as
//! enums from their C values with nvidia-smi's names.

/// `nvmlDeviceAddressingModeType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressingMode {
    /// `NVML_DEVICE_ADDRESSING_MODE_NONE`.
    None,
    /// `NVML_DEVICE_ADDRESSING_MODE_HMM`.
    Hmm,
    /// `NVML_DEVICE_ADDRESSING_MODE_ATS`.
    Ats,
    /// A value nvml.h does not define.
    Other(u32),
}

impl AddressingMode {
    /// From the C value.
    pub fn from_raw(raw: u32) -> AddressingMode {
        match raw {
            0 => AddressingMode::None,
            1 => AddressingMode::Hmm,
            2 => AddressingMode::Ats,
            other => AddressingMode::Other(other),
        }
    }

    /// As printed.
    pub fn text(&self) -> String {
        match self {
            AddressingMode::None => "None".to_owned(),
            AddressingMode::Hmm => "HMM".to_owned(),
            AddressingMode::Ats => "ATS".to_owned(),
            AddressingMode::Other(raw) => format!("Unknown ({raw})"),
        }
    }
}

/// `nvmlComputeMode_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeMode {
    /// `NVML_COMPUTEMODE_DEFAULT`.
    Default,
    /// `NVML_COMPUTEMODE_EXCLUSIVE_THREAD` (support removed).
    ExclusiveThread,
    /// `NVML_COMPUTEMODE_PROHIBITED`.
    Prohibited,
    /// `NVML_COMPUTEMODE_EXCLUSIVE_PROCESS`.
    ExclusiveProcess,
    /// A value nvml.h does not define.
    Other(u32),
}

impl ComputeMode {
    /// From the C value.
    pub fn from_raw(raw: u32) -> ComputeMode {
        match raw {
            0 => ComputeMode::Default,
            1 => ComputeMode::ExclusiveThread,
            2 => ComputeMode::Prohibited,
            3 => ComputeMode::ExclusiveProcess,
            other => ComputeMode::Other(other),
        }
    }

    /// As printed.
    pub fn text(&self) -> String {
        match self {
            ComputeMode::Default => "Default".to_owned(),
            ComputeMode::ExclusiveThread => "Exclusive_Thread".to_owned(),
            ComputeMode::Prohibited => "Prohibited".to_owned(),
            ComputeMode::ExclusiveProcess => "Exclusive_Process".to_owned(),
            ComputeMode::Other(raw) => format!("Unknown ({raw})"),
        }
    }
}

/// Current and pending state of a mode (MIG, ECC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// In effect now.
    pub current: bool,
    /// After the next reset.
    pub pending: bool,
}

impl Pending {
    /// From `nvmlEnableState_t` values (1 enabled).
    pub fn from_raw((current, pending): (u32, u32)) -> Pending {
        Pending {
            current: current == 1,
            pending: pending == 1,
        }
    }
}

/// Milliwatts as nvidia-smi prints power: watts with two decimals.
pub fn watts(milliwatts: &u32) -> String {
    format!("{}.{:02} W", milliwatts / 1000, (milliwatts % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_print_nvidia_smi_names() {
        assert_eq!(AddressingMode::from_raw(2).text(), "ATS");
        assert_eq!(AddressingMode::from_raw(1).text(), "HMM");
        assert_eq!(AddressingMode::from_raw(0).text(), "None");
        assert_eq!(AddressingMode::from_raw(7).text(), "Unknown (7)");
        assert_eq!(ComputeMode::from_raw(0).text(), "Default");
        assert_eq!(ComputeMode::from_raw(3).text(), "Exclusive_Process");
        assert_eq!(
            Pending::from_raw((1, 0)),
            Pending {
                current: true,
                pending: false
            }
        );
    }

    #[test]
    fn power_is_watts_with_two_decimals() {
        assert_eq!(watts(&145_000), "145.00 W");
        assert_eq!(watts(&68_925), "68.92 W");
        assert_eq!(watts(&5), "0.00 W");
    }
}
