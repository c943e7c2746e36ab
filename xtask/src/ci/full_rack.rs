//! CI's "e2e full rack": one GB200 NVL72 rack (18 trays in one NVLink domain,
//! one clique) end to end on a cluster of its own, the report's per-rack
//! cliques checked and its page opened in headless Chromium, then the
//! cluster deleted whatever happened.

use std::time::Instant;

use anyhow::{Context as _, Result};
use serde_json::Value;
use xshell::{cmd, Shell};

/// The step's own kind cluster (never the demo's).
pub const CLUSTER: &str = "cdsim-full-rack";
/// An NVL72 rack's compute trays.
const TRAYS: usize = 18;
/// The rack's one clique: the demo domain's uuid, clique 0.
const CLIQUE: &str = "00000000-0000-0000-0000-0000000000ab.0";
/// The rack's rebind clique (scenario 4's rebind part).
const REBIND_CLIQUE: &str = "00000000-0000-0000-0000-0000000000ff.99";

/// The step.
pub fn run(sh: &Shell) -> Result<()> {
    let report = "target/ci/full-rack-report.json";
    sh.create_dir("target/ci")?;
    // The demo cluster is done with by now: its disk goes to the rack.
    super::delete_leftover_cluster(sh)?;
    let kind = crate::tools::ensure_tool(sh, crate::tools::Tool::Kind)?;
    delete(sh, &kind)?;
    // `demo`'s room check (xtask's `capacity`) refuses before creating anything
    // when docker's disk or the memory cannot hold the rack.
    let started = Instant::now();
    let trays = TRAYS.to_string();
    // No --imex: with the IMEX test double staged, one of the 18 daemons
    // still lacked a peer or two in its IMEX domain after 240 s in two runs
    // on this 2-core machine (issue 36, open); the live domain is proven on
    // the demo's trays. Here scenario4-imex must say SKIPPED.
    let res = cmd!(
        sh,
        "cargo xtask demo --offline --cluster-name {CLUSTER} --trays {trays} --cliques-per-rack 1 --scenarios 1,3,4 --report {report}"
    )
    .run();
    super::print_report(sh, report);
    let checked = res.map_err(anyhow::Error::from).and_then(|()| {
        let doc: Value = serde_json::from_str(&sh.read_file(report)?)
            .with_context(|| format!("{report} is not JSON"))?;
        for line in check(&doc)? {
            eprintln!("    ✓ {line}");
        }
        // The page beside the report, as a browser shows it: the rack's 18
        // trays in its one clique, each with its rows.
        super::check_page(
            sh,
            report,
            &topology::Layout::new(TRAYS as u32, 1, Some(1))?,
        )
    });
    eprintln!(
        "    full rack demo: {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let deleted = delete(sh, &kind);
    checked?;
    deleted
}

/// Deletes the step's cluster if it exists.
fn delete(sh: &Shell, kind: &std::path::Path) -> Result<()> {
    let clusters = cmd!(sh, "{kind} get clusters").quiet().read()?;
    if clusters.lines().any(|line| line.trim() == CLUSTER) {
        cmd!(sh, "{kind} delete cluster --name {CLUSTER}").run()?;
    }
    Ok(())
}

/// What the full rack's report must show, one line per check: scenarios 1
/// and 3 passed on every tray; scenario 4's ComputeDomain had a daemon pod on
/// every tray labelled with the rack's clique and one ComputeDomainClique;
/// its rebind part passed; its IMEX part SKIPPED with the reason (no
/// nvidia-imex staged on the rack).
pub fn check(doc: &Value) -> Result<Vec<String>> {
    let scenario = |name: &str| -> Result<&Value> {
        let found = doc["scenarios"]
            .as_array()
            .and_then(|all| all.iter().find(|it| it["name"] == name))
            .with_context(|| format!("the report has no {name}"))?;
        let want = match name {
            "scenario4-imex" => "skipped",
            _ => "passed",
        };
        anyhow::ensure!(
            found["outcome"] == want,
            "{name} did not pass (wanted {want:?}): {} {}",
            found["outcome"],
            found["reason"]
        );
        Ok(found)
    };
    let details = |it: &Value| -> Vec<(String, String, bool)> {
        it["workers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| {
                let text = |key: &str| w[key].as_str().unwrap_or_default().to_owned();
                (text("node"), text("detail"), w["passed"] == true)
            })
            .collect()
    };
    let mut lines = vec![one_rack(doc)?];
    for name in ["scenario1", "scenario3"] {
        let trays = details(scenario(name)?);
        let passed = trays.iter().filter(|(_, _, ok)| *ok).count();
        anyhow::ensure!(
            trays.len() == TRAYS && passed == TRAYS,
            "{name}: {passed} of {} trays passed, {TRAYS} expected",
            trays.len()
        );
        lines.push(format!("{name} passed on all {TRAYS} trays"));
    }
    let four = details(scenario("scenario4")?);
    let daemon = format!("daemon pod labelled resource.nvidia.com/computeDomain.cliqueID={CLIQUE}");
    let daemons = four
        .iter()
        .filter(|(node, detail, ok)| !node.is_empty() && *ok && detail == &daemon)
        .count();
    let cliques: Vec<&String> = four
        .iter()
        .filter(|(_, detail, _)| detail.starts_with("ComputeDomainClique "))
        .map(|(_, detail, _)| detail)
        .collect();
    anyhow::ensure!(
        daemons == TRAYS,
        "scenario4: {daemons} daemon pods labelled {CLIQUE}, {TRAYS} expected"
    );
    anyhow::ensure!(
        cliques.len() == 1 && cliques[0].contains(&format!(".{CLIQUE} ")),
        "scenario4: ComputeDomainCliques {cliques:?}, one for {CLIQUE} expected"
    );
    lines.push(format!(
        "scenario4: {TRAYS} daemon pods labelled {CLIQUE}, one ComputeDomainClique"
    ));
    let rebind = details(scenario("scenario4-rebind")?);
    anyhow::ensure!(
        rebind
            .iter()
            .any(|(_, detail, _)| detail.contains(REBIND_CLIQUE)),
        "scenario4-rebind: no detail names the rebind clique {REBIND_CLIQUE}"
    );
    lines.push(format!(
        "scenario4-rebind: the rack moved to {REBIND_CLIQUE}"
    ));
    lines.push(imex_skipped(scenario("scenario4-imex")?)?);
    Ok(lines)
}

/// Scenario 4's IMEX part, SKIPPED for the one reason it may be: no
/// nvidia-imex staged on the rack.
fn imex_skipped(imex: &Value) -> Result<String> {
    let reason = imex["reason"].as_str().unwrap_or_default();
    anyhow::ensure!(
        reason.contains("no nvidia-imex"),
        "scenario4-imex is skipped for another reason: {reason}"
    );
    Ok(
        "scenario4-imex: SKIPPED on the rack, as it must be without nvidia-imex staged (live daemons on 18 trays: issue 36)"
            .to_owned(),
    )
}

/// The report's trays (what its page draws): 18 in rack 0's clique 0.
fn one_rack(doc: &Value) -> Result<String> {
    let trays = doc["trays"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let placed = trays
        .iter()
        .filter(|it| it["rack"] == 0 && it["clique"] == 0)
        .count();
    anyhow::ensure!(
        trays.len() == TRAYS && placed == TRAYS,
        "the report places {placed} of its {} trays in rack 0's clique 0, {TRAYS} expected",
        trays.len()
    );
    Ok(format!(
        "the report's {TRAYS} trays are in one rack, one clique"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(daemons: usize, cliques: &[&str]) -> Value {
        let trays: Vec<Value> = (1..=TRAYS)
            .map(|n| json!({"node": format!("w{n}"), "pod": "p", "detail": "ok", "passed": true}))
            .collect();
        let mut four: Vec<Value> = (1..=daemons)
            .map(|n| json!({"node": format!("w{n}"), "pod": "d", "passed": true,
                "detail": format!("daemon pod labelled resource.nvidia.com/computeDomain.cliqueID={CLIQUE}")}))
            .collect();
        for clique in cliques {
            four.push(json!({"node": "", "pod": "", "passed": true,
                "detail": format!("ComputeDomainClique uid.{clique} exists, listing 0 daemon(s) now, none of another clique")}));
        }
        let rebind = json!([{"node": "w1", "pod": "d", "passed": true,
            "detail": format!("daemon pod labelled resource.nvidia.com/computeDomain.cliqueID={REBIND_CLIQUE}")}]);
        let placed: Vec<Value> = (1..=TRAYS)
            .map(|n| {
                json!({"node": format!("w{n}"), "rack": 0, "clique": 0,
                "cluster_uuid": "00000000-0000-0000-0000-0000000000ab", "gpus": 4})
            })
            .collect();
        json!({"trays": placed, "scenarios": [
            {"name": "scenario1", "outcome": "passed", "workers": trays},
            {"name": "scenario2", "outcome": "skipped", "reason": "no payload", "workers": []},
            {"name": "scenario3", "outcome": "passed", "workers": trays},
            {"name": "scenario4", "outcome": "passed", "workers": four},
            {"name": "scenario4-rebind", "outcome": "passed", "workers": rebind},
            {"name": "scenario4-imex", "outcome": "skipped",
                "reason": "no nvidia-imex in the staged driver root", "workers": []},
        ]})
    }

    #[test]
    fn a_full_rack_report_passes_with_18_daemons_in_one_clique() {
        let lines = check(&report(18, &[CLIQUE])).expect("passes");
        assert_eq!(lines.len(), 6);
        assert!(lines[0].contains("18 trays are in one rack"), "{lines:?}");
        assert!(lines[3].contains("18 daemon pods labelled"), "{lines:?}");
    }

    #[test]
    fn missing_daemons_or_a_second_clique_fail_naming_what_was_seen() {
        let err = check(&report(17, &[CLIQUE])).expect_err("17").to_string();
        assert!(err.contains("17 daemon pods"), "{err}");
        let two = [CLIQUE, "00000000-0000-0000-0000-0000000000ab.1"];
        let err = check(&report(18, &two)).expect_err("two").to_string();
        assert!(err.contains("one for"), "{err}");
        let mut failed = report(18, &[CLIQUE]);
        failed["scenarios"][2]["outcome"] = json!("failed");
        let err = check(&failed).expect_err("failed").to_string();
        assert!(err.contains("scenario3 did not pass"), "{err}");
        let mut split = report(18, &[CLIQUE]);
        split["trays"][17]["clique"] = json!(1);
        let err = check(&split).expect_err("split").to_string();
        assert!(err.contains("places 17 of its 18 trays"), "{err}");
        let mut live = report(18, &[CLIQUE]);
        live["scenarios"][5]["outcome"] = json!("failed");
        let err = check(&live).expect_err("imex not skipped").to_string();
        assert!(err.contains("scenario4-imex did not pass"), "{err}");
    }
}
