//! The flags of the commands that act on a cluster: `demo` and `up`, the
//! scenarios, `status`, `down`, `faults` and `inject`: which cluster (kind or
//! a kube context), its layout of racks, the GPU profile, the registry, the
//! nvidia-imex payload, the report; each value checked at parse time.

use std::path::PathBuf;

use clap::Args;

/// Options for `inject`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("fault").args(["xid", "ecc"])))]
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
    #[arg(long, requires = "fault", required_unless_present = "clear")]
    pub gpu: Option<u32>,
    /// The Xid code (decimal), e.g. 79 (GPU has fallen off the bus: the GPU is then lost).
    #[arg(long, requires = "gpu")]
    pub xid: Option<u64>,
    /// A volatile ECC error in device memory: `single` (corrected) or `double` (uncorrected).
    #[arg(long, requires = "gpu")]
    pub ecc: Option<node_layout::xid::Ecc>,
    /// Clear every injection on the node (a later injection is a new event).
    #[arg(long, conflicts_with_all = ["gpu", "xid", "ecc"])]
    pub clear: bool,
}

impl InjectArgs {
    /// What to do, as the harness takes it.
    pub fn action(&self) -> crate::inject::XidAction {
        use crate::inject::XidAction;
        match (self.gpu, self.xid, self.ecc) {
            (Some(gpu), Some(xid), _) if !self.clear => XidAction::Inject { gpu, xid },
            (Some(gpu), None, Some(ecc)) if !self.clear => XidAction::Ecc { gpu, ecc },
            _ => XidAction::Clear,
        }
    }
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

/// A `--profile` value: a profile the chart ships, checked at parse time so an
/// unknown name fails before anything is created.
fn profile_value(arg: &str) -> Result<String, String> {
    check_profile(arg, &harness::profiles::names().unwrap_or_default())
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

/// Options for `scenario4` and `scenario5`, NVIDIA's software.
#[derive(Debug, Clone, Args)]
pub struct NvidiaScenarioArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    // With --kube-context (a cluster that is not kind, which the source builds
    // of NVIDIA's images cannot be `kind load`ed into): the registry they go
    // through instead of NVIDIA's released images.
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
