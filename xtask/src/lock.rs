//! One runner per cluster name: an exclusive `flock` on
//! `<dir>/<cluster>.lock` whose content names the holder.
//!
//! The lock dies with the process (the kernel drops it), so a killed run never
//! leaves a stale lock behind; the next run simply takes it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A held runner lock; dropping it releases the lock.
#[derive(Debug)]
pub struct RunnerLock {
    file: File,
    path: PathBuf,
}

impl RunnerLock {
    /// Takes the lock for `cluster`, or fails naming the current holder.
    pub fn acquire(dir: &Path, cluster: &str, command: &str) -> anyhow::Result<RunnerLock> {
        if let Err(err) = std::fs::create_dir_all(dir) {
            anyhow::bail!(
                "{}",
                crate::dirs::not_writable_message(dir, &err.to_string())
            );
        }
        let path = dir.join(format!("{cluster}.lock"));
        let mut file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
        {
            Ok(file) => file,
            Err(err) => anyhow::bail!(
                "cannot open the lock file {}: {err}; set CDSIM_CACHE_DIR to a directory you can write \
                 (locks live in its locks/)",
                path.display()
            ),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "an unknown process"
                } else {
                    holder
                };
                anyhow::bail!(
                    "another run holds cluster `{cluster}`: {holder}; wait for it to finish (lock file {})",
                    path.display()
                );
            }
            Err(TryLockError::Error(err)) => {
                anyhow::bail!("cannot lock {}: {err}", path.display())
            }
        }
        let stamp = format!("pid {} running `{command}`\n", std::process::id());
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(stamp.as_bytes()))
            .and_then(|()| file.flush());
        if let Err(err) = written {
            anyhow::bail!("cannot write the lock file {}: {err}", path.display());
        }
        Ok(RunnerLock { file, path })
    }

    /// Where the lock lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunnerLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::assert_contains;

    #[test]
    fn a_second_runner_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = RunnerLock::acquire(dir.path(), "demo", "cargo xtask demo").expect("free");
        let err = RunnerLock::acquire(dir.path(), "demo", "cargo xtask up").expect_err("held");
        let message = err.to_string();
        let pid = std::process::id();
        assert_contains(&message, &format!("pid {pid} running `cargo xtask demo`"));
        assert_contains(&message, "another run holds cluster `demo`");

        // Other cluster names are independent.
        let other =
            RunnerLock::acquire(dir.path(), "other", "cargo xtask demo").expect("independent");
        drop(other);

        drop(first);
        let again = RunnerLock::acquire(dir.path(), "demo", "cargo xtask up").expect("released");
        assert!(again.path().ends_with("demo.lock"));
    }

    #[test]
    fn a_lock_held_by_another_process_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("demo.lock");
        std::fs::write(&path, "pid 1 running `elsewhere`\n").expect("write");
        // flock(1) from util-linux holds the lock in a separate process.
        let mut child = std::process::Command::new("flock")
            .arg(&path)
            .args(["sleep", "30"])
            .spawn()
            .expect("flock(1) from util-linux is needed for this test: apt-get install util-linux");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let refused = loop {
            match RunnerLock::acquire(dir.path(), "demo", "test") {
                Err(err) => break err.to_string(),
                Ok(lock) => {
                    drop(lock);
                    assert!(
                        std::time::Instant::now() < deadline,
                        "flock never took the lock"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            refused.contains("another run holds cluster `demo`"),
            "{refused}"
        );
    }

    #[test]
    fn an_unusable_lock_location_names_the_variable_to_set() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A directory where the lock file goes: opening it for writing fails, even as root.
        std::fs::create_dir(dir.path().join("demo.lock")).expect("mkdir");
        let err = RunnerLock::acquire(dir.path(), "demo", "test").expect_err("a directory");
        assert!(
            err.to_string()
                .contains("set CDSIM_CACHE_DIR to a directory you can write"),
            "{err}"
        );
        // A lock directory below a regular file cannot be created.
        let file = dir.path().join("file");
        std::fs::write(&file, "").expect("write");
        let err =
            RunnerLock::acquire(&file.join("locks"), "demo", "test").expect_err("below a file");
        assert!(
            err.to_string()
                .contains("set CDSIM_CACHE_DIR to a directory you can write"),
            "{err}"
        );
    }
}
