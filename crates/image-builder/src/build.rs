//! Building one image from its spec: gather the files (the I/O edge), add the
//! shared-library closure, then hand the layer to the pure writers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::closure::{self, ClosureFile, HostFs, Root};
use crate::elf;
use crate::layer::{Layer, Node};
use crate::ldcache::CacheEntry;
use crate::oci::{self, Archive, ImageMeta};
use crate::payload::Payload;
use crate::spec::{self, FileKind, ImageSpec, Source};
use crate::{Error, Result};

/// Everything outside the spec that an image is built from.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The repository root (`repo` and `repo_dir` sources are relative to it).
    pub repo_root: &'a Path,
    /// The cargo profile directory holding the artifacts (`target/release`).
    pub artifact_dir: &'a Path,
    /// The nvidia-imex payload, when the user supplied one.
    pub payload: Option<&'a Payload>,
    /// Seconds since the epoch for every timestamp (`SOURCE_DATE_EPOCH`, or 0).
    pub source_date_epoch: u64,
}

impl<'a> Inputs<'a> {
    /// For an image of host files only: no payload, timestamps at the epoch, `root` for both
    /// the repository and the artifacts.
    pub fn host_files(root: &'a Path) -> Inputs<'a> {
        Inputs {
            repo_root: root,
            artifact_dir: root,
            payload: None,
            source_date_epoch: 0,
        }
    }
}

/// Whether an image carries the nvidia-imex payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImexState {
    /// The image has no `imex` entries.
    NotUsed,
    /// The payload's files are inside.
    Present,
    /// The image was built without the payload; its `imex` entries were left out.
    Absent,
}

impl ImexState {
    /// The value of the image's `imex_label`.
    pub fn label_value(self) -> &'static str {
        match self {
            ImexState::Present => "present",
            ImexState::NotUsed | ImexState::Absent => "absent",
        }
    }
}

/// A built image.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    /// The repository name.
    pub name: String,
    /// The archive and its digests.
    pub archive: Archive,
    /// The image's file system.
    pub layer: Layer,
    /// The libraries the closure added, with who needed them.
    pub closure: Vec<ClosureFile>,
    /// Whether the nvidia-imex payload is inside.
    pub imex: ImexState,
    /// The image paths left out because no payload was given.
    pub left_out: Vec<String>,
}

impl BuiltImage {
    /// `name:tag`, the tag derived from the image id.
    pub fn reference(&self) -> String {
        self.archive.reference(&self.name)
    }
}

/// Builds one image. `fs` and `cache` are the build host's (see [`crate::host`]).
pub fn build_image(
    image: &ImageSpec,
    inputs: &Inputs<'_>,
    fs: &dyn HostFs,
    cache: &[CacheEntry],
) -> Result<BuiltImage> {
    let mut layer = Layer::default();
    let Listed { roots, left_out } = add_listed_files(image, inputs, fs, &mut layer)?;
    let (architecture, closure) = add_closure(fs, cache, &roots, &mut layer)?;
    let imex = match (image.uses_imex(), inputs.payload) {
        (false, _) => ImexState::NotUsed,
        (true, Some(_)) => ImexState::Present,
        (true, None) => ImexState::Absent,
    };
    let meta = image_meta(image, inputs, architecture, imex);
    let layer_tar = layer.to_tar(inputs.source_date_epoch)?;
    let archive = oci::write_archive(&layer_tar, &meta)?;
    Ok(BuiltImage {
        name: image.name.clone(),
        archive,
        layer,
        closure,
        imex,
        left_out,
    })
}

/// What [`add_listed_files`] put in: the ELF files whose closure the image needs, and the
/// payload paths left out because there is no payload.
struct Listed {
    roots: Vec<String>,
    left_out: Vec<String>,
}

/// Adds the spec's files, links, directories and repository directories to `layer`.
fn add_listed_files(
    image: &ImageSpec,
    inputs: &Inputs<'_>,
    fs: &dyn HostFs,
    layer: &mut Layer,
) -> Result<Listed> {
    let mut left_out = Vec::new();
    let mut roots: Vec<String> = Vec::new();
    for file in &image.files {
        match &file.kind {
            FileKind::File {
                source,
                mode,
                links,
            } => {
                let bytes = match source {
                    Source::Artifact { name, package } => {
                        read_artifact(inputs.artifact_dir, name, package)?
                    }
                    Source::Repo(rel) => read_path(&inputs.repo_root.join(rel))?,
                    Source::Host { path, .. } => {
                        fs.read(path)
                            .map_err(|source| Error::HostRead {
                                path: PathBuf::from(path),
                                needed_by: file.path.clone(),
                                source,
                            })?
                            .bytes
                    }
                    Source::Imex(rel) => match inputs.payload {
                        Some(payload) => payload.read(rel)?.bytes,
                        None => {
                            left_out.push(file.path.clone());
                            left_out.extend(
                                links
                                    .iter()
                                    .map(|link| spec::join(spec::parent_of(&file.path), link)),
                            );
                            continue;
                        }
                    },
                };
                if elf::is_elf(&bytes) {
                    roots.push(file.path.clone());
                }
                layer.insert(&file.path, Node::File { mode: *mode, bytes })?;
                let target = file.path.rsplit('/').next().unwrap_or_default().to_owned();
                for link in links {
                    let link_path = spec::join(spec::parent_of(&file.path), link);
                    layer.insert(
                        &link_path,
                        Node::Symlink {
                            target: target.clone(),
                        },
                    )?;
                }
            }
            FileKind::RepoDir { dir, suffix, mode } => {
                let source_dir = inputs.repo_root.join(dir);
                let names = list_dir(&source_dir, suffix)?;
                for name in names {
                    let bytes = read_path(&source_dir.join(&name))?;
                    layer.insert(
                        &spec::join(&file.path, &name),
                        Node::File { mode: *mode, bytes },
                    )?;
                }
            }
            FileKind::Dir { mode } => layer.insert(&file.path, Node::Dir { mode: *mode })?,
        }
    }

    Ok(Listed { roots, left_out })
}

/// Adds the shared-library closure of `roots` (already in `layer`) that the layer does not
/// hold yet; returns the roots' architecture and the libraries added.
fn add_closure(
    fs: &dyn HostFs,
    cache: &[CacheEntry],
    roots: &[String],
    layer: &mut Layer,
) -> Result<(String, Vec<ClosureFile>)> {
    let in_image: BTreeSet<String> = layer.entries().keys().cloned().collect();
    let root_bytes: Vec<(&str, &[u8])> = roots
        .iter()
        .filter_map(|path| match layer.entries().get(path) {
            Some(Node::File { bytes, .. }) => Some((path.as_str(), bytes.as_slice())),
            _ => None,
        })
        .collect();
    let architecture = architecture_of(&root_bytes)?;
    let closure_roots: Vec<Root<'_>> = root_bytes
        .iter()
        .map(|(path, bytes)| Root { path, bytes })
        .collect();
    let closure = closure::resolve(fs, cache, &closure_roots, &in_image)?;
    for lib in &closure {
        layer.insert(
            &lib.path,
            Node::File {
                mode: lib.mode,
                bytes: lib.bytes.clone(),
            },
        )?;
    }

    Ok((architecture, closure))
}

/// The image config: the spec's entrypoint, command, environment and labels, with the IMEX
/// label saying whether the payload is in.
fn image_meta(
    image: &ImageSpec,
    inputs: &Inputs<'_>,
    architecture: String,
    imex: ImexState,
) -> ImageMeta {
    let mut labels: BTreeMap<String, String> = image.labels.clone();
    if let Some(label) = &image.imex_label {
        labels.insert(label.clone(), imex.label_value().to_owned());
    }
    ImageMeta {
        repository: image.name.clone(),
        architecture,
        created: inputs.source_date_epoch,
        entrypoint: image.entrypoint.clone(),
        cmd: image.cmd.clone(),
        env: image.env.clone(),
        workdir: image.workdir.clone(),
        labels,
        created_by: format!(
            "cdsim image-builder: manifests/images.toml [images.{}]",
            image.name
        ),
        user: image.user.clone(),
    }
}

/// Writes the archive to `<out_dir>/<name>.tar` (through a temporary file and
/// a rename, so a reader never sees half an archive) and returns the path.
pub fn write_archive_file(image: &BuiltImage, out_dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out_dir).map_err(|source| Error::Write {
        path: out_dir.to_owned(),
        source,
    })?;
    let path = out_dir.join(format!("{}.tar", image.name));
    let partial = out_dir.join(format!(".{}.tar.partial", image.name));
    std::fs::write(&partial, &image.archive.bytes).map_err(|source| Error::Write {
        path: partial.clone(),
        source,
    })?;
    std::fs::rename(&partial, &path).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

fn read_artifact(artifact_dir: &Path, name: &str, package: &str) -> Result<Vec<u8>> {
    let path = artifact_dir.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(bytes),
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::MissingArtifact {
                path,
                package: package.to_owned(),
            })
        }
        Err(source) => Err(Error::Read { path, source }),
    }
}

fn read_path(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// The regular files directly in `dir` whose names end with `suffix`, sorted.
fn list_dir(dir: &Path, suffix: &str) -> Result<Vec<String>> {
    let read_err = |source| Error::Read {
        path: dir.to_owned(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        let is_file = entry.file_type().map_err(read_err)?.is_file();
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_file && name.ends_with(suffix) {
            names.push(name);
        }
    }
    if names.is_empty() {
        return Err(Error::EmptyRepoDir {
            path: dir.to_owned(),
            suffix: suffix.to_owned(),
        });
    }
    names.sort();
    Ok(names)
}

/// The OCI architecture of the image's ELF files; they must agree.
fn architecture_of(roots: &[(&str, &[u8])]) -> Result<String> {
    let mut found: Option<(&str, &'static str)> = None;
    for (path, bytes) in roots {
        let info = elf::parse(bytes).map_err(|reason| Error::Elf {
            path: (*path).to_owned(),
            reason,
        })?;
        let Some(arch) = info.oci_architecture() else {
            return Err(Error::Elf {
                path: (*path).to_owned(),
                reason: format!("unsupported machine {}", info.machine),
            });
        };
        match found {
            Some((first, first_arch)) if first_arch != arch => {
                return Err(Error::MixedArchitectures {
                    first: format!("{first} ({first_arch})"),
                    second: format!("{path} ({arch})"),
                })
            }
            Some(_) => (),
            None => found = Some((path, arch)),
        }
    }
    match found {
        Some((_, arch)) => Ok(arch.to_owned()),
        None => Ok(host_architecture().to_owned()),
    }
}

/// The OCI name of the build host's architecture.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    }
}
