//! The scenarios on a [`Target`]: which one runs how, each scenario's rows
//! into the report. Scenarios 4 and 5 take NVIDIA's charts and images from
//! the source [`super::source`] chooses and reach the nodes as the target
//! allows ([`crate::reach::Reach`]).

use anyhow::Context as _;
use tokio::time::Instant;
use xshell::Shell;

use super::common::{docker_only, helm_runner, runner, scratch_dir};
use super::source;
use super::target::{first_shared_clique, Target};
use crate::fabric::Expected;
use crate::interrupt::Tracker;
use crate::names::CHART;
use crate::report::{Outcome, Report, ScenarioResult, Verdict};
use crate::runner::Runner;
use crate::scenarios::{self, Limits, Rebind, Scenario};
use harness::workload::KubeWorkload;

pub(super) async fn run_scenario<R: Runner>(
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
        Scenario::Four | Scenario::Five => {
            let results = nvidia_rows(sh, target, which, runner, tracker).await?;
            let skipped = results.first().map(|it| it.outcome.verdict()) == Some(Verdict::Skipped);
            if which == Scenario::Four && !skipped {
                report.compute_domain = crate::scenario4::domain_members(&target.demo_expected());
            }
            report_rows(results, report);
            return Ok(());
        }
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

/// Awaits `$run` with the caller's runner, or else `target`'s own
/// ([`target_runner`]): one expression for scenarios 4 and 5, whose `run`s
/// take any `Runner`.
macro_rules! with_runner {
    ($sh:expr, $target:expr, $runner:expr, |$it:ident| $run:expr) => {
        match $runner {
            Some($it) => $run.await,
            None => {
                let owned = target_runner($sh, $target)?;
                let $it = &owned;
                $run.await
            }
        }
    };
}

/// A multi-row scenario that failed before its rows: one failed row.
fn failed_row(name: &str, started: Instant, err: anyhow::Error) -> Vec<ScenarioResult> {
    vec![ScenarioResult::new(
        name,
        Outcome::Failed(format!("{err:#}")),
        crate::report::round(started.elapsed()),
    )]
}

/// Scenarios 4 (NVIDIA's DRA driver: its result, the IMEX part and the
/// rebind part) and 5 (NVIDIA's device plugin and GFD): their rows, on
/// NVIDIA's charts and images from `target`'s source.
async fn nvidia_rows<R: Runner>(
    sh: &Shell,
    target: &Target,
    which: Scenario,
    runner: Option<&R>,
    tracker: &Tracker,
) -> anyhow::Result<Vec<ScenarioResult>> {
    let started = Instant::now();
    let source = source::of(sh, target)?;
    let rebind = rebind_of(target)?;
    let results = if which == Scenario::Four {
        let on = crate::scenario4::Scenario4On {
            cluster: reach_of(target),
            rebind,
            tracker,
            source: &source,
        };
        with_runner!(sh, target, runner, |it| crate::scenario4::run(
            sh,
            it,
            &on,
            &target.client
        ))
    } else {
        let on = crate::scenario5::Scenario5On {
            cluster: reach_of(target),
            source: &source,
            cliques: target
                .demo_expected()
                .into_iter()
                .map(|(node, it)| (node, format!("{}.{}", it.uuid, it.clique)))
                .collect(),
            rebind,
            tracker,
        };
        with_runner!(sh, target, runner, |it| crate::scenario5::run(
            sh,
            it,
            &on,
            &target.client
        ))
    };
    Ok(results.unwrap_or_else(|err| failed_row(&which.name(), started, err)))
}

/// The runner for `target`: kind's and helm, or on a cluster xtask did not
/// create helm alone.
fn target_runner<'a>(
    sh: &'a Shell,
    target: &Target,
) -> anyhow::Result<crate::runner::ShellRunner<'a>> {
    match target.kind {
        Some(_) => runner(sh),
        None => helm_runner(sh),
    }
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
