//! Both sides and the probes, built: upstream's Go mock from the pinned
//! snapshot (offline, cached per snapshot hash), ours in release, the C
//! driver, the go-nvml probe, the pynvml venv and the two floor programs.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{ensure, Context as _, Result};
use xshell::{cmd, Shell};

use super::sides::{Probes, Side, Topologies};
use crate::flags::BenchVsUpstreamArgs;

/// Builds both sides; upstream's profile sized to 4 GPUs with our memory total.
pub(super) fn sides(
    sh: &Shell,
    args: &BenchVsUpstreamArgs,
    work: &Path,
    topologies: &Topologies,
) -> Result<[Side; 2]> {
    let upstream = crate::upstream_mock::ensure(sh, args.snapshot.as_deref())?;
    let ours = ensure_ours(sh, work)?;
    let original = fs::read_to_string(&upstream.original_profile)
        .with_context(|| format!("reading {}", upstream.original_profile.display()))?;
    let memory_total = ours.memory_total;
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
            topology: topologies.yaml.clone(),
        },
        Side {
            name: "ours",
            library: ours.library,
            lib_dir: ours.lib_dir,
            check_fabric: ours.check_fabric,
            profile: ours.profile,
            topology: topologies.staged.clone(),
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

/// Upstream's `setup.sh`: `sed "/^system:/a\  num_devices: N"`; and, so that both sides serve
/// the same part, the memory total of our profile (189,471 MiB, what a GB200 reports, where
/// upstream's profile rounds it to 192 GiB) in the first `memory:` block's `total_bytes`, with
/// `free_bytes` kept at total minus `reserved_bytes`.
fn sized_profile(profile: &str, gpus: usize, memory_total: u64) -> Result<String> {
    let profile = crate::upstream_mock::with_num_devices(profile, gpus)?;
    let mut out = String::with_capacity(profile.len() + 32);
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
    }
    ensure!(
        total_set,
        "upstream's gb200 profile has no `memory:` block with `total_bytes`"
    );
    Ok(out)
}

/// Ours: the release library and check-fabric, and the shipped gb200 profile (4 GPUs) as the
/// stager stages it on every node (`driver/config/profile.bin`: parsed, `num_devices` set and
/// written by `nvml_profile::staged::encode`): the file the library reads in a cluster, as
/// upstream's side reads the file its setup gives it.
struct Ours {
    lib_dir: PathBuf,
    library: PathBuf,
    check_fabric: PathBuf,
    profile: PathBuf,
    /// The profile's memory total (upstream's profile is given the same).
    memory_total: u64,
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
    let shipped = root.join("manifests/helm/nvml-mock/profiles/gb200.yaml");
    let text =
        fs::read_to_string(&shipped).with_context(|| format!("reading {}", shipped.display()))?;
    let staged = nvml_profile::Profile::parse(&text)
        .and_then(|profile| profile.with_num_devices(4))
        .with_context(|| format!("staging {}", shipped.display()))?;
    let memory_total = staged
        .devices()
        .first()
        .map(|gpu| gpu.memory.total)
        .with_context(|| format!("{} has no GPU", shipped.display()))?;
    let profile = work.join("ours-profile.bin");
    let bytes = nvml_profile::staged::encode(&staged);
    if fs::read(&profile).ok() != Some(bytes.clone()) {
        fs::write(&profile, bytes).with_context(|| format!("writing {}", profile.display()))?;
    }
    Ok(Ours {
        lib_dir,
        library,
        check_fabric: release.join("check-fabric"),
        profile,
        memory_total,
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
