//! CI step "e2e through a registry": the demo cluster treated as a cluster
//! that is not kind. A real OCI registry (distribution v3, go-installed from
//! the module proxy) runs on this machine at the kind network's gateway
//! address; the kind nodes' containerd is told to trust it
//! (`/etc/containerd/certs.d`, the only `docker exec` here, and it is test
//! setup, not the product); then, through the context alone:
//!
//! - `up --kube-context … --registry …` pushes, probes, installs, and the
//!   nodes pull both images from the registry (the pull events say so);
//! - `scenario1` and `scenario3 --kube-context …` pass;
//! - `scenario4 --kube-context … --registry …` pushes the DRA driver's image
//!   (built from source) there, and scenario 4 and its rebind pass, the IMEX
//!   part SKIPPED (no `nvidia-imex` staged), the nodes' reads made through
//!   NVIDIA's kubelet plugin pods;
//! - `scenario5 --kube-context … --registry …` pushes the device plugin's,
//!   NFD's and the DRA driver's images (built from source) there too, every
//!   row passes, the two DRA rows included (the Xids injected through the
//!   API), and the install row lists the nodes' pulls of both images;
//! - a registry the nodes cannot reach (`127.0.0.1`, the node itself) and a
//!   node whose NRI socket is gone each fail within 60 s, naming the node;
//! - and `up --offline` puts the kind images back for the later steps.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use xshell::{cmd, Shell};

use crate::names::{KindCluster, DEFAULT_CLUSTER, NRI_SOCKET};
use crate::tools::{ensure_tool, Tool};

/// The repository prefix the step pushes under.
const PREFIX: &str = "cdsim-ci";

/// A registry process, stopped on drop.
pub(super) struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `registry serve` on every address at `port`, storing under `dir`.
pub(super) fn start_registry(binary: &Path, port: u16, dir: &Path) -> Result<Server> {
    std::fs::create_dir_all(dir.join("storage"))?;
    let config = dir.join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 0.0.0.0:{port}\n",
            dir.join("storage").display()
        ),
    )?;
    let log = std::fs::File::create(dir.join("registry.log"))?;
    // A child process kept for the step's length: xshell runs commands to
    // completion, so this one goes through std::process.
    let child = Command::new(binary)
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let server = Server { child };
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "the registry did not listen on port {port} within 30 s; see {}",
            dir.join("registry.log").display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(server)
}

pub(super) fn free_port() -> Result<u16> {
    Ok(TcpListener::bind(("0.0.0.0", 0))?.local_addr()?.port())
}

/// The IPv4 gateway of the kind Docker network: this machine as the nodes see it.
pub(super) fn kind_gateway(sh: &Shell) -> Result<String> {
    let out = cmd!(
        sh,
        "docker network inspect kind -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}'"
    )
    .read()?;
    out.split_whitespace()
        .find(|it| it.parse::<std::net::Ipv4Addr>().is_ok())
        .map(str::to_owned)
        .with_context(|| format!("the kind network has no IPv4 gateway ({out:?})"))
}

/// `/etc/containerd/certs.d/<host>/hosts.toml` for a plain-HTTP registry.
fn hosts_toml(host: &str) -> String {
    format!(
        "server = \"http://{host}\"\n\n[host.\"http://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    )
}

/// Tells every node's containerd to pull from `host` over plain HTTP.
fn trust_on_nodes(sh: &Shell, cluster: &KindCluster, host: &str) -> Result<()> {
    let dir = format!("/etc/containerd/certs.d/{host}");
    for node in cluster.nodes() {
        cmd!(sh, "docker exec {node} mkdir -p {dir}").run()?;
        let mut child = Command::new("docker")
            .args(["exec", "-i", &node, "tee", &format!("{dir}/hosts.toml")])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()?;
        child
            .stdin
            .take()
            .context("docker exec stdin")?
            .write_all(hosts_toml(host).as_bytes())?;
        anyhow::ensure!(
            child.wait()?.success(),
            "writing {dir}/hosts.toml on {node}"
        );
    }
    Ok(())
}

/// Runs `cargo xtask <args>`, its log streamed as it comes; returns
/// (success, log, seconds).
fn xtask(sh: &Shell, args: &[&str]) -> Result<(bool, String, f64)> {
    use std::io::{BufRead as _, BufReader};
    let started = Instant::now();
    eprintln!("$ cargo xtask {}", args.join(" "));
    // Streamed and kept both, which xshell's read/output cannot do.
    let mut child = Command::new("cargo")
        .arg("xtask")
        .args(args)
        .current_dir(sh.current_dir())
        .stderr(Stdio::piped())
        .spawn()
        .context("running cargo xtask")?;
    let mut log = String::new();
    for line in BufReader::new(child.stderr.take().context("stderr")?).lines() {
        let line = line?;
        eprintln!("{line}");
        log.push_str(&line);
        log.push('\n');
    }
    let status = child.wait()?;
    Ok((status.success(), log, started.elapsed().as_secs_f64()))
}

/// `cargo xtask up --kube-context CONTEXT --registry REGISTRY --plain-http`,
/// its report at `report`.
fn up_via(sh: &Shell, context: &str, registry: &str, report: &str) -> Result<(bool, String, f64)> {
    xtask(
        sh,
        &[
            "up",
            "--kube-context",
            context,
            "--registry",
            registry,
            "--plain-http",
            "--report",
            report,
        ],
    )
}

/// The seconds of step `name` in a JSON report.
fn step_seconds(sh: &Shell, report: &str, name: &str) -> Result<f64> {
    let doc = super::read_report(sh, report)?;
    doc["steps"]
        .as_array()
        .and_then(|it| it.iter().find(|s| s["name"] == name))
        .and_then(|s| s["seconds"].as_f64())
        .with_context(|| format!("{report} has no step {name}"))
}

/// The step.
pub fn run(sh: &Shell) -> Result<()> {
    let binary = ensure_tool(sh, Tool::Registry)?;
    let cluster = crate::cluster::discover(&crate::flow::docker_only(sh), DEFAULT_CLUSTER)?;
    let context = cluster.context();
    let gateway = kind_gateway(sh)?;
    let port = free_port()?;
    let dir = PathBuf::from("target/ci/registry");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let _server = start_registry(&binary, port, &std::path::absolute(&dir)?)?;
    let host = format!("{gateway}:{port}");
    eprintln!(
        "    registry {} at http://{host} (storage {})",
        binary.display(),
        dir.display()
    );
    trust_on_nodes(sh, &cluster, &host)?;

    reachable(sh, &context, &host)?;
    for scenario in ["scenario1", "scenario3"] {
        let (ok, _, _) = xtask(sh, &[scenario, "--kube-context", &context])?;
        anyhow::ensure!(
            ok,
            "`cargo xtask {scenario} --kube-context {context}` failed"
        );
    }
    scenario_via(sh, "scenario4", (&context, &host), scenario4_unmet)?;
    scenario_via(sh, "scenario5", (&context, &host), scenario5_unpulled)?;
    unreachable(sh, &context, port, &cluster)?;
    without_nri(sh, &context, &host, &cluster)?;
    // The registry stops with this step: point the release and the workload
    // back at the images kind loads, as the later steps expect.
    let (ok, _, _) = xtask(sh, &["up", "--offline"])?;
    anyhow::ensure!(
        ok,
        "`cargo xtask up --offline` after the registry step failed"
    );
    Ok(())
}

/// `up` through the registry: the report must show the push, the probe and
/// the nodes' pulls of both images, and no kind step.
fn reachable(sh: &Shell, context: &str, host: &str) -> Result<()> {
    let report = "target/ci/registry-report.json";
    let registry = format!("{host}/{PREFIX}");
    let (ok, _, _) = up_via(sh, context, &registry, report)?;
    super::print_report(sh, report);
    anyhow::ensure!(
        ok,
        "`cargo xtask up --kube-context {context} --registry {registry}` failed"
    );
    let doc = super::read_report(sh, report)?;
    let steps: Vec<&str> = doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|it| it["name"].as_str())
        .collect();
    for absent in ["cluster", "load images", "device majors"] {
        anyhow::ensure!(
            !steps.contains(&absent),
            "{report}: a kind step `{absent}` ran: {steps:?}"
        );
    }
    let pulls = doc["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|it| it.as_str())
        .find(|it| it.starts_with("pull events from"))
        .with_context(|| format!("{report} has no pull events note"))?;
    for image in ["nvml-mock", "nvml-mock-workload"] {
        let pulled = format!("Successfully pulled image \"{registry}/{image}:");
        anyhow::ensure!(
            pulls.contains(&pulled),
            "{report}: no node pulled {registry}/{image} from the registry (`{pulled}`): {pulls}"
        );
    }
    Ok(())
}

/// `cargo xtask SCENARIO --kube-context … --registry …` (scenario 4 or 5,
/// NVIDIA's software built from source and pushed there): it must pass, and
/// `unmet` must find nothing missing in its report.
fn scenario_via(
    sh: &Shell,
    scenario: &str,
    (context, host): (&str, &str),
    unmet: fn(&serde_json::Value, &str) -> Vec<String>,
) -> Result<()> {
    let report = format!("target/ci/registry-{scenario}-report.json");
    let registry = format!("{host}/{PREFIX}");
    let (ok, _, seconds) = xtask(
        sh,
        &[
            scenario,
            "--kube-context",
            context,
            "--registry",
            &registry,
            "--plain-http",
            "--report",
            &report,
        ],
    )?;
    super::print_report(sh, &report);
    anyhow::ensure!(
        ok,
        "`cargo xtask {scenario} --kube-context {context} --registry {registry}` failed"
    );
    let doc = super::read_report(sh, &report)?;
    let missing = unmet(&doc, &registry);
    anyhow::ensure!(
        missing.is_empty(),
        "{report}: {scenario} through the registry: {}",
        missing.join("; ")
    );
    eprintln!("    {scenario} through the registry: passed in {seconds:.1} s");
    Ok(())
}

/// What a scenario 4 report through `registry` lacks: `scenario4` and
/// `scenario4-rebind` passed, `scenario4-imex` SKIPPED (nothing staged it),
/// the DRA driver's image pulled from `registry`.
fn scenario4_unmet(doc: &serde_json::Value, registry: &str) -> Vec<String> {
    let rows = doc["scenarios"].as_array().cloned().unwrap_or_default();
    let outcome = |name: &str| {
        rows.iter()
            .find(|it| it["name"] == name)
            .and_then(|it| it["outcome"].as_str())
            .unwrap_or("missing")
            .to_owned()
    };
    let mut missing = Vec::new();
    for (row, want) in [
        ("scenario4", "passed"),
        ("scenario4-rebind", "passed"),
        ("scenario4-imex", "skipped"),
    ] {
        let got = outcome(row);
        if got != want {
            missing.push(format!("{row} is {got}, not {want}"));
        }
    }
    let named = serde_json::to_string(&doc["scenarios"]).unwrap_or_default();
    let image = format!("{registry}/{}", harness::scenario4::DRA_IMAGE);
    if !named.contains(&image) {
        missing.push(format!("no row names the DRA image {image}"));
    }
    missing
}

/// What a scenario 5 report lacks: a row of [`crate::scenario5::ROWS`] not
/// passed (the DRA rows included), or an image of the GPU stack no node
/// pulled from `registry`.
fn scenario5_unpulled(doc: &serde_json::Value, registry: &str) -> Vec<String> {
    let rows = doc["scenarios"].as_array().cloned().unwrap_or_default();
    let row = |name: &str| rows.iter().find(|it| it["name"] == name);
    let mut missing: Vec<String> = crate::scenario5::ROWS
        .iter()
        .filter(|name| row(name).and_then(|it| it["outcome"].as_str()) != Some("passed"))
        .map(|name| format!("{name} not passed"))
        .collect();
    let details: Vec<&str> = row(crate::scenario5::ROWS[0])
        .and_then(|it| it["workers"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|it| it["detail"].as_str())
        .collect();
    for image in [
        harness::gpu_stack::DEVICE_PLUGIN_IMAGE,
        harness::gpu_stack::NFD_IMAGE,
    ] {
        let pulled =
            format!("pulled from the registry: Successfully pulled image \"{registry}/{image}:");
        if !details.iter().any(|it| it.starts_with(&pulled)) {
            missing.push(format!("no `{pulled}`"));
        }
    }
    missing
}

/// A registry the host reaches but the nodes do not (127.0.0.1 is each node
/// itself): refused within 60 s, naming a node and the fix; nothing installed.
fn unreachable(sh: &Shell, context: &str, port: u16, cluster: &KindCluster) -> Result<()> {
    let report = "target/ci/registry-unreachable-report.json";
    let registry = format!("127.0.0.1:{port}/{PREFIX}");
    let (ok, log, seconds) = up_via(sh, context, &registry, report)?;
    anyhow::ensure!(
        !ok,
        "`up --registry {registry}` succeeded though no node can reach it"
    );
    let probe = step_seconds(sh, report, "node facts")?;
    let named = cluster
        .nodes()
        .into_iter()
        .find(|node| log.contains(&format!("node {node} cannot pull")));
    anyhow::ensure!(
        named.is_some() && log.contains("certs.d"),
        "`up --registry {registry}` did not name a node that cannot pull, with the fix"
    );
    anyhow::ensure!(
        probe < 60.0,
        "the unreachable registry was reported after {probe:.1} s (limit 60 s)"
    );
    eprintln!("    unreachable registry: refused in {probe:.1} s by the probe ({seconds:.1} s in all), naming {}", named.unwrap_or_default());
    Ok(())
}

/// A node whose NRI socket is gone (moved aside for the check, then put back):
/// refused within 60 s, naming that node and the containerd setting.
fn without_nri(sh: &Shell, context: &str, host: &str, cluster: &KindCluster) -> Result<()> {
    let node = cluster.workers().last().cloned().context("no worker")?;
    let aside = format!("{NRI_SOCKET}.cdsim-ci-aside");
    cmd!(sh, "docker exec {node} mv {NRI_SOCKET} {aside}").run()?;
    let report = "target/ci/registry-no-nri-report.json";
    let registry = format!("{host}/{PREFIX}");
    let result = up_via(sh, context, &registry, report);
    let restored = cmd!(sh, "docker exec {node} mv {aside} {NRI_SOCKET}").run();
    let (ok, log, _) = result?;
    restored.context("putting the NRI socket back")?;
    anyhow::ensure!(!ok, "`up` succeeded though {node} has no NRI socket");
    let probe = step_seconds(sh, report, "node facts")?;
    let wanted = format!("containerd NRI is not enabled on {node} (NRI socket absent)");
    anyhow::ensure!(
        log.contains(&wanted) && log.contains("io.containerd.nri.v1.nri"),
        "`up` did not say `{wanted}` with the containerd setting"
    );
    anyhow::ensure!(
        probe < 60.0,
        "the missing NRI socket was reported after {probe:.1} s (limit 60 s)"
    );
    eprintln!("    no NRI on {node}: refused in {probe:.1} s");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_trust_the_registry_over_plain_http() {
        let toml: toml::Table = hosts_toml("172.18.0.1:5000").parse().expect("toml");
        assert_eq!(toml["server"].as_str(), Some("http://172.18.0.1:5000"));
        let host = &toml["host"]["http://172.18.0.1:5000"];
        assert_eq!(host["capabilities"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn scenario5_through_the_registry_needs_every_row_passed_and_both_pulls() {
        let registry = "172.18.0.1:5000/cdsim-ci";
        let pulled = |image: &str| {
            serde_json::json!({"node": "w1", "pod": "p", "passed": true,
                "detail": format!("pulled from the registry: Successfully pulled image \"{registry}/{image}:abc\" in 1s")})
        };
        let mut rows: Vec<serde_json::Value> = crate::scenario5::ROWS
            .iter()
            .map(|name| serde_json::json!({"name": name, "outcome": "passed", "workers": []}))
            .collect();
        rows[0]["workers"] = serde_json::json!([
            pulled(harness::gpu_stack::DEVICE_PLUGIN_IMAGE),
            pulled(harness::gpu_stack::NFD_IMAGE)
        ]);
        let doc = serde_json::json!({ "scenarios": rows });
        assert!(scenario5_unpulled(&doc, registry).is_empty());
        let mut dra_skipped = doc.clone();
        let dra = crate::scenario5::ROWS
            .iter()
            .position(|it| *it == harness::scenario5::dra_flow::DRA_ROWS[0])
            .expect("the DRA row is a scenario 5 row");
        dra_skipped["scenarios"][dra]["outcome"] = "skipped".into();
        assert_eq!(
            scenario5_unpulled(&dra_skipped, registry),
            [format!(
                "{} not passed",
                harness::scenario5::dra_flow::DRA_ROWS[0]
            )],
            "a DRA row skipped through the registry is not passed"
        );
        let mut failed = doc.clone();
        failed["scenarios"][3]["outcome"] = "failed".into();
        failed["scenarios"][0]["workers"] =
            serde_json::json!([pulled(harness::gpu_stack::NFD_IMAGE)]);
        let missing = scenario5_unpulled(&failed, registry);
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert!(
            missing[0].starts_with(crate::scenario5::ROWS[3]),
            "{missing:?}"
        );
        assert!(
            missing[1].contains(harness::gpu_stack::DEVICE_PLUGIN_IMAGE),
            "{missing:?}"
        );
    }
}
