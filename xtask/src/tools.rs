//! External tools: the Docker engine and the CLIs (kind, helm, crictl).
//!
//! A CLI on `PATH` is used (the user's own, or the Nix shell's pinned one); its
//! version is checked against the tested range ([`Tool::tested`]) and a
//! version outside it is said, with what depends on it. A CLI that is not on
//! `PATH` is taken from the cache (`<cache>/bin/<tool>-<version>/<tool>`, see
//! `dirs`), else `go install`ed there at the version `manifests/versions.toml`
//! `[tools]` pins when Go is present; else one message names both ways to get
//! it. A plain `<cache>/bin/<tool>` symlink points at the pinned one for humans.

use std::{
    fmt, fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, format_err, Context, Result};
use xshell::{cmd, Shell};

use crate::doctor::{parse_version, Version};

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
    /// `github.com/distribution/distribution/v3/cmd/registry`: the OCI
    /// registry CI's "e2e through a registry" step serves the images from.
    Registry,
}

impl Tool {
    /// The binary's name, which is also its key in `[tools]`.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Kind => "kind",
            Tool::Helm => "helm",
            Tool::Crictl => "crictl",
            Tool::Registry => "registry",
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
            Tool::Registry => "github.com/distribution/distribution/v3/cmd/registry".to_owned(),
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

/// A host quirk that needs root to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostFix {
    /// No Docker engine answers.
    StartEngine {
        /// What `docker info` said.
        said: String,
    },
    /// The capability bounding set lacks these, and Docker's default runtime
    /// is not the filtering wrapper yet.
    CapFilter {
        /// The capabilities the host cannot grant.
        missing: Vec<String>,
    },
    /// An inotify limit below what five kind nodes need.
    Inotify {
        /// The `fs.inotify.*` knob.
        knob: &'static str,
        /// Its value.
        current: u64,
        /// What it needs.
        wanted: u64,
    },
}

/// The command a non-root user runs as root to prepare this host: this very
/// xtask binary's `host-setup`, which needs no toolchain of root's.
pub fn host_setup_command() -> String {
    let exe = std::env::current_exe()
        .map(|it| it.display().to_string())
        .unwrap_or_else(|_| "cargo xtask".to_owned());
    format!("sudo {exe} host-setup")
}

/// What a non-root user is told for `fix`: the cause and the exact root command.
pub fn host_fix_message(fix: &HostFix, setup: &str) -> String {
    match fix {
        HostFix::StartEngine { said } => format!(
            "no Docker engine answers (`docker info`: {}); starting one needs root: run `sudo systemctl start docker` \
             (or `{setup}`, which starts dockerd); if it runs already, join the docker group \
             (`sudo usermod -aG docker $USER`, then log in again)",
            said.trim()
        ),
        HostFix::CapFilter { missing } => format!(
            "this host's capability bounding set lacks {}, so every privileged container (every kind node) fails \
             with \"unable to apply caps\" until Docker's default runtime is the {CAPFILTER_RUNTIME} wrapper that drops them; \
             installing it rewrites /etc/docker/daemon.json and needs root: run `{setup}` once",
            missing.join(", ")
        ),
        HostFix::Inotify {
            knob,
            current,
            wanted,
        } => format!(
            "fs.inotify.{knob} is {current}, five kind nodes need {wanted} (kubelets fail with \"too many open files\"); \
             raising it needs root: run `sudo sysctl -w fs.inotify.{knob}={wanted}` (or `{setup}`)"
        ),
    }
}

/// The inotify limits five kind nodes need, with their current values.
fn inotify_fixes() -> Result<Vec<HostFix>> {
    let mut fixes = Vec::new();
    for (knob, wanted) in [
        ("max_user_instances", 512u64),
        ("max_user_watches", 524_288),
    ] {
        let path = format!("/proc/sys/fs/inotify/{knob}");
        let current: u64 = fs::read_to_string(&path)
            .with_context(|| format!("reading {path}"))?
            .trim()
            .parse()
            .with_context(|| format!("parsing {path}"))?;
        if current < wanted {
            fixes.push(HostFix::Inotify {
                knob,
                current,
                wanted,
            });
        }
    }
    Ok(fixes)
}

/// The Docker engine's default runtime, when it answers.
fn default_runtime(sh: &Shell) -> Option<String> {
    cmd!(sh, "docker info --format '{{.DefaultRuntime}}'")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .map(|it| it.trim().to_owned())
}

/// What needs root on this host now (empty: nothing).
pub fn host_fixes(sh: &Shell, with_inotify: bool) -> Result<Vec<HostFix>> {
    let mut fixes = Vec::new();
    match engine_error(sh) {
        Some(said) => fixes.push(HostFix::StartEngine { said }),
        None => {
            let missing = missing_capabilities()?;
            if !missing.is_empty() && default_runtime(sh).as_deref() != Some(CAPFILTER_RUNTIME) {
                fixes.push(HostFix::CapFilter { missing });
            }
        }
    }
    if with_inotify {
        fixes.extend(inotify_fixes()?);
    }
    Ok(fixes)
}

/// Makes sure a Docker engine answers and can run privileged containers (kind
/// nodes), and (`with_inotify`) that the inotify limits suffice for five
/// nodes. Each host quirk is handled only when its check shows it is needed:
/// as root it is fixed (dockerd started, the capability filter installed, the
/// limits raised); otherwise this fails with the exact command to run as root.
pub fn ensure_host(sh: &Shell, with_inotify: bool) -> Result<()> {
    let fixes = host_fixes(sh, with_inotify)?;
    if fixes.is_empty() {
        return Ok(());
    }
    if !crate::dirs::is_root() {
        let setup = host_setup_command();
        let messages: Vec<String> = fixes
            .iter()
            .map(|fix| host_fix_message(fix, &setup))
            .collect();
        bail!("{}", messages.join("\n"));
    }
    if fixes
        .iter()
        .any(|it| matches!(it, HostFix::StartEngine { .. } | HostFix::CapFilter { .. }))
    {
        ensure_engine_as_root(sh)?;
    }
    for fix in &fixes {
        if let HostFix::Inotify {
            knob,
            current,
            wanted,
        } = fix
        {
            let path = format!("/proc/sys/fs/inotify/{knob}");
            fs::write(&path, wanted.to_string())
                .with_context(|| format!("raising {path} to {wanted}"))?;
            eprintln!("    raised fs.inotify.{knob} from {current} to {wanted}");
        }
    }
    Ok(())
}

/// The engine only: fails (non-root) or fixes (root) as [`ensure_host`] does.
pub fn ensure_engine(sh: &Shell) -> Result<()> {
    ensure_host(sh, false)
}

/// As root: the capability filter when the host needs it, and dockerd started
/// when no engine answers.
fn ensure_engine_as_root(sh: &Shell) -> Result<()> {
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
    let dir = crate::dirs::bin_dir()?;
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
    engine_error(sh).is_none()
}

/// `None` when the engine answers, else what `docker info` said.
fn engine_error(sh: &Shell) -> Option<String> {
    match cmd!(sh, "docker info --format '{{.ServerVersion}}'")
        .quiet()
        .ignore_status()
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(err) => Some(err.to_string()),
    }
}

/// Where a tool came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSource {
    /// Found on `PATH` (the user's, or the Nix shell's pinned one).
    Path,
    /// Go-installed earlier into the cache directory's `bin/`.
    Cache,
    /// Go-installed by this run.
    GoInstalled,
}

impl fmt::Display for ToolSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolSource::Path => "from PATH",
            ToolSource::Cache => "go-installed earlier into the cache",
            ToolSource::GoInstalled => "go-installed now into the cache",
        })
    }
}

/// A tool found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The binary.
    pub path: PathBuf,
    /// Where it came from.
    pub source: ToolSource,
}

/// The versions a tool is tested with: `min` up to (not including) `below`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tested {
    /// The oldest tested version.
    pub min: Version,
    /// The first version past the tested range.
    pub below: Version,
    /// What depends on the version (said when outside the range).
    pub why: &'static str,
}

impl Tool {
    /// The tested range.
    pub fn tested(self) -> Tested {
        match self {
            Tool::Kind => Tested {
                min: Version(0, 24, 0),
                below: Version(0, 32, 0),
                why: "kind before v0.24 enforces no NetworkPolicy; kind supports a node image only with the kind \
                      release that names it, and the online path's pinned kindest/node is the one kind v0.31.0 names",
            },
            Tool::Helm => Tested {
                min: Version(3, 13, 0),
                below: Version(5, 0, 0),
                why: "the chart and `helm upgrade --reuse-values` of scenario 3 are tested with helm v3.13+ and v4",
            },
            Tool::Crictl => Tested {
                min: Version(1, 31, 0),
                below: Version(1, 36, 0),
                why: "crictl should match the nodes' Kubernetes minor (1.34)",
            },
            Tool::Registry => Tested {
                min: Version(3, 0, 0),
                below: Version(4, 0, 0),
                why: "CI's registry step configures distribution v3 (`registry serve <config>`)",
            },
        }
    }

    fn version_args(self) -> &'static [&'static str] {
        match self {
            Tool::Kind => &["version"],
            Tool::Helm => &["version", "--short"],
            Tool::Crictl | Tool::Registry => &["--version"],
        }
    }
}

/// `None` when `version` is in the tested range, else what to know about it.
pub fn version_note(tool: Tool, version: Option<Version>, pinned: &str) -> Option<String> {
    let tested = tool.tested();
    let Some(version) = version else {
        return Some(format!(
            "cannot read {}'s version; tested: {} up to (not including) {}, pinned {pinned}",
            tool.name(),
            tested.min,
            tested.below
        ));
    };
    if version >= tested.min && version < tested.below {
        return None;
    }
    Some(format!(
        "{} {version} is outside the tested range {} up to (not including) {}: {}; the pinned version is {pinned}",
        tool.name(),
        tested.min,
        tested.below,
        tested.why
    ))
}

/// The one message for a tool that is neither on PATH nor installable here.
pub fn missing_tool_message(tool: Tool, pinned: &str) -> String {
    format!(
        "{name} is not on PATH and Go is not installed to build it: either install {name} {pinned} onto PATH \
         (see {docs}, or use `nix develop`), or install Go 1.24+ (apt-get install golang, or go.dev/dl) and rerun: \
         cargo xtask then runs `go install {package}@{pinned}` into {bin}",
        name = tool.name(),
        docs = match tool {
            Tool::Kind => "https://kind.sigs.k8s.io/docs/user/quick-start/#installation",
            Tool::Helm => "https://helm.sh/docs/intro/install/",
            Tool::Crictl => "https://github.com/kubernetes-sigs/cri-tools/releases",
            Tool::Registry => "https://distribution.github.io/distribution/about/deploying/",
        },
        package = tool.package(pinned),
        bin = crate::dirs::bin_dir()
            .map(|it| it.display().to_string())
            .unwrap_or_else(|_| "the cache directory's bin/".to_owned()),
    )
}

/// `name` on `PATH` only.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Finds `tool` on PATH, else in the cache, without installing anything.
pub fn locate(tool: Tool, pinned: &str) -> Result<Option<Located>> {
    if let Some(path) = find_on_path(tool.name()) {
        return Ok(Some(Located {
            path,
            source: ToolSource::Path,
        }));
    }
    let cached = crate::dirs::bin_dir()?
        .join(format!("{}-{pinned}", tool.name()))
        .join(tool.name());
    Ok(cached.is_file().then_some(Located {
        path: cached,
        source: ToolSource::Cache,
    }))
}

/// The version `path` reports, if it reports one.
pub fn probe_version(sh: &Shell, tool: Tool, path: &Path) -> Option<Version> {
    let args = tool.version_args();
    cmd!(sh, "{path} {args...}")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .and_then(|out| parse_version(&out))
}

/// `tool` from PATH or the cache (a version outside the tested range is said,
/// not refused); else the pinned one, `go install`ed into the cache when Go is
/// present; else an error naming both ways to get it.
pub fn ensure_tool(sh: &Shell, tool: Tool) -> Result<PathBuf> {
    Ok(ensure_located(sh, tool)?.path)
}

/// [`ensure_tool`], saying where the tool came from.
pub fn ensure_located(sh: &Shell, tool: Tool) -> Result<Located> {
    let versions = read_versions()?;
    let version = tool_version(&versions, tool)?;
    if let Some(found) = locate(tool, &version)? {
        if let Some(note) = version_note(tool, probe_version(sh, tool, &found.path), &version) {
            eprintln!("! {} ({}): {note}", found.path.display(), found.source);
        }
        return Ok(found);
    }
    if find_on_path("go").is_none() {
        bail!("{}", missing_tool_message(tool, &version));
    }
    go_install(sh, tool, &version).map(|path| Located {
        path,
        source: ToolSource::GoInstalled,
    })
}

fn go_install(sh: &Shell, tool: Tool, version: &str) -> Result<PathBuf> {
    let bin_dir = crate::dirs::ensure(&crate::dirs::bin_dir()?)?;
    let dir = bin_dir.join(format!("{}-{version}", tool.name()));
    let path = dir.join(tool.name());
    let _lock = lock_file(&bin_dir.join(format!(".{}.lock", tool.name())))?;
    if path.is_file() {
        return Ok(path);
    }
    let package = format!("{}@{version}", tool.package(version));
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

    #[test]
    fn a_missing_tool_names_both_ways_to_get_it() {
        let message = missing_tool_message(Tool::Kind, "v0.31.0");
        assert!(
            message.contains("install kind v0.31.0 onto PATH"),
            "{message}"
        );
        assert!(
            message.contains("install Go 1.24+ (apt-get install golang"),
            "{message}"
        );
        assert!(
            message.contains("go install sigs.k8s.io/kind@v0.31.0"),
            "{message}"
        );
    }

    #[test]
    fn versions_outside_the_tested_range_say_why_and_the_pin() {
        assert_eq!(
            version_note(Tool::Kind, Some(Version(0, 31, 0)), "v0.31.0"),
            None
        );
        assert_eq!(
            version_note(Tool::Helm, Some(Version(3, 19, 0)), "v3.19.0"),
            None
        );
        assert_eq!(
            version_note(Tool::Helm, Some(Version(4, 1, 0)), "v3.19.0"),
            None
        );
        let note = version_note(Tool::Kind, Some(Version(0, 32, 0)), "v0.31.0").expect("outside");
        assert!(
            note.contains(
                "kind 0.32.0 is outside the tested range 0.24.0 up to (not including) 0.32.0"
            ),
            "{note}"
        );
        assert!(note.contains("the one kind v0.31.0 names"), "{note}");
        assert!(note.contains("the pinned version is v0.31.0"), "{note}");
        let note = version_note(Tool::Helm, None, "v3.19.0").expect("unknown");
        assert!(note.contains("cannot read helm's version"), "{note}");
    }

    #[test]
    fn host_fixes_for_non_root_users_name_the_root_command() {
        let setup = "sudo /home/u/target/debug/xtask host-setup";
        let engine = host_fix_message(
            &HostFix::StartEngine {
                said: "permission denied while trying to connect to the Docker daemon socket"
                    .to_owned(),
            },
            setup,
        );
        assert!(engine.contains("sudo systemctl start docker"), "{engine}");
        assert!(engine.contains("sudo usermod -aG docker $USER"), "{engine}");
        assert!(
            engine.contains("permission denied"),
            "the engine's own words: {engine}"
        );
        let caps = host_fix_message(
            &HostFix::CapFilter {
                missing: vec!["CAP_SYS_RESOURCE".to_owned()],
            },
            setup,
        );
        assert!(caps.contains("lacks CAP_SYS_RESOURCE"), "{caps}");
        assert!(
            caps.contains("run `sudo /home/u/target/debug/xtask host-setup` once"),
            "{caps}"
        );
        let inotify = host_fix_message(
            &HostFix::Inotify {
                knob: "max_user_instances",
                current: 128,
                wanted: 512,
            },
            setup,
        );
        assert!(
            inotify.contains("sudo sysctl -w fs.inotify.max_user_instances=512"),
            "{inotify}"
        );
        assert!(
            host_setup_command().starts_with("sudo /"),
            "the absolute binary: {}",
            host_setup_command()
        );
        assert!(host_setup_command().ends_with(" host-setup"));
    }
}
