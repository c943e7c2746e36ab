//! The control plane's CPU weight: on a machine whose cores the trays share, the API server
//! must keep answering while the trays keep the CPUs busy.

use crate::names::KindCluster;
use crate::runner::{Cmd, Runner};

/// The CPU weight (`docker update --cpu-shares`) the control plane's container gets: as much as
/// all the trays together (each keeps docker's default, 1024), capped at docker's maximum.
/// Where the trays share the machine's cores and keep them busy (18 trays on 2 cores: load
/// average above 100 while scenario 4's daemons start), the control plane at the default weight
/// got 1/19 of the CPU, its API server stopped answering and the kubelet restarted it; with this
/// weight it gets half of a contended CPU, and nothing when the trays leave the CPU idle.
pub(super) fn control_plane_shares(workers: usize) -> u64 {
    let workers = u64::try_from(workers.max(1)).unwrap_or(u64::MAX);
    workers.saturating_mul(1024).min(262_144)
}

/// Gives the new cluster's control plane [`control_plane_shares`]. Best effort: a docker that
/// refuses (no CPU controller) leaves the cluster as kind made it, and says so.
pub(super) fn prioritise_control_plane<R: Runner>(runner: &R, cluster: &KindCluster) {
    let shares = control_plane_shares(cluster.worker_count()).to_string();
    let node = cluster.control_plane();
    let cmd = Cmd::new("docker", &["update", "--cpu-shares", &shares, &node]);
    match runner.run(&cmd) {
        Ok(out) if out.ok => eprintln!(
            "    {node}: CPU weight {shares} (each tray 1024), so the API server keeps answering when the trays load the CPUs"
        ),
        Ok(out) => eprintln!(
            "    warning: {node} keeps docker's default CPU weight (`docker update --cpu-shares {shares}` failed: {}); with many trays on few cores its API server may stop answering",
            out.headline()
        ),
        Err(err) => eprintln!(
            "    warning: {node} keeps docker's default CPU weight (`docker update` did not start: {err})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_control_plane_weighs_as_much_as_all_the_trays() {
        assert_eq!(control_plane_shares(0), 1024);
        assert_eq!(control_plane_shares(4), 4096);
        assert_eq!(control_plane_shares(18), 18 * 1024);
        assert_eq!(control_plane_shares(10_000), 262_144);
    }
}
