//! `cargo xtask inject`: an Xid fault or an ECC error injected on one node's GPU (or every fault
//! cleared), by
//! running `nvml-mock-stager inject` in that node's running stager container: on the kind
//! cluster `docker exec <node> crictl exec <container> …` through the [`Runner`] ([`run`]), on
//! any cluster (`--kube-context`) an exec in the node's stager pod through the API
//! ([`run_api`]). The stager writes the control file under the staged root it mounts; the mock
//! library reports it as an event to every consumer waiting on the node (NVIDIA's device
//! plugin marks the GPU unhealthy).
//!
//! Bad input fails with what to do: a node not in the cluster names the cluster's nodes; no
//! running stager says to install the chart; a GPU index beyond the node's profile is the
//! stager's own error, relayed.

use std::time::Duration;

use anyhow::{bail, Context as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt as _};

use crate::{
    names::{KindCluster, MOCK_NS, STAGER_BIN, STAGER_CONTAINER},
    runner::{Cmd, Runner},
};

/// What to do to the node's control file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XidAction {
    /// Inject Xid `xid` on GPU `gpu`.
    Inject {
        /// GPU index on the node.
        gpu: u32,
        /// Xid code.
        xid: u64,
    },
    /// Inject a volatile ECC error on GPU `gpu`.
    Ecc {
        /// GPU index on the node.
        gpu: u32,
        /// Single- or double-bit.
        ecc: node_layout::xid::Ecc,
    },
    /// Remove every injection.
    Clear,
}

impl XidAction {
    /// The stager's `inject` arguments.
    fn args(self) -> Vec<String> {
        match self {
            XidAction::Inject { gpu, xid } => vec![
                "--gpu".to_owned(),
                gpu.to_string(),
                "--xid".to_owned(),
                xid.to_string(),
            ],
            XidAction::Ecc { gpu, ecc } => vec![
                "--gpu".to_owned(),
                gpu.to_string(),
                "--ecc".to_owned(),
                ecc.as_str().to_owned(),
            ],
            XidAction::Clear => vec!["--clear".to_owned()],
        }
    }
}

/// Checks that `node` is one of the cluster's nodes.
pub fn check_node(cluster: &KindCluster, node: &str) -> anyhow::Result<()> {
    let nodes = cluster.nodes();
    if !nodes.iter().any(|known| known == node) {
        bail!(
            "unknown node `{node}`: cluster `{}` has {} (pass one with --node, or --cluster-name for another cluster)",
            cluster.name(),
            nodes.join(", ")
        );
    }
    Ok(())
}

/// Checks that `node` is one of `nodes`, the nodes of context `context`.
pub fn check_listed(nodes: &[String], context: &str, node: &str) -> anyhow::Result<()> {
    if !nodes.iter().any(|known| known == node) {
        bail!(
            "unknown node `{node}`: context `{context}` has {} (pass one with --node, or --kube-context for another cluster)",
            nodes.join(", ")
        );
    }
    Ok(())
}

/// The name of the running stager pod among `pods` (one node's pods), if any.
fn running_stager(pods: &[Pod]) -> Option<String> {
    pods.iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            pod.spec
                .as_ref()
                .is_some_and(|spec| spec.containers.iter().any(|it| it.name == STAGER_CONTAINER))
        })
        .find(|pod| pod.status.as_ref().and_then(|it| it.phase.as_deref()) == Some("Running"))
        .map(|pod| pod.name_any())
}

/// The stager's command line for `action`.
fn stager_argv(action: XidAction) -> Vec<String> {
    let mut argv = vec![STAGER_BIN.to_owned(), "inject".to_owned()];
    argv.extend(action.args());
    argv
}

/// Runs the injection on `node` through the API (any cluster, no docker):
/// `nvml-mock-stager inject` exec'd in the node's running stager pod; returns
/// the stager's report.
pub async fn run_api(client: &Client, node: &str, action: XidAction) -> anyhow::Result<String> {
    exec_api(client, node, &stager_argv(action)).await
}

/// Runs `argv` (the stager binary and its arguments) in `node`'s running stager pod through the
/// API; its stdout.
pub async fn exec_api(client: &Client, node: &str, argv: &[String]) -> anyhow::Result<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), MOCK_NS);
    let pods = api
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .with_context(|| format!("listing the pods of {MOCK_NS} on node {node}"))?;
    let Some(pod) = running_stager(&pods.items) else {
        bail!(
            "no running stager pod on node {node} (namespace {MOCK_NS}): install the chart first (`cargo xtask up`)"
        );
    };
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = crate::k8s::exec_in_namespace(
        client,
        MOCK_NS,
        (&pod, STAGER_CONTAINER),
        &argv,
        Duration::from_secs(60),
    )
    .await
    .with_context(|| format!("running the stager in pod {MOCK_NS}/{pod} on node {node}"))?;
    if out.code != 0 {
        bail!("on node {node}: {}", out.stderr.trim());
    }
    Ok(out.stdout.trim().to_owned())
}

/// The id of the running stager container on `node`.
fn stager_container<R: Runner>(runner: &R, node: &str) -> anyhow::Result<String> {
    let name = format!("^{STAGER_CONTAINER}$");
    let label = format!("io.kubernetes.pod.namespace={MOCK_NS}");
    let out = runner
        .check(&Cmd::new(
            "docker",
            &[
                "exec", node, "crictl", "ps", "-q", "--state", "running", "--name", &name,
                "--label", &label,
            ],
        ))
        .with_context(|| format!("listing the containers of node {node} (is the cluster up?)"))?;
    match out.stdout.lines().map(str::trim).find(|line| !line.is_empty()) {
        Some(id) => Ok(id.to_owned()),
        None => bail!(
            "no running stager container on node {node} (namespace {MOCK_NS}): install the chart first (`cargo xtask up`)"
        ),
    }
}

/// Runs the injection on `node`; returns the stager's report.
pub fn run<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    node: &str,
    action: XidAction,
) -> anyhow::Result<String> {
    exec(runner, cluster, node, &stager_argv(action))
}

/// Runs `argv` (the stager binary and its arguments) in `node`'s running stager container;
/// its stdout.
pub fn exec<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    node: &str,
    argv: &[String],
) -> anyhow::Result<String> {
    check_node(cluster, node)?;
    let container = stager_container(runner, node)?;
    let mut args: Vec<String> = ["exec", node, "crictl", "exec", &container]
        .map(str::to_owned)
        .to_vec();
    args.extend(argv.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = runner.run(&Cmd::new("docker", &args))?;
    if !out.ok {
        bail!("on node {node}: {}", out.stderr.trim());
    }
    Ok(out.stdout.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::FakeRunner;

    fn cluster() -> KindCluster {
        KindCluster::new("demo", 4).unwrap_or_else(|err| panic!("{err:#}"))
    }

    const PS: &str =
        "docker exec demo-worker2 crictl ps -q --state running --name ^stager$ --label io.kubernetes.pod.namespace=mokka";

    #[test]
    fn an_injection_runs_the_stager_in_the_node_s_stager_container() {
        let runner = FakeRunner::default();
        runner
            .expect(PS, true, "abc123\n")
            .expect(
                "docker exec demo-worker2 crictl exec abc123 /usr/local/bin/nvml-mock-stager inject --gpu 1 --xid 79",
                true,
                "injected Xid 79 on GPU 1 (/host/var/lib/nvml-mock/driver/config/xid-injections)\n",
            );
        let done = run(
            &runner,
            &cluster(),
            "demo-worker2",
            XidAction::Inject { gpu: 1, xid: 79 },
        )
        .unwrap_or_else(|err| panic!("{err:#}"));
        assert!(done.starts_with("injected Xid 79 on GPU 1"), "{done}");
        assert_eq!(runner.remaining(), 0);
    }

    #[test]
    fn clear_passes_clear() {
        let runner = FakeRunner::default();
        runner.expect(PS, true, "abc123\n").expect(
            "docker exec demo-worker2 crictl exec abc123 /usr/local/bin/nvml-mock-stager inject --clear",
            true,
            "cleared",
        );
        let done = run(&runner, &cluster(), "demo-worker2", XidAction::Clear)
            .unwrap_or_else(|err| panic!("{err:#}"));
        assert_eq!(done, "cleared");
    }

    #[test]
    fn bad_input_fails_with_what_to_do() {
        let runner = FakeRunner::default();
        let err = run(&runner, &cluster(), "demo-worker9", XidAction::Clear)
            .err()
            .map(|err| format!("{err:#}"))
            .unwrap_or_default();
        assert!(
            err.starts_with("unknown node `demo-worker9`: cluster `demo` has demo-control-plane, demo-worker, demo-worker2"),
            "{err}"
        );
        assert!(runner.seen().is_empty(), "nothing runs for an unknown node");

        runner.expect(PS, true, "\n");
        let err = run(&runner, &cluster(), "demo-worker2", XidAction::Clear)
            .err()
            .map(|err| format!("{err:#}"))
            .unwrap_or_default();
        assert!(
            err.contains("no running stager container on node demo-worker2"),
            "{err}"
        );

        runner.expect(PS, true, "abc123\n").expect(
            "docker exec demo-worker2 crictl exec abc123",
            false,
            "",
        );
        let err = run(
            &runner,
            &cluster(),
            "demo-worker2",
            XidAction::Inject { gpu: 7, xid: 79 },
        )
        .err()
        .map(|err| format!("{err:#}"))
        .unwrap_or_default();
        assert!(err.starts_with("on node demo-worker2: "), "{err}");
    }

    fn pod(name: &str, container: &str, phase: &str, deleting: bool) -> Pod {
        let mut metadata = serde_json::json!({"name": name, "namespace": MOCK_NS});
        if deleting {
            metadata["deletionTimestamp"] = "2026-12-05T00:00:00Z".into();
        }
        serde_json::from_value(serde_json::json!({
            "metadata": metadata,
            "spec": {"containers": [{"name": container, "image": "nvml-mock:1"}]},
            "status": {"phase": phase},
        }))
        .unwrap_or_else(|err| panic!("{err}"))
    }

    #[test]
    fn the_api_path_execs_the_stager_in_the_node_s_running_stager_pod() {
        let pods = [
            pod("nvml-mock-nri-x", "nri", "Running", false),
            pod("nvml-mock-old", STAGER_CONTAINER, "Running", true),
            pod("nvml-mock-new", STAGER_CONTAINER, "Pending", false),
            pod("nvml-mock-abc", STAGER_CONTAINER, "Running", false),
        ];
        assert_eq!(running_stager(&pods).as_deref(), Some("nvml-mock-abc"));
        assert_eq!(running_stager(&pods[..3]), None);
        assert_eq!(
            stager_argv(XidAction::Inject { gpu: 1, xid: 79 }),
            [STAGER_BIN, "inject", "--gpu", "1", "--xid", "79"]
        );
        assert_eq!(
            stager_argv(XidAction::Clear),
            [STAGER_BIN, "inject", "--clear"]
        );
        let double = XidAction::Ecc {
            gpu: 2,
            ecc: node_layout::xid::Ecc::Double,
        };
        assert_eq!(
            stager_argv(double),
            [STAGER_BIN, "inject", "--gpu", "2", "--ecc", "double"]
        );
    }

    #[test]
    fn an_unknown_node_of_a_context_names_the_context_s_nodes() {
        let nodes = ["cp".to_owned(), "w1".to_owned()];
        assert!(check_listed(&nodes, "prod", "w1").is_ok());
        let err = check_listed(&nodes, "prod", "w9")
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("unknown node `w9`: context `prod` has cp, w1 (pass one with --node"),
            "{err}"
        );
    }
}
