//! Shared helpers for the integration tests: where the built artifacts are,
//! and how to fail loudly when a prerequisite is missing.
//!
//! The tests never build anything themselves: `cargo xtask ci` (or
//! `cargo build --workspace`) builds the workspace first, and a test whose
//! artifact is missing fails with the command that builds it.

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The cargo profile directory the running test was built into (`target/debug`).
pub fn profile_dir() -> PathBuf {
    // The test executable lives in `<target>/<profile>/deps/<name>-<hash>`.
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A built workspace artifact (binary or library) in the profile directory.
///
/// Panics with the command to run when it has not been built: a missing
/// artifact is a failed prerequisite, never a silent skip.
pub fn artifact(file_name: &str, package: &str) -> PathBuf {
    let path = profile_dir().join(file_name);
    assert!(
        path.exists(),
        "{} is missing: build it first with `cargo build -p {package}` (or run `cargo xtask ci`)",
        path.display()
    );
    path
}

/// The mock NVML library as cargo builds it (`libnvidia_ml.so`).
pub fn mock_nvml_library() -> PathBuf {
    artifact("libnvidia_ml.so", "mock-nvml")
}

/// A directory holding the mock library under its real name, `libnvidia-ml.so.1`,
/// for `LD_LIBRARY_PATH` and `dlopen("libnvidia-ml.so.1")`.
pub fn mock_nvml_lib_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("cannot create a temp dir: {err}"));
    let link = dir.path().join("libnvidia-ml.so.1");
    std::os::unix::fs::symlink(mock_nvml_library(), &link)
        .unwrap_or_else(|err| panic!("cannot link {}: {err}", link.display()));
    dir
}

/// Fails the test, loudly, when an external program the test drives is absent.
pub fn require_program(program: &str, how_to_install: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    });
    match found {
        Some(path) => path,
        None => panic!("`{program}` is not on PATH: {how_to_install}"),
    }
}
