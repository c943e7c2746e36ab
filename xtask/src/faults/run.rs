//! The fault checks' one way to run xtask: the real binary as a subprocess,
//! as a user runs it, and what a run that must fail has to say. Below the
//! checks of `faults.rs` and its children.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use anyhow::Context as _;

/// Runs the xtask binary with `args` from the project root, as a user does.
pub fn xtask(args: &[&str]) -> anyhow::Result<Output> {
    let (mut command, exe) = command(args)?;
    command
        .output()
        .with_context(|| format!("running {} {}", exe.display(), args.join(" ")))
}

/// Starts the xtask binary with `args`, its output piped, for a check that
/// faults the cluster while it runs.
pub fn spawn_xtask(args: &[&str]) -> anyhow::Result<Child> {
    let (mut command, exe) = command(args)?;
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))
}

/// The xtask binary with `args`, to run from the project root, and its path.
fn command(args: &[&str]) -> anyhow::Result<(Command, PathBuf)> {
    let exe: PathBuf = std::env::current_exe().context("locating the xtask binary")?;
    let mut command = Command::new(&exe);
    command.args(args).current_dir(crate::project_root());
    Ok((command, exe))
}

/// `out` must be a failure whose stderr mentions every needle; the last line
/// naming the first one.
pub fn expect_failure(what: &str, out: &Output, needles: &[&str]) -> anyhow::Result<String> {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.success() {
        anyhow::bail!("{what}: the run succeeded but must fail\n{stderr}");
    }
    for needle in needles {
        if !stderr.contains(needle) {
            anyhow::bail!("{what}: the error does not mention `{needle}`:\n{stderr}");
        }
    }
    Ok(stderr
        .lines()
        .rev()
        .find(|line| line.contains(needles[0]))
        .unwrap_or_default()
        .trim()
        .to_owned())
}
