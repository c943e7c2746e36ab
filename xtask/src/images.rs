//! `cargo xtask images`: the mock and workload images as reproducible archives.

use anyhow::Result;
use xshell::Shell;

use crate::flags::ImagesArgs;

/// Builds both images.
pub fn run(_sh: &Shell, _args: &ImagesArgs) -> Result<()> {
    anyhow::bail!("images is not implemented yet")
}
