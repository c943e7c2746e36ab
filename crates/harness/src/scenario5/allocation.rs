//! Scenario 5's row `scenario5-allocation`: the first tray filled with pods
//! of 2 `nvidia.com/gpu` each (one pod of 1 on a 1-GPU tray; an odd count
//! leaves one GPU free), created together; each pod's NVML lists exactly the
//! GPUs its allocation named, no two pods share one, and together they cover
//! the tray. [`super::expect::pod_gpus`] and
//! [`super::expect::check_allocations`] are the pure parts.

use std::collections::BTreeSet;

use anyhow::{Context as _, Result};
use kube::Client;
use nvml_profile::Profile;

use super::api::{self, DP_NS};
use super::expect;
use super::expect::{check_allocations, check_pod_gpus, pod_gpus};
use super::rows::{workers, Rows, Scenario5On};
use crate::report::WorkerDetail;

/// The allocation pods on the first tray; their GPUs, checked.
pub(super) async fn allocation_row(
    client: &Client,
    on: &Scenario5On<'_>,
    profile: &Profile,
) -> Result<Rows> {
    let node = workers(on).into_iter().next().context("no worker")?;
    let image = api::workload_image(client).await?;
    let all: BTreeSet<String> = profile.devices().into_iter().map(|it| it.uuid).collect();
    let sizes = pod_gpus(u32::try_from(all.len())?);
    anyhow::ensure!(!sizes.is_empty(), "the profile lists no GPU");
    let pods: Vec<(String, u32)> = sizes
        .iter()
        .enumerate()
        .map(|(at, gpus)| (format!("cdsim-s5-gpu-{at}"), *gpus))
        .collect();
    // Whatever an earlier, interrupted run left would hold GPUs.
    api::delete_gpu_pods(client).await?;
    let checks = async {
        for (name, gpus) in &pods {
            api::apply_pod(client, &expect::gpu_pod(name, DP_NS, &node, &image, *gpus)).await?;
        }
        let seen = futures::future::try_join_all(
            pods.iter()
                .map(|(name, gpus)| pod_gpus_seen(client, name, &node, *gpus)),
        )
        .await?;
        let got: Vec<(String, BTreeSet<String>)> = pods
            .iter()
            .map(|(name, _)| name.clone())
            .zip(seen)
            .collect();
        check_allocations(&got, &all)?;
        Ok::<_, anyhow::Error>(got)
    }
    .await;
    let deleted = api::delete_gpu_pods(client).await;
    let got = checks?;
    deleted?;
    let free = all.len() - got.iter().map(|(_, gpus)| gpus.len()).sum::<usize>();
    let details = got
        .into_iter()
        .map(|(pod, gpus)| WorkerDetail {
            node: node.clone(),
            pod,
            detail: format!(
                "NVIDIA_VISIBLE_DEVICES and nvidia-smi -L: {} ({} of the tray's {}{})",
                gpus.iter().cloned().collect::<Vec<_>>().join(","),
                gpus.len(),
                all.len(),
                if free > 0 { ", one left free" } else { "" }
            ),
            passed: true,
        })
        .collect();
    Ok((details, Vec::new()))
}

/// One GPU pod, created: running, its allocation and its NVML's GPUs.
async fn pod_gpus_seen(
    client: &Client,
    name: &str,
    node: &str,
    gpus: u32,
) -> Result<BTreeSet<String>> {
    api::wait_running(client, name).await?;
    let env = api::exec(
        client,
        name,
        &["sh", "-c", "echo \"$NVIDIA_VISIBLE_DEVICES\""],
    )
    .await?;
    let smi = api::exec(client, name, &["sh", "-c", "nvidia-smi -L"]).await?;
    check_pod_gpus(&env, &smi, gpus as usize).with_context(|| format!("pod {name} on {node}"))
}
