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
//! NVIDIA's daemon execs the driver root's `nvidia-imex` (its container gets
//! it through the compute-domain kubelet plugin's CDI spec). Where the mock's
//! stager staged one (`--imex`: NVIDIA's payload, or the IMEX test double's),
//! the IMEX part (`scenario4-imex`) follows the domain to Ready, the
//! workloads onto their channels, the IMEX domain UP, one daemon deleted and
//! recovered, and the domain deleted; against the double it reads `passed
//! (IMEX test double)`. Without one the daemons exit at `exec nvidia-imex`,
//! the ComputeDomain stays NotReady, and that part is SKIPPED, never passed.
//!
//! Here the flow itself; [`image`] the build of the driver and its image,
//! [`objects`] the pure planning (chart values, objects, parsing), [`api`] the
//! cluster I/O (apply, the bounded waits, the install, the clean-up),
//! [`imex`] the IMEX part's cluster I/O and [`live`] its pure judges. The
//! pure parts are unit-tested; the build, the install and the waits are the
//! I/O edge.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::{Client, ResourceExt as _};
use tokio::time::Instant;
use xshell::Shell;

use crate::imex::Daemon;
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::Runner;
use crate::scenarios::scaled;

pub(crate) mod api;
mod checks;
pub mod image;
mod imex;
pub mod live;
mod names;
mod node_view;
pub(crate) mod objects;

use api::{apply, cd_resource, clean_up, ensure_namespace, install, pod_resource, wait_plugin};
use objects::{cd_status, compute_domain, workload_pod, DomainPlan};

pub use image::DRA_IMAGE;
pub use names::*;
/// What scenario 4 runs on: the cluster, the topologies, the run's tracker.
pub struct Scenario4On<'a> {
    /// The cluster: kind or the API alone.
    pub cluster: crate::reach::Reach<'a>,
    /// The demo topology's and scenario 3's rebind topology's identities of
    /// every worker (the domain: the first clique of each NVLink domain) and
    /// the helm upgrade between them.
    pub rebind: crate::scenarios::Rebind,
    /// What an interrupt restores.
    pub tracker: &'a crate::tracker::Tracker,
    /// Where the DRA driver's chart and image come from.
    pub source: &'a crate::gpu_source::Source,
}

/// Runs scenario 4 on the cluster; returns its result, the SKIPPED
/// IMEX part and the rebind part.
pub async fn run<R: Runner>(
    sh: &Shell,
    runner: &R,
    on: &Scenario4On<'_>,
    client: &Client,
) -> Result<Vec<ScenarioResult>> {
    let started = Instant::now();
    let mut laps = Laps {
        mark: Instant::now(),
        timings: Vec::new(),
    };

    if let Some(reason) = on.source.dra_missing() {
        return Ok(vec![ScenarioResult::new(
            "scenario4",
            Outcome::Skipped(reason),
            round(started.elapsed()),
        )]);
    }
    let plan = DomainPlan::first_clique_of_each_domain(&on.rebind.demo_expected)?;
    let scratch = crate::dirs::scratch_dir("scenario4")?;
    let image = deploy(sh, runner, on, client, &scratch, &mut laps).await?;

    let daemon = driver_root_imex(client, &plan, on.workers()).await?;

    ensure_namespace(client).await?;
    clean_up(client).await?;
    laps.lap("clean");

    let mut details =
        crate::gpu_source::resolved_details(client, DRA_NS, on.source, &[&image.image]).await?;
    let (checks, status) = domain_flow(
        client,
        &plan,
        &image.image.to_string(),
        ImexConfig::Check,
        &mut details,
    )
    .await;
    laps.lap("domain");
    let imex = imex_part(client, &plan, daemon, (&checks, &status)).await;
    let cleaned = clean_up(client).await;
    laps.lap("clean up");

    let outcome = match (&checks, &cleaned) {
        (Ok(_), Ok(())) => Outcome::Passed,
        (Err(err), _) => Outcome::Failed(format!("{err:#}")),
        (Ok(_), Err(err)) => Outcome::Failed(format!("cleanup: {err:#}")),
    };
    let main = ScenarioResult {
        workers: details,
        timings: laps.timings,
        ..ScenarioResult::new("scenario4", outcome, round(started.elapsed()))
    };
    let rebind = rebind_part(
        runner,
        client,
        (on, daemon),
        &plan,
        &image.image.to_string(),
    )
    .await;
    Ok(vec![main, imex, rebind])
}

/// The trays of scenario 4's ComputeDomain among the workers' `expected`
/// identities under the demo topology: the first clique of each NVLink
/// domain, clique 0 of every rack on the demo layout (none when that is fewer
/// than two trays: the scenario refuses it).
pub fn domain_members(expected: &[(String, crate::fabric::Expected)]) -> Vec<String> {
    DomainPlan::first_clique_of_each_domain(expected)
        .map(|plan| plan.nodes())
        .unwrap_or_default()
}

impl Scenario4On<'_> {
    /// How many workers the topology names (the plugin's rollout is bounded by it).
    fn workers(&self) -> usize {
        self.rebind.demo_expected.len()
    }
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

/// Gets the DRA driver's chart and image from the run's source
/// (`crate::gpu_source`) and installs the chart; a failed install is uninstalled.
async fn deploy<R: Runner>(
    sh: &Shell,
    runner: &R,
    on: &Scenario4On<'_>,
    client: &Client,
    scratch: &Path,
    laps: &mut Laps,
) -> Result<image::DraImage> {
    let image = crate::gpu_source::dra(sh, runner, on.source, on.cluster.kind()).await?;
    laps.lap("images");
    let context = on.cluster.context();
    let release = crate::gpu_source::fetch::Release {
        name: DRA_RELEASE,
        namespace: DRA_NS,
        context: &context,
    };
    let installed = install(runner, client, &context, &image, scratch);
    crate::gpu_source::install_guarded(runner, client, on.source, release, installed).await?;
    laps.lap("install");
    Ok(image)
}

/// Which `nvidia-imex` the domain's trays stage; with one, the
/// compute-domain kubelet plugin's CDI spec must carry it (the plugin writes
/// the spec when it starts: one started before the stager staged the
/// binaries is restarted).
async fn driver_root_imex(
    client: &Client,
    plan: &DomainPlan,
    workers: usize,
) -> Result<Option<Daemon>> {
    let nodes = plan.nodes();
    let daemon = imex::detect(client, &nodes).await?;
    match daemon {
        None => return Ok(None),
        Some(Daemon::TestDouble) => {
            eprintln!("    the driver roots carry the IMEX TEST DOUBLE, not NVIDIA's nvidia-imex")
        }
        Some(Daemon::Nvidia) => eprintln!("    the driver roots carry NVIDIA's nvidia-imex"),
    }
    let stale = imex::stale_cdi(client, &nodes).await?;
    if !stale.is_empty() {
        eprintln!(
            "    the compute-domain CDI spec on {} predates nvidia-imex: restarting the kubelet plugin",
            stale.join(", ")
        );
        restart_plugin(client, workers).await?;
        let left = imex::stale_cdi(client, &nodes).await?;
        if !left.is_empty() {
            anyhow::bail!(
                "the compute-domain kubelet plugin's CDI spec on {} still lacks nvidia-imex after a \
                 restart: see its log (kubectl -n {DRA_NS} logs -l {PLUGIN_SELECTOR})",
                left.join(", ")
            );
        }
    }
    Ok(daemon)
}

/// The IMEX part: SKIPPED without `nvidia-imex` in the driver root (the
/// domain never gets past `status`); else the live domain's checks, marked
/// as the double's when the double ran them.
async fn imex_part(
    client: &Client,
    plan: &DomainPlan,
    daemon: Option<Daemon>,
    (up, status): (&Result<DomainUp>, &str),
) -> ScenarioResult {
    let Some(daemon) = daemon else {
        return imex_skipped(status);
    };
    let started = Instant::now();
    let mut details = Vec::new();
    let checked = async {
        let up = up
            .as_ref()
            .map_err(|err| anyhow::anyhow!("scenario 4's own checks failed first: {err:#}"))?;
        let live = up.live(client, plan);
        let mut timings = live.check(&mut details).await?;
        let deleted = live.delete(&mut details).await?;
        timings.push((
            "ComputeDomain deleted: its daemons, clique objects and tray labels gone".to_owned(),
            deleted,
        ));
        Ok::<_, anyhow::Error>(timings)
    }
    .await;
    let (outcome, timings) = match checked {
        Ok(timings) => (Outcome::Passed, timings),
        Err(err) => (Outcome::Failed(format!("{err:#}")), Vec::new()),
    };
    ScenarioResult {
        workers: details,
        timings,
        ..ScenarioResult::new(
            "scenario4-imex",
            daemon.mark(outcome),
            round(started.elapsed()),
        )
    }
}

/// The IMEX part, SKIPPED: no nvidia-imex in the staged driver root.
fn imex_skipped(status: &str) -> ScenarioResult {
    ScenarioResult::new(
        "scenario4-imex",
        Outcome::Skipped(format!(
            "no nvidia-imex in the staged driver root ({DRIVER_ROOT}/usr/bin; proprietary, not \
             shipped): NVIDIA's daemons exit at `exec nvidia-imex`, so the ComputeDomain stays \
             NotReady (status seen: {}) and the workload pods never run; pass --imex with NVIDIA's \
             imex-linux-x86_64-*-archive.tar.xz (or, to prove the orchestration only, the IMEX test \
             double's payload from `cargo xtask imex-double-payload --out DIR`)",
            if status.is_empty() { "none" } else { status }
        )),
        0.0,
    )
}

/// A ComputeDomain that was created: its uid and when.
struct DomainUp {
    cd_uid: String,
    created: Instant,
}

impl DomainUp {
    /// The live checks of this domain over `plan`'s trays.
    fn live<'a>(&'a self, client: &'a Client, plan: &'a DomainPlan) -> imex::Live<'a> {
        imex::Live {
            client,
            plan,
            cd_uid: &self.cd_uid,
            created: self.created,
        }
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

/// Creates the ComputeDomain and a workload pod per node, asserts what
/// NVIDIA's software shows, and returns the checks and the domain's last status.
async fn domain_flow(
    client: &Client,
    plan: &DomainPlan,
    image_ref: &str,
    imex_config: ImexConfig,
    details: &mut Vec<WorkerDetail>,
) -> (Result<DomainUp>, String) {
    let nodes = plan.nodes();
    let checks = async {
        let created = Instant::now();
        let cd = apply(client, &cd_resource(), &compute_domain(nodes.len())).await?;
        let cd_uid = cd.uid().context("the ComputeDomain has no uid")?;
        for (index, node) in nodes.iter().enumerate() {
            apply(
                client,
                &pod_resource(),
                &workload_pod(&format!("cdsim-s4-workload-{index}"), node, image_ref),
            )
            .await?;
        }
        eprintln!(
            "    ComputeDomain {S4_NS}/{CD_NAME} (uid {cd_uid}) and workload pods on {} nodes ({}), cliques {}",
            nodes.len(),
            nodes.join(", "),
            plan.cliques().keys().cloned().collect::<Vec<_>>().join(", ")
        );
        checks::daemon_pods(client, plan, &cd_uid, details).await?;
        checks::clique_objects(client, plan, &cd_uid, details).await?;
        if imex_config == ImexConfig::Check {
            checks::imex_configs(client, plan, &cd_uid, details).await?;
        }
        Ok(DomainUp { cd_uid, created })
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

/// The kubelet plugin reads the clique once: delete its pods and wait for the rollout.
async fn restart_plugin(client: &Client, workers: usize) -> Result<()> {
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
    wait_plugin(client, scaled(Duration::from_secs(180), workers)).await
}

/// After scenario 3's rebinding and a plugin restart, a new ComputeDomain's
/// daemons report their rack's rebind clique; the demo topology is restored after.
async fn rebind_part<R: Runner>(
    runner: &R,
    client: &Client,
    (on, daemon): (&Scenario4On<'_>, Option<Daemon>),
    plan: &DomainPlan,
    image_ref: &str,
) -> ScenarioResult {
    let started = Instant::now();
    let (rebind, tracker) = (&on.rebind, on.tracker);
    let workers = on.workers();
    let nodes = plan.nodes();
    let helm = |file: &Path| crate::scenarios::upgrade_topology(runner, rebind, file);
    let mut details = Vec::new();
    let mut timings = Vec::new();
    let mut demo_file = None;
    let checks = async {
        let rebound = DomainPlan::under_expected(&nodes, &rebind.rebind_expected)?;
        let (rebind_file, demo) =
            crate::scenarios::write_values(rebind).map_err(anyhow::Error::msg)?;
        tracker.restore_topology(Some(rebind.helm_upgrade(&demo)));
        demo_file = Some(demo);
        helm(&rebind_file).map_err(anyhow::Error::msg)?;
        checks::wait_clique_labels(client, &rebound).await?;
        restart_plugin(client, workers).await?;
        let (up, _) =
            domain_flow(client, &rebound, image_ref, ImexConfig::Skip, &mut details).await;
        let up = up?;
        if daemon.is_some() {
            let ready = up.live(client, &rebound).ready(&mut details).await?;
            timings.push(("daemons Ready on the rebind clique".to_owned(), ready));
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    let cleaned = clean_up(client).await;
    // Restore the demo topology and the plugin's view of it, whatever happened.
    let restored = async {
        if let Some(file) = &demo_file {
            helm(file).map_err(anyhow::Error::msg)?;
            checks::wait_clique_labels(client, plan).await?;
            restart_plugin(client, workers).await?;
        }
        Ok::<(), anyhow::Error>(())
    }
    .await;
    tracker.restore_topology(None);
    let outcome = match (checks, cleaned, restored) {
        (Ok(()), Ok(()), Ok(())) => Outcome::Passed,
        (Err(err), _, _) => Outcome::Failed(format!("{err:#}")),
        (_, Err(err), _) => Outcome::Failed(format!("cleanup: {err:#}")),
        (_, _, Err(err)) => Outcome::Failed(format!("restoring the demo topology: {err:#}")),
    };
    let outcome = match daemon {
        Some(daemon) => daemon.mark(outcome),
        None => outcome,
    };
    ScenarioResult {
        workers: details,
        timings,
        ..ScenarioResult::new("scenario4-rebind", outcome, round(started.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use super::objects::{
        chart_values, clique_daemon_nodes, clique_object_name, helm_args, nodes_cfg_entries,
        split_clique_objects,
    };
    use super::*;
    use crate::fabric::Expected;
    use crate::names::KindCluster;
    use crate::plan::ImageRef;
    use serde_json::{json, Value};
    use std::collections::BTreeSet;
    use topology::Layout;

    /// Each of `workers` with its identity under `topology`, as the flow gets them.
    fn expected(topology: &topology::Topology, workers: &[String]) -> Vec<(String, Expected)> {
        workers
            .iter()
            .filter_map(|node| {
                topology.resolve(node).map(|it| {
                    let uuid = it.cluster_uuid.to_string();
                    (
                        node.clone(),
                        Expected {
                            clique: it.clique_id,
                            uuid,
                        },
                    )
                })
            })
            .collect()
    }

    fn planned(trays: u32, racks: u32, cliques: Option<u32>) -> (Layout, DomainPlan) {
        let layout = Layout::new(trays, racks, cliques).expect("layout");
        let cluster = KindCluster::new("nvml-mock-compute-domain", layout.workers()).expect("name");
        let workers = cluster.workers();
        let plan =
            DomainPlan::first_clique_of_each_domain(&expected(&layout.demo(&workers), &workers))
                .expect("plan");
        (layout, plan)
    }

    #[test]
    fn the_default_domain_is_todays_clique0_pair() {
        let (_, plan) = planned(4, 1, None);
        assert_eq!(
            plan.nodes(),
            [
                "nvml-mock-compute-domain-worker",
                "nvml-mock-compute-domain-worker2"
            ]
        );
        assert_eq!(
            plan.cliques().keys().collect::<Vec<_>>(),
            ["00000000-0000-0000-0000-0000000000ab.0"]
        );
        let one = topology::kind_workers("c", 1);
        let one = expected(&Layout::new(1, 1, None).expect("layout").demo(&one), &one);
        let err = DomainPlan::first_clique_of_each_domain(&one)
            .expect_err("one tray")
            .to_string();
        assert!(err.contains("at least two trays"), "{err}");
        let (layout, plan) = planned(4, 1, None);
        let workers = topology::kind_workers("nvml-mock-compute-domain", 4);
        assert_eq!(
            domain_members(&expected(&layout.demo(&workers), &workers)),
            plan.nodes()
        );
        assert!(domain_members(&one).is_empty());
    }

    #[test]
    fn a_full_rack_of_one_clique_is_one_domain_of_18_daemons_in_one_clique() {
        let (_, plan) = planned(18, 1, Some(1));
        assert_eq!(plan.nodes().len(), 18);
        let cliques = plan.cliques();
        assert_eq!(cliques.len(), 1);
        assert_eq!(
            cliques["00000000-0000-0000-0000-0000000000ab.0"].len(),
            18,
            "one ComputeDomainClique of every tray"
        );
        assert_eq!(compute_domain(plan.nodes().len())["spec"]["numNodes"], 18);
        // Two cliques per rack: the domain is clique 0's nine trays.
        let (_, half) = planned(18, 1, None);
        assert_eq!(half.nodes().len(), 9);
    }

    #[test]
    fn two_full_racks_give_one_clique_per_rack_none_mixing() {
        let (layout, plan) = planned(18, 2, Some(1));
        assert_eq!(layout.workers(), 36);
        assert_eq!(plan.nodes().len(), 36);
        let cliques = plan.cliques();
        let names: Vec<&String> = cliques.keys().collect();
        assert_eq!(
            names,
            [
                "00000000-0000-0000-0000-0000000000ab.0",
                "00000000-0000-0000-0000-0000000001ab.0"
            ]
        );
        let rack0 = &cliques["00000000-0000-0000-0000-0000000000ab.0"];
        assert!(rack0.contains("nvml-mock-compute-domain-worker18"));
        assert!(!rack0.contains("nvml-mock-compute-domain-worker19"));
        // The rebind moves each rack to its own clique 99.
        let workers = topology::kind_workers("nvml-mock-compute-domain", 36);
        let rebound = DomainPlan::under_expected(
            &plan.nodes(),
            &expected(&layout.rebind(&workers), &workers),
        )
        .expect("rebind");
        assert_eq!(
            rebound.cliques().keys().collect::<Vec<_>>(),
            [
                "00000000-0000-0000-0000-0000000000ff.99",
                "00000000-0000-0000-0000-0000000001ff.99"
            ]
        );
    }

    #[test]
    fn clique_objects_must_be_one_per_clique_and_not_mix_nodes() {
        let (_, plan) = planned(2, 2, None);
        let expected = plan.cliques();
        let [a, b] = [
            "00000000-0000-0000-0000-0000000000ab.0",
            "00000000-0000-0000-0000-0000000001ab.0",
        ];
        let set = |nodes: &[&str]| {
            nodes
                .iter()
                .map(|it| (*it).to_owned())
                .collect::<BTreeSet<_>>()
        };
        let w1 = "nvml-mock-compute-domain-worker";
        let w3 = "nvml-mock-compute-domain-worker3";
        let objects = |entries: &[(&str, &[&str])]| {
            entries
                .iter()
                .map(|(clique, nodes)| (format!("uid.{clique}"), set(nodes)))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert_eq!(
            split_clique_objects("uid", &expected, &objects(&[(a, &[w1]), (b, &[w3])])),
            Ok(())
        );
        let missing = split_clique_objects("uid", &expected, &objects(&[(a, &[w1])]));
        assert!(missing
            .expect_err("b")
            .contains("not created yet: uid.0000"));
        let mixed = split_clique_objects("uid", &expected, &objects(&[(a, &[w1, w3]), (b, &[])]));
        assert!(mixed
            .expect_err("mixed")
            .contains("mixes in nodes of another clique"));
        let stray = split_clique_objects(
            "uid",
            &expected,
            &objects(&[(a, &[]), (b, &[]), ("u.7", &[])]),
        );
        assert!(stray
            .expect_err("stray")
            .contains("a clique none of the domain's nodes is in"));
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
        assert_eq!(values["image"]["pullPolicy"], "IfNotPresent");
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
    fn workload_pods_are_placed_by_hostname_and_claim_the_channel() {
        let pod = workload_pod("w0", "node-a", "img:1");
        assert!(
            pod["spec"].get("nodeName").is_none(),
            "nodeName skips DRA allocation"
        );
        assert_eq!(
            pod["spec"]["nodeSelector"]["kubernetes.io/hostname"],
            "node-a"
        );
        assert_eq!(
            pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
            CHANNEL_RCT
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["claims"][0]["name"],
            "channel"
        );
        let cd = compute_domain(2);
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
