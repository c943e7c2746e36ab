//! The scenarios as state machines over a [`Workload`] (exec in the demo
//! workload pods) and a [`Runner`](crate::runner::Runner) (helm), so they run
//! the same against the real cluster and against scripted fakes in tests.
//! One module each: [`scenario1`] (channel and fabric identity), [`scenario2`]
//! (two nvidia-imex daemons), [`scenario3`] (live rebind); scenarios 4 and 5
//! are `crate::scenario4` and `crate::scenario5`. Every wait is a [`poll::poll_until`].

pub mod poll;
mod scenario1;
mod scenario2;
mod scenario3;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::k8s::{ExecOutput, PodInfo};

pub use scenario1::scenario1;
pub use scenario2::{scenario2, stop_daemons};
pub use scenario3::{recycled, scenario3, upgrade_topology, write_values, Rebind};

/// Which scenario to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// The injected channel and each worker's fabric identity.
    One,
    /// Two nvidia-imex daemons form a domain and see a peer leave.
    Two,
    /// A live topology rebind without pod recycling.
    Three,
    /// NVIDIA's DRA driver and its ComputeDomain flow.
    Four,
    /// NVIDIA's device plugin and GPU feature discovery (`crate::scenario5`).
    Five,
}

impl Scenario {
    /// Every scenario, in order.
    pub const ALL: [Scenario; 5] = [
        Scenario::One,
        Scenario::Two,
        Scenario::Three,
        Scenario::Four,
        Scenario::Five,
    ];

    /// Its number, as the command line and the report name it.
    pub fn number(self) -> u8 {
        match self {
            Scenario::One => 1,
            Scenario::Two => 2,
            Scenario::Three => 3,
            Scenario::Four => 4,
            Scenario::Five => 5,
        }
    }

    /// `scenarioN`: its step and report name.
    pub fn name(self) -> String {
        format!("scenario{}", self.number())
    }
}

/// Exec access to the demo workload pods.
#[allow(async_fn_in_trait)]
pub trait Workload {
    /// The running workload pod on a node (waits, bounded).
    async fn pod_on_node(&self, node: &str) -> anyhow::Result<PodInfo>;
    /// Runs a command in a workload pod.
    async fn exec(&self, pod: &str, argv: &[&str]) -> anyhow::Result<ExecOutput>;
    /// Uids of the workload and mock-stack pods, by name.
    async fn pod_uids(&self) -> anyhow::Result<BTreeMap<String, String>>;
}

/// Bounds of every wait in the scenarios.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Poll interval.
    pub poll: Duration,
    /// Daemon A's `-q` READY, from the start exec's return (60 s: upstream's
    /// 30 polls at 1 s plus exec latency come to 39–60 s under CI's load;
    /// BENCHMARKS.md "Scenario 2 transitions").
    pub local_ready: Duration,
    /// The domain UP after B starts (reconnect backoff 15 s, 31 s, 62 s, 125 s…).
    pub domain_up: Duration,
    /// The domain leaving UP after B stops.
    pub domain_down: Duration,
    /// A topology change reaching every worker.
    pub converge: Duration,
}

impl Limits {
    /// The default limits with the topology's convergence scaled to `workers`
    /// (see [`scaled`]).
    pub fn for_workers(workers: usize) -> Limits {
        let default = Limits::default();
        Limits {
            converge: scaled(default.converge, workers),
            ..default
        }
    }
}

/// A wait sized for the demo's 4 workers, grown by 5 s per worker beyond 4:
/// nodes act in parallel but share the machine's CPUs.
pub fn scaled(base: Duration, workers: usize) -> Duration {
    let extra = u64::try_from(workers.saturating_sub(4)).unwrap_or(u64::MAX);
    base.saturating_add(Duration::from_secs(extra.saturating_mul(5)))
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            poll: Duration::from_secs(1),
            local_ready: Duration::from_secs(60),
            domain_up: Duration::from_secs(240),
            domain_down: Duration::from_secs(60),
            converge: Duration::from_secs(60),
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod double_tests;
