//! Staging YAML for the tests that load the mock library: it reads only the staged (compact
//! binary) profile and topology, which the stager writes on a node. One helper for every test,
//! through the same encoders the stager uses (`nvml_profile::staged`, `topology::staged`).

use std::path::{Path, PathBuf};

/// The staged form of a YAML profile (its `system.num_devices` kept); fails the test when the
/// YAML is not a valid profile.
#[track_caller]
pub fn profile_bytes(yaml: &str) -> Vec<u8> {
    let profile = nvml_profile::Profile::parse(yaml)
        .unwrap_or_else(|err| panic!("not a valid profile: {err}"));
    nvml_profile::staged::encode(&profile)
}

/// The staged form of a YAML topology document; fails the test when it is not valid.
#[track_caller]
pub fn topology_bytes(yaml: &str) -> Vec<u8> {
    let topology =
        topology::parse(yaml).unwrap_or_else(|err| panic!("not a valid topology: {err}"));
    topology::staged::encode(&topology)
}

/// Writes the staged form of the YAML profile at `yaml` to `out` and returns `out`.
#[track_caller]
pub fn stage_profile(yaml: &Path, out: &Path) -> PathBuf {
    write(out, &profile_bytes(&read(yaml)))
}

/// Writes the staged form of the YAML topology at `yaml` to `out` and returns `out`.
#[track_caller]
pub fn stage_topology(yaml: &Path, out: &Path) -> PathBuf {
    write(out, &topology_bytes(&read(yaml)))
}

#[track_caller]
fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

#[track_caller]
fn write(out: &Path, bytes: &[u8]) -> PathBuf {
    std::fs::write(out, bytes)
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", out.display()));
    out.to_owned()
}
