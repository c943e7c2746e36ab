//! What `cargo xtask` and the offline node image (`node-image`) both need,
//! owned once:
//!
//! - [`dirs`]: the project root and where xtask writes (the one owner of the
//!   directory rules).
//! - [`image_ref`]: how containerd names an image reference.
//! - [`node_images`]: which kind node image each role of a cluster runs.
//! - [`tools`]: the pins file `manifests/versions.toml`, a program on `PATH`
//!   or in the sbin directories, an exclusive file lock.
//!
//! Part of xtask's side of the workspace (orchestration, not a library for
//! others): errors are `anyhow` with context, as in xtask.

pub mod dirs;
pub mod image_ref;
pub mod node_images;
pub mod tools;

pub use dirs::project_root;
