//! Scenario 5's row `scenario5-relabel` (issue 23, step 2): after scenario
//! 3's rebind, GFD's `nvidia.com/gpu.clique` follows each tray's new clique
//! by GFD's own relabelling (its interval set short through the chart,
//! [`expect::GFD_SLEEP_INTERVAL`]), no pod recycled by us or anyone.
//!
//! The rebind topology goes on exactly as scenario 3 puts it on (its values
//! files and its `helm upgrade --reuse-values` of the mock's release), with
//! the restoring command registered with the tracker so that an interrupt
//! restores the demo topology. Then GFD's own NodeFeature of every tray (not
//! the node label, which the stager writes too) must carry the tray's
//! rebind clique; the time from the upgrade to the last tray relabelled is
//! reported. GFD's pods must be the same (uids) after. The demo topology is
//! restored and GFD's labels awaited back on the demo cliques, timed too.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt as _};
use nvml_profile::Profile;
use tokio::time::Instant;

use super::api::{self, DP_NS};
use super::expect;
use super::rows::{wait_every_tray, Rows, Scenario5On};
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::Runner;
use crate::scenarios::{recycled, upgrade_topology, write_values};

/// The row's name.
pub const ROW: &str = "scenario5-relabel";
/// GFD's container in its pods.
const GFD_CONTAINER: &str = "gpu-feature-discovery-ctr";
/// The label GFD must move.
const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";
/// How long GFD may take to relabel every tray after an upgrade (a few of
/// its intervals; the stager rewrites the topology within seconds).
const RELABEL_LIMIT: Duration = Duration::from_secs(90);

/// The row: SKIPPED on a profile without NVLink fabric (GFD sets no clique
/// label there), not run when the install failed.
pub(super) async fn row<R: Runner>(
    runner: &R,
    client: &Client,
    on: &Scenario5On<'_>,
    profile: &Profile,
    install_ok: bool,
) -> ScenarioResult {
    if install_ok && !profile.has_fabric() {
        return ScenarioResult::new(
            ROW,
            Outcome::Skipped(format!(
                "profile {} has no NVLink fabric: GFD sets no {CLIQUE_LABEL} label to follow a rebind",
                profile.name()
            )),
            0.0,
        );
    }
    super::rows::step(ROW, install_ok, relabel(runner, client, on)).await
}

/// Rebind, wait for GFD, check its pods, restore, wait for GFD.
async fn relabel<R: Runner>(runner: &R, client: &Client, on: &Scenario5On<'_>) -> Result<Rows> {
    let rebind = &on.rebind;
    let demo = expect::cliques_of(&rebind.demo_expected);
    let moved = expect::cliques_of(&rebind.rebind_expected);
    let unmoved = expect::unmoved(&demo, &moved);
    if !unmoved.is_empty() {
        bail!(
            "the rebind topology leaves {} on its demo clique: nothing to relabel there",
            unmoved.join(", ")
        );
    }
    let before = gfd_pods(client).await?;
    let (rebind_file, demo_file) = write_values(rebind).map_err(anyhow::Error::msg)?;
    let upgrade = |file: &Path| upgrade_topology(runner, rebind, file).map_err(anyhow::Error::msg);
    eprintln!("    helm upgrade --reuse-values with scenario 3's rebind topology");
    on.tracker
        .restore_topology(Some(rebind.helm_upgrade(&demo_file)));
    let since = Instant::now();
    let rebound = match upgrade(&rebind_file) {
        Ok(()) => wait_cliques(client, &moved, since, "the rebind cliques").await,
        Err(err) => Err(err),
    };
    let after = gfd_pods(client).await;
    eprintln!("    restoring the demo topology");
    let since = Instant::now();
    let restored = match upgrade(&demo_file) {
        Ok(()) => wait_cliques(client, &demo, since, "the demo cliques back").await,
        Err(err) => Err(err),
    };
    on.tracker.restore_topology(None);
    let rebound = rebound.context("after the rebind")?;
    let after = after?;
    if after != before {
        bail!(
            "GFD's pods were recycled during the rebind: {}",
            recycled(&before, &after)
        );
    }
    let restored = restored.context("restoring the demo topology")?;
    Ok(summary(&demo, &moved, &rebound, &restored, &before))
}

/// Per-tray details and the two timings.
fn summary(
    demo: &[(String, String)],
    moved: &[(String, String)],
    rebound: &BTreeMap<String, Duration>,
    restored: &BTreeMap<String, Duration>,
    pods: &BTreeMap<String, String>,
) -> Rows {
    let secs = |times: &BTreeMap<String, Duration>, node: &str| {
        times.get(node).copied().unwrap_or_default().as_secs_f64()
    };
    let details = demo
        .iter()
        .zip(moved)
        .map(|((node, back), (_, to))| WorkerDetail {
            node: node.clone(),
            pod: "gpu-feature-discovery".to_owned(),
            detail: format!(
                "GFD's NodeFeature {CLIQUE_LABEL}={to} {:.1}s after the rebind's upgrade, \
                 ={back} again {:.1}s after the restore's (interval {}, GFD's {} pod(s) not recycled)",
                secs(rebound, node),
                secs(restored, node),
                expect::GFD_SLEEP_INTERVAL,
                pods.len()
            ),
            passed: true,
        })
        .collect();
    let last = |times: &BTreeMap<String, Duration>| {
        round(times.values().max().copied().unwrap_or_default())
    };
    let timings = vec![
        (
            "rebind: helm upgrade to last tray relabelled by GFD".to_owned(),
            last(rebound),
        ),
        (
            "restore: helm upgrade to last tray relabelled by GFD".to_owned(),
            last(restored),
        ),
    ];
    (details, timings)
}

/// Waits until GFD's NodeFeature of every worker in `want` carries its
/// clique; returns each worker's time from `since` to the first poll that saw it.
async fn wait_cliques(
    client: &Client,
    want: &[(String, String)],
    since: Instant,
    what: &str,
) -> Result<BTreeMap<String, Duration>> {
    let done: RefCell<BTreeMap<String, Duration>> = RefCell::new(BTreeMap::new());
    let limit = crate::scenarios::scaled(RELABEL_LIMIT, want.len());
    wait_every_tray(
        &format!("GFD's {CLIQUE_LABEL} on every tray: {what}"),
        limit,
        || async {
            let mut off = Vec::new();
            for (node, clique) in want {
                if done.borrow().contains_key(node) {
                    continue;
                }
                let published = api::gfd_node_features(client, node).await?;
                match published.get(CLIQUE_LABEL) {
                    Some(got) if got == clique => {
                        let took = since.elapsed();
                        eprintln!(
                            "    ✓ {node}: {CLIQUE_LABEL}={clique} ({:.1}s)",
                            took.as_secs_f64()
                        );
                        done.borrow_mut().insert(node.clone(), took);
                    }
                    got => off.push(format!("{node}: {got:?}, want {clique}")),
                }
            }
            Ok(((), off))
        },
    )
    .await?;
    Ok(done.into_inner())
}

/// GFD's pods, name to uid.
async fn gfd_pods(client: &Client) -> Result<BTreeMap<String, String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), DP_NS);
    let pods: BTreeMap<String, String> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|pod| {
            pod.spec
                .as_ref()
                .is_some_and(|spec| spec.containers.iter().any(|it| it.name == GFD_CONTAINER))
        })
        .map(|pod| (pod.name_any(), pod.uid().unwrap_or_default()))
        .collect();
    anyhow::ensure!(!pods.is_empty(), "no GFD pod in {DP_NS}");
    Ok(pods)
}
