//! The built library's dynamic section: its SONAME and exactly the exports `ffi::EXPORTS` lists
//! plus the stubs and aliases `build.rs` generates, which cover every function of go-nvml's
//! nvml.h and every `nvml*` symbol upstream's mock exports (`upstream-exports.txt`).

mod common;
#[path = "../src/ffi/exports.rs"]
mod exports;
/// The generated stubs' and aliases' names (`build.rs`).
mod generated {
    include!(concat!(env!("OUT_DIR"), "/stub_names.rs"));
}

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

/// The built library's defined `nvml*` symbols, sorted.
fn exported_nvml_symbols() -> Vec<String> {
    let mut exported: Vec<String> = binutils_on_library("nm", &["-D", "--defined-only"])
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .filter(|name| name.starts_with("nvml"))
        .map(str::to_owned)
        .collect();
    exported.sort();
    exported
}

#[test]
fn exports_are_exactly_the_listed_and_generated_nvml_symbols() {
    let mut listed: Vec<String> = exports::EXPORTS
        .iter()
        .chain(generated::STUBS)
        .chain(generated::ALIASES)
        .map(|name| (*name).to_owned())
        .collect();
    listed.sort();
    assert_eq!(exported_nvml_symbols(), listed);
}

#[test]
fn every_header_function_and_upstream_export_is_exported() {
    let exported = exported_nvml_symbols();
    let upstream: Vec<&str> = include_str!("upstream-exports.txt")
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    assert!(upstream.len() >= 400, "{} upstream exports", upstream.len());
    let missing: Vec<&str> = generated::HEADER_FUNCTIONS
        .iter()
        .copied()
        .chain(upstream)
        .filter(|name| exported.binary_search(&(*name).to_owned()).is_err())
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
}
