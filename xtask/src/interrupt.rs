//! Ctrl-C: the handler that reads the run's [`Tracker`] (the harness owns it),
//! stops what a scenario left running and says where the run stopped.
//!
//! Cleanups are registered in the tracker as [`Cmd`]s while they are due
//! (scenario 3's topology restore); the handler runs them through a
//! `ShellRunner` of its own, since the run's tasks and their runner are
//! abandoned by then.

use std::path::PathBuf;
use std::time::Duration;

pub use harness::tracker::Tracker;

use crate::runner::{Cmd, Runner, ShellRunner};
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
    if let Some(cleanup) = &state.restore_topology {
        restore_topology(cleanup).await;
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

/// Runs `cmd`, once more after `pause` if it fails (an upgrade of the
/// scenario itself may still be finishing); the last error, empty on success.
/// Blocking: the process exits right after.
fn run_with_one_retry<R: Runner>(runner: &R, cmd: &Cmd, pause: Duration) -> String {
    let mut last = String::new();
    for attempt in 0..2 {
        if attempt > 0 {
            std::thread::sleep(pause);
        }
        match runner.check(cmd) {
            Ok(_) => return String::new(),
            Err(err) => last = format!("{err:#}"),
        }
    }
    last
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

/// Runs the command scenario 3 (or 4) registered to restore the demo
/// topology, through a runner of its own: the run's runner went with the
/// abandoned tasks.
async fn restore_topology(cleanup: &Cmd) {
    eprintln!("    restoring the demo topology (scenario 3 was rebinding)");
    let last = match xshell::Shell::new() {
        Ok(sh) => {
            sh.change_dir(crate::project_root());
            let runner = ShellRunner::new(&sh, PathBuf::from("kind"), helm_path());
            run_with_one_retry(&runner, cleanup, Duration::from_secs(3))
        }
        Err(err) => err.to_string(),
    };
    if !last.is_empty() {
        eprintln!("    could not restore it ({last}); `cargo xtask scenario3` or `cargo xtask up` restores it");
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::runner::Output;

    /// Fails its first `failures` runs, then succeeds.
    struct Flaky {
        failures: Cell<u32>,
        runs: Cell<u32>,
    }

    impl Runner for Flaky {
        fn run(&self, _cmd: &Cmd) -> anyhow::Result<Output> {
            self.runs.set(self.runs.get() + 1);
            let ok = self.failures.get() == 0;
            self.failures.set(self.failures.get().saturating_sub(1));
            Ok(Output {
                ok,
                stdout: String::new(),
                stderr: "Error: UPGRADE FAILED: another operation is in progress".to_owned(),
            })
        }
    }

    #[test]
    fn a_cleanup_is_retried_once_and_its_last_error_kept() {
        let cmd = Cmd::new("helm", &["upgrade", "nvml-mock"]);
        let once = Flaky {
            failures: Cell::new(1),
            runs: Cell::new(0),
        };
        assert_eq!(run_with_one_retry(&once, &cmd, Duration::ZERO), "");
        assert_eq!(once.runs.get(), 2);
        let always = Flaky {
            failures: Cell::new(9),
            runs: Cell::new(0),
        };
        let last = run_with_one_retry(&always, &cmd, Duration::ZERO);
        assert_eq!(always.runs.get(), 2, "one retry, not more");
        assert!(last.contains("another operation is in progress"), "{last}");
    }
}
