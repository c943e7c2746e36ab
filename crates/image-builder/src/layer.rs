//! An image's file system as one deterministic tar layer.
//!
//! Pure: entries in, bytes out. Entries are written in byte order of their
//! paths, every parent directory is present, and each header carries only
//! what it must: uid/gid 0, no user or group names, one fixed mtime.

use std::collections::BTreeMap;

use crate::{Error, Result};

/// What is at one path of the layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A regular file.
    File {
        /// Permission bits.
        mode: u32,
        /// The content.
        bytes: Vec<u8>,
    },
    /// A directory.
    Dir {
        /// Permission bits.
        mode: u32,
    },
    /// A symbolic link.
    Symlink {
        /// The link target, as written.
        target: String,
    },
}

/// The layer's entries, keyed by absolute path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layer {
    entries: BTreeMap<String, Node>,
}

/// The mode of a directory nobody named explicitly.
pub const IMPLICIT_DIR_MODE: u32 = 0o755;

impl Layer {
    /// Adds a node; its parent directories are created as needed. A second node
    /// at the same path, or a non-directory where a directory is needed, is an error.
    pub fn insert(&mut self, path: &str, node: Node) -> Result<()> {
        let mut parent = String::new();
        let components: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        for component in &components[..components.len().saturating_sub(1)] {
            parent.push('/');
            parent.push_str(component);
            match self.entries.get(&parent) {
                Some(Node::Dir { .. }) => (),
                Some(_) => {
                    return Err(Error::Conflict {
                        path: path.to_owned(),
                        reason: format!("{parent} is not a directory"),
                    })
                }
                None => {
                    self.entries.insert(
                        parent.clone(),
                        Node::Dir {
                            mode: IMPLICIT_DIR_MODE,
                        },
                    );
                }
            }
        }
        match (self.entries.get(path), &node) {
            (None, _) => {
                self.entries.insert(path.to_owned(), node);
                Ok(())
            }
            // An explicit directory overrides the implicit one's mode.
            (Some(Node::Dir { .. }), Node::Dir { .. }) => {
                self.entries.insert(path.to_owned(), node);
                Ok(())
            }
            (Some(_), _) => Err(Error::Conflict {
                path: path.to_owned(),
                reason: "two entries claim this path".to_owned(),
            }),
        }
    }

    /// The entries in path order.
    pub fn entries(&self) -> &BTreeMap<String, Node> {
        &self.entries
    }

    /// The sum of regular file sizes (what the layer takes once unpacked, roughly).
    pub fn content_size(&self) -> u64 {
        self.entries
            .values()
            .map(|node| match node {
                Node::File { bytes, .. } => bytes.len() as u64,
                _ => 0,
            })
            .sum()
    }

    /// The layer as an uncompressed tar, every header stamped with `mtime`.
    pub fn to_tar(&self, mtime: u64) -> Result<Vec<u8>> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, node) in &self.entries {
            let rel = path.trim_start_matches('/');
            let mut header = tar::Header::new_gnu();
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(mtime);
            let written = match node {
                Node::File { mode, bytes } => {
                    header.set_entry_type(tar::EntryType::Regular);
                    header.set_mode(*mode);
                    header.set_size(bytes.len() as u64);
                    builder.append_data(&mut header, rel, bytes.as_slice())
                }
                Node::Dir { mode } => {
                    header.set_entry_type(tar::EntryType::Directory);
                    header.set_mode(*mode);
                    header.set_size(0);
                    builder.append_data(&mut header, format!("{rel}/"), std::io::empty())
                }
                Node::Symlink { target } => {
                    header.set_entry_type(tar::EntryType::Symlink);
                    header.set_mode(0o777);
                    header.set_size(0);
                    builder.append_link(&mut header, rel, target)
                }
            };
            written.map_err(|err| Error::Tar {
                path: path.clone(),
                reason: err.to_string(),
            })?;
        }
        builder.into_inner().map_err(|err| Error::Tar {
            path: "(end of archive)".to_owned(),
            reason: err.to_string(),
        })
    }
}

/// One entry read back from a tar: path (absolute), node.
pub fn read_tar(bytes: &[u8]) -> Result<Vec<(String, Node)>> {
    use std::io::Read;

    let mut archive = tar::Archive::new(bytes);
    let mut out = Vec::new();
    let bad = |reason: String| Error::Tar {
        path: "(reading)".to_owned(),
        reason,
    };
    for entry in archive.entries().map_err(|err| bad(err.to_string()))? {
        let mut entry = entry.map_err(|err| bad(err.to_string()))?;
        let path = entry.path().map_err(|err| bad(err.to_string()))?;
        let path = format!("/{}", path.to_string_lossy().trim_end_matches('/'));
        let mode = entry.header().mode().map_err(|err| bad(err.to_string()))?;
        let kind = entry.header().entry_type();
        let node = if kind.is_dir() {
            Node::Dir { mode }
        } else if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(|err| bad(err.to_string()))?
                .map(|target| target.to_string_lossy().into_owned())
                .unwrap_or_default();
            Node::Symlink { target }
        } else {
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|err| bad(err.to_string()))?;
            Node::File { mode, bytes }
        };
        out.push((path, node));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool() -> Node {
        Node::File {
            mode: 0o755,
            bytes: b"x".to_vec(),
        }
    }

    fn sample() -> Layer {
        let mut layer = Layer::default();
        layer.insert("/usr/bin/tool", tool()).expect("file");
        layer
            .insert("/tmp", Node::Dir { mode: 0o1777 })
            .expect("tmp");
        layer
            .insert(
                "/bin/sh",
                Node::Symlink {
                    target: "busybox".to_owned(),
                },
            )
            .expect("link");
        layer
    }

    #[test]
    fn writes_parents_first_in_path_order_and_reads_back() {
        let tar = sample().to_tar(0).expect("tar");
        let entries = read_tar(&tar).expect("read back");
        let paths: Vec<&str> = entries.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/bin",
                "/bin/sh",
                "/tmp",
                "/usr",
                "/usr/bin",
                "/usr/bin/tool"
            ]
        );
        assert_eq!(entries[2].1, Node::Dir { mode: 0o1777 });
        assert_eq!(
            entries[1].1,
            Node::Symlink {
                target: "busybox".to_owned()
            }
        );
        assert_eq!(
            entries[5].1,
            Node::File {
                mode: 0o755,
                bytes: b"x".to_vec()
            }
        );
    }

    #[test]
    fn headers_carry_no_host_identity() {
        let tar = sample().to_tar(1_700_000_000).expect("tar");
        let mut archive = tar::Archive::new(tar.as_slice());
        for entry in archive.entries().expect("entries") {
            let entry = entry.expect("entry");
            let header = entry.header();
            assert_eq!(header.uid().expect("uid"), 0);
            assert_eq!(header.gid().expect("gid"), 0);
            assert_eq!(header.mtime().expect("mtime"), 1_700_000_000);
            assert_eq!(header.username_bytes(), Some(&b""[..]));
            assert_eq!(header.groupname_bytes(), Some(&b""[..]));
            // GNU headers keep atime/ctime zero unless set.
            let gnu = header.as_gnu().expect("gnu header");
            assert_eq!(gnu.atime, [0; 12]);
            assert_eq!(gnu.ctime, [0; 12]);
        }
    }

    #[test]
    fn the_same_entries_give_the_same_bytes_whatever_the_insertion_order() {
        let mut other = Layer::default();
        other
            .insert(
                "/bin/sh",
                Node::Symlink {
                    target: "busybox".to_owned(),
                },
            )
            .expect("link");
        other
            .insert("/tmp", Node::Dir { mode: 0o1777 })
            .expect("tmp");
        other.insert("/usr/bin/tool", tool()).expect("file");
        assert_eq!(
            other.to_tar(0).expect("tar"),
            sample().to_tar(0).expect("tar")
        );
    }

    #[test]
    fn conflicts_are_errors() {
        let mut layer = sample();
        let err = layer
            .insert("/bin/sh/x", Node::Dir { mode: 0o755 })
            .expect_err("under a symlink");
        assert!(
            err.to_string().contains("/bin/sh is not a directory"),
            "{err}"
        );
        let err = layer
            .insert("/usr/bin/tool", Node::Dir { mode: 0o755 })
            .expect_err("twice");
        assert!(err.to_string().contains("two entries claim"), "{err}");
    }
}
