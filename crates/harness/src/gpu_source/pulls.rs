//! What the kubelets made of the images: a pull that failed (named with the
//! image, the node and the kubelet's message, within seconds of the kubelet
//! saying so) and the digest each node resolved a tag to (from the pods'
//! `status.containerStatuses[].imageID`). Pure readers of pod JSON here, the
//! API calls at the end.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::Client;
use serde_json::Value;

use crate::report::WorkerDetail;

/// The waiting reasons that mean the kubelet cannot get the image.
const PULL_REASONS: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
];

/// How often the pods are looked at while an install rolls out.
pub const EVERY: Duration = Duration::from_secs(2);

/// A container whose image its node cannot pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullFailure {
    /// The pod.
    pub pod: String,
    /// Its node.
    pub node: String,
    /// The image.
    pub image: String,
    /// The kubelet's reason (`ErrImagePull`, …).
    pub reason: String,
    /// The kubelet's message.
    pub message: String,
}

/// A node's resolution of an image: the digest its container runs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Resolved {
    /// The node.
    pub node: String,
    /// The pod.
    pub pod: String,
    /// The image as the pod names it.
    pub image: String,
    /// `sha256:…`, from the container's `imageID`.
    pub digest: String,
}

fn statuses(pod: &Value) -> impl Iterator<Item = &Value> {
    ["initContainerStatuses", "containerStatuses"]
        .into_iter()
        .filter_map(|key| pod["status"][key].as_array())
        .flatten()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// Every container of `pods` waiting on an image its node cannot pull.
pub fn pull_failures(pods: &[Value]) -> Vec<PullFailure> {
    let mut out = Vec::new();
    for pod in pods {
        for status in statuses(pod) {
            let waiting = &status["state"]["waiting"];
            let reason = text(&waiting["reason"]);
            if PULL_REASONS.contains(&reason.as_str()) {
                out.push(PullFailure {
                    pod: text(&pod["metadata"]["name"]),
                    node: text(&pod["spec"]["nodeName"]),
                    image: text(&status["image"]),
                    reason,
                    message: text(&waiting["message"]),
                });
            }
        }
    }
    out
}

/// Whether a status's `image` (as containerd normalizes it) is `want`.
fn same_image(status: &str, want: &str) -> bool {
    status == want
        || status.strip_prefix("docker.io/library/") == Some(want)
        || status.strip_prefix("docker.io/") == Some(want)
}

/// The digest every node resolved each of `images` to, one per (node, image).
pub fn resolved(pods: &[Value], images: &[String]) -> Vec<Resolved> {
    let mut seen = BTreeSet::new();
    for pod in pods {
        for status in statuses(pod) {
            let image = text(&status["image"]);
            let Some(want) = images.iter().find(|it| same_image(&image, it)) else {
                continue;
            };
            let id = text(&status["imageID"]);
            let Some(digest) = id
                .rsplit_once('@')
                .map(|(_, it)| it)
                .or_else(|| id.starts_with("sha256:").then_some(id.as_str()))
            else {
                continue;
            };
            let node = text(&pod["spec"]["nodeName"]);
            if seen
                .iter()
                .any(|it: &Resolved| it.node == node && &it.image == want)
            {
                continue;
            }
            seen.insert(Resolved {
                node,
                pod: text(&pod["metadata"]["name"]),
                image: want.clone(),
                digest: digest.to_owned(),
            });
        }
    }
    seen.into_iter().collect()
}

/// The report's detail of a resolution, with where the image came from.
pub fn detail(resolved: Resolved, origin: &str) -> WorkerDetail {
    WorkerDetail {
        node: resolved.node,
        pod: resolved.pod,
        detail: format!(
            "{} resolved to {} ({origin})",
            resolved.image, resolved.digest
        ),
        passed: true,
    }
}

/// The pods of namespace `ns` as JSON.
pub async fn pods(client: &Client, ns: &str) -> Result<Vec<Value>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|pod| Ok(serde_json::to_value(pod)?))
        .collect()
}

/// How long a pull must keep failing before it fails the install: a single
/// failed attempt the kubelet's retry gets past (a slow mirror) is not one.
pub const PERSIST: Duration = Duration::from_secs(6);

/// The failures of `now` that have lasted [`PERSIST`] since first seen (in
/// `seen`, which keeps the ones still failing, by pod and image).
pub fn lasting(
    seen: &mut Vec<(String, String, tokio::time::Instant)>,
    now: Vec<PullFailure>,
    at: tokio::time::Instant,
) -> Option<PullFailure> {
    seen.retain(|(pod, image, _)| now.iter().any(|it| &it.pod == pod && &it.image == image));
    let mut lasted = None;
    for failure in now {
        match seen
            .iter()
            .find(|(pod, image, _)| pod == &failure.pod && image == &failure.image)
        {
            Some((_, _, since)) if at.duration_since(*since) >= PERSIST => {
                lasted.get_or_insert(failure);
            }
            Some(_) => {}
            None => seen.push((failure.pod.clone(), failure.image.clone(), at)),
        }
    }
    lasted
}

/// Looks at the pods of `ns` every [`EVERY`] until one has failed to pull its
/// image for [`PERSIST`]; returns that failure (never returns otherwise: race
/// it against the rollout).
pub async fn first_failure(client: &Client, ns: &str) -> PullFailure {
    let mut seen = Vec::new();
    loop {
        if let Ok(pods) = pods(client, ns).await {
            let now = tokio::time::Instant::now();
            if let Some(failure) = lasting(&mut seen, pull_failures(&pods), now) {
                return failure;
            }
        }
        tokio::time::sleep(EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str, statuses: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": {"nodeName": node}, "status": {"containerStatuses": statuses}})
    }

    #[test]
    fn an_unpullable_image_is_named_with_its_node_and_the_kubelets_message() {
        let message = "rpc error: code = NotFound desc = failed to pull and unpack image \
                       \"registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.0.0-unreachable\": not found";
        let pods = [
            pod(
                "plugin-a",
                "w1",
                json!([{"name": "c", "image": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.0.0-unreachable",
                        "state": {"waiting": {"reason": "ErrImagePull", "message": message}}}]),
            ),
            pod(
                "plugin-b",
                "w2",
                json!([{"name": "c", "image": "x:1", "state": {"waiting": {"reason": "ContainerCreating"}}}]),
            ),
        ];
        let failures = pull_failures(&pods);
        assert_eq!(failures.len(), 1);
        assert_eq!(failures[0].node, "w1");
        assert_eq!(failures[0].pod, "plugin-a");
        assert_eq!(failures[0].reason, "ErrImagePull");
        assert_eq!(failures[0].message, message);
        let backoff = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "w3"}, "status": {"initContainerStatuses": [
            {"name": "init", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.19.3",
             "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}}}]}});
        assert_eq!(
            pull_failures(&[backoff])[0].image,
            "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"
        );
        assert!(pull_failures(&[json!({})]).is_empty());
    }

    #[test]
    fn a_pull_fails_the_install_only_once_it_has_kept_failing() {
        let failure = |pod: &str| PullFailure {
            pod: pod.to_owned(),
            node: "w1".to_owned(),
            image: "nvcr.io/nvidia/k8s-device-plugin:v0.19.3".to_owned(),
            reason: "ErrImagePull".to_owned(),
            message: "i/o timeout".to_owned(),
        };
        let start = tokio::time::Instant::now();
        let mut seen = Vec::new();
        assert_eq!(lasting(&mut seen, vec![failure("a")], start), None);
        // The retry got the image: forgotten.
        assert_eq!(lasting(&mut seen, Vec::new(), start + EVERY), None);
        assert!(seen.is_empty());
        assert_eq!(
            lasting(&mut seen, vec![failure("a")], start + EVERY * 2),
            None
        );
        assert_eq!(
            lasting(
                &mut seen,
                vec![failure("a"), failure("b")],
                start + EVERY * 3
            ),
            None
        );
        let lasted = lasting(
            &mut seen,
            vec![failure("a"), failure("b")],
            start + EVERY * 2 + PERSIST,
        );
        assert_eq!(lasted.map(|it| it.pod), Some("a".to_owned()));
        assert!(
            EVERY + PERSIST < Duration::from_secs(60),
            "the issue's bound"
        );
    }

    #[test]
    fn each_node_records_the_digest_it_resolved_once_per_image() {
        let dra = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1".to_owned();
        let running = |id: &str| json!([{"name": "c", "image": dra, "imageID": id, "state": {"running": {}}}]);
        let pods = [
            pod(
                "a",
                "w1",
                running("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu@sha256:aa"),
            ),
            pod(
                "b",
                "w1",
                running("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu@sha256:aa"),
            ),
            pod("c", "w2", running("sha256:bb")),
            pod("d", "w3", running("")),
        ];
        let got = resolved(&pods, std::slice::from_ref(&dra));
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            (got[0].node.as_str(), got[0].digest.as_str()),
            ("w1", "sha256:aa")
        );
        assert_eq!(
            (got[1].node.as_str(), got[1].digest.as_str()),
            ("w2", "sha256:bb")
        );
        let loaded = pod(
            "e",
            "w1",
            json!([{"name": "c", "image": "docker.io/library/cdsim-dra-driver:abc", "imageID": "sha256:cc"}]),
        );
        assert_eq!(
            resolved(&[loaded], &["cdsim-dra-driver:abc".to_owned()]).len(),
            1
        );
        let line = detail(got[0].clone(), "released, through a mirror").detail;
        assert_eq!(
            line,
            format!("{dra} resolved to sha256:aa (released, through a mirror)")
        );
    }
}
