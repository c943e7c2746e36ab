//! The Go components of the node image, built from the Go module proxy (and
//! pause from the Kubernetes module's `pause.c`): one table, [`components`],
//! of what each is and how it is built, each cached under
//! `/var/cache/cdsim/go/<name>-<version>` and moved into place only once
//! complete.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{bail, format_err, Context, Result};
use sha2::{Digest, Sha256};
use xshell::{cmd, Shell};

use crate::{
    gomod,
    pins::{self, NodePins, Semver},
    rootfs,
};

/// Where the cached Go outputs of one build are.
pub(super) struct Binaries {
    pub(super) kubernetes: PathBuf,
    pub(super) containerd: PathBuf,
    pub(super) runc: PathBuf,
    pub(super) cni: PathBuf,
    pub(super) crictl: PathBuf,
    pub(super) etcd: PathBuf,
    pub(super) coredns: PathBuf,
    pub(super) kindnet: PathBuf,
    pub(super) netpol: PathBuf,
    pub(super) pause: PathBuf,
}

/// Builds (or finds in the cache) every Go component and the pause binary.
pub(super) fn go_components(
    sh: &Shell,
    cache: &Path,
    pins: &NodePins,
    inputs: &Path,
) -> Result<Binaries> {
    let go = cache.join("go");
    let src = cache.join("src");
    let _cgo_off = sh.push_env("CGO_ENABLED", "0");
    let mut dirs = Vec::new();
    for Component {
        name,
        version,
        recipe,
    } in components(pins, inputs)?
    {
        dirs.push(cached(&go, name, &version, |out| {
            recipe.build(sh, &src, name, &version, out)
        })?);
    }
    let dirs: [PathBuf; 10] = dirs
        .try_into()
        .map_err(|_| format_err!("the Go component table and Binaries disagree"))?;
    let [containerd, cni, crictl, coredns, etcd, runc, kubernetes, kindnet, netpol, pause] = dirs;
    Ok(Binaries {
        kubernetes,
        containerd,
        runc: runc.join("runc"),
        cni,
        crictl: crictl.join("crictl"),
        etcd: etcd.join("etcd"),
        coredns: coredns.join("coredns"),
        kindnet,
        netpol: netpol.join("netpol"),
        pause: pause.join("pause"),
    })
}

/// One cached Go output: `<go>/<name>-<version>`, made by its recipe.
struct Component {
    name: &'static str,
    version: String,
    recipe: Recipe,
}

/// How a [`Component`] is built into its output directory.
enum Recipe {
    /// `go install` of pinned, stripped packages into the output directory,
    /// at low priority (the node image build shares the machine with
    /// everything else); `rename` names a binary after its purpose.
    Install {
        what: &'static str,
        packages: Vec<String>,
        tags: Option<&'static str>,
        ldflags: String,
        rename: Option<(&'static str, &'static str)>,
    },
    /// `go get` of `module` in a plain wrapper module `<src>/<name>-<version>`,
    /// then `go build` of `package` to `<out>/<name>`; `seccomp` links
    /// libseccomp through cgo.
    Wrapped {
        module: String,
        package: &'static str,
        tags: Option<&'static str>,
        ldflags: String,
        seccomp: bool,
    },
    /// The Kubernetes commands, in a wrapper module that carries upstream's
    /// go.mod requirements.
    Kubernetes { module: String, kube: Semver },
    /// `go build .` of a directory of ours to `<out>/<binary>`.
    Local {
        dir: PathBuf,
        binary: &'static str,
        what: &'static str,
    },
    /// pause from the Kubernetes module's `pause.c`, by gcc.
    Pause { module: String, tag: String },
}

/// The Kubernetes commands the node and the control-plane images run.
const KUBE_COMMANDS: [&str; 7] = [
    "kubeadm",
    "kubelet",
    "kubectl",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
];

/// Every Go component, in build order (the order [`go_components`] reads).
fn components(pins: &NodePins, inputs: &Path) -> Result<Vec<Component>> {
    let mut all = tools(pins);
    all.extend(kube_and_network(pins, inputs)?);
    Ok(all)
}

/// `<prefix><name>@<version>` for each name.
fn at_version(prefix: &str, names: &[&str], version: &str) -> Vec<String> {
    names
        .iter()
        .map(|name| format!("{prefix}{name}@{version}"))
        .collect()
}

/// The node's runtime and the control plane's tools: containerd, the CNI
/// plugins, crictl, CoreDNS, etcd and runc.
fn tools(pins: &NodePins) -> Vec<Component> {
    vec![
        Component {
            name: "containerd",
            version: pins.containerd.clone(),
            recipe: Recipe::Install {
                what: "containerd",
                packages: at_version(
                    "github.com/containerd/containerd/v2/cmd/",
                    &["containerd", "ctr", "containerd-shim-runc-v2"],
                    &pins.containerd,
                ),
                tags: Some("no_btrfs no_zfs no_devmapper"),
                ldflags: format!(
                    "-s -w -X github.com/containerd/containerd/v2/version.Version={}",
                    pins.containerd
                ),
                rename: None,
            },
        },
        Component {
            name: "cni-plugins",
            version: pins.cni_plugins.clone(),
            recipe: Recipe::stripped(
                "CNI plugins",
                at_version(
                    "github.com/containernetworking/plugins/plugins/",
                    &[
                        "main/ptp",
                        "ipam/host-local",
                        "main/loopback",
                        "meta/portmap",
                    ],
                    &pins.cni_plugins,
                ),
            ),
        },
        Component {
            name: "crictl",
            version: pins.crictl.clone(),
            recipe: Recipe::stripped(
                "crictl",
                at_version("sigs.k8s.io/cri-tools/cmd/", &["crictl"], &pins.crictl),
            ),
        },
        Component {
            name: "coredns",
            version: pins.coredns.clone(),
            recipe: Recipe::stripped(
                "coredns",
                at_version("github.com/coredns/", &["coredns"], &pins.coredns),
            ),
        },
        Component {
            name: "etcd",
            version: pins.etcd.clone(),
            recipe: Recipe::Wrapped {
                module: format!("go.etcd.io/etcd/server/v3@{}", pins.etcd),
                package: "go.etcd.io/etcd/server/v3",
                tags: None,
                ldflags: "-s -w".to_owned(),
                seccomp: false,
            },
        },
        Component {
            name: "runc",
            version: pins.runc.clone(),
            recipe: Recipe::Wrapped {
                module: format!("github.com/opencontainers/runc@{}", pins.runc),
                package: "github.com/opencontainers/runc",
                tags: Some("seccomp"),
                ldflags: format!(
                    "-s -w -X main.version={}",
                    pins.runc.trim_start_matches('v')
                ),
                seccomp: true,
            },
        },
    ]
}

/// The Kubernetes commands, the pod network (our kindnet and
/// kube-network-policies) and pause.
fn kube_and_network(pins: &NodePins, inputs: &Path) -> Result<Vec<Component>> {
    let kube_module = format!("k8s.io/kubernetes@{}", pins.kubernetes);
    Ok(vec![
        Component {
            name: "kubernetes",
            version: pins.kubernetes.clone(),
            recipe: Recipe::Kubernetes {
                module: kube_module.clone(),
                kube: pins.kube()?,
            },
        },
        Component {
            name: "kindnet",
            version: tree_digest(&inputs.join("kindnet"))?,
            recipe: Recipe::Local {
                dir: inputs.join("kindnet"),
                binary: "kindnet",
                what: "cdsim-kindnet",
            },
        },
        Component {
            name: "kube-network-policies",
            version: pins.network_policies.clone(),
            recipe: Recipe::Install {
                what: "kube-network-policies",
                packages: at_version(
                    "sigs.k8s.io/kube-network-policies/",
                    &["cmd"],
                    &pins.network_policies,
                ),
                tags: None,
                ldflags: "-s -w".to_owned(),
                // The main package is `cmd`, so is the binary.
                rename: Some(("cmd", "netpol")),
            },
        },
        Component {
            name: "pause",
            version: format!("{}-{}", pins.kubernetes, pins.pause),
            recipe: Recipe::Pause {
                module: kube_module,
                tag: pins.pause.clone(),
            },
        },
    ])
}

impl Recipe {
    /// `go install` of `packages`, stripped, with no tags.
    fn stripped(what: &'static str, packages: Vec<String>) -> Recipe {
        Recipe::Install {
            what,
            packages,
            tags: None,
            ldflags: "-s -w".to_owned(),
            rename: None,
        }
    }

    /// Builds component `name` at `version` into `out`.
    fn build(&self, sh: &Shell, src: &Path, name: &str, version: &str, out: &Path) -> Result<()> {
        match self {
            Recipe::Install {
                what,
                packages,
                tags,
                ldflags,
                rename,
            } => {
                let _gobin = sh.push_env("GOBIN", out);
                let tags: Vec<&str> = tags.iter().flat_map(|tags| ["-tags", tags]).collect();
                cmd!(
                    sh,
                    "nice -n 10 go install -trimpath {tags...} -ldflags {ldflags} {packages...}"
                )
                .run()
                .with_context(|| format!("go install {what}"))?;
                match rename {
                    Some((from, to)) => fs::rename(out.join(from), out.join(to))
                        .with_context(|| format!("naming the {what} binary")),
                    None => Ok(()),
                }
            }
            Recipe::Wrapped {
                module,
                package,
                tags,
                ldflags,
                seccomp,
            } => {
                if *seccomp
                    && cmd!(sh, "pkg-config --exists libseccomp")
                        .quiet()
                        .run()
                        .is_err()
                {
                    bail!(
                        "{name} needs libseccomp headers to build: apt-get install libseccomp-dev pkg-config"
                    );
                }
                let wrapper = src.join(format!("{name}-{version}"));
                write_if_changed(&wrapper.join("go.mod"), &gomod::plain_wrapper(name, "1.24"))?;
                let _dir = sh.push_dir(&wrapper);
                let _cgo_on = seccomp.then(|| sh.push_env("CGO_ENABLED", "1"));
                cmd!(sh, "go get {module}")
                    .run()
                    .with_context(|| format!("go get {name} (wrapper module)"))?;
                let bin = out.join(name);
                let tags: Vec<&str> = tags.iter().flat_map(|tags| ["-tags", tags]).collect();
                cmd!(
                    sh,
                    "nice -n 10 go build -trimpath {tags...} -ldflags {ldflags} -o {bin} {package}"
                )
                .run()
                .with_context(|| format!("go build {name}"))
            }
            Recipe::Kubernetes { module, kube } => {
                build_kubernetes(sh, src, version, module, *kube, out)
            }
            Recipe::Local { dir, binary, what } => {
                let _dir = sh.push_dir(dir);
                let bin = out.join(binary);
                cmd!(
                    sh,
                    "nice -n 10 go build -trimpath -ldflags '-s -w' -o {bin} ."
                )
                .run()
                .with_context(|| format!("go build {what}"))
            }
            Recipe::Pause { module, tag } => build_pause(sh, module, tag, out),
        }
    }
}

/// `go mod download -json MODULE`, parsed.
fn module_info(sh: &Shell, module: &str) -> Result<serde_json::Value> {
    let json = cmd!(sh, "go mod download -json {module}")
        .read()
        .context("go mod download k8s.io/kubernetes")?;
    serde_json::from_str(&json).context("parsing go mod download -json")
}

/// The Kubernetes commands, in a wrapper module that requires what
/// upstream's go.mod requires.
fn build_kubernetes(
    sh: &Shell,
    src: &Path,
    version: &str,
    module: &str,
    kube: Semver,
    out: &Path,
) -> Result<()> {
    let info = module_info(sh, module)?;
    let go_mod = info["GoMod"]
        .as_str()
        .ok_or_else(|| format_err!("go mod download printed no GoMod"))?;
    let upstream = fs::read_to_string(go_mod).with_context(|| format!("reading {go_mod}"))?;
    let wrapper = src.join(format!("kubernetes-{version}"));
    write_if_changed(
        &wrapper.join("go.mod"),
        &gomod::kubernetes_wrapper(&upstream, kube)?,
    )?;
    let _dir = sh.push_dir(&wrapper);
    let at_version: Vec<String> = KUBE_COMMANDS
        .iter()
        .map(|c| format!("k8s.io/kubernetes/cmd/{c}@{version}"))
        .collect();
    cmd!(sh, "go get {at_version...}")
        .run()
        .context("go get the Kubernetes commands (wrapper module)")?;
    let pkgs: Vec<String> = KUBE_COMMANDS
        .iter()
        .map(|c| format!("k8s.io/kubernetes/cmd/{c}"))
        .collect();
    let ldflags = pins::kube_version_ldflags(kube);
    let out_dir = format!("{}/", out.display());
    eprintln!(
        "    go build {} (links take minutes each)",
        KUBE_COMMANDS.join(" ")
    );
    cmd!(
        sh,
        "nice -n 10 go build -trimpath -ldflags {ldflags} -o {out_dir} {pkgs...}"
    )
    .run()
    .context("go build the Kubernetes commands")
}

/// pause, statically linked from the Kubernetes module's `pause.c`.
fn build_pause(sh: &Shell, module: &str, tag: &str, out: &Path) -> Result<()> {
    let info = module_info(sh, module)?;
    let dir = info["Dir"]
        .as_str()
        .ok_or_else(|| format_err!("go mod download printed no Dir"))?;
    let source = Path::new(dir).join("build/pause/linux/pause.c");
    let define = format!("-DVERSION={tag}");
    let bin = out.join("pause");
    cmd!(
        sh,
        "gcc -Os -Wall -Werror -static {define} -o {bin} {source}"
    )
    .run()
    .context("gcc -static pause.c (needs build-essential)")?;
    cmd!(sh, "strip {bin}").run().context("strip pause")
}

/// `<go>/<name>-<version>`, made by `build` into a partial directory on first use.
fn cached(
    go: &Path,
    name: &str,
    version: &str,
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<PathBuf> {
    let dir = go.join(format!("{name}-{version}"));
    if dir.is_dir() {
        eprintln!("    {name} {version}: cached");
        return Ok(dir);
    }
    let partial = go.join(format!(".{name}-{version}.partial"));
    if partial.exists() {
        fs::remove_dir_all(&partial).with_context(|| format!("removing {}", partial.display()))?;
    }
    fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let started = Instant::now();
    eprintln!("    {name} {version}: building");
    build(&partial).with_context(|| format!("building {name} {version}"))?;
    fs::rename(&partial, &dir)
        .with_context(|| format!("moving {} into place", partial.display()))?;
    eprintln!(
        "    {name} {version}: built in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(dir)
}

fn write_if_changed(path: &Path, contents: &str) -> Result<()> {
    if fs::read_to_string(path).ok().as_deref() == Some(contents) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

/// 12 hex of sha256 over a directory's files (names, modes, contents).
fn tree_digest(dir: &Path) -> Result<String> {
    let mut hasher = Sha256::new();
    for (relative, executable) in rootfs::walk_files(dir)? {
        let contents =
            fs::read(dir.join(&relative)).with_context(|| format!("reading {relative}"))?;
        hasher.update(format!("{relative}\0{executable}\0{}\0", contents.len()));
        hasher.update(&contents);
    }
    Ok(format!("{:x}", hasher.finalize())[..12].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_digest_is_the_first_12_lowercase_hex_of_the_sha256() {
        let dir = tempfile::tempdir().expect("tempdir");
        // Nothing hashed: sha256 of the empty input.
        assert_eq!(tree_digest(dir.path()).expect("empty"), "e3b0c44298fc");
        fs::write(dir.path().join("a"), "x").expect("write");
        // sha256 of "a\0false\0" "1\0" "x": name, mode, length, contents.
        assert_eq!(tree_digest(dir.path()).expect("one file"), "58c124bb0c34");
    }

    #[test]
    fn the_component_table_is_in_the_order_binaries_reads_it() {
        let versions = xtask_support::tools::read_versions().expect("versions.toml parses");
        let pins = NodePins::from_versions(&versions).expect("[node] is valid");
        let table = components(&pins, &super::super::inputs_dir()).expect("components");
        let names: Vec<&str> = table.iter().map(|it| it.name).collect();
        // The cache directories `<name>-<version>`: renaming one rebuilds it.
        assert_eq!(
            names,
            [
                "containerd",
                "cni-plugins",
                "crictl",
                "coredns",
                "etcd",
                "runc",
                "kubernetes",
                "kindnet",
                "kube-network-policies",
                "pause"
            ]
        );
        assert_eq!(table[0].version, pins.containerd);
        assert_eq!(table[6].version, pins.kubernetes);
        assert_eq!(
            table[9].version,
            format!("{}-{}", pins.kubernetes, pins.pause)
        );
    }
}
