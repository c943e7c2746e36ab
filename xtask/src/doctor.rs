//! `cargo xtask doctor`: the prerequisites, their versions, and what to do
//! about each one that is missing or old.

use std::fmt;

use xshell::{cmd, Shell};

/// A version `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The first `[v]X.Y[.Z]` in a tool's version output.
pub fn parse_version(text: &str) -> Option<Version> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|word| word.contains('.'))
        .find_map(|word| {
            let mut parts = word.split('.').map(|part| part.parse::<u32>());
            let major = parts.next()?.ok()?;
            let minor = parts.next()?.ok()?;
            let patch = parts.next().and_then(Result::ok).unwrap_or(0);
            Some(Version(major, minor, patch))
        })
}

/// How a tool fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Present and recent enough.
    Ok(Version),
    /// Present but older than tested; the demo may still work (the note says).
    Old(Version, String),
    /// Absent; the advice says what to do.
    Missing(String),
}

/// One prerequisite.
#[derive(Debug, Clone, Copy)]
pub struct Requirement {
    /// The tool.
    pub tool: &'static str,
    /// The minimum tested version.
    pub min: Version,
    /// Needed by `cargo xtask` (not only recommended).
    pub required: bool,
    /// What to do when it is missing.
    pub install: &'static str,
    /// What an older version means.
    pub when_old: &'static str,
}

/// The prerequisites, as upstream's demo lists them.
pub const REQUIREMENTS: [Requirement; 4] = [
    Requirement {
        tool: "docker",
        min: Version(24, 0, 0),
        required: true,
        install: "apt-get install docker.io (cargo xtask starts dockerd when none answers)",
        when_old: "upstream tests docker 24+; this demo needs no BuildKit (images are built without a daemon and loaded with `kind load image-archive`), so Debian 12's docker.io 20.10 works",
    },
    Requirement {
        tool: "kind",
        min: Version(0, 24, 0),
        required: true,
        install: "cargo xtask installs the pinned kind (manifests/versions.toml) with `go install` on first use",
        when_old: "kind before v0.24 has no NetworkPolicy enforcement; use the pinned version",
    },
    Requirement {
        tool: "helm",
        min: Version(3, 13, 0),
        required: true,
        install: "cargo xtask installs the pinned helm (manifests/versions.toml) with `go install` on first use",
        when_old: "helm before 3.13 is untested; use the pinned version",
    },
    Requirement {
        tool: "kubectl",
        min: Version(1, 30, 0),
        required: false,
        install: "optional: cargo xtask talks to the cluster through kube-rs; install kubectl only to poke around",
        when_old: "kubectl older than the cluster's minor - 1 is unsupported by Kubernetes",
    },
];

/// Judges a tool's version output (`None`: not found).
pub fn judge(requirement: &Requirement, output: Option<&str>) -> Verdict {
    let Some(output) = output else {
        return Verdict::Missing(requirement.install.to_owned());
    };
    match parse_version(output) {
        Some(version) if version >= requirement.min => Verdict::Ok(version),
        Some(version) => Verdict::Old(version, requirement.when_old.to_owned()),
        None => Verdict::Missing(format!(
            "cannot read a version from `{}`; {}",
            output.trim(),
            requirement.install
        )),
    }
}

/// kind's known issue: every node's kubelet and containerd take inotify
/// instances; below 512 a second 5-node cluster fails with "too many open files".
pub fn inotify_advice(max_user_instances: u64) -> Option<String> {
    if max_user_instances >= 512 {
        return None;
    }
    Some(format!(
        "fs.inotify.max_user_instances is {max_user_instances}: kubelets fail with \"inotify_init: too many open files\" \
         once ~10 kind nodes run; raise it with `sysctl -w fs.inotify.max_user_instances=512`"
    ))
}

fn probe(sh: &Shell, tool: &str) -> Option<String> {
    let cached = |tool| crate::tools::cache_dir().join("bin").join(tool);
    let run = |program: std::path::PathBuf, args: &[&str]| {
        cmd!(sh, "{program} {args...}")
            .quiet()
            .ignore_stderr()
            .read()
            .ok()
            .filter(|out| !out.trim().is_empty())
    };
    match tool {
        "docker" => run(
            "docker".into(),
            &["version", "--format", "{{.Server.Version}}"],
        ),
        "kind" => run("kind".into(), &["version"]).or_else(|| run(cached("kind"), &["version"])),
        "helm" => run("helm".into(), &["version", "--short"])
            .or_else(|| run(cached("helm"), &["version", "--short"])),
        "kubectl" => run("kubectl".into(), &["version", "--client"]),
        _ => None,
    }
}

/// Prints every prerequisite; fails when a required one can be neither found
/// nor installed automatically.
pub fn run(sh: &Shell) -> anyhow::Result<()> {
    let mut blocking = Vec::new();
    for requirement in &REQUIREMENTS {
        let verdict = judge(requirement, probe(sh, requirement.tool).as_deref());
        match &verdict {
            Verdict::Ok(version) => println!(
                "✓ {:<8} {version} (tested: {}+)",
                requirement.tool, requirement.min
            ),
            Verdict::Old(version, note) => println!(
                "! {:<8} {version} is older than {}: {note}",
                requirement.tool, requirement.min
            ),
            Verdict::Missing(advice) => println!("✗ {:<8} not found: {advice}", requirement.tool),
        }
        let auto = matches!(requirement.tool, "kind" | "helm");
        if requirement.required && matches!(verdict, Verdict::Missing(_)) {
            let go = cmd!(sh, "go version")
                .quiet()
                .ignore_stderr()
                .read()
                .is_ok();
            if !auto || !go {
                blocking.push(requirement.tool);
            }
        }
    }
    match cmd!(sh, "go version").quiet().ignore_stderr().read() {
        Ok(version) => println!("✓ go       {} (installs kind, helm and the node image's components)", version.trim()),
        Err(_) => println!("✗ go       not found: install Go 1.24+ (apt-get install golang, or go.dev/dl) to build the pinned tools"),
    }
    let instances = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    match instances.map(inotify_advice) {
        Some(None) => println!("✓ inotify  max_user_instances >= 512"),
        Some(Some(advice)) => println!("! inotify  {advice}"),
        None => println!("! inotify  cannot read /proc/sys/fs/inotify/max_user_instances"),
    }
    if !blocking.is_empty() {
        anyhow::bail!("missing prerequisites: {}", blocking.join(", "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_real_outputs() {
        assert_eq!(parse_version("20.10.24+dfsg1\n"), Some(Version(20, 10, 24)));
        assert_eq!(
            parse_version("kind v0.31.0 go1.26.0 linux/amd64"),
            Some(Version(0, 31, 0))
        );
        assert_eq!(parse_version("v3.19.0+g3d8990f"), Some(Version(3, 19, 0)));
        assert_eq!(
            parse_version("Client Version: v1.34.3\nKustomize Version: v5.7.1"),
            Some(Version(1, 34, 3))
        );
        assert_eq!(parse_version("no digits here"), None);
    }

    #[test]
    fn debian_docker_is_old_but_explained() {
        let docker = &REQUIREMENTS[0];
        let Verdict::Old(version, note) = judge(docker, Some("20.10.24+dfsg1")) else {
            panic!("20.10 is older than 24");
        };
        assert_eq!(version, Version(20, 10, 24));
        assert!(note.contains("20.10 works"), "{note}");
        assert_eq!(
            judge(docker, Some("27.3.1")),
            Verdict::Ok(Version(27, 3, 1))
        );
    }

    #[test]
    fn missing_tools_say_what_to_do() {
        let Verdict::Missing(advice) = judge(&REQUIREMENTS[1], None) else {
            panic!("missing");
        };
        assert!(advice.contains("go install"), "{advice}");
        assert!(matches!(
            judge(&REQUIREMENTS[2], Some("v3.12.3")),
            Verdict::Old(..)
        ));
        assert_eq!(
            judge(&REQUIREMENTS[2], Some("v4.0.0")),
            Verdict::Ok(Version(4, 0, 0))
        );
    }

    #[test]
    fn low_inotify_limits_get_the_sysctl() {
        let advice = inotify_advice(128).expect("too low");
        assert!(
            advice.contains("sysctl -w fs.inotify.max_user_instances=512"),
            "{advice}"
        );
        assert_eq!(inotify_advice(512), None);
    }
}
