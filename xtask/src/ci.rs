//! `cargo xtask ci`: the whole test suite, as `.ci/run` runs it.
//!
//! Steps run in order and every step runs even when an earlier one failed, so
//! one CI log shows every problem. Real peers (pynvml, go-nvml, nvml-wrapper,
//! containerd's NRI runtime, containerd itself, helm, docker, nix) are driven
//! by the integration tests under `tests/`; the end-to-end demo then runs on a
//! real kind cluster built from the offline node image.

use std::time::{Duration, Instant};

use anyhow::Result;
use xshell::{cmd, Shell};

use crate::flags::CiArgs;

mod background;
mod full_rack;
mod mirror;
mod nix_sandbox;
mod nonroot;
mod online_faults;
mod prepare;
mod report;
mod through_registry;

use prepare::{delete_leftover_cluster, imex_double_payload};
use report::{check_page, print_report, read_report, scenario_outcome};

/// One CI step: a name, whether it needs a cluster, and what it runs.
struct Step {
    name: &'static str,
    /// An end-to-end step (`--no-e2e` skips it).
    e2e: bool,
    /// Why the step runs only when `--step` names it, said in every run that leaves it out.
    on_request: Option<&'static str>,
    /// Another step that runs this step's check too: when both are selected
    /// and `--step` names neither, only that one runs, and the run says so.
    covered_by: Option<Covered>,
    run: fn(&Shell) -> Result<()>,
    /// Set for a step that runs beside the e2e steps when any run: started
    /// in the background as the first e2e step starts, waited for at the end
    /// (its `run` when no e2e step runs).
    beside_e2e: Option<Beside>,
}

impl Step {
    /// A step run in CI's order, in every run that selects it.
    const fn new(name: &'static str, e2e: bool, run: fn(&Shell) -> Result<()>) -> Self {
        Step {
            name,
            e2e,
            on_request: None,
            covered_by: None,
            run,
            beside_e2e: None,
        }
    }
}

/// The step that covers another's check, and how.
#[derive(Clone, Copy)]
struct Covered {
    step: &'static str,
    why: &'static str,
}

/// A step that can run in the background beside the e2e steps: CPU-bound
/// work that fills the cycles they leave idle while they wait on pods.
#[derive(Clone, Copy)]
struct Beside {
    /// Prepares in the foreground (builds) and starts the background job.
    start: fn(&Shell) -> Result<()>,
    /// Waits for the job and prints its log; fails when the job failed.
    finish: fn() -> Result<()>,
}

/// Every step, in the order CI runs them.
const STEPS: &[Step] = &[
    Step::new("rustfmt", false, rustfmt),
    Step {
        covered_by: Some(Covered {
            step: "nix sandbox",
            why: "its clippy rehearsal runs the flake's clippy check, `cargo clippy --workspace \
                  --all-targets --offline -- -D warnings`, in Nix's build sandbox",
        }),
        ..Step::new("clippy", false, clippy)
    },
    Step::new("build", false, build),
    Step::new("tests", false, tests),
    Step {
        beside_e2e: Some(Beside {
            start: nix_sandbox::start,
            finish: nix_sandbox::finish,
        }),
        ..Step::new("nix sandbox", false, nix_sandbox::run)
    },
    Step::new("conformance", false, conformance),
    Step::new("e2e demo", true, e2e_demo),
    Step::new("e2e scenario4", true, e2e_scenario4),
    Step::new(
        "e2e scenario 2 (IMEX test double), twice",
        true,
        e2e_scenario2_double,
    ),
    Step::new("nix apps as a user", true, nix_apps_as_a_user),
    Step::new("e2e warm rerun", true, e2e_warm_rerun),
    Step::new("e2e through --kube-context", true, e2e_kube_context),
    Step::new("e2e through a registry", true, through_registry::run),
    Step::new("e2e faults", true, e2e_faults),
    Step {
        beside_e2e: Some(Beside {
            start: nonroot::build_start,
            finish: nonroot::build_finish,
        }),
        ..Step::new("non-root build", false, nonroot::build)
    },
    Step::new("non-root prep (root)", true, nonroot::prep),
    Step::new("non-root user", true, nonroot::user),
    Step::new("e2e full rack", true, full_rack::run),
    // Last: its figures come from a machine quiet after the e2e steps, the
    // background prebuild and the steps beside the e2e steps.
    Step::new("bench vs upstream", false, bench_vs_upstream),
];

/// What happened to a step.
struct Outcome {
    name: &'static str,
    passed: bool,
    took: Duration,
    /// It ran in the background beside the e2e steps.
    beside: bool,
}

/// Runs the steps in order, except those that run beside the e2e steps when
/// any e2e step is selected: those start as the first e2e step starts and
/// are waited for after the last one.
fn run_steps(sh: &Shell, steps: &[&Step]) -> Vec<Outcome> {
    let last_e2e = steps.iter().rposition(|step| step.e2e);
    let beside: Vec<(&Step, Beside)> = steps
        .iter()
        .filter(|_| last_e2e.is_some())
        .filter_map(|step| step.beside_e2e.map(|it| (*step, it)))
        .collect();
    let mut started_beside: Vec<(&Step, Beside, Instant)> = Vec::new();
    let mut outcomes = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        if last_e2e.is_some() && step.beside_e2e.is_some() {
            continue;
        }
        if step.e2e && started_beside.is_empty() {
            for &(step, job) in &beside {
                eprintln!("\n==> ci: {} (started beside the e2e steps)", step.name);
                let started = Instant::now();
                match (job.start)(sh) {
                    Ok(()) => started_beside.push((step, job, started)),
                    Err(err) => outcomes.push(ended(step, Err(err), started, true)),
                }
            }
        }
        eprintln!("\n==> ci: {}", step.name);
        let started = Instant::now();
        outcomes.push(ended(step, (step.run)(sh), started, false));
        if Some(index) == last_e2e {
            for (step, job, started) in started_beside.drain(..) {
                eprintln!("\n==> ci: {} (beside the e2e steps): its result", step.name);
                outcomes.push(ended(step, (job.finish)(), started, true));
            }
        }
    }
    outcomes
}

/// A step's outcome, its error printed.
fn ended(step: &Step, res: Result<()>, started: Instant, beside: bool) -> Outcome {
    if let Err(err) = &res {
        eprintln!("ERROR: ci step `{}` failed: {err:#}", step.name);
    }
    Outcome {
        name: step.name,
        passed: res.is_ok(),
        took: started.elapsed(),
        beside,
    }
}

/// `serve-mirror`: CI's local stand-in for the public hosts, for `minutes`.
pub fn serve_mirror(sh: &Shell, minutes: u64) -> Result<()> {
    let served = mirror::start(sh)?;
    println!("export CDSIM_MIRRORS=\"{}\"", served.rules);
    eprintln!("    serving for {minutes} min (Ctrl-C stops it)");
    std::thread::sleep(std::time::Duration::from_secs(minutes * 60));
    Ok(())
}

/// Runs every check and fails when any of them failed.
pub fn run(sh: &Shell, args: &CiArgs) -> Result<()> {
    let steps: Vec<&Step> = STEPS
        .iter()
        .filter(|step| !(args.no_e2e && step.e2e))
        .collect();
    let steps = only(steps, &args.step)?;
    let selected: Vec<&str> = steps.iter().map(|step| step.name).collect();
    let (steps, left_out): (Vec<&Step>, Vec<&Step>) = steps
        .into_iter()
        .partition(|step| !args.step.is_empty() || not_run_because(step, &selected).is_none());
    for step in &left_out {
        let why = not_run_because(step, &selected).unwrap_or_default();
        eprintln!("\n==> ci: {}: NOT RUN: {why}", step.name);
    }
    if steps.iter().any(|step| step.e2e) {
        // The engine first, so that the prebuild and the tests do not both start dockerd.
        crate::tools::ensure_engine(sh)?;
        if let Err(err) = background::start_prebuild() {
            eprintln!("WARNING: {err:#}; the e2e steps build their inputs themselves");
        }
    }
    let outcomes = run_steps(sh, &steps);

    eprintln!("\n==> ci summary");
    for outcome in &outcomes {
        let verdict = if outcome.passed { "passed" } else { "FAILED" };
        let beside = if outcome.beside {
            " (beside the e2e steps)"
        } else {
            ""
        };
        eprintln!(
            "    {:<16} {verdict:<7} {:>7.1} s{beside}",
            outcome.name,
            outcome.took.as_secs_f64()
        );
    }
    for step in &left_out {
        eprintln!("    {:<16} NOT RUN (said above)", step.name);
    }
    if let Some(ended) = background::wait(background::PREBUILD, "the run ends") {
        let verdict = if ended.passed { "passed" } else { "FAILED" };
        eprintln!(
            "    {:<16} {verdict:<7} {:>7.1} s (in the background, not a step: a part it failed \
             was built by the step that needed it; log {})",
            "prebuild",
            ended.took.as_secs_f64(),
            ended.log.display()
        );
    }
    let failed = outcomes.iter().filter(|it| !it.passed).count();
    println!(
        "ci: {} passed, {failed} failed, {} not run",
        outcomes.len() - failed,
        left_out.len()
    );
    if failed > 0 {
        anyhow::bail!("{failed} ci step(s) failed");
    }
    Ok(())
}

/// Why a run that names no step leaves `step` out (None: it runs).
fn not_run_because(step: &Step, selected: &[&str]) -> Option<String> {
    let alone = format!("`cargo xtask ci --step \"{}\"` runs it", step.name);
    if let Some(why) = step.on_request {
        return Some(format!("only when asked ({alone}): {why}"));
    }
    step.covered_by
        .filter(|covered| selected.contains(&covered.step))
        .map(|covered| {
            format!(
                "covered by the step \"{}\": {} ({alone} alone)",
                covered.step, covered.why
            )
        })
}

/// The steps `--step` names, in CI's order; all of them when none is named.
fn only<'a>(steps: Vec<&'a Step>, names: &[String]) -> Result<Vec<&'a Step>> {
    if let Some(unknown) = names
        .iter()
        .find(|name| !steps.iter().any(|step| step.name == name.as_str()))
    {
        let known: Vec<&str> = steps.iter().map(|step| step.name).collect();
        anyhow::bail!(
            "ci has no step {unknown:?}; the steps are: {}",
            known.join(", ")
        );
    }
    Ok(steps
        .into_iter()
        .filter(|step| names.is_empty() || names.iter().any(|name| name == step.name))
        .collect())
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
    // need the pinned helm, first on PATH.
    crate::tools::ensure_engine(sh)?;
    let helm = crate::tools::ensure_tool(sh, crate::tools::Tool::Helm)?;
    let mut path =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    if let Some(dir) = helm.parent() {
        path.insert(0, dir.to_path_buf());
    }
    let _path = sh.push_env("PATH", std::env::join_paths(path)?);
    // The Nix sandbox rehearsals are the step "nix sandbox" (beside the e2e steps).
    let skips = nix_sandbox::skip_args(sh)?;
    cmd!(sh, "cargo test --workspace --no-fail-fast -- {skips...}").run()?;
    Ok(())
}

/// The differential check against upstream's Go mock on every profile: fails on any difference
/// the allow-list does not explain. Upstream's build is shared with `bench vs upstream`.
fn conformance(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo xtask conformance").run()?;
    Ok(())
}

/// The side-by-side benchmark against upstream's Go mock, once, its table printed into the log.
/// The figures never fail this step; the identity check (same fabric identity, UUID count and
/// memory from both libraries) does. Upstream's build is cached in /var/cache/cdsim. The last
/// step: the e2e steps and the jobs beside them are over, and it waits for the prebuild.
fn bench_vs_upstream(sh: &Shell) -> Result<()> {
    background::wait(background::PREBUILD, "the bench measures a quiet machine");
    cmd!(sh, "cargo xtask bench-vs-upstream").run()?;
    Ok(())
}

/// The whole demo on a fresh or reused offline kind cluster; the JSON report is
/// printed into the log as the CI artefact.
fn e2e_demo(sh: &Shell) -> Result<()> {
    let report = "target/ci/demo-report.json";
    sh.create_dir("target/ci")?;
    delete_leftover_cluster(sh)?;
    // NVIDIA's nvidia-imex cannot be had here: the IMEX test double stands in,
    // and every row it made pass must say so.
    let payload = imex_double_payload(sh)?;
    let res = cmd!(
        sh,
        "cargo xtask demo --offline --imex {payload} --report {report}"
    )
    .run();
    print_report(sh, report);
    res?;
    for name in ["scenario2", "scenario4-imex", "scenario4-rebind"] {
        let outcome = scenario_outcome(sh, report, name)?;
        anyhow::ensure!(
            outcome == "passed (IMEX test double)",
            "{report}: {name} against the double must pass as the double, was {outcome:?}"
        );
    }
    anyhow::ensure!(
        read_report(sh, report)?["imex_payload"]["kind"] == "test_double",
        "{report}: the payload is not recorded as the IMEX test double"
    );
    // CI has Go: scenario 5 builds NVIDIA's GPU stack images (or reuses them) and runs.
    for row in crate::scenario5::ROWS {
        let outcome = scenario_outcome(sh, report, row)?;
        anyhow::ensure!(outcome == "passed", "{report}: {row} was {outcome:?}");
    }
    // The page beside the report, as a browser shows it: the default rack.
    check_page(sh, report, &topology::Layout::default())?;
    // The demo's workers ran the lean worker image: the pair's contents, checked.
    cmd!(
        sh,
        "cargo test -p node-image --lib -- --ignored --exact worker::tests::the_built_worker_image_lacks_only_the_control_plane_images"
    )
    .run()?;
    Ok(())
}

/// The unmodified scenario 2 against the IMEX test double, twice in a row
/// (the second run proves the rerun cleanup); each report must name the
/// double, both as the payload and in the outcome.
fn e2e_scenario2_double(sh: &Shell) -> Result<()> {
    let payload = imex_double_payload(sh)?;
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

/// The flake's `doctor` and `status` app wrappers as an unprivileged user
/// against the cluster the demo left up (tests/nix_flake.rs, ignored in the
/// tests step because it needs that cluster). `--workspace`, as the build
/// step: its binary is built already, with the same features.
fn nix_apps_as_a_user(sh: &Shell) -> Result<()> {
    cmd!(
        sh,
        "cargo test --workspace --test nix_flake -- --ignored --exact apps_run_as_a_user_from_a_read_only_root"
    )
    .run()?;
    Ok(())
}

/// Scenario 4 again on the demo cluster: NVIDIA's DRA driver from the warm
/// Go build cache, its chart upgraded in place, the ComputeDomain flow rerun.
fn e2e_scenario4(sh: &Shell) -> Result<()> {
    let report = "target/ci/scenario4-report.json";
    let payload = imex_double_payload(sh)?;
    let res = cmd!(
        sh,
        "cargo xtask scenario4 --imex {payload} --report {report}"
    )
    .run();
    print_report(sh, report);
    res?;
    // CI has the DRA snapshot and Go: a SKIPPED scenario 4 here is a failure.
    for (name, want) in [
        ("scenario4", "passed"),
        ("scenario4-imex", "passed (IMEX test double)"),
        ("scenario4-rebind", "passed (IMEX test double)"),
    ] {
        let outcome = scenario_outcome(sh, report, name)?;
        anyhow::ensure!(
            outcome == want,
            "{report}: {name} must be {want:?} in CI, was {outcome:?}"
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
    // Only the names that follow from the cluster's name are used.
    let cluster = crate::names::KindCluster::new(crate::names::DEFAULT_CLUSTER, 0)?;
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

/// The fault cases on the real cluster (`cargo xtask faults`): a concurrent
/// run is refused, an incompatible cluster is rejected with the fix, a stopped
/// worker is named, the self-healing cases each heal with no user step, and
/// `inject` round-trips.
fn e2e_faults(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo xtask faults").run()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn clippy_is_left_to_the_nix_sandbox_when_both_are_selected() {
        let clippy = STEPS
            .iter()
            .find(|it| it.name == "clippy")
            .expect("a clippy step");
        let why = not_run_because(clippy, &["clippy", "nix sandbox"]).expect("left out");
        assert!(why.contains("nix sandbox") && why.contains("cargo clippy --workspace"));
        assert_eq!(not_run_because(clippy, &["clippy", "tests"]), None);
    }

    use super::*;

    static EVENTS: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());

    fn event(name: &'static str) -> Result<()> {
        EVENTS.lock().expect("events").push(name);
        Ok(())
    }

    #[test]
    fn a_beside_step_starts_with_the_first_e2e_step_and_ends_after_the_last() {
        let beside = Step {
            beside_e2e: Some(Beside {
                start: |_| event("beside started"),
                finish: || event("beside finished"),
            }),
            ..Step::new("beside", false, |_| event("beside in order"))
        };
        let steps = [
            Step::new("tests", false, |_| event("tests")),
            beside,
            Step::new("e2e one", true, |_| event("e2e one")),
            Step::new("e2e two", true, |_| anyhow::bail!("failed")),
            Step::new("bench", false, |_| event("bench")),
        ];
        let sh = Shell::new().expect("shell");
        let all: Vec<&Step> = steps.iter().collect();
        EVENTS.lock().expect("events").clear();
        let outcomes = run_steps(&sh, &all);
        assert_eq!(
            *EVENTS.lock().expect("events"),
            [
                "tests",
                "beside started",
                "e2e one",
                "beside finished",
                "bench"
            ]
        );
        let summary: Vec<(&str, bool, bool)> = outcomes
            .iter()
            .map(|it| (it.name, it.passed, it.beside))
            .collect();
        assert_eq!(
            summary,
            [
                ("tests", true, false),
                ("e2e one", true, false),
                ("e2e two", false, false),
                ("beside", true, true),
                ("bench", true, false),
            ]
        );
        // Without an e2e step it runs in order, in the foreground.
        EVENTS.lock().expect("events").clear();
        let no_e2e = [&steps[0], &steps[1], &steps[4]];
        run_steps(&sh, &no_e2e);
        assert_eq!(
            *EVENTS.lock().expect("events"),
            ["tests", "beside in order", "bench"]
        );
    }

    #[test]
    fn step_picks_named_steps_in_ci_order_and_refuses_unknown_names() {
        let all: Vec<&Step> = STEPS.iter().collect();
        let names = |steps: Vec<&Step>| steps.iter().map(|it| it.name).collect::<Vec<_>>();
        assert_eq!(
            names(only(all.clone(), &["clippy".to_owned(), "rustfmt".to_owned()]).expect("known")),
            ["rustfmt", "clippy"]
        );
        assert_eq!(only(all.clone(), &[]).expect("all").len(), STEPS.len());
        let err = only(all, &["e2e typo".to_owned()])
            .err()
            .expect("unknown")
            .to_string();
        assert!(
            err.contains("\"e2e typo\"") && err.contains("e2e through a registry"),
            "{err}"
        );
    }
}
