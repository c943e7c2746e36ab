//! What the library serves: the staged profile from `MOCK_NVML_CONFIG` with this node's identity
//! from the staged topology at `MOCK_TOPOLOGY_CONFIG` (keyed by `NODE_NAME`) overlaid.
//!
//! Both files are the compact staged form (`nvml_profile::staged`, `topology::staged`) that the
//! stager (or `nvml-mock-stager compile-profile` / `compile-topology`) writes from YAML: the
//! library decodes and re-validates them and links no YAML parser. A YAML file is refused with
//! a line naming the command that stages it.
//!
//! [`build`] is the pure part (bytes in, profile and warnings out); [`Cache::load`] reads the
//! environment and the files and calls it only when they changed since the previous init.

use std::{
    io::Read,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
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
pub const ENV_CONFIG: &str = node_layout::env::MOCK_NVML_CONFIG;
/// Environment variable naming the topology document.
pub const ENV_TOPOLOGY: &str = node_layout::env::MOCK_TOPOLOGY_CONFIG;
/// Environment variable naming this node.
pub const ENV_NODE_NAME: &str = node_layout::env::NODE_NAME;
/// Any non-empty value makes an invalid topology fail init.
pub const ENV_STRICT: &str = node_layout::env::MOCK_NVML_STRICT;

/// Why init failed; each variant is one stderr line and one NVML return code.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// `MOCK_NVML_CONFIG` is unset or empty.
    #[error("{ENV_CONFIG} is not set and the library is not inside a driver root with {}: point {ENV_CONFIG} at a staged GPU profile (e.g. /opt/nvml-mock/driver/{})", crate::locate::PROFILE, crate::locate::PROFILE)]
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
    /// The profile is not a valid staged profile (YAML, another format version, corrupt, or
    /// invalid).
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
    #[error("it is {kind}, not a regular file: point the variable at a staged file")]
    NotRegular {
        /// What it is instead ("a character device", "a FIFO", …).
        kind: &'static str,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("it has {size} bytes, more than the {MAX_FILE_BYTES}-byte limit: point the variable at a smaller staged file")]
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

/// Reads a file, refusing anything that is not a regular file or exceeds
/// [`MAX_FILE_BYTES`]. The path is checked before it is opened (opening a FIFO blocks), the opened
/// file again (the path may have been replaced in between), and the read stops one byte past the
/// limit (the file may grow while being read).
pub fn read_bounded(path: &Path) -> Result<(std::fs::Metadata, Vec<u8>), ReadError> {
    check_bounds(&std::fs::metadata(path)?)?;
    let file = std::fs::File::open(path)?;
    let metadata = file.metadata()?;
    check_bounds(&metadata)?;
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge {
            size: bytes.len() as u64,
        });
    }
    Ok((metadata, bytes))
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
    /// The file's bytes (a staged topology, or anything else to refuse).
    Staged {
        /// The path, for messages.
        path: PathBuf,
        /// The file's contents.
        bytes: Vec<u8>,
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
    /// The profile file's bytes (a staged profile, or anything else to refuse).
    pub config_bytes: &'a [u8],
    /// The topology.
    pub topology: TopologySource,
    /// `NODE_NAME`, if non-empty.
    pub node_name: Option<&'a str>,
    /// Whether `MOCK_NVML_STRICT` is set.
    pub strict: bool,
}

/// Decodes the profile and overlays the node's identity (upstream-demo §2.3 semantics).
pub fn build(inputs: Inputs<'_>) -> Result<Built, InitError> {
    let profile = nvml_profile::staged::decode(inputs.config_bytes).map_err(|source| {
        InitError::ConfigInvalid {
            path: inputs.config_path.clone(),
            source,
        }
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
        (TopologySource::Staged { path, .. }, None) => {
            warnings.push(format!(
                "{ENV_TOPOLOGY} is {} but {ENV_NODE_NAME} is empty; keeping the profile's fabric identity",
                path.display()
            ));
            None
        }
        (TopologySource::Staged { path, bytes }, Some(node)) => match topology::staged::decode(bytes) {
            Err(err) => Some(format!(
                "invalid topology {} ({ENV_TOPOLOGY}): {err}; keeping the profile's fabric identity",
                path.display()
            )),
            Ok(document) => {
                let profile = match document.resolve(node) {
                    Some(identity) => profile.into_fabric_identity(
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

/// How long after a file's last change (its mtime or ctime) its stat alone is not trusted: file
/// timestamps are coarse (the kernel's clock tick; a second on some file systems), so a
/// same-size rewrite in place within that granularity keeps every stat field. Inside the window
/// the bytes are read again and compared, as git does for "racily clean" index entries.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The stat fields that change when a file is replaced or rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// The later of mtime and ctime, as a time.
    fn changed_at(&self) -> SystemTime {
        let (secs, nanos) = self.mtime.max(self.ctime);
        let since_epoch = Duration::new(
            u64::try_from(secs).unwrap_or(0),
            u32::try_from(nanos).unwrap_or(0),
        );
        UNIX_EPOCH + since_epoch
    }
}

/// One file as last read.
#[derive(Debug)]
struct Snapshot {
    path: PathBuf,
    stamp: Stamp,
    /// When the read began; the stamp is trusted only once the file's last change is
    /// [`RACY_WINDOW`] older than this.
    read_at: SystemTime,
    bytes: Vec<u8>,
}

impl Snapshot {
    fn racy(&self) -> bool {
        self.stamp.changed_at() + RACY_WINDOW > self.read_at
    }
}

/// Brings `slot` up to date with the file at `path`; true when its bytes are those of the
/// previous snapshot of the same path. One `stat` when the stamp is unchanged and not racy;
/// otherwise the file is read (bounded) and compared. On error the slot is emptied.
fn revalidate(slot: &mut Option<Snapshot>, path: &Path) -> Result<bool, ReadError> {
    let result = revalidate_inner(slot, path);
    if result.is_err() {
        *slot = None;
    }
    result
}

fn revalidate_inner(slot: &mut Option<Snapshot>, path: &Path) -> Result<bool, ReadError> {
    let previous = slot.as_mut().filter(|snapshot| snapshot.path == path);
    if let Some(snapshot) = &previous {
        if Stamp::of(&std::fs::metadata(path)?) == snapshot.stamp && !snapshot.racy() {
            return Ok(true);
        }
    }
    let read_at = SystemTime::now();
    let (metadata, bytes) = read_bounded(path)?;
    let stamp = Stamp::of(&metadata);
    if let Some(snapshot) = previous {
        if snapshot.bytes == bytes {
            snapshot.stamp = stamp;
            snapshot.read_at = read_at;
            return Ok(true);
        }
    }
    *slot = Some(Snapshot {
        path: path.to_owned(),
        stamp,
        read_at,
        bytes,
    });
    Ok(false)
}

/// What the environment names, read at every init.
#[derive(Debug)]
struct Environment {
    config_path: PathBuf,
    topology_path: Option<PathBuf>,
    node_name: Option<String>,
    strict: bool,
}

impl Environment {
    fn read() -> Result<Environment, InitError> {
        let non_empty = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        // Without the variables, the files beside the library's own driver root (crate::locate).
        let config_path = non_empty(ENV_CONFIG)
            .map(PathBuf::from)
            .or_else(crate::locate::profile)
            .ok_or(InitError::ConfigUnset)?;
        let topology_path = non_empty(ENV_TOPOLOGY)
            .map(PathBuf::from)
            .or_else(crate::locate::topology);
        let node_name = std::env::var(ENV_NODE_NAME)
            .ok()
            .filter(|name| !name.is_empty());
        Ok(Environment {
            config_path,
            topology_path,
            node_name,
            strict: non_empty(ENV_STRICT).is_some(),
        })
    }
}

/// What the topology variable led to, beyond the file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TopologyKey {
    Absent,
    Unreadable(PathBuf, String),
    Staged,
}

/// What was served last, with what it was built from.
#[derive(Debug)]
struct Served<T> {
    topology: TopologyKey,
    node_name: Option<String>,
    strict: bool,
    value: Arc<T>,
    warnings: Vec<String>,
}

/// The profile and topology across init/shutdown cycles: the files as last read and what was
/// built from them. [`Cache::load`] re-reads the environment every time and revalidates both
/// files (see [`RACY_WINDOW`]), and parses only when a file's bytes or the environment changed.
#[derive(Debug)]
pub struct Cache<T> {
    config: Option<Snapshot>,
    topology: Option<Snapshot>,
    served: Option<Served<T>>,
}

impl<T> Cache<T> {
    /// An empty cache.
    pub const fn new() -> Cache<T> {
        Cache {
            config: None,
            topology: None,
            served: None,
        }
    }

    /// What init serves now (`make` turns a freshly built profile into it) and the warnings to
    /// print. Errors are never cached: the next call tries again.
    pub fn load(
        &mut self,
        make: impl FnOnce(Profile) -> T,
    ) -> Result<(Arc<T>, &[String]), InitError> {
        let result = self.load_inner(make);
        if result.is_err() {
            self.served = None;
        }
        let served = self.served.as_ref();
        result.map(|value| (value, served.map_or(&[][..], |served| &served.warnings[..])))
    }

    fn load_inner(&mut self, make: impl FnOnce(Profile) -> T) -> Result<Arc<T>, InitError> {
        let env = Environment::read()?;
        let config_same = revalidate(&mut self.config, &env.config_path).map_err(|source| {
            InitError::ConfigUnreadable {
                path: env.config_path.clone(),
                source,
            }
        })?;
        let (topology_key, topology_same) = match &env.topology_path {
            None => {
                self.topology = None;
                (TopologyKey::Absent, true)
            }
            Some(path) => match revalidate(&mut self.topology, path) {
                Ok(same) => (TopologyKey::Staged, same),
                Err(err) => (TopologyKey::Unreadable(path.clone(), err.to_string()), true),
            },
        };
        if let Some(served) = &self.served {
            if config_same
                && topology_same
                && served.topology == topology_key
                && served.node_name == env.node_name
                && served.strict == env.strict
            {
                return Ok(Arc::clone(&served.value));
            }
        }
        let config_bytes = self
            .config
            .as_ref()
            .map_or(&[][..], |snapshot| &snapshot.bytes);
        let topology = match (&topology_key, &self.topology) {
            (TopologyKey::Staged, Some(snapshot)) => TopologySource::Staged {
                path: snapshot.path.clone(),
                bytes: snapshot.bytes.clone(),
            },
            (TopologyKey::Unreadable(path, error), _) => TopologySource::Unreadable {
                path: path.clone(),
                error: error.clone(),
            },
            _ => TopologySource::Absent,
        };
        let built = build(Inputs {
            config_path: env.config_path.clone(),
            config_bytes,
            topology,
            node_name: env.node_name.as_deref(),
            strict: env.strict,
        })?;
        let value = Arc::new(make(built.profile));
        self.served = Some(Served {
            topology: topology_key,
            node_name: env.node_name,
            strict: env.strict,
            value: Arc::clone(&value),
            warnings: built.warnings,
        });
        Ok(value)
    }
}

impl<T> Default for Cache<T> {
    fn default() -> Cache<T> {
        Cache::new()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use nvml_profile::{FabricState, GB200, H100};
    use test_support::staged::{profile_bytes, topology_bytes};

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
        config: &'a [u8],
        topology: TopologySource,
        node: Option<&'a str>,
        strict: bool,
    ) -> Inputs<'a> {
        Inputs {
            config_path: "/cfg.bin".into(),
            config_bytes: config,
            topology,
            node_name: node,
            strict,
        }
    }

    fn staged(yaml: &str) -> TopologySource {
        raw(topology_bytes(yaml))
    }

    fn raw(bytes: Vec<u8>) -> TopologySource {
        TopologySource::Staged {
            path: "/topo.bin".into(),
            bytes,
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
        let built = build(inputs(
            &profile_bytes(GB200),
            staged(TOPOLOGY),
            Some("w3"),
            false,
        ))
        .unwrap();
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
        let built = build(inputs(
            &profile_bytes(GB200),
            staged(TOPOLOGY),
            Some("control-plane"),
            true,
        ))
        .unwrap();
        assert!(built.warnings.is_empty());
        assert_eq!(built.profile, profile);
    }

    #[test]
    fn a_profile_without_fabric_stays_without() {
        let built = build(inputs(
            &profile_bytes(H100),
            staged(TOPOLOGY),
            Some("w1"),
            true,
        ))
        .unwrap();
        assert!(built
            .profile
            .devices()
            .iter()
            .all(|device| device.fabric.is_none()));
    }

    #[test]
    fn an_invalid_topology_warns_once_or_fails_when_strict() {
        // A node in two cliques: the stager would refuse it, so it is encoded by hand.
        let mut document = topology::parse(TOPOLOGY).unwrap();
        document.domains[0].cliques[1].nodes.push("w1".into());
        let bad = topology::staged::encode(&document);
        let gb200 = profile_bytes(GB200);
        let built = build(inputs(&gb200, raw(bad.clone()), Some("w1"), false)).unwrap();
        assert_eq!(built.warnings.len(), 1, "{:?}", built.warnings);
        assert!(
            built.warnings[0].starts_with("invalid topology /topo.bin (MOCK_TOPOLOGY_CONFIG): "),
            "{:?}",
            built.warnings
        );
        assert_eq!(built.profile, Profile::parse(GB200).unwrap());

        let err = build(inputs(&gb200, raw(bad), Some("w1"), true)).unwrap_err();
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
        let built = build(inputs(&profile_bytes(GB200), source, Some("w1"), false)).unwrap();
        assert_eq!(built.warnings.len(), 1);
        assert!(built.warnings[0].contains("cannot read the topology /gone"));
    }

    #[test]
    fn a_topology_without_node_name_warns() {
        let built = build(inputs(&profile_bytes(GB200), staged(TOPOLOGY), None, true)).unwrap();
        assert_eq!(built.warnings.len(), 1);
        assert!(built.warnings[0].contains("NODE_NAME is empty"));
    }

    #[test]
    fn an_invalid_profile_fails_with_unknown() {
        let mut bytes = profile_bytes(GB200);
        bytes.truncate(bytes.len() - 1);
        let err = build(inputs(&bytes, TopologySource::Absent, None, false)).unwrap_err();
        assert!(matches!(err, InitError::ConfigInvalid { .. }));
        assert_eq!(err.code(), abi::ERROR_UNKNOWN);
        assert!(
            err.to_string()
                .starts_with("/cfg.bin (MOCK_NVML_CONFIG): a corrupt staged profile: "),
            "{err}"
        );
        assert_eq!(InitError::ConfigUnset.code(), abi::ERROR_DRIVER_NOT_LOADED);
        assert!(
            InitError::ConfigUnset
                .to_string()
                .ends_with("(e.g. /opt/nvml-mock/driver/config/profile.bin)"),
            "{}",
            InitError::ConfigUnset
        );
    }

    #[test]
    fn a_yaml_profile_or_topology_is_refused_naming_the_command_that_stages_it() {
        let err = build(inputs(
            GB200.as_bytes(),
            TopologySource::Absent,
            None,
            false,
        ))
        .unwrap_err();
        assert_eq!(err.code(), abi::ERROR_UNKNOWN);
        assert_eq!(
            err.to_string(),
            "/cfg.bin (MOCK_NVML_CONFIG): text (a YAML document?), not a staged file; the library \
             reads a staged profile: `nvml-mock-stager compile-profile <yaml> --out <file>` \
             writes one"
        );
        let source = raw(TOPOLOGY.as_bytes().to_vec());
        let built = build(inputs(&profile_bytes(GB200), source, Some("w1"), false)).unwrap();
        assert_eq!(
            built.warnings,
            ["invalid topology /topo.bin (MOCK_TOPOLOGY_CONFIG): text (a YAML document?), not a \
              staged file; the library reads a staged topology: `nvml-mock-stager \
              compile-topology <yaml> --out <file>` writes one; keeping the profile's fabric \
              identity"]
        );
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
            "it is a character device, not a regular file: point the variable at a staged file"
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
        let path = dir.path().join("big.bin");
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
             not a regular file: point the variable at a staged file"
        );
    }

    /// A profile and a topology in a temp dir.
    struct Files {
        dir: tempfile::TempDir,
    }

    impl Files {
        fn new(topology: &str) -> Files {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("profile.bin"), profile_bytes(GB200)).unwrap();
            std::fs::write(dir.path().join("topology.bin"), topology_bytes(topology)).unwrap();
            Files { dir }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }
    }

    #[test]
    fn revalidate_trusts_an_old_stamp_and_compares_bytes_inside_the_racy_window() {
        let files = Files::new(TOPOLOGY);
        let path = files.path("topology.bin");
        let mut slot = None;
        assert!(!revalidate(&mut slot, &path).unwrap(), "first read is new");
        assert!(slot.as_ref().unwrap().racy(), "just written: racy");
        assert!(revalidate(&mut slot, &path).unwrap(), "same bytes");

        // Same size, rewritten in place, compared by bytes because the stamp is racy.
        let changed = topology_bytes(&TOPOLOGY.replace("id: 1", "id: 2"));
        assert_eq!(changed.len(), topology_bytes(TOPOLOGY).len());
        std::fs::write(&path, &changed).unwrap();
        assert!(!revalidate(&mut slot, &path).unwrap(), "changed bytes");
        assert_eq!(slot.as_ref().unwrap().bytes, changed);

        // Once the last change is older than the window, an unchanged stamp is trusted.
        let snapshot = slot.as_mut().unwrap();
        snapshot.read_at = snapshot.stamp.changed_at() + RACY_WINDOW + Duration::from_millis(1);
        assert!(!snapshot.racy());
        assert!(revalidate(&mut slot, &path).unwrap());

        // Another path is a new file; an error empties the slot.
        assert!(!revalidate(&mut slot, &files.path("profile.bin")).unwrap());
        std::fs::remove_file(files.path("profile.bin")).unwrap();
        assert!(revalidate(&mut slot, &files.path("profile.bin")).is_err());
        assert!(slot.is_none());
    }

    /// Points the environment at `files` and runs `body`, holding the crate's environment lock
    /// (the ffi tests set the same variables).
    fn with_env<R>(files: &Files, node: &str, body: impl FnOnce() -> R) -> R {
        let _lock = crate::ENV_LOCK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::env::set_var(ENV_CONFIG, files.path("profile.bin"));
        std::env::set_var(ENV_TOPOLOGY, files.path("topology.bin"));
        std::env::set_var(ENV_NODE_NAME, node);
        std::env::remove_var(ENV_STRICT);
        body()
    }

    fn clique(cache: &mut Cache<Profile>) -> (u32, Arc<Profile>) {
        let (profile, _) = cache.load(|profile| profile).unwrap();
        (profile.devices()[0].fabric.unwrap().clique_id, profile)
    }

    #[test]
    fn the_cache_parses_only_when_a_file_or_the_environment_changed() {
        let files = Files::new(TOPOLOGY);
        let mut cache = Cache::new();
        let (first, a) = with_env(&files, "w3", || clique(&mut cache));
        let (again, b) = with_env(&files, "w3", || clique(&mut cache));
        assert_eq!((first, again), (1, 1));
        assert!(Arc::ptr_eq(&a, &b), "unchanged files: nothing rebuilt");

        let (moved, c) = with_env(&files, "w1", || clique(&mut cache));
        assert_eq!(moved, 0, "NODE_NAME changed");
        assert!(!Arc::ptr_eq(&b, &c));

        std::fs::write(
            files.path("topology.bin"),
            topology_bytes(&TOPOLOGY.replace("id: 0", "id: 5")),
        )
        .unwrap();
        let (rewritten, _) = with_env(&files, "w1", || clique(&mut cache));
        assert_eq!(rewritten, 5, "same-size rewrite seen");

        // A YAML profile fails, and is not cached: staging it serves again.
        std::fs::write(files.path("profile.bin"), GB200).unwrap();
        let err = with_env(&files, "w1", || cache.load(|profile| profile).unwrap_err());
        assert!(matches!(err, InitError::ConfigInvalid { .. }), "{err}");
        let err = with_env(&files, "w1", || cache.load(|profile| profile).unwrap_err());
        assert!(
            matches!(err, InitError::ConfigInvalid { .. }),
            "failed again: {err}"
        );
        std::fs::write(files.path("profile.bin"), profile_bytes(GB200)).unwrap();
        assert_eq!(with_env(&files, "w1", || clique(&mut cache)).0, 5);

        // A topology that turns unreadable warns at every init until it is back.
        std::fs::remove_file(files.path("topology.bin")).unwrap();
        let warnings = with_env(&files, "w1", || {
            let (_, warnings) = cache.load(|profile| profile).unwrap();
            warnings.to_vec()
        });
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("cannot read the topology"),
            "{warnings:?}"
        );
        std::fs::write(files.path("topology.bin"), topology_bytes(TOPOLOGY)).unwrap();
        assert_eq!(with_env(&files, "w1", || clique(&mut cache)).0, 0);
    }
}
