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
    /// Scenario 4: NVIDIA's own ComputeDomain flow (its DRA driver, built from
    /// the snapshot, installed with its chart on the staged driver root).
    ///
    /// A ComputeDomain for the two clique-0 workers: the daemon pods carry the
    /// mock's clique, the ComputeDomainClique is named after it, the IMEX config
    /// is written on both nodes. Without nvidia-imex the domain stays NotReady:
    /// that part is SKIPPED with the reason, never passed.
    Scenario4(ScenarioArgs),
    /// Scenario 5: NVIDIA's device plugin and GPU feature discovery (issue 23),
    /// installed with the device plugin's own chart on the staged driver root.
    ///
    /// Rows: allocatable `nvidia.com/gpu` per tray, GFD's labels against the
    /// profile and topology, two pods of 2 GPUs each seeing exactly their own,
    /// Xid 79 taking a GPU out of allocatable within 30 s (Xid 43 ignored),
    /// then the release removed. Images from the cache or built with Go;
    /// with neither, SKIPPED with what to do.
    Scenario5(Scenario5Args),
    /// Delete the cluster (and with --images, the images).
    Down(DownArgs),
    /// Check prerequisites and their versions, with what to do about each,
    /// and how many trays fit in the free disk and memory.
    Doctor(DoctorArgs),
    /// What is deployed and whether it is healthy.
    Status(ClusterArgs),
    /// Inject an Xid fault on one GPU of a node, or clear every fault of the node.
    ///
    /// Runs `nvml-mock-stager inject` in the node's stager container, which writes the Xid
    /// injection control file of the staged tree; the mock library reports each injection once
    /// as an `nvmlEventTypeXidCriticalError` event to every event set registered on that GPU
    /// (NVIDIA's device plugin then marks the GPU unhealthy).
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

/// Options for `report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The page to write (its directory is created).
    #[arg(long, value_name = "OUT.html")]
    pub html: PathBuf,
    /// The JSON report `demo --report FILE` wrote.
    #[arg(value_name = "REPORT.json")]
    pub json: PathBuf,
}

/// Options for `inject`.
#[derive(Debug, Clone, Args)]
pub struct InjectArgs {
    /// kind cluster name.
    #[arg(long, default_value = crate::names::DEFAULT_CLUSTER)]
    pub cluster_name: String,
    /// Inject on this cluster instead of kind: through the API (an exec in
    /// the node's stager pod), no docker.
    #[arg(long, conflicts_with = "cluster_name")]
    pub kube_context: Option<String>,
    /// The node (on kind its container name: `<cluster>-worker2` and so on).
    #[arg(long)]
    pub node: String,
    /// The GPU's index on the node.
    #[arg(long, requires = "xid", required_unless_present = "clear")]
    pub gpu: Option<u32>,
    /// The Xid code (decimal), e.g. 79 (GPU has fallen off the bus).
    #[arg(long, requires = "gpu")]
    pub xid: Option<u64>,
    /// Clear every injection on the node (a later injection is a new event).
    #[arg(long, conflicts_with_all = ["gpu", "xid"])]
    pub clear: bool,
}

impl InjectArgs {
    /// What to do, as the harness takes it.
    pub fn action(&self) -> crate::inject::XidAction {
        match (self.gpu, self.xid) {
            (Some(gpu), Some(xid)) if !self.clear => crate::inject::XidAction::Inject { gpu, xid },
            _ => crate::inject::XidAction::Clear,
        }
    }
}

/// Options for `conformance`.
#[derive(Debug, Clone, Args)]
pub struct ConformanceArgs {
    /// Upstream's snapshot (default: ../shared/peers/ beside the project, then the cached copy).
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
    /// Only these profiles (repeatable; default: every profile in manifests/helm/nvml-mock/profiles).
    #[arg(long)]
    pub profile: Option<Vec<String>>,
}

/// Options for `nvml-functions`.
#[derive(Debug, Clone, Args)]
pub struct NvmlFunctionsArgs {
    /// Compare with the checked-in files instead of writing them; fail when they differ.
    #[arg(long)]
    pub check: bool,
    /// Upstream's snapshot (default: where bench-vs-upstream looks; absent: extras kept).
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
}

/// Options for `bench-vs-upstream`.
#[derive(Debug, Clone, Args)]
pub struct BenchVsUpstreamArgs {
    /// Upstream's snapshot (default: ../shared/peers/ beside the project, then the cached copy).
    #[arg(long)]
    pub snapshot: Option<PathBuf>,
    /// Interleaved rounds: each side runs each measure once per round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Processes for the start-up measure, in all (split over the rounds).
    #[arg(long, default_value_t = 199)]
    pub starts: usize,
    /// Init/shutdown cycles (and query rounds) per process.
    #[arg(long, default_value_t = 10_000)]
    pub cycles: usize,
    /// Query rounds per thread in the 8-thread measure.
    #[arg(long, default_value_t = 100_000)]
    pub thread_rounds: usize,
    /// Whole processes (check-fabric, pynvml, go-nvml) per side per round.
    #[arg(long, default_value_t = 20)]
    pub processes: usize,
}

/// Which cluster to act on.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// kind cluster name; worker names and the topology follow from it.
    #[arg(long, default_value = crate::names::DEFAULT_CLUSTER)]
    pub cluster_name: String,
    /// Run the scenarios on this existing NRI-enabled cluster instead of kind
    /// (the workers are the nodes the workload can run on: labelled
    /// nvidia.com/gpu.present=true, schedulable, no untolerated taint).
    #[arg(long)]
    pub kube_context: Option<String>,
    /// With --kube-context: only nodes with these labels are workers
    /// (`key=value[,key=value]`, added to the workload's nodeSelector).
    #[arg(long, requires = "kube_context", value_name = "KEY=VALUE,...")]
    pub node_selector: Option<String>,
    /// With --kube-context: the topology to stage and check (a topology YAML
    /// file) instead of the demo topology generated for the workers.
    #[arg(long, requires = "kube_context", value_name = "FILE")]
    pub topology: Option<PathBuf>,
}

/// Which kind cluster to act on (commands that work on kind clusters only).
#[derive(Debug, Clone, Args)]
pub struct KindArgs {
    /// kind cluster name.
    #[arg(long, default_value = crate::names::DEFAULT_CLUSTER)]
    pub cluster_name: String,
}

/// An `--imex` value: an existing regular file (NVIDIA's archive) or
/// directory (an extracted tree). Checked at parse time, so a typo fails
/// before anything runs.
pub fn imex_path(arg: &str) -> Result<PathBuf, String> {
    const WHAT: &str =
        "pass NVIDIA's nvidia-imex redistributable (imex-linux-x86_64-<version>-archive.tar.xz, \
                        see manifests/versions.toml [imex]) or the directory it extracts to";
    let path = PathBuf::from(arg);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() || meta.is_dir() => Ok(path),
        Ok(_) => Err(format!(
            "{arg} is neither a regular file nor a directory: {WHAT}"
        )),
        Err(err) => Err(format!("{arg}: {err}: {WHAT}")),
    }
}

impl Command {
    /// The kube context a cluster command talks to (`kind-<cluster>` unless
    /// given); empty for the commands that talk to none.
    pub fn kube_context(&self) -> String {
        let cluster = match self {
            Command::Demo(args) | Command::Up(args) => &args.cluster,
            Command::Scenario1(args)
            | Command::Scenario2(args)
            | Command::Scenario3(args)
            | Command::Scenario4(args) => &args.cluster,
            Command::Scenario5(args) => &args.scenario.cluster,
            _ => return String::new(),
        };
        cluster
            .kube_context
            .clone()
            .unwrap_or_else(|| format!("kind-{}", cluster.cluster_name))
    }
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
    #[arg(long, value_parser = imex_path)]
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
    #[command(flatten)]
    pub push: RegistryArgs,
    /// The GPU profile every node gets (the chart's `gpu.profile`): one of the
    /// chart's `profiles/<name>.yaml` (a100, b200, gb200, gb300, h100, l40s,
    /// t4). The scenarios check NVLink fabric identities, so they fail on a
    /// profile without fabric support (all but gb200 and gb300).
    #[arg(long, default_value = "gb200", value_parser = profile_value)]
    pub profile: String,
    // i24-lean: the room check before a cluster is created.
    /// Create the cluster even when the free disk under Docker's data root or
    /// the available memory looks too small for its nodes (measured per-node
    /// figures, BENCHMARKS.md "The cost of a tray").
    #[arg(long, env = "CDSIM_NO_ROOM_CHECK", value_parser = clap::builder::FalseyValueParser::new())]
    pub no_room_check: bool,
    /// `demo` runs only these scenarios (numbers, comma-separated, e.g. `1,3,4`); the report
    /// lists the others as skipped, not asked for. Default: every scenario.
    #[arg(long, value_delimiter = ',', value_parser = scenario_value, value_name = "N,...")]
    pub scenarios: Vec<harness::scenarios::Scenario>,
    #[command(flatten)]
    pub layout: LayoutArgs,
}

impl DemoArgs {
    /// Whether `--scenarios` asks for `which` (all are asked for without it).
    pub fn asks_for(&self, which: harness::scenarios::Scenario) -> bool {
        self.scenarios.is_empty() || self.scenarios.contains(&which)
    }
}

/// A scenario by its number.
fn scenario_value(arg: &str) -> Result<harness::scenarios::Scenario, String> {
    use harness::scenarios::Scenario;
    Scenario::ALL
        .into_iter()
        .find(|which| which.number().to_string() == arg.trim())
        .ok_or_else(|| {
            let numbers: Vec<String> = Scenario::ALL
                .iter()
                .map(|which| which.number().to_string())
                .collect();
            format!(
                "no scenario {arg:?}: the scenarios are {}",
                numbers.join(", ")
            )
        })
}

/// The simulated racks (`up` and `demo` on kind; on `--kube-context` the
/// workers come from the cluster).
#[derive(Debug, Clone, Args)]
pub struct LayoutArgs {
    /// Compute trays (kind workers) per rack, 1 to 18 (a GB200 NVL72 rack holds 18).
    #[arg(long, default_value_t = 4, value_parser = trays_value, conflicts_with = "kube_context")]
    pub trays: u32,
    /// Racks, each its own NVLink domain (cluster uuid); the cluster has trays × racks workers.
    #[arg(long, default_value_t = 1, value_parser = racks_value, conflicts_with = "kube_context")]
    pub racks: u32,
    /// Cliques each rack's trays are split into (balanced, contiguous), 1 to
    /// --trays [default: 2, today's demo: two cliques of two; 1 for a single tray].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "kube_context")]
    pub cliques_per_rack: Option<u32>,
}

impl LayoutArgs {
    /// The layout the flags ask for, or what to pass instead.
    pub fn layout(&self) -> Result<topology::Layout, topology::LayoutError> {
        topology::Layout::new(self.trays, self.racks, self.cliques_per_rack)
    }
}

/// A `--trays` value: 1..=18, checked at parse time.
fn trays_value(arg: &str) -> Result<u32, String> {
    let trays = count_value(arg, "--trays")?;
    topology::Layout::new(trays, 1, Some(1)).map_err(|err| err.to_string())?;
    Ok(trays)
}

/// A `--racks` value: 1..=8, checked at parse time.
fn racks_value(arg: &str) -> Result<u32, String> {
    let racks = count_value(arg, "--racks")?;
    topology::Layout::new(1, racks, None).map_err(|err| err.to_string())?;
    Ok(racks)
}

fn count_value(arg: &str, flag: &str) -> Result<u32, String> {
    arg.parse()
        .map_err(|_| format!("{flag} {arg:?}: pass a whole number"))
}

/// The directory of the profiles the chart ships (`<chart>/profiles`).
pub fn profiles_dir() -> PathBuf {
    crate::project_root()
        .join(crate::names::CHART)
        .join("profiles")
}

/// A `--profile` value: a profile the chart ships, checked at parse time so an
/// unknown name fails before anything is created.
fn profile_value(arg: &str) -> Result<String, String> {
    check_profile(arg, &shipped_profiles(&profiles_dir()))
}

/// The names of the `<name>.yaml` files in `dir`, sorted (none if unreadable).
pub fn shipped_profiles(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".yaml")?.to_owned())
        })
        .collect();
    names.sort();
    names
}

/// `name` if it is one of `shipped`, else an error listing them.
pub fn check_profile(name: &str, shipped: &[String]) -> Result<String, String> {
    if shipped.iter().any(|known| known == name) {
        return Ok(name.to_owned());
    }
    Err(format!(
        "no GPU profile {name:?}: the chart ships {} (profiles/<name>.yaml)",
        if shipped.is_empty() {
            "none".to_owned()
        } else {
            shipped.join(", ")
        }
    ))
}

/// A `--registry` value, checked at parse time.
fn registry_value(arg: &str) -> Result<String, String> {
    crate::registry::Registry::parse(arg, false).map(|_| arg.to_owned())
}

/// Where a `--kube-context` run pushes its images (`up`, `demo`, `scenario5`).
#[derive(Debug, Clone, Args)]
pub struct RegistryArgs {
    /// With --kube-context: push the images to this registry and have the
    /// nodes pull them from it (`HOST[:PORT][/PREFIX]`; docs/own-cluster.md).
    /// Credentials, if any: CDSIM_REGISTRY_USER and CDSIM_REGISTRY_PASSWORD.
    #[arg(long, requires = "kube_context", value_name = "HOST[:PORT][/PREFIX]", value_parser = registry_value)]
    pub registry: Option<String>,
    /// The registry serves plain HTTP, not HTTPS.
    #[arg(long, requires = "registry")]
    pub plain_http: bool,
}

impl RegistryArgs {
    /// The registry, if `--registry` was given.
    pub fn parsed(&self) -> anyhow::Result<Option<crate::registry::Registry>> {
        self.registry
            .as_deref()
            .map(|value| crate::registry::Registry::parse(value, self.plain_http))
            .transpose()
            .map_err(anyhow::Error::msg)
    }
}

/// Options for `scenario5`.
#[derive(Debug, Clone, Args)]
pub struct Scenario5Args {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    // With --kube-context (a cluster that is not kind, which scenario 5's
    // two images cannot be `kind load`ed into): the registry they go through.
    #[command(flatten)]
    pub push: RegistryArgs,
}

/// Options for the scenario commands.
#[derive(Debug, Clone, Args)]
pub struct ScenarioArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The nvidia-imex payload (scenario 2): NVIDIA's redistributable archive
    /// or an extracted tree.
    #[arg(long, value_parser = imex_path)]
    pub imex: Option<PathBuf>,
    /// Write a JSON report here (and JUnit XML beside it, `.xml`).
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Options for `down`.
#[derive(Debug, Clone, Args)]
pub struct DownArgs {
    #[command(flatten)]
    pub cluster: KindArgs,
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
    /// Directory for the image archives (default: `images/` in the cache
    /// directory, see ARCHITECTURE.md "Directories").
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The nvidia-imex payload for the workload image.
    #[arg(long, value_parser = imex_path)]
    pub imex: Option<PathBuf>,
}

/// Options for `gpu-stack-images`.
#[derive(Debug, Clone, Args)]
pub struct GpuStackImagesArgs {
    /// Print one JSON object (archives, references, binaries, chart, Helm values).
    #[arg(long)]
    pub json: bool,
}

/// Options for `imex-double-payload`.
#[derive(Debug, Clone, Args)]
pub struct ImexDoublePayloadArgs {
    /// The directory to write (created).
    #[arg(long)]
    pub out: PathBuf,
}

/// Options for `ci`.
#[derive(Debug, Clone, Args)]
pub struct CiArgs {
    /// Skip the end-to-end demo on a real cluster.
    #[arg(long)]
    pub no_e2e: bool,
    /// Run only the named step(s), in CI's order, against what is already
    /// there (e.g. `--step "e2e through a registry"` on a running demo cluster).
    #[arg(long, value_name = "NAME")]
    pub step: Vec<String>,
}

/// Options for `doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// How many trays (kind workers, all racks together) to check room for.
    #[arg(long, default_value_t = 4, value_parser = doctor_trays_value)]
    pub trays: usize,
}

/// A tray count: a whole number, at least 1.
fn doctor_trays_value(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) | Err(_) => Err(format!(
            "{text:?} is not a tray count (a whole number, at least 1)"
        )),
        Ok(count) => Ok(count),
    }
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
    fn scenarios_picks_the_ones_demo_runs_and_refuses_an_unknown_number() {
        use harness::scenarios::Scenario;
        let Command::Demo(all) = parse(&["demo"]).command else {
            panic!("demo");
        };
        assert!(Scenario::ALL.into_iter().all(|which| all.asks_for(which)));
        let Command::Demo(some) = parse(&["demo", "--scenarios", "1,3,4"]).command else {
            panic!("demo");
        };
        let asked: Vec<u8> = Scenario::ALL
            .into_iter()
            .filter(|which| some.asks_for(*which))
            .map(|which| which.number())
            .collect();
        assert_eq!(asked, [1, 3, 4]);
        let err = Xtask::try_parse_from(["cargo xtask", "demo", "--scenarios", "1,7"])
            .expect_err("scenario 7 refused")
            .to_string();
        assert!(
            err.contains("no scenario \"7\": the scenarios are 1, 2, 3, 4"),
            "{err}"
        );
    }

    #[test]
    fn profile_defaults_to_gb200_and_takes_any_shipped_one() {
        for (command, args) in [("up", &["up"][..]), ("demo", &["demo"][..])] {
            let (Command::Up(parsed) | Command::Demo(parsed)) = parse(args).command else {
                panic!("{command}");
            };
            assert_eq!(parsed.profile, "gb200", "{command}");
        }
        let shipped = shipped_profiles(&profiles_dir());
        assert_eq!(
            shipped,
            ["a100", "b200", "gb200", "gb300", "h100", "l40s", "t4"],
            "the chart's profiles"
        );
        for name in &shipped {
            for command in ["up", "demo"] {
                let (Command::Up(parsed) | Command::Demo(parsed)) =
                    parse(&[command, "--profile", name]).command
                else {
                    panic!("{command}");
                };
                assert_eq!(&parsed.profile, name, "{command}");
            }
        }
    }

    #[test]
    fn an_unknown_profile_fails_at_parse_time_listing_the_shipped_ones() {
        let err = Xtask::try_parse_from(["cargo xtask", "up", "--profile", "v100"])
            .expect_err("v100 is not shipped")
            .to_string();
        assert!(
            err.contains(
                "no GPU profile \"v100\": the chart ships a100, b200, gb200, gb300, h100, l40s, t4"
            ),
            "{err}"
        );
        let none = check_profile("gb200", &[]).expect_err("nothing shipped");
        assert!(none.contains("the chart ships none"), "{none}");
        assert_eq!(
            check_profile("t4", &["gb200".to_owned(), "t4".to_owned()]),
            Ok("t4".to_owned())
        );
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

    #[test]
    fn scenario5_takes_a_registry_with_a_context_and_inject_a_context() {
        let Command::Scenario5(args) = parse(&[
            "scenario5",
            "--kube-context",
            "prod",
            "--registry",
            "172.18.0.1:5000/ci",
            "--plain-http",
        ])
        .command
        else {
            panic!("scenario5");
        };
        assert_eq!(args.scenario.cluster.kube_context.as_deref(), Some("prod"));
        let registry = args.push.parsed().expect("valid").expect("given");
        assert_eq!(registry.host, "172.18.0.1:5000");
        assert!(registry.plain_http);
        let Command::Scenario5(kind) = parse(&["scenario5", "--cluster-name", "c"]).command else {
            panic!("scenario5");
        };
        assert!(kind.push.parsed().expect("valid").is_none());
        for argv in [
            &["scenario5", "--registry", "r:5000"][..],
            &["scenario1", "--kube-context", "p", "--registry", "r:5000"],
            &["scenario5", "--kube-context", "p", "--registry", "http://r"],
        ] {
            let mut full = vec!["cargo xtask"];
            full.extend_from_slice(argv);
            assert!(Xtask::try_parse_from(full).is_err(), "{argv:?} accepted");
        }
        let Command::Inject(inject) = parse(&[
            "inject",
            "--kube-context",
            "prod",
            "--node",
            "w1",
            "--clear",
        ])
        .command
        else {
            panic!("inject");
        };
        assert_eq!(inject.kube_context.as_deref(), Some("prod"));
    }

    #[test]
    fn a_missing_imex_path_fails_at_parse_time_naming_it() {
        let err = Xtask::try_parse_from(["cargo xtask", "scenario2", "--imex", "/nonexistent"])
            .expect_err("no such path")
            .to_string();
        assert!(err.contains("/nonexistent"), "{err}");
        assert!(err.contains("No such file or directory"), "{err}");
        assert!(
            err.contains("pass NVIDIA's nvidia-imex redistributable"),
            "{err}"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let archive = dir.path().join("imex.tar.xz");
        std::fs::write(&archive, "").expect("write");
        for path in [dir.path(), archive.as_path()] {
            let path = path.to_str().expect("utf-8");
            let Command::Scenario2(args) = parse(&["scenario2", "--imex", path]).command else {
                panic!("scenario2");
            };
            assert_eq!(args.imex.as_deref(), Some(std::path::Path::new(path)));
        }
        let err = imex_path("/dev/null").expect_err("a device");
        assert!(
            err.contains("neither a regular file nor a directory"),
            "{err}"
        );
    }

    fn layout_of(args: &[&str]) -> Result<topology::Layout, String> {
        let mut argv = vec!["cargo xtask"];
        argv.extend_from_slice(args);
        let parsed = Xtask::try_parse_from(argv)
            .and_then(Xtask::checked)
            .map_err(|err| err.to_string())?;
        let (Command::Up(args) | Command::Demo(args)) = parsed.command else {
            panic!("up or demo");
        };
        Ok(args.layout.layout().expect("checked"))
    }

    #[test]
    fn the_layout_defaults_to_todays_demo_and_takes_racks_of_trays() {
        for command in ["up", "demo"] {
            assert_eq!(layout_of(&[command]), Ok(topology::Layout::default()));
        }
        let full = layout_of(&["demo", "--trays", "18", "--cliques-per-rack", "1"]).expect("18");
        assert_eq!(
            (full.trays(), full.racks(), full.cliques_per_rack()),
            (18, 1, 1)
        );
        let two = layout_of(&["up", "--trays", "2", "--racks", "2"]).expect("2x2");
        assert_eq!((two.workers(), two.cliques_per_rack()), (4, 2));
        let single = layout_of(&["up", "--trays", "1", "--racks", "3"]).expect("1x3");
        assert_eq!(single.cliques_per_rack(), 1, "one tray, one clique");
    }

    #[test]
    fn a_bad_layout_fails_at_parse_time_saying_what_to_pass() {
        for (args, want) in [
            (
                &["up", "--trays", "0"][..],
                "a rack holds 1 to 18 compute trays",
            ),
            (&["up", "--trays", "19"][..], "pass --trays 1..18"),
            (&["up", "--trays", "x"][..], "pass a whole number"),
            (
                &["demo", "--racks", "9"][..],
                "--racks 9: pass 1 to 8 racks",
            ),
            (
                &["demo", "--cliques-per-rack", "0"][..],
                "--cliques-per-rack",
            ),
            (
                &["demo", "--trays", "3", "--cliques-per-rack", "4"][..],
                "a rack of 3 trays splits into 1 to 3 cliques; pass --cliques-per-rack 1..3",
            ),
            (
                &["up", "--kube-context", "x", "--trays", "2"][..],
                "cannot be used with",
            ),
        ] {
            let err = layout_of(args).expect_err(want);
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }

    #[test]
    fn kind_only_commands_do_not_accept_a_kube_context() {
        for command in ["doctor", "faults", "down"] {
            let res = Xtask::try_parse_from(["cargo xtask", command, "--kube-context", "x"]);
            assert!(
                res.is_err(),
                "{command} accepts --kube-context it would ignore"
            );
        }
        let Command::Status(args) = parse(&["status", "--kube-context", "x"]).command else {
            panic!("status");
        };
        assert_eq!(args.kube_context.as_deref(), Some("x"));
    }

    #[test]
    fn report_takes_the_page_and_the_json_report() {
        let Command::Report(args) = parse(&["report", "--html", "o.html", "r.json"]).command else {
            panic!("report");
        };
        assert_eq!((args.html, args.json), ("o.html".into(), "r.json".into()));
        assert!(Xtask::try_parse_from(["cargo xtask", "report", "r.json"]).is_err());
    }
}
