//! Scenario 2's pure parts: the per-pod nvidia-imex config rendered from the
//! package's `config.cfg`, the nodes file, and the parsers of
//! `nvidia-imex-ctl -q` and `nvidia-imex-ctl -N -j` (nvml-abi-and-imex §9–§13).

use std::collections::BTreeMap;

use serde::Deserialize;

/// The rendered config inside each pod.
pub const CONFIG: &str = "/tmp/imex.cfg";
/// The nodes file inside each pod.
pub const NODES: &str = "/tmp/nodes.cfg";
/// The daemon's log inside each pod.
pub const LOG: &str = "/tmp/nvidia-imex.log";
/// The daemon's pid file inside each pod.
pub const PID: &str = "/tmp/imex.pid";
/// The package's default config.
pub const PACKAGE_CONFIG: &str = "/etc/nvidia-imex/config.cfg";
/// The real daemon behind the shim; its absence means no payload.
pub const REAL_DAEMON: &str = "/usr/bin/nvidia-imex.real";

/// Renders the per-pod config: foreground, our nodes file, a pod-local log.
///
/// Keys the package lacks are appended, so the result never depends on the
/// package's defaults for these three.
pub fn render_config(package_cfg: &str) -> String {
    let mut wanted: BTreeMap<&str, String> = BTreeMap::from([
        ("DAEMONIZE", "0".to_owned()),
        ("IMEX_NODE_CONFIG_FILE", NODES.to_owned()),
        ("LOG_FILE_NAME", LOG.to_owned()),
    ]);
    let mut out = String::new();
    for line in package_cfg.lines() {
        let key = line.split_once('=').map(|(key, _)| key.trim());
        match key.and_then(|key| wanted.remove_entry(key)) {
            Some((key, value)) => out.push_str(&format!("{key}={value}\n")),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    for (key, value) in wanted {
        out.push_str(&format!("{key}={value}\n"));
    }
    out
}

/// The nodes file: one IP per line, identical on every member.
pub fn nodes_file(ips: &[String]) -> String {
    let mut out = ips.join("\n");
    out.push('\n');
    out
}

/// Whether `-q` said the local daemon is ready: exactly `READY` and a newline
/// (what the DRA daemon's probe requires).
pub fn is_ready(q_output: &str) -> bool {
    q_output == "READY\n" || q_output == "READY"
}

/// The domain as `-N -j` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Domain {
    /// `UP`, `DEGRADED` or `DOWN`.
    pub status: String,
    /// Members keyed by decimal index ("0", "1", …).
    pub nodes: BTreeMap<String, Member>,
}

/// One member of the domain.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Member {
    /// READY, UNAVAILABLE or a `-q` word.
    pub status: String,
    /// The member's IP.
    #[serde(default)]
    pub host: String,
    /// Driver version, or `NO_GPU`; empty for a dead member.
    #[serde(default)]
    pub version: String,
}

/// Parses `-N -j`; `None` when the daemon is not answering (no JSON yet).
pub fn parse_domain(output: &str) -> Option<Domain> {
    serde_json::from_str(output.trim()).ok()
}

impl Domain {
    /// Members that are READY.
    pub fn ready(&self) -> usize {
        self.nodes
            .values()
            .filter(|it| it.status == "READY")
            .count()
    }

    /// Members in NO GPU mode.
    pub fn no_gpu(&self) -> usize {
        self.nodes
            .values()
            .filter(|it| it.version == "NO_GPU")
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of the package default that matter (nvml-abi-and-imex §9, §14).
    const PACKAGE: &str = "# IMEX config\nLOG_LEVEL=4\nLOG_FILE_NAME=/var/log/nvidia-imex.log\nDAEMONIZE=1\nSERVER_PORT=50000\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\nIMEX_CMD_PORT=50005\n";

    #[test]
    fn config_is_foreground_with_our_nodes_file_and_log() {
        let cfg = render_config(PACKAGE);
        assert!(cfg.contains("\nDAEMONIZE=0\n"), "{cfg}");
        assert!(
            cfg.contains("\nIMEX_NODE_CONFIG_FILE=/tmp/nodes.cfg\n"),
            "{cfg}"
        );
        assert!(
            cfg.contains("\nLOG_FILE_NAME=/tmp/nvidia-imex.log\n"),
            "{cfg}"
        );
        assert!(cfg.contains("\nSERVER_PORT=50000\n") && cfg.starts_with("# IMEX config\n"));
        assert!(!cfg.contains("DAEMONIZE=1") && !cfg.contains("/var/log/nvidia-imex.log"));
    }

    #[test]
    fn missing_keys_are_appended() {
        let cfg = render_config("LOG_LEVEL=4\n");
        assert_eq!(
            cfg,
            "LOG_LEVEL=4\nDAEMONIZE=0\nIMEX_NODE_CONFIG_FILE=/tmp/nodes.cfg\nLOG_FILE_NAME=/tmp/nvidia-imex.log\n"
        );
    }

    #[test]
    fn q_is_ready_only_for_exactly_ready() {
        assert!(is_ready("READY\n"));
        for not in [
            "",
            "INITIALIZING\n",
            "READY\nREADY\n",
            "NOT READY\n",
            "Failed to read node configuration file\n",
        ] {
            assert!(!is_ready(not), "{not:?}");
        }
    }

    /// `-N -j` with both daemons up in NO GPU mode (nvml-abi-and-imex §13.3).
    const UP: &str = r#"{
  "nodes": {
    "0": {"status": "READY", "host": "10.244.1.5", "hostName": "", "connections": {"1": {"host": "10.244.2.7", "status": "CONNECTED", "changed": true}}, "changed": true, "version": "NO_GPU"},
    "1": {"status": "READY", "host": "10.244.2.7", "hostName": "", "connections": {"0": {"host": "10.244.1.5", "status": "CONNECTED", "changed": true}}, "changed": true, "version": "NO_GPU"}
  },
  "timestamp": "9/4/2026 00:37:39.905",
  "status": "UP"
}"#;

    /// One member dead: rebuilt from the nodes file, UNAVAILABLE, empty version.
    const DEGRADED: &str = r#"{"nodes":{"0":{"status":"READY","host":"10.244.1.5","hostName":"","connections":{"1":{"host":"10.244.2.7","status":"INVALID","changed":true}},"changed":true,"version":"NO_GPU"},"1":{"status":"UNAVAILABLE","host":"10.244.2.7","hostName":"","connections":{},"changed":true,"version":""}},"timestamp":"9/4/2026 00:38:01.114","status":"DEGRADED"}"#;

    #[test]
    fn domain_json_is_keyed_by_index_strings() {
        let up = parse_domain(UP).expect("json");
        assert_eq!(up.status, "UP");
        assert_eq!((up.ready(), up.no_gpu()), (2, 2));
        assert_eq!(up.nodes["1"].host, "10.244.2.7");
        let degraded = parse_domain(DEGRADED).expect("json");
        assert_eq!(degraded.status, "DEGRADED");
        assert_eq!((degraded.ready(), degraded.no_gpu()), (1, 1));
        assert_eq!(
            parse_domain("Failed to read node configuration file\n"),
            None
        );
        assert_eq!(parse_domain(""), None);
    }

    #[test]
    fn nodes_file_is_one_ip_per_line() {
        assert_eq!(
            nodes_file(&["10.0.0.1".to_owned(), "10.0.0.2".to_owned()]),
            "10.0.0.1\n10.0.0.2\n"
        );
    }
}
