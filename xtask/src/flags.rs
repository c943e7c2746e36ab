//! The command line of `cargo xtask`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Stand up a kind cluster whose nodes look like GB200 NVL72 compute trays,
/// and prove the ComputeDomain scenarios against it.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    version,
    after_help = "Typical use:\n  cargo xtask doctor                 check prerequisites\n  cargo xtask demo --offline         everything, on a kind cluster from the locally built node image\n  cargo xtask scenario3              rerun one scenario against the running setup\n  cargo xtask down                   delete the cluster"
)]
pub struct Xtask {
    #[command(subcommand)]
    pub command: Command,
    /// Tracing logs (RUST_LOG refines them).
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

/// Everything `cargo xtask` can do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Everything end to end: cluster, images, install, the three scenarios, a summary.
    Demo(DemoArgs),
    /// Cluster, images, chart install and workload, without running scenarios.
    Up(DemoArgs),
    /// Scenario 1: every worker reports its clique and the domain uuid.
    ///
    /// In the workload pod on each worker, the NRI-injected IMEX channel exists
    /// and check-fabric reports, for every GPU, the worker's clique (0, 0, 1, 1)
    /// and uuid …00ab with state completed.
    Scenario1(ScenarioArgs),
    /// Scenario 2: a real nvidia-imex domain in NO GPU mode.
    ///
    /// Needs the workload image built with the nvidia-imex payload (`up --imex`);
    /// without it the scenario is SKIPPED with the reason, never passed.
    Scenario2(ScenarioArgs),
    /// Scenario 3: live topology rebinding, then the demo topology restored.
    ///
    /// `helm upgrade --reuse-values` moves every worker to clique 99, uuid …00ff;
    /// the stager restages live, so no pod is recycled.
    Scenario3(ScenarioArgs),
    /// Scenario 4: NVIDIA's own ComputeDomain flow (its DRA driver, built from
    /// the snapshot, installed with its chart on the staged driver root).
    ///
    /// A ComputeDomain for the two clique-0 workers: the daemon pods carry the
    /// mock's clique, the ComputeDomainClique is named after it, the IMEX config
    /// is written on both nodes. Without nvidia-imex the domain stays NotReady:
    /// that part is SKIPPED with the reason, never passed.
    Scenario4(ScenarioArgs),
    /// Delete the cluster (and with --images, the images).
    Down(DownArgs),
    /// Check prerequisites and their versions, with what to do about each.
    Doctor(ClusterArgs),
    /// What is deployed and whether it is healthy.
    Status(ClusterArgs),
    /// Fault checks against the running demo cluster: a concurrent run, an
    /// incompatible cluster, a worker stopped mid-run (it is restarted).
    Faults(ClusterArgs),
    /// Build the offline kind node image from pinned sources.
    NodeImage(NodeImageArgs),
    /// Build the mock and workload images as reproducible archives.
    Images(ImagesArgs),
    /// The project's whole test suite, as .ci/run runs it.
    Ci(CiArgs),
}

/// Which cluster to act on.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// kind cluster name; worker names and the topology follow from it.
    #[arg(long, default_value = "nvml-mock-compute-domain")]
    pub cluster_name: String,
    /// Run the scenarios on this existing NRI-enabled cluster instead of kind
    /// (the workers are its nodes labelled nvidia.com/gpu.present=true).
    #[arg(long)]
    pub kube_context: Option<String>,
}

/// Options for `demo` and `up`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Delete and recreate the cluster even if it is compatible (also for a
    /// cluster rejected as incompatible).
    #[arg(long, env = "FORCE_RECREATE", value_parser = clap::builder::FalseyValueParser::new())]
    pub force_recreate: bool,
    /// The nvidia-imex payload (NVIDIA's redistributable archive or an extracted tree).
    #[arg(long)]
    pub imex: Option<PathBuf>,
    /// Write a JSON report here (and JUnit XML beside it, `.xml`).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// A prebuilt mock image archive instead of building one.
    #[arg(long)]
    pub mock_image: Option<PathBuf>,
    /// A prebuilt workload image archive instead of building one.
    #[arg(long)]
    pub workload_image: Option<PathBuf>,
    /// Build the kind node image locally (no registry) and use it.
    #[arg(long)]
    pub offline: bool,
    /// Create the cluster from this kind node image (e.g. one `cargo xtask
    /// node-image` printed) instead of kind's default or --offline's.
    #[arg(long, conflicts_with = "offline")]
    pub node_image: Option<String>,
}

/// Options for the scenario commands.
#[derive(Debug, Clone, Args)]
pub struct ScenarioArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The nvidia-imex payload (scenario 2).
    #[arg(long)]
    pub imex: Option<PathBuf>,
    /// Write a JSON report here (and JUnit XML beside it, `.xml`).
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Options for `down`.
#[derive(Debug, Clone, Args)]
pub struct DownArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Also remove the demo images from the local Docker engine.
    #[arg(long)]
    pub images: bool,
}

/// Options for `node-image`.
#[derive(Debug, Clone, Args)]
pub struct NodeImageArgs {
    /// Rebuild even when a cached image with the same pins exists.
    #[arg(long)]
    pub rebuild: bool,
}

/// Options for `images`.
#[derive(Debug, Clone, Args)]
pub struct ImagesArgs {
    /// Directory for the image archives.
    #[arg(long, default_value = "target/images")]
    pub out: PathBuf,
    /// The nvidia-imex payload for the workload image.
    #[arg(long)]
    pub imex: Option<PathBuf>,
}

/// Options for `ci`.
#[derive(Debug, Clone, Args)]
pub struct CiArgs {
    /// Skip the end-to-end demo on a real cluster.
    #[arg(long)]
    pub no_e2e: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Xtask {
        let mut argv = vec!["cargo xtask"];
        argv.extend_from_slice(args);
        Xtask::try_parse_from(argv).unwrap_or_else(|err| panic!("{args:?}: {err}"))
    }

    #[test]
    fn force_recreate_comes_from_the_flag_or_the_environment() {
        let Command::Up(args) = parse(&["up", "--force-recreate"]).command else {
            panic!("up");
        };
        assert!(args.force_recreate);
        // The only test touching FORCE_RECREATE.
        std::env::set_var("FORCE_RECREATE", "true");
        let Command::Demo(on) = parse(&["demo"]).command else {
            panic!("demo");
        };
        std::env::set_var("FORCE_RECREATE", "false");
        let Command::Demo(off) = parse(&["demo"]).command else {
            panic!("demo");
        };
        std::env::remove_var("FORCE_RECREATE");
        assert!(on.force_recreate, "FORCE_RECREATE=true");
        assert!(!off.force_recreate, "FORCE_RECREATE=false");
    }

    #[test]
    fn scenarios_take_a_context_and_a_report() {
        let Command::Scenario3(args) = parse(&[
            "scenario3",
            "--kube-context",
            "prod",
            "--report",
            "r.json",
            "-v",
        ])
        .command
        else {
            panic!("scenario3");
        };
        assert_eq!(args.cluster.kube_context.as_deref(), Some("prod"));
        assert_eq!(args.cluster.cluster_name, "nvml-mock-compute-domain");
        assert_eq!(args.report.as_deref(), Some(std::path::Path::new("r.json")));
    }
}
