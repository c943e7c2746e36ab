//! What the library serves: the profile from `MOCK_NVML_CONFIG` with this node's identity from
//! the topology at `MOCK_TOPOLOGY_CONFIG` (keyed by `NODE_NAME`) overlaid.
//!
//! [`build`] is the pure part (texts in, profile and warnings out); [`load`] reads the
//! environment and the files and calls it.

use std::path::PathBuf;

use nvml_profile::{FabricUuid, Profile};

use crate::abi::{self, NvmlReturn};

/// The most GPUs one process can see (the number of handle slots).
pub const MAX_DEVICES: usize = 64;

/// Environment variable naming the profile.
pub const ENV_CONFIG: &str = "MOCK_NVML_CONFIG";
/// Environment variable naming the topology document.
pub const ENV_TOPOLOGY: &str = "MOCK_TOPOLOGY_CONFIG";
/// Environment variable naming this node.
pub const ENV_NODE_NAME: &str = "NODE_NAME";
/// Any non-empty value makes an invalid topology fail init.
pub const ENV_STRICT: &str = "MOCK_NVML_STRICT";

/// Why init failed; each variant is one stderr line and one NVML return code.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// `MOCK_NVML_CONFIG` is unset or empty.
    #[error("{ENV_CONFIG} is not set and the library is not inside a driver root with config/config.yaml: point {ENV_CONFIG} at a GPU profile (e.g. /opt/nvml-mock/driver/config/config.yaml)")]
    ConfigUnset,
    /// The profile file cannot be read.
    #[error("cannot read the GPU profile {path} ({ENV_CONFIG}): {source}")]
    ConfigUnreadable {
        /// The path from `MOCK_NVML_CONFIG`.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The profile is not a valid profile.
    #[error("{path} ({ENV_CONFIG}): {source}")]
    ConfigInvalid {
        /// The path from `MOCK_NVML_CONFIG`.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: nvml_profile::Error,
    },
    /// The profile shows more GPUs than the library has handle slots.
    #[error("profile {name:?} shows {count} GPUs, the mock supports at most {MAX_DEVICES}: set system.num_devices")]
    TooManyDevices {
        /// The profile's name.
        name: String,
        /// Its visible device count.
        count: usize,
    },
    /// The topology is invalid and `MOCK_NVML_STRICT` is set.
    #[error("{message} ({ENV_STRICT} is set, so this fails init)")]
    StrictTopology {
        /// The warning that would have been printed.
        message: String,
    },
}

impl InitError {
    /// The code `nvmlInit*` returns: DRIVER_NOT_LOADED when there is no profile to read,
    /// UNKNOWN when there is one but it (or a strict topology) is unusable.
    pub fn code(&self) -> NvmlReturn {
        match self {
            InitError::ConfigUnset | InitError::ConfigUnreadable { .. } => {
                abi::ERROR_DRIVER_NOT_LOADED
            }
            _ => abi::ERROR_UNKNOWN,
        }
    }
}

/// The topology as found in the environment.
#[derive(Debug)]
pub enum TopologySource {
    /// `MOCK_TOPOLOGY_CONFIG` is unset or empty: no overlay.
    Absent,
    /// The file could not be read.
    Unreadable {
        /// The path.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// The file's text.
    Text {
        /// The path, for messages.
        path: PathBuf,
        /// The document.
        text: String,
    },
}

/// What init serves, plus the warnings to print.
#[derive(Debug)]
pub struct Built {
    /// The profile with the node's fabric identity applied.
    pub profile: Profile,
    /// One line each, printed to stderr with the warning prefix.
    pub warnings: Vec<String>,
}

/// Inputs of [`build`].
#[derive(Debug)]
pub struct Inputs<'a> {
    /// Where the profile came from, for messages.
    pub config_path: PathBuf,
    /// The profile text.
    pub config_text: &'a str,
    /// The topology.
    pub topology: TopologySource,
    /// `NODE_NAME`, if non-empty.
    pub node_name: Option<&'a str>,
    /// Whether `MOCK_NVML_STRICT` is set.
    pub strict: bool,
}

/// Parses the profile and overlays the node's identity (upstream-demo §2.3 semantics).
pub fn build(inputs: Inputs<'_>) -> Result<Built, InitError> {
    let profile =
        Profile::parse(inputs.config_text).map_err(|source| InitError::ConfigInvalid {
            path: inputs.config_path.clone(),
            source,
        })?;
    if profile.device_count() > MAX_DEVICES {
        return Err(InitError::TooManyDevices {
            name: profile.name().to_owned(),
            count: profile.device_count(),
        });
    }
    let mut warnings = Vec::new();
    let problem = match (&inputs.topology, inputs.node_name) {
        (TopologySource::Absent, _) => None,
        (TopologySource::Unreadable { path, error }, _) => Some(format!(
            "cannot read the topology {} ({ENV_TOPOLOGY}): {error}; keeping the profile's fabric identity",
            path.display()
        )),
        (TopologySource::Text { path, .. }, None) => {
            warnings.push(format!(
                "{ENV_TOPOLOGY} is {} but {ENV_NODE_NAME} is empty; keeping the profile's fabric identity",
                path.display()
            ));
            None
        }
        (TopologySource::Text { path, text }, Some(node)) => match topology::parse(text) {
            Err(err) => Some(format!(
                "invalid topology {} ({ENV_TOPOLOGY}): {err}; keeping the profile's fabric identity",
                path.display()
            )),
            Ok(document) => {
                let profile = match document.resolve(node) {
                    Some(identity) => profile.with_fabric_identity(
                        FabricUuid::from_bytes(*identity.cluster_uuid.as_bytes()),
                        identity.clique_id,
                    ),
                    None => profile,
                };
                return Ok(Built { profile, warnings });
            }
        },
    };
    if let Some(message) = problem {
        if inputs.strict {
            return Err(InitError::StrictTopology { message });
        }
        warnings.push(message);
    }
    Ok(Built { profile, warnings })
}

/// Reads the environment and the files, then [`build`]s.
pub fn load() -> Result<Built, InitError> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
    // Without the variables, the files beside the library's own driver root (crate::locate).
    let config_path = non_empty(ENV_CONFIG)
        .map(PathBuf::from)
        .or_else(crate::locate::profile)
        .ok_or(InitError::ConfigUnset)?;
    let config_text =
        std::fs::read_to_string(&config_path).map_err(|source| InitError::ConfigUnreadable {
            path: config_path.clone(),
            source,
        })?;
    let topology = match non_empty(ENV_TOPOLOGY)
        .map(PathBuf::from)
        .or_else(crate::locate::topology)
    {
        None => TopologySource::Absent,
        Some(path) => match std::fs::read_to_string(&path) {
            Ok(text) => TopologySource::Text { path, text },
            Err(err) => TopologySource::Unreadable {
                path,
                error: err.to_string(),
            },
        },
    };
    let node_name = std::env::var(ENV_NODE_NAME)
        .ok()
        .filter(|name| !name.is_empty());
    build(Inputs {
        config_path,
        config_text: &config_text,
        topology,
        node_name: node_name.as_deref(),
        strict: non_empty(ENV_STRICT).is_some(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use nvml_profile::{FabricState, GB200, H100};

    use super::*;

    const TOPOLOGY: &str = r#"
version: 1
domains:
  - name: demo
    uuid: "00000000-0000-0000-0000-0000000000ab"
    cliques:
      - {id: 0, nodes: [w1, w2]}
      - {id: 1, nodes: [w3]}
"#;

    fn inputs<'a>(
        config: &'a str,
        topology: TopologySource,
        node: Option<&'a str>,
        strict: bool,
    ) -> Inputs<'a> {
        Inputs {
            config_path: "/cfg.yaml".into(),
            config_text: config,
            topology,
            node_name: node,
            strict,
        }
    }

    fn text(text: &str) -> TopologySource {
        TopologySource::Text {
            path: "/topo.yaml".into(),
            text: text.to_owned(),
        }
    }

    fn cliques(built: &Built) -> Vec<(String, u32, FabricState)> {
        built
            .profile
            .devices()
            .iter()
            .map(|device| {
                let fabric = device.fabric.unwrap();
                (
                    fabric.cluster_uuid.to_string(),
                    fabric.clique_id,
                    fabric.effective_state(),
                )
            })
            .collect()
    }

    #[test]
    fn a_listed_node_takes_its_clique_and_domain() {
        let built = build(inputs(GB200, text(TOPOLOGY), Some("w3"), false)).unwrap();
        assert!(built.warnings.is_empty());
        let expected = (
            "00000000-0000-0000-0000-0000000000ab".to_owned(),
            1,
            FabricState::Completed,
        );
        assert_eq!(cliques(&built), vec![expected; 4]);
    }

    #[test]
    fn an_absent_node_keeps_the_profile_defaults() {
        let profile = Profile::parse(GB200).unwrap();
        let built = build(inputs(GB200, text(TOPOLOGY), Some("control-plane"), true)).unwrap();
        assert!(built.warnings.is_empty());
        assert_eq!(built.profile, profile);
    }

    #[test]
    fn a_profile_without_fabric_stays_without() {
        let built = build(inputs(H100, text(TOPOLOGY), Some("w1"), true)).unwrap();
        assert!(built
            .profile
            .devices()
            .iter()
            .all(|device| device.fabric.is_none()));
    }

    #[test]
    fn an_invalid_topology_warns_once_or_fails_when_strict() {
        let bad = "version: 1\ndomains:\n  - uuid: nope\n";
        let built = build(inputs(GB200, text(bad), Some("w1"), false)).unwrap();
        assert_eq!(built.warnings.len(), 1, "{:?}", built.warnings);
        assert!(
            built.warnings[0].starts_with("invalid topology /topo.yaml (MOCK_TOPOLOGY_CONFIG): ")
        );
        assert_eq!(built.profile, Profile::parse(GB200).unwrap());

        let err = build(inputs(GB200, text(bad), Some("w1"), true)).unwrap_err();
        assert!(matches!(err, InitError::StrictTopology { .. }));
        assert_eq!(err.code(), abi::ERROR_UNKNOWN);
        assert!(
            err.to_string()
                .ends_with("(MOCK_NVML_STRICT is set, so this fails init)"),
            "{err}"
        );
    }

    #[test]
    fn an_unreadable_topology_warns() {
        let source = TopologySource::Unreadable {
            path: "/gone".into(),
            error: "No such file".into(),
        };
        let built = build(inputs(GB200, source, Some("w1"), false)).unwrap();
        assert_eq!(built.warnings.len(), 1);
        assert!(built.warnings[0].contains("cannot read the topology /gone"));
    }

    #[test]
    fn a_topology_without_node_name_warns() {
        let built = build(inputs(GB200, text(TOPOLOGY), None, true)).unwrap();
        assert_eq!(built.warnings.len(), 1);
        assert!(built.warnings[0].contains("NODE_NAME is empty"));
    }

    #[test]
    fn an_invalid_profile_fails_with_unknown() {
        let err = build(inputs("version: 1\n", TopologySource::Absent, None, false)).unwrap_err();
        assert!(matches!(err, InitError::ConfigInvalid { .. }));
        assert_eq!(err.code(), abi::ERROR_UNKNOWN);
        assert!(
            err.to_string()
                .starts_with("/cfg.yaml (MOCK_NVML_CONFIG): invalid profile: "),
            "{err}"
        );
        assert_eq!(InitError::ConfigUnset.code(), abi::ERROR_DRIVER_NOT_LOADED);
    }
}
