//! Each [`Source`]'s way of putting the DRA driver and the GPU stack where
//! helm and the nodes take them: the chart on this machine, the image where
//! the nodes get it (a public host or its mirror, `kind load`, a registry).

use std::future::Future;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use kube::Client;

use super::fetch::{self, Release};
use super::source::{Released, Source};
use super::{mirror, pulls};
use crate::gpu_stack::PullPolicy;
use crate::names::KindCluster;
use crate::plan::ImageRef;
use crate::report::WorkerDetail;
use crate::runner::Runner;
use crate::scenario4::image::DraImage;

/// The GPU stack as the device plugin chart's install takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackImages {
    /// The device plugin's chart (NFD's chart its dependency): a directory or an archive.
    pub chart: PathBuf,
    /// The device plugin and GFD image, as the chart names it.
    pub device_plugin: ImageRef,
    /// The node-feature-discovery image, as the chart names it.
    pub nfd: ImageRef,
    /// The chart's pull policy for both.
    pub pull: PullPolicy,
}

/// The kind cluster of an offline source, or why there is none.
fn kind_of(kind: Option<&KindCluster>) -> Result<&KindCluster> {
    kind.context(
        "the offline builds go onto a kind cluster's nodes with `kind load`: on another cluster pass --registry \
         (the builds are pushed there), or leave it out to install NVIDIA's released images",
    )
}

/// On kind, the nodes told about the mirrors (none: nothing to do).
fn mirror_nodes<R: Runner>(
    runner: &R,
    kind: Option<&KindCluster>,
    mirrors: &mirror::Mirrors,
) -> Result<()> {
    if let Some(cluster) = kind {
        mirror::configure_kind_nodes(runner, cluster, mirrors)?;
    }
    Ok(())
}

/// NVIDIA's DRA driver from `source`: its chart here, its image where the nodes get it.
pub async fn dra<R: Runner>(
    sh: &xshell::Shell,
    runner: &R,
    source: &Source,
    kind: Option<&KindCluster>,
) -> Result<DraImage> {
    eprintln!("    {}", source.describe());
    let (image, chart) = match source {
        Source::Released(mirrors) => {
            let pins = Released::read()?;
            mirror_nodes(runner, kind, mirrors)?;
            let chart = fetch::fetch(runner, &crate::dirs::cache_dir()?, &pins.dra.chart, mirrors)?;
            (pins.dra.image, chart)
        }
        Source::Offline => {
            let cluster = kind_of(kind)?;
            let built = crate::scenario4::image::build(sh, &crate::dirs::images_dir()?)?;
            crate::cluster::load_image_said(
                runner,
                cluster,
                &built.archive,
                &built.image.to_string(),
            )?;
            (built.image, built.chart)
        }
        Source::Registry(registry) => {
            let built = crate::scenario4::image::build(sh, &crate::dirs::images_dir()?)?;
            let pushed =
                crate::registry::push_archive(registry, &built.archive, &built.image).await?;
            (pushed, built.chart)
        }
    };
    let origin = source.origin(&image.to_string());
    eprintln!("    {image} ({origin}); chart {}", chart.display());
    Ok(DraImage {
        image,
        chart,
        origin,
    })
}

/// The device plugin (with GFD) and NFD from `source`.
pub async fn gpu_stack<R: Runner>(
    sh: &xshell::Shell,
    runner: &R,
    source: &Source,
    kind: Option<&KindCluster>,
) -> Result<StackImages> {
    eprintln!("    {}", source.describe());
    if let Source::Released(mirrors) = source {
        let pins = Released::read()?;
        mirror_nodes(runner, kind, mirrors)?;
        let chart = fetch::fetch(
            runner,
            &crate::dirs::cache_dir()?,
            &pins.device_plugin.chart,
            mirrors,
        )?;
        return Ok(StackImages {
            chart,
            device_plugin: pins.device_plugin.image,
            nfd: pins.nfd.image,
            pull: PullPolicy::IfNotPresent,
        });
    }
    let stack = crate::gpu_stack::ensure(sh)?;
    let archives = [&stack.device_plugin, &stack.nfd];
    let (images, pull) = match source {
        Source::Registry(registry) => {
            let mut pushed = Vec::new();
            for archive in archives {
                pushed.push(
                    crate::registry::push_archive(registry, &archive.path, &archive.image).await?,
                );
            }
            (pushed, PullPolicy::IfNotPresent)
        }
        _ => {
            let cluster = kind_of(kind)?;
            for archive in archives {
                crate::cluster::load_image_said(
                    runner,
                    cluster,
                    &archive.path,
                    &archive.image.to_string(),
                )?;
            }
            (
                archives.map(|it| it.image.clone()).to_vec(),
                PullPolicy::Never,
            )
        }
    };
    let [device_plugin, nfd]: [ImageRef; 2] = images
        .try_into()
        .map_err(|_| anyhow::anyhow!("other than two images of the GPU stack"))?;
    Ok(StackImages {
        chart: stack.chart,
        device_plugin,
        nfd,
        pull,
    })
}

/// Runs `install` for `release`, failing within seconds of a node failing to
/// pull an image (named, with `source`'s fix) and uninstalling the release
/// when anything fails.
pub async fn install_guarded<R: Runner, F: Future<Output = Result<()>>>(
    runner: &R,
    client: &Client,
    source: &Source,
    release: Release<'_>,
    install: F,
) -> Result<()> {
    fetch::guarded(
        runner,
        client,
        release,
        |image| source.pull_fix(image),
        install,
    )
    .await
}

/// The report's details of `images` in namespace `ns`: the digest each node
/// resolved, and where the image came from.
pub async fn resolved_details(
    client: &Client,
    ns: &str,
    source: &Source,
    images: &[&ImageRef],
) -> Result<Vec<WorkerDetail>> {
    let pods = pulls::pods(client, ns).await?;
    let names: Vec<String> = images.iter().map(ToString::to_string).collect();
    Ok(pulls::resolved(&pods, &names)
        .into_iter()
        .map(|it| {
            let origin = source.origin(&it.image);
            pulls::detail(it, &origin)
        })
        .collect())
}
