//! `--imex`: the payload checked before anything is built, then built into
//! the workload image and loaded into the kind cluster, for scenario 2's
//! workload or (scenario 4) staged into every tray's driver root by the
//! chart's stagers.

use std::path::Path;

use anyhow::Context as _;
use kube::Client;
use xshell::Shell;

use crate::flags::ScenarioArgs;
use crate::interrupt::Tracker;
use crate::k8s;
use crate::names::{KindCluster, CHART, MOCK_NS, STAGER_DS};
use crate::plan::{self, ImageRef};
use crate::report::Report;
use crate::runner::Cmd;
use crate::scenarios::Scenario;

use super::common::{docker_only, rollout, runner, scratch_dir, step};
use super::status::roll_workload;

/// An `--imex` payload checked before anything is built or installed: one
/// xtask can build into the workload image and stage (its files, its
/// architecture), on the kind cluster (`--kube-context` names a cluster
/// xtask loads no image into).
pub(super) fn checked_payload(
    payload: &Path,
    cluster: &crate::flags::ClusterArgs,
) -> anyhow::Result<harness::report::PayloadIdentity> {
    if cluster.kube_context.is_some() {
        anyhow::bail!(
            "--imex builds and loads the workload image into the kind cluster, which --kube-context \
             does not name: build it with `cargo xtask images --imex {}`, load it into your \
             cluster, and rerun without --imex",
            payload.display()
        );
    }
    let payload =
        std::path::absolute(payload).with_context(|| format!("resolving {}", payload.display()))?;
    crate::images::payload_identity(&payload)
}

/// `scenario2|scenario4 --imex PATH`: builds the workload image with the
/// payload (its tag follows its content, so an unchanged payload gives the
/// same image and the load is skipped) and loads it into the kind cluster;
/// scenario 2 rolls the workload onto it, scenario 4 has the chart's stagers
/// stage it into every driver root.
pub(super) async fn install_payload(
    sh: &Shell,
    (args, which): (&ScenarioArgs, Scenario),
    payload: &Path,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    let identity = checked_payload(payload, &args.cluster)?;
    let payload =
        std::path::absolute(payload).with_context(|| format!("resolving {}", payload.display()))?;
    eprintln!("    payload: {}", crate::images::describe(&identity));
    report.imex_payload = Some(identity);
    let cluster = crate::cluster::discover(&docker_only(sh), &args.cluster.cluster_name)?;
    let built = step(report, tracker, "images", async {
        crate::images::build_all(
            sh,
            &crate::dirs::images_dir()?,
            Some(&payload),
            crate::images::CargoProfile::Release,
        )
    })
    .await?;
    let reference = built.workload.reference.clone();
    step(report, tracker, "load images", async {
        let loaded =
            crate::cluster::load_image(&runner(sh)?, &cluster, &built.workload.path, &reference)?;
        if loaded.is_empty() {
            eprintln!("    {reference}: already on every node");
        } else {
            eprintln!("    {reference}: loaded into {}", loaded.join(", "));
        }
        Ok(())
    })
    .await?;
    let client = k8s::kind_client(&cluster).await?;
    if which == Scenario::Four {
        let image = ImageRef::parse(&reference)?;
        return step(report, tracker, "stage nvidia-imex", async {
            stage_imex(sh, &client, &cluster, &image).await
        })
        .await;
    }
    step(report, tracker, "workload", async {
        roll_workload(&client, &reference, &cluster.workers()).await
    })
    .await
}

/// The chart upgraded, its other values kept, to stage the payload of
/// `image` (the workload image built with it) into every tray's driver
/// root; waits for the stagers to roll out.
async fn stage_imex(
    sh: &Shell,
    client: &Client,
    cluster: &KindCluster,
    image: &ImageRef,
) -> anyhow::Result<()> {
    let context = cluster.context();
    let file = scratch_dir(cluster.name())?.join("imex-driver-root.yaml");
    std::fs::write(&file, plan::imex_driver_root_values(image))
        .with_context(|| format!("writing {}", file.display()))?;
    let args = plan::helm_topology_args(CHART, &context, &file.to_string_lossy());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    harness::apiserver::helm(&runner(sh)?, &Cmd::new("helm", &args), &context)?;
    k8s::wait_daemonset(
        client,
        MOCK_NS,
        STAGER_DS,
        "app.kubernetes.io/name=nvml-mock",
        rollout(cluster.worker_count()),
    )
    .await
}
