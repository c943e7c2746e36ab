//! Everything that talks to the Kubernetes API, through kube-rs: the client for
//! a context, bounded waits on DaemonSets and pods through watchers, exec,
//! server-side apply of the workload, and the diagnostics printed when a wait
//! fails.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{AttachParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

mod diagnose;
pub mod idle_pod;
mod pod;
pub mod ride_out;

pub use diagnose::{describe_pod, diagnose};
pub use pod::{usable_pod, PodInfo};
pub use ride_out::kind_client;

use crate::names::{FIELD_MANAGER, WORKLOAD_CONTAINER, WORKLOAD_NS, WORKLOAD_SELECTOR};

/// A kube client for a kubeconfig context, riding out an API server that
/// restarts ([`ride_out`], within [`crate::apiserver::Bound::DEFAULT`]).
pub async fn client(context: &str) -> anyhow::Result<Client> {
    ride_out::client_with(context, None).await
}

/// Whether a DaemonSet has rolled out: `Ok` or what is still missing.
pub fn daemonset_progress(ds: &DaemonSet) -> Result<(), String> {
    let Some(status) = &ds.status else {
        return Err("no status yet".to_owned());
    };
    let generation = ds.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        return Err(format!(
            "controller has not seen generation {generation} yet (observed {})",
            status.observed_generation.unwrap_or(0)
        ));
    }
    let desired = status.desired_number_scheduled;
    let updated = status.updated_number_scheduled.unwrap_or(0);
    let ready = status.number_ready;
    let available = status.number_available.unwrap_or(0);
    let summary = format!(
        "{updated}/{desired} updated, {ready}/{desired} ready, {available}/{desired} available"
    );
    if desired == 0 {
        return Err(format!("no node selected yet ({summary})"));
    }
    if updated == desired && ready == desired && available == desired {
        return Ok(());
    }
    Err(summary)
}

/// Waits until a DaemonSet has rolled out, printing progress; on timeout
/// prints pod phases and conditions, recent events and log tails.
pub async fn wait_daemonset(
    client: &Client,
    ns: &str,
    name: &str,
    selector: &str,
    limit: Duration,
) -> anyhow::Result<()> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    let deadline = started + limit;
    let stream = watcher::watch_object(api, name);
    futures::pin_mut!(stream);
    let mut last = String::new();
    loop {
        let next = match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(next) => next,
            Err(_) => {
                let diagnostics = diagnose(client, ns, selector).await;
                anyhow::bail!(
                    "daemonset {ns}/{name} not rolled out after {}s ({last})\n{diagnostics}",
                    limit.as_secs()
                );
            }
        };
        let progress = match next {
            Some(Ok(Some(ds))) => match daemonset_progress(&ds) {
                Ok(()) => {
                    eprintln!(
                        "    ✓ daemonset {ns}/{name} ready after {:.1}s",
                        started.elapsed().as_secs_f64()
                    );
                    return Ok(());
                }
                Err(progress) => progress,
            },
            Some(Ok(None)) => "not created yet".to_owned(),
            Some(Err(err)) => {
                tracing::debug!(%err, "watch error");
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            None => anyhow::bail!("the watch on daemonset {ns}/{name} ended"),
        };
        if progress != last {
            eprintln!(
                "    {name}: {progress} ({:.0}s)",
                started.elapsed().as_secs_f64()
            );
            last = progress;
        }
    }
}

/// The workload pod on `node`, waiting (bounded) for one to be running and ready.
pub async fn pod_on_node(client: &Client, node: &str, limit: Duration) -> anyhow::Result<PodInfo> {
    pod_on_node_in(client, WORKLOAD_NS, WORKLOAD_SELECTOR, node, limit).await
}

/// The pod matching `selector` in `ns` on `node`, running and ready (bounded wait).
pub async fn pod_on_node_in(
    client: &Client,
    ns: &str,
    selector: &str,
    node: &str,
    limit: Duration,
) -> anyhow::Result<PodInfo> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let fields = format!("spec.nodeName={node}");
    let params = ListParams::default().labels(selector).fields(&fields);
    let listed = api
        .list(&params)
        .await
        .with_context(|| format!("listing {selector} pods on {node}"))?;
    if let Some(info) = listed.items.iter().find_map(usable_pod) {
        return Ok(info);
    }
    eprintln!("    waiting for the {selector} pod on {node}");
    let config = watcher::Config::default().labels(selector).fields(&fields);
    let stream = watcher::watcher(api, config);
    futures::pin_mut!(stream);
    let deadline = Instant::now() + limit;
    let ended = format!("the pod watch on {node}");
    loop {
        match next_applied(&mut stream, deadline, &ended).await? {
            Some(pod) => {
                if let Some(info) = usable_pod(&pod) {
                    return Ok(info);
                }
            }
            None => {
                let diagnostics = diagnose(client, ns, selector).await;
                let what = if selector == WORKLOAD_SELECTOR {
                    "workload".to_owned()
                } else {
                    selector.to_owned()
                };
                anyhow::bail!(
                    "no running {what} pod on node {node} after {}s: is the node up (`docker ps`), \
                     and was it deployed?\n{diagnostics}",
                    limit.as_secs()
                );
            }
        }
    }
}

/// The next object `stream` applies, skipping other events and, after a
/// short pause, watch errors (the watcher retries); `None` once `deadline`
/// passes. A watch that ends is an error: "`what` ended".
async fn next_applied<K, S>(
    stream: &mut S,
    deadline: Instant,
    what: &str,
) -> anyhow::Result<Option<K>>
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout_at(deadline, stream.try_next()).await {
            Ok(Ok(Some(watcher::Event::Apply(it) | watcher::Event::InitApply(it)))) => {
                return Ok(Some(it))
            }
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => anyhow::bail!("{what} ended"),
            Ok(Err(err)) => {
                tracing::debug!(%err, "watch error");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(_) => return Ok(None),
        }
    }
}

/// Whether a node reports Ready.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|it| it.type_ == "Ready" && it.status == "True")
        })
}

/// Waits (bounded) until every named node is Ready, printing progress.
pub async fn wait_nodes_ready(
    client: &Client,
    names: &[String],
    limit: Duration,
) -> anyhow::Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let started = Instant::now();
    let deadline = started + limit;
    let mut ready = std::collections::BTreeSet::new();
    let stream = watcher::watcher(api, watcher::Config::default());
    futures::pin_mut!(stream);
    while ready.len() < names.len() {
        match next_applied(&mut stream, deadline, "the node watch").await? {
            Some(node) => {
                let name = node.name_any();
                if names.contains(&name) && node_ready(&node) && ready.insert(name.clone()) {
                    eprintln!(
                        "    node {name} Ready ({:.0}s)",
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            None => {
                let missing: Vec<&String> =
                    names.iter().filter(|it| !ready.contains(*it)).collect();
                anyhow::bail!(
                    "nodes not Ready after {}s: {missing:?} (inspect with `docker logs <node>`)",
                    limit.as_secs()
                );
            }
        }
    }
    Ok(())
}

/// The layout of a kind cluster's workers, from the rack and clique labels
/// its kind config gave them (`kind_config::layout_from_labels`).
pub async fn kind_layout(
    client: &Client,
    cluster: &crate::names::KindCluster,
) -> anyhow::Result<topology::Layout> {
    let api: Api<Node> = Api::all(client.clone());
    let listed = api
        .list(&kube::api::ListParams::default())
        .await
        .context("listing the nodes")?;
    let workers: Vec<(String, BTreeMap<String, String>)> = cluster
        .workers()
        .into_iter()
        .map(|name| {
            let labels = listed
                .items
                .iter()
                .find(|node| node.name_any() == name)
                .map(|node| node.labels().clone())
                .unwrap_or_default();
            (name, labels)
        })
        .collect();
    crate::kind_config::layout_from_labels(cluster.name(), &workers)
}

/// Deletes a pod in `ns` (its DaemonSet recreates it).
pub async fn delete_pod(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.delete(name, &kube::api::DeleteParams::default())
        .await
        .with_context(|| format!("deleting pod {ns}/{name}"))?;
    Ok(())
}

/// Waits (bounded) until a named pod in the workload namespace is running and ready.
pub async fn wait_pod(client: &Client, name: &str, limit: Duration) -> anyhow::Result<PodInfo> {
    let api: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NS);
    let stream = watcher::watch_object(api, name);
    futures::pin_mut!(stream);
    let deadline = Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(Some(pod)))) => {
                if let Some(info) = usable_pod(&pod) {
                    return Ok(info);
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => anyhow::bail!("the watch on pod {name} ended"),
            Err(_) => {
                let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NS);
                let state = match pods.get_opt(name).await {
                    Ok(Some(pod)) => describe_pod(&pod),
                    _ => "  not found\n".to_owned(),
                };
                anyhow::bail!(
                    "pod {WORKLOAD_NS}/{name} not ready after {}s\n{state}",
                    limit.as_secs()
                );
            }
        }
    }
}

/// What an exec left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Exit code (0 on success, -1 when unknown).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// The exit code a kube exec status carries.
pub fn exit_code(status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>) -> i32 {
    let Some(status) = status else {
        return -1;
    };
    if status.status.as_deref() == Some("Success") {
        return 0;
    }
    status
        .details
        .as_ref()
        .and_then(|details| details.causes.as_ref())
        .and_then(|causes| {
            causes
                .iter()
                .find(|cause| cause.reason.as_deref() == Some("ExitCode"))
                .and_then(|cause| cause.message.as_deref())
                .and_then(|message| message.parse().ok())
        })
        .unwrap_or(-1)
}

/// Runs `argv` in the workload container of `pod`, bounded by `limit`.
pub async fn exec(
    client: &Client,
    pod: &str,
    argv: &[&str],
    limit: Duration,
) -> anyhow::Result<ExecOutput> {
    exec_in(client, pod, WORKLOAD_CONTAINER, argv, limit).await
}

/// Runs `argv` in `container` of a pod in the workload namespace.
pub async fn exec_in(
    client: &Client,
    pod: &str,
    container: &str,
    argv: &[&str],
    limit: Duration,
) -> anyhow::Result<ExecOutput> {
    exec_in_namespace(client, WORKLOAD_NS, (pod, container), argv, limit).await
}

/// Runs `argv` in the container `target.1` of the pod `target.0` in `ns`.
pub async fn exec_in_namespace(
    client: &Client,
    ns: &str,
    (pod, container): (&str, &str),
    argv: &[&str],
    limit: Duration,
) -> anyhow::Result<ExecOutput> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params = AttachParams::default()
        .container(container)
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let run = async {
        let mut attached = api
            .exec(pod, argv.iter().copied(), &params)
            .await
            .with_context(|| format!("exec `{}` in pod {pod}", argv.join(" ")))?;
        let status = attached.take_status();
        let mut stdout = attached.stdout();
        let mut stderr = attached.stderr();
        let read_out = async {
            let mut buf = Vec::new();
            if let Some(out) = stdout.as_mut() {
                let _ = out.read_to_end(&mut buf).await;
            }
            buf
        };
        let read_err = async {
            let mut buf = Vec::new();
            if let Some(err) = stderr.as_mut() {
                let _ = err.read_to_end(&mut buf).await;
            }
            buf
        };
        let (out, err) = tokio::join!(read_out, read_err);
        let status = match status {
            Some(status) => status.await,
            None => None,
        };
        anyhow::Ok(ExecOutput {
            code: exit_code(status.as_ref()),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        })
    };
    match tokio::time::timeout(limit, run).await {
        Ok(res) => res,
        Err(_) => anyhow::bail!(
            "exec `{}` in pod {pod} did not finish within {}s",
            argv.join(" "),
            limit.as_secs()
        ),
    }
}

/// The workload objects of `manifests/demo/workload.yaml`, with the image set.
pub fn workload_objects(yaml: &str, image: &str) -> anyhow::Result<(DaemonSet, NetworkPolicy)> {
    let mut daemonset: Option<DaemonSet> = None;
    let mut policy: Option<NetworkPolicy> = None;
    for doc in serde_yaml::Deserializer::from_str(yaml) {
        let value = <serde_yaml::Value as serde::Deserialize>::deserialize(doc)?;
        if value.is_null() {
            continue;
        }
        match value.get("kind").and_then(serde_yaml::Value::as_str) {
            Some("DaemonSet") => {
                daemonset = Some(serde_yaml::from_value(value).context("the workload DaemonSet")?)
            }
            Some("NetworkPolicy") => {
                policy = Some(serde_yaml::from_value(value).context("the workload NetworkPolicy")?)
            }
            other => anyhow::bail!("unexpected object kind {other:?} in the workload manifest"),
        }
    }
    let (Some(mut daemonset), Some(policy)) = (daemonset, policy) else {
        anyhow::bail!("the workload manifest must hold one DaemonSet and one NetworkPolicy");
    };
    let containers = daemonset
        .spec
        .as_mut()
        .and_then(|spec| spec.template.spec.as_mut())
        .map(|spec| &mut spec.containers);
    let Some(container) =
        containers.and_then(|it| it.iter_mut().find(|c| c.name == WORKLOAD_CONTAINER))
    else {
        anyhow::bail!("the workload DaemonSet has no `{WORKLOAD_CONTAINER}` container");
    };
    container.image = Some(image.to_owned());
    Ok((daemonset, policy))
}

/// Server-side applies the workload namespace, DaemonSet and NetworkPolicy.
pub async fn apply_workload(
    client: &Client,
    daemonset: &DaemonSet,
    policy: &NetworkPolicy,
) -> anyhow::Result<()> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(WORKLOAD_NS.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .patch(WORKLOAD_NS, &params, &Patch::Apply(&namespace))
        .await
        .with_context(|| format!("applying namespace {WORKLOAD_NS}"))?;
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), WORKLOAD_NS);
    daemonsets
        .patch(&daemonset.name_any(), &params, &Patch::Apply(daemonset))
        .await
        .context("applying the workload DaemonSet")?;
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), WORKLOAD_NS);
    policies
        .patch(&policy.name_any(), &params, &Patch::Apply(policy))
        .await
        .context("applying the workload NetworkPolicy")?;
    Ok(())
}

/// Pod uids by name for a selector (to prove pods were not recycled).
pub async fn pod_uids(
    client: &Client,
    ns: &str,
    selector: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = api
        .list(&ListParams::default().labels(selector))
        .await
        .with_context(|| format!("listing pods {selector} in {ns}"))?;
    Ok(pods
        .items
        .iter()
        .map(|pod| (pod.name_any(), pod.metadata.uid.clone().unwrap_or_default()))
        .collect())
}

/// The workers of a non-kind cluster: the nodes where the demo workload can
/// run (its manifest's nodeSelector, narrowed by `node_selector`, and its
/// tolerations), with every other node and why not.
pub async fn select_workers(
    client: &Client,
    node_selector: Option<&str>,
) -> anyhow::Result<crate::workers::Selection> {
    let placement = workload_placement(node_selector)?;
    Ok(crate::workers::select(
        &list_nodes(client).await?,
        &placement,
    ))
}

/// The demo workload's placement (its manifest's), narrowed by `--node-selector`.
pub fn workload_placement(
    node_selector: Option<&str>,
) -> anyhow::Result<crate::workers::Placement> {
    let path = crate::project_root().join(crate::names::WORKLOAD_MANIFEST);
    let yaml =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let (daemonset, _) = workload_objects(&yaml, "placement-only")?;
    let pod = daemonset
        .spec
        .and_then(|spec| spec.template.spec)
        .ok_or_else(|| anyhow::format_err!("{}: the DaemonSet has no pod spec", path.display()))?;
    let placement = crate::workers::Placement::of_pod(&pod);
    match node_selector {
        Some(flag) => placement.narrowed(flag).map_err(anyhow::Error::msg),
        None => Ok(placement),
    }
}

/// Every node of the cluster.
pub async fn list_nodes(client: &Client) -> anyhow::Result<Vec<Node>> {
    let api: Api<Node> = Api::all(client.clone());
    let nodes = api
        .list(&ListParams::default())
        .await
        .context("listing nodes")?;
    Ok(nodes.items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Method, Request, Response};
    use kube::client::Body;

    fn ds(generation: i64, observed: i64, desired: i32, updated: i32, ready: i32) -> DaemonSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x", "generation": generation},
            "spec": {"selector": {}, "template": {}},
            "status": {"observedGeneration": observed, "desiredNumberScheduled": desired,
                       "updatedNumberScheduled": updated, "numberReady": ready, "numberAvailable": ready,
                       "currentNumberScheduled": desired, "numberMisscheduled": 0}
        }))
        .expect("daemonset")
    }

    #[test]
    fn daemonset_rollout_needs_every_pod_updated_and_ready() {
        assert_eq!(daemonset_progress(&ds(2, 2, 4, 4, 4)), Ok(()));
        assert!(daemonset_progress(&ds(3, 2, 4, 4, 4))
            .expect_err("stale")
            .contains("generation 3"));
        assert_eq!(
            daemonset_progress(&ds(2, 2, 4, 2, 3)),
            Err("2/4 updated, 3/4 ready, 3/4 available".to_owned())
        );
        assert!(daemonset_progress(&ds(1, 1, 0, 0, 0))
            .expect_err("none")
            .contains("no node selected"));
    }

    #[test]
    fn exit_codes_come_from_the_status_causes() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
        let ok: Status =
            serde_json::from_value(serde_json::json!({"status": "Success"})).expect("status");
        assert_eq!(exit_code(Some(&ok)), 0);
        let failed: Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "2"}]}
        }))
        .expect("status");
        assert_eq!(exit_code(Some(&failed)), 2);
        assert_eq!(exit_code(None), -1);
    }

    fn workload_yaml() -> String {
        let path = crate::project_root().join(crate::names::WORKLOAD_MANIFEST);
        std::fs::read_to_string(&path).expect("manifests/demo/workload.yaml is in the repository")
    }

    #[test]
    fn the_repository_workload_gets_our_image() {
        let (daemonset, policy) =
            workload_objects(&workload_yaml(), "nvml-mock-workload:abc").expect("parses");
        assert_eq!(daemonset.name_any(), crate::names::WORKLOAD_DS);
        let spec = daemonset
            .spec
            .expect("spec")
            .template
            .spec
            .expect("pod spec");
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("nvml-mock-workload:abc")
        );
        assert_eq!(policy.name_any(), crate::names::WORKLOAD_DS);
        assert!(workload_objects("kind: Pod\n", "x").is_err());
    }

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    fn mock_client() -> (Client, Handle) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        (Client::new(service, "default"), handle)
    }

    async fn expect(
        handle: &mut Handle,
        method: Method,
        path_and_query: &str,
        reply: serde_json::Value,
    ) -> Vec<u8> {
        let (request, send) = tokio::time::timeout(Duration::from_secs(1), handle.next_request())
            .await
            .expect("the client made no request within 1s")
            .expect("a request");
        assert_eq!(request.method(), method);
        let uri = request.uri().to_string();
        assert!(
            uri.starts_with(path_and_query),
            "uri {uri} does not start with {path_and_query}"
        );
        let body = request
            .into_body()
            .collect_bytes()
            .await
            .expect("body")
            .to_vec();
        send.send_response(Response::new(Body::from(
            serde_json::to_vec(&reply).expect("json"),
        )));
        body
    }

    fn running_pod(name: &str, ready: bool) -> serde_json::Value {
        serde_json::json!({
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"containers": [], "nodeName": "c-worker"},
            "status": {"phase": "Running", "podIP": "10.244.1.5",
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        })
    }

    #[tokio::test]
    async fn pod_on_node_lists_by_selector_and_node() {
        let (client, mut handle) = mock_client();
        let server = tokio::spawn(async move {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                "items": [running_pod("not-ready", false), running_pod("good", true)]});
            expect(
                &mut handle,
                Method::GET,
                "/api/v1/namespaces/compute-domain-workload/pods?&fieldSelector=spec.nodeName%3Dc-worker&labelSelector=app.kubernetes.io%2Fname%3Dcompute-domain-demo-workload",
                list,
            )
            .await;
        });
        let pod = pod_on_node(&client, "c-worker", Duration::from_secs(1))
            .await
            .expect("found");
        assert_eq!(
            pod,
            PodInfo {
                name: "good".into(),
                ip: "10.244.1.5".into(),
                uid: "uid-good".into()
            }
        );
        server.await.expect("server");
    }

    #[tokio::test]
    async fn workload_is_server_side_applied_namespace_first() {
        let (client, mut handle) = mock_client();
        let (daemonset, policy) =
            workload_objects(&workload_yaml(), "nvml-mock-workload:abc").expect("parses");
        let ds_json = serde_json::to_value(&daemonset).expect("json");
        let np_json = serde_json::to_value(&policy).expect("json");
        let server = tokio::spawn(async move {
            let ns = expect(
                &mut handle,
                Method::PATCH,
                "/api/v1/namespaces/compute-domain-workload?&force=true&fieldManager=cdsim-xtask",
                serde_json::json!({"metadata": {"name": "compute-domain-workload"}}),
            )
            .await;
            let ns: serde_json::Value = serde_json::from_slice(&ns).expect("json");
            assert_eq!(ns["kind"], "Namespace");
            let ds = expect(
                &mut handle,
                Method::PATCH,
                "/apis/apps/v1/namespaces/compute-domain-workload/daemonsets/compute-domain-demo-workload?&force=true&fieldManager=cdsim-xtask",
                ds_json,
            )
            .await;
            let ds: serde_json::Value = serde_json::from_slice(&ds).expect("json");
            assert_eq!(
                ds["spec"]["template"]["spec"]["containers"][0]["image"],
                "nvml-mock-workload:abc"
            );
            expect(
                &mut handle,
                Method::PATCH,
                "/apis/networking.k8s.io/v1/namespaces/compute-domain-workload/networkpolicies/compute-domain-demo-workload?&force=true&fieldManager=cdsim-xtask",
                np_json,
            )
            .await;
        });
        apply_workload(&client, &daemonset, &policy)
            .await
            .expect("applied");
        server.await.expect("server");
    }
}

/// Against a real kube-apiserver (no kubelet needed): server-side apply,
/// watchers and status-driven waits.
#[cfg(test)]
mod live_tests {
    use super::*;
    use kube::api::PostParams;

    async fn live_client() -> Client {
        let path = std::env::var("CDSIM_LIVE_KUBECONFIG").expect(
            "set CDSIM_LIVE_KUBECONFIG to a kubeconfig of a scratch API server (e.g. kube-apiserver + etcd, or a kind cluster)",
        );
        let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig parses");
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("usable kubeconfig");
        Client::try_from(config).expect("client")
    }

    #[tokio::test]
    #[ignore = "needs a live API server: CDSIM_LIVE_KUBECONFIG=<file> cargo test -p xtask -- --ignored live_tests"]
    async fn apply_is_idempotent_and_waits_follow_status() {
        let client = live_client().await;
        let yaml =
            std::fs::read_to_string(crate::project_root().join(crate::names::WORKLOAD_MANIFEST))
                .expect("manifest");
        let (daemonset, policy) =
            workload_objects(&yaml, "nvml-mock-workload:live1").expect("parses");
        apply_workload(&client, &daemonset, &policy)
            .await
            .expect("first apply");
        let api: Api<DaemonSet> = Api::namespaced(client.clone(), WORKLOAD_NS);
        let first = api.get(crate::names::WORKLOAD_DS).await.expect("created");
        apply_workload(&client, &daemonset, &policy)
            .await
            .expect("second apply");
        let second = api
            .get(crate::names::WORKLOAD_DS)
            .await
            .expect("still there");
        assert_eq!(
            first.metadata.generation, second.metadata.generation,
            "an unchanged apply changes nothing"
        );
        assert_eq!(
            first.metadata.resource_version,
            second.metadata.resource_version
        );

        // The controller's part, played by hand: status catches up.
        let generation = second.metadata.generation.unwrap_or(1);
        let status = serde_json::json!({"status": {"observedGeneration": generation, "desiredNumberScheduled": 2,
            "currentNumberScheduled": 2, "numberMisscheduled": 0, "updatedNumberScheduled": 2, "numberReady": 2, "numberAvailable": 2}});
        let patcher = {
            let api = api.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                api.patch_status(
                    crate::names::WORKLOAD_DS,
                    &PatchParams::default(),
                    &Patch::Merge(&status),
                )
                .await
                .expect("status patched");
            })
        };
        wait_daemonset(
            &client,
            WORKLOAD_NS,
            crate::names::WORKLOAD_DS,
            WORKLOAD_SELECTOR,
            Duration::from_secs(20),
        )
        .await
        .expect("rolled out once the status says so");
        patcher.await.expect("patcher");

        // A pod on a node becomes usable only once it is running and ready.
        let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NS);
        let _ = pods
            .delete(
                "live-pod",
                &kube::api::DeleteParams::default().grace_period(0),
            )
            .await;
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "live-pod", "labels": {"app.kubernetes.io/name": "compute-domain-demo-workload"}},
            "spec": {"nodeName": "live-node", "containers": [{"name": "demo-workload", "image": "x:1"}]}
        }))
        .expect("pod");
        for _ in 0..20 {
            if pods.get_opt("live-pod").await.expect("get").is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // A bare API server has no controller-manager to create the default service account.
        let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), WORKLOAD_NS);
        let account = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        accounts
            .patch(
                "default",
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(&account),
            )
            .await
            .expect("service account");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("created");
        let status = serde_json::json!({"status": {"phase": "Running", "podIP": "10.9.8.7",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let patcher = {
            let pods = pods.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                pods.patch_status("live-pod", &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .expect("status");
            })
        };
        let found = pod_on_node(&client, "live-node", Duration::from_secs(20))
            .await
            .expect("found through the watch");
        assert_eq!(
            (found.name.as_str(), found.ip.as_str()),
            ("live-pod", "10.9.8.7")
        );
        patcher.await.expect("patcher");
        let err = pod_on_node(&client, "no-such-node", Duration::from_secs(2))
            .await
            .expect_err("nothing there");
        assert!(
            err.to_string()
                .contains("no running workload pod on node no-such-node"),
            "{err}"
        );
        pods.delete(
            "live-pod",
            &kube::api::DeleteParams::default().grace_period(0),
        )
        .await
        .expect("deleted");
    }
}
