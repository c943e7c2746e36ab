//! The command line of `cargo xtask`.

use clap::{Parser, Subcommand};

mod cluster;
mod local;

pub use cluster::{
    ClusterArgs, DemoArgs, DownArgs, InjectArgs, KindArgs, NvidiaScenarioArgs, ScenarioArgs,
};
pub use local::{
    BenchVsUpstreamArgs, CiArgs, ConformanceArgs, DoctorArgs, GpuStackImagesArgs, ImagesArgs,
    ImexDoublePayloadArgs, NodeImageArgs, NvmlFunctionsArgs, ReportArgs,
};

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

impl Xtask {
    /// The flags, with what clap cannot check alone (the layout's flags
    /// together, e.g. `--cliques-per-rack` ≤ `--trays`) checked as a parse error.
    pub fn checked(self) -> Result<Xtask, clap::Error> {
        if let Command::Demo(args) | Command::Up(args) = &self.command {
            if let Err(err) = args.layout.layout() {
                use clap::CommandFactory as _;
                return Err(Xtask::command().error(clap::error::ErrorKind::ValueValidation, err));
            }
        }
        Ok(self)
    }
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
    /// Needs the workload image built with the nvidia-imex payload: `--imex
    /// PATH` builds it (or reuses it by its content tag), loads it and rolls the
    /// workload first. Without a payload the scenario is SKIPPED with the
    /// reason, never passed; against the IMEX test double it is reported as
    /// "passed (IMEX test double)".
    Scenario2(ScenarioArgs),
    /// Scenario 3: live topology rebinding, then the demo topology restored.
    ///
    /// `helm upgrade --reuse-values` moves every worker to clique 99, uuid …00ff;
    /// the stager restages live, so no pod is recycled.
    Scenario3(ScenarioArgs),
    /// Scenario 4: NVIDIA's own ComputeDomain flow (its DRA driver v0.4.1,
    /// released, or built from source with --offline or --registry,
    /// installed with its chart on the staged driver root).
    ///
    /// A ComputeDomain over the first clique of each rack: the daemon pods
    /// carry the mock's clique, one ComputeDomainClique per clique, the IMEX
    /// config written on every tray; then scenario 3's rebind. Without
    /// nvidia-imex in the driver root (--imex) the domain stays NotReady:
    /// that part is SKIPPED with the reason, never passed.
    Scenario4(NvidiaScenarioArgs),
    /// Scenario 5: NVIDIA's device plugin and GPU feature discovery (issue 23),
    /// installed with the device plugin's own chart on the staged driver root.
    ///
    /// Rows: allocatable `nvidia.com/gpu` per tray, GFD's labels against the
    /// profile and topology, two pods of 2 GPUs each seeing exactly their own,
    /// Xid 79 taking a GPU out of allocatable within 30 s (Xid 43 ignored),
    /// then the release removed. Images from the cache or built with Go;
    /// with neither, SKIPPED with what to do.
    Scenario5(NvidiaScenarioArgs),
    /// Delete the cluster (and with --images, the images).
    Down(DownArgs),
    /// Check prerequisites and their versions, with what to do about each,
    /// and how many trays fit in the free disk and memory.
    Doctor(DoctorArgs),
    /// What is deployed and whether it is healthy.
    Status(ClusterArgs),
    /// Inject an Xid fault (`--xid`) or a volatile ECC error (`--ecc single|double`) on one
    /// GPU of a node, or clear every fault of the node.
    ///
    /// Runs `nvml-mock-stager inject` in the node's stager container, which writes the fault
    /// injection control file of the staged tree; the mock library reports each injection once
    /// as its event (`nvmlEventTypeXidCriticalError`, `…SingleBitEccError`,
    /// `…DoubleBitEccError`) to every event set registered for it on that GPU (NVIDIA's device
    /// plugin then marks the GPU unhealthy for a fatal Xid), an ECC error also in the GPU's ECC
    /// counters; Xid 79 also makes the next wait answer GPU_IS_LOST.
    Inject(InjectArgs),
    /// Fault checks against the running demo cluster: a concurrent run, an
    /// incompatible cluster, a worker stopped mid-run (it is restarted), the
    /// self-healing cases (plugin and workload pods deleted together, every
    /// node restarted, containerd restarted, the stager deleted during a
    /// rebind, a malformed topology), each timed, and `inject` round-tripped.
    Faults(KindArgs),
    /// Build the offline kind node image from pinned sources.
    NodeImage(NodeImageArgs),
    /// Build the mock and workload images as reproducible archives.
    Images(ImagesArgs),
    /// Build NVIDIA's device plugin (with GPU feature discovery) and
    /// node-feature-discovery images from source, offline, with the device
    /// plugin's chart (NFD's as its dependency).
    ///
    /// Go builds at the `[peers]` pins through the module proxy, cached under
    /// the cache directory's `go/`, `images/gpu-stack-<key>/` and `charts/`;
    /// a second run builds nothing. Prints the archives, tags and chart path.
    GpuStackImages(GpuStackImagesArgs),
    /// Build every input the demo's scenarios take from the cache, without a
    /// cluster: the offline node images, NVIDIA's DRA driver (scenario 4) and
    /// the GPU stack's images (scenario 5).
    ///
    /// Each part goes on when another fails, and says which failed. Cached: a
    /// second run builds nothing. A run that needs a part another run is
    /// building waits for it (CI runs this in the background, niced, while
    /// its tests run).
    Prebuild,
    /// Write the IMEX TEST DOUBLE's payload directory (for tests only).
    ///
    /// Builds `crates/imex-double` and lays it out as NVIDIA's imex archive is
    /// (usr/bin/nvidia-imex, usr/bin/nvidia-imex-ctl, etc/nvidia-imex/config.cfg,
    /// …), so `scenario2 --imex DIR` takes it; reports name it as the double.
    ImexDoublePayload(ImexDoublePayloadArgs),
    /// The project's whole test suite, as .ci/run runs it.
    Ci(CiArgs),
    /// As root, for two hours: CI's local mirror of NVIDIA's hosts (the offline builds under the
    /// public names), printing the CDSIM_MIRRORS value that rehearses scenarios 4 and 5 online.
    ServeMirror,
    /// As root: prepare this host for kind (start dockerd, install the
    /// capability-filtering runc wrapper, raise the inotify limits), each only
    /// when its check shows it is needed. Other commands print this command
    /// when they need it and do not run as root.
    HostSetup,
    /// This mock NVML library against upstream's Go mock, side by side (a benchmark).
    ///
    /// Builds upstream's mock and check-fabric from the pinned snapshot offline (cached), runs
    /// one driver program against both libraries, interleaved, and prints the table of ratios.
    /// Fails only when the two disagree on fabric identity, UUID count or memory.
    BenchVsUpstream(BenchVsUpstreamArgs),
    /// Regenerates the mock library's NVML function list (crates/mock-nvml/nvml-functions.txt)
    /// from go-nvml's nvml.h and upstream's snapshot, and upstream's export list.
    NvmlFunctions(NvmlFunctionsArgs),
    /// Compares our mock library with upstream's, call by call, on every GPU profile both ship;
    /// fails on any difference crates/nvml-conformance/allow.toml does not explain.
    Conformance(ConformanceArgs),
    /// Write the page of a run (racks, cliques, trays, scenario rows, timings; one HTML file,
    /// no script) from its JSON report; `demo --report FILE` writes it beside FILE already.
    Report(ReportArgs),
}

impl Command {
    /// The kube context a cluster command talks to (`kind-<cluster>` unless
    /// given); empty for the commands that talk to none.
    pub fn kube_context(&self) -> String {
        let cluster = match self {
            Command::Demo(args) | Command::Up(args) => &args.cluster,
            Command::Scenario1(args) | Command::Scenario2(args) | Command::Scenario3(args) => {
                &args.cluster
            }
            Command::Scenario4(args) | Command::Scenario5(args) => &args.scenario.cluster,
            _ => return String::new(),
        };
        cluster
            .kube_context
            .clone()
            .unwrap_or_else(|| format!("kind-{}", cluster.cluster_name))
    }
}

#[cfg(test)]
mod tests;
