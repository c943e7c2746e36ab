//! Tidy: rules about the workspace's sources, checked by reading them.
//!
//! - A contract literal (a path, name or variable two parts must agree on)
//!   is spelled only in its owner; everyone else imports the owner's constant.
//!   The few places that must spell it anyway are allow-listed with the reason.
//! - External commands (`cmd!`, `Command::new`) start only in the files
//!   [`RAW_COMMANDS`] lists, each with its reason; everything else goes
//!   through the harness's `Runner`.
//! - No source file over [`MAX_FILE_LINES`] lines before its `#[cfg(test)]`
//!   module, no function outside tests over [`MAX_FN_LINES`] lines. What is
//!   over today is listed in [`FILE_DEBT`] and [`FN_DEBT`]; the lists may
//!   only shrink (an entry that is no longer over fails too).

mod cycles;

use std::fs;
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 80;

/// A contract literal, its owner, and the files allowed to spell it too.
struct Contract {
    literal: &'static str,
    owner: &'static str,
    allowed: &'static [&'static str],
}

const CONTRACTS: &[Contract] = &[
    Contract {
        literal: "/var/run/nri/nri.sock",
        owner: "crates/node-layout/src/facts.rs",
        allowed: &[
            // Its doc comment names the socket the smoke check expects.
            "crates/node-image/src/smoke.rs",
            // This file.
            "xtask/src/tidy.rs",
        ],
    },
    Contract {
        literal: "nvml-mock-compute-domain",
        owner: "crates/harness/src/names.rs",
        allowed: &[
            // topology cannot depend on xtask: its doc example.
            "crates/topology/src/lib.rs",
            "xtask/src/tidy.rs",
        ],
    },
    Contract {
        literal: "\"MOCK_NVML_CONFIG\"",
        owner: "crates/node-layout/src/env.rs",
        allowed: &MOCK_ENV_ALLOWED,
    },
    Contract {
        literal: "\"MOCK_TOPOLOGY_CONFIG\"",
        owner: "crates/node-layout/src/env.rs",
        allowed: &MOCK_ENV_ALLOWED,
    },
    Contract {
        literal: "/dev/nvidia-caps-imex-channels",
        owner: "crates/node-layout/src/paths.rs",
        allowed: &[
            // xtask's in-pod path for scenario 1: one whole path as a
            // const, which node-layout's two parts cannot form at compile time.
            "crates/harness/src/names.rs",
            // The in-pod shell command of scenario 4's workload (a literal
            // inside a JSON manifest).
            "crates/harness/src/scenario4/objects.rs",
            "xtask/src/tidy.rs",
        ],
    },
];

/// Only this test spells the library's variables outside their owner.
const MOCK_ENV_ALLOWED: [&str; 1] = ["xtask/src/tidy.rs"];

/// Where non-test code may start an external command itself, as a path or
/// a folder prefix, with the reason; the rest of the code goes through the
/// harness's `Runner`, which the unit tests script.
const RAW_COMMANDS: &[(&str, &str)] = &[
    ("crates/harness/src/runner.rs", "the Runner itself"),
    (
        "crates/harness/src/scenario4/image.rs",
        "builds NVIDIA's DRA driver with go, a build recipe",
    ),
    (
        "crates/harness/src/gpu_stack/",
        "builds NVIDIA's device plugin and NFD with go, a build recipe",
    ),
    (
        "crates/node-image/src/",
        "the offline node image's build recipes",
    ),
    (
        "crates/build-support/",
        "a build script asking the C compiler for its unwinder",
    ),
    (
        "crates/imex-shim/src/main.rs",
        "execs the real daemon, its job",
    ),
    (
        "crates/node-stager/src/smi.rs",
        "execs the node's staged nvidia-smi, its job",
    ),
    (
        "crates/imex-double/src/bin/daemon.rs",
        "the double daemonizes by re-running itself",
    ),
    (
        "xtask/src/bench_upstream/",
        "builds both sides and times processes",
    ),
    (
        "xtask/src/conformance.rs",
        "builds both sides and runs the runner once per side and profile",
    ),
    (
        "xtask/src/upstream_mock.rs",
        "builds upstream's mock from its snapshot with its own make",
    ),
    ("xtask/src/ci.rs", "the CI driver: builds, tests, sandboxes"),
    ("xtask/src/ci/", "the CI driver's steps"),
    (
        "xtask/src/faults.rs",
        "runs the xtask binary as a user does",
    ),
    (
        "xtask/src/faults/",
        "runs the xtask binary as a user does, and faults the nodes with docker",
    ),
    ("xtask/src/images.rs", "cargo builds the image artifacts"),
    (
        "xtask/src/doctor.rs",
        "host probes before any cluster exists",
    ),
    ("xtask/src/tools.rs", "installs and versions the tools"),
    ("xtask/src/tools/", "the Docker engine and host quirks"),
    (
        "xtask/src/nvml_functions.rs",
        "a generator: go mod download finds nvml.h, tar reads upstream's snapshot",
    ),
];

/// Files over [`MAX_FILE_LINES`] today (to be split).
const FILE_DEBT: &[&str] = &[];

/// Functions over [`MAX_FN_LINES`] today, as `file:name` (to be split).
const FN_DEBT: &[&str] = &[];

/// Every `.rs` file below the workspace root, as (relative path, text).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            if path.is_dir() {
                walk(&path, root, out);
            } else if name.ends_with(".rs") {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                if let Ok(text) = fs::read_to_string(&path) {
                    out.push((rel.to_string_lossy().replace('\\', "/"), text));
                }
            }
        }
    }
    let root: PathBuf = crate::project_root();
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// Integration tests, benches, fuzz targets and test-only files.
fn is_test_file(path: &str) -> bool {
    path.starts_with("tests/")
        || path.starts_with("fuzz/")
        || path.contains("/tests/")
        || path.contains("/benches/")
        || path.ends_with("/tests.rs")
        || path.ends_with("_tests.rs")
}

/// The lines before the file's top-level `#[cfg(test)]` module (other
/// attributes may stand between the two).
fn non_test_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i] == "#[cfg(test)]"
                && lines[i + 1..]
                    .iter()
                    .find(|next| !next.starts_with("#["))
                    .is_some_and(|next| next.starts_with("mod ") || next.starts_with("pub mod "))
        })
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Functions longer than [`MAX_FN_LINES`]: (name, first line, length).
fn long_functions(lines: &[&str]) -> Vec<(String, usize, usize)> {
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let Some(at) = trimmed.find("fn ") else {
            continue;
        };
        let head = &trimmed[..at];
        let words_ok = head.split_whitespace().all(|it| {
            ["pub", "async", "const", "unsafe", "extern"].contains(&it) || it.starts_with("pub(")
        });
        if !words_ok || trimmed.starts_with("//") {
            continue;
        }
        let name: String = trimmed[at + 3..]
            .chars()
            .take_while(|it| it.is_alphanumeric() || *it == '_')
            .collect();
        let Some(open) = (start..lines.len()).find(|&i| {
            let it = lines[i].trim_end();
            it.ends_with('{') || it.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close = (open + 1..lines.len()).find(|&i| {
            let it = lines[i];
            it.len() > indent && it[..indent].trim().is_empty() && it[indent..].starts_with('}')
        });
        let length = close.map_or(lines.len(), |it| it + 1) - start;
        if length > MAX_FN_LINES {
            found.push((name, start + 1, length));
        }
    }
    found
}

#[test]
fn contract_literals_are_spelled_only_by_their_owner() {
    let mut problems = Vec::new();
    for (path, text) in sources() {
        // Tests spell a contract's value on purpose (they pin it, or drive a
        // binary as its user does): only non-test code must import it.
        if is_test_file(&path) {
            continue;
        }
        for contract in CONTRACTS {
            if path == contract.owner || contract.allowed.contains(&path.as_str()) {
                continue;
            }
            for (index, line) in non_test_lines(&text).iter().enumerate() {
                if line.contains(contract.literal) {
                    problems.push(format!(
                        "{path}:{}: spells {} (owner: {}; import its constant)",
                        index + 1,
                        contract.literal,
                        contract.owner
                    ));
                }
            }
        }
    }
    for contract in CONTRACTS {
        for allowed in contract
            .allowed
            .iter()
            .filter(|it| **it != "xtask/src/tidy.rs")
        {
            let spelled = sources().iter().any(|(path, text)| {
                path == allowed
                    && !is_test_file(path)
                    && non_test_lines(text)
                        .iter()
                        .any(|it| it.contains(contract.literal))
            });
            if !spelled && sources().iter().any(|(path, _)| path == allowed) {
                problems.push(format!(
                    "{allowed}: no longer spells {}: remove it from the allow-list",
                    contract.literal
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn files_and_functions_stay_short() {
    let mut problems = Vec::new();
    for (path, text) in sources() {
        let lines = non_test_lines(&text);
        let over = lines.len() > MAX_FILE_LINES && !is_test_file(&path);
        match (over, FILE_DEBT.contains(&path.as_str())) {
            (true, false) => problems.push(format!(
                "{path}: {} lines before its tests (at most {MAX_FILE_LINES}): split it",
                lines.len()
            )),
            (false, true) => problems.push(format!(
                "{path}: no longer over {MAX_FILE_LINES} lines: remove it from FILE_DEBT"
            )),
            _ => {}
        }
        if is_test_file(&path) {
            continue;
        }
        let long = long_functions(&lines);
        for (name, line, length) in &long {
            if !FN_DEBT.contains(&format!("{path}:{name}").as_str()) {
                problems.push(format!(
                    "{path}:{line}: fn {name} is {length} lines (at most {MAX_FN_LINES}): split it"
                ));
            }
        }
        for debt in FN_DEBT
            .iter()
            .filter(|it| it.starts_with(&format!("{path}:")))
        {
            let name = &debt[path.len() + 1..];
            if !long.iter().any(|(it, _, _)| it == name) {
                problems.push(format!(
                    "{debt}: no longer over {MAX_FN_LINES} lines: remove it from FN_DEBT"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn external_commands_start_only_where_allowed() {
    let allowed = |path: &str| RAW_COMMANDS.iter().any(|(it, _)| path.starts_with(it));
    let mut problems = Vec::new();
    let mut used = vec![false; RAW_COMMANDS.len()];
    for (path, text) in sources() {
        if is_test_file(&path) || path == "xtask/src/tidy.rs" {
            continue;
        }
        for (index, line) in non_test_lines(&text).iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if !(code.contains("cmd!(") || code.contains("Command::new(")) {
                continue;
            }
            if allowed(&path) {
                for (slot, (it, _)) in used.iter_mut().zip(RAW_COMMANDS) {
                    *slot |= path.starts_with(it);
                }
            } else {
                problems.push(format!(
                    "{path}:{}: starts an external command: go through harness's Runner (or add the file to RAW_COMMANDS with the reason)",
                    index + 1
                ));
            }
        }
    }
    for ((path, _), used) in RAW_COMMANDS.iter().zip(used) {
        if !used {
            problems.push(format!(
                "{path}: starts no external command any more: remove it from RAW_COMMANDS"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
