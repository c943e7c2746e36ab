//! `nvml-mock-stager nvidia-smi ARGS…`: the node's staged nvidia-smi, as a node's admin runs the
//! driver's. It runs on the staged library (`LD_LIBRARY_PATH` the staged lib dir), which finds
//! the node's profile and MIG state file from its own place in the driver root: a partition made
//! here is the node's, which every consumer on the node sees (`node_layout::mig_state`). How
//! `cargo xtask` partitions a tray's GPU (scenario 5's MIG row), through an exec in the node's
//! stager container. The exec keeps stdio and the exit code.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, ExitCode};

use node_layout::paths::{Layout, STAGER_MOUNT};

/// Replaces this process with the staged nvidia-smi and `args`; returns only on failure.
pub fn exec(args: Vec<OsString>) -> ExitCode {
    let layout = Layout::new(Path::new(STAGER_MOUNT).to_path_buf());
    let smi = layout.nvidia_smi();
    if !smi.is_file() {
        eprintln!(
            "nvml-mock-stager nvidia-smi: {} is not staged on this node (is the stager running?)",
            smi.display()
        );
        return ExitCode::FAILURE;
    }
    let err = Command::new(&smi)
        .args(args)
        .env("LD_LIBRARY_PATH", layout.lib_dir())
        .exec();
    eprintln!("nvml-mock-stager nvidia-smi: exec {}: {err}", smi.display());
    ExitCode::FAILURE
}
