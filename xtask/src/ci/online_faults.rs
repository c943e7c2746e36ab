//! The online path's faults, as the non-root user on the cluster its quick
//! start left, each through a `CDSIM_MIRRORS` with one mirror made
//! unreachable (a port nothing listens on):
//!
//! - the device plugin's Helm repository: `scenario5` fails naming the chart's
//!   URL and the fix, and leaves no release;
//! - `nvcr.io`, with the device plugin's image removed from every worker:
//!   `scenario5` fails within 60 s naming the image, a node, the kubelet's
//!   message and the fix, and the release is uninstalled.

use anyhow::{Context as _, Result};
use xshell::{cmd, Shell};

use super::mirror::{rules, Mirror};
use super::through_registry::free_port;
use crate::gpu_source::Released;

/// How long a failed pull may take to fail the scenario (the bound).
const PULL_LIMIT: f64 = 60.0;

/// Runs `cargo xtask ARGS…` as the user with an environment; (passed, stderr).
pub type AsUser<'a> = &'a dyn Fn(&[String], &[&str]) -> Result<(bool, String)>;

/// The non-root user, as the step running its commands knows it.
pub struct User<'a> {
    /// Runs `cargo xtask` as the user.
    pub xtask: AsUser<'a>,
    /// The user's environment with `CDSIM_MIRRORS` set to the given rules.
    pub env: &'a dyn Fn(&str) -> Vec<String>,
    /// The user's kubeconfig, where its demo put the cluster's context.
    pub kubeconfig: std::path::PathBuf,
}

/// Both faults.
pub fn run(sh: &Shell, mirror: &Mirror, user: &User<'_>) -> Result<()> {
    let released = Released::read()?;
    let dead = format!("{}:{}", mirror.gateway, free_port()?);
    chart_unreachable(
        sh,
        user,
        &rules(&released, &mirror.registry, &format!("http://{dead}")),
        &dead,
    )?;
    image_unreachable(
        sh,
        user,
        &released,
        &rules(&released, &dead, &mirror.files),
        &dead,
    )?;
    Ok(())
}

/// The scenario5 row of a report.
fn row(sh: &Shell, report: &str) -> Result<serde_json::Value> {
    let doc = super::read_report(sh, report)?;
    doc["scenarios"]
        .as_array()
        .and_then(|it| it.iter().find(|row| row["name"] == "scenario5"))
        .cloned()
        .with_context(|| format!("{report} has no scenario5 row"))
}

/// No device plugin release left on the cluster.
fn no_release(sh: &Shell, user: &User<'_>) -> Result<()> {
    let cluster = crate::names::KindCluster::new(crate::names::DEFAULT_CLUSTER, 0)?;
    let context = cluster.context();
    let ns = crate::scenario5::api::DP_NS;
    let release = crate::scenario5::api::DP_RELEASE;
    let helm = crate::tools::ensure_tool(sh, crate::tools::Tool::Helm)?;
    // The user's demo made the cluster: its context is in the user's kubeconfig.
    let kubeconfig = &user.kubeconfig;
    let listed = cmd!(
        sh,
        "{helm} list --namespace {ns} --kube-context {context} --kubeconfig {kubeconfig} --short"
    )
    .read()?;
    anyhow::ensure!(
        !listed.lines().any(|it| it.trim() == release),
        "the release {release} was left behind in {ns}"
    );
    Ok(())
}

fn chart_unreachable(sh: &Shell, user: &User<'_>, rules: &str, dead: &str) -> Result<()> {
    eprintln!("\n==> as the user: scenario5 with the device plugin's Helm repository unreachable ({dead})");
    let report = "/tmp/cdsim-ci-chart-unreachable.json";
    let (ok, log) = (user.xtask)(&(user.env)(rules), &["scenario5", "--report", report])?;
    anyhow::ensure!(
        !ok,
        "scenario5 passed though its chart's repository is unreachable"
    );
    let wanted =
        format!("cannot fetch NVIDIA's chart nvidia-device-plugin 0.19.3 from http://{dead}/");
    anyhow::ensure!(
        log.contains(&wanted) && log.contains("CDSIM_MIRRORS") && log.contains("--offline"),
        "scenario5 did not say `{wanted}…` with the fix"
    );
    let _ = row(sh, report)?;
    no_release(sh, user)?;
    eprintln!("    an unreachable chart URL: named with the fix, no release left");
    Ok(())
}

fn image_unreachable(
    sh: &Shell,
    user: &User<'_>,
    released: &Released,
    rules: &str,
    dead: &str,
) -> Result<()> {
    let image = released.device_plugin.image.to_string();
    eprintln!("\n==> as the user: scenario5 with {image} on no node and the registries' mirror unreachable ({dead})");
    let cluster = crate::names::KindCluster::new(crate::names::DEFAULT_CLUSTER, 0)?;
    let cluster = crate::cluster::discover(&crate::flow::docker_only(sh), cluster.name())?;
    for node in cluster.workers() {
        // Absent already is fine: the point is that no node has it.
        let _ = cmd!(sh, "docker exec {node} crictl rmi {image}")
            .quiet()
            .ignore_stderr()
            .run();
    }
    let report = "/tmp/cdsim-ci-image-unreachable.json";
    let (ok, log) = (user.xtask)(&(user.env)(rules), &["scenario5", "--report", report])?;
    anyhow::ensure!(!ok, "scenario5 passed though no node can pull {image}");
    let row = row(sh, report)?;
    let reason = row["reason"].as_str().unwrap_or_default().to_owned();
    let seconds = row["seconds"].as_f64().unwrap_or(f64::MAX);
    let named = cluster
        .workers()
        .into_iter()
        .find(|node| log.contains(&format!("image {image} cannot be pulled on node {node}")));
    anyhow::ensure!(
        named.is_some() && log.contains("the kubelet says:") && log.contains("--registry") && log.contains("was uninstalled"),
        "scenario5 did not name the image, a node, the kubelet's message and the fix, and the uninstall ({reason})"
    );
    anyhow::ensure!(
        seconds < PULL_LIMIT,
        "the unpullable image failed scenario5's install after {seconds:.1} s (limit {PULL_LIMIT} s)"
    );
    no_release(sh, user)?;
    eprintln!(
        "    an unreachable image: failed in {seconds:.1} s naming {}, the release uninstalled",
        named.unwrap_or_default()
    );
    Ok(())
}
