//! What CI's e2e steps prepare before a run: the demo cluster an earlier run
//! left, deleted; the IMEX test double's payload, standing in for NVIDIA's
//! nvidia-imex. Below the steps that use them.

use std::path::PathBuf;

use anyhow::Result;
use xshell::{cmd, Shell};

/// The demo cluster of an earlier CI run, deleted: the engine's state survives
/// between runs on the same machine, but a cluster is not a cache (its node
/// containers do not survive a reboot, and the non-root step leaves one from
/// the online image), so the demo step always proves a cold create. The
/// engine and kind are the ones the demo would use, started and installed
/// first on a fresh machine (where nothing has put kind on `PATH` or in the
/// cache yet).
pub fn delete_leftover_cluster(sh: &Shell) -> Result<()> {
    let name = crate::names::DEFAULT_CLUSTER;
    crate::tools::ensure_engine(sh)?;
    let kind = crate::tools::ensure_tool(sh, crate::tools::Tool::Kind)?;
    let clusters = cmd!(sh, "{kind} get clusters").quiet().read()?;
    if clusters.lines().any(|line| line.trim() == name) {
        eprintln!("    deleting the cluster `{name}` an earlier run left (the demo step proves a cold create)");
        cmd!(sh, "{kind} delete cluster --name {name}").run()?;
    }
    Ok(())
}

/// The IMEX test double's payload (`--imex`), written where CI keeps it.
pub fn imex_double_payload(sh: &Shell) -> Result<PathBuf> {
    let dir = crate::project_root().join("target/ci/imex-double");
    crate::images::write_imex_double_payload(sh, &dir)
}
