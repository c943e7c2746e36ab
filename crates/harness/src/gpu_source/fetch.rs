//! A released chart fetched with `helm pull` (through its mirror, if one
//! stands in for its host) into the cache, once per URL and version, so a
//! warm run fetches nothing; and an install that is uninstalled when it
//! fails, so nothing is left half-installed.

use std::future::Future;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use kube::Client;
use sha2::{Digest as _, Sha256};

use super::mirror::{Mirrors, MIRRORS_ENV};
use super::pulls::{self, PullFailure};
use crate::runner::{Cmd, Runner};
use crate::scenario4::image::cached;

/// Where a released chart is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An OCI reference, `oci://host/path/name`.
    Oci(String),
    /// A chart `name` in the Helm repository at `url`.
    Repo {
        /// The repository's URL.
        url: String,
        /// The chart's name.
        name: String,
    },
}

/// A released chart at its pinned version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartPin {
    /// Where it is published.
    pub location: Location,
    /// Its version (no `v`).
    pub version: String,
}

impl ChartPin {
    /// The chart's name.
    pub fn name(&self) -> &str {
        match &self.location {
            Location::Oci(url) => url.rsplit('/').next().unwrap_or(url),
            Location::Repo { name, .. } => name,
        }
    }

    /// Where it is published, as a user would write it.
    pub fn url(&self) -> String {
        match &self.location {
            Location::Oci(url) => url.clone(),
            Location::Repo { url, name } => format!("{url} (chart {name})"),
        }
    }
}

/// How a chart is fetched: `helm pull` arguments (without the destination)
/// and where it comes from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// `helm` arguments.
    pub args: Vec<String>,
    /// What helm fetches from.
    pub from: String,
    /// The mirror standing in for the publisher, if one does.
    pub mirror: Option<String>,
}

/// The fetch of `pin` through `mirrors`.
pub fn plan(pin: &ChartPin, mirrors: &Mirrors) -> Fetch {
    let version = pin.version.clone();
    match &pin.location {
        Location::Oci(reference) => {
            let (url, plain_http, rule) = mirrors.oci(reference);
            let mut args = vec![
                "pull".to_owned(),
                url.clone(),
                "--version".to_owned(),
                version,
            ];
            if plain_http {
                args.push("--plain-http".to_owned());
            }
            Fetch {
                args,
                from: url,
                mirror: rule.map(|it| format!("{} standing in for {}", it.to, it.from)),
            }
        }
        Location::Repo { url, name } => {
            let rule = mirrors.for_repo(url);
            let repo = rule.map_or_else(|| url.clone(), |it| it.to.to_string());
            Fetch {
                args: vec![
                    "pull".to_owned(),
                    name.clone(),
                    "--repo".to_owned(),
                    repo.clone(),
                    "--version".to_owned(),
                    version,
                ],
                from: format!("{repo} (chart {name})"),
                mirror: rule.map(|it| format!("{} standing in for {}", it.to, it.from)),
            }
        }
    }
}

/// Why a chart could not be fetched, and what to do.
pub fn fetch_failed(pin: &ChartPin, fetch: &Fetch, err: &str) -> String {
    let through = fetch
        .mirror
        .as_ref()
        .map(|it| format!(" through the mirror {it} ({MIRRORS_ENV})"))
        .unwrap_or_default();
    format!(
        "cannot fetch NVIDIA's chart {} {} from {}{through}: {err}\n    fix: this machine must reach {}; \
         behind a mirror, set {MIRRORS_ENV} (docs/gpu-stack-and-faults.md); without a network, \
         `cargo xtask demo --offline` builds the same release from source (as root, with Go and the DRA \
         driver's snapshot); on your own cluster, `--registry` pushes those builds there",
        pin.name(),
        pin.version,
        fetch.from,
        fetch.from,
    )
}

/// The cache entry of a fetch: the name, the version and the URL's hash.
fn key(pin: &ChartPin, fetch: &Fetch) -> String {
    let hash = format!("{:x}", Sha256::digest(fetch.from.as_bytes()));
    format!("{}-{}-{}", pin.name(), pin.version, &hash[..12])
}

/// The chart archive, fetched once into `<cache>/charts/released/`.
pub fn fetch<R: Runner>(
    runner: &R,
    cache: &Path,
    pin: &ChartPin,
    mirrors: &Mirrors,
) -> Result<PathBuf> {
    let fetch = plan(pin, mirrors);
    let parent = cache.join("charts").join("released");
    let dir = cached(&parent, &key(pin, &fetch), |out| {
        let mut args = fetch.args.clone();
        args.push("--destination".to_owned());
        args.push(out.to_string_lossy().into_owned());
        let out = runner.run(&Cmd::with_args("helm", args))?;
        if !out.ok {
            anyhow::bail!("{}", fetch_failed(pin, &fetch, &out.error_text()));
        }
        Ok(())
    })?;
    let archive = dir.join(format!("{}-{}.tgz", pin.name(), pin.version));
    anyhow::ensure!(
        archive.is_file(),
        "{} holds no {}: remove the directory and rerun",
        dir.display(),
        archive.display()
    );
    Ok(archive)
}

/// A Helm release.
#[derive(Debug, Clone, Copy)]
pub struct Release<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// The kube context.
    pub context: &'a str,
}

/// `helm uninstall`, waiting, of a release that may not exist.
pub fn uninstall_cmd(release: Release<'_>) -> Cmd {
    Cmd::new(
        "helm",
        &[
            "uninstall",
            release.name,
            "--namespace",
            release.namespace,
            "--kube-context",
            release.context,
            "--wait",
            "--ignore-not-found",
        ],
    )
}

/// The error of an image a node cannot pull.
pub fn pull_failed(failure: &PullFailure, fix: &str) -> String {
    format!(
        "image {} cannot be pulled on node {} (pod {}, {}): the kubelet says: {}\n    fix: {fix}",
        failure.image,
        failure.node,
        failure.pod,
        failure.reason,
        if failure.message.is_empty() {
            "(no message)"
        } else {
            &failure.message
        }
    )
}

/// Runs `install` (helm and the rollout) while watching the release's
/// namespace for an image a node cannot pull; when either fails, the release
/// is uninstalled and the error says so. `fix` says what to do about an image.
pub async fn guarded<R: Runner, F: Future<Output = Result<()>>>(
    runner: &R,
    client: &Client,
    release: Release<'_>,
    fix: impl Fn(&str) -> String,
    install: F,
) -> Result<()> {
    let outcome = tokio::select! {
        res = install => res,
        failure = pulls::first_failure(client, release.namespace) => {
            Err(anyhow::anyhow!("{}", pull_failed(&failure, &fix(&failure.image))))
        }
    };
    undo_on_failure(runner, release, outcome)
}

/// `outcome` as is when it passed; else the release uninstalled and the error
/// saying so (or that the uninstall failed too).
pub fn undo_on_failure<R: Runner>(
    runner: &R,
    release: Release<'_>,
    outcome: Result<()>,
) -> Result<()> {
    let Err(err) = outcome else {
        return Ok(());
    };
    match runner.check(&uninstall_cmd(release)) {
        Ok(_) => Err(err).with_context(|| {
            format!(
                "the release {} in {} was uninstalled, so nothing is left half-installed",
                release.name, release.namespace
            )
        }),
        Err(undo) => Err(err).with_context(|| {
            format!(
                "uninstalling the release {} in {} failed too ({undo:#}): run `{}`",
                release.name,
                release.namespace,
                uninstall_cmd(release).display()
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::FakeRunner;

    fn dra() -> ChartPin {
        ChartPin {
            location: Location::Oci(
                "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu".to_owned(),
            ),
            version: "0.4.1".to_owned(),
        }
    }

    fn device_plugin() -> ChartPin {
        ChartPin {
            location: Location::Repo {
                url: "https://nvidia.github.io/k8s-device-plugin".to_owned(),
                name: "nvidia-device-plugin".to_owned(),
            },
            version: "0.19.3".to_owned(),
        }
    }

    #[test]
    fn charts_are_pulled_from_their_publisher_or_its_mirror_without_a_repo_entry() {
        let direct = plan(&dra(), &Mirrors::default());
        assert_eq!(
            direct.args,
            [
                "pull",
                "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
                "--version",
                "0.4.1"
            ]
        );
        assert_eq!(direct.mirror, None);
        let mirrors = Mirrors::parse(
            "registry.k8s.io=http://10.0.0.1:5000/registry.k8s.io \
             https://nvidia.github.io/k8s-device-plugin=http://10.0.0.1:5001/nvdp",
        )
        .expect("rules");
        let mirrored = plan(&dra(), &mirrors);
        assert_eq!(
            mirrored.args.last().map(String::as_str),
            Some("--plain-http")
        );
        assert!(mirrored
            .from
            .starts_with("oci://10.0.0.1:5000/registry.k8s.io/"));
        assert_eq!(
            mirrored.mirror.as_deref(),
            Some("http://10.0.0.1:5000/registry.k8s.io standing in for registry.k8s.io")
        );
        let repo = plan(&device_plugin(), &mirrors);
        assert_eq!(
            repo.args,
            [
                "pull",
                "nvidia-device-plugin",
                "--repo",
                "http://10.0.0.1:5001/nvdp",
                "--version",
                "0.19.3"
            ]
        );
        assert!(
            !repo.args.iter().any(|it| it == "add"),
            "no `helm repo add`"
        );
    }

    #[test]
    fn an_unreachable_chart_url_is_named_with_the_fix_and_nothing_is_cached() {
        let cache = tempfile::tempdir().expect("tempdir");
        let runner = FakeRunner::default();
        runner.expect_failure(
            "helm pull nvidia-device-plugin --repo https://nvidia.github.io/k8s-device-plugin",
            "Error: looks like \"https://nvidia.github.io/k8s-device-plugin\" is not a valid chart repository or cannot be reached: dial tcp: lookup nvidia.github.io: no such host",
        );
        let err = fetch(&runner, cache.path(), &device_plugin(), &Mirrors::default())
            .expect_err("unreachable")
            .to_string();
        for says in [
            "cannot fetch NVIDIA's chart nvidia-device-plugin 0.19.3 from https://nvidia.github.io/k8s-device-plugin",
            "no such host",
            MIRRORS_ENV,
            "--offline",
            "--registry",
        ] {
            assert!(err.contains(says), "`{says}` in {err}");
        }
        let released = cache.path().join("charts/released");
        let left: Vec<_> = std::fs::read_dir(&released)
            .expect("parent made")
            .filter_map(Result::ok)
            .filter(|it| !it.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(left.is_empty(), "a failed fetch leaves no entry: {left:?}");
    }

    #[test]
    fn a_fetched_chart_is_reused_without_helm() {
        let cache = tempfile::tempdir().expect("tempdir");
        let fetch_plan = plan(&dra(), &Mirrors::default());
        let dir = cache
            .path()
            .join("charts/released")
            .join(key(&dra(), &fetch_plan));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("dra-driver-nvidia-gpu-0.4.1.tgz"), "chart").expect("chart");
        let runner = FakeRunner::default();
        let got = fetch(&runner, cache.path(), &dra(), &Mirrors::default()).expect("cached");
        assert_eq!(got, dir.join("dra-driver-nvidia-gpu-0.4.1.tgz"));
        assert!(runner.seen().is_empty());
    }

    #[test]
    fn a_failed_install_is_uninstalled_and_says_so() {
        let release = Release {
            name: "nvidia-device-plugin",
            namespace: "nvidia-device-plugin",
            context: "kind-c",
        };
        let runner = FakeRunner::default();
        runner.expect(
            "helm uninstall nvidia-device-plugin --namespace nvidia-device-plugin --kube-context kind-c --wait --ignore-not-found",
            true,
            "",
        );
        let err = undo_on_failure(&runner, release, Err(anyhow::anyhow!("rollout timed out")))
            .expect_err("failed");
        let text = format!("{err:#}");
        assert!(
            text.contains("was uninstalled") && text.contains("rollout timed out"),
            "{text}"
        );
        assert_eq!(runner.remaining(), 0);
        let quiet = FakeRunner::default();
        undo_on_failure(&quiet, release, Ok(())).expect("passed");
        assert!(quiet.seen().is_empty(), "a passed install is left alone");
        let stuck = FakeRunner::default();
        stuck.expect_failure("helm uninstall", "Error: context deadline exceeded");
        let text = format!(
            "{:#}",
            undo_on_failure(&stuck, release, Err(anyhow::anyhow!("x"))).expect_err("failed")
        );
        assert!(
            text.contains("failed too") && text.contains("helm uninstall nvidia-device-plugin"),
            "{text}"
        );
    }

    #[test]
    fn an_unpullable_image_names_image_node_kubelet_and_fix() {
        let failure = PullFailure {
            pod: "dra-driver-nvidia-gpu-kubelet-plugin-x".to_owned(),
            node: "c-worker".to_owned(),
            image: "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1".to_owned(),
            reason: "ErrImagePull".to_owned(),
            message: "failed to resolve reference: dial tcp: i/o timeout".to_owned(),
        };
        let text = pull_failed(&failure, "use a mirror, --offline or --registry");
        for says in [
            "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1",
            "node c-worker",
            "i/o timeout",
            "--offline",
        ] {
            assert!(text.contains(says), "`{says}` in {text}");
        }
    }
}
