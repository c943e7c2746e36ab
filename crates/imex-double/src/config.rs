//! The `-c` config file: `KEY=VALUE` lines, `#` comments (IMEX guide,
//! config.html; nvml-abi-and-imex §9).

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::{Error, Result};

/// The package's config path, the default of `-c`.
pub const DEFAULT_PATH: &str = "/etc/nvidia-imex/config.cfg";

/// A parsed config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    path: String,
    values: BTreeMap<String, String>,
}

/// Where the daemon logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// stderr (empty `LOG_FILE_NAME`).
    Stderr,
    /// A file.
    File(String),
}

impl Config {
    /// Parses `text` (read from `path`, named in errors).
    pub fn parse(path: &str, text: &str) -> Result<Config> {
        let mut values = BTreeMap::new();
        for (idx, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(Error::ConfigLine {
                    path: path.to_owned(),
                    line: idx + 1,
                    text: raw.to_owned(),
                });
            };
            values.insert(key.trim().to_owned(), value.trim().to_owned());
        }
        Ok(Config {
            path: path.to_owned(),
            values,
        })
    }

    /// Reads and parses a file.
    pub fn read(path: &str) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Config::parse(path, &text)
    }

    /// The file it came from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// A key's value; `None` when absent or empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(key)
            .map(String::as_str)
            .filter(|it| !it.is_empty())
    }

    fn invalid(&self, key: &str, value: &str, expected: &'static str) -> Error {
        Error::ConfigValue {
            path: self.path.clone(),
            key: key.to_owned(),
            value: value.to_owned(),
            expected,
        }
    }

    fn port_or(&self, key: &str, default: u16) -> Result<u16> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => value
                .parse::<u16>()
                .ok()
                .filter(|it| *it != 0)
                .ok_or_else(|| self.invalid(key, value, "a TCP port (1-65535)")),
        }
    }

    fn ip(&self, key: &str) -> Result<Option<IpAddr>> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => value
                .parse()
                .map(Some)
                .map_err(|_| self.invalid(key, value, "an IP address")),
        }
    }

    /// `SERVER_PORT` (default 50000).
    pub fn server_port(&self) -> Result<u16> {
        self.port_or("SERVER_PORT", 50000)
    }

    /// `BIND_INTERFACE_IP`, when set.
    pub fn bind_ip(&self) -> Result<Option<IpAddr>> {
        self.ip("BIND_INTERFACE_IP")
    }

    /// `IMEX_NODE_CONFIG_FILE` (default `/etc/nvidia-imex/nodes_config.cfg`).
    pub fn nodes_file(&self) -> &str {
        self.get("IMEX_NODE_CONFIG_FILE")
            .unwrap_or("/etc/nvidia-imex/nodes_config.cfg")
    }

    /// `DAEMONIZE` (default 1).
    pub fn daemonize(&self) -> Result<bool> {
        self.flag("DAEMONIZE", true)
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some("0") => Ok(false),
            Some("1") => Ok(true),
            Some(other) => Err(self.invalid(key, other, "0 or 1")),
        }
    }

    /// The command service's port, or `None` when disabled.
    ///
    /// Stricter than the guide on purpose: both `IMEX_CMD_ENABLED` and
    /// `IMEX_CMD_PORT` must be set, so a config that works with the double
    /// never leans on a package default.
    pub fn cmd_port(&self) -> Result<Option<u16>> {
        let Some(enabled) = self.get("IMEX_CMD_ENABLED") else {
            return Err(Error::ConfigMissing {
                path: self.path.clone(),
                key: "IMEX_CMD_ENABLED".to_owned(),
                why: "set it to 1 (the IMEX test double does not assume the package default)",
            });
        };
        if !self.flag("IMEX_CMD_ENABLED", false)? {
            let _ = enabled;
            return Ok(None);
        }
        match self.get("IMEX_CMD_PORT") {
            None => Err(Error::ConfigMissing {
                path: self.path.clone(),
                key: "IMEX_CMD_PORT".to_owned(),
                why: "set it (NVIDIA's DRA driver uses 50005); the IMEX test double does not \
                      assume the package default",
            }),
            Some(_) => self.port_or("IMEX_CMD_PORT", 0).map(Some),
        }
    }

    /// `IMEX_CMD_BIND_INTERFACE_IP`, when set.
    pub fn cmd_bind_ip(&self) -> Result<Option<IpAddr>> {
        self.ip("IMEX_CMD_BIND_INTERFACE_IP")
    }

    /// `LOG_FILE_NAME` (default `/var/log/nvidia-imex.log`; empty: stderr).
    pub fn log_target(&self) -> LogTarget {
        match self.values.get("LOG_FILE_NAME") {
            None => LogTarget::File("/var/log/nvidia-imex.log".to_owned()),
            Some(value) if value.is_empty() => LogTarget::Stderr,
            Some(value) => LogTarget::File(value.clone()),
        }
    }

    /// `STATS_FILE_NAME` (default `/var/log/nvidia-imex-stats.log`).
    pub fn stats_file(&self) -> Option<String> {
        match self.values.get("STATS_FILE_NAME") {
            None => Some("/var/log/nvidia-imex-stats.log".to_owned()),
            Some(value) if value.is_empty() => None,
            Some(value) => Some(value.clone()),
        }
    }

    /// `LOG_APPEND_TO_LOG` (default 1).
    pub fn append_log(&self) -> Result<bool> {
        self.flag("LOG_APPEND_TO_LOG", true)
    }

    /// Every key and value, for the start-up log.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKAGE: &str = include_str!("../payload/config.cfg");

    #[test]
    fn the_payload_config_is_the_package_shape() {
        let cfg = Config::parse("config.cfg", PACKAGE).expect("parses");
        assert!(cfg.daemonize().expect("flag"), "package default forks");
        assert_eq!(cfg.nodes_file(), "/etc/nvidia-imex/nodes_config.cfg");
        assert_eq!(
            cfg.log_target(),
            LogTarget::File("/var/log/nvidia-imex.log".to_owned())
        );
        assert_eq!(cfg.server_port().expect("port"), 50000);
        assert_eq!(cfg.cmd_port().expect("cmd"), Some(50005));
        assert_eq!(cfg.bind_ip().expect("ip"), None);
    }

    #[test]
    fn the_command_service_needs_both_keys() {
        for (text, missing) in [
            ("IMEX_CMD_PORT=50005\n", "IMEX_CMD_ENABLED is not set"),
            ("IMEX_CMD_ENABLED=1\n", "IMEX_CMD_PORT is not set"),
        ] {
            let err = Config::parse("c", text)
                .expect("parses")
                .cmd_port()
                .expect_err(missing);
            assert!(err.to_string().contains(missing), "{err}");
        }
        let off = Config::parse("c", "IMEX_CMD_ENABLED=0\n").expect("parses");
        assert_eq!(off.cmd_port().expect("off"), None);
    }

    #[test]
    fn bad_lines_and_values_name_the_file() {
        let err = Config::parse("/tmp/imex.cfg", "# c\nDAEMONIZE 0\n").expect_err("no =");
        assert_eq!(
            err.to_string(),
            "/tmp/imex.cfg:2: expected KEY=VALUE, found \"DAEMONIZE 0\""
        );
        let cfg = Config::parse("c", "SERVER_PORT=99999\nLOG_FILE_NAME=\n").expect("parses");
        assert!(cfg.server_port().is_err());
        assert_eq!(cfg.log_target(), LogTarget::Stderr);
    }
}
