//! Scenario 4's image: NVIDIA's DRA driver built from the pinned peers
//! snapshot (cached under `/var/cache/cdsim/go/dra-driver-<sha>`), the CDI
//! hook, and the image spec `image-builder` turns into `cdsim-dra-driver`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use image_builder::spec::{FileKind, FileSpec, ImageSpec, Source};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;
use xshell::{cmd, Shell};

use crate::plan::ImageRef;

/// The offline build's image repository; the tag is derived from its content.
pub const DRA_IMAGE: &str = "cdsim-dra-driver";

/// The DRA binaries built from the snapshot (one `go build`): the compute-domain
/// ones (scenario 4) and the GPU kubelet plugin (scenario 5's DRA rows).
pub const DRA_BINARIES: [&str; 4] = [
    "compute-domain-kubelet-plugin",
    "compute-domain-controller",
    "compute-domain-daemon",
    "gpu-kubelet-plugin",
];

/// The build recipe's version, part of the Go output's cache key: bump it when
/// [`DRA_BINARIES`] or the build's flags change, so that a cached build of the
/// old recipe (e.g. without `gpu-kubelet-plugin`) is not reused.
const DRA_RECIPE: u32 = 2;

/// The applets the chart's init script and containers call, as busybox links.
const BUSYBOX_LINKS: [&str; 20] = [
    "[", "basename", "cat", "cp", "date", "env", "find", "grep", "head", "ln", "ls", "mkdir",
    "mount", "printf", "rm", "sed", "sh", "sleep", "test", "true",
];

/// glibc's name service order as `gcr.io/distroless/cc` has it (files, then
/// DNS); the workload image ships the same file.
const NSSWITCH_CONF: &str = "manifests/workload-rootfs/etc/nsswitch.conf";

/// The shared libraries `gcr.io/distroless/cc` (NVIDIA's base image) has
/// beyond what the Go binaries' closure brings, with the Debian package of each.
const DISTROLESS_CC_LIBS: [(&str, &str); 3] = [
    ("libgcc_s.so.1", "libgcc-s1"),
    ("libm.so.6", "libc6"),
    ("libstdc++.so.6", "libstdc++6"),
];

// ---------------------------------------------------------------- pure planning

/// Everything the image is made of, on the build host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInputs {
    /// The directory with [`DRA_BINARIES`].
    pub bin_dir: PathBuf,
    /// `nvidia-cdi-hook` (nvidia-container-toolkit).
    pub cdi_hook: PathBuf,
    /// The snapshot's unpacked tree (`hack/kubelet-plugin-prestart.sh`, `templates/`).
    pub source: PathBuf,
    /// The snapshot's `templates/*` file names.
    pub templates: Vec<String>,
    /// A static bash (the chart runs `bash …`).
    pub bash: PathBuf,
    /// A static busybox.
    pub busybox: PathBuf,
}

pub(crate) fn host_file(path: &str, host: &Path, mode: u32, links: &[&str]) -> FileSpec {
    FileSpec {
        path: path.to_owned(),
        kind: FileKind::File {
            source: Source::Host {
                path: host.to_string_lossy().into_owned(),
                // Not built by Nix (the DRA driver is not in nixpkgs): the names say so.
                nix: String::new(),
                nix_path: String::new(),
            },
            mode,
            links: links.iter().map(|it| (*it).to_owned()).collect(),
        },
    }
}

/// The DRA driver image, laid out as its Dockerfile does (binaries in
/// `/usr/bin`, templates at `/templates`, a static `/bin/bash`), with busybox
/// for the init script's tools; the builder adds glibc and `libgcc_s` for the
/// cgo kubelet plugin.
pub fn image_spec(inputs: &ImageInputs) -> ImageSpec {
    let mut files: Vec<FileSpec> = DRA_BINARIES
        .iter()
        .map(|name| {
            host_file(
                &format!("/usr/bin/{name}"),
                &inputs.bin_dir.join(name),
                0o755,
                &[],
            )
        })
        .collect();
    files.push(host_file(
        "/usr/bin/nvidia-cdi-hook",
        &inputs.cdi_hook,
        0o755,
        &[],
    ));
    files.push(host_file(
        "/usr/bin/kubelet-plugin-prestart.sh",
        &inputs.source.join("hack/kubelet-plugin-prestart.sh"),
        0o755,
        &[],
    ));
    files.push(host_file("/bin/bash", &inputs.bash, 0o755, &[]));
    files.push(host_file(
        "/bin/busybox",
        &inputs.busybox,
        0o755,
        &BUSYBOX_LINKS,
    ));
    for name in &inputs.templates {
        files.push(host_file(
            &format!("/templates/{name}"),
            &inputs.source.join("templates").join(name),
            0o644,
            &[],
        ));
    }
    // gcr.io/distroless/cc has it (`hosts: files dns`). Without it glibc asks
    // DNS before /etc/hosts, and a driver-root program resolving the daemons'
    // names, which NVIDIA's daemon maps in /etc/hosts only, waits on the
    // cluster's DNS first: under load it times out and the name stays
    // unresolved (one of 18 IMEX test double daemons on the full rack).
    files.push(FileSpec {
        path: "/etc/nsswitch.conf".to_owned(),
        kind: FileKind::File {
            source: Source::Repo(NSSWITCH_CONF.to_owned()),
            mode: 0o644,
            links: Vec::new(),
        },
    });
    files.push(FileSpec::sticky_tmp());
    ImageSpec {
        name: DRA_IMAGE.to_owned(),
        description: "NVIDIA's DRA driver (compute domains and GPUs), built from the pinned snapshot for scenarios 4 and 5".to_owned(),
        entrypoint: Vec::new(),
        cmd: vec!["/bin/sh".to_owned()],
        env: vec!["PATH=/usr/bin:/bin".to_owned()],
        workdir: "/".to_owned(),
        labels: [
            ("org.opencontainers.image.title", DRA_IMAGE),
            (
                "org.opencontainers.image.description",
                "NVIDIA DRA driver for GPUs, compute-domain and GPU components (cdsim scenarios 4 and 5; local build)",
            ),
            ("org.opencontainers.image.licenses", "Apache-2.0"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect(),
        imex_label: None,
        files,
        user: None,
    }
}

/// The pinned DRA snapshot.
struct Snapshot {
    archive: PathBuf,
    sha256: String,
    version: String,
}

impl Snapshot {
    fn key(&self) -> &str {
        &self.sha256[..16]
    }

    /// The cache entry of the built binaries: the snapshot and the recipe.
    fn binaries_key(&self) -> String {
        binaries_key(self.key())
    }
}

pub(crate) fn pinned(versions: &toml::Table, key: &str) -> Result<String> {
    versions
        .get("peers")
        .and_then(|peers| peers.get(key))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("manifests/versions.toml has no [peers] {key}"))
}

fn snapshot() -> Result<Snapshot> {
    let versions = xtask_support::tools::read_versions()?;
    let name = pinned(&versions, "dra_driver_archive")?;
    let sha256 = pinned(&versions, "dra_driver_sha256")?;
    let version = pinned(&versions, "dra_driver_version")?;
    let mut candidates: Vec<PathBuf> = std::env::var_os("CDSIM_PEERS_DIR")
        .filter(|it| !it.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(crate::project_root().join("../shared/peers"));
    candidates.push(crate::dirs::cache_dir()?.join("peers"));
    let archive = candidates
        .iter()
        .map(|dir| dir.join(&name))
        .find(|path| path.is_file())
        .with_context(|| {
            format!(
                "{name} (NVIDIA's DRA driver snapshot, see ../shared/peers/README.md) is in none of {candidates:?}: \
                 set CDSIM_PEERS_DIR to the directory holding it"
            )
        })?;
    Ok(Snapshot {
        archive,
        sha256,
        version,
    })
}

/// `dra-driver-<snapshot key>-r<recipe>`: the Go outputs' cache directory name.
fn binaries_key(snapshot_key: &str) -> String {
    format!("dra-driver-{snapshot_key}-r{DRA_RECIPE}")
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// `<cache>/<key>`, made by `make(staging)` into a fresh directory and renamed
/// into place, so an interrupted build never leaves a partial entry behind.
/// Builders of one key take turns (`<cache>/.<key>.lock`): a second one waits
/// and then finds the entry made, instead of building it again beside the first.
pub(crate) fn cached(
    parent: &Path,
    key: &str,
    make: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let dir = parent.join(key);
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let _turn = xtask_support::tools::lock_file(&parent.join(format!(".{key}.lock")))?;
    if dir.is_dir() {
        return Ok(dir);
    }
    let staging = parent.join(format!(".{key}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    if let Err(err) = make(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(err);
    }
    if let Err(err) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir_all(&staging);
        if !dir.is_dir() {
            return Err(err).with_context(|| format!("cannot move the build to {}", dir.display()));
        }
    }
    Ok(dir)
}

/// The snapshot's tree, unpacked once into the cache; returns its top directory.
fn source_tree(sh: &Shell, snapshot: &Snapshot) -> Result<PathBuf> {
    let parent = crate::dirs::cache_dir()?.join("src");
    let dir = cached(&parent, &format!("dra-driver-{}", snapshot.key()), |out| {
        let actual = sha256_file(&snapshot.archive)?;
        if actual != snapshot.sha256 {
            bail!(
                "{} has sha256 {actual}, not the pinned {}: replace it with the snapshot ../shared/peers/README.md names",
                snapshot.archive.display(),
                snapshot.sha256
            );
        }
        let archive = &snapshot.archive;
        cmd!(sh, "tar -xzf {archive} -C {out}")
            .quiet()
            .run()
            .context("cannot unpack the DRA snapshot")?;
        Ok(())
    })?;
    let top = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.join("go.mod").is_file())
        .with_context(|| format!("{} holds no Go module: remove it and rerun", dir.display()))?;
    Ok(top)
}

/// The DRA binaries, built once per snapshot and recipe (minutes cold on 2 cores).
fn dra_binaries(sh: &Shell, tree: &Path, snapshot: &Snapshot) -> Result<PathBuf> {
    let parent = crate::dirs::cache_dir()?.join("go");
    cached(&parent, &snapshot.binaries_key(), |out| {
        eprintln!(
            "    go build {} from the DRA snapshot (minutes when cold)",
            DRA_BINARIES.join(", ")
        );
        let started = Instant::now();
        let _dir = sh.push_dir(tree);
        let _env = [
            sh.push_env("GOFLAGS", "-mod=vendor"),
            sh.push_env("GOPROXY", "off"),
            sh.push_env("GOTOOLCHAIN", "local"),
            // The kubelet plugins dlopen NVML through cgo; one setting for all
            // of them shares the build cache.
            sh.push_env("CGO_ENABLED", "1"),
        ];
        let ldflags = format!(
            "-s -w -X sigs.k8s.io/dra-driver-nvidia-gpu/internal/info.version={}",
            snapshot.version
        );
        let out_arg = format!("{}/", out.display());
        let packages: Vec<String> = DRA_BINARIES
            .iter()
            .map(|it| format!("./cmd/{it}"))
            .collect();
        cmd!(
            sh,
            "nice -n 10 go build -ldflags {ldflags} -o {out_arg} {packages...}"
        )
        .run()
        .context(
            "go build of the DRA driver failed (needs Go 1.26, see ../shared/peers/README.md)",
        )?;
        eprintln!("    built in {:.0} s", started.elapsed().as_secs_f64());
        Ok(())
    })
}

/// `nvidia-cdi-hook` from the module proxy at the pinned toolkit version.
fn cdi_hook(sh: &Shell) -> Result<PathBuf> {
    let versions = xtask_support::tools::read_versions()?;
    let version = pinned(&versions, "nvidia_container_toolkit")?;
    let parent = crate::dirs::cache_dir()?.join("go");
    let dir = cached(&parent, &format!("nvidia-cdi-hook-{version}"), |out| {
        eprintln!("    go install nvidia-cdi-hook@{version}");
        let _env = [
            sh.push_env("GOBIN", out),
            sh.push_env("GOFLAGS", ""),
            sh.push_env("GOTOOLCHAIN", "local"),
        ];
        let package =
            format!("github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@{version}");
        cmd!(sh, "nice -n 10 go install {package}")
            .run()
            .context("go install nvidia-cdi-hook failed: is the Go module proxy reachable?")?;
        Ok(())
    })?;
    Ok(dir.join("nvidia-cdi-hook"))
}

fn existing(path: &str, fix: &str) -> Result<PathBuf> {
    let path = PathBuf::from(path);
    if path.is_file() {
        Ok(path)
    } else {
        bail!("{} is missing: {fix}", path.display())
    }
}

/// The built image and the chart directory of the same snapshot.
pub struct BuiltDra {
    /// The archive for `kind load image-archive`.
    pub archive: PathBuf,
    /// Its reference (content tag).
    pub image: ImageRef,
    /// The snapshot's chart.
    pub chart: PathBuf,
}

/// NVIDIA's DRA driver as a run installs it, from whichever source
/// (`crate::gpu_source`): the image as the chart names it, the chart, and
/// where the image came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraImage {
    /// The image the chart points at.
    pub image: ImageRef,
    /// The chart: the snapshot's directory, or the released archive.
    pub chart: PathBuf,
    /// Where the image came from, for the report.
    pub origin: String,
}

/// The directory of [`DRA_BINARIES`] built from the pinned snapshot (once per snapshot, in the
/// cache): the one Go build of the DRA driver, which scenario 4's image and the node-software
/// tests (`tests/nvidia_node_software.rs`) share. Go's build cache keys a package on its
/// directory, so a second build from another unpacked tree would compile every package again.
pub fn binaries(sh: &Shell) -> Result<PathBuf> {
    let snapshot = snapshot()?;
    let tree = source_tree(sh, &snapshot)?;
    dra_binaries(sh, &tree, &snapshot)
}

/// Everything [`build`] takes from the cache (the snapshot's tree, the Go build, the CDI
/// hook), without writing the image: what `cargo xtask prebuild` warms. Returns the binaries'
/// directory.
pub fn prebuild(sh: &Shell) -> Result<PathBuf> {
    let dir = binaries(sh)?;
    cdi_hook(sh)?;
    Ok(dir)
}

/// Builds (or reuses) the binaries and writes the image archive into `out_dir`.
pub fn build(sh: &Shell, out_dir: &Path) -> Result<BuiltDra> {
    let bash = existing(
        "/bin/bash-static",
        "apt-get install bash-static (the chart runs bash)",
    )?;
    let busybox = existing("/bin/busybox", "apt-get install busybox-static")?;
    let snapshot = snapshot()?;
    let tree = source_tree(sh, &snapshot)?;
    let bin_dir = dra_binaries(sh, &tree, &snapshot)?;
    let cdi_hook = cdi_hook(sh)?;
    let mut templates: Vec<String> = std::fs::read_dir(tree.join("templates"))
        .with_context(|| format!("reading {}/templates", tree.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    templates.sort();
    let mut spec = image_spec(&ImageInputs {
        bin_dir,
        cdi_hook,
        source: tree.clone(),
        templates,
        bash,
        busybox,
    });
    let cache = image_builder::host::read_ld_cache()?;
    // NVIDIA's image is gcr.io/distroless/cc:debug (its Dockerfile): glibc,
    // libgcc_s and libstdc++ whatever its own binaries need. The driver-root
    // programs its containers run with this image's loader and libraries (the
    // init script's nvidia-smi, the daemon's nvidia-imex through the CDI
    // spec) rely on them; no Go binary pulls them in.
    for (soname, package) in DISTROLESS_CC_LIBS {
        let lib = cache
            .iter()
            .find(|it| it.soname == soname)
            .with_context(|| {
                format!("{soname} is not in the host's loader cache: apt-get install {package}")
            })?;
        spec.files
            .push(host_file(&lib.path, Path::new(&lib.path), 0o644, &[]));
    }
    let root = crate::project_root();
    let inputs = image_builder::build::Inputs::host_files(&root);
    let built =
        image_builder::build::build_image(&spec, &inputs, &image_builder::host::RealFs, &cache)
            .context("cannot build the DRA driver image")?;
    let archive = image_builder::build::write_archive_file(&built, out_dir)?;
    let image = ImageRef::parse(&built.reference())?;
    Ok(BuiltDra {
        archive,
        image,
        chart: tree.join("deployments/helm/dra-driver-nvidia-gpu"),
    })
}

/// Why scenario 4 cannot run here, if it cannot: NVIDIA's DRA driver is built
/// from its source snapshot (no registry serves it), which needs the snapshot
/// and, until the build is cached, Go.
pub(crate) fn missing_prerequisite() -> Option<String> {
    let snapshot = match snapshot() {
        Ok(snapshot) => snapshot,
        Err(err) => return Some(format!("{err:#}")),
    };
    let built = crate::dirs::cache_dir()
        .map(|dir| dir.join("go").join(snapshot.binaries_key()).is_dir())
        .unwrap_or(false);
    if !built && xtask_support::tools::find_on_path("go").is_none() {
        return Some(
            "NVIDIA's DRA driver is built from its source snapshot with Go 1.26, and no `go` is on PATH: \
             install Go (or use `nix develop`) and rerun `cargo xtask scenario4`"
                .to_owned(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real build: the image from the cached Go outputs, as scenario 4 makes it.
    #[test]
    #[ignore = "builds NVIDIA's DRA driver from the snapshot (minutes when the Go cache is cold); `cargo xtask scenario4` runs the same build on the CI cluster"]
    fn builds_the_dra_image_from_the_snapshot() {
        let sh = xshell::Shell::new().expect("shell");
        let out = tempfile::tempdir().expect("tempdir");
        let image = build(&sh, out.path()).expect("build");
        assert_eq!(image.image.repository, DRA_IMAGE);
        assert!(image.archive.is_file());
        assert!(image.chart.join("Chart.yaml").is_file());
        eprintln!("{} {}", image.image, image.archive.display());
    }

    #[test]
    fn concurrent_builders_of_one_entry_build_it_once() {
        let parent = tempfile::tempdir().expect("tempdir");
        let builds = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    let dir = cached(parent.path(), "entry", |out| {
                        builds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        std::fs::write(out.join("made"), "x")?;
                        Ok(())
                    })
                    .expect("cached");
                    assert!(dir.join("made").is_file());
                });
            }
        });
        assert_eq!(builds.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn the_binaries_key_names_the_recipe_so_an_older_build_is_not_reused() {
        assert_eq!(
            binaries_key("0123456789abcdef"),
            "dra-driver-0123456789abcdef-r2"
        );
        assert_ne!(
            binaries_key("k"),
            "dra-driver-k",
            "the recipe-less key of the 3-binary build"
        );
        assert!(DRA_BINARIES.contains(&"gpu-kubelet-plugin"));
    }

    #[test]
    fn the_image_has_the_binaries_the_script_bash_busybox_and_templates() {
        let spec = image_spec(&ImageInputs {
            bin_dir: PathBuf::from("/b"),
            cdi_hook: PathBuf::from("/h/nvidia-cdi-hook"),
            source: PathBuf::from("/s"),
            templates: vec!["compute-domain-daemon.tmpl.yaml".to_owned()],
            bash: PathBuf::from("/bin/bash-static"),
            busybox: PathBuf::from("/bin/busybox"),
        });
        for name in DRA_BINARIES {
            assert_eq!(
                spec.host_source(&format!("/usr/bin/{name}"))
                    .map(str::to_owned),
                Some(format!("/b/{name}"))
            );
        }
        assert_eq!(
            spec.host_source("/usr/bin/nvidia-cdi-hook"),
            Some("/h/nvidia-cdi-hook")
        );
        assert_eq!(
            spec.host_source("/usr/bin/kubelet-plugin-prestart.sh"),
            Some("/s/hack/kubelet-plugin-prestart.sh")
        );
        assert_eq!(spec.host_source("/bin/bash"), Some("/bin/bash-static"));
        let nsswitch = spec.files.iter().find(|it| it.path == "/etc/nsswitch.conf");
        assert!(
            matches!(&nsswitch.expect("nsswitch.conf").kind,
                FileKind::File { source: Source::Repo(rel), .. } if rel == NSSWITCH_CONF),
            "glibc must read /etc/hosts before DNS"
        );
        let text = std::fs::read_to_string(crate::project_root().join(NSSWITCH_CONF))
            .expect("nsswitch.conf");
        assert!(text
            .lines()
            .any(|it| it.split_whitespace().collect::<Vec<_>>() == ["hosts:", "files", "dns"]));
        assert_eq!(
            spec.host_source("/templates/compute-domain-daemon.tmpl.yaml"),
            Some("/s/templates/compute-domain-daemon.tmpl.yaml")
        );
        let links = spec.files.iter().find_map(|it| match &it.kind {
            FileKind::File { links, .. } if it.path == "/bin/busybox" => Some(links.clone()),
            _ => None,
        });
        let links = links.expect("busybox");
        // hack/kubelet-plugin-prestart.sh calls these.
        for tool in [
            "ln", "find", "ls", "basename", "date", "sleep", "head", "env",
        ] {
            assert!(links.iter().any(|it| it == tool), "{tool}");
        }
    }
}
