//! Shared helpers for the library's own integration tests: the built `.so` and required tools.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The cdylib in this test's profile (`target/<profile>/libnvidia_ml.so`), brought up to date
/// once per test process by `cargo build -p mock-nvml` in that profile: the crate is a `cdylib`
/// only, which `cargo test` does not build for its integration tests. Panics with the command to
/// run when that fails.
pub fn library() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build_library).clone()
}

fn build_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let deps = exe.parent().expect("tests live in target/<profile>/deps");
    let profile_dir = deps.parent().expect("deps has a parent");
    let profile = match profile_dir.file_name().and_then(|name| name.to_str()) {
        // `cargo bench` builds the `bench` profile into `release/`.
        Some("debug") => "dev",
        Some(name) => name,
        None => panic!("no profile directory above {}", exe.display()),
    };
    // `target/<triple>/<profile>` when the tests were built with `--target` (as Nix builds
    // them, into a target directory cargo did not create and so did not mark with
    // CACHEDIR.TAG): the directory above the profile is then named by the host triple.
    let above = profile_dir.parent().expect("a target dir");
    let host = host_triple();
    let triple = above
        .file_name()
        .and_then(|name| name.to_str())
        .filter(|name| Some(*name) == host.as_deref());
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .args([
            "build",
            "--quiet",
            "-p",
            "mock-nvml",
            "--lib",
            "--profile",
            profile,
        ])
        .current_dir(repo_root());
    if let Some(triple) = triple {
        command.args(["--target", triple]);
    }
    let status = command.status();
    let library = profile_dir.join("libnvidia_ml.so");
    match status {
        Ok(status) if status.success() && library.exists() => library,
        outcome => panic!(
            "building libnvidia_ml.so into {} failed ({outcome:?}): run `cargo build -p mock-nvml --profile {profile}`",
            profile_dir.display()
        ),
    }
}

/// The host's target triple, from `rustc -vV` (`RUSTC` if set).
fn host_triple() -> Option<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
}

/// A directory holding the library as `libnvidia-ml.so.1`, for `LD_LIBRARY_PATH`.
pub fn library_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::os::unix::fs::symlink(library(), dir.path().join("libnvidia-ml.so.1"))
        .expect("symlink the library");
    dir
}

/// The path of a program on `PATH`; panics with how to install it when absent.
pub fn require(program: &str, install: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(program))
                .find(|path| path.is_file())
        })
        .unwrap_or_else(|| panic!("`{program}` is not on PATH and this test needs it: {install}"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
