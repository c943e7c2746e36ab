//! The built library's dynamic section: its SONAME and exactly the exports `ffi::EXPORTS` lists.

mod common;
#[path = "../src/ffi/exports.rs"]
mod exports;

use std::process::Command;

/// The stdout of the binutils `program` run with `args` on the built library; panics when the
/// tool is missing or fails.
fn binutils_on_library(program: &str, args: &[&str]) -> String {
    common::require(program, "apt-get install binutils");
    let output = test_support::checked(
        Command::new(program)
            .args(args)
            .arg(common::library())
            .output(),
        program,
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn soname_is_libnvidia_ml_so_1() {
    let text = binutils_on_library("readelf", &["-d"]);
    assert!(
        text.contains("Library soname: [libnvidia-ml.so.1]"),
        "no libnvidia-ml.so.1 SONAME in:\n{text}"
    );
}

#[test]
fn exports_are_exactly_the_listed_nvml_symbols() {
    let mut exported: Vec<String> = binutils_on_library("nm", &["-D", "--defined-only"])
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
