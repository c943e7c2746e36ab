//! Per-process GPU visibility, as the real driver gives a container: NVML lists only the GPUs
//! whose device node `/dev/nvidia<minor>` the process can see, numbered from 0, each keeping its
//! own UUID, bus id, minor number and fabric identity.
//!
//! The rule (upstream's, pinned by the tests): when every GPU's node exists, or none does (a
//! host or a plugin that reads the driver root without the nodes in `/dev`), nothing is
//! filtered. [`select`] is the pure decision; [`present_minors`] the probe (one `stat` per GPU,
//! once per profile load and dev root: `state.rs` keeps the result), under `MOCK_NVML_DEV_ROOT` (default `/dev`).
//!
//! MIG devices likewise: a container given a MIG device has its GPU instance's and compute
//! instance's capability nodes (`nvidia-caps/nvidia-cap<N>`, [`node_layout::mig_minors`]) and
//! sees only the MIG devices whose two nodes it has; without any MIG access node nothing is
//! filtered. [`select_mig`] decides, [`present_caps`] probes (one directory read per call).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use node_layout::{
    env::{DEFAULT_DEV_ROOT, MOCK_NVML_DEV_ROOT},
    mig_minors,
    paths::{CAPS_DIR_NAME, CAP_NODE_PREFIX, GPU_CONTROL_NODES, GPU_NODE_PREFIX},
};

/// `nvidiactl`, the driver's control node.
const CONTROL_NODE: &str = GPU_CONTROL_NODES[0];

/// Which of the profile's GPUs a process sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    /// Every GPU, in the profile's order (no filtering).
    All,
    /// Only these positions of the profile's GPU list, in order; visible index `n` is the
    /// profile's GPU `positions[n]`.
    Only(Vec<usize>),
}

/// Decides visibility from the profile's minor numbers (in index order) and the minors whose
/// node is present: the GPUs whose node is present, unless all or none are.
pub fn select(minors: &[u32], present: &[u32]) -> Visibility {
    let positions: Vec<usize> = minors
        .iter()
        .enumerate()
        .filter(|(_, minor)| present.contains(minor))
        .map(|(position, _)| position)
        .collect();
    if positions.is_empty() || positions.len() == minors.len() {
        Visibility::All
    } else {
        Visibility::Only(positions)
    }
}

/// The directory holding the device nodes: `MOCK_NVML_DEV_ROOT`, else `/dev`.
pub fn dev_root() -> PathBuf {
    std::env::var_os(MOCK_NVML_DEV_ROOT)
        .filter(|value| !value.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_DEV_ROOT), PathBuf::from)
}

/// The minors among `minors` whose `<root>/nvidia<minor>` exists (anything that `stat`s,
/// following links: a container's node is a character device, a test's a plain file).
///
/// Without `<root>/nvidiactl` none counts as present, after that one `stat`: no GPU node is
/// usable without the control node (the real library fails init), every container that is
/// given GPUs gets it (NVIDIA's toolkit, CDI specs, the NRI plugin), and a host without the
/// nodes, the common case outside containers, pays one `stat` instead of one per GPU.
pub fn present_minors(root: &Path, minors: &[u32]) -> Vec<u32> {
    if root.join(CONTROL_NODE).metadata().is_err() {
        return Vec::new();
    }
    minors
        .iter()
        .copied()
        .filter(|minor| {
            root.join(format!("{GPU_NODE_PREFIX}{minor}"))
                .metadata()
                .is_ok()
        })
        .collect()
}

/// The minors `N` whose `<root>/nvidia-caps/nvidia-cap<N>` exists; none without the directory.
pub fn present_caps(root: &Path) -> BTreeSet<u32> {
    let Ok(entries) = std::fs::read_dir(root.join(CAPS_DIR_NAME)) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            name.to_str()?.strip_prefix(CAP_NODE_PREFIX)?.parse().ok()
        })
        .collect()
}

/// The MIG devices `(gi, ci)` of the GPU with device minor `gpu_minor` that a process holding the
/// capability nodes `present` sees: those whose GPU and compute instance capabilities are both
/// present, as the real driver lets a container reach only them; every one when no MIG access
/// capability is present (a host, or a plugin that reads the driver root without the nodes in
/// its `/dev`, as for GPU nodes).
pub fn select_mig(
    gpu_minor: u32,
    devices: Vec<(u32, u32)>,
    present: &BTreeSet<u32>,
) -> Vec<(u32, u32)> {
    let (_, monitor) = mig_minors::MONITOR;
    if present.range(monitor + 1..).next().is_none() {
        return devices;
    }
    devices
        .into_iter()
        .filter(|&(gi, ci)| {
            mig_minors::device_minors(gpu_minor, gi, ci)
                .is_some_and(|caps| caps.iter().all(|cap| present.contains(cap)))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn all_or_none_present_means_no_filtering() {
        assert_eq!(select(&[0, 1, 2, 3], &[0, 1, 2, 3]), Visibility::All);
        assert_eq!(select(&[0, 1, 2, 3], &[]), Visibility::All);
        assert_eq!(select(&[], &[]), Visibility::All);
        // Nodes of minors the profile does not have change nothing.
        assert_eq!(select(&[0, 1], &[7, 8]), Visibility::All);
        assert_eq!(select(&[0, 1], &[0, 1, 7]), Visibility::All);
    }

    #[test]
    fn a_subset_is_listed_in_profile_order_by_minor() {
        assert_eq!(select(&[0, 1, 2, 3], &[3, 1]), Visibility::Only(vec![1, 3]));
        // Minors need not equal indices: position is what is kept.
        assert_eq!(select(&[4, 5, 6, 7], &[6, 9]), Visibility::Only(vec![2]));
    }

    #[test]
    fn the_probe_stats_one_node_per_gpu_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("nvidia1"), "").unwrap();
        std::fs::write(dir.path().join("nvidia3"), "").unwrap();
        std::fs::write(dir.path().join("nvidiactl"), "").unwrap();
        std::os::unix::fs::symlink("/nonexistent", dir.path().join("nvidia2")).unwrap();
        assert_eq!(present_minors(dir.path(), &[0, 1, 2, 3]), vec![1, 3]);
        // Without the control node no GPU node counts.
        std::fs::remove_file(dir.path().join("nvidiactl")).unwrap();
        assert_eq!(present_minors(dir.path(), &[0, 1, 2, 3]), Vec::<u32>::new());
        assert_eq!(
            present_minors(&dir.path().join("absent"), &[0, 1]),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn mig_devices_need_both_capability_nodes_once_any_is_present() {
        let devices = vec![(1, 0), (2, 0), (2, 1)];
        // No MIG access node (none, or only config/monitor): nothing filtered.
        assert_eq!(select_mig(0, devices.clone(), &BTreeSet::new()), devices);
        assert_eq!(select_mig(0, devices.clone(), &[1, 2].into()), devices);
        // gpu0/gi2: 21, its ci0 22, ci1 23.
        let gi2 = mig_minors::gi_minor(0, 2).unwrap();
        assert_eq!(
            select_mig(0, devices.clone(), &[gi2, gi2 + 1].into()),
            [(2, 0)]
        );
        // The GPU instance's node alone reaches no device; another GPU's nodes reach nothing here.
        assert_eq!(select_mig(0, devices.clone(), &[gi2].into()), []);
        let other = mig_minors::device_minors(1, 2, 0).unwrap();
        assert_eq!(select_mig(0, devices, &other.into()), []);
    }

    #[test]
    fn the_caps_probe_reads_the_nodes_names() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(present_caps(dir.path()), BTreeSet::new());
        let caps = dir.path().join("nvidia-caps");
        std::fs::create_dir(&caps).unwrap();
        for name in ["nvidia-cap21", "nvidia-cap22", "nvidia-capx", "other"] {
            std::fs::write(caps.join(name), "").unwrap();
        }
        assert_eq!(present_caps(dir.path()), [21, 22].into());
    }
}
