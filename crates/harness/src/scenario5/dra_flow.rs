//! Scenario 5's DRA rows (issue 23, step 5), once the device plugin is gone:
//! NVIDIA's DRA driver from the snapshot (scenario 4's image, which carries
//! the GPU kubelet plugin) upgraded to GPU resources with its NVML health
//! check on, on the staged driver root as a user with a real one would set it.
//!
//! `scenario5-dra`: every tray's ResourceSlice lists the profile's GPUs with
//! the profile's attributes; a ResourceClaim with a CEL selector on
//! `productName` gets one GPU and a pod using it sees exactly that one through
//! NVML. `scenario5-dra-health`: with the cluster's `DRADeviceTaints` gate on,
//! an Xid 79 on one GPU shows as the taint `gpu.nvidia.com/xid=79` on exactly
//! that device of the tray's slice; cleared, the plugin restarted, none left.
//! [`clean_up`] puts the release back as scenario 4 left it (or removes it).
//! The pure parts are in [`super::dra`].

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use nvml_profile::Profile;
use serde_json::{json, Value};
use tokio::time::Instant;
use xshell::Shell;

use super::dra::{self, SliceDevice, DRIVER};
use super::rows::{wait_every_tray, workers, Scenario5On};
use crate::inject::XidAction;
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::{Cmd, Runner};
use crate::scenario4::api::wait_for;
use crate::scenario4::image::DraImage;
use crate::scenario4::{DRA_NS, DRA_RELEASE, PLUGIN_DS, PLUGIN_SELECTOR};

/// The DRA rows, in order (in [`super::ROWS`] before the cleanup row).
pub const DRA_ROWS: [&str; 2] = ["scenario5-dra", "scenario5-dra-health"];
/// Where the claim and its pod live.
pub const CLAIM_NS: &str = "cdsim-scenario5-dra";
const CLAIM: &str = "cdsim-s5-dra-gpu";
const POD: &str = "cdsim-s5-dra";
const FIELD_MANAGER: &str = "cdsim-scenario5";
/// How long an Xid may take to show as a taint (the brief's bound).
pub const TAINT_LIMIT: Duration = Duration::from_secs(60);
const FATAL_XID: u64 = 79;

/// What a step returns: per-worker details and named timings.
type Rows = (Vec<WorkerDetail>, Vec<(String, f64)>);

/// The DRA release as this scenario set it up.
pub struct Installed {
    image: DraImage,
    /// The release was there before (scenario 4's): put its values back, else uninstall.
    existed: bool,
}

fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind))
}

fn slice_resource() -> ApiResource {
    resource("resource.k8s.io", "v1", "ResourceSlice")
}

fn claim_resource() -> ApiResource {
    resource("resource.k8s.io", "v1", "ResourceClaim")
}

/// NVIDIA's DRA driver from the run's source (scenario 4's), its release
/// upgraded (or installed) with GPU resources and the NVML health check on; a
/// failed install is uninstalled.
pub async fn install<R: Runner>(
    sh: &Shell,
    runner: &R,
    on: &Scenario5On<'_>,
    client: &Client,
) -> Result<Installed> {
    let image = crate::gpu_source::dra(sh, runner, on.source, on.cluster.kind()).await?;
    let daemonsets: Api<k8s_openapi::api::apps::v1::DaemonSet> =
        Api::namespaced(client.clone(), DRA_NS);
    let existed = daemonsets.get_opt(PLUGIN_DS).await?.is_some();
    let values = dra::chart_values(&crate::scenario4::objects::chart_values(&image.image))?;
    let file = crate::dirs::scratch_dir("scenario5")?.join("dra-gpu-values.yaml");
    std::fs::write(&file, values).with_context(|| format!("writing {}", file.display()))?;
    let context = on.cluster.context();
    let args = crate::scenario4::objects::helm_args(&image.chart, &context, &file);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let release = crate::gpu_source::fetch::Release {
        name: DRA_RELEASE,
        namespace: DRA_NS,
        context: &context,
    };
    let installed = async {
        crate::apiserver::helm(runner, &Cmd::new("helm", &args), &context)?;
        wait_plugin(client, Duration::from_secs(240)).await
    };
    crate::gpu_source::install_guarded(runner, client, on.source, release, installed).await?;
    Ok(Installed { image, existed })
}

/// Every worker's published devices of [`DRIVER`], by node.
async fn published(
    client: &Client,
    workers: &[String],
) -> Result<BTreeMap<String, BTreeMap<String, SliceDevice>>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &slice_resource());
    let params = ListParams::default().fields(&format!("spec.driver={DRIVER}"));
    let slices: Vec<Value> = api
        .list(&params)
        .await?
        .items
        .into_iter()
        .map(serde_json::to_value)
        .collect::<std::result::Result<_, _>>()?;
    Ok(workers
        .iter()
        .map(|node| (node.clone(), dra::node_devices(&slices, node)))
        .collect())
}

/// Waits until every tray publishes exactly the profile's devices.
async fn wait_slices(
    client: &Client,
    workers: &[String],
    want: &BTreeMap<String, SliceDevice>,
) -> Result<BTreeMap<String, BTreeMap<String, SliceDevice>>> {
    wait_every_tray(
        "every tray's gpu.nvidia.com ResourceSlice equal to the profile",
        Duration::from_secs(180),
        || async {
            let seen = published(client, workers).await?;
            let off: Vec<String> = seen
                .iter()
                .map(|(node, devices)| (node, dra::device_mismatches(want, devices)))
                .filter(|(_, off)| !off.is_empty())
                .map(|(node, off)| format!("{node}: {}", off.join(", ")))
                .collect();
            Ok((seen, off))
        },
    )
    .await
}

/// Waits (bounded) until the DRA driver's GPU kubelet plugin has rolled out.
async fn wait_plugin(client: &Client, limit: Duration) -> Result<()> {
    crate::k8s::wait_daemonset(client, DRA_NS, PLUGIN_DS, PLUGIN_SELECTOR, limit).await
}

/// Applies an object server-side.
async fn apply(client: &Client, resource: &ApiResource, object: &Value) -> Result<DynamicObject> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), CLAIM_NS, resource);
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {CLAIM_NS}/{name}", resource.kind))
}

/// The claim's namespace, created if missing.
async fn ensure_namespace(client: &Client) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CLAIM_NS}});
    api.patch(
        CLAIM_NS,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(&ns),
    )
    .await
    .with_context(|| format!("creating namespace {CLAIM_NS}"))?;
    Ok(())
}

/// Row `scenario5-dra`: the slices against the profile, then the claim and its pod.
pub async fn dra_row(
    client: &Client,
    on: &Scenario5On<'_>,
    profile: &Profile,
    image: &str,
) -> Result<Rows> {
    let workers = workers(on);
    let want = dra::expected_devices(profile);
    let started = Instant::now();
    let seen = wait_slices(client, &workers, &want).await?;
    let mut timings = vec![("slices_published".to_owned(), round(started.elapsed()))];
    let mut details: Vec<WorkerDetail> = seen
        .iter()
        .map(|(node, devices)| WorkerDetail {
            node: node.clone(),
            pod: "ResourceSlice".to_owned(),
            detail: devices
                .iter()
                .map(|(name, device)| format!("{name}: {}", dra::attributes_line(device)))
                .collect::<Vec<_>>()
                .join(" | "),
            passed: true,
        })
        .collect();
    let node = workers.first().context("no worker")?;
    let product = &profile.device(0).context("the profile lists no GPU")?.name;
    let allocated = Instant::now();
    let checked = claim_and_pod(client, node, product, image, &seen).await;
    let removed = delete_claim_objects(client).await;
    let detail = checked?;
    removed?;
    timings.push((
        "claim_to_pod_checked".to_owned(),
        round(allocated.elapsed()),
    ));
    details.push(WorkerDetail {
        node: node.clone(),
        pod: POD.to_owned(),
        detail,
        passed: true,
    });
    Ok((details, timings))
}

/// The claim on `node`, its pod, and what the pod's NVML lists; the detail line.
async fn claim_and_pod(
    client: &Client,
    node: &str,
    product: &str,
    image: &str,
    seen: &BTreeMap<String, BTreeMap<String, SliceDevice>>,
) -> Result<String> {
    ensure_namespace(client).await?;
    delete_claim_objects(client).await?;
    ensure_namespace(client).await?;
    apply(
        client,
        &claim_resource(),
        &dra::claim(CLAIM, CLAIM_NS, product),
    )
    .await?;
    let pod = dra::claim_pod(POD, CLAIM_NS, node, image, CLAIM);
    apply(client, &resource("", "v1", "Pod"), &pod).await?;
    wait_running(client).await?;
    let claims: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), CLAIM_NS, &claim_resource());
    let claim = serde_json::to_value(claims.get(CLAIM).await?)?;
    let (pool, device) = match dra::allocated(&claim).as_slice() {
        [one] => one.clone(),
        other => bail!("claim {CLAIM} was allocated {other:?}, want one {DRIVER} device"),
    };
    let uuid = seen
        .get(&pool)
        .and_then(|devices| devices.get(&device))
        .and_then(|it| it.attributes.get("uuid"))
        .map(ToString::to_string)
        .with_context(|| format!("{pool}/{device} is in no ResourceSlice seen"))?;
    let out = crate::k8s::exec_in_namespace(
        client,
        CLAIM_NS,
        (POD, "gpu"),
        &[
            "sh",
            "-c",
            "nvidia-smi -L; ls /dev | grep '^nvidia' | tr '\\n' ' '",
        ],
        Duration::from_secs(60),
    )
    .await?;
    if out.code != 0 {
        bail!(
            "`nvidia-smi -L` in {POD} exited {}: {}",
            out.code,
            out.stderr.trim()
        );
    }
    let listed = super::expect::smi_uuids(&out.stdout);
    if listed != [uuid.clone()] {
        bail!(
            "the pod's NVML lists {listed:?}, want exactly the allocated {pool}/{device} ({uuid}); \
             the pod's output:\n{}",
            out.stdout
        );
    }
    let devs = out
        .stdout
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned();
    Ok(format!(
        "claim {CLAIM} (CEL {}) allocated {pool}/{device} uuid {uuid}; pod {POD}'s nvidia-smi -L: {} \
         (/dev: {devs})",
        dra::product_selector(product),
        out.stdout.lines().next().unwrap_or_default().trim()
    ))
}

/// Waits until the claim's pod runs.
async fn wait_running(client: &Client) -> Result<()> {
    super::api::wait_pod_running(
        client,
        (CLAIM_NS, POD),
        Duration::from_secs(180),
        "app.kubernetes.io/name=cdsim-s5-dra",
    )
    .await
}

/// Deletes the claim's namespace (its pod and claim) and waits until it is gone.
async fn delete_claim_objects(client: &Client) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(CLAIM_NS).await?.is_none() {
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), CLAIM_NS);
    let _ = pods
        .delete(POD, &DeleteParams::default().grace_period(0))
        .await;
    let _ = api.delete(CLAIM_NS, &DeleteParams::default()).await;
    wait_for(
        &format!("namespace {CLAIM_NS} gone"),
        Duration::from_secs(180),
        || async {
            Ok(match api.get_opt(CLAIM_NS).await? {
                None => Ok(()),
                Some(_) => Err("terminating".to_owned()),
            })
        },
        || async { String::new() },
    )
    .await
}

/// Whether the API server has `DRADeviceTaints` on (from its metrics).
async fn taints_gate(client: &Client) -> Result<bool> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .context("building the /metrics request")?;
    let metrics = client
        .request_text(request)
        .await
        .context("reading the API server's /metrics")?;
    Ok(dra::feature_enabled(&metrics, dra::TAINTS_GATE).unwrap_or(false))
}

/// Why the health row cannot run here, if it cannot.
pub async fn health_skip(client: &Client) -> Result<Option<String>> {
    Ok((!taints_gate(client).await?).then(|| {
        format!(
            "the cluster's API server has the {} feature gate off (alpha in Kubernetes 1.34): it drops \
             device taints from ResourceSlices; recreate the cluster with `cargo xtask up --force-recreate` \
             (manifests/kind/cluster.yaml turns it on)",
            dra::TAINTS_GATE
        )
    }))
}

/// Row `scenario5-dra-health`: Xid 79 on one GPU of one tray → its taint, then restore.
pub async fn health_row<R: Runner>(
    runner: &R,
    client: &Client,
    on: &Scenario5On<'_>,
    profile: &Profile,
) -> Result<Rows> {
    let workers = workers(on);
    let node = workers
        .get(1)
        .or(workers.first())
        .context("no worker")?
        .clone();
    let gpu = u32::from(profile.devices().len() > 1);
    let target = profile.device(gpu as usize).context("no such GPU")?;
    let device = dra::device_name(&target);
    let inject = |action| on.cluster.inject(runner, client, &node, action);
    inject(XidAction::Clear).await?;
    if !dra::tainted(&published(client, &workers).await?).is_empty() {
        restore(client, &workers, &node).await?;
    }
    inject(XidAction::Inject {
        gpu,
        xid: FATAL_XID,
    })
    .await?;
    let injected = Instant::now();
    let shown = wait_for(
        &format!("Xid {FATAL_XID} as a taint on {node}/{device}"),
        TAINT_LIMIT,
        || async {
            let seen = published(client, &workers).await?;
            Ok(dra::lost_tainted(&seen, (&node, &device), FATAL_XID).map(|()| seen))
        },
        || async { String::new() },
    )
    .await;
    let taint_secs = round(injected.elapsed());
    let cleared = inject(XidAction::Clear).await;
    let seen = shown.with_context(|| format!("GPU {gpu} ({}) of {node}", target.uuid))?;
    cleared?;
    let taints = dra::tainted(&seen).join(", ");
    let restarted = Instant::now();
    restore(client, &workers, &node).await?;
    let restore_secs = round(restarted.elapsed());
    let detail = format!(
        "Xid {FATAL_XID} on GPU {gpu} ({}) -> {taints} in {taint_secs:.1} s (limit {} s; GPU_IS_LOST \
         taints the tray's other devices), no device of the other {} trays tainted; cleared and the plugin restarted: no taint left after {restore_secs:.1} s",
        target.uuid,
        TAINT_LIMIT.as_secs(),
        workers.len().saturating_sub(1)
    );
    let worker = WorkerDetail {
        node,
        pod: PLUGIN_DS.to_owned(),
        detail,
        passed: true,
    };
    Ok((
        vec![worker],
        vec![
            ("xid79_to_slice_taint".to_owned(), taint_secs),
            ("clear_restart_to_untainted".to_owned(), restore_secs),
        ],
    ))
}

/// The plugin keeps a taint for its life: restart its pod on `node` and wait
/// until no device of any tray is tainted.
async fn restore(client: &Client, workers: &[String], node: &str) -> Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), DRA_NS);
    let params = ListParams::default()
        .labels(PLUGIN_SELECTOR)
        .fields(&format!("spec.nodeName={node}"));
    for pod in pods.list(&params).await?.items {
        crate::k8s::delete_pod(client, DRA_NS, &pod.name_any()).await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    wait_plugin(client, Duration::from_secs(180)).await?;
    wait_for(
        "no tainted gpu.nvidia.com device",
        Duration::from_secs(120),
        || async {
            let left = dra::tainted(&published(client, workers).await?);
            Ok(if left.is_empty() {
                Ok(())
            } else {
                Err(left.join(", "))
            })
        },
        || async { String::new() },
    )
    .await
}

/// Removes the claim objects and puts the DRA release back: scenario 4's
/// values (GPU resources off) when it was there before, else uninstalled;
/// then removes the GPU slices the stopped plugin left.
pub async fn clean_up<R: Runner>(
    runner: &R,
    client: &Client,
    context: &str,
    installed: Option<&Installed>,
) -> Result<()> {
    delete_claim_objects(client).await?;
    let Some(installed) = installed else {
        return Ok(());
    };
    if installed.existed {
        let dir = crate::dirs::scratch_dir("scenario5")?;
        crate::scenario4::api::install(runner, client, context, &installed.image, &dir).await?;
    } else {
        let args = [
            "uninstall",
            DRA_RELEASE,
            "--namespace",
            DRA_NS,
            "--kube-context",
            context,
            "--wait",
        ];
        crate::apiserver::helm(runner, &Cmd::new("helm", &args), context)?;
    }
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &slice_resource());
    let params = ListParams::default().fields(&format!("spec.driver={DRIVER}"));
    for slice in api.list(&params).await?.items {
        let _ = api
            .delete(&slice.name_any(), &DeleteParams::default())
            .await;
    }
    Ok(())
}

/// The DRA rows after the device plugin's removal (`ready`: it and the
/// install before it passed): install, `scenario5-dra`, `scenario5-dra-health`;
/// the release as installed, for [`clean_up`].
pub async fn rows<R: Runner>(
    sh: &Shell,
    runner: &R,
    on: &Scenario5On<'_>,
    client: &Client,
    profile: &Profile,
    ready: bool,
) -> (Vec<ScenarioResult>, Option<Installed>) {
    let [dra_name, health_name] = DRA_ROWS;
    if !ready {
        let not_run = |name: &str| {
            ScenarioResult::new(
                name,
                Outcome::Failed(
                    "not run: the device plugin's install or removal failed (rows scenario5, scenario5-cleanup)"
                        .to_owned(),
                ),
                0.0,
            )
        };
        return (vec![not_run(dra_name), not_run(health_name)], None);
    }
    eprintln!("    {dra_name}");
    let started = Instant::now();
    let installed = install(sh, runner, on, client).await;
    let body = async {
        if let Err(err) = &installed {
            bail!("installing the DRA driver with GPU resources: {err:#}");
        }
        let image = super::api::workload_image(client).await?;
        dra_row(client, on, profile, &image).await
    }
    .await;
    let first = super::finish(dra_name, started, body);
    let installed = installed.ok();
    if first.outcome != Outcome::Passed {
        if let Outcome::Failed(reason) = &first.outcome {
            eprintln!("ERROR: {dra_name}: {reason}");
        }
        let not_run = ScenarioResult::new(
            health_name,
            Outcome::Failed(format!("not run: {dra_name} failed")),
            0.0,
        );
        return (vec![first, not_run], installed);
    }
    let health = match health_skip(client).await {
        Ok(Some(reason)) => ScenarioResult::new(health_name, Outcome::Skipped(reason), 0.0),
        Ok(None) => super::step(health_name, true, health_row(runner, client, on, profile)).await,
        Err(err) => ScenarioResult::new(health_name, Outcome::Failed(format!("{err:#}")), 0.0),
    };
    (vec![first, health], installed)
}
