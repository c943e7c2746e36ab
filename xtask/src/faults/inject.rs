//! `cargo xtask inject` as a user runs it, on the running demo cluster: the
//! node's Xid control file gets the injection, a GPU outside the node's
//! profile is refused naming the range and changes nothing, `--clear` empties
//! the file. What the library makes of the file (one event per injection to
//! every waiting consumer) is `tests/nvml_events.rs`'s.

use anyhow::Context as _;
use node_layout::{paths::Layout, xid};
use xshell::{cmd, Shell};

use super::run::{expect_failure, xtask};
use crate::names::KindCluster;

/// The injections in `node`'s control file (none when it does not exist).
fn injections(sh: &Shell, node: &str) -> anyhow::Result<Vec<xid::Injection>> {
    let file = Layout::default().xid_injections();
    let out = cmd!(sh, "docker exec {node} cat {file}")
        .quiet()
        .ignore_status()
        .output()
        .with_context(|| format!("reading {} on {node}", file.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(
        out.status.success() || stderr.contains("No such file"),
        "cannot read {} on {node}: {stderr}",
        file.display()
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (found, errors) = xid::parse(&text);
    anyhow::ensure!(
        errors.is_empty(),
        "{} on {node} has malformed lines: {errors:?}",
        file.display()
    );
    Ok(found)
}

/// Injects Xid 79 on GPU 1 of a worker, refuses GPU 64, clears; one report line.
pub fn inject_round_trip(sh: &Shell, cluster: &KindCluster) -> anyhow::Result<String> {
    eprintln!("\n==> fault: an Xid injected and cleared with cargo xtask inject");
    let name = cluster.name();
    let node = cluster.workers()[1].clone();
    let base = ["inject", "--cluster-name", name, "--node", &node];
    let out = xtask(&[&base[..], &["--gpu", "1", "--xid", "79"]].concat())?;
    anyhow::ensure!(
        out.status.success(),
        "cargo xtask inject failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = injections(sh, &node)?;
    anyhow::ensure!(
        matches!(
            written[..],
            [xid::Injection {
                gpu: 1,
                fault: xid::Fault::Xid(79),
                ..
            }]
        ),
        "after injecting Xid 79 on GPU 1, {node}'s control file holds {written:?}"
    );
    let out = xtask(&[&base[..], &["--gpu", "64", "--xid", "79"]].concat())?;
    let refused = expect_failure(
        "a GPU outside the profile",
        &out,
        &["GPU 64 is out of range"],
    )?;
    anyhow::ensure!(
        injections(sh, &node)? == written,
        "the refused injection changed {node}'s control file"
    );
    let out = xtask(&[&base[..], &["--clear"]].concat())?;
    anyhow::ensure!(
        out.status.success(),
        "cargo xtask inject --clear failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = injections(sh, &node)?;
    anyhow::ensure!(left.is_empty(), "--clear left {left:?} on {node}");
    let line = format!(
        "inject: Xid 79 on {node} GPU 1 written to its control file, GPU 64 refused ({refused}), --clear emptied it"
    );
    eprintln!("    ✓ {line}");
    Ok(line)
}
