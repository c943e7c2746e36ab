//! Applies a [`Plan`] to the filesystem, idempotently, and removes the tree.
//!
//! Files and links are replaced by rename, so a reader (a container's
//! check-fabric, the NRI plugin) sees either the old or the new version, never
//! half a file. An entry that already matches the plan is left alone.

use std::{
    collections::HashSet,
    fs,
    io::{ErrorKind, Write},
    os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use node_layout::paths::Layout;
use rustix::fs::{makedev, mknodat, FileType, Mode, CWD};

use crate::plan::{owned_roots, Contents, Entry, Plan, DEVICE_MODE};

/// What applying a plan changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// Entries created or replaced.
    pub changed: usize,
    /// Entries already as planned.
    pub unchanged: usize,
    /// Stale entries removed.
    pub removed: usize,
}

/// Creates everything in the plan and removes what it says must not exist.
pub fn apply(plan: &Plan) -> Result<Applied> {
    let mut applied = Applied::default();
    for path in &plan.absent {
        if remove_any(path)? {
            applied.removed += 1;
        }
    }
    for entry in &plan.entries {
        if apply_entry(entry)? {
            applied.changed += 1;
        } else {
            applied.unchanged += 1;
        }
    }
    // Every planned path and its ancestors: what pruning must keep.
    let keep: HashSet<&Path> = plan
        .entries
        .iter()
        .flat_map(|entry| entry.path().ancestors())
        .collect();
    for dir in &plan.exclusive_dirs {
        applied.removed += prune(dir, &keep)?;
    }
    Ok(applied)
}

/// Writes `contents` to `path` atomically (temp file in the same directory, then rename).
///
/// Returns whether the file changed.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<bool> {
    if let Ok(meta) = fs::symlink_metadata(path) {
        if meta.is_file() && meta.mode() & 0o7777 == mode && meta.len() == contents.len() as u64 {
            let current =
                fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            if current == contents {
                return Ok(false);
            }
        }
    }
    let temp = temp_path(path);
    let result = (|| -> Result<()> {
        let mut file =
            fs::File::create(&temp).with_context(|| format!("cannot create {}", temp.display()))?;
        file.write_all(contents)
            .with_context(|| format!("cannot write {}", temp.display()))?;
        file.set_permissions(fs::Permissions::from_mode(mode))
            .with_context(|| format!("cannot set the mode of {}", temp.display()))?;
        // No fsync: rename already keeps readers from seeing half a file, and the
        // tree is restaged from scratch after a crash, so durability buys nothing.
        fs::rename(&temp, path)
            .with_context(|| format!("cannot rename {} to {}", temp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result.map(|()| true)
}

/// Removes the stager's part of the tree (`driver/`, `imex/`, `topology/`), leaving the root.
pub fn remove_tree(layout: &Layout) -> Result<usize> {
    let mut removed = 0;
    for path in owned_roots(layout) {
        if remove_any(&path)? {
            removed += 1;
        }
    }
    Ok(removed)
}

fn apply_entry(entry: &Entry) -> Result<bool> {
    match entry {
        Entry::Dir { path } => ensure_dir(path),
        Entry::File {
            path,
            contents,
            mode,
        } => {
            let bytes = match contents {
                Contents::Text(text) => text.as_bytes().to_vec(),
                Contents::Bytes(bytes) => bytes.clone(),
                Contents::CopyOf(source) => fs::read(source)
                    .with_context(|| format!("cannot read {} to stage it", source.display()))?,
            };
            write_atomic(path, &bytes, *mode)
        }
        Entry::Symlink { path, target } => ensure_symlink(path, target),
        Entry::CharDevice { path, major, minor } => ensure_char_device(path, *major, *minor),
    }
}

fn ensure_dir(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            if meta.mode() & 0o7777 == 0o755 {
                return Ok(false);
            }
        }
        Ok(_) => {
            remove_any(path)?;
            fs::create_dir_all(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
        }
        Err(_) => {
            fs::create_dir_all(path).with_context(|| format!("cannot create {}", path.display()))?
        }
    }
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(true)
}

fn ensure_symlink(path: &Path, target: &Path) -> Result<bool> {
    if let Ok(current) = fs::read_link(path) {
        if current == target {
            return Ok(false);
        }
    }
    let temp = temp_path(path);
    let _ = fs::remove_file(&temp);
    std::os::unix::fs::symlink(target, &temp)
        .with_context(|| format!("cannot create the link {}", temp.display()))?;
    if let Err(err) = fs::rename(&temp, path) {
        let _ = fs::remove_file(&temp);
        return Err(err)
            .with_context(|| format!("cannot rename {} to {}", temp.display(), path.display()));
    }
    Ok(true)
}

fn ensure_char_device(path: &Path, major: u32, minor: u32) -> Result<bool> {
    let dev = makedev(major, minor);
    if let Ok(meta) = fs::symlink_metadata(path) {
        if meta.file_type().is_char_device()
            && meta.rdev() == dev
            && meta.mode() & 0o7777 == DEVICE_MODE
        {
            return Ok(false);
        }
        remove_any(path)?;
    }
    mknodat(CWD, path, FileType::CharacterDevice, Mode::from_raw_mode(DEVICE_MODE), dev).with_context(|| {
        format!(
            "cannot create the character device {} ({major}:{minor}): the stager needs CAP_MKNOD (run it as root or privileged)",
            path.display()
        )
    })?;
    // mknod applies the umask; the nodes must be 0666 whatever it is.
    fs::set_permissions(path, fs::Permissions::from_mode(DEVICE_MODE))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(true)
}

/// Removes children of `dir` that are not in `keep`.
fn prune(dir: &Path, keep: &HashSet<&Path>) -> Result<usize> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(err).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut removed = 0;
    for child in entries {
        let child = child
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        if !keep.contains(child.as_path()) && remove_any(&child)? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Removes a file, link, node or directory tree; `false` when it did not exist.
fn remove_any(path: &Path) -> Result<bool> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err).with_context(|| format!("cannot stat {}", path.display())),
    };
    let result = if meta.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    result.with_context(|| format!("cannot remove {}", path.display()))?;
    Ok(true)
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    //! File-level behaviour that needs no privileges: atomic writes and idempotence.

    use super::*;

    #[test]
    fn write_atomic_replaces_and_reports_changes() {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let path = dir.path().join("topology.yaml");
        assert!(write_atomic(&path, b"one", 0o644).unwrap_or_else(|err| panic!("{err:#}")));
        assert!(!write_atomic(&path, b"one", 0o644).unwrap_or_else(|err| panic!("{err:#}")));
        assert!(write_atomic(&path, b"two", 0o644).unwrap_or_else(|err| panic!("{err:#}")));
        assert_eq!(fs::read(&path).unwrap_or_default(), b"two");
        let meta = fs::metadata(&path).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(meta.mode() & 0o7777, 0o644);
        let leftovers: Vec<_> = fs::read_dir(dir.path())
            .unwrap_or_else(|err| panic!("{err}"))
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name())
            .collect();
        assert_eq!(leftovers, ["topology.yaml"]);
    }

    #[test]
    fn write_atomic_fixes_a_wrong_mode() {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let path = dir.path().join("check-fabric");
        assert!(write_atomic(&path, b"x", 0o644).unwrap_or_else(|err| panic!("{err:#}")));
        assert!(write_atomic(&path, b"x", 0o755).unwrap_or_else(|err| panic!("{err:#}")));
        let meta = fs::metadata(&path).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(meta.mode() & 0o7777, 0o755);
    }

    #[test]
    fn symlinks_are_replaced_when_their_target_changes() {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let link = dir.path().join("libnvidia-ml.so.1");
        assert!(ensure_symlink(&link, Path::new("libnvidia-ml.so.1.0"))
            .unwrap_or_else(|err| panic!("{err:#}")));
        assert!(!ensure_symlink(&link, Path::new("libnvidia-ml.so.1.0"))
            .unwrap_or_else(|err| panic!("{err:#}")));
        assert!(ensure_symlink(&link, Path::new("libnvidia-ml.so.2.0"))
            .unwrap_or_else(|err| panic!("{err:#}")));
        assert_eq!(
            fs::read_link(&link).unwrap_or_default(),
            Path::new("libnvidia-ml.so.2.0")
        );
    }

    #[test]
    fn remove_tree_leaves_the_root_and_foreign_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let layout = Layout::new(dir.path().to_path_buf());
        fs::create_dir_all(layout.bin_dir()).unwrap_or_else(|err| panic!("{err}"));
        fs::create_dir_all(layout.legacy_topology_dir()).unwrap_or_else(|err| panic!("{err}"));
        fs::write(dir.path().join("foreign"), b"x").unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(
            remove_tree(&layout).unwrap_or_else(|err| panic!("{err:#}")),
            2
        );
        assert!(!layout.driver_dir().exists());
        assert!(dir.path().join("foreign").exists());
        assert_eq!(
            remove_tree(&layout).unwrap_or_else(|err| panic!("{err:#}")),
            0
        );
    }
}
