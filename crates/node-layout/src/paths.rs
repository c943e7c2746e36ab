//! Every path of the staged tree, on the host and inside containers.
//!
//! The stager writes the tree under a host root (default [`DEFAULT_HOST_ROOT`]);
//! the NRI plugin bind-mounts that root read-only at [`CONTAINER_ROOT`], so the
//! tree has the same shape on both sides.
//! [`Layout`] spells every path relative to one root: build it with the host root
//! to stage, or with the container root (see [`Layout::container`]) for the
//! values injected into a container's environment.
//!
//! Device nodes are the exception: containers do not use the staged nodes under
//! the mount but get them as real devices at [`DEVICE_DIR`] and
//! [`CHANNEL_DEVICE_DIR`] (see [`container_gpu_device`] and
//! [`container_channel_device`]).

use std::path::{Path, PathBuf};

/// The default host root of the staged tree.
pub const DEFAULT_HOST_ROOT: &str = "/var/lib/nvml-mock";

/// Where the stager's pod mounts the host root (the chart's DaemonSet): its `--overlay-dir`
/// default, for the stager and its `inject` and `nvidia-smi` commands.
pub const STAGER_MOUNT: &str = "/host/var/lib/nvml-mock";

/// Where the staged tree is mounted inside a container.
pub const CONTAINER_ROOT: &str = "/opt/nvml-mock";

/// Where GPU device nodes appear inside a container.
pub const DEVICE_DIR: &str = "/dev";

/// Where IMEX channel device nodes appear inside a container.
pub const CHANNEL_DEVICE_DIR: &str = "/dev/nvidia-caps-imex-channels";

/// The name of the IMEX channel directory, under [`Layout::dev_dir`] and under `/dev`.
pub const CHANNEL_DIR_NAME: &str = "nvidia-caps-imex-channels";

/// The prefix of an IMEX channel node's file name (`channel<i>`).
pub const CHANNEL_PREFIX: &str = "channel";

/// The directory of the capability nodes under `/dev` (MIG access, IMEX management).
pub const CAPS_DIR_NAME: &str = "nvidia-caps";

/// The prefix of a capability node's file name (`nvidia-cap<minor>`).
pub const CAP_NODE_PREFIX: &str = "nvidia-cap";

/// Where the kernel shows the driver's files; the staged [`Layout::proc_driver_dir`] is mounted
/// there in injected containers.
pub const PROC_DRIVER: &str = "/proc/driver";

/// Where the kernel lists the character device majors; the staged [`Layout::proc_devices`] is
/// mounted there in injected containers.
pub const PROC_DEVICES: &str = "/proc/devices";

/// The MIG capability table in the driver root, where the real driver has it under `/proc`.
pub const MIG_MINORS_IN_DRIVER: &str = "proc/driver/nvidia-caps/mig-minors";

/// The prefix every GPU device node's file name starts with.
pub const GPU_NODE_PREFIX: &str = "nvidia";

/// The per-node control devices staged beside `nvidia<i>`.
pub const GPU_CONTROL_NODES: [&str; 3] = ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"];

/// The mock library's soname.
pub const LIBRARY_SONAME: &str = "libnvidia-ml.so.1";

/// The mock library's development link name.
pub const LIBRARY_DEV_LINK: &str = "libnvidia-ml.so";

/// The fabric checker's file name in [`Layout::bin_dir`].
pub const CHECK_FABRIC: &str = "check-fabric";

/// The mock driver's nvidia-smi, in [`Layout::bin_dir`].
pub const NVIDIA_SMI: &str = "nvidia-smi";

/// NVIDIA's IMEX daemon as a driver install puts it, in [`Layout::bin_dir`]: staged only with an
/// IMEX payload, as the NO GPU shim carrying the daemon ([`crate::imex_bundle`]), since NVIDIA's
/// compute-domain kubelet plugin mounts into its daemon's container exactly the driver root's
/// `nvidia-imex` and `nvidia-imex-ctl` (nvidia-container-toolkit's driver binaries).
pub const IMEX_DAEMON: &str = "nvidia-imex";

/// NVIDIA's IMEX control program, in [`Layout::bin_dir`], staged with [`IMEX_DAEMON`].
pub const IMEX_CTL: &str = "nvidia-imex-ctl";

/// Where the stager's container finds the IMEX payload the chart's init container copied out of
/// the payload's image (`nvml-mock-stager --imex-payload`): the shim, the daemon and the ctl
/// under the file names [`IMEX_PAYLOAD_FILES`].
pub const IMEX_PAYLOAD_DIR: &str = "/imex-payload";

/// The payload's files in [`IMEX_PAYLOAD_DIR`]: the shim, the real daemon, the ctl (as the
/// workload image built with `--imex` holds them in `/usr/bin`).
pub const IMEX_PAYLOAD_FILES: [&str; 3] = ["nvidia-imex", "nvidia-imex.real", "nvidia-imex-ctl"];

/// The Xid injection control file, relative to the driver root (`driver/`, which is what the
/// mock library finds from its own location): see [`crate::xid`] for its format.
pub const XID_INJECTIONS_IN_DRIVER: &str = "config/xid-injections";

/// The MIG state file, relative to the driver root: each GPU's MIG mode and partition, shared by
/// the processes of a node; see [`crate::mig_state`] for its format.
pub const MIG_STATE_IN_DRIVER: &str = "config/mig-state";

/// The staged profile, relative to the driver root (what the mock library finds from its own
/// location): the compact binary form (`nvml_profile::staged`), not YAML.
pub const PROFILE_IN_DRIVER: &str = "config/profile.bin";

/// The staged topology, relative to the driver root: the compact binary form
/// (`topology::staged`), replaced atomically on every change.
pub const TOPOLOGY_IN_DRIVER: &str = "topology/topology.bin";

/// Where earlier stagers wrote the profile and the topology as YAML, relative to the driver
/// root; the stager removes them.
pub const LEGACY_YAML_IN_DRIVER: [&str; 2] = ["config/config.yaml", "topology/topology.yaml"];

/// Every path of the staged tree relative to one root.
///
/// The default is the host layout at [`DEFAULT_HOST_ROOT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    host_root: PathBuf,
}

impl Default for Layout {
    fn default() -> Self {
        Self::new(PathBuf::from(DEFAULT_HOST_ROOT))
    }
}

impl Layout {
    /// The layout rooted at `host_root` (a host overlay dir, or a mount path).
    pub fn new(host_root: PathBuf) -> Self {
        Self { host_root }
    }

    /// The layout as a container sees it, rooted at [`CONTAINER_ROOT`].
    pub fn container() -> Self {
        Self::new(PathBuf::from(CONTAINER_ROOT))
    }

    /// The root of the tree.
    pub fn root(&self) -> &Path {
        &self.host_root
    }

    /// `driver/`: everything that mimics the driver install.
    pub fn driver_dir(&self) -> PathBuf {
        self.host_root.join("driver")
    }

    /// `driver/usr/bin`: first on a container's `PATH`.
    pub fn bin_dir(&self) -> PathBuf {
        self.driver_dir().join("usr/bin")
    }

    /// `driver/usr/bin/check-fabric`.
    pub fn check_fabric(&self) -> PathBuf {
        self.bin_dir().join(CHECK_FABRIC)
    }

    /// `driver/usr/bin/nvidia-smi`: a regular file (the DRA driver's init container insists).
    pub fn nvidia_smi(&self) -> PathBuf {
        self.bin_dir().join(NVIDIA_SMI)
    }

    /// `driver/usr/bin/nvidia-imex`: the shim carrying NVIDIA's daemon (or the test double's).
    pub fn imex_daemon(&self) -> PathBuf {
        self.bin_dir().join(IMEX_DAEMON)
    }

    /// `driver/usr/bin/nvidia-imex-ctl`.
    pub fn imex_ctl(&self) -> PathBuf {
        self.bin_dir().join(IMEX_CTL)
    }

    /// `driver/usr/lib64`: first on a container's `LD_LIBRARY_PATH`.
    pub fn lib_dir(&self) -> PathBuf {
        self.driver_dir().join("usr/lib64")
    }

    /// `driver/usr/lib64/libnvidia-ml.so.<driver_version>`: the library file itself.
    pub fn library_file(&self, driver_version: &str) -> PathBuf {
        self.lib_dir()
            .join(format!("{LIBRARY_DEV_LINK}.{driver_version}"))
    }

    /// `driver/usr/lib64/libnvidia-ml.so.1`: the soname link.
    pub fn library_soname_link(&self) -> PathBuf {
        self.lib_dir().join(LIBRARY_SONAME)
    }

    /// `driver/usr/lib64/libnvidia-ml.so`: the development link.
    pub fn library_dev_link(&self) -> PathBuf {
        self.lib_dir().join(LIBRARY_DEV_LINK)
    }

    /// `driver/config`.
    pub fn config_dir(&self) -> PathBuf {
        self.driver_dir().join("config")
    }

    /// `driver/config/profile.bin`: the staged profile (`MOCK_NVML_CONFIG`), `system.num_devices`
    /// set.
    pub fn config(&self) -> PathBuf {
        self.driver_dir().join(PROFILE_IN_DRIVER)
    }

    /// `driver/config/config.yaml` and `driver/topology/topology.yaml`: the YAML files earlier
    /// stagers wrote where the staged files are now; the stager removes them.
    pub fn legacy_yaml(&self) -> [PathBuf; 2] {
        LEGACY_YAML_IN_DRIVER.map(|relative| self.driver_dir().join(relative))
    }

    /// `driver/config/xid-injections`: the Xid faults the mock library reports as events
    /// ([`crate::xid`]; `MOCK_NVML_XID_FILE` overrides it).
    pub fn xid_injections(&self) -> PathBuf {
        self.driver_dir().join(XID_INJECTIONS_IN_DRIVER)
    }

    /// `driver/config/mig-state`: the MIG modes and partitions ([`crate::mig_state`];
    /// `MOCK_NVML_MIG_STATE` overrides it).
    pub fn mig_state(&self) -> PathBuf {
        self.driver_dir().join(MIG_STATE_IN_DRIVER)
    }

    /// `driver/dev`: the staged device nodes.
    pub fn dev_dir(&self) -> PathBuf {
        self.driver_dir().join("dev")
    }

    /// `driver/dev/nvidia<index>`: one GPU's device node.
    pub fn gpu_node(&self, index: u32) -> PathBuf {
        self.dev_dir().join(format!("{GPU_NODE_PREFIX}{index}"))
    }

    /// `driver/dev/nvidiactl`, `nvidia-uvm`, `nvidia-uvm-tools`, in that order.
    pub fn gpu_control_nodes(&self) -> [PathBuf; 3] {
        GPU_CONTROL_NODES.map(|name| self.dev_dir().join(name))
    }

    /// `driver/dev/nvidia-caps-imex-channels`: the staged IMEX channel nodes.
    pub fn channel_dir(&self) -> PathBuf {
        self.dev_dir().join(CHANNEL_DIR_NAME)
    }

    /// `driver/dev/nvidia-caps-imex-channels/channel<index>`.
    pub fn channel_node(&self, index: u32) -> PathBuf {
        self.channel_dir().join(channel_file_name(index))
    }

    /// `driver/proc/driver/nvidia-caps/mig-minors`: the MIG capability table
    /// ([`crate::mig_minors`]), staged for MIG-capable profiles.
    pub fn mig_minors(&self) -> PathBuf {
        self.driver_dir().join(MIG_MINORS_IN_DRIVER)
    }

    /// `driver/dev/nvidia-caps`: the staged capability nodes (`nvidia-cap<minor>`).
    pub fn caps_dir(&self) -> PathBuf {
        self.dev_dir().join(CAPS_DIR_NAME)
    }

    /// `driver/dev/nvidia-caps/nvidia-cap<minor>`.
    pub fn cap_node(&self, minor: u32) -> PathBuf {
        self.caps_dir().join(cap_file_name(minor))
    }

    /// `driver/proc/driver/nvidia/capabilities/fabric-imex-mgmt`: the IMEX caps file.
    pub fn imex_caps_file(&self) -> PathBuf {
        self.capabilities_dir().join("fabric-imex-mgmt")
    }

    /// `driver/proc/driver`: what the driver shows under `/proc/driver`, which the NRI plugin
    /// mounts there in containers ([`PROC_DRIVER`]).
    pub fn proc_driver_dir(&self) -> PathBuf {
        self.driver_dir().join("proc/driver")
    }

    /// `driver/proc/driver/nvidia/capabilities`: the capability files (IMEX's, MIG's).
    pub fn capabilities_dir(&self) -> PathBuf {
        self.proc_driver_dir().join("nvidia/capabilities")
    }

    /// `imex/`.
    pub fn imex_dir(&self) -> PathBuf {
        self.host_root.join("imex")
    }

    /// `imex/proc-devices`: the substitute `/proc/devices`.
    pub fn proc_devices(&self) -> PathBuf {
        self.imex_dir().join("proc-devices")
    }

    /// `driver/topology/`: inside the driver root, so that a consumer mounting only `driver/`
    /// (NVIDIA's DRA driver) has it, and the library finds it from its own location.
    pub fn topology_dir(&self) -> PathBuf {
        self.driver_dir().join("topology")
    }

    /// `topology/`: where the topology lived before it moved into the driver root; the stager
    /// removes it.
    pub fn legacy_topology_dir(&self) -> PathBuf {
        self.host_root.join("topology")
    }

    /// `driver/topology/topology.bin`: the staged cluster topology (`MOCK_TOPOLOGY_CONFIG`).
    pub fn topology(&self) -> PathBuf {
        self.driver_dir().join(TOPOLOGY_IN_DRIVER)
    }
}

/// `/opt/nvml-mock/driver/usr/bin`.
pub fn container_bin_dir() -> PathBuf {
    Layout::container().bin_dir()
}

/// `/opt/nvml-mock/driver/usr/lib64`.
pub fn container_lib_dir() -> PathBuf {
    Layout::container().lib_dir()
}

/// `/opt/nvml-mock/driver/config/profile.bin`.
pub fn container_config() -> PathBuf {
    Layout::container().config()
}

/// `/opt/nvml-mock/driver/topology/topology.bin`.
pub fn container_topology() -> PathBuf {
    Layout::container().topology()
}

/// `/dev/<file_name>`: where a staged GPU node (`nvidia0`, `nvidiactl`, …) appears in a container.
pub fn container_gpu_device(file_name: &str) -> PathBuf {
    Path::new(DEVICE_DIR).join(file_name)
}

/// `/dev/nvidia-caps/nvidia-cap<minor>`: where a capability node appears in a container.
pub fn container_cap_device(minor: u32) -> PathBuf {
    Path::new(DEVICE_DIR)
        .join(CAPS_DIR_NAME)
        .join(cap_file_name(minor))
}

/// `nvidia-cap<minor>`.
pub fn cap_file_name(minor: u32) -> String {
    format!("{CAP_NODE_PREFIX}{minor}")
}

/// `/dev/nvidia-caps-imex-channels/channel<index>`: where a channel appears in a container.
pub fn container_channel_device(index: u32) -> PathBuf {
    Path::new(CHANNEL_DEVICE_DIR).join(channel_file_name(index))
}

/// `channel<index>`.
pub fn channel_file_name(index: u32) -> String {
    format!("{CHANNEL_PREFIX}{index}")
}

/// The index of a channel node's file name (`channel12` → 12), `None` for anything else.
///
/// Only canonical decimal is accepted (`channel007` is not a channel), so
/// that every index has exactly one file name.
pub fn parse_channel_file_name(file_name: &str) -> Option<u32> {
    let digits = file_name.strip_prefix(CHANNEL_PREFIX)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|byte| byte.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if canonical {
        digits.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_layout_matches_the_architecture_table() {
        let layout = Layout::default();
        let cases: [(PathBuf, &str); 21] = [
            (
                layout.xid_injections(),
                "/var/lib/nvml-mock/driver/config/xid-injections",
            ),
            (
                layout.mig_state(),
                "/var/lib/nvml-mock/driver/config/mig-state",
            ),
            (
                layout.nvidia_smi(),
                "/var/lib/nvml-mock/driver/usr/bin/nvidia-smi",
            ),
            (
                layout.library_file("570.124.06"),
                "/var/lib/nvml-mock/driver/usr/lib64/libnvidia-ml.so.570.124.06",
            ),
            (
                layout.library_soname_link(),
                "/var/lib/nvml-mock/driver/usr/lib64/libnvidia-ml.so.1",
            ),
            (
                layout.library_dev_link(),
                "/var/lib/nvml-mock/driver/usr/lib64/libnvidia-ml.so",
            ),
            (
                layout.check_fabric(),
                "/var/lib/nvml-mock/driver/usr/bin/check-fabric",
            ),
            (
                layout.config(),
                "/var/lib/nvml-mock/driver/config/profile.bin",
            ),
            (layout.gpu_node(3), "/var/lib/nvml-mock/driver/dev/nvidia3"),
            (
                layout.gpu_control_nodes()[0].clone(),
                "/var/lib/nvml-mock/driver/dev/nvidiactl",
            ),
            (
                layout.gpu_control_nodes()[1].clone(),
                "/var/lib/nvml-mock/driver/dev/nvidia-uvm",
            ),
            (
                layout.gpu_control_nodes()[2].clone(),
                "/var/lib/nvml-mock/driver/dev/nvidia-uvm-tools",
            ),
            (
                layout.channel_dir(),
                "/var/lib/nvml-mock/driver/dev/nvidia-caps-imex-channels",
            ),
            (
                layout.channel_node(7),
                "/var/lib/nvml-mock/driver/dev/nvidia-caps-imex-channels/channel7",
            ),
            (
                layout.imex_caps_file(),
                "/var/lib/nvml-mock/driver/proc/driver/nvidia/capabilities/fabric-imex-mgmt",
            ),
            (
                layout.proc_devices(),
                "/var/lib/nvml-mock/imex/proc-devices",
            ),
            (
                layout.topology(),
                "/var/lib/nvml-mock/driver/topology/topology.bin",
            ),
            (layout.topology_dir(), "/var/lib/nvml-mock/driver/topology"),
            (
                layout.legacy_yaml()[0].clone(),
                "/var/lib/nvml-mock/driver/config/config.yaml",
            ),
            (
                layout.legacy_yaml()[1].clone(),
                "/var/lib/nvml-mock/driver/topology/topology.yaml",
            ),
            (layout.dev_dir(), "/var/lib/nvml-mock/driver/dev"),
        ];
        for (actual, expected) in cases {
            assert_eq!(actual, Path::new(expected));
        }
    }

    #[test]
    fn container_paths_live_under_the_mount() {
        assert_eq!(
            container_bin_dir(),
            Path::new("/opt/nvml-mock/driver/usr/bin")
        );
        assert_eq!(
            container_lib_dir(),
            Path::new("/opt/nvml-mock/driver/usr/lib64")
        );
        assert_eq!(
            container_config(),
            Path::new("/opt/nvml-mock/driver/config/profile.bin")
        );
        assert_eq!(
            container_topology(),
            Path::new("/opt/nvml-mock/driver/topology/topology.bin")
        );
        assert_eq!(container_gpu_device("nvidia0"), Path::new("/dev/nvidia0"));
        assert_eq!(
            container_channel_device(2047),
            Path::new("/dev/nvidia-caps-imex-channels/channel2047")
        );
    }

    #[test]
    fn a_custom_root_moves_every_path() {
        let layout = Layout::new(PathBuf::from("/tmp/x"));
        assert_eq!(layout.root(), Path::new("/tmp/x"));
        assert_eq!(
            layout.channel_node(0),
            Path::new("/tmp/x/driver/dev/nvidia-caps-imex-channels/channel0")
        );
    }

    #[test]
    fn channel_file_names_round_trip() {
        for index in [0, 1, 9, 10, 2047, u32::MAX] {
            assert_eq!(
                parse_channel_file_name(&channel_file_name(index)),
                Some(index)
            );
        }
        for name in [
            "channel",
            "channel-1",
            "channel01",
            "channelx",
            "chan1",
            "channel1 ",
            "channel4294967296",
        ] {
            assert_eq!(parse_channel_file_name(name), None, "{name}");
        }
    }
}
