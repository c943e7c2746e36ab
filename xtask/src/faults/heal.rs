//! The self-healing fault cases (issue 25), on a running demo cluster:
//!
//! - (a) the NRI plugin's pod and a workload pod on one tray deleted together;
//! - (b) every node container restarted (`docker restart`, what a reboot does);
//! - (c) containerd restarted on one tray;
//! - (d) the stager's pod deleted while scenario 3's rebind is applied;
//! - (e) a malformed topology pushed with `helm upgrade`.
//!
//! Each case reports the time from the fault until the scenarios pass again
//! with no user step in between (no `up`, no pod recreated by us), or the
//! clear error it ends in, and the NRI plugin's log lines for the containers
//! it had stopped so that they were created again through it. Scenario 1
//! checks every tray's injection, so it cannot pass while a workload runs
//! unmocked.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, LogParams};
use kube::Client;
use xshell::{cmd, Shell};

use super::run::xtask;
use crate::names::{KindCluster, MOCK_NS, RELEASE, WORKLOAD_NS};
use crate::runner::{Cmd, Runner as _};

/// How long a case may take to heal before it fails.
const HEAL_LIMIT: Duration = Duration::from_secs(300);

/// How long the reboot case may take: the promise to users.
const REBOOT_LIMIT: Duration = Duration::from_secs(120);

/// Pause between two checks of a healing cluster.
const RETRY: Duration = Duration::from_secs(3);

/// The NRI plugin's pods.
const NRI_SELECTOR: &str = "app.kubernetes.io/name=nvml-mock-nri";

/// The stager's pods.
const STAGER_SELECTOR: &str = "app.kubernetes.io/name=nvml-mock";

/// What the plugin logs when it stops a container it missed (session.rs).
const HEAL_LOG_MARKERS: [&str; 3] = [
    "created while the plugin was not registered",
    "the runtime ignored the eviction",
    "stopped by the runtime",
];

/// Runs the five cases; one report line per case.
pub async fn heal_checks(sh: &Shell, cluster: &KindCluster) -> anyhow::Result<Vec<String>> {
    Ok(vec![
        malformed_topology(sh, cluster).await?,
        plugin_and_workload_deleted(cluster).await?,
        containerd_restarted(sh, cluster).await?,
        stager_deleted_during_rebind(cluster).await?,
        every_node_restarted(sh, cluster).await?,
    ])
}

/// Runs `scenarios` until all pass; returns the time since `since`. Fails
/// with the last failure once `limit` has passed.
fn until_passing(
    cluster: &KindCluster,
    scenarios: &[&str],
    since: Instant,
    limit: Duration,
) -> anyhow::Result<Duration> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut failure = None;
        for scenario in scenarios {
            let out = xtask(&[scenario, "--cluster-name", cluster.name()])?;
            if !out.status.success() {
                failure = Some(format!("{scenario}: {}", why_failed(&out.stderr)));
                break;
            }
        }
        let Some(failure) = failure else {
            return Ok(since.elapsed());
        };
        if since.elapsed() >= limit {
            anyhow::bail!(
                "not healed {} s after the fault (attempt {attempt}); last failure:\n      {failure}",
                limit.as_secs()
            );
        }
        eprintln!(
            "    {:.0} s: not passing yet (attempt {attempt}): {failure}",
            since.elapsed().as_secs_f64(),
        );
        std::thread::sleep(RETRY);
    }
}

/// The line of a failed scenario's stderr that says why: its first `ERROR:`
/// line other than the summary's `ERROR: FAILED: …`, else the last line.
fn why_failed(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = stderr.lines().map(str::trim).collect();
    lines
        .iter()
        .find(|it| it.starts_with("ERROR:") && !it.starts_with("ERROR: FAILED:"))
        .or(lines.last())
        .map(|it| (*it).to_owned())
        .unwrap_or_default()
}

/// The pods matching `selector` in `ns` on `node`.
async fn pods_on(
    client: &Client,
    ns: &str,
    selector: &str,
    node: &str,
) -> anyhow::Result<Vec<String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let fields = format!("spec.nodeName={node}");
    let listed = api
        .list(&ListParams::default().labels(selector).fields(&fields))
        .await
        .with_context(|| format!("listing {selector} pods on {node}"))?;
    Ok(listed
        .items
        .iter()
        .filter_map(|pod| pod.metadata.name.clone())
        .collect())
}

/// Deletes every pod matching `selector` in `ns` on `node`, without waiting.
async fn delete_on(client: &Client, ns: &str, selector: &str, node: &str) -> anyhow::Result<()> {
    for pod in pods_on(client, ns, selector, node).await? {
        crate::k8s::delete_pod(client, ns, &pod).await?;
    }
    Ok(())
}

/// The NRI plugin's log lines on `nodes` that name a container it stopped.
async fn heal_lines(client: &Client, nodes: &[String]) -> Vec<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), MOCK_NS);
    let mut lines = Vec::new();
    for node in nodes {
        let Ok(pods) = pods_on(client, MOCK_NS, NRI_SELECTOR, node).await else {
            continue;
        };
        for pod in pods {
            let Ok(log) = api.logs(&pod, &LogParams::default()).await else {
                continue;
            };
            lines.extend(
                log.lines()
                    .filter(|line| HEAL_LOG_MARKERS.iter().any(|it| line.contains(it)))
                    .map(|line| format!("{node}: {}", line.trim())),
            );
        }
    }
    lines
}

/// One report line: the case, the time to healthy, and the plugin's lines.
fn report(case: &str, took: Duration, lines: &[String]) -> String {
    let healed = if lines.is_empty() {
        "the plugin stopped no container (none was created without it)".to_owned()
    } else {
        format!(
            "the plugin stopped {} container(s):\n      {}",
            lines
                .iter()
                .filter(|it| it.contains(HEAL_LOG_MARKERS[0]))
                .count(),
            lines.join("\n      ")
        )
    };
    let line = format!(
        "{case}: every scenario passes again {:.1} s after the fault, no user step; {healed}",
        took.as_secs_f64()
    );
    eprintln!("    ✓ {line}");
    line
}

/// (e) A malformed topology is refused by the chart's schema; the release
/// and the fabric identities stay as they were.
async fn malformed_topology(sh: &Shell, cluster: &KindCluster) -> anyhow::Result<String> {
    eprintln!("\n==> fault (e): a malformed topology pushed with helm upgrade");
    let runner = crate::flow::runner(sh)?;
    let context = cluster.context();
    let revision = || -> anyhow::Result<String> {
        let args = [
            "status",
            RELEASE,
            "--kube-context",
            &context,
            "--namespace",
            MOCK_NS,
        ];
        let out = runner.check(&Cmd::new("helm", &[&args[..], &["-o", "json"]].concat()))?;
        let status: serde_json::Value =
            serde_json::from_str(&out.stdout).context("reading helm status")?;
        Ok(status["version"].to_string())
    };
    let before = revision()?;
    let bad = crate::dirs::scratch_dir(&format!("{}-faults", cluster.name()))?
        .join("malformed-topology.yaml");
    std::fs::write(
        &bad,
        "topology:\n  domains:\n    - clusterUuid: not-a-uuid\n      cliques: eighteen\n",
    )
    .with_context(|| format!("writing {}", bad.display()))?;
    let args =
        crate::plan::helm_topology_args(crate::names::CHART, &context, &bad.to_string_lossy());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = runner.run(&Cmd::new("helm", &args))?;
    anyhow::ensure!(
        !out.ok,
        "helm accepted a malformed topology:\n{}",
        out.stderr
    );
    let lines: Vec<&str> = out.stderr.lines().map(str::trim).collect();
    let at = lines
        .iter()
        .position(|line| line.contains("schema"))
        .with_context(|| {
            format!(
                "helm refused the topology but not by the schema:\n{}",
                out.stderr
            )
        })?;
    let why = lines[at..]
        .iter()
        .take(3)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let after = revision()?;
    anyhow::ensure!(
        before == after,
        "the release moved from revision {before} to {after} although helm refused the values"
    );
    let since = Instant::now();
    until_passing(cluster, &["scenario1"], since, HEAL_LIMIT)
        .context("the cluster lost its topology after a refused helm upgrade")?;
    let line = format!(
        "(e) malformed topology refused by the chart's schema ({why}); release stays at revision \
         {before}, scenario1 passes on the previous topology"
    );
    eprintln!("    ✓ {line}");
    Ok(line)
}

/// (a) The plugin's pod and a workload pod on one tray deleted together.
async fn plugin_and_workload_deleted(cluster: &KindCluster) -> anyhow::Result<String> {
    eprintln!("\n==> fault (a): the NRI plugin's pod and a workload pod deleted together");
    let client = crate::k8s::kind_client(cluster).await?;
    let tray = cluster.workers()[3].clone();
    let since = Instant::now();
    let (plugin, workload) = tokio::join!(
        delete_on(&client, MOCK_NS, NRI_SELECTOR, &tray),
        delete_on(&client, WORKLOAD_NS, crate::names::WORKLOAD_SELECTOR, &tray),
    );
    plugin?;
    workload?;
    eprintln!("    deleted both pods on {tray}; waiting for scenario1 to pass again");
    let took = until_passing(cluster, &["scenario1"], since, HEAL_LIMIT)?;
    let lines = heal_lines(&client, std::slice::from_ref(&tray)).await;
    Ok(report(
        "(a) plugin and workload pods deleted together",
        took,
        &lines,
    ))
}

/// (c) containerd restarted on one tray.
async fn containerd_restarted(sh: &Shell, cluster: &KindCluster) -> anyhow::Result<String> {
    eprintln!("\n==> fault (c): containerd restarted on one tray");
    let tray = cluster.workers()[1].clone();
    let since = Instant::now();
    cmd!(sh, "docker exec {tray} systemctl restart containerd")
        .quiet()
        .run()?;
    eprintln!("    restarted containerd on {tray}; waiting for scenario1 to pass again");
    let took = until_passing(cluster, &["scenario1"], since, HEAL_LIMIT)?;
    let client = crate::k8s::kind_client(cluster).await?;
    let lines = heal_lines(&client, std::slice::from_ref(&tray)).await;
    Ok(report("(c) containerd restarted on one tray", took, &lines))
}

/// (d) The stager's pod deleted while scenario 3's rebind is applied.
async fn stager_deleted_during_rebind(cluster: &KindCluster) -> anyhow::Result<String> {
    eprintln!("\n==> fault (d): the stager's pod deleted during scenario 3's rebind");
    let client = crate::k8s::kind_client(cluster).await?;
    let tray = cluster.workers()[0].clone();
    let exe = std::env::current_exe().context("locating the xtask binary")?;
    let mut child = Command::new(&exe)
        .args(["scenario3", "--cluster-name", cluster.name()])
        .current_dir(crate::project_root())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting scenario3")?;
    let stderr = child.stderr.take().context("scenario3's stderr")?;
    let mut seen = Vec::new();
    let mut since = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.context("reading scenario3's output")?;
        if since.is_none() && line.contains("helm upgrade --reuse-values with the rebind topology")
        {
            since = Some(Instant::now());
            delete_on(&client, MOCK_NS, STAGER_SELECTOR, &tray).await?;
            eprintln!("    deleted the stager's pod on {tray} as the rebind was applied");
        }
        seen.push(line);
    }
    let status = child.wait().context("waiting for scenario3")?;
    let since = since
        .with_context(|| format!("scenario3 never applied the rebind:\n{}", seen.join("\n")))?;
    let during = if status.success() {
        "scenario3 passed through the fault".to_owned()
    } else {
        format!(
            "scenario3 failed during the fault with: {}",
            why_failed(seen.join("\n").as_bytes())
        )
    };
    eprintln!("    {during}");
    let took = until_passing(cluster, &["scenario3", "scenario1"], since, HEAL_LIMIT)?;
    let lines = heal_lines(&client, std::slice::from_ref(&tray)).await;
    Ok(report(
        &format!("(d) stager pod deleted during the rebind ({during})"),
        took,
        &lines,
    ))
}

/// (b) Every node container restarted; scenario 1 passes within
/// [`REBOOT_LIMIT`] with no user step, then `up` reuses the cluster.
async fn every_node_restarted(sh: &Shell, cluster: &KindCluster) -> anyhow::Result<String> {
    eprintln!("\n==> fault (b): every node container restarted (a reboot)");
    let nodes = cluster.nodes();
    let count = nodes.len();
    let since = Instant::now();
    cmd!(sh, "docker restart {nodes...}")
        .quiet()
        .ignore_stdout()
        .run()?;
    eprintln!(
        "    restarted {} node containers in {:.1} s; waiting for scenario1 to pass again",
        count,
        since.elapsed().as_secs_f64()
    );
    let took = until_passing(cluster, &["scenario1"], since, REBOOT_LIMIT)?;
    let client = crate::k8s::kind_client(cluster).await?;
    let lines = heal_lines(&client, &cluster.workers()).await;
    let line = report("(b) every node container restarted", took, &lines);
    eprintln!("    cargo xtask up on the restarted cluster");
    let out = xtask(&["up", "--cluster-name", cluster.name()])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        anyhow::bail!("cargo xtask up refused the restarted cluster:\n{stderr}");
    }
    let reused = stderr
        .lines()
        .find(|it| it.contains("reusing cluster"))
        .with_context(|| format!("cargo xtask up did not reuse the restarted cluster:\n{stderr}"))?
        .trim()
        .to_owned();
    eprintln!("    ✓ {reused}");
    Ok(format!("{line}; then `cargo xtask up`: {reused}"))
}
