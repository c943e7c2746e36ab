//! The injection planner: which containers get the mock stack, and what they get.
//!
//! Pure: [`select`] looks only at the pod and container, [`adjust`] only at
//! them and a [`Staged`] snapshot that the caller took of the node's staged
//! tree (see `staged.rs`), so every rule here is unit-tested without a
//! filesystem.
//! GPU device nodes: a container whose allocation names GPUs ([`gpus::request`]:
//! `NVIDIA_VISIBLE_DEVICES`, `nvidia.com/gpu` CDI names) gets only those GPUs' nodes and the
//! control nodes (a MIG device: its parent's node and its two capability nodes); one without a request gets every staged node when the pod's device annotation
//! asks, else none. A device path the container already has is never added again.
//! Nothing here fails: a problem becomes a warning and less injection.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use node_layout::channels::ChannelSelector;
use node_layout::env;
use node_layout::paths::{self, Layout};

use crate::gpus::{self, GpuRequest, Granted, StagedGpu};
use crate::proto::{
    Container, ContainerAdjustment, KeyValue, LinuxContainerAdjustment, LinuxDevice, Mount,
    OptionalFileMode, OptionalUInt32, PodSandbox,
};

/// The namespace that is excluded whatever the configuration says.
pub const ALWAYS_EXCLUDED_NAMESPACE: &str = "kube-system";

/// The options of the overlay's bind mount.
pub const OVERLAY_MOUNT_OPTIONS: [&str; 4] = ["rbind", "ro", "nosuid", "nodev"];

/// What the plugin injects and where it finds it.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The staged tree on the host (also visible at this path to the plugin).
    pub overlay_host: PathBuf,
    /// Where the staged tree is mounted in containers.
    pub overlay_mount: PathBuf,
    /// This node's name; empty disables topology injection.
    pub node_name: String,
    /// Pod annotation that opts out with `false`.
    pub opt_out_annotation: String,
    /// Pod annotation that asks for GPU device nodes with `true`.
    pub device_annotation: String,
    /// Pod annotation with the IMEX channel selector.
    pub imex_channel_annotation: String,
    /// Namespaces whose pods are never touched (always with kube-system).
    pub excluded_namespaces: BTreeSet<String>,
}

impl Policy {
    /// Parses the `--excluded-namespaces` CSV: items trimmed, empties dropped, kube-system added.
    pub fn parse_excluded_namespaces(csv: &str) -> BTreeSet<String> {
        csv.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .chain([ALWAYS_EXCLUDED_NAMESPACE])
            .map(str::to_owned)
            .collect()
    }
}

/// Whether a container is injected, and with which devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// Leave the container alone.
    Skip(SkipReason),
    /// Inject the overlay, and these devices.
    Inject(Wants),
}

/// Why a container is left alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The pod's opt-out annotation is `false`.
    OptedOut,
    /// The pod's namespace is excluded.
    ExcludedNamespace,
    /// The container already mounts something at the overlay mount path.
    AlreadyMounted,
}

/// The devices an injected container asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wants {
    /// GPU device nodes (`nvidia*`), every one, from the device annotation.
    pub gpus: bool,
    /// The GPUs an allocation gave the container (`NVIDIA_VISIBLE_DEVICES`, CDI): when it says
    /// anything, only those GPUs' nodes and the control nodes, whatever the annotation says.
    pub request: GpuRequest,
    /// IMEX channels.
    pub channels: ChannelSelector,
    /// Problems with the annotations, to log.
    pub warnings: Vec<String>,
}

/// One staged character device, as the container will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNode {
    /// Path inside the container.
    pub container_path: String,
    /// Major number.
    pub major: i64,
    /// Minor number.
    pub minor: i64,
    /// Permission bits (`st_mode & 0o777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// What the node's staged tree holds, as far as one container's injection needs to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Staged {
    /// The overlay dir exists (without it the bind mount would fail the container).
    pub overlay_present: bool,
    /// The topology file exists.
    pub topology_present: bool,
    /// What is staged of the driver's `/proc` ([`crate::proc_view`]).
    pub proc: crate::proc_view::Present,
    /// GPU nodes, sorted by container path (only when asked for).
    pub gpu_nodes: Vec<DeviceNode>,
    /// Channel nodes, sorted by index (only when asked for).
    pub channel_nodes: Vec<DeviceNode>,
    /// The staged profile's GPUs (only when a request lists GPUs).
    pub gpus: Vec<StagedGpu>,
    /// The request resolved against them ([`gpus::resolve`]); `None`: no request.
    pub granted: Option<Granted>,
    /// The capability nodes of the requested MIG devices (`/dev/nvidia-caps/nvidia-cap<N>`).
    pub cap_nodes: Vec<DeviceNode>,
    /// Problems met while looking, to log.
    pub warnings: Vec<String>,
}

/// The planner's answer for one container.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The adjustment to return (`None`: no adjustment at all).
    pub adjustment: Option<ContainerAdjustment>,
    /// Problems to log.
    pub warnings: Vec<String>,
}

/// Decides whether to inject a container and which devices it asked for.
pub fn select(policy: &Policy, pod: &PodSandbox, container: &Container) -> Selection {
    let annotation = |key: &str| pod.annotations.get(key).map(|value| value.trim());
    if annotation(&policy.opt_out_annotation)
        .is_some_and(|value| value.eq_ignore_ascii_case("false"))
    {
        return Selection::Skip(SkipReason::OptedOut);
    }
    if policy.excluded_namespaces.contains(&pod.namespace) {
        return Selection::Skip(SkipReason::ExcludedNamespace);
    }
    let mount_path = policy.overlay_mount.to_string_lossy();
    if container
        .mounts
        .iter()
        .any(|mount| mount.destination.trim_end_matches('/') == mount_path)
    {
        return Selection::Skip(SkipReason::AlreadyMounted);
    }

    let mut warnings = Vec::new();
    let request = gpus::request(container);
    let mut gpus = annotation(&policy.device_annotation)
        .is_some_and(|value| value.eq_ignore_ascii_case("true"));
    if gpus && request == GpuRequest::Unspecified && already_has_gpus(container) {
        warnings.push(format!(
            "container {} already has NVIDIA devices from a device plugin: no mock GPU nodes injected",
            container.name
        ));
        gpus = false;
    }
    let channels = match annotation(&policy.imex_channel_annotation) {
        None => ChannelSelector::None,
        Some(value) => match value.parse::<ChannelSelector>() {
            Ok(selector) => selector,
            Err(err) => {
                warnings.push(format!(
                    "annotation {} of pod {}/{}: {err}; no IMEX channels injected",
                    policy.imex_channel_annotation, pod.namespace, pod.name
                ));
                ChannelSelector::None
            }
        },
    };
    Selection::Inject(Wants {
        gpus,
        request,
        channels,
        warnings,
    })
}

/// Builds the adjustment for an injected container from the staged snapshot.
pub fn adjust(policy: &Policy, container: &Container, staged: Staged) -> Plan {
    let hooks = crate::proc_view::hooks(&policy.overlay_host, staged.proc);
    let mut warnings = staged.warnings;
    if !staged.overlay_present {
        warnings.push(format!(
            "staged tree {} is missing: container {} gets no mock stack",
            policy.overlay_host.display(),
            container.name
        ));
        return Plan {
            adjustment: None,
            warnings,
        };
    }
    let mounted = Layout::new(policy.overlay_mount.clone());
    let mut edits = vec![
        ("PATH", EnvRule::Prepend(path_string(mounted.bin_dir()))),
        (
            "LD_LIBRARY_PATH",
            EnvRule::Prepend(path_string(mounted.lib_dir())),
        ),
        (
            env::MOCK_NVML_CONFIG,
            EnvRule::SetIfAbsent(path_string(mounted.config())),
        ),
    ];
    if !policy.node_name.is_empty() && staged.topology_present {
        edits.push((
            env::NODE_NAME,
            EnvRule::SetIfAbsent(policy.node_name.clone()),
        ));
        edits.push((
            env::MOCK_TOPOLOGY_CONFIG,
            EnvRule::SetIfAbsent(path_string(mounted.topology())),
        ));
    }
    let env = env_changes(&container.env, &edits);

    let existing = existing_device_paths(container);
    let devices: Vec<LinuxDevice> = staged
        .gpu_nodes
        .iter()
        .filter(|node| granted(staged.granted.as_ref(), node))
        .chain(staged.cap_nodes.iter())
        .chain(staged.channel_nodes.iter())
        .filter(|node| !existing.contains(node.container_path.as_str()))
        .map(linux_device)
        .collect();
    let adjustment = ContainerAdjustment {
        mounts: vec![Mount {
            destination: path_string(policy.overlay_mount.clone()),
            r#type: "bind".to_owned(),
            source: path_string(policy.overlay_host.clone()),
            options: OVERLAY_MOUNT_OPTIONS.map(str::to_owned).to_vec(),
        }],
        env,
        hooks,
        linux: if devices.is_empty() {
            None
        } else {
            Some(LinuxContainerAdjustment { devices })
        },
    };
    Plan {
        adjustment: Some(adjustment),
        warnings,
    }
}

/// How one environment variable is edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvRule {
    /// Put this directory first (`new:old`), or set it when absent or empty.
    Prepend(String),
    /// Set it only when absent.
    SetIfAbsent(String),
}

/// The env entries to emit: only keys whose value changes.
///
/// Existing keys come first in their original order, then new keys in `edits`
/// order. Entries without `=` are ignored; a repeated key counts with its last value.
pub fn env_changes(existing: &[String], edits: &[(&str, EnvRule)]) -> Vec<KeyValue> {
    let mut order: Vec<&str> = Vec::new();
    let mut values: BTreeMap<&str, &str> = BTreeMap::new();
    for entry in existing {
        let Some((key, value)) = entry.split_once('=') else {
            continue;
        };
        if values.insert(key, value).is_none() {
            order.push(key);
        }
    }
    let mut changed: BTreeMap<&str, String> = BTreeMap::new();
    let mut added: Vec<KeyValue> = Vec::new();
    for (key, rule) in edits {
        match (values.get(key), rule) {
            (None, EnvRule::Prepend(value) | EnvRule::SetIfAbsent(value)) => added.push(KeyValue {
                key: (*key).to_owned(),
                value: value.clone(),
            }),
            (Some(_), EnvRule::SetIfAbsent(_)) => (),
            (Some(old), EnvRule::Prepend(dir)) => {
                let already_first = old.split(':').next() == Some(dir.as_str());
                match (old.is_empty(), already_first) {
                    (true, _) => {
                        changed.insert(key, dir.clone());
                    }
                    (false, true) => (),
                    (false, false) => {
                        changed.insert(key, format!("{dir}:{old}"));
                    }
                }
            }
        }
    }
    order
        .into_iter()
        .filter_map(|key| {
            changed.remove(key).map(|value| KeyValue {
                key: key.to_owned(),
                value,
            })
        })
        .chain(added)
        .collect()
}

/// Whether a staged GPU node goes to a container granted `granted`: every node without a
/// request (the caller staged them only when asked), else the control nodes and the granted
/// GPUs' `nvidia<minor>`.
fn granted(granted: Option<&Granted>, node: &DeviceNode) -> bool {
    let name = node.container_path.rsplit('/').next().unwrap_or_default();
    match granted {
        None | Some(Granted::All) => true,
        Some(Granted::Minors(minors)) => {
            paths::GPU_CONTROL_NODES.contains(&name)
                || name
                    .strip_prefix(paths::GPU_NODE_PREFIX)
                    .and_then(|minor| minor.parse::<u32>().ok())
                    .is_some_and(|minor| minors.contains(&minor))
        }
    }
}

/// The device paths the container already has (containerd's CDI injection, a device plugin's
/// device specs): never injected twice.
fn existing_device_paths(container: &Container) -> BTreeSet<&str> {
    container
        .linux
        .iter()
        .flat_map(|linux| linux.devices.iter())
        .map(|device| device.path.as_str())
        .collect()
}

/// Whether a device plugin already gave the container NVIDIA GPUs.
fn already_has_gpus(container: &Container) -> bool {
    let raw = container
        .linux
        .iter()
        .flat_map(|linux| linux.devices.iter())
        .any(|device| device.path.starts_with("/dev/nvidia"));
    let cdi = container
        .cdi_devices
        .iter()
        .any(|device| device.name.starts_with("nvidia.com/"));
    raw || cdi
}

fn linux_device(node: &DeviceNode) -> LinuxDevice {
    LinuxDevice {
        path: node.container_path.clone(),
        r#type: "c".to_owned(),
        major: node.major,
        minor: node.minor,
        file_mode: Some(OptionalFileMode { value: node.mode }),
        uid: Some(OptionalUInt32 { value: node.uid }),
        gid: Some(OptionalUInt32 { value: node.gid }),
    }
}

#[cfg(test)]
impl Policy {
    /// The chart's policy (its overlay paths and annotations) on `node`,
    /// `excluded` the excluded namespaces' flag value; the tests' one policy.
    pub(crate) fn for_tests(node: &str, excluded: &str) -> Policy {
        Policy {
            overlay_host: PathBuf::from("/var/lib/nvml-mock"),
            overlay_mount: PathBuf::from("/opt/nvml-mock"),
            node_name: node.to_owned(),
            opt_out_annotation: "nvml-mock.nvidia.com/inject".to_owned(),
            device_annotation: "nvml-mock.nvidia.com/devices".to_owned(),
            imex_channel_annotation: "nvml-mock.nvidia.com/imex-channels".to_owned(),
            excluded_namespaces: Policy::parse_excluded_namespaces(excluded),
        }
    }
}

fn path_string(path: PathBuf) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{CdiDevice, LinuxContainer};

    fn policy() -> Policy {
        Policy::for_tests("worker2", "mokka")
    }

    fn pod(namespace: &str, annotations: &[(&str, &str)]) -> PodSandbox {
        PodSandbox {
            id: "sandbox".to_owned(),
            name: "pod".to_owned(),
            uid: "uid".to_owned(),
            namespace: namespace.to_owned(),
            annotations: annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn container(env: &[&str]) -> Container {
        Container {
            id: "ctr".to_owned(),
            pod_sandbox_id: "sandbox".to_owned(),
            name: "main".to_owned(),
            env: env.iter().map(|entry| (*entry).to_owned()).collect(),
            ..Container::default()
        }
    }

    fn node(path: &str, minor: i64) -> DeviceNode {
        DeviceNode {
            container_path: path.to_owned(),
            major: 511,
            minor,
            mode: 0o666,
            uid: 0,
            gid: 0,
        }
    }

    fn staged() -> Staged {
        Staged {
            overlay_present: true,
            topology_present: true,
            ..Staged::default()
        }
    }

    fn env_of(plan: &Plan) -> Vec<(String, String)> {
        plan.adjustment
            .iter()
            .flat_map(|adjustment| adjustment.env.iter())
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect()
    }

    fn pairs(entries: &[(&str, &str)]) -> Vec<(String, String)> {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn excluded_namespaces_always_include_kube_system() {
        let parsed = Policy::parse_excluded_namespaces(" mokka , ,extra,");
        assert_eq!(
            parsed.into_iter().collect::<Vec<_>>(),
            ["extra", "kube-system", "mokka"]
        );
        assert_eq!(Policy::parse_excluded_namespaces("").len(), 1);
    }

    #[test]
    fn selection_skips() {
        let policy = policy();
        let plain = container(&[]);
        let cases = [
            (
                pod("default", &[("nvml-mock.nvidia.com/inject", "false")]),
                SkipReason::OptedOut,
            ),
            (
                pod("default", &[("nvml-mock.nvidia.com/inject", " FALSE ")]),
                SkipReason::OptedOut,
            ),
            (pod("kube-system", &[]), SkipReason::ExcludedNamespace),
            (
                pod("mokka", &[("nvml-mock.nvidia.com/imex-channels", "true")]),
                SkipReason::ExcludedNamespace,
            ),
        ];
        for (pod, reason) in cases {
            assert_eq!(
                select(&policy, &pod, &plain),
                Selection::Skip(reason),
                "{pod:?}"
            );
        }
        let mut mounted = container(&[]);
        mounted.mounts.push(Mount {
            destination: "/opt/nvml-mock/".to_owned(),
            ..Mount::default()
        });
        assert_eq!(
            select(&policy, &pod("default", &[]), &mounted),
            Selection::Skip(SkipReason::AlreadyMounted)
        );
    }

    #[test]
    fn selection_is_ambient_and_reads_the_device_annotations() {
        let policy = policy();
        let plain = container(&[]);
        let wants = |annotations: &[(&str, &str)]| match select(
            &policy,
            &pod("default", annotations),
            &plain,
        ) {
            Selection::Inject(wants) => wants,
            Selection::Skip(reason) => panic!("unexpected skip {reason:?}"),
        };
        assert_eq!(
            wants(&[]),
            Wants {
                gpus: false,
                request: GpuRequest::Unspecified,
                channels: ChannelSelector::None,
                warnings: vec![]
            }
        );
        assert_eq!(
            wants(&[("nvml-mock.nvidia.com/inject", "true")]).channels,
            ChannelSelector::None
        );
        assert!(wants(&[("nvml-mock.nvidia.com/devices", "True")]).gpus);
        assert!(!wants(&[("nvml-mock.nvidia.com/devices", "yes")]).gpus);
        assert_eq!(
            wants(&[("nvml-mock.nvidia.com/imex-channels", "true")]).channels,
            ChannelSelector::All
        );
        assert_eq!(
            wants(&[("nvml-mock.nvidia.com/imex-channels", "0-1,5")]).channels,
            ChannelSelector::Some([0, 1, 5].into_iter().collect())
        );
        let bad = wants(&[("nvml-mock.nvidia.com/imex-channels", "0-x")]);
        assert_eq!(bad.channels, ChannelSelector::None);
        assert_eq!(bad.warnings.len(), 1);
        assert!(bad.warnings[0].contains("\"0-x\""), "{}", bad.warnings[0]);
    }

    #[test]
    fn gpus_are_not_injected_over_a_device_plugin_without_a_request() {
        let policy = policy();
        let annotated = pod("default", &[("nvml-mock.nvidia.com/devices", "true")]);
        let mut raw = container(&[]);
        raw.linux = Some(LinuxContainer {
            devices: vec![LinuxDevice {
                path: "/dev/nvidia0".to_owned(),
                ..LinuxDevice::default()
            }],
        });
        match select(&policy, &annotated, &raw) {
            Selection::Inject(wants) => {
                assert!(!wants.gpus);
                assert_eq!(wants.request, GpuRequest::Unspecified);
                assert_eq!(wants.warnings.len(), 1);
            }
            Selection::Skip(reason) => panic!("unexpected skip {reason:?}"),
        }
        // A CDI device of NVIDIA's kind is a request: its GPU is injected (once, see
        // `granted_gpus_and_control_nodes_are_injected_once`), whatever the annotation says.
        let mut cdi = container(&[]);
        cdi.cdi_devices.push(CdiDevice {
            name: "nvidia.com/gpu=0".to_owned(),
        });
        match select(&policy, &pod("default", &[]), &cdi) {
            Selection::Inject(wants) => {
                assert!(!wants.gpus);
                assert_eq!(
                    wants.request,
                    GpuRequest::Listed(vec![gpus::GpuId::Index(0)])
                );
                assert!(wants.warnings.is_empty());
            }
            Selection::Skip(reason) => panic!("unexpected skip {reason:?}"),
        }
    }

    fn gpu_staged(granted: Option<Granted>) -> Staged {
        let names = [
            "nvidia-uvm",
            "nvidia-uvm-tools",
            "nvidia0",
            "nvidia1",
            "nvidia2",
            "nvidia3",
            "nvidiactl",
        ];
        Staged {
            gpu_nodes: names
                .iter()
                .enumerate()
                .map(|(minor, name)| node(&format!("/dev/{name}"), minor as i64))
                .collect(),
            granted,
            ..staged()
        }
    }

    fn device_paths(plan: &Plan) -> Vec<String> {
        plan.adjustment
            .iter()
            .flat_map(|adjustment| adjustment.linux.iter())
            .flat_map(|linux| linux.devices.iter())
            .map(|device| device.path.clone())
            .collect()
    }

    #[test]
    fn granted_gpus_and_control_nodes_are_injected_once() {
        let policy = policy();
        let minors = |list: &[u32]| Some(Granted::Minors(list.iter().copied().collect()));
        let plain = container(&["NVIDIA_VISIBLE_DEVICES=1,3"]);
        let plan = adjust(&policy, &plain, gpu_staged(minors(&[1, 3])));
        assert_eq!(
            device_paths(&plan),
            [
                "/dev/nvidia-uvm",
                "/dev/nvidia-uvm-tools",
                "/dev/nvidia1",
                "/dev/nvidia3",
                "/dev/nvidiactl"
            ]
        );
        // What containerd's CDI injection already added is not added again.
        let mut injected = plain.clone();
        injected.linux = Some(LinuxContainer {
            devices: ["/dev/nvidia1", "/dev/nvidiactl"]
                .map(|path| LinuxDevice {
                    path: path.to_owned(),
                    ..LinuxDevice::default()
                })
                .to_vec(),
        });
        let plan = adjust(&policy, &injected, gpu_staged(minors(&[1, 3])));
        assert_eq!(
            device_paths(&plan),
            ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia3"]
        );
        // `none`: the control nodes only; `all` and no request: every staged node.
        let none = adjust(&policy, &plain, gpu_staged(minors(&[])));
        assert_eq!(
            device_paths(&none),
            ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl"]
        );
        for granted in [Some(Granted::All), None] {
            assert_eq!(
                device_paths(&adjust(&policy, &plain, gpu_staged(granted))).len(),
                7
            );
        }
    }

    #[test]
    fn full_adjustment() {
        let mut staged = staged();
        staged.gpu_nodes = vec![node("/dev/nvidia0", 0), node("/dev/nvidiactl", 255)];
        staged.channel_nodes = vec![node("/dev/nvidia-caps-imex-channels/channel0", 0)];
        let plan = adjust(
            &policy(),
            &container(&["PATH=/usr/bin:/bin", "HOME=/root"]),
            staged,
        );
        assert!(plan.warnings.is_empty());
        let adjustment = plan.adjustment.clone().expect("an adjustment");
        assert_eq!(
            adjustment.mounts,
            vec![Mount {
                destination: "/opt/nvml-mock".to_owned(),
                r#type: "bind".to_owned(),
                source: "/var/lib/nvml-mock".to_owned(),
                options: vec!["rbind".into(), "ro".into(), "nosuid".into(), "nodev".into()],
            }]
        );
        assert_eq!(
            env_of(&plan),
            pairs(&[
                ("PATH", "/opt/nvml-mock/driver/usr/bin:/usr/bin:/bin"),
                ("LD_LIBRARY_PATH", "/opt/nvml-mock/driver/usr/lib64"),
                (
                    "MOCK_NVML_CONFIG",
                    "/opt/nvml-mock/driver/config/profile.bin"
                ),
                ("NODE_NAME", "worker2"),
                (
                    "MOCK_TOPOLOGY_CONFIG",
                    "/opt/nvml-mock/driver/topology/topology.bin"
                ),
            ])
        );
        let devices = adjustment.linux.expect("devices").devices;
        let paths: Vec<&str> = devices.iter().map(|device| device.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/dev/nvidia0",
                "/dev/nvidiactl",
                "/dev/nvidia-caps-imex-channels/channel0"
            ]
        );
        assert_eq!(
            devices[1],
            LinuxDevice {
                path: "/dev/nvidiactl".to_owned(),
                r#type: "c".to_owned(),
                major: 511,
                minor: 255,
                file_mode: Some(OptionalFileMode { value: 0o666 }),
                uid: Some(OptionalUInt32 { value: 0 }),
                gid: Some(OptionalUInt32 { value: 0 }),
            }
        );
    }

    #[test]
    fn topology_env_needs_the_file_and_a_node_name() {
        let mut missing = staged();
        missing.topology_present = false;
        let plan = adjust(&policy(), &container(&[]), missing);
        let keys: Vec<String> = env_of(&plan).into_iter().map(|(key, _)| key).collect();
        assert_eq!(keys, ["PATH", "LD_LIBRARY_PATH", "MOCK_NVML_CONFIG"]);
        assert!(plan
            .adjustment
            .as_ref()
            .is_some_and(|adjustment| adjustment.linux.is_none()));

        let mut nameless = policy();
        nameless.node_name.clear();
        let keys: Vec<String> = env_of(&adjust(&nameless, &container(&[]), staged()))
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        assert_eq!(keys, ["PATH", "LD_LIBRARY_PATH", "MOCK_NVML_CONFIG"]);
    }

    #[test]
    fn a_missing_overlay_means_no_adjustment() {
        let mut gone = staged();
        gone.overlay_present = false;
        gone.warnings.push("earlier".to_owned());
        let plan = adjust(&policy(), &container(&[]), gone);
        assert_eq!(plan.adjustment, None);
        assert_eq!(plan.warnings.len(), 2);
        assert!(
            plan.warnings[1].contains("/var/lib/nvml-mock is missing"),
            "{}",
            plan.warnings[1]
        );
    }

    #[test]
    fn only_changed_keys_are_emitted_in_container_order_then_table_order() {
        let existing = [
            "MOCK_NVML_CONFIG=/mine.yaml",
            "LD_LIBRARY_PATH=/opt/nvml-mock/driver/usr/lib64:/usr/lib",
            "NOEQUALS",
            "NODE_NAME=custom",
            "PATH=/bin",
            "PATH=/usr/bin",
        ];
        let plan = adjust(&policy(), &container(&existing), staged());
        assert_eq!(
            env_of(&plan),
            pairs(&[
                ("PATH", "/opt/nvml-mock/driver/usr/bin:/usr/bin"),
                (
                    "MOCK_TOPOLOGY_CONFIG",
                    "/opt/nvml-mock/driver/topology/topology.bin"
                ),
            ])
        );
    }

    #[test]
    fn prepend_rules() {
        let edits = [("PATH", EnvRule::Prepend("/new".to_owned()))];
        let check = |existing: &[&str], expected: &[(&str, &str)]| {
            let existing: Vec<String> = existing.iter().map(|entry| (*entry).to_owned()).collect();
            let got: Vec<(String, String)> = env_changes(&existing, &edits)
                .into_iter()
                .map(|kv| (kv.key, kv.value))
                .collect();
            assert_eq!(got, pairs(expected), "{existing:?}");
        };
        check(&[], &[("PATH", "/new")]);
        check(&["PATH="], &[("PATH", "/new")]);
        check(&["PATH=/a:/b"], &[("PATH", "/new:/a:/b")]);
        check(&["PATH=/new"], &[]);
        check(&["PATH=/new:/a"], &[]);
        check(&["PATH=/newer:/a"], &[("PATH", "/new:/newer:/a")]);
        check(&["PATH=/a:/new"], &[("PATH", "/new:/a:/new")]);
    }
}
