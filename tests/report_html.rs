//! The run report's page (`harness::report::html`) as a browser shows it;
//! real peer: Debian's Chromium, headless (`--dump-dom`, `--screenshot`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use harness::report::{Outcome, Report, ScenarioResult, StepStatus, Tray, WorkerDetail};
use integration_tests::require_program;

/// Two racks of two trays, one clique each per tray pair; a failed, a skipped and a passed row.
fn sample() -> Report {
    let tray = |node: &str, rack: u32, clique: u32| Tray {
        node: node.to_owned(),
        rack,
        clique,
        cluster_uuid: format!("00000000-0000-0000-0000-0000000{rack:03x}ab"),
        gpus: Some(4),
    };
    let detail = |node: &str, detail: &str, passed| WorkerDetail {
        node: node.to_owned(),
        pod: format!("pod-{node}"),
        detail: detail.to_owned(),
        passed,
    };
    let mut report = Report {
        command: "cargo xtask demo --racks 2 --trays 2 --report r.json".to_owned(),
        cluster: "nvml-mock-compute-domain".to_owned(),
        trays: vec![
            tray("worker", 0, 0),
            tray("worker2", 0, 1),
            tray("worker3", 1, 0),
            tray("worker4", 1, 1),
        ],
        compute_domain: vec!["worker".to_owned(), "worker3".to_owned()],
        total_seconds: 312.4,
        ..Report::default()
    };
    report.step("cluster", Duration::from_secs(95), StepStatus::Ok);
    report.step("install", Duration::from_secs(40), StepStatus::Ok);
    let ones = ["worker", "worker2", "worker3"]
        .iter()
        .map(|node| detail(node, "4/4 GPUs clique ok, state completed", true));
    let mut workers: Vec<WorkerDetail> = ones.collect();
    workers.push(detail(
        "worker4",
        "GPU 2 reports clique 7 <expected 1>",
        false,
    ));
    report.scenario(ScenarioResult {
        workers,
        timings: vec![("exec".to_owned(), 2.5)],
        ..ScenarioResult::new(
            "scenario1",
            Outcome::Failed("worker4: GPU 2 reports clique 7".to_owned()),
            6.2,
        )
    });
    report.scenario(ScenarioResult::new(
        "scenario2",
        Outcome::Skipped("no nvidia-imex payload: pass --imex PATH".to_owned()),
        0.0,
    ));
    report.scenario(ScenarioResult {
        workers: vec![
            detail("worker", "daemon pod labelled cliqueID=0", true),
            detail("worker3", "daemon pod labelled cliqueID=0", true),
        ],
        ..ScenarioResult::new("scenario4", Outcome::Passed, 88.0)
    });
    report
}

fn chromium(args: &[&str], page: &Path) -> String {
    let program = require_program(
        "chromium",
        "install Debian's Chromium: `apt-get install -y chromium`",
    );
    let out = Command::new(program)
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|err| panic!("cannot run chromium: {err}"));
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the element with `attr`=`value`, up to its closing `tag`.
fn element<'a>(dom: &'a str, attr: &str, value: &str, tag: &str) -> &'a str {
    let needle = format!("{attr}=\"{value}\"");
    let start = dom
        .find(&needle)
        .unwrap_or_else(|| panic!("no element with {needle} in the DOM:\n{dom}"));
    let rest = &dom[start..];
    let end = rest.find(&format!("</{tag}>")).unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn chromium_shows_racks_cliques_trays_and_the_reasons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("report.html");
    std::fs::write(&page, harness::report::html::render(&sample())).expect("page");
    let dom = chromium(&["--dump-dom"], &page);
    for heading in [
        "Rack 0<span class=\"domain\">NVLink domain <code>00000000-0000-0000-0000-0000000000ab</code>",
        "Rack 1<span class=\"domain\">NVLink domain <code>00000000-0000-0000-0000-0000000001ab</code>",
    ] {
        assert!(dom.contains(heading), "no heading {heading:?}:\n{dom}");
    }
    let rack1 = element(&dom, "id", "rack-1", "section");
    let clique1 = element(rack1, "data-clique", "1", "article");
    assert!(
        clique1.contains("data-node=\"worker4\""),
        "worker4 is not in rack 1's clique 1:\n{rack1}"
    );
    let worker4 = element(&dom, "data-node", "worker4", "article");
    assert!(
        worker4.contains("GPU 2 reports clique 7 &lt;expected 1&gt;"),
        "worker4's failed row lacks its reason:\n{worker4}"
    );
    assert!(worker4.contains("no nvidia-imex payload: pass --imex PATH"));
    assert_eq!(worker4.matches("class=\"gpu\"").count(), 4, "{worker4}");
    let worker3 = element(&dom, "data-node", "worker3", "article");
    assert!(worker3.contains("ComputeDomain"), "{worker3}");
    assert!(!worker4.contains("ComputeDomain"), "{worker4}");
    let shot = dir.path().join("report.png");
    chromium(
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1400,900",
        ],
        &page,
    );
    let size = std::fs::metadata(&shot).map(|it| it.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "the screenshot {} is {size} bytes",
        shot.display()
    );
    if let Some(keep) = std::env::var_os("CDSIM_REPORT_SCREENSHOT") {
        std::fs::copy(&shot, &keep).expect("keeping the screenshot");
    }
}
