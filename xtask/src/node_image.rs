//! `cargo xtask node-image`: the offline kind node image, built from pinned sources.

use anyhow::Result;
use xshell::Shell;

use crate::flags::NodeImageArgs;

/// Builds (or reuses) the node image.
pub fn run(_sh: &Shell, _args: &NodeImageArgs) -> Result<()> {
    anyhow::bail!("node-image is not implemented yet")
}
