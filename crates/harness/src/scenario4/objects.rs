//! Scenario 4's pure planning: the chart's values and arguments, the
//! ComputeDomain and workload objects, and the readers of what NVIDIA's
//! driver writes (nodes config, clique objects, the domain's status).

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use super::{
    CD_NAME, CHANNEL_RCT, DRA_NS, DRA_RELEASE, DRIVER_ROOT, PROC_DEVICES, S4_NS, WORKLOAD_LABEL,
};
use crate::plan::ImageRef;

/// The DRA chart's values: compute domains only, on the staged driver root.
pub fn chart_values(image: &ImageRef) -> String {
    let values = json!({
        "nvidiaDriverRoot": DRIVER_ROOT,
        "altProcDevices": PROC_DEVICES,
        "resources": {
            "gpus": { "enabled": false },
            "computeDomains": { "enabled": true },
        },
        "image": {
            "repository": image.repository,
            "tag": image.tag,
            "pullPolicy": "Never",
        },
        "kubeletPlugin": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{
                            "matchExpressions": [{
                                "key": "nvidia.com/gpu.present",
                                "operator": "In",
                                "values": ["true"],
                            }],
                        }],
                    },
                },
            },
        },
    });
    serde_yaml::to_string(&values).unwrap_or_default()
}

/// `helm upgrade --install` of the DRA chart (idempotent).
pub fn helm_args(chart: &Path, context: &str, values: &Path) -> Vec<String> {
    [
        "upgrade",
        "--install",
        DRA_RELEASE,
        &chart.to_string_lossy(),
        "--kube-context",
        context,
        "--namespace",
        DRA_NS,
        "--create-namespace",
        "-f",
        &values.to_string_lossy(),
    ]
    .iter()
    .map(|it| (*it).to_owned())
    .collect()
}

/// The ComputeDomain: two nodes, a channel claim template for the workload.
pub fn compute_domain() -> Value {
    json!({
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": { "name": CD_NAME, "namespace": S4_NS },
        "spec": {
            "numNodes": 2,
            "channel": { "resourceClaimTemplate": { "name": CHANNEL_RCT } },
        },
    })
}

/// A workload pod on `node`, placed through the scheduler (node affinity,
/// never `nodeName`, which would skip DRA allocation), claiming the channel.
pub fn workload_pod(name: &str, node: &str, image: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": S4_NS,
            "labels": { WORKLOAD_LABEL.0: WORKLOAD_LABEL.1 },
        },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchExpressions": [{
                    "key": "kubernetes.io/hostname", "operator": "In", "values": [node],
                }]}],
            }}},
            "resourceClaims": [{ "name": "channel", "resourceClaimTemplateName": CHANNEL_RCT }],
            "containers": [{
                "name": "workload",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", "ls -l /dev/nvidia-caps-imex-channels && sleep 3600"],
                "resources": { "claims": [{ "name": "channel" }] },
            }],
        },
    })
}

/// The clique id NVIDIA's plugin derives for a node: `<cluster uuid>.<clique>`.
pub fn clique_id(topology: &topology::Topology, node: &str) -> Option<String> {
    topology
        .resolve(node)
        .map(|identity| format!("{}.{}", identity.cluster_uuid, identity.clique_id))
}

/// The two clique-0 workers of the demo topology and their clique id.
pub fn clique0_pair(workers: &[String]) -> Result<([String; 2], String)> {
    let topology = topology::demo(workers);
    let clique0: Vec<&String> = workers
        .iter()
        .filter(|node| topology.resolve(node).is_some_and(|it| it.clique_id == 0))
        .collect();
    match clique0.as_slice() {
        [a, b, ..] => {
            let id = clique_id(&topology, a)
                .with_context(|| format!("{a} is not in the demo topology"))?;
            Ok(([(*a).clone(), (*b).clone()], id))
        }
        _ => bail!("scenario 4 needs two workers in clique 0, found {clique0:?}"),
    }
}

/// The ComputeDomainClique's name for a domain and clique.
pub fn clique_object_name(cd_uid: &str, clique: &str) -> String {
    format!("{cd_uid}.{clique}")
}

/// Host names listed in a `nodes.cfg` (one per line, comments and blanks skipped).
pub fn nodes_cfg_entries(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// The nodes a ComputeDomainClique object lists (`daemons[].nodeName`).
pub fn clique_daemon_nodes(clique: &Value) -> BTreeSet<String> {
    clique["daemons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|daemon| daemon["nodeName"].as_str().map(str::to_owned))
        .collect()
}

/// What the ComputeDomain's status says (`Ready`, `NotReady`, or empty).
pub fn cd_status(cd: &Value) -> String {
    cd["status"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
