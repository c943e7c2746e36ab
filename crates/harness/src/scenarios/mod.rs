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
mod seam;

pub use poll::{scaled, Limits};
pub use scenario1::scenario1;
pub use scenario2::{scenario2, stop_daemons};
pub use scenario3::{recycled, scenario3, upgrade_topology, write_values, Rebind};
pub use seam::Workload;

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

#[cfg(test)]
mod tests;

#[cfg(test)]
mod double_tests;
