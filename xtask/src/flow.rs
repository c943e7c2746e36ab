//! The commands that act on a cluster: `demo`, `up`, `scenario1..3`, `down`,
//! `status`. Each takes the runner lock, times its steps into the report,
//! and leaves the cluster in a state the next run can reuse.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use tokio::time::Instant;
use xshell::Shell;

use crate::fabric::Expected;
use crate::flags::{DemoArgs, ScenarioArgs};
use crate::interrupt::Tracker;
use crate::k8s;
use crate::lock::RunnerLock;
use crate::names::{
    self, KindCluster, CHART, MOCK_NS, NRI_DS, STAGER_DS, WORKLOAD_DS, WORKLOAD_NS,
    WORKLOAD_SELECTOR,
};
use crate::plan::{self, ImageRef};
use crate::report::{Outcome, Report, ScenarioResult, StepStatus, Verdict};
use crate::runner::{Cmd, Runner, ShellRunner};
use crate::scenarios::{self, Limits, Rebind, Scenario};

mod foreign;
mod kind;
mod payload;
mod source;
mod status;
mod target;

pub use foreign::inject_api;
use kind::{demo_inner, print_summary};
pub(crate) use status::docker_only;
pub use status::{down, heal_workload, status};
use target::{chosen_topology, first_shared_clique, target, Target};

/// How long a DaemonSet may take to roll out on the demo's 4 workers
/// (`scenarios::scaled` grows it with the workers).
const ROLLOUT: Duration = Duration::from_secs(180);

/// [`ROLLOUT`] for `workers` workers.
fn rollout(workers: usize) -> Duration {
    scenarios::scaled(ROLLOUT, workers)
}

pub use harness::workload::KubeWorkload;

/// Runs a step, recording its wall time and status and announcing it.
async fn step<T, F: Future<Output = anyhow::Result<T>>>(
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

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo xtask {}", args.join(" "))
}

fn take_lock(name: &str) -> anyhow::Result<RunnerLock> {
    let lock = RunnerLock::acquire(&crate::dirs::lock_dir()?, name, &command_line())?;
    tracing::debug!(path = %lock.path().display(), "runner lock taken");
    Ok(lock)
}

/// The runner lock's name for a cluster reached through `--kube-context`.
fn context_lock_name(context: &str) -> String {
    format!("context-{}", context.replace(['/', ':'], "_"))
}

pub(crate) fn runner(sh: &Shell) -> anyhow::Result<ShellRunner<'_>> {
    let kind = crate::tools::ensure_tool(sh, crate::tools::Tool::Kind)?;
    let helm = crate::tools::ensure_tool(sh, crate::tools::Tool::Helm)?;
    Ok(ShellRunner::new(sh, kind, helm))
}

fn scratch_dir(name: &str) -> anyhow::Result<PathBuf> {
    crate::dirs::scratch_dir(&name.replace(['/', ':'], "_"))
}

fn finish_report(report: &mut Report, started: Instant, path: Option<&Path>) -> anyhow::Result<()> {
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

/// `demo` and `up`, on the kind cluster or (`--kube-context`) another one.
pub async fn demo(run: Run<'_>) -> anyhow::Result<()> {
    // A bad payload is named before anything is built or installed.
    let payload = match &run.args.imex {
        Some(path) => Some(payload::checked_payload(path, &run.args.cluster)?),
        None => None,
    };
    if run.args.cluster.kube_context.is_some() {
        return foreign::demo(run).await;
    }
    let args = run.args;
    let layout = args.layout.layout()?;
    let cluster = KindCluster::new(&args.cluster.cluster_name, layout.workers())?;
    let _lock = take_lock(cluster.name())?;
    let started = Instant::now();
    let mut report = Report {
        command: command_line(),
        cluster: cluster.name().to_owned(),
        ..Report::default()
    };
    report.notes.push(format!("layout: {layout}"));
    if let Some(identity) = payload {
        eprintln!("    payload: {}", crate::images::describe(&identity));
        report.imex_payload = Some(identity);
    }
    crate::report_page::lay_out(&mut report, &layout.demo(&cluster.workers()), &args.profile);
    let res = demo_inner(run, &cluster, layout, &mut report).await;
    finish_report(&mut report, started, args.report.as_deref())?;
    let cluster_up = report
        .steps
        .iter()
        .any(|it| it.name == "cluster" && it.status == StepStatus::Ok);
    print_summary(&report, &cluster, cluster_up);
    res?;
    if report.failed() {
        anyhow::bail!("{}", report.verdict_line());
    }
    Ok(())
}

/// The report's note of the API server's version.
async fn version_note(client: &Client) -> String {
    match client.apiserver_version().await {
        Ok(info) => format!("Kubernetes {} (the API server's version)", info.git_version),
        Err(err) => format!("Kubernetes version unknown: {err}"),
    }
}

/// `helm upgrade --install` of the chart with these values files (name,
/// contents; written to the scratch dir of `scratch`), then waits for both
/// DaemonSets to roll out.
async fn install_chart<R: Runner>(
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

/// Applies the demo workload with `image` and waits until it runs, injected,
/// on every worker.
async fn roll_workload(client: &Client, image: &str, workers: &[String]) -> anyhow::Result<()> {
    let path = crate::project_root().join(names::WORKLOAD_MANIFEST);
    let yaml =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let (daemonset, policy) = k8s::workload_objects(&yaml, image)?;
    k8s::apply_workload(client, &daemonset, &policy).await?;
    let limit = rollout(workers.len());
    k8s::wait_daemonset(client, WORKLOAD_NS, WORKLOAD_DS, WORKLOAD_SELECTOR, limit).await?;
    heal_workload(client, workers).await.map(|_| ())
}

fn images(sh: &Shell, args: &DemoArgs) -> anyhow::Result<ImagePair> {
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
struct ImagePair {
    mock: (PathBuf, ImageRef),
    workload: (PathBuf, ImageRef),
}

async fn run_scenario<R: Runner>(
    sh: &Shell,
    target: &Target,
    which: Scenario,
    runner: Option<&R>,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    let name = which.name();
    eprintln!("\n==> {name} on {}", target.label());
    tracker.step(&name);
    let workload = KubeWorkload::new(target.client.clone());
    let mut result = match which {
        Scenario::Four => return run_scenario4(sh, target, runner, tracker, report).await,
        Scenario::Five => return run_scenario5(sh, target, runner, tracker, report).await,
        Scenario::One => scenarios::scenario1(&workload, &target.demo_expected()).await,
        Scenario::Two => {
            let expected = target.demo_expected();
            match scenario2_pair(&expected) {
                Ok(pair) => scenarios::scenario2(&workload, pair, tracker, Limits::default()).await,
                // A layout of one tray per clique has no pair to run.
                Err(err) => ScenarioResult::new(&name, Outcome::Skipped(format!("{err:#}")), 0.0),
            }
        }
        Scenario::Three => run_scenario3(sh, target, &workload, runner, tracker).await?,
    };
    if let (Outcome::Failed(reason), Some(cluster)) = (&result.outcome, &target.kind) {
        // A failure on a node that is down says so.
        if let Err(err) = crate::cluster::preflight(&docker_only(sh), cluster) {
            result.outcome = Outcome::Failed(format!("{reason}; {err:#}"));
        }
    }
    match result.outcome.verdict() {
        Verdict::Passed => eprintln!(
            "    ✓ {name} {} in {:.1}s",
            result.outcome.label(),
            result.seconds
        ),
        Verdict::Failed => eprintln!("ERROR: {name} {}", result.outcome.label()),
        Verdict::Skipped => eprintln!("    - {name} {}", result.outcome.label()),
    }
    report.scenario(result);
    Ok(())
}

/// The two workers scenario 2 runs its daemons on: the first two sharing a clique.
fn scenario2_pair(expected: &[(String, Expected)]) -> anyhow::Result<[&str; 2]> {
    first_shared_clique(expected).with_context(|| {
        format!(
            "scenario 2 needs two workers in one clique (pass fewer --cliques-per-rack); the topology puts them so: {:?}",
            expected
                .iter()
                .map(|(node, it)| format!("{node}: clique {}", it.clique))
                .collect::<Vec<_>>()
        )
    })
}

/// Scenario 3: the rebind topology, then the target's own topology back.
async fn run_scenario3<R: Runner>(
    sh: &Shell,
    target: &Target,
    workload: &KubeWorkload,
    runner: Option<&R>,
    tracker: &Tracker,
) -> anyhow::Result<ScenarioResult> {
    let rebind = rebind_of(target)?;
    let limits = Limits::for_workers(target.workers.len());
    Ok(match runner {
        Some(runner) => scenarios::scenario3(workload, runner, &rebind, tracker, limits).await,
        None => {
            let runner = self::runner(sh)?;
            scenarios::scenario3(workload, &runner, &rebind, tracker, limits).await
        }
    })
}

/// Scenario 3's rebind on `target`: both topologies and what each worker reports under them.
fn rebind_of(target: &Target) -> anyhow::Result<Rebind> {
    Ok(Rebind {
        chart: CHART.to_owned(),
        context: target.context.clone(),
        rebind_values: target.rebind.helm_values(),
        rebind_expected: target.expected(&target.rebind),
        demo_values: target.topology.helm_values(),
        demo_expected: target.demo_expected(),
        scratch: scratch_dir(&target.context)?,
    })
}

/// Scenario 4 (NVIDIA's DRA driver): its result, the IMEX part and the rebind part.
async fn run_scenario4<R: Runner>(
    sh: &Shell,
    target: &Target,
    runner: Option<&R>,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let source = source::of(sh, target)?;
    let on = crate::scenario4::Scenario4On {
        cluster: reach_of(target),
        rebind: rebind_of(target)?,
        tracker,
        source: &source,
    };
    let results = match runner {
        Some(runner) => crate::scenario4::run(sh, runner, &on, &target.client).await,
        None if target.kind.is_none() => {
            let runner = foreign::helm_runner(sh)?;
            crate::scenario4::run(sh, &runner, &on, &target.client).await
        }
        None => {
            let runner = self::runner(sh)?;
            crate::scenario4::run(sh, &runner, &on, &target.client).await
        }
    };
    let results = results.unwrap_or_else(|err| {
        vec![crate::report::ScenarioResult {
            name: "scenario4".to_owned(),
            outcome: Outcome::Failed(format!("{err:#}")),
            seconds: crate::report::round(started.elapsed()),
            workers: Vec::new(),
            timings: Vec::new(),
        }]
    });
    if results.first().map(|it| it.outcome.verdict()) != Some(Verdict::Skipped) {
        report.compute_domain = crate::scenario4::domain_members(&target.demo_expected());
    }
    report_rows(results, report);
    Ok(())
}

/// How the scenarios reach `target`'s nodes: kind's, or the API alone.
fn reach_of(target: &Target) -> crate::reach::Reach<'_> {
    match &target.kind {
        Some(cluster) => crate::reach::Reach::Kind(cluster),
        None => crate::reach::Reach::Api {
            context: &target.context,
        },
    }
}

/// Scenario 5 (NVIDIA's device plugin and GFD): its rows.
async fn run_scenario5<R: Runner>(
    sh: &Shell,
    target: &Target,
    runner: Option<&R>,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let source = source::of(sh, target)?;
    let on = crate::scenario5::Scenario5On {
        cluster: reach_of(target),
        source: &source,
        cliques: target
            .demo_expected()
            .into_iter()
            .map(|(node, it)| (node, format!("{}.{}", it.uuid, it.clique)))
            .collect(),
        rebind: rebind_of(target)?,
        tracker,
    };
    let results = match runner {
        Some(runner) => crate::scenario5::run(sh, runner, &on, &target.client).await,
        None if target.kind.is_none() => {
            let runner = foreign::helm_runner(sh)?;
            crate::scenario5::run(sh, &runner, &on, &target.client).await
        }
        None => {
            let runner = self::runner(sh)?;
            crate::scenario5::run(sh, &runner, &on, &target.client).await
        }
    };
    let results = results.unwrap_or_else(|err| {
        vec![ScenarioResult::new(
            "scenario5",
            Outcome::Failed(format!("{err:#}")),
            crate::report::round(started.elapsed()),
        )]
    });
    report_rows(results, report);
    Ok(())
}

/// Prints and reports a multi-row scenario's rows.
fn report_rows(results: Vec<ScenarioResult>, report: &mut Report) {
    for result in results {
        match &result.outcome {
            Outcome::Passed | Outcome::PassedTestDouble => eprintln!(
                "    ✓ {} {} in {:.1}s",
                result.name,
                result.outcome.label(),
                result.seconds
            ),
            Outcome::Failed(reason) => eprintln!("ERROR: {} failed: {reason}", result.name),
            Outcome::Skipped(reason) => eprintln!("    - {} SKIPPED: {reason}", result.name),
        }
        report.scenario(result);
    }
}

/// `scenario1` … `scenario5` against a running setup.
pub async fn scenario(
    sh: &Shell,
    which: Scenario,
    args: &ScenarioArgs,
    registry: Option<crate::registry::Registry>,
    tracker: &Tracker,
) -> anyhow::Result<()> {
    let lock_name = match &args.cluster.kube_context {
        Some(context) => context_lock_name(context),
        None => KindCluster::new(&args.cluster.cluster_name, 0)?
            .name()
            .to_owned(),
    };
    if let Some(payload) = &args.imex {
        // A bad payload is named before anything touches the cluster.
        if !matches!(which, Scenario::Two | Scenario::Four) {
            anyhow::bail!(
                "--imex is for scenario 2 (the workload's daemons) and scenario 4 (the driver \
                 root's nvidia-imex); scenario{} takes none: rerun without it",
                which.number()
            );
        }
        payload::checked_payload(payload, &args.cluster)?;
    }
    let _lock = take_lock(&lock_name)?;
    let started = Instant::now();
    if args.cluster.kube_context.is_none() {
        crate::tools::ensure_engine(sh)?;
        let cluster = crate::cluster::discover(&docker_only(sh), &args.cluster.cluster_name)?;
        crate::cluster::preflight(&docker_only(sh), &cluster)?;
    }
    let mut report = Report {
        command: command_line(),
        ..Report::default()
    };
    if let Some(payload) = &args.imex {
        if let Err(err) =
            payload::install_payload(sh, (args, which), payload, tracker, &mut report).await
        {
            finish_report(&mut report, started, args.report.as_deref())?;
            return Err(err);
        }
    }
    let mut target = target(sh, &args.cluster).await?;
    target.registry = registry;
    report.cluster = target.label();
    report.trays = crate::report::map::trays(&target.topology, None);
    let res = run_scenario::<ShellRunner<'_>>(sh, &target, which, None, tracker, &mut report).await;
    finish_report(&mut report, started, args.report.as_deref())?;
    res?;
    if report.failed() {
        anyhow::bail!("{}", report.verdict_line());
    }
    Ok(())
}
