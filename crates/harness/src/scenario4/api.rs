//! Scenario 4's cluster I/O: the API resources it touches, server-side
//! apply, the bounded waits (with diagnostics), the chart install and the
//! clean-up.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt as _};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::image::DraImage;
use super::names::{
    CD_NAME, CONTROLLER, CONTROLLER_SELECTOR, DRA_NS, PLUGIN_DS, PLUGIN_SELECTOR, S4_NS,
    WORKLOAD_LABEL,
};
use super::objects::{chart_values, helm_args};
use crate::names::FIELD_MANAGER;
use crate::runner::{Cmd, Runner};
use crate::scenarios::poll::{poll_until, Probe, Show, Wait};

fn gvk(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

pub(super) fn cd_resource() -> ApiResource {
    gvk("resource.nvidia.com", "v1beta1", "ComputeDomain")
}

pub(super) fn clique_resource() -> ApiResource {
    gvk("resource.nvidia.com", "v1beta1", "ComputeDomainClique")
}

pub(super) fn pod_resource() -> ApiResource {
    gvk("", "v1", "Pod")
}

pub(super) async fn apply(
    client: &Client,
    resource: &ApiResource,
    object: &Value,
) -> Result<DynamicObject> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ns = object["metadata"]["namespace"].as_str().unwrap_or(S4_NS);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {ns}/{name}", resource.kind))
}

pub(super) async fn ensure_namespace(client: &Client) -> Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": S4_NS}});
    api.patch(
        S4_NS,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(&ns),
    )
    .await
    .with_context(|| format!("creating namespace {S4_NS}"))?;
    Ok(())
}

/// Polls `probe` every second until it yields a value, printing its progress
/// when it changes; on timeout fails with the last progress and `diagnose()`.
pub(crate) async fn wait_for<T, P, F, D, G>(
    what: &str,
    limit: Duration,
    mut probe: P,
    diagnose: D,
) -> Result<T>
where
    P: FnMut() -> F,
    F: std::future::Future<Output = Result<std::result::Result<T, String>>>,
    D: FnOnce() -> G,
    G: std::future::Future<Output = String>,
{
    let wait = Wait {
        show: Show::Named(what),
        since: Instant::now(),
        limit,
        every: Duration::from_secs(1),
    };
    let got = poll_until(&wait, || {
        let probed = probe();
        async move {
            match probed.await {
                Ok(Ok(value)) => Probe::Done(value),
                Ok(Err(progress)) => Probe::Pending(progress),
                Err(err) => Probe::Pending(format!("{err:#}")),
            }
        }
    })
    .await;
    match got {
        Ok(value) => Ok(value),
        Err(unmet) => {
            let diagnostics = diagnose().await;
            bail!(
                "{what}: not after {}s ({})\n{diagnostics}",
                limit.as_secs(),
                unmet.last
            );
        }
    }
}

async fn wait_deployment(
    client: &Client,
    ns: &str,
    name: &str,
    selector: &str,
    limit: Duration,
) -> Result<()> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), ns);
    wait_for(
        &format!("deployment {ns}/{name} available"),
        limit,
        || async {
            let Some(it) = api.get_opt(name).await? else {
                return Ok(Err("not created yet".to_owned()));
            };
            let want = it.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1);
            let status = it.status.unwrap_or_default();
            let ready = status.available_replicas.unwrap_or(0);
            let updated = status.updated_replicas.unwrap_or(0);
            if ready >= want && updated >= want {
                Ok(Ok(()))
            } else {
                Ok(Err(format!("{ready}/{want} available, {updated} updated")))
            }
        },
        || crate::k8s::diagnose(client, ns, selector),
    )
    .await
}

/// Installs (or upgrades) the DRA chart and waits for the plugin on every
/// worker and the controller.
pub async fn install<R: Runner>(
    runner: &R,
    client: &Client,
    context: &str,
    image: &DraImage,
    dir: &Path,
) -> Result<()> {
    let values = dir.join("dra-values.yaml");
    std::fs::write(&values, chart_values(&image.image))
        .with_context(|| format!("writing {}", values.display()))?;
    let args = helm_args(&image.chart, context, &values);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    crate::apiserver::helm(runner, &Cmd::new("helm", &args), context)?;
    wait_plugin(client, Duration::from_secs(240)).await?;
    wait_deployment(
        client,
        DRA_NS,
        CONTROLLER,
        CONTROLLER_SELECTOR,
        Duration::from_secs(120),
    )
    .await
}

/// Deletes what an earlier run left: the workload pods and the ComputeDomain
/// (the controller then removes its daemons), waiting until they are gone.
pub(super) async fn clean_up(client: &Client) -> Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), S4_NS, &pod_resource());
    let cds: Api<DynamicObject> = Api::namespaced_with(client.clone(), S4_NS, &cd_resource());
    let selector = format!("{}={}", WORKLOAD_LABEL.0, WORKLOAD_LABEL.1);
    let listed = pods.list(&ListParams::default().labels(&selector)).await?;
    for pod in listed.items {
        let _ = pods
            .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
            .await;
    }
    if cds.get_opt(CD_NAME).await?.is_some() {
        let _ = cds.delete(CD_NAME, &DeleteParams::default()).await;
    }
    wait_for(
        "earlier scenario 4 objects gone",
        Duration::from_secs(90),
        || async {
            let left = pods
                .list(&ListParams::default().labels(&selector))
                .await?
                .items
                .len();
            let cd = cds.get_opt(CD_NAME).await?.is_some();
            match (left, cd) {
                (0, false) => Ok(Ok(())),
                _ => Ok(Err(format!(
                    "{left} workload pod(s), ComputeDomain present: {cd}"
                ))),
            }
        },
        || crate::k8s::diagnose(client, S4_NS, &selector),
    )
    .await
}

/// Waits up to `limit` for the driver's kubelet-plugin DaemonSet to roll out.
pub(super) async fn wait_plugin(client: &Client, limit: Duration) -> Result<()> {
    crate::k8s::wait_daemonset(client, DRA_NS, PLUGIN_DS, PLUGIN_SELECTOR, limit).await
}
