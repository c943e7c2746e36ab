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
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::version::{parse_version, Version};

mod host;

pub use host::{
    ensure_engine, ensure_host, host_fix_message, host_fixes, host_setup_command, inotify_needed,
    HostNeeds,
};
pub use xtask_support::tools::{find_on_path, find_program, lock_file, read_versions};

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
    use super::host::{
        capabilities_missing_from, capfilter_script, daemon_json_with_runtime, HostFix,
        CAPFILTER_RUNTIME,
    };
    use super::*;
    use test_support::assert_contains;
    use xtask_support::tools::parse_versions;

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
    fn the_filter_is_reinstalled_when_the_engine_names_a_wrapper_that_is_gone() {
        let missing = vec!["CAP_SYS_RESOURCE".to_owned()];
        assert!(!host::capfilter_needed(&missing, Some("cdsim-runc"), true));
        assert!(host::capfilter_needed(&missing, Some("cdsim-runc"), false));
        assert!(host::capfilter_needed(&missing, Some("runc"), true));
        assert!(!host::capfilter_needed(&[], Some("runc"), false));
        let json = r#"{"default-runtime":"cdsim-runc","runtimes":{"cdsim-runc":{"path":"/var/cache/cdsim/bin/runc-capfilter"}}}"#;
        assert_eq!(
            host::configured_wrapper(json),
            Some(PathBuf::from("/var/cache/cdsim/bin/runc-capfilter"))
        );
        assert_eq!(host::configured_wrapper("{}"), None);
        assert_eq!(host::configured_wrapper(""), None);
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
        assert_contains(
            &note,
            "kind 0.32.0 is outside the tested range 0.24.0 up to (not including) 0.32.0",
        );
        assert_contains(&note, "the one kind v0.31.0 names");
        assert_contains(&note, "the pinned version is v0.31.0");
        let note = version_note(Tool::Helm, None, "v3.19.0").expect("unknown");
        assert_contains(&note, "cannot read helm's version");
    }

    #[test]
    fn host_fixes_for_non_root_users_name_the_root_command() {
        let setup = "sudo /home/u/target/debug/xtask host-setup";
        let cases: [(HostFix, &[&str]); 3] = [
            (
                HostFix::StartEngine {
                    said: "permission denied while trying to connect to the Docker daemon socket"
                        .to_owned(),
                },
                // The engine's own words, then what to do.
                &[
                    "permission denied",
                    "sudo systemctl start docker",
                    "sudo usermod -aG docker $USER",
                ],
            ),
            (
                HostFix::CapFilter {
                    missing: vec!["CAP_SYS_RESOURCE".to_owned()],
                },
                &[
                    "lacks CAP_SYS_RESOURCE",
                    "run `sudo /home/u/target/debug/xtask host-setup` once",
                ],
            ),
            (
                HostFix::Inotify {
                    knob: "max_user_instances",
                    nodes: 5,
                    current: 128,
                    wanted: 512,
                },
                &["sudo sysctl -w fs.inotify.max_user_instances=512"],
            ),
        ];
        for (fix, parts) in &cases {
            let message = host_fix_message(fix, setup);
            for part in *parts {
                assert_contains(&message, part);
            }
        }
        assert!(
            host_setup_command().starts_with("sudo /"),
            "the absolute binary: {}",
            host_setup_command()
        );
        assert!(host_setup_command().ends_with(" host-setup"));
    }
}
