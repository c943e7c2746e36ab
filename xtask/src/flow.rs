//! The commands that act on a cluster: `demo`, `up`, `scenario1..3`, `down`,
//! `status`. Each takes the runner lock, times its steps into the report,
//! and leaves the cluster in a state the next run can reuse.

use tokio::time::Instant;
use xshell::Shell;

use crate::flags::ScenarioArgs;
use crate::interrupt::Tracker;
use crate::names::KindCluster;
use crate::report::{Report, StepStatus};
use crate::runner::ShellRunner;
use crate::scenarios::Scenario;

mod common;
mod foreign;
mod kind;
mod payload;
mod run;
mod source;
mod status;
mod target;

use common::{command_line, context_lock_name, finish_report, take_lock};
pub(crate) use common::{docker_only, runner};
pub use common::{Mode, Run};
pub use foreign::inject_api;
use kind::{demo_inner, print_summary};
use run::run_scenario;
pub use status::{down, heal_workload, status};
use target::target;

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
