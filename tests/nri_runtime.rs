//! The NRI plugin against containerd's own NRI runtime code.
//!
//! Real peer: `github.com/containerd/nri` `pkg/adaptation`, the package
//! containerd embeds as its NRI runtime side, at two pinned versions
//! (manifests/versions.toml `[peers] nri_old`, `nri_new`): v0.8 behaves like
//! containerd 1.7.26+/2.0/2.1, v0.12 like containerd 2.3. The Go suites live in
//! `tests/nri/{v08,v012}` over the shared `tests/nri/harness` package and drive
//! the built `nvml-mock-nri` binary (over the socket and over fd 3).
//!
//! Needs: Go (>= 1.24) with the module proxy or a warm module cache, root
//! (the harness stages real device nodes with mknod), and the plugin built
//! (`cargo build -p nri-plugin`).

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use integration_tests::{artifact, repo_root, require_program};

/// The two suites share the machine's two cores; running them one at a time
/// keeps the harness's timeout cases (500 ms request timeout) meaningful.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs one Go suite and fails with its output when it fails.
fn go_suite(module: &str, pinned_key: &str, tags: &[&str]) {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let go = require_program(
        "go",
        "install Go >= 1.24 (https://go.dev/dl or the Nix dev shell)",
    );
    let plugin = artifact("nvml-mock-nri", "nri-plugin");
    let dir = repo_root().join("tests/nri").join(module);
    check_pin(&dir, pinned_key);

    let mut command = Command::new(go);
    command.current_dir(&dir).args(["test", "-count=1"]);
    if !tags.is_empty() {
        command.arg(format!("-tags={}", tags.join(",")));
    }
    command.arg("./...").env("NRI_PLUGIN_BIN", &plugin);
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run `go test` in {}: {err}", dir.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "`go test ./...` in {} failed ({}):\n{stdout}\n{stderr}",
        dir.display(),
        output.status
    );
    assert!(
        stdout.contains("ok  \tcdsim.local/nri/"),
        "`go test` in {} ran no package:\n{stdout}",
        dir.display()
    );
}

/// The suite's go.mod must pin the nri version manifests/versions.toml names.
fn check_pin(dir: &Path, pinned_key: &str) {
    let versions = std::fs::read_to_string(repo_root().join("manifests/versions.toml"))
        .unwrap_or_else(|err| panic!("cannot read manifests/versions.toml: {err}"));
    let pinned = versions
        .lines()
        .filter_map(|line| line.split_once('='))
        .find(|(key, _)| key.trim() == pinned_key)
        .map(|(_, value)| value.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| panic!("manifests/versions.toml has no [peers] {pinned_key}"));
    let go_mod = std::fs::read_to_string(dir.join("go.mod"))
        .unwrap_or_else(|err| panic!("cannot read {}/go.mod: {err}", dir.display()));
    let required = format!("github.com/containerd/nri {pinned}");
    assert!(
        go_mod.contains(&required),
        "{}/go.mod does not require {required} (manifests/versions.toml {pinned_key}): update it with `go get {}`",
        dir.display(),
        required.replace(' ', "@")
    );
}

#[test]
fn nri_v0_8_adaptation_drives_the_plugin() {
    go_suite("v08", "nri_old", &[]);
}

#[test]
fn nri_v0_12_adaptation_drives_the_plugin() {
    go_suite("v012", "nri_new", &["nri_no_wasm"]);
}
