//! The worker variant of the node image: the full image without the images
//! only a control plane runs ([`NodePins::control_plane_only_images`]).
//!
//! Each kind node's `/var` is a volume that docker fills with a copy of the
//! image's `/var` when the node is created, so every image preloaded into
//! containerd costs its size once per node. The control-plane images were
//! 281 MiB of the 745 MiB content store (uncompressed; gzipped since recipe
//! 3, 88 of 196 MB); a worker never runs them. The variant
//! is derived from the full image (no rebuild): containerd is started in a
//! container of it, those images are removed (every reference to their
//! manifests, so containerd's garbage collector drops their blobs), and the
//! container is committed. The removed blobs become whiteouts in one small
//! layer, so the volume copy lacks them.

use anyhow::{bail, format_err, Context, Result};
use xshell::{cmd, Shell};

use crate::build::{
    missing_images, remove_container, start_containerd, stop_containerd_and_commit,
};
use crate::pins::NodePins;

/// Derives `worker` from the full node image `full`.
pub fn derive(sh: &Shell, pins: &NodePins, full: &str, worker: &str) -> Result<()> {
    let container = format!("cdsim-node-worker-{}", std::process::id());
    remove_container(sh, &container);
    cmd!(sh, "docker run -d --name {container} --entrypoint sleep --security-opt seccomp=unconfined {full} infinity")
        .quiet()
        .ignore_stdout()
        .run()
        .context("starting the worker build container")?;
    let result = strip_and_commit(sh, pins, &container, worker);
    remove_container(sh, &container);
    result
}

/// In the running container: removes the control-plane images, checks the
/// worker's images are all still there, commits the container as `worker`.
fn strip_and_commit(sh: &Shell, pins: &NodePins, container: &str, worker: &str) -> Result<()> {
    start_containerd(sh, container)?;
    let listed = cmd!(sh, "docker exec {container} ctr -n k8s.io images ls")
        .read()
        .context("ctr images ls")?;
    let dropped = pins.control_plane_only_images();
    let refs = refs_to_remove(&listed, &dropped)?;
    // --sync: containerd's garbage collection has removed the blobs on return.
    cmd!(
        sh,
        "docker exec {container} ctr -n k8s.io images rm --sync {refs...}"
    )
    .quiet()
    .ignore_stdout()
    .run()
    .context("ctr images rm of the control-plane images")?;
    let left = cmd!(sh, "docker exec {container} ctr -n k8s.io images ls -q")
        .read()
        .context("ctr images ls")?;
    let kept = kept_images(pins, &dropped);
    if let Some(missing) = missing_images(&kept, &left) {
        bail!(
            "the worker image lost {}: only the control-plane images may go",
            missing.join(", ")
        );
    }
    stop_containerd_and_commit(sh, container, worker)
}

/// The images a worker keeps: every preloaded image kubeadm names but the
/// dropped ones (the pod network's image is checked by the full build).
fn kept_images(pins: &NodePins, dropped: &[String]) -> Vec<String> {
    pins.control_plane_images()
        .into_iter()
        .filter(|it| !dropped.contains(it))
        .collect()
}

/// Every reference in `ctr images ls` output (`REF TYPE DIGEST SIZE …`)
/// whose manifest digest is one of the `dropped` images': the names and the
/// `sha256:` references `ctr import --digests` adds beside them. Fails
/// naming a dropped image that is not listed.
pub fn refs_to_remove(listed: &str, dropped: &[String]) -> Result<Vec<String>> {
    let rows: Vec<(&str, &str)> = listed
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let reference = words.next()?;
            let digest = words.nth(1)?;
            (reference != "REF").then_some((reference, digest))
        })
        .collect();
    let mut digests = Vec::new();
    for image in dropped {
        let name = xtask_support::image_ref::containerd_name(image);
        let (_, digest) = rows
            .iter()
            .find(|(reference, _)| *reference == name)
            .ok_or_else(|| {
                format_err!("the full node image lacks {name}: cannot derive the worker image")
            })?;
        digests.push(*digest);
    }
    Ok(rows
        .iter()
        .filter(|(_, digest)| digests.contains(digest))
        .map(|(reference, _)| (*reference).to_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ctr -n k8s.io images ls` in the full image (abridged: two images).
    const LISTED: &str = "\
REF                                       TYPE                                                 DIGEST                                                                  SIZE      PLATFORMS   LABELS
registry.k8s.io/etcd:3.6.5-0              application/vnd.docker.distribution.manifest.v2+json sha256:51d19d8b1970b0f84f64d3982ff9c2cd99f39e701de8fd30fb11d888fb21be16 25.3 MiB  linux/amd64 io.cri-containerd.pinned=pinned
registry.k8s.io/kube-proxy:v1.34.3        application/vnd.docker.distribution.manifest.v2+json sha256:bfcbd9991a02e864a2e3c3b00698ec74442dd13678a7ded129ac1f8f6a651bde 294.3 MiB linux/amd64 io.cri-containerd.pinned=pinned
sha256:2ff10721e70d5656e7c4a312e9a20be9cfb437f1a323feb5e39d7c5dd2aa1248 application/vnd.docker.distribution.manifest.v2+json sha256:51d19d8b1970b0f84f64d3982ff9c2cd99f39e701de8fd30fb11d888fb21be16 25.3 MiB linux/amd64 io.cri-containerd.pinned=pinned
sha256:8b344e28395c9623e8fd8583bfc5432d608ff2271261cda875e7b3563c2c2238 application/vnd.docker.distribution.manifest.v2+json sha256:bfcbd9991a02e864a2e3c3b00698ec74442dd13678a7ded129ac1f8f6a651bde 294.3 MiB linux/amd64 io.cri-containerd.pinned=pinned
";

    #[test]
    fn a_dropped_image_goes_with_its_digest_reference_and_nothing_else() {
        let refs =
            refs_to_remove(LISTED, &["registry.k8s.io/etcd:3.6.5-0".to_owned()]).expect("listed");
        assert_eq!(
            refs,
            [
                "registry.k8s.io/etcd:3.6.5-0",
                "sha256:2ff10721e70d5656e7c4a312e9a20be9cfb437f1a323feb5e39d7c5dd2aa1248",
            ]
        );
    }

    #[test]
    fn a_dropped_image_the_full_image_lacks_is_named() {
        let err = refs_to_remove(
            LISTED,
            &["registry.k8s.io/kube-scheduler:v1.34.3".to_owned()],
        )
        .expect_err("not listed")
        .to_string();
        assert!(
            err.contains("lacks registry.k8s.io/kube-scheduler:v1.34.3"),
            "{err}"
        );
    }

    /// The images preloaded in `image`, listed by its own containerd.
    fn preloaded(sh: &Shell, image: &str) -> String {
        let container = format!("cdsim-node-list-{}", std::process::id());
        remove_container(sh, &container);
        cmd!(sh, "docker run -d --name {container} --entrypoint sleep --security-opt seccomp=unconfined {image} infinity")
            .quiet()
            .ignore_stdout()
            .run()
            .unwrap_or_else(|err| panic!("{image} missing: run `cargo xtask node-image` ({err})"));
        let listed = start_containerd(sh, &container).and_then(|()| {
            cmd!(sh, "docker exec {container} ctr -n k8s.io images ls -q")
                .read()
                .context("ctr images ls")
        });
        remove_container(sh, &container);
        listed.expect("listed")
    }

    #[test]
    #[ignore = "needs docker and the built node images (`cargo xtask node-image`)"]
    fn the_built_worker_image_lacks_only_the_control_plane_images() {
        let sh = Shell::new().expect("shell");
        let refs = crate::node_image_refs().expect("refs");
        let versions = xtask_support::tools::read_versions().expect("pins");
        let pins = NodePins::from_versions(&versions).expect("valid");
        let full = preloaded(&sh, &refs.control_plane);
        let worker = preloaded(&sh, &refs.worker);
        assert_eq!(missing_images(&pins.control_plane_images(), &full), None);
        let dropped = pins.control_plane_only_images();
        assert_eq!(missing_images(&kept_images(&pins, &dropped), &worker), None);
        for image in &dropped {
            let name = xtask_support::image_ref::containerd_name(image);
            assert!(
                !worker.lines().any(|it| it.trim() == name),
                "{name} in the worker image"
            );
        }
        let kindnet = full
            .lines()
            .find(|it| it.contains("/kindnet:"))
            .expect("the pod network's image");
        assert!(worker.contains(kindnet), "the worker lacks {kindnet}");
        assert_eq!(
            worker.lines().count() + 2 * dropped.len(),
            full.lines().count(),
            "each dropped image goes with its sha256: reference, nothing else:\n{worker}"
        );
    }

    #[test]
    fn workers_keep_every_image_but_the_control_planes() {
        let versions = xtask_support::tools::read_versions().expect("pins");
        let pins = NodePins::from_versions(&versions).expect("valid");
        let kept = kept_images(&pins, &pins.control_plane_only_images());
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(kept.contains(&pins.pause_image()));
        assert!(kept.iter().any(|it| it.contains("/kube-proxy:")));
        assert!(kept.iter().any(|it| it.contains("/coredns:")));
    }
}
