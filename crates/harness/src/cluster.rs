//! The kind cluster through docker and kind: probe, create, reuse or reject,
//! node preflight, used device majors, and image loading that skips nodes
//! which already hold the image.

use std::path::Path;

use crate::names::{KindCluster, KIND_CONFIG};
use crate::plan::{self, ClusterPlan, NodeProblem, Started};
use crate::restart;
use crate::runner::{Cmd, Runner};
use xtask_support::image_ref::containerd_name;
use xtask_support::node_images::{NodeImages, Role};

mod online;
pub use online::{classify_online, online_image, online_pin, OnlineImage};
mod cpu_weight;
use cpu_weight::prioritise_control_plane;

/// The image the control-plane node container runs.
pub fn node_image_in_use<R: Runner>(runner: &R, cluster: &KindCluster) -> Option<String> {
    runner
        .run(&Cmd::new(
            "docker",
            &[
                "inspect",
                "-f",
                "{{.Config.Image}}",
                &cluster.control_plane(),
            ],
        ))
        .ok()
        .filter(|out| out.ok)
        .map(|out| out.stdout.trim().to_owned())
}

/// The node containers of kind cluster `name` (any state), by kind's label.
pub fn node_containers<R: Runner>(runner: &R, name: &str) -> anyhow::Result<Vec<String>> {
    let filter = format!("label={KIND_CLUSTER_LABEL}={name}");
    let out = runner.check(&Cmd::new(
        "docker",
        &["ps", "-a", "--filter", &filter, "--format", "{{.Names}}"],
    ))?;
    Ok(out.stdout.lines().map(|it| it.trim().to_owned()).collect())
}

/// The label kind puts on every node container of a cluster.
pub const KIND_CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";

/// How many of `containers` are workers of cluster `name` (`<name>-worker`,
/// `<name>-worker2`, …).
pub fn count_workers(name: &str, containers: &[String]) -> usize {
    let prefix = format!("{name}-worker");
    containers
        .iter()
        .filter(|it| {
            it.strip_prefix(&prefix)
                .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()))
        })
        .count()
}

/// The kind cluster `name` as it exists: as many workers as it has node
/// containers for (none when it does not exist; the preflight then says so).
pub fn discover<R: Runner>(runner: &R, name: &str) -> anyhow::Result<KindCluster> {
    let probe = KindCluster::new(name, 0)?;
    let containers = node_containers(runner, probe.name())?;
    Ok(probe.with_workers(count_workers(name, &containers)))
}

/// Whether kind knows a cluster of this name.
pub fn exists<R: Runner>(runner: &R, cluster: &KindCluster) -> anyhow::Result<bool> {
    let out = runner.check(&Cmd::new("kind", &["get", "clusters"]))?;
    Ok(out.stdout.lines().any(|line| line.trim() == cluster.name()))
}

/// One node: running (from `wanted_image` when given), with NRI on the
/// expected socket; says whether it was started again since its creation.
pub fn probe_node<R: Runner>(
    runner: &R,
    node: &str,
    wanted_image: Option<&str>,
) -> Result<Started, NodeProblem> {
    let started = match runner.run(&Cmd::new(
        "docker",
        &["inspect", "-f", plan::CONTAINER_TEMPLATE, node],
    )) {
        Ok(out) if out.ok => plan::check_container(&out.stdout, wanted_image)?,
        _ => return Err(NodeProblem::Missing),
    };
    probe_nri(runner, node).map(|()| started)
}

/// The node's containerd config has NRI on the expected socket.
fn probe_nri<R: Runner>(runner: &R, node: &str) -> Result<(), NodeProblem> {
    // The effective config first (defaults included), the file as a fallback.
    match runner.run(&Cmd::new(
        "docker",
        &["exec", node, "containerd", "config", "dump"],
    )) {
        Ok(out) if out.ok => return plan::check_nri(&out.stdout),
        _ => {}
    }
    match runner.run(&Cmd::new(
        "docker",
        &["exec", node, "cat", "/etc/containerd/config.toml"],
    )) {
        Ok(out) if out.ok => plan::check_nri(&out.stdout),
        Ok(out) => Err(NodeProblem::Unparseable(format!(
            "cannot read /etc/containerd/config.toml: {}",
            out.stderr.trim()
        ))),
        Err(err) => Err(NodeProblem::Unparseable(format!("{err:#}"))),
    }
}

/// Every node of the cluster, probed (against its role's image in `wanted`
/// when given).
pub fn probe_nodes<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    wanted: Option<&NodeImages>,
) -> Vec<(String, Result<Started, NodeProblem>)> {
    let control_plane = cluster.control_plane();
    cluster
        .nodes()
        .into_iter()
        .map(|node| {
            let role = if node == control_plane {
                Role::ControlPlane
            } else {
                Role::Worker
            };
            let image = wanted.map(|it| it.for_role(role));
            let status = probe_node(runner, &node, image);
            (node, status)
        })
        .collect()
}

/// A cluster none of whose node containers exists, and how to create it.
pub fn no_cluster_message(cluster: &KindCluster) -> String {
    format!(
        "there is no kind cluster `{}` (none of its node containers exists): create it with \
         `cargo xtask up --cluster-name {0}` or run the whole demo with `cargo xtask demo --cluster-name {0}`",
        cluster.name()
    )
}

/// Every node's state for `status`; fails, saying how to create it, when the
/// cluster has no node container at all.
pub fn node_states<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
) -> anyhow::Result<Vec<(String, String)>> {
    let probes = probe_nodes(runner, cluster, None);
    if probes
        .iter()
        .all(|(_, it)| matches!(it, Err(NodeProblem::Missing)))
    {
        anyhow::bail!("{}", no_cluster_message(cluster));
    }
    Ok(probes
        .into_iter()
        .map(|(node, status)| {
            let state = match status {
                Ok(Started::Once) => "running, NRI on".to_owned(),
                Ok(Started::Again { started, .. }) => {
                    format!("running, NRI on (started again at {started})")
                }
                Err(problem) => problem.to_string(),
            };
            (node, state)
        })
        .collect())
}

/// Fails naming every node container that is not running.
pub fn preflight<R: Runner>(runner: &R, cluster: &KindCluster) -> anyhow::Result<()> {
    let mut down = Vec::new();
    for node in cluster.nodes() {
        match runner.run(&Cmd::new(
            "docker",
            &["inspect", "-f", "{{.State.Status}}", &node],
        )) {
            Ok(out) if out.ok && out.stdout.trim() == "running" => {}
            Ok(out) if out.ok => {
                let state = out.stdout.trim();
                let fix = match state {
                    "paused" => "docker unpause",
                    _ => "docker start",
                };
                down.push(format!(
                    "node {node} is {state} (start it with `{fix} {node}`)"
                ));
            }
            _ => down.push(format!("node {node} does not exist (run `cargo xtask up`)")),
        }
    }
    if down.is_empty() {
        return Ok(());
    }
    if down
        .iter()
        .all(|it| it.ends_with("does not exist (run `cargo xtask up`)"))
    {
        anyhow::bail!("{}", no_cluster_message(cluster));
    }
    anyhow::bail!(
        "cluster `{}` is not healthy: {}",
        cluster.name(),
        down.join("; ")
    )
}

/// Creates (from `node_image`), reuses, recreates or rejects the cluster;
/// returns what it did. An existing cluster is reused only when its nodes run
/// `must_run` (the image the user asked for), when given.
///
/// `config` is the kind config to create it from (generated for the cluster's
/// worker count); an existing cluster with another worker count is refused
/// (recreated with `force_recreate`).
pub fn ensure<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    config: &str,
    force_recreate: bool,
    node_image: Option<&NodeImages>,
    must_run: Option<&NodeImages>,
) -> anyhow::Result<ClusterPlan> {
    let create = Create {
        config,
        node_image,
        must_run,
    };
    ensure_settling(runner, cluster, force_recreate, &create, restart::SETTLE)
}

/// How a cluster is created, and what its nodes must run to be reused.
struct Create<'a> {
    config: &'a str,
    node_image: Option<&'a NodeImages>,
    must_run: Option<&'a NodeImages>,
}

/// [`ensure`], waiting up to `restart_settle` for a restarted cluster.
fn ensure_settling<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    force_recreate: bool,
    create: &Create<'_>,
    restart_settle: std::time::Duration,
) -> anyhow::Result<ClusterPlan> {
    let present = exists(runner, cluster)?;
    let mut probes = Vec::new();
    if present && !force_recreate {
        let found = count_workers(cluster.name(), &node_containers(runner, cluster.name())?);
        if found != cluster.worker_count() {
            anyhow::bail!(
                "{}",
                plan::rejection(
                    cluster.name(),
                    "has another number of workers",
                    &[format!(
                        "it has {found} worker(s), this run asks for {} (--trays × --racks): \
                         pass the flags it was created with, or recreate it",
                        cluster.worker_count()
                    )]
                )
            );
        }
        probes = probe_nodes(runner, cluster, create.must_run);
    }
    let decision = plan::plan_cluster(cluster.name(), present, force_recreate, &probes);
    match &decision {
        ClusterPlan::ReuseIfHealthy(restarted) => {
            eprintln!(
                "    {} started again since the cluster was created: checking its health \
                 (API, nodes Ready, addresses, NRI socket; up to {} s)",
                restarted.join(", "),
                restart_settle.as_secs()
            );
            let problems = restart::settle(runner, cluster, restart_settle);
            if !problems.is_empty() {
                let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
                anyhow::bail!(
                    "{}",
                    plan::rejection(
                        cluster.name(),
                        "is not healthy after its nodes restarted",
                        &lines
                    )
                );
            }
            eprintln!(
                "    reusing cluster {} (restarted, healthy: API answers, every node Ready at its address, NRI listening)",
                cluster.name()
            );
            runner.check(&kind_on(cluster, &["export", "kubeconfig"]))?;
        }
        ClusterPlan::Reuse => {
            eprintln!("    reusing cluster {} (NRI on every node)", cluster.name());
            runner.check(&kind_on(cluster, &["export", "kubeconfig"]))?;
        }
        ClusterPlan::Reject(message) => anyhow::bail!("{message}"),
        ClusterPlan::Recreate => {
            eprintln!("    deleting cluster {} (--force-recreate)", cluster.name());
            runner.check(&kind_on(cluster, &["delete", "cluster"]))?;
            create_cluster(runner, cluster, create)?;
        }
        ClusterPlan::Create => create_cluster(runner, cluster, create)?,
    }
    Ok(decision)
}

/// `kind <args> --name <cluster>`.
fn kind_on(cluster: &KindCluster, args: &[&str]) -> Cmd {
    let mut all = args.to_vec();
    all.extend(["--name", cluster.name()]);
    Cmd::new("kind", &all)
}

fn create_cluster<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    create: &Create<'_>,
) -> anyhow::Result<()> {
    let node_image = create.node_image;
    eprintln!(
        "    creating cluster {} (1 control plane, {} workers)",
        cluster.name(),
        cluster.worker_count()
    );
    let wait = create_wait(cluster.worker_count());
    let config = config_for(cluster, create.config, node_image)?;
    let mut args = vec![
        "create",
        "cluster",
        "--name",
        cluster.name(),
        "--config",
        &config,
        "--wait",
        &wait,
    ];
    if let Some(images) = node_image.filter(|it| it.is_uniform()) {
        args.push("--image");
        args.push(&images.control_plane);
    }
    let out = runner.run(&Cmd::new("kind", &args).streamed())?;
    if !out.ok {
        anyhow::bail!(
            "`kind create cluster --name {}` failed: {}\n{}",
            cluster.name(),
            out.headline(),
            out.error_text()
        );
    }
    let problems: Vec<String> = probe_nodes(runner, cluster, node_image)
        .into_iter()
        .filter_map(|(node, status)| status.err().map(|problem| format!("{node}: {problem}")))
        .collect();
    if !problems.is_empty() {
        anyhow::bail!(
            "the new cluster's nodes are not as created: {} (does {KIND_CONFIG}, the template of {}, still enable NRI?)",
            problems.join("; "),
            create.config
        );
    }
    prioritise_control_plane(runner, cluster);
    Ok(())
}

/// kind's `--wait` for a cluster of `workers` workers: 180 s for the first
/// four, 10 s more per worker after (nodes join in parallel but share the CPUs).
pub fn create_wait(workers: usize) -> String {
    format!("{}s", 180 + 10 * workers.saturating_sub(4))
}

/// The kind config to create the cluster from: `config`, or, when the roles
/// run different images, a copy with each node's `image:`
/// ([`crate::kind_images`]) in the cluster's scratch directory.
fn config_for(
    cluster: &KindCluster,
    config: &str,
    images: Option<&NodeImages>,
) -> anyhow::Result<String> {
    let Some(images) = images.filter(|it| !it.is_uniform()) else {
        return Ok(config.to_owned());
    };
    let source = xtask_support::project_root().join(config);
    let text = std::fs::read_to_string(&source)
        .map_err(|err| anyhow::format_err!("reading {}: {err}", source.display()))?;
    let with_images = crate::kind_images::with_node_images(&text, images)?;
    let dir = xtask_support::dirs::scratch_dir(cluster.name())?;
    let path = dir.join("kind-config-images.yaml");
    std::fs::write(&path, with_images)
        .map_err(|err| anyhow::format_err!("writing {}: {err}", path.display()))?;
    eprintln!(
        "    control plane from {}, workers from {} ({})",
        images.control_plane,
        images.worker,
        path.display()
    );
    Ok(path.to_string_lossy().into_owned())
}

/// Every node's `/proc/devices`, in node order.
pub fn proc_devices<R: Runner>(runner: &R, cluster: &KindCluster) -> anyhow::Result<Vec<String>> {
    let mut texts = Vec::new();
    for node in cluster.nodes() {
        let out = runner
            .check(&Cmd::new(
                "docker",
                &["exec", &node, "cat", "/proc/devices"],
            ))
            .map_err(|err| anyhow::format_err!("reading /proc/devices on node {node}: {err:#}"))?;
        texts.push(out.stdout);
    }
    Ok(texts)
}

/// [`load_image`], saying on stderr which nodes took `reference` (or that
/// every node had it).
pub fn load_image_said<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    archive: &Path,
    reference: &str,
) -> anyhow::Result<()> {
    let loaded = load_image(runner, cluster, archive, reference)?;
    if loaded.is_empty() {
        eprintln!("    {reference}: already on every node");
    } else {
        eprintln!("    {reference}: loaded into {}", loaded.join(", "));
    }
    Ok(())
}

/// Loads an image archive into the nodes that lack `reference`; returns the
/// nodes it was loaded into (empty: every node had it).
pub fn load_image<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    archive: &Path,
    reference: &str,
) -> anyhow::Result<Vec<String>> {
    let wanted = containerd_name(reference);
    let mut missing = Vec::new();
    for node in cluster.nodes() {
        // A node whose images cannot be listed gets the image loaded again.
        let listed = runner.run(&Cmd::new(
            "docker",
            &["exec", &node, "ctr", "-n", "k8s.io", "images", "ls", "-q"],
        ));
        let present =
            listed.is_ok_and(|out| out.ok && out.stdout.lines().any(|line| line.trim() == wanted));
        if !present {
            missing.push(node);
        }
    }
    if missing.is_empty() {
        return Ok(missing);
    }
    let nodes = missing.join(",");
    let archive = archive.to_string_lossy();
    runner.check(&Cmd::new(
        "kind",
        &[
            "load",
            "image-archive",
            &archive,
            "--name",
            cluster.name(),
            "--nodes",
            &nodes,
        ],
    ))?;
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::FakeRunner;
    use std::time::Duration;
    use test_support::assert_contains;

    const NRI_ON: &str = "version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = false\n  socket_path = '/var/run/nri/nri.sock'\n";

    /// `docker ps` of the four-worker cluster `c`'s node containers.
    const FOUR: &str = "c-control-plane\nc-worker\nc-worker2\nc-worker3\nc-worker4\n";

    const NO_IMAGE: Create<'static> = Create {
        config: KIND_CONFIG,
        node_image: None,
        must_run: None,
    };

    fn cluster() -> KindCluster {
        KindCluster::new("c", 4).expect("valid")
    }

    /// Scripts `kind get clusters` listing `clusters` and `c`'s four-worker node containers.
    fn expect_existing(fake: &FakeRunner, clusters: &str) {
        fake.expect("kind get clusters", true, clusters).expect(
            "docker ps -a --filter label=io.x-k8s.kind.cluster=c",
            true,
            FOUR,
        );
    }

    fn expect_node(fake: &FakeRunner, node: &str, config: &str) {
        expect_node_started(fake, node, "2026-12-02T21:00:02Z", config);
    }

    /// Scripts a running node last started at `started`, its containerd config `config`.
    fn expect_node_started(fake: &FakeRunner, node: &str, started: &str, config: &str) {
        fake.expect(
            &format!("docker inspect -f {} {node}", plan::CONTAINER_TEMPLATE),
            true,
            &format!("running|cdsim/kind-node:v1|2026-12-02T21:00:00Z|{started}\n"),
        )
        .expect(
            &format!("docker exec {node} containerd config dump"),
            true,
            config,
        );
    }

    /// Scripts a restarted cluster: every node started again, NRI on, then the
    /// health probe, with `worker_ready` for the first worker.
    fn restarted_cluster(fake: &FakeRunner, worker_ready: &str) {
        expect_existing(fake, "c\n");
        for node in cluster().nodes() {
            expect_node_started(fake, &node, "2026-12-03T08:00:00Z", NRI_ON);
        }
        let mut items = Vec::new();
        for (idx, node) in cluster().nodes().iter().enumerate() {
            let ip = format!("172.18.0.{}", idx + 2);
            fake.expect("docker inspect -f {{range", true, &ip).expect(
                &format!("docker exec {node} test -S"),
                true,
                "",
            );
            let ready = if node == "c-worker" {
                worker_ready
            } else {
                "True"
            };
            items.push(serde_json::json!({
                "metadata": {"name": node},
                "status": {"conditions": [{"type": "Ready", "status": ready}],
                           "addresses": [{"type": "InternalIP", "address": ip}]}
            }));
        }
        fake.expect(
            "docker exec c-control-plane kubectl",
            true,
            &serde_json::json!({ "items": items }).to_string(),
        );
    }

    #[test]
    fn a_restarted_healthy_cluster_is_reused() {
        let fake = FakeRunner::default();
        restarted_cluster(&fake, "True");
        fake.expect("kind export kubeconfig --name c", true, "");
        let done =
            ensure_settling(&fake, &cluster(), false, &NO_IMAGE, Duration::ZERO).expect("reused");
        assert_eq!(
            done,
            ClusterPlan::ReuseIfHealthy(cluster().nodes()),
            "every node was started again"
        );
        assert_eq!(fake.remaining(), 0);
    }

    #[test]
    fn a_restarted_unhealthy_cluster_is_refused_naming_what_is_wrong_and_the_fix() {
        let fake = FakeRunner::default();
        restarted_cluster(&fake, "False");
        let err = ensure_settling(&fake, &cluster(), false, &NO_IMAGE, Duration::ZERO)
            .expect_err("refused")
            .to_string();
        assert_contains(&err, "is not healthy after its nodes restarted");
        assert_contains(&err, "c-worker: not Ready");
        assert_contains(&err, "--force-recreate");
        assert_eq!(fake.remaining(), 0, "nothing deleted or created");
    }

    #[test]
    fn a_compatible_cluster_is_reused() {
        let fake = FakeRunner::default();
        expect_existing(&fake, "other\nc\n");
        for node in cluster().nodes() {
            expect_node(&fake, &node, NRI_ON);
        }
        fake.expect("kind export kubeconfig --name c", true, "");
        assert_eq!(
            ensure(&fake, &cluster(), KIND_CONFIG, false, None, None).expect("reused"),
            ClusterPlan::Reuse
        );
        assert_eq!(fake.remaining(), 0);
    }

    #[test]
    fn a_cluster_of_another_node_image_than_asked_is_rejected_not_reused() {
        let fake = FakeRunner::default();
        expect_existing(&fake, "c\n");
        for _ in cluster().nodes() {
            // The image is checked first: no containerd probe follows.
            fake.expect(
                "docker inspect -f",
                true,
                "running|cdsim/kind-node:v1|2026-12-02T21:00:00Z|2026-12-02T21:00:02Z\n",
            );
        }
        let err = ensure(
            &fake,
            &cluster(),
            KIND_CONFIG,
            false,
            Some(&NodeImages::uniform("cdsim/kind-node:v2")),
            Some(&NodeImages::uniform("cdsim/kind-node:v2")),
        )
        .expect_err("another image")
        .to_string();
        assert_contains(&err, "c-worker: node container runs cdsim/kind-node:v1, not the node image this run uses (cdsim/kind-node:v2)");
        assert_contains(&err, "--force-recreate");
        assert!(
            !fake
                .seen()
                .iter()
                .any(|it| it.starts_with("kind delete") || it.starts_with("kind create")),
            "left alone: {:?}",
            fake.seen()
        );
    }

    #[test]
    fn a_cluster_of_another_worker_count_is_refused_saying_both_counts() {
        let fake = FakeRunner::default();
        expect_existing(&fake, "c\n");
        let big = cluster().with_workers(18);
        let err = ensure(&fake, &big, "/s/kind.yaml", false, None, None)
            .expect_err("4 workers, 18 asked")
            .to_string();
        assert_contains(
            &err,
            "it has 4 worker(s), this run asks for 18 (--trays × --racks)",
        );
        assert_contains(&err, "--force-recreate");
        assert_eq!(fake.remaining(), 0, "nothing deleted or created");
        // Asked to recreate, it is created from the generated config, waiting longer.
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "c\n")
            .expect("kind delete cluster --name c", true, "")
            .expect(
                "kind create cluster --name c --config /s/kind.yaml --wait 320s",
                true,
                "",
            );
        for node in big.nodes() {
            expect_node(&fake, &node, NRI_ON);
        }
        let done = ensure(&fake, &big, "/s/kind.yaml", true, None, None).expect("recreated");
        assert_eq!(done, ClusterPlan::Recreate);
        assert_eq!(fake.remaining(), 0);
    }

    #[test]
    fn an_existing_cluster_is_discovered_with_its_workers() {
        let fake = FakeRunner::default();
        fake.expect(
            "docker ps -a --filter label=io.x-k8s.kind.cluster=c --format {{.Names}}",
            true,
            "c-worker3\nc-control-plane\nc-worker\nc-worker2\nc-workerx\n",
        );
        let found = discover(&fake, "c").expect("discovered");
        assert_eq!(found.worker_count(), 3);
        assert_eq!(found.workers(), ["c-worker", "c-worker2", "c-worker3"]);
        fake.expect("docker ps", true, "");
        assert_eq!(discover(&fake, "c").expect("none").worker_count(), 0);
        assert!(discover(&fake, "C").is_err(), "an invalid name");
    }

    #[test]
    fn an_incompatible_cluster_is_rejected_with_the_fix_and_left_alone() {
        let fake = FakeRunner::default();
        expect_existing(&fake, "c\n");
        for node in cluster().nodes() {
            let config = if node == "c-worker3" {
                "version = 3\n"
            } else {
                NRI_ON
            };
            expect_node(&fake, &node, config);
        }
        let err = ensure(&fake, &cluster(), KIND_CONFIG, false, None, None)
            .expect_err("rejected")
            .to_string();
        assert_contains(&err, "c-worker3: containerd has no");
        assert_contains(&err, "--force-recreate");
        assert!(
            !fake.seen().iter().any(|it| it.starts_with("kind delete")),
            "nothing deleted"
        );
    }

    #[test]
    fn config_dump_falls_back_to_the_file() {
        let fake = FakeRunner::default();
        fake.expect("docker inspect", true, "running|i|||\n")
            .expect("docker exec n containerd config dump", false, "")
            .expect(
                "docker exec n cat /etc/containerd/config.toml",
                true,
                NRI_ON,
            );
        assert_eq!(probe_node(&fake, "n", None), Ok(Started::Once));
    }

    /// Scripts `kind create` of `c` from one node image, its nodes probed, and the control
    /// plane's CPU weight, which docker grants when `weight_ok`.
    fn expect_created(fake: &FakeRunner, weight_ok: bool) {
        fake.expect("kind create cluster --name c --config manifests/kind/cluster.yaml --wait 180s --image cdsim/kind-node:v1", true, "");
        for node in cluster().nodes() {
            expect_node(fake, &node, NRI_ON);
        }
        fake.expect(
            "docker update --cpu-shares 4096 c-control-plane",
            weight_ok,
            "",
        );
    }

    /// `ensure` on `c` with one node image.
    fn ensure_uniform(fake: &FakeRunner, force_recreate: bool) -> anyhow::Result<ClusterPlan> {
        ensure(
            fake,
            &cluster(),
            KIND_CONFIG,
            force_recreate,
            Some(&NodeImages::uniform("cdsim/kind-node:v1")),
            None,
        )
    }

    #[test]
    fn force_recreate_deletes_then_creates_with_the_node_image() {
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "c\n").expect(
            "kind delete cluster --name c",
            true,
            "",
        );
        expect_created(&fake, true);
        let done = ensure_uniform(&fake, true).expect("recreated");
        assert_eq!(done, ClusterPlan::Recreate);
        assert_eq!(fake.remaining(), 0);
    }

    #[test]
    fn a_docker_refusing_the_weight_leaves_the_new_cluster_usable() {
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "");
        expect_created(&fake, false);
        let done = ensure_uniform(&fake, false).expect("created, the weight refused");
        assert_eq!(done, ClusterPlan::Create);
        assert_eq!(fake.remaining(), 0);
    }

    #[test]
    fn a_pair_of_node_images_goes_into_the_config_and_each_node_is_checked_by_its_role() {
        let cluster = KindCluster::new("cdsim-unit-pair", 4).expect("valid");
        let pair = NodeImages {
            control_plane: "cdsim/kind-node:v1-cp".into(),
            worker: "cdsim/kind-node:v1-w-worker".into(),
        };
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "").expect(
            "kind create cluster --name cdsim-unit-pair --config /",
            true,
            "",
        );
        for node in cluster.nodes() {
            let image = if node == cluster.control_plane() {
                &pair.control_plane
            } else {
                &pair.worker
            };
            fake.expect(
                &format!("docker inspect -f {} {node}", plan::CONTAINER_TEMPLATE),
                true,
                &format!("running|{image}|2026-12-02T21:00:00Z|2026-12-02T21:00:02Z\n"),
            )
            .expect(
                &format!("docker exec {node} containerd config dump"),
                true,
                NRI_ON,
            );
        }
        let done = ensure(
            &fake,
            &cluster,
            KIND_CONFIG,
            false,
            Some(&pair),
            Some(&pair),
        )
        .expect("created");
        assert_eq!(done, ClusterPlan::Create);
        assert_eq!(fake.remaining(), 0);
        let create = &fake.seen()[1];
        assert!(
            !create.contains("--image"),
            "kind's --image would override the pair: {create}"
        );
        let path = create
            .split_whitespace()
            .skip_while(|it| *it != "--config")
            .nth(1)
            .expect("a config");
        let config = std::fs::read_to_string(path).expect("written");
        assert_contains(&config, "image: cdsim/kind-node:v1-cp");
        assert_eq!(
            config.matches("image: cdsim/kind-node:v1-w-worker").count(),
            4
        );
        // The scratch directory is the real cache's: leave nothing behind.
        let _ = std::fs::remove_dir_all(Path::new(path).parent().expect("a directory"));
    }

    #[test]
    fn a_failed_kind_create_stops_with_kinds_own_message() {
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "").expect(
            "kind create cluster --name c",
            false,
            "",
        );
        let err = ensure(
            &fake,
            &cluster(),
            KIND_CONFIG,
            false,
            Some(&NodeImages::uniform("no/such:image")),
            None,
        )
        .expect_err("kind failed")
        .to_string();
        assert!(
            err.contains("kind create cluster --name c: failed"),
            "kind's stderr: {err}"
        );
        assert!(!err.contains("not as created"), "{err}");
        assert_eq!(fake.remaining(), 0, "no node is probed after the failure");
        assert_eq!(fake.seen().len(), 2);
    }

    /// The error `check` gives when no node container of `c` exists.
    fn on_a_missing_cluster<T: std::fmt::Debug>(
        check: impl FnOnce(&FakeRunner) -> anyhow::Result<T>,
    ) -> String {
        let fake = FakeRunner::default();
        for _ in cluster().nodes() {
            fake.expect("docker inspect", false, "");
        }
        check(&fake).expect_err("missing").to_string()
    }

    #[test]
    fn status_of_a_missing_cluster_says_how_to_create_it() {
        let err = on_a_missing_cluster(|fake| node_states(fake, &cluster()));
        assert_contains(&err, "there is no kind cluster `c`");
        assert_contains(&err, "cargo xtask up --cluster-name c");
        let fake = FakeRunner::default();
        for node in cluster().nodes() {
            if node == "c-worker2" {
                fake.expect("docker inspect", false, "")
            } else {
                expect_node(&fake, &node, NRI_ON);
                &fake
            };
        }
        let states = node_states(&fake, &cluster()).expect("present");
        assert_eq!(states.len(), cluster().nodes().len());
        assert!(
            states
                .iter()
                .any(|(node, state)| node == "c-worker2" && state.contains("missing")),
            "{states:?}"
        );
    }

    const PIN: &str = "kindest/node:v1.34.3@sha256:08497ee19eace7b4b5348db5c6a1591d7752b164530a36f855cb0f2bdcbadd48";

    #[test]
    fn the_online_image_is_the_pin_or_a_named_stand_in() {
        assert_eq!(
            classify_online(PIN, None),
            OnlineImage::Pinned {
                reference: PIN.to_owned(),
                present: false
            }
        );
        let real = "sha256:aaa kindest/node@sha256:08497ee19eace7b4b5348db5c6a1591d7752b164530a36f855cb0f2bdcbadd48\n";
        let pinned = classify_online(PIN, Some(real));
        assert_eq!(
            pinned,
            OnlineImage::Pinned {
                reference: PIN.to_owned(),
                present: true
            }
        );
        assert_eq!(pinned.kind_image(), PIN);
        let stand_in = classify_online(PIN, Some("sha256:bbb \n"));
        assert_eq!(
            stand_in.kind_image(),
            "kindest/node:v1.34.3",
            "kind must not pull"
        );
        let note = stand_in.note();
        assert_contains(
            &note,
            "LOCAL STAND-IN for the pinned kindest/node:v1.34.3@sha256:08497ee1",
        );
        assert_contains(&note, "sha256:bbb");
    }

    #[test]
    fn the_repository_pins_an_online_image_of_the_offline_kubernetes() {
        let versions = xtask_support::tools::read_versions().expect("versions.toml");
        let pin = online_pin(&versions).expect("pinned");
        let offline = versions["node"]["kubernetes"]
            .as_str()
            .expect("kubernetes pin");
        let tag = pin
            .split_once('@')
            .expect("digest")
            .0
            .rsplit_once(':')
            .expect("tag")
            .1;
        assert_eq!(
            tag, offline,
            "{pin}: the online path must run the offline node image's Kubernetes (minor and patch)"
        );
        let bad: toml::Table = "[online]\nnode_image = \"kindest/node:v1.34.3\""
            .parse()
            .expect("toml");
        assert!(online_pin(&bad)
            .expect_err("no digest")
            .to_string()
            .contains("sha256"));
    }

    #[test]
    fn a_scenario_on_a_missing_cluster_says_how_to_create_it() {
        let err = on_a_missing_cluster(|fake| preflight(fake, &cluster()));
        assert_contains(&err, "there is no kind cluster `c`");
        assert_contains(&err, "cargo xtask demo --cluster-name c");
    }

    #[test]
    fn a_stopped_worker_is_named_by_the_preflight() {
        let fake = FakeRunner::default();
        for node in cluster().nodes() {
            let state = if node == "c-worker2" {
                "exited\n"
            } else {
                "running\n"
            };
            fake.expect("docker inspect", true, state);
        }
        let err = preflight(&fake, &cluster()).expect_err("down").to_string();
        assert_contains(
            &err,
            "node c-worker2 is exited (start it with `docker start c-worker2`)",
        );
    }

    #[test]
    fn majors_merge_every_node() {
        let fake = FakeRunner::default();
        for (idx, _) in cluster().nodes().iter().enumerate() {
            fake.expect(
                "docker exec",
                true,
                &format!("Character devices:\n{} x\n\nBlock devices:\n", 240 + idx),
            );
        }
        let texts = proc_devices(&fake, &cluster()).expect("read");
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let majors = plan::free_majors(&texts).expect("free");
        assert_eq!((majors.channel.get(), majors.caps.get()), (245, 246));
    }

    #[test]
    fn images_load_only_where_missing() {
        let fake = FakeRunner::default();
        for node in cluster().nodes() {
            let listed = if node == "c-worker4" {
                ""
            } else {
                "docker.io/library/nvml-mock:abc\n"
            };
            fake.expect(
                &format!("docker exec {node} ctr -n k8s.io images ls -q"),
                true,
                listed,
            );
        }
        fake.expect(
            "kind load image-archive /a.tar --name c --nodes c-worker4",
            true,
            "",
        );
        let loaded =
            load_image(&fake, &cluster(), Path::new("/a.tar"), "nvml-mock:abc").expect("loaded");
        assert_eq!(loaded, ["c-worker4"]);

        let fake = FakeRunner::default();
        for _ in cluster().nodes() {
            fake.expect("docker exec", true, "docker.io/library/nvml-mock:abc\n");
        }
        assert!(
            load_image(&fake, &cluster(), Path::new("/a.tar"), "nvml-mock:abc")
                .expect("none")
                .is_empty()
        );
        assert_eq!(fake.remaining(), 0, "no kind load when every node has it");
    }
}
