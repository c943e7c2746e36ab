//! Node facts through the cluster, for `up --kube-context`: one short-lived
//! probe pod per target node runs `nvml-mock-stager node-facts` from the
//! pushed mock image, and its log (`node_layout::facts`) says whether NRI
//! answers and which device majors the node's kernel binds. No `docker exec`,
//! so it serves any cluster; the same pods prove that every node can pull
//! from the registry.
//!
//! The pure half ([`probe_pod`], [`probe_state`], [`conclude`]) is tested
//! here; [`gather`] is the I/O.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::{Client, ResourceExt};
use node_layout::facts::{NodeFacts, Nri, HOST_RUN, HOST_RUN_MOUNT, NRI_SOCKET};

use crate::names::MOCK_NS;
use crate::plan::Majors;

/// The probe pods' label (`app.kubernetes.io/name`).
pub const PROBE_NAME: &str = "nvml-mock-node-facts";

/// How long the probes may take in all: a node that cannot pull or run one
/// is reported within this.
pub const PROBE_LIMIT: Duration = Duration::from_secs(60);

/// The probe pod for `node`, pinned to it (`nodeName`, every taint
/// tolerated), running `nvml-mock-stager node-facts` from `image`.
pub fn probe_pod(node: &str, image: &str) -> Pod {
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": format!("{PROBE_NAME}-"),
            "namespace": MOCK_NS,
            "labels": { "app.kubernetes.io/name": PROBE_NAME, "app.kubernetes.io/part-of": "cdsim" },
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": [{ "operator": "Exists" }],
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "node-facts",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/usr/local/bin/nvml-mock-stager", "node-facts"],
                "volumeMounts": [{ "name": "host-run", "mountPath": HOST_RUN_MOUNT, "readOnly": true }],
            }],
            "volumes": [{ "name": "host-run", "hostPath": { "path": HOST_RUN, "type": "Directory" } }],
        },
    });
    serde_json::from_value(pod).expect("the probe pod is a valid Pod")
}

/// Where a probe pod is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeState {
    /// Not finished yet; what it waits for.
    Waiting(String),
    /// The image cannot be pulled: the kubelet's reason and message.
    PullFailed(String),
    /// Ran and exited 0: read its log.
    Done,
    /// Ran and failed.
    Failed(String),
}

/// The state of a probe pod, from its status.
pub fn probe_state(pod: &Pod) -> ProbeState {
    let Some(status) = pod.status.as_ref() else {
        return ProbeState::Waiting("no status yet".to_owned());
    };
    match status.phase.as_deref() {
        Some("Succeeded") => return ProbeState::Done,
        Some("Failed") => {
            let why = status
                .container_statuses
                .iter()
                .flatten()
                .filter_map(|it| it.state.as_ref()?.terminated.as_ref())
                .map(|it| {
                    format!(
                        "exit {} {}",
                        it.exit_code,
                        it.message.clone().unwrap_or_default()
                    )
                })
                .next()
                .or_else(|| status.message.clone())
                .unwrap_or_else(|| "failed".to_owned());
            return ProbeState::Failed(why);
        }
        _ => {}
    }
    let waiting = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|it| it.state.as_ref()?.waiting.as_ref())
        .next();
    match waiting {
        Some(waiting)
            if matches!(
                waiting.reason.as_deref(),
                Some("ErrImagePull" | "ImagePullBackOff" | "InvalidImageName")
            ) =>
        {
            ProbeState::PullFailed(format!(
                "{}: {}",
                waiting.reason.as_deref().unwrap_or_default(),
                waiting.message.as_deref().unwrap_or("no message")
            ))
        }
        Some(waiting) => ProbeState::Waiting(
            waiting
                .reason
                .clone()
                .unwrap_or_else(|| "container waiting".to_owned()),
        ),
        None => ProbeState::Waiting(status.phase.clone().unwrap_or_else(|| "Pending".to_owned())),
    }
}

/// The majors free on every node, or what keeps the install from working:
/// every node without NRI, named, with the fix.
pub fn conclude(facts: &BTreeMap<String, NodeFacts>) -> anyhow::Result<Majors> {
    let without: Vec<String> = facts
        .iter()
        .filter(|(_, it)| it.nri != Nri::Listening)
        .map(|(node, it)| format!("{node} (NRI socket {})", it.nri))
        .collect();
    if !without.is_empty() {
        anyhow::bail!(
            "containerd NRI is not enabled on {}: the NRI plugin cannot inject the mock there. \
             Enable it in each node's /etc/containerd/config.toml (containerd >= 1.7; on by default in 2.x):\n  \
             [plugins.\"io.containerd.nri.v1.nri\"]\n    disable = false\n    socket_path = \"{NRI_SOCKET}\"\n\
             then restart containerd, or choose other nodes with --node-selector",
            without.join(", ")
        );
    }
    let sources: Vec<&str> = facts.values().map(|it| it.proc_devices.as_str()).collect();
    crate::plan::free_majors(&sources)
}

/// Runs the probe on every node in `nodes` with `image` and returns each
/// node's facts; an image a node cannot pull, or a probe that fails or does
/// not finish within [`PROBE_LIMIT`], is an error naming the node. The probe
/// pods are deleted in every case.
pub async fn gather(
    client: &Client,
    nodes: &[String],
    image: &str,
) -> anyhow::Result<BTreeMap<String, NodeFacts>> {
    ensure_namespace(client).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), MOCK_NS);
    let mut names = BTreeMap::new();
    let result = async {
        for node in nodes {
            let created = pods
                .create(&PostParams::default(), &probe_pod(node, image))
                .await
                .with_context(|| format!("creating the node-facts probe pod on {node}"))?;
            names.insert(node.clone(), created.name_any());
        }
        watch(&pods, &names, image).await
    }
    .await;
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    for name in names.values() {
        let _ = pods.delete(name, &params).await;
    }
    result
}

async fn ensure_namespace(client: &Client) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(MOCK_NS).await?.is_some() {
        return Ok(());
    }
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": MOCK_NS } }))?;
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {MOCK_NS}"))?;
    Ok(())
}

async fn watch(
    pods: &Api<Pod>,
    names: &BTreeMap<String, String>,
    image: &str,
) -> anyhow::Result<BTreeMap<String, NodeFacts>> {
    let started = Instant::now();
    let mut facts = BTreeMap::new();
    let mut last_report = Instant::now();
    while facts.len() < names.len() {
        let listed = pods
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={PROBE_NAME}")))
            .await
            .context("listing the node-facts probe pods")?;
        let mut waiting = Vec::new();
        for (node, name) in names {
            if facts.contains_key(node) {
                continue;
            }
            let Some(pod) = listed.items.iter().find(|it| &it.name_any() == name) else {
                waiting.push(format!("{node}: pod not listed yet"));
                continue;
            };
            match probe_state(pod) {
                ProbeState::Done => {
                    let log = pods
                        .logs(name, &LogParams::default())
                        .await
                        .with_context(|| format!("reading the node-facts log of {node}"))?;
                    let parsed = NodeFacts::parse(&log)
                        .with_context(|| format!("node {node}: the probe printed {log:?}"))?;
                    facts.insert(node.clone(), parsed);
                }
                ProbeState::PullFailed(why) => anyhow::bail!(
                    "node {node} cannot pull {image}: {why}\n  \
                     The nodes pull from the registry themselves: it must be reachable from every node \
                     (an address such as 127.0.0.1 is the node itself), and a registry without TLS must be \
                     trusted by each node's containerd, e.g. /etc/containerd/certs.d/<host:port>/hosts.toml with \
                     server = \"http://<host:port>\" and [host.\"http://<host:port>\"] capabilities = [\"pull\", \"resolve\"]"
                ),
                ProbeState::Failed(why) => {
                    anyhow::bail!("the node-facts probe failed on node {node}: {why}")
                }
                ProbeState::Waiting(why) => waiting.push(format!("{node}: {why}")),
            }
        }
        if facts.len() == names.len() {
            break;
        }
        if started.elapsed() > PROBE_LIMIT {
            anyhow::bail!(
                "the node-facts probes did not finish within {}s: {}; is each node Ready and able to run pods?",
                PROBE_LIMIT.as_secs(),
                waiting.join("; ")
            );
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "    waiting for node facts ({:.0}s): {}",
                started.elapsed().as_secs_f64(),
                waiting.join("; ")
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_with_status(status: serde_json::Value) -> Pod {
        let mut pod = probe_pod("worker", "registry.example/nvml-mock:1");
        pod.status = Some(serde_json::from_value(status).expect("status"));
        pod
    }

    #[test]
    fn the_probe_is_pinned_to_its_node_and_tolerates_every_taint() {
        let pod = probe_pod("gpu-7", "r.example:5000/nvml-mock:abc");
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("gpu-7"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let tolerations = spec.tolerations.expect("tolerations");
        assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"));
        let container = &spec.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("r.example:5000/nvml-mock:abc")
        );
        assert_eq!(
            container.command.as_deref(),
            Some(
                &[
                    "/usr/local/bin/nvml-mock-stager".to_owned(),
                    "node-facts".to_owned()
                ][..]
            )
        );
    }

    #[test]
    fn pull_failures_are_told_from_waiting_and_from_failures() {
        let pulling = pod_with_status(serde_json::json!({
            "phase": "Pending",
            "containerStatuses": [{ "name": "node-facts", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": { "waiting": { "reason": "ContainerCreating" } } }],
        }));
        assert_eq!(
            probe_state(&pulling),
            ProbeState::Waiting("ContainerCreating".to_owned())
        );
        let refused = pod_with_status(serde_json::json!({
            "phase": "Pending",
            "containerStatuses": [{ "name": "node-facts", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": { "waiting": { "reason": "ErrImagePull",
                "message": "dial tcp 127.0.0.1:5000: connect: connection refused" } } }],
        }));
        assert!(
            matches!(probe_state(&refused), ProbeState::PullFailed(why) if why.contains("connection refused"))
        );
        let done = pod_with_status(serde_json::json!({ "phase": "Succeeded" }));
        assert_eq!(probe_state(&done), ProbeState::Done);
        let failed = pod_with_status(serde_json::json!({
            "phase": "Failed",
            "containerStatuses": [{ "name": "node-facts", "image": "x", "imageID": "", "ready": false,
                "restartCount": 0, "state": { "terminated": { "exitCode": 1, "message": "boom" } } }],
        }));
        assert_eq!(
            probe_state(&failed),
            ProbeState::Failed("exit 1 boom".to_owned())
        );
    }

    const DEVICES: &str = "Character devices:\n  1 mem\n240 used\n\nBlock devices:\n  7 loop\n";

    #[test]
    fn majors_are_free_on_every_node() {
        let facts = BTreeMap::from([
            (
                "a".to_owned(),
                NodeFacts {
                    nri: Nri::Listening,
                    proc_devices: DEVICES.to_owned(),
                },
            ),
            (
                "b".to_owned(),
                NodeFacts {
                    nri: Nri::Listening,
                    proc_devices: DEVICES.replace("240 used", "241 other"),
                },
            ),
        ]);
        let majors = conclude(&facts).expect("majors");
        assert_eq!((majors.channel.get(), majors.caps.get()), (242, 243));
    }

    #[test]
    fn nodes_without_nri_are_named_with_the_fix() {
        let facts = BTreeMap::from([
            (
                "ok".to_owned(),
                NodeFacts {
                    nri: Nri::Listening,
                    proc_devices: DEVICES.to_owned(),
                },
            ),
            (
                "old".to_owned(),
                NodeFacts {
                    nri: Nri::Absent,
                    proc_devices: DEVICES.to_owned(),
                },
            ),
        ]);
        let err = conclude(&facts).expect_err("no NRI").to_string();
        assert!(err.contains("old (NRI socket absent)"), "{err}");
        assert!(!err.contains("ok ("), "{err}");
        assert!(err.contains("io.containerd.nri.v1.nri"), "{err}");
    }
}
