//! The shared-library closure of an image's ELF files, resolved the way glibc's
//! loader will resolve it inside the image.
//!
//! The search follows `ld.so`: `DT_RPATH` (only without `DT_RUNPATH`), `DT_RUNPATH`,
//! the host's loader cache, then the default directories. A library is placed in
//! the image at the path where it was found, so the image needs no loader cache;
//! a library the cache finds outside the default directories is therefore an error.
//! File access goes through [`HostFs`], so the search itself is pure.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;

use crate::elf::{self, ElfInfo};
use crate::ldcache::CacheEntry;
use crate::{Error, Result};

/// Read access to the build host's files (following symlinks).
pub trait HostFs {
    /// The bytes and permission bits of an absolute host path.
    fn read(&self, path: &str) -> io::Result<HostFile>;
}

/// A host file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFile {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

/// A library (or the interpreter) the closure adds to the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosureFile {
    /// Absolute path in the image (the same as on the host).
    pub path: String,
    /// Permission bits, from the host.
    pub mode: u32,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Which image file first needed it (for reports and errors).
    pub needed_by: String,
}

/// An ELF file already in the image, whose dependencies are to be resolved.
#[derive(Debug, Clone, Copy)]
pub struct Root<'a> {
    /// Absolute path in the image.
    pub path: &'a str,
    /// The bytes.
    pub bytes: &'a [u8],
}

/// Resolves every library the roots need, transitively, and returns the files
/// to add, sorted by path. `in_image` holds the image's other file paths: a
/// library found there is not copied from the host.
pub fn resolve(
    fs: &dyn HostFs,
    cache: &[CacheEntry],
    roots: &[Root<'_>],
    in_image: &BTreeSet<String>,
) -> Result<Vec<ClosureFile>> {
    let mut added: BTreeMap<String, ClosureFile> = BTreeMap::new();
    // Objects to scan: (image path, parsed info).
    let mut queue: VecDeque<(String, ElfInfo)> = VecDeque::new();
    for root in roots {
        let info = parse_elf(root.path, root.bytes)?;
        queue.push_back((root.path.to_owned(), info));
    }
    while let Some((path, info)) = queue.pop_front() {
        // The loader maps the interpreter first; its soname satisfies DT_NEEDED entries naming it.
        let mut loaded_names: BTreeSet<String> = BTreeSet::new();
        if let Some(interp) = &info.interpreter {
            loaded_names.insert(file_name(interp).to_owned());
            if !in_image.contains(interp) && !added.contains_key(interp) {
                let file = read_host(fs, interp, &path)?;
                let interp_info = parse_elf(interp, &file.bytes)?;
                if let Some(soname) = &interp_info.soname {
                    loaded_names.insert(soname.clone());
                }
                added.insert(interp.clone(), closure_file(interp, file, &path));
                queue.push_back((interp.clone(), interp_info));
            }
        }
        for library in &info.needed {
            if loaded_names.contains(library) || is_loaded(&added, library) {
                continue;
            }
            let found = find_library(fs, cache, &path, &info, library, in_image, &added)?;
            if let Some((lib_path, file, lib_info)) = found {
                added.insert(lib_path.clone(), closure_file(&lib_path, file, &path));
                queue.push_back((lib_path, lib_info));
            }
        }
    }
    Ok(added.into_values().collect())
}

/// The loader's default directories for an object of this machine.
pub fn default_dirs(info: &ElfInfo) -> Vec<String> {
    let mut dirs = Vec::new();
    if let Some(triplet) = info.multiarch() {
        dirs.push(format!("/lib/{triplet}"));
        dirs.push(format!("/usr/lib/{triplet}"));
    }
    dirs.push("/lib".to_owned());
    dirs.push("/usr/lib".to_owned());
    if info.is_64 {
        dirs.push("/lib64".to_owned());
        dirs.push("/usr/lib64".to_owned());
    }
    dirs
}

fn is_loaded(added: &BTreeMap<String, ClosureFile>, library: &str) -> bool {
    added.keys().any(|path| file_name(path) == library)
}

/// `Ok(None)` means the image itself provides the library.
fn find_library(
    fs: &dyn HostFs,
    cache: &[CacheEntry],
    requester: &str,
    info: &ElfInfo,
    library: &str,
    in_image: &BTreeSet<String>,
    added: &BTreeMap<String, ClosureFile>,
) -> Result<Option<(String, HostFile, ElfInfo)>> {
    if library.contains('/') {
        if in_image.contains(library) || added.contains_key(library) {
            return Ok(None);
        }
        let file = read_host(fs, library, requester)?;
        let lib_info = parse_elf(library, &file.bytes)?;
        return Ok(Some((library.to_owned(), file, lib_info)));
    }
    let origin = crate::spec::parent_of(requester);
    let expand = |dir: &String| dir.replace("${ORIGIN}", origin).replace("$ORIGIN", origin);
    let mut candidates: Vec<(String, bool)> = Vec::new();
    let search_dirs: Vec<String> = if info.runpath.is_empty() {
        info.rpath.iter().map(expand).collect()
    } else {
        info.runpath.iter().map(expand).collect()
    };
    candidates.extend(
        search_dirs
            .iter()
            .map(|dir| (crate::spec::join(dir, library), true)),
    );
    candidates.extend(
        cache
            .iter()
            .filter(|entry| entry.soname == library)
            .map(|entry| (entry.path.clone(), false)),
    );
    let defaults = default_dirs(info);
    candidates.extend(
        defaults
            .iter()
            .map(|dir| (crate::spec::join(dir, library), true)),
    );
    let mut searched = Vec::new();
    for (candidate, in_loader_path) in candidates {
        if in_image.contains(&candidate) || added.contains_key(&candidate) {
            return Ok(None);
        }
        let Ok(file) = fs.read(&candidate) else {
            searched.push(candidate);
            continue;
        };
        let Ok(lib_info) = elf::parse(&file.bytes) else {
            searched.push(candidate);
            continue;
        };
        if !info.compatible(&lib_info) {
            searched.push(candidate);
            continue;
        }
        let dir = crate::spec::parent_of(&candidate);
        if !in_loader_path
            && !defaults.iter().any(|default| default == dir)
            && !search_dirs.iter().any(|d| d == dir)
        {
            return Err(Error::LibraryOutsideLoaderPath {
                library: library.to_owned(),
                path: candidate,
                needed_by: requester.to_owned(),
            });
        }
        return Ok(Some((candidate, file, lib_info)));
    }
    Err(Error::LibraryNotFound {
        library: library.to_owned(),
        needed_by: requester.to_owned(),
        searched: searched.join(", "),
    })
}

fn read_host(fs: &dyn HostFs, path: &str, needed_by: &str) -> Result<HostFile> {
    fs.read(path).map_err(|source| Error::HostRead {
        path: path.into(),
        needed_by: needed_by.to_owned(),
        source,
    })
}

fn parse_elf(path: &str, bytes: &[u8]) -> Result<ElfInfo> {
    elf::parse(bytes).map_err(|reason| Error::Elf {
        path: path.to_owned(),
        reason,
    })
}

fn closure_file(path: &str, file: HostFile, needed_by: &str) -> ClosureFile {
    ClosureFile {
        path: path.to_owned(),
        mode: file.mode,
        bytes: file.bytes,
        needed_by: needed_by.to_owned(),
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::host::RealFs;

    /// The real peer: the host loader's own answer (`ldd`) for a host binary.
    #[test]
    fn matches_ldd_for_a_host_binary() {
        let exe = std::env::current_exe().expect("current exe");
        let exe_path = exe.to_string_lossy().into_owned();
        let bytes = std::fs::read(&exe).expect("read current exe");
        let cache = crate::host::read_ld_cache().expect("host loader cache");
        let files = resolve(
            &RealFs,
            &cache,
            &[Root {
                path: &exe_path,
                bytes: &bytes,
            }],
            &BTreeSet::new(),
        )
        .expect("resolve the closure of the test binary");
        let output = Command::new("ldd")
            .arg(&exe)
            .current_dir("/")
            .output()
            .expect("ldd is not installed (Debian package libc-bin)");
        let text = String::from_utf8_lossy(&output.stdout);
        let expected = test_support::ldd_paths(&text);
        let actual: BTreeSet<String> = files.iter().map(|file| file.path.clone()).collect();
        assert_eq!(actual.len(), files.len(), "a library resolved twice");
        assert_eq!(actual, expected, "ldd said:\n{text}");
        for file in &files {
            assert_eq!(
                file.bytes,
                std::fs::read(&file.path).expect("read library"),
                "{}",
                file.path
            );
        }
    }

    #[test]
    fn a_missing_library_names_the_requester_and_the_search() {
        let exe = std::env::current_exe().expect("current exe");
        let bytes = std::fs::read(&exe).expect("read current exe");
        let mut info = elf::parse(&bytes).expect("parse");
        info.needed = vec!["libdoes-not-exist.so.9".to_owned()];
        let err = find_library(
            &RealFs,
            &[],
            "/usr/bin/demo",
            &info,
            "libdoes-not-exist.so.9",
            &BTreeSet::new(),
            &BTreeMap::new(),
        )
        .expect_err("missing library");
        let text = err.to_string();
        assert!(text.contains("libdoes-not-exist.so.9"), "{text}");
        assert!(text.contains("/usr/bin/demo"), "{text}");
        assert!(text.contains("/usr/lib/libdoes-not-exist.so.9"), "{text}");
    }

    #[test]
    fn a_library_already_in_the_image_is_not_copied() {
        let exe = std::env::current_exe().expect("current exe");
        let bytes = std::fs::read(&exe).expect("read current exe");
        let info = elf::parse(&bytes).expect("parse");
        let libc = info
            .needed
            .iter()
            .find(|lib| lib.starts_with("libc.so"))
            .expect("needs libc")
            .clone();
        let triplet = info.multiarch().expect("known machine");
        let provided: BTreeSet<String> = [format!("/lib/{triplet}/{libc}")].into();
        let found = find_library(
            &RealFs,
            &[],
            "/x",
            &info,
            &libc,
            &provided,
            &BTreeMap::new(),
        )
        .expect("search");
        assert!(found.is_none());
    }
}
