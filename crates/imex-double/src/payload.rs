//! The double as a payload directory with the real archive's layout
//! (`usr/bin/nvidia-imex`, `usr/bin/nvidia-imex-ctl`,
//! `etc/nvidia-imex/config.cfg`, `LICENSE`,
//! `usr/share/doc/third-party-notices.txt`), so `--imex <dir>` takes it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// The package-shaped config the payload ships.
pub const CONFIG: &str = include_str!("../payload/config.cfg");
/// The payload's LICENSE (says it is the test double).
pub const LICENSE: &str = include_str!("../payload/LICENSE");
/// The payload's third-party notices.
pub const NOTICES: &str = include_str!("../payload/third-party-notices.txt");
/// The marker file inside the payload: its presence names the double.
pub const MARKER_FILE: &str = "IMEX-TEST-DOUBLE";

/// Writes the payload into `out` (created; existing files replaced) from the
/// two built programs; returns the files written.
pub fn write_dir(out: &Path, daemon: &Path, ctl: &Path) -> Result<Vec<PathBuf>> {
    let files: [(&str, Source<'_>, u32); 6] = [
        ("usr/bin/nvidia-imex", Source::Copy(daemon), 0o755),
        ("usr/bin/nvidia-imex-ctl", Source::Copy(ctl), 0o755),
        ("etc/nvidia-imex/config.cfg", Source::Text(CONFIG), 0o644),
        ("LICENSE", Source::Text(LICENSE), 0o644),
        (
            "usr/share/doc/third-party-notices.txt",
            Source::Text(NOTICES),
            0o644,
        ),
        (MARKER_FILE, Source::Text(crate::MARKER), 0o644),
    ];
    let mut written = Vec::new();
    for (rel, source, mode) in files {
        let path = out.join(rel);
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let bytes = match source {
            Source::Copy(from) => std::fs::read(from).map_err(|source| Error::Io {
                path: format!(
                    "{} (build it with `cargo build -p imex-double`)",
                    from.display()
                ),
                source,
            })?,
            Source::Text(text) => text.as_bytes().to_vec(),
        };
        std::fs::write(&path, bytes).map_err(io)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).map_err(io)?;
        written.push(path);
    }
    Ok(written)
}

enum Source<'a> {
    Copy(&'a Path),
    Text(&'a str),
}

/// Whether a payload directory is the double's.
pub fn is_double_dir(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(MARKER_FILE))
        .is_ok_and(|it| it.starts_with("cdsim-imex-test-double"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_has_the_archive_layout() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::write(&bin, b"\x7fELF").expect("write");
        let out = dir.path().join("payload");
        let written = write_dir(&out, &bin, &bin).expect("written");
        assert_eq!(written.len(), 6);
        let mode = |rel: &str| test_support::permission_bits(&out.join(rel));
        assert_eq!(mode("usr/bin/nvidia-imex"), 0o755);
        assert_eq!(mode("etc/nvidia-imex/config.cfg"), 0o644);
        assert!(is_double_dir(&out));
        assert!(!is_double_dir(dir.path()));
        let err = write_dir(&out, &dir.path().join("missing"), &bin).expect_err("missing");
        assert!(
            err.to_string().contains("cargo build -p imex-double"),
            "{err}"
        );
    }
}
