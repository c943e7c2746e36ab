//! `cargo xtask doctor`: the prerequisites, their versions, and what to do
//! about each one that is missing or old.

mod scenarios;

use xshell::{cmd, Shell};

use crate::tools::{inotify_needed, Tool};
use crate::version::{parse_version, Version};

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

/// The prerequisites besides kind and helm (which `tools` resolves), as
/// upstream's demo lists them.
pub const REQUIREMENTS: [Requirement; 2] = [
    Requirement {
        tool: "docker",
        min: Version(24, 0, 0),
        required: true,
        install: "apt-get install docker.io (as root, `cargo xtask host-setup` starts dockerd when none answers)",
        when_old: "upstream tests docker 24+; this demo needs no BuildKit (images are built without a daemon and loaded with `kind load image-archive`), so Debian 12's docker.io 20.10 works",
    },
    Requirement {
        tool: "kubectl",
        min: Version(1, 33, 0),
        required: false,
        install: "optional: cargo xtask talks to the cluster through kube-rs; install kubectl (apt-get install kubernetes-client, or `nix develop`) only to poke around",
        when_old: "kubectl more than one minor away from the cluster's (1.34) is unsupported by Kubernetes",
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

/// kind's known issue, for a cluster of `nodes` nodes: below the instances
/// they need, kubelets and kube-proxy fail with "too many open files".
pub fn inotify_advice(max_user_instances: u64, nodes: usize) -> Option<String> {
    let needed = inotify_needed(nodes);
    if max_user_instances >= needed {
        return None;
    }
    Some(format!(
        "fs.inotify.max_user_instances is {max_user_instances}, {nodes} kind nodes need {needed}: kubelets and \
         kube-proxy fail with \"too many open files\" otherwise; raise it with `sysctl -w fs.inotify.max_user_instances={needed}`"
    ))
}

fn probe(sh: &Shell, tool: &str) -> Option<String> {
    let args: &[&str] = match tool {
        "docker" => &["version", "--format", "{{.Server.Version}}"],
        "kubectl" => &["version", "--client"],
        _ => return None,
    };
    cmd!(sh, "{tool} {args...}")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()
        .filter(|out| !out.trim().is_empty())
}

/// How kind or helm fared: a line, and whether it blocks `cargo xtask`.
pub fn tool_line(
    tool: Tool,
    pinned: &str,
    found: Option<(&crate::tools::Located, Option<Version>)>,
    go: bool,
) -> (String, bool) {
    let name = tool.name();
    let tested = tool.tested();
    match found {
        Some((located, version)) => {
            let shown = version.map_or_else(|| "version unknown".to_owned(), |it| it.to_string());
            let marker = match crate::tools::version_note(tool, version, pinned) {
                None => format!(
                    "✓ {name:<8} {shown} ({}, {}; tested {} up to {})",
                    located.path.display(),
                    located.source,
                    tested.min,
                    tested.below
                ),
                Some(note) => format!(
                    "! {name:<8} {shown} ({}, {}): {note}",
                    located.path.display(),
                    located.source
                ),
            };
            (marker, false)
        }
        None if go => (
            format!(
                "- {name:<8} not on PATH: cargo xtask will `go install {}@{pinned}` into the cache on first use",
                tool.package(pinned)
            ),
            false,
        ),
        None => (
            format!("✗ {name:<8} {}", crate::tools::missing_tool_message(tool, pinned)),
            true,
        ),
    }
}

/// The Go line: needed only to build what is missing and the offline node image.
pub fn go_line(version: Option<&str>, tools_missing: bool) -> String {
    match (version, tools_missing) {
        (Some(version), _) => format!(
            "✓ go       {} (builds the offline node image, and kind or helm when missing from PATH)",
            version.trim()
        ),
        (None, false) => "- go       not found: not needed for kind and helm (found above); only `cargo xtask demo --offline` \
                          and `node-image` need it, to build the node image (apt-get install golang, or go.dev/dl)"
            .to_owned(),
        (None, true) => "✗ go       not found: install kind and helm onto PATH, or Go 1.24+ (apt-get install golang, \
                         or go.dev/dl) to build them"
            .to_owned(),
    }
}

/// The room lines: for each kind of node image, whether `trays` fit and
/// how many do (advisory: `up` and `demo` refuse, `--no-room-check` overrides).
pub fn room_lines(host: crate::capacity::Host, trays: usize) -> Vec<String> {
    [
        ("--offline", &crate::capacity::LEAN),
        (
            "online kindest/node or --node-image",
            &crate::capacity::FULL,
        ),
    ]
    .into_iter()
    .map(|(path, costs)| {
        let room = crate::capacity::room(host, costs, trays, 0);
        let marker = if room.fits() { '✓' } else { '!' };
        format!("{marker} room     {path}: {}", room.summary())
    })
    .collect()
}

/// What racks of `trays` trays need on the offline lean nodes (one control
/// plane in all), for 1, 2, 4 and 8 racks and `asked`: a header and a row
/// each, and whether each fits on `host`. Disk and memory only: the CPU a
/// rack keeps busy is measured, not computed (BENCHMARKS.md, "The cost of a tray").
pub fn rack_lines(host: crate::capacity::Host, trays: usize, asked: usize) -> Vec<String> {
    let mut racks: Vec<usize> = vec![1, 2, 4, 8, asked];
    racks.sort_unstable();
    racks.dedup();
    let mut lines = vec![format!(
        "  racks    racks of {trays} trays, offline lean nodes: disk and memory needed (reserves included), here?"
    )];
    for count in racks {
        let room = crate::capacity::room(host, &crate::capacity::LEAN, trays * count, 0);
        lines.push(format!(
            "  racks    {count:>2} × {trays} = {:>3} trays: {:>6.1} GB disk, {:>5.1} GB memory: {}",
            trays * count,
            room.need_disk as f64 / 1e9,
            room.need_memory as f64 / 1e9,
            if room.fits() {
                "fits here".to_owned()
            } else {
                format!("not here (at most {} trays fit)", room.max_trays)
            }
        ));
    }
    lines
}

/// The inotify line for a cluster of `nodes` kind nodes.
fn print_inotify(nodes: usize) {
    let instances = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    match instances.map(|it| inotify_advice(it, nodes)) {
        Some(None) => println!(
            "✓ inotify  max_user_instances >= {} ({nodes} nodes)",
            inotify_needed(nodes)
        ),
        Some(Some(advice)) => println!("! inotify  {advice}"),
        None => println!("! inotify  cannot read /proc/sys/fs/inotify/max_user_instances"),
    }
}

/// The room lines for `racks` racks of `trays` trays, or why they cannot be had.
fn print_room(sh: &Shell, trays: usize, racks: usize) {
    match crate::capacity::probe_host(&crate::flow::docker_only(sh)) {
        Ok(host) => room_lines(host, trays * racks)
            .into_iter()
            .chain(rack_lines(host, trays, racks))
            .for_each(|line| println!("{line}")),
        Err(err) => println!("! room     cannot check the free disk and memory: {err:#}"),
    }
}

/// Prints every prerequisite and where each tool came from; fails when a
/// required one can be neither found nor installed automatically.
pub fn run(sh: &Shell, args: &crate::flags::DoctorArgs) -> anyhow::Result<()> {
    let mut blocking = Vec::new();
    for requirement in &REQUIREMENTS {
        let verdict = judge(requirement, probe(sh, requirement.tool).as_deref());
        let place = crate::tools::find_on_path(requirement.tool)
            .map(|it| format!("{}, from PATH", it.display()))
            .unwrap_or_default();
        match &verdict {
            Verdict::Ok(version) => println!(
                "✓ {:<8} {version} ({place}; tested: {}+)",
                requirement.tool, requirement.min
            ),
            Verdict::Old(version, note) => println!(
                "! {:<8} {version} ({place}) is older than {}: {note}",
                requirement.tool, requirement.min
            ),
            Verdict::Missing(advice) => println!("✗ {:<8} not found: {advice}", requirement.tool),
        }
        if requirement.required && matches!(verdict, Verdict::Missing(_)) {
            blocking.push(requirement.tool);
        }
    }
    let go = cmd!(sh, "go version").quiet().ignore_stderr().read().ok();
    let versions = crate::tools::read_versions()?;
    let mut tools_missing = false;
    for tool in [Tool::Kind, Tool::Helm] {
        let pinned = crate::tools::tool_version(&versions, tool)?;
        let located = crate::tools::locate(tool, &pinned)?;
        let found = located
            .as_ref()
            .map(|it| (it, crate::tools::probe_version(sh, tool, &it.path)));
        let (line, blocks) = tool_line(tool, &pinned, found, go.is_some());
        println!("{line}");
        tools_missing |= located.is_none();
        if blocks {
            blocking.push(tool.name());
        }
    }
    println!("{}", go_line(go.as_deref(), tools_missing && go.is_none()));
    print_inotify(args.trays * args.racks + 1);
    match crate::tools::host_fixes(sh, crate::tools::HostNeeds::Engine) {
        Ok(fixes) if fixes.is_empty() => {
            println!("✓ host     the engine answers and runs privileged containers")
        }
        Ok(fixes) => {
            let setup = crate::tools::host_setup_command();
            for fix in &fixes {
                println!("! host     {}", crate::tools::host_fix_message(fix, &setup));
            }
        }
        Err(err) => println!("! host     cannot check: {err:#}"),
    }
    print_room(sh, args.trays, args.racks);
    scenarios::print();
    match crate::dirs::cache_dir() {
        Ok(dir) => println!(
            "✓ cache    {} (locks, scratch files, image archives, built tools)",
            dir.display()
        ),
        Err(err) => {
            println!("✗ cache    {err:#}");
            blocking.push("a cache directory");
        }
    }
    if !blocking.is_empty() {
        anyhow::bail!("missing prerequisites: {}", blocking.join(", "));
    }
    Ok(())
}

/// What `host-setup` prepares for: the default demo's cluster (a larger
/// layout's `up` raises the inotify limit it needs itself, as root, or names it).
fn default_cluster() -> crate::tools::HostNeeds {
    crate::tools::HostNeeds::kind(topology::Layout::default().workers())
}

/// `host-setup`: the root-only host preparation, each part only when its
/// check shows it is needed.
pub fn host_setup(sh: &Shell) -> anyhow::Result<()> {
    if !crate::dirs::is_root() {
        anyhow::bail!(
            "host-setup changes the Docker engine's configuration and kernel limits: run it as root (`{}`)",
            crate::tools::host_setup_command()
        );
    }
    let fixes = crate::tools::host_fixes(sh, default_cluster())?;
    if fixes.is_empty() {
        eprintln!("    nothing to do: the engine answers, privileged containers work, the inotify limits suffice");
        return Ok(());
    }
    crate::tools::ensure_host(sh, default_cluster())?;
    eprintln!("    host prepared ({} fix(es))", fixes.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The doctor's kind line for a kind at `path` (from PATH) that says
    /// it is `version`, against the pin v0.31.0.
    fn kind_on_path(path: &str, version: Version) -> (String, bool) {
        let located = crate::tools::Located {
            path: path.into(),
            source: crate::tools::ToolSource::Path,
        };
        tool_line(
            Tool::Kind,
            "v0.31.0",
            Some((&located, Some(version))),
            false,
        )
    }

    #[test]
    fn kind_and_helm_from_path_need_no_go() {
        let (line, blocks) = kind_on_path("/usr/local/bin/kind", Version(0, 31, 0));
        assert!(!blocks);
        assert!(line.starts_with("✓ kind"), "{line}");
        assert!(line.contains("/usr/local/bin/kind, from PATH"), "{line}");
        let go = go_line(None, false);
        assert!(go.starts_with("- go"), "Go is not marked missing: {go}");
        assert!(go.contains("not needed for kind and helm"), "{go}");
    }

    #[test]
    fn a_kind_outside_the_tested_range_is_said_with_the_pin() {
        let (line, blocks) = kind_on_path("/usr/bin/kind", Version(0, 20, 0));
        assert!(!blocks, "said, not refused");
        assert!(line.starts_with("! kind"), "{line}");
        assert!(line.contains("outside the tested range 0.24.0"), "{line}");
        assert!(line.contains("the pinned version is v0.31.0"), "{line}");
    }

    #[test]
    fn a_missing_tool_without_go_names_both_ways() {
        let (line, blocks) = tool_line(Tool::Helm, "v3.19.0", None, false);
        assert!(blocks);
        assert!(line.contains("install helm v3.19.0 onto PATH"), "{line}");
        assert!(line.contains("install Go 1.24+"), "{line}");
        assert!(
            line.contains("go install helm.sh/helm/v3/cmd/helm@v3.19.0"),
            "{line}"
        );
        let (line, blocks) = tool_line(Tool::Helm, "v3.19.0", None, true);
        assert!(!blocks, "Go builds it");
        assert!(line.contains("will `go install"), "{line}");
        assert!(go_line(None, true).contains("install kind and helm onto PATH, or Go 1.24+"));
    }

    #[test]
    fn an_old_kubectl_is_explained() {
        let kubectl = &REQUIREMENTS[1];
        assert!(matches!(
            judge(kubectl, Some("Client Version: v1.29.0")),
            Verdict::Old(..)
        ));
        let Verdict::Missing(advice) = judge(kubectl, None) else {
            panic!("missing");
        };
        assert!(advice.contains("optional"), "{advice}");
    }

    #[test]
    fn the_rack_lines_cost_each_rack_count_and_say_which_fit() {
        let host = crate::capacity::Host {
            free_disk: 26_000_000_000,
            available_memory: 23_600_000_000,
        };
        let lines = rack_lines(host, 18, 2);
        assert_eq!(
            lines.len(),
            5,
            "a header, then 1, 2, 4 and 8 racks: {lines:#?}"
        );
        // One rack: 2.0 + 1.55 + 18 × 0.85 GB of disk, 2.0 + 1.2 + 18 × 0.5 GB of memory.
        assert!(
            lines[1].contains(" 1 × 18 =  18 trays:   18.9 GB disk,  12.2 GB memory: fits here"),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains(" 2 × 18 =  36 trays:   34.1 GB disk,  21.2 GB memory: not here (at most 26 trays fit)"), "{}", lines[2]);
        assert!(
            lines[4].contains(" 8 × 18 = 144 trays:  126.0 GB disk,  75.2 GB memory: not here"),
            "{}",
            lines[4]
        );
        assert_eq!(
            rack_lines(host, 18, 3).len(),
            6,
            "the asked count is a row of its own"
        );
    }

    #[test]
    fn the_room_lines_say_how_many_trays_fit_for_each_node_image() {
        let host = crate::capacity::Host {
            free_disk: 45_000_000_000,
            available_memory: 23_000_000_000,
        };
        let lines = room_lines(host, 30);
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("✓ room     --offline: 30 trays"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("at most 39 trays fit (memory binds first)"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].starts_with("! room     online kindest/node"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("at most 24 trays fit"), "{}", lines[1]);
    }

    #[test]
    fn low_inotify_limits_get_the_sysctl() {
        let advice = inotify_advice(128, 5).expect("too low");
        assert!(
            advice.contains("sysctl -w fs.inotify.max_user_instances=512"),
            "{advice}"
        );
        assert_eq!(inotify_advice(512, 5), None);
        let two_racks = inotify_advice(512, 37).expect("37 nodes failed at 512");
        assert!(two_racks.contains("37 kind nodes need 1184"), "{two_racks}");
        assert_eq!(inotify_advice(8192, 37), None);
    }
}
