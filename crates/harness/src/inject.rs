//! `cargo xtask inject`: an Xid fault injected on one node's GPU (or every fault cleared), by
//! running `nvml-mock-stager inject` in that node's running stager container (`docker exec
//! <node> crictl exec <container> …`, through the [`Runner`]). The stager writes the control
//! file under the staged root it mounts; the mock library reports it as an event to every
//! consumer waiting on the node (NVIDIA's device plugin marks the GPU unhealthy).
//!
//! Bad input fails with what to do: a node not in the cluster names the cluster's nodes; no
//! running stager says to install the chart; a GPU index beyond the node's profile is the
//! stager's own error, relayed.

use anyhow::{bail, Context as _};

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
    check_node(cluster, node)?;
    let container = stager_container(runner, node)?;
    let mut args: Vec<String> = [
        "exec", node, "crictl", "exec", &container, STAGER_BIN, "inject",
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(action.args());
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
}
