//! Scenario 5's images and chart (issue 23): NVIDIA's device plugin with GPU
//! feature discovery, and node-feature-discovery, built from source through the
//! Go module proxy at the `[peers]` pins of `manifests/versions.toml`
//! (`k8s_device_plugin`, `node_feature_discovery`), imaged with
//! `image-builder` from specs built in code (`image.rs`), and the device
//! plugin's Helm chart with NFD's chart as its dependency (`chart.rs`), so a
//! cluster can install both with no registry.
//!
//! Everything is cached by the pins: the Go outputs under
//! `<cache>/go/<name>-<version>` (`go.rs`), the archives under
//! `<cache>/images/gpu-stack-<key>/` with their references in `images.txt`,
//! the chart under `<cache>/charts/`; a second [`ensure`] builds nothing.

pub mod chart;
mod go;
pub mod image;
mod pins;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use xshell::Shell;

pub use image::{DEVICE_PLUGIN_IMAGE, NFD_IMAGE};
pub use pins::Pins;

use crate::plan::ImageRef;
use crate::scenario4::image::cached;

/// The file in an images directory that lists its references, one per line.
const INDEX: &str = "images.txt";

/// One image archive and its reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// The archive (`kind load image-archive` takes it).
    pub path: PathBuf,
    /// Its reference, content-tagged.
    pub image: ImageRef,
}

/// What [`ensure`] gives a later scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuStack {
    /// The device plugin and GFD image.
    pub device_plugin: Archive,
    /// The node-feature-discovery image.
    pub nfd: Archive,
    /// The device plugin's chart, NFD's chart in its `charts/`.
    pub chart: PathBuf,
    /// The Go outputs the images hold (device plugin, NFD).
    pub bin_dirs: [PathBuf; 2],
    /// Whether this call wrote the archives (false: all from the cache).
    pub built: bool,
}

impl GpuStack {
    /// The `helm --set` values that point the chart at these images as
    /// `kind load` puts them on the nodes, with GFD (and so NFD) enabled.
    pub fn helm_values(&self) -> Vec<(String, String)> {
        helm_values(
            &self.device_plugin.image,
            &self.nfd.image,
            PullPolicy::Never,
        )
    }
}

/// How the nodes get the images, as the chart's `pullPolicy` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// `kind load` put them on every node: never pull.
    Never,
    /// The nodes pull them from a registry (`--registry`) the first time.
    IfNotPresent,
}

impl PullPolicy {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Never => "Never",
            PullPolicy::IfNotPresent => "IfNotPresent",
        }
    }
}

/// The `helm --set` pairs for the device plugin chart and its NFD dependency.
pub fn helm_values(
    device_plugin: &ImageRef,
    nfd: &ImageRef,
    pull: PullPolicy,
) -> Vec<(String, String)> {
    [
        ("image.repository", device_plugin.repository.as_str()),
        ("image.tag", device_plugin.tag.as_str()),
        ("image.pullPolicy", pull.as_str()),
        ("gfd.enabled", "true"),
        ("nfd.image.repository", nfd.repository.as_str()),
        ("nfd.image.tag", nfd.tag.as_str()),
        ("nfd.image.pullPolicy", pull.as_str()),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect()
}

/// The images directory's index: one reference per line.
fn render_index(images: &[&ImageRef]) -> String {
    images.iter().map(|it| format!("{it}\n")).collect()
}

/// The references of an index, each checked to be one of `names`, in that order.
fn parse_index(text: &str, names: &[&str]) -> Result<Vec<ImageRef>> {
    let refs: Vec<ImageRef> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| ImageRef::parse(line.trim()))
        .collect::<Result<_>>()?;
    names
        .iter()
        .map(|name| {
            refs.iter()
                .find(|it| it.repository == *name)
                .cloned()
                .with_context(|| format!("the index lists no {name}"))
        })
        .collect()
}

/// Whether the images are in the cache at today's pins (the Go outputs and
/// the chart they were built with beside them): [`ensure`] then needs no Go.
pub fn images_cached() -> bool {
    let (Ok(pins), Ok(cache)) = (Pins::read(), crate::dirs::cache_dir()) else {
        return false;
    };
    cache
        .join("images")
        .join(format!("gpu-stack-{}", pins.key()))
        .join(INDEX)
        .is_file()
}

/// Builds what is missing and returns the images and the chart.
pub fn ensure(sh: &Shell) -> Result<GpuStack> {
    let pins = Pins::read()?;
    let cache = crate::dirs::cache_dir()?;
    let dp_bin = go::device_plugin(sh, &cache, &pins.device_plugin)?;
    let nfd_bin = go::nfd(sh, &cache, &pins.nfd)?;
    let chart = chart::ensure(sh, &cache, &pins)?;
    let parent = cache.join("images");
    let dir_name = format!("gpu-stack-{}", pins.key());
    let built = !parent.join(&dir_name).join(INDEX).is_file();
    let dir = cached(&parent, &dir_name, |out| {
        write_images(out, &dp_bin, &nfd_bin, &pins)
    })?;
    let index = std::fs::read_to_string(dir.join(INDEX))
        .with_context(|| format!("cannot read {}/{INDEX}", dir.display()))?;
    let refs = parse_index(&index, &[DEVICE_PLUGIN_IMAGE, NFD_IMAGE])
        .with_context(|| format!("{}: remove it and rerun", dir.display()))?;
    let [device_plugin, nfd]: [ImageRef; 2] = refs
        .try_into()
        .map_err(|_| anyhow::anyhow!("{}: not two images, remove it and rerun", dir.display()))?;
    let archive = |image: ImageRef| Archive {
        path: dir.join(format!("{}.tar", image.repository)),
        image,
    };
    let (device_plugin, nfd) = (archive(device_plugin), archive(nfd));
    Ok(GpuStack {
        device_plugin,
        nfd,
        chart,
        bin_dirs: [dp_bin, nfd_bin],
        built,
    })
}

/// Both archives and the index into `out`.
fn write_images(out: &Path, dp_bin: &Path, nfd_bin: &Path, pins: &Pins) -> Result<()> {
    let cache = image_builder::host::read_ld_cache()?;
    let root = crate::project_root();
    let inputs = image_builder::build::Inputs::host_files(&root);
    let specs = [
        image::device_plugin_spec(dp_bin, &pins.device_plugin),
        image::nfd_spec(nfd_bin, &pins.nfd),
    ];
    let mut refs = Vec::new();
    for spec in &specs {
        let started = std::time::Instant::now();
        let built =
            image_builder::build::build_image(spec, &inputs, &image_builder::host::RealFs, &cache)
                .with_context(|| format!("cannot build the {} image", spec.name))?;
        image_builder::build::write_archive_file(&built, out)?;
        eprintln!(
            "    {} written in {:.1} s",
            built.reference(),
            started.elapsed().as_secs_f64()
        );
        refs.push(ImageRef::parse(&built.reference())?);
    }
    std::fs::write(
        out.join(INDEX),
        render_index(&refs.iter().collect::<Vec<_>>()),
    )
    .with_context(|| format!("cannot write {}/{INDEX}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(repository: &str, tag: &str) -> ImageRef {
        ImageRef {
            repository: repository.to_owned(),
            tag: tag.to_owned(),
        }
    }

    #[test]
    fn the_index_round_trips_in_the_asked_order() {
        let dp = image(DEVICE_PLUGIN_IMAGE, "0123456789ab");
        let nfd = image(NFD_IMAGE, "ba9876543210");
        let text = render_index(&[&nfd, &dp]);
        assert_eq!(
            parse_index(&text, &[DEVICE_PLUGIN_IMAGE, NFD_IMAGE]).expect("parse"),
            vec![dp, nfd]
        );
    }

    #[test]
    fn an_index_missing_an_image_is_refused_with_its_name() {
        let text = render_index(&[&image(NFD_IMAGE, "ba9876543210")]);
        let err = parse_index(&text, &[DEVICE_PLUGIN_IMAGE, NFD_IMAGE]).expect_err("missing");
        assert!(err.to_string().contains(DEVICE_PLUGIN_IMAGE), "{err}");
    }

    #[test]
    fn the_values_point_the_chart_and_its_nfd_at_our_images_with_gfd_on() {
        let values = helm_values(
            &image(DEVICE_PLUGIN_IMAGE, "0123456789ab"),
            &image(NFD_IMAGE, "ba9876543210"),
            PullPolicy::Never,
        );
        let get = |key: &str| {
            values
                .iter()
                .find(|(it, _)| it == key)
                .map(|(_, value)| value.as_str())
        };
        assert_eq!(get("image.repository"), Some(DEVICE_PLUGIN_IMAGE));
        assert_eq!(get("image.tag"), Some("0123456789ab"));
        assert_eq!(get("gfd.enabled"), Some("true"));
        assert_eq!(get("nfd.image.repository"), Some(NFD_IMAGE));
        assert_eq!(get("nfd.image.tag"), Some("ba9876543210"));
        assert_eq!(get("image.pullPolicy"), Some("Never"));
        assert_eq!(get("nfd.image.pullPolicy"), Some("Never"));
    }

    #[test]
    fn images_from_a_registry_are_pulled_if_not_present() {
        let registry = "172.18.0.1:5000/ci/";
        let values = helm_values(
            &image(&format!("{registry}{DEVICE_PLUGIN_IMAGE}"), "0123456789ab"),
            &image(&format!("{registry}{NFD_IMAGE}"), "ba9876543210"),
            PullPolicy::IfNotPresent,
        );
        for (key, want) in [
            ("image.pullPolicy", "IfNotPresent".to_owned()),
            ("nfd.image.pullPolicy", "IfNotPresent".to_owned()),
            (
                "image.repository",
                format!("{registry}{DEVICE_PLUGIN_IMAGE}"),
            ),
            ("nfd.image.repository", format!("{registry}{NFD_IMAGE}")),
        ] {
            assert!(
                values.contains(&(key.to_owned(), want.clone())),
                "{key}={want} in {values:?}"
            );
        }
    }
}
