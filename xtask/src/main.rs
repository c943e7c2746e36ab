//! `cargo xtask`: orchestration of the demo and of CI.
//!
//! Each subcommand lives in its own module with a `run` entry point; `main`
//! only parses flags and dispatches. The cluster, Kubernetes access, the
//! scenarios and the report are the `harness` library (imported below under
//! their module names); `flow` sequences them into `up`, `demo` and the
//! scenario commands.

mod archive;
mod bench_upstream;
mod capacity;
mod ci;
mod conformance;
#[cfg(test)]
mod docs_check;
mod doctor;
mod faults;
mod flags;
mod flow;
mod gpu_stack_images;
mod images;
mod interrupt;
mod lock;
mod netpol;
mod node_facts;
mod node_image;
mod nvml_functions;
mod prebuild;
mod report_page;
#[cfg(test)]
mod tidy;
mod tools;
mod upstream_mock;
mod version;

pub use xtask_support::{dirs, project_root};

use harness::{
    cluster, fabric, gpu_source, inject, k8s, kind_config, names, plan, reach, registry, report,
    runner, scenario4, scenario5, scenarios, workers,
};

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use crate::flags::Command;
use crate::interrupt::Tracker;
use crate::scenarios::Scenario;

fn main() -> ExitCode {
    let flags = flags::Xtask::parse()
        .checked()
        .unwrap_or_else(|err| err.exit());
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
    let context = flags.command.kube_context();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let tracker = Tracker::default();
    runtime.spawn(interrupt::on_interrupt(tracker.clone(), context));
    match flags.command {
        Command::Demo(args) => runtime.block_on(flow::demo(flow::Run {
            sh: &sh,
            args: &args,
            mode: flow::Mode::Demo,
            tracker: &tracker,
        })),
        Command::Up(args) => runtime.block_on(flow::demo(flow::Run {
            sh: &sh,
            args: &args,
            mode: flow::Mode::Up,
            tracker: &tracker,
        })),
        Command::Scenario1(args) => {
            runtime.block_on(flow::scenario(&sh, Scenario::One, &args, None, &tracker))
        }
        Command::Scenario2(args) => {
            runtime.block_on(flow::scenario(&sh, Scenario::Two, &args, None, &tracker))
        }
        Command::Scenario3(args) => {
            runtime.block_on(flow::scenario(&sh, Scenario::Three, &args, None, &tracker))
        }
        Command::Scenario4(args) => {
            let registry = args.push.parsed()?;
            runtime.block_on(flow::scenario(
                &sh,
                Scenario::Four,
                &args.scenario,
                registry,
                &tracker,
            ))
        }
        Command::Scenario5(args) => {
            let registry = args.push.parsed()?;
            runtime.block_on(flow::scenario(
                &sh,
                Scenario::Five,
                &args.scenario,
                registry,
                &tracker,
            ))
        }
        Command::Down(args) => flow::down(&sh, &args),
        Command::Doctor(args) => doctor::run(&sh, &args),
        Command::Status(args) => runtime.block_on(flow::status(&sh, &args)),
        Command::Inject(args) => {
            let done = match &args.kube_context {
                Some(context) => runtime.block_on(flow::inject_api(context, &args))?,
                None => {
                    let cluster = cluster::discover(&flow::docker_only(&sh), &args.cluster_name)?;
                    inject::check_node(&cluster, &args.node)?;
                    inject::run(&flow::docker_only(&sh), &cluster, &args.node, args.action())?
                }
            };
            println!("{}: {done}", args.node);
            Ok(())
        }
        Command::Faults(args) => {
            let lines = runtime.block_on(faults::fault_checks(&sh, &args.cluster_name))?;
            for line in lines {
                println!("{line}");
            }
            Ok(())
        }
        Command::Ci(args) => ci::run(&sh, &args),
        Command::ServeMirror => ci::serve_mirror(&sh, 120),
        Command::HostSetup => doctor::host_setup(&sh),
        Command::NodeImage(args) => node_image::run(&sh, &args),
        Command::Images(args) => images::run(&sh, &args),
        Command::GpuStackImages(args) => gpu_stack_images::run(&sh, &args),
        Command::Prebuild => prebuild::run(&sh),
        Command::ImexDoublePayload(args) => images::imex_double_payload(&sh, &args.out),
        Command::BenchVsUpstream(args) => bench_upstream::run(&sh, &args),
        Command::NvmlFunctions(args) => nvml_functions::run(&sh, &args),
        Command::Conformance(args) => conformance::run(&sh, &args),
        Command::Report(args) => report_page::run(&args),
    }
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
