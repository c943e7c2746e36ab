//! Scenario 4: NVIDIA's own ComputeDomain flow on the demo cluster.
//!
//! NVIDIA's DRA driver (compute domains only) is built from the snapshot in the
//! peers directory, put into an image with `image-builder`, loaded into kind and
//! installed with its own Helm chart against the staged driver root. A
//! ComputeDomain for the two clique-0 workers with a workload pair claiming its
//! channel then shows what NVIDIA's controller, kubelet plugin and daemon make
//! of the mock's fabric identity: the daemon pods' clique label, the
//! ComputeDomainClique object named after the clique, the IMEX config the
//! daemon writes on both nodes.
//!
//! Without an `nvidia-imex` binary in the image the daemons cannot start, so
//! the ComputeDomain stays NotReady and the workload pods never run: that part
//! is reported as its own SKIPPED result (`scenario4-imex`), never as passed.
//!
//! Here the flow itself; [`image`] the build of the driver and its image,
//! [`objects`] the pure planning (chart values, objects, parsing), [`api`] the
//! cluster I/O (apply, the bounded waits, the install, the clean-up). The pure
//! parts are unit-tested; the build, the install and the waits are the I/O
//! edge.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::{Client, ResourceExt as _};
use tokio::time::Instant;
use xshell::Shell;

use crate::names::KindCluster;
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::{Cmd, Runner};

mod api;
pub(crate) mod image;
mod objects;

use api::{
    apply, cd_resource, clean_up, clique_resource, ensure_namespace, install, pod_resource,
    wait_for,
};
use image::{build, missing_prerequisite};
use objects::{
    cd_status, clique0_pair, clique_daemon_nodes, clique_id, clique_object_name, compute_domain,
    nodes_cfg_entries, workload_pod,
};

/// The image's repository name; the tag is derived from its content.
pub const DRA_IMAGE: &str = "cdsim-dra-driver";
/// The driver's namespace (the chart refuses `default`).
pub const DRA_NS: &str = "nvidia-dra-driver";
/// The Helm release (its name makes the chart's object names `dra-driver-nvidia-gpu-…`).
pub const DRA_RELEASE: &str = "dra-driver-nvidia-gpu";
/// The kubelet plugin DaemonSet.
pub const PLUGIN_DS: &str = "dra-driver-nvidia-gpu-kubelet-plugin";
/// Its pods.
pub const PLUGIN_SELECTOR: &str = "dra-driver-nvidia-gpu-component=kubelet-plugin";
/// The controller Deployment.
pub const CONTROLLER: &str = "dra-driver-nvidia-gpu-controller";
/// Its pods.
pub const CONTROLLER_SELECTOR: &str = "dra-driver-nvidia-gpu-component=controller";
/// Where the scenario's ComputeDomain and workload live.
pub const S4_NS: &str = "cdsim-scenario4";
/// The ComputeDomain.
pub const CD_NAME: &str = "cdsim-s4";
/// The workload channel claim template the ComputeDomain asks the controller for.
pub const CHANNEL_RCT: &str = "cdsim-s4-channel";
/// The workload pods' label.
pub const WORKLOAD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "cdsim-s4-workload");
/// The label NVIDIA's daemon puts on its own pod.
pub const CLIQUE_LABEL: &str = "resource.nvidia.com/computeDomain.cliqueID";
/// Where the kubelet plugin keeps each domain's daemon config (bind-mounted at `/imexd`).
pub const DOMAINS_DIR: &str = "/var/lib/kubelet/plugins/compute-domain.nvidia.com/domains";
/// The staged driver root on each node.
pub const DRIVER_ROOT: &str = "/var/lib/nvml-mock/driver";
/// The staged substitute `/proc/devices` (the IMEX majors).
pub const PROC_DEVICES: &str = "/var/lib/nvml-mock/imex/proc-devices";

/// Runs scenario 4 on the kind cluster; returns its result, the SKIPPED
/// IMEX part and the rebind part.
pub async fn run<R: Runner>(
    sh: &Shell,
    runner: &R,
    cluster: &KindCluster,
    client: &Client,
    tracker: &crate::tracker::Tracker,
) -> Result<Vec<ScenarioResult>> {
    let started = Instant::now();
    let mut laps = Laps {
        mark: Instant::now(),
        timings: Vec::new(),
    };

    if let Some(reason) = missing_prerequisite() {
        return Ok(vec![ScenarioResult::new(
            "scenario4",
            Outcome::Skipped(reason),
            round(started.elapsed()),
        )]);
    }
    let scratch = crate::dirs::scratch_dir("scenario4")?;
    let image = deploy(sh, runner, cluster, client, &scratch, &mut laps).await?;

    let workers = cluster.workers();
    let (pair, clique) = clique0_pair(&workers)?;
    ensure_namespace(client).await?;
    clean_up(client).await?;
    laps.lap("clean");

    let mut details = Vec::new();
    let (checks, status) = domain_flow(
        runner,
        client,
        &pair,
        &clique,
        &image.image.to_string(),
        ImexConfig::Check,
        &mut details,
    )
    .await;
    let cleaned = clean_up(client).await;
    laps.lap("domain");

    let outcome = match (&checks, &cleaned) {
        (Ok(()), Ok(())) => Outcome::Passed,
        (Err(err), _) => Outcome::Failed(format!("{err:#}")),
        (Ok(()), Err(err)) => Outcome::Failed(format!("cleanup: {err:#}")),
    };
    let main = ScenarioResult {
        workers: details,
        timings: laps.timings,
        ..ScenarioResult::new("scenario4", outcome, round(started.elapsed()))
    };
    let imex = imex_part(&status);
    let rebind = rebind_part(
        runner,
        client,
        cluster,
        &pair,
        &image.image.to_string(),
        tracker,
        &scratch,
    )
    .await;
    Ok(vec![main, imex, rebind])
}

/// The timings of scenario 4's phases, each from the end of the one before.
struct Laps {
    mark: Instant,
    timings: Vec<(String, f64)>,
}

impl Laps {
    /// Ends the phase `name`.
    fn lap(&mut self, name: &str) {
        self.timings
            .push((name.to_owned(), round(self.mark.elapsed())));
        self.mark = Instant::now();
    }
}

/// Builds the DRA image, loads it into the cluster and installs the chart.
async fn deploy<R: Runner>(
    sh: &Shell,
    runner: &R,
    cluster: &KindCluster,
    client: &Client,
    scratch: &Path,
    laps: &mut Laps,
) -> Result<image::DraImage> {
    let image = build(sh, &crate::dirs::images_dir()?)?;
    eprintln!("    {} ({})", image.image, image.archive.display());
    laps.lap("build");
    let loaded =
        crate::cluster::load_image(runner, cluster, &image.archive, &image.image.to_string())?;
    if loaded.is_empty() {
        eprintln!("    {}: already on every node", image.image);
    } else {
        eprintln!("    {}: loaded into {}", image.image, loaded.join(", "));
    }
    laps.lap("load");
    install(runner, client, &cluster.context(), &image, scratch).await?;
    laps.lap("install");
    Ok(image)
}

/// The IMEX part, SKIPPED: the image has no nvidia-imex, so the domain
/// never gets past `status`.
fn imex_part(status: &str) -> ScenarioResult {
    ScenarioResult {
        name: "scenario4-imex".to_owned(),
        outcome: Outcome::Skipped(format!(
            "the {DRA_IMAGE} image has no nvidia-imex (proprietary; no payload or IMEX double wired into it): \
             the daemons exit at `exec nvidia-imex`, so the ComputeDomain stays NotReady (status seen: {}) and the \
             workload pods never run",
            if status.is_empty() { "none" } else { status }
        )),
        seconds: 0.0,
        workers: Vec::new(),
        timings: Vec::new(),
    }
}

/// Whether the domain flow also checks the IMEX config the plugin and the
/// daemon write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ImexConfig {
    /// Check it (the first domain).
    Check,
    /// Skip it (the rebind part's second domain).
    Skip,
}

/// Creates the ComputeDomain and the workload pair, asserts what NVIDIA's
/// software shows, and returns the checks and the domain's last status.
async fn domain_flow<R: Runner>(
    runner: &R,
    client: &Client,
    pair: &[String; 2],
    clique: &str,
    image_ref: &str,
    imex_config: ImexConfig,
    details: &mut Vec<WorkerDetail>,
) -> (Result<()>, String) {
    let checks = async {
        let cd = apply(client, &cd_resource(), &compute_domain()).await?;
        let cd_uid = cd.uid().context("the ComputeDomain has no uid")?;
        for (index, node) in pair.iter().enumerate() {
            apply(
                client,
                &pod_resource(),
                &workload_pod(&format!("cdsim-s4-workload-{index}"), node, image_ref),
            )
            .await?;
        }
        eprintln!(
            "    ComputeDomain {S4_NS}/{CD_NAME} (uid {cd_uid}) and workload pods on {}",
            pair.join(", ")
        );
        daemon_pods(client, pair, clique, &cd_uid, details).await?;
        clique_object(client, clique, &cd_uid, details).await?;
        if imex_config == ImexConfig::Check {
            imex_configs(runner, pair, &cd_uid, details).await?;
        }
        Ok(())
    }
    .await;
    let status = Api::<DynamicObject>::namespaced_with(client.clone(), S4_NS, &cd_resource())
        .get_opt(CD_NAME)
        .await
        .ok()
        .flatten()
        .and_then(|it| serde_json::to_value(it).ok())
        .map(|it| cd_status(&it))
        .unwrap_or_default();
    (checks, status)
}

/// Waits until the stager has labelled both nodes `nvidia.com/gpu.clique=<clique>`.
async fn wait_clique_labels(client: &Client, pair: &[String; 2], clique: &str) -> Result<()> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    wait_for(
        &format!("nvidia.com/gpu.clique={clique} on {}", pair.join(", ")),
        Duration::from_secs(90),
        || async {
            let mut seen = Vec::new();
            for node in pair {
                let it = nodes.get(node).await?;
                seen.push(
                    it.labels()
                        .get("nvidia.com/gpu.clique")
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            if seen.iter().all(|it| it == clique) {
                Ok(Ok(()))
            } else {
                Ok(Err(format!("labels now {seen:?}")))
            }
        },
        || async { String::new() },
    )
    .await
}

/// The kubelet plugin reads the clique once: delete its pods and wait for the rollout.
async fn restart_plugin(client: &Client) -> Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), DRA_NS, &pod_resource());
    for pod in pods
        .list(&ListParams::default().labels(PLUGIN_SELECTOR))
        .await?
        .items
    {
        pods.delete(&pod.name_any(), &DeleteParams::default())
            .await?;
    }
    // Let the DaemonSet notice before waiting for its rollout.
    tokio::time::sleep(Duration::from_secs(2)).await;
    wait_plugin(client, Duration::from_secs(180)).await
}

/// After scenario 3's rebinding and a plugin restart, a new ComputeDomain's
/// daemons report the rebind clique; the demo topology is restored after.
async fn rebind_part<R: Runner>(
    runner: &R,
    client: &Client,
    cluster: &KindCluster,
    pair: &[String; 2],
    image_ref: &str,
    tracker: &crate::tracker::Tracker,
    dir: &Path,
) -> ScenarioResult {
    let started = Instant::now();
    let workers = cluster.workers();
    let rebind = topology::rebind(&workers);
    let clique = clique_id(&rebind, &pair[0]).unwrap_or_default();
    let rebind_file = dir.join("rebind-topology.yaml");
    let demo_file = dir.join("demo-topology.yaml");
    let helm = |file: &Path| {
        crate::plan::helm_topology_args(
            crate::names::CHART,
            &cluster.context(),
            &file.to_string_lossy(),
        )
    };
    let mut details = Vec::new();
    let checks = async {
        std::fs::write(&rebind_file, rebind.helm_values())?;
        std::fs::write(&demo_file, topology::demo(&workers).helm_values())?;
        tracker.restore_topology(Some(Cmd::with_args("helm", helm(&demo_file))));
        let args = helm(&rebind_file);
        runner.check(&Cmd::new(
            "helm",
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ))?;
        wait_clique_labels(client, pair, &clique).await?;
        restart_plugin(client).await?;
        let (checks, _) = domain_flow(
            runner,
            client,
            pair,
            &clique,
            image_ref,
            ImexConfig::Skip,
            &mut details,
        )
        .await;
        checks
    }
    .await;
    let cleaned = clean_up(client).await;
    // Restore the demo topology and the plugin's view of it, whatever happened.
    let restored = async {
        let args = helm(&demo_file);
        runner.check(&Cmd::new(
            "helm",
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ))?;
        let demo_clique = clique_id(&topology::demo(&workers), &pair[0]).unwrap_or_default();
        wait_clique_labels(client, pair, &demo_clique).await?;
        restart_plugin(client).await
    }
    .await;
    tracker.restore_topology(None);
    let outcome = match (checks, cleaned, restored) {
        (Ok(()), Ok(()), Ok(())) => Outcome::Passed,
        (Err(err), _, _) => Outcome::Failed(format!("{err:#}")),
        (_, Err(err), _) => Outcome::Failed(format!("cleanup: {err:#}")),
        (_, _, Err(err)) => Outcome::Failed(format!("restoring the demo topology: {err:#}")),
    };
    ScenarioResult {
        workers: details,
        ..ScenarioResult::new("scenario4-rebind", outcome, round(started.elapsed()))
    }
}

/// The daemon pods (DaemonSet computedomain-daemon-<uid>) on both nodes,
/// labelled with the clique by NVIDIA's daemon.
async fn daemon_pods(
    client: &Client,
    pair: &[String; 2],
    clique: &str,
    cd_uid: &str,
    details: &mut Vec<WorkerDetail>,
) -> Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), DRA_NS, &pod_resource());
    let want: BTreeSet<String> = pair.iter().cloned().collect();
    let daemons = wait_for(
        &format!(
            "daemon pods on {} labelled {CLIQUE_LABEL}={clique}",
            pair.join(", ")
        ),
        Duration::from_secs(180),
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
                .filter(|(node, _, label)| label == clique && want.contains(node))
                .map(|(node, _, _)| node.clone())
                .collect();
            if good == want {
                Ok(Ok(on))
            } else if on.is_empty() {
                Ok(Err("no daemon pod yet".to_owned()))
            } else {
                Ok(Err(format!(
                    "daemon pods (node, pod, clique label): {on:?}"
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
            passed: label == clique,
        });
    }
    Ok(())
}

/// The ComputeDomainClique named after the domain and the clique.
async fn clique_object(
    client: &Client,
    clique: &str,
    cd_uid: &str,
    details: &mut Vec<WorkerDetail>,
) -> Result<()> {
    let name = clique_object_name(cd_uid, clique);
    let cliques: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), DRA_NS, &clique_resource());
    let seen = wait_for(
        &format!("ComputeDomainClique {DRA_NS}/{name}"),
        Duration::from_secs(60),
        || async {
            match cliques.get_opt(&name).await? {
                Some(it) => Ok(Ok(clique_daemon_nodes(&serde_json::to_value(it)?))),
                None => Ok(Err("not created yet".to_owned())),
            }
        },
        || async {
            match cliques.list(&ListParams::default()).await {
                Ok(list) => format!(
                    "  cliques in {DRA_NS}: {:?}",
                    list.items
                        .iter()
                        .map(|it| it.name_any())
                        .collect::<Vec<_>>()
                ),
                Err(err) => format!("  cannot list cliques: {err}"),
            }
        },
    )
    .await?;
    details.push(WorkerDetail {
        node: String::new(),
        pod: String::new(),
        detail: format!("ComputeDomainClique {name} exists (daemons listed now: {seen:?})"),
        passed: true,
    });
    Ok(())
}

/// The daemon's IMEX config on both nodes: imexd.cfg written and nodes.cfg
/// listing at least the domain's two nodes.
async fn imex_configs<R: Runner>(
    runner: &R,
    pair: &[String; 2],
    cd_uid: &str,
    details: &mut Vec<WorkerDetail>,
) -> Result<()> {
    for node in pair {
        let dir = format!("{DOMAINS_DIR}/{cd_uid}");
        let text = wait_for(
            &format!("IMEX config of the domain on {node}"),
            Duration::from_secs(60),
            || async {
                let out = runner.run(&Cmd::new(
                    "docker",
                    &[
                        "exec",
                        node,
                        "sh",
                        "-c",
                        &format!("test -s {dir}/imexd.cfg && cat {dir}/nodes.cfg"),
                    ],
                ))?;
                if out.ok {
                    Ok(Ok(out.stdout))
                } else {
                    Ok(Err(format!("{dir}/imexd.cfg or nodes.cfg not written yet")))
                }
            },
            || async {
                runner
                    .run(&Cmd::new("docker", &["exec", node, "ls", "-la", &dir]))
                    .map(|out| format!("  ls {dir}: {}{}", out.stdout, out.stderr))
                    .unwrap_or_default()
            },
        )
        .await?;
        let entries = nodes_cfg_entries(&text);
        details.push(WorkerDetail {
            node: node.clone(),
            pod: String::new(),
            detail: format!(
                "{dir}: imexd.cfg written, nodes.cfg lists {} peers ({}…)",
                entries.len(),
                entries
                    .iter()
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            passed: entries.len() >= 2,
        });
        if entries.len() < 2 {
            bail!("nodes.cfg on {node} lists {entries:?}: fewer than the domain's two nodes");
        }
    }
    Ok(())
}

/// Waits up to `limit` for the driver's kubelet-plugin DaemonSet to roll out.
async fn wait_plugin(client: &Client, limit: Duration) -> Result<()> {
    crate::k8s::wait_daemonset(client, DRA_NS, PLUGIN_DS, PLUGIN_SELECTOR, limit).await
}

#[cfg(test)]
mod tests {
    use super::objects::{chart_values, helm_args};
    use super::*;
    use crate::plan::ImageRef;
    use serde_json::{json, Value};

    fn workers() -> Vec<String> {
        KindCluster::new("nvml-mock-compute-domain")
            .expect("name")
            .workers()
    }

    #[test]
    fn the_clique0_pair_and_its_id_follow_the_demo_topology() {
        let (pair, id) = clique0_pair(&workers()).expect("pair");
        assert_eq!(
            pair,
            [
                "nvml-mock-compute-domain-worker",
                "nvml-mock-compute-domain-worker2"
            ]
        );
        assert_eq!(id, "00000000-0000-0000-0000-0000000000ab.0");
        assert!(clique0_pair(&workers()[..1]).is_err());
    }

    #[test]
    fn chart_values_select_compute_domains_on_the_staged_root() {
        let image = ImageRef::parse("cdsim-dra-driver:abc123").expect("ref");
        let values: Value = serde_yaml::from_str(&chart_values(&image)).expect("yaml");
        assert_eq!(values["nvidiaDriverRoot"], "/var/lib/nvml-mock/driver");
        assert_eq!(
            values["altProcDevices"],
            "/var/lib/nvml-mock/imex/proc-devices"
        );
        assert_eq!(values["resources"]["gpus"]["enabled"], false);
        assert_eq!(values["resources"]["computeDomains"]["enabled"], true);
        assert_eq!(values["image"]["repository"], "cdsim-dra-driver");
        assert_eq!(values["image"]["tag"], "abc123");
        assert_eq!(values["image"]["pullPolicy"], "Never");
        let term = &values["kubeletPlugin"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"][0];
        assert_eq!(term["key"], "nvidia.com/gpu.present");
        assert_eq!(term["values"][0], "true");
        let args = helm_args(Path::new("/c"), "kind-x", Path::new("/v.yaml"));
        assert_eq!(args[..3], ["upgrade", "--install", DRA_RELEASE]);
        assert!(args.windows(2).any(|it| it == ["--namespace", DRA_NS]));
        assert_ne!(DRA_NS, "default");
    }

    #[test]
    fn workload_pods_are_placed_by_affinity_and_claim_the_channel() {
        let pod = workload_pod("w0", "node-a", "img:1");
        assert!(
            pod["spec"].get("nodeName").is_none(),
            "nodeName skips DRA allocation"
        );
        let term = &pod["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"][0];
        assert_eq!(term["values"][0], "node-a");
        assert_eq!(
            pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
            CHANNEL_RCT
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["claims"][0]["name"],
            "channel"
        );
        let cd = compute_domain();
        assert_eq!(
            cd["spec"]["channel"]["resourceClaimTemplate"]["name"],
            CHANNEL_RCT
        );
        assert_eq!(cd["spec"]["numNodes"], 2);
    }

    #[test]
    fn parses_nodes_cfg_clique_objects_and_cd_status() {
        assert_eq!(
            nodes_cfg_entries("# x\ncompute-domain-daemon-0000\n\ncompute-domain-daemon-0001\n"),
            ["compute-domain-daemon-0000", "compute-domain-daemon-0001"]
        );
        let clique = json!({"daemons": [{"nodeName": "a", "cliqueID": "u.0"}, {"nodeName": "b"}]});
        assert_eq!(
            clique_daemon_nodes(&clique),
            ["a".to_owned(), "b".to_owned()].into_iter().collect()
        );
        assert!(clique_daemon_nodes(&json!({})).is_empty());
        assert_eq!(
            cd_status(&json!({"status": {"status": "NotReady"}})),
            "NotReady"
        );
        assert_eq!(cd_status(&json!({})), "");
        assert_eq!(clique_object_name("uid", "u.0"), "uid.u.0");
    }
}
