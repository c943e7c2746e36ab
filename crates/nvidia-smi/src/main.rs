//! `nvidia-smi` of the mock driver: staged at `driver/usr/bin/nvidia-smi` beside check-fabric,
//! it answers the queries NVIDIA's node software makes of a driver root (the DRA driver's init
//! container runs `env -i LD_PRELOAD=<lib> nvidia-smi --version`) and a few for humans
//! (`-L`, `--query-gpu`, `-q` and `-q -x`: `report.rs` holds what `-q` reports, `collect.rs`
//! fills it through the library, `layout.rs` orders it (`modes.rs` names the modes), `text.rs` and `xml.rs` print it),
//! and MIG (`-mig 0|1` and `mig …`, issue 38: `mig_cli.rs` parses, `mig.rs` lists and sets the
//! mode, `mig_change.rs` creates and destroys, `mig_view.rs` prints), everything through
//! `libnvidia-ml.so.1`. It works against NVIDIA's library too.
//!
//! Exit codes follow nvidia-smi's: 0 success, 2 invalid argument or flag, the NVML error
//! code when a call fails (9 driver not loaded, …; 255 for codes above 255), 12 when the
//! library cannot be loaded.

mod args;
mod cli;
mod collect;
mod ffi;
mod layout;
mod mig;
mod mig_change;
mod mig_cli;
mod mig_view;
mod modes;
mod report;
mod text;
mod xml;

use std::{io::Write, process::ExitCode};

use cli::{Command, Field};
use collect::Failure;
use ffi::{Nvml, Return};
use mig_cli::Mig;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let invocation = match cli::parse(&args) {
        Ok(invocation) => invocation,
        Err(message) => {
            eprintln!("{message}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    match invocation.command {
        Command::Help => println!("{}", cli::USAGE),
        Command::Mig(Mig::Help) => println!("{}", mig_cli::USAGE),
        _ => {}
    }
    if matches!(invocation.command, Command::Help | Command::Mig(Mig::Help)) {
        return ExitCode::SUCCESS;
    }
    let nvml = match Nvml::load() {
        Ok(nvml) => nvml,
        Err(message) => {
            eprintln!("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system: {message}");
            return ExitCode::from(12);
        }
    };
    if let Err(code) = nvml.init() {
        eprintln!(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver: {}",
            nvml.error_string(code)
        );
        return exit_code(code);
    }
    if let Some(outcome) = mig_command(&nvml, &invocation) {
        let _ = nvml.shutdown();
        let _ = std::io::stdout().lock().write_all(outcome.out.as_bytes());
        return match outcome.failure {
            None => ExitCode::SUCCESS,
            Some((text, code)) => {
                eprint!("{text}");
                exit_code(code)
            }
        };
    }
    let result = run(&nvml, &invocation);
    let _ = nvml.shutdown();
    match result {
        Ok(text) => {
            // A closed pipe (`nvidia-smi -L | head -1`) is not an error of ours.
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err((what, code)) => {
            eprintln!("{what}: {}", nvml.error_string(code));
            exit_code(code)
        }
    }
}

/// `-mig 0|1` and `mig …` (`None` for any other command): the GPUs they work on and who does
/// the work (see `mig.rs`).
fn mig_command(nvml: &Nvml, invocation: &cli::Invocation) -> Option<mig::Outcome> {
    let selected = invocation.gpu;
    let mut out = String::new();
    let result = match &invocation.command {
        Command::MigMode(enable) => mig::set_mode(nvml, selected, *enable, &mut out),
        Command::Mig(
            command @ (Mig::CreateGpuInstances { .. } | Mig::CreateComputeInstances { .. }),
        ) => mig::select(nvml, selected, selected.is_some(), &mut out)
            .and_then(|gpus| mig_change::create(nvml, &gpus, command, &mut out)),
        Command::Mig(
            command @ (Mig::DestroyComputeInstances { .. } | Mig::DestroyGpuInstances { .. }),
        ) => mig::select(nvml, selected, false, &mut out)
            .and_then(|gpus| mig_change::destroy(nvml, &gpus, command, &mut out)),
        Command::Mig(command) => mig::select(nvml, selected, false, &mut out)
            .and_then(|gpus| mig::list(nvml, &gpus, command, &mut out)),
        _ => return None,
    };
    Some(mig::Outcome {
        out,
        failure: result.err(),
    })
}

fn exit_code(code: Return) -> ExitCode {
    ExitCode::from(u8::try_from(code.0).unwrap_or(255))
}

/// Tags a failed call with what was being read.
fn at(what: &str) -> impl Fn(Return) -> Failure + '_ {
    move |code| (what.to_owned(), code)
}

fn run(nvml: &Nvml, invocation: &cli::Invocation) -> Result<String, Failure> {
    let driver = nvml.driver_version().map_err(at("driver version"))?;
    if invocation.command == Command::Version {
        let nvml_version = nvml.nvml_version().map_err(at("NVML version"))?;
        let cuda = nvml.cuda_version().map_err(at("CUDA version"))?;
        return Ok(format!(
            "NVIDIA-SMI version  : {driver}\nNVML version        : {nvml_version}\nDRIVER version      : {driver}\nCUDA Version        : {}.{}\n",
            cuda / 1000,
            (cuda % 1000) / 10
        ));
    }
    let count = nvml.device_count().map_err(at("device count"))?;
    let indices: Vec<u32> = match invocation.gpu {
        Some(index) if index < count => vec![index],
        Some(index) => {
            return Err((
                format!("No devices were found with index {index}"),
                Return(6),
            ))
        }
        None => (0..count).collect(),
    };
    if let Command::Report { xml } = invocation.command {
        let report = collect::report(nvml, &indices, count)?;
        return Ok(if xml {
            xml::render(&report)
        } else {
            text::render(&report)
        });
    }
    if let Command::Query { fields, header } = &invocation.command {
        return csv(nvml, fields, *header, &indices, &driver, count);
    }
    let mut out = String::new();
    if invocation.command == Command::Summary {
        out.push_str(&format!(
            "cdsim mock driver {driver}: {count} GPU(s) (nvidia-smi --help for the queries answered)\n"
        ));
    }
    for index in indices {
        let device = nvml.handle(index).map_err(at(&format!("GPU {index}")))?;
        let name = nvml
            .name(device)
            .map_err(at(&format!("GPU {index} name")))?;
        let uuid = nvml
            .uuid(device)
            .map_err(at(&format!("GPU {index} uuid")))?;
        match invocation.command {
            Command::Summary => {
                let bus = nvml
                    .pci_bus_id(device)
                    .map_err(at(&format!("GPU {index} pci")))?;
                out.push_str(&format!("GPU {index}  {name}  {bus}  {uuid}\n"));
            }
            _ => {
                out.push_str(&format!("GPU {index}: {name} (UUID: {uuid})\n"));
                out.push_str(&mig::list_lines(nvml, device, &name)?);
            }
        }
    }
    Ok(out)
}

/// `--query-gpu=<fields> --format=csv`: one line per GPU of `indices`.
fn csv(
    nvml: &Nvml,
    fields: &[Field],
    header: bool,
    indices: &[u32],
    driver: &str,
    count: u32,
) -> Result<String, Failure> {
    let mut out = String::new();
    if header {
        let names: Vec<&str> = fields.iter().map(|field| field.header()).collect();
        out.push_str(&names.join(", "));
        out.push('\n');
    }
    for &index in indices {
        let device = nvml.handle(index).map_err(at(&format!("GPU {index}")))?;
        let mut values = Vec::new();
        for field in fields {
            let value = match field {
                Field::Index => Ok(index.to_string()),
                Field::Name => nvml.name(device),
                Field::Uuid => nvml.uuid(device),
                Field::PciBusId => nvml.pci_bus_id(device),
                Field::Serial => match nvml.serial(device) {
                    Err(Return(3)) => Ok("[N/A]".to_owned()),
                    other => other,
                },
                Field::DriverVersion => Ok(driver.to_owned()),
                Field::Count => Ok(count.to_string()),
            };
            values.push(value.map_err(at(&format!("GPU {index} {}", field.header())))?);
        }
        out.push_str(&values.join(", "));
        out.push('\n');
    }
    Ok(out)
}
