//! Scenario 5 (issue 23): NVIDIA's device plugin and GPU feature discovery on
//! the mock, through the device plugin's own Helm chart (GFD on, with
//! node-feature-discovery as its dependency), pointed at the staged driver
//! root as a user with a real driver root would point it.
//!
//! Rows: `scenario5` (install; every tray's allocatable `nvidia.com/gpu`
//! equals its profile's count), `scenario5-labels` (GFD's labels against the
//! profile and the tray's clique), `scenario5-relabel` (scenario 3's rebind:
//! GFD's own NodeFeature follows each tray's new clique within its short
//! relabelling interval, no GFD pod recycled; the demo topology restored
//! likewise), `scenario5-allocation` (pods given 2 GPUs each, filling a
//! tray, see exactly their own through NVML), `scenario5-health` (Xid 79 takes
//! a GPU out of allocatable within 30 s and the plugin's log names it;
//! clear and restart restore it; Xid 43 changes nothing), `scenario5-mig`
//! ([`mig`]: the mixed MIG strategy's resources on a tray partitioned by the
//! node's nvidia-smi, then undone), and
//! `scenario5-cleanup` (the release and its namespace removed, and the
//! labels NFD set, the stager's kept; the stager's pods replaced so that
//! they label their nodes again, as NFD's master takes the clique label away;
//! and the DRA rows' claim removed, the DRA release put back as scenario 4
//! left it). Between the device plugin's removal and the cleanup row, the DRA
//! rows of [`dra_flow`]: `scenario5-dra` (NVIDIA's DRA driver with GPU
//! resources: every tray's ResourceSlice against the profile, a claim with a
//! CEL selector on `productName` and its pod's NVML seeing exactly the
//! allocated GPU) and `scenario5-dra-health` (Xid 79 as a device taint in the
//! tray's ResourceSlice; SKIPPED on a cluster without `DRADeviceTaints`).
//!
//! The charts and images come from [`crate::gpu_source`]: NVIDIA's released
//! ones (online, the default), or the same releases built from source (the
//! offline kind cluster: `kind load`; `--registry`: pushed there); an offline
//! build with neither cache nor Go is SKIPPED with what to do. [`reach`]
//! injects the Xids. Here the flow; [`expect`] the pure expectations, [`api`]
//! the cluster I/O.

use std::future::Future;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use kube::Client;
use nvml_profile::Profile;
use tokio::time::Instant;
use xshell::Shell;

use crate::inject::XidAction;
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::Runner;

mod allocation;
pub mod api;
pub mod dra;
pub mod dra_flow;
pub mod expect;
pub mod mig;
pub mod reach;
mod relabel;
mod rows;

pub use api::{DP_CONTAINER, DP_DS, DP_NS, DP_RELEASE, GPU_POD_SELECTOR};
pub use rows::Scenario5On;

use allocation::allocation_row;
use expect::{allocatable_gpus, expected_labels, label_mismatches};
use rows::{finish, step, wait_every_tray, workers, Rows};

/// The report rows scenario 5 gives, in order: install and allocatable, GFD labels, GFD's
/// relabelling after a rebind, allocation visibility, Xid health, the mixed MIG strategy on a
/// partitioned tray ([`mig`]), the DRA driver's GPUs and Xid
/// taints ([`dra_flow::DRA_ROWS`]), cleanup.
pub const ROWS: [&str; 9] = [
    "scenario5",
    "scenario5-labels",
    relabel::ROW,
    "scenario5-allocation",
    "scenario5-health",
    mig::ROW,
    dra_flow::DRA_ROWS[0],
    dra_flow::DRA_ROWS[1],
    "scenario5-cleanup",
];

/// How long an Xid 79 may take to show in allocatable (the bound).
pub const XID_LIMIT: Duration = Duration::from_secs(30);
/// The Xid that marks a GPU unhealthy, and one the plugin ignores.
const FATAL_XID: u64 = 79;
const IGNORED_XID: u64 = 43;

/// Runs scenario 5; returns its rows.
pub async fn run<R: Runner>(
    sh: &Shell,
    runner: &R,
    on: &Scenario5On<'_>,
    client: &Client,
) -> Result<Vec<ScenarioResult>> {
    let started = Instant::now();
    let how = match on.source.stack_prerequisite() {
        Ok(how) => how,
        Err(reason) => {
            return Ok(vec![ScenarioResult::new(
                ROWS[0],
                Outcome::Skipped(reason),
                0.0,
            )]);
        }
    };
    eprintln!("    {how}");
    let context = on.cluster.context();
    let profile = mock_profile(runner, &context)?;
    // The device plugin's chart and values as installed, for the MIG row's upgrades.
    let mut chart: Option<(std::path::PathBuf, Vec<(String, String)>)> = None;
    let install = async {
        let images = crate::gpu_source::gpu_stack(sh, runner, on.source, on.cluster.kind()).await?;
        let values = expect::chart_values(&images.device_plugin, &images.nfd, images.pull);
        let release = crate::gpu_source::fetch::Release {
            name: DP_RELEASE,
            namespace: DP_NS,
            context: &context,
        };
        let installed = api::install(runner, client, &context, &images.chart, &values);
        crate::gpu_source::install_guarded(runner, client, on.source, release, installed).await?;
        chart = Some((images.chart.clone(), values.clone()));
        let (mut details, timings) = allocatable_row(client, on, &profile).await?;
        let shown = [&images.device_plugin, &images.nfd];
        details
            .extend(crate::gpu_source::resolved_details(client, DP_NS, on.source, &shown).await?);
        if let crate::gpu_source::Source::Registry(registry) = on.source {
            details.extend(reach::registry_pulls(client, registry, DP_NS, &images).await?);
        }
        Ok((details, timings))
    }
    .await;
    let mut rows = vec![finish(ROWS[0], started, install)];
    let steps_ok = rows[0].outcome == Outcome::Passed;
    rows.push(step(ROWS[1], steps_ok, labels_row(client, on, &profile)).await);
    rows.push(relabel::row(runner, client, on, &profile, steps_ok).await);
    rows.push(step(ROWS[3], steps_ok, allocation_row(client, on, &profile)).await);
    rows.push(step(ROWS[4], steps_ok, health_row(runner, client, on, &profile)).await);
    rows.push(mig_row(runner, client, on, &profile, chart.as_ref(), steps_ok).await);
    let cleanup = Instant::now();
    // The DRA GPU plugin must not share a node with the device plugin: remove it first.
    let removed = async {
        api::delete_gpu_pods(client).await?;
        api::uninstall(runner, client, &context).await?;
        api::remove_nfd_labels(client).await?;
        api::relabel_by_stager(client, &on.cliques).await
    }
    .await;
    let removal = cleanup.elapsed();
    let ready = steps_ok && removed.is_ok();
    let (dra_rows, installed) = dra_flow::rows(sh, runner, on, client, &profile, ready).await;
    rows.extend(dra_rows);
    // The cleanup row's time: the device plugin's removal and the DRA clean-up.
    let cleanup = Instant::now() - removal;
    let cleaned = async {
        removed?;
        dra_flow::clean_up(runner, client, &context, installed.as_ref()).await?;
        Ok((Vec::new(), Vec::new()))
    }
    .await;
    rows.push(finish(ROWS[8], cleanup, cleaned));
    Ok(rows)
}

/// `scenario5-mig` ([`mig`]): SKIPPED with the reason on a profile without MIG.
async fn mig_row<R: Runner>(
    runner: &R,
    client: &Client,
    on: &Scenario5On<'_>,
    profile: &Profile,
    chart: Option<&(std::path::PathBuf, Vec<(String, String)>)>,
    install_ok: bool,
) -> ScenarioResult {
    let partition = match mig::partition(profile) {
        Ok(partition) => partition,
        Err(reason) => return ScenarioResult::new(mig::ROW, Outcome::Skipped(reason), 0.0),
    };
    let body = async {
        let (chart, values) = chart.context("the device plugin's install left no chart")?;
        let upgrade = mig::Upgrade { chart, values };
        mig::row(runner, client, on, (profile, &upgrade), &partition).await
    };
    step(mig::ROW, install_ok, body).await
}

/// The profile the mock's release stages on every tray.
fn mock_profile<R: Runner>(runner: &R, context: &str) -> Result<Profile> {
    let values = api::mock_release_values(runner, context)?;
    let choice = expect::profile_choice(&values, "gb200")?;
    expect::resolve_profile(&choice, |name| {
        let path = crate::profiles::path(name);
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    })
}

/// Each worker's allocatable `nvidia.com/gpu` (absent: 0).
async fn allocatable(client: &Client, workers: &[String]) -> Result<Vec<(String, u32)>> {
    let nodes = api::nodes(client).await?;
    Ok(workers
        .iter()
        .map(|node| {
            let count = nodes.get(node).and_then(allocatable_gpus).unwrap_or(0);
            (node.clone(), count)
        })
        .collect())
}

/// Polls every second until `want(node)` holds for every worker's allocatable.
async fn wait_allocatable(
    client: &Client,
    on: &Scenario5On<'_>,
    what: &str,
    limit: Duration,
    want: impl Fn(&str) -> u32,
) -> Result<Vec<(String, u32)>> {
    let workers = workers(on);
    wait_every_tray(what, limit, || async {
        let seen = allocatable(client, &workers).await?;
        let off: Vec<String> = seen
            .iter()
            .filter(|(node, count)| *count != want(node))
            .map(|(node, count)| format!("{node}: {count}, want {}", want(node)))
            .collect();
        Ok((seen, off))
    })
    .await
}

/// Every tray's allocatable equals the profile's GPU count.
async fn allocatable_row(client: &Client, on: &Scenario5On<'_>, profile: &Profile) -> Result<Rows> {
    let count = u32::try_from(profile.devices().len())?;
    let seen = wait_allocatable(
        client,
        on,
        "allocatable nvidia.com/gpu on every tray",
        Duration::from_secs(180),
        |_| count,
    )
    .await?;
    let details = seen
        .into_iter()
        .map(|(node, got)| WorkerDetail {
            node,
            pod: DP_DS.to_owned(),
            detail: format!(
                "allocatable nvidia.com/gpu {got} (profile {}: {count})",
                profile.name()
            ),
            passed: true,
        })
        .collect();
    Ok((details, Vec::new()))
}

/// GFD's labels on every tray (node labels, and the clique in GFD's own
/// NodeFeature, as the stager labels the clique too).
async fn labels_row(client: &Client, on: &Scenario5On<'_>, profile: &Profile) -> Result<Rows> {
    let wants = on
        .cliques
        .iter()
        .map(|(node, clique)| Ok((node.clone(), expected_labels(profile, Some(clique))?)))
        .collect::<Result<Vec<_>>>()?;
    let seen = wait_every_tray(
        "GFD's labels on every tray",
        Duration::from_secs(240),
        || async {
            let nodes = api::nodes(client).await?;
            let mut off = Vec::new();
            let mut seen = Vec::new();
            for (node, want) in &wants {
                let got = nodes.get(node).map(api::labels).unwrap_or_default();
                let published = api::gfd_node_features(client, node).await?;
                let mut wrong = label_mismatches(want, &got);
                wrong.extend(
                    label_mismatches(want, &published)
                        .into_iter()
                        .map(|it| format!("GFD's NodeFeature {it}")),
                );
                if wrong.is_empty() {
                    seen.push((node.clone(), want.clone()));
                } else {
                    off.push(format!("{node}: {}", wrong.join(", ")));
                }
            }
            Ok((seen, off))
        },
    )
    .await?;
    let details = seen
        .into_iter()
        .map(|(node, labels)| WorkerDetail {
            node,
            pod: "gpu-feature-discovery".to_owned(),
            detail: labels
                .iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect::<Vec<_>>()
                .join(" "),
            passed: true,
        })
        .collect();
    Ok((details, Vec::new()))
}

/// Xid 79 on one GPU of one tray, then clear and restart, then Xid 43.
async fn health_row<R: Runner>(
    runner: &R,
    client: &Client,
    on: &Scenario5On<'_>,
    profile: &Profile,
) -> Result<Rows> {
    let all = workers(on);
    let node = all.get(1).or(all.first()).context("no worker")?.clone();
    let count = u32::try_from(profile.devices().len())?;
    let gpu = u32::from(count > 1);
    let uuid = profile.device(gpu as usize).context("no such GPU")?.uuid;
    let inject = |action| on.cluster.inject(runner, client, &node, action);
    // Whatever an earlier run left, and whatever happens here, no fault stays.
    inject(XidAction::Clear).await?;
    let checked = health_checks(&inject, client, on, (&node, gpu, &uuid), count).await;
    let cleared = inject(XidAction::Clear).await;
    let (detail, timings) = checked?;
    cleared?;
    let worker = WorkerDetail {
        node,
        pod: DP_DS.to_owned(),
        detail,
        passed: true,
    };
    Ok((vec![worker], timings))
}

/// The health steps on GPU `gpu` (`uuid`) of `node`; the detail line and timings.
async fn health_checks<F: Future<Output = Result<String>>>(
    inject: &impl Fn(XidAction) -> F,
    client: &Client,
    on: &Scenario5On<'_>,
    (node, gpu, uuid): (&str, u32, &str),
    count: u32,
) -> Result<(String, Vec<(String, f64)>)> {
    let mut timings = Vec::new();
    inject(XidAction::Inject {
        gpu,
        xid: FATAL_XID,
    })
    .await?;
    let injected = Instant::now();
    let target = node.to_owned();
    // The Xid 79 event marks the GPU unhealthy; the next wait answers GPU_IS_LOST, on which the
    // plugin marks every device of the tray unhealthy: the tray's allocatable drops to 0.
    let dropped = wait_allocatable(client, on, "Xid 79 in allocatable", XID_LIMIT, |it| {
        if it == target {
            0
        } else {
            count
        }
    })
    .await;
    let drop_secs = round(injected.elapsed());
    timings.push(("xid79_to_allocatable_drop".to_owned(), drop_secs));
    let log = api::plugin_log(client, node).await?;
    inject(XidAction::Clear).await?;
    dropped.with_context(|| format!("on {node}, GPU {gpu} ({uuid})"))?;
    if !expect::marks_unhealthy(&log, uuid, FATAL_XID) {
        bail!(
            "the device plugin's log on {node} does not mark {uuid} unhealthy for Xid 79:\n{log}"
        );
    }

    let restarted = Instant::now();
    api::restart_plugin(client, node).await?;
    wait_allocatable(
        client,
        on,
        "allocatable restored",
        Duration::from_secs(120),
        |_| count,
    )
    .await?;
    timings.push((
        "clear_restart_to_restored".to_owned(),
        round(restarted.elapsed()),
    ));

    ignored_xid(inject, client, on, node, count).await?;
    let detail = format!(
        "Xid 79 on GPU {gpu} ({uuid}): allocatable {count} -> 0 (the Xid, then GPU_IS_LOST) in \
         {drop_secs:.1} s (limit {} s), the plugin's log names it; restored to {count} after clear and restart; Xid 43 ignored",
        XID_LIMIT.as_secs()
    );
    Ok((detail, timings))
}

/// Xid 43: the plugin logs it skipped and allocatable stays, on every tray.
async fn ignored_xid<F: Future<Output = Result<String>>>(
    inject: &impl Fn(XidAction) -> F,
    client: &Client,
    on: &Scenario5On<'_>,
    node: &str,
    count: u32,
) -> Result<()> {
    inject(XidAction::Inject {
        gpu: 0,
        xid: IGNORED_XID,
    })
    .await?;
    let skipped = crate::scenario4::api::wait_for(
        "the device plugin skipping Xid 43",
        Duration::from_secs(30),
        || async {
            let log = api::plugin_log(client, node).await?;
            Ok(if expect::skipped_xid(&log, IGNORED_XID) {
                Ok(())
            } else {
                Err("not logged yet".to_owned())
            })
        },
        || async { String::new() },
    )
    .await;
    // Give kubelet the time an unhealthy report would take to show.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let seen = allocatable(client, &workers(on)).await;
    inject(XidAction::Clear).await?;
    skipped?;
    let off: Vec<String> = seen?
        .into_iter()
        .filter(|(_, got)| *got != count)
        .map(|(node, got)| format!("{node}: {got}"))
        .collect();
    if !off.is_empty() {
        bail!("after Xid 43, allocatable changed: {}", off.join(", "));
    }
    Ok(())
}
