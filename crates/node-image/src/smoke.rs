//! The cluster-level smoke check of a kind cluster made from the node image:
//! every node Ready, CoreDNS and the pod network running, and on every node
//! containerd's NRI enabled with its socket at `/var/run/nri/nri.sock`.
//!
//! It looks from inside the nodes (`docker exec`, the node's own kubectl and
//! containerd), so it checks what the node image provides, with no kubeconfig
//! on the host. The JSON and TOML readers are pure and unit-tested.

use std::{
    path::Path,
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, format_err, Context, Result};
use serde_json::Value;
use xshell::{cmd, Shell};

/// The NRI socket every node must expose (node-layout owns it).
pub use node_layout::facts::NRI_SOCKET;

/// How long readiness may still be settling (right after `kind create cluster`).
const SETTLE: Duration = Duration::from_secs(120);

/// Checks the kind cluster `cluster_name` with the `kind` binary (xtask's
/// `tools::ensure_tool(sh, Tool::Kind)`); the error names every failing part.
/// Called by the orchestration (`up`, `ci`) once they wire it in.
pub fn smoke_check(sh: &Shell, kind: &Path, cluster_name: &str) -> Result<()> {
    let nodes_text = cmd!(sh, "{kind} get nodes --name {cluster_name}")
        .read()
        .context("kind get nodes")?;
    let mut nodes: Vec<String> = nodes_text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    nodes.sort();
    if nodes.is_empty() {
        bail!("no kind cluster named {cluster_name}: create it with `kind create cluster --name {cluster_name} --image $(cargo xtask node-image) --config manifests/kind/cluster.yaml`");
    }
    let control_plane = format!("{cluster_name}-control-plane");
    if !nodes.contains(&control_plane) {
        bail!("cluster {cluster_name} has no node {control_plane}: is it a kind cluster?");
    }

    // Node-level facts first: they do not settle.
    let problems = nri_problems(sh, &nodes);
    if !problems.is_empty() {
        bail!(
            "cluster {cluster_name} is not NRI-ready:\n  {}",
            problems.join("\n  ")
        );
    }

    wait_settled(sh, cluster_name, &control_plane, &nodes)
}

/// What keeps each node from NRI: no socket, NRI disabled in containerd's
/// configuration, or a configuration that cannot be read.
fn nri_problems(sh: &Shell, nodes: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    for node in nodes {
        if cmd!(sh, "docker exec {node} test -S {NRI_SOCKET}")
            .quiet()
            .run()
            .is_err()
        {
            problems.push(format!("{node}: no NRI socket at {NRI_SOCKET}"));
        }
        match cmd!(sh, "docker exec {node} containerd config dump")
            .quiet()
            .read()
        {
            Ok(dump) => match nri_enabled(&dump) {
                Ok(true) => (),
                Ok(false) => problems.push(format!("{node}: containerd has NRI disabled")),
                Err(err) => problems.push(format!("{node}: {err:#}")),
            },
            Err(err) => problems.push(format!("{node}: containerd config dump failed: {err}")),
        }
    }
    problems
}

/// Polls the control plane until every node is Ready and CoreDNS and
/// kindnet run, for at most [`SETTLE`].
fn wait_settled(
    sh: &Shell,
    cluster_name: &str,
    control_plane: &str,
    nodes: &[String],
) -> Result<()> {
    let kubectl = |args: &[&str]| -> Result<Value> {
        let out = cmd!(sh, "docker exec {control_plane} kubectl --kubeconfig=/etc/kubernetes/admin.conf {args...} -o json")
            .quiet()
            .read()
            .with_context(|| format!("kubectl {} on {control_plane}", args.join(" ")))?;
        serde_json::from_str(&out).context("kubectl printed invalid JSON")
    };
    let started = Instant::now();
    loop {
        let mut pending = Vec::new();
        let node_list = kubectl(&["get", "nodes"])?;
        let readiness = node_readiness(&node_list)?;
        for node in nodes {
            match readiness.iter().find(|(name, _)| name == node) {
                Some((_, true)) => (),
                Some((_, false)) => pending.push(format!("node {node} is not Ready")),
                None => pending.push(format!("node {node} is not registered")),
            }
        }
        let pods = kubectl(&["get", "pods", "-n", "kube-system"])?;
        for (label, value, want) in [("k8s-app", "kube-dns", 1), ("app", "kindnet", nodes.len())] {
            let (ready, total) = pods_ready(&pods, label, value)?;
            if ready < want || ready < total {
                pending.push(format!(
                    "{value}: {ready}/{total} pods ready, want at least {want}"
                ));
            }
        }
        if pending.is_empty() {
            eprintln!(
                "==> cluster {cluster_name}: {} nodes Ready, CoreDNS and kindnet running, NRI at {NRI_SOCKET} on every node",
                nodes.len()
            );
            return Ok(());
        }
        if started.elapsed() >= SETTLE {
            bail!(
                "cluster {cluster_name} did not settle within {}s:\n  {}",
                SETTLE.as_secs(),
                pending.join("\n  ")
            );
        }
        eprintln!("    waiting: {}", pending.join("; "));
        thread::sleep(Duration::from_secs(5));
    }
}

/// Whether NetworkPolicy is enforced on every node of `cluster_name`:
/// kube-network-policies keeps its nftables table `inet kube-network-policies`
/// only while its rules load, which needs the kernel's `nft_queue`.
/// Kernels without it (and without loadable modules) leave policy unenforced.
/// `kind` as for [`smoke_check`]. Called by the orchestration (scenario
/// reports) once they wire it in.
pub fn network_policy_enforced(sh: &Shell, kind: &Path, cluster_name: &str) -> Result<bool> {
    let nodes = cmd!(sh, "{kind} get nodes --name {cluster_name}")
        .read()
        .context("kind get nodes")?;
    let nodes: Vec<&str> = nodes
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if nodes.is_empty() {
        bail!("no kind cluster named {cluster_name}");
    }
    for node in nodes {
        let table = cmd!(
            sh,
            "docker exec {node} nft list table inet kube-network-policies"
        )
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run();
        if table.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether `containerd config dump` shows the NRI plugin enabled.
pub fn nri_enabled(dump: &str) -> Result<bool> {
    let table: toml::Table = dump
        .parse()
        .map_err(|err| format_err!("containerd config dump is not TOML: {err}"))?;
    let Some(nri) = table
        .get("plugins")
        .and_then(|plugins| plugins.get("io.containerd.nri.v1.nri"))
    else {
        bail!("containerd config dump has no io.containerd.nri.v1.nri plugin section");
    };
    let disabled = nri
        .get("disable")
        .and_then(toml::Value::as_bool)
        .unwrap_or(false);
    let socket = nri
        .get("socket_path")
        .and_then(toml::Value::as_str)
        .unwrap_or(NRI_SOCKET);
    if socket != NRI_SOCKET {
        bail!("containerd's NRI socket is {socket}, not {NRI_SOCKET}");
    }
    Ok(!disabled)
}

/// (name, Ready) for every node of a `kubectl get nodes -o json` list.
pub fn node_readiness(list: &Value) -> Result<Vec<(String, bool)>> {
    let items = list["items"]
        .as_array()
        .ok_or_else(|| format_err!("the node list has no items"))?;
    items
        .iter()
        .map(|node| {
            let name = node["metadata"]["name"]
                .as_str()
                .ok_or_else(|| format_err!("a node has no name"))?;
            Ok((name.to_owned(), condition_true(node, "Ready")))
        })
        .collect()
}

/// (ready, total) pods whose `label` is `value` in a pod list.
pub fn pods_ready(list: &Value, label: &str, value: &str) -> Result<(usize, usize)> {
    let items = list["items"]
        .as_array()
        .ok_or_else(|| format_err!("the pod list has no items"))?;
    let matching: Vec<&Value> = items
        .iter()
        .filter(|pod| pod["metadata"]["labels"][label] == value)
        .collect();
    let ready = matching
        .iter()
        .filter(|pod| pod["status"]["phase"] == "Running" && condition_true(pod, "Ready"))
        .count();
    Ok((ready, matching.len()))
}

fn condition_true(object: &Value, kind: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real check against a running cluster: `CDSIM_SMOKE_CLUSTER=<name>
    /// cargo test -p node-image smoke_check_on_a_real_cluster -- --ignored`,
    /// with kind on `PATH` (`cargo xtask doctor` installs the pinned one).
    #[test]
    #[ignore = "needs a running kind cluster from the node image (set CDSIM_SMOKE_CLUSTER)"]
    fn smoke_check_on_a_real_cluster() {
        let Ok(cluster) = std::env::var("CDSIM_SMOKE_CLUSTER") else {
            panic!("set CDSIM_SMOKE_CLUSTER to the name of a kind cluster made from `cargo xtask node-image`");
        };
        let Some(kind) = xtask_support::tools::find_program("kind") else {
            panic!("kind is not on PATH: put the pinned one there (`cargo xtask doctor` installs it into <cache>/bin)");
        };
        let sh = Shell::new().expect("shell");
        smoke_check(&sh, &kind, &cluster).expect("the cluster passes the smoke check");
        let enforced = network_policy_enforced(&sh, &kind, &cluster).expect("the nodes answer");
        eprintln!("NetworkPolicy enforced: {enforced}");
    }

    #[test]
    fn nri_section_is_read_from_the_dump() {
        let on = "version = 3\n[plugins]\n[plugins.\"io.containerd.nri.v1.nri\"]\ndisable = false\nsocket_path = \"/var/run/nri/nri.sock\"\n";
        assert!(nri_enabled(on).expect("valid"));
        let off = on.replace("disable = false", "disable = true");
        assert!(!nri_enabled(&off).expect("valid"));
        let moved = on.replace("/var/run/nri/nri.sock", "/run/other.sock");
        assert!(nri_enabled(&moved)
            .expect_err("wrong socket")
            .to_string()
            .contains("/run/other.sock"));
        let none = "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\"]\nenable_cdi = true\n";
        assert!(nri_enabled(none)
            .expect_err("absent")
            .to_string()
            .contains("no io.containerd.nri.v1.nri"));
    }

    #[test]
    fn node_and_pod_readiness_follow_conditions() {
        let nodes: Value = serde_json::json!({"items": [
            {"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            {"metadata": {"name": "b"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        ]});
        assert_eq!(
            node_readiness(&nodes).expect("valid"),
            [("a".to_owned(), true), ("b".to_owned(), false)]
        );
        let pods: Value = serde_json::json!({"items": [
            {"metadata": {"labels": {"k8s-app": "kube-dns"}}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
            {"metadata": {"labels": {"k8s-app": "kube-dns"}}, "status": {"phase": "Pending"}},
            {"metadata": {"labels": {"app": "kindnet"}}, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        ]});
        assert_eq!(
            pods_ready(&pods, "k8s-app", "kube-dns").expect("valid"),
            (1, 2)
        );
        assert_eq!(pods_ready(&pods, "app", "kindnet").expect("valid"), (1, 1));
        assert!(node_readiness(&serde_json::json!({})).is_err());
    }
}
