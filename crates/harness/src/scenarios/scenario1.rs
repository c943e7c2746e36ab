//! Scenario 1: in each worker's pod the NRI-injected channel node exists and
//! check-fabric reports the worker's clique and the domain uuid, state
//! completed, on every GPU.

use tokio::time::Instant;

use super::seam::Workload;
use crate::fabric::{self, Expected};
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};

/// Checks one worker once: channel node, check-fabric, identity.
pub(super) async fn check_worker<W: Workload>(
    workload: &W,
    pod: &str,
    expected: &Expected,
    channel: bool,
) -> Result<String, String> {
    if channel {
        match workload
            .exec(pod, &["test", "-c", crate::names::CHANNEL0])
            .await
        {
            Ok(out) if out.code == 0 => {}
            Ok(out) if out.code < 0 => {
                return Err(format!(
                    "exec in pod {pod} reported no exit status ({}): is its node up?",
                    out.stderr.trim()
                ))
            }
            Ok(_) => {
                return Err(format!(
                    "{} is not a character device: the NRI plugin did not inject the IMEX channel",
                    crate::names::CHANNEL0
                ))
            }
            Err(err) => return Err(format!("{err:#}")),
        }
    }
    let out = match workload.exec(pod, &["check-fabric"]).await {
        Ok(out) => out,
        Err(err) => return Err(format!("{err:#}")),
    };
    if out.code != 0 {
        return Err(format!(
            "check-fabric exited {}: {}{}",
            out.code,
            out.stdout.trim(),
            out.stderr.trim()
        ));
    }
    let gpus =
        fabric::parse_text(&out.stdout).map_err(|err| format!("check-fabric output: {err}"))?;
    fabric::verify(&gpus, expected).map_err(|err| err.to_string())?;
    if channel {
        // The machine-readable form must agree with the text.
        let json = match workload.exec(pod, &["check-fabric", "--json"]).await {
            Ok(out) if out.code == 0 => out.stdout,
            Ok(out) => {
                return Err(format!(
                    "check-fabric --json exited {}: {}",
                    out.code,
                    out.stderr.trim()
                ))
            }
            Err(err) => return Err(format!("{err:#}")),
        };
        let from_json =
            fabric::parse_json(&json).map_err(|err| format!("check-fabric --json: {err}"))?;
        fabric::verify(&from_json, expected)
            .map_err(|err| format!("check-fabric --json: {err}"))?;
        if from_json.len() != gpus.len() {
            return Err(format!(
                "check-fabric --json lists {} GPUs, the text {}",
                from_json.len(),
                gpus.len()
            ));
        }
    }
    Ok(format!(
        "{n}/{n} GPUs have clique={} uuid={} state=completed",
        expected.clique,
        expected.uuid,
        n = gpus.len()
    ))
}

/// Scenario 1 over the workers and the identity each must report.
pub async fn scenario1<W: Workload>(
    workload: &W,
    expected: &[(String, Expected)],
) -> ScenarioResult {
    let started = Instant::now();
    let mut workers = Vec::new();
    let mut failures = Vec::new();
    for (node, want) in expected {
        let (pod, res) = match workload.pod_on_node(node).await {
            Ok(pod) => (
                pod.name.clone(),
                check_worker(workload, &pod.name, want, true).await,
            ),
            Err(err) => ("-".to_owned(), Err(format!("{err:#}"))),
        };
        match &res {
            Ok(detail) => eprintln!("    ✓ {node}: {detail}"),
            Err(err) => {
                eprintln!("    ✗ {node}: {err}");
                failures.push(format!("{node}: {err}"));
            }
        }
        workers.push(WorkerDetail {
            node: node.clone(),
            pod,
            passed: res.is_ok(),
            detail: res.unwrap_or_else(|err| err),
        });
    }
    let outcome = if failures.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(failures.join("; "))
    };
    ScenarioResult {
        workers,
        ..ScenarioResult::new("scenario1", outcome, round(started.elapsed()))
    }
}
