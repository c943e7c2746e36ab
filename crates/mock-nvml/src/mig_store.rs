//! Where the MIG partition lives: the node's MIG state file (`node_layout::mig_state`), shared by
//! every process that loads the library, as the driver holds MIG state for the whole node.
//!
//! The file is `MOCK_NVML_MIG_STATE`, else `config/mig-state` of the driver root the library was
//! loaded from. Readers read it whole (no lock: writers replace it by rename, so a reader sees
//! the old partition or the new one, never half of one). A writer takes an exclusive `flock` on
//! the lock file beside it, reads the file again, applies its change (a pure function of
//! [`crate::partition`]), writes a temporary file and renames it over the state file, then lets
//! the lock go; two creators therefore cannot both take the same slices, and a writer that dies
//! mid-change (its lock released by the kernel) leaves the old file whole. A missing file is the
//! profiles' modes with no instances.
//!
//! Without either path (a library outside a driver root with no `MOCK_NVML_MIG_STATE`), the
//! partition lives in this process only, and still survives `nvmlShutdown`/`nvmlInit`.

use std::{
    fs::{File, OpenOptions},
    io::{ErrorKind, Write as _},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, OnceLock,
    },
};

use node_layout::{
    env::MOCK_NVML_MIG_STATE,
    mig_state::{self, MigState},
    paths::MIG_STATE_IN_DRIVER,
};

use crate::abi::{self, NvmlReturn};

/// Where this process keeps the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The shared state file.
    File(PathBuf),
    /// This process's memory.
    Memory,
}

/// The partition when [`Location::Memory`].
static MEMORY: Mutex<MigState> = Mutex::new(MigState { gpus: Vec::new() });
/// The driver root, looked up once per process (it reads `/proc/self/maps`).
static DRIVER_ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
/// One warning per process for an unreadable file.
static WARNED: AtomicBool = AtomicBool::new(false);

/// `MOCK_NVML_MIG_STATE`, else the driver root's state file, else this process's memory.
pub fn location() -> Location {
    if let Some(path) = std::env::var_os(MOCK_NVML_MIG_STATE).filter(|value| !value.is_empty()) {
        return Location::File(PathBuf::from(path));
    }
    match DRIVER_ROOT.get_or_init(crate::locate::driver_root) {
        Some(root) => Location::File(root.join(MIG_STATE_IN_DRIVER)),
        None => Location::Memory,
    }
}

/// The partition as it is now.
pub fn read() -> Result<MigState, NvmlReturn> {
    match location() {
        Location::File(path) => read_file(&path),
        Location::Memory => Ok(memory().clone()),
    }
}

/// Applies `change` to the partition under the writers' lock and stores the result if it
/// succeeded and changed anything; a failed change stores nothing.
pub fn update<T>(
    change: impl FnOnce(&mut MigState) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    match location() {
        Location::File(path) => update_file(&path, change),
        Location::Memory => {
            let mut state = memory();
            let mut next = state.clone();
            let value = change(&mut next)?;
            *state = next;
            Ok(value)
        }
    }
}

fn memory() -> std::sync::MutexGuard<'static, MigState> {
    // Every change is one assignment of a finished state, so a poisoned lock holds a whole one.
    MEMORY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn update_file<T>(
    path: &Path,
    change: impl FnOnce(&mut MigState) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(mig_state::lock_path(path))
        .map_err(|err| io_code(path, &err))?;
    lock.lock().map_err(|err| io_code(path, &err))?;
    let mut state = read_file(path)?;
    let before = state.clone();
    let value = change(&mut state)?;
    if state != before {
        replace(path, &mig_state::format(&state)).map_err(|err| io_code(path, &err))?;
    }
    drop(lock);
    Ok(value)
}

/// Writes `text` to a temporary file beside `path`, flushed, and renames it over `path`.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let temp = mig_state::temp_path(path, std::process::id());
    let result = (|| {
        let mut file = File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_data()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// The file's partition; a missing file is an empty one. Anything unreadable (not a regular
/// file, too large, not the format) is UNKNOWN, with one warning per process.
fn read_file(path: &Path) -> Result<MigState, NvmlReturn> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(MigState::default()),
        Err(err) => return Err(io_code(path, &err)),
    };
    if !metadata.is_file() || metadata.len() > mig_state::MAX_FILE_BYTES {
        warn(path, "not a regular file, or over the size limit");
        return Err(abi::ERROR_UNKNOWN);
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(MigState::default()),
        Err(err) => return Err(io_code(path, &err)),
    };
    mig_state::parse(&text).map_err(|err| {
        warn(path, &err.to_string());
        abi::ERROR_UNKNOWN
    })
}

/// NO_PERMISSION for a state file this process may not write (a read-only mount, another
/// user's file: the real calls need a privileged user), UNKNOWN for any other failure.
fn io_code(path: &Path, err: &std::io::Error) -> NvmlReturn {
    match err.kind() {
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => abi::ERROR_NO_PERMISSION,
        _ => {
            warn(path, &err.to_string());
            abi::ERROR_UNKNOWN
        }
    }
}

fn warn(path: &Path, what: &str) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        eprintln!("[MOCK_NVML WARNING] MIG state {}: {what}", path.display());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use node_layout::mig_state::Mode;

    use super::*;

    #[test]
    fn a_file_is_changed_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mig-state");
        assert_eq!(read_file(&path), Ok(MigState::default()), "missing: empty");
        let modes = (Mode::Disabled, Mode::Disabled);
        update_file(&path, |state| {
            state.gpu_mut(2, modes).current = Mode::Enabled;
            Ok(())
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "gpu=2 current=1 pending=0\n");
        // A failed change stores nothing, even what it changed before failing.
        let failed: Result<(), _> = update_file(&path, |state| {
            state.gpu_mut(3, modes);
            Err(abi::ERROR_INSUFFICIENT_RESOURCES)
        });
        assert_eq!(failed, Err(abi::ERROR_INSUFFICIENT_RESOURCES));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        // What a writer that died before its rename leaves behind is never read.
        std::fs::write(mig_state::temp_path(&path, 1), "gi half").unwrap();
        assert_eq!(read_file(&path).unwrap().gpus.len(), 1);
        assert!(mig_state::lock_path(&path).is_file());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .filter(|name| name.to_string_lossy().contains(".tmp.") && name != "mig-state.tmp.1")
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_corrupt_file_is_unknown_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mig-state");
        std::fs::write(&path, "gi gpu=0 id=1 profile=19 start=0 size=1\n").unwrap();
        assert_eq!(read_file(&path), Err(abi::ERROR_UNKNOWN));
        let result = update_file(&path, |state| {
            state.gpus.clear();
            Ok(())
        });
        assert_eq!(result, Err(abi::ERROR_UNKNOWN));
        assert!(std::fs::read_to_string(&path).unwrap().starts_with("gi "));
    }
}
