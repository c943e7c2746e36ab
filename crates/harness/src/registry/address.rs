//! The `--registry HOST[:PORT][/PREFIX]` value: where the images are pushed
//! and the nodes pull them from; below both the push and the pull events.

use std::fmt;

use crate::plan::ImageRef;

/// Where `up --registry` pushes the images and the nodes pull them from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    /// `host[:port]`.
    pub host: String,
    /// Repository path before the image's name, without slashes at the ends
    /// (empty: none).
    pub prefix: String,
    /// Plain HTTP instead of HTTPS (`--plain-http`).
    pub plain_http: bool,
}

impl Registry {
    /// Parses `HOST[:PORT][/PREFIX]`.
    pub fn parse(value: &str, plain_http: bool) -> Result<Registry, String> {
        let usage = "give --registry as HOST[:PORT][/PREFIX], e.g. registry.example.com/team or 172.18.0.1:5000";
        if value.contains("://") {
            return Err(format!(
                "--registry {value:?}: no scheme, please ({usage}); a registry without TLS also needs --plain-http"
            ));
        }
        let (host, prefix) = value.split_once('/').unwrap_or((value, ""));
        let (name, port) = match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        };
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if !name_ok {
            return Err(format!(
                "--registry {value:?}: `{host}` is not a host name or IPv4 address ({usage})"
            ));
        }
        if let Some(port) = port {
            if !matches!(port.parse::<u16>(), Ok(1..)) {
                return Err(format!(
                    "--registry {value:?}: port `{port}` is not 1..65535 ({usage})"
                ));
            }
        }
        let prefix = prefix.trim_end_matches('/');
        let prefix_ok = prefix.split('/').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
        });
        if !prefix.is_empty() && !prefix_ok {
            return Err(format!(
                "--registry {value:?}: the prefix `{prefix}` must be lowercase path components ([a-z0-9._-], separated by /)"
            ));
        }
        Ok(Registry {
            host: host.to_owned(),
            prefix: prefix.to_owned(),
            plain_http,
        })
    }

    /// The repository an image named `name` gets in this registry.
    pub fn repository(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }

    /// `image` (as built, e.g. `nvml-mock:1a2b…`) as the nodes pull it from here.
    pub fn image(&self, image: &ImageRef) -> ImageRef {
        ImageRef {
            repository: format!("{}/{}", self.host, self.repository(&image.repository)),
            tag: image.tag.clone(),
        }
    }
}

impl fmt::Display for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.plain_http { "http" } else { "https" };
        write!(f, "{scheme}://{}", self.host)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_values_parse_with_port_and_prefix() {
        let registry = Registry::parse("172.18.0.1:5000/cdsim/ci", true).expect("valid");
        assert_eq!(registry.host, "172.18.0.1:5000");
        assert_eq!(registry.prefix, "cdsim/ci");
        let image = ImageRef {
            repository: "nvml-mock".to_owned(),
            tag: "1a2b3c".to_owned(),
        };
        assert_eq!(
            registry.image(&image).to_string(),
            "172.18.0.1:5000/cdsim/ci/nvml-mock:1a2b3c"
        );
        assert_eq!(registry.to_string(), "http://172.18.0.1:5000/cdsim/ci");
        let bare = Registry::parse("registry.example.com", false).expect("valid");
        assert_eq!(
            bare.image(&image).to_string(),
            "registry.example.com/nvml-mock:1a2b3c"
        );
    }

    #[test]
    fn bad_registry_values_say_what_to_give() {
        for (value, says) in [
            ("http://host:5000", "no scheme"),
            ("", "not a host name"),
            ("host:0", "port `0`"),
            ("host:http", "port `http`"),
            ("host/Team", "lowercase"),
            ("host//x", "lowercase"),
            ("ho st", "not a host name"),
        ] {
            let err = Registry::parse(value, false).expect_err(value);
            assert!(err.contains(says), "{value}: {err}");
            assert!(err.contains("--registry"), "{value}: {err}");
        }
    }
}
