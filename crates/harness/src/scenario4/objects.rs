//! Scenario 4's pure planning: the chart's values and arguments, the
//! ComputeDomain and workload objects, and the readers of what NVIDIA's
//! driver writes (nodes config, clique objects, the domain's status).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use super::names::{
    CD_NAME, CHANNEL_RCT, DRA_NS, DRA_RELEASE, DRIVER_ROOT, PROC_DEVICES, S4_NS,
    WORKLOAD_CONTAINER, WORKLOAD_LABEL,
};
use crate::fabric::Expected;
use crate::k8s::idle_pod::{Asks, IdlePod};
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
            // The released image is pulled; an offline build is already on the nodes.
            "pullPolicy": "IfNotPresent",
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

/// The ComputeDomain over `nodes` nodes, a channel claim template for the workload.
pub fn compute_domain(nodes: usize) -> Value {
    json!({
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": { "name": CD_NAME, "namespace": S4_NS },
        "spec": {
            "numNodes": nodes,
            "channel": { "resourceClaimTemplate": { "name": CHANNEL_RCT } },
        },
    })
}

/// A workload pod on `node` ([`IdlePod`]) claiming the domain's channel; it
/// lists the channel devices it was given, then idles.
pub fn workload_pod(name: &str, node: &str, image: &str) -> Value {
    IdlePod {
        name,
        namespace: S4_NS,
        label: WORKLOAD_LABEL,
        node,
        image,
        container: WORKLOAD_CONTAINER,
        script: "ls -l /dev/nvidia-caps-imex-channels && sleep 3600",
        asks: Asks::ClaimFromTemplate {
            name: "channel",
            template: CHANNEL_RCT,
        },
    }
    .manifest()
}

/// The clique id NVIDIA's plugin derives for a worker expected at `it`:
/// `<cluster uuid>.<clique>`.
fn expected_clique_id(it: &Expected) -> String {
    format!("{}.{}", it.uuid, it.clique)
}

/// Scenario 4's ComputeDomain: its nodes, each with the clique id NVIDIA's
/// plugin derives for it from the staged topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainPlan {
    nodes: Vec<(String, String)>,
}

impl DomainPlan {
    /// The first clique (the lowest id) of every NVLink domain among the
    /// workers' `expected` identities, in worker order: on the demo layout
    /// clique 0 of every rack (today's demo: the two clique-0 workers; a rack
    /// of one clique: the whole rack; two racks: a clique of each);
    /// on a `--kube-context` cluster, of whatever topology is staged.
    pub fn first_clique_of_each_domain(expected: &[(String, Expected)]) -> Result<DomainPlan> {
        let mut first: BTreeMap<String, u32> = BTreeMap::new();
        for (_, it) in expected {
            let uuid = it.uuid.to_ascii_lowercase();
            let lowest = first.entry(uuid).or_insert(it.clique);
            *lowest = (*lowest).min(it.clique);
        }
        let nodes: Vec<(String, String)> = expected
            .iter()
            .filter(|(_, it)| first.get(&it.uuid.to_ascii_lowercase()) == Some(&it.clique))
            .map(|(node, it)| (node.clone(), expected_clique_id(it)))
            .collect();
        if nodes.len() < 2 {
            bail!(
                "scenario 4 needs a ComputeDomain of at least two trays; the first clique of each NVLink \
                 domain of the staged topology gives {:?}: stage a topology with two trays in one clique \
                 (--topology) or more trays",
                nodes.iter().map(|(node, _)| node).collect::<Vec<_>>()
            );
        }
        Ok(DomainPlan { nodes })
    }

    /// `nodes` with their clique ids among the workers' `expected` identities
    /// (each must be among them).
    pub fn under_expected(nodes: &[String], expected: &[(String, Expected)]) -> Result<DomainPlan> {
        let nodes = nodes
            .iter()
            .map(|node| {
                expected
                    .iter()
                    .find(|(it, _)| it == node)
                    .map(|(_, it)| (node.clone(), expected_clique_id(it)))
                    .with_context(|| format!("{node} is in no clique of the topology"))
            })
            .collect::<Result<_>>()?;
        Ok(DomainPlan { nodes })
    }

    /// The nodes, in worker order.
    pub fn nodes(&self) -> Vec<String> {
        self.nodes.iter().map(|(node, _)| node.clone()).collect()
    }

    /// A node's clique id.
    pub fn clique_of(&self, node: &str) -> Option<&str> {
        self.nodes
            .iter()
            .find(|(it, _)| it == node)
            .map(|(_, clique)| clique.as_str())
    }

    /// Each clique id with its nodes: one ComputeDomainClique each is expected.
    pub fn cliques(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (node, clique) in &self.nodes {
            out.entry(clique.clone()).or_default().insert(node.clone());
        }
        out
    }
}

/// The ComputeDomainClique's name for a domain and clique.
pub fn clique_object_name(cd_uid: &str, clique: &str) -> String {
    format!("{cd_uid}.{clique}")
}

/// Whether the domain's ComputeDomainClique `objects` (name → listed nodes)
/// are one per expected clique (clique id → its nodes), each listing only
/// nodes of its own clique; `Err` says what is not so (yet).
pub fn split_clique_objects(
    cd_uid: &str,
    expected: &BTreeMap<String, BTreeSet<String>>,
    objects: &BTreeMap<String, BTreeSet<String>>,
) -> std::result::Result<(), String> {
    let missing: Vec<String> = expected
        .keys()
        .map(|clique| clique_object_name(cd_uid, clique))
        .filter(|name| !objects.contains_key(name))
        .collect();
    if !missing.is_empty() {
        return Err(format!("not created yet: {}", missing.join(", ")));
    }
    for (name, nodes) in objects {
        let clique = name
            .strip_prefix(cd_uid)
            .and_then(|rest| rest.strip_prefix('.'))
            .unwrap_or(name);
        let Some(members) = expected.get(clique) else {
            return Err(format!("{name}: a clique none of the domain's nodes is in"));
        };
        let strangers: Vec<&String> = nodes.difference(members).collect();
        if !strangers.is_empty() {
            return Err(format!(
                "{name} mixes in nodes of another clique: {strangers:?}"
            ));
        }
    }
    Ok(())
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
