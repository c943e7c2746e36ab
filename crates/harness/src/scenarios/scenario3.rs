//! Scenario 3: a `helm upgrade --reuse-values` to the rebind topology reaches
//! every worker with no pod recycled, then the demo topology is restored.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

use super::poll::{poll_until, Limits, Probe, Show, Wait};
use super::scenario1::check_worker;
use super::seam::Workload;
use crate::fabric::Expected;
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::{Cmd, Runner};
use crate::tracker::Tracker;

/// Polls every worker until each reports `expected`; returns per-worker
/// details and the time from `since` to the last verified worker.
async fn converge<W: Workload>(
    workload: &W,
    pods: &[(String, String)],
    expected: &dyn Fn(&str) -> Expected,
    since: Instant,
    limits: Limits,
) -> (Vec<WorkerDetail>, Result<Duration, String>) {
    // Per node: (detail, time to verified) once done, else the last error.
    let done: RefCell<BTreeMap<String, (String, Duration)>> = RefCell::new(BTreeMap::new());
    let last_error: RefCell<BTreeMap<String, String>> = RefCell::new(BTreeMap::new());
    let wait = Wait {
        show: Show::Bare,
        since,
        limit: limits.converge,
        every: limits.poll.min(Duration::from_millis(250)),
    };
    let _ = poll_until(&wait, || async {
        for (node, pod) in pods {
            if done.borrow().contains_key(node) {
                continue;
            }
            match check_worker(workload, pod, &expected(node), false).await {
                Ok(detail) => {
                    eprintln!(
                        "    ✓ {node}: {detail} ({:.1}s)",
                        since.elapsed().as_secs_f64()
                    );
                    done.borrow_mut()
                        .insert(node.clone(), (detail, since.elapsed()));
                }
                Err(err) => {
                    last_error.borrow_mut().insert(node.clone(), err);
                }
            }
        }
        if done.borrow().len() == pods.len() {
            Probe::Done(())
        } else {
            Probe::Quiet(String::new())
        }
    })
    .await;
    summary(
        pods,
        &done.into_inner(),
        &last_error.into_inner(),
        limits.converge,
    )
}

/// Per-worker details and the time to the last verified worker, or which
/// workers did not converge within `limit` and why.
fn summary(
    pods: &[(String, String)],
    done: &BTreeMap<String, (String, Duration)>,
    last_error: &BTreeMap<String, String>,
    limit: Duration,
) -> (Vec<WorkerDetail>, Result<Duration, String>) {
    let details = pods
        .iter()
        .map(|(node, pod)| match done.get(node) {
            Some((detail, took)) => WorkerDetail {
                node: node.clone(),
                pod: pod.clone(),
                detail: format!("{detail} after {:.1}s", took.as_secs_f64()),
                passed: true,
            },
            None => WorkerDetail {
                node: node.clone(),
                pod: pod.clone(),
                detail: last_error.get(node).cloned().unwrap_or_default(),
                passed: false,
            },
        })
        .collect();
    if done.len() == pods.len() {
        let last = done
            .values()
            .map(|(_, took)| *took)
            .max()
            .unwrap_or_default();
        return (details, Ok(last));
    }
    let missing: Vec<String> = pods
        .iter()
        .filter(|(node, _)| !done.contains_key(node))
        .map(|(node, _)| {
            format!(
                "{node}: {}",
                last_error.get(node).map_or("", String::as_str)
            )
        })
        .collect();
    (
        details,
        Err(format!(
            "not converged within {}s: {}",
            limit.as_secs(),
            missing.join("; ")
        )),
    )
}

/// The topologies of scenario 3, as Helm values fragments.
#[derive(Debug, Clone)]
pub struct Rebind {
    /// The chart path.
    pub chart: String,
    /// The kube context helm uses.
    pub context: String,
    /// The rebind topology values (clique 99 of each rack's rebind domain, uuid …00ff, …01ff, …).
    pub rebind_values: String,
    /// What each worker reports under the rebind topology.
    pub rebind_expected: Vec<(String, Expected)>,
    /// The demo topology values, restored afterwards.
    pub demo_values: String,
    /// What each worker reports under the demo topology.
    pub demo_expected: Vec<(String, Expected)>,
    /// Where the two values files are written for helm.
    pub scratch: PathBuf,
}

impl Rebind {
    /// The helm upgrade that stages the topology values in `file` on the
    /// chart's release (the rebind, or the demo's restored, also on Ctrl-C).
    pub fn helm_upgrade(&self, file: &Path) -> Cmd {
        Cmd::with_args(
            "helm",
            crate::plan::helm_topology_args(&self.chart, &self.context, &file.to_string_lossy()),
        )
    }

    /// What `node` reports under the demo topology (an identity no worker
    /// reports when the node is not one of the demo's).
    fn demo_for(&self, node: &str) -> Expected {
        expected_of(&self.demo_expected, node)
    }

    /// The rebind identities, once each: `clique 99, uuid …00ff[, …]`.
    fn rebind_summary(&self) -> String {
        let mut uuids: Vec<&str> = self
            .rebind_expected
            .iter()
            .map(|(_, it)| it.uuid.as_str())
            .collect();
        uuids.dedup();
        format!(
            "clique {}, uuid {}",
            crate::names::REBIND_CLIQUE,
            uuids.join(", ")
        )
    }

    /// What `node` reports under the rebind topology (likewise).
    fn rebind_for(&self, node: &str) -> Expected {
        expected_of(&self.rebind_expected, node)
    }
}

/// `node`'s entry of `expected`, or an identity no worker reports.
fn expected_of(expected: &[(String, Expected)], node: &str) -> Expected {
    expected
        .iter()
        .find(|(it, _)| it == node)
        .map(|(_, want)| want.clone())
        .unwrap_or(Expected {
            clique: u32::MAX,
            uuid: String::new(),
        })
}

/// Scenario 3: rebind live, verify without pod recycling, restore.
pub async fn scenario3<W: Workload, R: Runner>(
    workload: &W,
    runner: &R,
    rebind: &Rebind,
    tracker: &Tracker,
    limits: Limits,
) -> ScenarioResult {
    let started = Instant::now();
    let mut result = ScenarioResult::new("scenario3", Outcome::Passed, 0.0);
    let outcome = scenario3_inner(workload, runner, rebind, tracker, limits, &mut result).await;
    tracker.restore_topology(None);
    result.outcome = match outcome {
        Ok(()) => Outcome::Passed,
        Err(reason) => Outcome::Failed(reason),
    };
    result.seconds = round(started.elapsed());
    result
}

/// The workload pod of every worker, as (node, pod).
async fn worker_pods<W: Workload>(
    workload: &W,
    rebind: &Rebind,
) -> Result<Vec<(String, String)>, String> {
    let mut pods = Vec::new();
    for (node, _) in &rebind.demo_expected {
        let pod = workload
            .pod_on_node(node)
            .await
            .map_err(|err| format!("{node}: {err:#}"))?;
        pods.push((node.clone(), pod.name));
    }
    Ok(pods)
}

/// Writes the two topologies' values files; returns (rebind, demo).
pub fn write_values(rebind: &Rebind) -> Result<(PathBuf, PathBuf), String> {
    let rebind_file = rebind.scratch.join("rebind-topology.yaml");
    let demo_file = rebind.scratch.join("demo-topology.yaml");
    std::fs::write(&rebind_file, &rebind.rebind_values)
        .map_err(|err| format!("writing {}: {err}", rebind_file.display()))?;
    std::fs::write(&demo_file, &rebind.demo_values)
        .map_err(|err| format!("writing {}: {err}", demo_file.display()))?;
    Ok((rebind_file, demo_file))
}

/// No pod recycled: the uids after equal those before.
async fn not_recycled<W: Workload>(
    workload: &W,
    before: &BTreeMap<String, String>,
) -> Result<(), String> {
    match workload.pod_uids().await.map_err(|err| format!("{err:#}")) {
        Ok(after) if after == *before => Ok(()),
        Ok(after) => Err(format!(
            "pods were recycled during the rebind: {}",
            recycled(before, &after)
        )),
        Err(err) => Err(err),
    }
}

/// The pods that changed between two `pod name -> uid` maps: gone, new, or
/// the same name with another uid.
pub fn recycled(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> String {
    let mut changes = Vec::new();
    for (name, uid) in before {
        match after.get(name) {
            None => changes.push(format!("{name} gone")),
            Some(now) if now != uid => {
                changes.push(format!("{name} recreated (uid {uid} -> {now})"))
            }
            Some(_) => {}
        }
    }
    changes.extend(
        after
            .keys()
            .filter(|name| !before.contains_key(*name))
            .map(|name| format!("{name} new")),
    );
    changes.join(", ")
}

/// `helm upgrade --reuse-values` with the topology values `file`.
pub fn upgrade_topology<R: Runner>(runner: &R, rebind: &Rebind, file: &Path) -> Result<(), String> {
    crate::apiserver::helm(runner, &rebind.helm_upgrade(file), &rebind.context)
        .map(|_| ())
        .map_err(|err| format!("{err:#}"))
}

async fn scenario3_inner<W: Workload, R: Runner>(
    workload: &W,
    runner: &R,
    rebind: &Rebind,
    tracker: &Tracker,
    limits: Limits,
    result: &mut ScenarioResult,
) -> Result<(), String> {
    let pods = worker_pods(workload, rebind).await?;
    let before = workload
        .pod_uids()
        .await
        .map_err(|err| format!("{err:#}"))?;
    let (rebind_file, demo_file) = write_values(rebind)?;
    let upgrade = |file: &Path| upgrade_topology(runner, rebind, file);
    eprintln!(
        "    helm upgrade --reuse-values with the rebind topology ({})",
        rebind.rebind_summary()
    );
    tracker.restore_topology(Some(rebind.helm_upgrade(&demo_file)));
    let since = Instant::now();
    upgrade(&rebind_file)?;
    let helm_took = since.elapsed();
    let (details, converged) = converge(
        workload,
        &pods,
        &|node| rebind.rebind_for(node),
        since,
        limits,
    )
    .await;
    result.workers = details;
    result
        .timings
        .push(("rebind helm upgrade".to_owned(), round(helm_took)));
    let rebind_res = converged.map(|took| {
        result.timings.push((
            "rebind: helm upgrade to last verified worker".to_owned(),
            round(took),
        ));
    });
    let recycled = not_recycled(workload, &before).await;

    eprintln!("    restoring the demo topology");
    let since = Instant::now();
    let restore = upgrade(&demo_file);
    let demo_of = |node: &str| rebind.demo_for(node);
    let restored = match restore {
        Ok(()) => {
            let (_, converged) = converge(workload, &pods, &demo_of, since, limits).await;
            converged.map(|took| {
                result.timings.push((
                    "restore: helm upgrade to last verified worker".to_owned(),
                    round(took),
                ));
            })
        }
        Err(err) => Err(err),
    };
    rebind_res.map_err(|err| format!("rebind: {err}"))?;
    recycled?;
    restored.map_err(|err| format!("restoring the demo topology: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recycled_names_only_the_pods_that_changed() {
        let map = |items: &[(&str, &str)]| -> BTreeMap<String, String> {
            items
                .iter()
                .map(|(name, uid)| ((*name).to_owned(), (*uid).to_owned()))
                .collect()
        };
        let before = map(&[("stager-a", "1"), ("work-a", "2"), ("work-b", "3")]);
        let after = map(&[("stager-b", "4"), ("work-a", "2"), ("work-b", "5")]);
        assert_eq!(
            recycled(&before, &after),
            "stager-a gone, work-b recreated (uid 3 -> 5), stager-b new"
        );
    }
}
