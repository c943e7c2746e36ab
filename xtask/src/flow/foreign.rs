//! `up` and `demo` on a cluster xtask did not create: `--kube-context CTX
//! --registry HOST[:PORT][/PREFIX]`. Nothing here uses kind or docker: the
//! images go to the registry through the OCI distribution API, the nodes'
//! facts (NRI, device majors) come from probe pods, and the nodes pull the
//! images themselves, which the pull events show.

use std::collections::BTreeMap;

use anyhow::Context as _;
use kube::Client;
use tokio::time::Instant;

use super::common::{
    context_lock_name, finish_report, helm_runner, images, install_chart, step, take_lock, Mode,
    Run,
};
use super::run::run_scenario;
use super::status::roll_workload;
use super::target::Target;
use crate::k8s;
use crate::names::{MOCK_NS, WORKLOAD_NS};
use crate::plan::{self, ImageRef};
use crate::registry::Registry;
use crate::report::Report;
use crate::runner::ShellRunner;
use crate::scenarios::Scenario;

/// `up`/`demo --kube-context CTX --registry R`.
pub async fn demo(run: Run<'_>) -> anyhow::Result<()> {
    let args = run.args;
    let context = args
        .cluster
        .kube_context
        .as_deref()
        .context("a --kube-context run without a context")?;
    let kind_only = [
        (args.offline, "--offline"),
        (args.node_image.is_some(), "--node-image"),
        (args.force_recreate, "--force-recreate (or FORCE_RECREATE)"),
    ];
    if let Some((_, flag)) = kind_only.iter().find(|(set, _)| *set) {
        anyhow::bail!(
            "{flag} applies to the kind cluster xtask creates; with --kube-context the cluster is yours: drop {flag}"
        );
    }
    let Some(value) = args.push.registry.as_deref() else {
        anyhow::bail!(
            "`up --kube-context {context}` needs --registry HOST[:PORT][/PREFIX]: a cluster that is not kind pulls \
             the mock and workload images from a registry its nodes can reach (docs/own-cluster.md)"
        );
    };
    let registry = Registry::parse(value, args.push.plain_http).map_err(anyhow::Error::msg)?;
    let _lock = take_lock(&context_lock_name(context))?;
    let started = Instant::now();
    let mut report = Report {
        command: super::common::command_line(),
        cluster: format!("context {context}"),
        ..Report::default()
    };
    let res = inner(run, context, &registry, &mut report).await;
    finish_report(&mut report, started, args.report.as_deref())?;
    eprintln!("\n==> summary ({:.1}s)", report.total_seconds);
    for note in &report.notes {
        eprintln!("    {note}");
    }
    eprintln!("    {}", report.verdict_line());
    res?;
    if report.failed() {
        anyhow::bail!("{}", report.verdict_line());
    }
    Ok(())
}

async fn inner(
    run: Run<'_>,
    context: &str,
    registry: &Registry,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (sh, args, tracker) = (run.sh, run.args, run.tracker);
    let runner = step(report, tracker, "tools", async { helm_runner(sh) }).await?;
    let client = k8s::client(context).await?;
    let Chosen {
        chart_selector,
        chart_nodes,
        workers,
    } = step(report, tracker, "nodes", async {
        choose_nodes(&client, context, args.cluster.node_selector.as_deref()).await
    })
    .await?;
    report
        .notes
        .push(format!("workers: {}", workers.join(", ")));
    let topology = super::target::chosen_topology(args.cluster.topology.as_deref(), &workers)?;
    crate::report_page::lay_out(report, &topology, &args.profile);
    report
        .notes
        .push(super::common::version_note(&client).await);
    let built = step(report, tracker, "images", async { images(sh, args) }).await?;
    let (mock, workload) = step(report, tracker, "push images", async {
        push_images(registry, &built).await
    })
    .await?;
    report
        .notes
        .push(format!("images pushed to {registry}: {mock}, {workload}"));
    let majors = step(report, tracker, "node facts", async {
        node_facts(&client, &chart_nodes, &mock).await
    })
    .await?;
    step(report, tracker, "install", async {
        let values = values(&mock, majors, &args.profile, &topology, &chart_selector)?;
        install_chart(
            &runner,
            &client,
            (context, workers.len()),
            &context_lock_name(context),
            &values,
        )
        .await
    })
    .await?;
    step(report, tracker, "workload", async {
        roll_workload(&client, &workload.to_string(), &workers).await
    })
    .await?;
    let pulls = crate::registry::pull_events(&client, registry, &[MOCK_NS, WORKLOAD_NS]).await?;
    report
        .notes
        .push(crate::registry::pulls_note(registry, &pulls));
    if run.mode == Mode::Up {
        return Ok(());
    }
    let target = Target {
        kind: None,
        registry: Some(registry.clone()),
        context: context.to_owned(),
        rebind: topology::rebind(&workers),
        workers,
        topology,
        layout: None,
        client,
    };
    for which in [Scenario::One, Scenario::Two, Scenario::Three] {
        run_scenario::<ShellRunner<'_>>(sh, &target, which, None, tracker, report).await?;
    }
    Ok(())
}

/// `inject --kube-context CTX`: the node checked against the context's
/// nodes, the injection through the API; the stager's report.
pub async fn inject_api(context: &str, args: &crate::flags::InjectArgs) -> anyhow::Result<String> {
    let client = k8s::client(context).await?;
    let nodes: Vec<String> = k8s::list_nodes(&client)
        .await?
        .iter()
        .map(kube::ResourceExt::name_any)
        .collect();
    crate::inject::check_listed(&nodes, context, &args.node)?;
    crate::inject::run_api(&client, &args.node, args.action()).await
}

/// Pushes both images; returns them as the nodes pull them.
async fn push_images(
    registry: &Registry,
    built: &super::common::ImagePair,
) -> anyhow::Result<(ImageRef, ImageRef)> {
    let (mock, workload) = (&built.mock, &built.workload);
    Ok((
        crate::registry::push_archive(registry, &mock.0, &mock.1).await?,
        crate::registry::push_archive(registry, &workload.0, &workload.1).await?,
    ))
}

/// Where the stack goes on a foreign cluster.
struct Chosen {
    /// The chart's `nodeSelector` (`--node-selector`; empty: every node).
    chart_selector: BTreeMap<String, String>,
    /// The nodes the chart stages.
    chart_nodes: Vec<String>,
    /// The workers among them.
    workers: Vec<String>,
}

/// The nodes the chart will stage and the workers among them, said with the
/// nodes left out and why; at least two workers.
async fn choose_nodes(
    client: &Client,
    context: &str,
    node_selector: Option<&str>,
) -> anyhow::Result<Chosen> {
    let chart_selector = chart_selector(node_selector)?;
    let placement = k8s::workload_placement(node_selector)?;
    let nodes = k8s::list_nodes(client).await?;
    let (chart_nodes, selection) =
        crate::workers::select_before_staging(&nodes, &chart_selector, &placement);
    eprintln!("    the chart stages: {}", chart_nodes.join(", "));
    eprintln!("    {}", selection.describe());
    anyhow::ensure!(
        selection.workers.len() >= 2,
        "context `{context}` has {} node(s) the workload can run on ({}); the scenarios need at least 2: \
         widen --node-selector, or untaint nodes",
        selection.workers.len(),
        selection.describe()
    );
    Ok(Chosen {
        chart_selector,
        chart_nodes,
        workers: selection.workers,
    })
}

/// Probes every chart node with the pushed mock image: NRI on, the majors free.
async fn node_facts(
    client: &Client,
    chart_nodes: &[String],
    mock: &ImageRef,
) -> anyhow::Result<plan::Majors> {
    let facts = crate::node_facts::gather(client, chart_nodes, &mock.to_string()).await?;
    for (node, it) in &facts {
        eprintln!("    {node}: NRI {}", it.nri);
    }
    let majors = crate::node_facts::conclude(&facts)?;
    eprintln!(
        "    IMEX device majors free on every node: channels={}, caps={}",
        majors.channel, majors.caps
    );
    Ok(majors)
}

/// The chart's values files: image, majors and GPU profile, the topology, and
/// the node selector when one was given.
fn values(
    mock: &ImageRef,
    majors: plan::Majors,
    profile: &str,
    topology: &topology::Topology,
    chart_selector: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    let mut values = vec![
        ("values.yaml", plan::install_values(mock, majors, profile)),
        ("demo-topology.yaml", topology.helm_values()),
    ];
    if !chart_selector.is_empty() {
        values.push(("node-selector.yaml", node_selector_values(chart_selector)?));
    }
    Ok(values)
}

/// `--node-selector key=value,…` as the chart's `nodeSelector` (empty: every node).
fn chart_selector(flag: Option<&str>) -> anyhow::Result<BTreeMap<String, String>> {
    match flag {
        Some(flag) => Ok(crate::workers::Placement::default()
            .narrowed(flag)
            .map_err(anyhow::Error::msg)?
            .node_selector),
        None => Ok(BTreeMap::new()),
    }
}

/// The chart values that confine both DaemonSets to the selected nodes.
fn node_selector_values(selector: &BTreeMap<String, String>) -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    struct Values<'a> {
        #[serde(rename = "nodeSelector")]
        node_selector: &'a BTreeMap<String, String>,
    }
    Ok(serde_yaml::to_string(&Values {
        node_selector: selector,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_selector_becomes_chart_values() {
        let selector = chart_selector(Some("pool=gpu,zone=a")).expect("valid");
        let yaml = node_selector_values(&selector).expect("yaml");
        let parsed: serde_yaml::Value = serde_yaml::from_str(&yaml).expect("parses");
        assert_eq!(parsed["nodeSelector"]["pool"], "gpu");
        assert_eq!(parsed["nodeSelector"]["zone"], "a");
        assert!(chart_selector(None).expect("none").is_empty());
        assert!(chart_selector(Some("pool")).is_err());
    }
}
