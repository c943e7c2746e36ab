//! The tool helpers both xtask and the node image use: the pins file, a
//! program on `PATH` or in the sbin directories, an exclusive file lock.
//! Which tools exist, their tested versions and how they are installed stay
//! in xtask (`xtask/src/tools.rs`).

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{format_err, Context, Result};

/// The parsed `manifests/versions.toml`.
pub fn read_versions() -> Result<toml::Table> {
    let path = crate::project_root().join("manifests/versions.toml");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_versions(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Parses the pins file.
pub fn parse_versions(text: &str) -> Result<toml::Table> {
    text.parse::<toml::Table>()
        .map_err(|err| format_err!("invalid TOML: {err}"))
}

/// An exclusive lock on `path` (created if needed), held until the file is
/// dropped; waits, saying so, when another process holds it.
pub fn lock_file(path: &Path) -> Result<fs::File> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(fs::TryLockError::WouldBlock) => {
            eprintln!("==> another run holds {}: waiting for it", path.display());
        }
        Err(fs::TryLockError::Error(err)) => {
            return Err(err).with_context(|| format!("locking {}", path.display()));
        }
    }
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

/// `name` on `PATH` only.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// `name` on `PATH` or in the sbin directories (which a non-login PATH may lack).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_file_excludes_a_second_holder_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let held = lock_file(&path).expect("first lock");
        let other = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        assert!(matches!(
            other.try_lock(),
            Err(fs::TryLockError::WouldBlock)
        ));
        drop(held);
        other.try_lock().expect("free after the holder is dropped");
    }
}
