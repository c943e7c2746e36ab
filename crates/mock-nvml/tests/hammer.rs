//! 16 threads hammer the built library from C (≥ 100k calls) while init/shutdown race, under
//! valgrind memcheck: any memory error fails the test (`--error-exitcode`), as does any query
//! that does not succeed with the expected fabric identity.

mod common;

use std::process::Command;

/// Iterations per thread: 12 query threads × 35 calls + 4 racers × 8 calls per iteration = 452.
const ITERATIONS: u32 = 250;
const MIN_CALLS: u64 = 100_000;

#[test]
fn sixteen_threads_under_valgrind_memcheck() {
    let gcc = common::require("gcc", "apt-get install gcc");
    let valgrind = common::require("valgrind", "apt-get install valgrind");
    let work = tempfile::tempdir().expect("a temp dir");
    let driver = work.path().join("hammer");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/hammer.c");
    test_support::checked(
        Command::new(gcc)
            .args([
                "-std=c11", "-O1", "-g", "-Wall", "-Werror", "-pthread", "-o",
            ])
            .arg(&driver)
            .arg(&source)
            .arg("-ldl")
            .output(),
        "gcc",
    );

    let topology = work.path().join("topology.bin");
    std::fs::write(
        &topology,
        test_support::staged::topology_bytes("version: 1\ndomains:\n  - name: demo\n    uuid: \"00000000-0000-0000-0000-0000000000ab\"\n    cliques:\n      - {id: 0, nodes: [w1, w2]}\n      - {id: 1, nodes: [w3, w4]}\n"),
    )
    .expect("write topology");
    let lib_dir = common::library_dir();
    let profile = test_support::staged::stage_profile(
        &common::repo_root().join("manifests/helm/nvml-mock/profiles/gb200.yaml"),
        &work.path().join("profile.bin"),
    );
    let output = Command::new(valgrind)
        .args([
            "--tool=memcheck",
            "--error-exitcode=99",
            "--track-origins=yes",
            "--quiet",
        ])
        .arg(&driver)
        .args([ITERATIONS.to_string().as_str(), "4", "1", "171"])
        .env("LD_LIBRARY_PATH", lib_dir.path())
        .env("MOCK_NVML_CONFIG", &profile)
        .env("MOCK_TOPOLOGY_CONFIG", &topology)
        .env("NODE_NAME", "w3")
        .env("MOCK_NVML_STRICT", "1")
        .output()
        .expect("run valgrind");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "hammer failed (99 = valgrind found errors):\n{stdout}\n{stderr}"
    );
    let calls: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("calls "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("no call count in output:\n{stdout}"));
    assert!(
        calls >= MIN_CALLS,
        "only {calls} calls, want at least {MIN_CALLS}"
    );
    assert!(
        stderr.trim().is_empty(),
        "valgrind or the library printed:\n{stderr}"
    );
}
