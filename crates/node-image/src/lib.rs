//! `cargo xtask node-image`: the offline kind node image, built from pinned sources.
//!
//! No registry and no GitHub: a debootstrapped Debian rootfs, containerd, runc,
//! CNI plugins, crictl, the Kubernetes binaries, etcd and CoreDNS from the Go
//! module proxy, pause from the Kubernetes module's `pause.c`, our own pod
//! network daemon (`manifests/node-image/kindnet`), every control-plane image
//! preloaded into the node's containerd under the names kubeadm expects.
//!
//! The result is tagged `cdsim/kind-node:<kubernetes>-<12 hex>`, the hex being
//! the cache key over the `[node]` pins, the files under `manifests/node-image`
//! and the recipe version; an existing tag is reused without building.
//! Its worker variant (`worker.rs`: the same image without the control-plane
//! images, `…-<12 hex>-worker`) is derived from it the same way, for kind
//! configs that give workers their own `image:` ([`ensure_node_images`]).
//!
//! What the host provides stays with xtask, which drives this crate: the
//! Docker engine is made usable before [`ensure_node_image`] or [`run`] is
//! called (`tools::ensure_engine`), and the smoke checks are handed the kind
//! binary xtask found or installed.

mod build;
mod go;
mod gomod;
mod pins;
mod rootfs;
mod smoke;
mod worker;

use std::{fs, path::PathBuf};

use anyhow::{Context, Result};
use xshell::{cmd, Shell};

use xtask_support::{node_images::NodeImages, tools};

pub use smoke::{network_policy_enforced, smoke_check};

/// `cargo xtask node-image`: builds (or reuses, unless `rebuild`) the node
/// image and prints its reference on stdout. The engine must answer.
pub fn run(sh: &Shell, rebuild: bool) -> Result<()> {
    let images = ensure_node_images(sh, rebuild)?;
    eprintln!(
        "==> workers may run {} (no control-plane images, so less disk per node; \
         give it as the workers' `image:` in a kind config)",
        images.worker
    );
    println!("{}", images.control_plane);
    Ok(())
}

/// The node image for the current pins and files: reused when docker already
/// has the tag (unless `rebuild`), built otherwise. Returns the image ref.
/// The engine must answer (xtask makes it usable first).
pub fn ensure_node_image(sh: &Shell, rebuild: bool) -> Result<String> {
    let (pins, key) = pins_and_key()?;
    ensure_full(sh, &pins, &key, rebuild)
}

/// The full node image ([`ensure_node_image`]) for the control plane and its
/// worker variant for the workers, each reused when docker has its tag.
pub fn ensure_node_images(sh: &Shell, rebuild: bool) -> Result<NodeImages> {
    let (pins, key) = pins_and_key()?;
    let control_plane = ensure_full(sh, &pins, &key, rebuild)?;
    let worker = pins::worker_image_ref(&pins, &key);
    if rebuild || !image_exists(sh, &worker) {
        let _lock = lock_builds()?;
        if rebuild || !image_exists(sh, &worker) {
            eprintln!(
                "==> deriving the worker node image {worker} (without the control-plane images)"
            );
            worker::derive(sh, &pins, &control_plane, &worker)?;
            // Only after a build, as for the full image: a reused pair leaves
            // every other tag alone.
            prune_old_images(sh, &[&control_plane, &worker]);
        }
    }
    Ok(NodeImages {
        control_plane,
        worker,
    })
}

/// The refs of the node image pair for the current pins and files, built or not.
pub fn node_image_refs() -> Result<NodeImages> {
    let (pins, key) = pins_and_key()?;
    Ok(NodeImages {
        control_plane: pins::node_image_ref(&pins, &key),
        worker: pins::worker_image_ref(&pins, &key),
    })
}

/// The pins and the cache key over them and the input files.
fn pins_and_key() -> Result<(pins::NodePins, String)> {
    let versions = tools::read_versions()?;
    let pins = pins::NodePins::from_versions(&versions)?;
    let files = input_files(&inputs_dir())?;
    let key = pins::cache_key(&pins, &files);
    Ok((pins, key))
}

/// The full node image for `key`: reused or built.
fn ensure_full(sh: &Shell, pins: &pins::NodePins, key: &str, rebuild: bool) -> Result<String> {
    let inputs = inputs_dir();
    let image = pins::node_image_ref(pins, key);
    if !rebuild && image_exists(sh, &image) {
        eprintln!(
            "==> reusing node image {image} (cached by pins and files; --rebuild to build again)"
        );
        return Ok(image);
    }
    let _lock = lock_builds()?;
    if !rebuild && image_exists(sh, &image) {
        eprintln!("==> reusing node image {image} (another run just built it)");
        return Ok(image);
    }
    eprintln!("==> building node image {image}");
    build::build(sh, pins, key, &image, &inputs)?;
    prune_old_images(sh, &[&image, &pins::worker_image_ref(pins, key)]);
    Ok(image)
}

/// `manifests/node-image`: the static inputs of the image.
fn inputs_dir() -> PathBuf {
    xtask_support::project_root().join("manifests/node-image")
}

/// Every file under the inputs directory, for the cache key.
fn input_files(dir: &std::path::Path) -> Result<Vec<pins::InputFile>> {
    rootfs::walk_files(dir)?
        .into_iter()
        .map(|(path, executable)| {
            let contents = fs::read(dir.join(&path)).with_context(|| format!("reading {path}"))?;
            Ok(pins::InputFile {
                path,
                executable,
                contents,
            })
        })
        .collect()
}

/// One node image build per machine at a time: a second run waits here
/// (they share the cache, the work directory and the build container name).
fn lock_builds() -> Result<fs::File> {
    let dir = xtask_support::dirs::ensure(&xtask_support::dirs::cache_dir()?)?;
    tools::lock_file(&dir.join("node-image.lock"))
}

/// Removes other `cdsim/kind-node` tags than `keep` (each is over a
/// gigabyte); images a container still uses stay, since docker refuses to
/// remove them.
fn prune_old_images(sh: &Shell, keep: &[&str]) {
    let repo = pins::NODE_IMAGE_REPO;
    let Ok(listed) = cmd!(
        sh,
        "docker images {repo} --format '{{.Repository}}:{{.Tag}}'"
    )
    .quiet()
    .read() else {
        return;
    };
    for old in listed
        .lines()
        .map(str::trim)
        .filter(|name| !name.is_empty() && !keep.contains(name))
    {
        if cmd!(sh, "docker rmi {old}")
            .quiet()
            .ignore_stdout()
            .ignore_stderr()
            .run()
            .is_ok()
        {
            eprintln!("    removed the superseded node image {old}");
        }
    }
}

fn image_exists(sh: &Shell, image: &str) -> bool {
    cmd!(sh, "docker image inspect --format '{{.Id}}' {image}")
        .quiet()
        .ignore_stdout()
        .ignore_stderr()
        .run()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inputs_hash_to_a_stable_key() {
        let versions = tools::read_versions().expect("pins parse");
        let pins = pins::NodePins::from_versions(&versions).expect("valid");
        let files = input_files(&inputs_dir()).expect("inputs readable");
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        for required in [
            "rootfs/usr/local/bin/entrypoint",
            "rootfs/etc/containerd/config.toml",
            "kindnet/default-cni.yaml",
            "packages/node.txt",
        ] {
            assert!(
                paths.contains(&required),
                "{required} missing from {paths:?}"
            );
        }
        let entrypoint = files
            .iter()
            .find(|f| f.path == "rootfs/usr/local/bin/entrypoint")
            .expect("present");
        assert!(entrypoint.executable, "the entrypoint must stay executable");
        assert_eq!(
            pins::cache_key(&pins, &files),
            pins::cache_key(&pins, &files)
        );
    }

    #[test]
    fn the_containerd_config_enables_nri_on_the_expected_socket() {
        let config = fs::read_to_string(inputs_dir().join("rootfs/etc/containerd/config.toml"))
            .expect("readable");
        let table: toml::Table = config.parse().expect("valid TOML");
        let plugins = &table["plugins"];
        assert_eq!(
            plugins["io.containerd.nri.v1.nri"]["disable"].as_bool(),
            Some(false)
        );
        assert_eq!(
            plugins["io.containerd.nri.v1.nri"]["socket_path"].as_str(),
            Some(smoke::NRI_SOCKET)
        );
        assert_eq!(
            plugins["io.containerd.grpc.v1.cri"]["sandbox_image"].as_str(),
            Some("@PAUSE_IMAGE@")
        );
    }

    #[test]
    fn the_cluster_config_is_one_control_plane_and_four_labelled_workers() {
        let path = xtask_support::project_root().join("manifests/kind/cluster.yaml");
        let text = fs::read_to_string(path).expect("readable");
        let config: serde_yaml::Value = serde_yaml::from_str(&text).expect("valid YAML");
        let nodes = config["nodes"].as_sequence().expect("nodes");
        let roles: Vec<&str> = nodes
            .iter()
            .map(|n| n["role"].as_str().expect("role"))
            .collect();
        assert_eq!(
            roles,
            ["control-plane", "worker", "worker", "worker", "worker"]
        );
        let cliques: Vec<&str> = nodes[1..]
            .iter()
            .map(|n| n["labels"]["nvml-mock/clique"].as_str().expect("label"))
            .collect();
        assert_eq!(cliques, ["0", "0", "1", "1"]);
        let patch = config["containerdConfigPatches"][0]
            .as_str()
            .expect("patch");
        let patch: toml::Table = patch.parse().expect("the patch is TOML");
        assert_eq!(
            patch["plugins"]["io.containerd.nri.v1.nri"]["disable"].as_bool(),
            Some(false)
        );
        assert_eq!(
            patch["plugins"]["io.containerd.nri.v1.nri"]["socket_path"].as_str(),
            Some(smoke::NRI_SOCKET)
        );
        assert_eq!(
            patch["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"].as_bool(),
            Some(true)
        );
    }
}
