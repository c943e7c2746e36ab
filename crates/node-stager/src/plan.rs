//! What the staged tree consists of: directories, files, links and device nodes.
//!
//! Pure: [`plan`] turns the inputs (already read and validated) into a list of
//! [`Entry`] values; `stage` applies them. Paths come from
//! [`node_layout::paths::Layout`] only.

use std::path::PathBuf;

use node_layout::{mig_minors, paths::Layout, proc_devices::DeviceMajor};

/// The major of `/dev/nvidia<i>` and `/dev/nvidiactl`.
pub const NVIDIA_MAJOR: u32 = 195;

/// The minor of `/dev/nvidiactl`.
pub const NVIDIACTL_MINOR: u32 = 255;

/// The major of `/dev/nvidia-uvm` (minor 0) and `/dev/nvidia-uvm-tools` (minor 1).
pub const NVIDIA_UVM_MAJOR: u32 = 510;

/// The mode of every staged device node, whatever the umask.
pub const DEVICE_MODE: u32 = 0o666;

/// The IMEX `fabric-imex-mgmt` capability file.
pub const IMEX_CAPS_CONTENTS: &str =
    "DeviceFileMinor: 512\nDeviceFileMode: 438\nDeviceFileModify: 0\n";

/// Everything the stager needs, read and validated.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The driver version, for the library's file name.
    pub driver_version: String,
    /// How many `nvidia<i>` nodes to create.
    pub gpu_count: u32,
    /// The mock library to copy.
    pub library: PathBuf,
    /// The check-fabric binary to copy.
    pub check_fabric: PathBuf,
    /// The mock driver's nvidia-smi to copy.
    pub nvidia_smi: PathBuf,
    /// The staged profile (`nvml_profile::staged`, `system.num_devices` set).
    pub profile_staged: Vec<u8>,
    /// The IMEX surface, when enabled.
    pub imex: Option<Imex>,
    /// NVIDIA's IMEX daemon and ctl for the driver root, when a payload is given.
    pub imex_binaries: Option<ImexBinaries>,
    /// The MIG capability surface, for a MIG-capable profile.
    pub mig: Option<MigCaps>,
}

/// The MIG capability surface's inputs: the `mig-minors` table and its `nvidia-cap<N>` nodes.
#[derive(Debug, Clone)]
pub struct MigCaps {
    /// The device minors of the profile's GPUs (the table's `gpu<minor>`).
    pub gpu_minors: Vec<u32>,
    /// The nodes' major: the `nvidia-caps` line of the staged `/proc/devices`.
    pub caps_major: DeviceMajor,
}

/// The IMEX programs a driver install puts in `usr/bin`.
#[derive(Debug, Clone)]
pub struct ImexBinaries {
    /// `nvidia-imex`: the NO GPU shim carrying the daemon (`node_layout::imex_bundle`).
    pub daemon: Vec<u8>,
    /// `nvidia-imex-ctl`, to copy.
    pub ctl: PathBuf,
}

/// The IMEX surface's inputs.
#[derive(Debug, Clone)]
pub struct Imex {
    /// The rendered substitute `/proc/devices`.
    pub proc_devices: String,
    /// How many channel nodes (`channel0..count-1`).
    pub channel_count: u32,
    /// The channel nodes' major.
    pub channel_major: DeviceMajor,
}

/// Where a file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contents {
    /// This text.
    Text(String),
    /// These bytes.
    Bytes(Vec<u8>),
    /// A copy of this file.
    CopyOf(PathBuf),
}

/// One thing in the staged tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory (mode 0755).
    Dir {
        /// Where.
        path: PathBuf,
    },
    /// A regular file, replaced atomically.
    File {
        /// Where.
        path: PathBuf,
        /// What.
        contents: Contents,
        /// Permission bits.
        mode: u32,
    },
    /// A symbolic link.
    Symlink {
        /// Where.
        path: PathBuf,
        /// What it points to (relative to its directory).
        target: PathBuf,
    },
    /// A character device node (mode [`DEVICE_MODE`]).
    CharDevice {
        /// Where.
        path: PathBuf,
        /// Device major.
        major: u32,
        /// Device minor.
        minor: u32,
    },
}

impl Entry {
    /// Where the entry lives.
    pub fn path(&self) -> &std::path::Path {
        match self {
            Entry::Dir { path }
            | Entry::File { path, .. }
            | Entry::Symlink { path, .. }
            | Entry::CharDevice { path, .. } => path,
        }
    }
}

/// The staged tree for some inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// What to create, parents before children.
    pub entries: Vec<Entry>,
    /// Directories whose children the plan owns: anything in them not planned is removed.
    pub exclusive_dirs: Vec<PathBuf>,
    /// Paths removed if present (a disabled IMEX surface).
    pub absent: Vec<PathBuf>,
}

/// Plans the staged tree (everything but the topology, which is staged on its own).
pub fn plan(layout: &Layout, inputs: &Inputs) -> Plan {
    let mut entries: Vec<Entry> = [
        layout.root().to_path_buf(),
        layout.driver_dir(),
        layout.lib_dir(),
        layout.bin_dir(),
        layout.config_dir(),
        layout.dev_dir(),
        layout.topology_dir(),
    ]
    .into_iter()
    .map(dir)
    .collect();
    entries.extend(driver_files(layout, inputs));
    entries.extend(gpu_nodes(layout, inputs.gpu_count));
    // Without a payload, `usr/bin` (exclusive) loses any IMEX program staged before.
    if let Some(binaries) = &inputs.imex_binaries {
        entries.push(Entry::File {
            path: layout.imex_daemon(),
            contents: Contents::Bytes(binaries.daemon.clone()),
            mode: 0o755,
        });
        entries.push(executable(layout.imex_ctl(), &binaries.ctl));
    }

    let mut exclusive_dirs = vec![layout.lib_dir(), layout.bin_dir(), layout.dev_dir()];
    let mut absent = Vec::new();
    match &inputs.imex {
        Some(imex) => {
            entries.extend(imex_entries(layout, imex));
            exclusive_dirs.push(layout.channel_dir());
        }
        None => {
            absent.extend([
                layout.imex_dir(),
                layout.imex_caps_file(),
                layout.channel_dir(),
            ]);
        }
    }
    match &inputs.mig {
        Some(mig) => entries.extend(mig_entries(layout, mig)),
        // `dev` is exclusive: the caps nodes go with it.
        None => {
            absent.push(layout.mig_minors());
            absent.extend(mig_capability_dirs(layout, inputs.gpu_count));
        }
    }
    absent.push(layout.legacy_topology_dir());
    absent.extend(layout.legacy_yaml());
    Plan {
        entries,
        exclusive_dirs,
        absent,
    }
}

fn dir(path: PathBuf) -> Entry {
    Entry::Dir { path }
}

fn text(path: PathBuf, contents: &str) -> Entry {
    Entry::File {
        path,
        contents: Contents::Text(contents.to_owned()),
        mode: 0o644,
    }
}

fn executable(path: PathBuf, source: &std::path::Path) -> Entry {
    Entry::File {
        path,
        contents: Contents::CopyOf(source.to_path_buf()),
        mode: 0o755,
    }
}

/// The library under its versioned name, `.so.1` → versioned, `.so` → `.so.1`; check-fabric,
/// nvidia-smi and the staged profile.
fn driver_files(layout: &Layout, inputs: &Inputs) -> [Entry; 6] {
    let library_file = layout.library_file(&inputs.driver_version);
    [
        executable(library_file.clone(), &inputs.library),
        Entry::Symlink {
            path: layout.library_soname_link(),
            target: file_name(&library_file),
        },
        Entry::Symlink {
            path: layout.library_dev_link(),
            target: file_name(&layout.library_soname_link()),
        },
        executable(layout.check_fabric(), &inputs.check_fabric),
        executable(layout.nvidia_smi(), &inputs.nvidia_smi),
        Entry::File {
            path: layout.config(),
            contents: Contents::Bytes(inputs.profile_staged.clone()),
            mode: 0o644,
        },
    ]
}

/// `nvidia<i>` for each GPU, then `nvidiactl`, `nvidia-uvm` and `nvidia-uvm-tools`.
fn gpu_nodes(layout: &Layout, gpu_count: u32) -> Vec<Entry> {
    let mut entries: Vec<Entry> = (0..gpu_count)
        .map(|index| Entry::CharDevice {
            path: layout.gpu_node(index),
            major: NVIDIA_MAJOR,
            minor: index,
        })
        .collect();
    let [ctl, uvm, uvm_tools] = layout.gpu_control_nodes();
    entries.extend([
        Entry::CharDevice {
            path: ctl,
            major: NVIDIA_MAJOR,
            minor: NVIDIACTL_MINOR,
        },
        Entry::CharDevice {
            path: uvm,
            major: NVIDIA_UVM_MAJOR,
            minor: 0,
        },
        Entry::CharDevice {
            path: uvm_tools,
            major: NVIDIA_UVM_MAJOR,
            minor: 1,
        },
    ]);
    entries
}

/// The IMEX surface: the substitute `/proc/devices`, the caps file and the channel nodes.
fn imex_entries(layout: &Layout, imex: &Imex) -> Vec<Entry> {
    let mut entries = vec![
        dir(layout.imex_dir()),
        text(layout.proc_devices(), &imex.proc_devices),
    ];
    let caps_file = layout.imex_caps_file();
    if let Some(caps_dir) = caps_file.parent() {
        entries.push(dir(caps_dir.to_path_buf()));
    }
    entries.push(text(caps_file, IMEX_CAPS_CONTENTS));
    entries.push(dir(layout.channel_dir()));
    entries.extend((0..imex.channel_count).map(|index| Entry::CharDevice {
        path: layout.channel_node(index),
        major: imex.channel_major.get(),
        minor: index,
    }));
    entries
}

/// The MIG capability surface: `proc/driver/nvidia-caps/mig-minors` and a node
/// `dev/nvidia-caps/nvidia-cap<N>` for each of its minors, as the real driver's table and the
/// nodes `nvidia-modprobe` makes from it.
fn mig_entries(layout: &Layout, mig: &MigCaps) -> Vec<Entry> {
    let table = mig_minors::format(&mig.gpu_minors);
    let minors = mig_minors::parse(&table).into_values();
    let mut entries = Vec::new();
    let file = layout.mig_minors();
    if let Some(parent) = file.parent() {
        entries.push(dir(parent.to_path_buf()));
    }
    entries.push(text(file, &table));
    let capabilities = layout.capabilities_dir();
    for (path, minor, mode) in mig_minors::capability_files(&mig.gpu_minors) {
        let path = capabilities.join(path);
        if let Some(parent) = path.parent() {
            entries.push(dir(parent.to_path_buf()));
        }
        entries.push(text(path, &mig_minors::access_file(minor, mode)));
    }
    entries.push(dir(layout.caps_dir()));
    entries.extend(minors.map(|minor| Entry::CharDevice {
        path: layout.cap_node(minor),
        major: mig.caps_major.get(),
        minor,
    }));
    entries
}

/// The MIG capability directories a MIG-capable profile staged (`mig/`, `gpu<minor>/`), for a
/// profile that is not: the GPUs' minors are their indices.
fn mig_capability_dirs(layout: &Layout, gpu_count: u32) -> Vec<PathBuf> {
    let capabilities = layout.capabilities_dir();
    std::iter::once(capabilities.join("mig"))
        .chain((0..gpu_count).map(|minor| capabilities.join(format!("gpu{minor}"))))
        .collect()
}

/// The top-level directories the stager owns under the root; SIGTERM removes them.
pub fn owned_roots(layout: &Layout) -> [PathBuf; 3] {
    [
        layout.driver_dir(),
        layout.imex_dir(),
        layout.legacy_topology_dir(),
    ]
}

fn file_name(path: &std::path::Path) -> PathBuf {
    path.file_name().map(PathBuf::from).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    //! The plan's shape: paths from the layout, device numbers, links, IMEX on and off.

    use std::path::Path;

    use super::*;

    fn inputs(imex: Option<Imex>) -> Inputs {
        Inputs {
            driver_version: "580.65.06".to_owned(),
            gpu_count: 4,
            library: PathBuf::from("/usr/local/lib/libnvidia-ml.so.1"),
            check_fabric: PathBuf::from("/usr/local/bin/check-fabric"),
            nvidia_smi: PathBuf::from("/usr/local/bin/nvidia-smi"),
            profile_staged: b"staged".to_vec(),
            imex,
            imex_binaries: None,
            mig: None,
        }
    }

    #[test]
    fn a_mig_capable_profile_gets_the_table_and_its_caps_nodes_and_others_lose_them() {
        let layout = Layout::new(PathBuf::from("/r"));
        let mut with = inputs(None);
        with.mig = Some(MigCaps {
            gpu_minors: vec![0, 1],
            caps_major: DeviceMajor::new(236).expect("a valid major"),
        });
        let planned = plan(&layout, &with);
        let table = planned.entries.iter().find_map(|entry| match entry {
            Entry::File {
                path,
                contents: Contents::Text(text),
                ..
            } if path == Path::new("/r/driver/proc/driver/nvidia-caps/mig-minors") => {
                Some(text.clone())
            }
            _ => None,
        });
        assert_eq!(table, Some(mig_minors::format(&[0, 1])));
        let caps: Vec<(PathBuf, u32, u32)> = planned
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::CharDevice { path, major, minor }
                    if path.starts_with("/r/driver/dev/nvidia-caps/") =>
                {
                    Some((path.clone(), *major, *minor))
                }
                _ => None,
            })
            .collect();
        assert_eq!(caps.len(), 2 + 2 * 135);
        assert!(caps.contains(&(
            PathBuf::from("/r/driver/dev/nvidia-caps/nvidia-cap13"),
            236,
            13
        )));
        assert!(caps.contains(&(
            PathBuf::from("/r/driver/dev/nvidia-caps/nvidia-cap272"),
            236,
            272
        )));
        assert!(!planned.absent.contains(&layout.mig_minors()));
        let file = |path: &str| {
            planned.entries.iter().find_map(|entry| match entry {
                Entry::File {
                    path: at,
                    contents: Contents::Text(text),
                    ..
                } if at == Path::new(path) => Some(text.clone()),
                _ => None,
            })
        };
        let capabilities = "/r/driver/proc/driver/nvidia/capabilities";
        assert_eq!(
            file(&format!("{capabilities}/gpu1/mig/gi2/ci3/access")),
            mig_minors::ci_minor(1, 2, 3).map(|minor| mig_minors::access_file(minor, 0o444))
        );
        assert_eq!(
            file(&format!("{capabilities}/mig/config")),
            Some(mig_minors::access_file(1, 0o400))
        );

        let without = plan(&layout, &inputs(None));
        assert!(without.absent.contains(&layout.mig_minors()));
        for dir in ["mig", "gpu0", "gpu3"] {
            assert!(
                without
                    .absent
                    .contains(&layout.capabilities_dir().join(dir)),
                "{dir}"
            );
        }
        assert!(without
            .entries
            .iter()
            .all(|entry| !entry.path().starts_with(layout.caps_dir())));
        assert!(without.exclusive_dirs.contains(&layout.dev_dir()));
    }

    #[test]
    fn an_imex_payload_puts_the_daemon_and_ctl_in_usr_bin_and_none_removes_them() {
        let layout = Layout::default();
        let mut with = inputs(None);
        with.imex_binaries = Some(ImexBinaries {
            daemon: b"shim+daemon".to_vec(),
            ctl: PathBuf::from("/imex-payload/nvidia-imex-ctl"),
        });
        let planned = plan(&layout, &with);
        let file = |path: &Path| {
            planned.entries.iter().find_map(|entry| match entry {
                Entry::File {
                    path: at,
                    contents,
                    mode,
                } if at == path => Some((contents.clone(), *mode)),
                _ => None,
            })
        };
        assert_eq!(
            file(&layout.imex_daemon()),
            Some((Contents::Bytes(b"shim+daemon".to_vec()), 0o755))
        );
        assert_eq!(
            file(&layout.imex_ctl()),
            Some((
                Contents::CopyOf(PathBuf::from("/imex-payload/nvidia-imex-ctl")),
                0o755
            ))
        );
        assert!(layout.imex_daemon().starts_with(layout.bin_dir()));
        // Without: not planned in the exclusive usr/bin, so pruned.
        let without = plan(&layout, &inputs(None));
        assert!(without.exclusive_dirs.contains(&layout.bin_dir()));
        assert!(
            !without
                .entries
                .iter()
                .any(|entry| entry.path() == layout.imex_daemon()
                    || entry.path() == layout.imex_ctl())
        );
    }

    fn imex(count: u32) -> Imex {
        Imex {
            proc_devices: "Character devices:\n240 nvidia-caps-imex-channels\n\nBlock devices:\n"
                .to_owned(),
            channel_count: count,
            channel_major: DeviceMajor::new(240).unwrap_or_else(|err| panic!("{err}")),
        }
    }

    fn devices(plan: &Plan) -> Vec<(String, u32, u32)> {
        plan.entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::CharDevice { path, major, minor } => {
                    let name = path
                        .strip_prefix("/r/driver/dev")
                        .ok()?
                        .display()
                        .to_string();
                    Some((name, *major, *minor))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn gpu_nodes_follow_the_nvidia_numbering() {
        let plan = plan(&Layout::new(PathBuf::from("/r")), &inputs(None));
        let expected: Vec<(String, u32, u32)> = [
            ("nvidia0", 195, 0),
            ("nvidia1", 195, 1),
            ("nvidia2", 195, 2),
            ("nvidia3", 195, 3),
            ("nvidiactl", 195, 255),
            ("nvidia-uvm", 510, 0),
            ("nvidia-uvm-tools", 510, 1),
        ]
        .iter()
        .map(|(name, major, minor)| ((*name).to_owned(), *major, *minor))
        .collect();
        assert_eq!(devices(&plan), expected);
    }

    #[test]
    fn library_links_chain_to_the_versioned_file() {
        let plan = plan(&Layout::new(PathBuf::from("/r")), &inputs(None));
        let links: Vec<(&Path, &Path)> = plan
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::Symlink { path, target } => Some((path.as_path(), target.as_path())),
                _ => None,
            })
            .collect();
        assert_eq!(
            links,
            [
                (
                    Path::new("/r/driver/usr/lib64/libnvidia-ml.so.1"),
                    Path::new("libnvidia-ml.so.580.65.06")
                ),
                (
                    Path::new("/r/driver/usr/lib64/libnvidia-ml.so"),
                    Path::new("libnvidia-ml.so.1")
                ),
            ]
        );
        assert!(plan.entries.contains(&Entry::File {
            path: PathBuf::from("/r/driver/usr/lib64/libnvidia-ml.so.580.65.06"),
            contents: Contents::CopyOf(PathBuf::from("/usr/local/lib/libnvidia-ml.so.1")),
            mode: 0o755,
        }));
    }

    #[test]
    fn imex_adds_channels_caps_and_proc_devices() {
        let plan = plan(&Layout::new(PathBuf::from("/r")), &inputs(Some(imex(3))));
        let channels: Vec<(String, u32, u32)> = devices(&plan)
            .into_iter()
            .filter(|(name, ..)| name.starts_with("nvidia-caps-imex-channels/"))
            .collect();
        assert_eq!(
            channels,
            [
                ("nvidia-caps-imex-channels/channel0".to_owned(), 240, 0),
                ("nvidia-caps-imex-channels/channel1".to_owned(), 240, 1),
                ("nvidia-caps-imex-channels/channel2".to_owned(), 240, 2),
            ]
        );
        assert!(plan.entries.contains(&Entry::File {
            path: PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/fabric-imex-mgmt"),
            contents: Contents::Text(IMEX_CAPS_CONTENTS.to_owned()),
            mode: 0o644,
        }));
        assert!(plan
            .entries
            .iter()
            .any(|entry| entry.path() == Path::new("/r/imex/proc-devices")));
        assert_eq!(
            plan.absent,
            [
                PathBuf::from("/r/driver/proc/driver/nvidia-caps/mig-minors"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/mig"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu0"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu1"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu2"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu3"),
                PathBuf::from("/r/topology"),
                PathBuf::from("/r/driver/config/config.yaml"),
                PathBuf::from("/r/driver/topology/topology.yaml"),
            ],
            "no MIG table or MIG capability files, the legacy topology dir and YAML files"
        );
        assert!(plan
            .exclusive_dirs
            .contains(&PathBuf::from("/r/driver/dev/nvidia-caps-imex-channels")));
    }

    #[test]
    fn without_imex_the_surface_is_absent() {
        let plan = plan(&Layout::new(PathBuf::from("/r")), &inputs(None));
        assert!(!plan
            .entries
            .iter()
            .any(|entry| entry.path().starts_with("/r/imex")
                || entry.path().starts_with("/r/driver/proc")));
        assert_eq!(
            plan.absent,
            [
                PathBuf::from("/r/imex"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/fabric-imex-mgmt"),
                PathBuf::from("/r/driver/dev/nvidia-caps-imex-channels"),
                PathBuf::from("/r/driver/proc/driver/nvidia-caps/mig-minors"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/mig"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu0"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu1"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu2"),
                PathBuf::from("/r/driver/proc/driver/nvidia/capabilities/gpu3"),
                PathBuf::from("/r/topology"),
                PathBuf::from("/r/driver/config/config.yaml"),
                PathBuf::from("/r/driver/topology/topology.yaml"),
            ]
        );
    }

    #[test]
    fn parents_come_before_children() {
        let plan = plan(&Layout::new(PathBuf::from("/r")), &inputs(Some(imex(2))));
        // Directories are created with their parents; everything else needs a planned directory.
        for (position, entry) in plan.entries.iter().enumerate() {
            if matches!(entry, Entry::Dir { .. }) {
                continue;
            }
            let Some(parent) = entry.path().parent() else {
                continue;
            };
            let parent_at = plan
                .entries
                .iter()
                .position(|it| matches!(it, Entry::Dir { path } if path == parent));
            assert!(
                matches!(parent_at, Some(at) if at < position),
                "{} is planned before its directory",
                entry.path().display()
            );
        }
    }
}
