//! A run's JSON report as CI's steps read it and print it into the log (the
//! CI artefact). Below the steps that use it.

use anyhow::Result;
use xshell::Shell;

/// A run's JSON report (`--report`), as CI's steps check it.
pub fn read_report(sh: &Shell, report: &str) -> Result<serde_json::Value> {
    serde_json::from_str(&sh.read_file(report)?)
        .map_err(|err| anyhow::format_err!("{report} is not JSON: {err}"))
}

/// A scenario's `outcome` in a JSON report.
pub fn scenario_outcome(sh: &Shell, report: &str, name: &str) -> Result<String> {
    let doc = read_report(sh, report)?;
    doc["scenarios"]
        .as_array()
        .and_then(|it| it.iter().find(|s| s["name"] == name))
        .and_then(|s| s["outcome"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::format_err!("{report} has no {name} outcome"))
}

/// Prints the report at `path` into the log, or why there is none.
pub fn print_report(sh: &Shell, path: &str) {
    match sh.read_file(path) {
        Ok(text) => eprintln!("--- {path} ---\n{text}\n--- end of {path} ---"),
        Err(err) => eprintln!("(no report at {path}: {err})"),
    }
}
