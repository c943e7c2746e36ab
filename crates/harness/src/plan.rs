//! Pure planning: whether to reuse, recreate or reject an existing cluster,
//! which device majors to use, and the Helm values of the install.
//!
//! Nothing here runs a process or touches the network; the callers in
//! `cluster` and `install` gather the inputs and act on the answers.

use std::fmt;

use anyhow::Context as _;
use node_layout::proc_devices::{free_major_pair, DeviceMajor};
use serde::Serialize;

use crate::names::NRI_SOCKET;

/// The containerd plugin key of NRI, in every config version.
const NRI_PLUGIN: &str = "io.containerd.nri.v1.nri";

/// Why one node cannot host the demo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeProblem {
    /// The node container does not exist.
    Missing,
    /// The node container exists but is not running.
    NotRunning(String),
    /// The containerd config could not be parsed.
    Unparseable(String),
    /// The config has no NRI plugin section.
    NriSectionMissing,
    /// NRI is present but `disable = true`.
    NriDisabled,
    /// NRI listens on another socket.
    WrongSocket(String),
    /// The node container runs another node image than this run asks for.
    OtherImage {
        /// What `docker inspect` says the container runs.
        running: String,
        /// What this run would create the cluster from.
        wanted: String,
    },
}

/// How a running node container came to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// Started when kind created it.
    Once,
    /// Started again after its creation (a Docker restart, a reboot, `docker
    /// start`): reusable only if the cluster is healthy (see [`crate::restart`]).
    Again {
        /// When the container was created (RFC 3339, as Docker prints it).
        created: String,
        /// When it was last started.
        started: String,
    },
}

/// How long after its creation a node container may first start: kind creates
/// and starts every node at once, so a later start is a restart.
const RESTART_SLACK_SECONDS: i64 = 120;

/// The Go template that [`check_container`] reads: status, image, created, started.
pub const CONTAINER_TEMPLATE: &str =
    "{{.State.Status}}|{{.Config.Image}}|{{.Created}}|{{.State.StartedAt}}";

/// Checks one node container from `docker inspect -f` [`CONTAINER_TEMPLATE`]:
/// running, from the wanted node image (when one is asked for); says whether
/// it was started again since kind created it.
pub fn check_container(
    inspected: &str,
    wanted_image: Option<&str>,
) -> Result<Started, NodeProblem> {
    let mut fields = inspected.trim().split('|');
    let mut next = || fields.next().unwrap_or_default().to_owned();
    let (state, image, created, started) = (next(), next(), next(), next());
    if state != "running" {
        return Err(NodeProblem::NotRunning(state));
    }
    if let Some(wanted) = wanted_image {
        if image != wanted {
            return Err(NodeProblem::OtherImage {
                running: image,
                wanted: wanted.to_owned(),
            });
        }
    }
    let parse = |text: &str| text.parse::<k8s_openapi::jiff::Timestamp>().ok();
    if let (Some(at_create), Some(at_start)) = (parse(&created), parse(&started)) {
        if at_start.as_second() - at_create.as_second() > RESTART_SLACK_SECONDS {
            return Ok(Started::Again { created, started });
        }
    }
    Ok(Started::Once)
}

impl fmt::Display for NodeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeProblem::Missing => f.write_str("node container is missing"),
            NodeProblem::NotRunning(state) => write!(f, "node container is {state}, not running"),
            NodeProblem::Unparseable(err) => write!(f, "containerd config does not parse: {err}"),
            NodeProblem::NriSectionMissing => {
                write!(
                    f,
                    "containerd has no [plugins.\"{NRI_PLUGIN}\"] section (NRI off)"
                )
            }
            NodeProblem::NriDisabled => write!(f, "containerd NRI is disabled (disable = true)"),
            NodeProblem::WrongSocket(found) => {
                write!(
                    f,
                    "containerd NRI listens on {found}, expected {NRI_SOCKET}"
                )
            }
            NodeProblem::OtherImage { running, wanted } => write!(
                f,
                "node container runs {running}, not the node image this run uses ({wanted})"
            ),
        }
    }
}

/// Checks one node's containerd config (`containerd config dump` or
/// `/etc/containerd/config.toml`): NRI on, on the expected socket.
///
/// A section without `disable` counts as enabled (containerd 2.x default); a
/// section without `socket_path` counts as the default socket, which is the
/// expected one.
pub fn check_nri(config_toml: &str) -> Result<(), NodeProblem> {
    let doc: toml::Table = match config_toml.parse() {
        Ok(doc) => doc,
        Err(err) => return Err(NodeProblem::Unparseable(err.message().to_owned())),
    };
    let Some(nri) = doc
        .get("plugins")
        .and_then(toml::Value::as_table)
        .and_then(|plugins| plugins.get(NRI_PLUGIN))
        .and_then(toml::Value::as_table)
    else {
        return Err(NodeProblem::NriSectionMissing);
    };
    if nri
        .get("disable")
        .and_then(toml::Value::as_bool)
        .unwrap_or(false)
    {
        return Err(NodeProblem::NriDisabled);
    }
    match nri.get("socket_path").and_then(toml::Value::as_str) {
        None => Ok(()),
        Some(path) if path == NRI_SOCKET => Ok(()),
        Some(other) => Err(NodeProblem::WrongSocket(other.to_owned())),
    }
}

/// What to do about the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterPlan {
    /// No cluster of that name: create it.
    Create,
    /// A compatible cluster: keep it.
    Reuse,
    /// A compatible cluster whose named nodes were started again: keep it if
    /// it is healthy ([`crate::restart`]), else reject it with [`rejection`].
    ReuseIfHealthy(Vec<String>),
    /// `--force-recreate`: delete it and create it again.
    Recreate,
    /// Incompatible and no `--force-recreate`: stop with this message.
    Reject(String),
}

/// Decides from whether the cluster exists and what each expected node showed.
pub fn plan_cluster(
    cluster_name: &str,
    exists: bool,
    force_recreate: bool,
    nodes: &[(String, Result<Started, NodeProblem>)],
) -> ClusterPlan {
    if !exists {
        return ClusterPlan::Create;
    }
    if force_recreate {
        return ClusterPlan::Recreate;
    }
    let problems: Vec<String> = nodes
        .iter()
        .filter_map(|(node, status)| {
            status
                .as_ref()
                .err()
                .map(|problem| format!("{node}: {problem}"))
        })
        .collect();
    if !problems.is_empty() {
        return ClusterPlan::Reject(rejection(cluster_name, "is incompatible", &problems));
    }
    let restarted: Vec<String> = nodes
        .iter()
        .filter(|(_, status)| matches!(status, Ok(Started::Again { .. })))
        .map(|(node, _)| node.clone())
        .collect();
    if restarted.is_empty() {
        ClusterPlan::Reuse
    } else {
        ClusterPlan::ReuseIfHealthy(restarted)
    }
}

/// Why cluster `cluster_name` is not reused (`what`: "is incompatible"), one
/// line per problem, and the fix.
pub fn rejection(cluster_name: &str, what: &str, problems: &[String]) -> String {
    format!(
        "kind cluster `{cluster_name}` exists but {what}:\n  {}\nfix: rerun with --force-recreate (or FORCE_RECREATE=true) to delete and recreate it, \
         or delete it yourself with `kind delete cluster --name {cluster_name}`",
        problems.join("\n  ")
    )
}

/// The two IMEX device majors given to the chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Majors {
    /// `nvidia-caps-imex-channels`.
    pub channel: DeviceMajor,
    /// `nvidia-caps`.
    pub caps: DeviceMajor,
}

/// The first major tried.
pub const FIRST_MAJOR: u32 = 240;

/// The first two majors from [`FIRST_MAJOR`] that none of the nodes'
/// `/proc/devices` texts binds (node-layout's [`free_major_pair`] decides).
pub fn free_majors(proc_devices: &[&str]) -> anyhow::Result<Majors> {
    let from = DeviceMajor::new(FIRST_MAJOR).expect("FIRST_MAJOR is a valid major");
    match free_major_pair(proc_devices, from).context("a node's /proc/devices")? {
        Some((channel, caps)) => Ok(Majors { channel, caps }),
        None => anyhow::bail!(
            "could not find two unused device majors from {FIRST_MAJOR} to 4095 across the nodes' /proc/devices"
        ),
    }
}

/// An image reference as loaded into the cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ImageRef {
    /// Repository, e.g. `nvml-mock`.
    pub repository: String,
    /// Tag, derived from the content digest.
    pub tag: String,
}

impl ImageRef {
    /// Splits `repo:tag` (the last `:` after the last `/`).
    pub fn parse(reference: &str) -> anyhow::Result<ImageRef> {
        let slash = reference.rfind('/').map_or(0, |idx| idx + 1);
        match reference[slash..].rfind(':') {
            Some(colon) if colon > 0 && slash + colon + 1 < reference.len() => Ok(ImageRef {
                repository: reference[..slash + colon].to_owned(),
                tag: reference[slash + colon + 1..].to_owned(),
            }),
            _ => anyhow::bail!("image reference `{reference}` has no tag: expected repository:tag"),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.repository, self.tag)
    }
}

/// The install's Helm values beyond the topology fragment (which the topology
/// crate renders and is passed as its own `-f` file). The keys are the
/// chart's (`manifests/chart/values.yaml`); `profile` is the chart's
/// `gpu.profile` (a shipped `profiles/<name>.yaml`).
pub fn install_values(image: &ImageRef, majors: Majors, profile: &str) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Values<'a> {
        image: Image<'a>,
        gpu: Gpu<'a>,
        nri: Enabled,
        imex: Imex,
        update_strategy: UpdateStrategy,
    }
    #[derive(Serialize)]
    struct Image<'a> {
        repository: &'a str,
        tag: &'a str,
    }
    #[derive(Serialize)]
    struct Gpu<'a> {
        profile: &'a str,
    }
    #[derive(Serialize)]
    struct Enabled {
        enabled: bool,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Imex {
        mock_channels: MockChannels,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct MockChannels {
        enabled: bool,
        channel_major: u32,
        caps_major: u32,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct UpdateStrategy {
        r#type: &'static str,
        rolling_update: RollingUpdate,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct RollingUpdate {
        max_unavailable: &'static str,
    }

    let values = Values {
        image: Image {
            repository: &image.repository,
            tag: &image.tag,
        },
        gpu: Gpu { profile },
        nri: Enabled { enabled: true },
        imex: Imex {
            mock_channels: MockChannels {
                enabled: true,
                channel_major: majors.channel.get(),
                caps_major: majors.caps.get(),
            },
        },
        update_strategy: UpdateStrategy {
            r#type: "RollingUpdate",
            rolling_update: RollingUpdate {
                max_unavailable: "100%",
            },
        },
    };
    let yaml =
        serde_yaml::to_string(&values).expect("the values serialize: plain strings and numbers");
    format!("# Written by cargo xtask; passed to helm with -f.\n{yaml}")
}

/// The values that put NVIDIA's IMEX programs into every tray's staged driver
/// root (the chart's `imex.driverRoot.image`), copied out of `image`: the
/// workload image built with an IMEX payload. A `-f` file beside
/// [`install_values`]'s.
pub fn imex_driver_root_values(image: &ImageRef) -> String {
    let values = serde_json::json!({
        "imex": { "driverRoot": { "image": {
            "repository": image.repository,
            "tag": image.tag,
            "pullPolicy": "IfNotPresent",
        } } },
    });
    let yaml = serde_yaml::to_string(&values).unwrap_or_default();
    format!("# Written by cargo xtask; passed to helm with -f.\n{yaml}")
}

/// The `helm upgrade --install` arguments (no `--wait`: the caller waits
/// through kube-rs watchers).
pub fn helm_install_args(chart: &str, kube_context: &str, values_files: &[String]) -> Vec<String> {
    let mut args = helm_upgrade(&["--install"], chart, kube_context);
    args.push("--create-namespace".to_owned());
    for file in values_files {
        args.push("-f".to_owned());
        args.push(file.clone());
    }
    args
}

/// The `helm upgrade --reuse-values` arguments of a topology swap.
pub fn helm_topology_args(chart: &str, kube_context: &str, values_file: &str) -> Vec<String> {
    let mut args = helm_upgrade(&[], chart, kube_context);
    args.extend(["--reuse-values", "-f", values_file].map(str::to_owned));
    args
}

/// `helm upgrade <flags> <release> <chart>` in the mock's namespace of `kube_context`.
fn helm_upgrade(flags: &[&str], chart: &str, kube_context: &str) -> Vec<String> {
    let release = [
        crate::names::RELEASE,
        chart,
        "--kube-context",
        kube_context,
        "--namespace",
        crate::names::MOCK_NS,
    ];
    std::iter::once("upgrade")
        .chain(flags.iter().copied())
        .chain(release)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::assert_contains;

    /// What kind's containerd 2.x patch produces (config version 3, single quotes).
    const KIND_V3: &str = r#"
version = 3
[plugins]
  [plugins.'io.containerd.cri.v1.runtime']
    enable_cdi = true
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = '/var/run/nri/nri.sock'
"#;

    /// Upstream's own wording (config version 2, double quotes).
    const KIND_V2: &str = r#"
version = 2
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "/var/run/nri/nri.sock"
"#;

    #[test]
    fn nri_on_the_expected_socket_passes_in_both_config_versions() {
        assert_eq!(check_nri(KIND_V3), Ok(()));
        assert_eq!(check_nri(KIND_V2), Ok(()));
    }

    #[test]
    fn nri_problems_are_named() {
        assert_eq!(
            check_nri("version = 3\n[plugins]\n"),
            Err(NodeProblem::NriSectionMissing)
        );
        assert_eq!(
            check_nri(&KIND_V2.replace("disable = false", "disable = true")),
            Err(NodeProblem::NriDisabled)
        );
        assert_eq!(
            check_nri(&KIND_V3.replace("/var/run/nri/nri.sock", "/run/other.sock")),
            Err(NodeProblem::WrongSocket("/run/other.sock".to_owned()))
        );
        assert!(matches!(
            check_nri("[plugins"),
            Err(NodeProblem::Unparseable(_))
        ));
    }

    /// Why a reuse of cluster `c` is rejected when `node` has `problem`.
    fn rejected(node: &str, problem: NodeProblem) -> String {
        match plan_cluster("c", true, false, &statuses(Some((node, problem)))) {
            ClusterPlan::Reject(message) => message,
            other => panic!("{node} must be rejected, not {other:?}"),
        }
    }

    fn statuses(
        problem_on: Option<(&str, NodeProblem)>,
    ) -> Vec<(String, Result<Started, NodeProblem>)> {
        ["c-control-plane", "c-worker", "c-worker2"]
            .iter()
            .map(|node| {
                let status = match &problem_on {
                    Some((bad, problem)) if bad == node => Err(problem.clone()),
                    _ => Ok(Started::Once),
                };
                ((*node).to_owned(), status)
            })
            .collect()
    }

    #[test]
    fn cluster_decisions() {
        assert_eq!(plan_cluster("c", false, false, &[]), ClusterPlan::Create);
        assert_eq!(plan_cluster("c", false, true, &[]), ClusterPlan::Create);
        assert_eq!(
            plan_cluster("c", true, false, &statuses(None)),
            ClusterPlan::Reuse
        );
        let bad = statuses(Some(("c-worker2", NodeProblem::NriSectionMissing)));
        assert_eq!(plan_cluster("c", true, true, &bad), ClusterPlan::Recreate);
        let ClusterPlan::Reject(message) = plan_cluster("c", true, false, &bad) else {
            panic!("an incompatible cluster must be rejected");
        };
        assert_contains(&message, "c-worker2: containerd has no");
        assert_contains(&message, "--force-recreate");
        assert_contains(&message, "FORCE_RECREATE=true");
        assert!(
            !message.contains("c-worker:"),
            "only the bad node is named: {message}"
        );
    }

    const CREATED: &str = "2026-12-02T21:00:00.123456789Z";

    #[test]
    fn a_container_is_checked_for_state_image_and_restarts() {
        let line = |state: &str, image: &str, started: &str| {
            format!("{state}|{image}|{CREATED}|{started}\n")
        };
        let fresh = line("running", "kindest/node:v1.34.3", "2026-12-02T21:00:03.5Z");
        assert_eq!(check_container(&fresh, None), Ok(Started::Once));
        assert_eq!(
            check_container(&fresh, Some("kindest/node:v1.34.3")),
            Ok(Started::Once)
        );
        assert_eq!(
            check_container(&fresh, Some("cdsim/kind-node:v1.34.3-abc")),
            Err(NodeProblem::OtherImage {
                running: "kindest/node:v1.34.3".to_owned(),
                wanted: "cdsim/kind-node:v1.34.3-abc".to_owned()
            })
        );
        let rebooted = line("running", "kindest/node:v1.34.3", "2026-12-03T08:00:00Z");
        assert_eq!(
            check_container(&rebooted, None),
            Ok(Started::Again {
                created: CREATED.to_owned(),
                started: "2026-12-03T08:00:00Z".to_owned()
            })
        );
        assert_eq!(
            check_container(&line("exited", "x", CREATED), None),
            Err(NodeProblem::NotRunning("exited".to_owned()))
        );
        // Docker's zero time for a never-started container, or a garbled line: no restart claimed.
        assert_eq!(
            check_container(&line("running", "x", "0001-01-01T00:00:00Z"), None),
            Ok(Started::Once)
        );
        assert_eq!(
            check_container("running|x|garbage|", None),
            Ok(Started::Once)
        );
    }

    #[test]
    fn a_restarted_cluster_is_reused_only_if_healthy_naming_the_restarted_nodes() {
        let mut nodes = statuses(None);
        nodes[2].1 = Ok(Started::Again {
            created: CREATED.to_owned(),
            started: "2026-12-03T08:00:00Z".to_owned(),
        });
        assert_eq!(
            plan_cluster("c", true, false, &nodes),
            ClusterPlan::ReuseIfHealthy(vec!["c-worker2".to_owned()])
        );
        // A real problem on another node still rejects it.
        nodes[1].1 = Err(NodeProblem::NriDisabled);
        assert!(matches!(
            plan_cluster("c", true, false, &nodes),
            ClusterPlan::Reject(_)
        ));
    }

    #[test]
    fn another_image_cluster_is_rejected_with_the_fix() {
        let message = rejected(
            "c-control-plane",
            NodeProblem::OtherImage {
                running: "kindest/node:v1.34.3".to_owned(),
                wanted: "cdsim/kind-node:v1.34.3-abc".to_owned(),
            },
        );
        assert_contains(&message, "runs kindest/node:v1.34.3, not the node image this run uses (cdsim/kind-node:v1.34.3-abc)");
    }

    #[test]
    fn a_stopped_node_rejects_reuse_and_is_named() {
        let message = rejected("c-worker", NodeProblem::NotRunning("exited".to_owned()));
        assert_contains(&message, "c-worker: node container is exited, not running");
    }

    /// A kind node's /proc/devices on a Debian 12 host (hidraw on 236, as upstream warns).
    const PROC_DEVICES: &str = "Character devices:
  1 mem
  4 /dev/vc/0
  5 /dev/tty
 10 misc
 89 i2c
128 ptm
136 pts
226 drm
236 hidraw
240 aux
241 cec
242 lirc
243 wwan_port

Block devices:
  7 loop
  8 sd
 11 sr
244 nvme
259 blkext
";

    fn majors(channel: u32, caps: u32) -> Majors {
        Majors {
            channel: DeviceMajor::new(channel).expect("valid"),
            caps: DeviceMajor::new(caps).expect("valid"),
        }
    }

    #[test]
    fn majors_skip_character_and_block_majors_of_every_node() {
        assert_eq!(
            free_majors(&[PROC_DEVICES]).expect("free"),
            majors(245, 246)
        );
        let other = "Character devices:\n245 other\n\nBlock devices:\n";
        assert_eq!(
            free_majors(&[PROC_DEVICES, other]).expect("free"),
            majors(246, 247)
        );
        let empty = "Character devices:\n\nBlock devices:\n";
        assert_eq!(free_majors(&[empty]).expect("free"), majors(240, 241));
    }

    #[test]
    fn majors_fail_when_none_are_free() {
        let all: String = (FIRST_MAJOR..4095)
            .map(|major| format!("{major} x{major}\n"))
            .collect();
        let all = format!("Character devices:\n{all}\nBlock devices:\n");
        let err = free_majors(&[&all]).expect_err("one left").to_string();
        assert_contains(&err, "could not find two unused device majors");
    }

    #[test]
    fn majors_refuse_a_text_that_is_not_proc_devices() {
        let err = format!(
            "{:#}",
            free_majors(&["hello"]).expect_err("not /proc/devices")
        );
        assert_contains(&err, "a node's /proc/devices");
    }

    #[test]
    fn image_references_split_at_the_tag() {
        let image = ImageRef::parse("localhost:5000/nvml-mock:sha-0123").expect("tagged");
        assert_eq!(image.repository, "localhost:5000/nvml-mock");
        assert_eq!(image.tag, "sha-0123");
        assert!(ImageRef::parse("localhost:5000/nvml-mock").is_err());
        assert!(ImageRef::parse("nvml-mock:").is_err());
    }

    #[test]
    fn values_carry_image_majors_and_profile() {
        let image = ImageRef::parse("nvml-mock:abc123").expect("tagged");
        let values = install_values(&image, majors(245, 246), "h100");
        let doc: serde_yaml::Value = serde_yaml::from_str(&values).expect("yaml");
        assert_eq!(doc["image"]["repository"], "nvml-mock");
        assert_eq!(doc["image"]["tag"], "abc123");
        assert_eq!(doc["gpu"]["profile"], "h100");
        assert_eq!(doc["nri"]["enabled"], true);
        assert_eq!(doc["imex"]["mockChannels"]["enabled"], true);
        assert_eq!(doc["imex"]["mockChannels"]["channelMajor"], 245);
        assert_eq!(doc["imex"]["mockChannels"]["capsMajor"], 246);
        assert_eq!(
            doc["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
            "100%"
        );
        assert!(
            doc.get("topology").is_none(),
            "the topology is its own values file"
        );
    }

    #[test]
    fn helm_arguments() {
        let args = helm_install_args(
            "chart",
            "kind-c",
            &["a.yaml".to_owned(), "b.yaml".to_owned()],
        );
        assert_eq!(
            args.join(" "),
            "upgrade --install nvml-mock chart --kube-context kind-c --namespace mokka --create-namespace -f a.yaml -f b.yaml"
        );
        let args = helm_topology_args("chart", "kind-c", "t.yaml");
        assert_eq!(
            args.join(" "),
            "upgrade nvml-mock chart --kube-context kind-c --namespace mokka --reuse-values -f t.yaml"
        );
    }

    fn helm() -> std::path::PathBuf {
        let cached = std::path::PathBuf::from("/var/cache/cdsim/bin/helm");
        if cached.exists() {
            return cached;
        }
        let on_path = std::process::Command::new("helm").arg("version").output();
        assert!(
            on_path.is_ok_and(|out| out.status.success()),
            "helm is needed for this test: run `cargo xtask doctor` (cargo xtask installs the pinned helm) or put helm on PATH"
        );
        std::path::PathBuf::from("helm")
    }

    /// The values we pass render through the real chart (its schema included)
    /// into what the DaemonSets need.
    #[test]
    fn values_render_through_the_real_chart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let values = dir.path().join("values.yaml");
        let topology_values = dir.path().join("topology.yaml");
        let image = ImageRef::parse("nvml-mock:0123456789ab").expect("tagged");
        std::fs::write(&values, install_values(&image, majors(245, 246), "gb200")).expect("write");
        let workers = topology::kind_workers("c", 4);
        std::fs::write(&topology_values, topology::demo(&workers).helm_values()).expect("write");
        let chart = crate::project_root().join(crate::names::CHART);
        let out = std::process::Command::new(helm())
            .args(["template", "nvml-mock"])
            .arg(&chart)
            .args(["--namespace", "mokka", "-f"])
            .arg(&values)
            .arg("-f")
            .arg(&topology_values)
            .output()
            .expect("helm runs");
        let rendered = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "helm template failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_contains(&rendered, "image: \"nvml-mock:0123456789ab\"");
        assert!(rendered.contains("245"), "channel major rendered");
        assert!(rendered.contains("c-worker4"), "topology rendered");
        assert!(
            rendered.contains("name: nvml-mock-nri"),
            "NRI DaemonSet rendered"
        );
    }

    #[test]
    fn imex_driver_root_values_name_the_payload_image_for_the_chart() {
        let image = ImageRef::parse("nvml-mock-workload:0123abcd").expect("ref");
        let text = imex_driver_root_values(&image);
        let values: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
        let at = &values["imex"]["driverRoot"]["image"];
        assert_eq!(at["repository"].as_str(), Some("nvml-mock-workload"));
        assert_eq!(at["tag"].as_str(), Some("0123abcd"));
        assert_eq!(at["pullPolicy"].as_str(), Some("IfNotPresent"));
    }
}
