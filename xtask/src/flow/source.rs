//! Which source of NVIDIA's charts and images (`harness::gpu_source`) a
//! scenario 4 or 5 run on `target` takes: on a kind cluster made from the
//! offline node image, the same releases built from source; on any other kind
//! cluster, the released ones; through `--kube-context`, the source builds
//! pushed to `--registry` when given, else the released ones. The mirrors of
//! `CDSIM_MIRRORS` apply to the released ones.

use anyhow::Context as _;
use xshell::Shell;

use super::target::Target;
use crate::gpu_source::mirror::Mirrors;
use crate::gpu_source::Source;
use crate::plan::ImageRef;

/// The source for `target`.
pub(super) fn of(sh: &Shell, target: &Target) -> anyhow::Result<Source> {
    let mirrors = Mirrors::from_env()?;
    let Some(cluster) = &target.kind else {
        return Ok(Source::on_context(target.registry.clone(), mirrors));
    };
    let in_use = crate::cluster::node_image_in_use(&super::common::docker_only(sh), cluster);
    let offline = ::node_image::node_image_refs()
        .context("the offline node image's reference (manifests/versions.toml [node])")?;
    let offline_repo = ImageRef::parse(&offline.control_plane)?.repository;
    Ok(Source::on_kind(in_use.as_deref(), &offline_repo, mirrors))
}
