//! Fault checks against a running demo cluster (issue 7), run by
//! `cargo xtask faults` and by CI after the demo:
//!
//! 1. a second concurrent run is refused, naming the holder;
//! 2. an incompatible cluster (one node's containerd NRI socket changed) is
//!    rejected with the fix, and nothing is deleted;
//! 3. a worker node container stopped mid-run (`docker pause`: frozen, so it
//!    keeps its IP and containers) gives a failure naming the node; the node
//!    is resumed and scenario 1 passes again;
//! 4. the self-healing cases of issue 25 ([`heal`]): plugin and workload pods
//!    deleted together, every node restarted, containerd restarted, the
//!    stager deleted during a rebind, a malformed topology;
//! 5. `cargo xtask inject` as a user runs it ([`inject`]).
//!
//! Each check drives the real `cargo xtask` binary as a subprocess, so it
//! exercises exactly what a user runs.

mod heal;
mod inject;
mod run;

use std::time::Duration;

use anyhow::Context as _;
use xshell::{cmd, Shell};

use crate::lock::RunnerLock;
use crate::names::{
    KindCluster, MOCK_NS, NRI_DS, NRI_SOCKET, STAGER_DS, WORKLOAD_DS, WORKLOAD_NS,
    WORKLOAD_SELECTOR,
};
use run::{expect_failure, xtask};

/// Runs every fault check; returns one line per check.
pub async fn fault_checks(sh: &Shell, cluster_name: &str) -> anyhow::Result<Vec<String>> {
    let cluster = crate::cluster::discover(&crate::flow::docker_only(sh), cluster_name)?;
    // The checks pick trays 1 to 4 and rerun `up` with the default layout.
    anyhow::ensure!(
        cluster.worker_count() == topology::Layout::default().workers(),
        "the fault checks run on the default demo cluster (`cargo xtask up --cluster-name {cluster_name}`, \
         {} workers); `{cluster_name}` has {}",
        topology::Layout::default().workers(),
        cluster.worker_count()
    );
    let mut lines = vec![
        concurrent_run(cluster.name())?,
        incompatible_cluster(sh, &cluster)?,
    ];
    lines.extend(stopped_worker(sh, &cluster).await?);
    lines.extend(heal::heal_checks(sh, &cluster).await?);
    lines.push(inject::inject_round_trip(sh, &cluster)?);
    Ok(lines)
}

/// A second run while the lock is held is refused, naming the holder.
fn concurrent_run(name: &str) -> anyhow::Result<String> {
    eprintln!("\n==> fault: a second concurrent run");
    let _held = RunnerLock::acquire(
        &crate::dirs::lock_dir()?,
        name,
        "fault check (holding the lock)",
    )?;
    let out = xtask(&["scenario1", "--cluster-name", name])?;
    let line = expect_failure(
        "concurrent run",
        &out,
        &[
            "another run holds cluster",
            "fault check (holding the lock)",
        ],
    )?;
    eprintln!("    ✓ refused: {line}");
    Ok(format!("concurrent run refused: {line}"))
}

/// A worker whose containerd NRI socket moved is rejected, naming it and the fix.
fn incompatible_cluster(sh: &Shell, cluster: &KindCluster) -> anyhow::Result<String> {
    let name = cluster.name();
    eprintln!("\n==> fault: an incompatible cluster");
    let node = cluster.workers()[3].clone();
    let config = "/etc/containerd/config.toml";
    cmd!(sh, "docker exec {node} cp {config} {config}.cdsim-fault")
        .quiet()
        .run()?;
    let moved = format!("s#{NRI_SOCKET}#/var/run/nri/elsewhere.sock#");
    let broken = cmd!(sh, "docker exec {node} sed -i {moved} {config}")
        .quiet()
        .run();
    let res = match broken {
        Ok(()) => xtask(&["up", "--cluster-name", name]),
        Err(err) => Err(err.into()),
    };
    cmd!(sh, "docker exec {node} mv {config}.cdsim-fault {config}")
        .quiet()
        .run()?;
    let line = expect_failure(
        "incompatible cluster",
        &res?,
        &[
            &format!("{node}: containerd NRI listens on"),
            "--force-recreate",
        ],
    )?;
    eprintln!("    ✓ rejected: {line}");
    Ok(format!("incompatible cluster rejected: {line}"))
}

/// A worker paused mid-run fails scenario 1 naming it; resumed, it passes again.
async fn stopped_worker(sh: &Shell, cluster: &KindCluster) -> anyhow::Result<Vec<String>> {
    let name = cluster.name();
    eprintln!("\n==> fault: a worker stopped mid-run");
    let victim = cluster.workers()[2].clone();
    let child = run::spawn_xtask(&["scenario1", "--cluster-name", name])?;
    cmd!(sh, "docker pause {victim}")
        .quiet()
        .ignore_stdout()
        .run()?;
    let out = child.wait_with_output().context("waiting for scenario1")?;
    let checked = expect_failure("stopped worker", &out, &[&victim]);
    eprintln!("    resuming {victim}");
    cmd!(sh, "docker unpause {victim}")
        .quiet()
        .ignore_stdout()
        .run()?;
    let recovered = recover(cluster).await;
    let line = checked?;
    eprintln!("    ✓ failed naming the node: {line}");
    recovered?;
    Ok(vec![
        format!("stopped worker named: {line}"),
        format!("{victim} resumed and scenario1 passes again"),
    ])
}

async fn recover(cluster: &KindCluster) -> anyhow::Result<()> {
    let client = crate::k8s::kind_client(cluster).await?;
    let limit = Duration::from_secs(300);
    crate::k8s::wait_daemonset(
        &client,
        MOCK_NS,
        STAGER_DS,
        "app.kubernetes.io/name=nvml-mock",
        limit,
    )
    .await?;
    crate::k8s::wait_daemonset(
        &client,
        MOCK_NS,
        NRI_DS,
        "app.kubernetes.io/name=nvml-mock-nri",
        limit,
    )
    .await?;
    crate::k8s::wait_daemonset(&client, WORKLOAD_NS, WORKLOAD_DS, WORKLOAD_SELECTOR, limit).await?;
    let healed = crate::flow::heal_workload(&client, &cluster.workers()).await?;
    if !healed.is_empty() {
        eprintln!("    recreated the workload pod on {}", healed.join(", "));
    }
    // Recovered means scenario 1 passes again.
    let out = xtask(&["scenario1", "--cluster-name", cluster.name()])?;
    if !out.status.success() {
        anyhow::bail!(
            "scenario1 still fails after the restart:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
