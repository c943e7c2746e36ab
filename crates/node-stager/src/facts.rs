//! `nvml-mock-stager node-facts`: one look at this node for `cargo xtask up
//! --kube-context`, printed on stdout as `node_layout::facts` renders it.
//!
//! Run in a short-lived probe pod with the host's `/var/run` mounted
//! read-only at `node_layout::facts::HOST_RUN_MOUNT`: `/proc/devices` is the host kernel's in
//! any container, and a connection to containerd's NRI socket tells whether
//! NRI is enabled.

use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::Path;

use anyhow::{Context, Result};
use node_layout::facts::{nri_socket_in_probe, NodeFacts, Nri};

/// The NRI socket's state at `socket`.
pub fn nri_state(socket: &Path) -> Nri {
    match UnixStream::connect(socket) {
        Ok(_) => Nri::Listening,
        Err(err) if err.kind() == ErrorKind::NotFound => Nri::Absent,
        Err(err) => Nri::Refused(err.to_string()),
    }
}

/// Gathers and prints the facts.
pub fn run() -> Result<()> {
    let proc_devices =
        std::fs::read_to_string("/proc/devices").context("cannot read /proc/devices")?;
    let socket = nri_socket_in_probe();
    let facts = NodeFacts {
        nri: nri_state(Path::new(&socket)),
        proc_devices,
    };
    print!("{}", facts.render());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_an_absent_one_and_a_dead_one_are_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nri.sock");
        assert_eq!(nri_state(&path), Nri::Absent);
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        assert_eq!(nri_state(&path), Nri::Listening);
        drop(listener);
        // The socket file stays behind with nobody listening.
        assert!(matches!(nri_state(&path), Nri::Refused(why) if why.contains("refused")));
    }
}
