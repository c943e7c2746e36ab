//! The offline node image (crate `node-image`) with what xtask owns around
//! it: the Docker engine is made usable first (`tools::ensure_engine`, which
//! may start dockerd as root), then the crate builds or reuses the image.
//! The crate's smoke checks take the kind binary from
//! `tools::ensure_tool(sh, Tool::Kind)`.

use anyhow::Result;
use xshell::Shell;

use crate::{flags::NodeImageArgs, tools};

/// `cargo xtask node-image`: builds (or reuses) the node image and prints its
/// reference on stdout.
pub fn run(sh: &Shell, args: &NodeImageArgs) -> Result<()> {
    tools::ensure_engine(sh)?;
    ::node_image::run(sh, args.rebuild)
}

/// The node image for the current pins and files ([`::node_image::ensure_node_image`]),
/// with the engine made usable first. Returns the image ref.
pub fn ensure_node_image(sh: &Shell, rebuild: bool) -> Result<String> {
    tools::ensure_engine(sh)?;
    ::node_image::ensure_node_image(sh, rebuild)
}

/// The offline pair ([`::node_image::ensure_node_images`]): the full image
/// for the control plane, its worker variant for the workers.
pub fn ensure_node_images(
    sh: &Shell,
    rebuild: bool,
) -> Result<xtask_support::node_images::NodeImages> {
    tools::ensure_engine(sh)?;
    ::node_image::ensure_node_images(sh, rebuild)
}
