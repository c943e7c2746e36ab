//! The Docker engine and the host quirks five kind nodes need: starting
//! dockerd, a runc wrapper that drops the capabilities this host cannot grant,
//! raised inotify limits. Root fixes them (`cargo xtask host-setup`); anyone
//! else is told the command.

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

use super::find_program;

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
    /// An inotify limit below what the cluster's kind nodes need.
    Inotify {
        /// The `fs.inotify.*` knob.
        knob: &'static str,
        /// How many kind nodes it is for.
        nodes: usize,
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
            nodes,
            current,
            wanted,
        } => format!(
            "fs.inotify.{knob} is {current}, {nodes} kind nodes need {wanted} (kubelets fail with \"too many open files\"); \
             raising it needs root: run `sudo sysctl -w fs.inotify.{knob}={wanted}` (or `{setup}`)"
        ),
    }
}

/// The `fs.inotify.max_user_instances` a cluster of `nodes` kind nodes
/// needs: every node's kubelet, containerd and kube-proxy take instances. At
/// 512, 5 nodes run and 37 did not (2026-12-04: 12 of the 37 kube-proxy pods
/// failed with "too many open files" until the limit was raised to 8192):
/// 32 per node, never under 512.
pub fn inotify_needed(nodes: usize) -> u64 {
    (nodes as u64 * 32).max(512)
}

/// The inotify limits `nodes` kind nodes need, with their current values.
fn inotify_fixes(nodes: usize) -> Result<Vec<HostFix>> {
    let mut fixes = Vec::new();
    for (knob, wanted) in [
        ("max_user_instances", inotify_needed(nodes)),
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
                nodes,
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

/// What a command needs of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostNeeds {
    /// A Docker engine that runs privileged containers.
    Engine,
    /// That, and inotify limits enough for a kind cluster of this many nodes.
    KindCluster {
        /// The cluster's nodes, control plane included.
        nodes: usize,
    },
}

impl HostNeeds {
    /// A kind cluster of one control plane and `workers` workers.
    pub fn kind(workers: usize) -> HostNeeds {
        HostNeeds::KindCluster { nodes: workers + 1 }
    }
}

/// What needs root on this host now for `needs` (empty: nothing).
pub fn host_fixes(sh: &Shell, needs: HostNeeds) -> Result<Vec<HostFix>> {
    let mut fixes = Vec::new();
    match engine_error(sh) {
        Some(said) => fixes.push(HostFix::StartEngine { said }),
        None => {
            let missing = missing_capabilities()?;
            // The wrapper the engine was configured with (root's cache, whoever runs this);
            // a daemon.json this user cannot read is taken at its word.
            let wrapper = configured_wrapper(
                &fs::read_to_string("/etc/docker/daemon.json").unwrap_or_default(),
            )
            .is_none_or(|path| path.is_file());
            if capfilter_needed(&missing, default_runtime(sh).as_deref(), wrapper) {
                fixes.push(HostFix::CapFilter { missing });
            }
        }
    }
    if let HostNeeds::KindCluster { nodes } = needs {
        fixes.extend(inotify_fixes(nodes)?);
    }
    Ok(fixes)
}

/// Makes sure a Docker engine answers and can run privileged containers (kind
/// nodes), and (`HostNeeds::KindCluster`) that the inotify limits suffice
/// for its nodes. Each host quirk is handled only when its check shows it is needed:
/// as root it is fixed (dockerd started, the capability filter installed, the
/// limits raised); otherwise this fails with the exact command to run as root.
pub fn ensure_host(sh: &Shell, needs: HostNeeds) -> Result<()> {
    let fixes = host_fixes(sh, needs)?;
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
            ..
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
    ensure_host(sh, HostNeeds::Engine)
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
/// The wrapper's file name in the cache's `bin/`, which daemon.json names.
const CAPFILTER_FILE: &str = "runc-capfilter";

/// The wrapper a daemon.json names for the filter runtime, if it names one.
pub fn configured_wrapper(daemon_json: &str) -> Option<PathBuf> {
    let json: serde_json::Value = serde_json::from_str(daemon_json).ok()?;
    json["runtimes"][CAPFILTER_RUNTIME]["path"]
        .as_str()
        .map(PathBuf::from)
}

/// Whether the capability filter must be (re)installed: the host lacks some
/// capabilities and Docker's default runtime is not the filter, or it is but
/// the wrapper it names is gone (the cache directory was removed while the
/// engine kept its configuration: every container would then fail to start).
pub fn capfilter_needed(missing: &[String], default_runtime: Option<&str>, wrapper: bool) -> bool {
    !missing.is_empty() && (default_runtime != Some(CAPFILTER_RUNTIME) || !wrapper)
}

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
    let path = dir.join(CAPFILTER_FILE);
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
