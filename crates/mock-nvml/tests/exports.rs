//! The built library's dynamic section: its SONAME and exactly the exports `ffi::EXPORTS` lists.

mod common;
#[path = "../src/ffi/exports.rs"]
mod exports;

use std::process::Command;

#[test]
fn soname_is_libnvidia_ml_so_1() {
    common::require("readelf", "apt-get install binutils");
    let output = Command::new("readelf")
        .arg("-d")
        .arg(common::library())
        .output()
        .expect("run readelf");
    assert!(
        output.status.success(),
        "readelf failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("Library soname: [libnvidia-ml.so.1]"),
        "no libnvidia-ml.so.1 SONAME in:\n{text}"
    );
}

#[test]
fn exports_are_exactly_the_listed_nvml_symbols() {
    common::require("nm", "apt-get install binutils");
    let output = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(common::library())
        .output()
        .expect("run nm");
    assert!(
        output.status.success(),
        "nm failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut exported: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .filter(|name| name.starts_with("nvml"))
        .map(str::to_owned)
        .collect();
    exported.sort();
    let mut listed: Vec<String> = exports::EXPORTS
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    listed.sort();
    assert_eq!(exported, listed);
}
