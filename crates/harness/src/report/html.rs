//! The run report as one self-contained HTML page: the racks as boxes, their
//! cliques as coloured groups, the trays as cards with their GPUs and a row
//! per scenario result, then the scenarios, the steps' timings and the notes.
//!
//! Pure (a [`Report`] in, a string out), inline CSS, no script, nothing
//! fetched at view time; every text from the report is escaped.

use std::fmt::Write as _;

use super::map::{CliqueGroup, Rack, RackMap, Row, Scope, TrayCard};
use super::markup::escape;
use super::{Outcome, PayloadIdentity, Report, StepStatus, Verdict};

/// Clique colours: clique `id` takes `id % CLIQUE_COLOURS` (its CSS class `c<n>`).
const CLIQUE_COLOURS: u32 = 8;

const STYLE: &str = r#"
:root { --ink: #1f2933; --muted: #66727f; --line: #d5dbe1; --ok: #2f7d4f; --bad: #b3261e; --skip: #7a6a3a; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #f6f7f9; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 17px; margin: 28px 0 10px; }
code { font: 12.5px ui-monospace, "SFMono-Regular", Menlo, monospace; }
.verdict { display: inline-block; padding: 4px 10px; border-radius: 6px; font-weight: 600; margin: 4px 0 10px; }
.verdict.passed { background: #e3f1e8; color: var(--ok); }
.verdict.failed { background: #fbe4e2; color: var(--bad); }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; overflow-wrap: anywhere; }
.legend { color: var(--muted); margin: 0 0 12px; }
.rack { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px 16px; margin: 0 0 18px; }
.rack > h3 { margin: 0 0 12px; font-size: 16px; }
.rack .domain { font-weight: 400; color: var(--muted); margin-left: 10px; }
.cliques { display: flex; flex-wrap: wrap; gap: 14px; align-items: flex-start; }
.clique { border-radius: 8px; padding: 10px 12px 12px; border: 1px solid; border-left-width: 6px; }
.clique > h4 { margin: 0 0 8px; font-size: 14px; }
.clique .count { font-weight: 400; color: var(--muted); }
.trays { display: flex; flex-wrap: wrap; gap: 10px; }
.tray { width: 300px; background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 10px 10px; }
.tray.member { box-shadow: 0 0 0 2px #4a78c2; }
.tray > header { display: flex; align-items: center; justify-content: space-between; gap: 8px; }
.tray h5 { margin: 0; font-size: 14px; }
.badge { font-size: 11px; padding: 1px 6px; border-radius: 9px; background: #e8f0fe; color: #2c5aa0; white-space: nowrap; }
.gpus { display: flex; gap: 5px; margin: 8px 0; }
.gpu { width: 26px; height: 26px; border-radius: 4px; background: #3d4a57; color: #e9eef3; font-size: 11px; display: flex; align-items: center; justify-content: center; }
.gpus .unknown { color: var(--muted); font-size: 12px; }
.rows { list-style: none; margin: 0; padding: 0; border-top: 1px solid var(--line); }
.row { display: grid; grid-template-columns: 16px 118px 1fr; gap: 4px; padding: 3px 0; border-bottom: 1px solid #eef0f2; font-size: 12.5px; }
.row .text { color: var(--muted); overflow-wrap: anywhere; }
.row.whole .text { font-style: italic; }
.mark { font-weight: 700; }
.passed .mark, .outcome.passed { color: var(--ok); }
.failed .mark, .outcome.failed { color: var(--bad); }
.skipped .mark, .outcome.skipped { color: var(--skip); }
.row.failed .text { color: var(--bad); }
.c0 { background: #eef3fc; border-color: #4a78c2; } .c1 { background: #edf7f0; border-color: #3c8d5a; }
.c2 { background: #fdf5e7; border-color: #c08a2e; } .c3 { background: #f4eefb; border-color: #8a5cc2; }
.c4 { background: #e9f6f6; border-color: #2e8c8c; } .c5 { background: #fcedf1; border-color: #c2567a; }
.c6 { background: #f3f5e4; border-color: #7d8a2e; } .c7 { background: #eff1f4; border-color: #5b6b80; }
table { border-collapse: collapse; background: #fff; border: 1px solid var(--line); width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 5px 10px; border-bottom: 1px solid #eef0f2; }
th { background: #f0f2f5; font-weight: 600; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td .reason { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; font: inherit; }
.bar { height: 8px; background: #8fa6bf; border-radius: 4px; min-width: 1px; }
.timings { color: var(--muted); font-size: 12.5px; }
.empty { color: var(--muted); font-style: italic; }
"#;

/// The page.
pub fn render(report: &Report) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let title = match report.cluster.as_str() {
        "" => "cdsim run report".to_owned(),
        cluster => format!("cdsim run report: {cluster}"),
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(&title)
    );
    out.push_str(&header(report, &title));
    out.push_str("<main>\n");
    out.push_str(&racks(report));
    out.push_str(&scenarios(report));
    out.push_str(&steps(report));
    out.push_str(&notes(report));
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

/// The title, the verdict and the run's facts.
fn header(report: &Report, title: &str) -> String {
    let class = if report.failed() { "failed" } else { "passed" };
    let mut out = format!(
        "<header>\n<h1>{}</h1>\n<p class=\"verdict {class}\">{}</p>\n<dl class=\"facts\">\n",
        escape(title),
        escape(&report.verdict_line())
    );
    let mut fact = |name: &str, value: String| {
        let _ = writeln!(out, "<dt>{name}</dt><dd>{value}</dd>");
    };
    fact(
        "Command",
        format!("<code>{}</code>", escape(&report.command)),
    );
    fact("Cluster", escape(&report.cluster));
    fact("Total", format!("{:.1} s", report.total_seconds));
    if let Some(payload) = &report.imex_payload {
        fact("nvidia-imex payload", escape(&payload_label(payload)));
    }
    out.push_str("</dl>\n</header>\n");
    out
}

fn payload_label(payload: &PayloadIdentity) -> String {
    match payload {
        PayloadIdentity::Nvidia {
            path,
            version,
            sha256,
        } => format!(
            "NVIDIA's {} ({path}, sha256 {sha256})",
            version.as_deref().unwrap_or("nvidia-imex")
        ),
        PayloadIdentity::TestDouble { path } => {
            format!("the IMEX test double, not NVIDIA's nvidia-imex ({path})")
        }
    }
}

/// Every rack, or why there is none.
fn racks(report: &Report) -> String {
    let map = RackMap::of(report);
    let mut out = String::from("<section id=\"racks\">\n<h2>Racks</h2>\n");
    if map.racks.is_empty() {
        out.push_str(
            "<p class=\"empty\">This report records no racks (it was written before reports \
             carried them, or by a command that lays out none): rerun <code>cargo xtask demo \
             --report FILE</code> for the picture.</p>\n</section>\n",
        );
        return out;
    }
    out.push_str(
        "<p class=\"legend\">Each rack is one NVLink domain; its cliques are coloured groups; \
         each tray lists every scenario result (✓ passed, ✗ failed, – skipped; in italics the \
         scenario's own outcome where it recorded nothing for the tray).",
    );
    if !report.compute_domain.is_empty() {
        out.push_str(" Outlined trays, marked ComputeDomain, are scenario 4's ComputeDomain.");
    }
    out.push_str("</p>\n");
    for rack in &map.racks {
        out.push_str(&rack_box(rack));
    }
    out.push_str("</section>\n");
    out
}

fn rack_box(rack: &Rack) -> String {
    let mut out = format!(
        "<section class=\"rack\" id=\"rack-{0}\">\n<h3>Rack {0}<span class=\"domain\">NVLink domain <code>{1}</code></span></h3>\n<div class=\"cliques\">\n",
        rack.index,
        escape(&rack.cluster_uuid)
    );
    for clique in &rack.cliques {
        out.push_str(&clique_group(clique));
    }
    out.push_str("</div>\n</section>\n");
    out
}

fn clique_group(clique: &CliqueGroup) -> String {
    let trays = clique.trays.len();
    let mut out = format!(
        "<div class=\"clique c{}\" data-clique=\"{}\">\n<h4>Clique {} <span class=\"count\">{trays} tray{}</span></h4>\n<div class=\"trays\">\n",
        clique.id % CLIQUE_COLOURS,
        clique.id,
        clique.id,
        if trays == 1 { "" } else { "s" }
    );
    for tray in &clique.trays {
        out.push_str(&tray_card(tray));
    }
    out.push_str("</div>\n</div>\n");
    out
}

fn tray_card(tray: &TrayCard) -> String {
    let node = escape(&tray.node);
    let (class, badge) = if tray.in_compute_domain {
        (
            " member",
            "<span class=\"badge\" title=\"in scenario 4's ComputeDomain\">ComputeDomain</span>",
        )
    } else {
        ("", "")
    };
    let mut out = format!(
        "<article class=\"tray{class}\" data-node=\"{node}\">\n<header><h5>{node}</h5>{badge}</header>\n{}",
        gpus(tray.gpus)
    );
    if tray.rows.is_empty() {
        out.push_str("<p class=\"empty\">no scenario ran</p>\n");
    } else {
        out.push_str("<ul class=\"rows\">\n");
        for row in &tray.rows {
            out.push_str(&tray_row(row));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</article>\n");
    out
}

fn gpus(count: Option<u32>) -> String {
    match count {
        Some(count) => {
            let squares: String = (0..count)
                .map(|index| format!("<span class=\"gpu\" title=\"GPU {index}\">{index}</span>"))
                .collect();
            format!("<div class=\"gpus\" title=\"{count} GPUs\">{squares}</div>\n")
        }
        None => "<div class=\"gpus\"><span class=\"unknown\">GPUs not recorded</span></div>\n"
            .to_owned(),
    }
}

fn tray_row(row: &Row) -> String {
    let (class, mark) = verdict_class(row.verdict);
    let whole = match row.scope {
        Scope::Tray => "",
        Scope::Scenario => " whole",
    };
    let first = row.text.lines().next().unwrap_or_default();
    format!(
        "<li class=\"row {class}{whole}\" data-scenario=\"{0}\" title=\"{1}\"><span class=\"mark\">{mark}</span><span class=\"name\">{0}</span><span class=\"text\">{2}</span></li>\n",
        escape(&row.scenario),
        escape(&row.text),
        escape(first)
    )
}

fn verdict_class(verdict: Verdict) -> (&'static str, &'static str) {
    match verdict {
        Verdict::Passed => ("passed", "✓"),
        Verdict::Failed => ("failed", "✗"),
        Verdict::Skipped => ("skipped", "–"),
    }
}

/// The scenario results: outcome, reason, wall time and inner timings.
fn scenarios(report: &Report) -> String {
    let mut out = String::from("<section id=\"scenarios\">\n<h2>Scenarios</h2>\n");
    if report.scenarios.is_empty() {
        out.push_str("<p class=\"empty\">No scenario ran.</p>\n</section>\n");
        return out;
    }
    out.push_str("<table>\n<tr><th>Scenario</th><th>Outcome</th><th>Reason and details</th><th>Seconds</th></tr>\n");
    for result in &report.scenarios {
        let (class, _) = verdict_class(result.outcome.verdict());
        let outcome = match &result.outcome {
            Outcome::Passed => "passed",
            Outcome::PassedTestDouble => "passed (IMEX test double)",
            Outcome::Failed(_) => "failed",
            Outcome::Skipped(_) => "skipped",
        };
        let mut text = result.outcome.reason().unwrap_or_default().to_owned();
        for detail in &result.workers {
            let mark = if detail.passed { "✓" } else { "✗" };
            let node = match detail.node.as_str() {
                "" => String::new(),
                node => format!("{node}: "),
            };
            let _ = write!(text, "\n{mark} {node}{}", detail.detail);
        }
        let timings: Vec<String> = result
            .timings
            .iter()
            .map(|(name, seconds)| format!("{name} {seconds:.1} s"))
            .collect();
        let _ = writeln!(
            out,
            "<tr class=\"scenario\" data-scenario=\"{0}\"><td>{0}</td><td class=\"outcome {class}\">{outcome}</td><td><pre class=\"reason\">{1}</pre><div class=\"timings\">{2}</div></td><td class=\"num\">{3:.1}</td></tr>",
            escape(&result.name),
            escape(text.trim_start()),
            escape(&timings.join(" · ")),
            result.seconds
        );
    }
    out.push_str("</table>\n</section>\n");
    out
}

/// The steps' wall times, each with a bar against the longest.
fn steps(report: &Report) -> String {
    let mut out = String::from("<section id=\"steps\">\n<h2>Timings</h2>\n");
    if report.steps.is_empty() {
        out.push_str("<p class=\"empty\">No step recorded.</p>\n</section>\n");
        return out;
    }
    let longest = report
        .steps
        .iter()
        .map(|it| it.seconds)
        .fold(0.0_f64, f64::max)
        .max(0.001);
    out.push_str("<table>\n<tr><th>Step</th><th>Status</th><th>Seconds</th><th style=\"width:40%\"></th></tr>\n");
    for step in &report.steps {
        let (class, status) = match &step.status {
            StepStatus::Ok => ("passed", "ok".to_owned()),
            StepStatus::Failed(error) => ("failed", format!("failed: {error}")),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"outcome {class}\"><pre class=\"reason\">{}</pre></td><td class=\"num\">{:.1}</td><td><div class=\"bar\" style=\"width:{:.1}%\"></div></td></tr>",
            escape(&step.name),
            escape(&status),
            step.seconds,
            step.seconds / longest * 100.0
        );
    }
    out.push_str("</table>\n</section>\n");
    out
}

fn notes(report: &Report) -> String {
    if report.notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("<section id=\"notes\">\n<h2>Notes</h2>\n<ul>\n");
    for note in &report.notes {
        let _ = writeln!(out, "<li>{}</li>", escape(note));
    }
    out.push_str("</ul>\n</section>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{ScenarioResult, Tray, WorkerDetail};
    use std::time::Duration;
    use test_support::assert_contains;

    fn sample() -> Report {
        let tray = |node: &str, clique| Tray {
            node: node.to_owned(),
            rack: 0,
            clique,
            cluster_uuid: "00000000-0000-0000-0000-0000000000ab".to_owned(),
            gpus: Some(4),
        };
        let mut report = Report {
            command: "cargo xtask demo <all>".to_owned(),
            cluster: "cdsim".to_owned(),
            trays: vec![tray("w1", 0), tray("w2", 1)],
            compute_domain: vec!["w1".to_owned()],
            ..Report::default()
        };
        report.step("cluster", Duration::from_secs(2), StepStatus::Ok);
        report.scenario(ScenarioResult {
            workers: vec![WorkerDetail {
                node: "w2".to_owned(),
                pod: "p".to_owned(),
                detail: "clique 7 <not 1>".to_owned(),
                passed: false,
            }],
            ..ScenarioResult::new("scenario1", Outcome::Failed("w2 & more".to_owned()), 3.0)
        });
        report.scenario(ScenarioResult::new(
            "scenario2",
            Outcome::Skipped("no \"payload\"".to_owned()),
            0.0,
        ));
        report
    }

    #[test]
    fn the_page_draws_racks_cliques_trays_and_rows_escaped() {
        let page = render(&sample());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert_contains(&page, "Rack 0<span class=\"domain\">NVLink domain <code>00000000-0000-0000-0000-0000000000ab</code>");
        assert_contains(&page, "<div class=\"clique c1\" data-clique=\"1\">");
        assert_contains(&page, "<article class=\"tray member\" data-node=\"w1\">");
        assert_eq!(page.matches("class=\"gpu\"").count(), 8);
        assert_contains(&page, "<span class=\"text\">clique 7 &lt;not 1&gt;</span>");
        assert_contains(&page, "no &quot;payload&quot;");
        assert_contains(&page, "cargo xtask demo &lt;all&gt;");
        assert_contains(&page, "FAILED: scenario1");
        assert!(!page.contains("<script"), "no script");
        assert!(!page.contains("http://") && !page.contains("https://"));
    }

    #[test]
    fn a_report_without_racks_says_so_and_still_lists_results() {
        let mut report = sample();
        report.trays.clear();
        let page = render(&report);
        assert_contains(&page, "This report records no racks");
        assert_contains(&page, "data-scenario=\"scenario2\"");
        assert!(!page.contains("class=\"rack\""));
    }
}
