//! What a GPU is doing and its identity beyond the basics (issue 22, "misc" area): PCIe traffic
//! counters and class codes, video engines (codecs), running processes, NVLink counter rates and
//! the Grace C2C link. Every section is optional: a profile without one answers the matching
//! NVML queries NOT_SUPPORTED, except `processes`, whose absence means "no process" (NVML lists
//! processes on every part).

use borsh::{BorshDeserialize, BorshSerialize};
use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};

/// `pcie_counters`: PCIe throughput (`nvmlDeviceGetPcieThroughput`) and the replay counter.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct PcieCounters {
    /// Transmitted KB/s over the last 20 ms.
    pub tx_kbps: u32,
    /// Received KB/s over the last 20 ms.
    pub rx_kbps: u32,
    /// `nvmlDeviceGetPcieReplayCounter`.
    pub replays: u32,
}

/// `pci_class`: the PCI class code (`nvmlDeviceGetPciInfoExt`); a data-centre GPU is a
/// "3D controller", base 0x03, sub 0x02.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct PciClass {
    /// 8-bit base class.
    pub base: u32,
    /// 8-bit sub class.
    pub sub: u32,
}

/// `codecs`: the video engines' utilization (percent) and the encoder's capacity.
/// Encoder and frame-buffer-capture sessions are not modelled: there are none, so their
/// statistics are zero.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Codecs {
    /// NVENC utilization, percent.
    pub encoder: u32,
    /// NVDEC utilization, percent.
    pub decoder: u32,
    /// NVJPG utilization, percent.
    pub jpeg: u32,
    /// Optical flow accelerator utilization, percent.
    pub ofa: u32,
    /// The sampling period the utilizations are reported over, in microseconds.
    pub sampling_period_us: u32,
    /// `nvmlDeviceGetEncoderCapacity`: percent of the encoder still free, for H.264, HEVC and AV1.
    pub encoder_capacity: u32,
}

/// Whether a process uses the GPU for compute or graphics.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    /// Listed by `nvmlDeviceGetComputeRunningProcesses`.
    Compute,
    /// Listed by `nvmlDeviceGetGraphicsRunningProcesses`.
    Graphics,
}

/// One entry of `processes`: a process running on the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// `nvmlSystemGetProcessName` (at most 63 bytes).
    pub name: String,
    /// Compute or graphics.
    pub kind: ProcessKind,
    /// GPU memory it uses, bytes.
    pub used_memory: u64,
    /// SM utilization, percent (`nvmlDeviceGetProcessUtilization`).
    #[serde(default)]
    pub sm_util: u32,
    /// Frame-buffer utilization, percent.
    #[serde(default)]
    pub memory_util: u32,
    /// Encoder utilization, percent.
    #[serde(default)]
    pub encoder_util: u32,
    /// Decoder utilization, percent.
    #[serde(default)]
    pub decoder_util: u32,
}

/// `nvlink_counters`: how fast each active link's counters grow, per second of uptime.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct NvLinkCounters {
    /// Utilization counter growth (both directions), units per second.
    pub traffic_per_second: u64,
    /// Error counter growth, errors per second (0: a healthy link).
    pub errors_per_second: u64,
}

/// `c2c`: the NVLink-C2C link to a Grace CPU (`nvmlDeviceGetC2cModeInfoV`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct C2c {
    /// Whether C2C is enabled.
    pub enabled: bool,
}

/// How a GPU reaches its NVLink peers (`nvmlPlatformInfo_t.peerType`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum PeerType {
    /// Directly, GPU to GPU (0).
    DirectConnected,
    /// Through NVSwitch trays (1).
    SwitchConnected,
}

/// `platform`: where the board sits in its rack (`nvmlDeviceGetPlatformInfo`); the GPU's
/// `module_id` is the platform's module id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// The chassis (rack) serial number, at most 15 bytes.
    pub chassis_serial: String,
    /// The physical slot in the chassis, switch trays included.
    pub slot_number: u8,
    /// The position among the compute trays.
    pub tray_index: u8,
    /// The OS domain within the tray.
    pub host_id: u8,
    /// How the GPU reaches its NVLink peers.
    pub peer_type: PeerType,
}

/// `nvmlPlatformInfo_t.chassisSerialNumber` holds 16 bytes, NUL included.
const CHASSIS_SERIAL_MAX: usize = 15;

/// NVML's process name buffer (`nvmlSystemGetProcessName` callers pass 64 at most).
const PROCESS_NAME_BUFFER: usize = 64;

/// Validates one GPU's resolved process list: names fit, percentages are percentages.
pub(crate) fn check_processes(field: &str, processes: &[Process]) -> Result<()> {
    for (n, process) in processes.iter().enumerate() {
        let at = format!("{field}[{n}]");
        if process.name.is_empty() || process.name.len() >= PROCESS_NAME_BUFFER {
            return invalid(
                format!("{at}.name"),
                format!("must be 1..={} bytes", PROCESS_NAME_BUFFER - 1),
            );
        }
        let utils = [
            ("sm_util", process.sm_util),
            ("memory_util", process.memory_util),
            ("encoder_util", process.encoder_util),
            ("decoder_util", process.decoder_util),
        ];
        if let Some((name, value)) = utils.iter().find(|(_, value)| *value > 100) {
            return invalid(format!("{at}.{name}"), format!("is {value}, at most 100"));
        }
    }
    Ok(())
}

/// Validates the platform's chassis serial length.
pub(crate) fn check_platform(field: &str, platform: &Platform) -> Result<()> {
    if platform.chassis_serial.len() > CHASSIS_SERIAL_MAX {
        return invalid(
            format!("{field}.chassis_serial"),
            format!(
                "is {} bytes, at most {CHASSIS_SERIAL_MAX}",
                platform.chassis_serial.len()
            ),
        );
    }
    Ok(())
}

/// Validates the codec percentages.
pub(crate) fn check_codecs(field: &str, codecs: &Codecs) -> Result<()> {
    let values = [
        ("encoder", codecs.encoder),
        ("decoder", codecs.decoder),
        ("jpeg", codecs.jpeg),
        ("ofa", codecs.ofa),
        ("encoder_capacity", codecs.encoder_capacity),
    ];
    match values.iter().find(|(_, value)| *value > 100) {
        Some((name, value)) => invalid(
            format!("{field}.{name}"),
            format!("is {value}, at most 100"),
        ),
        None => Ok(()),
    }
}

/// Validates the PCI class codes (8 bits each).
pub(crate) fn check_pci_class(field: &str, class: &PciClass) -> Result<()> {
    for (name, value) in [("base", class.base), ("sub", class.sub)] {
        if value > 0xff {
            return invalid(
                format!("{field}.{name}"),
                format!("{value:#x} is over 0xff"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn process(name: &str, sm_util: u32) -> Process {
        Process {
            pid: 7,
            name: name.to_owned(),
            kind: ProcessKind::Compute,
            used_memory: 1 << 30,
            sm_util,
            memory_util: 0,
            encoder_util: 0,
            decoder_util: 0,
        }
    }

    #[test]
    fn process_names_and_percentages_are_checked() {
        assert!(check_processes("p", &[process("python3", 100)]).is_ok());
        let error = check_processes("p", &[process("a", 0), process("", 0)]).unwrap_err();
        assert!(error.to_string().contains("p[1].name"), "{error}");
        let error = check_processes("p", &[process(&"x".repeat(64), 0)]).unwrap_err();
        assert!(error.to_string().contains("p[0].name"), "{error}");
        let error = check_processes("p", &[process("a", 101)]).unwrap_err();
        assert!(error.to_string().contains("p[0].sm_util"), "{error}");
    }

    #[test]
    fn shipped_profiles_resolve_the_sections() {
        let gb200 = crate::Profile::parse(crate::GB200).unwrap().devices();
        let h100 = crate::Profile::parse(crate::H100).unwrap().devices();
        assert_eq!(gb200[3].c2c, Some(C2c { enabled: true }));
        assert_eq!(h100[0].c2c, None);
        assert_eq!(gb200[0].pci_class, Some(PciClass { base: 3, sub: 2 }));
        assert_eq!(gb200[0].codecs.unwrap().encoder_capacity, 100);
        assert_eq!(
            h100[7].nvlink_counters.unwrap().traffic_per_second,
            1_328_100_000
        );
        assert!(gb200.iter().all(|device| device.processes.is_empty()));
    }

    /// Every shipped profile gives the sections upstream's config has a value for: C2C on the
    /// Grace parts only, NVLink counter rates where there is NVLink.
    #[test]
    fn every_shipped_profile_has_its_activity_sections() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../manifests/helm/nvml-mock/profiles"
        );
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|ext| ext != "yaml") {
                continue;
            }
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            let device = crate::Profile::parse(&text).unwrap().device(0).unwrap();
            assert!(
                device.pcie_counters.is_some() && device.codecs.is_some(),
                "{name}"
            );
            assert_eq!(
                device.pci_class,
                Some(PciClass { base: 3, sub: 2 }),
                "{name}"
            );
            assert!(device.processes.is_empty(), "{name}");
            let grace = name.starts_with("gb");
            assert_eq!(device.c2c, grace.then_some(C2c { enabled: true }), "{name}");
            assert_eq!(
                device.nvlink_counters.is_some(),
                device.nvlink.links > 0,
                "{name}"
            );
            assert!(
                device.platform.is_none(),
                "{name}: upstream's configs have none"
            );
            seen += 1;
        }
        assert!(seen >= 2);
    }

    #[test]
    fn a_device_entry_overrides_and_is_validated() {
        let mut doc: serde_yaml::Value = serde_yaml::from_str(crate::GB200).unwrap();
        doc["devices"][0]["processes"] =
            serde_yaml::from_str("[{pid: 42, name: trainer, kind: compute, used_memory: 1024}]")
                .unwrap();
        let text = serde_yaml::to_string(&doc).unwrap();
        let devices = crate::Profile::parse(&text).unwrap().devices();
        assert_eq!(devices[0].processes[0].name, "trainer");
        assert!(devices[1].processes.is_empty());
        let platform = text.replace(
            "\ndevices:\n",
            "\n  platform: {chassis_serial: \"1234567890123456\", slot_number: 1, tray_index: 1, host_id: 0, peer_type: direct_connected}\ndevices:\n",
        );
        let error = crate::Profile::parse(&platform).unwrap_err().to_string();
        assert!(
            error.contains("device_defaults.platform.chassis_serial"),
            "{error}"
        );
        let platform = platform.replace("1234567890123456", "123");
        let devices = crate::Profile::parse(&platform).unwrap().devices();
        assert_eq!(
            devices[2].platform.as_ref().unwrap().peer_type,
            PeerType::DirectConnected
        );
        let bad = text.replace("name: trainer", "name: \"\"");
        let error = crate::Profile::parse(&bad).unwrap_err().to_string();
        assert!(error.contains("devices[0].processes[0].name"), "{error}");
    }

    #[test]
    fn codec_percentages_and_class_codes_are_checked() {
        let mut codecs = Codecs {
            encoder: 0,
            decoder: 0,
            jpeg: 0,
            ofa: 0,
            sampling_period_us: 0,
            encoder_capacity: 100,
        };
        assert!(check_codecs("c", &codecs).is_ok());
        codecs.ofa = 101;
        let error = check_codecs("c", &codecs).unwrap_err();
        assert!(error.to_string().contains("c.ofa"), "{error}");
        assert!(check_pci_class("k", &PciClass { base: 3, sub: 2 }).is_ok());
        let error = check_pci_class(
            "k",
            &PciClass {
                base: 3,
                sub: 0x100,
            },
        )
        .unwrap_err();
        assert!(error.to_string().contains("k.sub"), "{error}");
    }
}
