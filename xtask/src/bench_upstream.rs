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

mod build;
mod measure;
mod rows;
mod sides;
mod table;

use std::{
    fs,
    path::Path,
    time::{Duration, Instant, SystemTime},
};

use anyhow::{bail, Context as _, Result};
use xshell::Shell;

use crate::flags::BenchVsUpstreamArgs;
use measure::{differences, identity};
use rows::Bench;
use sides::{Side, Topologies};
use table::print_table;

/// The cluster whose worker names the topology lists: the demo's.
const CLUSTER: &str = harness::names::DEFAULT_CLUSTER;

/// Runs the whole comparison.
pub fn run(sh: &Shell, args: &BenchVsUpstreamArgs) -> Result<()> {
    let root = crate::project_root();
    let work = root.join("target/bench-vs-upstream");
    fs::create_dir_all(&work)?;
    // Both libraries get the files by a path without symlinks, as a node's staged driver tree
    // gives them: `target` may be a symlink (CI's points into its cache), and walking it at each
    // init's stat of the profile and topology cost our cached cycle 0.5 µs (3.2 → 3.7).
    let work = fs::canonicalize(&work).with_context(|| format!("resolving {}", work.display()))?;

    // The topology first: the mock trusts a file's stat only once it is 2 s old, so writing it
    // before the builds keeps the byte comparison out of the steady-state figures.
    let workers = topology::kind_workers(CLUSTER, 4);
    let topologies = write_topology(&work, &workers)?;

    eprintln!("==> bench-vs-upstream: building both sides");
    let sides = build::sides(sh, args, &work, &topologies)?;
    let probes = build::probes(sh, &root, &work)?;

    eprintln!("==> bench-vs-upstream: identity check");
    let mut nodes = workers.clone();
    nodes.push(format!("{CLUSTER}-control-plane"));
    let mismatches = identity_check(sh, &probes.driver, &sides, &nodes)?;
    for file in [&topologies.yaml, &topologies.staged, &sides[1].profile] {
        wait_until_settled(file)?;
    }

    eprintln!(
        "==> bench-vs-upstream: measuring, interleaved ({} rounds)",
        args.rounds
    );
    let bench = Bench {
        sh,
        program: &probes.driver,
        sides: &sides,
        node: &workers[2],
        args,
    };
    let started = Instant::now();
    let starts = bench.starts()?;
    let mut rows = starts.rows;
    rows.extend(bench.in_process_rows()?);
    rows.extend(starts.rss);
    rows.extend(bench.process_rows(&probes, starts.bare)?);
    rows.push(bench.size_row(&work)?);

    eprintln!("    measured in {:.0} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "bench-vs-upstream: gb200, 4 GPUs, node {}, {} interleaved rounds",
        workers[2], args.rounds
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

/// Writes the demo topology for `workers`, as YAML (upstream) and staged (ours, through the
/// encoder the stager uses), unless the files already hold it.
fn write_topology(work: &Path, workers: &[String]) -> Result<Topologies> {
    let demo = topology::demo(workers);
    let topologies = Topologies {
        yaml: work.join("topology.yaml"),
        staged: work.join("topology.bin"),
    };
    for (path, bytes) in [
        (&topologies.yaml, demo.to_yaml().into_bytes()),
        (&topologies.staged, topology::staged::encode(&demo)),
    ] {
        if fs::read(path).ok().as_deref() != Some(bytes.as_slice()) {
            fs::write(path, bytes)?;
        }
    }
    Ok(topologies)
}

/// Both libraries asked for every node's identity; one line per node that differs.
fn identity_check(
    sh: &Shell,
    program: &Path,
    sides: &[Side; 2],
    nodes: &[String],
) -> Result<Vec<String>> {
    let mut mismatches = Vec::new();
    for node in nodes {
        let (theirs, their_uuids) = identity(sh, program, &sides[0], node)?;
        let (mine, my_uuids) = identity(sh, program, &sides[1], node)?;
        let differences = differences(&theirs, &mine, their_uuids, my_uuids);
        if differences.is_empty() {
            eprintln!("    {node}: same answers ({my_uuids} UUIDs)");
        } else {
            mismatches.push(format!("{node}: {}", differences.join("; ")));
        }
    }
    Ok(mismatches)
}

/// Waits until a file (the topology, our profile) is 3 s old, so the mock trusts its stat
/// and the steady-state figures carry no byte comparison.
fn wait_until_settled(topology: &Path) -> Result<()> {
    let age = SystemTime::now()
        .duration_since(fs::metadata(topology)?.modified()?)
        .unwrap_or_default();
    if age < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_secs(3) - age);
    }
    Ok(())
}
