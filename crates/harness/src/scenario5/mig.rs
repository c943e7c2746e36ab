//! `scenario5-mig`: NVIDIA's device plugin with its mixed MIG strategy on a partitioned tray.
//!
//! GPU 0 of the first tray is partitioned by the node's staged nvidia-smi (`nvml-mock-stager
//! nvidia-smi` in its stager container, [`crate::reach::Reach::nvidia_smi`]): MIG on, two
//! instances of the profile's smallest GPU instance profile and one of a two-slice profile,
//! each with its compute instance (gb200: `1g.23gb` twice and `2g.47gb`). The release is then
//! upgraded to `migStrategy=mixed` (the chart's value). The tray's allocatable must show exactly
//! the partition, `nvidia.com/mig-<profile>` per profile and `nvidia.com/gpu` one less, while
//! every other tray keeps its GPUs, and GFD labels the partition's counts. The device plugin
//! reads the MIG table and the capability files under `/proc/driver`, which the NRI plugin
//! mounts from the staged tree (`nri-plugin`'s `proc_view`). Then the partition is destroyed,
//! MIG turned off, the strategy put back to `none` and every tray's `nvidia.com/gpu` restored,
//! whatever happened.
//!
//! A profile whose GPU 0 has no MIG table is SKIPPED with the reason, before anything changes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::Client;
use nvml_profile::{GpuInstanceProfiles, Profile};
use serde_json::Value;
use tokio::time::Instant;

use super::api;
use super::expect::{allocatable, GPU_RESOURCE};
use super::rows::{wait_every_tray, workers, Rows, Scenario5On};
use crate::report::{round, WorkerDetail};
use crate::runner::Runner;

/// The row's name.
pub const ROW: &str = "scenario5-mig";
/// The chart's value for the strategy, and the strategy of the row.
const MIG_STRATEGY: &str = "migStrategy";
const MIXED: &str = "mixed";
const NONE: &str = "none";
/// How long the upgraded plugin may take to advertise the partition, and to drop it again.
const ADVERTISE_LIMIT: Duration = Duration::from_secs(240);

/// The partition the row makes on GPU 0: the GPU instance profile ids to create (in order) and
/// the count of MIG devices per profile name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// `nvidia-smi mig -cgi` ids.
    pub ids: Vec<u32>,
    /// Profile name → MIG devices of it.
    pub counts: BTreeMap<String, u32>,
}

/// The partition for `profile`'s GPU 0: two of its smallest plain profile (one slice, least
/// memory, no `+me` variant) and one two-slice profile when it has one; why not, when its GPU 0
/// has no MIG table.
pub fn partition(profile: &Profile) -> Result<Partition, String> {
    let device = profile.device(0).ok_or("the profile has no GPU")?;
    let Some(GpuInstanceProfiles::Known(rows)) = &device.gpu_instance_profiles else {
        return Err(format!(
            "profile {}: GPU 0 has no MIG profile table (not MIG-capable, or its table is unknown)",
            profile.name()
        ));
    };
    let named = |row: &&nvml_profile::GpuInstanceProfile| {
        row.name.as_deref().is_some_and(|name| !name.contains('+'))
    };
    let small = rows
        .iter()
        .filter(named)
        .filter(|row| row.slices == 1 && row.instances >= 2)
        .min_by_key(|row| row.memory_mib)
        .ok_or_else(|| format!("profile {}: no one-slice MIG profile", profile.name()))?;
    let mut picks = vec![small, small];
    if let Some(two) = rows.iter().filter(named).find(|row| row.slices == 2) {
        picks.push(two);
    }
    let mut counts = BTreeMap::new();
    for row in &picks {
        *counts
            .entry(row.name.clone().unwrap_or_default())
            .or_insert(0) += 1;
    }
    Ok(Partition {
        ids: picks.iter().map(|row| row.id).collect(),
        counts,
    })
}

/// `nvidia.com/mig-<name>`, the mixed strategy's resource for a profile.
pub fn mig_resource(name: &str) -> String {
    format!("nvidia.com/mig-{name}")
}

/// What differs from the wanted allocatable on one node, as `resource got/want` items.
pub fn allocatable_off(node: &Value, want: &BTreeMap<String, u32>) -> Vec<String> {
    want.iter()
        .filter_map(|(resource, count)| {
            let got = allocatable(node, resource).unwrap_or(0);
            (got != *count).then(|| format!("{resource} {got}/{count}"))
        })
        .collect()
}

/// What each tray must advertise: the partitioned one its partition and one GPU less (the
/// MIG-enabled GPU is no `nvidia.com/gpu` under the mixed strategy), every other its GPUs.
pub fn wanted(
    trays: &[String],
    partitioned: &str,
    gpus: u32,
    partition: Option<&Partition>,
) -> Vec<(String, BTreeMap<String, u32>)> {
    trays
        .iter()
        .map(|tray| {
            let mut want = BTreeMap::from([(GPU_RESOURCE.to_owned(), gpus)]);
            if let (true, Some(partition)) = (tray == partitioned, partition) {
                want.insert(GPU_RESOURCE.to_owned(), gpus.saturating_sub(1));
                for (name, count) in &partition.counts {
                    want.insert(mig_resource(name), *count);
                }
            }
            (tray.clone(), want)
        })
        .collect()
}

/// Upgrades the release to the strategy: the chart and values of its install, plus the strategy.
pub struct Upgrade<'a> {
    /// The device plugin's chart.
    pub chart: &'a std::path::Path,
    /// Its install's values.
    pub values: &'a [(String, String)],
}

impl Upgrade<'_> {
    async fn to<R: Runner>(
        &self,
        runner: &R,
        client: &Client,
        context: &str,
        strategy: &str,
    ) -> Result<()> {
        let mut values = self.values.to_vec();
        values.push((MIG_STRATEGY.to_owned(), strategy.to_owned()));
        api::install(runner, client, context, self.chart, &values)
            .await
            .with_context(|| format!("upgrading the device plugin to {MIG_STRATEGY}={strategy}"))
    }
}

/// The row: partition, mixed strategy, allocatable and GFD's counts; then everything undone.
pub async fn row<R: Runner>(
    runner: &R,
    client: &Client,
    on: &Scenario5On<'_>,
    (profile, upgrade): (&Profile, &Upgrade<'_>),
    partition: &Partition,
) -> Result<Rows> {
    let trays = workers(on);
    let tray = trays.first().context("no worker")?.clone();
    let gpus = u32::try_from(profile.devices().len())?;
    let smi = |args: Vec<String>| {
        let tray = tray.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            on.cluster.nvidia_smi(runner, client, &tray, &args).await
        }
    };
    let context = on.cluster.context();
    let checked = async {
        smi(args(&["-i", "0", "-mig", "1"])).await?;
        let ids: Vec<String> = partition.ids.iter().map(u32::to_string).collect();
        smi(args(&["mig", "-i", "0", "-cgi", &ids.join(","), "-C"])).await?;
        let started = Instant::now();
        upgrade.to(runner, client, &context, MIXED).await?;
        let want = wanted(&trays, &tray, gpus, Some(partition));
        wait_allocatable(client, &want, "the mixed strategy's resources").await?;
        let advertised = round(started.elapsed());
        let labels = gfd_counts(client, &tray, partition).await?;
        Ok::<_, anyhow::Error>((advertised, labels))
    }
    .await;
    let restored = restore(runner, client, on, (&tray, gpus), upgrade, &smi).await;
    let (advertised, labels) = checked?;
    let restore_secs = restored?;
    let devices: Vec<String> = partition
        .counts
        .iter()
        .map(|(name, count)| format!("{} {count}", mig_resource(name)))
        .collect();
    let detail = format!(
        "GPU 0 partitioned by the node's nvidia-smi (-cgi {ids:?} -C); migStrategy=mixed: allocatable {}, {GPU_RESOURCE} {}/{gpus} in {advertised:.1} s, every other tray {gpus}; GFD labels {labels}; partition destroyed, MIG off, strategy none: {GPU_RESOURCE} {gpus} on every tray again in {restore_secs:.1} s",
        devices.join(", "),
        gpus - 1,
        ids = partition.ids,
    );
    let worker = WorkerDetail {
        node: tray,
        pod: api::DP_DS.to_owned(),
        detail,
        passed: true,
    };
    let timings = vec![
        ("mixed_to_advertised".to_owned(), advertised),
        ("restore".to_owned(), restore_secs),
    ];
    Ok((vec![worker], timings))
}

fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|it| (*it).to_owned()).collect()
}

/// Destroys the partition, turns MIG off and puts the strategy back; waits until every tray
/// advertises its GPUs and no MIG device; the seconds it took.
async fn restore<R: Runner, F>(
    runner: &R,
    client: &Client,
    on: &Scenario5On<'_>,
    (tray, gpus): (&str, u32),
    upgrade: &Upgrade<'_>,
    smi: &impl Fn(Vec<String>) -> F,
) -> Result<f64>
where
    F: std::future::Future<Output = Result<String>>,
{
    let started = Instant::now();
    // Each may find nothing to destroy (a partition that was never made): not an error here.
    let _ = smi(args(&["mig", "-i", "0", "-dci"])).await;
    let _ = smi(args(&["mig", "-i", "0", "-dgi"])).await;
    smi(args(&["-i", "0", "-mig", "0"]))
        .await
        .with_context(|| format!("turning MIG off on {tray}'s GPU 0"))?;
    upgrade
        .to(runner, client, &on.cluster.context(), NONE)
        .await?;
    let want = wanted(&workers(on), tray, gpus, None);
    wait_allocatable(client, &want, "every tray's GPUs back").await?;
    Ok(round(started.elapsed()))
}

/// Waits until every tray's allocatable is what it wants.
async fn wait_allocatable(
    client: &Client,
    want: &[(String, BTreeMap<String, u32>)],
    what: &str,
) -> Result<()> {
    wait_every_tray(what, ADVERTISE_LIMIT, || async {
        let nodes = api::nodes(client).await?;
        let off = want
            .iter()
            .filter_map(|(tray, want)| {
                let node = nodes.get(tray).cloned().unwrap_or_default();
                let off = allocatable_off(&node, want);
                (!off.is_empty()).then(|| format!("{tray}: {}", off.join(", ")))
            })
            .collect();
        Ok(((), off))
    })
    .await
}

/// GFD's labels of the partition on the tray: the strategy and each profile's count.
async fn gfd_counts(client: &Client, tray: &str, partition: &Partition) -> Result<String> {
    let mut want: Vec<(String, String)> =
        vec![("nvidia.com/mig.strategy".to_owned(), MIXED.to_owned())];
    want.extend(
        partition
            .counts
            .iter()
            .map(|(name, count)| (format!("{}.count", mig_resource(name)), count.to_string())),
    );
    wait_every_tray("GFD's MIG labels", ADVERTISE_LIMIT, || async {
        let nodes = api::nodes(client).await?;
        let labels = nodes.get(tray).map(api::labels).unwrap_or_default();
        let off: Vec<String> = want
            .iter()
            .filter(|(key, value)| labels.get(key) != Some(value))
            .map(|(key, value)| format!("{tray}: {key}={value} (has {:?})", labels.get(key)))
            .collect();
        Ok(((), off))
    })
    .await?;
    Ok(want
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gb200() -> Profile {
        let path = crate::profiles::path("gb200");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{err}"));
        Profile::parse(&text).unwrap_or_else(|err| panic!("{err}"))
    }

    #[test]
    fn gb200s_partition_is_two_1g_and_one_2g_by_id() {
        let partition = partition(&gb200()).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(partition.ids, [19, 19, 14]);
        assert_eq!(
            partition.counts,
            BTreeMap::from([("1g.23gb".to_owned(), 2), ("2g.47gb".to_owned(), 1)])
        );
    }

    #[test]
    fn only_the_partitioned_tray_trades_a_gpu_for_its_mig_devices() {
        let partition = partition(&gb200()).unwrap_or_else(|err| panic!("{err}"));
        let trays = ["w1".to_owned(), "w2".to_owned()];
        let want = wanted(&trays, "w1", 4, Some(&partition));
        assert_eq!(
            want[0].1,
            BTreeMap::from([
                ("nvidia.com/gpu".to_owned(), 3),
                ("nvidia.com/mig-1g.23gb".to_owned(), 2),
                ("nvidia.com/mig-2g.47gb".to_owned(), 1),
            ])
        );
        assert_eq!(
            want[1].1,
            BTreeMap::from([("nvidia.com/gpu".to_owned(), 4)])
        );
        let node = serde_json::json!({"status": {"allocatable": {
            "nvidia.com/gpu": "3", "nvidia.com/mig-1g.23gb": "1"}}});
        assert_eq!(
            allocatable_off(&node, &want[0].1),
            ["nvidia.com/mig-1g.23gb 1/2", "nvidia.com/mig-2g.47gb 0/1"]
        );
        let restored = wanted(&trays, "w1", 4, None);
        assert_eq!(
            restored[0].1,
            BTreeMap::from([("nvidia.com/gpu".to_owned(), 4)])
        );
    }
}
