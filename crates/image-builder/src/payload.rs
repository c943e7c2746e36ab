//! The nvidia-imex payload the user supplies: NVIDIA's redistributable
//! `.tar.xz` (one top-level directory, stripped) or an extracted directory.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::closure::HostFile;
use crate::{Error, Result};

/// How many symlinks a payload path may go through.
const MAX_LINK_HOPS: usize = 8;

/// An opened payload.
#[derive(Debug, Clone)]
pub enum Payload {
    /// An extracted directory: paths are relative to it.
    Dir(PathBuf),
    /// An archive read into memory, its top-level directory stripped.
    Archive {
        /// The archive on disk.
        path: PathBuf,
        /// Every entry, keyed by its path below the top-level directory.
        entries: BTreeMap<String, ArchiveEntry>,
    },
}

/// One entry of a payload archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveEntry {
    /// A regular file.
    File(HostFile),
    /// A symlink and its target.
    Symlink(String),
    /// A hard link to an earlier entry (its path below the top directory).
    HardLink(String),
}

impl Payload {
    /// Opens a directory, a `.tar.xz` / `.txz` or a plain `.tar`.
    pub fn open(path: &Path) -> Result<Payload> {
        let metadata = std::fs::metadata(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        if metadata.is_dir() {
            return Ok(Payload::Dir(path.to_owned()));
        }
        let name = path.to_string_lossy();
        let file = std::fs::File::open(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        let reader: Box<dyn Read> = if name.ends_with(".tar.xz") || name.ends_with(".txz") {
            Box::new(xz2::read::XzDecoder::new(std::io::BufReader::new(file)))
        } else if name.ends_with(".tar") {
            Box::new(std::io::BufReader::new(file))
        } else {
            return Err(payload_error(
                path,
                "expected NVIDIA's imex .tar.xz archive or an extracted directory".to_owned(),
            ));
        };
        let entries = read_archive(path, reader)?;
        Ok(Payload::Archive {
            path: path.to_owned(),
            entries,
        })
    }

    /// Where the payload came from, for messages.
    pub fn location(&self) -> &Path {
        match self {
            Payload::Dir(path) | Payload::Archive { path, .. } => path,
        }
    }

    /// A file of the payload by its relative path, following symlinks.
    pub fn read(&self, rel: &str) -> Result<HostFile> {
        match self {
            Payload::Dir(dir) => {
                let path = dir.join(rel);
                let metadata = std::fs::metadata(&path).map_err(|source| Error::Read {
                    path: path.clone(),
                    source,
                })?;
                let bytes = std::fs::read(&path).map_err(|source| Error::Read {
                    path: path.clone(),
                    source,
                })?;
                Ok(HostFile {
                    bytes,
                    mode: metadata.permissions().mode() & 0o7777,
                })
            }
            Payload::Archive { path, entries } => {
                let mut current = rel.to_owned();
                for _ in 0..MAX_LINK_HOPS {
                    match entries.get(&current) {
                        Some(ArchiveEntry::File(file)) => return Ok(file.clone()),
                        Some(ArchiveEntry::Symlink(target)) => {
                            current = resolve_link(&current, target)
                        }
                        Some(ArchiveEntry::HardLink(target)) => current = target.clone(),
                        None => {
                            return Err(payload_error(
                                path,
                                format!("the archive has no {rel} below its top-level directory"),
                            ))
                        }
                    }
                }
                Err(payload_error(
                    path,
                    format!("{rel} goes through more than {MAX_LINK_HOPS} symlinks"),
                ))
            }
        }
    }
}

fn payload_error(path: &Path, reason: String) -> Error {
    Error::Payload {
        path: path.to_owned(),
        reason,
    }
}

fn read_archive(path: &Path, reader: Box<dyn Read>) -> Result<BTreeMap<String, ArchiveEntry>> {
    let mut archive = tar::Archive::new(reader);
    let mut top: Option<String> = None;
    let mut entries = BTreeMap::new();
    let iter = archive
        .entries()
        .map_err(|err| payload_error(path, format!("cannot read the archive: {err}")))?;
    for entry in iter {
        let mut entry =
            entry.map_err(|err| payload_error(path, format!("cannot read the archive: {err}")))?;
        let kind = entry.header().entry_type();
        // Metadata records, not members: a pax global header (git archive,
        // `tar --format=pax`) and the GNU long-name records, whose effect the
        // reader has already applied to the next entry's path.
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader
                | tar::EntryType::XHeader
                | tar::EntryType::GNULongName
                | tar::EntryType::GNULongLink
        ) {
            continue;
        }
        let entry_path = entry
            .path()
            .map_err(|err| payload_error(path, format!("bad entry path: {err}")))?
            .to_string_lossy()
            .trim_start_matches("./")
            .trim_end_matches('/')
            .to_owned();
        if entry_path.is_empty() {
            continue;
        }
        let Some(rest) = below_top(path, &entry_path, kind, &mut top)? else {
            continue;
        };
        if let Some(member) = member(path, &mut entry, &entry_path, top.as_deref())? {
            entries.insert(rest, member);
        }
    }
    Ok(entries)
}

/// An entry's path below the archive's one top-level directory (`top`, set by the first
/// entry); `None` for the directory itself.
fn below_top(
    path: &Path,
    entry_path: &str,
    kind: tar::EntryType,
    top: &mut Option<String>,
) -> Result<Option<String>> {
    let (first, rest) = match entry_path.split_once('/') {
        Some((first, rest)) => (first.to_owned(), rest.to_owned()),
        None => (entry_path.to_owned(), String::new()),
    };
    match top {
        Some(existing) if *existing != first => {
            return Err(payload_error(
                path,
                format!("expected one top-level directory, found {existing} and {first}"),
            ))
        }
        Some(_) => (),
        None => *top = Some(first),
    }
    if rest.is_empty() {
        if !kind.is_dir() {
            return Err(payload_error(
                path,
                format!("expected one top-level directory, found the file {entry_path}"),
            ));
        }
        return Ok(None);
    }
    Ok(Some(rest))
}

/// A file, symbolic link or hard link member (hard links made relative to the top-level
/// directory); `None` for a directory or any other kind.
fn member(
    path: &Path,
    entry: &mut tar::Entry<'_, Box<dyn Read>>,
    entry_path: &str,
    top: Option<&str>,
) -> Result<Option<ArchiveEntry>> {
    let kind = entry.header().entry_type();
    if kind.is_file() {
        let mode = entry.header().mode().unwrap_or(0o644) & 0o7777;
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|err| payload_error(path, format!("cannot read {entry_path}: {err}")))?;
        return Ok(Some(ArchiveEntry::File(HostFile { bytes, mode })));
    }
    if !kind.is_symlink() && kind != tar::EntryType::Link {
        return Ok(None);
    }
    let target = entry
        .link_name()
        .map_err(|err| payload_error(path, format!("bad link {entry_path}: {err}")))?
        .map(|target| target.to_string_lossy().into_owned())
        .unwrap_or_default();
    if kind.is_symlink() {
        return Ok(Some(ArchiveEntry::Symlink(target)));
    }
    let target = target.trim_start_matches("./");
    match target.split_once('/') {
        Some((first, below)) if top == Some(first) => {
            Ok(Some(ArchiveEntry::HardLink(below.to_owned())))
        }
        _ => Err(payload_error(
            path,
            format!("hard link {entry_path} points outside the top-level directory: {target}"),
        )),
    }
}

/// The payload-relative path a symlink at `at` pointing to `target` names.
fn resolve_link(at: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        at.split('/').collect()
    };
    if !target.starts_with('/') {
        parts.pop();
    }
    for part in target.split('/') {
        match part {
            "" | "." => (),
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (path, file content, symlink target); neither content nor target: a directory.
    type TestEntry<'a> = (&'a str, Option<&'a [u8]>, Option<&'a str>);

    fn archive(entries: &[TestEntry<'_>]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data, link) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o755);
            match (data, link) {
                (Some(data), _) => {
                    header.set_size(data.len() as u64);
                    header.set_entry_type(tar::EntryType::Regular);
                    builder
                        .append_data(&mut header, path, *data)
                        .expect("append");
                }
                (None, Some(target)) => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_size(0);
                    builder
                        .append_link(&mut header, path, target)
                        .expect("append link");
                }
                (None, None) => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_size(0);
                    builder
                        .append_data(&mut header, path, &[][..])
                        .expect("append dir");
                }
            }
        }
        builder.into_inner().expect("finish")
    }

    fn xz(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = xz2::read::XzEncoder::new(bytes, 1);
        encoder.read_to_end(&mut out).expect("xz");
        out
    }

    #[test]
    fn strips_the_top_level_directory_and_follows_links() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir
            .path()
            .join("imex-linux-x86_64-595.91.07-archive.tar.xz");
        let tar = archive(&[
            ("imex-595/", None, None),
            ("imex-595/usr/bin/nvidia-imex", Some(b"daemon"), None),
            ("imex-595/usr/bin/nvidia-imex-ctl", Some(b"ctl"), None),
            (
                "imex-595/usr/bin/imex-link",
                None,
                Some("../bin/nvidia-imex"),
            ),
        ]);
        std::fs::write(&path, xz(&tar)).expect("write");
        let payload = Payload::open(&path).expect("open payload");
        assert_eq!(
            payload.read("usr/bin/nvidia-imex").expect("daemon").bytes,
            b"daemon"
        );
        assert_eq!(
            payload.read("usr/bin/nvidia-imex").expect("daemon").mode,
            0o755
        );
        assert_eq!(
            payload.read("usr/bin/imex-link").expect("link").bytes,
            b"daemon"
        );
        let err = payload
            .read("etc/nvidia-imex/config.cfg")
            .expect_err("missing");
        assert!(
            err.to_string()
                .contains("has no etc/nvidia-imex/config.cfg"),
            "{err}"
        );
    }

    #[test]
    fn rejects_two_top_level_directories_and_unknown_formats() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.tar");
        std::fs::write(
            &path,
            archive(&[("a/x", Some(b"1"), None), ("b/y", Some(b"2"), None)]),
        )
        .expect("write");
        let err = Payload::open(&path).expect_err("two tops");
        assert!(
            err.to_string()
                .contains("one top-level directory, found a and b"),
            "{err}"
        );
        let zip = dir.path().join("imex.zip");
        std::fs::write(&zip, b"PK").expect("write");
        assert!(Payload::open(&zip)
            .expect_err("zip")
            .to_string()
            .contains(".tar.xz"));
    }

    /// The real archive's layout: one top directory, a pax global header (as
    /// `git archive` and `tar --format=pax` write it), a name longer than the
    /// 100 bytes of a ustar header, and a hard link.
    #[test]
    fn reads_the_real_layout_with_pax_header_long_name_and_hard_link() {
        let top = test_support::IMEX_ARCHIVE_TOP;
        let mut builder = tar::Builder::new(Vec::new());
        let mut global = tar::Header::new_ustar();
        let record = b"52 comment=0123456789abcdef0123456789abcdef01234567\n";
        global.set_entry_type(tar::EntryType::XGlobalHeader);
        global.set_size(record.len() as u64);
        global.set_mode(0o644);
        builder
            .append_data(&mut global, "pax_global_header", &record[..])
            .expect("global header");
        let long = format!("{top}/{}", test_support::imex_archive_long_name());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        builder
            .append_data(&mut dir, format!("{top}/"), &[][..])
            .expect("dir");
        for (rel, data, mode) in test_support::IMEX_ARCHIVE_FILES {
            let mut header = tar::Header::new_gnu();
            header.set_mode(mode);
            header.set_size(data.len() as u64);
            builder
                .append_data(&mut header, format!("{top}/{rel}"), data)
                .expect("file");
        }
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o644);
        header.set_size(4);
        builder
            .append_data(&mut header, &long, &b"long"[..])
            .expect("long name");
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Link);
        link.set_size(0);
        link.set_mode(0o755);
        builder
            .append_link(
                &mut link,
                format!("{top}/{}", test_support::IMEX_ARCHIVE_HARD_LINK.0),
                format!("{top}/{}", test_support::IMEX_ARCHIVE_HARD_LINK.1),
            )
            .expect("hard link");
        let bytes = builder.into_inner().expect("finish");
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join(format!("{top}.tar.xz"));
        std::fs::write(&path, xz(&bytes)).expect("write");
        let payload = Payload::open(&path).expect("the real layout opens");
        for (rel, data, mode) in test_support::IMEX_ARCHIVE_FILES {
            let file = payload.read(rel).expect(rel);
            assert_eq!((file.bytes.as_slice(), file.mode), (data, mode), "{rel}");
        }
        test_support::assert_reads_long_name_and_hard_link(|rel| {
            payload.read(rel).expect(rel).bytes
        });
    }

    #[test]
    fn reads_an_extracted_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("usr/bin")).expect("mkdir");
        std::fs::write(dir.path().join("usr/bin/nvidia-imex-ctl"), b"ctl").expect("write");
        let payload = Payload::open(dir.path()).expect("open dir");
        assert_eq!(
            payload.read("usr/bin/nvidia-imex-ctl").expect("ctl").bytes,
            b"ctl"
        );
        assert!(payload.read("usr/bin/nope").is_err());
    }

    #[test]
    fn link_targets_resolve_inside_the_payload() {
        assert_eq!(resolve_link("usr/bin/a", "b"), "usr/bin/b");
        assert_eq!(resolve_link("usr/bin/a", "../lib/b"), "usr/lib/b");
        assert_eq!(resolve_link("usr/bin/a", "/usr/lib/b"), "usr/lib/b");
    }
}
