//! `cargo xtask`: orchestration of the demo and of CI.
//!
//! Each subcommand lives in its own module with a `run` entry point; `main`
//! only parses flags and dispatches. External tools (docker, kind, helm) run
//! through xshell; everything that talks to Kubernetes goes through kube-rs.

mod ci;
mod flags;
mod images;
mod node_image;
mod tools;

use anyhow::Result;
use clap::Parser;

fn main() -> Result<()> {
    let flags = flags::Xtask::parse();
    let sh = xshell::Shell::new()?;
    sh.change_dir(project_root());
    match flags.command {
        flags::Command::Ci(args) => ci::run(&sh, &args),
        flags::Command::NodeImage(args) => node_image::run(&sh, &args),
        flags::Command::Images(args) => images::run(&sh, &args),
        _ => anyhow::bail!("not wired yet"),
    }
}

/// The repository root: the parent of this crate's manifest directory.
pub fn project_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default()
}
