//! What every row of scenario 5 shares: the cluster it runs on
//! ([`Scenario5On`], its workers) and how a step becomes a report row
//! ([`Rows`], [`finish`], [`step`]), and the wait until every tray shows
//! what a row expects ([`wait_every_tray`]); below the flow and each row's
//! module.

use std::future::Future;
use std::time::Duration;

use anyhow::Result;
use tokio::time::Instant;

use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};

/// What scenario 5 runs on.
pub struct Scenario5On<'a> {
    /// The cluster: kind or the API alone, how an Xid is injected.
    pub cluster: crate::reach::Reach<'a>,
    /// Where the charts and images come from.
    pub source: &'a crate::gpu_source::Source,
    /// Each worker and its `<cluster uuid>.<clique id>` in the staged topology.
    pub cliques: Vec<(String, String)>,
    /// Scenario 3's rebind and the demo topology, which `scenario5-relabel` swaps.
    pub rebind: crate::scenarios::Rebind,
    /// Where the command restoring the demo topology is registered while the rebind is live.
    pub tracker: &'a crate::tracker::Tracker,
}

/// The workers scenario 5 runs on, in order.
pub fn workers(on: &Scenario5On<'_>) -> Vec<String> {
    on.cliques.iter().map(|(node, _)| node.clone()).collect()
}

/// What a step returns: per-worker details and named timings.
pub type Rows = (Vec<WorkerDetail>, Vec<(String, f64)>);

/// A row from a step's result.
pub fn finish(name: &str, started: Instant, result: Result<Rows>) -> ScenarioResult {
    let seconds = round(started.elapsed());
    match result {
        Ok((workers, timings)) => ScenarioResult {
            workers,
            timings,
            ..ScenarioResult::new(name, Outcome::Passed, seconds)
        },
        Err(err) => ScenarioResult::new(name, Outcome::Failed(format!("{err:#}")), seconds),
    }
}

/// Runs a step when the install passed; else it fails as not run.
pub async fn step(
    name: &str,
    install_ok: bool,
    body: impl std::future::Future<Output = Result<Rows>>,
) -> ScenarioResult {
    let started = Instant::now();
    if !install_ok {
        return ScenarioResult::new(
            name,
            Outcome::Failed("not run: the install (row scenario5) failed".to_owned()),
            0.0,
        );
    }
    eprintln!("    {name}");
    let row = finish(name, started, body.await);
    if let Outcome::Failed(reason) = &row.outcome {
        eprintln!("ERROR: {name}: {reason}");
    }
    row
}

/// Waits, up to `limit` and with progress named `what`, until a probe finds
/// no tray off: the probe returns what it saw and one line per tray that is
/// not there yet (joined with `; ` as the progress).
pub async fn wait_every_tray<T, P, F>(what: &str, limit: Duration, mut probe: P) -> Result<T>
where
    P: FnMut() -> F,
    F: Future<Output = Result<(T, Vec<String>)>>,
{
    crate::scenario4::api::wait_for(
        what,
        limit,
        || {
            let probed = probe();
            async move {
                let (seen, off) = probed.await?;
                Ok(if off.is_empty() {
                    Ok(seen)
                } else {
                    Err(off.join("; "))
                })
            }
        },
        || async { String::new() },
    )
    .await
}
