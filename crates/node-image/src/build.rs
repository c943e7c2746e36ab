//! The node image build itself: Go components from the module proxy, the
//! control-plane and network images by `docker import`, the node rootfs, and
//! the preload of every image into the node's containerd (kind's
//! `build node-image` steps without a single registry fetch).
//!
//! Every Go output is cached under `/var/cache/cdsim/go/<component>-<version>`
//! (see [`go`](super::go)), every debootstrap tree under
//! `/var/cache/cdsim/rootfs`; a directory is only moved into place once
//! complete, so an interrupted build resumes cleanly.

use std::{
    fs,
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, format_err, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    go::{go_components, Binaries},
    pins::{self, NodePins},
    rootfs,
};

/// Step counter that prints `==> [i/n] what (elapsed)`.
struct Progress {
    started: Instant,
    step: usize,
    total: usize,
}

impl Progress {
    fn step(&mut self, what: &str) {
        self.step += 1;
        eprintln!(
            "==> [{}/{}] {what} (at {:.0}s)",
            self.step,
            self.total,
            self.started.elapsed().as_secs_f64()
        );
    }
}

/// The control-plane images made from one static binary on an empty root.
const KUBE_STATIC: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// Builds the node image `image` for `pins`; `key` is the full cache key.
pub fn build(sh: &Shell, pins: &NodePins, key: &str, image: &str, inputs: &Path) -> Result<()> {
    let cache = xtask_support::dirs::cache_dir()?;
    let short = &key[..12];
    let work = fresh_work_dir(&cache, short)?;
    let mut progress = Progress {
        started: Instant::now(),
        step: 0,
        total: 8,
    };

    progress.step("Go components from the module proxy (first build: tens of minutes on 2 cores)");
    let bins = go_components(sh, &cache, pins, inputs)?;

    progress.step("checking kubeadm's image list against the pins");
    check_kubeadm(sh, pins, &bins)?;

    progress.step("Debian root filesystems (debootstrap, cached)");
    let node_packages = read_packages(&inputs.join("packages/node.txt"))?;
    let net_packages = read_packages(&inputs.join("packages/net.txt"))?;
    let node_base = rootfs::debootstrap(sh, &cache, "node", &pins.debian_suite, &node_packages)?;
    let net_base = rootfs::debootstrap(sh, &cache, "net", &pins.debian_suite, &net_packages)?;

    progress.step("control-plane and network images (docker import)");
    let mut images = component_images(sh, pins, &bins, &work)?;
    let network = network_images(sh, pins, &bins, &net_base, &work, short)?;
    images.push(network.kube_proxy);
    images.push(network.kindnet.clone());

    progress.step("node rootfs");
    let node_root = work.join("node-rootfs");
    rootfs::copy_tree(sh, &node_base, &node_root)?;
    node_tree(sh, pins, &bins, inputs, &node_root, &network.kindnet)?;
    let base_image = format!("cdsim/kind-node-base:{short}");
    import_tree(
        sh,
        &node_root,
        &work.join("node-base.tar"),
        &base_image,
        &[
            "ENV container=docker",
            r#"ENTRYPOINT ["/usr/local/bin/entrypoint","/sbin/init"]"#,
        ],
    )?;
    fs::remove_dir_all(&node_root).with_context(|| format!("removing {}", node_root.display()))?;

    progress.step("saving the images for the preload");
    let archive = work.join("images.tar");
    let to_save = &images;
    cmd!(sh, "docker save -o {archive} {to_save...}")
        .run()
        .context("docker save of the component images")?;

    progress.step("preloading them into the node's containerd and committing");
    preload_and_commit(sh, &base_image, &archive, &images, image, short)?;

    progress.step("cleaning up");
    let mut temporary = images;
    temporary.push(network.base);
    temporary.push(base_image);
    cmd!(sh, "docker rmi {temporary...}")
        .quiet()
        .ignore_stdout()
        .run()
        .context("removing the intermediate images")?;
    fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    eprintln!(
        "==> built {image} in {:.0}s",
        progress.started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `<cache>/work/<short>`, emptied of what an interrupted build left.
fn fresh_work_dir(cache: &Path, short: &str) -> Result<PathBuf> {
    let work = cache.join("work").join(short);
    if work.exists() {
        fs::remove_dir_all(&work)
            .with_context(|| format!("removing the stale work dir {}", work.display()))?;
    }
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    Ok(work)
}

/// The built kubeadm's image list must be the images the pins make.
fn check_kubeadm(sh: &Shell, pins: &NodePins, bins: &Binaries) -> Result<()> {
    let kubeadm = bins.kubernetes.join("kubeadm");
    let kube = pins.kubernetes.as_str();
    let list = cmd!(
        sh,
        "{kubeadm} config images list --kubernetes-version {kube}"
    )
    .read()
    .context("running the built kubeadm")?;
    pins::check_kubeadm_images(pins, &list)
}

/// The images on the network base: the base itself, kube-proxy, and kindnet
/// with the network policy daemon.
struct NetworkImages {
    base: String,
    kube_proxy: String,
    kindnet: String,
}

/// Imports the network base from `net_base` and layers kube-proxy and
/// kindnet (with netpol) on it.
fn network_images(
    sh: &Shell,
    pins: &NodePins,
    bins: &Binaries,
    net_base: &Path,
    work: &Path,
    short: &str,
) -> Result<NetworkImages> {
    let kindnet_image = format!(
        "docker.io/cdsim/kindnet:{}",
        pins.kubernetes.to_owned() + "-" + short
    );
    let net_image = format!("cdsim/kind-net-base:{short}");
    // Slimmed like the node rootfs: every node holds this base twice (its
    // layer in containerd's content store and unpacked for kube-proxy and the
    // pod network), so each megabyte here costs two per node.
    let net_root = work.join("net-rootfs");
    rootfs::copy_tree(sh, net_base, &net_root)?;
    rootfs::slim(&net_root)?;
    import_tree(sh, &net_root, &work.join("net-base.tar"), &net_image, &[])?;
    fs::remove_dir_all(&net_root).with_context(|| format!("removing {}", net_root.display()))?;
    let kube_proxy = format!(
        "registry.k8s.io/kube-proxy:{}",
        pins.kubernetes.replace('+', "_")
    );
    let kube_proxy_bin = bins.kubernetes.join("kube-proxy");
    layer_binaries(
        sh,
        &net_image,
        &[(&kube_proxy_bin, "/usr/local/bin/kube-proxy")],
        &kube_proxy,
        None,
    )?;
    let kindnet_bin = bins.kindnet.join("kindnet");
    layer_binaries(
        sh,
        &net_image,
        &[
            (&kindnet_bin, "/bin/kindnet"),
            (&bins.netpol, "/bin/netpol"),
        ],
        &kindnet_image,
        Some("/bin/kindnet"),
    )?;
    Ok(NetworkImages {
        base: net_image,
        kube_proxy,
        kindnet: kindnet_image,
    })
}

fn read_packages(path: &Path) -> Result<Vec<String>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    rootfs::parse_packages(&text).with_context(|| format!("{}", path.display()))
}

/// The images made from one static binary each; returns their names.
fn component_images(
    sh: &Shell,
    pins: &NodePins,
    bins: &Binaries,
    work: &Path,
) -> Result<Vec<String>> {
    let tag = pins.kubernetes.replace('+', "_");
    let mut specs: Vec<(String, PathBuf, String, Vec<String>)> = KUBE_STATIC
        .iter()
        .map(|name| {
            (
                format!("registry.k8s.io/{name}:{tag}"),
                bins.kubernetes.join(name),
                format!("usr/local/bin/{name}"),
                Vec::new(),
            )
        })
        .collect();
    specs.push((
        format!(
            "registry.k8s.io/etcd:{}-{}",
            pins.etcd.trim_start_matches('v'),
            pins.etcd_image_revision
        ),
        bins.etcd.clone(),
        "usr/local/bin/etcd".to_owned(),
        Vec::new(),
    ));
    // CoreDNS runs as root: kubeadm's Deployment grants NET_BIND_SERVICE and sets no user.
    specs.push((
        format!("registry.k8s.io/coredns/coredns:{}", pins.coredns),
        bins.coredns.clone(),
        "coredns".to_owned(),
        vec![r#"ENTRYPOINT ["/coredns"]"#.to_owned()],
    ));
    specs.push((
        pins.pause_image(),
        bins.pause.clone(),
        "pause".to_owned(),
        vec![
            r#"ENTRYPOINT ["/pause"]"#.to_owned(),
            "USER 65535:65535".to_owned(),
        ],
    ));
    let mut names = Vec::new();
    for (name, binary, dest, changes) in specs {
        let tree = work.join("trees").join(name.replace(['/', ':'], "_"));
        minimal_root(&tree)?;
        rootfs::install(&binary, &tree, &dest, 0o755)?;
        let tar = tree.with_extension("tar");
        let changes: Vec<&str> = changes.iter().map(String::as_str).collect();
        import_tree(sh, &tree, &tar, &name, &changes)?;
        names.push(name);
    }
    Ok(names)
}

/// An empty root with `/tmp` and the users static binaries may run as.
fn minimal_root(tree: &Path) -> Result<()> {
    rootfs::write(
        tree,
        "etc/passwd",
        b"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
        0o644,
    )?;
    rootfs::write(
        tree,
        "etc/group",
        b"root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
        0o644,
    )?;
    let tmp = tree.join("tmp");
    fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).context("chmod /tmp")?;
    Ok(())
}

/// `tar` a tree (numeric owners, xattrs) and `docker import` it as `name`.
fn import_tree(sh: &Shell, tree: &Path, tar: &Path, name: &str, changes: &[&str]) -> Result<()> {
    cmd!(
        sh,
        "tar --numeric-owner --xattrs --xattrs-include=* -C {tree} -cf {tar} ."
    )
    .run()
    .with_context(|| format!("archiving {}", tree.display()))?;
    let mut args: Vec<String> = Vec::new();
    args.push("ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned());
    args.extend(changes.iter().map(|c| (*c).to_owned()));
    let change_flags: Vec<String> = args
        .iter()
        .flat_map(|c| ["--change".to_owned(), c.clone()])
        .collect();
    cmd!(sh, "docker import {change_flags...} {tar} {name}")
        .quiet()
        .ignore_stdout()
        .run()
        .with_context(|| format!("docker import {name}"))?;
    fs::remove_file(tar).with_context(|| format!("removing {}", tar.display()))?;
    Ok(())
}

/// `name` = `base` plus `binaries` (host path, image path) in one layer.
fn layer_binaries(
    sh: &Shell,
    base: &str,
    binaries: &[(&Path, &str)],
    name: &str,
    cmd_path: Option<&str>,
) -> Result<()> {
    let container = format!("cdsim-layer-{}", std::process::id());
    remove_container(sh, &container);
    cmd!(sh, "docker create --name {container} {base} /bin/true")
        .quiet()
        .ignore_stdout()
        .run()
        .with_context(|| format!("docker create from {base}"))?;
    let result = (|| {
        for (binary, dest) in binaries {
            let target = format!("{container}:{dest}");
            cmd!(sh, "docker cp {binary} {target}")
                .run()
                .with_context(|| format!("docker cp into {name}"))?;
        }
        let cmd_change = match cmd_path {
            Some(path) => format!(r#"CMD ["{path}"]"#),
            None => "CMD []".to_owned(),
        };
        cmd!(sh, "docker commit --change {cmd_change} {container} {name}")
            .quiet()
            .ignore_stdout()
            .run()
            .with_context(|| format!("docker commit {name}"))
    })();
    remove_container(sh, &container);
    result
}

/// Removes the build container `container` if there is one (a leftover of an
/// interrupted run, or this run's own once done); best effort.
pub(crate) fn remove_container(sh: &Shell, container: &str) {
    let _ = cmd!(sh, "docker rm -f {container}")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run();
}

/// Turns the debootstrapped copy at `root` into a kind node tree.
fn node_tree(
    sh: &Shell,
    pins: &NodePins,
    bins: &Binaries,
    inputs: &Path,
    root: &Path,
    kindnet_image: &str,
) -> Result<()> {
    rootfs::prune_systemd(root)?;
    let pause = pins.pause_image();
    rootfs::overlay(&inputs.join("rootfs"), root, &[("@PAUSE_IMAGE@", &pause)])?;
    rootfs::enable_units(
        root,
        &[
            "containerd.service",
            "kubelet.service",
            "undo-mount-hacks.service",
        ],
        &["systemd-binfmt.service"],
    )?;
    for (src, relative) in node_binaries(bins) {
        rootfs::install(&src, root, &relative, 0o755)?;
    }
    rootfs::write(root, "kind/version", pins.kubernetes.as_bytes(), 0o644)?;
    let manifest = fs::read_to_string(inputs.join("kindnet/default-cni.yaml"))
        .context("reading default-cni.yaml")?;
    let manifest = manifest.replace("@KINDNET_IMAGE@", kindnet_image);
    rootfs::write(
        root,
        "kind/manifests/default-cni.yaml",
        manifest.as_bytes(),
        0o644,
    )?;
    let ctr = bins.containerd.join("ctr");
    let spec = cmd!(sh, "{ctr} oci spec").read().context("ctr oci spec")?;
    rootfs::write(
        root,
        "etc/containerd/cri-base.json",
        cri_base_spec(&spec)?.as_bytes(),
        0o644,
    )?;
    fs::create_dir_all(root.join("etc/kubernetes/manifests"))
        .context("creating /etc/kubernetes/manifests")?;
    rootfs::slim(root)
}

/// The node's Go binaries as (cached file, path in the node), in install order.
fn node_binaries(bins: &Binaries) -> Vec<(PathBuf, String)> {
    let from = |dir: &Path, names: &[&str], under: &str| -> Vec<(PathBuf, String)> {
        names
            .iter()
            .map(|name| (dir.join(name), format!("{under}/{name}")))
            .collect()
    };
    let mut all = from(
        &bins.containerd,
        &["containerd", "ctr", "containerd-shim-runc-v2"],
        "usr/local/bin",
    );
    all.push((bins.crictl.clone(), "usr/local/bin/crictl".to_owned()));
    all.push((bins.runc.clone(), "usr/local/sbin/runc".to_owned()));
    all.extend(from(
        &bins.cni,
        &["ptp", "host-local", "loopback", "portmap"],
        "opt/cni/bin",
    ));
    all.extend(from(
        &bins.kubernetes,
        &["kubeadm", "kubelet", "kubectl"],
        "usr/bin",
    ));
    all
}

/// containerd's default OCI spec without `process.rlimits`, so pods inherit
/// containerd's limits (kind's `cri-base.json`).
pub fn cri_base_spec(spec: &str) -> Result<String> {
    let mut value: serde_json::Value =
        serde_json::from_str(spec).context("ctr oci spec printed invalid JSON")?;
    let Some(process) = value
        .get_mut("process")
        .and_then(serde_json::Value::as_object_mut)
    else {
        bail!("ctr oci spec has no process object");
    };
    process.remove("rlimits");
    serde_json::to_string_pretty(&value).context("serializing cri-base.json")
}

/// Starts containerd inside a build container of `base`, imports `archive`
/// into its k8s.io namespace (pinned, not unpacked), checks every image is
/// there, stops containerd cleanly and commits the container as `image`.
fn preload_and_commit(
    sh: &Shell,
    base: &str,
    archive: &Path,
    images: &[String],
    image: &str,
    short: &str,
) -> Result<()> {
    let container = format!("cdsim-node-build-{short}");
    remove_container(sh, &container);
    cmd!(sh, "docker run -d --name {container} --entrypoint sleep --security-opt seccomp=unconfined {base} infinity")
        .quiet()
        .ignore_stdout()
        .run()
        .context("starting the build container")?;
    let result = preload(sh, &container, archive, images, image);
    remove_container(sh, &container);
    result
}

/// In the running build container: imports `archive` into containerd's
/// k8s.io namespace, checks every image is there, stops containerd and
/// commits the container as `image`.
fn preload(
    sh: &Shell,
    container: &str,
    archive: &Path,
    images: &[String],
    image: &str,
) -> Result<()> {
    let target = format!("{container}:/kind/images.tar");
    cmd!(sh, "docker cp {archive} {target}")
        .run()
        .context("copying the image archive in")?;
    start_containerd(sh, container)?;
    // --compress-blobs: `docker save` writes uncompressed layers; gzipped in
    // the content store they take about 37 % of the space, and every node
    // copies that store into its `/var` volume (BENCHMARKS.md "The cost of a
    // tray"). Unpacking them at run time costs a decompression.
    cmd!(
        sh,
        "docker exec {container} ctr -n k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests --compress-blobs /kind/images.tar"
    )
    // Its progress table repeats once per image without a terminal; the
    // check below names anything missing.
    .quiet()
    .ignore_stdout()
    .run()
    .context("ctr images import")?;
    let listed = cmd!(sh, "docker exec {container} ctr -n k8s.io images ls -q")
        .read()
        .context("ctr images ls")?;
    missing_images(images, &listed).map_or(Ok(()), |missing| {
        Err(format_err!(
            "the preload lacks {}: ctr import did not take them",
            missing.join(", ")
        ))
    })?;
    cmd!(sh, "docker exec {container} rm /kind/images.tar")
        .run()
        .context("removing the archive")?;
    stop_containerd_and_commit(sh, container, image)
}

/// Starts containerd in the running build container and waits until it answers.
pub(crate) fn start_containerd(sh: &Shell, container: &str) -> Result<()> {
    cmd!(sh, "docker exec -d {container} containerd")
        .run()
        .context("starting containerd in the build container")?;
    wait_for(
        Duration::from_secs(30),
        "containerd in the build container",
        || {
            cmd!(sh, "docker exec {container} ctr version")
                .quiet()
                .ignore_stdout()
                .ignore_stderr()
                .run()
                .is_ok()
        },
    )
}

/// Stops the build container's containerd cleanly and commits the
/// container as the node image `image` (kind's entrypoint, no command).
pub(crate) fn stop_containerd_and_commit(sh: &Shell, container: &str, image: &str) -> Result<()> {
    cmd!(sh, "docker exec {container} pkill -x containerd")
        .run()
        .context("stopping containerd")?;
    wait_for(Duration::from_secs(30), "containerd to exit", || {
        cmd!(sh, "docker exec {container} pgrep -x containerd")
            .quiet()
            .ignore_stdout()
            .run()
            .is_err()
    })?;
    cmd!(
        sh,
        "docker commit --change 'ENTRYPOINT [\"/usr/local/bin/entrypoint\",\"/sbin/init\"]' --change 'CMD []' {container} {image}"
    )
    .quiet()
    .ignore_stdout()
    .run()
    .with_context(|| format!("docker commit of the node image {image}"))
}

/// The `wanted` images absent from `ctr images ls -q` output (short Docker Hub
/// names normalised as containerd does), or `None` when all are there.
pub fn missing_images(wanted: &[String], listed: &str) -> Option<Vec<String>> {
    let have: Vec<&str> = listed.lines().map(str::trim).collect();
    let missing: Vec<String> = wanted
        .iter()
        .filter(|name| {
            let full = xtask_support::image_ref::containerd_name(name);
            !have.iter().any(|listed| *listed == full)
        })
        .cloned()
        .collect();
    (!missing.is_empty()).then_some(missing)
}

fn wait_for(limit: Duration, what: &str, mut ready: impl FnMut() -> bool) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if ready() {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(300));
    }
    bail!("timed out after {}s waiting for {what}", limit.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_binaries_are_installed_where_kind_puts_them() {
        let at = |name: &str| PathBuf::from(format!("/c/{name}"));
        let bins = Binaries {
            kubernetes: at("kube"),
            containerd: at("containerd"),
            runc: at("runc/runc"),
            cni: at("cni"),
            crictl: at("crictl/crictl"),
            etcd: at("etcd"),
            coredns: at("coredns"),
            kindnet: at("kindnet"),
            netpol: at("netpol"),
            pause: at("pause"),
        };
        let all = node_binaries(&bins);
        let placed: Vec<&str> = all.iter().map(|(_, relative)| relative.as_str()).collect();
        assert_eq!(
            placed,
            [
                "usr/local/bin/containerd",
                "usr/local/bin/ctr",
                "usr/local/bin/containerd-shim-runc-v2",
                "usr/local/bin/crictl",
                "usr/local/sbin/runc",
                "opt/cni/bin/ptp",
                "opt/cni/bin/host-local",
                "opt/cni/bin/loopback",
                "opt/cni/bin/portmap",
                "usr/bin/kubeadm",
                "usr/bin/kubelet",
                "usr/bin/kubectl",
            ]
        );
        assert_eq!(all[1].0, Path::new("/c/containerd/ctr"));
        assert_eq!(all[3].0, Path::new("/c/crictl/crictl"));
        assert_eq!(all[4].0, Path::new("/c/runc/runc"));
        assert_eq!(all[6].0, Path::new("/c/cni/host-local"));
        assert_eq!(all[11].0, Path::new("/c/kube/kubectl"));
    }

    #[test]
    fn rlimits_are_dropped_and_the_rest_kept() {
        let spec = r#"{"ociVersion":"1.1.0","process":{"cwd":"/","rlimits":[{"type":"RLIMIT_NOFILE","hard":1024,"soft":1024}]},"root":{"path":"rootfs"}}"#;
        let out: serde_json::Value =
            serde_json::from_str(&cri_base_spec(spec).expect("valid")).expect("json");
        assert!(out["process"].get("rlimits").is_none());
        assert_eq!(out["process"]["cwd"], "/");
        assert_eq!(out["root"]["path"], "rootfs");
        assert!(cri_base_spec(r#"{"root":{}}"#).is_err());
    }

    #[test]
    fn preload_check_normalises_docker_hub_names() {
        let listed = "registry.k8s.io/pause:3.10.1\ndocker.io/cdsim/kindnet:v1-abc\ndocker.io/library/busybox:1\n";
        let wanted = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            missing_images(
                &wanted(&[
                    "registry.k8s.io/pause:3.10.1",
                    "cdsim/kindnet:v1-abc",
                    "busybox:1"
                ]),
                listed
            ),
            None
        );
        assert_eq!(
            missing_images(
                &wanted(&[
                    "registry.k8s.io/etcd:3.6.5-0",
                    "docker.io/cdsim/kindnet:v1-abc"
                ]),
                listed
            ),
            Some(wanted(&["registry.k8s.io/etcd:3.6.5-0"]))
        );
    }
}
