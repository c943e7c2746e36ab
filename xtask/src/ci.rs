//! `cargo xtask ci`: the whole test suite, as `.ci/run` runs it.
//!
//! Steps run in order and every step runs even when an earlier one failed, so
//! one CI log shows every problem. Real peers (pynvml, go-nvml, nvml-wrapper,
//! containerd's NRI runtime, containerd itself, helm, docker, nix) are driven
//! by the integration tests under `tests/`; the end-to-end demo then runs on a
//! real kind cluster built from the offline node image.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use xshell::{cmd, Shell};

use crate::flags::CiArgs;

/// One CI step: a name and the command line it runs.
struct Step {
    name: &'static str,
    run: fn(&Shell) -> Result<()>,
}

/// What happened to a step.
struct Outcome {
    name: &'static str,
    passed: bool,
    took: Duration,
}

/// Runs every check and fails when any of them failed.
pub fn run(sh: &Shell, args: &CiArgs) -> Result<()> {
    let mut steps = vec![
        Step {
            name: "rustfmt",
            run: rustfmt,
        },
        Step {
            name: "clippy",
            run: clippy,
        },
        Step {
            name: "build",
            run: build,
        },
        Step {
            name: "tests",
            run: tests,
        },
        Step {
            name: "bench vs upstream",
            run: bench_vs_upstream,
        },
    ];
    if !args.no_e2e {
        steps.push(Step {
            name: "e2e demo",
            run: e2e_demo,
        });
        steps.push(Step {
            name: "e2e scenario4",
            run: e2e_scenario4,
        });
        steps.push(Step {
            name: "e2e scenario 2 (IMEX test double), twice",
            run: e2e_scenario2_double,
        });
        steps.push(Step {
            name: "nix apps as a user",
            run: nix_apps_as_a_user,
        });
        steps.push(Step {
            name: "e2e warm rerun",
            run: e2e_warm_rerun,
        });
        steps.push(Step {
            name: "e2e through --kube-context",
            run: e2e_kube_context,
        });
        steps.push(Step {
            name: "e2e faults",
            run: e2e_faults,
        });
        steps.push(Step {
            name: "non-root prep (root)",
            run: nonroot_prep,
        });
        steps.push(Step {
            name: "non-root user",
            run: nonroot_user,
        });
    }

    let mut outcomes = Vec::new();
    for step in &steps {
        eprintln!("\n==> ci: {}", step.name);
        let started = Instant::now();
        let res = (step.run)(sh);
        if let Err(err) = &res {
            eprintln!("ERROR: ci step `{}` failed: {err:#}", step.name);
        }
        outcomes.push(Outcome {
            name: step.name,
            passed: res.is_ok(),
            took: started.elapsed(),
        });
    }

    eprintln!("\n==> ci summary");
    for outcome in &outcomes {
        let verdict = if outcome.passed { "passed" } else { "FAILED" };
        eprintln!(
            "    {:<16} {verdict:<7} {:>7.1} s",
            outcome.name,
            outcome.took.as_secs_f64()
        );
    }
    let failed = outcomes.iter().filter(|it| !it.passed).count();
    println!("ci: {} passed, {failed} failed", outcomes.len() - failed);
    if failed > 0 {
        anyhow::bail!("{failed} ci step(s) failed");
    }
    Ok(())
}

fn rustfmt(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo fmt --all -- --check").run()?;
    Ok(())
}

fn clippy(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo clippy --workspace --all-targets -- -D warnings").run()?;
    Ok(())
}

/// Builds every artifact the integration tests drive (the cdylib, the binaries).
fn build(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo build --workspace --all-targets").run()?;
    Ok(())
}

fn tests(sh: &Shell) -> Result<()> {
    // The image and containerd tests need a running engine; the chart tests
    // need the pinned helm, first on PATH; the Nix sandbox rehearsal
    // (tests/nix_sandbox.rs) needs Nix's build users.
    crate::tools::ensure_engine(sh)?;
    ensure_nix_build_users(sh)?;
    let helm = crate::tools::ensure_tool(sh, crate::tools::Tool::Helm)?;
    let mut path =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    if let Some(dir) = helm.parent() {
        path.insert(0, dir.to_path_buf());
    }
    let _path = sh.push_env("PATH", std::env::join_paths(path)?);
    cmd!(sh, "cargo test --workspace --no-fail-fast").run()?;
    Ok(())
}

/// Nix's sandbox builds as members of `nixbld`; Debian's nix-bin does not
/// create them (its nix-setup-systemd does, with a daemon CI does not want).
/// CI owns its machine, so it adds the group and two build users once.
fn ensure_nix_build_users(sh: &Shell) -> Result<()> {
    let group = std::fs::read_to_string("/etc/group")?;
    let members = group
        .lines()
        .find_map(|line| line.strip_prefix("nixbld:"))
        .and_then(|rest| rest.split(':').nth(2))
        .map(str::to_owned);
    if members.as_deref().is_some_and(|it| !it.is_empty()) {
        return Ok(());
    }
    if members.is_none() {
        cmd!(sh, "groupadd --system nixbld").run()?;
    }
    for user in ["nixbld1", "nixbld2"] {
        cmd!(
            sh,
            "useradd --system --gid nixbld --groups nixbld --no-create-home --home-dir /var/empty --shell /usr/sbin/nologin --comment {user} {user}"
        )
        .run()?;
    }
    eprintln!("    created the nixbld group and build users for Nix's sandbox");
    Ok(())
}

/// The side-by-side benchmark against upstream's Go mock, once, its table printed into the log.
/// The figures never fail this step; the identity check (same fabric identity, UUID count and
/// memory from both libraries) does. Upstream's build is cached in /var/cache/cdsim.
fn bench_vs_upstream(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo xtask bench-vs-upstream").run()?;
    Ok(())
}

/// The whole demo on a fresh or reused offline kind cluster; the JSON report is
/// printed into the log as the CI artefact.
fn e2e_demo(sh: &Shell) -> Result<()> {
    let report = "target/ci/demo-report.json";
    sh.create_dir("target/ci")?;
    delete_leftover_cluster(sh)?;
    let res = cmd!(sh, "cargo xtask demo --offline --report {report}").run();
    print_report(sh, report);
    res?;
    // Without a payload scenario 2 is skipped, never passed.
    let outcome = scenario_outcome(sh, report, "scenario2")?;
    anyhow::ensure!(
        outcome == "skipped",
        "{report}: scenario2 without a payload must be skipped, was {outcome:?}"
    );
    Ok(())
}

/// The demo cluster of an earlier CI run, deleted: the engine's state survives
/// between runs on the same machine, but a cluster is not a cache (its node
/// containers do not survive a reboot, and the non-root step leaves one from
/// the online image), so the demo step always proves a cold create.
fn delete_leftover_cluster(sh: &Shell) -> Result<()> {
    let name = crate::names::DEFAULT_CLUSTER;
    let clusters = cmd!(sh, "kind get clusters").quiet().read()?;
    if clusters.lines().any(|line| line.trim() == name) {
        eprintln!("    deleting the cluster `{name}` an earlier run left (the demo step proves a cold create)");
        cmd!(sh, "kind delete cluster --name {name}").run()?;
    }
    Ok(())
}

/// The unmodified scenario 2 against the IMEX test double, twice in a row
/// (the second run proves the rerun cleanup); each report must name the
/// double, both as the payload and in the outcome.
fn e2e_scenario2_double(sh: &Shell) -> Result<()> {
    let payload = crate::project_root().join("target/ci/imex-double");
    crate::images::write_imex_double_payload(sh, &payload)?;
    for run in 1..=2 {
        let report = format!("target/ci/scenario2-double-{run}.json");
        let res = cmd!(
            sh,
            "cargo xtask scenario2 --imex {payload} --report {report}"
        )
        .run();
        print_report(sh, &report);
        res?;
        let outcome = scenario_outcome(sh, &report, "scenario2")?;
        anyhow::ensure!(
            outcome == "passed (IMEX test double)",
            "{report}: scenario2 against the double must pass as the double, was {outcome:?}"
        );
        let text = sh.read_file(&report)?;
        let doc: serde_json::Value = serde_json::from_str(&text)?;
        anyhow::ensure!(
            doc["imex_payload"]["kind"] == "test_double",
            "{report}: the payload is not recorded as the IMEX test double"
        );
    }
    Ok(())
}

/// A scenario's `outcome` in a JSON report.
fn scenario_outcome(sh: &Shell, report: &str, name: &str) -> Result<String> {
    let doc: serde_json::Value = serde_json::from_str(&sh.read_file(report)?)
        .map_err(|err| anyhow::format_err!("{report} is not JSON: {err}"))?;
    doc["scenarios"]
        .as_array()
        .and_then(|it| it.iter().find(|s| s["name"] == name))
        .and_then(|s| s["outcome"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::format_err!("{report} has no {name} outcome"))
}

/// The flake's `doctor` and `status` app wrappers as an unprivileged user
/// against the cluster the demo left up (tests/nix_flake.rs, ignored in the
/// tests step because it needs that cluster).
fn nix_apps_as_a_user(sh: &Shell) -> Result<()> {
    cmd!(
        sh,
        "cargo test -p integration-tests --test nix_flake -- --ignored --exact apps_run_as_a_user_from_a_read_only_root"
    )
    .run()?;
    Ok(())
}

/// Scenario 4 again on the demo cluster: NVIDIA's DRA driver from the warm
/// Go build cache, its chart upgraded in place, the ComputeDomain flow rerun.
fn e2e_scenario4(sh: &Shell) -> Result<()> {
    let report = "target/ci/scenario4-report.json";
    let res = cmd!(sh, "cargo xtask scenario4 --report {report}").run();
    print_report(sh, report);
    res?;
    // CI has the DRA snapshot and Go: a SKIPPED scenario 4 here is a failure.
    for name in ["scenario4", "scenario4-rebind"] {
        let outcome = scenario_outcome(sh, report, name)?;
        anyhow::ensure!(
            outcome == "passed",
            "{report}: {name} must pass in CI, was {outcome:?}"
        );
    }
    Ok(())
}

/// Scenarios 1 and 3 again against the running setup: the warm path users rerun.
fn e2e_warm_rerun(sh: &Shell) -> Result<()> {
    let report = "target/ci/warm-report.json";
    let res = cmd!(sh, "cargo xtask up --offline --report {report}")
        .run()
        .and_then(|()| cmd!(sh, "cargo xtask scenario1").run())
        .and_then(|()| cmd!(sh, "cargo xtask scenario3").run());
    print_report(sh, report);
    res?;
    Ok(())
}

/// Scenarios 1 and 3 against the demo cluster reached through its kube
/// context, as a cluster that is not kind: the workers are chosen from the
/// API, and the control plane (labelled by the stager, tainted) is named as
/// skipped.
fn e2e_kube_context(sh: &Shell) -> Result<()> {
    let cluster = crate::names::KindCluster::new(crate::names::DEFAULT_CLUSTER)?;
    let (context, control_plane) = (cluster.context(), cluster.control_plane());
    for scenario in ["scenario1", "scenario3"] {
        let out = cmd!(sh, "cargo xtask {scenario} --kube-context {context}")
            .ignore_status()
            .output()?;
        let log = String::from_utf8_lossy(&out.stderr);
        eprint!("{log}");
        anyhow::ensure!(
            out.status.success(),
            "`cargo xtask {scenario} --kube-context {context}` failed"
        );
        let skipped = format!(
            "skipped: {control_plane} (taint node-role.kubernetes.io/control-plane:NoSchedule is not tolerated"
        );
        anyhow::ensure!(
            log.contains(&skipped),
            "{scenario} through {context} did not name the tainted control plane as skipped (`{skipped}`)"
        );
    }
    Ok(())
}

/// The fault cases on the real cluster: a concurrent run is refused, an
/// incompatible cluster is rejected with the fix, a stopped worker is named.
fn e2e_faults(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo xtask faults").run()?;
    Ok(())
}

/// The account the non-root steps run as: in the `docker` group, with the
/// tools on PATH and no Go.
const USER: &str = "cdsim-user";
const USER_HOME: &str = "/home/cdsim-user";
/// A world-readable copy of root's Rust toolchain (root's rustup under /root
/// is not readable by others).
const USER_RUST: &str = "/opt/cdsim-rust";
/// kind, helm and kubectl for the user's PATH.
const USER_TOOLS: &str = "/opt/cdsim-tools/bin";

fn user_clone() -> PathBuf {
    Path::new(USER_HOME).join("cdsim")
}

/// What the user runs, in order, in the fresh clone: README.md's "Quick start
/// without Nix" (`readme_quick_start_is_what_ci_runs` checks it).
pub const USER_COMMANDS: [&str; 5] = [
    "cargo xtask doctor",
    "cargo xtask demo --report ~/.cache/cdsim/demo-report.json",
    "cargo xtask scenario1",
    "cargo xtask scenario3",
    "cargo xtask status",
];

/// The user's environment; `CARGO_TARGET_DIR` is outside the clone, as
/// README.md's quick start sets it.
fn user_env() -> Vec<(String, String)> {
    let home = USER_HOME;
    vec![
        ("HOME".to_owned(), home.to_owned()),
        ("USER".to_owned(), USER.to_owned()),
        ("LOGNAME".to_owned(), USER.to_owned()),
        (
            "PATH".to_owned(),
            format!("{USER_RUST}/bin:{USER_TOOLS}:/usr/local/bin:/usr/bin:/bin"),
        ),
        (
            "CARGO_TARGET_DIR".to_owned(),
            format!("{home}/.cache/cdsim/cargo-target"),
        ),
    ]
}

/// As root, before the non-root run: the engine and host quirks, the user
/// (docker group), a toolchain and kind/helm/kubectl it can use, the online
/// node image's local stand-in, a fresh clone in its home, and no cluster (so
/// the user's online demo creates it).
fn nonroot_prep(sh: &Shell) -> Result<()> {
    crate::tools::ensure_host(sh, true)?;
    if cmd!(sh, "id -u {USER}")
        .quiet()
        .ignore_stdout()
        .run()
        .is_err()
    {
        cmd!(
            sh,
            "useradd --create-home --shell /bin/bash --groups docker {USER}"
        )
        .run()?;
    } else {
        cmd!(sh, "usermod --append --groups docker {USER}").run()?;
    }
    // The toolchain: a copy of root's, refreshed when its version changes.
    let sysroot = cmd!(sh, "rustc --print sysroot").read()?;
    let version = cmd!(sh, "rustc -V").read()?;
    let stamp = Path::new(USER_RUST).join(".cdsim-rustc-version");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(version.as_str()) {
        if Path::new(USER_RUST).exists() {
            std::fs::remove_dir_all(USER_RUST)?;
        }
        cmd!(sh, "cp -a {sysroot} {USER_RUST}").run()?;
        cmd!(sh, "chmod -R a+rX {USER_RUST}").run()?;
        std::fs::write(&stamp, &version)?;
        eprintln!("    {USER_RUST}: {version}");
    }
    // kind and helm as root resolves them; kubectl the node image build made
    // (the nodes' own version), else root's.
    std::fs::create_dir_all(USER_TOOLS)?;
    for tool in [crate::tools::Tool::Kind, crate::tools::Tool::Helm] {
        let path = crate::tools::ensure_tool(sh, tool)?;
        let to = Path::new(USER_TOOLS).join(tool.name());
        cmd!(sh, "install -m 0755 {path} {to}").run()?;
    }
    let versions = crate::tools::read_versions()?;
    let kube = versions["node"]["kubernetes"].as_str().unwrap_or_default();
    let built = crate::dirs::cache_dir()?.join(format!("go/kubernetes-{kube}/kubectl"));
    let kubectl = match built.is_file() {
        true => built,
        false => crate::tools::find_on_path("kubectl").ok_or_else(|| {
            anyhow::format_err!(
                "no kubectl for the user: neither {} nor one on PATH",
                built.display()
            )
        })?,
    };
    let to = Path::new(USER_TOOLS).join("kubectl");
    cmd!(sh, "install -m 0755 {kubectl} {to}").run()?;
    // The online path's pinned node image, rehearsed: the offline image tagged
    // as it (unless the engine holds the real one).
    let pinned = crate::cluster::online_pin(&versions)?;
    let runner = crate::runner::ShellRunner::new(sh, "kind".into(), "helm".into());
    match crate::cluster::online_image(&runner, &pinned) {
        crate::cluster::OnlineImage::Pinned { present: true, .. } => {
            eprintln!("    the engine holds the pinned {pinned} itself");
        }
        _ => {
            let offline = crate::node_image::ensure_node_image(sh, false)?;
            let tag = pinned
                .split_once('@')
                .map_or(pinned.as_str(), |(tag, _)| tag);
            cmd!(sh, "docker tag {offline} {tag}").run()?;
            eprintln!(
                "    {tag}: a local stand-in (the offline {offline}) for the pinned {pinned}"
            );
        }
    }
    // A fresh clone of this commit, the user's own.
    let clone = user_clone();
    if clone.exists() {
        std::fs::remove_dir_all(&clone)?;
    }
    let root = crate::project_root();
    cmd!(sh, "git clone --quiet --no-hardlinks {root} {clone}").run()?;
    cmd!(sh, "chown -R {USER}:{USER} {clone}").run()?;
    // No cluster: the user's online demo creates it (one 5-node cluster at a time).
    crate::flow::down(
        sh,
        &crate::flags::DownArgs {
            cluster: crate::flags::KindArgs {
                cluster_name: crate::names::DEFAULT_CLUSTER.to_owned(),
            },
            images: false,
        },
    )?;
    Ok(())
}

/// `find` listing of `dir` (type, mode, owner, size, mtime, path), sorted.
fn tree_listing(sh: &Shell, dir: &Path) -> Result<Vec<String>> {
    if !dir.exists() {
        return Ok(vec!["(absent)".to_owned()]);
    }
    let text = cmd!(sh, "find {dir} -printf '%y %m %u %s %T@ %P\n'")
        .quiet()
        .read()?;
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    Ok(lines)
}

/// What changed between two listings (`-` gone, `+` new or changed).
pub fn listing_diff(before: &[String], after: &[String]) -> Vec<String> {
    let old: std::collections::BTreeSet<&String> = before.iter().collect();
    let new: std::collections::BTreeSet<&String> = after.iter().collect();
    old.difference(&new)
        .map(|it| format!("- {it}"))
        .chain(new.difference(&old).map(|it| format!("+ {it}")))
        .collect()
}

/// As the non-root user, in its fresh clone: README.md's quick start (the
/// online-path demo, rehearsed), then `scenario2 --imex /nonexistent`, which
/// must fail naming the path. Neither /var/cache/cdsim nor the clone may change.
fn nonroot_user(sh: &Shell) -> Result<()> {
    let clone = user_clone();
    let watched = [PathBuf::from(crate::dirs::ROOT_CACHE_DIR), clone.clone()];
    let mut before = Vec::new();
    for dir in &watched {
        before.push(tree_listing(sh, dir)?);
    }
    let _dir = sh.push_dir(&clone);
    let env: Vec<String> = user_env()
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    let env = &env;
    let report = format!("{USER_HOME}/.cache/cdsim/demo-report.json");
    let mut res: Result<()> = Ok(());
    for line in USER_COMMANDS {
        let argv: Vec<String> = line
            .split_whitespace()
            .map(|it| it.replace("~/.cache/cdsim/demo-report.json", &report))
            .collect();
        eprintln!(
            "
==> as {USER}: {line}"
        );
        if let Err(err) = cmd!(sh, "runuser -u {USER} -- env -i {env...} {argv...}").run() {
            res = Err(anyhow::format_err!("`{line}` as {USER} failed: {err}"));
            break;
        }
    }
    print_report(sh, &report);
    if res.is_ok() {
        eprintln!(
            "
==> as {USER}: cargo xtask scenario2 --imex /nonexistent (must fail naming the path)"
        );
        let out = cmd!(
            sh,
            "runuser -u {USER} -- env -i {env...} cargo xtask scenario2 --imex /nonexistent"
        )
        .ignore_status()
        .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{}", stderr.trim());
        if out.status.success() || !stderr.contains("/nonexistent") {
            res = Err(anyhow::format_err!(
                "`scenario2 --imex /nonexistent` should fail naming the path; it exited {} saying: {}",
                out.status,
                stderr.trim()
            ));
        }
    }
    for (dir, before) in watched.iter().zip(&before) {
        let changed = listing_diff(before, &tree_listing(sh, dir)?);
        if changed.is_empty() {
            eprintln!("    {}: unchanged by the non-root run", dir.display());
        } else {
            eprintln!("ERROR: the non-root run changed {}:", dir.display());
            for line in changed.iter().take(40) {
                eprintln!("    {line}");
            }
            res = res.and(Err(anyhow::format_err!(
                "the non-root run changed {} ({} entries)",
                dir.display(),
                changed.len()
            )));
        }
    }
    res
}

fn print_report(sh: &Shell, path: &str) {
    match sh.read_file(path) {
        Ok(text) => eprintln!("--- {path} ---\n{text}\n--- end of {path} ---"),
        Err(err) => eprintln!("(no report at {path}: {err})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_quick_start_is_what_ci_runs() {
        let readme =
            std::fs::read_to_string(crate::project_root().join("README.md")).expect("README.md");
        let section = readme
            .split("## Quick start without Nix")
            .nth(1)
            .and_then(|it| it.split("```sh\n").nth(1))
            .and_then(|it| it.split("```").next())
            .expect("a sh block in \"Quick start without Nix\"");
        let commands: Vec<&str> = section
            .lines()
            .map(|line| line.split('#').next().unwrap_or("").trim())
            .filter(|line| !line.is_empty())
            .collect();
        let mut expected = vec![format!(
            "export CARGO_TARGET_DIR={}",
            user_env()
                .iter()
                .find(|(key, _)| key == "CARGO_TARGET_DIR")
                .map(|(_, value)| value.replace(USER_HOME, "~"))
                .expect("set")
        )];
        expected.extend(USER_COMMANDS.iter().map(|it| (*it).to_owned()));
        assert_eq!(commands, expected);
    }

    #[test]
    fn listing_changes_are_named() {
        let before = vec![
            "f 644 root 1 1.0 a".to_owned(),
            "d 755 root 0 1.0 b".to_owned(),
        ];
        let after = vec![
            "f 644 root 2 2.0 a".to_owned(),
            "d 755 root 0 1.0 b".to_owned(),
        ];
        assert_eq!(
            listing_diff(&before, &after),
            ["- f 644 root 1 1.0 a", "+ f 644 root 2 2.0 a"]
        );
        assert!(listing_diff(&before, &before).is_empty());
    }
}
