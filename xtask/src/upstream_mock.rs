//! Upstream's mock NVML library (NVIDIA k8s-test-infra's Go mock, `pkg/gpu/mocknvml`), built
//! from the pinned source snapshot (`[upstream]` in `manifests/versions.toml`) offline with its
//! own `make`, into a cache directory keyed by the snapshot's sha256. `bench-vs-upstream`,
//! `conformance` and `nvml-functions` all take it from here.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, ensure, Context as _, Result};
use sha2::{Digest as _, Sha256};
use xshell::{cmd, Shell};

/// The pinned snapshot: file name and sha256.
struct Pin {
    file: String,
    sha256: String,
}

fn pin() -> Result<Pin> {
    let versions = crate::tools::read_versions()?;
    let field = |key: &str| -> Result<String> {
        versions
            .get("upstream")
            .and_then(|table| table.get(key))
            .and_then(|value| value.as_str())
            .map(str::to_owned)
            .with_context(|| format!("manifests/versions.toml has no [upstream].{key}"))
    };
    Ok(Pin {
        file: field("k8s_test_infra_file")?,
        sha256: field("k8s_test_infra_sha256")?,
    })
}

fn sha256_of(path: &Path) -> Result<String> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!("{:x}", Sha256::digest(bytes)))
}

/// Where the snapshot is: `--snapshot`, the directory `CDSIM_PEERS_DIR` names, `../shared/peers/`
/// beside the project root, or the copy a previous run kept in the cache.
fn find_snapshot(explicit: Option<&Path>, pin: &Pin, cached: &Path) -> Result<PathBuf> {
    let root = crate::project_root();
    let mut candidates = Vec::new();
    if let Some(path) = explicit {
        candidates.push(path.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("CDSIM_PEERS_DIR").filter(|dir| !dir.is_empty()) {
        candidates.push(PathBuf::from(dir).join(&pin.file));
    }
    candidates.push(root.join("../shared/peers").join(&pin.file));
    candidates.push(cached.to_path_buf());
    for candidate in &candidates {
        if candidate.is_file() {
            let got = sha256_of(candidate)?;
            ensure!(
                got == pin.sha256,
                "{} has sha256 {got}, but manifests/versions.toml pins {}: use the pinned snapshot",
                candidate.display(),
                pin.sha256
            );
            return Ok(candidate.clone());
        }
    }
    bail!(
        "upstream's snapshot {} is not in any of {}: pass --snapshot <path to {}> or set CDSIM_PEERS_DIR to its directory",
        pin.file,
        candidates
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        pin.file
    )
}

/// The pinned snapshot of upstream's source, verified: `explicit`, else where
/// [`find_snapshot`] looks (`cargo xtask nvml-functions` reads its bridge from it too).
pub(crate) fn pinned_snapshot(explicit: Option<&Path>) -> Result<PathBuf> {
    let pin = pin()?;
    let cached = crate::dirs::cache_dir()?.join("peers").join(&pin.file);
    find_snapshot(explicit, &pin, &cached)
}

/// Upstream's built library, check-fabric and 4-GPU profile.
pub(crate) struct Upstream {
    pub(crate) lib_dir: PathBuf,
    pub(crate) library: PathBuf,
    pub(crate) check_fabric: PathBuf,
    pub(crate) profile: PathBuf,
    /// Upstream's gb200 profile as its snapshot ships it.
    pub(crate) original_profile: PathBuf,
    /// Its `configs/` directory: one `mock-nvml-config-<profile>.yaml` per GPU profile.
    pub(crate) configs: PathBuf,
    /// Its `bridge/` Go sources: which functions it exports, and which with behaviour.
    pub(crate) bridge: PathBuf,
}

/// Builds upstream once per snapshot hash into the cache; later runs reuse it.
pub(crate) fn ensure(sh: &Shell, snapshot: Option<&Path>) -> Result<Upstream> {
    let pin = pin()?;
    let dir = crate::dirs::cache_dir()?
        .join("upstream-mock")
        .join(&pin.sha256[..16]);
    let upstream = Upstream {
        lib_dir: dir.join("lib"),
        library: dir.join("lib/libnvidia-ml.so.1"),
        check_fabric: dir.join("check-fabric"),
        profile: dir.join("gb200-4gpu.yaml"),
        original_profile: dir.join("gb200-upstream.yaml"),
        configs: dir.join("configs"),
        bridge: dir.join("bridge"),
    };
    let done = dir.join(".built");
    let cached_snapshot = crate::dirs::cache_dir()?.join("peers").join(&pin.file);
    if done.exists() && upstream.original_profile.exists() {
        eprintln!("    upstream: reusing the build in {}", dir.display());
        if !upstream.configs.is_dir() || !upstream.bridge.is_dir() {
            let snapshot = find_snapshot(snapshot, &pin, &cached_snapshot)?;
            extract_sources(sh, &snapshot, &dir, &upstream)?;
        }
        return Ok(upstream);
    }
    let snapshot = find_snapshot(snapshot, &pin, &cached_snapshot)?;
    eprintln!(
        "    upstream: building {} offline into {} (a few minutes, once per snapshot)",
        snapshot.display(),
        dir.display()
    );
    let src = dir.join("src");
    if src.exists() {
        fs::remove_dir_all(&src).with_context(|| format!("removing {}", src.display()))?;
    }
    fs::create_dir_all(&src)?;
    cmd!(sh, "tar -xzf {snapshot} -C {src} --strip-components=1").run()?;
    let _flags = sh.push_env("GOFLAGS", "-mod=vendor");
    let _proxy = sh.push_env("GOPROXY", "off");
    let _toolchain = sh.push_env("GOTOOLCHAIN", "local");
    {
        let _dir = sh.push_dir(src.join("pkg/gpu/mocknvml"));
        cmd!(sh, "make")
            .run()
            .context("upstream's make in pkg/gpu/mocknvml")?;
    }
    {
        let _dir = sh.push_dir(&src);
        let out = &upstream.check_fabric;
        cmd!(sh, "go build -o {out} ./cmd/check-fabric")
            .run()
            .context("go build ./cmd/check-fabric")?;
    }
    fs::create_dir_all(&upstream.lib_dir)?;
    let built = fs::canonicalize(src.join("pkg/gpu/mocknvml/libnvidia-ml.so.1"))?;
    fs::copy(&built, &upstream.library)?;
    fs::copy(
        src.join("pkg/gpu/mocknvml/configs/mock-nvml-config-gb200.yaml"),
        &upstream.original_profile,
    )?;
    fs::remove_dir_all(&src)?;
    extract_sources(sh, &snapshot, &dir, &upstream)?;
    if snapshot != cached_snapshot {
        fs::create_dir_all(cached_snapshot.parent().unwrap_or(Path::new("/")))?;
        fs::copy(&snapshot, &cached_snapshot)?;
    }
    fs::write(&done, &pin.sha256)?;
    Ok(upstream)
}

/// Upstream's profiles and bridge sources, from the snapshot into the cache directory.
fn extract_sources(sh: &Shell, snapshot: &Path, dir: &Path, upstream: &Upstream) -> Result<()> {
    let scratch = dir.join("sources.tmp");
    if scratch.exists() {
        fs::remove_dir_all(&scratch)?;
    }
    fs::create_dir_all(&scratch)?;
    cmd!(
        sh,
        "tar -xzf {snapshot} -C {scratch} --strip-components=1 --wildcards */pkg/gpu/mocknvml/configs/* */pkg/gpu/mocknvml/bridge/*"
    )
    .run()
    .context("extracting upstream's configs and bridge from its snapshot")?;
    let mocknvml = scratch.join("pkg/gpu/mocknvml");
    for (from, to) in [("configs", &upstream.configs), ("bridge", &upstream.bridge)] {
        if to.exists() {
            fs::remove_dir_all(to)?;
        }
        fs::rename(mocknvml.join(from), to)
            .with_context(|| format!("moving upstream's {from} into {}", to.display()))?;
    }
    fs::remove_dir_all(&scratch)?;
    Ok(())
}

/// Upstream's `setup.sh`: `sed "/^system:/a\  num_devices: N"`.
pub(crate) fn with_num_devices(profile: &str, devices: usize) -> Result<String> {
    let mut out = String::with_capacity(profile.len() + 24);
    let mut inserted = false;
    for line in profile.lines() {
        out.push_str(line);
        out.push('\n');
        if line == "system:" && !inserted {
            out.push_str(&format!("  num_devices: {devices}\n"));
            inserted = true;
        }
    }
    ensure!(inserted, "upstream's profile has no `system:` line");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_devices_goes_under_system_as_upstreams_setup_puts_it() {
        let sized = with_num_devices("version: \"1.0\"\nsystem:\n  driver_version: x\n", 4)
            .expect("has system");
        assert_eq!(
            sized,
            "version: \"1.0\"\nsystem:\n  num_devices: 4\n  driver_version: x\n"
        );
        assert!(with_num_devices("devices: []\n", 4).is_err());
    }
}
