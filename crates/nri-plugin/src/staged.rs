//! Looks at the node's staged tree: the only filesystem access of the injection path.
//!
//! The plugin's pod mounts the host overlay dir read-only at the same path, so
//! a `stat` here sees the device numbers, modes and owners the container will get.
//! Every problem becomes a warning in the [`Staged`] snapshot; nothing fails.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use node_layout::channels::ChannelSelector;
use node_layout::paths::{self, Layout};
use node_layout::{mig_minors, mig_state};

use crate::gpus::{self, GpuId, GpuRequest, StagedGpu};
use crate::mig::MigView;
use crate::plan::{DeviceNode, Policy, Staged, Wants};

/// The largest staged profile read to resolve GPU UUIDs (as the mock library's limit).
const MAX_PROFILE_BYTES: u64 = 4 << 20;
/// The largest staged `mig-minors` read (the real driver's 32 GPUs take about 100 KiB).
const MAX_MIG_MINORS_BYTES: u64 = 1 << 20;

/// Takes the snapshot one container's injection needs.
pub fn snapshot(policy: &Policy, wants: &Wants) -> Staged {
    let layout = Layout::new(policy.overlay_host.clone());
    let mut staged = Staged {
        overlay_present: layout.root().is_dir(),
        ..Staged::default()
    };
    if !staged.overlay_present {
        return staged;
    }
    staged.topology_present = !policy.node_name.is_empty() && layout.topology().is_file();
    staged.proc = crate::proc_view::Present {
        proc_driver: layout.proc_driver_dir().is_dir(),
        proc_devices: layout.proc_devices().is_file(),
    };
    if wants.gpus || wants.request != GpuRequest::Unspecified {
        staged.gpu_nodes = gpu_nodes(&layout.dev_dir(), &mut staged.warnings);
    }
    let mut mig = MigView::default();
    if let GpuRequest::Listed(ids) = &wants.request {
        staged.gpus = gpu_table(&layout.config(), &mut staged.warnings);
        if ids.iter().any(|id| matches!(id, GpuId::Mig(_))) {
            mig = mig_view(&layout, &mut staged.warnings);
        }
    }
    let resolved = gpus::resolve(&wants.request, &staged.gpus, &mig);
    staged.granted = resolved.granted;
    staged.warnings.extend(resolved.warnings);
    staged.cap_nodes = resolved
        .caps
        .into_iter()
        .filter_map(|minor| {
            let host = layout.cap_node(minor);
            let stat = fs::metadata(&host);
            let path = paths::container_cap_device(minor);
            device_node(
                &host,
                stat,
                path.to_string_lossy().into_owned(),
                &mut staged.warnings,
            )
        })
        .collect();
    staged.channel_nodes = channel_nodes(&layout, &wants.channels, &mut staged.warnings);
    staged
}

/// A regular file of at most `max` bytes.
fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.len() <= max => {
            fs::read(path).map_err(|err| err.to_string())
        }
        Ok(_) => Err(format!("not a regular file of at most {max} bytes")),
        Err(err) => Err(err.to_string()),
    }
}

/// The node's MIG partition (the MIG state file; none yet: no MIG device) and the staged
/// capability table; what cannot be read becomes a warning and resolves no MIG device.
fn mig_view(layout: &Layout, warnings: &mut Vec<String>) -> MigView {
    let state_file = layout.mig_state();
    let state = match read_bounded(&state_file, mig_state::MAX_FILE_BYTES) {
        Err(_) if !state_file.exists() => Ok(mig_state::MigState::default()),
        read => read.and_then(|bytes| {
            let text = String::from_utf8(bytes).map_err(|err| err.to_string())?;
            mig_state::parse(&text).map_err(|err| err.to_string())
        }),
    };
    let table_file = layout.mig_minors();
    let minors = read_bounded(&table_file, MAX_MIG_MINORS_BYTES)
        .map(|bytes| mig_minors::parse(&String::from_utf8_lossy(&bytes)));
    let mut view = MigView::default();
    match state {
        Ok(state) => view.state = state,
        Err(err) => warnings.push(format!(
            "cannot read the MIG state {}: {err}; MIG devices cannot be resolved",
            state_file.display()
        )),
    }
    match minors {
        Ok(minors) => view.minors = minors,
        Err(err) => warnings.push(format!(
            "cannot read the staged {}: {err}; MIG devices cannot be resolved",
            table_file.display()
        )),
    }
    view
}

/// The staged profile's GPUs (index, UUID, minor), which map a request's UUIDs and indices to
/// device nodes; a profile that cannot be read or parsed gives none, with a warning.
fn gpu_table(config: &Path, warnings: &mut Vec<String>) -> Vec<StagedGpu> {
    let profile = read_bounded(config, MAX_PROFILE_BYTES).and_then(|bytes| parse_profile(&bytes));
    match profile {
        Ok(profile) => profile
            .devices()
            .into_iter()
            .map(|device| StagedGpu {
                index: device.index,
                uuid: device.uuid,
                minor: device.minor_number,
            })
            .collect(),
        Err(err) => {
            warnings.push(format!(
                "cannot read the staged profile {}: {err}; the requested GPUs cannot be resolved",
                config.display()
            ));
            Vec::new()
        }
    }
}

/// The staged profile's bytes as a profile, in the form the stager writes (the one place here
/// that knows that form: `nvml_profile::staged`, decoded and validated as the library does).
fn parse_profile(bytes: &[u8]) -> Result<nvml_profile::Profile, String> {
    nvml_profile::staged::decode(bytes).map_err(|err| err.to_string())
}

/// The glibc encoding of `st_rdev`: (major, minor).
pub fn decode_rdev(rdev: u64) -> (i64, i64) {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & 0xffff_f000);
    let minor = (rdev & 0xff) | ((rdev >> 12) & 0xffff_ff00);
    // Both fit in 32 bits after the shifts, so the casts are lossless.
    (major as i64, minor as i64)
}

/// Every `nvidia*` character device in the staged dev dir, sorted by container path.
fn gpu_nodes(dev_dir: &Path, warnings: &mut Vec<String>) -> Vec<DeviceNode> {
    let entries = match fs::read_dir(dev_dir) {
        Ok(entries) => entries,
        Err(err) => {
            warnings.push(format!(
                "cannot list GPU device nodes in {}: {err}; no GPU nodes injected",
                dev_dir.display()
            ));
            return Vec::new();
        }
    };
    let mut nodes: Vec<DeviceNode> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            name.starts_with(paths::GPU_NODE_PREFIX).then_some(name)
        })
        .filter_map(|name| {
            let host = dev_dir.join(&name);
            match fs::metadata(&host) {
                Ok(meta) if meta.is_dir() => None,
                stat => device_node(
                    &host,
                    stat,
                    paths::container_gpu_device(&name)
                        .to_string_lossy()
                        .into_owned(),
                    warnings,
                ),
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.container_path.cmp(&b.container_path));
    if nodes.is_empty() {
        warnings.push(format!(
            "no GPU device nodes staged in {}",
            dev_dir.display()
        ));
    }
    nodes
}

/// The selected channel nodes, sorted by index.
fn channel_nodes(
    layout: &Layout,
    selector: &ChannelSelector,
    warnings: &mut Vec<String>,
) -> Vec<DeviceNode> {
    let indices: Vec<u32> = match selector {
        ChannelSelector::None => return Vec::new(),
        ChannelSelector::Some(indices) => indices.iter().copied().collect(),
        ChannelSelector::All => match fs::read_dir(layout.channel_dir()) {
            Ok(entries) => {
                let mut indices: Vec<u32> = entries
                    .filter_map(Result::ok)
                    .filter_map(|entry| paths::parse_channel_file_name(entry.file_name().to_str()?))
                    .collect();
                indices.sort_unstable();
                indices
            }
            Err(err) => {
                warnings.push(format!(
                    "cannot list IMEX channels in {}: {err}; no channels injected",
                    layout.channel_dir().display()
                ));
                return Vec::new();
            }
        },
    };
    let mut missing = Vec::new();
    let nodes: Vec<DeviceNode> = indices
        .into_iter()
        .filter_map(|index| {
            let host = layout.channel_node(index);
            let stat = fs::metadata(&host);
            if stat
                .as_ref()
                .is_err_and(|err| err.kind() == std::io::ErrorKind::NotFound)
            {
                missing.push(index);
                return None;
            }
            device_node(
                &host,
                stat,
                paths::container_channel_device(index)
                    .to_string_lossy()
                    .into_owned(),
                warnings,
            )
        })
        .collect();
    if !missing.is_empty() {
        warnings.push(format!(
            "{} selected IMEX channel(s) not staged in {} (first: channel{}); injected the {} that are",
            missing.len(),
            layout.channel_dir().display(),
            missing[0],
            nodes.len()
        ));
    }
    nodes
}

/// Turns a staged node's stat into a device; anything but a character device is skipped with a warning.
fn device_node(
    host: &Path,
    stat: std::io::Result<fs::Metadata>,
    container_path: String,
    warnings: &mut Vec<String>,
) -> Option<DeviceNode> {
    match stat {
        Ok(meta) if meta.file_type().is_char_device() => {
            let (major, minor) = decode_rdev(meta.rdev());
            Some(DeviceNode {
                container_path,
                major,
                minor,
                mode: meta.mode() & 0o777,
                uid: meta.uid(),
                gid: meta.gid(),
            })
        }
        Ok(_) => {
            warnings.push(format!(
                "{} is not a character device; skipped",
                host.display()
            ));
            None
        }
        Err(err) => {
            warnings.push(format!("cannot stat {}: {err}; skipped", host.display()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    use super::*;
    use crate::mig::MigId;

    /// A staged tree whose device nodes are symlinks to /dev/null (char 1:3), so no root is needed.
    fn tree(channels: &[u32]) -> (tempfile::TempDir, Policy) {
        let dir = tempfile::tempdir().expect("temp dir");
        let layout = Layout::new(dir.path().to_path_buf());
        fs::create_dir_all(layout.channel_dir()).expect("channel dir");
        for index in channels {
            symlink("/dev/null", layout.channel_node(*index)).expect("symlink");
        }
        symlink("/dev/null", layout.gpu_node(0)).expect("symlink");
        symlink("/dev/null", layout.dev_dir().join("nvidiactl")).expect("symlink");
        fs::write(layout.dev_dir().join("nvidia-broken"), "").expect("file");
        fs::write(layout.channel_dir().join("README"), "").expect("file");
        let policy = Policy {
            overlay_host: dir.path().to_path_buf(),
            overlay_mount: PathBuf::from("/opt/nvml-mock"),
            node_name: "n".to_owned(),
            opt_out_annotation: String::new(),
            device_annotation: String::new(),
            imex_channel_annotation: String::new(),
            excluded_namespaces: BTreeSet::new(),
        };
        (dir, policy)
    }

    fn wants(gpus: bool, channels: ChannelSelector) -> Wants {
        Wants {
            gpus,
            request: GpuRequest::Unspecified,
            channels,
            warnings: Vec::new(),
        }
    }

    /// Asserts that the snapshot warned exactly once, with a warning `expected` accepts.
    fn assert_one_warning(staged: &Staged, expected: impl Fn(&str) -> bool) {
        assert_eq!(staged.warnings.len(), 1, "{:?}", staged.warnings);
        assert!(expected(&staged.warnings[0]), "{:?}", staged.warnings);
    }

    fn paths(nodes: &[DeviceNode]) -> Vec<&str> {
        nodes
            .iter()
            .map(|node| node.container_path.as_str())
            .collect()
    }

    #[test]
    fn all_channels_sorted_by_index_and_gpu_nodes_sorted_by_path() {
        let (_dir, policy) = tree(&[10, 2, 0]);
        let staged = snapshot(&policy, &wants(true, ChannelSelector::All));
        assert!(staged.overlay_present);
        assert!(!staged.topology_present);
        assert_eq!(
            paths(&staged.channel_nodes),
            [
                "/dev/nvidia-caps-imex-channels/channel0",
                "/dev/nvidia-caps-imex-channels/channel2",
                "/dev/nvidia-caps-imex-channels/channel10"
            ]
        );
        assert_eq!(paths(&staged.gpu_nodes), ["/dev/nvidia0", "/dev/nvidiactl"]);
        assert_eq!(
            (staged.gpu_nodes[0].major, staged.gpu_nodes[0].minor),
            (1, 3)
        );
        assert_one_warning(&staged, |warning| {
            warning.contains("nvidia-broken is not a character device")
        });
    }

    #[test]
    fn a_request_is_resolved_through_the_staged_profile() {
        let (dir, policy) = tree(&[]);
        let config = Layout::new(dir.path().to_path_buf()).config();
        fs::create_dir_all(config.parent().expect("config dir")).expect("config dir");
        let profile = nvml_profile::Profile::parse(nvml_profile::GB200).expect("gb200");
        fs::write(&config, nvml_profile::staged::encode(&profile)).expect("profile");
        let uuid = profile.devices()[2].uuid.clone();
        let mut listed = wants(false, ChannelSelector::None);
        listed.request = GpuRequest::Listed(vec![gpus::GpuId::Uuid(uuid)]);
        let staged = snapshot(&policy, &listed);
        assert_eq!(staged.gpus.len(), profile.devices().len());
        assert_eq!(
            staged.granted,
            Some(gpus::Granted::Minors(
                [profile.devices()[2].minor_number].into()
            ))
        );
        // Every staged node is listed; the planner keeps the granted ones.
        assert_eq!(paths(&staged.gpu_nodes), ["/dev/nvidia0", "/dev/nvidiactl"]);

        // A YAML profile is not the staged form: refused like a broken one.
        fs::write(&config, nvml_profile::GB200).expect("profile");
        let staged = snapshot(&policy, &listed);
        assert_eq!(staged.granted, Some(gpus::Granted::Minors([].into())));
        assert!(
            staged
                .warnings
                .iter()
                .any(|warning| warning.starts_with("cannot read the staged profile")),
            "{:?}",
            staged.warnings
        );
    }

    #[test]
    fn a_mig_device_gets_its_capability_nodes_from_the_staged_table() {
        let (dir, policy) = tree(&[]);
        let layout = Layout::new(dir.path().to_path_buf());
        fs::create_dir_all(layout.config_dir()).expect("config dir");
        let profile = nvml_profile::Profile::parse(nvml_profile::GB200).expect("gb200");
        fs::write(layout.config(), nvml_profile::staged::encode(&profile)).expect("profile");
        fs::write(
            layout.mig_state(),
            "gpu=1 current=1 pending=1\ngi gpu=1 id=2 profile=19 start=1 size=1\nci gpu=1 gi=2 id=0 profile=0 start=0 size=1\n",
        )
        .expect("state");
        let minor = profile.devices()[1].minor_number;
        let table = layout.mig_minors();
        fs::create_dir_all(table.parent().expect("parent")).expect("proc dir");
        fs::write(&table, mig_minors::format(&[minor])).expect("table");
        fs::create_dir_all(layout.caps_dir()).expect("caps dir");
        let [gi_cap, ci_cap] = mig_minors::device_minors(minor, 2, 0).expect("caps");
        symlink("/dev/null", layout.cap_node(gi_cap)).expect("symlink");
        let mut listed = wants(false, ChannelSelector::None);
        let ids = ["1:2:0", "1:3:0"].map(|text| GpuId::Mig(MigId::parse(text).expect("id")));
        listed.request = GpuRequest::Listed(ids.to_vec());
        let staged = snapshot(&policy, &listed);
        assert_eq!(staged.granted, Some(gpus::Granted::Minors([minor].into())));
        assert_eq!(
            paths(&staged.cap_nodes),
            [format!("/dev/nvidia-caps/nvidia-cap{gi_cap}")]
        );
        // The tree's broken GPU node, the unknown device, the missing capability node.
        assert_eq!(staged.warnings.len(), 3, "{:?}", staged.warnings);
        assert!(staged.warnings[1].starts_with("MIG device 1:3:0 is not in"));
        assert!(staged.warnings[2].contains(&format!("nvidia-cap{ci_cap}: ")));

        // Without the table nothing resolves, with a warning.
        fs::remove_file(&table).expect("remove");
        let staged = snapshot(&policy, &listed);
        assert!(staged.cap_nodes.is_empty());
        assert!(
            staged
                .warnings
                .iter()
                .any(|warning| warning.starts_with("cannot read the staged")),
            "{:?}",
            staged.warnings
        );
    }

    #[test]
    fn selected_channels_report_the_missing_ones() {
        let (_dir, policy) = tree(&[0, 1]);
        let selector = ChannelSelector::Some([1, 5, 6].into_iter().collect());
        let staged = snapshot(&policy, &wants(false, selector));
        assert_eq!(
            paths(&staged.channel_nodes),
            ["/dev/nvidia-caps-imex-channels/channel1"]
        );
        assert!(staged.gpu_nodes.is_empty());
        assert_one_warning(&staged, |warning| {
            warning.starts_with("2 selected IMEX channel(s) not staged")
        });
    }

    #[test]
    fn missing_pieces_become_warnings() {
        let (dir, policy) = tree(&[]);
        fs::remove_dir_all(Layout::new(dir.path().to_path_buf()).channel_dir()).expect("remove");
        let staged = snapshot(&policy, &wants(false, ChannelSelector::All));
        assert!(staged.channel_nodes.is_empty());
        assert!(
            staged.warnings[0].starts_with("cannot list IMEX channels"),
            "{:?}",
            staged.warnings
        );

        let mut gone = policy.clone();
        gone.overlay_host = dir.path().join("absent");
        let staged = snapshot(&gone, &wants(true, ChannelSelector::All));
        assert_eq!(staged, Staged::default());
    }

    #[test]
    fn topology_needs_a_node_name_and_the_file() {
        let (dir, mut policy) = tree(&[]);
        let topology = Layout::new(dir.path().to_path_buf()).topology();
        fs::create_dir_all(topology.parent().expect("parent")).expect("dir");
        fs::write(&topology, "version: v1\n").expect("file");
        assert!(snapshot(&policy, &wants(false, ChannelSelector::None)).topology_present);
        policy.node_name.clear();
        assert!(!snapshot(&policy, &wants(false, ChannelSelector::None)).topology_present);
    }

    #[test]
    fn rdev_decoding_matches_glibc() {
        // makedev(major, minor) in glibc's encoding.
        let makedev = |major: u64, minor: u64| {
            ((major & 0xffff_f000) << 32)
                | ((major & 0xfff) << 8)
                | ((minor & 0xffff_ff00) << 12)
                | (minor & 0xff)
        };
        for (major, minor) in [
            (0, 0),
            (1, 3),
            (195, 255),
            (511, 2047),
            (4095, 1 << 20),
            (4096, 256),
        ] {
            assert_eq!(
                decode_rdev(makedev(major, minor)),
                (major as i64, minor as i64)
            );
        }
    }
}
