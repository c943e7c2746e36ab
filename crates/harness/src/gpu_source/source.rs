//! The `[released]` pins and the [`Source`] enum with what each source means
//! for the report (origins) and for a failure (fixes, prerequisites).

use anyhow::{Context as _, Result};

use super::fetch::{ChartPin, Location};
use super::mirror::{image_host, Mirrors, MIRRORS_ENV};
use crate::plan::ImageRef;
use crate::registry::Registry;

/// One released component: its chart and its image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The chart at its pinned version.
    pub chart: ChartPin,
    /// The image, tag pinned.
    pub image: ImageRef,
}

/// The `[released]` pins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    /// NVIDIA's DRA driver.
    pub dra: Artifact,
    /// NVIDIA's device plugin (and GFD, the same image).
    pub device_plugin: Artifact,
    /// node-feature-discovery (its chart is the device plugin chart's dependency).
    pub nfd: Artifact,
}

fn field<'a>(table: &'a toml::Table, key: &str) -> Result<&'a str> {
    table
        .get("released")
        .and_then(|it| it.get(key))
        .and_then(toml::Value::as_str)
        .with_context(|| format!("manifests/versions.toml has no [released] {key}"))
}

fn repo_artifact(table: &toml::Table, prefix: &str) -> Result<Artifact> {
    Ok(Artifact {
        chart: ChartPin {
            location: Location::Repo {
                url: field(table, &format!("{prefix}_repo"))?.to_owned(),
                name: field(table, &format!("{prefix}_chart"))?.to_owned(),
            },
            version: field(table, &format!("{prefix}_chart_version"))?.to_owned(),
        },
        image: ImageRef::parse(field(table, &format!("{prefix}_image"))?)?,
    })
}

impl Released {
    /// The pins of a parsed `versions.toml`.
    pub fn from_table(table: &toml::Table) -> Result<Released> {
        Ok(Released {
            dra: Artifact {
                chart: ChartPin {
                    location: Location::Oci(field(table, "dra_driver_chart")?.to_owned()),
                    version: field(table, "dra_driver_chart_version")?.to_owned(),
                },
                image: ImageRef::parse(field(table, "dra_driver_image")?)?,
            },
            device_plugin: repo_artifact(table, "device_plugin")?,
            nfd: repo_artifact(table, "nfd")?,
        })
    }

    /// The pins of `manifests/versions.toml`.
    pub fn read() -> Result<Released> {
        Released::from_table(&xtask_support::tools::read_versions()?)
    }
}

/// Where a run's DRA and GPU-stack charts and images come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// NVIDIA's released charts and images, through these mirrors where one stands in.
    Released(Mirrors),
    /// Built here from source, `kind load`ed (the `--offline` kind cluster).
    Offline,
    /// Built here from source and pushed to `--registry`.
    Registry(Registry),
}

impl Source {
    /// On a kind cluster whose control plane runs `node_image`: the offline
    /// builds on a cluster made from the offline node image (repository
    /// `offline_repo`), else the released artifacts through `mirrors`.
    pub fn on_kind(node_image: Option<&str>, offline_repo: &str, mirrors: Mirrors) -> Source {
        let repository = node_image.and_then(|it| ImageRef::parse(it).ok());
        match repository {
            Some(image) if image.repository == offline_repo => Source::Offline,
            _ => Source::Released(mirrors),
        }
    }

    /// On a cluster reached through `--kube-context`: the offline builds
    /// pushed to `registry` when given, else the released artifacts.
    pub fn on_context(registry: Option<Registry>, mirrors: Mirrors) -> Source {
        match registry {
            Some(registry) => Source::Registry(registry),
            None => Source::Released(mirrors),
        }
    }

    /// One line for the log and the report.
    pub fn describe(&self) -> String {
        match self {
            Source::Released(mirrors) if mirrors.0.is_empty() => {
                "NVIDIA's released charts and images (manifests/versions.toml [released])".to_owned()
            }
            Source::Released(mirrors) => format!(
                "NVIDIA's released charts and images (manifests/versions.toml [released]) through the mirrors of \
                 {MIRRORS_ENV}: {}",
                mirrors
                    .0
                    .iter()
                    .map(|it| format!("{} for {}", it.to, it.from))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Source::Offline => {
                "the same releases built here from source (the offline path), put on the nodes with kind load"
                    .to_owned()
            }
            Source::Registry(registry) => format!(
                "the same releases built here from source, pushed to {registry} (--registry)"
            ),
        }
    }

    /// Where `image` (as the chart names it) came from, for the report.
    pub fn origin(&self, image: &str) -> String {
        match self {
            Source::Released(mirrors) => {
                let host = image_host(image);
                match mirrors.for_host(host) {
                    Some(rule) => format!(
                        "released, through the mirror {} standing in for {host} ({MIRRORS_ENV}): what it serves \
                         under that name, not {host} itself",
                        rule.to
                    ),
                    None => format!(
                        "released, pulled by the node from {host} (or the mirror its containerd has for it)"
                    ),
                }
            }
            Source::Offline => "built here from source, put on the node with kind load".to_owned(),
            Source::Registry(registry) => {
                format!("built here from source, pulled by the node from {registry}")
            }
        }
    }

    /// What to do about `image` when a node cannot pull it.
    pub fn pull_fix(&self, image: &str) -> String {
        match self {
            Source::Released(_) => {
                let host = image_host(image);
                format!(
                    "the nodes must reach {host}: behind a mirror, set {MIRRORS_ENV}={host}=<mirror URL> (on kind \
                     it configures the nodes' containerd; on your own cluster configure \
                     /etc/containerd/certs.d/{host}/hosts.toml); without a network, `cargo xtask demo --offline` \
                     builds the same release from source; on your own cluster, `--registry` pushes those builds \
                     where the nodes pull"
                )
            }
            Source::Offline => {
                "the image was put on the nodes with kind load: rerun (missing images are loaded again), or \
                 `cargo xtask up --force-recreate --offline`"
                    .to_owned()
            }
            Source::Registry(registry) => format!(
                "the nodes must pull from {registry}: check their containerd's \
                 /etc/containerd/certs.d/{}/hosts.toml (plain HTTP needs an http:// server there) and --plain-http",
                registry.host
            ),
        }
    }

    /// Why scenario 4 (the DRA driver) cannot run here, if it cannot.
    pub fn dra_missing(&self) -> Option<String> {
        match self {
            Source::Released(_) => None,
            Source::Offline | Source::Registry(_) => {
                crate::scenario4::image::missing_prerequisite()
            }
        }
    }

    /// Why scenario 5's GPU stack cannot be had here, if it cannot; else how it comes.
    pub fn stack_prerequisite(&self) -> std::result::Result<String, String> {
        match self {
            Source::Released(_) => Ok(self.describe()),
            Source::Offline | Source::Registry(_) => {
                if crate::gpu_stack::images_cached() {
                    return Ok("images built from source, from the cache".to_owned());
                }
                if xtask_support::tools::find_on_path("go").is_some() {
                    return Ok(
                        "images not cached: building them from source with Go (cold: about 16 min)"
                            .to_owned(),
                    );
                }
                Err("the offline path builds NVIDIA's device plugin, GFD and node-feature-discovery from the Go \
                     module proxy, and neither are the images cached nor is `go` on PATH: install Go (or use \
                     `nix develop`) and run `cargo xtask gpu-stack-images`, then `cargo xtask scenario5`; or run \
                     on a cluster made without --offline, which installs NVIDIA's released images"
                    .to_owned())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins() -> (toml::Table, Released) {
        let table = xtask_support::tools::read_versions().expect("versions.toml");
        let released = Released::from_table(&table).expect("[released]");
        (table, released)
    }

    #[test]
    fn the_released_pins_are_the_releases_the_offline_path_builds() {
        let (table, released) = pins();
        let peers = |key: &str| table["peers"][key].as_str().expect(key).to_owned();
        let dra = peers("dra_driver_version");
        assert_eq!(format!("v{}", released.dra.chart.version), dra);
        assert_eq!(released.dra.image.tag, dra);
        let dp = peers("k8s_device_plugin");
        assert_eq!(format!("v{}", released.device_plugin.chart.version), dp);
        assert_eq!(released.device_plugin.image.tag, dp);
        let nfd = peers("node_feature_discovery");
        assert_eq!(format!("v{}", released.nfd.chart.version), nfd);
        assert_eq!(released.nfd.image.tag, nfd);
        assert_eq!(released.dra.chart.name(), "dra-driver-nvidia-gpu");
        assert_eq!(released.device_plugin.chart.name(), "nvidia-device-plugin");
    }

    #[test]
    fn the_offline_node_image_means_the_offline_builds_else_the_releases() {
        let repo = "cdsim/kind-node";
        assert_eq!(
            Source::on_kind(
                Some("cdsim/kind-node:v1.34.3-0123456789ab"),
                repo,
                Mirrors::default()
            ),
            Source::Offline
        );
        assert_eq!(
            Source::on_kind(Some("kindest/node:v1.34.3"), repo, Mirrors::default()),
            Source::Released(Mirrors::default())
        );
        assert_eq!(
            Source::on_kind(None, repo, Mirrors::default()),
            Source::Released(Mirrors::default())
        );
        let registry = Registry::parse("r:5000/x", true).expect("registry");
        assert_eq!(
            Source::on_context(Some(registry.clone()), Mirrors::default()),
            Source::Registry(registry)
        );
        assert!(matches!(
            Source::on_context(None, Mirrors::default()),
            Source::Released(_)
        ));
    }

    #[test]
    fn the_report_never_says_the_public_registry_answered_through_a_mirror() {
        let mirrors =
            Mirrors::parse("registry.k8s.io=http://172.18.0.1:5000/registry.k8s.io").expect("rule");
        let source = Source::Released(mirrors);
        let dra = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1";
        let origin = source.origin(dra);
        assert!(
            origin.starts_with("released, through the mirror http://172.18.0.1:5000/registry.k8s.io standing in for registry.k8s.io"),
            "{origin}"
        );
        assert!(origin.contains("not registry.k8s.io itself"), "{origin}");
        let nvcr = source.origin("nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
        assert!(nvcr.contains("from nvcr.io"), "{nvcr}");
        assert!(source.describe().contains(MIRRORS_ENV));
        for fix in [source.pull_fix(dra)] {
            for says in [
                MIRRORS_ENV,
                "--offline",
                "--registry",
                "certs.d/registry.k8s.io",
            ] {
                assert!(fix.contains(says), "`{says}` in {fix}");
            }
        }
        assert!(Source::Offline
            .origin("cdsim-dra-driver:1")
            .contains("kind load"));
    }
}
