//! A run's JSON report as CI's steps read it and print it into the log (the
//! CI artefact), and its page as a browser shows it. Below the steps that use
//! it.

use anyhow::Result;
use xshell::{cmd, Shell};

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

/// The page `demo --report` wrote beside `report` (`.html`), opened in
/// headless Chromium by `tests/report_html.rs`'s
/// `chromium_shows_the_page_of_a_ci_run` and checked against the report and
/// `layout`: each rack with its cliques and trays, each tray's GPUs and a row
/// per scenario result. Its screenshot lands beside the report (`.png`).
/// `--workspace`, as the build step: the test binary is built already.
pub fn check_page(sh: &Shell, report: &str, layout: &topology::Layout) -> Result<()> {
    let json = crate::project_root().join(report);
    let expected = format!(
        "racks={},trays={},cliques={}",
        layout.racks(),
        layout.trays(),
        layout.cliques_per_rack()
    );
    let _report = sh.push_env("CDSIM_REPORT", &json);
    let _layout = sh.push_env("CDSIM_REPORT_LAYOUT", &expected);
    cmd!(
        sh,
        "cargo test --workspace --test report_html -- --ignored --exact chromium_shows_the_page_of_a_ci_run"
    )
    .run()?;
    eprintln!(
        "    ✓ the page {} shows {expected} in Chromium; screenshot {}",
        json.with_extension("html").display(),
        json.with_extension("png").display()
    );
    Ok(())
}
