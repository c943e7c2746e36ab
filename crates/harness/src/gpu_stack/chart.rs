//! The device plugin's Helm chart from its module, with NFD's chart from NFD's
//! module as its dependency, into `<cache>/charts/`, so `helm install` needs
//! no chart repository.
//!
//! The device plugin's `Chart.yaml` declares `node-feature-discovery` (alias
//! `nfd`, condition `nfd.enabled,gfd.enabled`) at an exact version from
//! NFD's chart repository; its module ships that release as a `.tgz` in
//! `charts/`. We replace it with NFD's chart from the pinned NFD module, whose
//! `Chart.yaml` carries a placeholder version (NFD's release stamps it), set
//! here to the declared one after checking that it is the pin: the pin in
//! `manifests/versions.toml` decides what NFD runs, chart and binaries alike.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use xshell::{cmd, Shell};

use super::go::{module_dir, DEVICE_PLUGIN_MODULE, NFD_MODULE};
use super::pins::Pins;
use crate::scenario4::image::cached;

/// The device plugin chart's directory in its module, and its name.
const DEVICE_PLUGIN_CHART: &str = "deployments/helm/nvidia-device-plugin";
/// NFD's chart directory in its module.
const NFD_CHART: &str = "deployment/helm/node-feature-discovery";
/// The dependency's chart name.
pub const NFD_CHART_NAME: &str = "node-feature-discovery";
/// Bumped when the assembly changes in a way the pins do not show.
const RECIPE_VERSION: u32 = 1;

/// The version at which `chart_yaml` (a `Chart.yaml`) depends on NFD's chart.
pub fn nfd_dependency_version(chart_yaml: &str) -> Result<String> {
    let chart: serde_yaml::Value =
        serde_yaml::from_str(chart_yaml).context("the device plugin's Chart.yaml is not YAML")?;
    chart
        .get("dependencies")
        .and_then(serde_yaml::Value::as_sequence)
        .into_iter()
        .flatten()
        .find(|dep| dep.get("name").and_then(serde_yaml::Value::as_str) == Some(NFD_CHART_NAME))
        .and_then(|dep| dep.get("version"))
        .and_then(serde_yaml::Value::as_str)
        .map(str::to_owned)
        .with_context(|| {
            format!("the device plugin's Chart.yaml has no {NFD_CHART_NAME} dependency")
        })
}

/// `chart_yaml` with its top-level `version:` replaced by `version`.
pub fn with_version(chart_yaml: &str, version: &str) -> Result<String> {
    let mut found = false;
    let lines: Vec<String> = chart_yaml
        .lines()
        .map(|line| {
            if line.starts_with("version:") {
                found = true;
                format!("version: {version}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    if !found {
        bail!("NFD's Chart.yaml has no top-level version");
    }
    Ok(lines.join("\n") + "\n")
}

/// The pin without its `v`, as charts spell versions.
fn chart_version(pin: &str) -> &str {
    pin.strip_prefix('v').unwrap_or(pin)
}

/// The chart directory, assembled once per pair of pins.
pub(super) fn ensure(sh: &Shell, cache: &Path, pins: &Pins) -> Result<PathBuf> {
    let key = format!(
        "nvidia-device-plugin-{}-nfd-{}-r{RECIPE_VERSION}",
        pins.device_plugin, pins.nfd
    );
    let dir = cached(&cache.join("charts"), &key, |out| assemble(sh, out, pins))?;
    Ok(dir.join("nvidia-device-plugin"))
}

fn assemble(sh: &Shell, out: &Path, pins: &Pins) -> Result<()> {
    let dp_module = module_dir(sh, DEVICE_PLUGIN_MODULE, &pins.device_plugin)?;
    let nfd_module = module_dir(sh, NFD_MODULE, &pins.nfd)?;
    let chart = out.join("nvidia-device-plugin");
    let source = dp_module.join(DEVICE_PLUGIN_CHART);
    cmd!(sh, "cp -R {source} {chart}").quiet().run()?;
    cmd!(sh, "chmod -R u+w {chart}").quiet().run()?;
    let chart_yaml = std::fs::read_to_string(chart.join("Chart.yaml"))
        .with_context(|| format!("cannot read {}/Chart.yaml", chart.display()))?;
    let wanted = nfd_dependency_version(&chart_yaml)?;
    if wanted != chart_version(&pins.nfd) {
        bail!(
            "the device plugin {} chart depends on {NFD_CHART_NAME} {wanted}, but [peers] \
             node_feature_discovery is {}: pin the version the chart declares",
            pins.device_plugin,
            pins.nfd
        );
    }
    let charts = chart.join("charts");
    // The release archive the module ships; NFD's module replaces it.
    for entry in
        std::fs::read_dir(&charts).with_context(|| format!("reading {}", charts.display()))?
    {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "tgz") {
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    let nfd_chart = charts.join(NFD_CHART_NAME);
    let nfd_source = nfd_module.join(NFD_CHART);
    cmd!(sh, "cp -R {nfd_source} {nfd_chart}").quiet().run()?;
    cmd!(sh, "chmod -R u+w {nfd_chart}").quiet().run()?;
    let nfd_yaml_path = nfd_chart.join("Chart.yaml");
    let nfd_yaml = std::fs::read_to_string(&nfd_yaml_path)
        .with_context(|| format!("cannot read {}", nfd_yaml_path.display()))?;
    std::fs::write(&nfd_yaml_path, with_version(&nfd_yaml, &wanted)?)
        .with_context(|| format!("cannot write {}", nfd_yaml_path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEVICE_PLUGIN_CHART_YAML: &str = "apiVersion: v2
name: nvidia-device-plugin
version: \"0.19.3\"
dependencies:
  - name: node-feature-discovery
    alias: nfd
    version: \"0.17.3\"
    condition: nfd.enabled,gfd.enabled
    repository: https://kubernetes-sigs.github.io/node-feature-discovery/charts
";

    #[test]
    fn the_nfd_dependency_version_is_read_from_the_chart() {
        assert_eq!(
            nfd_dependency_version(DEVICE_PLUGIN_CHART_YAML).expect("version"),
            "0.17.3"
        );
        assert!(nfd_dependency_version("apiVersion: v2\nname: x\n").is_err());
    }

    #[test]
    fn nfds_placeholder_version_is_replaced_and_nothing_else() {
        let text =
            "apiVersion: v2\nappVersion: v0.17.3\nname: node-feature-discovery\nversion: 0.2.1\n";
        let out = with_version(text, "0.17.3").expect("rewritten");
        assert_eq!(
            out,
            "apiVersion: v2\nappVersion: v0.17.3\nname: node-feature-discovery\nversion: 0.17.3\n"
        );
        assert!(with_version("name: x\n", "1").is_err());
    }

    #[test]
    fn a_pin_is_compared_without_its_v() {
        assert_eq!(chart_version("v0.17.3"), "0.17.3");
        assert_eq!(chart_version("0.17.3"), "0.17.3");
    }
}
