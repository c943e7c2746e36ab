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
/// The kind cluster config (1 control plane, 4 workers, NRI on).
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
/// How many workers the demo cluster has.
pub const WORKERS: usize = 4;

/// A kind cluster by name; node names and the kube context follow from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCluster {
    name: String,
}

impl KindCluster {
    /// A cluster name as kind accepts it: lowercase alphanumerics and `-`,
    /// starting with a letter, at most 50 characters.
    pub fn new(name: &str) -> anyhow::Result<KindCluster> {
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

    /// The worker node names: `<name>-worker`, `-worker2`, … `-worker4`.
    pub fn workers(&self) -> Vec<String> {
        (1..=WORKERS)
            .map(|idx| match idx {
                1 => format!("{}-worker", self.name),
                n => format!("{}-worker{n}", self.name),
            })
            .collect()
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
        let cluster = KindCluster::new("demo").expect("valid name");
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
    }

    #[test]
    fn bad_cluster_names_are_rejected_with_the_rule() {
        for bad in ["", "Demo", "1demo", "a_b", &"x".repeat(51)] {
            let err = KindCluster::new(bad).expect_err(bad).to_string();
            assert_contains(&err, "lowercase letters");
        }
    }
}
