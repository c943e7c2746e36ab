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
    match path.is_absolute() {
        true => Ok(path.to_owned()),
        false => Ok(std::env::current_dir()
            .context("cannot read the current directory")?
            .join(path)),
    }
}
