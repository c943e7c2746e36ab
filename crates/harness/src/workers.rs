//! Which nodes of a cluster reached through `--kube-context` are the demo's
//! workers: the nodes where the workload can run. Pure: the caller lists the
//! nodes and reads the workload's placement from its manifest.
//!
//! The rules are the scheduler's for a DaemonSet pod: every `nodeSelector`
//! label must match, the node must be schedulable, and every `NoSchedule` or
//! `NoExecute` taint must be tolerated (`PreferNoSchedule` never keeps a pod
//! off a node).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Node, PodSpec, Taint, Toleration};

/// Where the workload may run: its manifest's `nodeSelector` and tolerations,
/// narrowed by `--node-selector`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// Labels every worker must carry, with these values.
    pub node_selector: BTreeMap<String, String>,
    /// The workload pod's tolerations.
    pub tolerations: Vec<Toleration>,
}

impl Placement {
    /// The workload pod template's placement.
    pub fn of_pod(spec: &PodSpec) -> Placement {
        Placement {
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
        }
    }

    /// Adds `--node-selector key=value[,key=value]` to the manifest's selector.
    pub fn narrowed(mut self, flag: &str) -> Result<Placement, String> {
        for pair in flag.split(',').filter(|it| !it.trim().is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!(
                    "--node-selector {flag:?}: `{pair}` is not key=value (e.g. --node-selector pool=gpu-test)"
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() {
                return Err(format!(
                    "--node-selector {flag:?}: `{pair}` has an empty key"
                ));
            }
            self.node_selector.insert(key.to_owned(), value.to_owned());
        }
        Ok(self)
    }
}

/// Why a node is not a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skipped {
    /// A selector label is absent or has another value.
    Label {
        /// The selector's key.
        key: String,
        /// The selector's value.
        wanted: String,
        /// The node's value, if it has the label.
        found: Option<String>,
    },
    /// `spec.unschedulable` (cordoned).
    Cordoned,
    /// A taint the workload does not tolerate.
    Taint {
        /// `key[=value]:effect`.
        taint: String,
    },
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skipped::Label {
                key,
                wanted,
                found: None,
            } => write!(f, "no label {key}={wanted}"),
            Skipped::Label {
                key,
                wanted,
                found: Some(found),
            } => write!(f, "label {key}={found}, not {wanted}"),
            Skipped::Cordoned => f.write_str("cordoned (spec.unschedulable)"),
            Skipped::Taint { taint } => {
                write!(f, "taint {taint} is not tolerated by the workload")
            }
        }
    }
}

/// The chosen workers, sorted, and every other node with its reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Nodes the workload can run on.
    pub workers: Vec<String>,
    /// The other nodes, each with why not.
    pub skipped: Vec<(String, Skipped)>,
}

impl Selection {
    /// One line for the log: what was chosen and why the rest was not.
    pub fn describe(&self) -> String {
        let mut line = format!("workers: {}", self.workers.join(", "));
        if !self.skipped.is_empty() {
            let skipped: Vec<String> = self
                .skipped
                .iter()
                .map(|(node, why)| format!("{node} ({why})"))
                .collect();
            line.push_str(&format!("; skipped: {}", skipped.join(", ")));
        }
        line
    }
}

/// Splits the nodes into workers and skipped nodes.
pub fn select(nodes: &[Node], placement: &Placement) -> Selection {
    let mut selection = Selection::default();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        match why_not(node, placement) {
            None => selection.workers.push(name),
            Some(why) => selection.skipped.push((name, why)),
        }
    }
    selection.workers.sort();
    selection.skipped.sort_by(|a, b| a.0.cmp(&b.0));
    selection
}

fn why_not(node: &Node, placement: &Placement) -> Option<Skipped> {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    if let Some(why) = label_mismatch(&labels, &placement.node_selector) {
        return Some(why);
    }
    let spec = node.spec.clone().unwrap_or_default();
    if spec.unschedulable == Some(true) {
        return Some(Skipped::Cordoned);
    }
    spec.taints
        .unwrap_or_default()
        .iter()
        .filter(|taint| taint.effect == "NoSchedule" || taint.effect == "NoExecute")
        .find(|taint| !placement.tolerations.iter().any(|it| tolerates(it, taint)))
        .map(|taint| Skipped::Taint {
            taint: spell(taint),
        })
}

/// The label the stager puts on every node it stages
/// (`nvidia.com/gpu.present=true`), which the workload selects.
pub const STAGED_LABEL: (&str, &str) = ("nvidia.com/gpu.present", "true");

/// Before the install (`up --kube-context`): the nodes the chart will stage
/// (every node carrying `chart_selector`'s labels; its DaemonSets tolerate
/// every taint) and the workers among them, chosen as if the stager had
/// already labelled them.
pub fn select_before_staging(
    nodes: &[Node],
    chart_selector: &BTreeMap<String, String>,
    workload: &Placement,
) -> (Vec<String>, Selection) {
    let mut staged = Vec::new();
    let mut off_chart = Vec::new();
    for node in nodes {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        match label_mismatch(&labels, chart_selector) {
            Some(why) => off_chart.push((node.metadata.name.clone().unwrap_or_default(), why)),
            None => {
                let mut node = node.clone();
                node.metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(STAGED_LABEL.0.to_owned(), STAGED_LABEL.1.to_owned());
                staged.push(node);
            }
        }
    }
    let mut chart_nodes: Vec<String> = staged
        .iter()
        .map(|node| node.metadata.name.clone().unwrap_or_default())
        .collect();
    chart_nodes.sort();
    let mut selection = select(&staged, workload);
    selection.skipped.extend(off_chart);
    selection.skipped.sort_by(|a, b| a.0.cmp(&b.0));
    (chart_nodes, selection)
}

fn label_mismatch(
    labels: &BTreeMap<String, String>,
    selector: &BTreeMap<String, String>,
) -> Option<Skipped> {
    selector
        .iter()
        .find(|(key, wanted)| labels.get(*key) != Some(*wanted))
        .map(|(key, wanted)| Skipped::Label {
            key: key.clone(),
            wanted: wanted.clone(),
            found: labels.get(key).cloned(),
        })
}

/// Kubernetes' rule: an empty effect matches every effect; an empty key with
/// `Exists` matches every taint; `Exists` ignores the value; `Equal` (the
/// default operator) needs the same value.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let exists = toleration.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        return exists;
    }
    if key != taint.key {
        return false;
    }
    exists
        || toleration.value.as_deref().unwrap_or_default()
            == taint.value.as_deref().unwrap_or_default()
}

fn spell(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{}={value}:{}", taint.key, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

/// How a topology covers the workers.
#[derive(Debug, PartialEq, Eq)]
pub struct Coverage {
    /// Workers the topology names, in worker order.
    pub named: Vec<String>,
    /// Workers it does not name (they get the profile defaults).
    pub unnamed: Vec<String>,
    /// Nodes it names that are not workers, in document order.
    pub strangers: Vec<String>,
}

/// Which workers `topology` names, which it leaves out, and what else it names.
pub fn coverage(topology: &topology::Topology, workers: &[String]) -> Coverage {
    let (named, unnamed) = workers
        .iter()
        .cloned()
        .partition(|node| topology.resolve(node).is_some());
    let strangers = topology
        .domains
        .iter()
        .flat_map(|domain| &domain.cliques)
        .flat_map(|clique| &clique.nodes)
        .filter(|node| !workers.contains(node))
        .cloned()
        .collect();
    Coverage {
        named,
        unnamed,
        strangers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::assert_contains;

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str, &str)]) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": name,
                "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
            },
            "spec": {
                "taints": taints.iter().map(|(key, value, effect)| serde_json::json!({
                    "key": key, "value": value, "effect": effect,
                })).collect::<Vec<_>>(),
            },
        }))
        .expect("node")
    }

    const GPU: (&str, &str) = STAGED_LABEL;
    const CONTROL_PLANE: (&str, &str, &str) =
        ("node-role.kubernetes.io/control-plane", "", "NoSchedule");

    fn demo_placement() -> Placement {
        Placement {
            node_selector: BTreeMap::from([(GPU.0.to_owned(), GPU.1.to_owned())]),
            tolerations: Vec::new(),
        }
    }

    #[test]
    fn a_labelled_but_tainted_control_plane_is_skipped_and_named() {
        let nodes = [
            node("c-worker2", &[GPU], &[]),
            node("c-control-plane", &[GPU], &[CONTROL_PLANE]),
            node("c-worker", &[GPU], &[]),
            node("other", &[], &[]),
        ];
        let chosen = select(&nodes, &demo_placement());
        assert_eq!(chosen.workers, ["c-worker", "c-worker2"]);
        assert_eq!(
            chosen.describe(),
            "workers: c-worker, c-worker2; skipped: c-control-plane (taint \
             node-role.kubernetes.io/control-plane:NoSchedule is not tolerated by the workload), \
             other (no label nvidia.com/gpu.present=true)"
        );
    }

    #[test]
    fn before_staging_the_chart_nodes_count_as_labelled_and_the_control_plane_is_still_skipped() {
        let nodes = [
            node("c-control-plane", &[("pool", "gpu")], &[CONTROL_PLANE]),
            node("c-worker", &[("pool", "gpu")], &[]),
            node("c-worker2", &[("pool", "gpu")], &[]),
            node("cpu-1", &[("pool", "cpu")], &[]),
        ];
        let chart = BTreeMap::from([("pool".to_owned(), "gpu".to_owned())]);
        let (staged, chosen) = select_before_staging(&nodes, &chart, &demo_placement());
        assert_eq!(staged, ["c-control-plane", "c-worker", "c-worker2"]);
        assert_eq!(chosen.workers, ["c-worker", "c-worker2"]);
        assert_eq!(
            chosen.describe(),
            "workers: c-worker, c-worker2; skipped: c-control-plane (taint \
             node-role.kubernetes.io/control-plane:NoSchedule is not tolerated by the workload), \
             cpu-1 (label pool=cpu, not gpu)"
        );
        let (all, _) = select_before_staging(&nodes, &BTreeMap::new(), &demo_placement());
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn tolerations_follow_the_kubernetes_rules() {
        let tainted = [node("n", &[], &[("dedicated", "gpu", "NoExecute")])];
        let with = |toleration: serde_json::Value| Placement {
            node_selector: BTreeMap::new(),
            tolerations: vec![serde_json::from_value(toleration).expect("toleration")],
        };
        let runs = |placement: Placement| select(&tainted, &placement).workers.len() == 1;
        assert!(runs(with(
            serde_json::json!({"key": "dedicated", "value": "gpu"})
        )));
        assert!(runs(with(
            serde_json::json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"})
        )));
        assert!(runs(with(serde_json::json!({"operator": "Exists"}))));
        assert!(!runs(with(
            serde_json::json!({"key": "dedicated", "value": "cpu"})
        )));
        assert!(!runs(with(
            serde_json::json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"})
        )));
        assert!(!runs(with(
            serde_json::json!({"key": "other", "operator": "Exists"})
        )));
        // PreferNoSchedule never keeps the pod off.
        let soft = [node("n", &[], &[("dedicated", "gpu", "PreferNoSchedule")])];
        assert_eq!(select(&soft, &Placement::default()).workers, ["n"]);
    }

    #[test]
    fn cordoned_nodes_and_wrong_label_values_are_skipped() {
        let mut cordoned = node("a", &[GPU], &[]);
        cordoned.spec.get_or_insert_default().unschedulable = Some(true);
        let nodes = [
            cordoned,
            node("b", &[("nvidia.com/gpu.present", "false")], &[]),
        ];
        let chosen = select(&nodes, &demo_placement());
        assert!(chosen.workers.is_empty());
        assert_eq!(
            chosen.skipped,
            [
                ("a".to_owned(), Skipped::Cordoned),
                (
                    "b".to_owned(),
                    Skipped::Label {
                        key: GPU.0.to_owned(),
                        wanted: "true".to_owned(),
                        found: Some("false".to_owned())
                    }
                )
            ]
        );
    }

    #[test]
    fn the_node_selector_flag_narrows_the_manifests_and_rejects_garbage() {
        let placement = demo_placement()
            .narrowed("pool=gpu-test, rack=r1")
            .expect("valid");
        assert_eq!(placement.node_selector.len(), 3);
        assert_eq!(placement.node_selector["rack"], "r1");
        let nodes = [
            node("in", &[GPU, ("pool", "gpu-test"), ("rack", "r1")], &[]),
            node("out", &[GPU, ("pool", "gpu-test")], &[]),
        ];
        assert_eq!(select(&nodes, &placement).workers, ["in"]);
        let err = demo_placement().narrowed("pool").expect_err("no value");
        assert_contains(&err, "is not key=value");
        assert!(demo_placement().narrowed("=x").is_err());
    }

    #[test]
    fn a_topology_covers_some_workers_and_names_strangers() {
        let workers: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        let topology = topology::demo(&["b".to_owned(), "x".to_owned()]);
        assert_eq!(
            coverage(&topology, &workers),
            Coverage {
                named: vec!["b".to_owned()],
                unnamed: vec!["a".to_owned(), "c".to_owned()],
                strangers: vec!["x".to_owned()],
            }
        );
    }
}
