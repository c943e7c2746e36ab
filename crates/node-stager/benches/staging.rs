//! Benchmark: how long `nvml-mock-stager --once` takes to stage the tree with
//! 2,048 IMEX channels into an empty overlay, and to restage it unchanged.
//!
//! Runs the real binary (process start, profile parsing, proc-devices
//! rendering, 2,048 + 7 `mknod`s or `stat`s, file copies). Needs root.
//! Prints the median and range of `BENCH_RUNS` runs (default 11) per case.
//!
//! `sudo -E cargo bench -p node-stager --bench staging`

use std::{
    fs,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

const STAGER: &str = env!("CARGO_BIN_EXE_nvml-mock-stager");

const HOST_PROC_DEVICES: &str =
    "Character devices:\n  1 mem\n136 pts\n\nBlock devices:\n  7 loop\n";

fn stage(dir: &Path, stager: &Path) -> Duration {
    let start = Instant::now();
    let mut command = Command::new(stager);
    command
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        .arg("--node-name=worker");
    for (flag, input) in [
        ("overlay-dir", "overlay"),
        ("profile", "config.yaml"),
        ("library", "libnvidia-ml.so.1"),
        ("check-fabric", "check-fabric"),
        ("topology-file", "topology.yaml"),
        ("proc-devices-source", "proc-devices"),
    ] {
        command.arg(format!("--{flag}={}", dir.join(input).display()));
    }
    let output = command
        .args([
            "--imex-channels",
            "--channel-count=2048",
            "--channel-major=240",
            "--caps-major=241",
            "--no-label",
            "--once",
        ])
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", stager.display()));
    let elapsed = start.elapsed();
    assert!(
        output.status.success(),
        "the stager failed (run the benchmark as root):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

fn summary(values: &mut [Duration]) -> String {
    values.sort();
    let ms = |duration: Duration| format!("{:.1}", duration.as_secs_f64() * 1000.0);
    format!(
        "{} [{}-{}]",
        ms(values[values.len() / 2]),
        ms(values[0]),
        ms(values[values.len() - 1])
    )
}

fn main() {
    let runs = integration_tests::bench_runs(11);
    // STAGER_BIN=<path> times another build of the binary (e.g. target/release).
    let stager = std::env::var_os("STAGER_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| STAGER.into());
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("cannot create a temp dir: {err}"));
    let root = dir.path();
    let library = vec![0x7f_u8; 1 << 20];
    fs::write(root.join("libnvidia-ml.so.1"), library).unwrap_or_else(|err| panic!("{err}"));
    fs::write(root.join("check-fabric"), vec![0x7f_u8; 1 << 20])
        .unwrap_or_else(|err| panic!("{err}"));
    fs::write(root.join("config.yaml"), nvml_profile::GB200).unwrap_or_else(|err| panic!("{err}"));
    fs::write(root.join("proc-devices"), HOST_PROC_DEVICES).unwrap_or_else(|err| panic!("{err}"));
    fs::write(
        root.join("topology.yaml"),
        "version: 1\ndomains:\n  - uuid: \"00000000-0000-0000-0000-0000000000ab\"\n    cliques:\n      - id: 0\n        nodes: [worker]\n",
    )
    .unwrap_or_else(|err| panic!("{err}"));

    let mut fresh = Vec::new();
    let mut restage = Vec::new();
    for _ in 0..runs {
        let overlay = root.join("overlay");
        if overlay.exists() {
            fs::remove_dir_all(&overlay).unwrap_or_else(|err| panic!("{err}"));
        }
        fresh.push(stage(root, &stager));
        restage.push(stage(root, &stager));
    }
    println!(
        "{} ({runs} runs per case, median [min-max] ms)",
        stager.display()
    );
    println!();
    println!("| case | wall time |");
    println!("|---|---:|");
    println!(
        "| stage into an empty overlay (2,048 channels) | {} |",
        summary(&mut fresh)
    );
    println!("| restage, nothing changed | {} |", summary(&mut restage));
}
