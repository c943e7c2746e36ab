//! `cargo xtask bench-vs-upstream`: this project's mock NVML library against upstream's
//! (NVIDIA k8s-test-infra's Go mock, `pkg/gpu/mocknvml`), side by side.
//!
//! Upstream is built from the pinned source snapshot (`[upstream]` in `manifests/versions.toml`)
//! offline (`GOFLAGS=-mod=vendor GOPROXY=off`) with its own `make`, as its Dockerfile does, plus
//! its check-fabric, into a cache directory keyed by the snapshot's sha256. Its gb200 profile is
//! sized to 4 GPUs by inserting `num_devices: 4` under `system:`, as its `setup.sh` does. Both
//! libraries then serve the same topology, and one driver program (`xtask/bench/driver.c`,
//! dlopen-based) measures both, interleaved. pynvml and go-nvml processes are timed against both.
//!
//! The figures are a benchmark and never fail; the identity check (both libraries answer the
//! same fabric identity, UUID count and memory for the same node names) is a test and fails the
//! command after the table is printed.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use anyhow::{bail, ensure, Context as _, Result};
use sha2::{Digest as _, Sha256};
use xshell::{cmd, Shell};

use crate::flags::BenchVsUpstreamArgs;

/// The cluster whose worker names the topology lists.
const CLUSTER: &str = "nvml-mock-compute-domain";

/// The pinned snapshot: file name and sha256.
struct Pin {
    file: String,
    sha256: String,
}

fn pin() -> Result<Pin> {
    let versions = crate::tools::read_versions()?;
    let field = |key: &str| -> Result<String> {
        versions
            .get("upstream")
            .and_then(|table| table.get(key))
            .and_then(|value| value.as_str())
            .map(str::to_owned)
            .with_context(|| format!("manifests/versions.toml has no [upstream].{key}"))
    };
    Ok(Pin {
        file: field("k8s_test_infra_file")?,
        sha256: field("k8s_test_infra_sha256")?,
    })
}

fn sha256_of(path: &Path) -> Result<String> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!("{:x}", Sha256::digest(bytes)))
}

/// Where the snapshot is: `--snapshot`, the directory `CDSIM_PEERS_DIR` names, `../shared/peers/`
/// beside the project root, or the copy a previous run kept in the cache.
fn find_snapshot(args: &BenchVsUpstreamArgs, pin: &Pin, cached: &Path) -> Result<PathBuf> {
    let root = crate::project_root();
    let mut candidates = Vec::new();
    if let Some(path) = &args.snapshot {
        candidates.push(path.clone());
    }
    if let Some(dir) = std::env::var_os("CDSIM_PEERS_DIR").filter(|dir| !dir.is_empty()) {
        candidates.push(PathBuf::from(dir).join(&pin.file));
    }
    candidates.push(root.join("../shared/peers").join(&pin.file));
    candidates.push(cached.to_path_buf());
    for candidate in &candidates {
        if candidate.is_file() {
            let got = sha256_of(candidate)?;
            ensure!(
                got == pin.sha256,
                "{} has sha256 {got}, but manifests/versions.toml pins {}: use the pinned snapshot",
                candidate.display(),
                pin.sha256
            );
            return Ok(candidate.clone());
        }
    }
    bail!(
        "upstream's snapshot {} is not in any of {}: pass --snapshot <path to {}> or set CDSIM_PEERS_DIR to its directory",
        pin.file,
        candidates
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        pin.file
    )
}

/// Upstream's built library, check-fabric and 4-GPU profile.
struct Upstream {
    lib_dir: PathBuf,
    library: PathBuf,
    check_fabric: PathBuf,
    profile: PathBuf,
    /// Upstream's gb200 profile as its snapshot ships it.
    original_profile: PathBuf,
}

/// Builds upstream once per snapshot hash into the cache; later runs reuse it.
fn ensure_upstream(sh: &Shell, args: &BenchVsUpstreamArgs) -> Result<Upstream> {
    let pin = pin()?;
    let dir = crate::dirs::cache_dir()?
        .join("upstream-mock")
        .join(&pin.sha256[..16]);
    let upstream = Upstream {
        lib_dir: dir.join("lib"),
        library: dir.join("lib/libnvidia-ml.so.1"),
        check_fabric: dir.join("check-fabric"),
        profile: dir.join("gb200-4gpu.yaml"),
        original_profile: dir.join("gb200-upstream.yaml"),
    };
    let done = dir.join(".built");
    if done.exists() && upstream.original_profile.exists() {
        eprintln!("    upstream: reusing the build in {}", dir.display());
        return Ok(upstream);
    }
    let cached_snapshot = crate::dirs::cache_dir()?.join("peers").join(&pin.file);
    let snapshot = find_snapshot(args, &pin, &cached_snapshot)?;
    eprintln!(
        "    upstream: building {} offline into {} (a few minutes, once per snapshot)",
        snapshot.display(),
        dir.display()
    );
    let src = dir.join("src");
    if src.exists() {
        fs::remove_dir_all(&src).with_context(|| format!("removing {}", src.display()))?;
    }
    fs::create_dir_all(&src)?;
    cmd!(sh, "tar -xzf {snapshot} -C {src} --strip-components=1").run()?;
    let _flags = sh.push_env("GOFLAGS", "-mod=vendor");
    let _proxy = sh.push_env("GOPROXY", "off");
    let _toolchain = sh.push_env("GOTOOLCHAIN", "local");
    {
        let _dir = sh.push_dir(src.join("pkg/gpu/mocknvml"));
        cmd!(sh, "make")
            .run()
            .context("upstream's make in pkg/gpu/mocknvml")?;
    }
    {
        let _dir = sh.push_dir(&src);
        let out = &upstream.check_fabric;
        cmd!(sh, "go build -o {out} ./cmd/check-fabric")
            .run()
            .context("go build ./cmd/check-fabric")?;
    }
    fs::create_dir_all(&upstream.lib_dir)?;
    let built = fs::canonicalize(src.join("pkg/gpu/mocknvml/libnvidia-ml.so.1"))?;
    fs::copy(&built, &upstream.library)?;
    fs::copy(
        src.join("pkg/gpu/mocknvml/configs/mock-nvml-config-gb200.yaml"),
        &upstream.original_profile,
    )?;
    fs::remove_dir_all(&src)?;
    if snapshot != cached_snapshot {
        fs::create_dir_all(cached_snapshot.parent().unwrap_or(Path::new("/")))?;
        fs::copy(&snapshot, &cached_snapshot)?;
    }
    fs::write(&done, &pin.sha256)?;
    Ok(upstream)
}

/// Upstream's `setup.sh`: `sed "/^system:/a\  num_devices: N"`; and, so that both sides serve
/// the same part, the memory total of our profile (189,471 MiB, what a GB200 reports, where
/// upstream's profile rounds it to 192 GiB) in the first `memory:` block's `total_bytes`, with
/// `free_bytes` kept at total minus `reserved_bytes`.
fn sized_profile(profile: &str, gpus: usize, memory_total: u64) -> Result<String> {
    let mut out = String::with_capacity(profile.len() + 32);
    let mut inserted = false;
    let mut in_memory = false;
    let mut total_set = false;
    let mut reserved = None;
    for line in profile.lines() {
        let trimmed = line.trim_start();
        let value = |key: &str| {
            trimmed
                .strip_prefix(key)
                .and_then(|rest| rest.split('#').next())
                .map(str::trim)
        };
        if trimmed == "memory:" && !total_set {
            in_memory = true;
        } else if in_memory && !line.starts_with("    ") {
            in_memory = false;
        }
        let indent = &line[..line.len() - trimmed.len()];
        if in_memory && value("total_bytes:").is_some() {
            out.push_str(&format!("{indent}total_bytes: {memory_total}\n"));
            total_set = true;
            continue;
        }
        if in_memory {
            if let Some(bytes) = value("reserved_bytes:") {
                reserved = Some(bytes.parse::<u64>().context("upstream's reserved_bytes")?);
            }
            if value("free_bytes:").is_some() {
                let reserved =
                    reserved.context("upstream's memory lists free_bytes before reserved_bytes")?;
                let free = memory_total.saturating_sub(reserved);
                out.push_str(&format!("{indent}free_bytes: {free}\n"));
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
        if line == "system:" {
            out.push_str(&format!("  num_devices: {gpus}\n"));
            inserted = true;
        }
    }
    ensure!(inserted, "upstream's gb200 profile has no `system:` line");
    ensure!(
        total_set,
        "upstream's gb200 profile has no `memory:` block with `total_bytes`"
    );
    Ok(out)
}

/// `device_defaults.memory.total` of our profile.
fn our_memory_total(profile: &Path) -> Result<u64> {
    let text =
        fs::read_to_string(profile).with_context(|| format!("reading {}", profile.display()))?;
    let doc: serde_yaml::Value = serde_yaml::from_str(&text)?;
    doc["device_defaults"]["memory"]["total"]
        .as_u64()
        .with_context(|| format!("{} has no device_defaults.memory.total", profile.display()))
}

/// Ours: the release library and check-fabric, and the shipped gb200 profile (4 GPUs).
struct Ours {
    lib_dir: PathBuf,
    library: PathBuf,
    check_fabric: PathBuf,
    profile: PathBuf,
}

fn ensure_ours(sh: &Shell, work: &Path) -> Result<Ours> {
    cmd!(sh, "cargo build --release -p mock-nvml -p check-fabric").run()?;
    let root = crate::project_root();
    let release = crate::dirs::target_dir()?.join("release");
    let lib_dir = work.join("ours-lib");
    fs::create_dir_all(&lib_dir)?;
    let library = lib_dir.join("libnvidia-ml.so.1");
    let built = release.join("libnvidia_ml.so");
    fs::copy(&built, &library).with_context(|| format!("copying {}", built.display()))?;
    Ok(Ours {
        lib_dir,
        library,
        check_fabric: release.join("check-fabric"),
        profile: root.join("manifests/helm/nvml-mock/profiles/gb200.yaml"),
    })
}

/// One library under test, with what it needs in its environment.
struct Side {
    name: &'static str,
    library: PathBuf,
    lib_dir: PathBuf,
    check_fabric: PathBuf,
    profile: PathBuf,
}

/// `key=value` pairs of one driver line.
fn parse_pairs(line: &str) -> Result<BTreeMap<String, f64>> {
    line.split_whitespace()
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .with_context(|| format!("driver printed {pair:?}, not key=value"))?;
            let value: f64 = value
                .parse()
                .with_context(|| format!("driver printed {pair:?}, not a number"))?;
            Ok((key.to_owned(), value))
        })
        .collect()
}

/// Samples per side of one measure.
#[derive(Debug, Default, Clone)]
struct Samples(Vec<f64>);

impl Samples {
    fn sorted(&self) -> Vec<f64> {
        let mut values = self.0.clone();
        values.sort_by(f64::total_cmp);
        values
    }

    fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }

    fn median(&self) -> f64 {
        let values = self.sorted();
        values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
    }
}

/// One row of the table.
struct Row {
    measure: String,
    unit: &'static str,
    upstream: Samples,
    ours: Samples,
    /// Higher is better (throughput): the ratio is upstream / ours.
    higher_is_better: bool,
    target: f64,
}

impl Row {
    /// A row where less is better (time, memory, size): ours / upstream.
    fn lower(
        measure: impl Into<String>,
        unit: &'static str,
        [upstream, ours]: [Samples; 2],
        target: f64,
    ) -> Row {
        Row {
            measure: measure.into(),
            unit,
            upstream,
            ours,
            higher_is_better: false,
            target,
        }
    }

    /// A row where more is better (throughput): upstream / ours.
    fn higher(
        measure: impl Into<String>,
        unit: &'static str,
        samples: [Samples; 2],
        target: f64,
    ) -> Row {
        Row {
            higher_is_better: true,
            ..Row::lower(measure, unit, samples, target)
        }
    }

    fn ratio(&self, pick: fn(&Samples) -> f64) -> f64 {
        if self.higher_is_better {
            pick(&self.upstream) / pick(&self.ours)
        } else {
            pick(&self.ours) / pick(&self.upstream)
        }
    }
}

fn format_value(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

fn print_table(rows: &[Row]) {
    println!("| measure | unit | upstream min | upstream median | ours min | ours median | ratio (min) | ratio (median) | target | met |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in rows {
        let ratio = row.ratio(Samples::median);
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} |",
            row.measure,
            row.unit,
            format_value(row.upstream.min()),
            format_value(row.upstream.median()),
            format_value(row.ours.min()),
            format_value(row.ours.median()),
            row.ratio(Samples::min),
            ratio,
            if row.target.is_finite() {
                format!("≤ {}", row.target)
            } else {
                "report".to_owned()
            },
            if !row.target.is_finite() {
                "–"
            } else if ratio <= row.target {
                "yes"
            } else {
                "no"
            },
        );
    }
    println!("Ratios are ours / upstream (for throughput upstream / ours): under 1 means ours is better.");
}

/// Runs the driver with a side's environment; returns its stdout lines.
fn driver(
    sh: &Shell,
    driver: &Path,
    side: &Side,
    node: &str,
    args: &[String],
) -> Result<Vec<String>> {
    let out = cmd!(sh, "{driver} {args...}")
        .env(node_layout::env::MOCK_NVML_CONFIG, &side.profile)
        .env("NODE_NAME", node)
        .env("LD_LIBRARY_PATH", &side.lib_dir)
        .read()
        .with_context(|| format!("driver {} against {}", args.join(" "), side.name))?;
    Ok(out.lines().map(str::to_owned).collect())
}

/// Runs `each` for every side, in turn, `rounds` times: both sides measured
/// in the same minutes, so load changes hit both.
fn interleaved<F>(rounds: usize, sides: &[Side], mut each: F) -> Result<()>
where
    F: FnMut(usize, &Side) -> Result<()>,
{
    for _ in 0..rounds {
        for (index, side) in sides.iter().enumerate() {
            each(index, side)?;
        }
    }
    Ok(())
}

/// The figure `key` of a driver `line`, parsed into `pairs`.
fn figure(pairs: &BTreeMap<String, f64>, key: &str, line: &str) -> Result<f64> {
    pairs
        .get(key)
        .copied()
        .with_context(|| format!("no {key} in {line:?}"))
}

/// The `key=value` figures of the driver's first line for `args`.
fn driver_pairs(
    sh: &Shell,
    program: &Path,
    side: &Side,
    node: &str,
    args: &[String],
) -> Result<BTreeMap<String, f64>> {
    let lines = driver(sh, program, side, node, args)?;
    parse_pairs(lines.first().map_or("", String::as_str))
}

/// What a library answers for one node: per GPU (cluster, clique, state, memory) and UUIDs.
fn identity(sh: &Shell, program: &Path, side: &Side, node: &str) -> Result<(Vec<String>, usize)> {
    let lines = driver(
        sh,
        program,
        side,
        node,
        &["identity".into(), side.library.display().to_string()],
    )?;
    let mut facts = Vec::new();
    let mut uuids = std::collections::BTreeSet::new();
    for line in &lines {
        let mut kept = Vec::new();
        for pair in line.split_whitespace() {
            match pair.split_once('=') {
                Some(("uuid", uuid)) => {
                    uuids.insert(uuid.to_owned());
                }
                Some(_) => kept.push(pair),
                None => bail!("driver identity printed {line:?}"),
            }
        }
        facts.push(kept.join(" "));
    }
    Ok((facts, uuids.len()))
}

/// What differs between two `identity` answers, one entry per field and GPU set.
fn differences(
    theirs: &[String],
    mine: &[String],
    their_uuids: usize,
    my_uuids: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    if their_uuids != my_uuids {
        out.push(format!(
            "distinct UUIDs: upstream {their_uuids}, ours {my_uuids}"
        ));
    }
    if theirs.len() != mine.len() {
        out.push(format!(
            "GPUs: upstream {}, ours {}",
            theirs.len(),
            mine.len()
        ));
    }
    let mut by_field: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for (their_line, my_line) in theirs.iter().zip(mine) {
        let gpu = my_line
            .split_whitespace()
            .next()
            .unwrap_or("gpu=?")
            .to_owned();
        for (their_pair, my_pair) in their_line
            .split_whitespace()
            .zip(my_line.split_whitespace())
        {
            if their_pair != my_pair {
                let key = their_pair
                    .split_once('=')
                    .map_or(their_pair, |(key, _)| key);
                let value = |pair: &str| pair.split_once('=').map_or(pair, |(_, v)| v).to_owned();
                by_field
                    .entry((key.to_owned(), value(their_pair), value(my_pair)))
                    .or_default()
                    .push(gpu.clone());
            }
        }
    }
    for ((key, theirs, mine), gpus) in by_field {
        out.push(format!(
            "{key}: upstream {theirs}, ours {mine} ({})",
            gpus.join(", ")
        ));
    }
    out
}

/// Runs the whole comparison.
pub fn run(sh: &Shell, args: &BenchVsUpstreamArgs) -> Result<()> {
    let root = crate::project_root();
    let work = root.join("target/bench-vs-upstream");
    fs::create_dir_all(&work)?;

    // The topology first: the mock trusts a file's stat only once it is 2 s old, so writing it
    // before the builds keeps the byte comparison out of the steady-state figures.
    let workers = topology::kind_workers(CLUSTER, 4);
    let topology_path = work.join("topology.yaml");
    let text = topology::demo(&workers).to_yaml();
    if fs::read_to_string(&topology_path).ok().as_deref() != Some(text.as_str()) {
        fs::write(&topology_path, text)?;
    }
    let _topology = sh.push_env(node_layout::env::MOCK_TOPOLOGY_CONFIG, &topology_path);

    eprintln!("==> bench-vs-upstream: building both sides");
    let upstream = ensure_upstream(sh, args)?;
    let ours = ensure_ours(sh, &work)?;
    let original = fs::read_to_string(&upstream.original_profile)
        .with_context(|| format!("reading {}", upstream.original_profile.display()))?;
    let memory_total = our_memory_total(&ours.profile)?;
    fs::write(
        &upstream.profile,
        sized_profile(&original, 4, memory_total)?,
    )?;
    eprintln!("    upstream's profile: 4 GPUs (as its setup.sh sizes it), memory total {memory_total} bytes as ours");
    let program = work.join("driver");
    let source = root.join("xtask/bench/driver.c");
    cmd!(sh, "cc -O2 -Wall -o {program} {source} -ldl -lpthread").run()?;
    let go_probe = work.join("go-nvml-probe");
    {
        let _dir = sh.push_dir(root.join("tests/nvml/go"));
        let _flags = sh.push_env("GOFLAGS", "-mod=readonly");
        cmd!(sh, "go build -o {go_probe} ./probe")
            .run()
            .context("go build tests/nvml/go/probe (needs the Go module proxy for go-nvml)")?;
    }
    let python = pynvml_python(sh, &root)?;
    // The floors: what both sides pay before any NVML (process spawn, the Go runtime's start).
    let floor_c = work.join("floor-static");
    let floor_source = root.join("xtask/bench/floor.c");
    cmd!(sh, "cc -O2 -static -o {floor_c} {floor_source}").run()?;
    let floor_go = work.join("floor-go");
    let floor_go_source = root.join("xtask/bench/floor-go/main.go");
    {
        let _dir = sh.push_dir(&work);
        cmd!(sh, "go build -o {floor_go} {floor_go_source}").run()?;
    }
    let sides = [
        Side {
            name: "upstream",
            library: upstream.library.clone(),
            lib_dir: upstream.lib_dir.clone(),
            check_fabric: upstream.check_fabric.clone(),
            profile: upstream.profile.clone(),
        },
        Side {
            name: "ours",
            library: ours.library.clone(),
            lib_dir: ours.lib_dir.clone(),
            check_fabric: ours.check_fabric.clone(),
            profile: ours.profile.clone(),
        },
    ];

    // The identity test.
    eprintln!("==> bench-vs-upstream: identity check");
    let mut mismatches = Vec::new();
    let mut nodes = workers.clone();
    nodes.push(format!("{CLUSTER}-control-plane"));
    for node in &nodes {
        let (theirs, their_uuids) = identity(sh, &program, &sides[0], node)?;
        let (mine, my_uuids) = identity(sh, &program, &sides[1], node)?;
        let differences = differences(&theirs, &mine, their_uuids, my_uuids);
        if differences.is_empty() {
            eprintln!("    {node}: same answers ({my_uuids} UUIDs)");
        } else {
            mismatches.push(format!("{node}: {}", differences.join("; ")));
        }
    }

    let wait = SystemTime::now()
        .duration_since(fs::metadata(&topology_path)?.modified()?)
        .unwrap_or_default();
    if wait < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_secs(3) - wait);
    }

    eprintln!(
        "==> bench-vs-upstream: measuring, interleaved ({} rounds)",
        args.rounds
    );
    let node = workers[2].clone();
    let mut rows = Vec::new();
    let started = Instant::now();

    // Process start → first fabric answer, dlopen, first init, peak RSS.
    let mut start: [BTreeMap<&str, Samples>; 2] = Default::default();
    let per_block = args.starts.div_ceil(args.rounds).max(1);
    let run = |side: &Side, argv: &[String]| driver(sh, &program, side, &node, argv);
    interleaved(args.rounds, &sides, |index, side| {
        let library = side.library.display().to_string();
        let lines = run(side, &["starts".into(), per_block.to_string(), library])?;
        for line in lines {
            let pairs = parse_pairs(&line)?;
            for key in [
                "start_to_fabric_us",
                "dlopen_us",
                "init_us",
                "hwm_kb",
                "base_hwm_kb",
            ] {
                start[index]
                    .entry(key)
                    .or_default()
                    .0
                    .push(figure(&pairs, key, &line)?);
            }
            let increment = pairs["hwm_kb"] - pairs["base_hwm_kb"];
            start[index]
                .entry("increment_kb")
                .or_default()
                .0
                .push(increment);
        }
        Ok(())
    })?;
    // The floor of the start rows: the same spawn of the driver, timed to its main().
    let mut bare: [Samples; 2] = Default::default();
    interleaved(args.rounds, &sides, |index, side| {
        let lines = run(side, &["bares".into(), per_block.to_string()])?;
        for line in lines {
            let pairs = parse_pairs(&line)?;
            bare[index].0.push(figure(&pairs, "start_us", &line)?);
        }
        Ok(())
    })?;
    let pick = |key: &str| -> [Samples; 2] {
        [
            start[0].get(key).cloned().unwrap_or_default(),
            start[1].get(key).cloned().unwrap_or_default(),
        ]
    };
    for (measure, key, unit, target) in [
        (
            format!(
                "process start → first fabric query ({} processes)",
                per_block * args.rounds
            ),
            "start_to_fabric_us",
            "µs",
            0.1,
        ),
        ("dlopen of the library".to_owned(), "dlopen_us", "µs", 0.1),
        (
            "nvmlInit_v2 alone, first call".to_owned(),
            "init_us",
            "µs",
            0.1,
        ),
    ] {
        rows.push(Row::lower(measure, unit, pick(key), target));
    }

    // In-process measures, one process per side per round.
    let mut cycle_mean: [Samples; 2] = Default::default();
    let mut cycle_min: [Samples; 2] = Default::default();
    let mut query: [Samples; 2] = Default::default();
    let mut threads: [Samples; 2] = Default::default();
    interleaved(args.rounds, &sides, |index, side| {
        let library = side.library.display().to_string();
        let run = |argv: &[String]| driver_pairs(sh, &program, side, &node, argv);
        let pairs = run(&["cycle".into(), library.clone(), args.cycles.to_string()])?;
        cycle_mean[index].0.push(pairs["cycle_mean_us"]);
        cycle_min[index].0.push(pairs["cycle_min_us"]);
        let pairs = run(&["queries".into(), library.clone(), args.cycles.to_string()])?;
        query[index].0.push(pairs["round_median_us"]);
        let pairs = run(&[
            "threads".into(),
            library,
            "8".into(),
            args.thread_rounds.to_string(),
        ])?;
        threads[index].0.push(pairs["rounds_per_s"]);
        Ok(())
    })?;
    rows.push(Row::lower(
        format!(
            "init → 4 × (handle, fabric v1, fabric v3, uuid, memory) → shutdown, mean of {}",
            args.cycles
        ),
        "µs",
        cycle_mean,
        0.1,
    ));
    rows.push(Row::lower(
        "the same cycle, fastest iteration",
        "µs",
        cycle_min,
        0.1,
    ));
    rows.push(Row::lower(
        "one round of queries with init held, median",
        "µs",
        query,
        0.1,
    ));
    rows.push(Row::higher(
        format!("8 threads × {} query rounds", args.thread_rounds),
        "rounds/s",
        threads,
        0.1,
    ));
    rows.push(Row::lower(
        "peak RSS after init and one round of queries",
        "kB",
        pick("hwm_kb"),
        f64::INFINITY,
    ));
    rows.push(Row::lower(
        "peak RSS increment of dlopen + init + one round (the library's share)",
        "kB",
        pick("increment_kb"),
        0.2,
    ));

    // Whole processes: check-fabric, pynvml, go-nvml.
    let python_probe = root.join("xtask/bench/pynvml_probe.py");
    let mut wall: [[Samples; 2]; 5] = Default::default();
    let mut rss: [[Samples; 2]; 5] = Default::default();
    interleaved(args.rounds, &sides, |index, side| {
        let commands: [Vec<String>; 5] = [
            vec![side.check_fabric.display().to_string()],
            vec![
                python.display().to_string(),
                python_probe.display().to_string(),
            ],
            vec![go_probe.display().to_string()],
            vec![floor_c.display().to_string()],
            vec![floor_go.display().to_string()],
        ];
        for (which, command) in commands.iter().enumerate() {
            let mut argv = vec!["time".to_owned(), args.processes.to_string()];
            argv.extend(command.iter().cloned());
            let pairs = driver_pairs(sh, &program, side, &node, &argv)?;
            wall[which][index].0.push(pairs["wall_median_us"]);
            rss[which][index].0.push(pairs["maxrss_median_kb"]);
        }
        Ok(())
    })?;
    let [check, pynvml, go, floor_static, floor_empty_go] = wall;
    let [check_rss, _, _, floor_static_rss, _] = rss;
    for (measure, unit, samples, target) in [
        ("check-fabric whole process", "µs", check, 0.1),
        ("check-fabric peak RSS", "kB", check_rss, 0.2),
        (
            "pynvml process (init, 4 × handle/fabric/uuid/memory, shutdown)",
            "µs",
            pynvml,
            f64::INFINITY,
        ),
        ("go-nvml process (the same calls)", "µs", go, 0.1),
        // The floors: the same program on both sides, so their ratio only shows the noise.
        (
            "floor of the start rows: spawn → main() of the driver, no library",
            "µs",
            bare,
            f64::INFINITY,
        ),
        (
            "floor of the process rows: a static C program that does nothing",
            "µs",
            floor_static,
            f64::INFINITY,
        ),
        ("its peak RSS", "kB", floor_static_rss, f64::INFINITY),
        (
            "floor of the go-nvml row: an empty Go program",
            "µs",
            floor_empty_go,
            f64::INFINITY,
        ),
    ] {
        rows.push(Row::lower(measure, unit, samples, target));
    }

    // Library size, stripped.
    let mut sizes = Vec::new();
    for side in &sides {
        let copy = work.join(format!("{}-stripped.so", side.name));
        fs::copy(&side.library, &copy)?;
        cmd!(sh, "strip {copy}").run()?;
        sizes.push(fs::metadata(&copy)?.len() as f64 / 1000.0);
    }
    rows.push(Row::lower(
        "library size, stripped (`strip`)",
        "kB",
        [Samples(vec![sizes[0]]), Samples(vec![sizes[1]])],
        0.1,
    ));

    eprintln!("    measured in {:.0} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "bench-vs-upstream: gb200, 4 GPUs, node {node}, {} interleaved rounds",
        args.rounds
    );
    print_table(&rows);
    if !mismatches.is_empty() {
        bail!(
            "the two libraries disagree on fabric identity, UUID count or memory:\n  {}",
            mismatches.join("\n  ")
        );
    }
    println!("identity check: both libraries answer the same fabric identity, UUID count and memory for {} nodes", nodes.len());
    Ok(())
}

/// Python with the pinned nvidia-ml-py, in the venv the client tests use (created when absent).
fn pynvml_python(sh: &Shell, root: &Path) -> Result<PathBuf> {
    let versions = crate::tools::read_versions()?;
    let version = versions
        .get("peers")
        .and_then(|peers| peers.get("nvidia_ml_py"))
        .and_then(|value| value.as_str())
        .context("manifests/versions.toml has no [peers].nvidia_ml_py")?
        .to_owned();
    let venv = root.join("target").join(format!("nvml-venv-{version}"));
    let python = venv.join("bin/python");
    if !venv.join(".installed").exists() {
        cmd!(sh, "python3 -m venv {venv}")
            .run()
            .context("python3 -m venv (apt-get install python3-venv)")?;
        let spec = format!("nvidia-ml-py=={version}");
        cmd!(
            sh,
            "{python} -m pip install --quiet --disable-pip-version-check {spec}"
        )
        .run()
        .context("pip install nvidia-ml-py (needs PyPI)")?;
        fs::write(venv.join(".installed"), &version)?;
    }
    Ok(python)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_sized_as_setup_sh_does() {
        let profile = "version: 1\nsystem:\n  driver_version: x\ndevice_defaults:\n  memory:\n    total_bytes: 100   # note\n    reserved_bytes: 10\n    free_bytes: 90\n  bar1_memory:\n    total_bytes: 7\n";
        let sized = sized_profile(profile, 4, 50).unwrap();
        assert_eq!(
            sized,
            "version: 1\nsystem:\n  num_devices: 4\n  driver_version: x\ndevice_defaults:\n  memory:\n    total_bytes: 50\n    reserved_bytes: 10\n    free_bytes: 40\n  bar1_memory:\n    total_bytes: 7\n"
        );
        assert!(sized_profile("version: 1\n", 4, 50).is_err());
        assert!(sized_profile("version: 1\nsystem:\n", 4, 50).is_err());
    }

    #[test]
    fn differences_name_the_field_and_the_gpus() {
        let theirs = [
            "gpu=0 clique=1 memory_total=2".to_owned(),
            "gpu=1 clique=1 memory_total=2".to_owned(),
        ];
        let mine = [
            "gpu=0 clique=1 memory_total=3".to_owned(),
            "gpu=1 clique=1 memory_total=3".to_owned(),
        ];
        assert_eq!(
            differences(&theirs, &mine, 2, 2),
            ["memory_total: upstream 2, ours 3 (gpu=0, gpu=1)"]
        );
        assert!(differences(&theirs, &theirs, 2, 2).is_empty());
        assert_eq!(
            differences(&theirs, &theirs, 2, 1),
            ["distinct UUIDs: upstream 2, ours 1"]
        );
    }

    #[test]
    fn driver_lines_parse_and_refuse_garbage() {
        let pairs = parse_pairs("a_us=1.5 b_kb=2").unwrap();
        assert_eq!(pairs["a_us"], 1.5);
        assert_eq!(pairs["b_kb"], 2.0);
        assert!(parse_pairs("oops").is_err());
        assert!(parse_pairs("a=b").is_err());
    }

    #[test]
    fn ratios_are_ours_over_upstream_and_inverted_for_throughput() {
        let mut row = Row {
            measure: String::new(),
            unit: "µs",
            upstream: Samples(vec![10.0, 20.0, 30.0]),
            ours: Samples(vec![1.0, 2.0, 3.0]),
            higher_is_better: false,
            target: 0.1,
        };
        assert_eq!(row.ratio(Samples::median), 0.1);
        assert_eq!(row.ratio(Samples::min), 0.1);
        row.higher_is_better = true;
        assert_eq!(row.ratio(Samples::median), 10.0);
    }
}
