//! Daemonless, reproducible container images from `manifests/images.toml`.
//!
//! [`spec::Spec`] parses and validates the image spec (the Nix flake reads the
//! same file). [`build::build_image`] gathers one image's files from the
//! workspace build, the repository, the build host and the optional
//! nvidia-imex [`payload::Payload`], adds the shared-library closure of every
//! ELF file ([`closure`], through [`elf`] and the host's [`ldcache`]), and hands
//! the resulting [`layer::Layer`] to [`oci::write_archive`], which writes one
//! tarball that is both a `docker save` archive and an OCI image layout.
//!
//! The same inputs give the same bytes: entries are sorted, every timestamp is
//! `SOURCE_DATE_EPOCH` (or 0), owners are 0:0 with no names, JSON keys are
//! sorted, and the image tag is the first 12 hex digits of the image id.
//!
//! ```
//! let spec = image_builder::spec::Spec::parse(r#"
//! version = 1
//! [images.tiny]
//! description = "an empty /tmp"
//! [[images.tiny.files]]
//! path = "/tmp"
//! dir = true
//! mode = "1777"
//! "#)?;
//! assert_eq!(spec.image("tiny")?.files.len(), 1);
//! # Ok::<(), image_builder::Error>(())
//! ```

pub mod build;
pub mod closure;
pub mod elf;
pub mod host;
pub mod layer;
pub mod ldcache;
pub mod oci;
pub mod payload;
pub mod spec;

use std::path::PathBuf;

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong building an image.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The spec is not valid TOML or does not match the schema.
    #[error("cannot parse the image spec: {message}")]
    SpecToml {
        /// The TOML parser's message (with line and column).
        message: String,
    },
    /// The spec parses but breaks a rule.
    #[error("invalid image spec at {context}: {reason}")]
    SpecInvalid {
        /// Which image or entry (`images.nvml-mock.files[3] (/usr/bin/x)`).
        context: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A workspace artifact has not been built.
    #[error("{} is missing: build it with `cargo build --release -p {package}` (or run `cargo xtask images`)", path.display())]
    MissingArtifact {
        /// Where it was expected.
        path: PathBuf,
        /// The package that builds it.
        package: String,
    },
    /// A file the spec names could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A `repo_dir` source holds no matching file.
    #[error("{} has no file ending in {suffix:?}: the image would lack it", path.display())]
    EmptyRepoDir {
        /// The directory.
        path: PathBuf,
        /// The required suffix.
        suffix: String,
    },
    /// A host file (a `host` source or a library of the closure) could not be read.
    #[error("cannot read the host file {} (needed by {needed_by}): install the package that provides it", path.display())]
    HostRead {
        /// The host path.
        path: PathBuf,
        /// The image file that needs it.
        needed_by: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An ELF file could not be parsed.
    #[error("{path} is not a usable ELF file: {reason}")]
    Elf {
        /// The image path of the file.
        path: String,
        /// goblin's reason.
        reason: String,
    },
    /// The host's loader cache is malformed.
    #[error(
        "cannot parse {}: {reason}; run `ldconfig` to rebuild it",
        crate::host::LD_CACHE_PATH
    )]
    LdCache {
        /// What is malformed.
        reason: String,
    },
    /// No compatible file for a `DT_NEEDED` library was found.
    #[error("library {library} (needed by {needed_by}) was not found on the build host; searched {searched}; install the package that provides it")]
    LibraryNotFound {
        /// The soname.
        library: String,
        /// The image file that needs it.
        needed_by: String,
        /// Every path tried.
        searched: String,
    },
    /// The loader cache resolves a library outside the loader's default directories,
    /// where the image (which has no cache) would not find it.
    #[error("library {library} (needed by {needed_by}) resolves to {path}, outside the loader's default directories; the image has no ld.so.cache, so give the binary a RUNPATH or install the library in /usr/lib")]
    LibraryOutsideLoaderPath {
        /// The soname.
        library: String,
        /// Where the host cache points.
        path: String,
        /// The image file that needs it.
        needed_by: String,
    },
    /// Two ELF files of one image are for different machines.
    #[error("the image mixes architectures: {first} and {second}")]
    MixedArchitectures {
        /// The first file and its architecture.
        first: String,
        /// The disagreeing file and its architecture.
        second: String,
    },
    /// Two entries claim one path, or a file sits where a directory must be.
    #[error("conflict at {path}: {reason}")]
    Conflict {
        /// The path.
        path: String,
        /// What collides.
        reason: String,
    },
    /// The nvidia-imex payload is unusable.
    #[error("nvidia-imex payload {}: {reason}", path.display())]
    Payload {
        /// The archive or directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Writing a tar stream failed.
    #[error("cannot write the tar entry {path}: {reason}")]
    Tar {
        /// The entry.
        path: String,
        /// The cause.
        reason: String,
    },
    /// Serializing JSON failed.
    #[error("cannot serialize image JSON: {reason}")]
    Json {
        /// The cause.
        reason: String,
    },
    /// Writing the archive file failed.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
