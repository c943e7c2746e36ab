//! The run-wide state a clean Ctrl-C needs: the step the run is in, the
//! pods that may hold nvidia-imex daemons, and how to restore the demo
//! topology while scenario 3's rebind is live. xtask's interrupt handler reads
//! it; the scenarios write it.

use std::sync::{Arc, Mutex};

use crate::runner::Cmd;

/// Where the run is, for a clean Ctrl-C: the step, and pods that may hold
/// nvidia-imex daemons.
#[derive(Debug, Clone, Default)]
pub struct Tracker(Arc<Mutex<TrackerState>>);

/// The tracked state.
#[derive(Debug, Clone, Default)]
pub struct TrackerState {
    /// The current step.
    pub step: String,
    /// Pods that may run nvidia-imex daemons.
    pub imex_pods: Vec<String>,
    /// While the rebind topology is live: the helm command that restores the
    /// demo one, which the interrupt handler runs through a `Runner`.
    pub restore_topology: Option<Cmd>,
}

impl Tracker {
    /// Enters a step.
    pub fn step(&self, step: &str) {
        if let Ok(mut state) = self.0.lock() {
            state.step = step.to_owned();
        }
    }

    /// Records pods that may now run daemons (empty: none).
    pub fn imex_pods(&self, pods: &[String]) {
        if let Ok(mut state) = self.0.lock() {
            state.imex_pods = pods.to_vec();
        }
    }

    /// Registers the command that restores the demo topology (`None`: nothing to restore).
    pub fn restore_topology(&self, cleanup: Option<Cmd>) {
        if let Ok(mut state) = self.0.lock() {
            state.restore_topology = cleanup;
        }
    }

    /// A copy of the state.
    pub fn snapshot(&self) -> TrackerState {
        self.0.lock().map(|it| it.clone()).unwrap_or_default()
    }
}
