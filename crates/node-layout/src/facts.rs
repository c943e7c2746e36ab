//! What a node tells `cargo xtask up --kube-context` before the install, as
//! `nvml-mock-stager node-facts` prints it in a probe pod and xtask reads it
//! from the pod's log: whether containerd's NRI socket answers, and the host
//! kernel's `/proc/devices` (which no namespace hides), from which the IMEX
//! majors are chosen free on every node.
//!
//! ```
//! use node_layout::facts::{NodeFacts, Nri};
//!
//! let facts = NodeFacts {
//!     nri: Nri::Listening,
//!     proc_devices: "Character devices:\n  1 mem\n\nBlock devices:\n  7 loop\n".to_owned(),
//! };
//! assert_eq!(NodeFacts::parse(&facts.render()).unwrap(), facts);
//! ```

use std::fmt;

/// The first line of the report; a log without it is not one.
const MAGIC: &str = "nvml-mock node-facts v1";
const NRI_KEY: &str = "nri: ";
const DEVICES_LINE: &str = "--- /proc/devices";

/// containerd's NRI socket (its default `socket_path`), which every node must
/// serve: the NRI plugin dials it and xtask checks it.
pub const NRI_SOCKET: &str = "/var/run/nri/nri.sock";

/// Where the probe pod mounts the host's `/var/run` (read-only).
pub const HOST_RUN_MOUNT: &str = "/host/var/run";

/// The host's `/var/run` the probe mounts.
pub const HOST_RUN: &str = "/var/run";

/// [`NRI_SOCKET`] as the probe pod sees it, under [`HOST_RUN_MOUNT`].
pub fn nri_socket_in_probe() -> String {
    let relative = NRI_SOCKET.strip_prefix(HOST_RUN).unwrap_or(NRI_SOCKET);
    format!("{HOST_RUN_MOUNT}{relative}")
}

/// Whether containerd's NRI socket answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nri {
    /// A connection to the socket succeeded.
    Listening,
    /// There is no socket: NRI is not enabled (or containerd is older than 1.7).
    Absent,
    /// The socket exists but refused the connection.
    Refused(String),
}

impl fmt::Display for Nri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Nri::Listening => f.write_str("listening"),
            Nri::Absent => f.write_str("absent"),
            Nri::Refused(why) => write!(f, "refused {why}"),
        }
    }
}

/// One node's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// The NRI socket's state.
    pub nri: Nri,
    /// The host kernel's `/proc/devices`, verbatim.
    pub proc_devices: String,
}

/// A log that is not a node-facts report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an nvml-mock node-facts report: {0}")]
pub struct ParseError(String);

impl NodeFacts {
    /// The report, as the probe prints it.
    pub fn render(&self) -> String {
        format!(
            "{MAGIC}\n{NRI_KEY}{}\n{DEVICES_LINE}\n{}",
            self.nri, self.proc_devices
        )
    }

    /// Parses a probe's log.
    pub fn parse(log: &str) -> Result<NodeFacts, ParseError> {
        let start = log
            .find(MAGIC)
            .ok_or_else(|| ParseError(format!("no `{MAGIC}` line")))?;
        let rest = &log[start + MAGIC.len()..];
        let rest = rest.strip_prefix('\n').unwrap_or(rest);
        let (nri_line, rest) = rest
            .split_once('\n')
            .ok_or_else(|| ParseError("it ends after its first line".to_owned()))?;
        let state = nri_line
            .strip_prefix(NRI_KEY)
            .ok_or_else(|| ParseError(format!("no `{NRI_KEY}` line")))?;
        let nri = match state {
            "listening" => Nri::Listening,
            "absent" => Nri::Absent,
            other => match other.strip_prefix("refused ") {
                Some(why) => Nri::Refused(why.to_owned()),
                None => return Err(ParseError(format!("unknown NRI state `{other}`"))),
            },
        };
        let proc_devices = rest
            .strip_prefix(DEVICES_LINE)
            .and_then(|it| it.strip_prefix('\n'))
            .ok_or_else(|| ParseError(format!("no `{DEVICES_LINE}` line")))?;
        Ok(NodeFacts {
            nri,
            proc_devices: proc_devices.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_finds_the_socket_under_its_mount() {
        assert_eq!(nri_socket_in_probe(), "/host/var/run/nri/nri.sock");
    }

    #[test]
    fn every_state_round_trips() {
        for nri in [
            Nri::Listening,
            Nri::Absent,
            Nri::Refused("connection refused (os error 111)".to_owned()),
        ] {
            let facts = NodeFacts {
                nri,
                proc_devices: "Character devices:\n  1 mem\n\nBlock devices:\n".to_owned(),
            };
            assert_eq!(NodeFacts::parse(&facts.render()), Ok(facts));
        }
    }

    #[test]
    fn other_logs_are_refused_saying_why() {
        let err = NodeFacts::parse("exec format error").expect_err("no report");
        assert!(
            err.to_string()
                .contains("no `nvml-mock node-facts v1` line"),
            "{err}"
        );
        let err = NodeFacts::parse("nvml-mock node-facts v1\nnri: maybe\n--- /proc/devices\n")
            .expect_err("bad state");
        assert!(
            err.to_string().contains("unknown NRI state `maybe`"),
            "{err}"
        );
        let err = NodeFacts::parse("nvml-mock node-facts v1\nnri: absent\n").expect_err("cut");
        assert!(err.to_string().contains("--- /proc/devices"), "{err}");
    }
}
