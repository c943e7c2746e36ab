//! `up` and `demo` on the kind cluster xtask creates or reuses.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use topology::Layout;
use xshell::Shell;

use crate::capacity::Checked;
use crate::flags::DemoArgs;
use crate::interrupt::Tracker;
use crate::k8s;
use crate::names::KindCluster;
use crate::plan;
use crate::report::{Outcome, Report, ScenarioResult};
use crate::runner::ShellRunner;
use crate::scenarios::Scenario;
use xtask_support::node_images::NodeImages;

use super::common::{images, install_chart, runner, step, version_note, ImagePair, Mode, Run};
use super::run::run_scenario;
use super::status::roll_workload;
use super::target::Target;

pub(super) async fn demo_inner(
    run: Run<'_>,
    cluster: &KindCluster,
    layout: Layout,
    report: &mut Report,
) -> anyhow::Result<()> {
    let (sh, args, tracker) = (run.sh, run.args, run.tracker);
    let runner = step(report, tracker, "engine and tools", async {
        crate::tools::ensure_host(sh, crate::tools::HostNeeds::kind(layout.workers()))?;
        runner(sh)
    })
    .await?;
    let node_image = node_image(sh, args, cluster, &runner, tracker, report).await?;
    let decision = step(report, tracker, "cluster", async {
        // Only an image the user chose (--node-image, --offline) must match a
        // reused cluster's; the online default reuses any compatible one.
        let asked = (args.node_image.is_some() || args.offline).then_some(&node_image);
        let config = kind_config_file(cluster, layout)?;
        crate::cluster::ensure(
            &runner,
            cluster,
            &config.to_string_lossy(),
            args.force_recreate,
            Some(&node_image),
            asked,
        )
    })
    .await?;
    report.notes.push(format!("cluster: {decision:?}"));
    if let Some(image) = crate::cluster::node_image_in_use(&runner, cluster) {
        report.notes.push(format!("the control plane runs {image}"));
    }
    let images = step(report, tracker, "images", async { images(sh, args) }).await?;
    step(report, tracker, "load images", async {
        load_images(&runner, cluster, &images)
    })
    .await?;
    let majors = step(report, tracker, "device majors", async {
        free_majors(&runner, cluster)
    })
    .await?;
    let client = k8s::kind_client(cluster).await?;
    step(report, tracker, "nodes ready", async {
        let limit = crate::scenarios::scaled(Duration::from_secs(300), cluster.worker_count());
        k8s::wait_nodes_ready(&client, &cluster.nodes(), limit).await?;
        same_layout(&client, cluster, layout).await
    })
    .await?;
    report.notes.push(version_note(&client).await);
    step(report, tracker, "install", async {
        let values = chart_values(
            &images,
            majors,
            &layout.demo(&cluster.workers()),
            (&args.profile, args.imex.is_some()),
        );
        install_chart(
            &runner,
            &client,
            (&cluster.context(), cluster.worker_count()),
            cluster.name(),
            &values,
        )
        .await
    })
    .await?;
    step(report, tracker, "workload", async {
        roll_workload(&client, &images.workload.1.to_string(), &cluster.workers()).await
    })
    .await?;
    if run.mode == Mode::Up {
        return Ok(());
    }
    let target = Target::kind(cluster, layout, client);
    scenarios(sh, args, &target, &runner, tracker, report).await?;
    network_policy(&target, &images.workload.1.to_string(), tracker, report).await;
    Ok(())
}

/// Every scenario `--scenarios` asks for, in order; the others reported as skipped, not asked
/// for.
async fn scenarios(
    sh: &Shell,
    args: &DemoArgs,
    target: &Target,
    runner: &ShellRunner<'_>,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    for which in Scenario::ALL {
        if args.asks_for(which) {
            run_scenario(sh, target, which, Some(runner), tracker, report).await?;
        } else {
            let name = format!("scenario{}", which.number());
            let reason = "not asked for (--scenarios)".to_owned();
            eprintln!("    - {name} SKIPPED: {reason}");
            report.scenario(ScenarioResult::new(&name, Outcome::Skipped(reason), 0.0));
        }
    }
    Ok(())
}

/// Refuses, before anything is built or created, a cluster whose nodes do
/// not fit in the free disk under Docker's data root or the available memory
/// (`crate::capacity`); a reused cluster creates nothing and is not checked.
fn check_room(
    runner: &ShellRunner<'_>,
    cluster: &KindCluster,
    args: &DemoArgs,
) -> anyhow::Result<()> {
    if args.no_room_check {
        eprintln!("    not checked (--no-room-check)");
        return Ok(());
    }
    let costs = crate::capacity::costs_of_run(args.offline, args.node_image.as_deref());
    match crate::capacity::check(runner, cluster, costs, args.force_recreate)? {
        Checked::Reused => eprintln!("    the cluster exists: nothing new to make room for"),
        Checked::Unknown(err) => {
            eprintln!("    ! cannot check the free disk and memory, going on: {err}")
        }
        Checked::Fits(room) => eprintln!("    {}", room.summary()),
    }
    Ok(())
}

/// The node images the cluster is created with: `--node-image` on every
/// node, the offline pair (`--offline`: the full image on the control plane,
/// its worker variant on the workers), or the online pin on every node; said
/// in the report.
///
/// The room check runs first, before anything is built.
async fn node_image(
    sh: &Shell,
    args: &DemoArgs,
    cluster: &KindCluster,
    runner: &ShellRunner<'_>,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<NodeImages> {
    step(report, tracker, "room", async {
        check_room(runner, cluster, args)
    })
    .await?;
    let node_image = match (&args.node_image, args.offline) {
        (Some(image), _) => NodeImages::uniform(image),
        (None, true) => {
            step(report, tracker, "node image", async {
                crate::node_image::ensure_node_images(sh, false)
            })
            .await?
        }
        (None, false) => {
            let pinned = crate::cluster::online_pin(&crate::tools::read_versions()?)?;
            let online = crate::cluster::online_image(runner, &pinned);
            eprintln!("    {}", online.note());
            report.notes.push(online.note());
            NodeImages::uniform(online.kind_image())
        }
    };
    match (&args.node_image, args.offline) {
        (Some(image), _) => report
            .notes
            .push(format!("node image: {image} (--node-image)")),
        (None, true) => report.notes.push(format!(
            "node image: {} on the control plane, {} on the workers (--offline: built locally from pinned sources)",
            node_image.control_plane, node_image.worker
        )),
        _ => {}
    }
    Ok(node_image)
}

/// The chart's values files: the loaded mock image, the majors, the GPU
/// profile, the demo topology and, with `--imex`, the driver root's
/// nvidia-imex from the workload image built with it.
fn chart_values(
    images: &ImagePair,
    majors: plan::Majors,
    demo: &topology::Topology,
    (profile, imex): (&str, bool),
) -> Vec<(&'static str, String)> {
    let mut files = vec![
        (
            "values.yaml",
            plan::install_values(&images.mock.1, majors, profile),
        ),
        ("demo-topology.yaml", demo.helm_values()),
    ];
    if imex {
        files.push((
            "imex-driver-root.yaml",
            plan::imex_driver_root_values(&images.workload.1),
        ));
    }
    files
}

/// The kind config for `layout` (the template's patches, a worker per tray),
/// written into the cluster's scratch directory.
fn kind_config_file(cluster: &KindCluster, layout: Layout) -> anyhow::Result<PathBuf> {
    let template = crate::project_root().join(crate::names::KIND_CONFIG);
    let text = std::fs::read_to_string(&template)
        .with_context(|| format!("reading {}", template.display()))?;
    let config = crate::kind_config::render(&text, layout)
        .with_context(|| format!("{}", template.display()))?;
    let path = super::common::scratch_dir(cluster.name())?.join("kind-config.yaml");
    std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// A reused cluster must be laid out as asked: its workers' rack and clique
/// labels are the layout it was created for.
async fn same_layout(
    client: &kube::Client,
    cluster: &KindCluster,
    layout: Layout,
) -> anyhow::Result<()> {
    let found = k8s::kind_layout(client, cluster).await?;
    if found != layout {
        anyhow::bail!(
            "{}",
            plan::rejection(
                cluster.name(),
                "is laid out otherwise",
                &[format!(
                    "its workers are labelled {found}, this run asks for {layout}: pass the flags it was \
                     created with, or recreate it"
                )]
            )
        );
    }
    Ok(())
}

/// Loads both images into every node that lacks them.
fn load_images(
    runner: &ShellRunner<'_>,
    cluster: &KindCluster,
    images: &ImagePair,
) -> anyhow::Result<()> {
    for (archive, image) in [&images.mock, &images.workload] {
        crate::cluster::load_image_said(runner, cluster, archive, &image.to_string())?;
    }
    Ok(())
}

/// The IMEX device majors free on every node, read through `docker exec`
/// (kind's fast path; other clusters use probe pods, `node_facts.rs`).
fn free_majors(runner: &ShellRunner<'_>, cluster: &KindCluster) -> anyhow::Result<plan::Majors> {
    let texts = crate::cluster::proc_devices(runner, cluster)?;
    let majors = plan::free_majors(&texts.iter().map(String::as_str).collect::<Vec<_>>())?;
    eprintln!(
        "    IMEX device majors: channels={}, caps={}",
        majors.channel, majors.caps
    );
    Ok(majors)
}

/// The NetworkPolicy probe after the scenarios: its verdict is a report note.
async fn network_policy(
    target: &Target,
    workload_image: &str,
    tracker: &Tracker,
    report: &mut Report,
) {
    let checked = step(
        report,
        tracker,
        "network policy",
        crate::netpol::check(&target.client, &target.workers, workload_image),
    )
    .await;
    match checked {
        Ok(note) => {
            eprintln!("    {note}");
            report.notes.push(format!("network policy: {note}"));
        }
        Err(err) => report.notes.push(format!("network policy: {err:#}")),
    }
}

pub(super) fn print_summary(report: &Report, cluster: &KindCluster, cluster_up: bool) {
    eprintln!("\n==> summary ({:.1}s)", report.total_seconds);
    for step in &report.steps {
        eprintln!(
            "    {:<18} {:>7.1}s  {}",
            step.name,
            step.seconds,
            step.status.label()
        );
    }
    for scenario in &report.scenarios {
        eprintln!(
            "    {:<18} {:>7.1}s  {}",
            scenario.name,
            scenario.seconds,
            scenario.outcome.label()
        );
    }
    for note in &report.notes {
        eprintln!("    {note}");
    }
    if cluster_up {
        eprintln!(
            "    the cluster stays up: rerun any scenario with `cargo xtask scenario1|2|3|4|5`; tear down with `cargo xtask down --cluster-name {}`",
            cluster.name()
        );
    }
    eprintln!("    {}", report.verdict_line());
}
