//! check-fabric's choice of fabric entry point through a real `dlopen`: small
//! C builds of an NVML-shaped library (tests/stub/nvml_stub.c, compiled with
//! gcc) that export different sets of symbols. Each entry point answers with
//! a different clique id, so the output says which one check-fabric used.

use std::path::Path;
use std::process::Command;

const CHECK_FABRIC: &str = env!("CARGO_BIN_EXE_check-fabric");

/// Builds `libnvidia-ml.so.1` from the stub with `defines` into `dir`.
fn build_stub(dir: &Path, defines: &[&str]) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stub/nvml_stub.c");
    test_support::checked(
        Command::new("gcc")
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(dir.join("libnvidia-ml.so.1"))
            .args(defines.iter().map(|define| format!("-D{define}")))
            .arg(&source)
            .output(),
        "gcc (needed for this test: apt-get install gcc)",
    );
}

fn check_fabric(defines: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    build_stub(dir.path(), defines);
    check_fabric_on(dir.path())
}

/// Runs check-fabric with nothing but `LD_LIBRARY_PATH=lib_dir`: exit code, stdout, stderr.
fn check_fabric_on(lib_dir: &Path) -> (Option<i32>, String, String) {
    let output = Command::new(CHECK_FABRIC)
        .env_clear()
        .env("LD_LIBRARY_PATH", lib_dir)
        .output()
        .expect("run check-fabric");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn block(uuid_byte: &str, clique: u32, state: &str) -> String {
    let b = uuid_byte.repeat(2);
    format!(
        "Discovered 1 GPU(s)\nGPU 0 (GPU-stub)\n  clusterUuid : {b}{b}{b}{b}-{b}{b}-{b}{b}-{b}{b}-{b}{b}{b}{b}{b}{b}\n  cliqueId    : {clique}\n  state       : {state}\n"
    )
}

#[test]
fn versioned_entry_point_with_v3_is_preferred() {
    let (code, stdout, stderr) = check_fabric(&["WITH_V", "ACCEPT_V3", "ACCEPT_V2"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, block("3", 3, "completed (3)"));
}

#[test]
fn v2_tag_follows_a_version_mismatch() {
    let (code, stdout, stderr) = check_fabric(&["WITH_V", "ACCEPT_V2"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, block("2", 2, "in_progress (2)"));
}

#[test]
fn v1_when_the_versioned_symbol_is_absent() {
    let (code, stdout, stderr) = check_fabric(&[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, block("1", 1, "completed (3)"));
}

#[test]
fn v1_when_the_versioned_symbol_knows_no_tag() {
    let (code, stdout, stderr) = check_fabric(&["WITH_V"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, block("1", 1, "completed (3)"));
}

#[test]
fn version_mismatch_without_v1_is_a_failure() {
    let (code, stdout, stderr) = check_fabric(&["WITH_V", "WITHOUT_V1"]);
    assert_eq!(code, Some(1));
    assert_eq!(stdout, "Discovered 1 GPU(s)\n");
    assert_eq!(stderr, "GetGpuFabricInfo[0]: Argument version mismatch\n");
}

#[test]
fn library_without_nvml_symbols_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("empty.c");
    std::fs::write(&source, "int not_nvml(void) { return 0; }\n").expect("write source");
    let status = Command::new("gcc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.path().join("libnvidia-ml.so.1"))
        .arg(&source)
        .status()
        .expect("gcc is needed for this test (apt-get install gcc)");
    assert!(status.success());
    let (code, _, stderr) = check_fabric_on(dir.path());
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("nvmlInit: libnvidia-ml.so.1 has no nvmlInit_v2 entry point"),
        "{stderr}"
    );
}

#[test]
fn usage_errors_exit_1_not_2() {
    let output = Command::new(CHECK_FABRIC)
        .arg("--bogus")
        .output()
        .expect("run check-fabric");
    assert_eq!(
        output.status.code(),
        Some(1),
        "2 is reserved for NOT SUPPORTED"
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("--bogus"));
    let help = Command::new(CHECK_FABRIC)
        .arg("--help")
        .output()
        .expect("run check-fabric");
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--json"));
}

#[test]
fn a_closed_stdout_is_a_write_error_not_a_kill() {
    // The read end is closed before check-fabric writes: without SIGPIPE ignored (its `main`
    // starts outside Rust's runtime, which would ignore it) the write kills the process.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let status = Command::new(CHECK_FABRIC)
        .arg("--help")
        .stdout(writer)
        .status()
        .expect("run check-fabric");
    assert_eq!(status.code(), Some(0), "{status:?}");
}
