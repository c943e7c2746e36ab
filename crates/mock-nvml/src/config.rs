//! What the library serves: the profile from `MOCK_NVML_CONFIG` with this node's identity from
//! the topology at `MOCK_TOPOLOGY_CONFIG` (keyed by `NODE_NAME`) overlaid.
//!
//! [`build`] is the pure part (texts in, profile and warnings out); [`load`] reads the
//! environment and the files and calls it.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use nvml_profile::{FabricUuid, Profile};

use crate::abi::{self, NvmlReturn};

/// The most GPUs one process can see (the number of handle slots).
pub const MAX_DEVICES: usize = 64;

/// The largest profile or topology file init reads, in bytes (4 MiB: a profile is a few KiB, and
/// a topology listing thousands of nodes stays far below). A larger file, or anything that is not
/// a regular file (a FIFO, a device such as `/dev/zero`, a directory), is refused unread.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

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
    #[error("{ENV_CONFIG} is not set: point it at a GPU profile (e.g. /opt/nvml-mock/driver/config/config.yaml)")]
    ConfigUnset,
    /// The profile file cannot be read.
    #[error("cannot read the GPU profile {path} ({ENV_CONFIG}): {source}")]
    ConfigUnreadable {
        /// The path from `MOCK_NVML_CONFIG`.
        path: PathBuf,
        /// Why.
        #[source]
        source: ReadError,
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

/// Why a profile or topology file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path names something other than a regular file (reading it could block or never end).
    #[error("it is {kind}, not a regular file: point the variable at a YAML file")]
    NotRegular {
        /// What it is instead ("a character device", "a FIFO", …).
        kind: &'static str,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("it has {size} bytes, more than the {MAX_FILE_BYTES}-byte limit: point the variable at a smaller YAML file")]
    TooLarge {
        /// Its size (at least the limit plus one when it grew while being read).
        size: u64,
    },
    /// Opening or reading failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a path names, for [`ReadError::NotRegular`].
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Checks that `metadata` is a regular file within [`MAX_FILE_BYTES`].
fn check_bounds(metadata: &std::fs::Metadata) -> Result<(), ReadError> {
    if !metadata.is_file() {
        return Err(ReadError::NotRegular {
            kind: kind_of(metadata.file_type()),
        });
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge {
            size: metadata.len(),
        });
    }
    Ok(())
}

/// Reads a UTF-8 file, refusing anything that is not a regular file or exceeds
/// [`MAX_FILE_BYTES`]. The path is checked before it is opened (opening a FIFO blocks), the opened
/// file again (the path may have been replaced in between), and the read stops one byte past the
/// limit (the file may grow while being read).
pub fn read_bounded(path: &Path) -> Result<(std::fs::Metadata, String), ReadError> {
    check_bounds(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    let metadata = file.metadata()?;
    check_bounds(&metadata)?;
    let mut text = String::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge {
            size: text.len() as u64,
        });
    }
    Ok((metadata, text))
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
    let config_path = PathBuf::from(non_empty(ENV_CONFIG).ok_or(InitError::ConfigUnset)?);
    let (_, config_text) =
        read_bounded(&config_path).map_err(|source| InitError::ConfigUnreadable {
            path: config_path.clone(),
            source,
        })?;
    let topology = match non_empty(ENV_TOPOLOGY) {
        None => TopologySource::Absent,
        Some(path) => {
            let path = PathBuf::from(path);
            match read_bounded(&path) {
                Ok((_, text)) => TopologySource::Text { path, text },
                Err(err) => TopologySource::Unreadable {
                    path,
                    error: err.to_string(),
                },
            }
        }
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

    #[test]
    fn read_bounded_refuses_devices_directories_and_fifos_unread() {
        let err = read_bounded(Path::new("/dev/zero")).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: "a character device"
                }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "it is a character device, not a regular file: point the variable at a YAML file"
        );
        let dir = tempfile::tempdir().unwrap();
        let err = read_bounded(dir.path()).unwrap_err();
        assert!(
            matches!(
                err,
                ReadError::NotRegular {
                    kind: "a directory"
                }
            ),
            "{err}"
        );
        // A FIFO with no writer: opening it would block forever, so it must be refused unopened.
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success(), "mkfifo failed");
        let err = read_bounded(&fifo).unwrap_err();
        assert!(
            matches!(err, ReadError::NotRegular { kind: "a FIFO" }),
            "{err}"
        );
    }

    #[test]
    fn read_bounded_refuses_files_over_the_limit_and_reads_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        let err = read_bounded(&path).unwrap_err();
        assert!(
            matches!(err, ReadError::TooLarge { size } if size == MAX_FILE_BYTES + 1),
            "{err}"
        );
        assert!(
            err.to_string().contains("more than the 4194304-byte limit"),
            "{err}"
        );
        file.set_len(MAX_FILE_BYTES).unwrap();
        let (metadata, text) = read_bounded(&path).unwrap();
        assert_eq!(metadata.len(), MAX_FILE_BYTES);
        assert_eq!(text.len() as u64, MAX_FILE_BYTES);
        let err = read_bounded(&dir.path().join("absent")).unwrap_err();
        assert!(matches!(err, ReadError::Io(_)), "{err}");
    }

    #[test]
    fn an_unreadable_profile_is_one_line_naming_the_variable() {
        let err = InitError::ConfigUnreadable {
            path: "/dev/zero".into(),
            source: ReadError::NotRegular {
                kind: "a character device",
            },
        };
        assert_eq!(err.code(), abi::ERROR_DRIVER_NOT_LOADED);
        assert_eq!(
            err.to_string(),
            "cannot read the GPU profile /dev/zero (MOCK_NVML_CONFIG): it is a character device, \
             not a regular file: point the variable at a YAML file"
        );
    }
}
