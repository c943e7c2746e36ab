//! Fixed names of the demo: namespaces, release, DaemonSets, labels, paths, and
//! the kind node names that follow from a cluster name.

/// The Helm release and the chart's full name.
pub const RELEASE: &str = "nvml-mock";
/// The demo's kind cluster, unless `--cluster-name` says otherwise.
pub const DEFAULT_CLUSTER: &str = "nvml-mock-compute-domain";
/// The chart, relative to the repository root.
pub const CHART: &str = "manifests/helm/nvml-mock";
/// Namespace of the mock stack (created by helm).
pub const MOCK_NS: &str = "mokka";
/// The staging DaemonSet.
pub const STAGER_DS: &str = "nvml-mock";
/// The stager's container in the staging DaemonSet's pods (the chart's `daemonset.yaml`).
pub const STAGER_CONTAINER: &str = "stager";
/// The stager binary in the mock image (the chart's `command`).
pub const STAGER_BIN: &str = "/usr/local/bin/nvml-mock-stager";
/// The NRI plugin DaemonSet.
pub const NRI_DS: &str = "nvml-mock-nri";
/// Namespace of the demo workload.
pub const WORKLOAD_NS: &str = "compute-domain-workload";
/// The demo workload DaemonSet.
pub const WORKLOAD_DS: &str = "compute-domain-demo-workload";
/// The demo workload's container.
pub const WORKLOAD_CONTAINER: &str = "demo-workload";
/// The label selector of the demo workload pods.
pub const WORKLOAD_SELECTOR: &str = "app.kubernetes.io/name=compute-domain-demo-workload";
/// The workload manifest (DaemonSet and NetworkPolicy), relative to the root.
pub const WORKLOAD_MANIFEST: &str = "manifests/demo/workload.yaml";
/// The kind cluster config template (its node list is the default layout's:
/// 1 control plane, 4 workers; `kind_config.rs` generates the list for others).
pub const KIND_CONFIG: &str = "manifests/kind/cluster.yaml";
/// Server-side apply field manager.
pub const FIELD_MANAGER: &str = "cdsim-xtask";
/// The NRI socket every node's containerd must serve (node-layout owns it).
pub use node_layout::facts::NRI_SOCKET;
/// The NRI-injected IMEX channel the scenarios look for.
pub const CHANNEL0: &str = "/dev/nvidia-caps-imex-channels/channel0";
/// The rebind domain uuid (scenario 3).
pub const REBIND_UUID: &str = "00000000-0000-0000-0000-0000000000ff";
/// The rebind clique (scenario 3).
pub const REBIND_CLIQUE: u32 = 99;
/// The node label naming a worker's rack (0-based), set by the kind config.
pub const RACK_LABEL: &str = "nvml-mock/rack";
/// The node label naming a worker's clique in its rack, set by the kind config.
pub const CLIQUE_LABEL: &str = "nvml-mock/clique";

/// A kind cluster by name and worker count; node names and the kube context
/// follow from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCluster {
    name: String,
    workers: usize,
}

impl KindCluster {
    /// A cluster name as kind accepts it: lowercase alphanumerics and `-`,
    /// starting with a letter, at most 50 characters; `workers` workers.
    pub fn new(name: &str, workers: usize) -> anyhow::Result<KindCluster> {
        let valid = !name.is_empty()
            && name.len() <= 50
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid {
            anyhow::bail!(
                "invalid cluster name `{name}`: use 1-50 lowercase letters, digits and `-`, starting with a letter"
            );
        }
        Ok(KindCluster {
            name: name.to_owned(),
            workers,
        })
    }

    /// The cluster name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kube context kind writes: `kind-<name>`.
    pub fn context(&self) -> String {
        format!("kind-{}", self.name)
    }

    /// The control-plane node (container) name.
    pub fn control_plane(&self) -> String {
        format!("{}-control-plane", self.name)
    }

    /// The same cluster with `workers` workers.
    pub fn with_workers(&self, workers: usize) -> KindCluster {
        KindCluster {
            name: self.name.clone(),
            workers,
        }
    }

    /// How many workers it has.
    pub fn worker_count(&self) -> usize {
        self.workers
    }

    /// The worker node names: `<name>-worker`, `-worker2`, … in kind's order.
    pub fn workers(&self) -> Vec<String> {
        topology::kind_workers(&self.name, self.workers)
    }

    /// Every node: the control plane, then the workers.
    pub fn nodes(&self) -> Vec<String> {
        let mut nodes = vec![self.control_plane()];
        nodes.extend(self.workers());
        nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::assert_contains;

    #[test]
    fn node_names_follow_the_cluster_name() {
        let cluster = KindCluster::new("demo", 4).expect("valid name");
        assert_eq!(cluster.context(), "kind-demo");
        assert_eq!(
            cluster.nodes(),
            [
                "demo-control-plane",
                "demo-worker",
                "demo-worker2",
                "demo-worker3",
                "demo-worker4"
            ]
        );
        let big = cluster.with_workers(18);
        assert_eq!(big.worker_count(), 18);
        assert_eq!(big.workers()[9], "demo-worker10");
        assert_eq!(
            big.workers().last().map(String::as_str),
            Some("demo-worker18")
        );
    }

    #[test]
    fn bad_cluster_names_are_rejected_with_the_rule() {
        for bad in ["", "Demo", "1demo", "a_b", &"x".repeat(51)] {
            let err = KindCluster::new(bad, 4).expect_err(bad).to_string();
            assert_contains(&err, "lowercase letters");
        }
    }
}
