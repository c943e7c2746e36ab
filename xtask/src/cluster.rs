//! The kind cluster through docker and kind: probe, create, reuse or reject,
//! node preflight, used device majors, and image loading that skips nodes
//! which already hold the image.

use std::collections::BTreeSet;
use std::path::Path;

use crate::names::{KindCluster, KIND_CONFIG};
use crate::plan::{self, ClusterPlan, NodeProblem};
use crate::runner::{Cmd, Runner};

/// Whether kind knows a cluster of this name.
pub fn exists<R: Runner>(runner: &R, cluster: &KindCluster) -> anyhow::Result<bool> {
    let out = runner.check(&Cmd::new("kind", &["get", "clusters"]))?;
    Ok(out.stdout.lines().any(|line| line.trim() == cluster.name()))
}

/// One node: running, with NRI on the expected socket.
pub fn probe_node<R: Runner>(runner: &R, node: &str) -> Result<(), NodeProblem> {
    let state = match runner.run(&Cmd::new(
        "docker",
        &["inspect", "-f", "{{.State.Status}}", node],
    )) {
        Ok(out) if out.ok => out.stdout.trim().to_owned(),
        _ => return Err(NodeProblem::Missing),
    };
    if state != "running" {
        return Err(NodeProblem::NotRunning(state));
    }
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

/// Every node of the cluster, probed.
pub fn probe_nodes<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
) -> Vec<(String, Result<(), NodeProblem>)> {
    cluster
        .nodes()
        .into_iter()
        .map(|node| {
            let status = probe_node(runner, &node);
            (node, status)
        })
        .collect()
}

/// Every node's state for `status`; fails, saying how to create it, when the
/// cluster has no node container at all.
pub fn node_states<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
) -> anyhow::Result<Vec<(String, String)>> {
    let probes = probe_nodes(runner, cluster);
    if probes
        .iter()
        .all(|(_, it)| matches!(it, Err(NodeProblem::Missing)))
    {
        anyhow::bail!(
            "there is no kind cluster `{}` (none of its node containers exists): create it with \
             `cargo xtask up --cluster-name {0}` or run the whole demo with `cargo xtask demo --cluster-name {0}`",
            cluster.name()
        );
    }
    Ok(probes
        .into_iter()
        .map(|(node, status)| {
            let state = match status {
                Ok(()) => "running, NRI on".to_owned(),
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
    anyhow::bail!(
        "cluster `{}` is not healthy: {}",
        cluster.name(),
        down.join("; ")
    )
}

/// Creates, reuses, recreates or rejects the cluster; returns what it did.
pub fn ensure<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    force_recreate: bool,
    node_image: Option<&str>,
) -> anyhow::Result<ClusterPlan> {
    let present = exists(runner, cluster)?;
    let probes = if present && !force_recreate {
        probe_nodes(runner, cluster)
    } else {
        Vec::new()
    };
    let decision = plan::plan_cluster(cluster.name(), present, force_recreate, &probes);
    match &decision {
        ClusterPlan::Reuse => {
            eprintln!("    reusing cluster {} (NRI on every node)", cluster.name());
            runner.check(&Cmd::new(
                "kind",
                &["export", "kubeconfig", "--name", cluster.name()],
            ))?;
        }
        ClusterPlan::Reject(message) => anyhow::bail!("{message}"),
        ClusterPlan::Recreate => {
            eprintln!("    deleting cluster {} (--force-recreate)", cluster.name());
            runner.check(&Cmd::new(
                "kind",
                &["delete", "cluster", "--name", cluster.name()],
            ))?;
            create(runner, cluster, node_image)?;
        }
        ClusterPlan::Create => create(runner, cluster, node_image)?,
    }
    Ok(decision)
}

fn create<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    node_image: Option<&str>,
) -> anyhow::Result<()> {
    eprintln!("    creating cluster {}", cluster.name());
    let mut args = vec![
        "create",
        "cluster",
        "--name",
        cluster.name(),
        "--config",
        KIND_CONFIG,
        "--wait",
        "180s",
    ];
    if let Some(image) = node_image {
        args.push("--image");
        args.push(image);
    }
    let out = runner.run(&Cmd::new("kind", &args).streamed())?;
    if !out.ok {
        anyhow::bail!(
            "`kind create cluster --name {}` failed:\n{}",
            cluster.name(),
            out.error_text()
        );
    }
    let problems: Vec<String> = probe_nodes(runner, cluster)
        .into_iter()
        .filter_map(|(node, status)| status.err().map(|problem| format!("{node}: {problem}")))
        .collect();
    if !problems.is_empty() {
        anyhow::bail!(
            "the new cluster's nodes lack NRI: {} (does {KIND_CONFIG} still enable it?)",
            problems.join("; ")
        );
    }
    Ok(())
}

/// Every major any node's `/proc/devices` lists.
pub fn used_majors<R: Runner>(runner: &R, cluster: &KindCluster) -> anyhow::Result<BTreeSet<u32>> {
    let mut used = BTreeSet::new();
    for node in cluster.nodes() {
        let out = runner
            .check(&Cmd::new(
                "docker",
                &["exec", &node, "cat", "/proc/devices"],
            ))
            .map_err(|err| anyhow::format_err!("reading /proc/devices on node {node}: {err:#}"))?;
        used.extend(plan::parse_proc_devices(&out.stdout));
    }
    Ok(used)
}

/// How containerd names an image reference (`nvml-mock:x` → `docker.io/library/nvml-mock:x`).
pub fn containerd_name(reference: &str) -> String {
    let first = reference.split('/').next().unwrap_or_default();
    let has_registry = reference.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost");
    match (reference.contains('/'), has_registry) {
        (_, true) => reference.to_owned(),
        (true, false) => format!("docker.io/{reference}"),
        (false, _) => format!("docker.io/library/{reference}"),
    }
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

    const NRI_ON: &str = "version = 3\n[plugins.'io.containerd.nri.v1.nri']\n  disable = false\n  socket_path = '/var/run/nri/nri.sock'\n";

    fn cluster() -> KindCluster {
        KindCluster::new("c").expect("valid")
    }

    fn expect_node(fake: &FakeRunner, node: &str, config: &str) {
        fake.expect(
            &format!("docker inspect -f {{{{.State.Status}}}} {node}"),
            true,
            "running\n",
        )
        .expect(
            &format!("docker exec {node} containerd config dump"),
            true,
            config,
        );
    }

    #[test]
    fn a_compatible_cluster_is_reused() {
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "other\nc\n");
        for node in cluster().nodes() {
            expect_node(&fake, &node, NRI_ON);
        }
        fake.expect("kind export kubeconfig --name c", true, "");
        assert_eq!(
            ensure(&fake, &cluster(), false, None).expect("reused"),
            ClusterPlan::Reuse
        );
        assert_eq!(fake.remaining(), 0);
    }

    #[test]
    fn an_incompatible_cluster_is_rejected_with_the_fix_and_left_alone() {
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "c\n");
        for node in cluster().nodes() {
            let config = if node == "c-worker3" {
                "version = 3\n"
            } else {
                NRI_ON
            };
            expect_node(&fake, &node, config);
        }
        let err = ensure(&fake, &cluster(), false, None)
            .expect_err("rejected")
            .to_string();
        assert!(err.contains("c-worker3: containerd has no"), "{err}");
        assert!(err.contains("--force-recreate"), "{err}");
        assert!(
            !fake.seen().iter().any(|it| it.starts_with("kind delete")),
            "nothing deleted"
        );
    }

    #[test]
    fn config_dump_falls_back_to_the_file() {
        let fake = FakeRunner::default();
        fake.expect("docker inspect", true, "running\n")
            .expect("docker exec n containerd config dump", false, "")
            .expect(
                "docker exec n cat /etc/containerd/config.toml",
                true,
                NRI_ON,
            );
        assert_eq!(probe_node(&fake, "n"), Ok(()));
    }

    #[test]
    fn force_recreate_deletes_then_creates_with_the_node_image() {
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "c\n")
            .expect("kind delete cluster --name c", true, "")
            .expect("kind create cluster --name c --config manifests/kind/cluster.yaml --wait 180s --image cdsim/kind-node:v1", true, "");
        for node in cluster().nodes() {
            expect_node(&fake, &node, NRI_ON);
        }
        let done = ensure(&fake, &cluster(), true, Some("cdsim/kind-node:v1")).expect("recreated");
        assert_eq!(done, ClusterPlan::Recreate);
        assert_eq!(fake.remaining(), 0);
    }

    #[test]
    fn a_failed_kind_create_stops_with_kinds_own_message() {
        let fake = FakeRunner::default();
        fake.expect("kind get clusters", true, "").expect(
            "kind create cluster --name c",
            false,
            "",
        );
        let err = ensure(&fake, &cluster(), false, Some("no/such:image"))
            .expect_err("kind failed")
            .to_string();
        assert!(
            err.contains("kind create cluster --name c: failed"),
            "kind's stderr: {err}"
        );
        assert!(!err.contains("lack NRI"), "{err}");
        assert_eq!(fake.remaining(), 0, "no node is probed after the failure");
        assert_eq!(fake.seen().len(), 2);
    }

    #[test]
    fn status_of_a_missing_cluster_says_how_to_create_it() {
        let fake = FakeRunner::default();
        for _ in cluster().nodes() {
            fake.expect("docker inspect", false, "");
        }
        let err = node_states(&fake, &cluster())
            .expect_err("missing")
            .to_string();
        assert!(err.contains("there is no kind cluster `c`"), "{err}");
        assert!(err.contains("cargo xtask up --cluster-name c"), "{err}");
        let fake = FakeRunner::default();
        for node in cluster().nodes() {
            match node == "c-worker2" {
                true => fake.expect("docker inspect", false, ""),
                false => {
                    expect_node(&fake, &node, NRI_ON);
                    &fake
                }
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
        assert!(
            err.contains("node c-worker2 is exited (start it with `docker start c-worker2`)"),
            "{err}"
        );
    }

    #[test]
    fn majors_merge_every_node() {
        let fake = FakeRunner::default();
        for (idx, _) in cluster().nodes().iter().enumerate() {
            fake.expect(
                "docker exec",
                true,
                &format!("Character devices:\n{} x\n", 240 + idx),
            );
        }
        let used = used_majors(&fake, &cluster()).expect("read");
        assert_eq!(
            plan::choose_majors(&used).expect("free"),
            plan::Majors {
                channel: 245,
                caps: 246
            }
        );
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

    #[test]
    fn containerd_names() {
        assert_eq!(
            containerd_name("nvml-mock:abc"),
            "docker.io/library/nvml-mock:abc"
        );
        assert_eq!(containerd_name("cdsim/x:1"), "docker.io/cdsim/x:1");
        assert_eq!(containerd_name("localhost:5000/x:1"), "localhost:5000/x:1");
        assert_eq!(
            containerd_name("registry.k8s.io/pause:3.10"),
            "registry.k8s.io/pause:3.10"
        );
    }
}
