//! Where NVIDIA's charts and images for scenarios 4 and 5 come from (the DRA
//! driver; the device plugin with GPU feature discovery and
//! node-feature-discovery): the one owner both scenarios ask.
//!
//! - [`Source::Released`], the online path (the default): NVIDIA's released
//!   charts at the `[released]` pins of `manifests/versions.toml`, fetched with
//!   `helm pull` ([`fetch`]), and their released images, which the nodes pull;
//!   through the mirrors of `CDSIM_MIRRORS` ([`mirror`]) where one stands in
//!   for a publisher (on kind, the nodes' containerd is told so).
//! - [`Source::Offline`], the `--offline` kind cluster: the same releases built
//!   here from source (`scenario4::image`, `gpu_stack`), put on the nodes with
//!   `kind load`.
//! - [`Source::Registry`], a cluster reached through `--kube-context` with
//!   `--registry`: those builds pushed there, the nodes pulling them.
//!
//! The report names every image with where it came from ([`Source::origin`])
//! and the digest each node resolved ([`pulls`]); an image a node cannot pull
//! and a chart that cannot be fetched fail naming what and the fix, and a
//! failed install is uninstalled ([`fetch::guarded`]).

pub mod deliver;
pub mod fetch;
pub mod mirror;
pub mod pulls;
mod source;

pub use deliver::{dra, gpu_stack, install_guarded, resolved_details, StackImages};
pub use source::{Artifact, Released, Source};
