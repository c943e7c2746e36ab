//! How scenario 5 reaches the cluster's nodes, as far as it is not just the
//! API: how an Xid is injected on one, and, for images pushed to a registry,
//! the kubelets' pull events that show the nodes took them from there.
//! Where the images come from is [`crate::gpu_source`]'s.
//!
//! On the kind cluster xtask made, `docker exec` into the nodes. On any other
//! cluster (`--kube-context CTX`), nothing of kind or docker: an Xid is
//! injected by an exec in the node's stager pod through the API
//! ([`crate::inject::run_api`]).

use anyhow::Result;
use kube::Client;

use crate::gpu_source::StackImages;
use crate::inject::XidAction;
use crate::names::KindCluster;
use crate::plan::ImageRef;
use crate::registry::{Pull, Registry};
use crate::report::WorkerDetail;
use crate::runner::Runner;

/// The cluster scenario 5 runs on, as far as it is not just the API.
#[derive(Debug, Clone, Copy)]
pub enum Reach<'a> {
    /// The kind cluster xtask made: `docker exec`.
    Kind(&'a KindCluster),
    /// Any cluster through `--kube-context`: the API only.
    Api {
        /// The kube context.
        context: &'a str,
    },
}

impl Reach<'_> {
    /// The kube context helm is given.
    pub fn context(&self) -> String {
        match self {
            Reach::Kind(cluster) => cluster.context(),
            Reach::Api { context } => (*context).to_owned(),
        }
    }

    /// The kind cluster, if it is one.
    pub fn kind(&self) -> Option<&KindCluster> {
        match self {
            Reach::Kind(cluster) => Some(cluster),
            Reach::Api { .. } => None,
        }
    }

    /// Injects (or clears) an Xid on `node`; the stager's report.
    pub async fn inject<R: Runner>(
        &self,
        runner: &R,
        client: &Client,
        node: &str,
        action: XidAction,
    ) -> Result<String> {
        match self {
            Reach::Kind(cluster) => crate::inject::run(runner, cluster, node, action),
            Reach::Api { .. } => crate::inject::run_api(client, node, action).await,
        }
    }
}

/// The kubelets' pulls of `images` from `registry` in namespace `ns`, as
/// details of the install row, failing when an image shows no pull from it.
pub async fn registry_pulls(
    client: &Client,
    registry: &Registry,
    ns: &str,
    images: &StackImages,
) -> Result<Vec<WorkerDetail>> {
    let pulls = crate::registry::pull_events(client, registry, &[ns]).await?;
    let missing = unpulled(&pulls, &[&images.device_plugin, &images.nfd]);
    anyhow::ensure!(
        missing.is_empty(),
        "no kubelet pulled {} from {registry} (pull events in {ns}: {})",
        missing.join(", "),
        crate::registry::pulls_note(registry, &pulls)
    );
    Ok(pulls.into_iter().map(pull_detail).collect())
}

/// The images among `images` that no successful pull event names.
fn unpulled(pulls: &[Pull], images: &[&ImageRef]) -> Vec<String> {
    images
        .iter()
        .map(|it| it.to_string())
        .filter(|image| {
            let quoted = format!("\"{image}\"");
            !pulls
                .iter()
                .any(|it| it.message.contains(&quoted) && !it.message.starts_with("Failed"))
        })
        .collect()
}

/// A pull event as a detail of the install row.
fn pull_detail(pull: Pull) -> WorkerDetail {
    WorkerDetail {
        node: pull.node,
        pod: pull.pod,
        detail: format!("pulled from the registry: {}", pull.message),
        passed: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(message: &str) -> Pull {
        Pull {
            node: "w1".to_owned(),
            pod: "nvidia-device-plugin-x".to_owned(),
            message: message.to_owned(),
        }
    }

    fn image(repository: &str) -> ImageRef {
        ImageRef {
            repository: repository.to_owned(),
            tag: "0123".to_owned(),
        }
    }

    #[test]
    fn an_image_counts_as_pulled_only_by_a_successful_pull_naming_it() {
        let dp = image("172.18.0.1:5000/ci/cdsim-k8s-device-plugin");
        let nfd = image("172.18.0.1:5000/ci/cdsim-node-feature-discovery");
        let pulls = [
            pull("Successfully pulled image \"172.18.0.1:5000/ci/cdsim-k8s-device-plugin:0123\" in 2.1s (2.1s including waiting)"),
            pull("Failed to pull image \"172.18.0.1:5000/ci/cdsim-node-feature-discovery:0123\": not found"),
        ];
        assert_eq!(
            unpulled(&pulls, &[&dp, &nfd]),
            ["172.18.0.1:5000/ci/cdsim-node-feature-discovery:0123"]
        );
        let present = pull(
            "Container image \"172.18.0.1:5000/ci/cdsim-node-feature-discovery:0123\" already present on machine",
        );
        assert!(unpulled(&[pulls[0].clone(), present], &[&dp, &nfd]).is_empty());
        assert_eq!(unpulled(&[], &[&dp]).len(), 1);
    }

    #[test]
    fn a_pull_becomes_a_detail_of_its_node_and_pod() {
        let detail = pull_detail(pull("Successfully pulled image \"r/x:1\" in 1s"));
        assert_eq!(detail.node, "w1");
        assert_eq!(detail.pod, "nvidia-device-plugin-x");
        assert!(detail
            .detail
            .starts_with("pulled from the registry: Successfully"));
        assert!(detail.passed);
    }

    #[test]
    fn helm_gets_the_context_of_either_cluster() {
        let cluster = KindCluster::new("demo", 2).unwrap_or_else(|err| panic!("{err:#}"));
        assert_eq!(Reach::Kind(&cluster).context(), "kind-demo");
        assert!(Reach::Kind(&cluster).kind().is_some());
        let reach = Reach::Api { context: "prod" };
        assert_eq!(reach.context(), "prod");
        assert!(reach.kind().is_none());
    }
}
