//! Shared helpers for the library's own integration tests: the built `.so` and required tools.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The cdylib cargo built beside this test (`target/<profile>/libnvidia_ml.so`, or the copy in
/// `deps/`); panics with the command to run when it is missing.
pub fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its own path");
    let deps = exe.parent().expect("tests live in target/<profile>/deps");
    let profile = deps.parent().expect("deps has a parent");
    [
        profile.join("libnvidia_ml.so"),
        deps.join("libnvidia_ml.so"),
    ]
    .into_iter()
    .find(|path| path.exists())
    .unwrap_or_else(|| {
        panic!(
            "libnvidia_ml.so is not built in {}: run `cargo build -p mock-nvml`",
            profile.display()
        )
    })
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
