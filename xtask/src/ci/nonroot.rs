//! CI's non-root steps: README.md's quick start run as an unprivileged user
//! in a fresh clone, the way a user runs it, after root has prepared what a
//! user would already have (docker group, a toolchain, kind/helm/kubectl).
//!
//! The user's cold cargo builds (about five minutes of nothing but CPU) are
//! the step "non-root build": as the user, in the fresh clone, `cargo xtask
//! images` (the dev-profile xtask and the release crates the demo's images
//! need, into the user's own target directory). When e2e steps run it runs
//! beside them under `SCHED_IDLE`, and the step "non-root user" waits for it
//! before the user's commands, which then find their build done, as on a
//! user's second run.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;
use xshell::{cmd, Shell};

use super::background;

/// The account the non-root steps run as: in the `docker` group, with the
/// tools on PATH and no Go.
const USER: &str = "cdsim-user";
const USER_HOME: &str = "/home/cdsim-user";
/// A world-readable copy of root's Rust toolchain (root's rustup under /root
/// is not readable by others).
const USER_RUST: &str = "/opt/cdsim-rust";
/// kind, helm and kubectl for the user's PATH.
const USER_TOOLS: &str = "/opt/cdsim-tools/bin";

/// The user's kubeconfig, where its demo put the cluster's context.
pub(super) fn user_kubeconfig() -> PathBuf {
    Path::new(USER_HOME).join(".kube/config")
}

fn user_clone() -> PathBuf {
    Path::new(USER_HOME).join("cdsim")
}

/// The background job's name: the user's cold builds.
const BUILD_JOB: &str = "non-root build";
/// What the job runs as the user, in the clone.
const BUILD_COMMAND: [&str; 3] = ["cargo", "xtask", "images"];

/// Set once this run made the user's fresh clone, so that the prep does not
/// clone again under the build (a new clone's mtimes rebuild the workspace).
static CLONED: AtomicBool = AtomicBool::new(false);

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
pub fn prep(sh: &Shell) -> Result<()> {
    let workers = topology::Layout::default().workers();
    crate::tools::ensure_host(sh, crate::tools::HostNeeds::kind(workers))?;
    ensure_user(sh)?;
    user_toolchain(sh)?;
    let versions = user_tools(sh)?;
    online_stand_in(sh, &versions)?;
    if !CLONED.load(Ordering::SeqCst) {
        fresh_clone(sh)?;
    }
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

/// The step "non-root build" in CI's order: the user's builds, waited for.
pub(super) fn build(sh: &Shell) -> Result<()> {
    build_start(sh)?;
    build_finish()
}

/// As root: the user, its toolchain and a fresh clone; then, as the user in
/// the background, [`BUILD_COMMAND`] (log `target/ci/nonroot-build.log`).
pub(super) fn build_start(sh: &Shell) -> Result<()> {
    ensure_user(sh)?;
    user_toolchain(sh)?;
    fresh_clone(sh)?;
    CLONED.store(true, Ordering::SeqCst);
    let mut args: Vec<String> = ["-u", USER, "--", "env", "-i"].map(str::to_owned).to_vec();
    args.extend(env_assignments());
    args.extend(BUILD_COMMAND.map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    background::start(
        BUILD_JOB,
        background::Priority::Idle,
        Some(background::PREBUILD),
        Path::new("runuser"),
        &args,
        &user_clone(),
        &background::log_path("nonroot-build.log")?,
    )
}

/// Waits for the user's builds and prints their log; fails when they failed.
pub(super) fn build_finish() -> Result<()> {
    let what = format!("`{}` as {USER}", BUILD_COMMAND.join(" "));
    background::finish(BUILD_JOB, &what, "the user's commands reuse its build")
}

/// The user's environment as `KEY=VALUE` arguments for `env -i`.
fn env_assignments() -> Vec<String> {
    user_env()
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect()
}

/// The user exists and is in the `docker` group.
fn ensure_user(sh: &Shell) -> Result<()> {
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
    Ok(())
}

/// A world-readable copy of root's Rust toolchain in [`USER_RUST`].
fn user_toolchain(sh: &Shell) -> Result<()> {
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
    Ok(())
}

/// kind, helm and kubectl in [`USER_TOOLS`]; returns the pinned versions.
fn user_tools(sh: &Shell) -> Result<toml::Table> {
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
    let kubectl = if built.is_file() {
        built
    } else {
        crate::tools::find_on_path("kubectl").ok_or_else(|| {
            anyhow::format_err!(
                "no kubectl for the user: neither {} nor one on PATH",
                built.display()
            )
        })?
    };
    let to = Path::new(USER_TOOLS).join("kubectl");
    cmd!(sh, "install -m 0755 {kubectl} {to}").run()?;
    Ok(versions)
}

/// The online path's pinned node image, or a local stand-in tagged as it.
fn online_stand_in(sh: &Shell, versions: &toml::Table) -> Result<()> {
    // The online path's pinned node image, rehearsed: the offline image tagged
    // as it (unless the engine holds the real one).
    let pinned = crate::cluster::online_pin(versions)?;
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
    Ok(())
}

/// A fresh clone of this commit in the user's home, owned by the user.
fn fresh_clone(sh: &Shell) -> Result<()> {
    // A fresh clone of this commit, the user's own.
    let clone = user_clone();
    if clone.exists() {
        std::fs::remove_dir_all(&clone)?;
    }
    let root = crate::project_root();
    cmd!(sh, "git clone --quiet --no-hardlinks {root} {clone}").run()?;
    cmd!(sh, "chown -R {USER}:{USER} {clone}").run()?;
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

/// The report rows the user's demo must pass through the mirror: scenario 4
/// (but its IMEX part) and every row of scenario 5.
fn mirrored_rows() -> Vec<&'static str> {
    let mut rows = vec!["scenario4", "scenario4-rebind"];
    rows.extend(crate::scenario5::ROWS);
    rows
}

/// What the user's demo report lacks: a row of [`mirrored_rows`] not passed,
/// or scenario 4's or 5's install naming no image through the mirror.
pub fn mirror_rows_missing(doc: &serde_json::Value) -> Vec<String> {
    let rows = doc["scenarios"].as_array().cloned().unwrap_or_default();
    let row = |name: &str| rows.iter().find(|it| it["name"] == name).cloned();
    let mut missing: Vec<String> = mirrored_rows()
        .into_iter()
        .filter_map(|name| {
            let outcome = row(name).and_then(|it| it["outcome"].as_str().map(str::to_owned));
            (outcome.as_deref() != Some("passed"))
                .then(|| format!("{name}: {}", outcome.unwrap_or_else(|| "absent".to_owned())))
        })
        .collect();
    for name in ["scenario4", crate::scenario5::ROWS[0]] {
        let named = row(name)
            .and_then(|it| it["workers"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|it| it["detail"].as_str().map(str::to_owned))
            .any(|it| it.contains("released, through the mirror"));
        if !named {
            missing.push(format!(
                "{name}: no image named as released, through the mirror"
            ));
        }
    }
    missing
}

/// `cargo xtask ARGS…` as the user with `env`, in the clone; (passed, stderr).
pub(super) fn as_user(sh: &Shell, env: &[String], args: &[&str]) -> Result<(bool, String)> {
    let _dir = sh.push_dir(user_clone());
    let out = cmd!(
        sh,
        "runuser -u {USER} -- env -i {env...} cargo xtask {args...}"
    )
    .ignore_status()
    .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{}", stderr.trim_end());
    Ok((out.status.success(), stderr))
}

/// The user's environment with `CDSIM_MIRRORS` set to `rules`.
pub(super) fn env_with_mirrors(rules: &str) -> Vec<String> {
    let mut env = env_assignments();
    env.push(format!(
        "{}={rules}",
        crate::gpu_source::mirror::MIRRORS_ENV
    ));
    env
}

/// The user's demo report passes scenario 4 and every scenario 5 row through the mirror.
fn through_the_mirror(sh: &Shell, report: &str) -> Result<()> {
    let missing = super::read_report(sh, report)
        .map(|doc| mirror_rows_missing(&doc))
        .unwrap_or_else(|err| vec![format!("{err:#}")]);
    anyhow::ensure!(
        missing.is_empty(),
        "{report}: not every row passed through the mirror: {}",
        missing.join("; ")
    );
    eprintln!("    the user's demo passed scenario 4 and every scenario 5 row through the mirror");
    Ok(())
}

/// As the user, `scenario2 --imex /nonexistent` fails naming the path.
fn imex_refused(sh: &Shell, env: &[String]) -> Result<()> {
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
    anyhow::ensure!(
        !out.status.success() && stderr.contains("/nonexistent"),
        "`scenario2 --imex /nonexistent` should fail naming the path; it exited {} saying: {}",
        out.status,
        stderr.trim()
    );
    Ok(())
}

/// As the non-root user, in its fresh clone, with a local mirror standing in
/// for the public hosts (`CDSIM_MIRRORS`, [`super::mirror`]): README.md's
/// quick start (the online-path demo: its report must pass scenario 4 and
/// every scenario 5 row through the mirror), then `scenario2 --imex
/// /nonexistent`, which must fail naming the path. Neither /var/cache/cdsim
/// nor the clone may change.
pub fn user(sh: &Shell) -> Result<()> {
    if let Some(ended) = background::wait(BUILD_JOB, "the user's commands reuse its build") {
        let verdict = if ended.passed { "done" } else { "FAILED" };
        eprintln!(
            "    the user's builds (step \"non-root build\"): {verdict} in {:.0} s",
            ended.took.as_secs_f64()
        );
    }
    let mirror = super::mirror::start(sh)?;
    let clone = user_clone();
    let watched = [PathBuf::from(crate::dirs::ROOT_CACHE_DIR), clone.clone()];
    let mut before = Vec::new();
    for dir in &watched {
        before.push(tree_listing(sh, dir)?);
    }
    let _dir = sh.push_dir(&clone);
    let env = &env_with_mirrors(&mirror.rules);
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
    super::print_report(sh, &report);
    if res.is_ok() {
        res = through_the_mirror(sh, &report);
    }
    if res.is_ok() {
        res = imex_refused(sh, env);
    }
    if res.is_ok() {
        let xtask = |env: &[String], args: &[&str]| as_user(sh, env, args);
        let user = super::online_faults::User {
            xtask: &xtask,
            env: &env_with_mirrors,
            kubeconfig: user_kubeconfig(),
        };
        res = super::online_faults::run(sh, &mirror, &user);
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
    fn the_users_demo_must_pass_scenarios_4_and_5_through_the_mirror() {
        let through = serde_json::json!([{"node": "w1", "pod": "p", "passed": true,
            "detail": "x:1 resolved to sha256:aa (released, through the mirror http://m/x standing in for x)"}]);
        let mut rows: Vec<serde_json::Value> = mirrored_rows()
            .iter()
            .map(|name| serde_json::json!({"name": name, "outcome": "passed", "workers": []}))
            .collect();
        rows.push(serde_json::json!({"name": "scenario4-imex", "outcome": "skipped"}));
        rows[0]["workers"] = through.clone();
        rows[2]["workers"] = through;
        let doc = serde_json::json!({ "scenarios": rows });
        assert!(
            mirror_rows_missing(&doc).is_empty(),
            "{:?}",
            mirror_rows_missing(&doc)
        );
        let mut skipped = doc.clone();
        skipped["scenarios"][1]["outcome"] = "skipped".into();
        skipped["scenarios"][2]["workers"] = serde_json::json!([]);
        assert_eq!(
            mirror_rows_missing(&skipped),
            [
                "scenario4-rebind: skipped".to_owned(),
                format!(
                    "{}: no image named as released, through the mirror",
                    crate::scenario5::ROWS[0]
                )
            ]
        );
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
