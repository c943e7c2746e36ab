//! `check-fabric`: prints each GPU's NVLink fabric identity (cluster uuid,
//! clique id, state) through `libnvidia-ml.so.1`, found by the normal loader
//! search. It works against the real driver as against the mock.
//!
//! Text output and exit codes follow upstream's `cmd/check-fabric`: 0 when
//! every GPU answered, 2 when a GPU's fabric is NOT SUPPORTED, 1 on any other
//! failure (with `nvmlInit: <err>`, `DeviceGetCount: <err>`, `handle[i]: <err>`
//! or `GetGpuFabricInfo[i]: <err>` on stderr). `--json` prints one document
//! instead, described at [`report::Run::json`].
//!
//! The process starts at the C `main` in [`start`], not through Rust's runtime start-up (`no_main`):
//! that start-up's main-thread stack probe (glibc parsing `/proc/self/maps`) and signal-stack set-up
//! cost more pages and time than the whole probe's own work. What it did that check-fabric relies
//! on is done there: SIGPIPE ignored (a closed pipe is a write error, not a kill) and a panic
//! turned into exit code 101; stdout is flushed here explicitly.

// The unit-test harness brings its own `main`.
#![cfg_attr(not(test), no_main)]

mod cli;
mod ffi;
mod query;
mod report;
mod start;

use std::io::Write;

use crate::cli::Command;
use crate::ffi::{LoadError, Nvml, LIBRARY};
use crate::report::{Gpu, Run};

/// The program; returns the exit code.
fn run() -> u8 {
    let json = match cli::parse(std::env::args_os().skip(1)) {
        Ok(Command::Check { json }) => json,
        Ok(Command::Help) => return print_out(cli::HELP),
        Ok(Command::Version) => return print_out(&cli::version()),
        Err(usage) => {
            eprint!("{}", usage.message());
            return 1;
        }
    };
    let node_name = std::env::var("NODE_NAME")
        .ok()
        .filter(|name| !name.is_empty());
    let run = match Nvml::load() {
        Ok(nvml) => collect(&nvml, node_name, json),
        Err(err) => Run {
            failure: Some(load_failure(&err)),
            ..Run::default()
        },
    };
    let stdout = if json {
        run.json().unwrap_or_default()
    } else {
        run.text()
    };
    // A closed pipe (`check-fabric | head -6`) is not an error of ours.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(stdout.as_bytes()).and_then(|()| out.flush());
    if let Some(failure) = &run.failure {
        eprintln!("{failure}");
    }
    run.exit_code()
}

/// Prints help or version text on stdout (exit 0).
fn print_out(text: &str) -> u8 {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    0
}

/// Queries every GPU, stopping at the first failure as upstream does.
fn collect(nvml: &Nvml, node_name: Option<String>, want_driver_version: bool) -> Run {
    let mut run = Run {
        node_name,
        ..Run::default()
    };
    if let Err(err) = nvml.init() {
        run.failure = Some(format!("nvmlInit: {}", nvml.error_string(err)));
        return run;
    }
    walk(nvml, &mut run, want_driver_version);
    let _ = nvml.shutdown();
    run
}

fn walk(nvml: &Nvml, run: &mut Run, want_driver_version: bool) {
    if want_driver_version {
        run.driver_version = nvml.driver_version().and_then(Result::ok);
    }
    let count = match nvml.device_count() {
        Ok(count) => count,
        Err(err) => {
            run.failure = Some(format!("DeviceGetCount: {}", nvml.error_string(err)));
            return;
        }
    };
    run.count = Some(count);
    for index in 0..count {
        let device = match nvml.handle(index) {
            Ok(device) => device,
            Err(err) => {
                run.failure = Some(format!("handle[{index}]: {}", nvml.error_string(err)));
                return;
            }
        };
        let uuid = nvml.uuid(device).unwrap_or_default();
        match query::query(nvml, device) {
            Ok(fabric) => run.gpus.push(Gpu {
                index,
                uuid,
                fabric,
            }),
            Err(err) => {
                run.failure = Some(format!(
                    "GetGpuFabricInfo[{index}]: {}",
                    nvml.error_string(err)
                ));
                return;
            }
        }
    }
}

fn load_failure(err: &LoadError) -> String {
    match err {
        LoadError::Open(reason) => format!(
            "nvmlInit: cannot load {LIBRARY} ({reason}): install the NVIDIA driver, or put the directory holding the mock {LIBRARY} on LD_LIBRARY_PATH"
        ),
        LoadError::Symbol(name) => format!(
            "nvmlInit: {LIBRARY} has no {name} entry point: the library found by the loader is not NVML (check LD_LIBRARY_PATH)"
        ),
    }
}
