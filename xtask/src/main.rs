//! `cargo xtask`: orchestration of the demo and of CI.
//!
//! Each subcommand lives in its own module with a `run` entry point; `main`
//! only parses flags and dispatches. External tools (docker, kind, helm) run
//! through xshell; everything that talks to Kubernetes goes through kube-rs.
//! Planning (`plan`, `fabric`, `imex`) is pure and unit-tested; `cluster`,
//! `k8s` and `flow` do the I/O.

mod archive;
mod bench_upstream;
mod ci;
mod cluster;
mod dirs;
mod doctor;
mod fabric;
mod faults;
mod flags;
mod flow;
mod images;
mod imex;
mod k8s;
mod lock;
mod names;
mod netpol;
mod node_image;
mod plan;
mod report;
mod runner;
mod scenario4;
mod scenarios;
mod tools;
mod workers;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;

use crate::flags::Command;
use crate::scenarios::Tracker;

fn main() -> ExitCode {
    let flags = flags::Xtask::parse();
    init_tracing(flags.verbose);
    match run(flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ERROR: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(flags: flags::Xtask) -> anyhow::Result<()> {
    let sh = xshell::Shell::new()?;
    sh.change_dir(project_root());
    let context = match &flags.command {
        Command::Demo(args) | Command::Up(args) => args
            .cluster
            .kube_context
            .clone()
            .unwrap_or_else(|| format!("kind-{}", args.cluster.cluster_name)),
        Command::Scenario1(args)
        | Command::Scenario2(args)
        | Command::Scenario3(args)
        | Command::Scenario4(args) => args
            .cluster
            .kube_context
            .clone()
            .unwrap_or_else(|| format!("kind-{}", args.cluster.cluster_name)),
        _ => String::new(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let tracker = Tracker::default();
    runtime.spawn(on_interrupt(tracker.clone(), context));
    match flags.command {
        Command::Demo(args) => runtime.block_on(flow::demo(&sh, &args, true, &tracker)),
        Command::Up(args) => runtime.block_on(flow::demo(&sh, &args, false, &tracker)),
        Command::Scenario1(args) => runtime.block_on(flow::scenario(&sh, 1, &args, &tracker)),
        Command::Scenario2(args) => runtime.block_on(flow::scenario(&sh, 2, &args, &tracker)),
        Command::Scenario3(args) => runtime.block_on(flow::scenario(&sh, 3, &args, &tracker)),
        Command::Scenario4(args) => runtime.block_on(flow::scenario(&sh, 4, &args, &tracker)),
        Command::Down(args) => flow::down(&sh, &args),
        Command::Doctor => doctor::run(&sh),
        Command::Status(args) => runtime.block_on(flow::status(&sh, &args)),
        Command::Faults(args) => {
            let lines = runtime.block_on(faults::fault_checks(&sh, &args.cluster_name))?;
            for line in lines {
                println!("{line}");
            }
            Ok(())
        }
        Command::Ci(args) => ci::run(&sh, &args),
        Command::HostSetup => host_setup(&sh),
        Command::NodeImage(args) => node_image::run(&sh, &args),
        Command::Images(args) => images::run(&sh, &args),
        Command::ImexDoublePayload(args) => images::imex_double_payload(&sh, &args.out),
        Command::BenchVsUpstream(args) => bench_upstream::run(&sh, &args),
    }
}

/// `host-setup`: the root-only host preparation, each part only when its
/// check shows it is needed.
fn host_setup(sh: &xshell::Shell) -> anyhow::Result<()> {
    if !dirs::is_root() {
        anyhow::bail!(
            "host-setup changes the Docker engine's configuration and kernel limits: run it as root (`{}`)",
            tools::host_setup_command()
        );
    }
    let fixes = tools::host_fixes(sh, true)?;
    if fixes.is_empty() {
        eprintln!("    nothing to do: the engine answers, privileged containers work, the inotify limits suffice");
        return Ok(());
    }
    tools::ensure_host(sh, true)?;
    eprintln!("    host prepared ({} fix(es))", fixes.len());
    Ok(())
}

/// Ctrl-C: stop daemons a scenario may have started, say where the run
/// stopped, and exit; the runner lock dies with the process.
async fn on_interrupt(tracker: Tracker, context: String) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    let state = tracker.snapshot();
    let step = if state.step.is_empty() {
        "start-up"
    } else {
        state.step.as_str()
    };
    eprintln!("\ninterrupted during `{step}`");
    if !state.imex_pods.is_empty() && !context.is_empty() {
        eprintln!(
            "    stopping nvidia-imex daemons in {}",
            state.imex_pods.join(", ")
        );
        let stop = async {
            let client = k8s::client(&context).await?;
            let workload = flow::KubeWorkload::new(client);
            scenarios::stop_daemons(&workload, &state.imex_pods).await;
            anyhow::Ok(())
        };
        if let Ok(Err(err)) | Err(err) = tokio::time::timeout(Duration::from_secs(15), stop)
            .await
            .map_err(anyhow::Error::from)
        {
            eprintln!("    could not stop them ({err:#}); the next scenario2 run stops them first");
        }
    }
    if let Some(args) = &state.restore_topology {
        eprintln!("    restoring the demo topology (scenario 3 was rebinding)");
        let helm = tools::read_versions()
            .and_then(|versions| tools::tool_version(&versions, tools::Tool::Helm))
            .and_then(|pinned| tools::locate(tools::Tool::Helm, &pinned))
            .ok()
            .flatten()
            .map_or_else(|| std::path::PathBuf::from("helm"), |it| it.path);
        // An upgrade of the scenario itself may still be finishing: retry once.
        let mut last = String::new();
        for attempt in 0..2 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            match std::process::Command::new(&helm)
                .args(args)
                .current_dir(project_root())
                .output()
            {
                Ok(out) if out.status.success() => {
                    last.clear();
                    break;
                }
                Ok(out) => last = String::from_utf8_lossy(&out.stderr).trim().to_owned(),
                Err(err) => last = err.to_string(),
            }
        }
        if !last.is_empty() {
            eprintln!("    could not restore it ({last}); `cargo xtask scenario3` or `cargo xtask up` restores it");
        }
    }
    eprintln!("stopped; rerun the same command to continue: it reuses the cluster and images and redoes only what is missing");
    std::process::exit(130);
}

fn init_tracing(verbose: bool) {
    if !verbose {
        return;
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("xtask=debug,kube=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// The repository root: the parent of this crate's manifest directory.
///
/// `CDSIM_ROOT` overrides it: the Nix apps run a store-built xtask whose
/// manifest directory no longer exists, and point it at the flake source.
pub fn project_root() -> std::path::PathBuf {
    if let Some(root) = std::env::var_os("CDSIM_ROOT").filter(|it| !it.is_empty()) {
        return std::path::PathBuf::from(root);
    }
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default()
}
