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
            name: "e2e warm rerun",
            run: e2e_warm_rerun,
        });
        steps.push(Step {
            name: "e2e faults",
            run: e2e_faults,
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
    // need the pinned helm, first on PATH.
    crate::tools::ensure_engine(sh)?;
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

/// The whole demo on a fresh or reused offline kind cluster; the JSON report is
/// printed into the log as the CI artefact.
fn e2e_demo(sh: &Shell) -> Result<()> {
    raise_inotify_limits()?;
    let report = "target/ci/demo-report.json";
    sh.create_dir("target/ci")?;
    let res = cmd!(sh, "cargo xtask demo --offline --report {report}").run();
    print_report(sh, report);
    res?;
    Ok(())
}

/// Scenario 4 again on the demo cluster: NVIDIA's DRA driver from the warm
/// Go build cache, its chart upgraded in place, the ComputeDomain flow rerun.
fn e2e_scenario4(sh: &Shell) -> Result<()> {
    let report = "target/ci/scenario4-report.json";
    let res = cmd!(sh, "cargo xtask scenario4 --report {report}").run();
    print_report(sh, report);
    res?;
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

/// The fault cases on the real cluster: a concurrent run is refused, an
/// incompatible cluster is rejected with the fix, a stopped worker is named.
fn e2e_faults(sh: &Shell) -> Result<()> {
    cmd!(sh, "cargo xtask faults").run()?;
    Ok(())
}

fn print_report(sh: &Shell, path: &str) {
    match sh.read_file(path) {
        Ok(text) => eprintln!("--- {path} ---\n{text}\n--- end of {path} ---"),
        Err(err) => eprintln!("(no report at {path}: {err})"),
    }
}

/// kind's known issue: five kubelets exhaust the default inotify instances
/// (128) and fail with "too many open files". CI owns its machine, so it raises
/// the limits; `cargo xtask doctor` only warns users about them.
fn raise_inotify_limits() -> Result<()> {
    for (knob, wanted) in [
        ("max_user_instances", 512u64),
        ("max_user_watches", 524_288),
    ] {
        let path = format!("/proc/sys/fs/inotify/{knob}");
        let current: u64 = std::fs::read_to_string(&path)?.trim().parse()?;
        if current < wanted {
            std::fs::write(&path, wanted.to_string()).map_err(|err| {
                anyhow::format_err!("cannot raise {path} to {wanted} (run as root): {err}")
            })?;
            eprintln!("    raised fs.inotify.{knob} from {current} to {wanted}");
        }
    }
    Ok(())
}
