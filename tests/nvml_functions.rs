//! The mock library's function list is up to date: `crates/mock-nvml/nvml-functions.txt` and
//! `crates/mock-nvml/tests/upstream-exports.txt` are what `cargo xtask nvml-functions` derives
//! from go-nvml's nvml.h at `[peers] go_nvml` and from upstream's pinned snapshot.
//!
//! Real peers: `go` (`go mod download` fetches go-nvml through the module proxy or finds it in
//! the module cache) and, when present, upstream's snapshot (`CDSIM_PEERS_DIR` or
//! `../shared/peers/`, as `cargo xtask bench-vs-upstream` finds it). The parser is xtask's own
//! (`xtask/src/nvml_functions/parse.rs`, included by path), so nothing is built here.

#[path = "../xtask/src/nvml_functions/parse.rs"]
#[allow(dead_code)]
mod parse;

use std::path::{Path, PathBuf};
use std::process::Command;

use integration_tests::{checked, pin, repo_root, require_program};

fn data_file() -> String {
    let path = repo_root().join("crates/mock-nvml/nvml-functions.txt");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// go-nvml's nvml.h at the pinned version, through `go mod download`.
fn header() -> parse::Header {
    let go = require_program(
        "go",
        "install Go 1.22+ (https://go.dev/doc/install or apt-get install golang)",
    );
    let module = format!("github.com/NVIDIA/go-nvml@{}", pin("peers", "go_nvml"));
    let outside = tempfile::tempdir().unwrap_or_else(|err| panic!("temp dir: {err}"));
    let output = checked(
        Command::new(go)
            .current_dir(outside.path())
            .args(["mod", "download", "-json", &module])
            .output(),
        &format!("go mod download -json {module}"),
    );
    let json: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("go's JSON: {err}"));
    let dir = json["Dir"]
        .as_str()
        .unwrap_or_else(|| panic!("no Dir in {json}"));
    let path = Path::new(dir).join("pkg/nvml/nvml.h");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    parse::parse_header(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[test]
fn the_function_list_matches_go_nvml_s_header() {
    let header = header();
    let wanted = parse::render_header_part(&pin("peers", "go_nvml"), &header.functions);
    let text = data_file();
    let (checked_in, _) = parse::split_data(&text);
    assert!(
        checked_in == wanted,
        "crates/mock-nvml/nvml-functions.txt is out of date with go-nvml's nvml.h: run `cargo xtask nvml-functions`"
    );
}

/// Upstream's snapshot in the peers directories (`CDSIM_PEERS_DIR`, `../shared/peers`, the cache), if it is there.
fn snapshot() -> Option<PathBuf> {
    let file = pin("upstream", "k8s_test_infra_file");
    integration_tests::node_software::peer_dirs()
        .into_iter()
        .map(|dir| dir.join(&file))
        .find(|path| path.is_file())
}

#[test]
fn the_extras_and_upstream_exports_match_upstream_s_snapshot() {
    let Some(snapshot) = snapshot() else {
        eprintln!(
            "SKIPPED: upstream's snapshot is not in CDSIM_PEERS_DIR nor ../shared/peers (the header part is checked by the_function_list_matches_go_nvml_s_header)"
        );
        return;
    };
    let header = header();
    let into = tempfile::tempdir().unwrap_or_else(|err| panic!("temp dir: {err}"));
    checked(
        Command::new("tar")
            .arg("-xzf")
            .arg(&snapshot)
            .arg("-C")
            .arg(into.path())
            .args([
                "--strip-components=1",
                "--wildcards",
                "*/pkg/gpu/mocknvml/bridge/*.go",
            ])
            .output(),
        "tar reading upstream's bridge",
    );
    let bridge = into.path().join("pkg/gpu/mocknvml/bridge");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&bridge)
        .unwrap_or_else(|err| panic!("{}: {err}", bridge.display()))
        .map(|entry| entry.unwrap_or_else(|err| panic!("{err}")).path())
        .filter(|path| {
            let name = path.to_string_lossy();
            name.ends_with(".go") && !name.ends_with("_test.go")
        })
        .map(|path| {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read_to_string(&path).unwrap_or_default())
        })
        .collect();
    files.sort();
    let upstream = parse::parse_bridge(&files, &header.types).unwrap_or_else(|err| panic!("{err}"));
    let name = snapshot
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let extras = parse::render_extras_part(&name, &parse::extras(&header.functions, &upstream));
    let text = data_file();
    assert!(
        parse::split_data(&text).1 == extras,
        "nvml-functions.txt's extras are out of date with {}: run `cargo xtask nvml-functions`",
        snapshot.display()
    );
    let path = repo_root().join("crates/mock-nvml/tests/upstream-exports.txt");
    let exports = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        exports == parse::render_upstream_exports(&name, &upstream),
        "{} is out of date: run `cargo xtask nvml-functions`",
        path.display()
    );
}
