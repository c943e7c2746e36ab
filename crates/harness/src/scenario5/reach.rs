//! For images scenario 5 pushed to a registry, the kubelets' pull events
//! that show the nodes took them from there. How the nodes are reached is
//! [`crate::reach`]'s; where the images come from [`crate::gpu_source`]'s.

use anyhow::Result;
use kube::Client;

use crate::gpu_source::StackImages;
use crate::plan::ImageRef;
use crate::registry::{Pull, Registry};
use crate::report::WorkerDetail;

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
}
