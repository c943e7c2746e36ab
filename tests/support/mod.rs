//! Shared helpers for the integration tests: where the built artifacts are,
//! and how to fail loudly when a prerequisite is missing.
//!
//! The tests never build anything themselves: `cargo xtask ci` (or
//! `cargo build --workspace`) builds the workspace first, and a test whose
//! artifact is missing fails with the command that builds it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod node_software;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The cargo profile directory the running test was built into (`target/debug`).
pub fn profile_dir() -> PathBuf {
    // The test executable lives in `<target>/<profile>/deps/<name>-<hash>`.
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A built workspace artifact (binary or library) in the profile directory.
///
/// Panics with the command to run when it has not been built: a missing
/// artifact is a failed prerequisite, never a silent skip.
pub fn artifact(file_name: &str, package: &str) -> PathBuf {
    let path = profile_dir().join(file_name);
    assert!(
        path.exists(),
        "{} is missing: build it first with `cargo build -p {package}` (or run `cargo xtask ci`)",
        path.display()
    );
    path
}

/// The mock NVML library as cargo builds it (`libnvidia_ml.so`).
pub fn mock_nvml_library() -> PathBuf {
    artifact("libnvidia_ml.so", "mock-nvml")
}

/// A directory holding the mock library under its real name, `libnvidia-ml.so.1`,
/// for `LD_LIBRARY_PATH` and `dlopen("libnvidia-ml.so.1")`.
pub fn mock_nvml_lib_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("cannot create a temp dir: {err}"));
    let link = dir.path().join("libnvidia-ml.so.1");
    std::os::unix::fs::symlink(mock_nvml_library(), &link)
        .unwrap_or_else(|err| panic!("cannot link {}: {err}", link.display()));
    dir
}

/// Fails the test, loudly, when an external program the test drives is absent.
pub fn require_program(program: &str, how_to_install: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    });
    match found {
        Some(path) => path,
        None => panic!("`{program}` is not on PATH: {how_to_install}"),
    }
}

/// Fails the test, loudly, unless it runs as root; `why` says why and gives the command
/// (`… must run as root: sudo -E cargo test …`).
pub fn require_root(why: &str) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned();
    assert_eq!(euid, "0", "{why}");
}

/// A pin from `manifests/versions.toml`: `[section].key`, a string.
pub fn pin(section: &str, key: &str) -> String {
    let path = repo_root().join("manifests/versions.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let table: toml::Table = text
        .parse()
        .unwrap_or_else(|err| panic!("{} is not TOML: {err}", path.display()));
    table
        .get(section)
        .and_then(|it| it.get(key))
        .and_then(toml::Value::as_str)
        .unwrap_or_else(|| panic!("{} has no [{section}].{key} string", path.display()))
        .to_owned()
}

pub use test_support::staged;
pub use test_support::{
    assert_contains, assert_reads_long_name_and_hard_link, bench_runs, checked,
    imex_archive_long_name, permission_bits, IMEX_ARCHIVE_FILES, IMEX_ARCHIVE_HARD_LINK,
    IMEX_ARCHIVE_TOP,
};

/// Runs `command`, which must succeed (see [`checked`]).
pub fn run_ok(command: &mut Command) -> Output {
    let what = format!("{command:?}");
    checked(command.output(), &what)
}

/// The staged `nvidia-smi <args>` of the driver tree `driver` (a staged overlay's `driver/`),
/// run in its own process with only `PATH` and `LD_LIBRARY_PATH` set, as on a node or in a
/// workload container: the library finds the node's profile and MIG state file from its own
/// location.
pub fn staged_nvidia_smi(driver: &Path, args: &[&str]) -> Output {
    Command::new(driver.join("usr/bin/nvidia-smi"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LD_LIBRARY_PATH", driver.join("usr/lib64"))
        .output()
        .unwrap_or_else(|err| panic!("cannot run the staged nvidia-smi: {err}"))
}

/// The MIG device lines `nvidia-smi -L` prints under its first GPU
/// (`  MIG <name>  Device  N: (UUID: MIG-…)`).
pub fn mig_lines_of_gpu_0(list: &str) -> Vec<String> {
    list.lines()
        .skip(1)
        .take_while(|line| line.starts_with("  MIG "))
        .map(str::to_owned)
        .collect()
}

/// The stager's input flags for the shipped GB200 profile and the built mock driver files
/// (`--profile`, `--library`, `--check-fabric`, `--nvidia-smi`); `built` finds an artifact by
/// file and package name ([`artifact`], or a rig's own lookup).
pub fn stager_input_args(built: fn(&str, &str) -> PathBuf) -> [String; 4] {
    let profile = repo_root().join("manifests/helm/nvml-mock/profiles/gb200.yaml");
    [
        format!("--profile={}", profile.display()),
        format!(
            "--library={}",
            built("libnvidia_ml.so", "mock-nvml").display()
        ),
        format!(
            "--check-fabric={}",
            built("check-fabric", "check-fabric").display()
        ),
        format!(
            "--nvidia-smi={}",
            built("nvidia-smi", "nvidia-smi").display()
        ),
    ]
}

/// `manifests/demo/topology.yaml`: the demo topology, as Helm values (`topology.domains`).
pub fn demo_topology_values() -> serde_yaml::Value {
    let path = repo_root().join("manifests/demo/topology.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    serde_yaml::from_str(&text)
        .unwrap_or_else(|err| panic!("{} is not YAML: {err}", path.display()))
}

/// The demo topology as the document the chart stages from those values: `version: 1` and
/// the domains of `manifests/demo/topology.yaml`.
pub fn demo_topology_document() -> String {
    let values = demo_topology_values();
    let mut document = serde_yaml::Mapping::new();
    document.insert("version".into(), 1.into());
    document.insert("domains".into(), values["topology"]["domains"].clone());
    serde_yaml::to_string(&document).unwrap_or_else(|err| panic!("cannot render YAML: {err}"))
}

/// A scratch file of this test process in the profile directory (`target/debug/staged-scratch`),
/// named after `stem` and unique per call (so no test rewrites a file another one is loading).
fn scratch_file(stem: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = profile_dir().join("staged-scratch");
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|err| panic!("cannot create {}: {err}", dir.display()));
    let next = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!("{}-{next}-{stem}.bin", std::process::id()))
}

fn stem_of(path: &Path) -> String {
    path.file_stem().map_or_else(
        || "file".to_owned(),
        |stem| stem.to_string_lossy().into_owned(),
    )
}

/// The YAML profile at `yaml`, staged (the mock library reads only the staged form) into a
/// scratch file, through `test_support::staged` (the stager's encoder).
pub fn staged_profile(yaml: &Path) -> PathBuf {
    test_support::staged::stage_profile(yaml, &scratch_file(&stem_of(yaml)))
}

/// The YAML topology at `yaml`, staged into a scratch file (see [`staged_profile`]).
pub fn staged_topology(yaml: &Path) -> PathBuf {
    test_support::staged::stage_topology(yaml, &scratch_file(&stem_of(yaml)))
}

/// The shipped profile `name` (`manifests/helm/nvml-mock/profiles/<name>.yaml`), staged.
pub fn staged_shipped_profile(name: &str) -> PathBuf {
    staged_profile(&repo_root().join(format!("manifests/helm/nvml-mock/profiles/{name}.yaml")))
}
