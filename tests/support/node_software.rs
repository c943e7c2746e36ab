//! What the tests that run NVIDIA's node software as real peers share: the cache their Go
//! outputs live in, the peers snapshots (checked against their pinned sha256), and a staged
//! driver tree made by the real stager.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sha2::{Digest as _, Sha256};

use crate::{artifact, checked, repo_root, stager_input_args};

/// `${CDSIM_CACHE_DIR:-/var/cache/cdsim}`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("CDSIM_CACHE_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from("/var/cache/cdsim"), PathBuf::from)
}

/// `<cache>/go/<key>/<binary>`, built by `build(dir)` into a fresh directory and renamed into
/// place when it is missing (so an interrupted build never leaves a half binary behind).
pub fn cached_go_binary(key: &str, binary: &str, build: impl FnOnce(&Path)) -> PathBuf {
    let dir = cache_dir().join("go").join(key);
    let path = dir.join(binary);
    if path.is_file() {
        return path;
    }
    let parent = cache_dir().join("go");
    std::fs::create_dir_all(&parent)
        .unwrap_or_else(|err| panic!("cannot create {}: {err}", parent.display()));
    let staging = tempfile::tempdir_in(&parent)
        .unwrap_or_else(|err| panic!("cannot create a temp dir in {}: {err}", parent.display()));
    let started = Instant::now();
    build(staging.path());
    eprintln!(
        "built {binary} ({key}) in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        staging.path().join(binary).is_file(),
        "the build of {key} wrote no {binary}"
    );
    let built = staging.keep();
    match std::fs::rename(&built, &dir) {
        Ok(()) => {}
        // Another test process won the race: use its copy.
        Err(_) if path.is_file() => {
            let _ = std::fs::remove_dir_all(&built);
        }
        Err(err) => panic!(
            "cannot move {} to {}: {err}",
            built.display(),
            dir.display()
        ),
    }
    path
}

/// Where the peers snapshots are looked for, in order: `CDSIM_PEERS_DIR`, `../shared/peers`
/// beside the clone, `<cache>/peers`.
pub fn peer_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("CDSIM_PEERS_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.push(repo_root().join("../shared/peers"));
    dirs.push(cache_dir().join("peers"));
    dirs
}

/// The peers snapshot `file` (see `../shared/peers/README.md`) in the first of [`peer_dirs`]
/// holding it; it must have the pinned `sha256`.
pub fn peer_snapshot(file: &str, sha256: &str) -> PathBuf {
    let candidates = peer_dirs();
    let path = candidates
        .iter()
        .map(|dir| dir.join(file))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{file} (see ../shared/peers/README.md) is in none of {candidates:?}: \
                 set CDSIM_PEERS_DIR to the directory holding it"
            )
        });
    let mut reader = std::fs::File::open(&path)
        .unwrap_or_else(|err| panic!("cannot open {}: {err}", path.display()));
    let mut hasher = Sha256::new();
    std::io::copy(&mut reader, &mut hasher)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let actual = format!("{:x}", hasher.finalize());
    assert_eq!(
        actual,
        sha256,
        "{} is not the pinned snapshot (manifests/versions.toml): replace it with the one ../shared/peers/README.md names",
        path.display()
    );
    path
}

/// A staged tree in a temp dir, as the stager writes it on a node.
pub struct Staged {
    /// The stager's overlay directory (`driver/`, `imex/`, ...).
    pub dir: tempfile::TempDir,
}

impl Staged {
    /// The driver root (`<overlay>/driver`).
    pub fn driver(&self) -> PathBuf {
        self.dir.path().join("driver")
    }

    /// The directory holding `libnvidia-ml.so.1`.
    pub fn lib_dir(&self) -> PathBuf {
        self.driver().join("usr/lib64")
    }

    /// The staged `/proc/devices` (with the IMEX channel major).
    pub fn proc_devices(&self) -> PathBuf {
        self.dir.path().join("imex/proc-devices")
    }
}

/// Runs the real stager once (`--once --no-label`) for `node` with the topology document
/// `topology_yaml` and the YAML profile at `profile`, into a fresh temp dir (root: it creates
/// character devices).
pub fn stage_tree(topology_yaml: &str, node: &str, profile: &Path) -> Staged {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("cannot create a temp dir: {err}"));
    let topology_file = dir.path().join("topology-source.yaml");
    std::fs::write(&topology_file, topology_yaml)
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", topology_file.display()));
    let overlay = dir.path().to_path_buf();
    checked(
        Command::new(artifact("nvml-mock-stager", "node-stager"))
            .arg(format!("--node-name={node}"))
            .arg(format!("--overlay-dir={}", overlay.display()))
            .args(
                stager_input_args(artifact)
                    .into_iter()
                    .filter(|arg| !arg.starts_with("--profile=")),
            )
            .arg(format!("--profile={}", profile.display()))
            .arg(format!("--topology-file={}", topology_file.display()))
            .args([
                "--imex-channels",
                "--channel-count=8",
                "--no-label",
                "--once",
            ])
            .output(),
        "the stager",
    );
    Staged { dir }
}
