//! `up` and `demo` on a cluster xtask did not create: `--kube-context CTX
//! --registry HOST[:PORT][/PREFIX]`. Nothing here uses kind or docker: the
//! images go to the registry through the OCI distribution API, the nodes'
//! facts (NRI, device majors) come from probe pods, and the nodes pull the
//! images themselves, which the pull events show.

use std::collections::BTreeMap;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use kube::Client;
use tokio::time::Instant;

use super::{
    context_lock_name, finish_report, images, install_chart, roll_workload, run_scenario, step,
    take_lock, Mode, Run, Target,
};
use crate::k8s;
use crate::names::{MOCK_NS, WORKLOAD_NS};
use crate::plan::{self, ImageRef};
use crate::registry::{Layout, Registry};
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
    let Some(value) = args.registry.as_deref() else {
        anyhow::bail!(
            "`up --kube-context {context}` needs --registry HOST[:PORT][/PREFIX]: a cluster that is not kind pulls \
             the mock and workload images from a registry its nodes can reach (README.md, \"On your own cluster\")"
        );
    };
    let registry = Registry::parse(value, args.plain_http).map_err(anyhow::Error::msg)?;
    let _lock = take_lock(&context_lock_name(context))?;
    let started = Instant::now();
    let mut report = Report {
        command: super::command_line(),
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
    let runner = step(report, tracker, "tools", async {
        let helm = crate::tools::ensure_tool(sh, crate::tools::Tool::Helm)?;
        // kind is never run on this path.
        Ok(ShellRunner::new(sh, "kind".into(), helm))
    })
    .await?;
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
    let topology = super::chosen_topology(args.cluster.topology.as_deref(), &workers)?;
    report.notes.push(super::version_note(&client).await);
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
    let pulls = pull_events(&client, registry).await?;
    report.notes.push(pulls_note(registry, &pulls));
    if run.mode == Mode::Up {
        return Ok(());
    }
    let target = Target {
        kind: None,
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

/// Pushes both images; returns them as the nodes pull them.
async fn push_images(
    registry: &Registry,
    built: &super::ImagePair,
) -> anyhow::Result<(ImageRef, ImageRef)> {
    let (mock, workload) = (
        registry.image(&built.mock.1),
        registry.image(&built.workload.1),
    );
    for ((archive, _), image) in [(&built.mock, &mock), (&built.workload, &workload)] {
        let layout = Layout::read(archive)?;
        let pushed = crate::registry::push(registry, &layout, image).await?;
        eprintln!(
            "    {image}: {} blob(s) sent ({:.1} MB), {} already there",
            pushed.sent,
            pushed.bytes as f64 / 1e6,
            pushed.present
        );
    }
    Ok((mock, workload))
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

/// The kubelets' `Pulled` events (and `Failed` pulls) for images of
/// `registry`, in the chart's and the workload's namespaces: proof that the
/// nodes pulled from the registry.
async fn pull_events(client: &Client, registry: &Registry) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    for ns in [MOCK_NS, WORKLOAD_NS] {
        let api: Api<Event> = Api::namespaced(client.clone(), ns);
        let events = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing events in {ns}"))?;
        lines.extend(pull_lines(&events.items, &registry.host));
    }
    eprintln!("    pull events from {registry}:");
    for line in &lines {
        eprintln!("      {line}");
    }
    Ok(lines)
}

/// The report's note of the pulls: proof the nodes pulled from the registry.
fn pulls_note(registry: &Registry, pulls: &[String]) -> String {
    let pulls = if pulls.is_empty() {
        "none".to_owned()
    } else {
        pulls.join(" | ")
    };
    format!("pull events from {registry}: {pulls}")
}

/// `node pod: message` for every pull event naming `host`, oldest first.
fn pull_lines(events: &[Event], host: &str) -> Vec<String> {
    let mut pulls: Vec<&Event> = events
        .iter()
        .filter(|it| matches!(it.reason.as_deref(), Some("Pulled" | "Failed")))
        .filter(|it| it.message.as_deref().unwrap_or_default().contains(host))
        .collect();
    pulls.sort_by_key(|it| it.last_timestamp.clone().map(|time| time.0));
    pulls
        .iter()
        .map(|it| {
            let node = it
                .source
                .as_ref()
                .and_then(|s| s.host.clone())
                .unwrap_or_default();
            let pod = it.involved_object.name.clone().unwrap_or_default();
            format!("{node} {pod}: {}", it.message.clone().unwrap_or_default())
        })
        .collect()
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

    #[test]
    fn only_pulls_from_the_registry_are_listed() {
        let event = |reason: &str, message: &str, pod: &str| -> Event {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": format!("{pod}.1") },
                "involvedObject": { "kind": "Pod", "name": pod },
                "reason": reason,
                "message": message,
                "source": { "host": "w1" },
            }))
            .expect("event")
        };
        let events = [
            event(
                "Pulled",
                "Successfully pulled image \"172.18.0.1:5000/nvml-mock:abc\" in 1.2s",
                "stager-x",
            ),
            event(
                "Pulled",
                "Container image \"nvml-mock:abc\" already present on machine",
                "old",
            ),
            event(
                "Scheduled",
                "172.18.0.1:5000 mentioned but not a pull",
                "other",
            ),
        ];
        let lines = pull_lines(&events, "172.18.0.1:5000");
        assert_eq!(
            lines,
            ["w1 stager-x: Successfully pulled image \"172.18.0.1:5000/nvml-mock:abc\" in 1.2s"]
        );
    }
}
