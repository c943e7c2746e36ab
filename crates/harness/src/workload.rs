//! The [`Workload`] seam's real side: the demo workload pods, reached through
//! kube-rs. The scenarios' unit tests put simulations behind the same trait.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Client;

use crate::k8s::{self, ExecOutput, PodInfo};
use crate::names::{MOCK_NS, WORKLOAD_NS, WORKLOAD_SELECTOR};
use crate::scenarios::Workload;

/// The demo workload pods, through kube-rs.
pub struct KubeWorkload {
    client: Client,
}

impl KubeWorkload {
    /// Workload access through this client.
    pub fn new(client: Client) -> KubeWorkload {
        KubeWorkload { client }
    }
}

impl Workload for KubeWorkload {
    async fn pod_on_node(&self, node: &str) -> anyhow::Result<PodInfo> {
        k8s::pod_on_node(&self.client, node, Duration::from_secs(120)).await
    }

    async fn exec(&self, pod: &str, argv: &[&str]) -> anyhow::Result<ExecOutput> {
        k8s::exec(&self.client, pod, argv, Duration::from_secs(60)).await
    }

    async fn pod_uids(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let mut uids = k8s::pod_uids(&self.client, WORKLOAD_NS, WORKLOAD_SELECTOR).await?;
        uids.extend(
            k8s::pod_uids(&self.client, MOCK_NS, "app.kubernetes.io/name=nvml-mock").await?,
        );
        uids.extend(
            k8s::pod_uids(
                &self.client,
                MOCK_NS,
                "app.kubernetes.io/name=nvml-mock-nri",
            )
            .await?,
        );
        Ok(uids)
    }
}
