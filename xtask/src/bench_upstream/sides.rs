//! What the comparison measures and with what: the two libraries
//! ([`Side`]), the demo topology as each reads it ([`Topologies`]), and the
//! probe programs ([`Probes`]); below the flow, the builds and the rows.

use std::path::PathBuf;

/// One library under test, with what it needs in its environment.
pub struct Side {
    pub name: &'static str,
    pub library: PathBuf,
    pub lib_dir: PathBuf,
    pub check_fabric: PathBuf,
    pub profile: PathBuf,
    /// The demo topology in the form this side reads: YAML for upstream, staged for ours.
    pub topology: PathBuf,
}

/// The demo topology as each side reads it.
pub struct Topologies {
    /// YAML, for upstream's mock.
    pub yaml: PathBuf,
    /// Staged (`topology::staged`), for ours.
    pub staged: PathBuf,
}

/// The programs that measure both sides.
pub struct Probes {
    /// `xtask/bench/driver.c`, built.
    pub driver: PathBuf,
    pub go_probe: PathBuf,
    pub python: PathBuf,
    pub python_probe: PathBuf,
    /// The floors: what both sides pay before any NVML (process spawn, the Go runtime's start).
    pub floor_c: PathBuf,
    pub floor_go: PathBuf,
}
