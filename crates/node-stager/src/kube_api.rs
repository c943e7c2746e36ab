//! The stager's uses of the Kubernetes API: its node's label, the topology
//! ConfigMap it watches, and, when it terminates, whether its DaemonSet remains.
//!
//! RBAC: `nodes` get/patch (cluster), `configmaps` get/list/watch on the one
//! topology ConfigMap (the watch carries a `metadata.name` field selector so a
//! `resourceNames` rule admits it), and `daemonsets` get on its own DaemonSet.

use anyhow::{Context, Result};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::{
    api::{Patch, PatchParams},
    runtime::watcher,
    Api, Client,
};
use tokio::sync::mpsc;

/// The label the stager puts on its node.
pub const GPU_PRESENT_LABEL: &str = "nvidia.com/gpu.present";

/// The label GPU Feature Discovery puts on a node with NVLink-fabric GPUs: `<cluster uuid>.<clique id>`.
/// The stager sets it from the topology, as GFD would from the GPUs, so that workloads (and
/// NVIDIA's DRA driver's users) can place pods by clique.
pub const GPU_CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";

/// The [`GPU_CLIQUE_LABEL`] value for `node` in a topology; `None` when the node is not in it.
pub fn clique_label_value(document: &topology::Topology, node: &str) -> Option<String> {
    document
        .resolve(node)
        .map(|identity| format!("{}.{}", identity.cluster_uuid, identity.clique_id))
}

/// The merge patch that sets (`Some`) or removes (`None`) [`GPU_CLIQUE_LABEL`].
pub fn clique_patch(value: Option<&str>) -> serde_json::Value {
    serde_json::json!({ "metadata": { "labels": { GPU_CLIQUE_LABEL: value } } })
}

/// Sets or removes [`GPU_CLIQUE_LABEL`] on `node`.
pub async fn set_clique_label(client: Client, node: &str, value: Option<&str>) -> Result<()> {
    merge_patch_node(client, node, clique_patch(value))
        .await
        .with_context(|| format!("cannot patch the {GPU_CLIQUE_LABEL} label of node {node}"))
}

/// Applies a merge patch to the Node `node`.
async fn merge_patch_node(
    client: Client,
    node: &str,
    patch: serde_json::Value,
) -> kube::Result<()> {
    let nodes: Api<Node> = Api::all(client);
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Why a stager pod terminates, as its DaemonSet shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// The DaemonSet remains (a pod deleted, a rollout, a node restart): another
    /// pod takes over, so the staged tree and the node's labels stay, and
    /// running workloads keep their mock.
    Restart,
    /// The DaemonSet is gone or being deleted (`helm uninstall`): clean up.
    Uninstall,
}

impl Departure {
    /// Decides from the DaemonSet: `None` gone, `Some(true)` being deleted.
    pub fn from_owner(being_deleted: Option<bool>) -> Departure {
        match being_deleted {
            Some(false) => Departure::Restart,
            None | Some(true) => Departure::Uninstall,
        }
    }
}

/// Whether the DaemonSet `namespace/name` exists (`Some`) and is being deleted (`true`).
pub async fn owner_state(client: Client, namespace: &str, name: &str) -> Result<Option<bool>> {
    let api: Api<DaemonSet> = Api::namespaced(client, namespace);
    let found = api
        .get_opt(name)
        .await
        .with_context(|| format!("cannot read the DaemonSet {namespace}/{name}"))?;
    Ok(found.map(|ds| ds.metadata.deletion_timestamp.is_some()))
}

/// The ConfigMap key holding the topology document.
pub const TOPOLOGY_KEY: &str = "topology.yaml";

/// Whether the node should carry [`GPU_PRESENT_LABEL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// `nvidia.com/gpu.present=true`.
    Present,
    /// The label removed.
    Absent,
}

/// The merge patch that sets or removes the label.
pub fn label_patch(label: Label) -> serde_json::Value {
    let value = match label {
        Label::Present => serde_json::Value::String("true".to_owned()),
        Label::Absent => serde_json::Value::Null,
    };
    serde_json::json!({ "metadata": { "labels": { GPU_PRESENT_LABEL: value } } })
}

/// Sets or removes the label on `node` (a merge patch on the Node).
pub async fn set_label(client: Client, node: &str, label: Label) -> Result<()> {
    merge_patch_node(client, node, label_patch(label))
        .await
        .with_context(|| format!("cannot patch the labels of node {node}"))
}

/// The topology document of a ConfigMap, if it has one.
pub fn topology_of(config_map: &ConfigMap) -> Option<&str> {
    config_map
        .data
        .as_ref()
        .and_then(|data| data.get(TOPOLOGY_KEY))
        .map(String::as_str)
}

/// Watches one ConfigMap and sends its topology document on every change.
///
/// Runs until the receiver is dropped; watch errors are logged and retried
/// with the watcher's default backoff.
pub async fn watch_topology(
    client: Client,
    namespace: &str,
    name: &str,
    sender: mpsc::Sender<String>,
) {
    let config_maps: Api<ConfigMap> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher::watcher(config_maps, config);
    let mut stream = std::pin::pin!(kube::runtime::WatchStreamExt::default_backoff(stream));
    while let Some(event) = stream.next().await {
        let config_map = match event {
            Ok(watcher::Event::Apply(config_map) | watcher::Event::InitApply(config_map)) => {
                config_map
            }
            Ok(watcher::Event::Delete(_)) => {
                tracing::warn!(%namespace, %name, "the topology ConfigMap was deleted; keeping the staged topology");
                continue;
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => continue,
            Err(err) => {
                tracing::warn!(%namespace, %name, error = %err, "watching the topology ConfigMap failed; retrying");
                continue;
            }
        };
        match topology_of(&config_map) {
            Some(text) => {
                if sender.send(text.to_owned()).await.is_err() {
                    return;
                }
            }
            None => {
                tracing::warn!(%namespace, %name, "the topology ConfigMap has no {TOPOLOGY_KEY} key; keeping the staged topology")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The API calls against a mocked API server (tower-test): method, path, body.

    use http::{Method, Request, Response};
    use kube::client::Body;

    use super::*;

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    fn mock_client() -> (Client, Handle) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        (Client::new(service, "default"), handle)
    }

    async fn expect_label_patch(mut handle: Handle, expected_label: serde_json::Value) {
        let (request, send) = handle
            .next_request()
            .await
            .unwrap_or_else(|| panic!("no request was made"));
        assert_eq!(request.method(), Method::PATCH);
        assert_eq!(request.uri().path(), "/api/v1/nodes/worker3");
        assert_eq!(
            request
                .headers()
                .get("content-type")
                .map(|value| value.as_bytes()),
            Some(&b"application/merge-patch+json"[..])
        );
        let body = request
            .into_body()
            .collect_bytes()
            .await
            .unwrap_or_else(|err| panic!("cannot read the request body: {err}"));
        let body: serde_json::Value =
            serde_json::from_slice(&body).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            body["metadata"]["labels"][GPU_PRESENT_LABEL],
            expected_label
        );
        let node = serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": "worker3", "labels": {} }
        });
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&node).unwrap_or_default()))
                .unwrap_or_else(|err| panic!("{err}")),
        );
    }

    #[test]
    fn the_clique_label_is_uuid_dot_clique_or_removed() {
        let workers = topology::kind_workers("c", 4);
        let demo = topology::demo(&workers);
        assert_eq!(
            clique_label_value(&demo, "c-worker3").as_deref(),
            Some("00000000-0000-0000-0000-0000000000ab.1")
        );
        assert_eq!(
            clique_label_value(&topology::rebind(&workers), "c-worker").as_deref(),
            Some("00000000-0000-0000-0000-0000000000ff.99")
        );
        assert_eq!(clique_label_value(&demo, "c-control-plane"), None);
        assert_eq!(
            clique_patch(Some("u.0")),
            serde_json::json!({"metadata": {"labels": {"nvidia.com/gpu.clique": "u.0"}}})
        );
        assert_eq!(
            clique_patch(None),
            serde_json::json!({"metadata": {"labels": {"nvidia.com/gpu.clique": null}}})
        );
    }

    /// `set_label(label)` on `worker3` sends one patch with the label's value `expected`.
    async fn sets_label_as(label: Label, expected: serde_json::Value) {
        let (client, handle) = mock_client();
        let server = tokio::spawn(expect_label_patch(handle, expected));
        let result = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            set_label(client, "worker3", label),
        )
        .await;
        assert!(matches!(result, Ok(Ok(()))), "{result:?}");
        server.await.unwrap_or_else(|err| panic!("{err}"));
    }

    /// `owner_state` of `mokka/nvml-mock` when the API answers `status` with `body`.
    async fn owner_state_when(status: u16, body: serde_json::Value) -> Result<Option<bool>> {
        let (client, mut handle) = mock_client();
        let server = tokio::spawn(async move {
            let (request, send) = handle.next_request().await.expect("a request");
            assert_eq!(request.method(), Method::GET);
            assert_eq!(
                request.uri().path(),
                "/apis/apps/v1/namespaces/mokka/daemonsets/nvml-mock"
            );
            send.send_response(
                Response::builder()
                    .status(status)
                    .body(Body::from(serde_json::to_vec(&body).unwrap_or_default()))
                    .unwrap_or_else(|err| panic!("{err}")),
            );
        });
        let state = owner_state(client, "mokka", "nvml-mock").await;
        server.await.unwrap_or_else(|err| panic!("{err}"));
        state
    }

    #[tokio::test]
    async fn a_remaining_daemonset_means_a_restart_a_gone_or_deleting_one_an_uninstall() {
        let ds = |deleting: bool| {
            let mut metadata = serde_json::json!({"name": "nvml-mock", "namespace": "mokka"});
            if deleting {
                metadata["deletionTimestamp"] = "2026-12-04T12:00:00Z".into();
            }
            serde_json::json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": metadata})
        };
        let state = owner_state_when(200, ds(false)).await.expect("read");
        assert_eq!(state, Some(false));
        assert_eq!(Departure::from_owner(state), Departure::Restart);
        let state = owner_state_when(200, ds(true)).await.expect("read");
        assert_eq!(Departure::from_owner(state), Departure::Uninstall);
        let gone = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "daemonsets.apps \"nvml-mock\" not found"});
        let state = owner_state_when(404, gone)
            .await
            .expect("a 404 is an answer");
        assert_eq!(Departure::from_owner(state), Departure::Uninstall);
        let forbidden = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "Forbidden", "code": 403, "message": "forbidden"});
        let err = owner_state_when(403, forbidden)
            .await
            .expect_err("forbidden");
        assert!(format!("{err:#}").contains("cannot read the DaemonSet mokka/nvml-mock"));
    }

    #[tokio::test]
    async fn labelling_patches_the_node() {
        sets_label_as(Label::Present, serde_json::json!("true")).await;
    }

    #[tokio::test]
    async fn unlabelling_sends_null() {
        sets_label_as(Label::Absent, serde_json::Value::Null).await;
    }

    #[tokio::test]
    async fn the_watch_selects_the_config_map_by_name_and_forwards_its_topology() {
        let (client, mut handle) = mock_client();
        let (sender, mut receiver) = mpsc::channel(4);
        let watch = tokio::spawn(async move {
            watch_topology(client, "mokka", "nvml-mock-topology", sender).await
        });

        let (request, send) =
            tokio::time::timeout(std::time::Duration::from_secs(1), handle.next_request())
                .await
                .ok()
                .flatten()
                .unwrap_or_else(|| panic!("the watcher made no list request"));
        assert_eq!(request.method(), Method::GET);
        assert_eq!(request.uri().path(), "/api/v1/namespaces/mokka/configmaps");
        let query = request.uri().query().unwrap_or_default().to_owned();
        assert!(
            query.contains("fieldSelector=metadata.name%3Dnvml-mock-topology"),
            "the list has no name field selector: {query}"
        );
        let list = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": { "resourceVersion": "7" },
            "items": [{
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "nvml-mock-topology", "namespace": "mokka", "resourceVersion": "7" },
                "data": { "topology.yaml": "version: 1\ndomains: []\n" }
            }]
        });
        send.send_response(
            Response::builder()
                .body(Body::from(serde_json::to_vec(&list).unwrap_or_default()))
                .unwrap_or_else(|err| panic!("{err}")),
        );

        let received =
            tokio::time::timeout(std::time::Duration::from_secs(1), receiver.recv()).await;
        assert_eq!(
            received.ok().flatten().as_deref(),
            Some("version: 1\ndomains: []\n")
        );
        watch.abort();
    }

    #[test]
    fn topology_of_reads_the_topology_key() {
        let mut config_map = ConfigMap::default();
        assert_eq!(topology_of(&config_map), None);
        config_map.data = Some([("topology.yaml".to_owned(), "version: 1\n".to_owned())].into());
        assert_eq!(topology_of(&config_map), Some("version: 1\n"));
    }
}
