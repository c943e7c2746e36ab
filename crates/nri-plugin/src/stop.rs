//! Stopping a missed container's process when the runtime ignored the eviction (see `heal.rs`).
//!
//! The only I/O of healing: read `/proc/<pid>/cgroup`, then SIGKILL the pid when the cgroup
//! names the container. A pid the plugin cannot see (no host PID namespace) or that belongs to
//! something else is never signalled.

use std::io::ErrorKind;

use rustix::process::{kill_process, Pid, Signal};

use crate::heal::{cgroup_names_container, Missed};

/// What happened to one missed container's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// The process is gone: the runtime stopped the container.
    AlreadyGone,
    /// The plugin sent SIGKILL to the container's init process.
    Killed,
    /// Left alone, with why (the runtime reported no pid, the pid is not the container's, or
    /// the signal was refused).
    LeftAlone(String),
}

/// Stops the container's init process if it still runs as that container's.
pub fn stop_process(missed: &Missed) -> Stopped {
    let Some(pid) = Pid::from_raw(missed.pid as i32).filter(|_| missed.pid > 0) else {
        return Stopped::LeftAlone("the runtime reported no pid for it".to_owned());
    };
    let cgroup = match std::fs::read_to_string(format!("/proc/{}/cgroup", missed.pid)) {
        Ok(text) => text,
        Err(err) if err.kind() == ErrorKind::NotFound => return Stopped::AlreadyGone,
        Err(err) => {
            return Stopped::LeftAlone(format!("cannot read /proc/{}/cgroup: {err}", missed.pid))
        }
    };
    if !cgroup_names_container(&cgroup, &missed.container_id) {
        return Stopped::LeftAlone(format!(
            "pid {} is not in the container's cgroup here (the plugin needs the host's PID namespace: the chart's nri.heal)",
            missed.pid
        ));
    }
    match kill_process(pid, Signal::KILL) {
        Ok(()) => Stopped::Killed,
        Err(rustix::io::Errno::SRCH) => Stopped::AlreadyGone,
        Err(err) => Stopped::LeftAlone(format!(
            "SIGKILL to pid {} was refused: {err} (the plugin needs CAP_KILL: the chart's nri.heal)",
            missed.pid
        )),
    }
}
