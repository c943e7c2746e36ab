//! `cargo xtask images`: the mock and workload images as reproducible archives.
//!
//! Builds the crates the image spec (`manifests/images.toml`) needs with cargo,
//! then writes each image with `image-builder`, without a container daemon.
//! The orchestration calls [`build_all`]; the command line calls [`run`].

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{format_err, Context, Result};
use image_builder::build::{self, BuiltImage, ImexState, Inputs};
use image_builder::host::{self, RealFs};
use image_builder::payload::Payload;
use image_builder::spec::Spec;
use xshell::{cmd, Shell};

use crate::flags::ImagesArgs;
use crate::report::PayloadIdentity;

/// The mock image's repository name in the spec.
pub const MOCK_IMAGE: &str = "nvml-mock";
/// The workload image's repository name in the spec.
pub const WORKLOAD_IMAGE: &str = "nvml-mock-workload";
/// The spec, relative to the repository root.
pub const SPEC_PATH: &str = "manifests/images.toml";

/// Which cargo profile the binaries in the images come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    dead_code,
    reason = "`Debug` is for the orchestration (ci reuses the debug build)"
)]
pub enum CargoProfile {
    /// `target/debug` (`cargo build`).
    Debug,
    /// `target/release` (`cargo build --release`), what users get.
    Release,
}

impl CargoProfile {
    /// The profile's directory name under the target directory.
    pub fn dir_name(self) -> &'static str {
        match self {
            CargoProfile::Debug => "debug",
            CargoProfile::Release => "release",
        }
    }
}

/// One image archive on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageArchive {
    /// The repository name (`nvml-mock`).
    pub name: String,
    /// The archive (`docker load`, `kind load image-archive`, `ctr images import`).
    pub path: PathBuf,
    /// `name:tag`; the tag is derived from the image id.
    pub reference: String,
    /// The tag alone.
    pub tag: String,
    /// `sha256:…` of the image config (Docker's image id).
    pub image_id: String,
    /// `sha256:…` of the OCI manifest.
    pub manifest_digest: String,
    /// The archive's size in bytes.
    pub size: u64,
    /// Whether the nvidia-imex payload is inside.
    pub imex: ImexState,
}

/// Both images, as the orchestration needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltImages {
    /// `nvml-mock`: the stager and the NRI plugin run it.
    pub mock: ImageArchive,
    /// `nvml-mock-workload`: the demo workload runs it.
    pub workload: ImageArchive,
}

/// `cargo xtask images [--out DIR] [--imex ARCHIVE_OR_DIR]`.
///
/// A relative `--out` or `--imex` is relative to the current directory.
pub fn run(sh: &Shell, args: &ImagesArgs) -> Result<()> {
    let out_dir = match &args.out {
        Some(out) => absolute(out)?,
        None => crate::dirs::images_dir()?,
    };
    let imex = match &args.imex {
        Some(path) => Some(absolute(path)?),
        None => None,
    };
    let built = build_all(sh, &out_dir, imex.as_deref(), CargoProfile::Release)?;
    for image in [&built.mock, &built.workload] {
        println!("{}", image.reference);
        println!("  path:     {}", image.path.display());
        println!("  image id: {}", image.image_id);
        println!("  manifest: {}", image.manifest_digest);
        println!("  size:     {} bytes", image.size);
        if image.imex != ImexState::NotUsed {
            println!("  imex:     {}", image.imex.label_value());
        }
    }
    Ok(())
}

/// Builds the workspace crates the spec needs in `profile`, then both images
/// into `out_dir` (`<name>.tar`). Without `imex` the workload image is built
/// without the nvidia-imex daemon, and a line on stderr says so.
pub fn build_all(
    sh: &Shell,
    out_dir: &Path,
    imex: Option<&Path>,
    profile: CargoProfile,
) -> Result<BuiltImages> {
    let root = crate::project_root();
    let spec_path = root.join(SPEC_PATH);
    let spec_text = std::fs::read_to_string(&spec_path)
        .with_context(|| format!("cannot read {}", spec_path.display()))?;
    let spec = Spec::parse(&spec_text).with_context(|| format!("in {}", spec_path.display()))?;

    // Bad input fails before the (long) cargo build.
    let source_date_epoch = source_date_epoch()?;
    let payload = match imex {
        Some(path) => Some(Payload::open(path).context("cannot use the --imex payload")?),
        None => {
            eprintln!(
                "no --imex payload: {WORKLOAD_IMAGE} is built without the real nvidia-imex daemon \
                 (label cdsim.imex=absent); scenario 2 needs NVIDIA's imex archive"
            );
            None
        }
    };
    let cache = host::read_ld_cache()?;

    let mut cargo_args: Vec<String> = vec!["build".to_owned()];
    if profile == CargoProfile::Release {
        cargo_args.push("--release".to_owned());
    }
    for package in spec.packages() {
        cargo_args.push("-p".to_owned());
        cargo_args.push(package);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    // Cargo and this code agree on the target dir (see `dirs`): it is passed on.
    let target_dir = crate::dirs::target_dir()?;
    {
        let _dir = sh.push_dir(&root);
        let _target = sh.push_env("CARGO_TARGET_DIR", &target_dir);
        cmd!(sh, "{cargo} {cargo_args...}")
            .run()
            .context("cannot build the crates the images need")?;
    }
    let artifact_dir = target_dir.join(profile.dir_name());

    let inputs = Inputs {
        repo_root: &root,
        artifact_dir: &artifact_dir,
        payload: payload.as_ref(),
        source_date_epoch,
    };
    let started = Instant::now();
    let mock = build_one(&spec, MOCK_IMAGE, &inputs, &cache, out_dir)?;
    let workload = build_one(&spec, WORKLOAD_IMAGE, &inputs, &cache, out_dir)?;
    eprintln!(
        "images written to {} in {:.2?}",
        out_dir.display(),
        started.elapsed()
    );
    Ok(BuiltImages { mock, workload })
}

fn build_one(
    spec: &Spec,
    name: &str,
    inputs: &Inputs<'_>,
    cache: &[image_builder::ldcache::CacheEntry],
    out_dir: &Path,
) -> Result<ImageArchive> {
    let image_spec = spec.image(name)?;
    let built: BuiltImage = build::build_image(image_spec, inputs, &RealFs, cache)
        .with_context(|| format!("cannot build the {name} image"))?;
    if !built.left_out.is_empty() {
        eprintln!(
            "{name}: left out without a payload: {}",
            built.left_out.join(", ")
        );
    }
    let path = build::write_archive_file(&built, out_dir)?;
    Ok(ImageArchive {
        name: built.name.clone(),
        reference: built.reference(),
        tag: built.archive.tag.clone(),
        image_id: built.archive.image_id.clone(),
        manifest_digest: built.archive.manifest_digest.clone(),
        size: built.archive.bytes.len() as u64,
        imex: built.imex,
        path,
    })
}

/// The files a payload must have, as the image spec names them.
const PAYLOAD_FILES: [&str; 3] = [
    "usr/bin/nvidia-imex",
    "usr/bin/nvidia-imex-ctl",
    "etc/nvidia-imex/config.cfg",
];

/// Opens and checks a payload (NVIDIA's archive or a tree, or the IMEX test
/// double's directory) and says what it is; the error names the path and
/// what is wrong.
pub fn payload_identity(path: &Path) -> Result<PayloadIdentity> {
    let shown = path.display().to_string();
    if !path.exists() {
        anyhow::bail!(
            "the --imex payload {shown} does not exist: pass NVIDIA's \
             imex-linux-x86_64-595.*-archive.tar.xz, a tree extracted from it, or the IMEX test \
             double's directory (`cargo xtask imex-double-payload --out DIR`)"
        );
    }
    let payload = Payload::open(path).with_context(|| format!("the --imex payload {shown}"))?;
    for rel in PAYLOAD_FILES {
        payload.read(rel).with_context(|| {
            format!("the --imex payload {shown} is not an nvidia-imex payload: it lacks {rel}")
        })?;
    }
    for rel in &PAYLOAD_FILES[..2] {
        runs_here(&payload.read(rel)?.bytes)
            .map_err(|why| anyhow::anyhow!("the --imex payload {shown}: its {rel} {why}"))?;
    }
    if path.is_dir() {
        if imex_double::payload::is_double_dir(path) {
            return Ok(PayloadIdentity::TestDouble { path: shown });
        }
        let daemon = payload.read("usr/bin/nvidia-imex")?;
        return Ok(PayloadIdentity::Nvidia {
            path: shown,
            version: None,
            sha256: hex_sha256(&daemon.bytes),
        });
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {shown}"))?;
    let name = path
        .file_name()
        .map(|it| it.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(PayloadIdentity::Nvidia {
        path: shown,
        version: archive_version(&name),
        sha256: hex_sha256(&bytes),
    })
}

/// Whether a payload binary runs on this machine's nodes: an ELF of the
/// build host's architecture (kind's nodes share the host's kernel); `Err`
/// says what it is instead and what to pass.
fn runs_here(bytes: &[u8]) -> std::result::Result<(), String> {
    let host = image_builder::build::host_architecture();
    let fix = format!(
        "pass NVIDIA's imex-linux-{}-*-archive.tar.xz",
        std::env::consts::ARCH
    );
    let info = image_builder::elf::parse(bytes)
        .map_err(|err| format!("is not an executable ELF file ({err}): {fix}"))?;
    match info.oci_architecture() {
        Some(arch) if arch == host => Ok(()),
        other => Err(format!(
            "is built for {}, the nodes here run {host}: {fix}",
            other.unwrap_or("an unknown machine")
        )),
    }
}

/// One line for messages.
pub fn describe(identity: &PayloadIdentity) -> String {
    match identity {
        PayloadIdentity::Nvidia {
            path,
            version,
            sha256,
        } => format!(
            "NVIDIA nvidia-imex {} (sha256 {sha256}) from {path}",
            version.as_deref().unwrap_or("of unknown version")
        ),
        PayloadIdentity::TestDouble { path } => {
            format!("the IMEX TEST DOUBLE (not NVIDIA's nvidia-imex) from {path}")
        }
    }
}

/// `595.91.07` from `imex-linux-x86_64-595.91.07-archive.tar.xz`.
fn archive_version(name: &str) -> Option<String> {
    let stem = name
        .strip_suffix(".tar.xz")
        .or_else(|| name.strip_suffix(".txz"))?;
    let stem = stem.strip_suffix("-archive")?;
    let version = stem.rsplit('-').next()?;
    version
        .split('.')
        .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
        .then(|| version.to_owned())
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

/// `cargo xtask imex-double-payload --out DIR`: builds the IMEX test double
/// and writes its payload directory (the real archive's layout) to `DIR`.
pub fn imex_double_payload(sh: &Shell, out: &Path) -> Result<()> {
    let out = absolute(out)?;
    let dir = write_imex_double_payload(sh, &out)?;
    println!("{}", dir.display());
    eprintln!(
        "the IMEX TEST DOUBLE's payload (not NVIDIA's nvidia-imex, for tests only): \
         `cargo xtask scenario2 --imex {}`",
        dir.display()
    );
    Ok(())
}

/// Builds `imex-double` (release) and writes its payload into `out`; the one
/// producer of the double's payload (scenario 2 in CI, and any flow that
/// wants the double).
pub fn write_imex_double_payload(sh: &Shell, out: &Path) -> Result<PathBuf> {
    let root = crate::project_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    {
        let _dir = sh.push_dir(&root);
        cmd!(sh, "{cargo} build --release -p imex-double")
            .run()
            .context("cannot build the IMEX test double")?;
    }
    let bin = crate::dirs::target_dir()?.join("release");
    imex_double::payload::write_dir(
        out,
        &bin.join("nvidia-imex-double"),
        &bin.join("nvidia-imex-ctl-double"),
    )
    .with_context(|| {
        format!(
            "writing the IMEX test double's payload to {}",
            out.display()
        )
    })?;
    Ok(out.to_owned())
}

/// `SOURCE_DATE_EPOCH` (seconds), or 0 when unset.
fn source_date_epoch() -> Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(text) if !text.is_empty() => text.parse().map_err(|_| {
            format_err!("SOURCE_DATE_EPOCH={text:?} is not a number of seconds; unset it or fix it")
        }),
        _ => Ok(0),
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_owned())
    } else {
        Ok(std::env::current_dir()
            .context("cannot read the current directory")?
            .join(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_names_give_the_version() {
        assert_eq!(
            archive_version("imex-linux-x86_64-595.91.07-archive.tar.xz").as_deref(),
            Some("595.91.07")
        );
        assert_eq!(archive_version("imex.tar.xz"), None);
        assert_eq!(
            archive_version("imex-linux-x86_64-latest-archive.tar.xz"),
            None
        );
    }

    #[test]
    fn bad_payloads_name_the_path_and_the_fault() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope.tar.xz");
        let err = payload_identity(&missing).expect_err("missing");
        assert!(
            format!("{err:#}").contains("nope.tar.xz does not exist")
                && format!("{err:#}").contains("imex-double-payload"),
            "{err:#}"
        );
        std::fs::create_dir_all(dir.path().join("usr/bin")).expect("mkdir");
        std::fs::write(dir.path().join("usr/bin/nvidia-imex"), b"x").expect("write");
        let err = payload_identity(dir.path()).expect_err("incomplete");
        assert!(
            format!("{err:#}").contains("it lacks usr/bin/nvidia-imex-ctl"),
            "{err:#}"
        );
        let zip = dir.path().join("imex.zip");
        std::fs::write(&zip, b"PK").expect("write");
        let err = payload_identity(&zip).expect_err("zip");
        assert!(format!("{err:#}").contains("imex.zip"), "{err:#}");
        // An archive of NVIDIA's name whose bytes are not xz (a cut download):
        // refused naming it, before anything is built or installed.
        let corrupt = dir
            .path()
            .join("imex-linux-x86_64-595.91.07-archive.tar.xz");
        std::fs::write(&corrupt, b"\xfd7zXZ\0 cut short").expect("write");
        let err = format!("{:#}", payload_identity(&corrupt).expect_err("corrupt"));
        assert!(
            err.contains("imex-linux-x86_64-595.91.07-archive.tar.xz"),
            "{err}"
        );
    }

    #[test]
    fn a_payload_of_another_architecture_or_not_elf_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut bytes = std::fs::read(std::env::current_exe().expect("exe")).expect("read");
        // e_machine (offset 18, little endian): the other of x86_64 (62) and aarch64 (183).
        let other: u16 = if std::env::consts::ARCH == "aarch64" {
            62
        } else {
            183
        };
        bytes[18..20].copy_from_slice(&other.to_le_bytes());
        let foreign = dir.path().join("foreign");
        std::fs::write(&foreign, &bytes).expect("write");
        let tree = dir.path().join("tree");
        imex_double::payload::write_dir(&tree, &foreign, &foreign).expect("payload");
        let err = format!("{:#}", payload_identity(&tree).expect_err("foreign"));
        assert!(err.contains(&tree.display().to_string()), "{err}");
        assert!(err.contains("usr/bin/nvidia-imex is built for"), "{err}");
        let script = dir.path().join("script");
        std::fs::write(&script, b"#!/bin/sh\n").expect("write");
        let text = dir.path().join("text");
        imex_double::payload::write_dir(&text, &script, &script).expect("payload");
        let err = format!("{:#}", payload_identity(&text).expect_err("not elf"));
        assert!(err.contains("is not an executable ELF file"), "{err}");
    }

    #[test]
    fn the_double_and_a_tree_are_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::copy(std::env::current_exe().expect("exe"), &bin).expect("copy");
        let double = dir.path().join("double");
        imex_double::payload::write_dir(&double, &bin, &bin).expect("payload");
        assert!(matches!(
            payload_identity(&double).expect("double"),
            PayloadIdentity::TestDouble { .. }
        ));
        std::fs::remove_file(double.join(imex_double::payload::MARKER_FILE)).expect("rm");
        let PayloadIdentity::Nvidia {
            sha256, version, ..
        } = payload_identity(&double).expect("tree")
        else {
            panic!("a tree without the marker is NVIDIA's");
        };
        assert_eq!(version, None);
        assert_eq!(sha256.len(), 64);
    }
}
