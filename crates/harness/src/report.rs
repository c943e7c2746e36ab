//! The run report: per-step wall times and each scenario's outcome with
//! per-worker details, written as JSON and as JUnit XML beside it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod files;
pub mod html;
pub mod map;
mod markup;

use markup::escape as xml;

/// How a scenario ended.
///
/// Every consumer (the summary, the JUnit writer, [`Report::failed`]) goes
/// through [`Outcome::verdict`] and [`Outcome::label`], so a new variant (e.g.
/// a pass that relied on a named test double) needs only those two arms and
/// its serde name; nothing compares strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "lowercase")]
pub enum Outcome {
    /// Every assertion held.
    Passed,
    /// Every assertion held against the IMEX test double (`crates/imex-double`),
    /// not NVIDIA's nvidia-imex: it proves the orchestration, not the daemon.
    #[serde(rename = "passed (IMEX test double)")]
    PassedTestDouble,
    /// An assertion failed or an error stopped it.
    Failed(String),
    /// It could not run (never counted as passed).
    Skipped(String),
}

/// The three ways a result counts, whatever its variant's detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Counts as passed.
    Passed,
    /// Counts as failed: the run fails.
    Failed,
    /// Counts as skipped: neither passed nor failed.
    Skipped,
}

impl Outcome {
    /// How this outcome counts.
    pub fn verdict(&self) -> Verdict {
        match self {
            Outcome::Passed | Outcome::PassedTestDouble => Verdict::Passed,
            Outcome::Failed(_) => Verdict::Failed,
            Outcome::Skipped(_) => Verdict::Skipped,
        }
    }

    /// One line for the summary: `PASSED`, `FAILED: …`, `SKIPPED: …`.
    pub fn label(&self) -> String {
        match self {
            Outcome::Passed => "PASSED".to_owned(),
            Outcome::PassedTestDouble => {
                "PASSED (IMEX test double, not NVIDIA's nvidia-imex)".to_owned()
            }
            Outcome::Failed(reason) => format!("FAILED: {}", first_line(reason)),
            Outcome::Skipped(reason) => format!("SKIPPED: {}", first_line(reason)),
        }
    }

    /// The reason, for failures and skips.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Passed | Outcome::PassedTestDouble => None,
            Outcome::Failed(reason) | Outcome::Skipped(reason) => Some(reason),
        }
    }
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "error", rename_all = "lowercase")]
pub enum StepStatus {
    /// It did what it had to.
    Ok,
    /// It failed with this error; the run stopped there (or, for a check
    /// step such as the NetworkPolicy probe, the run goes on and fails at the end).
    Failed(String),
}

impl StepStatus {
    /// The status of a step that returned `res`.
    pub fn of<T>(res: &anyhow::Result<T>) -> StepStatus {
        match res {
            Ok(_) => StepStatus::Ok,
            Err(err) => StepStatus::Failed(format!("{err:#}")),
        }
    }

    /// One line for the summary.
    pub fn label(&self) -> String {
        match self {
            StepStatus::Ok => "ok".to_owned(),
            StepStatus::Failed(error) => format!("FAILED: {}", first_line(error)),
        }
    }
}

/// What one worker showed in a scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerDetail {
    /// The node.
    pub node: String,
    /// The pod it ran in.
    pub pod: String,
    /// What was checked and seen.
    pub detail: String,
    /// Whether this worker passed.
    pub passed: bool,
}

/// One scenario's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// `scenario1`, `scenario2`, `scenario3`.
    pub name: String,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Per-worker details.
    pub workers: Vec<WorkerDetail>,
    /// Named timings inside the scenario (seconds).
    pub timings: Vec<(String, f64)>,
}

impl ScenarioResult {
    /// The result of `name`, ended with `outcome` after `seconds`, without
    /// per-worker details or timings (the scenario adds those).
    pub fn new(name: &str, outcome: Outcome, seconds: f64) -> ScenarioResult {
        ScenarioResult {
            name: name.to_owned(),
            outcome,
            seconds,
            workers: vec![],
            timings: vec![],
        }
    }
}

/// What an nvidia-imex payload is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PayloadIdentity {
    /// NVIDIA's redistributable (an archive, or a tree extracted from one).
    Nvidia {
        /// The payload's path.
        path: String,
        /// The version in the archive's name (`595.91.07`), when it has one.
        version: Option<String>,
        /// sha256 of the archive, or of `usr/bin/nvidia-imex` for a tree.
        sha256: String,
    },
    /// The IMEX test double's payload directory (`cargo xtask imex-double-payload`).
    TestDouble {
        /// The payload's path.
        path: String,
    },
}

/// One step's wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step name.
    pub name: String,
    /// Wall time in seconds.
    pub seconds: f64,
    /// How it ended.
    #[serde(flatten)]
    pub status: StepStatus,
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// The command that ran.
    pub command: String,
    /// The kind cluster or kube context.
    pub cluster: String,
    /// Steps in order.
    pub steps: Vec<Step>,
    /// Scenarios in order.
    pub scenarios: Vec<ScenarioResult>,
    /// Notes (e.g. NetworkPolicy enforcement).
    pub notes: Vec<String>,
    /// The nvidia-imex payload the workload image was built with, when this
    /// run built it (`--imex`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub imex_payload: Option<PayloadIdentity>,
    /// Every tray's rack, clique and NVLink domain, as the run laid them out
    /// (the rack map, [`map`]); absent from reports written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trays: Vec<Tray>,
    /// The trays of scenario 4's ComputeDomain, when scenario 4 created one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute_domain: Vec<String>,
    /// Total wall time in seconds.
    pub total_seconds: f64,
}

/// One compute tray as the run laid it out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tray {
    /// The node (a kind worker).
    pub node: String,
    /// Its rack (0-based), also its NVLink domain's index.
    pub rack: u32,
    /// Its clique id in the rack's domain.
    pub clique: u32,
    /// The cluster uuid the domain's GPUs report.
    pub cluster_uuid: String,
    /// Its GPUs, when the run knew its profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
}

/// The files [`Report::write`] puts beside the JSON report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beside {
    /// The JUnit XML (`.xml`).
    pub xml: PathBuf,
    /// The page of the racks and results (`.html`, the `html` module's `render`).
    pub html: PathBuf,
}

impl Report {
    /// Records a step (scenarios are not steps: see [`Report::scenario`]).
    pub fn step(&mut self, name: &str, took: Duration, status: StepStatus) {
        self.steps.push(Step {
            name: name.to_owned(),
            seconds: round(took),
            status,
        });
    }

    /// Records a scenario's result.
    pub fn scenario(&mut self, result: ScenarioResult) {
        self.scenarios.push(result);
    }

    /// What failed, in order: `scenario <name>` and `step <name>` entries.
    pub fn failures(&self) -> Vec<String> {
        let steps = self
            .steps
            .iter()
            .filter(|it| matches!(it.status, StepStatus::Failed(_)))
            .map(|it| format!("step `{}`", it.name));
        let scenarios = self
            .scenarios
            .iter()
            .filter(|it| it.outcome.verdict() == Verdict::Failed)
            .map(|it| it.name.clone());
        scenarios.chain(steps).collect()
    }

    /// Whether any scenario or step failed.
    pub fn failed(&self) -> bool {
        !self.failures().is_empty()
    }

    /// The summary's last line: what failed, or what passed and what was skipped.
    pub fn verdict_line(&self) -> String {
        let failures = self.failures();
        if !failures.is_empty() {
            return format!("FAILED: {}", failures.join(", "));
        }
        let count = |verdict| {
            self.scenarios
                .iter()
                .filter(|it| it.outcome.verdict() == verdict)
                .map(|it| it.name.as_str())
                .collect::<Vec<_>>()
        };
        let (passed, skipped) = (count(Verdict::Passed), count(Verdict::Skipped));
        let mut line = if passed.is_empty() {
            "ok: no scenario ran".to_owned()
        } else {
            format!("PASSED: {}", passed.join(", "))
        };
        if !skipped.is_empty() {
            line.push_str(&format!("; SKIPPED (not passed): {}", skipped.join(", ")));
        }
        line
    }

    /// A report from its JSON document (one [`Report::to_json`] wrote, or an
    /// older one: the fields added since are optional).
    pub fn from_json(text: &str) -> serde_json::Result<Report> {
        serde_json::from_str(text)
    }

    /// Reads the JSON report at `path`; the error names the file and what to pass.
    pub fn read(path: &Path) -> anyhow::Result<Report> {
        const WHAT: &str =
            "pass the JSON report `cargo xtask demo --report FILE` wrote (not its .xml or .html)";
        let text = std::fs::read_to_string(path).map_err(|err| {
            anyhow::format_err!("cannot read the report {}: {err}: {WHAT}", path.display())
        })?;
        Report::from_json(&text).map_err(|err| {
            anyhow::format_err!(
                "{} is not a cdsim JSON report ({err}): {WHAT}",
                path.display()
            )
        })
    }

    /// The JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"))
    }

    /// JUnit XML: one testsuite; each step and each scenario is one test case
    /// (a scenario is never also a step).
    pub fn to_junit(&self) -> String {
        let failures = self.failures().len();
        let skipped = self
            .scenarios
            .iter()
            .filter(|it| it.outcome.verdict() == Verdict::Skipped)
            .count();
        let tests = self.steps.len() + self.scenarios.len();
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"cdsim {}\" tests=\"{tests}\" failures=\"{failures}\" skipped=\"{skipped}\" time=\"{:.3}\">\n",
            xml(&self.command),
            self.total_seconds
        );
        for step in &self.steps {
            out.push_str(&format!(
                "  <testcase classname=\"step\" name=\"{}\" time=\"{:.3}\">",
                xml(&step.name),
                step.seconds
            ));
            if let StepStatus::Failed(error) = &step.status {
                out.push_str(&format!("<failure message=\"{}\"/>", xml(error)));
            }
            out.push_str("</testcase>\n");
        }
        for scenario in &self.scenarios {
            out.push_str(&format!(
                "  <testcase classname=\"scenario\" name=\"{}\" time=\"{:.3}\">",
                xml(&scenario.name),
                scenario.seconds
            ));
            let reason = scenario.outcome.reason().unwrap_or_default();
            match scenario.outcome.verdict() {
                Verdict::Passed if scenario.outcome == Outcome::PassedTestDouble => out.push_str(
                    "<properties><property name=\"imex\" value=\"IMEX test double, not NVIDIA's nvidia-imex\"/></properties>",
                ),
                Verdict::Passed => {}
                Verdict::Failed => out.push_str(&format!("<failure message=\"{}\"/>", xml(reason))),
                Verdict::Skipped => {
                    out.push_str(&format!("<skipped message=\"{}\"/>", xml(reason)))
                }
            }
            let details: Vec<String> = scenario
                .workers
                .iter()
                .map(|it| format!("{} ({}): {}", it.node, it.pod, it.detail))
                .collect();
            if !details.is_empty() {
                out.push_str(&format!(
                    "<system-out>{}</system-out>",
                    xml(&details.join("\n"))
                ));
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("</testsuite>\n</testsuites>\n");
        out
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Seconds with millisecond precision.
pub fn round(took: Duration) -> f64 {
    (took.as_secs_f64() * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::assert_contains;

    fn sample() -> Report {
        let mut report = Report {
            command: "demo".to_owned(),
            cluster: "c".to_owned(),
            ..Report::default()
        };
        report.step("cluster", Duration::from_millis(1500), StepStatus::Ok);
        report.scenarios.push(ScenarioResult {
            workers: vec![WorkerDetail {
                node: "c-worker".to_owned(),
                pod: "p".to_owned(),
                detail: "4/4 GPUs clique=0 <ok>".to_owned(),
                passed: true,
            }],
            ..ScenarioResult::new("scenario1", Outcome::Passed, 2.0)
        });
        report.scenarios.push(ScenarioResult::new(
            "scenario2",
            Outcome::Skipped("no nvidia-imex payload".to_owned()),
            0.0,
        ));
        report
    }

    #[test]
    fn json_carries_outcomes_and_reasons() {
        let doc: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
        assert_eq!(doc["steps"][0]["seconds"], 1.5);
        assert_eq!(doc["steps"][0]["status"], "ok");
        assert_eq!(doc["scenarios"][0]["outcome"], "passed");
        assert_eq!(doc["scenarios"][1]["outcome"], "skipped");
        assert_eq!(doc["scenarios"][1]["reason"], "no nvidia-imex payload");
        assert_eq!(doc["scenarios"][0]["workers"][0]["node"], "c-worker");
        assert!(!sample().failed(), "a skip is not a failure");
    }

    #[test]
    fn junit_counts_and_escapes() {
        let mut report = sample();
        report.scenarios.push(ScenarioResult::new(
            "scenario3",
            Outcome::Failed("worker3 said \"clique 1\" & <not 99>".to_owned()),
            1.0,
        ));
        assert!(report.failed());
        assert_eq!(report.verdict_line(), "FAILED: scenario3");
        let xml = report.to_junit();
        assert_contains(&xml, "tests=\"4\" failures=\"1\" skipped=\"1\"");
        assert_contains(&xml, "<skipped message=\"no nvidia-imex payload\"/>");
        assert_contains(&xml, "&quot;clique 1&quot; &amp; &lt;not 99&gt;");
        assert_contains(&xml, "4/4 GPUs clique=0 &lt;ok&gt;");
    }

    #[test]
    fn a_pass_against_the_double_is_named_so() {
        let mut report = sample();
        report.scenarios[1].outcome = Outcome::PassedTestDouble;
        report.imex_payload = Some(PayloadIdentity::TestDouble {
            path: "/p".to_owned(),
        });
        let doc: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert_eq!(doc["scenarios"][1]["outcome"], "passed (IMEX test double)");
        assert_eq!(doc["imex_payload"]["kind"], "test_double");
        assert!(!report.failed());
        let xml = report.to_junit();
        assert_contains(&xml, "IMEX test double, not NVIDIA");
        assert_contains(&xml, "failures=\"0\" skipped=\"0\"");
        let nvidia = PayloadIdentity::Nvidia {
            path: "/a.tar.xz".to_owned(),
            version: Some("595.91.07".to_owned()),
            sha256: "ab".to_owned(),
        };
        let json = serde_json::to_value(&nvidia).expect("json");
        assert_eq!(json["kind"], "nvidia");
        assert_eq!(json["version"], "595.91.07");
    }

    #[test]
    fn write_puts_xml_beside_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/report.json");
        let beside = sample().write(&path).expect("written");
        let xml = beside.xml;
        assert_eq!(xml, dir.path().join("sub/report.xml"));
        assert_eq!(beside.html, dir.path().join("sub/report.html"));
        assert_contains(
            &std::fs::read_to_string(&beside.html).expect("html"),
            "<!DOCTYPE html>",
        );
        assert_eq!(
            Report::read(&path).expect("read back").to_json(),
            sample().to_json()
        );
        assert!(std::fs::read_to_string(&path)
            .expect("json")
            .contains("scenario1"));
        assert!(std::fs::read_to_string(&xml)
            .expect("xml")
            .starts_with("<?xml"));
    }

    #[test]
    fn a_failed_scenario_is_one_failed_case_and_no_step() {
        let mut report = sample();
        report.scenario(ScenarioResult::new(
            "scenario3",
            Outcome::Failed("worker3 kept clique 1".to_owned()),
            1.0,
        ));
        assert_eq!(
            report.steps.len(),
            1,
            "a scenario is not recorded as a step"
        );
        let xml = report.to_junit();
        assert_eq!(xml.matches("name=\"scenario3\"").count(), 1, "{xml}");
        assert_eq!(xml.matches("<failure").count(), 1, "{xml}");
        let doc: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert_eq!(doc["scenarios"][2]["outcome"], "failed");
        assert_eq!(doc["scenarios"][2]["reason"], "worker3 kept clique 1");
        assert!(doc["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .all(|it| it["name"] != "scenario3"));
    }

    #[test]
    fn a_failed_network_policy_step_is_named_not_called_a_scenario() {
        let mut report = sample();
        report.step(
            "network policy",
            Duration::from_secs(3),
            StepStatus::Failed("the probe pod reached worker2".to_owned()),
        );
        assert!(report.failed());
        let line = report.verdict_line();
        assert_eq!(line, "FAILED: step `network policy`");
        assert!(!line.contains("scenario"), "{line}");
        let doc: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
        assert_eq!(doc["steps"][1]["status"], "failed");
        assert_eq!(doc["steps"][1]["error"], "the probe pod reached worker2");
        let xml = report.to_junit();
        assert_contains(&xml, "failures=\"1\"");
        assert_contains(&xml, "<failure message=\"the probe pod reached worker2\"/>");
    }

    #[test]
    fn the_verdict_line_names_passes_and_skips() {
        assert_eq!(
            sample().verdict_line(),
            "PASSED: scenario1; SKIPPED (not passed): scenario2"
        );
        let empty = Report::default();
        assert_eq!(empty.verdict_line(), "ok: no scenario ran");
        let mut failing = sample();
        failing.step(
            "cluster",
            Duration::ZERO,
            StepStatus::Failed("kind create cluster failed: no such image".to_owned()),
        );
        failing.scenario(ScenarioResult::new(
            "scenario1b",
            Outcome::Failed("x".to_owned()),
            0.0,
        ));
        assert_eq!(failing.verdict_line(), "FAILED: scenario1b, step `cluster`");
    }

    #[test]
    fn a_report_from_before_the_rack_map_reads_back_and_a_wrong_file_is_named() {
        let old = r#"{"command": "demo", "cluster": "c", "steps": [{"name": "cluster",
            "seconds": 1.0, "status": "ok"}], "scenarios": [{"name": "scenario2",
            "outcome": "skipped", "reason": "no payload", "seconds": 0.0, "workers": [],
            "timings": [["a", 1.5]]}], "notes": [], "total_seconds": 2.0}"#;
        let report = Report::from_json(old).expect("an older report");
        assert!(report.trays.is_empty() && report.compute_domain.is_empty());
        assert_eq!(
            report.scenarios[0].outcome,
            Outcome::Skipped("no payload".to_owned())
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("gone.json");
        let err = format!("{:#}", Report::read(&missing).expect_err("missing"));
        assert_contains(&err, "cannot read the report ");
        assert_contains(&err, "gone.json");
        assert_contains(&err, "cargo xtask demo --report FILE");
        let xml = dir.path().join("report.xml");
        std::fs::write(&xml, sample().to_junit()).expect("xml");
        let err = format!("{:#}", Report::read(&xml).expect_err("not json"));
        assert_contains(&err, "report.xml is not a cdsim JSON report");
    }

    #[test]
    fn labels_take_the_first_line() {
        assert_eq!(Outcome::Passed.label(), "PASSED");
        assert_eq!(Outcome::Failed("a\nb".to_owned()).label(), "FAILED: a");
        assert_eq!(Outcome::Skipped("r".to_owned()).label(), "SKIPPED: r");
        assert_eq!(StepStatus::Ok.label(), "ok");
        assert_eq!(
            StepStatus::Failed("e\nmore".to_owned()).label(),
            "FAILED: e"
        );
        let failed: anyhow::Result<()> = Err(anyhow::format_err!("inner").context("outer"));
        assert_eq!(
            StepStatus::of(&failed),
            StepStatus::Failed("outer: inner".to_owned())
        );
    }
}
