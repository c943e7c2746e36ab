//! `report --html OUT REPORT.json`: the page of a demo run from its JSON
//! report (the harness's `report::html`), and what a run records for it
//! (its trays, from the topology and the GPU profile).

use std::path::Path;

use anyhow::Context as _;

use crate::flags::ReportArgs;
use crate::report::{html, map, Report};

/// `report`: reads the JSON report, writes the page.
pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let report = Report::read(&args.json)?;
    write_page(&report, &args.html)?;
    if report.trays.is_empty() {
        eprintln!(
            "    {} records no racks (written before reports carried them): the page lists its results only",
            args.json.display()
        );
    }
    println!("{}", args.html.display());
    Ok(())
}

/// Writes the page of `report` at `path`, creating its directory.
fn write_page(report: &Report, path: &Path) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|it| !it.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {} for the page", parent.display()))?;
    }
    std::fs::write(path, html::render(report))
        .with_context(|| format!("writing the page {}", path.display()))
}

/// Records in `report` the trays of `topology`, each with the GPU count of
/// the chart's profile `profile` (unknown when the profile cannot be read).
pub fn lay_out(report: &mut Report, topology: &topology::Topology, profile: &str) {
    report.trays = map::trays(topology, profile_gpus(profile));
}

/// The GPUs a node staged with the chart's profile `name` shows.
fn profile_gpus(name: &str) -> Option<u32> {
    let text = std::fs::read_to_string(harness::profiles::path(name)).ok()?;
    let profile = nvml_profile::Profile::parse(&text).ok()?;
    u32::try_from(profile.device_count()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Outcome, ScenarioResult};

    #[test]
    fn the_page_is_written_from_a_json_report_and_a_bad_one_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut report = Report {
            command: "cargo xtask demo".to_owned(),
            cluster: "cdsim".to_owned(),
            ..Report::default()
        };
        let workers: Vec<String> = (1..=4).map(|it| format!("w{it}")).collect();
        lay_out(
            &mut report,
            &topology::Layout::default().demo(&workers),
            "gb200",
        );
        assert_eq!(report.trays.len(), 4);
        assert_eq!(report.trays[0].gpus, Some(4), "gb200 is 4 GPUs per tray");
        report.scenario(ScenarioResult::new(
            "scenario2",
            Outcome::Skipped("no payload".to_owned()),
            0.0,
        ));
        let json = dir.path().join("run.json");
        std::fs::write(&json, report.to_json()).expect("json");
        let args = ReportArgs {
            html: dir.path().join("out/run.html"),
            json: json.clone(),
        };
        run(&args).expect("page");
        let page = std::fs::read_to_string(&args.html).expect("page");
        assert!(page.contains("data-node=\"w4\""), "{page}");
        assert!(page.contains("no payload"), "{page}");
        let wrong = ReportArgs {
            json: dir.path().join("nope.json"),
            ..args
        };
        let err = format!("{:#}", run(&wrong).expect_err("missing"));
        assert!(
            err.contains("nope.json") && err.contains("--report FILE"),
            "{err}"
        );
        assert_eq!(profile_gpus("no-such-profile"), None);
    }
}
