//! `nvml-mock-stager compile-profile FILE.yaml [--num-devices N] --out F` and
//! `compile-topology FILE.yaml --out F`: the staged (compact binary) profile or topology the mock
//! library reads, for use outside a cluster (`MOCK_NVML_CONFIG`, `MOCK_TOPOLOGY_CONFIG`).
//!
//! The YAML is parsed and validated as the stager does on a node, then written with
//! `nvml_profile::staged::encode` / `topology::staged::encode`, atomically.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Parser;

use crate::stage;

/// Stages a YAML GPU profile for the mock library (`MOCK_NVML_CONFIG`).
#[derive(Debug, Parser)]
#[command(name = "nvml-mock-stager compile-profile", about, long_about = None)]
pub struct ProfileArgs {
    /// The YAML profile (e.g. manifests/helm/nvml-mock/profiles/gb200.yaml).
    profile: PathBuf,
    /// Show only the first N GPUs (`system.num_devices`); default: the profile's own.
    #[arg(long)]
    num_devices: Option<u32>,
    /// Where to write the staged profile.
    #[arg(long)]
    out: PathBuf,
}

/// Stages a YAML topology document for the mock library (`MOCK_TOPOLOGY_CONFIG`).
#[derive(Debug, Parser)]
#[command(name = "nvml-mock-stager compile-topology", about, long_about = None)]
pub struct TopologyArgs {
    /// The YAML topology document (`version: 1`, `domains: [...]`).
    topology: PathBuf,
    /// Where to write the staged topology.
    #[arg(long)]
    out: PathBuf,
}

/// The staged form of a YAML profile, sized to `num_devices` when given.
pub fn profile(yaml: &str, num_devices: Option<u32>) -> Result<Vec<u8>> {
    let mut profile = nvml_profile::Profile::parse(yaml)?;
    if let Some(count) = num_devices {
        profile = profile.with_num_devices(count)?;
    }
    Ok(nvml_profile::staged::encode(&profile))
}

/// The staged form of a YAML topology document.
pub fn topology(yaml: &str) -> Result<Vec<u8>> {
    Ok(topology::staged::encode(&topology::parse(yaml)?))
}

/// Runs `compile-profile` with the arguments after the subcommand; returns what was done.
pub fn run_profile(args: impl IntoIterator<Item = String>) -> Result<String> {
    let args = ProfileArgs::parse_from(args);
    let yaml = read(&args.profile)?;
    let bytes = profile(&yaml, args.num_devices)
        .with_context(|| format!("{}: not a valid profile", args.profile.display()))?;
    write(&args.out, &bytes, "profile")
}

/// Runs `compile-topology` with the arguments after the subcommand; returns what was done.
pub fn run_topology(args: impl IntoIterator<Item = String>) -> Result<String> {
    let args = TopologyArgs::parse_from(args);
    let yaml = read(&args.topology)?;
    let bytes = topology(&yaml)
        .with_context(|| format!("{}: not a valid topology", args.topology.display()))?;
    write(&args.out, &bytes, "topology")
}

fn read(path: &std::path::Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn write(out: &std::path::Path, bytes: &[u8], what: &str) -> Result<String> {
    stage::write_atomic(out, bytes, 0o644)
        .with_context(|| format!("cannot write {}", out.display()))?;
    Ok(format!(
        "staged the {what} to {} ({} bytes)",
        out.display(),
        bytes.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_compiles_to_what_the_library_decodes_sized_as_asked() {
        let bytes = profile(nvml_profile::GB200, Some(2)).unwrap_or_else(|err| panic!("{err}"));
        let decoded = nvml_profile::staged::decode(&bytes).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(decoded.device_count(), 2);
        let full =
            nvml_profile::Profile::parse(nvml_profile::GB200).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            nvml_profile::staged::decode(&profile(nvml_profile::GB200, None).unwrap_or_default())
                .ok(),
            Some(full)
        );
        let err = profile(nvml_profile::GB200, Some(5)).expect_err("gb200 has 4 GPUs");
        assert!(err.to_string().contains("cannot show 5 GPU(s)"), "{err}");
        assert!(profile("version: 1\n", None).is_err());
    }

    #[test]
    fn a_topology_compiles_and_an_invalid_one_is_refused() {
        let yaml = topology::demo(&["a".to_owned(), "b".to_owned()]).to_yaml();
        let bytes = topology(&yaml).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            topology::staged::decode(&bytes).ok(),
            topology::parse(&yaml).ok()
        );
        let err = topology("version: 2\n").expect_err("version 2");
        assert!(
            err.to_string().contains("unsupported topology version"),
            "{err}"
        );
    }

    #[test]
    fn run_writes_the_file_atomically_and_says_so() {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let yaml = dir.path().join("gb200.yaml");
        std::fs::write(&yaml, nvml_profile::GB200).unwrap_or_else(|err| panic!("{err}"));
        let out = dir.path().join("profile.bin");
        let args = ["compile-profile", "--num-devices", "1", "--out"]
            .into_iter()
            .map(str::to_owned)
            .chain([out.display().to_string(), yaml.display().to_string()]);
        let done = run_profile(args).unwrap_or_else(|err| panic!("{err:#}"));
        assert!(done.starts_with("staged the profile to "), "{done}");
        let bytes = std::fs::read(&out).unwrap_or_else(|err| panic!("{err}"));
        let decoded = nvml_profile::staged::decode(&bytes).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(decoded.device_count(), 1);
    }
}
