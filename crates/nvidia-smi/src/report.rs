//! What `nvidia-smi -q` reports, as plain data: filled from NVML by `collect.rs`, printed by
//! `text.rs` (`-q`) and `xml.rs` (`-q -x`). Nothing here calls the library, so the renderers are
//! tested on hand-built reports.
//!
//! Every reading is a [`Reading`]: a value, `N/A` (the library answered NOT_SUPPORTED, or does
//! not export the function) or the library's error string for any other failure, as
//! nvidia-smi prints them.

use crate::modes::{AddressingMode, ComputeMode, Pending};

/// One value as nvidia-smi prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading<T> {
    /// The library answered.
    Value(T),
    /// NOT_SUPPORTED (or the entry point is missing): printed `N/A`.
    NotAvailable,
    /// Any other failure: printed as the library's error string (`Unknown Error`, …).
    Failed(String),
}

impl<T> Reading<T> {
    /// The reading's text: `show` of the value, `N/A`, or the error string.
    pub fn show(&self, show: impl FnOnce(&T) -> String) -> String {
        match self {
            Reading::Value(value) => show(value),
            Reading::NotAvailable => NOT_AVAILABLE.to_owned(),
            Reading::Failed(message) => message.clone(),
        }
    }

    /// The value, if there is one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(value) => Some(value),
            _ => None,
        }
    }
}

impl Reading<String> {
    /// The text itself, `N/A`, or the error string.
    pub fn text(&self) -> String {
        self.show(Clone::clone)
    }
}

/// What nvidia-smi prints for a value the GPU does not support.
pub const NOT_AVAILABLE: &str = "N/A";

/// The whole `-q` document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// When the report was taken, already formatted (`Fri Aug 21 11:01:42 2026`).
    pub timestamp: String,
    /// `nvmlSystemGetDriverVersion`.
    pub driver_version: Reading<String>,
    /// `nvmlSystemGetCudaDriverVersion` (`major * 1000 + minor * 10`).
    pub cuda_version: Reading<i32>,
    /// `nvmlDeviceGetCount`: every GPU, also when `-i` selects one.
    pub attached_gpus: u32,
    /// The GPUs reported, in index order.
    pub gpus: Vec<Gpu>,
}

/// `CUDA Version`: `13000` is `13.0`.
pub fn cuda_text(version: &i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// One GPU's section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// `nvmlDeviceGetName`.
    pub product_name: Reading<String>,
    /// `nvmlDeviceGetBrand`.
    pub brand: Reading<Brand>,
    /// `nvmlDeviceGetArchitecture`.
    pub architecture: Reading<Architecture>,
    /// `nvmlDeviceGetPersistenceMode`.
    pub persistence_mode: Reading<bool>,
    /// `nvmlDeviceGetSerial`.
    pub serial: Reading<String>,
    /// `nvmlDeviceGetUUID`.
    pub uuid: Reading<String>,
    /// `nvmlDeviceGetMinorNumber`.
    pub minor_number: Reading<u32>,
    /// `nvmlDeviceGetBoardId`.
    pub board_id: Reading<u32>,
    /// `nvmlDeviceGetPciInfo_v3`; its bus id names the GPU (`GPU 00000000:01:00.0`).
    pub pci: Reading<Pci>,
    /// `nvmlDeviceGetMemoryInfo_v2` (v1 when v2 is refused: no reserved figure).
    pub memory: Reading<Memory>,
    /// `nvmlDeviceGetGpuFabricInfoV` (v3, else v2, else `nvmlDeviceGetGpuFabricInfo`).
    pub fabric: Reading<Fabric>,
    /// `nvmlDeviceGetAddressingMode`.
    pub addressing_mode: Reading<AddressingMode>,
    /// `nvmlDeviceGetMigMode`.
    pub mig_mode: Reading<Pending>,
    /// PCIe link: maximum and current generation, maximum and current width.
    pub link: [Reading<u32>; 4],
    /// `nvmlDeviceGetComputeMode`.
    pub compute_mode: Reading<ComputeMode>,
    /// `nvmlDeviceGetUtilizationRates`: GPU and memory, percent.
    pub utilization: Reading<(u32, u32)>,
    /// `nvmlDeviceGetEccMode`.
    pub ecc_mode: Reading<Pending>,
    /// `nvmlDeviceGetTemperature` (GPU sensor), °C.
    pub temperature: Reading<u32>,
    /// `nvmlDeviceGetPowerUsage`, milliwatts.
    pub power_mw: Reading<u32>,
    /// `nvmlDeviceGetClockInfo`: graphics, SM, memory, video, MHz.
    pub clocks: [Reading<u32>; 4],
    /// `nvmlDeviceGetMaxClockInfo`: graphics, SM, memory, video, MHz.
    pub max_clocks: [Reading<u32>; 4],
}

impl Gpu {
    /// The GPU's name in the report: its PCI bus id, or `N/A` without one.
    pub fn id(&self) -> String {
        self.pci.show(|pci| pci.bus_id.clone())
    }
}

/// The PCI block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pci {
    /// Bus number.
    pub bus: u32,
    /// Device number.
    pub device: u32,
    /// Domain.
    pub domain: u32,
    /// Device and vendor id (`0x294110DE`).
    pub device_id: u32,
    /// `00000000:01:00.0`.
    pub bus_id: String,
    /// Subsystem device and vendor id.
    pub sub_system_id: u32,
}

/// Framebuffer memory, in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    /// Total installed.
    pub total: u64,
    /// Reserved by the driver (`None` from the v1 query, which has no such field).
    pub reserved: Option<u64>,
    /// Used.
    pub used: u64,
    /// Free.
    pub free: u64,
}

/// Bytes as nvidia-smi prints memory: whole MiB, rounded to the nearest (NVIDIA's captures
/// print reserved + free one MiB above total, which rounding down never does).
pub fn mib(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    format!("{} MiB", bytes / MIB + u64::from(bytes % MIB >= MIB / 2))
}

/// The fabric block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fabric {
    /// Probe state.
    pub state: FabricState,
    /// The probe's result (nvml.h: meaningful only once the state is Completed): the library's
    /// error string for the code, `Success` for 0.
    pub status: Reading<String>,
    /// Clique id.
    pub clique_id: u32,
    /// Cluster uuid bytes.
    pub cluster_uuid: [u8; 16],
    /// `healthMask` (v2 and v3), `None` from the v1 query.
    pub health_mask: Option<u32>,
    /// `healthSummary` (v3), `None` from v2 and v1.
    pub health_summary: Option<HealthSummary>,
}

/// The cluster uuid as nvidia-smi prints it (`00000000-0000-0000-0000-0000000000ab`).
pub fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// `nvmlGpuFabricState_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FabricState {
    /// `NVML_GPU_FABRIC_STATE_NOT_SUPPORTED`.
    NotSupported,
    /// `NVML_GPU_FABRIC_STATE_NOT_STARTED`.
    NotStarted,
    /// `NVML_GPU_FABRIC_STATE_IN_PROGRESS`.
    InProgress,
    /// `NVML_GPU_FABRIC_STATE_COMPLETED`.
    Completed,
    /// Any value nvml.h does not define.
    Other(u8),
}

impl FabricState {
    /// From the C value.
    pub fn from_raw(raw: u8) -> FabricState {
        match raw {
            0 => FabricState::NotSupported,
            1 => FabricState::NotStarted,
            2 => FabricState::InProgress,
            3 => FabricState::Completed,
            other => FabricState::Other(other),
        }
    }

    /// As printed.
    pub fn text(self) -> String {
        match self {
            FabricState::NotSupported => "Not Supported".to_owned(),
            FabricState::NotStarted => "Not Started".to_owned(),
            FabricState::InProgress => "In Progress".to_owned(),
            FabricState::Completed => "Completed".to_owned(),
            FabricState::Other(raw) => format!("Unknown ({raw})"),
        }
    }
}

/// `NVML_GPU_FABRIC_HEALTH_SUMMARY_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthSummary {
    /// `_NOT_SUPPORTED`.
    NotSupported,
    /// `_HEALTHY`.
    Healthy,
    /// `_UNHEALTHY`.
    Unhealthy,
    /// `_LIMITED_CAPACITY`.
    LimitedCapacity,
    /// Any value nvml.h does not define.
    Other(u8),
}

impl HealthSummary {
    /// From the C value.
    pub fn from_raw(raw: u8) -> HealthSummary {
        match raw {
            0 => HealthSummary::NotSupported,
            1 => HealthSummary::Healthy,
            2 => HealthSummary::Unhealthy,
            3 => HealthSummary::LimitedCapacity,
            other => HealthSummary::Other(other),
        }
    }

    /// As printed.
    pub fn text(self) -> String {
        match self {
            HealthSummary::NotSupported => NOT_AVAILABLE.to_owned(),
            HealthSummary::Healthy => "Healthy".to_owned(),
            HealthSummary::Unhealthy => "Unhealthy".to_owned(),
            HealthSummary::LimitedCapacity => "Limited Capacity".to_owned(),
            HealthSummary::Other(raw) => format!("Unknown ({raw})"),
        }
    }
}

/// One field of the fabric health mask (`NVML_GPU_FABRIC_HEALTH_MASK_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthField {
    /// `_DEGRADED_BW` (printed `Bandwidth`: `Full` or `Degraded`).
    Bandwidth,
    /// `_ROUTE_RECOVERY`.
    RouteRecovery,
    /// `_ROUTE_UNHEALTHY`.
    RouteUnhealthy,
    /// `_ACCESS_TIMEOUT_RECOVERY`.
    AccessTimeoutRecovery,
    /// `_INCORRECT_CONFIGURATION`.
    IncorrectConfiguration,
}

impl HealthField {
    /// Every field, in nvidia-smi's order.
    pub const ALL: [HealthField; 5] = [
        HealthField::Bandwidth,
        HealthField::RouteRecovery,
        HealthField::RouteUnhealthy,
        HealthField::AccessTimeoutRecovery,
        HealthField::IncorrectConfiguration,
    ];

    /// `(shift, width)` from nvml.h.
    fn bits(self) -> (u32, u32) {
        match self {
            HealthField::Bandwidth => (0, 0x3),
            HealthField::RouteRecovery => (2, 0x3),
            HealthField::RouteUnhealthy => (4, 0x3),
            HealthField::AccessTimeoutRecovery => (6, 0x3),
            HealthField::IncorrectConfiguration => (8, 0xf),
        }
    }

    /// The field's value in `mask`, as printed (`N/A` for 0, NOT_SUPPORTED, or no mask).
    pub fn text(self, mask: Option<u32>) -> String {
        let Some(mask) = mask else {
            return NOT_AVAILABLE.to_owned();
        };
        let (shift, width) = self.bits();
        let value = (mask >> shift) & width;
        let text = match (self, value) {
            (_, 0) => NOT_AVAILABLE,
            (HealthField::Bandwidth, 1) => "Degraded",
            (HealthField::Bandwidth, 2) => "Full",
            (HealthField::IncorrectConfiguration, 1) => "None",
            (HealthField::IncorrectConfiguration, 2) => "Incorrect SysGUID",
            (HealthField::IncorrectConfiguration, 3) => "Incorrect Chassis Serial Number",
            (HealthField::IncorrectConfiguration, 4) => "No Partition",
            (HealthField::IncorrectConfiguration, 5) => "Insufficient NVLinks",
            (HealthField::IncorrectConfiguration, _) => return format!("Unknown ({value})"),
            (_, 1) => "True",
            (_, 2) => "False",
            (_, _) => return format!("Unknown ({value})"),
        };
        text.to_owned()
    }
}

/// `nvmlBrandType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Brand {
    /// A value and the name nvidia-smi prints for it.
    Known(u32, &'static str),
    /// A value nvml.h does not define.
    Unknown(u32),
}

/// `NVML_BRAND_*` values and their printed names.
const BRANDS: [(u32, &str); 17] = [
    (0, "Unknown"),
    (1, "Quadro"),
    (2, "Tesla"),
    (3, "NVS"),
    (4, "Grid"),
    (5, "GeForce"),
    (6, "Titan"),
    (7, "NVIDIA Virtual Applications"),
    (8, "NVIDIA Virtual PC"),
    (9, "NVIDIA Virtual Compute Server"),
    (10, "NVIDIA RTX Virtual Workstation"),
    (11, "NVIDIA Cloud Gaming"),
    (12, "Quadro RTX"),
    (13, "NVIDIA RTX"),
    (14, "NVIDIA"),
    (15, "GeForce RTX"),
    (16, "Titan RTX"),
];

impl Brand {
    /// From the C value.
    pub fn from_raw(raw: u32) -> Brand {
        BRANDS
            .iter()
            .find(|(value, _)| *value == raw)
            .map_or(Brand::Unknown(raw), |(value, name)| {
                Brand::Known(*value, name)
            })
    }

    /// As printed.
    pub fn text(&self) -> String {
        match self {
            Brand::Known(_, name) => (*name).to_owned(),
            Brand::Unknown(raw) => format!("Unknown ({raw})"),
        }
    }
}

/// `nvmlDeviceArchitecture_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// A value and the name nvidia-smi prints for it.
    Known(u32, &'static str),
    /// `NVML_DEVICE_ARCH_UNKNOWN` or a value nvml.h does not define.
    Unknown(u32),
}

/// `NVML_DEVICE_ARCH_*` values and their printed names (13: the mock's Rubin).
const ARCHITECTURES: [(u32, &str); 10] = [
    (2, "Kepler"),
    (3, "Maxwell"),
    (4, "Pascal"),
    (5, "Volta"),
    (6, "Turing"),
    (7, "Ampere"),
    (8, "Ada Lovelace"),
    (9, "Hopper"),
    (10, "Blackwell"),
    (13, "Rubin"),
];

impl Architecture {
    /// From the C value.
    pub fn from_raw(raw: u32) -> Architecture {
        ARCHITECTURES
            .iter()
            .find(|(value, _)| *value == raw)
            .map_or(Architecture::Unknown(raw), |(value, name)| {
                Architecture::Known(*value, name)
            })
    }

    /// As printed.
    pub fn text(&self) -> String {
        match self {
            Architecture::Known(_, name) => (*name).to_owned(),
            Architecture::Unknown(_) => "Unknown".to_owned(),
        }
    }
}

/// `Enabled` / `Disabled`.
pub fn enabled_text(enabled: &bool) -> String {
    if *enabled { "Enabled" } else { "Disabled" }.to_owned()
}

/// `0x1b00`-style hex for ids nvidia-smi prints in lower case (the board id).
pub fn lower_hex(value: &u32) -> String {
    format!("{value:#x}")
}

/// A GB200-like GPU for the renderers' tests.
#[cfg(test)]
pub fn sample_gpu() -> Gpu {
    let mut cluster_uuid = [0u8; 16];
    cluster_uuid[15] = 0xab;
    Gpu {
        product_name: Reading::Value("NVIDIA GB200".to_owned()),
        brand: Reading::Value(Brand::from_raw(14)),
        architecture: Reading::Value(Architecture::from_raw(10)),
        persistence_mode: Reading::Value(true),
        serial: Reading::Value("1652824010233".to_owned()),
        uuid: Reading::Value("GPU-2e97b6a4-1f3c-4d58-8b0e-a5c7d9e1f024".to_owned()),
        minor_number: Reading::Value(2),
        board_id: Reading::Value(0x1b00),
        pci: Reading::Value(Pci {
            bus: 0x41,
            device: 0,
            domain: 0,
            device_id: 0x2941_10DE,
            bus_id: "00000000:41:00.0".to_owned(),
            sub_system_id: 0x20D5_10DE,
        }),
        memory: Reading::Value(Memory {
            total: 198_674_513_920,
            reserved: Some(536_870_912),
            used: 0,
            free: 198_674_513_920 - 536_870_912,
        }),
        fabric: Reading::Value(Fabric {
            state: FabricState::Completed,
            status: Reading::Value("Success".to_owned()),
            clique_id: 7,
            cluster_uuid,
            // Full bandwidth, no recovery, healthy routes, no timeout, correct configuration.
            health_mask: Some(2 | (2 << 2) | (2 << 4) | (2 << 6) | (1 << 8)),
            health_summary: Some(HealthSummary::Healthy),
        }),
        addressing_mode: Reading::Value(AddressingMode::Ats),
        mig_mode: Reading::Value(Pending::from_raw((0, 0))),
        link: [6, 6, 16, 16].map(Reading::Value),
        compute_mode: Reading::Value(ComputeMode::Default),
        utilization: Reading::Value((3, 1)),
        ecc_mode: Reading::Value(Pending::from_raw((1, 1))),
        temperature: Reading::Value(36),
        power_mw: Reading::Value(145_000),
        clocks: [345, 345, 3996, 1200].map(Reading::Value),
        max_clocks: [2062, 2062, 3996, 1980].map(Reading::Value),
    }
}

/// A two-GPU report around [`sample_gpu`].
#[cfg(test)]
pub fn sample_report() -> Report {
    let mut second = sample_gpu();
    second.fabric = Reading::NotAvailable;
    second.serial = Reading::Value("<&\"'>".to_owned());
    Report {
        timestamp: "Fri Dec  4 15:12:01 2026".to_owned(),
        driver_version: Reading::Value("580.65.06".to_owned()),
        cuda_version: Reading::Value(13000),
        attached_gpus: 4,
        gpus: vec![sample_gpu(), second],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_print_value_na_or_the_error() {
        assert_eq!(Reading::Value("x".to_owned()).text(), "x");
        assert_eq!(Reading::<String>::NotAvailable.text(), "N/A");
        assert_eq!(
            Reading::<String>::Failed("Unknown Error".to_owned()).text(),
            "Unknown Error"
        );
        assert_eq!(Reading::Value(13000).show(cuda_text), "13.0");
        assert_eq!(cuda_text(&12040), "12.4");
    }

    #[test]
    fn memory_is_whole_mib_rounded_to_the_nearest() {
        assert_eq!(mib(198_674_513_920), "189471 MiB");
        assert_eq!(mib(536_870_912), "512 MiB");
        assert_eq!(mib(1024 * 1024 - 1), "1 MiB");
        assert_eq!(mib(512 * 1024 - 1), "0 MiB");
        assert_eq!(mib(u64::MAX), "17592186044416 MiB");
    }

    #[test]
    fn cluster_uuids_print_as_8_4_4_4_12_lower_hex() {
        let mut bytes = [0u8; 16];
        bytes[15] = 0xab;
        bytes[0] = 0x5A;
        assert_eq!(uuid_text(&bytes), "5a000000-0000-0000-0000-0000000000ab");
    }

    #[test]
    fn enums_print_nvidia_smi_names() {
        assert_eq!(Brand::from_raw(14).text(), "NVIDIA");
        assert_eq!(Brand::from_raw(2).text(), "Tesla");
        assert_eq!(Brand::from_raw(99).text(), "Unknown (99)");
        assert_eq!(Architecture::from_raw(10).text(), "Blackwell");
        assert_eq!(Architecture::from_raw(8).text(), "Ada Lovelace");
        assert_eq!(Architecture::from_raw(0xffff_ffff).text(), "Unknown");
        assert_eq!(FabricState::from_raw(3).text(), "Completed");
        assert_eq!(FabricState::from_raw(1).text(), "Not Started");
        assert_eq!(FabricState::from_raw(9), FabricState::Other(9));
        assert_eq!(HealthSummary::from_raw(1).text(), "Healthy");
        assert_eq!(HealthSummary::from_raw(0).text(), "N/A");
    }

    #[test]
    fn health_fields_decode_nvml_h_bit_fields() {
        // Bandwidth full (2), recovery false (2 << 2), unhealthy true (1 << 4), timeout false
        // (2 << 6), configuration none (1 << 8).
        let mask = 2 | (2 << 2) | (1 << 4) | (2 << 6) | (1 << 8);
        let texts: Vec<String> = HealthField::ALL
            .iter()
            .map(|field| field.text(Some(mask)))
            .collect();
        assert_eq!(texts, ["Full", "False", "True", "False", "None"]);
        assert_eq!(HealthField::Bandwidth.text(Some(1)), "Degraded");
        assert_eq!(HealthField::RouteRecovery.text(Some(0)), "N/A");
        assert_eq!(HealthField::IncorrectConfiguration.text(None), "N/A");
        assert_eq!(
            HealthField::IncorrectConfiguration.text(Some(4 << 8)),
            "No Partition"
        );
    }
}
