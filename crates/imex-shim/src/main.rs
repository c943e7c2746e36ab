//! `nvidia-imex-shim`, installed as `/usr/bin/nvidia-imex`: it replaces itself
//! with the real daemon in NO GPU mode, adding `--nogpu` unless the caller
//! passed `--nogpu` or `-nogpu`.
//!
//! The daemon is, in order: `IMEX_SHIM_REAL_BIN` when set; the daemon the
//! shim carries at its own end, as the stager writes `nvidia-imex` into the
//! staged driver root (`node_layout::imex_bundle`; executed from a memfd, so
//! nothing is written to disk); else `/usr/bin/nvidia-imex.real`.
//!
//! The exec keeps the environment, stdio and PID, so signals reach the daemon
//! and its exit code is the caller's. When the exec fails the shim prints
//! `nvidia-imex-shim: exec <path>: <error>` and exits 127.

mod carried;
mod plan;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let caller_args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (real, argv0) = match plan::named_binary(std::env::var_os("IMEX_SHIM_REAL_BIN")) {
        Some(real) => (real.clone(), real.into_os_string()),
        None => match carried::daemon() {
            Ok(Some(fd_path)) => (fd_path, OsString::from(plan::CARRIED_ARGV0)),
            Ok(None) => {
                let real = plan::real_binary(None);
                (real.clone(), real.into_os_string())
            }
            Err(err) => {
                eprintln!("nvidia-imex-shim: cannot unpack the daemon it carries: {err}");
                return ExitCode::from(127);
            }
        },
    };
    let argv = plan::argv(&argv0, &caller_args);
    // `exec` only returns on failure.
    let err = Command::new(program(&real))
        .arg0(&argv[0])
        .args(&argv[1..])
        .exec();
    eprintln!("nvidia-imex-shim: exec {}: {err}", real.display());
    ExitCode::from(127)
}

/// The path to exec. Like `execve`, a name without a slash is relative to the
/// working directory; `Command` would search `PATH` for it instead.
fn program(real: &Path) -> PathBuf {
    if real.as_os_str().as_encoded_bytes().contains(&b'/') {
        return real.to_path_buf();
    }
    Path::new(".").join(real)
}
