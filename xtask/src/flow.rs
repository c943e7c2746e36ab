//! The commands that act on a cluster: `demo`, `up`, `scenario1..3`, `down`,
//! `status`. Each takes the runner lock, times its steps into the report,
//! and leaves the cluster in a state the next run can reuse.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use tokio::time::Instant;
use xshell::Shell;

use crate::fabric::Expected;
use crate::flags::{ClusterArgs, DemoArgs, DownArgs, ScenarioArgs};
use crate::interrupt::Tracker;
use crate::k8s::{self, ExecOutput, PodInfo};
use crate::lock::RunnerLock;
use crate::names::{
    self, KindCluster, CHART, MOCK_NS, NRI_DS, STAGER_DS, WORKLOAD_DS, WORKLOAD_NS,
    WORKLOAD_SELECTOR,
};
use crate::plan::{self, ImageRef};
use crate::report::{Outcome, Report, StepStatus, Verdict};
use crate::runner::{Cmd, Runner, ShellRunner};
use crate::scenarios::{self, Limits, Rebind, Workload};

mod foreign;

/// How long a DaemonSet may take to roll out.
const ROLLOUT: Duration = Duration::from_secs(180);

/// The demo workload pods, through kube-rs.
pub struct KubeWorkload {
    client: Client,
}

impl KubeWorkload {
    /// Workload access through this client.
    pub fn new(client: Client) -> KubeWorkload {
        KubeWorkload { client }
    }
}

impl Workload for KubeWorkload {
    async fn pod_on_node(&self, node: &str) -> anyhow::Result<PodInfo> {
        k8s::pod_on_node(&self.client, node, Duration::from_secs(120)).await
    }

    async fn exec(&self, pod: &str, argv: &[&str]) -> anyhow::Result<ExecOutput> {
        k8s::exec(&self.client, pod, argv, Duration::from_secs(60)).await
    }

    async fn pod_uids(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let mut uids = k8s::pod_uids(&self.client, WORKLOAD_NS, WORKLOAD_SELECTOR).await?;
        uids.extend(
            k8s::pod_uids(&self.client, MOCK_NS, "app.kubernetes.io/name=nvml-mock").await?,
        );
        uids.extend(
            k8s::pod_uids(
                &self.client,
                MOCK_NS,
                "app.kubernetes.io/name=nvml-mock-nri",
            )
            .await?,
        );
        Ok(uids)
    }
}

/// What the scenarios run against.
struct Target {
    /// The kind cluster, unless `--kube-context` was given.
    kind: Option<KindCluster>,
    /// The kube context.
    context: String,
    /// The workers, in topology order.
    workers: Vec<String>,
    /// The topology staged on them (the demo topology unless `--topology`).
    topology: topology::Topology,
    client: Client,
}

impl Target {
    fn label(&self) -> String {
        match &self.kind {
            Some(cluster) => format!("kind cluster {}", cluster.name()),
            None => format!("context {}", self.context),
        }
    }

    /// What each worker the topology names reports under it.
    fn demo_expected(&self) -> Vec<(String, Expected)> {
        let topology = &self.topology;
        self.workers
            .iter()
            .filter_map(|node| {
                topology.resolve(node).map(|identity| {
                    (
                        node.clone(),
                        Expected {
                            clique: identity.clique_id,
                            uuid: identity.cluster_uuid.to_string(),
                        },
                    )
                })
            })
            .collect()
    }
}

async fn target(args: &ClusterArgs) -> anyhow::Result<Target> {
    match &args.kube_context {
        Some(context) => {
            let client = k8s::client(context).await?;
            let selection = k8s::select_workers(&client, args.node_selector.as_deref()).await?;
            eprintln!("    {}", selection.describe());
            if selection.workers.len() < 2 {
                anyhow::bail!(
                    "context `{context}` has {} node(s) the workload can run on ({}); the scenarios need at least 2 staged workers: \
                     install the chart (the stager labels its nodes nvidia.com/gpu.present=true) or widen --node-selector",
                    selection.workers.len(),
                    selection.describe()
                );
            }
            let topology = chosen_topology(args.topology.as_deref(), &selection.workers)?;
            Ok(Target {
                kind: None,
                context: context.clone(),
                workers: selection.workers,
                topology,
                client,
            })
        }
        None => {
            let cluster = KindCluster::new(&args.cluster_name)?;
            let context = cluster.context();
            let client = k8s::client(&context).await?;
            Ok(Target {
                workers: cluster.workers(),
                topology: topology::demo(&cluster.workers()),
                kind: Some(cluster),
                context,
                client,
            })
        }
    }
}

/// The topology staged on a `--kube-context` cluster: `--topology FILE`,
/// else the demo topology generated for the workers. Says which workers the
/// file leaves out (they get the profile defaults and are not checked).
fn chosen_topology(file: Option<&Path>, workers: &[String]) -> anyhow::Result<topology::Topology> {
    let Some(path) = file else {
        return Ok(topology::demo(workers));
    };
    let yaml = std::fs::read_to_string(path)
        .with_context(|| format!("reading --topology {}", path.display()))?;
    let topology = topology::parse(&yaml)
        .map_err(|err| anyhow::anyhow!("--topology {}: {err}: fix that entry", path.display()))?;
    let cover = crate::workers::coverage(&topology, workers);
    anyhow::ensure!(
        !cover.named.is_empty(),
        "--topology {} names none of the workers ({}): list them under domains[].cliques[].nodes",
        path.display(),
        workers.join(", ")
    );
    eprintln!(
        "    topology {}: workers {}",
        path.display(),
        cover.named.join(", ")
    );
    if !cover.unnamed.is_empty() {
        eprintln!(
            "    not in the topology (profile defaults, not checked): {}",
            cover.unnamed.join(", ")
        );
    }
    if !cover.strangers.is_empty() {
        eprintln!(
            "    in the topology but not workers (not checked): {}",
            cover.strangers.join(", ")
        );
    }
    Ok(topology)
}

/// The first two workers (in worker order) that share a clique.
fn first_shared_clique(expected: &[(String, Expected)]) -> Option<[&str; 2]> {
    expected.iter().enumerate().find_map(|(at, (first, it))| {
        expected[at + 1..]
            .iter()
            .find(|(_, other)| other.clique == it.clique && other.uuid == it.uuid)
            .map(|(second, _)| [first.as_str(), second.as_str()])
    })
}

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

fn runner(sh: &Shell) -> anyhow::Result<ShellRunner<'_>> {
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
        let xml = report.write(path)?;
        eprintln!("    report: {} and {}", path.display(), xml.display());
    }
    Ok(())
}

/// `demo` (`scenarios = true`) and `up`.
pub async fn demo(
    sh: &Shell,
    args: &DemoArgs,
    with_scenarios: bool,
    tracker: &Tracker,
) -> anyhow::Result<()> {
    if args.cluster.kube_context.is_some() {
        return foreign::demo(sh, args, with_scenarios, tracker).await;
    }
    let cluster = KindCluster::new(&args.cluster.cluster_name)?;
    let _lock = take_lock(cluster.name())?;
    let started = Instant::now();
    let mut report = Report {
        command: command_line(),
        cluster: cluster.name().to_owned(),
        ..Report::default()
    };
    let res = demo_inner(sh, args, &cluster, with_scenarios, tracker, &mut report).await;
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

async fn demo_inner(
    sh: &Shell,
    args: &DemoArgs,
    cluster: &KindCluster,
    with_scenarios: bool,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    let runner = step(report, tracker, "engine and tools", async {
        crate::tools::ensure_host(sh, true)?;
        runner(sh)
    })
    .await?;
    let node_image = match (&args.node_image, args.offline) {
        (Some(image), _) => Some(image.clone()),
        (None, true) => Some(
            step(report, tracker, "node image", async {
                crate::node_image::ensure_node_image(sh, false)
            })
            .await?,
        ),
        (None, false) => {
            let pinned = crate::cluster::online_pin(&crate::tools::read_versions()?)?;
            let online = crate::cluster::online_image(&runner, &pinned);
            eprintln!("    {}", online.note());
            report.notes.push(online.note());
            Some(online.kind_image().to_owned())
        }
    };
    match (&args.node_image, args.offline, &node_image) {
        (Some(image), _, _) => report
            .notes
            .push(format!("node image: {image} (--node-image)")),
        (None, true, Some(image)) => report.notes.push(format!(
            "node image: {image} (--offline: built locally from pinned sources)"
        )),
        _ => {}
    }
    let decision = step(report, tracker, "cluster", async {
        // Only an image the user chose (--node-image, --offline) must match a
        // reused cluster's; the online default reuses any compatible one.
        let asked = (args.node_image.is_some() || args.offline).then_some(node_image.as_deref());
        crate::cluster::ensure(
            &runner,
            cluster,
            args.force_recreate,
            node_image.as_deref(),
            asked.flatten(),
        )
    })
    .await?;
    report.notes.push(format!("cluster: {decision:?}"));
    if let Some(image) = crate::cluster::node_image_in_use(&runner, cluster) {
        report.notes.push(format!("nodes run {image}"));
    }
    let images = step(report, tracker, "images", async { images(sh, args) }).await?;
    step(report, tracker, "load images", async {
        for (archive, image) in [&images.mock, &images.workload] {
            let loaded = crate::cluster::load_image(&runner, cluster, archive, &image.to_string())?;
            match loaded.is_empty() {
                true => eprintln!("    {image}: already on every node"),
                false => eprintln!("    {image}: loaded into {}", loaded.join(", ")),
            }
        }
        Ok(())
    })
    .await?;
    let majors = step(report, tracker, "device majors", async {
        let majors = plan::choose_majors(&crate::cluster::used_majors(&runner, cluster)?)?;
        eprintln!(
            "    IMEX device majors: channels={}, caps={}",
            majors.channel, majors.caps
        );
        Ok(majors)
    })
    .await?;
    let client = k8s::client(&cluster.context()).await?;
    step(report, tracker, "nodes ready", async {
        k8s::wait_nodes_ready(&client, &cluster.nodes(), Duration::from_secs(300)).await
    })
    .await?;
    report.notes.push(version_note(&client).await);
    step(report, tracker, "install", async {
        let values = [
            ("values.yaml", plan::install_values(&images.mock.1, majors)),
            (
                "demo-topology.yaml",
                topology::demo(&cluster.workers()).helm_values(),
            ),
        ];
        install_chart(
            &runner,
            &client,
            &cluster.context(),
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
    if !with_scenarios {
        return Ok(());
    }
    let target = Target {
        kind: Some(cluster.clone()),
        context: cluster.context(),
        workers: cluster.workers(),
        topology: topology::demo(&cluster.workers()),
        client,
    };
    for which in [1, 2, 3, 4] {
        run_scenario(sh, &target, which, Some(&runner), tracker, report).await?;
    }
    let workload_image = images.workload.1.to_string();
    let checked = step(
        report,
        tracker,
        "network policy",
        crate::netpol::check(&target.client, &target.workers, &workload_image),
    )
    .await;
    match checked {
        Ok(note) => {
            eprintln!("    {note}");
            report.notes.push(format!("network policy: {note}"));
        }
        Err(err) => report.notes.push(format!("network policy: {err:#}")),
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
    context: &str,
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
    runner.check(&Cmd::new("helm", &args))?;
    k8s::wait_daemonset(
        client,
        MOCK_NS,
        STAGER_DS,
        "app.kubernetes.io/name=nvml-mock",
        ROLLOUT,
    )
    .await?;
    k8s::wait_daemonset(
        client,
        MOCK_NS,
        NRI_DS,
        "app.kubernetes.io/name=nvml-mock-nri",
        ROLLOUT,
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
    k8s::wait_daemonset(client, WORKLOAD_NS, WORKLOAD_DS, WORKLOAD_SELECTOR, ROLLOUT).await?;
    heal_workload(client, workers).await.map(|_| ())
}

/// `scenario2 --imex PATH`: builds the workload image with the payload (its
/// tag follows its content, so an unchanged payload gives the same image and
/// the load is skipped), loads it into the kind cluster and rolls the
/// workload onto it.
async fn install_payload(
    sh: &Shell,
    args: &ScenarioArgs,
    payload: &Path,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    if args.cluster.kube_context.is_some() {
        anyhow::bail!(
            "--imex builds and loads the workload image into the kind cluster, which --kube-context \
             does not name: build it with `cargo xtask images --imex {}`, load it into your \
             cluster, and rerun without --imex",
            payload.display()
        );
    }
    let payload =
        std::path::absolute(payload).with_context(|| format!("resolving {}", payload.display()))?;
    let identity = crate::images::payload_identity(&payload)?;
    eprintln!("    payload: {}", crate::images::describe(&identity));
    report.imex_payload = Some(identity);
    let cluster = KindCluster::new(&args.cluster.cluster_name)?;
    let built = step(report, tracker, "images", async {
        crate::images::build_all(
            sh,
            &crate::dirs::images_dir()?,
            Some(&payload),
            crate::images::CargoProfile::Release,
        )
    })
    .await?;
    let reference = built.workload.reference.clone();
    step(report, tracker, "load images", async {
        let loaded =
            crate::cluster::load_image(&runner(sh)?, &cluster, &built.workload.path, &reference)?;
        match loaded.is_empty() {
            true => eprintln!("    {reference}: already on every node"),
            false => eprintln!("    {reference}: loaded into {}", loaded.join(", ")),
        }
        Ok(())
    })
    .await?;
    let client = k8s::client(&cluster.context()).await?;
    step(report, tracker, "workload", async {
        roll_workload(&client, &reference, &cluster.workers()).await
    })
    .await
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
    which: u8,
    runner: Option<&R>,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    let name = format!("scenario{which}");
    eprintln!("\n==> {name} on {}", target.label());
    tracker.step(&name);
    if which == 4 {
        return run_scenario4(sh, target, runner, tracker, report).await;
    }
    let workload = KubeWorkload {
        client: target.client.clone(),
    };
    let result = match which {
        1 => scenarios::scenario1(&workload, &target.demo_expected()).await,
        2 => {
            let expected = target.demo_expected();
            let Some(pair) = first_shared_clique(&expected) else {
                anyhow::bail!(
                    "scenario 2 needs two workers in one clique; the topology puts them so: {:?}",
                    expected
                        .iter()
                        .map(|(node, it)| format!("{node}: clique {}", it.clique))
                        .collect::<Vec<_>>()
                );
            };
            scenarios::scenario2(&workload, pair, tracker, Limits::default()).await
        }
        _ => {
            let rebind = Rebind {
                chart: CHART.to_owned(),
                context: target.context.clone(),
                rebind_values: topology::rebind(&target.workers).helm_values(),
                demo_values: target.topology.helm_values(),
                demo_expected: target.demo_expected(),
            };
            let scratch = scratch_dir(&target.context)?;
            match runner {
                Some(runner) => {
                    scenarios::scenario3(
                        &workload,
                        runner,
                        &rebind,
                        &scratch,
                        tracker,
                        Limits::default(),
                    )
                    .await
                }
                None => {
                    let runner = self::runner(sh)?;
                    scenarios::scenario3(
                        &workload,
                        &runner,
                        &rebind,
                        &scratch,
                        tracker,
                        Limits::default(),
                    )
                    .await
                }
            }
        }
    };
    let mut result = result;
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

/// Scenario 4 (NVIDIA's DRA driver): its result and the SKIPPED IMEX part.
async fn run_scenario4<R: Runner>(
    sh: &Shell,
    target: &Target,
    runner: Option<&R>,
    tracker: &Tracker,
    report: &mut Report,
) -> anyhow::Result<()> {
    let Some(cluster) = &target.kind else {
        anyhow::bail!(
            "scenario 4 loads NVIDIA's DRA driver image with `kind load`: run it on the kind cluster (without --kube-context)"
        );
    };
    let started = Instant::now();
    let results = match runner {
        Some(runner) => crate::scenario4::run(sh, runner, cluster, &target.client, tracker).await,
        None => {
            let runner = self::runner(sh)?;
            crate::scenario4::run(sh, &runner, cluster, &target.client, tracker).await
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
    Ok(())
}

/// `scenario1` … `scenario4` against a running setup.
pub async fn scenario(
    sh: &Shell,
    which: u8,
    args: &ScenarioArgs,
    tracker: &Tracker,
) -> anyhow::Result<()> {
    let lock_name = match &args.cluster.kube_context {
        Some(context) => context_lock_name(context),
        None => KindCluster::new(&args.cluster.cluster_name)?
            .name()
            .to_owned(),
    };
    if let (2, Some(payload)) = (which, &args.imex) {
        // A bad payload is named before anything touches the cluster.
        let payload = std::path::absolute(payload)
            .with_context(|| format!("resolving {}", payload.display()))?;
        crate::images::payload_identity(&payload)?;
    }
    let _lock = take_lock(&lock_name)?;
    let started = Instant::now();
    if args.cluster.kube_context.is_none() {
        let cluster = KindCluster::new(&args.cluster.cluster_name)?;
        crate::tools::ensure_engine(sh)?;
        crate::cluster::preflight(&docker_only(sh), &cluster)?;
    }
    let mut report = Report {
        command: command_line(),
        ..Report::default()
    };
    if let (2, Some(payload)) = (which, &args.imex) {
        if let Err(err) = install_payload(sh, args, payload, tracker, &mut report).await {
            finish_report(&mut report, started, args.report.as_deref())?;
            return Err(err);
        }
    }
    let target = target(&args.cluster).await?;
    report.cluster = target.label();
    let res = run_scenario::<ShellRunner<'_>>(sh, &target, which, None, tracker, &mut report).await;
    finish_report(&mut report, started, args.report.as_deref())?;
    res?;
    if report.failed() {
        anyhow::bail!("{}", report.verdict_line());
    }
    Ok(())
}

fn print_summary(report: &Report, cluster: &KindCluster, cluster_up: bool) {
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
            "    the cluster stays up: rerun any scenario with `cargo xtask scenario1|2|3|4`; tear down with `cargo xtask down --cluster-name {}`",
            cluster.name()
        );
    }
    eprintln!("    {}", report.verdict_line());
}

/// `down`: delete the cluster (and the image archives with `--images`).
pub fn down(sh: &Shell, args: &DownArgs) -> anyhow::Result<()> {
    let cluster = KindCluster::new(&args.cluster.cluster_name)?;
    let _lock = take_lock(cluster.name())?;
    let runner = runner(sh)?;
    if crate::cluster::exists(&runner, &cluster)? {
        runner.check(&Cmd::new(
            "kind",
            &["delete", "cluster", "--name", cluster.name()],
        ))?;
        eprintln!("    deleted cluster {}", cluster.name());
    } else {
        eprintln!("    no cluster {}", cluster.name());
    }
    if args.images {
        let dir = crate::dirs::images_dir()?;
        for (path, image) in crate::archive::scan(&dir).unwrap_or_default() {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            eprintln!("    removed {image} ({})", path.display());
        }
        let listed = runner.run(&Cmd::new(
            "docker",
            &["images", "-q", "--filter", "reference=nvml-mock*"],
        ))?;
        for id in listed.stdout.split_whitespace() {
            let _ = runner.run(&Cmd::new("docker", &["rmi", "-f", id]));
        }
    }
    Ok(())
}

/// `status`: nodes, release and rollouts.
pub async fn status(sh: &Shell, args: &ClusterArgs) -> anyhow::Result<()> {
    if args.kube_context.is_none() {
        let cluster = KindCluster::new(&args.cluster_name)?;
        for (node, state) in crate::cluster::node_states(&docker_only(sh), &cluster)? {
            println!("node {node}: {state}");
        }
    }
    let (context, workers) = match &args.kube_context {
        Some(context) => (context.clone(), Vec::new()),
        None => {
            let cluster = KindCluster::new(&args.cluster_name)?;
            (cluster.context(), cluster.workers())
        }
    };
    let client = k8s::client(&context).await?;
    let workers = if workers.is_empty() {
        let selection = k8s::select_workers(&client, args.node_selector.as_deref()).await?;
        eprintln!("    {}", selection.describe());
        selection.workers
    } else {
        workers
    };
    let target = Target {
        kind: None,
        context,
        topology: topology::demo(&workers),
        workers,
        client,
    };
    for (ns, ds) in [
        (MOCK_NS, STAGER_DS),
        (MOCK_NS, NRI_DS),
        (WORKLOAD_NS, WORKLOAD_DS),
    ] {
        let api: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> =
            kube::Api::namespaced(target.client.clone(), ns);
        let state = match api.get_opt(ds).await {
            Ok(Some(it)) => match k8s::daemonset_progress(&it) {
                Ok(()) => "rolled out".to_owned(),
                Err(progress) => progress,
            },
            Ok(None) => "not deployed".to_owned(),
            Err(err) => format!("unknown: {err}"),
        };
        println!("daemonset {ns}/{ds}: {state}");
    }
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(target.client.clone(), WORKLOAD_NS);
    let listed = pods
        .list(&kube::api::ListParams::default().labels(WORKLOAD_SELECTOR))
        .await
        .map(|list| list.items)
        .unwrap_or_default();
    for node in &target.workers {
        let on_node = listed.iter().find(|pod| {
            pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) == Some(node.as_str())
        });
        let state = match on_node {
            Some(pod) if k8s::usable_pod(pod).is_some() => {
                format!("workload pod {} ready", kube::ResourceExt::name_any(pod))
            }
            Some(pod) => format!(
                "workload pod {} not ready",
                kube::ResourceExt::name_any(pod)
            ),
            None => "no workload pod".to_owned(),
        };
        println!("worker {node}: {state}");
    }
    Ok(())
}

/// A runner for docker only (kind and helm are not resolved).
fn docker_only(sh: &Shell) -> ShellRunner<'_> {
    ShellRunner::new(sh, PathBuf::from("kind"), PathBuf::from("helm"))
}

/// How often a pod is checked (and recreated) before giving up.
const MAX_HEAL: u64 = 5;

/// Workload pods created while their node's NRI plugin was not registered (a
/// node restart, an interrupted run) lack the injection: they are recreated,
/// once the node's plugin is ready. Returns the nodes whose pod was recreated.
pub async fn heal_workload(client: &Client, workers: &[String]) -> anyhow::Result<Vec<String>> {
    let limit = Duration::from_secs(180);
    let mut healed = Vec::new();
    for node in workers {
        for attempt in 1..=MAX_HEAL {
            k8s::pod_on_node_in(
                client,
                MOCK_NS,
                "app.kubernetes.io/name=nvml-mock-nri",
                node,
                limit,
            )
            .await?;
            let pod = k8s::pod_on_node(client, node, limit).await?;
            let out = k8s::exec(
                client,
                &pod.name,
                &["test", "-c", names::CHANNEL0],
                Duration::from_secs(30),
            )
            .await?;
            if out.code == 0 {
                break;
            }
            if attempt == MAX_HEAL {
                anyhow::bail!(
                    "the workload pod on {node} still lacks the NRI injection after {} recreations: check the plugin's log \
                     (`cargo xtask status`, pods of daemonset {MOCK_NS}/{NRI_DS})",
                    MAX_HEAL - 1
                );
            }
            eprintln!(
                "    {node}: pod {} lacks the NRI injection (created before the plugin registered); recreating it",
                pod.name
            );
            k8s::delete_pod(client, WORKLOAD_NS, &pod.name).await?;
            if !healed.contains(node) {
                healed.push(node.clone());
            }
            // A restarted node's plugin may still be registering: back off.
            tokio::time::sleep(Duration::from_secs(5 * attempt)).await;
        }
    }
    Ok(healed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario2_takes_the_first_two_workers_sharing_a_clique() {
        let at = |clique: u32, uuid: &str| Expected {
            clique,
            uuid: uuid.to_owned(),
        };
        let expected = vec![
            ("w1".to_owned(), at(7, "u")),
            ("w2".to_owned(), at(3, "u")),
            ("w3".to_owned(), at(7, "v")),
            ("w4".to_owned(), at(3, "u")),
        ];
        assert_eq!(first_shared_clique(&expected), Some(["w2", "w4"]));
        assert_eq!(first_shared_clique(&expected[..3]), None);
    }
}
