//! `nvml-mock-nri`: the containerd NRI plugin that injects the staged mock NVML tree into containers.
//!
//! It connects as an external plugin (dials `--socket-path`) or, when the
//! runtime launched it from its plugin dir, adopts the socket in
//! `NRI_PLUGIN_SOCKET` (fd 3). It registers as `<index>-<name>`
//! (`10-nvml-mock`), subscribes to CreateContainer only and answers with the
//! overlay mount, env and device nodes that `plan` decides.
//!
//! Losing the runtime connection is fatal by design: the process logs why and
//! exits 1, and the DaemonSet (or the runtime, for a launched plugin)
//! restarts it, which re-registers against the new runtime instance.
//! SIGTERM and SIGINT exit 0.

mod config;
mod ffi;
mod gpus;
mod heal;
mod health;
mod mig;
mod plan;
mod proc_view;
mod proto;
mod service;
mod session;
mod staged;
mod stop;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;

use crate::config::PolicyArgs;
use crate::health::Health;
use crate::service::{PluginService, TEST_STALL_ENV};
use crate::session::Identity;

/// The environment variable a runtime-launched plugin finds its socket's fd in.
const SOCKET_FD_ENV: &str = "NRI_PLUGIN_SOCKET";

/// The environment variable a runtime-launched plugin finds its index in.
const LAUNCHED_INDEX_ENV: &str = "NRI_PLUGIN_IDX";

/// Injects the staged mock NVML tree into containers as containerd creates them.
#[derive(Debug, Parser)]
#[command(name = "nvml-mock-nri", version, about, long_about = None)]
struct Cli {
    /// The runtime's NRI socket (ignored when launched by the runtime).
    #[arg(long, env = "NRI_SOCKET_PATH", default_value = node_layout::facts::NRI_SOCKET)]
    socket_path: PathBuf,
    /// Health listener (`:8080`, `127.0.0.1:8080`); empty disables it.
    /// Default `:8080`, or disabled when launched by the runtime.
    #[arg(long, env = "NVML_MOCK_HEALTH_ADDR")]
    health_addr: Option<String>,
    /// Plugin name to register.
    #[arg(long, env = "NRI_PLUGIN_NAME", default_value = "nvml-mock")]
    plugin_name: String,
    /// Two-digit plugin index to register (`NRI_PLUGIN_IDX` wins when launched by the runtime).
    #[arg(long, env = "NRI_PLUGIN_INDEX", default_value = "10")]
    plugin_index: String,
    /// Injection options.
    #[command(flatten)]
    policy: PolicyArgs,
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let launched_fd = match std::env::var(SOCKET_FD_ENV) {
        Ok(value) => Some(
            value
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|fd| *fd >= 0)
                .ok_or_else(|| {
                    anyhow::format_err!("{SOCKET_FD_ENV}={value:?} is not a file descriptor number")
                })?,
        ),
        Err(_) => None,
    };
    let index = match (launched_fd, std::env::var(LAUNCHED_INDEX_ENV)) {
        (Some(_), Ok(index)) => index,
        _ => cli.plugin_index.clone(),
    };
    let identity = Identity {
        name: cli.plugin_name.clone(),
        index,
    };
    validate_identity(&identity)?;
    let policy = cli
        .policy
        .into_policy()
        .map_err(|message| anyhow::format_err!(message))?;

    let stall = test_stall()?;
    let health = Arc::new(Health::default());
    let health_addr = match (&cli.health_addr, launched_fd) {
        (Some(addr), _) => addr.clone(),
        (None, Some(_)) => String::new(),
        (None, None) => ":8080".to_owned(),
    };
    if let Some(addr) =
        health::parse_addr(&health_addr).map_err(|message| anyhow::format_err!(message))?
    {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen for health probes on {addr}"))?;
        tracing::info!(addr = %listener.local_addr().unwrap_or(addr), "health probes at /healthz and /readyz");
        tokio::spawn(health::serve(listener, health.clone()));
    }

    tracing::info!(?policy, "starting");
    let service = Arc::new(PluginService::new(policy, health.clone(), stall));

    let trunk = match launched_fd {
        Some(fd) => {
            let stream = ffi::inherited_socket(fd).map_err(|message| anyhow::format_err!("{SOCKET_FD_ENV}: {message}"))?;
            stream.set_nonblocking(true).context("cannot make the inherited socket non-blocking")?;
            tokio::net::UnixStream::from_std(stream).context("cannot adopt the inherited socket")?
        }
        None => tokio::net::UnixStream::connect(&cli.socket_path).await.with_context(|| {
            format!(
                "cannot connect to the NRI socket {}: is NRI enabled in the runtime (containerd `[plugins.\"io.containerd.nri.v1.nri\"]`)?",
                cli.socket_path.display()
            )
        })?,
    };

    tokio::select! {
        end = session::run(trunk, &identity, service) => {
            health.set_registered(false);
            Err(anyhow::Error::new(end).context("lost the runtime; exiting so that it is restarted and registers again"))
        }
        signal = shutdown_signal() => {
            tracing::info!("{}: shutting down", signal?);
            Ok(())
        }
    }
}

/// Checks the identity as the runtime will (two digits; `[A-Za-z0-9_.+-]+`).
fn validate_identity(identity: &Identity) -> anyhow::Result<()> {
    let index_ok =
        identity.index.len() == 2 && identity.index.bytes().all(|byte| byte.is_ascii_digit());
    anyhow::ensure!(
        index_ok,
        "plugin index {:?} must be exactly two digits, such as 10",
        identity.index
    );
    let name_ok = !identity.name.is_empty()
        && identity
            .name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"_.+-".contains(&byte));
    anyhow::ensure!(
        name_ok,
        "plugin name {:?} must be non-empty and use only letters, digits and _.+-",
        identity.name
    );
    Ok(())
}

/// The test-only CreateContainer stall (see [`TEST_STALL_ENV`]).
fn test_stall() -> anyhow::Result<Duration> {
    match std::env::var(TEST_STALL_ENV) {
        Ok(value) => {
            let millis: u64 = value.trim().parse().with_context(|| {
                format!("{TEST_STALL_ENV}={value:?} is not a number of milliseconds")
            })?;
            Ok(Duration::from_millis(millis))
        }
        Err(_) => Ok(Duration::ZERO),
    }
}

async fn shutdown_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::select! {
        _ = term.recv() => Ok("SIGTERM"),
        _ = int.recv() => Ok("SIGINT"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities() {
        let identity = |name: &str, index: &str| Identity {
            name: name.to_owned(),
            index: index.to_owned(),
        };
        assert!(validate_identity(&identity("nvml-mock", "10")).is_ok());
        assert!(validate_identity(&identity("a_b.c+d", "00")).is_ok());
        for (name, index) in [
            ("nvml-mock", "1"),
            ("nvml-mock", "100"),
            ("nvml-mock", "1a"),
            ("", "10"),
            ("a b", "10"),
            ("a/b", "10"),
        ] {
            assert!(
                validate_identity(&identity(name, index)).is_err(),
                "{name:?} {index:?}"
            );
        }
    }

    #[test]
    fn cli_defaults_match_upstream() {
        let cli = Cli::try_parse_from(["nvml-mock-nri"]).expect("defaults parse");
        assert_eq!(cli.plugin_name, "nvml-mock");
        assert_eq!(cli.plugin_index, "10");
        assert_eq!(
            cli.policy.overlay_host_path,
            PathBuf::from("/var/lib/nvml-mock")
        );
        assert_eq!(
            cli.policy.overlay_mount_path,
            PathBuf::from("/opt/nvml-mock")
        );
        assert_eq!(
            cli.policy.imex_channel_annotation,
            "nvml-mock.nvidia.com/imex-channels"
        );
    }
}
