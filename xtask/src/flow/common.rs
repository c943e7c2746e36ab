//! What the flows share, below them all: the steps' timing into the
//! report, the runner lock, the runners (kind's, helm's alone, docker's
//! alone), the scratch and report files, the chart's install and the
//! workload's rollout, the mock's two images.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use tokio::time::Instant;
use xshell::Shell;

use crate::flags::DemoArgs;
use crate::interrupt::Tracker;
use crate::k8s;
use crate::lock::RunnerLock;
use crate::names::{CHART, MOCK_NS, NRI_DS, STAGER_DS};
use crate::plan::{self, ImageRef};
use crate::report::{Report, StepStatus};
use crate::runner::{Cmd, Runner, ShellRunner};
use crate::scenarios;

/// How long a DaemonSet may take to roll out on the demo's 4 workers
/// (`scenarios::scaled` grows it with the workers).
const ROLLOUT: Duration = Duration::from_secs(180);

/// [`ROLLOUT`] for `workers` workers.
pub(super) fn rollout(workers: usize) -> Duration {
    scenarios::scaled(ROLLOUT, workers)
}

/// Runs a step, recording its wall time and status and announcing it.
pub(super) async fn step<T, F: Future<Output = anyhow::Result<T>>>(
    report: &mut Report,
    tracker: &Tracker,
    name: &str,
    fut: F,
) -> anyhow::Result<T> {
    eprintln!("\n==> {name}");
    tracker.step(name);
    let started = Instant::now();
    let res = fut.await;
    report.step(name, started.elapsed(), StepStatus::of(&res));
    res.with_context(|| format!("step `{name}` failed"))
}

pub(super) fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo xtask {}", args.join(" "))
}

pub(super) fn take_lock(name: &str) -> anyhow::Result<RunnerLock> {
    let lock = RunnerLock::acquire(&crate::dirs::lock_dir()?, name, &command_line())?;
    tracing::debug!(path = %lock.path().display(), "runner lock taken");
    Ok(lock)
}

/// The runner lock's name for a cluster reached through `--kube-context`.
pub(super) fn context_lock_name(context: &str) -> String {
    format!("context-{}", context.replace(['/', ':'], "_"))
}

pub(crate) fn runner(sh: &Shell) -> anyhow::Result<ShellRunner<'_>> {
    let kind = crate::tools::ensure_tool(sh, crate::tools::Tool::Kind)?;
    let helm = crate::tools::ensure_tool(sh, crate::tools::Tool::Helm)?;
    Ok(ShellRunner::new(sh, kind, helm))
}

pub(super) fn scratch_dir(name: &str) -> anyhow::Result<PathBuf> {
    crate::dirs::scratch_dir(&name.replace(['/', ':'], "_"))
}

pub(super) fn finish_report(
    report: &mut Report,
    started: Instant,
    path: Option<&Path>,
) -> anyhow::Result<()> {
    report.total_seconds = crate::report::round(started.elapsed());
    if let Some(path) = path {
        let beside = report.write(path)?;
        eprintln!(
            "    report: {}, {} and {}",
            path.display(),
            beside.xml.display(),
            beside.html.display()
        );
    }
    Ok(())
}

/// The report's note of the API server's version.
pub(super) async fn version_note(client: &Client) -> String {
    match client.apiserver_version().await {
        Ok(info) => format!("Kubernetes {} (the API server's version)", info.git_version),
        Err(err) => format!("Kubernetes version unknown: {err}"),
    }
}

/// `helm upgrade --install` of the chart with these values files (name,
/// contents; written to the scratch dir of `scratch`), then waits for both
/// DaemonSets to roll out.
pub(super) async fn install_chart<R: Runner>(
    runner: &R,
    client: &Client,
    (context, workers): (&str, usize),
    scratch: &str,
    values: &[(&str, String)],
) -> anyhow::Result<()> {
    let dir = scratch_dir(scratch)?;
    let mut files = Vec::new();
    for (name, contents) in values {
        let path = dir.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
        files.push(path.to_string_lossy().into_owned());
    }
    let args = plan::helm_install_args(CHART, context, &files);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    harness::apiserver::helm(runner, &Cmd::new("helm", &args), context)?;
    k8s::wait_daemonset(
        client,
        MOCK_NS,
        STAGER_DS,
        "app.kubernetes.io/name=nvml-mock",
        rollout(workers),
    )
    .await?;
    k8s::wait_daemonset(
        client,
        MOCK_NS,
        NRI_DS,
        "app.kubernetes.io/name=nvml-mock-nri",
        rollout(workers),
    )
    .await
}

pub(super) fn images(sh: &Shell, args: &DemoArgs) -> anyhow::Result<ImagePair> {
    let from_flag = |flag: &Option<PathBuf>| -> anyhow::Result<Option<(PathBuf, ImageRef)>> {
        match flag {
            Some(path) => {
                let path = std::path::absolute(path)
                    .with_context(|| format!("resolving {}", path.display()))?;
                let image = crate::archive::repo_tag(&path)?;
                Ok(Some((path, image)))
            }
            None => Ok(None),
        }
    };
    let (mock, workload) = (
        from_flag(&args.mock_image)?,
        from_flag(&args.workload_image)?,
    );
    let (mock, workload) = match (mock, workload) {
        (Some(mock), Some(workload)) => (mock, workload),
        (mock, workload) => {
            let out = crate::dirs::images_dir()?;
            let imex = match &args.imex {
                Some(path) => Some(
                    std::path::absolute(path)
                        .with_context(|| format!("resolving {}", path.display()))?,
                ),
                None => None,
            };
            let built = crate::images::build_all(
                sh,
                &out,
                imex.as_deref(),
                crate::images::CargoProfile::Release,
            )?;
            let as_pair =
                |it: &crate::images::ImageArchive| -> anyhow::Result<(PathBuf, ImageRef)> {
                    Ok((it.path.clone(), ImageRef::parse(&it.reference)?))
                };
            (
                mock.map_or_else(|| as_pair(&built.mock), Ok)?,
                workload.map_or_else(|| as_pair(&built.workload), Ok)?,
            )
        }
    };
    eprintln!("    {} ({})", mock.1, mock.0.display());
    eprintln!("    {} ({})", workload.1, workload.0.display());
    Ok(ImagePair { mock, workload })
}

/// The mock and workload images: archive path and reference.
pub(super) struct ImagePair {
    pub(super) mock: (PathBuf, ImageRef),
    pub(super) workload: (PathBuf, ImageRef),
}

/// A runner for docker only (kind and helm are not resolved).
pub(crate) fn docker_only(sh: &Shell) -> ShellRunner<'_> {
    ShellRunner::new(sh, PathBuf::from("kind"), PathBuf::from("helm"))
}

/// The runner of a cluster xtask did not create: helm, and no kind.
pub(super) fn helm_runner(sh: &Shell) -> anyhow::Result<ShellRunner<'_>> {
    let helm = crate::tools::ensure_tool(sh, crate::tools::Tool::Helm)?;
    // kind is never run on this path.
    Ok(ShellRunner::new(sh, "kind".into(), helm))
}

/// What a run does once the stack is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `up`: stop there.
    Up,
    /// `demo`: run the scenarios too.
    Demo,
}

/// One `up` or `demo` run: what its steps read.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// The shell the tools run in.
    pub sh: &'a Shell,
    /// The command's flags.
    pub args: &'a DemoArgs,
    /// `up` or `demo`.
    pub mode: Mode,
    /// What an interrupt cleans up.
    pub tracker: &'a Tracker,
}
