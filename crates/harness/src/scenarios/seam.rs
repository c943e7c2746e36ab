//! The seam scenarios 1–3 run over: exec in the demo workload pods, which
//! `crate::workload::KubeWorkload` implements against the cluster and the
//! tests with scripted fakes.

use std::collections::BTreeMap;

use crate::k8s::{ExecOutput, PodInfo};

/// Exec access to the demo workload pods.
#[allow(async_fn_in_trait)]
pub trait Workload {
    /// The running workload pod on a node (waits, bounded).
    async fn pod_on_node(&self, node: &str) -> anyhow::Result<PodInfo>;
    /// Runs a command in a workload pod.
    async fn exec(&self, pod: &str, argv: &[&str]) -> anyhow::Result<ExecOutput>;
    /// Uids of the workload and mock-stack pods, by name.
    async fn pod_uids(&self) -> anyhow::Result<BTreeMap<String, String>>;
}
