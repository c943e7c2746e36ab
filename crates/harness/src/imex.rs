//! Scenario 2's pure parts: the per-pod nvidia-imex config rendered from the
//! package's `config.cfg`, the nodes file, and the parsers of
//! `nvidia-imex-ctl -q` and `nvidia-imex-ctl -N -j` (nvml-abi-and-imex §9–§13).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::report::Outcome;

/// The rendered config inside each pod.
pub const CONFIG: &str = "/tmp/imex.cfg";
/// The nodes file inside each pod.
pub const NODES: &str = "/tmp/nodes.cfg";
/// The daemon's log inside each pod.
pub const LOG: &str = "/tmp/nvidia-imex.log";
/// The daemon's stdout and stderr inside each pod.
pub const STDOUT: &str = "/tmp/imex.stdout";
/// The daemon's pid file inside each pod.
pub const PID: &str = "/tmp/imex.pid";
/// The package's default config.
pub const PACKAGE_CONFIG: &str = "/etc/nvidia-imex/config.cfg";
/// The real daemon behind the shim; its absence means no payload.
pub const REAL_DAEMON: &str = "/usr/bin/nvidia-imex.real";

/// The keys the rendered config owns, with their values: foreground, our
/// nodes file, a pod-local log, and the command service that
/// `nvidia-imex-ctl` talks to, set explicitly as NVIDIA's DRA driver template
/// does rather than left to the package default.
pub const OWNED: [(&str, &str); 5] = [
    ("DAEMONIZE", "0"),
    ("IMEX_NODE_CONFIG_FILE", NODES),
    ("LOG_FILE_NAME", LOG),
    ("IMEX_CMD_ENABLED", "1"),
    ("IMEX_CMD_PORT", "50005"),
];

/// Renders the per-pod config from the package's: every line of an owned
/// key (each occurrence) gets our value, every other line is kept byte for
/// byte (line endings become `\n`), and owned keys the package lacks are
/// appended.
pub fn render_config(package_cfg: &str) -> String {
    let mut seen = [false; OWNED.len()];
    let mut out = String::with_capacity(package_cfg.len() + 128);
    for line in package_cfg.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let key = body
            .split_once('=')
            .map(|(key, _)| key.trim())
            .filter(|key| !key.starts_with('#'));
        match key.and_then(|key| OWNED.iter().position(|(owned, _)| *owned == key)) {
            Some(idx) => {
                seen[idx] = true;
                out.push_str(&format!("{}={}\n", OWNED[idx].0, OWNED[idx].1));
            }
            None => {
                out.push_str(body);
                out.push('\n');
            }
        }
    }
    for (idx, (key, value)) in OWNED.iter().enumerate() {
        if !seen[idx] {
            out.push_str(&format!("{key}={value}\n"));
        }
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

/// The words `-q` may print (nvml-abi-and-imex §13.1).
pub const Q_WORDS: [&str; 8] = [
    "INITIALIZING",
    "STARTING_AUTH_SERVER",
    "WAITING_FOR_PEERS",
    "WAITING_FOR_RECOVERY",
    "INIT_GPU",
    "READY",
    "SHUTTING_DOWN",
    "UNAVAILABLE",
];

/// The documented state word `-q` printed (one word and a newline), if any.
pub fn q_word(q_output: &str) -> Option<&'static str> {
    let word = q_output.strip_suffix('\n').unwrap_or(q_output);
    Q_WORDS.iter().copied().find(|it| *it == word)
}

/// The domain status `-N -j` reports.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DomainStatus {
    /// Every member READY and connected.
    Up,
    /// Some members missing.
    Degraded,
    /// No member serving.
    Down,
    /// Anything else (reported as seen).
    #[serde(other)]
    Other,
}

impl DomainStatus {
    /// The word, for messages.
    pub fn word(&self) -> &'static str {
        match self {
            DomainStatus::Up => "UP",
            DomainStatus::Degraded => "DEGRADED",
            DomainStatus::Down => "DOWN",
            DomainStatus::Other => "an unknown status",
        }
    }
}

/// The domain as `-N -j` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Domain {
    /// `UP`, `DEGRADED` or `DOWN`.
    pub status: DomainStatus,
    /// Members keyed by decimal index ("0", "1", …).
    pub nodes: BTreeMap<String, Member>,
}

/// One member of the domain.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Member {
    /// READY, UNAVAILABLE or a `-q` word.
    pub status: String,
    /// The member's IP.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub host: String,
    /// Driver version, or `NO_GPU`; empty (or null) for a dead member.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub version: String,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(de: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(de)?.unwrap_or_default())
}

/// Parses `-N -j`'s stdout. A banner line before the document is tolerated;
/// anything that is not the document (the daemon still starting, an error
/// message) is an error quoting what was printed.
pub fn parse_domain(output: &str) -> Result<Domain, String> {
    let text = output.trim();
    let first = serde_json::from_str::<Domain>(text);
    let err = match first {
        Ok(domain) => return Ok(domain),
        Err(err) => err,
    };
    if let (Some(start), Some(end)) = (text.find('{'), text.rfind('}')) {
        if start > 0 && start < end {
            if let Ok(domain) = serde_json::from_str::<Domain>(&text[start..=end]) {
                return Ok(domain);
            }
        }
    }
    Err(format!("not the -N -j document ({err}): {}", excerpt(text)))
}

/// At most 300 characters of `text`, for messages.
pub fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
        None => format!("{text:?}"),
    }
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

/// Which nvidia-imex a run drives, read from the daemon binary itself
/// (the double carries [`imex_double::MARKER`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// NVIDIA's (no test-double marker in the binary).
    Nvidia,
    /// The IMEX test double (`crates/imex-double`).
    TestDouble,
}

impl Daemon {
    /// `outcome` as a result that ran against this daemon says it: a pass
    /// against the double is [`Outcome::PassedTestDouble`], never plain
    /// passed, and a failure names the double.
    pub fn mark(self, outcome: Outcome) -> Outcome {
        match (outcome, self) {
            (Outcome::Passed, Daemon::TestDouble) => Outcome::PassedTestDouble,
            (Outcome::Failed(reason), Daemon::TestDouble) => {
                Outcome::Failed(format!("(against the IMEX test double) {reason}"))
            }
            (other, _) => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full, commented, package-shaped config (the IMEX test double's,
    /// written in the package's shape), with the variations a hand-edited one
    /// has: a commented-out owned key, spaces around `=`, CRLF, a duplicate.
    fn package_config() -> String {
        let mut cfg = include_str!("../../imex-double/payload/config.cfg").to_owned();
        cfg.push_str(
            "#IMEX_CMD_PORT=50010\n LOG_LEVEL = 3\r\nDAEMONIZE=1\nLOG_FILE_NAME =/var/log/x.log\n",
        );
        while cfg.len() < 10_000 {
            cfg.push_str("# padding comment of a package-shaped config, kept byte for byte\n");
        }
        cfg
    }

    #[test]
    fn render_changes_only_the_keys_it_owns() {
        let package = package_config();
        let rendered = render_config(&package);
        let (input, output): (Vec<&str>, Vec<&str>) =
            (package.lines().collect(), rendered.lines().collect());
        assert!(output.len() >= input.len());
        let owned_key = |line: &str| {
            line.split_once('=').is_some_and(|(key, _)| {
                let key = key.trim();
                !key.starts_with('#') && OWNED.iter().any(|(it, _)| *it == key)
            })
        };
        for (idx, (before, after)) in input.iter().zip(&output).enumerate() {
            if owned_key(before) {
                let key = before
                    .split_once('=')
                    .map(|(k, _)| k.trim())
                    .unwrap_or_default();
                let value = OWNED
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| *v)
                    .unwrap_or_default();
                assert_eq!(*after, format!("{key}={value}"), "line {}", idx + 1);
            } else {
                assert_eq!(
                    before.trim_end_matches('\r'),
                    *after,
                    "line {} changed",
                    idx + 1
                );
            }
        }
        // Nothing appended: the package has every owned key.
        assert_eq!(output.len(), input.len());
        for (key, value) in OWNED {
            assert!(rendered.contains(&format!("\n{key}={value}\n")), "{key}");
        }
        assert!(!output.contains(&"DAEMONIZE=1"));
        assert!(!output
            .iter()
            .any(|it| it.starts_with("LOG_FILE_NAME=/var/log")));
        assert!(
            rendered.contains("\n#IMEX_CMD_PORT=50010\n"),
            "comments stay"
        );
        assert!(rendered.contains("\nSTATS_FILE_NAME=/var/log/nvidia-imex-stats.log\n"));
    }

    #[test]
    fn missing_keys_are_appended() {
        let cfg = render_config("LOG_LEVEL=4\n");
        assert_eq!(
            cfg,
            "LOG_LEVEL=4\nDAEMONIZE=0\nIMEX_NODE_CONFIG_FILE=/tmp/nodes.cfg\nLOG_FILE_NAME=/tmp/nvidia-imex.log\nIMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\n"
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

    #[test]
    fn q_words_are_the_documented_ones() {
        assert_eq!(q_word("WAITING_FOR_PEERS\n"), Some("WAITING_FOR_PEERS"));
        assert_eq!(q_word("READY"), Some("READY"));
        assert_eq!(q_word("garbage\n"), None);
        assert_eq!(q_word("READY\nREADY\n"), None);
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

    /// Started nowhere: DOWN, every member UNAVAILABLE, versions null.
    const DOWN: &str = r#"{"nodes":{"0":{"status":"UNAVAILABLE","host":"10.0.0.1","hostName":"","connections":{"1":{"host":"10.0.0.2","status":"INVALID","changed":false}},"changed":false,"version":null},"1":{"status":"UNAVAILABLE","host":"10.0.0.2","hostName":null,"connections":{},"changed":false,"version":null}},"timestamp":"9/4/2026 00:40:00.000","status":"DOWN"}"#;

    /// Driver-mode members (a real version) in a larger domain, keys past 9.
    const DRIVER: &str = r#"{"nodes":{"0":{"status":"READY","host":"10.0.0.1","hostName":"gb200-0","connections":{},"changed":true,"version":"580.95.05"},"10":{"status":"READY","host":"10.0.0.11","hostName":"gb200-10","connections":{},"changed":true,"version":"580.95.05"}},"timestamp":"12/31/2026 23:59:59.999","status":"UP"}"#;

    #[test]
    fn domain_json_is_keyed_by_index_strings() {
        let up = parse_domain(UP).expect("json");
        assert_eq!(up.status, DomainStatus::Up);
        assert_eq!((up.ready(), up.no_gpu()), (2, 2));
        assert_eq!(up.nodes["1"].host, "10.244.2.7");
        let degraded = parse_domain(DEGRADED).expect("json");
        assert_eq!(degraded.status, DomainStatus::Degraded);
        assert_eq!((degraded.ready(), degraded.no_gpu()), (1, 1));
        assert_eq!(degraded.nodes["1"].version, "");
    }

    #[test]
    fn every_public_sample_shape_parses() {
        let down = parse_domain(DOWN).expect("null versions");
        assert_eq!(down.status, DomainStatus::Down);
        assert_eq!((down.ready(), down.no_gpu()), (0, 0));
        assert_eq!(down.nodes["0"].version, "", "null is empty");
        let driver = parse_domain(DRIVER).expect("driver mode");
        assert_eq!((driver.ready(), driver.no_gpu()), (2, 0));
        assert!(driver.nodes.contains_key("10"));
        // A banner line on stdout before the document.
        let noisy = format!("IMEX command service: connected\n{UP}\n");
        assert_eq!(
            parse_domain(&noisy).expect("banner").status,
            DomainStatus::Up
        );
        // An unknown status word is kept as Other, never taken for UP.
        let odd = UP.replace("\"status\": \"UP\"", "\"status\": \"RECOVERING\"");
        assert_eq!(parse_domain(&odd).expect("odd").status, DomainStatus::Other);
    }

    #[test]
    fn non_json_is_an_error_that_quotes_the_output() {
        // What the ctl prints while the local daemon is still starting, or
        // when the nodes file is unreadable; stderr never reaches the parser.
        for text in [
            "",
            "Failed to read node configuration file\n",
            "Connection refused\n",
            "{\"nodes\": {\"0\": ",
            "{\"status\": \"UP\"}",
        ] {
            let err = parse_domain(text).expect_err(text);
            assert!(err.starts_with("not the -N -j document"), "{err}");
            assert!(
                err.contains(&format!("{:?}", text.trim()).trim_matches('"').to_owned()),
                "{err}"
            );
        }
    }

    #[test]
    fn nodes_file_is_one_ip_per_line() {
        assert_eq!(
            nodes_file(&["10.0.0.1".to_owned(), "10.0.0.2".to_owned()]),
            "10.0.0.1\n10.0.0.2\n"
        );
    }
}
