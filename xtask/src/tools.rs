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

/// Makes sure a Docker engine answers; starts Debian's `dockerd` when none does.
pub fn ensure_engine(sh: &Shell) -> Result<()> {
    if engine_answers(sh) {
        return Ok(());
    }
    if cmd!(sh, "sh -c 'command -v dockerd'")
        .quiet()
        .ignore_stdout()
        .run()
        .is_err()
    {
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
        if started.elapsed().as_secs() % 5 == 0 {
            eprintln!("    waiting for dockerd ({}s)", started.elapsed().as_secs());
        }
    }
    bail!(
        "dockerd did not answer within {}s: see {}",
        limit.as_secs(),
        log_path.display()
    )
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
    fn helm_package_follows_the_major() {
        assert_eq!(Tool::Helm.package("v3.19.0"), "helm.sh/helm/v3/cmd/helm");
        assert_eq!(Tool::Helm.package("v4.1.0"), "helm.sh/helm/v4/cmd/helm");
        assert_eq!(Tool::Kind.package("v0.31.0"), "sigs.k8s.io/kind");
    }
}
