//! CI's "e2e full rack": one GB200 NVL72 rack (18 trays in one NVLink domain,
//! one clique) end to end on a cluster of its own, with live compute-domain
//! daemons (the IMEX test double staged in every driver root, as the demo
//! step does), the report's per-rack cliques and daemons checked and its page
//! opened in headless Chromium, then the cluster deleted whatever happened.

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
    // Live daemons on every tray: the IMEX test double staged in each driver
    // root (as the demo step does); its rows must say so.
    let payload = super::imex_double_payload(sh)?;
    let res = cmd!(
        sh,
        "cargo xtask demo --offline --imex {payload} --cluster-name {CLUSTER} --trays {trays} --cliques-per-rack 1 --scenarios 1,3,4 --report {report}"
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
/// its IMEX part and its rebind passed against the IMEX test double, named
/// so, with every tray's daemon READY in an IMEX domain of all 18.
pub fn check(doc: &Value) -> Result<Vec<String>> {
    let scenario = |name: &str| -> Result<&Value> {
        let found = doc["scenarios"]
            .as_array()
            .and_then(|all| all.iter().find(|it| it["name"] == name))
            .with_context(|| format!("the report has no {name}"))?;
        let want = match name {
            "scenario4-imex" | "scenario4-rebind" => "passed (IMEX test double)",
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
    lines.push(live_daemons(&details(scenario("scenario4-imex")?))?);
    Ok(lines)
}

/// Scenario 4's IMEX part on the rack: a daemon READY on every tray, its
/// IMEX domain UP with the rack's 18 daemons.
fn live_daemons(imex: &[(String, String, bool)]) -> Result<String> {
    let want = format!("/etc/hosts names the {TRAYS} daemons of its clique");
    let ready: std::collections::BTreeSet<&str> = imex
        .iter()
        .filter(|(node, detail, ok)| {
            !node.is_empty() && *ok && detail.starts_with("daemon READY") && detail.contains(&want)
        })
        .map(|(node, _, _)| node.as_str())
        .collect();
    anyhow::ensure!(
        ready.len() == TRAYS,
        "scenario4-imex: {} trays with their daemon READY in a domain of {TRAYS}, {TRAYS} expected",
        ready.len()
    );
    Ok(format!(
        "scenario4-imex (IMEX test double): a daemon READY on all {TRAYS} trays, each domain UP with all {TRAYS}"
    ))
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
        report_with(daemons, cliques, TRAYS)
    }

    /// A rack report with `daemons` labelled daemon pods, these cliques, and
    /// `ready` trays whose daemon was READY in a domain of 18.
    fn report_with(daemons: usize, cliques: &[&str], ready: usize) -> Value {
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
        let imex: Vec<Value> = (1..=ready)
            .map(|n| json!({"node": format!("w{n}"), "pod": "d", "passed": true,
                "detail": format!("daemon READY; /etc/hosts names the {TRAYS} daemons of its clique; \
                    `nvidia-imex-ctl -N -j`: domain UP, exactly they READY")}))
            .collect();
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
            {"name": "scenario4-rebind", "outcome": "passed (IMEX test double)", "workers": rebind},
            {"name": "scenario4-imex", "outcome": "passed (IMEX test double)", "workers": imex},
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
    }

    #[test]
    fn the_rack_needs_live_daemons_named_as_the_double_on_every_tray() {
        let mut skipped = report(18, &[CLIQUE]);
        skipped["scenarios"][5]["outcome"] = json!("skipped");
        let err = check(&skipped).expect_err("skipped").to_string();
        assert!(err.contains("scenario4-imex did not pass"), "{err}");
        let mut plain = report(18, &[CLIQUE]);
        plain["scenarios"][4]["outcome"] = json!("passed");
        let err = check(&plain).expect_err("not named").to_string();
        assert!(err.contains("scenario4-rebind did not pass"), "{err}");
        let err = check(&report_with(18, &[CLIQUE], 17))
            .expect_err("17 ready")
            .to_string();
        assert!(err.contains("17 trays with their daemon READY"), "{err}");
    }
}
