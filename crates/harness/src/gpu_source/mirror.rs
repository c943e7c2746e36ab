//! Mirrors standing in for the hosts NVIDIA publishes on: `CDSIM_MIRRORS`,
//! as a user behind a corporate mirror (or CI without the internet) sets it.
//!
//! A rule is `FROM=TO`, rules separated by spaces or commas:
//! - `FROM` a registry host (`registry.k8s.io`, `nvcr.io`): images named
//!   `FROM/…` and OCI charts `oci://FROM/…` come from `TO`
//!   (`http[s]://host[:port][/path]`), where `TO/<path after FROM>` is the
//!   repository (a path in `TO` is a prefix, as a proxy registry spells it);
//! - `FROM` a Helm repository URL (`https://nvidia.github.io/k8s-device-plugin`):
//!   its charts come from the Helm repository at `TO`.
//!
//! helm is pointed at `TO` (`--plain-http` for an `http://` OCI mirror, `--repo
//! TO` for a repository; the user's helm repository list is never changed). On
//! kind, each node's containerd is told to resolve `FROM` through `TO`
//! (`/etc/containerd/certs.d/FROM/hosts.toml`, [`hosts_toml`]); on another
//! cluster that is the nodes' own configuration.

use std::fmt;

use anyhow::Result;

use crate::names::KindCluster;
use crate::runner::{Cmd, Runner};

/// The variable holding the rules.
pub const MIRRORS_ENV: &str = "CDSIM_MIRRORS";
/// Where containerd (with `config_path`) reads a registry host's configuration.
pub const CERTS_D: &str = "/etc/containerd/certs.d";

/// Where a mirror serves from: scheme, `host[:port]`, path prefix (no trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `http` or `https`.
    pub plain_http: bool,
    /// `host[:port]`.
    pub host: String,
    /// `/prefix` or empty.
    pub path: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.plain_http { "http" } else { "https" };
        write!(f, "{scheme}://{}{}", self.host, self.path)
    }
}

/// What a rule stands in for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum From {
    /// A registry host: images and OCI charts.
    Registry(String),
    /// A Helm repository URL (no trailing `/`).
    Repo(String),
}

impl fmt::Display for From {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            From::Registry(host) | From::Repo(host) => f.write_str(host),
        }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// What it stands in for.
    pub from: From,
    /// Where it serves from.
    pub to: Target,
}

/// Every rule of `CDSIM_MIRRORS` (none: the public hosts themselves).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors(pub Vec<Mirror>);

fn target(value: &str) -> std::result::Result<Target, String> {
    let (plain_http, rest) = if let Some(rest) = value.strip_prefix("http://") {
        (true, rest)
    } else if let Some(rest) = value.strip_prefix("https://") {
        (false, rest)
    } else {
        return Err(format!("`{value}` is not an http:// or https:// URL"));
    };
    let rest = rest.trim_end_matches('/');
    let (host, path) = match rest.split_once('/') {
        Some((host, path)) => (host, format!("/{path}")),
        None => (rest, String::new()),
    };
    if host.is_empty() || host.contains(['@', '?', '#']) {
        return Err(format!("`{value}` names no plain host[:port]"));
    }
    Ok(Target {
        plain_http,
        host: host.to_owned(),
        path,
    })
}

impl Mirrors {
    /// Parses the rules (`FROM=TO`, separated by spaces or commas).
    pub fn parse(text: &str) -> std::result::Result<Mirrors, String> {
        let usage = format!(
            "{MIRRORS_ENV} takes rules FROM=TO separated by spaces, FROM a registry host (registry.k8s.io) \
             or a Helm repository URL, TO an http:// or https:// URL, e.g. \
             `registry.k8s.io=https://mirror.example.com/registry.k8s.io`"
        );
        let mut rules = Vec::new();
        for rule in text
            .split([' ', ',', '\n', '\t'])
            .filter(|it| !it.is_empty())
        {
            let Some((from, to)) = rule.split_once('=') else {
                return Err(format!("`{rule}` has no `=`: {usage}"));
            };
            let to = target(to).map_err(|err| format!("`{rule}`: {err}: {usage}"))?;
            let from = if from.contains("://") {
                From::Repo(from.trim_end_matches('/').to_owned())
            } else if !from.is_empty() && !from.contains('/') {
                From::Registry(from.to_owned())
            } else {
                return Err(format!(
                    "`{rule}`: `{from}` is neither a registry host nor a URL: {usage}"
                ));
            };
            rules.push(Mirror { from, to });
        }
        Ok(Mirrors(rules))
    }

    /// The rules in `CDSIM_MIRRORS` (unset or empty: none).
    pub fn from_env() -> Result<Mirrors> {
        let text = std::env::var(MIRRORS_ENV).unwrap_or_default();
        Mirrors::parse(&text).map_err(anyhow::Error::msg)
    }

    /// The rule for registry host `host`.
    pub fn for_host(&self, host: &str) -> Option<&Mirror> {
        self.0
            .iter()
            .find(|it| matches!(&it.from, From::Registry(from) if from == host))
    }

    /// The rule for the Helm repository at `url`.
    pub fn for_repo(&self, url: &str) -> Option<&Mirror> {
        let url = url.trim_end_matches('/');
        self.0
            .iter()
            .find(|it| matches!(&it.from, From::Repo(from) if from == url))
    }

    /// The registry rules (what nodes' containerd must be told).
    pub fn registries(&self) -> impl Iterator<Item = &Mirror> {
        self.0
            .iter()
            .filter(|it| matches!(it.from, From::Registry(_)))
    }

    /// `oci://HOST/rest` through its mirror: the reference helm fetches and
    /// whether over plain HTTP, and the rule used.
    pub fn oci(&self, reference: &str) -> (String, bool, Option<&Mirror>) {
        let rest = reference.strip_prefix("oci://").unwrap_or(reference);
        let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
        match self.for_host(host) {
            Some(rule) => (
                format!("oci://{}{}/{path}", rule.to.host, rule.to.path),
                rule.to.plain_http,
                Some(rule),
            ),
            None => (reference.to_owned(), false, None),
        }
    }
}

/// The registry host of an image reference (`registry.k8s.io/x/y:t` →
/// `registry.k8s.io`; Docker Hub's short names → `docker.io`).
pub fn image_host(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => "docker.io",
    }
}

/// `certs.d/<host>/hosts.toml` telling containerd to resolve `host` through the rule's target.
pub fn hosts_toml(rule: &Mirror) -> String {
    let host = rule.from.to_string();
    let scheme = if rule.to.plain_http { "http" } else { "https" };
    let mut text = format!("server = \"https://{host}\"\n\n");
    if rule.to.path.is_empty() {
        text.push_str(&format!("[host.\"{scheme}://{}\"]\n", rule.to.host));
        text.push_str("  capabilities = [\"pull\", \"resolve\"]\n");
    } else {
        // containerd appends `/v2/<repository>` to a host; a prefixed mirror needs
        // the full API path, with override_path.
        text.push_str(&format!(
            "[host.\"{scheme}://{}/v2{}\"]\n",
            rule.to.host, rule.to.path
        ));
        text.push_str("  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n");
    }
    text
}

/// The commands writing every registry rule's `hosts.toml` into every node
/// of a kind cluster (containerd reads it at the next pull; no restart).
pub fn node_commands(cluster: &KindCluster, mirrors: &Mirrors) -> Vec<Cmd> {
    let mut cmds = Vec::new();
    for rule in mirrors.registries() {
        let dir = format!("{CERTS_D}/{}", rule.from);
        let toml = hosts_toml(rule);
        for node in cluster.nodes() {
            cmds.push(Cmd::new(
                "docker",
                &[
                    "exec",
                    &node,
                    "sh",
                    "-c",
                    "mkdir -p \"$1\" && printf '%s' \"$2\" > \"$1/hosts.toml\"",
                    "sh",
                    &dir,
                    &toml,
                ],
            ));
        }
    }
    cmds
}

/// Tells every node of `cluster` to resolve the mirrored hosts through their mirrors.
pub fn configure_kind_nodes<R: Runner>(
    runner: &R,
    cluster: &KindCluster,
    mirrors: &Mirrors,
) -> Result<()> {
    for cmd in node_commands(cluster, mirrors) {
        runner.check(&cmd)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::FakeRunner;

    const CI: &str = "registry.k8s.io=http://172.18.0.1:5000/registry.k8s.io, nvcr.io=http://172.18.0.1:5000/nvcr.io \
                      https://nvidia.github.io/k8s-device-plugin/=http://172.18.0.1:5001/k8s-device-plugin";

    #[test]
    fn rules_parse_into_registries_and_repositories() {
        let mirrors = Mirrors::parse(CI).expect("valid");
        assert_eq!(mirrors.0.len(), 3);
        let k8s = mirrors.for_host("registry.k8s.io").expect("rule");
        assert_eq!(
            k8s.to,
            Target {
                plain_http: true,
                host: "172.18.0.1:5000".to_owned(),
                path: "/registry.k8s.io".to_owned()
            }
        );
        let repo = mirrors
            .for_repo("https://nvidia.github.io/k8s-device-plugin")
            .expect("repo rule, trailing slash ignored");
        assert_eq!(
            repo.to.to_string(),
            "http://172.18.0.1:5001/k8s-device-plugin"
        );
        assert_eq!(mirrors.registries().count(), 2);
        assert!(mirrors.for_host("docker.io").is_none());
        assert_eq!(Mirrors::parse("").expect("empty"), Mirrors::default());
    }

    #[test]
    fn bad_rules_say_what_to_give() {
        for (rule, says) in [
            ("registry.k8s.io", "has no `=`"),
            (
                "registry.k8s.io=mirror:5000",
                "not an http:// or https:// URL",
            ),
            ("a/b=http://m", "neither a registry host nor a URL"),
            ("=http://m", "neither a registry host nor a URL"),
            ("nvcr.io=http://", "names no plain host"),
        ] {
            let err = Mirrors::parse(rule).expect_err(rule);
            assert!(err.contains(says), "{rule}: {err}");
            assert!(err.contains(MIRRORS_ENV), "{rule}: {err}");
        }
    }

    #[test]
    fn an_oci_chart_goes_through_its_hosts_mirror_over_plain_http_when_it_says_so() {
        let mirrors = Mirrors::parse(CI).expect("valid");
        let chart = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu";
        let (url, plain, rule) = mirrors.oci(chart);
        assert_eq!(
            url,
            "oci://172.18.0.1:5000/registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
        );
        assert!(plain);
        assert!(rule.is_some());
        let none = Mirrors::default();
        let (url, plain, rule) = none.oci(chart);
        assert_eq!((url.as_str(), plain, rule), (chart, false, None));
    }

    #[test]
    fn image_hosts_follow_the_reference_grammar() {
        assert_eq!(
            image_host("registry.k8s.io/nfd/node-feature-discovery:v0.17.3"),
            "registry.k8s.io"
        );
        assert_eq!(
            image_host("nvcr.io/nvidia/k8s-device-plugin:v0.19.3"),
            "nvcr.io"
        );
        assert_eq!(image_host("172.18.0.1:5000/x:1"), "172.18.0.1:5000");
        assert_eq!(image_host("cdsim-dra-driver:abc"), "docker.io");
        assert_eq!(image_host("library/busybox:1"), "docker.io");
    }

    #[test]
    fn containerd_resolves_a_prefixed_mirror_by_its_full_path() {
        let mirrors = Mirrors::parse(CI).expect("valid");
        let text = hosts_toml(mirrors.for_host("nvcr.io").expect("rule"));
        let toml: toml::Table = text.parse().expect("toml");
        assert_eq!(toml["server"].as_str(), Some("https://nvcr.io"));
        let host = &toml["host"]["http://172.18.0.1:5000/v2/nvcr.io"];
        assert_eq!(host["override_path"].as_bool(), Some(true));
        assert_eq!(host["capabilities"].as_array().map(Vec::len), Some(2));
        let bare = Mirrors::parse("nvcr.io=https://mirror.example.com").expect("valid");
        let toml: toml::Table = hosts_toml(&bare.0[0]).parse().expect("toml");
        let host = &toml["host"]["https://mirror.example.com"];
        assert!(host.get("override_path").is_none());
    }

    #[test]
    fn every_node_of_a_kind_cluster_gets_every_registry_rule() {
        let cluster = KindCluster::new("c", 2).expect("cluster");
        let mirrors = Mirrors::parse(CI).expect("valid");
        let cmds = node_commands(&cluster, &mirrors);
        assert_eq!(cmds.len(), 2 * 3, "two registry rules on three nodes");
        let runner = FakeRunner::default();
        for node in ["c-control-plane", "c-worker", "c-worker2"] {
            runner.expect(&format!("docker exec {node} sh -c"), true, "");
        }
        for node in ["c-control-plane", "c-worker", "c-worker2"] {
            runner.expect(&format!("docker exec {node} sh -c"), true, "");
        }
        configure_kind_nodes(&runner, &cluster, &mirrors).expect("written");
        assert_eq!(runner.remaining(), 0);
        let first = &runner.seen()[0];
        assert!(
            first.contains("/etc/containerd/certs.d/registry.k8s.io")
                && first.contains("override_path = true"),
            "{first}"
        );
    }
}
