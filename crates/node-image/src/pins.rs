//! The node image's pins (`manifests/versions.toml` `[node]`) and everything
//! derived from them without I/O: the image names kubeadm expects, the cache key
//! and image tag, the Kubernetes version ldflags.

use std::{collections::BTreeMap, fmt};

use anyhow::{bail, format_err, Context, Result};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Bumped whenever the build recipe in this module tree changes in a way the
/// pins and the node-image files do not show; it is part of the cache key.
pub const RECIPE_VERSION: &str = "cdsim-node-image/3";

/// The repository the node image is tagged under.
pub const NODE_IMAGE_REPO: &str = "cdsim/kind-node";

/// The `[node]` table of `manifests/versions.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodePins {
    /// Debian release of the node rootfs (debootstrap suite), e.g. `bookworm`.
    pub debian_suite: String,
    /// `k8s.io/kubernetes` version, e.g. `v1.34.5`.
    pub kubernetes: String,
    /// `github.com/containerd/containerd/v2` version.
    pub containerd: String,
    /// `github.com/opencontainers/runc` version.
    pub runc: String,
    /// `github.com/containernetworking/plugins` version.
    pub cni_plugins: String,
    /// `sigs.k8s.io/cri-tools` version (crictl inside the node).
    pub crictl: String,
    /// `go.etcd.io/etcd/server/v3` version.
    pub etcd: String,
    /// The `-<rev>` suffix of kubeadm's etcd image tag.
    pub etcd_image_revision: String,
    /// `github.com/coredns/coredns` version.
    pub coredns: String,
    /// The pause image tag, e.g. `3.10.1`.
    pub pause: String,
    /// `sigs.k8s.io/kube-network-policies` version (NetworkPolicy enforcement).
    pub network_policies: String,
}

/// What a pin's value is, for [`NodePins::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PinKind {
    /// A Go module release, `vMAJOR.MINOR.PATCH`.
    Module,
    /// A Debian suite, an image tag or a tag suffix, each checked on its own.
    Other,
}

/// A release version `vMAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Semver {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl Semver {
    /// Parses `vX.Y.Z` (a release: no pre-release suffix).
    pub fn parse(text: &str) -> Result<Semver> {
        let rest = text.strip_prefix('v').ok_or_else(|| {
            format_err!("{text:?} is not a version like \"v1.2.3\" (no leading v)")
        })?;
        let numbers: Vec<u32> = rest
            .split('.')
            .map(|part| part.parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| format_err!("{text:?} is not a release version like \"v1.2.3\""))?;
        match numbers[..] {
            [major, minor, patch] => Ok(Semver {
                major,
                minor,
                patch,
            }),
            _ => bail!("{text:?} is not a release version like \"v1.2.3\""),
        }
    }
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl NodePins {
    /// Reads `[node]` out of the parsed pins file and validates it.
    pub fn from_versions(versions: &toml::Table) -> Result<NodePins> {
        let Some(node) = versions.get("node") else {
            bail!("manifests/versions.toml has no [node] table: the node image needs its pins");
        };
        let pins: NodePins = node
            .clone()
            .try_into()
            .map_err(|err| format_err!("[node] in manifests/versions.toml: {err}"))?;
        pins.validate()?;
        Ok(pins)
    }

    /// Checks every value's shape, naming the offending key.
    pub fn validate(&self) -> Result<()> {
        if self.debian_suite.is_empty()
            || !self.debian_suite.bytes().all(|b| b.is_ascii_lowercase())
        {
            bail!(
                "[node].debian_suite = {:?} is not a Debian suite name like \"bookworm\"",
                self.debian_suite
            );
        }
        for (key, value, kind) in self.entries() {
            if kind == PinKind::Module {
                Semver::parse(value).with_context(|| format!("[node].{key}"))?;
            }
        }
        let kube = self.kube()?;
        if kube.major != 1 {
            bail!(
                "[node].kubernetes = {:?}: only Kubernetes 1.x is supported",
                self.kubernetes
            );
        }
        let containerd = Semver::parse(&self.containerd)?;
        if containerd.major != 2 || containerd.minor > 2 {
            bail!(
                "[node].containerd = {:?}: use containerd 2.0-2.2 (NRI on by default; kind v0.31's `kind load` rejects 2.3's config version 4)",
                self.containerd
            );
        }
        if !is_tag(&self.pause) {
            bail!(
                "[node].pause = {:?} is not an image tag like \"3.10.1\"",
                self.pause
            );
        }
        if !is_tag(&self.etcd_image_revision) {
            bail!(
                "[node].etcd_image_revision = {:?} is not a tag suffix like \"0\"",
                self.etcd_image_revision
            );
        }
        Ok(())
    }

    /// The Kubernetes version.
    pub fn kube(&self) -> Result<Semver> {
        Semver::parse(&self.kubernetes).context("[node].kubernetes")
    }

    /// Every pin as (its key in `[node]`, its value, what it is), in the
    /// order of the struct.
    fn entries(&self) -> [(&'static str, &str, PinKind); 11] {
        use PinKind::{Module, Other};
        [
            ("debian_suite", &self.debian_suite, Other),
            ("kubernetes", &self.kubernetes, Module),
            ("containerd", &self.containerd, Module),
            ("runc", &self.runc, Module),
            ("cni_plugins", &self.cni_plugins, Module),
            ("crictl", &self.crictl, Module),
            ("etcd", &self.etcd, Module),
            ("etcd_image_revision", &self.etcd_image_revision, Other),
            ("coredns", &self.coredns, Module),
            ("pause", &self.pause, Other),
            ("network_policies", &self.network_policies, Module),
        ]
    }

    /// The pins as sorted `key=value` lines (the canonical form hashed into the key).
    pub fn canonical(&self) -> String {
        let map: BTreeMap<&str, &str> = self
            .entries()
            .into_iter()
            .map(|(key, value, _)| (key, value))
            .collect();
        map.iter()
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect()
    }

    /// The pause image, exactly as containerd's `sandbox_image` names it.
    pub fn pause_image(&self) -> String {
        format!("registry.k8s.io/pause:{}", self.pause)
    }

    /// Every control-plane image kubeadm will look for, with the name each gets.
    pub fn control_plane_images(&self) -> Vec<String> {
        let kube_tag = self.kubernetes.replace('+', "_");
        let mut images: Vec<String> = [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-proxy",
        ]
        .iter()
        .map(|name| format!("registry.k8s.io/{name}:{kube_tag}"))
        .collect();
        images.push(format!("registry.k8s.io/coredns/coredns:{}", self.coredns));
        images.push(self.pause_image());
        images.push(self.etcd_image());
        images
    }
}

impl NodePins {
    /// The images only a control plane runs (its static pods): left out of
    /// the worker image. Workers keep kube-proxy and the pod network (their
    /// DaemonSets run everywhere), pause (every pod's sandbox) and CoreDNS
    /// (its Deployment may be scheduled on a worker).
    pub fn control_plane_only_images(&self) -> Vec<String> {
        let kube_tag = self.kubernetes.replace('+', "_");
        let mut images: Vec<String> = [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ]
        .iter()
        .map(|name| format!("registry.k8s.io/{name}:{kube_tag}"))
        .collect();
        images.push(self.etcd_image());
        images
    }

    /// The etcd image as kubeadm names it.
    fn etcd_image(&self) -> String {
        format!(
            "registry.k8s.io/etcd:{}-{}",
            self.etcd.trim_start_matches('v'),
            self.etcd_image_revision
        )
    }
}

fn is_tag(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
}

/// Compares `kubeadm config images list` output with the images we build.
///
/// Pause is exempt (kind and containerd use `sandbox_image`, not kubeadm's), but
/// a differing pause is reported so the pin can follow kubeadm.
pub fn check_kubeadm_images(pins: &NodePins, kubeadm_list: &str) -> Result<()> {
    let ours = pins.control_plane_images();
    let mut missing = Vec::new();
    for wanted in kubeadm_list
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
    {
        if wanted.starts_with("registry.k8s.io/pause:") {
            continue;
        }
        if !ours.iter().any(|have| have == wanted) {
            missing.push(wanted.to_owned());
        }
    }
    if !missing.is_empty() {
        bail!(
            "kubeadm {} expects images the pins do not produce: {}; set [node] etcd/coredns in manifests/versions.toml to match",
            pins.kubernetes,
            missing.join(", ")
        );
    }
    Ok(())
}

/// The `-ldflags` that give Kubernetes binaries their version (as `hack/lib/version.sh`).
pub fn kube_version_ldflags(kube: Semver) -> String {
    let mut flags = vec!["-s".to_owned(), "-w".to_owned()];
    for package in [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ] {
        for (name, value) in [
            ("gitVersion", kube.to_string()),
            ("gitMajor", kube.major.to_string()),
            ("gitMinor", kube.minor.to_string()),
            (
                "gitCommit",
                "0000000000000000000000000000000000000000".to_owned(),
            ),
            ("gitTreeState", "clean".to_owned()),
            ("buildDate", "1970-01-01T00:00:00Z".to_owned()),
        ] {
            flags.push(format!("-X {package}.{name}={value}"));
        }
    }
    flags.join(" ")
}

/// One input file of the image (path relative to `manifests/node-image`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Relative path with `/` separators.
    pub path: String,
    /// Whether any execute bit is set.
    pub executable: bool,
    /// The contents.
    pub contents: Vec<u8>,
}

/// The 64-hex cache key over the recipe, the pins and the node-image files.
pub fn cache_key(pins: &NodePins, files: &[InputFile]) -> String {
    let mut sorted: Vec<&InputFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut hasher = Sha256::new();
    hasher.update(RECIPE_VERSION.as_bytes());
    hasher.update(b"\0pins\0");
    hasher.update(pins.canonical().as_bytes());
    for file in sorted {
        hasher.update(b"\0file\0");
        hasher.update(file.path.as_bytes());
        hasher.update(if file.executable { b"\0x\0" } else { b"\0-\0" });
        hasher.update((file.contents.len() as u64).to_le_bytes());
        hasher.update(&file.contents);
    }
    format!("{:x}", hasher.finalize())
}

/// Bumped whenever the worker variant's recipe (`worker.rs`) changes; hashed
/// with the full image's key into the worker image's tag.
pub const WORKER_RECIPE_VERSION: &str = "cdsim-node-image-worker/1";

/// The worker variant's key: the full image's key and the worker recipe.
pub fn worker_key(key: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(key.as_bytes());
    hasher.update(b"\0worker\0");
    hasher.update(WORKER_RECIPE_VERSION.as_bytes());
    format!("{:x}", hasher.finalize())
}

/// `cdsim/kind-node:<kubernetes>-<first 12 hex of the worker key>-worker`.
pub fn worker_image_ref(pins: &NodePins, key: &str) -> String {
    format!("{}-worker", node_image_ref(pins, &worker_key(key)))
}

/// `cdsim/kind-node:<kubernetes>-<first 12 hex of the key>`.
pub fn node_image_ref(pins: &NodePins, key: &str) -> String {
    format!(
        "{NODE_IMAGE_REPO}:{}-{}",
        pins.kubernetes,
        &key[..12.min(key.len())]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins() -> NodePins {
        NodePins {
            debian_suite: "bookworm".into(),
            kubernetes: "v1.34.5".into(),
            containerd: "v2.2.1".into(),
            runc: "v1.3.4".into(),
            cni_plugins: "v1.8.0".into(),
            crictl: "v1.34.0".into(),
            etcd: "v3.6.5".into(),
            etcd_image_revision: "0".into(),
            coredns: "v1.12.1".into(),
            pause: "3.10.1".into(),
            network_policies: "v0.8.0".into(),
        }
    }

    fn file(path: &str, contents: &str) -> InputFile {
        InputFile {
            path: path.into(),
            executable: false,
            contents: contents.as_bytes().to_vec(),
        }
    }

    #[test]
    fn the_repository_pins_parse_and_validate() {
        let versions = xtask_support::tools::read_versions().expect("versions.toml parses");
        let pins = NodePins::from_versions(&versions).expect("[node] is valid");
        assert_eq!(pins.kube().expect("valid").major, 1);
    }

    #[test]
    fn unknown_and_missing_keys_are_rejected() {
        let text = "[node]\ndebian_suite = \"bookworm\"\nkubernetes = \"v1.34.5\"\n";
        let err = NodePins::from_versions(&text.parse().expect("toml")).expect_err("incomplete");
        assert!(err.to_string().contains("missing field"), "{err}");
        let mut table: toml::Table = "[node]\nextra = \"1\"".parse().expect("toml");
        let err = NodePins::from_versions(&table).expect_err("unknown key");
        assert!(err.to_string().contains("unknown field"), "{err}");
        table.remove("node");
        let err = NodePins::from_versions(&table).expect_err("no table");
        assert!(err.to_string().contains("no [node] table"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        // (what spoils the pins, what the error, with its context, says)
        type Spoil = fn(&mut NodePins);
        let cases: [(Spoil, &str); 3] = [
            (|it| it.runc = "1.3.4".into(), "[node].runc"),
            (|it| it.containerd = "v2.3.1".into(), "containerd 2.0-2.2"),
            (|it| it.pause = "3.10 1".into(), "[node].pause"),
        ];
        for (spoil, says) in cases {
            let mut bad = pins();
            spoil(&mut bad);
            let err = format!("{:#}", bad.validate().expect_err(says));
            assert!(err.contains(says), "{err}");
        }
        pins().validate().expect("good pins validate");
    }

    #[test]
    fn semver_parses_releases_only() {
        assert_eq!(
            Semver::parse("v1.34.5").expect("ok"),
            Semver {
                major: 1,
                minor: 34,
                patch: 5
            }
        );
        assert!(Semver::parse("1.34.5").is_err());
        assert!(Semver::parse("v1.34").is_err());
        assert!(Semver::parse("v1.34.5-rc.0").is_err());
        assert_eq!(Semver::parse("v2.2.1").expect("ok").to_string(), "v2.2.1");
    }

    #[test]
    fn control_plane_image_names_match_kubeadm() {
        // `kubeadm config images list --kubernetes-version v1.34.5` as printed by the kubeadm we build.
        let kubeadm = "registry.k8s.io/kube-apiserver:v1.34.5\nregistry.k8s.io/kube-controller-manager:v1.34.5\n\
registry.k8s.io/kube-scheduler:v1.34.5\nregistry.k8s.io/kube-proxy:v1.34.5\nregistry.k8s.io/coredns/coredns:v1.12.1\n\
registry.k8s.io/pause:3.10.1\nregistry.k8s.io/etcd:3.6.5-0\n";
        check_kubeadm_images(&pins(), kubeadm).expect("all present");
        let mut other = pins();
        other.etcd = "v3.6.4".into();
        let err = check_kubeadm_images(&other, kubeadm).expect_err("etcd differs");
        assert!(
            err.to_string().contains("registry.k8s.io/etcd:3.6.5-0"),
            "{err}"
        );
        let mut other = pins();
        other.pause = "3.10".into();
        check_kubeadm_images(&other, kubeadm).expect("pause is exempt");
    }

    #[test]
    fn the_key_follows_pins_files_and_modes() {
        let files = vec![file("rootfs/etc/a", "one"), file("rootfs/etc/b", "two")];
        let key = cache_key(&pins(), &files);
        assert_eq!(key.len(), 64);
        let reordered = vec![files[1].clone(), files[0].clone()];
        assert_eq!(
            cache_key(&pins(), &reordered),
            key,
            "file order does not matter"
        );
        let mut changed = pins();
        changed.kubernetes = "v1.34.4".into();
        assert_ne!(cache_key(&changed, &files), key);
        let mut edited = files.clone();
        edited[0].contents = b"one!".to_vec();
        assert_ne!(cache_key(&pins(), &edited), key);
        let mut chmod = files.clone();
        chmod[1].executable = true;
        assert_ne!(cache_key(&pins(), &chmod), key);
        let mut renamed = files;
        renamed[0].path = "rootfs/etc/c".into();
        assert_ne!(cache_key(&pins(), &renamed), key);
    }

    #[test]
    fn the_image_ref_carries_version_and_key_prefix() {
        let key = "0123456789abcdef".repeat(4);
        assert_eq!(
            node_image_ref(&pins(), &key),
            "cdsim/kind-node:v1.34.5-0123456789ab"
        );
    }

    #[test]
    fn the_worker_image_has_its_own_tag_and_lacks_only_control_plane_images() {
        let key = "0123456789abcdef".repeat(4);
        let worker = worker_image_ref(&pins(), &key);
        assert!(worker.starts_with("cdsim/kind-node:v1.34.5-"), "{worker}");
        assert!(worker.ends_with("-worker"), "{worker}");
        assert_ne!(worker, format!("{}-worker", node_image_ref(&pins(), &key)));
        assert_eq!(worker_key(&key), worker_key(&key));
        let dropped = pins().control_plane_only_images();
        assert_eq!(
            dropped,
            [
                "registry.k8s.io/kube-apiserver:v1.34.5",
                "registry.k8s.io/kube-controller-manager:v1.34.5",
                "registry.k8s.io/kube-scheduler:v1.34.5",
                "registry.k8s.io/etcd:3.6.5-0",
            ]
        );
        let all = pins().control_plane_images();
        for kept in [
            "registry.k8s.io/kube-proxy:v1.34.5",
            "registry.k8s.io/pause:3.10.1",
            "registry.k8s.io/coredns/coredns:v1.12.1",
        ] {
            assert!(all.iter().any(|it| it == kept) && !dropped.iter().any(|it| it == kept));
        }
        assert!(dropped.iter().all(|it| all.contains(it)));
    }

    #[test]
    fn ldflags_set_both_version_packages() {
        let flags = kube_version_ldflags(Semver {
            major: 1,
            minor: 34,
            patch: 5,
        });
        for needle in [
            "-X k8s.io/component-base/version.gitVersion=v1.34.5",
            "-X k8s.io/client-go/pkg/version.gitVersion=v1.34.5",
            "-X k8s.io/component-base/version.gitMinor=34",
            "-X k8s.io/component-base/version.gitTreeState=clean",
        ] {
            assert!(flags.contains(needle), "{needle} missing from {flags}");
        }
    }
}
