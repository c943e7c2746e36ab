//! Ctrl-C: the handler that reads the run's [`Tracker`] (the harness owns it),
//! stops what a scenario left running and says where the run stopped.
//!
//! The one place outside [`crate::runner`] that runs an external command
//! directly: the handler restores the demo topology with helm after the
//! runtime's tasks are abandoned, so it cannot borrow the run's `Runner`.

use std::path::PathBuf;
use std::time::Duration;

pub use harness::tracker::Tracker;

use crate::{k8s, scenarios, tools};

/// Ctrl-C: stop daemons a scenario may have started, say where the run
/// stopped, and exit; the runner lock dies with the process.
pub async fn on_interrupt(tracker: Tracker, context: String) {
    if tokio::signal::ctrl_c().await.is_err() {
        return;
    }
    let state = tracker.snapshot();
    let step = if state.step.is_empty() {
        "start-up"
    } else {
        state.step.as_str()
    };
    eprintln!("\ninterrupted during `{step}`");
    if !state.imex_pods.is_empty() && !context.is_empty() {
        stop_imex_daemons(&context, &state.imex_pods).await;
    }
    if let Some(args) = &state.restore_topology {
        restore_topology(args).await;
    }
    eprintln!("stopped; rerun the same command to continue: it reuses the cluster and images and redoes only what is missing");
    std::process::exit(130);
}

/// Stops the nvidia-imex daemons scenario 2 may have left in `pods` (bounded).
async fn stop_imex_daemons(context: &str, pods: &[String]) {
    eprintln!("    stopping nvidia-imex daemons in {}", pods.join(", "));
    let stop = async {
        let client = k8s::client(context).await?;
        let workload = harness::workload::KubeWorkload::new(client);
        scenarios::stop_daemons(&workload, pods).await;
        anyhow::Ok(())
    };
    if let Ok(Err(err)) | Err(err) = tokio::time::timeout(Duration::from_secs(15), stop)
        .await
        .map_err(anyhow::Error::from)
    {
        eprintln!("    could not stop them ({err:#}); the next scenario2 run stops them first");
    }
}

/// The pinned helm when it is installed, else `helm` on PATH.
fn helm_path() -> PathBuf {
    tools::read_versions()
        .and_then(|versions| tools::tool_version(&versions, tools::Tool::Helm))
        .and_then(|pinned| tools::locate(tools::Tool::Helm, &pinned))
        .ok()
        .flatten()
        .map_or_else(|| PathBuf::from("helm"), |it| it.path)
}

/// Runs the helm arguments scenario 3 recorded to restore the demo topology.
async fn restore_topology(args: &[String]) {
    eprintln!("    restoring the demo topology (scenario 3 was rebinding)");
    let helm = helm_path();
    // An upgrade of the scenario itself may still be finishing: retry once.
    let mut last = String::new();
    for attempt in 0..2 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        match std::process::Command::new(&helm)
            .args(args)
            .current_dir(crate::project_root())
            .output()
        {
            Ok(out) if out.status.success() => {
                last.clear();
                break;
            }
            Ok(out) => last = String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            Err(err) => last = err.to_string(),
        }
    }
    if !last.is_empty() {
        eprintln!("    could not restore it ({last}); `cargo xtask scenario3` or `cargo xtask up` restores it");
    }
}
