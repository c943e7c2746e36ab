//! `nvml-mock-stager`: stages the mock driver tree on a node and keeps the topology live.
//!
//! The staging DaemonSet's long-running process. It writes the staged tree
//! (library, check-fabric, profile, device nodes, the IMEX surface) into the
//! host overlay dir, stages the topology, labels its node, then restages the
//! topology whenever its source changes (the ConfigMap through the API, or a
//! file). On SIGTERM it removes the tree and the label, unless its DaemonSet
//! (`--owner-daemonset`) remains: a replaced pod leaves both to the next one.
//!
//! - [`plan`]: what the tree consists of (pure).
//! - [`stage`]: applying a plan, atomic writes, cleanup.
//! - [`kube_api`]: the node label and the ConfigMap watch.
//! - [`topology_file`]: following a topology file.
//! - [`facts`]: `nvml-mock-stager node-facts`, the probe `up --kube-context` runs on each node.
//! - [`inject`]: `nvml-mock-stager inject --gpu N --xid X | --clear`, the Xid injection control file.
//! - [`smi`]: `nvml-mock-stager nvidia-smi ARGS…`, the node's staged nvidia-smi (a MIG partition).

mod compile;
mod facts;
mod inject;
mod kube_api;
mod plan;
mod smi;
mod stage;
mod topology_file;

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, Result};
use clap::Parser;
use node_layout::{paths::Layout, proc_devices};
use tokio::{
    signal::unix::{signal, SignalKind},
    sync::mpsc,
};

use crate::kube_api::Label;

/// Stages the mock NVML driver tree on this node and keeps its topology live.
#[derive(Debug, Parser)]
#[command(
    name = "nvml-mock-stager",
    version,
    about,
    long_about = None,
    after_help = "`nvml-mock-stager node-facts` prints this node's NRI socket state and /proc/devices and exits (the probe of `cargo xtask up --kube-context`).\n`nvml-mock-stager inject --gpu N --xid X` (or `--clear`) writes the Xid injection control file under the staged root (see `inject --help`).\n`nvml-mock-stager nvidia-smi ARGS` runs the node's staged nvidia-smi (e.g. `-i 0 -mig 1`, `mig -cgi 19 -C`): a partition it makes is the node's.\n`nvml-mock-stager compile-profile FILE.yaml [--num-devices N] --out FILE` and `compile-topology FILE.yaml --out FILE` write the staged (compact binary) profile and topology the mock library reads (MOCK_NVML_CONFIG, MOCK_TOPOLOGY_CONFIG), for use outside a cluster."
)]
struct Args {
    /// This node's name (labelled, and the topology's lookup key downstream).
    #[arg(long, env = "NODE_NAME")]
    node_name: String,
    /// The namespace of the topology ConfigMap.
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: Option<String>,
    /// Where the host overlay dir is mounted in this pod.
    #[arg(long, default_value = node_layout::paths::STAGER_MOUNT)]
    overlay_dir: PathBuf,
    /// The GPU profile (YAML).
    #[arg(long, default_value = "/etc/nvml-mock/config.yaml")]
    profile: PathBuf,
    /// GPUs on this node; default: the profile's count.
    #[arg(long)]
    gpu_count: Option<u32>,
    /// The mock NVML library to stage.
    #[arg(long, default_value = "/usr/local/lib/libnvidia-ml.so.1")]
    library: PathBuf,
    /// The check-fabric binary to stage.
    #[arg(long, default_value = "/usr/local/bin/check-fabric")]
    check_fabric: PathBuf,
    /// The mock driver's nvidia-smi to stage.
    #[arg(long, default_value = "/usr/local/bin/nvidia-smi")]
    nvidia_smi: PathBuf,
    /// A topology file to stage and follow (instead of, or besides, the ConfigMap).
    #[arg(long)]
    topology_file: Option<PathBuf>,
    /// The topology ConfigMap (key `topology.yaml`) to stage and watch.
    #[arg(long)]
    topology_configmap: Option<String>,
    /// Stage the IMEX surface: substitute proc-devices, caps file, channel nodes.
    #[arg(long)]
    imex_channels: bool,
    /// Stage NVIDIA's IMEX daemon and ctl into the driver root, as a driver install has them:
    /// a directory holding the IMEX payload's shim, daemon and ctl (`nvidia-imex`,
    /// `nvidia-imex.real`, `nvidia-imex-ctl`; the chart's init container copies them out of the
    /// payload's image). `usr/bin/nvidia-imex` is the shim carrying the daemon.
    #[arg(long)]
    imex_payload: Option<PathBuf>,
    /// How many IMEX channel nodes.
    #[arg(long, default_value_t = 2048)]
    channel_count: u32,
    /// The IMEX channels' device major (1..4095, free on the host).
    #[arg(long, default_value = "235")]
    channel_major: proc_devices::DeviceMajor,
    /// The nvidia-caps device major (1..4095, free on the host): the IMEX surface's
    /// proc-devices names it, and a MIG-capable profile's `nvidia-caps/nvidia-cap<N>` nodes have it.
    #[arg(long, default_value = "236")]
    caps_major: proc_devices::DeviceMajor,
    /// The host kernel's /proc/devices.
    #[arg(long, default_value = "/proc/devices")]
    proc_devices_source: PathBuf,
    /// Do not label the node (no API access; for tests).
    #[arg(long)]
    no_label: bool,
    /// This pod's DaemonSet (in --namespace): on SIGTERM the tree and labels are
    /// removed only if it is gone or being deleted (an uninstall), not when a
    /// pod is merely replaced. Without it, SIGTERM always cleans up.
    #[arg(long, env = "OWNER_DAEMONSET")]
    owner_daemonset: Option<String>,
    /// Stage once and exit.
    #[arg(long)]
    once: bool,
    /// How often a --topology-file is checked for changes, in milliseconds.
    #[arg(long, default_value_t = 100)]
    topology_poll_ms: u64,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    if std::env::args().nth(1).as_deref() == Some("node-facts") {
        return match facts::run() {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("nvml-mock-stager node-facts: {err:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if std::env::args().nth(1).as_deref() == Some("nvidia-smi") {
        return smi::exec(std::env::args_os().skip(2).collect());
    }
    let subcommand: Option<fn(std::iter::Skip<std::env::Args>) -> Result<String>> =
        match std::env::args().nth(1).as_deref() {
            Some("inject") => Some(inject::run),
            Some("compile-profile") => Some(compile::run_profile),
            Some("compile-topology") => Some(compile::run_topology),
            _ => None,
        };
    if let Some(run) = subcommand {
        return match run(std::env::args().skip(1)) {
            Ok(done) => {
                println!("{done}");
                std::process::ExitCode::SUCCESS
            }
            Err(err) => {
                let name = std::env::args().nth(1).unwrap_or_default();
                eprintln!("nvml-mock-stager {name}: {err:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("nvml-mock-stager: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("nvml-mock-stager: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<()> {
    if args.topology_configmap.is_some() && args.namespace.is_none() {
        anyhow::bail!("--topology-configmap needs --namespace (or POD_NAMESPACE)");
    }
    // Installed first, so a SIGTERM during the initial staging still cleans up.
    let mut sigterm = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    let layout = Layout::new(args.overlay_dir.clone());
    stage_tree(&args, &layout)?;

    let client = if args.no_label && args.topology_configmap.is_none() {
        None
    } else {
        Some(
            kube::Client::try_default()
                .await
                .context("cannot reach the Kubernetes API (use --no-label without --topology-configmap to run without it)")?,
        )
    };

    // Who sets the clique label: nobody under --no-label.
    let labeller = client.as_ref().filter(|_| !args.no_label);
    stage_initial_topology(&args, &layout, client.as_ref(), labeller).await;

    if let (Some(client), false) = (&client, args.no_label) {
        kube_api::set_label(client.clone(), &args.node_name, Label::Present).await?;
        tracing::info!(node = %args.node_name, label = kube_api::GPU_PRESENT_LABEL, "labelled the node");
    }
    if args.once {
        return Ok(());
    }

    let mut receiver = follow_topology(&args, client.as_ref());
    tracing::info!("ready: following the topology");
    let mut sources_open = true;
    loop {
        tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            text = receiver.recv(), if sources_open => match text {
                Some(text) => restage(&layout, &text, labeller, &args.node_name).await,
                None => sources_open = false,
            },
        }
    }
    clean_up(&args, &layout, client).await
}

/// Plans and applies the staged tree (everything but the topology).
fn stage_tree(args: &Args, layout: &Layout) -> Result<()> {
    let inputs = read_inputs(args)?;
    let plan = plan::plan(layout, &inputs);
    let applied = stage::apply(&plan)
        .with_context(|| format!("cannot stage into {}", layout.root().display()))?;
    tracing::info!(
        root = %layout.root().display(),
        changed = applied.changed,
        unchanged = applied.unchanged,
        removed = applied.removed,
        "staged the driver tree"
    );
    Ok(())
}

/// Stages the topology the file and the ConfigMap hold now; a missing one is a warning.
async fn stage_initial_topology(
    args: &Args,
    layout: &Layout,
    client: Option<&kube::Client>,
    labeller: Option<&kube::Client>,
) {
    if let Some(path) = &args.topology_file {
        match std::fs::read_to_string(path) {
            Ok(text) => restage(layout, &text, labeller, &args.node_name).await,
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "cannot read the topology file; nothing staged yet")
            }
        }
    }
    if let (Some(client), Some(name), Some(namespace)) =
        (client, &args.topology_configmap, &args.namespace)
    {
        let config_maps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client.clone(), namespace);
        match config_maps.get_opt(name).await {
            Ok(Some(config_map)) => match kube_api::topology_of(&config_map) {
                Some(text) => restage(layout, text, labeller, &args.node_name).await,
                None => {
                    tracing::warn!(%namespace, %name, "the topology ConfigMap has no topology.yaml key")
                }
            },
            Ok(None) => {
                tracing::warn!(%namespace, %name, "the topology ConfigMap does not exist yet")
            }
            Err(err) => {
                tracing::warn!(%namespace, %name, error = %err, "cannot read the topology ConfigMap")
            }
        }
    }
}

/// Follows the topology file and the ConfigMap; the receiver closes when both sources end.
fn follow_topology(args: &Args, client: Option<&kube::Client>) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel::<String>(16);
    if let Some(path) = args.topology_file.clone() {
        let sender = sender.clone();
        let period = Duration::from_millis(args.topology_poll_ms.max(1));
        tokio::spawn(async move { topology_file::follow(&path, period, sender).await });
    }
    if let (Some(client), Some(name), Some(namespace)) = (
        client.cloned(),
        args.topology_configmap.clone(),
        args.namespace.clone(),
    ) {
        tokio::spawn(
            async move { kube_api::watch_topology(client, &namespace, &name, sender).await },
        );
    }
    receiver
}

/// Whether this termination is an uninstall (see [`kube_api::Departure`]);
/// without an owner DaemonSet or API access it counts as one.
async fn departure(args: &Args, client: Option<&kube::Client>) -> kube_api::Departure {
    let (Some(client), Some(name), Some(namespace)) =
        (client, &args.owner_daemonset, &args.namespace)
    else {
        return kube_api::Departure::Uninstall;
    };
    match kube_api::owner_state(client.clone(), namespace, name).await {
        Ok(state) => kube_api::Departure::from_owner(state),
        Err(err) => {
            tracing::warn!("{err:#}: cleaning up as for an uninstall");
            kube_api::Departure::Uninstall
        }
    }
}

/// On SIGTERM or SIGINT: removes the staged tree, then the node's labels,
/// unless the DaemonSet remains (a restart: the next pod takes over).
async fn clean_up(args: &Args, layout: &Layout, client: Option<kube::Client>) -> Result<()> {
    if departure(args, client.as_ref()).await == kube_api::Departure::Restart {
        tracing::info!(
            daemonset = args.owner_daemonset.as_deref().unwrap_or_default(),
            "terminating while the DaemonSet remains (a pod replaced, not an uninstall): \
             keeping the staged tree and the node's labels for the next pod, so running workloads keep their mock"
        );
        return Ok(());
    }
    tracing::info!("terminating: removing the staged tree and the label");
    let removed = stage::remove_tree(layout).with_context(|| {
        format!(
            "cannot remove the staged tree under {}",
            layout.root().display()
        )
    })?;
    tracing::info!(removed, "removed the staged tree");
    if let (Some(client), false) = (client, args.no_label) {
        kube_api::set_clique_label(client.clone(), &args.node_name, None).await?;
        kube_api::set_label(client, &args.node_name, Label::Absent).await?;
        tracing::info!(node = %args.node_name, "removed the node label");
    }
    Ok(())
}

/// Reads and validates the profile, the proc-devices source and the gpu count.
fn read_inputs(args: &Args) -> Result<plan::Inputs> {
    let text = std::fs::read_to_string(&args.profile)
        .with_context(|| format!("cannot read the profile {}", args.profile.display()))?;
    let profile = nvml_profile::Profile::parse(&text)
        .with_context(|| format!("the profile {} is invalid", args.profile.display()))?;
    let listed = profile.device_count();
    let gpu_count = match args.gpu_count {
        Some(0) => anyhow::bail!("--gpu-count must be at least 1"),
        Some(count) if count as usize > listed => {
            tracing::warn!(
                requested = count,
                listed,
                "--gpu-count exceeds the profile's GPUs; using the profile's count"
            );
            listed as u32
        }
        Some(count) => count,
        None => listed as u32,
    };
    let staged = profile.with_num_devices(gpu_count).with_context(|| {
        format!(
            "cannot size the profile {} to {gpu_count} GPUs",
            args.profile.display()
        )
    })?;
    let profile_staged = nvml_profile::staged::encode(&staged);
    let mig = mig_caps(&staged, args.caps_major);

    let imex = if args.imex_channels {
        let source = std::fs::read_to_string(&args.proc_devices_source)
            .with_context(|| format!("cannot read {}", args.proc_devices_source.display()))?;
        let rendered = proc_devices::render(&source, args.channel_major, args.caps_major).with_context(|| {
                format!(
                    "cannot render the substitute proc-devices from {} (choose free majors with --channel-major/--caps-major)",
                    args.proc_devices_source.display()
                )
            })?;
        Some(plan::Imex {
            proc_devices: rendered,
            channel_count: args.channel_count,
            channel_major: args.channel_major,
        })
    } else {
        None
    };
    for (what, path) in [
        ("library", &args.library),
        ("check-fabric", &args.check_fabric),
        ("nvidia-smi", &args.nvidia_smi),
    ] {
        if !path.is_file() {
            anyhow::bail!(
                "the {what} {} does not exist: pass --{what} <path>",
                path.display()
            );
        }
    }
    let imex_binaries = args
        .imex_payload
        .as_deref()
        .map(read_imex_payload)
        .transpose()?;
    Ok(plan::Inputs {
        driver_version: profile.driver_version().to_owned(),
        gpu_count,
        library: args.library.clone(),
        check_fabric: args.check_fabric.clone(),
        nvidia_smi: args.nvidia_smi.clone(),
        profile_staged,
        imex,
        imex_binaries,
        mig,
    })
}

/// The MIG capability surface of a MIG-capable profile (any GPU with a MIG mode): its GPUs'
/// minors, and the caps major.
fn mig_caps(
    profile: &nvml_profile::Profile,
    caps_major: proc_devices::DeviceMajor,
) -> Option<plan::MigCaps> {
    let devices = profile.devices();
    devices
        .iter()
        .any(|device| device.mig_mode.is_some())
        .then(|| plan::MigCaps {
            gpu_minors: devices.iter().map(|device| device.minor_number).collect(),
            caps_major,
        })
}

/// The IMEX payload's files in `dir`: the staged daemon (the shim carrying the daemon) and ctl.
fn read_imex_payload(dir: &std::path::Path) -> Result<plan::ImexBinaries> {
    let [shim, daemon, ctl] = node_layout::paths::IMEX_PAYLOAD_FILES.map(|name| dir.join(name));
    let context = |path: &std::path::Path| {
        format!(
            "cannot read {} of the IMEX payload: the image given as the chart's \
             imex.driverRoot.image must hold the shim, daemon and ctl in /usr/bin \
             (the workload image built with --imex)",
            path.display()
        )
    };
    let read = |path: &std::path::Path| std::fs::read(path).with_context(|| context(path));
    let daemon_bytes = read(&daemon)?;
    // The ctl is copied when staged: here only its presence is checked.
    std::fs::File::open(&ctl).with_context(|| context(&ctl))?;
    Ok(plan::ImexBinaries {
        daemon: node_layout::imex_bundle::bundle(&read(&shim)?, &daemon_bytes),
        ctl,
    })
}

/// Stages a topology and, with API access, sets the node's clique label from it.
async fn restage(layout: &Layout, text: &str, client: Option<&kube::Client>, node: &str) {
    let Some(document) = stage_topology(layout, text) else {
        return;
    };
    let Some(client) = client else {
        return;
    };
    let value = kube_api::clique_label_value(&document, node);
    match kube_api::set_clique_label(client.clone(), node, value.as_deref()).await {
        Ok(()) => {
            tracing::info!(%node, label = kube_api::GPU_CLIQUE_LABEL, value = value.as_deref().unwrap_or("(removed)"), "labelled the node's clique")
        }
        Err(err) => {
            tracing::warn!(%node, error = format!("{err:#}"), "cannot label the node's clique")
        }
    }
}

/// Validates a topology document and stages it atomically (the staged form the library
/// reads, `driver/topology/topology.bin`); an invalid one is
/// logged and the previous staged file kept. Returns the document when it is valid.
fn stage_topology(layout: &Layout, text: &str) -> Option<topology::Topology> {
    let document = match topology::parse(text) {
        Ok(document) => document,
        Err(err) => {
            tracing::warn!(error = %err, "the topology is invalid; keeping the previously staged one");
            return None;
        }
    };
    let path = layout.topology();
    match stage::write_atomic(&path, &topology::staged::encode(&document), 0o644) {
        Ok(true) => tracing::info!(path = %path.display(), "staged the topology"),
        Ok(false) => tracing::debug!(path = %path.display(), "the topology is unchanged"),
        Err(err) => {
            tracing::warn!(path = %path.display(), error = format!("{err:#}"), "cannot stage the topology")
        }
    }
    Some(document)
}
