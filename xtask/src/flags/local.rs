//! The flags of the commands that need no cluster: the builds (`images`,
//! `node-image`, `gpu-stack-images`, `imex-double-payload`), the checks and
//! benchmarks (`ci`, `conformance`, `nvml-functions`, `bench-vs-upstream`),
//! `doctor`, and `report`'s page.

use std::path::PathBuf;

use clap::Args;

use super::cluster::imex_path;

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
    /// How many trays (kind workers) per rack to check room for.
    #[arg(long, default_value_t = 4, value_parser = doctor_trays_value)]
    pub trays: usize,
    /// How many racks of --trays trays each (as `demo --trays T --racks R`);
    /// also prints what 1, 2, 4 and 8 such racks need.
    #[arg(long, default_value_t = 1, value_parser = doctor_trays_value)]
    pub racks: usize,
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
