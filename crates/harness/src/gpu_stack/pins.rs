//! The two pinned versions scenario 5's stack is built from, and the key the
//! images are cached by; below both the chart's assembly and the builds.

use anyhow::Result;
use sha2::{Digest as _, Sha256};

use crate::scenario4::image::pinned;

/// Bumped when the recipe changes in a way the pins do not show.
const RECIPE_VERSION: u32 = 1;

/// The two pinned versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pins {
    /// `github.com/NVIDIA/k8s-device-plugin` (`v0.19.3`).
    pub device_plugin: String,
    /// `sigs.k8s.io/node-feature-discovery` (`v0.17.3`).
    pub nfd: String,
}

impl Pins {
    /// The pins from `manifests/versions.toml`.
    pub fn read() -> Result<Pins> {
        let versions = xtask_support::tools::read_versions()?;
        Ok(Pins {
            device_plugin: pinned(&versions, "k8s_device_plugin")?,
            nfd: pinned(&versions, "node_feature_discovery")?,
        })
    }

    /// The images' cache key: the pins, the recipe version and the architecture.
    pub fn key(&self) -> String {
        let text = format!(
            "recipe {RECIPE_VERSION}\narch {}\nk8s_device_plugin {}\nnode_feature_discovery {}\n",
            image_builder::build::host_architecture(),
            self.device_plugin,
            self.nfd
        );
        format!("{:x}", Sha256::digest(text.as_bytes()))[..16].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_each_pin() {
        let pins = Pins {
            device_plugin: "v0.19.3".to_owned(),
            nfd: "v0.17.3".to_owned(),
        };
        let mut other = pins.clone();
        other.nfd = "v0.17.4".to_owned();
        assert_ne!(pins.key(), other.key());
        other = pins.clone();
        other.device_plugin = "v0.19.4".to_owned();
        assert_ne!(pins.key(), other.key());
        assert_eq!(pins.key(), pins.clone().key());
    }
}
