//! What scenario 4 asserts on the cluster, for a [`DomainPlan`] of any size:
//! the stager's clique labels, NVIDIA's daemon pods and their clique labels,
//! one ComputeDomainClique per clique holding only that clique's nodes, and
//! the IMEX config on every node. Each wait is bounded, scaled to the nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Result};
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt as _};

use super::api::{clique_resource, pod_resource, wait_for};
use super::names::{CLIQUE_LABEL, DOMAINS_DIR, DRA_NS, PLUGIN_SELECTOR, S4_NS, WORKLOAD_LABEL};
use super::objects::{
    clique_daemon_nodes, clique_object_name, nodes_cfg_entries, split_clique_objects, DomainPlan,
};
use crate::report::WorkerDetail;
use crate::scenarios::scaled;

/// Waits until the stager has labelled every node of `plan`
/// `nvidia.com/gpu.clique=<its clique>`.
pub(super) async fn wait_clique_labels(client: &Client, plan: &DomainPlan) -> Result<()> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let members = plan.nodes();
    wait_for(
        &format!(
            "nvidia.com/gpu.clique labels on {} nodes ({})",
            members.len(),
            plan.cliques()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        scaled(Duration::from_secs(90), members.len()),
        || async {
            let mut wrong = Vec::new();
            for node in &members {
                let it = nodes.get(node).await?;
                let seen = it.labels().get("nvidia.com/gpu.clique").cloned();
                if seen.as_deref() != plan.clique_of(node) {
                    wrong.push(format!("{node}: {seen:?}"));
                }
            }
            if wrong.is_empty() {
                Ok(Ok(()))
            } else {
                Ok(Err(format!("not yet: {}", wrong.join(", "))))
            }
        },
        || async { String::new() },
    )
    .await
}

/// The daemon pods (DaemonSet computedomain-daemon-<uid>) on every node of the
/// plan, each labelled with its node's clique by NVIDIA's daemon.
pub(super) async fn daemon_pods(
    client: &Client,
    plan: &DomainPlan,
    cd_uid: &str,
    details: &mut Vec<WorkerDetail>,
) -> Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), DRA_NS, &pod_resource());
    let want: BTreeSet<String> = plan.nodes().into_iter().collect();
    let daemons = wait_for(
        &format!(
            "daemon pods on {} nodes labelled {CLIQUE_LABEL}=<their clique>",
            want.len()
        ),
        scaled(Duration::from_secs(180), want.len()),
        || async {
            let listed = pods.list(&ListParams::default()).await?;
            let on: Vec<(String, String, String)> = listed
                .items
                .iter()
                .filter(|pod| pod.name_any().contains(cd_uid))
                .map(|pod| {
                    let value = serde_json::to_value(pod).unwrap_or_default();
                    let node = value["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let label = pod.labels().get(CLIQUE_LABEL).cloned().unwrap_or_default();
                    (node, pod.name_any(), label)
                })
                .collect();
            let good: BTreeSet<String> = on
                .iter()
                .filter(|(node, _, label)| plan.clique_of(node) == Some(label.as_str()))
                .map(|(node, _, _)| node.clone())
                .collect();
            if good == want {
                Ok(Ok(on))
            } else if on.is_empty() {
                Ok(Err("no daemon pod yet".to_owned()))
            } else {
                Ok(Err(format!(
                    "{} of {} daemon pods labelled with their node's clique; not yet: {:?}",
                    good.len(),
                    want.len(),
                    want.difference(&good).collect::<Vec<_>>()
                )))
            }
        },
        || async {
            let mut out = crate::k8s::diagnose(client, DRA_NS, PLUGIN_SELECTOR).await;
            out.push_str(
                &crate::k8s::diagnose(
                    client,
                    S4_NS,
                    &format!("{}={}", WORKLOAD_LABEL.0, WORKLOAD_LABEL.1),
                )
                .await,
            );
            out
        },
    )
    .await?;
    for (node, pod, label) in &daemons {
        details.push(WorkerDetail {
            node: node.clone(),
            pod: pod.clone(),
            detail: format!("daemon pod labelled {CLIQUE_LABEL}={label}"),
            passed: plan.clique_of(node) == Some(label.as_str()),
        });
    }
    Ok(())
}

/// One ComputeDomainClique per clique of the plan, named after the domain and
/// the clique, listing only nodes of that clique; no other clique object for
/// the domain.
pub(super) async fn clique_objects(
    client: &Client,
    plan: &DomainPlan,
    cd_uid: &str,
    details: &mut Vec<WorkerDetail>,
) -> Result<()> {
    let expected = plan.cliques();
    let cliques: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), DRA_NS, &clique_resource());
    let names: Vec<String> = expected
        .keys()
        .map(|clique| clique_object_name(cd_uid, clique))
        .collect();
    let seen = wait_for(
        &format!("ComputeDomainClique(s) {DRA_NS}/{}", names.join(", ")),
        scaled(Duration::from_secs(60), plan.nodes().len()),
        || async {
            let listed = cliques.list(&ListParams::default()).await?;
            let objects: BTreeMap<String, BTreeSet<String>> = listed
                .items
                .into_iter()
                .filter(|it| it.name_any().starts_with(cd_uid))
                .map(|it| {
                    let nodes = clique_daemon_nodes(&serde_json::to_value(&it)?);
                    Ok((it.name_any(), nodes))
                })
                .collect::<Result<_>>()?;
            match split_clique_objects(cd_uid, &expected, &objects) {
                Ok(()) => Ok(Ok(objects)),
                Err(why) => Ok(Err(why)),
            }
        },
        || async { String::new() },
    )
    .await?;
    for (name, nodes) in &seen {
        details.push(WorkerDetail {
            node: String::new(),
            pod: String::new(),
            detail: format!(
                "ComputeDomainClique {name} exists, listing {} daemon(s) now, none of another clique",
                nodes.len()
            ),
            passed: true,
        });
    }
    Ok(())
}

/// The daemon's IMEX config on every node: imexd.cfg written and nodes.cfg
/// listing at least as many peers as the node's clique has nodes.
pub(super) async fn imex_configs(
    client: &Client,
    plan: &DomainPlan,
    cd_uid: &str,
    details: &mut Vec<WorkerDetail>,
) -> Result<()> {
    let cliques = plan.cliques();
    // Each node's read is an exec in its plugin pod, slow on a loaded machine.
    let limit = scaled(Duration::from_secs(60), plan.nodes().len());
    for node in plan.nodes() {
        let members = plan
            .clique_of(&node)
            .and_then(|clique| cliques.get(clique))
            .map_or(0, BTreeSet::len);
        let text = imex_config(client, &node, cd_uid, limit).await?;
        let entries = nodes_cfg_entries(&text);
        let dir = format!("{DOMAINS_DIR}/{cd_uid}");
        details.push(WorkerDetail {
            node: node.clone(),
            pod: String::new(),
            detail: format!(
                "{dir}: imexd.cfg written, nodes.cfg lists {} peers ({}…) for a clique of {members}",
                entries.len(),
                entries
                    .iter()
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            passed: entries.len() >= members,
        });
        if entries.len() < members {
            bail!("nodes.cfg on {node} lists {entries:?}: fewer than its clique's {members} nodes");
        }
    }
    Ok(())
}

/// A node's `nodes.cfg` of the domain, once its `imexd.cfg` is written (bounded).
async fn imex_config(client: &Client, node: &str, cd_uid: &str, limit: Duration) -> Result<String> {
    let dir = format!("{DOMAINS_DIR}/{cd_uid}");
    let seen_as = super::node_view::in_plugin(&dir);
    wait_for(
        &format!("IMEX config of the domain on {node}"),
        limit,
        || async {
            let script = format!("test -s {seen_as}/imexd.cfg && cat {seen_as}/nodes.cfg");
            let out = super::node_view::sh(client, node, &script).await?;
            if out.code == 0 {
                Ok(Ok(out.stdout))
            } else {
                Ok(Err(format!("{dir}/imexd.cfg or nodes.cfg not written yet")))
            }
        },
        || async {
            super::node_view::sh(client, node, &format!("ls -la {seen_as}"))
                .await
                .map(|out| format!("  ls {dir}: {}{}", out.stdout, out.stderr))
                .unwrap_or_default()
        },
    )
    .await
}
