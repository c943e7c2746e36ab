//! A test double of NVIDIA's `nvidia-imex` and `nvidia-imex-ctl` in NO GPU
//! mode, **for tests only**: scenario 2 runs against it where NVIDIA's
//! proprietary daemon is not available, and every report that used it says so.
//!
//! It behaves as NVIDIA's IMEX guide documents the two programs (config.html,
//! cmdservice.html, signals.html, connections.html; summarised in
//! `nvml-abi-and-imex.md` §8–§15): the daemon reads the `-c` config and the
//! nodes file, refuses to start without `--nogpu` when no GPU is present,
//! finds its own index by a local address, listens on `SERVER_PORT` (peers)
//! and `IMEX_CMD_PORT` (commands), connects to its peers with backoff, writes
//! its log, stats and `/var/run/nvidia-imex/persist.dat`, and shuts down on
//! SIGTERM. The ctl prints `READY` for `-q` and the documented JSON for
//! `-N -j`. The wire protocol between them is the double's own (line based);
//! only the two programs' documented surfaces mirror NVIDIA's.
//!
//! Where the guide leaves a default open, the double is stricter than the
//! real daemon may be, so that a config that works here does not depend on
//! an undocumented default: `IMEX_CMD_ENABLED` and `IMEX_CMD_PORT` must be set,
//! and `/var/run/nvidia-imex` must be creatable (its parent must exist).
//!
//! [`payload::write_dir`] lays the two programs out as a payload directory
//! with the real archive's layout, so `--imex <dir>` takes it unchanged.

pub mod clock;
pub mod config;
pub mod domain;
pub mod nodes;
pub mod payload;
pub mod wire;

use std::path::PathBuf;

/// Embedded in both programs and written into the payload, so a payload or a
/// binary can be recognised as the double (`grep -q` on the daemon).
pub const MARKER: &str = "cdsim-imex-test-double/1";

/// The version both programs report for a NO GPU node (`-N -j` `version`).
pub const NO_GPU_VERSION: &str = "NO_GPU";

/// Environment variable: a directory prefixed to the double's fixed paths
/// (`/var/run/nvidia-imex`, `/dev/nvidiactl`), so several doubles can run on
/// one host in tests. Unset in a container.
pub const ROOT_ENV: &str = "IMEX_DOUBLE_ROOT";

/// Environment variable: the first reconnect delay in milliseconds (default
/// 15000, then 2n+1 s: 15, 31, 63, … as the guide's backoff), for tests.
pub const BACKOFF_ENV: &str = "IMEX_DOUBLE_BACKOFF_MS";

/// Environment variable: milliseconds the daemon holds its start-up after
/// logging its configuration, before it reads and resolves its nodes file (the
/// step a slow resolver stretches), for tests of signals that land then.
pub const STARTUP_HOLD_ENV: &str = "IMEX_DOUBLE_STARTUP_HOLD_MS";

/// Environment variable of the ctl: `hang` (sleep forever), `fail` (exit 1
/// with a message) or `garbage` (print non-JSON, exit 0). A fault to inject
/// in tests; unset, the ctl behaves.
pub const CTL_FAULT_ENV: &str = "IMEX_DOUBLE_CTL_FAULT";

/// Why the double refuses to run without `--nogpu`.
pub fn no_gpu_mode_required() -> String {
    let ctl = fixed_path("/dev/nvidiactl");
    if ctl.exists() {
        "a GPU is present, but the IMEX test double runs only in NO GPU mode (--nogpu)".to_owned()
    } else {
        format!(
            "no NVIDIA GPU found ({} is absent); run with --nogpu for NO GPU mode",
            ctl.display()
        )
    }
}

/// `/var/run/nvidia-imex/persist.dat`: the nodes file's digest.
pub fn write_persist(digest: &str) -> Result<(), String> {
    let run_dir = fixed_path("/var/run/nvidia-imex");
    if !run_dir.is_dir() {
        std::fs::create_dir(&run_dir)
            .map_err(|e| format!("cannot create {} for persist.dat: {e}", run_dir.display()))?;
    }
    let persist = run_dir.join("persist.dat");
    std::fs::write(&persist, format!("{digest}\n"))
        .map_err(|e| format!("cannot write {}: {e}", persist.display()))
}

/// A fixed path of the daemon, below [`ROOT_ENV`] when set.
pub fn fixed_path(path: &str) -> PathBuf {
    match std::env::var_os(ROOT_ENV).filter(|it| !it.is_empty()) {
        Some(root) => PathBuf::from(root).join(path.trim_start_matches('/')),
        None => PathBuf::from(path),
    }
}

/// Everything the double's library can report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A config line is neither a comment, blank, nor `KEY=VALUE`.
    #[error("{path}:{line}: expected KEY=VALUE, found {text:?}")]
    ConfigLine {
        /// The config file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The offending line.
        text: String,
    },
    /// A key has a value of the wrong kind.
    #[error("{path}: {key}={value:?} is not {expected}")]
    ConfigValue {
        /// The config file.
        path: String,
        /// The key.
        key: String,
        /// Its value.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A key the double needs is not set.
    #[error("{path}: {key} is not set; {why}")]
    ConfigMissing {
        /// The config file.
        path: String,
        /// The key.
        key: String,
        /// Why it is needed.
        why: &'static str,
    },
    /// A nodes-file entry does not resolve.
    #[error("cannot resolve node config entry '{entry}': {reason}")]
    Resolve {
        /// The entry.
        entry: String,
        /// The resolver's message.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A wire message could not be parsed.
    #[error("unexpected message from the daemon: {0:?}")]
    Wire(String),
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
