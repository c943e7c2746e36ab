//! External tools: the Docker engine and the Go-installed CLIs (kind, helm, crictl).
//!
//! The CLIs are `go install`ed at the versions pinned in `manifests/versions.toml`
//! `[tools]` into `/var/cache/cdsim/bin/<tool>-<version>/<tool>`, outside the
//! repository, so fresh clones on the same machine reuse them. A plain
//! `/var/cache/cdsim/bin/<tool>` symlink points at the pinned one for humans.

use std::{
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, format_err, Context, Result};
use xshell::{cmd, Shell};

/// Where every cached build output of the project lives (override: `CDSIM_CACHE_DIR`).
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("CDSIM_CACHE_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from("/var/cache/cdsim"),
    }
}

/// A command-line tool installed from the Go module proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `sigs.k8s.io/kind`.
    Kind,
    /// `helm.sh/helm/v3/cmd/helm` (or `/v4/` for a v4 pin).
    Helm,
    /// `sigs.k8s.io/cri-tools/cmd/crictl`.
    #[allow(dead_code)]
    // Offered to the orchestration (doctor, CI); nothing here needs it yet.
    Crictl,
}

impl Tool {
    /// The binary's name, which is also its key in `[tools]`.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Kind => "kind",
            Tool::Helm => "helm",
            Tool::Crictl => "crictl",
        }
    }

    /// The Go package to install for a pinned version.
    pub fn package(self, version: &str) -> String {
        match self {
            Tool::Kind => "sigs.k8s.io/kind".to_owned(),
            Tool::Helm => {
                let major = version
                    .trim_start_matches('v')
                    .split('.')
                    .next()
                    .unwrap_or("3");
                format!("helm.sh/helm/v{major}/cmd/helm")
            }
            Tool::Crictl => "sigs.k8s.io/cri-tools/cmd/crictl".to_owned(),
        }
    }
}

/// The parsed `manifests/versions.toml`.
pub fn read_versions() -> Result<toml::Table> {
    let path = crate::project_root().join("manifests/versions.toml");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_versions(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Parses the pins file.
pub fn parse_versions(text: &str) -> Result<toml::Table> {
    text.parse::<toml::Table>()
        .map_err(|err| format_err!("invalid TOML: {err}"))
}

/// The version `[tools]` pins for `tool`, validated as `vMAJOR.MINOR.PATCH`.
pub fn tool_version(versions: &toml::Table, tool: Tool) -> Result<String> {
    let Some(value) = versions
        .get("tools")
        .and_then(|tools| tools.get(tool.name()))
    else {
        bail!(
            "manifests/versions.toml has no [tools].{} pin: add one, e.g. {} = \"v1.2.3\"",
            tool.name(),
            tool.name()
        );
    };
    let Some(version) = value.as_str() else {
        bail!("[tools].{} must be a string like \"v1.2.3\"", tool.name());
    };
    if !is_go_version(version) {
        bail!(
            "[tools].{} = {version:?} is not a Go module version like \"v1.2.3\"",
            tool.name()
        );
    }
    Ok(version.to_owned())
}

/// `vMAJOR.MINOR.PATCH` with an optional pre-release suffix.
pub fn is_go_version(version: &str) -> bool {
    let Some(rest) = version.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// Makes sure a Docker engine answers and can run privileged containers (kind
/// nodes); starts Debian's `dockerd` when none answers.
///
/// When this host's capability bounding set lacks capabilities the kernel
/// knows (a sandboxed host), `docker run --privileged` fails with "unable to
/// apply caps"; the engine then gets a default runtime that drops exactly
/// those capabilities before calling runc (see [`capfilter_script`]).
pub fn ensure_engine(sh: &Shell) -> Result<()> {
    let missing = missing_capabilities()?;
    let runtime = if missing.is_empty() {
        None
    } else {
        Some(install_capfilter(&missing)?)
    };
    if engine_answers(sh) {
        if let Some(path) = &runtime {
            configure_runtime(sh, path, true)?;
        }
        return Ok(());
    }
    if let Some(path) = &runtime {
        configure_runtime(sh, path, false)?;
    }
    if find_program("dockerd").is_none() {
        bail!("no Docker engine answers and dockerd is not installed: apt-get install docker.io");
    }
    let log_path = Path::new("/var/log/dockerd.log");
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .context("duplicating the dockerd log handle")?;
    eprintln!(
        "==> no Docker engine answers: starting dockerd (log: {})",
        log_path.display()
    );
    // Its own process group: a Ctrl-C of this run must not take the engine down.
    Command::new("dockerd")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .process_group(0)
        .spawn()
        .context("starting dockerd")?;
    let started = Instant::now();
    let limit = Duration::from_secs(60);
    while started.elapsed() < limit {
        thread::sleep(Duration::from_secs(1));
        if engine_answers(sh) {
            eprintln!(
                "    dockerd is up after {:.1}s",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if started.elapsed().as_secs().is_multiple_of(5) {
            eprintln!("    waiting for dockerd ({}s)", started.elapsed().as_secs());
        }
    }
    bail!(
        "dockerd did not answer within {}s: see {}",
        limit.as_secs(),
        log_path.display()
    )
}

/// The Docker runtime name of the capability filter.
pub const CAPFILTER_RUNTIME: &str = "cdsim-runc";

/// Linux capability names by number (`include/uapi/linux/capability.h`).
const CAPABILITIES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The capabilities up to `last_cap` that the `CapBnd` mask lacks, by name.
pub fn capabilities_missing_from(cap_bnd_hex: &str, last_cap: u32) -> Result<Vec<String>> {
    let mask = u64::from_str_radix(cap_bnd_hex.trim(), 16)
        .map_err(|_| format_err!("CapBnd {cap_bnd_hex:?} is not a hex mask"))?;
    let mut missing = Vec::new();
    for bit in 0..=last_cap.min(63) {
        if mask & (1u64 << bit) == 0 {
            let name = CAPABILITIES
                .get(bit as usize)
                .map_or_else(|| format!("CAP_{bit}"), |n| (*n).to_owned());
            missing.push(name);
        }
    }
    Ok(missing)
}

fn missing_capabilities() -> Result<Vec<String>> {
    let status = fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let Some(cap_bnd) = status.lines().find_map(|line| line.strip_prefix("CapBnd:")) else {
        bail!("/proc/self/status has no CapBnd line");
    };
    let last_cap = fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .context("reading /proc/sys/kernel/cap_last_cap")?
        .trim()
        .parse::<u32>()
        .context("parsing /proc/sys/kernel/cap_last_cap")?;
    capabilities_missing_from(cap_bnd, last_cap)
}

/// The runtime wrapper: drops `missing` from the container's (create/run:
/// the bundle's `config.json`) or exec's (`--process` file) capability sets,
/// then execs `runc`.
pub fn capfilter_script(missing: &[String], runc: &str) -> String {
    let drop = serde_json::to_string(missing).unwrap_or_else(|_| "[]".to_owned());
    format!(
        r#"#!/bin/sh
# Generated by `cargo xtask` (xtask/src/tools.rs); do not edit.
# dockerd's default runtime on this host: runc, with the capabilities this
# host's bounding set lacks removed from the container (create/run: the
# bundle's config.json) or exec (--process file) spec first. Without it every
# privileged container (every kind node) fails with "unable to apply caps".
DROP='{drop}'
bundle="" process="" prev=""
for arg in "$@"; do
  case "$prev" in
    --bundle|-b) bundle="$arg" ;;
    --process|-p) process="$arg" ;;
  esac
  case "$arg" in
    --bundle=*) bundle="${{arg#--bundle=}}" ;;
    --process=*) process="${{arg#--process=}}" ;;
  esac
  prev="$arg"
done
filter() {{ # file jq-path
  jq --argjson drop "$DROP" "if $2 then $2 |= with_entries(.value |= ((. // []) - \$drop)) else . end" "$1" > "$1.capfilter" &&
    mv "$1.capfilter" "$1"
}}
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then filter "$bundle/config.json" .process.capabilities; fi
if [ -n "$process" ] && [ -f "$process" ]; then filter "$process" .capabilities; fi
exec {runc} "$@"
"#
    )
}

fn install_capfilter(missing: &[String]) -> Result<PathBuf> {
    let mut found = Vec::new();
    for tool in ["runc", "jq"] {
        let Some(path) = find_program(tool) else {
            bail!(
                "this host lacks {} in its capability bounding set, and the workaround needs {tool}: apt-get install {tool}",
                missing.join(", ")
            );
        };
        found.push(path);
    }
    let runc = found[0].display().to_string();
    let script = capfilter_script(missing, &runc);
    let dir = cache_dir().join("bin");
    let path = dir.join("runc-capfilter");
    if fs::read_to_string(&path).ok().as_deref() != Some(script.as_str()) {
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let partial = dir.join(".runc-capfilter.partial");
        fs::write(&partial, &script).with_context(|| format!("writing {}", partial.display()))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&partial, fs::Permissions::from_mode(0o755))
            .context("chmod runc-capfilter")?;
        fs::rename(&partial, &path).with_context(|| format!("installing {}", path.display()))?;
        eprintln!(
            "==> host lacks {}: installed {}",
            missing.join(", "),
            path.display()
        );
    }
    Ok(path)
}

/// The daemon.json with the filter as the default runtime, or `None` when
/// `current` already says so. Other keys are kept; a foreign default runtime is an error.
pub fn daemon_json_with_runtime(current: &str, wrapper: &Path) -> Result<Option<String>> {
    let mut config: serde_json::Value = if current.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(current)
            .map_err(|err| format_err!("/etc/docker/daemon.json is not JSON: {err}"))?
    };
    let Some(object) = config.as_object_mut() else {
        bail!("/etc/docker/daemon.json is not a JSON object");
    };
    let wrapper = wrapper.to_string_lossy().into_owned();
    let already = object
        .get("default-runtime")
        .and_then(serde_json::Value::as_str)
        == Some(CAPFILTER_RUNTIME)
        && object["runtimes"][CAPFILTER_RUNTIME]["path"].as_str() == Some(wrapper.as_str());
    if already {
        return Ok(None);
    }
    match object.get("default-runtime").and_then(serde_json::Value::as_str) {
        None | Some("runc") | Some(CAPFILTER_RUNTIME) => (),
        Some(other) => bail!(
            "/etc/docker/daemon.json sets default-runtime {other:?}; privileged containers need {CAPFILTER_RUNTIME} ({wrapper}) on this host: merge the two by hand"
        ),
    }
    let runtimes = object
        .entry("runtimes")
        .or_insert_with(|| serde_json::json!({}));
    let Some(runtimes) = runtimes.as_object_mut() else {
        bail!("/etc/docker/daemon.json: runtimes is not an object");
    };
    runtimes.insert(
        CAPFILTER_RUNTIME.to_owned(),
        serde_json::json!({ "path": wrapper }),
    );
    object.insert(
        "default-runtime".to_owned(),
        serde_json::json!(CAPFILTER_RUNTIME),
    );
    Ok(Some(
        serde_json::to_string_pretty(&config).context("serializing daemon.json")? + "\n",
    ))
}

/// Writes the runtime into daemon.json; a running engine reloads it (SIGHUP:
/// `runtimes` and `default-runtime` are live-reloadable).
fn configure_runtime(sh: &Shell, wrapper: &Path, running: bool) -> Result<()> {
    let path = Path::new("/etc/docker/daemon.json");
    let current = fs::read_to_string(path).unwrap_or_default();
    if let Some(updated) = daemon_json_with_runtime(&current, wrapper)? {
        fs::create_dir_all("/etc/docker").context("creating /etc/docker")?;
        fs::write(path, updated).with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "==> {}: default runtime {CAPFILTER_RUNTIME} ({})",
            path.display(),
            wrapper.display()
        );
    }
    if !running {
        return Ok(());
    }
    let active = cmd!(sh, "docker info --format '{{.DefaultRuntime}}'")
        .quiet()
        .read()
        .unwrap_or_default();
    if active.trim() == CAPFILTER_RUNTIME {
        return Ok(());
    }
    let pid = fs::read_to_string("/var/run/docker.pid")
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|pid| !pid.is_empty())
        .ok_or_else(|| format_err!("the engine runs but /var/run/docker.pid is missing: reload it with kill -HUP <dockerd pid>"))?;
    cmd!(sh, "kill -HUP {pid}")
        .run()
        .context("reloading dockerd")?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        let active = cmd!(sh, "docker info --format '{{.DefaultRuntime}}'")
            .quiet()
            .read()
            .unwrap_or_default();
        if active.trim() == CAPFILTER_RUNTIME {
            eprintln!("    dockerd reloaded: default runtime {CAPFILTER_RUNTIME}");
            return Ok(());
        }
        thread::sleep(Duration::from_millis(300));
    }
    bail!("dockerd did not switch to the {CAPFILTER_RUNTIME} runtime after SIGHUP: see /var/log/dockerd.log")
}

/// An exclusive lock on `path` (created if needed), held until the file is
/// dropped; waits, saying so, when another process holds it.
pub fn lock_file(path: &Path) -> Result<fs::File> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => return Ok(file),
        Err(fs::TryLockError::WouldBlock) => {
            eprintln!("==> another run holds {}: waiting for it", path.display());
        }
        Err(fs::TryLockError::Error(err)) => {
            return Err(err).with_context(|| format!("locking {}", path.display()));
        }
    }
    file.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(file)
}

/// `name` on `PATH` or in the sbin directories (which a non-login PATH may lack).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn engine_answers(sh: &Shell) -> bool {
    cmd!(sh, "docker info --format '{{.ServerVersion}}'")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok()
}

/// The pinned `tool`, `go install`ed into the cache on first use; returns its path.
pub fn ensure_tool(sh: &Shell, tool: Tool) -> Result<PathBuf> {
    let versions = read_versions()?;
    let version = tool_version(&versions, tool)?;
    let bin_dir = cache_dir().join("bin");
    let dir = bin_dir.join(format!("{}-{version}", tool.name()));
    let path = dir.join(tool.name());
    if path.is_file() {
        return Ok(path);
    }
    fs::create_dir_all(&bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    let _lock = lock_file(&bin_dir.join(format!(".{}.lock", tool.name())))?;
    if path.is_file() {
        return Ok(path);
    }
    let package = format!("{}@{version}", tool.package(&version));
    eprintln!("==> go install {package}");
    let staging = bin_dir.join(format!(".{}-{version}.partial", tool.name()));
    if staging.exists() {
        fs::remove_dir_all(&staging).with_context(|| format!("removing {}", staging.display()))?;
    }
    fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    let started = Instant::now();
    {
        let _gobin = sh.push_env("GOBIN", &staging);
        let _cgo = sh.push_env("CGO_ENABLED", "0");
        cmd!(sh, "nice -n 10 go install -trimpath {package}")
            .run()
            .with_context(|| {
                format!("go install {package} failed: is the Go module proxy reachable?")
            })?;
    }
    fs::rename(&staging, &dir)
        .with_context(|| format!("moving {} into place", staging.display()))?;
    let link = bin_dir.join(tool.name());
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(&path, &link)
        .with_context(|| format!("linking {}", link.display()))?;
    eprintln!(
        "    {} {version} installed in {:.0}s",
        tool.name(),
        started.elapsed().as_secs_f64()
    );
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_checked() {
        assert!(is_go_version("v0.31.0"));
        assert!(is_go_version("v1.34.0-rc.1"));
        assert!(!is_go_version("0.31.0"));
        assert!(!is_go_version("v1.34"));
        assert!(!is_go_version("v1.x.0"));
    }

    #[test]
    fn tool_pins_are_read_and_validated() {
        let table =
            parse_versions("[tools]\nkind = \"v0.31.0\"\nhelm = \"3.19\"\n").expect("valid toml");
        assert_eq!(tool_version(&table, Tool::Kind).expect("pinned"), "v0.31.0");
        let err = tool_version(&table, Tool::Helm).expect_err("not a go version");
        assert!(err.to_string().contains("not a Go module version"), "{err}");
        let err = tool_version(&table, Tool::Crictl).expect_err("missing");
        assert!(err.to_string().contains("no [tools].crictl pin"), "{err}");
    }

    #[test]
    fn the_repository_pins_every_tool() {
        let versions = read_versions().expect("manifests/versions.toml parses");
        for tool in [Tool::Kind, Tool::Helm, Tool::Crictl] {
            tool_version(&versions, tool).expect("every tool is pinned");
        }
    }

    #[test]
    fn missing_capabilities_come_from_the_bounding_set() {
        assert_eq!(
            capabilities_missing_from("000001fffeffffff", 40).expect("hex"),
            ["CAP_SYS_RESOURCE"]
        );
        assert!(capabilities_missing_from("000001ffffffffff", 40)
            .expect("hex")
            .is_empty());
        assert_eq!(
            capabilities_missing_from("0000000000000000", 1).expect("hex"),
            ["CAP_CHOWN", "CAP_DAC_OVERRIDE"]
        );
        assert!(capabilities_missing_from("xyz", 40).is_err());
    }

    #[test]
    fn the_capfilter_script_names_the_dropped_caps_and_runc() {
        let script = capfilter_script(&["CAP_SYS_RESOURCE".to_owned()], "/usr/sbin/runc");
        assert!(
            script.contains(r#"DROP='["CAP_SYS_RESOURCE"]'"#),
            "{script}"
        );
        assert!(script.contains("exec /usr/sbin/runc \"$@\""), "{script}");
        assert!(script.contains(r#"bundle="${arg#--bundle=}""#), "{script}");
    }

    #[test]
    fn daemon_json_gains_the_runtime_and_keeps_other_keys() {
        let wrapper = Path::new("/var/cache/cdsim/bin/runc-capfilter");
        let updated = daemon_json_with_runtime(r#"{"debug": true}"#, wrapper)
            .expect("ok")
            .expect("changed");
        let value: serde_json::Value = serde_json::from_str(&updated).expect("json");
        assert_eq!(value["debug"], true);
        assert_eq!(value["default-runtime"], CAPFILTER_RUNTIME);
        assert_eq!(
            value["runtimes"][CAPFILTER_RUNTIME]["path"],
            "/var/cache/cdsim/bin/runc-capfilter"
        );
        assert_eq!(
            daemon_json_with_runtime(&updated, wrapper).expect("ok"),
            None,
            "idempotent"
        );
        assert!(daemon_json_with_runtime("", wrapper).expect("ok").is_some());
        let err = daemon_json_with_runtime(r#"{"default-runtime": "crun"}"#, wrapper)
            .expect_err("foreign");
        assert!(err.to_string().contains("merge the two by hand"), "{err}");
        assert!(daemon_json_with_runtime("[1]", wrapper).is_err());
    }

    #[test]
    fn lock_file_excludes_a_second_holder_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.lock");
        let held = lock_file(&path).expect("first lock");
        let other = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        assert!(matches!(
            other.try_lock(),
            Err(fs::TryLockError::WouldBlock)
        ));
        drop(held);
        other.try_lock().expect("free after the holder is dropped");
    }

    #[test]
    fn helm_package_follows_the_major() {
        assert_eq!(Tool::Helm.package("v3.19.0"), "helm.sh/helm/v3/cmd/helm");
        assert_eq!(Tool::Helm.package("v4.1.0"), "helm.sh/helm/v4/cmd/helm");
        assert_eq!(Tool::Kind.package("v0.31.0"), "sigs.k8s.io/kind");
    }
}
