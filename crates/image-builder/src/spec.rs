//! The image spec (`manifests/images.toml`): parsing and validation.
//!
//! Pure: no I/O. The format is flat on purpose, because `nix/` reads the same
//! file with `builtins.fromTOML`; `manifests/images.md` documents every field.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::{Error, Result};

/// The spec format version this crate understands.
pub const SPEC_VERSION: u32 = 1;

/// A validated image spec: every image, keyed by its repository name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The images, in name order.
    pub images: BTreeMap<String, ImageSpec>,
}

/// One image: its runtime configuration and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSpec {
    /// The repository name (`nvml-mock`); the tag is derived from the content.
    pub name: String,
    /// One line saying what the image is for.
    pub description: String,
    /// `Entrypoint` of the image config (may be empty).
    pub entrypoint: Vec<String>,
    /// `Cmd` of the image config (may be empty).
    pub cmd: Vec<String>,
    /// `Env` of the image config, `NAME=value`.
    pub env: Vec<String>,
    /// `WorkingDir` of the image config.
    pub workdir: String,
    /// `Labels` of the image config.
    pub labels: BTreeMap<String, String>,
    /// The label that says whether the nvidia-imex payload is inside
    /// (`present` or `absent`); set when the image has `imex` entries.
    pub imex_label: Option<String>,
    /// The files, in spec order.
    pub files: Vec<FileSpec>,
    /// `User` of the image config (`uid:gid`); only specs built in code set
    /// it (`images.toml` has no such key, so Nix's images need none).
    pub user: Option<String>,
}

/// One entry of an image's `files` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSpec {
    /// Absolute, normalized path inside the image.
    pub path: String,
    /// What is put there.
    pub kind: FileKind,
}

impl FileSpec {
    /// `/tmp`, world-writable with the sticky bit, as every base image has it.
    pub fn sticky_tmp() -> FileSpec {
        FileSpec {
            path: "/tmp".to_owned(),
            kind: FileKind::Dir { mode: 0o1777 },
        }
    }
}

/// What a file entry puts at its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file from a source, with symlinks beside it that point at it.
    File {
        /// Where the bytes come from.
        source: Source,
        /// Permission bits.
        mode: u32,
        /// Names of symlinks created in the same directory, each pointing at this file.
        links: Vec<String>,
    },
    /// Every regular file directly inside a repository directory whose name
    /// ends with `suffix`, copied into this directory.
    RepoDir {
        /// Repository-relative directory.
        dir: String,
        /// Only names ending with this (empty: every file).
        suffix: String,
        /// Permission bits of each copied file.
        mode: u32,
    },
    /// An empty directory.
    Dir {
        /// Permission bits (e.g. 0o1777 for `/tmp`).
        mode: u32,
    },
}

/// Where a regular file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A workspace build output in the cargo profile directory.
    Artifact {
        /// The file name cargo writes (`check-fabric`, `libnvidia_ml.so`).
        name: String,
        /// The cargo package that builds it.
        package: String,
    },
    /// A repository-relative file.
    Repo(String),
    /// An absolute path on the build host, with the nixpkgs equivalent.
    Host {
        /// Absolute host path (`/bin/busybox`).
        path: String,
        /// The nixpkgs attribute providing it (`pkgsStatic.busybox`).
        nix: String,
        /// The path inside that package (`bin/busybox`).
        nix_path: String,
    },
    /// A path inside the nvidia-imex payload (after its top-level directory);
    /// the entry is left out when no payload is given.
    Imex(String),
}

impl Spec {
    /// Parses and validates the spec text; errors name the offending entry.
    pub fn parse(text: &str) -> Result<Spec> {
        let raw: RawSpec = toml::from_str(text).map_err(|err| Error::SpecToml {
            message: err.to_string(),
        })?;
        if raw.version != SPEC_VERSION {
            return Err(invalid(
                "version",
                format!(
                    "unsupported spec version {}, this builder reads version {SPEC_VERSION}",
                    raw.version
                ),
            ));
        }
        if raw.images.is_empty() {
            return Err(invalid("images", "the spec names no image".to_owned()));
        }
        let mut images = BTreeMap::new();
        for (name, raw_image) in raw.images {
            let image = validate_image(&name, raw_image)?;
            images.insert(name, image);
        }
        Ok(Spec { images })
    }

    /// The image with this repository name.
    pub fn image(&self, name: &str) -> Result<&ImageSpec> {
        match self.images.get(name) {
            Some(image) => Ok(image),
            None => Err(invalid(
                "images",
                format!(
                    "no image named {name:?}; the spec has {}",
                    self.images.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )),
        }
    }

    /// Every cargo package that builds an artifact some image needs, sorted.
    pub fn packages(&self) -> Vec<String> {
        let set: BTreeSet<String> = self
            .images
            .values()
            .flat_map(|image| image.files.iter())
            .filter_map(|file| match &file.kind {
                FileKind::File {
                    source: Source::Artifact { package, .. },
                    ..
                } => Some(package.clone()),
                _ => None,
            })
            .collect();
        set.into_iter().collect()
    }
}

impl ImageSpec {
    /// The host path the file at `path` in the image is copied from, if it is a host file.
    pub fn host_source(&self, path: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|file| file.path == path)
            .and_then(|file| match &file.kind {
                FileKind::File {
                    source: Source::Host { path, .. },
                    ..
                } => Some(path.as_str()),
                _ => None,
            })
    }

    /// Whether any entry comes from the nvidia-imex payload.
    pub fn uses_imex(&self) -> bool {
        self.files.iter().any(|file| {
            matches!(
                file.kind,
                FileKind::File {
                    source: Source::Imex(_),
                    ..
                }
            )
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    version: u32,
    #[serde(default)]
    images: BTreeMap<String, RawImage>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawImage {
    description: String,
    #[serde(default)]
    entrypoint: Vec<String>,
    #[serde(default)]
    cmd: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default = "default_workdir")]
    workdir: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    imex_label: Option<String>,
    #[serde(default)]
    files: Vec<RawFile>,
}

fn default_workdir() -> String {
    "/".to_owned()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    path: String,
    mode: Option<String>,
    artifact: Option<String>,
    package: Option<String>,
    repo: Option<String>,
    repo_dir: Option<String>,
    suffix: Option<String>,
    host: Option<String>,
    nix: Option<String>,
    nix_path: Option<String>,
    imex: Option<String>,
    dir: Option<bool>,
    #[serde(default)]
    links: Vec<String>,
}

fn invalid(context: &str, reason: String) -> Error {
    Error::SpecInvalid {
        context: context.to_owned(),
        reason,
    }
}

fn validate_image(name: &str, raw: RawImage) -> Result<ImageSpec> {
    let context = format!("images.{name}");
    if !is_repository_name(name) {
        return Err(invalid(
            &context,
            "an image name must be lowercase letters, digits, '.', '_' or '-', starting with a letter or digit".to_owned(),
        ));
    }
    for entry in &raw.env {
        match entry.split_once('=') {
            Some((key, _)) if !key.is_empty() => (),
            _ => {
                return Err(invalid(
                    &format!("{context}.env"),
                    format!("{entry:?} is not NAME=value"),
                ))
            }
        }
    }
    if !raw.workdir.starts_with('/') {
        return Err(invalid(
            &format!("{context}.workdir"),
            format!("{:?} is not absolute", raw.workdir),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut files = Vec::with_capacity(raw.files.len());
    for (idx, raw_file) in raw.files.into_iter().enumerate() {
        let file_context = format!("{context}.files[{idx}] ({})", raw_file.path);
        let file = validate_file(&file_context, raw_file)?;
        let mut claimed = vec![file.path.clone()];
        if let FileKind::File { links, .. } = &file.kind {
            let parent = parent_of(&file.path);
            claimed.extend(links.iter().map(|link| join(parent, link)));
        }
        for path in claimed {
            if !seen.insert(path.clone()) {
                return Err(invalid(&file_context, format!("{path} is listed twice")));
            }
        }
        files.push(file);
    }
    let image = ImageSpec {
        name: name.to_owned(),
        description: raw.description,
        entrypoint: raw.entrypoint,
        cmd: raw.cmd,
        env: raw.env,
        workdir: raw.workdir,
        labels: raw.labels,
        imex_label: raw.imex_label,
        files,
        user: None,
    };
    if image.uses_imex() && image.imex_label.is_none() {
        return Err(invalid(
            &context,
            "the image has imex entries: set imex_label (the label that says whether the payload is inside)".to_owned(),
        ));
    }
    Ok(image)
}

fn validate_file(context: &str, raw: RawFile) -> Result<FileSpec> {
    let path = validate_image_path(context, &raw.path)?;
    let mode = check_shape(context, &raw)?;
    let source = if let Some(name) = raw.artifact {
        artifact_source(context, name, raw.package)?
    } else if let Some(rel) = raw.repo {
        Source::Repo(validate_relative(context, "repo", &rel)?)
    } else if let Some(host) = raw.host {
        host_source(context, host, raw.nix, raw.nix_path)?
    } else if let Some(rel) = raw.imex {
        Source::Imex(validate_relative(context, "imex", &rel)?)
    } else if let Some(dir) = raw.repo_dir {
        let kind = FileKind::RepoDir {
            dir: validate_relative(context, "repo_dir", &dir)?,
            suffix: raw.suffix.unwrap_or_default(),
            mode,
        };
        return Ok(FileSpec { path, kind });
    } else {
        match raw.dir {
            Some(true) => {
                return Ok(FileSpec {
                    path,
                    kind: FileKind::Dir { mode },
                })
            }
            _ => return Err(invalid(context, "dir must be true when set".to_owned())),
        }
    };
    Ok(FileSpec {
        path,
        kind: FileKind::File {
            source,
            mode,
            links: raw.links,
        },
    })
}

/// The checks that do not depend on the source: exactly one source, the mode, fields that
/// apply only to one kind, plain link names; returns the mode.
fn check_shape(context: &str, raw: &RawFile) -> Result<u32> {
    let kinds = [
        raw.artifact.is_some(),
        raw.repo.is_some(),
        raw.repo_dir.is_some(),
        raw.host.is_some(),
        raw.imex.is_some(),
        raw.dir.is_some(),
    ];
    if kinds.iter().filter(|set| **set).count() != 1 {
        return Err(invalid(
            context,
            "set exactly one source: artifact, repo, repo_dir, host, imex or dir".to_owned(),
        ));
    }
    let mode = match &raw.mode {
        Some(text) => parse_mode(context, text)?,
        None => {
            return Err(invalid(
                context,
                "mode is missing (an octal string such as \"0755\")".to_owned(),
            ))
        }
    };
    let only_for = |field: &str, set: bool, kind: &str| -> Result<()> {
        if set {
            Err(invalid(
                context,
                format!("{field} applies only to {kind} entries"),
            ))
        } else {
            Ok(())
        }
    };
    only_for(
        "package",
        raw.package.is_some() && raw.artifact.is_none(),
        "artifact",
    )?;
    only_for(
        "suffix",
        raw.suffix.is_some() && raw.repo_dir.is_none(),
        "repo_dir",
    )?;
    only_for(
        "nix/nix_path",
        (raw.nix.is_some() || raw.nix_path.is_some()) && raw.host.is_none(),
        "host",
    )?;
    only_for(
        "links",
        !raw.links.is_empty() && (raw.repo_dir.is_some() || raw.dir.is_some()),
        "regular-file",
    )?;
    for link in &raw.links {
        if link.is_empty() || link.contains('/') || link == "." || link == ".." {
            return Err(invalid(
                context,
                format!("link {link:?} must be a plain file name"),
            ));
        }
    }
    Ok(mode)
}

fn artifact_source(context: &str, name: String, package: Option<String>) -> Result<Source> {
    let Some(package) = package else {
        return Err(invalid(
            context,
            "an artifact entry needs package (the cargo package that builds it)".to_owned(),
        ));
    };
    if name.is_empty() || name.contains('/') {
        return Err(invalid(
            context,
            format!("artifact {name:?} must be a plain file name"),
        ));
    }
    Ok(Source::Artifact { name, package })
}

fn host_source(
    context: &str,
    host: String,
    nix: Option<String>,
    nix_path: Option<String>,
) -> Result<Source> {
    if !host.starts_with('/') {
        return Err(invalid(
            context,
            format!("host path {host:?} must be absolute"),
        ));
    }
    let (Some(nix), Some(nix_path)) = (nix, nix_path) else {
        return Err(invalid(
            context,
            "a host entry needs nix (the nixpkgs attribute) and nix_path (the file inside it)"
                .to_owned(),
        ));
    };
    Ok(Source::Host {
        path: host,
        nix,
        nix_path: validate_relative(context, "nix_path", &nix_path)?,
    })
}

fn is_repository_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(first) if first.is_ascii_lowercase() || first.is_ascii_digit())
        && chars.all(|ch| {
            ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-')
        })
}

fn validate_image_path(context: &str, path: &str) -> Result<String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(invalid(context, format!("path {path:?} must be absolute")));
    };
    if rest.is_empty()
        || rest
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Err(invalid(
            context,
            format!("path {path:?} must be normalized (no empty, '.' or '..' components, no trailing '/')"),
        ));
    }
    Ok(path.to_owned())
}

fn validate_relative(context: &str, field: &str, rel: &str) -> Result<String> {
    if rel.is_empty()
        || rel.starts_with('/')
        || rel.split('/').any(|part| part.is_empty() || part == "..")
    {
        return Err(invalid(
            context,
            format!("{field} {rel:?} must be a relative path without '..' or empty components"),
        ));
    }
    Ok(rel.to_owned())
}

fn parse_mode(context: &str, text: &str) -> Result<u32> {
    match u32::from_str_radix(text, 8) {
        Ok(mode) if mode <= 0o7777 && !text.is_empty() => Ok(mode),
        _ => Err(invalid(
            context,
            format!("mode {text:?} is not an octal permission string such as \"0755\""),
        )),
    }
}

/// The directory part of an absolute image path (`/usr/bin/x` gives `/usr/bin`).
pub(crate) fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(idx) => &path[..idx],
    }
}

/// Joins a directory and a name into an image path.
pub(crate) fn join(dir: &str, name: &str) -> String {
    match dir {
        "/" => format!("/{name}"),
        _ => format!("{dir}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(text: &str) -> String {
        match Spec::parse(text) {
            Ok(spec) => panic!("expected an error, got {spec:?}"),
            Err(err) => err.to_string(),
        }
    }

    /// One file of every source kind.
    const MINIMAL: &str = include_str!("testdata/minimal-spec.toml");

    #[test]
    fn parses_every_source_kind() {
        let spec = Spec::parse(MINIMAL).expect("valid spec");
        let image = spec.image("demo").expect("demo image");
        assert_eq!(image.workdir, "/");
        assert_eq!(image.files.len(), 5);
        assert_eq!(
            image.files[0].kind,
            FileKind::File {
                source: Source::Host {
                    path: "/bin/busybox".into(),
                    nix: "pkgsStatic.busybox".into(),
                    nix_path: "bin/busybox".into()
                },
                mode: 0o755,
                links: vec!["sh".into(), "[".into()],
            }
        );
        assert_eq!(image.files[4].kind, FileKind::Dir { mode: 0o1777 });
        assert!(image.uses_imex());
        assert_eq!(spec.packages(), vec!["imex-shim".to_owned()]);
    }

    #[test]
    fn rejects_a_link_that_collides_with_a_file() {
        let text = MINIMAL.replace(r#"links = ["sh", "["]"#, r#"links = ["busybox"]"#);
        assert_eq!(
            parse_err(&text),
            "invalid image spec at images.demo.files[0] (/bin/busybox): /bin/busybox is listed twice"
        );
    }

    #[test]
    fn rejects_two_sources_on_one_entry() {
        let text = MINIMAL.replace(
            "imex = \"usr/bin/nvidia-imex\"",
            "imex = \"usr/bin/nvidia-imex\"\nrepo = \"x\"",
        );
        assert!(
            parse_err(&text).contains("set exactly one source"),
            "{}",
            parse_err(&text)
        );
    }

    #[test]
    fn rejects_relative_and_unnormalized_paths() {
        let text = MINIMAL.replace("path = \"/tmp\"", "path = \"tmp\"");
        assert!(parse_err(&text).contains("must be absolute"));
        let text = MINIMAL.replace("path = \"/tmp\"", "path = \"/tmp/../etc\"");
        assert!(parse_err(&text).contains("must be normalized"));
        let text = MINIMAL.replace(
            "repo_dir = \"manifests/profiles\"",
            "repo_dir = \"../outside\"",
        );
        assert!(parse_err(&text).contains("without '..'"));
    }

    #[test]
    fn rejects_bad_modes_and_missing_fields() {
        assert!(
            parse_err(&MINIMAL.replace("\"1777\"", "\"rwx\"")).contains("not an octal permission")
        );
        assert!(parse_err(&MINIMAL.replace("\"1777\"", "\"17777\""))
            .contains("not an octal permission"));
        assert!(
            parse_err(&MINIMAL.replace("package = \"imex-shim\"\n", "")).contains("needs package")
        );
        assert!(
            parse_err(&MINIMAL.replace("nix = \"pkgsStatic.busybox\"\n", "")).contains("needs nix")
        );
        assert!(
            parse_err(&MINIMAL.replace("imex_label = \"cdsim.imex\"\n", ""))
                .contains("set imex_label")
        );
    }

    #[test]
    fn rejects_unknown_fields_and_versions() {
        assert!(
            parse_err(&MINIMAL.replace("mode = \"1777\"", "mode = \"1777\"\nowner = \"me\""))
                .contains("owner")
        );
        assert!(parse_err(&MINIMAL.replace("version = 1", "version = 2"))
            .contains("unsupported spec version 2"));
        assert!(parse_err(&MINIMAL.replace("[images.demo", "[images.Demo")).contains("images.Demo"));
    }

    #[test]
    fn the_shipped_spec_is_valid() {
        let spec = Spec::parse(include_str!("../../../manifests/images.toml"))
            .expect("manifests/images.toml");
        let names: Vec<&String> = spec.images.keys().collect();
        assert_eq!(names, ["nvml-mock", "nvml-mock-workload"]);
        assert!(!spec.image("nvml-mock").expect("mock").uses_imex());
        assert!(spec
            .image("nvml-mock-workload")
            .expect("workload")
            .uses_imex());
        assert_eq!(
            spec.packages(),
            [
                "check-fabric",
                "imex-shim",
                "mock-nvml",
                "node-stager",
                "nri-plugin",
                "nvidia-smi"
            ]
        );
    }

    #[test]
    fn paths_join_and_split() {
        assert_eq!(parent_of("/bin/sh"), "/bin");
        assert_eq!(parent_of("/x"), "/");
        assert_eq!(join("/", "x"), "/x");
        assert_eq!(join("/bin", "sh"), "/bin/sh");
    }
}
