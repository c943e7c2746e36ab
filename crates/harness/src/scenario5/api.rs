//! Scenario 5's cluster I/O: the mock release's values, the device plugin
//! chart's install and uninstall, the rollouts, node allocatable and labels,
//! GFD's NodeFeature objects, the GPU pods and the plugin's log.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt as _};
use serde_json::Value;

use crate::names::{FIELD_MANAGER, MOCK_NS, RELEASE};
use crate::runner::{Cmd, Runner};
use crate::scenario4::api::wait_for;

/// The device plugin's namespace and release.
pub const DP_NS: &str = "nvidia-device-plugin";
/// The Helm release (its name is the chart's, so objects are named `nvidia-device-plugin…`).
pub const DP_RELEASE: &str = "nvidia-device-plugin";
/// The device plugin's DaemonSet.
pub const DP_DS: &str = "nvidia-device-plugin";
/// Its container.
pub const DP_CONTAINER: &str = "nvidia-device-plugin-ctr";
/// The scenario's GPU pods.
pub const GPU_POD_SELECTOR: &str = "app.kubernetes.io/name=cdsim-s5-gpu";

/// The workload image already on the nodes (the demo's), for the GPU pods.
pub async fn workload_image(client: &Client) -> Result<String> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), crate::names::WORKLOAD_NS);
    let ds = api.get(crate::names::WORKLOAD_DS).await?;
    ds.spec
        .and_then(|spec| spec.template.spec)
        .and_then(|spec| spec.containers.into_iter().next())
        .and_then(|container| container.image)
        .context("the demo workload DaemonSet has no image (run `cargo xtask up` first)")
}

/// The clique label GFD and the stager both set.
const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";

/// The mock release's values as the user set them (`helm get values -o json`).
pub fn mock_release_values<R: Runner>(runner: &R, context: &str) -> Result<Value> {
    let out = runner.check(&Cmd::new(
        "helm",
        &[
            "get",
            "values",
            RELEASE,
            "--namespace",
            MOCK_NS,
            "--kube-context",
            context,
            "--output",
            "json",
        ],
    ))?;
    serde_json::from_str(&out.stdout).context("parsing `helm get values` of the mock's release")
}

/// `helm upgrade --install` of the device plugin chart with GFD and NFD,
/// then every DaemonSet and Deployment of its namespace rolled out.
pub async fn install<R: Runner>(
    runner: &R,
    client: &Client,
    context: &str,
    chart: &std::path::Path,
    values: &[(String, String)],
) -> Result<()> {
    let chart = chart.to_string_lossy().into_owned();
    let mut args: Vec<String> = [
        "upgrade",
        "--install",
        DP_RELEASE,
        &chart,
        "--namespace",
        DP_NS,
        "--create-namespace",
        "--kube-context",
        context,
    ]
    .map(str::to_owned)
    .to_vec();
    for (key, value) in values {
        args.push("--set".to_owned());
        args.push(format!("{key}={value}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    runner.check(&Cmd::new("helm", &args))?;
    wait_rollouts(client).await
}

/// The chart's MPS control daemon DaemonSet's name ends so.
const MPS_DS_SUFFIX: &str = "-mps-control-daemon";

/// Waits for every DaemonSet of the device plugin's namespace (the plugin,
/// GFD, NFD's worker; not the MPS control daemon) and NFD's master.
async fn wait_rollouts(client: &Client) -> Result<()> {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), DP_NS);
    let listed = api.list(&ListParams::default()).await?.items;
    // The MPS control daemon runs only on nodes labelled for MPS sharing: none here.
    for ds in listed
        .into_iter()
        .filter(|it| !it.name_any().ends_with(MPS_DS_SUFFIX))
    {
        let selector = ds
            .spec
            .as_ref()
            .and_then(|spec| spec.selector.match_labels.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(",");
        let name = ds.name_any();
        crate::k8s::wait_daemonset(client, DP_NS, &name, &selector, Duration::from_secs(240))
            .await?;
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), DP_NS);
    wait_for(
        "node-feature-discovery's master available",
        Duration::from_secs(180),
        || async {
            let listed = deployments.list(&ListParams::default()).await?.items;
            let waiting: Vec<String> = listed
                .iter()
                .filter(|it| {
                    let want = it.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    let status = it.status.clone().unwrap_or_default();
                    status.available_replicas.unwrap_or(0) < want
                })
                .map(|it| it.name_any())
                .collect();
            Ok(if waiting.is_empty() {
                Ok(())
            } else {
                Err(format!("waiting for {}", waiting.join(", ")))
            })
        },
        || crate::k8s::diagnose(client, DP_NS, ""),
    )
    .await
}

/// Every node as JSON, by name.
pub async fn nodes(client: &Client) -> Result<BTreeMap<String, Value>> {
    let api: Api<Node> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|node| Ok((node.name_any(), serde_json::to_value(&node)?)))
        .collect()
}

/// A node's labels.
pub fn labels(node: &Value) -> BTreeMap<String, String> {
    node["metadata"]["labels"]
        .as_object()
        .map(|it| {
            it.iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The labels GFD published for `node` in its NodeFeature object(s).
pub async fn gfd_node_features(client: &Client, node: &str) -> Result<BTreeMap<String, String>> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "nfd.k8s-sigs.io",
        "v1alpha1",
        "NodeFeature",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), DP_NS, &resource);
    let mut labels = BTreeMap::new();
    let objects = api.list(&ListParams::default()).await?.items;
    let of_node = |object: &DynamicObject| {
        object.labels().get("nfd.node.kubernetes.io/node-name") == Some(&node.to_owned())
            || object.name_any().starts_with(&format!("{node}-"))
    };
    for object in objects.iter().filter(|it| of_node(it)) {
        if let Some(map) = object.data["spec"]["labels"].as_object() {
            for (key, value) in map {
                if let Some(value) = value.as_str() {
                    labels.insert(key.clone(), value.to_owned());
                }
            }
        }
    }
    Ok(labels)
}

/// Server-side applies a pod.
pub async fn apply_pod(client: &Client, pod: &Value) -> Result<()> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), DP_NS);
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(pod),
    )
    .await
    .with_context(|| format!("creating pod {DP_NS}/{name}"))?;
    Ok(())
}

/// Waits until one of scenario 5's GPU pods (`name`) runs.
pub async fn wait_running(client: &Client, name: &str) -> Result<()> {
    wait_pod_running(
        client,
        (DP_NS, name),
        Duration::from_secs(120),
        GPU_POD_SELECTOR,
    )
    .await
}

/// Waits up to `limit` until pod `ns/name` runs; on failure, the pods of `selector` diagnosed.
pub async fn wait_pod_running(
    client: &Client,
    (ns, name): (&str, &str),
    limit: Duration,
    selector: &str,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    wait_for(
        &format!("pod {ns}/{name} running"),
        limit,
        || async {
            let phase = api
                .get_opt(name)
                .await?
                .and_then(|it| it.status)
                .and_then(|it| it.phase)
                .unwrap_or_else(|| "not created yet".to_owned());
            Ok(if phase == "Running" {
                Ok(())
            } else {
                Err(phase)
            })
        },
        || crate::k8s::diagnose(client, ns, selector),
    )
    .await
}

/// Runs `argv` in a GPU pod; its stdout, failing on a non-zero exit.
pub async fn exec(client: &Client, pod: &str, argv: &[&str]) -> Result<String> {
    let out =
        crate::k8s::exec_in_namespace(client, DP_NS, (pod, "gpu"), argv, Duration::from_secs(60))
            .await?;
    anyhow::ensure!(
        out.code == 0,
        "`{}` in pod {pod} exited {}: {}",
        argv.join(" "),
        out.code,
        out.stderr.trim()
    );
    Ok(out.stdout)
}

/// Deletes the GPU pods and waits until they are gone.
pub async fn delete_gpu_pods(client: &Client) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), DP_NS);
    let params = ListParams::default().labels(GPU_POD_SELECTOR);
    for pod in api.list(&params).await?.items {
        let _ = api
            .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
            .await;
    }
    wait_for(
        "scenario 5's GPU pods gone",
        Duration::from_secs(90),
        || async {
            let left = api.list(&params).await?.items.len();
            Ok(if left == 0 {
                Ok(())
            } else {
                Err(format!("{left} left"))
            })
        },
        || async { String::new() },
    )
    .await
}

/// The device plugin's pod on `node`.
pub async fn plugin_pod(client: &Client, node: &str) -> Result<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), DP_NS);
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    api.list(&params)
        .await?
        .items
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            pod.spec
                .as_ref()
                .is_some_and(|spec| spec.containers.iter().any(|it| it.name == DP_CONTAINER))
        })
        .map(|pod| pod.name_any())
        .next()
        .with_context(|| format!("no device plugin pod on {node}"))
}

/// The device plugin's log on `node`.
pub async fn plugin_log(client: &Client, node: &str) -> Result<String> {
    let pod = plugin_pod(client, node).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), DP_NS);
    let params = LogParams {
        container: Some(DP_CONTAINER.to_owned()),
        ..LogParams::default()
    };
    api.logs(&pod, &params)
        .await
        .with_context(|| format!("reading the log of {DP_NS}/{pod}"))
}

/// Deletes the device plugin's pod on `node` and waits for its DaemonSet.
pub async fn restart_plugin(client: &Client, node: &str) -> Result<()> {
    let old = plugin_pod(client, node).await?;
    crate::k8s::delete_pod(client, DP_NS, &old).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), DP_NS);
    wait_for(
        &format!("a new device plugin pod running on {node}"),
        Duration::from_secs(120),
        || async {
            let Ok(name) = plugin_pod(client, node).await else {
                return Ok(Err("none yet".to_owned()));
            };
            let phase = pods.get(&name).await?.status.and_then(|it| it.phase);
            Ok(match (name != old, phase.as_deref()) {
                (true, Some("Running")) => Ok(()),
                (fresh, phase) => Err(format!("{name} (new: {fresh}), {phase:?}")),
            })
        },
        || async { String::new() },
    )
    .await?;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), DP_NS);
    let ds = api.get(DP_DS).await?;
    let selector = ds
        .spec
        .and_then(|spec| spec.selector.match_labels)
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    crate::k8s::wait_daemonset(client, DP_NS, DP_DS, &selector, Duration::from_secs(180)).await
}

/// Removes from every node the labels NFD's master set (the stager's
/// kept) and NFD's annotations: NFD gone, nobody else would.
pub async fn remove_nfd_labels(client: &Client) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    for node in api.list(&ListParams::default()).await?.items {
        let annotations = node.annotations();
        let listed = annotations
            .get(super::expect::NFD_FEATURE_LABELS)
            .cloned()
            .unwrap_or_default();
        let mut labels = serde_json::Map::new();
        for label in super::expect::nfd_labels_to_remove(&listed) {
            labels.insert(label, Value::Null);
        }
        let mut drop_annotations = serde_json::Map::new();
        for key in annotations
            .keys()
            .filter(|it| it.starts_with("nfd.node.kubernetes.io/"))
        {
            drop_annotations.insert(key.clone(), Value::Null);
        }
        if labels.is_empty() && drop_annotations.is_empty() {
            continue;
        }
        let patch =
            serde_json::json!({"metadata": {"labels": labels, "annotations": drop_annotations}});
        api.patch(
            &node.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .with_context(|| format!("removing NFD's labels from {}", node.name_any()))?;
    }
    Ok(())
}

/// NFD's master removes the labels it set when GFD's NodeFeature goes, the
/// clique label the stager had set before it among them: the stager's pods
/// are replaced so that the new ones label their nodes again (a replaced
/// stager pod leaves the staged tree in place), then each worker's clique
/// label is awaited.
pub async fn relabel_by_stager(client: &Client, cliques: &[(String, String)]) -> Result<()> {
    let selector = "app.kubernetes.io/name=nvml-mock";
    let pods: Api<Pod> = Api::namespaced(client.clone(), MOCK_NS);
    for pod in pods
        .list(&ListParams::default().labels(selector))
        .await?
        .items
    {
        crate::k8s::delete_pod(client, MOCK_NS, &pod.name_any()).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let limit = crate::scenarios::scaled(Duration::from_secs(180), cliques.len());
    crate::k8s::wait_daemonset(client, MOCK_NS, crate::names::STAGER_DS, selector, limit).await?;
    wait_for(
        "the stager's clique labels back on every worker",
        Duration::from_secs(120),
        || async {
            let nodes = nodes(client).await?;
            let off: Vec<String> = cliques
                .iter()
                .filter(|(node, clique)| {
                    nodes
                        .get(node)
                        .map(labels)
                        .unwrap_or_default()
                        .get(CLIQUE_LABEL)
                        != Some(clique)
                })
                .map(|(node, _)| node.clone())
                .collect();
            Ok(if off.is_empty() {
                Ok(())
            } else {
                Err(format!("missing on {}", off.join(", ")))
            })
        },
        || async { String::new() },
    )
    .await
}

/// `helm uninstall` of the device plugin release and its namespace deleted,
/// waiting until it is gone.
pub async fn uninstall<R: Runner>(runner: &R, client: &Client, context: &str) -> Result<()> {
    let out = runner.run(&Cmd::new(
        "helm",
        &[
            "uninstall",
            DP_RELEASE,
            "--namespace",
            DP_NS,
            "--kube-context",
            context,
            "--wait",
            "--timeout",
            "180s",
        ],
    ))?;
    if !out.ok && !out.stderr.contains("not found") {
        anyhow::bail!("helm uninstall {DP_RELEASE}: {}", out.stderr.trim());
    }
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(DP_NS).await?.is_some() {
        let _ = api.delete(DP_NS, &DeleteParams::default()).await;
    }
    wait_for(
        &format!("namespace {DP_NS} gone"),
        Duration::from_secs(180),
        || async {
            Ok(match api.get_opt(DP_NS).await? {
                None => Ok(()),
                Some(_) => Err("terminating".to_owned()),
            })
        },
        || async { String::new() },
    )
    .await
}
