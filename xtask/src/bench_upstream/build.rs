//! Both sides and the probes, built: upstream's Go mock from the pinned
//! snapshot (offline, cached per snapshot hash), ours in release, the C
//! driver, the go-nvml probe, the pynvml venv and the two floor programs.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, ensure, Context as _, Result};
use sha2::{Digest as _, Sha256};
use xshell::{cmd, Shell};

use super::{Probes, Side};
use crate::flags::BenchVsUpstreamArgs;

/// Builds both sides; upstream's profile sized to 4 GPUs with our memory total.
pub(super) fn sides(sh: &Shell, args: &BenchVsUpstreamArgs, work: &Path) -> Result<[Side; 2]> {
    let upstream = ensure_upstream(sh, args)?;
    let ours = ensure_ours(sh, work)?;
    let original = fs::read_to_string(&upstream.original_profile)
        .with_context(|| format!("reading {}", upstream.original_profile.display()))?;
    let memory_total = our_memory_total(&ours.profile)?;
    fs::write(
        &upstream.profile,
        sized_profile(&original, 4, memory_total)?,
    )?;
    eprintln!("    upstream's profile: 4 GPUs (as its setup.sh sizes it), memory total {memory_total} bytes as ours");
    Ok([
        Side {
            name: "upstream",
            library: upstream.library,
            lib_dir: upstream.lib_dir,
            check_fabric: upstream.check_fabric,
            profile: upstream.profile,
        },
        Side {
            name: "ours",
            library: ours.library,
            lib_dir: ours.lib_dir,
            check_fabric: ours.check_fabric,
            profile: ours.profile,
        },
    ])
}

pub(super) fn probes(sh: &Shell, root: &Path, work: &Path) -> Result<Probes> {
    let driver = work.join("driver");
    let source = root.join("xtask/bench/driver.c");
    cmd!(sh, "cc -O2 -Wall -o {driver} {source} -ldl -lpthread").run()?;
    let go_probe = work.join("go-nvml-probe");
    {
        let _dir = sh.push_dir(root.join("tests/nvml/go"));
        let _flags = sh.push_env("GOFLAGS", "-mod=readonly");
        cmd!(sh, "go build -o {go_probe} ./probe")
            .run()
            .context("go build tests/nvml/go/probe (needs the Go module proxy for go-nvml)")?;
    }
    let python = pynvml_python(sh, root)?;
    let floor_c = work.join("floor-static");
    let floor_source = root.join("xtask/bench/floor.c");
    cmd!(sh, "cc -O2 -static -o {floor_c} {floor_source}").run()?;
    let floor_go = work.join("floor-go");
    let floor_go_source = root.join("xtask/bench/floor-go/main.go");
    {
        let _dir = sh.push_dir(work);
        cmd!(sh, "go build -o {floor_go} {floor_go_source}").run()?;
    }
    Ok(Probes {
        driver,
        go_probe,
        python,
        python_probe: root.join("xtask/bench/pynvml_probe.py"),
        floor_c,
        floor_go,
    })
}

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
struct Upstream {
    lib_dir: PathBuf,
    library: PathBuf,
    check_fabric: PathBuf,
    profile: PathBuf,
    /// Upstream's gb200 profile as its snapshot ships it.
    original_profile: PathBuf,
}

/// Builds upstream once per snapshot hash into the cache; later runs reuse it.
fn ensure_upstream(sh: &Shell, args: &BenchVsUpstreamArgs) -> Result<Upstream> {
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
    };
    let done = dir.join(".built");
    if done.exists() && upstream.original_profile.exists() {
        eprintln!("    upstream: reusing the build in {}", dir.display());
        return Ok(upstream);
    }
    let cached_snapshot = crate::dirs::cache_dir()?.join("peers").join(&pin.file);
    let snapshot = find_snapshot(args.snapshot.as_deref(), &pin, &cached_snapshot)?;
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
    if snapshot != cached_snapshot {
        fs::create_dir_all(cached_snapshot.parent().unwrap_or(Path::new("/")))?;
        fs::copy(&snapshot, &cached_snapshot)?;
    }
    fs::write(&done, &pin.sha256)?;
    Ok(upstream)
}

/// Upstream's `setup.sh`: `sed "/^system:/a\  num_devices: N"`; and, so that both sides serve
/// the same part, the memory total of our profile (189,471 MiB, what a GB200 reports, where
/// upstream's profile rounds it to 192 GiB) in the first `memory:` block's `total_bytes`, with
/// `free_bytes` kept at total minus `reserved_bytes`.
fn sized_profile(profile: &str, gpus: usize, memory_total: u64) -> Result<String> {
    let mut out = String::with_capacity(profile.len() + 32);
    let mut inserted = false;
    let mut in_memory = false;
    let mut total_set = false;
    let mut reserved = None;
    for line in profile.lines() {
        let trimmed = line.trim_start();
        let value = |key: &str| {
            trimmed
                .strip_prefix(key)
                .and_then(|rest| rest.split('#').next())
                .map(str::trim)
        };
        if trimmed == "memory:" && !total_set {
            in_memory = true;
        } else if in_memory && !line.starts_with("    ") {
            in_memory = false;
        }
        let indent = &line[..line.len() - trimmed.len()];
        if in_memory && value("total_bytes:").is_some() {
            out.push_str(&format!("{indent}total_bytes: {memory_total}\n"));
            total_set = true;
            continue;
        }
        if in_memory {
            if let Some(bytes) = value("reserved_bytes:") {
                reserved = Some(bytes.parse::<u64>().context("upstream's reserved_bytes")?);
            }
            if value("free_bytes:").is_some() {
                let reserved =
                    reserved.context("upstream's memory lists free_bytes before reserved_bytes")?;
                let free = memory_total.saturating_sub(reserved);
                out.push_str(&format!("{indent}free_bytes: {free}\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
        if line == "system:" {
            out.push_str(&format!("  num_devices: {gpus}\n"));
            inserted = true;
        }
    }
    ensure!(inserted, "upstream's gb200 profile has no `system:` line");
    ensure!(
        total_set,
        "upstream's gb200 profile has no `memory:` block with `total_bytes`"
    );
    Ok(out)
}

/// `device_defaults.memory.total` of our profile.
fn our_memory_total(profile: &Path) -> Result<u64> {
    let text =
        fs::read_to_string(profile).with_context(|| format!("reading {}", profile.display()))?;
    let doc: serde_yaml::Value = serde_yaml::from_str(&text)?;
    doc["device_defaults"]["memory"]["total"]
        .as_u64()
        .with_context(|| format!("{} has no device_defaults.memory.total", profile.display()))
}

/// Ours: the release library and check-fabric, and the shipped gb200 profile (4 GPUs).
struct Ours {
    lib_dir: PathBuf,
    library: PathBuf,
    check_fabric: PathBuf,
    profile: PathBuf,
}

fn ensure_ours(sh: &Shell, work: &Path) -> Result<Ours> {
    cmd!(sh, "cargo build --release -p mock-nvml -p check-fabric").run()?;
    let root = crate::project_root();
    let release = crate::dirs::target_dir()?.join("release");
    let lib_dir = work.join("ours-lib");
    fs::create_dir_all(&lib_dir)?;
    let library = lib_dir.join("libnvidia-ml.so.1");
    let built = release.join("libnvidia_ml.so");
    fs::copy(&built, &library).with_context(|| format!("copying {}", built.display()))?;
    Ok(Ours {
        lib_dir,
        library,
        check_fabric: release.join("check-fabric"),
        profile: root.join("manifests/helm/nvml-mock/profiles/gb200.yaml"),
    })
}

/// Python with the pinned nvidia-ml-py, in the venv the client tests use (created when absent).
fn pynvml_python(sh: &Shell, root: &Path) -> Result<PathBuf> {
    let versions = crate::tools::read_versions()?;
    let version = versions
        .get("peers")
        .and_then(|peers| peers.get("nvidia_ml_py"))
        .and_then(|value| value.as_str())
        .context("manifests/versions.toml has no [peers].nvidia_ml_py")?
        .to_owned();
    let venv = root.join("target").join(format!("nvml-venv-{version}"));
    let python = venv.join("bin/python");
    if !venv.join(".installed").exists() {
        cmd!(sh, "python3 -m venv {venv}")
            .run()
            .context("python3 -m venv (apt-get install python3-venv)")?;
        let spec = format!("nvidia-ml-py=={version}");
        cmd!(
            sh,
            "{python} -m pip install --quiet --disable-pip-version-check {spec}"
        )
        .run()
        .context("pip install nvidia-ml-py (needs PyPI)")?;
        fs::write(venv.join(".installed"), &version)?;
    }
    Ok(python)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_sized_as_setup_sh_does() {
        let profile = "version: 1\nsystem:\n  driver_version: x\ndevice_defaults:\n  memory:\n    total_bytes: 100   # note\n    reserved_bytes: 10\n    free_bytes: 90\n  bar1_memory:\n    total_bytes: 7\n";
        let sized = sized_profile(profile, 4, 50).unwrap();
        assert_eq!(
            sized,
            "version: 1\nsystem:\n  num_devices: 4\n  driver_version: x\ndevice_defaults:\n  memory:\n    total_bytes: 50\n    reserved_bytes: 10\n    free_bytes: 40\n  bar1_memory:\n    total_bytes: 7\n"
        );
        assert!(sized_profile("version: 1\n", 4, 50).is_err());
        assert!(sized_profile("version: 1\nsystem:\n", 4, 50).is_err());
    }
}
