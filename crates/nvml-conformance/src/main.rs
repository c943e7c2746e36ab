//! `nvml-conformance run --library PATH [--skip N]`: makes every case of the shipped call script
//! against one NVML library and prints a JSON line before and after each (see `record.rs`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use nvml_conformance::expand::{self, Case};
use nvml_conformance::ffi::Runner;
use nvml_conformance::record::Line;
use nvml_conformance::script;

#[derive(Parser)]
#[command(about = "Runs the NVML call script against one library (for `cargo xtask conformance`)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make every case against a library, printing a JSON line before and after each.
    Run {
        /// The library to `dlopen` (its configuration comes from the environment, e.g.
        /// MOCK_NVML_CONFIG).
        #[arg(long)]
        library: PathBuf,
        /// Skip the first N cases (to go on after a case crashed the process).
        #[arg(long, default_value_t = 0)]
        skip: usize,
    },
}

fn main() -> Result<()> {
    let Command::Run { library, skip } = Cli::parse().command;
    let script = script::parse(script::SHIPPED).context("the shipped call script")?;
    let mut runner = Runner::open(&library)?;
    let mut out = std::io::stdout().lock();
    let mut next = 0;
    let mut run_all = |runner: &Runner, cases: Vec<Case>, out: &mut dyn std::io::Write| {
        for case in cases {
            let n = next;
            next += 1;
            if n < skip {
                continue;
            }
            emit(
                out,
                &Line::Start {
                    n,
                    id: case.id.clone(),
                },
            )?;
            let (result, outputs) = runner.run(&case);
            emit(out, &Line::Outcome { n, result, outputs })?;
        }
        anyhow::Ok(())
    };
    run_all(&runner, expand::uninitialised(&script), &mut out)?;
    let devices = runner
        .initialise()
        .with_context(|| format!("initialising {}", library.display()))?;
    run_all(&runner, expand::initialised(&script, devices), &mut out)?;
    emit(&mut out, &Line::Done { cases: next })?;
    Ok(())
}

fn emit(out: &mut dyn std::io::Write, line: &Line) -> Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}
