//! What check-fabric found and how it prints it: upstream's text format
//! (upstream-demo.md §5), the `--json` document and the exit code. Pure.

use std::fmt::Write;

use serde::Serialize;

pub use nvml_dl::Return;

/// A GPU's fabric identity as NVML reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricInfo {
    /// `clusterUuid`, 16 bytes.
    pub cluster_uuid: [u8; 16],
    /// `cliqueId`.
    pub clique_id: u32,
    /// `state` (`NVML_GPU_FABRIC_STATE_*`).
    pub state: u8,
}

/// What the fabric query said for one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fabric {
    /// The query succeeded.
    Info(FabricInfo),
    /// The query returned `NVML_ERROR_NOT_SUPPORTED`.
    NotSupported,
}

/// One GPU's line(s) of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// The NVML index.
    pub index: u32,
    /// `nvmlDeviceGetUUID`, empty when that failed (as upstream).
    pub uuid: String,
    /// The fabric identity.
    pub fabric: Fabric,
}

/// Everything one run found, up to the first hard failure.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Run {
    /// `nvmlSystemGetDriverVersion`, when it succeeded.
    pub driver_version: Option<String>,
    /// `NODE_NAME`, when set.
    pub node_name: Option<String>,
    /// The device count, once known.
    pub count: Option<u32>,
    /// The GPUs queried so far.
    pub gpus: Vec<Gpu>,
    /// The stderr line of the failure that stopped the run (exit 1).
    pub failure: Option<String>,
}

impl Run {
    /// 1 after a failure, else 2 when a GPU's fabric is not supported, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.failure.is_some() {
            return 1;
        }
        if self
            .gpus
            .iter()
            .any(|gpu| gpu.fabric == Fabric::NotSupported)
        {
            return 2;
        }
        0
    }

    /// Upstream's text format (everything printed before the failure).
    pub fn text(&self) -> String {
        let mut out = String::new();
        let Some(count) = self.count else {
            return out;
        };
        let _ = writeln!(out, "Discovered {count} GPU(s)");
        for gpu in &self.gpus {
            match gpu.fabric {
                Fabric::NotSupported => {
                    let _ = writeln!(
                        out,
                        "GPU {} ({}): fabric NOT SUPPORTED",
                        gpu.index, gpu.uuid
                    );
                }
                Fabric::Info(info) => {
                    let _ = writeln!(out, "GPU {} ({})", gpu.index, gpu.uuid);
                    let _ = writeln!(
                        out,
                        "  {:<12}: {}",
                        "clusterUuid",
                        format_uuid(&info.cluster_uuid)
                    );
                    let _ = writeln!(out, "  {:<12}: {}", "cliqueId", info.clique_id);
                    let _ = writeln!(
                        out,
                        "  {:<12}: {} ({})",
                        "state",
                        state_name(info.state),
                        info.state
                    );
                }
            }
        }
        out
    }

    /// The `--json` document, or nothing after a failure (the failure goes to stderr).
    ///
    /// `{"driverVersion", "nodeName", "gpus": [{"index", "uuid", "clusterUuid",
    /// "cliqueId", "state", "stateName"}]}`; `driverVersion` and `nodeName`
    /// may be null. A GPU whose fabric query returned NOT_SUPPORTED has null
    /// `clusterUuid`, `cliqueId` and `state` and `"stateName": "not_supported"`.
    pub fn json(&self) -> Option<String> {
        if self.failure.is_some() {
            return None;
        }
        let doc = JsonRun {
            driver_version: self.driver_version.as_deref(),
            node_name: self.node_name.as_deref(),
            gpus: self.gpus.iter().map(JsonGpu::from).collect(),
        };
        // Serialising plain strings and numbers cannot fail.
        serde_json::to_string_pretty(&doc).ok().map(|mut text| {
            text.push('\n');
            text
        })
    }
}

/// NVML's name for a fabric state: `not_supported`, `not_started`,
/// `in_progress`, `completed`, or `unknown`.
pub fn state_name(state: u8) -> &'static str {
    match state {
        0 => "not_supported",
        1 => "not_started",
        2 => "in_progress",
        3 => "completed",
        _ => "unknown",
    }
}

/// The 16 bytes as dashed lowercase hex, `8-4-4-4-12`.
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let mut out = String::with_capacity(36);
    for (idx, byte) in bytes.iter().enumerate() {
        if matches!(idx, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonRun<'a> {
    driver_version: Option<&'a str>,
    node_name: Option<&'a str>,
    gpus: Vec<JsonGpu<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonGpu<'a> {
    index: u32,
    uuid: &'a str,
    cluster_uuid: Option<String>,
    clique_id: Option<u32>,
    state: Option<u8>,
    state_name: &'static str,
}

impl<'a> From<&'a Gpu> for JsonGpu<'a> {
    fn from(gpu: &'a Gpu) -> JsonGpu<'a> {
        match gpu.fabric {
            Fabric::Info(info) => JsonGpu {
                index: gpu.index,
                uuid: &gpu.uuid,
                cluster_uuid: Some(format_uuid(&info.cluster_uuid)),
                clique_id: Some(info.clique_id),
                state: Some(info.state),
                state_name: state_name(info.state),
            },
            Fabric::NotSupported => JsonGpu {
                index: gpu.index,
                uuid: &gpu.uuid,
                cluster_uuid: None,
                clique_id: None,
                state: None,
                state_name: "not_supported",
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(last: u8, clique_id: u32, state: u8) -> Fabric {
        let mut cluster_uuid = [0u8; 16];
        cluster_uuid[15] = last;
        Fabric::Info(FabricInfo {
            cluster_uuid,
            clique_id,
            state,
        })
    }

    fn gpu(index: u32, fabric: Fabric) -> Gpu {
        Gpu {
            index,
            uuid: format!("GPU-{index}"),
            fabric,
        }
    }

    #[test]
    fn text_matches_upstream_block_format() {
        let run = Run {
            count: Some(2),
            gpus: vec![gpu(0, info(0xab, 1, 3)), gpu(1, info(0xab, 1, 2))],
            ..Run::default()
        };
        assert_eq!(
            run.text(),
            "Discovered 2 GPU(s)
GPU 0 (GPU-0)
  clusterUuid : 00000000-0000-0000-0000-0000000000ab
  cliqueId    : 1
  state       : completed (3)
GPU 1 (GPU-1)
  clusterUuid : 00000000-0000-0000-0000-0000000000ab
  cliqueId    : 1
  state       : in_progress (2)
"
        );
        assert_eq!(run.exit_code(), 0);
    }

    #[test]
    fn not_supported_is_one_line_and_exit_2() {
        let run = Run {
            count: Some(2),
            gpus: vec![gpu(0, Fabric::NotSupported), gpu(1, info(1, 0, 3))],
            ..Run::default()
        };
        assert!(run.text().starts_with(
            "Discovered 2 GPU(s)\nGPU 0 (GPU-0): fabric NOT SUPPORTED\nGPU 1 (GPU-1)\n"
        ));
        assert_eq!(run.exit_code(), 2);
    }

    #[test]
    fn failure_keeps_earlier_lines_and_exits_1() {
        let run = Run {
            count: Some(4),
            gpus: vec![gpu(0, Fabric::NotSupported)],
            failure: Some("GetGpuFabricInfo[1]: GPU is lost".to_owned()),
            ..Run::default()
        };
        assert_eq!(
            run.text(),
            "Discovered 4 GPU(s)\nGPU 0 (GPU-0): fabric NOT SUPPORTED\n"
        );
        assert_eq!(run.exit_code(), 1);
        assert_eq!(run.json(), None);
    }

    #[test]
    fn nothing_is_printed_before_the_count() {
        let run = Run {
            failure: Some("nvmlInit: Uninitialized".to_owned()),
            ..Run::default()
        };
        assert_eq!(run.text(), "");
        assert_eq!(run.exit_code(), 1);
    }

    #[test]
    fn state_names_cover_every_value() {
        let names: Vec<&str> = (0..=5).map(state_name).collect();
        assert_eq!(
            names,
            [
                "not_supported",
                "not_started",
                "in_progress",
                "completed",
                "unknown",
                "unknown"
            ]
        );
        assert_eq!(state_name(255), "unknown");
    }

    #[test]
    fn uuid_is_dashed_lowercase_hex() {
        let bytes = [
            0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
            0x32, 0x10,
        ];
        assert_eq!(format_uuid(&bytes), "01234567-89ab-cdef-fedc-ba9876543210");
    }

    #[test]
    fn json_nulls_unsupported_fabric_fields() {
        let run = Run {
            driver_version: Some("580.65.06".to_owned()),
            node_name: None,
            count: Some(2),
            gpus: vec![gpu(0, info(0xff, 99, 3)), gpu(1, Fabric::NotSupported)],
            failure: None,
        };
        let json: serde_json::Value =
            serde_json::from_str(&run.json().expect("a document")).expect("valid JSON");
        assert_eq!(
            json,
            serde_json::json!({
                "driverVersion": "580.65.06",
                "nodeName": null,
                "gpus": [
                    {"index": 0, "uuid": "GPU-0", "clusterUuid": "00000000-0000-0000-0000-0000000000ff",
                     "cliqueId": 99, "state": 3, "stateName": "completed"},
                    {"index": 1, "uuid": "GPU-1", "clusterUuid": null, "cliqueId": null,
                     "state": null, "stateName": "not_supported"},
                ]
            })
        );
    }
}
