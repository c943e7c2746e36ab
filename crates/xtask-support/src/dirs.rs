//! Where `cargo xtask` writes: the one owner of the directory rules.
//!
//! - The cache directory is `$CDSIM_CACHE_DIR`, else `/var/cache/cdsim` for
//!   root, else `$XDG_CACHE_HOME/cdsim`, else `~/.cache/cdsim`.
//! - Everything xtask writes lives under it: `locks/` (one lock per cluster),
//!   `scratch/<cluster or context>/` (Helm values), `images/` (the built image
//!   archives), `bin/` (Go-installed tools, the runc wrapper), the node image's
//!   build outputs.
//! - Cargo's target directory is `$CARGO_TARGET_DIR` (relative: to the project
//!   root, as cargo reads it), else the project's `target/` when the project
//!   root is writable, else `<cache>/cargo-target`: nothing is written under
//!   a read-only project root (the Nix app runs xtask from the store).
//!
//! Nobody else spells these paths.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};

/// The system-wide cache directory root uses.
pub const ROOT_CACHE_DIR: &str = "/var/cache/cdsim";

/// The file whose presence marks the repository root: this crate's manifest.
const ROOT_MARKER: &str = "crates/xtask-support/Cargo.toml";

/// The repository root, resolved at run time ([`resolve_project_root`]).
///
/// `CDSIM_ROOT` overrides it: the Nix apps run a store-built xtask whose
/// manifest directory no longer exists, and point it at the flake source.
pub fn project_root() -> PathBuf {
    resolve_project_root(
        std::env::var_os("CDSIM_ROOT"),
        std::env::var_os("CARGO_MANIFEST_DIR"),
        std::env::current_dir().ok(),
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &|dir| dir.join(ROOT_MARKER).is_file(),
    )
}

/// The repository root rule: `CDSIM_ROOT` when set; else the nearest ancestor
/// holding [`ROOT_MARKER`] of the manifest directory cargo sets at run time
/// (`cargo run`, `cargo test`), then of the working directory; else two levels
/// above the manifest directory this crate was compiled from.
///
/// The compile-time path comes last because cargo reuses an artifact across
/// clones that share one `CARGO_TARGET_DIR`: baked in first, it would point
/// xtask at the other clone's tree.
pub fn resolve_project_root(
    cdsim_root: Option<OsString>,
    runtime_manifest_dir: Option<OsString>,
    current_dir: Option<PathBuf>,
    compiled_manifest_dir: &Path,
    is_root: &dyn Fn(&Path) -> bool,
) -> PathBuf {
    if let Some(root) = cdsim_root.filter(|it| !it.is_empty()) {
        return PathBuf::from(root);
    }
    let starts = runtime_manifest_dir
        .filter(|it| !it.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain(current_dir);
    for start in starts {
        if let Some(root) = start.ancestors().find(|dir| is_root(dir)) {
            return root.to_path_buf();
        }
    }
    compiled_manifest_dir
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The cache directory rule as a pure function of the environment.
pub fn resolve_cache_dir(
    cdsim_cache_dir: Option<OsString>,
    root: bool,
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf> {
    let set = |value: Option<OsString>| value.filter(|it| !it.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(cdsim_cache_dir) {
        return Ok(dir);
    }
    if root {
        return Ok(PathBuf::from(ROOT_CACHE_DIR));
    }
    // XDG: a relative XDG_CACHE_HOME is invalid and ignored.
    if let Some(dir) = set(xdg_cache_home).filter(|it| it.is_absolute()) {
        return Ok(dir.join("cdsim"));
    }
    if let Some(home) = set(home) {
        return Ok(home.join(".cache/cdsim"));
    }
    bail!(
        "cannot choose a cache directory: neither CDSIM_CACHE_DIR, XDG_CACHE_HOME nor HOME is set; \
         set CDSIM_CACHE_DIR to a writable directory"
    )
}

/// The cache directory for this process (not created).
pub fn cache_dir() -> Result<PathBuf> {
    resolve_cache_dir(
        std::env::var_os("CDSIM_CACHE_DIR"),
        is_root(),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

/// Creates `dir` (and parents), failing with what to do when it cannot.
pub fn ensure(dir: &Path) -> Result<PathBuf> {
    if let Err(err) = std::fs::create_dir_all(dir) {
        bail!("{}", not_writable_message(dir, &err.to_string()));
    }
    Ok(dir.to_owned())
}

/// The message for a cache directory that cannot be created or written.
pub fn not_writable_message(dir: &Path, err: &str) -> String {
    format!(
        "cannot create {}: {err}; set CDSIM_CACHE_DIR to a directory you can write \
         (the default is /var/cache/cdsim for root, ~/.cache/cdsim for other users)",
        dir.display()
    )
}

/// A subdirectory of the cache, created.
pub fn cache_subdir(name: &str) -> Result<PathBuf> {
    ensure(&cache_dir()?.join(name))
}

/// The runner locks' directory, created.
pub fn lock_dir() -> Result<PathBuf> {
    cache_subdir("locks")
}

/// Go-installed tools and the runc wrapper (not created).
pub fn bin_dir() -> Result<PathBuf> {
    Ok(cache_dir()?.join("bin"))
}

/// Scratch files of one cluster or context (Helm values), created.
pub fn scratch_dir(name: &str) -> Result<PathBuf> {
    ensure(&cache_dir()?.join("scratch").join(name))
}

/// The built image archives (not created).
pub fn images_dir() -> Result<PathBuf> {
    Ok(cache_dir()?.join("images"))
}

/// Whether this process may write into `dir`.
pub fn writable(dir: &Path) -> bool {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).is_ok()
}

/// The target directory rule as a pure function.
pub fn resolve_target_dir(
    cargo_target_dir: Option<OsString>,
    project_root: &Path,
    root_writable: bool,
    cache: &Path,
) -> PathBuf {
    match cargo_target_dir.filter(|it| !it.is_empty()) {
        Some(dir) => project_root.join(dir),
        None if root_writable => project_root.join("target"),
        None => cache.join("cargo-target"),
    }
}

/// Cargo's target directory for builds xtask runs and the artifacts it reads.
pub fn target_dir() -> Result<PathBuf> {
    let root = crate::project_root();
    let writable = writable(&root);
    let cache = if writable {
        PathBuf::new()
    } else {
        cache_dir().context("the project root is not writable")?
    };
    Ok(resolve_target_dir(
        std::env::var_os("CARGO_TARGET_DIR"),
        &root,
        writable,
        &cache,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(text: &str) -> Option<OsString> {
        Some(OsString::from(text))
    }

    #[test]
    fn the_project_root_is_the_workspace_root() {
        let manifest = project_root().join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("the root has a Cargo.toml");
        assert!(
            text.contains("[workspace]"),
            "{} is not the workspace manifest",
            manifest.display()
        );
    }

    /// Two clones sharing one target dir: the artifact was compiled in clone `a`,
    /// cargo runs it for clone `b`.
    #[test]
    fn the_project_root_is_resolved_at_run_time_not_compile_time() {
        let roots = [Path::new("/clones/a"), Path::new("/clones/b")];
        let is_root = |dir: &Path| roots.contains(&dir);
        let compiled = Path::new("/clones/a/crates/xtask-support");
        let resolve = |cdsim: Option<OsString>, manifest: Option<OsString>, cwd: Option<&str>| {
            resolve_project_root(cdsim, manifest, cwd.map(PathBuf::from), compiled, &is_root)
        };
        assert_eq!(
            resolve(None, os("/clones/b/xtask"), Some("/clones/a")),
            Path::new("/clones/b"),
            "cargo's run-time manifest dir comes first"
        );
        assert_eq!(
            resolve(None, None, Some("/clones/b/crates/topology/src")),
            Path::new("/clones/b"),
            "then the working directory"
        );
        assert_eq!(
            resolve(os("/nix/store/src"), os("/clones/b/xtask"), None),
            Path::new("/nix/store/src"),
            "CDSIM_ROOT overrides both"
        );
        assert_eq!(
            resolve(os(""), os("/elsewhere"), Some("/tmp")),
            Path::new("/clones/a"),
            "outside any clone: the compiled-in root"
        );
    }

    #[test]
    fn the_cache_dir_follows_the_documented_order() {
        assert_eq!(
            resolve_cache_dir(os("/c"), true, os("/x"), os("/h")).expect("set"),
            Path::new("/c")
        );
        assert_eq!(
            resolve_cache_dir(os(""), true, os("/x"), os("/h")).expect("root"),
            Path::new("/var/cache/cdsim")
        );
        assert_eq!(
            resolve_cache_dir(None, false, os("/x"), os("/h")).expect("xdg"),
            Path::new("/x/cdsim")
        );
        assert_eq!(
            resolve_cache_dir(None, false, os("rel"), os("/h")).expect("home"),
            Path::new("/h/.cache/cdsim"),
            "a relative XDG_CACHE_HOME is ignored"
        );
        assert_eq!(
            resolve_cache_dir(None, false, None, os("/h")).expect("home"),
            Path::new("/h/.cache/cdsim")
        );
    }

    #[test]
    fn no_cache_dir_at_all_names_the_variable_to_set() {
        let err = resolve_cache_dir(None, false, None, None).expect_err("nothing set");
        assert!(
            err.to_string()
                .contains("set CDSIM_CACHE_DIR to a writable directory"),
            "{err}"
        );
    }

    #[test]
    fn an_unwritable_cache_dir_names_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("file");
        std::fs::write(&file, "").expect("write");
        // A directory below a regular file cannot be created, even by root.
        let err = ensure(&file.join("sub")).expect_err("below a file");
        let message = err.to_string();
        assert!(
            message.contains("set CDSIM_CACHE_DIR to a directory you can write"),
            "{message}"
        );
        assert!(
            message.contains(&file.join("sub").display().to_string()),
            "{message}"
        );
    }

    #[test]
    fn the_target_dir_leaves_a_read_only_project_alone() {
        let root = Path::new("/store/cdsim");
        let cache = Path::new("/home/u/.cache/cdsim");
        assert_eq!(
            resolve_target_dir(os("/t"), root, false, cache),
            Path::new("/t")
        );
        assert_eq!(
            resolve_target_dir(os("tgt"), root, true, cache),
            Path::new("/store/cdsim/tgt"),
            "relative to the project root, as cargo reads it from there"
        );
        assert_eq!(
            resolve_target_dir(None, root, true, cache),
            Path::new("/store/cdsim/target")
        );
        assert_eq!(
            resolve_target_dir(None, root, false, cache),
            Path::new("/home/u/.cache/cdsim/cargo-target")
        );
    }
}
